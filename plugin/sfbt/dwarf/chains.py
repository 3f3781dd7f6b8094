"""Inline chains and functions as sfbt keeps them (its cache holds each
unit's segments, sfbt.dwarf.inline reads them from DWARF): the calls
inlined around an address and the function whose code holds it, found by
one bisection, and the frames they make, for the frames that need no
DWARF read."""

from __future__ import annotations

from bisect import bisect_right

from ..frame_name import FrameName

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
    """What one unit's entries say of its addresses (UnitLookup.of packs
    it for look-ups and the cache): ``calls``, sorted segments [start, end, chain] of
    the calls inlined there, chain a list of [name, file, line] innermost
    first; ``functions``, sorted segments [start, end, name] of the
    function whose code holds them."""

    calls: list
    functions: list


def _segments(segments):
    """The segments [start, end, index] of a list that may come from a
    cache file: those made of ints (what an index points at is checked
    when a look-up finds it)."""
    if type(segments) is not list:
        return []
    return [s for s in segments
            if type(s) is list and len(s) == 3 and type(s[0]) is int and type(s[1]) is int
            and type(s[2]) is int]


def _line(value):
    if type(value) is not int:
        raise ValueError("malformed inline chain")
    return value


class UnitLookup:
    """Look-ups in one unit's inline chains and functions, kept packed as
    sfbt's cache holds them (``packed()``): each name and file once in
    ``strings``, each distinct chain once in ``chains`` (a flat list of
    [name, file or -1, line] triples of indexes into ``strings``,
    innermost call first); ``calls``, sorted segments [start, end, chain
    index]; ``functions``, sorted segments [start, end, name index].  The
    cache's entry of a big C++ unit is a tenth of the UnitFrames' JSON,
    and what an index points at is checked when a look-up finds it."""

    def __init__(self, strings, chains, calls, functions):
        # from a cache file: what is malformed is dropped, or found so
        # by the look-up that reaches it
        self.strings = strings if type(strings) is list else []
        self.chains = chains if type(chains) is list else []
        self.calls = _segments(calls)
        self.call_starts = [segment[0] for segment in self.calls]
        self.functions = _segments(functions)
        self.function_starts = [segment[0] for segment in self.functions]

    @classmethod
    def of(cls, frames):
        """The look-up of a UnitFrames (sfbt.dwarf.inline.unit_frames)."""
        strings, indexes, chains, chain_indexes = [], {}, [], {}

        def index(text):
            found = indexes.get(text)
            if found is None:
                found = indexes[text] = len(strings)
                strings.append(text)
            return found
        calls = []
        for start, end, chain in frames.calls:
            flat = tuple(n for name, file, line in chain
                         for n in (index(name), -1 if file is None else index(file), line))
            found = chain_indexes.get(flat)
            if found is None:
                found = chain_indexes[flat] = len(chains)
                chains.append(list(flat))
            calls.append([start, end, found])
        functions = [[start, end, index(name)] for start, end, name in frames.functions]
        return cls(strings, chains, calls, functions)

    @classmethod
    def from_packed(cls, rows):
        """The look-up packed() made ``rows``, or None when they are not
        four lists."""
        if type(rows) is not list or len(rows) != 4 \
                or not all(type(row) is list for row in rows):
            return None
        return cls(*rows)

    def packed(self):
        """[strings, chains, calls, functions], JSON-ready."""
        return [self.strings, self.chains, self.calls, self.functions]

    def _string(self, index):
        if type(index) is not int or not 0 <= index < len(self.strings) \
                or type(self.strings[index]) is not str:
            raise ValueError("malformed inline chain")
        return self.strings[index]

    def chain(self, address):
        """[InlinedCall] around the address, innermost first (none where
        what the segment found points at is malformed)."""
        i = bisect_right(self.call_starts, address) - 1
        if i < 0 or address >= self.calls[i][1]:
            return []
        index = self.calls[i][2]
        flat = self.chains[index] if 0 <= index < len(self.chains) else None
        if type(flat) is not list or len(flat) % 3:
            return []
        try:
            return [InlinedCall(self._string(flat[n]),
                                None if flat[n + 1] == -1 else self._string(flat[n + 1]),
                                _line(flat[n + 2]))
                    for n in range(0, len(flat), 3)]
        except ValueError:
            return []

    def function(self, address):
        """The name of the function whose code holds the address, or None."""
        i = bisect_right(self.function_starts, address) - 1
        if i < 0 or address >= self.functions[i][1]:
            return None
        try:
            return self._string(self.functions[i][2])
        except ValueError:
            return None


def chain_name(calls, function, location, module=None):
    """The FrameName of the frame at one address whose code is that of
    the calls inlined there (``calls``, innermost first): each call's
    function a line of its own, at the place inside it (the line table's
    ``location``, a (file, line) or None, for the innermost), then
    ``function``'s own at the outermost call's site; ``module`` the
    library each line without a place is said to be from."""
    names = []
    for call in calls:
        file, line = location if location is not None else (None, 0)
        names.append(FrameName(call.name, file, line, module))
        location = (call.file, call.line) if call.file is not None else None
    file, line = location if location is not None else (None, 0)
    return FrameName(function, file, line, module, tuple(names))
