"""ELF images as a target's memory holds them: the ELF header and program
headers mapped at an image's start, for images whose file cannot be read
(a remote target's, the vDSO, a core whose files moved)."""

import struct
from dataclasses import dataclass

from .target import TargetMemoryError

PT_LOAD = 1


@dataclass(frozen=True)
class Segment:
    type: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


def program_headers(target, header):
    """The program headers of the 64-bit ELF image whose ELF header is at
    run-time address ``header``; None when there is no such header.
    Memory faults raise TargetMemoryError."""
    ident = target.read_memory(header, 64)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] not in (1, 2):
        return None
    endian = "<" if ident[5] == 1 else ">"
    (phoff,) = struct.unpack_from(endian + "Q", ident, 32)
    phentsize, phnum = struct.unpack_from(endian + "HH", ident, 54)
    if phentsize < 56 or not 0 < phnum < 512:
        return None
    table = target.read_memory(header + phoff, phentsize * phnum)
    segments = []
    for i in range(phnum):
        p_type, _, offset, vaddr, _, filesz, memsz = struct.unpack_from(
            endian + "IIQQQQQ", table, i * phentsize)
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
