"""DWARF line tables, what their readers share: which compilation unit
holds an address (.debug_aranges, read with struct), debug sections
inflated, and the row each debugger takes at an address (line_program.py
reads the rows themselves)."""

import struct
import zlib

from ..elf import SHF_COMPRESSED, ElfError

#: A compressed debug section may expand to this many times the file's size.
MAX_EXPANSION = 64
ELFCOMPRESS_ZLIB = 1


def section_bytes(image, section):
    """A section's bytes, inflated when SHF_COMPRESSED with zlib (to at
    most the size its header gives, itself bounded by MAX_EXPANSION);
    None for another compression or a size beyond reason."""
    data = image.section_data(section)
    if not section.flags & SHF_COMPRESSED:
        return data
    kind, _, size = struct.unpack_from(image.header.endian + "IIQ", data)
    if kind != ELFCOMPRESS_ZLIB or size > MAX_EXPANSION * len(data) + (1 << 20):
        return None
    return zlib.decompressobj().decompress(data[24:], size) if size else b""


def address_ranges(image):
    """Sorted [(start, end, unit offset)] of an ElfImage's .debug_aranges:
    which compilation unit holds an address, so that only its line program
    is read.  Empty when it has none or it cannot be read."""
    ranges = []
    try:
        section = image.section(".debug_aranges")
        data = section_bytes(image, section) if section is not None else None
        if not data:
            return []
        endian = image.header.endian
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


def preferred_rows(rows, debugger="gdb"):
    """Line rows sorted by address, one per address: the one ``debugger``
    ("lldb", or GDB's otherwise) takes where several rows start there.
    GDB takes the last statement row, LLDB the last row (its line table
    keeps only the last of rows at one address): where GCC gives an
    address the lines of several statements, the last one not a
    statement row (code inlined there, a function's first line after
    its prologue), the two name different lines."""
    last_wins = debugger == "lldb"
    chosen = {}
    for row in sorted(rows, key=lambda row: row[0]):
        if last_wins or row[3] or not chosen.get(row[0], (0, 0, 0, False))[3]:
            chosen[row[0]] = row
    return [chosen[address] for address in sorted(chosen)]
