"""The one ELF reader: the headers, sections, notes and build id of 64-bit
ELF files and of ELF images in a target's memory, the relocations of
relocatable objects, and the search for an image's ELF header in memory.

It reads only the bytes it needs through a ``read(position, size)``
callable: file offsets for a file, addresses for an image in memory (whose
ELF header is at ``base``).  Machine numbers map to sfbt.arch entries.
"""

from __future__ import annotations

import os
import struct

from .arch import Arch, arch_for_machine
from .errors import LocatedError, TargetMemoryError
from .files import open_regular

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Callable, NamedTuple, Optional, TypeVar

    T = TypeVar("T")
else:
    from .values import NamedTuple

ET_REL = 1
PT_LOAD = 1
PT_NOTE = 4
PT_GNU_EH_FRAME = 0x6474E550
PT_GNU_SFRAME = 0x6474E554
SHT_SYMTAB = 2
SHT_RELA = 4
SHT_NOTE = 7
SHT_NOBITS = 8
SHT_REL = 9
SHT_DYNSYM = 11
SHF_COMPRESSED = 0x800
SHT_GNU_SFRAME = 0x6FFFFFF4
SHN_LORESERVE = 0xFF00
#: e_phnum of an image of 65,535 program headers or more (a core of that
#: many mappings): the count is section header 0's sh_info
PN_XNUM = 0xFFFF
#: bytes of program headers read at most where PN_XNUM says there are
#: more than e_phnum holds (299,593 of 56 bytes)
MAX_XNUM_HEADER_BYTES = 16 << 20
NT_GNU_BUILD_ID = 3

_EHDR = struct.Struct("HHIQQQIHHHHHH")  # e_type ... e_shstrndx, after e_ident
_PHDR = struct.Struct("IIQQQQQQ")
_SHDR = struct.Struct("IIQQQQIIQQ")
_MAX_NOTES = 1 << 16  # bytes of notes read when looking for the build id


def notes(data, endian):
    """(kind, name, description) of each ELF note in ``data``."""
    at = 0
    while at + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from(endian + "III", data, at)
        name_at = at + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        if desc_at + descsz > len(data):
            return
        yield kind, data[name_at:name_at + namesz].rstrip(b"\0"), data[desc_at:desc_at + descsz]
        at = desc_at + ((descsz + 3) & ~3)


def gnu_build_id(data, endian):
    """The GNU build id, in hex, of the notes ``data``, or None."""
    for kind, name, description in notes(data, endian):
        if kind == NT_GNU_BUILD_ID and name == b"GNU":
            return description.hex()
    return None


class ElfError(LocatedError):
    """Not a readable ELF file, or a structure in it that is not."""


# The records below are NamedTuples, not frozen dataclasses: they are
# defined at each start of `sfbt` and made for every mapped file's headers,
# and a NamedTuple costs a tenth as much to define and less to make.


class ElfHeader(NamedTuple):
    big_endian: bool
    type: int
    machine: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def endian(self) -> str:
        """The struct prefix of the image's byte order."""
        return ">" if self.big_endian else "<"


class Segment(NamedTuple):
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


class Section(NamedTuple):
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


def parse_header(ident: bytes) -> Optional[ElfHeader]:
    """The header of a 64-bit ELF image from its first 64 bytes, or None if
    they are not one."""
    if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] not in (1, 2):
        return None
    big_endian = ident[5] == 2
    fields = struct.unpack_from((">" if big_endian else "<") + _EHDR.format, ident, 16)
    (e_type, machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
     shstrndx) = fields
    return ElfHeader(big_endian, e_type, machine, phoff, phentsize, phnum, shoff,
                     shentsize, shnum, shstrndx)


class ElfImage:
    """One ELF image, read through ``read(position, size)``.

    For a file, positions are file offsets and ``base`` is 0.  For an image
    in a target's memory, positions are addresses, ``base`` is where its
    ELF header is mapped, and there are no section headers to read.
    Reads that fail raise what ``read`` raises (OSError, TargetMemoryError);
    structures that do not fit raise ElfError.
    """

    def __init__(self, read: Callable[[int, int], bytes], base: int = 0,
                 name: str = "ELF image", in_memory: bool = False):
        self._read = read
        self.base = base
        self.name = name
        self.in_memory = in_memory
        try:
            ident = read(base, 64)
        except ElfError:
            raise ElfError("not a readable ELF file: shorter than an ELF header") from None
        header = parse_header(ident)
        if header is None:
            raise ElfError("not a readable ELF file: no 64-bit ELF header")
        self.header: ElfHeader = header
        self._segments = None
        self._sections = None
        self.file_size = None  # known for a file

    @classmethod
    def from_file(cls, stream, name: str) -> "ElfImage":
        """The image of an open binary file (or of bytes in an io.BytesIO)."""
        file_size = stream.seek(0, os.SEEK_END)

        def read(offset, size):
            if offset < 0 or size < 0 or offset + size > file_size:
                raise ElfError(f"{size} bytes run past the end of the file "
                               f"({file_size} bytes)", offset)
            stream.seek(offset)
            data = stream.read(size)
            if len(data) != size:
                raise ElfError(f"{size} bytes run past the end of the file", offset)
            return data
        image = cls(read, 0, name)
        image.file_size = file_size
        return image

    @property
    def arch(self) -> Optional[Arch]:
        return arch_for_machine(self.header.machine, self.header.big_endian)

    @property
    def relocatable(self) -> bool:
        return self.header.type == ET_REL

    def read(self, position: int, size: int) -> bytes:
        return self._read(position, size)

    def _table(self, offset, entry_size, count, layout, what):
        if count == 0:
            return []
        if entry_size < layout.size or count * entry_size > max(
                0xFFFF * entry_size, MAX_XNUM_HEADER_BYTES):
            raise ElfError(f"{what} entries of {entry_size} bytes (x{count}) are not "
                           "64-bit ELF ones")
        if offset >= 1 << 48:
            raise ElfError(f"{what} offset {offset:#x} is beyond any file")
        data = self._read(self.base + offset, entry_size * count)
        if entry_size == layout.size:  # one pass: a core may have 70,000 headers
            return list(struct.iter_unpack(self.header.endian + layout.format, data))
        unpack = struct.Struct(self.header.endian + layout.format).unpack_from
        return [unpack(data, i * entry_size) for i in range(count)]

    def segment_count(self) -> int:
        """How many program headers there are: e_phnum, or where it is
        PN_XNUM (65,535 or more: a core of that many mappings), section
        header 0's sh_info, as Linux writes a core (an image in memory
        has no section header to say: ElfError)."""
        header = self.header
        if header.phnum != PN_XNUM:
            return header.phnum
        if self.in_memory or not header.shoff or header.shentsize < _SHDR.size:
            raise ElfError(f"{PN_XNUM} program headers (PN_XNUM) and no section header "
                           "to give their count")
        (first,) = self._table(header.shoff, header.shentsize, 1, _SHDR, "section header")
        count = first[7]  # sh_info
        if count < PN_XNUM:
            raise ElfError(f"PN_XNUM program headers, counted {count} in section header 0 "
                           f"(fewer than {PN_XNUM})", header.shoff)
        if count * header.phentsize > MAX_XNUM_HEADER_BYTES:
            raise ElfError(f"{count} program headers (PN_XNUM), more than the "
                           f"{MAX_XNUM_HEADER_BYTES // header.phentsize} read", header.shoff)
        return count

    def segments(self) -> list:
        """The program headers."""
        if self._segments is None:
            header = self.header
            rows = self._table(header.phoff, header.phentsize, self.segment_count(), _PHDR,
                               "program header")
            self._segments = [Segment(p_type, flags, offset, vaddr, filesz, memsz)
                              for p_type, flags, offset, vaddr, _, filesz, memsz, _
                              in rows]
        return self._segments

    def sections(self) -> list:
        """The section headers with their names (none for an image in memory)."""
        if self._sections is None:
            header = self.header
            if self.in_memory or not header.shnum:
                self._sections = []
                return self._sections
            rows = self._table(header.shoff, header.shentsize, header.shnum, _SHDR,
                               "section header")
            names = b""
            if header.shstrndx < len(rows):
                _, _, _, _, offset, size, _, _, _, _ = rows[header.shstrndx]
                names = self._read(offset, min(size, 1 << 24)) if size else b""
            self._sections = []
            for index, (name_at, sh_type, flags, addr, offset, size, link, info, _,
                        entsize) in enumerate(rows):
                end = names.find(b"\0", name_at)
                name = names[name_at:end if end >= 0 else len(names)].decode("utf-8", "replace")
                self._sections.append(Section(index, name, sh_type, flags, addr, offset,
                                              size, link, info, entsize))
        return self._sections

    def section(self, name: str = None, type: int = None) -> Optional[Section]:
        """The first section with this name, else with this type, or None."""
        sections = self.sections()
        if name is not None:
            for section in sections:
                if section.name == name:
                    return section
        if type is not None:
            for section in sections:
                if section.type == type:
                    return section
        return None

    def section_data(self, section: Section) -> bytes:
        if section.type == SHT_NOBITS or not section.size:
            return b""
        return self._read(section.offset, section.size)

    def segment_data(self, segment: Segment, load_bias: int = 0) -> bytes:
        """A segment's bytes: from the file, or from memory at load_bias +
        its address."""
        if self.in_memory:
            return self._read(load_bias + segment.vaddr, segment.filesz)
        return self._read(segment.offset, segment.filesz)

    def first_load_address(self) -> Optional[int]:
        loads = [s.vaddr for s in self.segments() if s.type == PT_LOAD]
        return min(loads) if loads else None

    def build_id(self) -> Optional[str]:
        """The GNU build id, in hex, from the PT_NOTE segments (or, without
        program headers, the SHT_NOTE sections); None when it has none."""
        if self.in_memory:
            return None
        notes = [(s.offset, s.filesz) for s in self.segments() if s.type == PT_NOTE]
        if not notes:
            notes = [(s.offset, s.size) for s in self.sections() if s.type == SHT_NOTE]
        endian = self.header.endian
        for offset, size in notes:
            found = gnu_build_id(self._read(offset, min(size, _MAX_NOTES)), endian)
            if found is not None:
                return found
        return None

    def relocated_data(self, section: Section) -> bytes:
        """A relocatable object's section with its relocations applied (as
        objdump applies them before dumping); other images' as they are."""
        data = self.section_data(section)
        if not self.relocatable:
            return data
        arch = self.arch
        table = arch.relocations if arch else {}
        sections = self.sections()
        data = bytearray(data)
        endian = self.header.endian
        for relocs in sections:
            if relocs.type not in (SHT_REL, SHT_RELA) or relocs.info != section.index:
                continue
            if relocs.link >= len(sections) or \
                    sections[relocs.link].type not in (SHT_SYMTAB, SHT_DYNSYM):
                raise ElfError(f"relocations of {section.name} name no symbol table "
                               f"(section {relocs.link})", relocs.offset)
            symbols = self._symbol_values(sections[relocs.link], sections)
            rela = relocs.type == SHT_RELA
            entry = 24 if rela else 16
            raw = self.section_data(relocs)
            for at in range(0, len(raw) - entry + 1, entry):
                offset, info = struct.unpack_from(endian + "QQ", raw, at)
                kind, symbol = info & 0xFFFFFFFF, info >> 32
                if kind not in table:
                    raise ElfError(f"unsupported relocation type {kind}", offset,
                                   section.name)
                size, pc_relative = table[kind]
                if offset + size > len(data):
                    raise ElfError("relocation runs past the end of the section",
                                   offset, section.name)
                if symbol >= len(symbols):
                    raise ElfError(f"relocation names symbol {symbol}, beyond the "
                                   "symbol table", offset, section.name)
                fmt = endian + ("q" if size == 8 else "i")
                value = symbols[symbol]
                if rela:
                    value += struct.unpack_from(endian + "q", raw, at + 16)[0]
                else:
                    value += struct.unpack_from(fmt, data, offset)[0]
                if pc_relative:
                    value -= section.addr + offset
                mask = (1 << (8 * size)) - 1
                value &= mask
                if value >> (8 * size - 1):
                    value -= mask + 1
                struct.pack_into(fmt, data, offset, value)
        return bytes(data)

    def _symbol_values(self, symtab, sections):
        """Each symbol's value, plus its section's address when it is
        defined in a section."""
        raw = self.section_data(symtab)
        values = []
        for at in range(0, len(raw) - 23, 24):
            _, _, _, shndx, value, _ = struct.unpack_from(
                self.header.endian + "IBBHQQ", raw, at)
            if 0 < shndx < SHN_LORESERVE and shndx < len(sections):
                value += sections[shndx].addr
            values.append(value)
        return values


def open_elf(path: str):
    """(open stream, ElfImage) of the file at path; the caller closes the
    stream.  Raises OSError or ElfError."""
    stream = open_regular(path)
    try:
        return stream, ElfImage.from_file(stream, path)
    except BaseException:
        stream.close()
        raise


def read_elf(path: str, read: Callable[["ElfImage"], T]) -> Optional[T]:
    """``read(image)`` of the ELF file at ``path``; None when it cannot be
    opened, is not ELF, or ``read`` meets bad data."""
    try:
        stream = open_regular(path)
    except OSError:
        return None
    with stream:
        return read_elf_stream(stream, path, read)


def read_elf_stream(stream: IO[bytes], path: str, read: Callable[["ElfImage"], T]
                    ) -> Optional[T]:
    """``read(image)`` of the ELF file open as ``stream`` (named ``path``);
    None when it is not ELF or ``read`` meets bad data."""
    try:
        return read(ElfImage.from_file(stream, path))
    except (OSError, ElfError, struct.error):
        return None


def read_build_id(path: str) -> Optional[str]:
    """The file's GNU build id in hex; None when it has none or is not a
    readable ELF file."""
    return read_elf(path, ElfImage.build_id)


def memory_image(target, base: int, name: str = "ELF image in memory") -> Optional[ElfImage]:
    """The ELF image whose header is at ``base`` in the target's memory, or
    None if there is no 64-bit ELF header there.  Memory faults raise the
    target's TargetMemoryError."""
    try:
        return ElfImage(target.read_memory, base, name, in_memory=True)
    except ElfError:
        return None


def image_in_memory(target, start: int, pages: int = 16):
    """(ELF header address, load bias) of the image whose sections begin at
    run-time address ``start``, from the headers mapped at the page at or
    below it; None if not found."""
    page = start & ~0xFFF
    for header in range(page, max(page - pages * 0x1000, 0) - 1, -0x1000):
        try:
            image = memory_image(target, header)
            if image is None:
                continue
            loads = [s for s in image.segments() if s.type == PT_LOAD]
        except TargetMemoryError:
            return None  # the image is mapped contiguously from its header
        except ElfError:
            return None
        if not loads:
            return None
        first = min(loads, key=lambda s: s.vaddr)
        bias = header - (first.vaddr - first.offset)
        # The first section must lie in a loaded segment, else this header
        # belongs to another image.
        if not any(s.vaddr <= start - bias < s.vaddr + s.memsz for s in loads):
            return None
        return header, bias
    return None
