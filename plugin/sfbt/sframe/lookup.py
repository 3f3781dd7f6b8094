"""Finding the function and the frame row that cover an address."""

from bisect import bisect_right

from . import constants as C
from .rules import frame_row


class _LookupIndex:
    """Functions sorted by start address, built on a section's first lookup."""

    def __init__(self, functions):
        self.functions = sorted(functions, key=lambda f: f.start)
        self.starts = [f.start for f in self.functions]
        self.row_starts = {}

    def row_starts_of(self, function):
        starts = self.row_starts.get(id(function))
        if starts is None:
            starts = [row.start_offset for row in function.rows]
            self.row_starts[id(function)] = starts
        return starts


def _index(section):
    if section._lookup_index is None:
        section._lookup_index = _LookupIndex(section.functions)
    return section._lookup_index


def find_function(section, pc):
    if section.is_empty or not section.functions:
        return None
    index = _index(section)
    i = bisect_right(index.starts, pc) - 1
    if i >= 0:
        function = index.functions[i]
        if pc < function.end:
            return function
    return None


def find_entry(section, function, pc):
    """The FrameRowEntry of ``function`` in force at ``pc``, or None."""
    rows = function.rows
    if not rows:
        return None
    if function.is_mask:
        if section.version == C.VERSION_1:
            return _find_entry_v1_mask(section, function, pc)
        if function.rep_size == 0:
            return None
        offset = (pc - function.start) % function.rep_size
    else:
        offset = pc - function.start
    i = bisect_right(_index(section).row_starts_of(function), offset) - 1
    if i < 0:
        return None
    if i == len(rows) - 1 and offset >= function.size:
        return None
    return rows[i]


def _find_entry_v1_mask(section, function, pc):
    """binutils 2.40's rule for v1 PLT entries: compare the low 8 bits of
    section-relative addresses (v1 has no repetition size)."""
    relative_start = function.start - section.address
    relative_pc = (pc - section.address) & 0xFF
    rows = function.rows
    for i, row in enumerate(rows):
        if (relative_start + row.start_offset) & 0xFF > relative_pc:
            return None
        end = rows[i + 1].start_offset if i + 1 < len(rows) else function.size
        if (relative_start + end) & 0xFF > relative_pc:
            return row
    return None


def find_row(section, pc):
    function = find_function(section, pc)
    if function is None:
        return None
    entry = find_entry(section, function, pc)
    if entry is None:
        return None
    return frame_row(section, function, entry)
