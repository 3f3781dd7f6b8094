"""Finding the function and the frame row that cover an address.

A section opened from bytes finds its functions through its reader (a
binary search of the FDE table); a section built from a list of functions
through an index of that list.  Within a function, a PC-mask (PLT) FDE's
rows repeat every ``rep_size`` bytes; v1 has no ``rep_size`` field and
uses the ABI's PLT entry size (libsframe 2.40 instead compared the low 8
bits of section-relative addresses: ``libsframe_2_40_entry``).
"""

from __future__ import annotations

from bisect import bisect_right

from . import constants as C
from .rules import FrameRow, frame_row

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


class _LookupIndex:
    """A built section's functions sorted by start address (made on its
    first lookup)."""

    def __init__(self, functions):
        self.functions = sorted(functions, key=lambda f: f.start)
        self.starts = [f.start for f in self.functions]


class RowIndex:
    """What lookups need of one function's rows, kept on the function: the
    rows' start offsets, the repetition size of PC-mask rows, and each row's
    FrameRow once it has been asked for."""

    __slots__ = ("section", "starts", "repeat", "frame_rows")

    def __init__(self, section, function):
        self.section = section
        rows = function.rows
        self.starts = [row.start_offset for row in rows]
        if not function.is_mask:
            self.repeat = 0
        elif section.version == C.VERSION_1:
            self.repeat = section.arch.plt_entry_size
        else:
            # A zero rep_size matches nothing (libsframe divides by it).
            self.repeat = function.rep_size or None
        self.frame_rows = [None] * len(rows)


def _row_index(section, function):
    index = function._row_index
    if index is None or index.section is not section:
        index = function._row_index = RowIndex(section, function)
    return index


def find_function(section, pc: int):
    """The FunctionEntry covering ``pc``, or None."""
    if section._source is not None:
        return section._source.find_function(pc)
    if section.is_empty or not section.functions:
        return None
    index = section._lookup_index
    if index is None:
        index = section._lookup_index = _LookupIndex(section.functions)
    i = bisect_right(index.starts, pc) - 1
    if i >= 0:
        function = index.functions[i]
        if pc < function.end:
            return function
    return None


def _row_number(index, function, pc):
    """The number of ``function``'s row in force at ``pc`` (which the
    function covers), or -1."""
    offset = pc - function.start
    repeat = index.repeat
    if repeat:
        offset %= repeat
    elif repeat is None:
        return -1
    i = bisect_right(index.starts, offset) - 1
    if i == len(index.starts) - 1 and offset >= function.size:
        return -1
    return i


def find_entry(section, function, pc):
    """The FrameRowEntry of ``function`` in force at ``pc``, or None."""
    if not function.num_rows:
        return None
    i = _row_number(_row_index(section, function), function, pc)
    return function.rows[i] if i >= 0 else None


def find_row(section, pc: int) -> Optional[FrameRow]:
    """The FrameRow in force at ``pc``, or None where no row covers it."""
    source = section._source
    function = (source.find_function(pc) if source is not None
                else find_function(section, pc))
    if function is None or not function.num_rows:
        return None
    index = function._row_index
    if index is None or index.section is not section:
        index = _row_index(section, function)
    i = _row_number(index, function, pc)
    if i < 0:
        return None
    row = index.frame_rows[i]
    if row is None:
        row = index.frame_rows[i] = frame_row(section, function, function.rows[i])
    return row


def libsframe_2_40_entry(section, function, pc):
    """The row of a v1 PC-mask FDE that binutils 2.40's ``sframe_find_fre``
    returns for ``pc``, or None.  It compares the low 8 bits of
    section-relative addresses: rows in order, none once a row starts
    above the PC, else the first row whose end (the next row's start, the
    function's end for the last) lies above it."""
    rows = function.rows
    relative_start = function.start - section.address
    low_pc = (pc - section.address) & 0xFF
    for i, row in enumerate(rows):
        if (relative_start + row.start_offset) & 0xFF > low_pc:
            return None
        end = rows[i + 1].start_offset if i + 1 < len(rows) else function.size
        if (relative_start + end) & 0xFF > low_pc:
            return row
    return None
