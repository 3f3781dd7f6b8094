"""Inline chains and functions as sfbt keeps them (its cache holds each
unit's segments, sfbt.dwarf.inline reads them from DWARF): the calls
inlined around an address and the function whose code holds it, found by
one bisection, and the frames they make, for the frames that need no
DWARF read."""

from __future__ import annotations

from bisect import bisect_right

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from ..values import NamedTuple


class InlinedCall(NamedTuple):
    """One inlined call: ``name`` is the inlined function; ``file`` and
    ``line`` are where it was called from, the place the next outer frame
    shows (file None when the unit does not say)."""

    name: str
    file: object
    line: int


class UnitFrames(NamedTuple):
    """What one unit's entries say of its addresses, JSON-ready (to be
    kept in a cache): ``calls``, sorted segments [start, end, chain] of
    the calls inlined there, chain a list of [name, file, line] innermost
    first; ``functions``, sorted segments [start, end, name] of the
    function whose code holds them."""

    calls: list
    functions: list


def _well_formed(segment):
    return (isinstance(segment, list) and len(segment) == 3
            and all(isinstance(b, int) for b in segment[:2])
            and isinstance(segment[2], list)
            and all(isinstance(c, list) and len(c) == 3 and isinstance(c[0], str)
                    and isinstance(c[1], (str, type(None))) and isinstance(c[2], int)
                    for c in segment[2]))


def _well_formed_function(segment):
    return (isinstance(segment, list) and len(segment) == 3
            and all(isinstance(b, int) for b in segment[:2]) and isinstance(segment[2], str))


class UnitLookup:
    """Look-ups in one unit's UnitFrames."""

    def __init__(self, frames):
        # segments may come from a cache file: malformed ones are dropped
        self.calls = [s for s in frames.calls if _well_formed(s)]
        self.call_starts = [segment[0] for segment in self.calls]
        self.functions = [s for s in frames.functions if _well_formed_function(s)]
        self.function_starts = [segment[0] for segment in self.functions]

    def chain(self, address):
        """[InlinedCall] around the address, innermost first."""
        i = bisect_right(self.call_starts, address) - 1
        if i < 0 or address >= self.calls[i][1]:
            return []
        return [InlinedCall(*call) for call in self.calls[i][2]]

    def function(self, address):
        """The name of the function whose code holds the address, or None."""
        i = bisect_right(self.function_starts, address) - 1
        if i < 0 or address >= self.functions[i][1]:
            return None
        return self.functions[i][2]


def expanded(calls, function, line):
    """[(name, (file, line) or None)] of the frames at one address,
    innermost first: each inlined call's function (``calls``, innermost
    first) at the place inside it (the line table's ``line`` for the
    innermost), then ``function`` at the outermost call's site."""
    frames = []
    for call in calls:
        frames.append((call.name, line))
        line = (call.file, call.line) if call.file is not None else None
    frames.append((function, line))
    return frames
