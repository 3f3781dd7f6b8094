"""DWARF line tables, what their readers share: which compilation unit
holds an address (.debug_aranges, read with struct), debug sections
inflated, the row GDB prefers at an address, and the file names of a
pyelftools line program (for sfbt.dwarf.inline; line_program.py reads
the rows themselves with struct)."""

import os
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


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def preferred_rows(rows):
    """Line rows sorted by address, one per address: like GDB, a statement
    row where there are several."""
    chosen = {}
    for row in sorted(rows, key=lambda row: row[0]):
        if row[3] or not chosen.get(row[0], (0, 0, 0, False))[3]:
            chosen[row[0]] = row
    return [chosen[address] for address in sorted(chosen)]


def file_names(program):
    """The names of a line program's files, by index (0-based: DWARF 5's
    file numbers; earlier versions' numbers less one)."""
    version = program["version"]
    directories = program["include_directory"]
    names = []
    for entry_file in program["file_entry"]:
        name = _text(entry_file.name)
        directory_index = entry_file.dir_index if version >= 5 else entry_file.dir_index - 1
        if directory_index > 0 or (version < 5 and directory_index >= 0):
            if 0 <= directory_index < len(directories) and not name.startswith("/"):
                name = os.path.join(_text(directories[directory_index]), name)
        names.append(name)
    return names
