"""Which compilation unit of .debug_info holds an address, so that only
its line program and entries are read.

``.debug_aranges`` says it for the units it lists.  For the units it
leaves out (all of them in what clang builds unless given
``-gdwarf-aranges``), the ranges of each unit's top entry say it
(``DW_AT_low_pc``/``DW_AT_high_pc`` or ``DW_AT_ranges``), as GDB adds
the units its aranges miss and libdw reads a file without them.  Those
are read once per file, on the first address the aranges do not hold,
from the units' headers and top entries only.  Like GDB, a range that
starts at 0 is left out: the place a linker puts what it discarded."""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_right

from ..elf import ElfError
from .entries import Unit, unit_spans
from .line_program import DwarfBytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Optional, Sequence, Set, Tuple

    #: a range of addresses and the .debug_info offset of the unit holding it
    Span = Tuple[int, int, int]

#: the tags of the top entries of units that hold code: compile unit, and
#: the skeleton of a split one (-gsplit-dwarf: its lines are here)
CODE_UNITS = frozenset((0x11, 0x4A))
#: units whose top entries are read at most (the C library has some
#: thousands; a hostile file of millions would take minutes)
MAX_UNITS = 200_000


def address_ranges(dwarf: DwarfBytes) -> List[Span]:
    """Sorted [(start, end, unit offset)] of a file's .debug_aranges;
    empty when it has none or it cannot be read."""
    ranges = []
    try:
        data = dwarf[".debug_aranges"]
        endian = dwarf.endian
        at = 0
        while at + 4 <= len(data):
            (length,) = struct.unpack_from(endian + "I", data, at)
            offset_size, head = 4, at + 4
            if length == 0xFFFFFFFF:
                (length,) = struct.unpack_from(endian + "Q", data, head)
                offset_size, head = 8, head + 8
            end = head + length
            unit = struct.unpack_from(endian + ("I" if offset_size == 4 else "Q"),
                                      data, head + 2)[0]
            address_size = data[head + 2 + offset_size]
            if address_size != 8:
                at = end
                continue
            pairs = head + 2 + offset_size + 2
            pairs += -(pairs - at) % 16
            for start, size in struct.iter_unpack(endian + "QQ",
                                                  data[pairs:end - (end - pairs) % 16]):
                if start == 0 and size == 0:
                    break
                if size:
                    ranges.append((start, start + size, unit))
            at = end
    except (OSError, ElfError, struct.error, zlib.error, IndexError):
        pass
    ranges.sort()
    return ranges


def top_entry_ranges(dwarf: DwarfBytes, listed: Set[int]) -> List[Span]:
    """[(start, end, unit offset)] of the units of .debug_info that hold
    code whose offsets are not in ``listed``, from their top entries."""
    sections = dwarf.entry_sections()
    found = []
    for number, (offset, _) in enumerate(unit_spans(sections)):
        if number == MAX_UNITS:
            dwarf.left_out(f".debug_info+{offset:#x}: the ranges of units past the first "
                           f"{MAX_UNITS}")
            break
        if offset in listed:
            continue
        unit = Unit(sections, offset, top_only=True)
        if unit.tag in CODE_UNITS:
            found += [(low, high, offset) for low, high in unit.extent(unit.top)]
    return found


class _Ranges:
    """Look-ups in [(start, end, unit)]: overlaps cut off (the range that
    starts first keeps the addresses two share), ranges at 0 left out."""

    def __init__(self, ranges: Sequence[Sequence[int]]):
        self.ranges: List[Span] = []
        for start, end, unit in sorted(map(tuple, ranges)):
            if self.ranges:
                start = max(start, self.ranges[-1][1])
            if start and end > start:
                self.ranges.append((start, end, unit))
        self.starts = [start for start, _, _ in self.ranges]

    def unit(self, address: int) -> Optional[int]:
        i = bisect_right(self.starts, address) - 1
        if i >= 0 and address < self.ranges[i][1]:
            return self.ranges[i][2]
        return None


class UnitIndex:
    """The unit that holds an address, of one file: its aranges, then
    (read on the first miss) the top entries of the units they leave
    out, through ``unlisted`` (top_entry_ranges, or what keeps its
    answer)."""

    def __init__(self, dwarf: DwarfBytes,
                 unlisted: Callable[[DwarfBytes, Set[int]],
                                    Sequence[Sequence[int]]] = top_entry_ranges):
        self._dwarf = dwarf
        self._unlisted = unlisted
        listed = address_ranges(dwarf)
        self._listed = _Ranges(listed)
        self._listed_units = {unit for _, _, unit in listed}
        self._others: Optional[_Ranges] = None

    def unit(self, address: int) -> Optional[int]:
        """The .debug_info offset of the unit holding the address, or
        None.  Damaged top entries raise (DwarfFormatError, struct.error,
        IndexError...) on the first miss only: the units they leave out
        are then none."""
        found = self._listed.unit(address)
        if found is None:
            if self._others is None:
                self._others = _Ranges([])  # tried once, should the entries raise
                self._others = _Ranges(self._unlisted(self._dwarf, self._listed_units))
            found = self._others.unit(address)
        return found

    @property
    def empty(self) -> bool:
        """Whether no unit says what it holds (known after a miss)."""
        return not self._listed.ranges and self._others is not None \
            and not self._others.ranges
