"""A process's mappings (/proc/PID/maps, a core's NT_FILE note) and the
modules they hold: each ELF file mapped from offset 0 is one Module, its
load bias from its program headers.  The vDSO has no file: its Module
carries the image read from memory, from which its rows are synthesized
and its symbols read (never from a file another process could have
written)."""

import io
import struct
from dataclasses import dataclass
from typing import Optional

from ..elf import PT_LOAD, ElfError, ElfImage, open_elf
from ..unwind.target import Module

VDSO = "[vdso]"
#: how the vDSO is named in frames (as ldd names it)
VDSO_NAME = "linux-vdso.so.1"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    readable: bool
    writable: bool
    offset: int  # in the file
    path: str  # "" for anonymous memory, "[stack]", "[vdso]", ...

    @property
    def file_backed(self):
        return self.path.startswith("/")


def parse_maps(text):
    """[Mapping] of /proc/PID/maps' text."""
    mappings = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 5:
            continue
        start, _, end = fields[0].partition("-")
        perms = fields[1]
        path = fields[5] if len(fields) > 5 else ""
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        mappings.append(Mapping(int(start, 16), int(end, 16), perms[0] == "r",
                                perms[1] == "w", int(fields[2], 16), path))
    return mappings


def read_maps(pid):
    with open(f"/proc/{pid}/maps") as stream:
        return parse_maps(stream.read())


def parse_nt_file(data, endian="<"):
    """[Mapping] of a core's NT_FILE note: count, page size, then (start,
    end, offset in pages) per file mapping, then their names."""
    count, page_size = struct.unpack_from(endian + "QQ", data, 0)
    at = 16 + 24 * count
    names = data[at:].split(b"\0")
    mappings = []
    for index in range(count):
        start, end, pages = struct.unpack_from(endian + "QQQ", data, 16 + 24 * index)
        name = names[index].decode("utf-8", "surrogateescape") if index < len(names) else ""
        mappings.append(Mapping(start, end, True, False, pages * page_size, name))
    return mappings


def mapping_at(mappings, address) -> Optional[Mapping]:
    for mapping in mappings:
        if mapping.start <= address < mapping.end:
            return mapping
    return None


def _load_bias(image, header_address):
    loads = [s for s in image.segments() if s.type == PT_LOAD]
    if not loads:
        return None
    first = min(loads, key=lambda s: s.vaddr)
    return header_address - (first.vaddr - first.offset)


def file_modules(mappings):
    """A Module for each ELF file mapped from its offset 0: it starts at
    that mapping and ends with the last mapping of the same file that
    follows it."""
    modules = []
    for index, mapping in enumerate(mappings):
        if not mapping.file_backed or mapping.offset != 0:
            continue
        end = mapping.end
        for later in mappings[index + 1:]:
            if later.path != mapping.path or later.offset == 0:
                break
            end = later.end
        try:
            stream, image = open_elf(mapping.path)
        except (OSError, ElfError):
            continue  # not an ELF file (a locale archive, a font), or gone
        with stream:
            try:
                bias = _load_bias(image, mapping.start)
                build_id = image.build_id()
            except (OSError, ElfError, struct.error):
                continue
        if bias is not None:
            modules.append(Module(mapping.path, bias, mapping.start, end, build_id,
                                  mapping.start))
    return modules


def vdso_module(data, start) -> Optional[Module]:
    """The Module of the vDSO image ``data`` mapped at ``start``."""
    try:
        image = ElfImage.from_file(io.BytesIO(data), VDSO)
        build_id = image.build_id()
        bias = _load_bias(image, start)
    except (ElfError, struct.error):
        return None
    if bias is None:
        return None
    return Module(VDSO_NAME, bias, start, start + len(data), build_id, start, image=data)
