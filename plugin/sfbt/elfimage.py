"""ELF images as a target's memory holds them: the ELF header and program
headers mapped at an image's start, for images whose file cannot be read
(a remote target's, the vDSO, a core whose files moved)."""

import struct
from dataclasses import dataclass

from .target import TargetMemoryError

PT_LOAD = 1
PT_NOTE = 4
SHT_NOTE = 7


@dataclass(frozen=True)
class ElfHeader:
    endian: str  # struct prefix: "<" or ">"
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int


@dataclass(frozen=True)
class Segment:
    type: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


class FileImage:
    """An ELF file read the way a target's memory is read: file offsets
    for addresses."""

    def __init__(self, stream):
        self._stream = stream

    def read_memory(self, address, size):
        self._stream.seek(address)
        data = self._stream.read(size)
        if len(data) != size:
            raise TargetMemoryError(address, size)
        return data


def elf_header(target, address):
    """The 64-bit ELF header at ``address``, or None if there is none there."""
    ident = target.read_memory(address, 64)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] not in (1, 2):
        return None
    endian = "<" if ident[5] == 1 else ">"
    phoff, shoff = struct.unpack_from(endian + "QQ", ident, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from(endian + "HHHH", ident, 54)
    return ElfHeader(endian, phoff, phentsize, phnum, shoff, shentsize, shnum)


def program_headers(target, header):
    """The program headers of the 64-bit ELF image whose ELF header is at
    ``header``; None when there is no such header.  Memory faults raise
    TargetMemoryError."""
    elf = elf_header(target, header)
    if elf is None or elf.phentsize < 56 or not 0 < elf.phnum < 512:
        return None
    table = target.read_memory(header + elf.phoff, elf.phentsize * elf.phnum)
    segments = []
    for i in range(elf.phnum):
        p_type, _, offset, vaddr, _, filesz, memsz = struct.unpack_from(
            elf.endian + "IIQQQQQ", table, i * elf.phentsize)
        segments.append(Segment(p_type, offset, vaddr, filesz, memsz))
    return segments


def image_in_memory(target, start, pages=16):
    """(ELF header address, load bias) of the image whose sections begin at
    run-time address ``start``, from the headers mapped at the page at or
    below it; None if not found."""
    page = start & ~0xFFF
    for header in range(page, max(page - pages * 0x1000, 0) - 1, -0x1000):
        try:
            segments = program_headers(target, header)
        except TargetMemoryError:
            return None  # the image is mapped contiguously from its header
        if segments is None:
            continue
        loads = [s for s in segments if s.type == PT_LOAD]
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
