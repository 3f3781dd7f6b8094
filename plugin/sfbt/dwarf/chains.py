"""Inline chains as sfbt keeps them (its cache holds each unit's
segments, sfbt.dwarf.inline reads them from DWARF): the calls inlined
around an address, found by one bisection, and the frames they make, for
the frames that need no DWARF read."""

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


def _well_formed(segment):
    return (isinstance(segment, list) and len(segment) == 3
            and all(isinstance(b, int) for b in segment[:2])
            and isinstance(segment[2], list)
            and all(isinstance(c, list) and len(c) == 3 and isinstance(c[0], str)
                    and isinstance(c[1], (str, type(None))) and isinstance(c[2], int)
                    for c in segment[2]))


class UnitCalls:
    """Look-ups in one unit's segments (unit_calls)."""

    def __init__(self, segments):
        # segments may come from a cache file: malformed ones are dropped
        self.segments = [s for s in segments if _well_formed(s)]
        self.starts = [segment[0] for segment in self.segments]

    def chain(self, address):
        """[InlinedCall] around the address, innermost first."""
        i = bisect_right(self.starts, address) - 1
        if i < 0 or address >= self.segments[i][1]:
            return []
        return [InlinedCall(*call) for call in self.segments[i][2]]


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
