"""Finding the FDE that covers an address, without parsing the rest.

``.eh_frame`` is searched through ``.eh_frame_hdr``'s sorted table when
the image has one as ld writes it (a binary search in its bytes, then the
one FDE it points at, whose CIE is parsed once); without it, and for
``.debug_frame``, every FDE is parsed once into a sorted index, on the
first lookup that needs it.  A lookup answers as GDB's does: the FDE with
the greatest start at or below the address, if its range holds the
address; ``.eh_frame`` is asked before ``.debug_frame``.
"""

import struct
from bisect import bisect_right

from ..elf import PT_GNU_EH_FRAME, PT_LOAD, SHT_NOBITS, ElfError, ElfImage
from ..errors import SfbtError
from . import opcodes as op
from .cfi import fde_at, parse_cfi
from .encoding import CFIError, FieldReader, read_encoded_pointer

# .eh_frame_hdr's table, as ld writes it: (initial location, FDE address)
# pairs of signed 32-bit offsets from the start of .eh_frame_hdr.
_TABLE_ENCODING = op.DW_EH_PE_datarel | op.DW_EH_PE_sdata4
_MAX_MEMORY_EH_FRAME = 1 << 24  # read at most this much .eh_frame from memory
_MAX_MEMORY_EH_FRAME_HDR = 1 << 22


class CfiUnavailable(SfbtError):
    """An image whose call-frame information cannot be found or read."""


class EhFrameHdrTable:
    """.eh_frame through .eh_frame_hdr's binary search table, read in place."""

    def __init__(self, hdr, hdr_address, count, eh_frame, eh_address, big_endian):
        self._hdr = hdr
        self._hdr_address = hdr_address
        self.count = count
        self._entry = struct.Struct((">" if big_endian else "<") + "ii").unpack_from
        self._eh_frame = eh_frame
        self._eh_address = eh_address
        self._big_endian = big_endian
        self._cies = {}

    def _row(self, index):
        start, fde = self._entry(self._hdr, 12 + 8 * index)
        return start + self._hdr_address, fde + self._hdr_address

    def find(self, address):
        """The FDE covering address, or None.  Raises CFIError where the
        FDE the table points at cannot be read."""
        low, high = 0, self.count
        while low < high:
            middle = (low + high) // 2
            if self._row(middle)[0] <= address:
                low = middle + 1
            else:
                high = middle
        if low == 0:
            return None
        _, fde_address = self._row(low - 1)
        fde = fde_at(self._eh_frame, fde_address - self._eh_address, self._eh_address,
                     self._cies, big_endian=self._big_endian)
        return fde if fde.start <= address < fde.end else None

    def all_fdes(self):
        """(every FDE of .eh_frame, entries that could not be parsed)."""
        return parse_cfi(self._eh_frame, self._eh_address, eh_frame=True,
                         big_endian=self._big_endian)


def hdr_table(hdr, hdr_address, eh_frame, eh_address, big_endian):
    """An EhFrameHdrTable when .eh_frame_hdr's bytes have a table ld's
    way, else None."""
    if len(hdr) < 12:
        return None
    version, pointer_encoding, count_encoding, table_encoding = hdr[:4]
    if (version != 1 or table_encoding != _TABLE_ENCODING
            or count_encoding != op.DW_EH_PE_udata4
            or pointer_encoding & op.DW_EH_PE_FORMAT_MASK != op.DW_EH_PE_sdata4):
        return None
    (count,) = struct.unpack_from(">I" if big_endian else "<I", hdr, 8)
    if 12 + 8 * count > len(hdr):
        return None
    return EhFrameHdrTable(hdr, hdr_address, count, eh_frame, eh_address, big_endian)


class ParsedFdes:
    """A section's FDEs, parsed whole on first use and sorted by start
    (empty ones left out) for lookups."""

    def __init__(self, data, address, eh_frame, big_endian, address_size=8):
        self._args = (data, address)
        self._options = dict(eh_frame=eh_frame, big_endian=big_endian,
                             address_size=address_size)
        self._parsed = None
        self._sorted = None
        self._starts = None

    def all_fdes(self):
        """(every FDE in section order, entries that could not be parsed)."""
        if self._parsed is None:
            self._parsed = parse_cfi(*self._args, **self._options)
        return self._parsed

    @property
    def count(self):
        return len(self.all_fdes()[0])

    def find(self, address):
        if self._sorted is None:
            self._sorted = sorted((f for f in self.all_fdes()[0] if f.size),
                                  key=lambda f: f.start)
            self._starts = [f.start for f in self._sorted]
        index = bisect_right(self._starts, address) - 1
        if index >= 0 and address < self._sorted[index].end:
            return self._sorted[index]
        return None


def image_arch(image: ElfImage):
    """The image's sfbt.arch entry.  Raises CfiUnavailable."""
    arch = image.arch
    if arch is None:
        raise CfiUnavailable(
            f"unsupported architecture (ELF machine {image.header.machine}, "
            f"{'big' if image.header.big_endian else 'little'}-endian)")
    return arch


class FdeIndex:
    """The FDE lookups of one ELF image, in priority order (.eh_frame
    first), with the names of the sections they read."""

    def __init__(self, lookups, sources):
        #: an EhFrameHdrTable or ParsedFdes per section, in priority order
        self.lookups = lookups
        self.sources = sources

    @property
    def has_cfi(self):
        return bool(self.lookups)

    @property
    def count(self):
        """The number of DWARF FDEs (a table's count, else a parse's)."""
        return sum(lookup.count for lookup in self.lookups)

    def find(self, address):
        """The FDE covering ``address`` (the image's own addresses), or
        None.  Raises CFIError where the FDE a table points at cannot be
        read."""
        for lookup in self.lookups:
            fde = lookup.find(address)
            if fde is not None:
                return fde
        return None

    def fde_lists(self):
        """(every FDE list in priority order, entries that could not be
        parsed): for a whole synthesis."""
        lists, errors = [], 0
        for lookup in self.lookups:
            fdes, bad = lookup.all_fdes()
            lists.append(fdes)
            errors += bad
        return lists, errors

    @classmethod
    def of_image(cls, image: ElfImage) -> "FdeIndex":
        """The lookups of a file's image (its .eh_frame and .debug_frame,
        relocated first in relocatable objects) or of an image in target
        memory (the .eh_frame its PT_GNU_EH_FRAME names).  Raises
        CfiUnavailable; reads raise what the image's reads raise."""
        arch = image.arch
        if arch is None:
            raise CfiUnavailable(
                f"unsupported architecture (ELF machine {image.header.machine}, "
                f"{'big' if image.header.big_endian else 'little'}-endian)")
        if image.in_memory:
            return _of_memory_image(image, arch)
        big_endian = arch.big_endian
        lookups, sources = [], []
        for name, eh_frame in ((".eh_frame", True), (".debug_frame", False)):
            section = image.section(name)
            if section is None or section.type == SHT_NOBITS or not section.size:
                continue
            try:
                data = image.relocated_data(section)
            except ElfError as error:
                raise CfiUnavailable(f"{name}: {error}") from None
            lookup = None
            if eh_frame and not image.relocatable:
                hdr = image.section(".eh_frame_hdr")
                if hdr is not None and hdr.type != SHT_NOBITS:
                    lookup = hdr_table(image.section_data(hdr), hdr.addr, data,
                                       section.addr, big_endian)
            lookups.append(lookup or ParsedFdes(data, section.addr, eh_frame, big_endian))
            sources.append(name)
        return cls(lookups, sources)


def _of_memory_image(image, arch):
    """The .eh_frame of an image in target memory (``image.base`` is its
    ELF header; the FDEs' addresses are the file's), found through
    .eh_frame_hdr and read up to the end of the loaded segment that holds
    it."""
    segments = image.segments()
    loads = [s for s in segments if s.type == PT_LOAD]
    header = next((s for s in segments if s.type == PT_GNU_EH_FRAME), None)
    if header is None or not loads:
        raise CfiUnavailable("no .eh_frame_hdr (PT_GNU_EH_FRAME) in the image in memory")
    first = min(loads, key=lambda s: s.vaddr)
    bias = image.base - (first.vaddr - first.offset)
    hdr = image.read(bias + header.vaddr,
                     max(4 + arch.pointer_size, min(header.filesz, _MAX_MEMORY_EH_FRAME_HDR)))
    if hdr[0] != 1:
        raise CfiUnavailable(f".eh_frame_hdr version {hdr[0]} (expected 1)")
    try:
        eh_frame, _ = read_encoded_pointer(FieldReader(arch.big_endian), hdr, 4, hdr[1],
                                           header.vaddr, arch.pointer_size)
    except (CFIError, struct.error) as error:
        raise CfiUnavailable(f".eh_frame_hdr: {error}") from None
    segment = next((s for s in loads if s.vaddr <= eh_frame < s.vaddr + s.filesz), None)
    if segment is None:
        raise CfiUnavailable(f".eh_frame at {eh_frame:#x} is outside the loaded segments")
    size = min(segment.vaddr + segment.filesz - eh_frame, _MAX_MEMORY_EH_FRAME)
    data = image.read(bias + eh_frame, size)
    lookup = (hdr_table(hdr, header.vaddr, data, eh_frame, arch.big_endian)
              or ParsedFdes(data, eh_frame, True, arch.big_endian, arch.pointer_size))
    return FdeIndex([lookup], [".eh_frame"])
