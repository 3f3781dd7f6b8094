"""A process's mappings (/proc/PID/maps, a core's NT_FILE note) and the
modules they hold: each ELF file mapped from offset 0 is one Module, its
load bias from its program headers.  The vDSO has no file: its Module
carries the image read from memory, from which its rows are synthesized
and its symbols read (never from a file another process could have
written)."""

from __future__ import annotations

import io
import struct

from ..elf import PT_LOAD, ElfError, ElfImage, memory_image, read_elf
from ..errors import TargetMemoryError
from ..symbols.vdso import VDSO, VDSO_NAME
from ..unwind.target import Module
from ..values import Value
from .images import Located, memory_build_id, no_file_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional



class Mapping(Value):
    """One mapping of a process (a line of /proc/PID/maps, an NT_FILE
    entry); not changed once made."""

    __slots__ = _fields = ("start", "end", "readable", "writable", "offset", "path",
                           "device", "inode", "changed")
    #: ``changed`` changes while the mapping stays
    _uncompared = ("changed",)

    def __init__(self, start, end, readable, writable, offset, path, device="", inode=0,
                 changed=None):
        self.start = start
        self.end = end
        self.readable = readable
        self.writable = writable
        self.offset = offset  # in the file
        self.path = path  # "" for anonymous memory, "[stack]", "[vdso]", ...
        #: of the file, "major:minor" in hex as /proc/PID/maps shows it
        self.device = device
        self.inode = inode
        #: kB of its pages that are no longer the file's (written to, or
        #: private copies: smaps' Anonymous); None when not known
        self.changed = changed

    @property
    def file_backed(self):
        return self.path.startswith("/")


#: what a mapping's line starts with (its start address, as the kernel
#: writes it); smaps' other lines start with a key's capital letter
_HEX_DIGITS = frozenset("0123456789abcdef")
#: the last line of each of smaps' blocks (since Linux 3.8)
_LAST_KEY = "\nVmFlags:"


def parse_maps(text):
    """[Mapping] of /proc/PID/maps' or /proc/PID/smaps' text."""
    return mappings_of(_blocks(text))


def _blocks(text):
    return _smaps_blocks(text) if _LAST_KEY in text else _line_blocks(text)


def mappings_of(blocks):
    """[Mapping] of (mapping's line, its Anonymous kB or None) pairs."""
    mappings = []
    for line, kilobytes in blocks:
        fields = line.split(None, 5)
        if len(fields) < 5 or fields[0].endswith(":") or line[:1] not in _HEX_DIGITS:
            continue
        start, _, end = fields[0].partition("-")
        perms = fields[1]
        path = fields[5] if len(fields) > 5 else ""
        if path.endswith(" (deleted)"):
            path = path[:-len(" (deleted)")]
        mappings.append(Mapping(int(start, 16), int(end, 16), perms[0] == "r",
                                perms[1] == "w", int(fields[2], 16), path, fields[3],
                                int(fields[4]), kilobytes))
    return mappings


def _smaps_blocks(text):
    """(mapping's line, its Anonymous kB or None) of each block of smaps'
    text, found by searching (the kernel escapes a newline in a path, so
    every block ends with its VmFlags line): 13,000 lines of a process with
    500 mappings are not each looked at."""
    at = 0
    while at < len(text):
        line_end = text.find("\n", at)
        if line_end < 0:
            yield text[at:], None
            return
        last = text.find(_LAST_KEY, line_end)
        block_end = len(text) if last < 0 else text.find("\n", last + 1)
        if block_end < 0:
            block_end = len(text)
        yield text[at:line_end], _anonymous(text, line_end, block_end)
        at = block_end + 1


def _anonymous(text, start, end):
    """smaps' Anonymous kB in text[start:end], None where not given."""
    key = text.find("\nAnonymous:", start, end)
    if key < 0:
        return None
    line_end = text.find("\n", key + 1, end)
    fields = text[key + 1:end if line_end < 0 else line_end].split()
    return int(fields[1]) if fields[1:2] and fields[1].isdigit() else None


def _line_blocks(text):
    """(mapping's line, its Anonymous kB or None) of each mapping of maps'
    text (or smaps' of a kernel without VmFlags), line by line."""
    line, kilobytes = None, None
    for each in text.splitlines():
        if each[:1] in _HEX_DIGITS:
            if line is not None:
                yield line, kilobytes
            line, kilobytes = each, None
        elif each.startswith("Anonymous:") and line is not None:
            fields = each.split()
            if fields[1:2] and fields[1].isdigit():
                kilobytes = int(fields[1])
    if line is not None:
        yield line, kilobytes


def read_maps(pid, changed=True):
    """[(mapping's line, its Anonymous kB or None)] of the process's
    mappings (mappings_of makes them Mappings), from smaps (which says
    which pages are no longer their file's); without ``changed``, from maps
    (a tenth of the text, and no page of the process looked at), which
    does not say.  The same lines read again are the same mappings."""
    with open(f"/proc/{pid}/{'smaps' if changed else 'maps'}") as stream:
        return list(_blocks(stream.read()))


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


def load_bias(image, header_address):
    loads = [s for s in image.segments() if s.type == PT_LOAD]
    if not loads:
        return None
    first = min(loads, key=lambda s: s.vaddr)
    return header_address - (first.vaddr - first.offset)


class MappedModule(Module):
    """A Module of a mapped file: ``path`` is where its file is read (a
    path under NO_FILE when it cannot be), ``mapped_as`` the name the
    process mapped it by, ``note`` why that name's file is not the one
    read."""

    __slots__ = ("mapped_as", "note")
    _fields = Module._fields + __slots__

    def __init__(self, path, load_bias, start, end, build_id=None, base=None, image=None,
                 mapped_as="", note=""):
        super().__init__(path, load_bias, start, end, build_id, base, image)
        self.mapped_as = mapped_as
        self.note = note


def file_modules(mappings, locate=None, memory=None, file_image=None):
    """A Module for each ELF file mapped from its offset 0: it starts at
    that mapping and ends with the last mapping of the same file that
    follows it.  ``locate(mapping)`` says where its file is (an
    images.Located; default: its path); one that cannot be read is
    described from ``memory`` (a Target), if given.  ``file_image(path,
    mapping)``: (load bias, build id) of a file's image (default: read
    from the file)."""
    modules = []
    for index, mapping in enumerate(mappings):
        if not mapping.file_backed or mapping.offset != 0:
            continue
        end = mapping.end
        for later in mappings[index + 1:]:
            if later.path != mapping.path or later.offset == 0:
                break
            end = later.end
        located = locate(mapping) if locate is not None else Located(mapping.path)
        if located.path:
            found = file_image(located.path, mapping) if file_image is not None \
                else file_image_at(located.path, mapping.start)
        elif memory is not None:
            found = _memory_image(memory, mapping.start)
        else:
            found = None
        if found is not None:
            bias, build_id = found
            modules.append(MappedModule(located.path or no_file_path(mapping.path), bias,
                                        mapping.start, end, build_id, mapping.start,
                                        mapped_as=mapping.path, note=located.note))
    return modules


def file_image_at(path, start):
    """(load bias, build id) of the ELF file at ``path`` mapped at
    ``start``, or None (not an ELF file: a locale archive, a font)."""
    found = read_elf(path, lambda image: (load_bias(image, start), image.build_id()))
    return None if found is None or found[0] is None else found


def _memory_image(memory, start):
    """(load bias, build id) of the ELF image at ``start`` in ``memory``."""
    try:
        image = memory_image(memory, start)
        bias = load_bias(image, start) if image is not None else None
    except (TargetMemoryError, ElfError, struct.error):
        return None
    return None if bias is None else (bias, memory_build_id(memory, start))


def vdso_module(data, start) -> Optional[Module]:
    """The Module of the vDSO image ``data`` mapped at ``start``."""
    try:
        image = ElfImage.from_file(io.BytesIO(data), VDSO)
        build_id = image.build_id()
        bias = load_bias(image, start)
    except (ElfError, struct.error):
        return None
    if bias is None:
        return None
    return Module(VDSO_NAME, bias, start, start + len(data), build_id, start, image=data)


def display_path(module):
    """The module's name in frames: the name it was mapped by, and why its
    file could not be read when it could not."""
    name = getattr(module, "mapped_as", "") or module.path
    note = getattr(module, "note", "")
    return f"{name} ({note})" if note else name
