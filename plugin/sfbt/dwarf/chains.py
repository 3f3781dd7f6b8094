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


def _segments(segments, value_type):
    """The segments [start, end, value] of a list that may come from a
    cache file: those whose bounds are ints; the value (its calls'
    shapes) is checked when a look-up finds it."""
    if not isinstance(segments, list):
        return []
    return [s for s in segments
            if type(s) is list and len(s) == 3 and type(s[0]) is int and type(s[1]) is int
            and isinstance(s[2], value_type)]


def _well_formed_call(call):
    return (type(call) is list and len(call) == 3 and isinstance(call[0], str)
            and isinstance(call[1], (str, type(None))) and type(call[2]) is int)


class UnitLookup:
    """Look-ups in one unit's UnitFrames."""

    def __init__(self, frames):
        # segments may come from a cache file: malformed ones are dropped,
        # a segment's chain is checked when a look-up finds it (a unit of a
        # big C++ program has tens of thousands; a look-up wants one)
        self.calls = _segments(frames.calls, list)
        self.call_starts = [segment[0] for segment in self.calls]
        self.functions = _segments(frames.functions, str)
        self.function_starts = [segment[0] for segment in self.functions]

    def chain(self, address):
        """[InlinedCall] around the address, innermost first (none where
        the segment found is malformed)."""
        i = bisect_right(self.call_starts, address) - 1
        if i < 0 or address >= self.calls[i][1]:
            return []
        calls = self.calls[i][2]
        if not all(_well_formed_call(call) for call in calls):
            return []
        return [InlinedCall(*call) for call in calls]

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
