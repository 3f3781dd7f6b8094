"""Which addresses of an ELF file its DWARF call-frame information covers:
where GDB's DWARF unwinder has an FDE, so the SFrame frame unwinder's
`auto` mode leaves the frame to it.

``.eh_frame`` is looked up through ``.eh_frame_hdr``'s sorted table when
the file has one (a binary search in its bytes, then the one FDE it points
at: nothing is parsed up front); without it, and for ``.debug_frame``, every
FDE is parsed once.  A lookup answers as GDB's does: the FDE with the
greatest start at or below the address, if its range holds the address.
"""

import struct
from bisect import bisect_right

from ..elf import SHT_NOBITS, open_elf
from . import opcodes as op
from .cfi import fde_at, parse_cfi

# .eh_frame_hdr's table, as ld writes it: (initial location, FDE address)
# pairs of signed 32-bit offsets from the start of .eh_frame_hdr.
_TABLE_ENCODING = op.DW_EH_PE_datarel | op.DW_EH_PE_sdata4


class _SortedRanges:
    """FDE ranges from a full parse: [(start, end)] sorted by start."""

    def __init__(self, fdes):
        ranges = sorted((f.start, f.end) for f in fdes if f.size)
        self._starts = [start for start, _ in ranges]
        self._ends = [end for _, end in ranges]

    def covers(self, address):
        index = bisect_right(self._starts, address) - 1
        return index >= 0 and address < self._ends[index]


class _EhFrameTable:
    """.eh_frame through .eh_frame_hdr's binary search table."""

    def __init__(self, hdr, hdr_address, table_at, count, eh_frame, eh_address,
                 big_endian):
        self._hdr = hdr
        self._hdr_address = hdr_address
        self._table_at = table_at
        self._count = count
        self._entry = struct.Struct((">" if big_endian else "<") + "ii").unpack_from
        self._eh_frame = eh_frame
        self._eh_address = eh_address
        self._big_endian = big_endian
        self._cies = {}

    def _row(self, index):
        start, fde = self._entry(self._hdr, self._table_at + 8 * index)
        return start + self._hdr_address, fde + self._hdr_address

    def covers(self, address):
        low, high = 0, self._count
        while low < high:
            middle = (low + high) // 2
            if self._row(middle)[0] <= address:
                low = middle + 1
            else:
                high = middle
        if low == 0:
            return False
        _, fde_address = self._row(low - 1)
        fde = fde_at(self._eh_frame, fde_address - self._eh_address, self._eh_address,
                     self._cies, big_endian=self._big_endian)
        return fde.start <= address < fde.end


def _eh_frame_table(image, eh_frame, eh_section):
    """_EhFrameTable for .eh_frame when .eh_frame_hdr has a table ld's way,
    else None."""
    section = image.section(".eh_frame_hdr")
    if section is None or section.type == SHT_NOBITS or section.size < 12:
        return None
    hdr = image.section_data(section)
    version, pointer_encoding, count_encoding, table_encoding = hdr[:4]
    if (version != 1 or table_encoding != _TABLE_ENCODING
            or count_encoding != op.DW_EH_PE_udata4
            or pointer_encoding & op.DW_EH_PE_FORMAT_MASK != op.DW_EH_PE_sdata4):
        return None
    big_endian = image.header.big_endian
    (count,) = struct.unpack_from(">I" if big_endian else "<I", hdr, 8)
    if 12 + 8 * count > len(hdr):
        return None
    return _EhFrameTable(hdr, section.addr, 12, count, eh_frame, eh_section.addr,
                         big_endian)


class CfiCoverage:
    """The FDE address ranges of one ELF file (file addresses)."""

    def __init__(self, lookups):
        self._lookups = lookups

    @property
    def has_cfi(self):
        return bool(self._lookups)

    def covers(self, address):
        """Whether an FDE of the file covers ``address``; CFIError where
        the FDE the table points at cannot be read."""
        return any(lookup.covers(address) for lookup in self._lookups)

    @classmethod
    def of_file(cls, path):
        """The coverage of the ELF file at ``path``.  Raises OSError or
        ElfError."""
        stream, image = open_elf(path)
        with stream:
            big_endian = image.header.big_endian
            lookups = []
            for name, eh_frame in ((".eh_frame", True), (".debug_frame", False)):
                section = image.section(name)
                if section is None or section.type == SHT_NOBITS or not section.size:
                    continue
                data = image.section_data(section)
                table = _eh_frame_table(image, data, section) if eh_frame else None
                if table is None:
                    fdes, _ = parse_cfi(data, section.addr, eh_frame=eh_frame,
                                        big_endian=big_endian)
                    table = _SortedRanges(fdes)
                lookups.append(table)
            return cls(lookups)

