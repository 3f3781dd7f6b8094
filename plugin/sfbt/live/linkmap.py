"""The shared libraries a process's (or a core's) memory lists: the
dynamic linker's ``r_debug`` (found through DT_DEBUG in the executable's
dynamic section) and its chain of ``link_map`` entries, each a library's
load bias (``l_addr``), name (``l_name``) and dynamic section (``l_ld``).
GDB reads the same list (solib-svr4): its libraries are those, named by
``l_name``.  sfbt reads it for the libraries of a core that has no file
list (NT_FILE: qemu-user's cores, some dumpers and older kernels), and
for the name a library's frames are said to be ``from`` (LibraryNames).

The memory is the process's: every read is bounded
(MAX_DYNAMIC_BYTES of dynamic section, MAX_ENTRIES entries, MAX_NAME
bytes of a name) and a chain that loops ends the list.  What cannot be
read ends the list there: the entries before it are kept and ``problem``
says why."""

from __future__ import annotations

import os
import stat
import struct
from types import SimpleNamespace

from ..elf import SHT_DYNSYM, ElfError, ElfImage, memory_image, read_elf
from ..errors import TargetMemoryError
from .core_notes import AT_BASE, AT_ENTRY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, NamedTuple, Optional, Set

    from ..unwind.target import Module
else:
    from ..values import NamedTuple

DT_NULL = 0
DT_DEBUG = 21
PT_DYNAMIC = 2
#: the most bytes of a dynamic section read (a few hundred in practice)
MAX_DYNAMIC_BYTES = 64 << 10
#: the most link_map entries followed (a process with more libraries is
#: shown with the first ones)
MAX_ENTRIES = 4096
#: the longest library name read (PATH_MAX)
MAX_NAME = 4096
#: the most dynamic symbols and bytes of their names read looking for
#: the dynamic linker's R_DEBUG_SYMBOL (its table holds a few dozen)
MAX_DYNAMIC_SYMBOLS = 1 << 16
MAX_DYNAMIC_STRINGS = 1 << 20
R_DEBUG_SYMBOL = b"_r_debug"
#: offsets in struct r_debug (64-bit) of r_map, and in struct link_map of
#: l_addr, l_name, l_ld and l_next
R_MAP = 8
L_ADDR, L_NAME, L_LD, L_NEXT = 0, 8, 16, 24
_NAME_CHUNK = 256


class LinkMapEntry(NamedTuple):
    """One loaded object: where its link_map is, its load bias, its name,
    where its dynamic section is (0: not known)."""

    address: int
    load_bias: int
    name: str
    dynamic: int = 0


class LinkMap(NamedTuple):
    """The entries read, and why the list ended early (None: it did not)."""

    entries: list
    problem: Optional[str] = None


def r_debug_address(read: Callable[[int, int], bytes], dynamic: int, size: int,
                    endian: str) -> Optional[int]:
    """The value of DT_DEBUG in the dynamic section at ``dynamic`` (of
    ``size`` bytes) in memory; None where there is none, it is 0 (a static
    program, or the dynamic linker had not set it yet) or the section
    cannot be read."""
    size = min(size, MAX_DYNAMIC_BYTES) & ~15
    try:
        data = read(dynamic, size)
    except TargetMemoryError:
        return None
    for tag, value in struct.iter_unpack(endian + "qQ", data):
        if tag == DT_NULL:
            break
        if tag == DT_DEBUG:
            return value or None
    return None


def read_link_map(read: Callable[[int, int], bytes], r_debug: int, endian: str) -> LinkMap:
    """The link map's entries after the first (the program itself, as GDB
    leaves it out), in order; at most MAX_ENTRIES, names cut at MAX_NAME
    bytes are left out."""
    word = struct.Struct(endian + "Q")
    entries: List[LinkMapEntry] = []
    try:
        address = word.unpack(read(r_debug + R_MAP, 8))[0]
    except TargetMemoryError:
        return LinkMap(entries, f"r_debug at {r_debug:#x} cannot be read")
    seen: Set[int] = set()
    first = True
    while address:
        if address in seen:
            return LinkMap(entries, f"the link map loops back to its entry at {address:#x}")
        if len(seen) >= MAX_ENTRIES:
            return LinkMap(entries, f"the link map has more than {MAX_ENTRIES} entries")
        seen.add(address)
        try:
            record = read(address, L_NEXT + 8)
        except TargetMemoryError:
            return LinkMap(entries, f"a link map entry at {address:#x} cannot be read")
        load_bias, name_at, dynamic = struct.unpack_from(endian + "QQQ", record, L_ADDR)
        (following,) = word.unpack_from(record, L_NEXT)
        if not first:
            name = read_name(read, name_at)
            if name is None:
                return LinkMap(entries, f"the name of the link map entry at {address:#x} "
                               f"(at {name_at:#x}) cannot be read or is longer than "
                               f"{MAX_NAME} bytes")
            entries.append(LinkMapEntry(address, load_bias, name, dynamic))
        first = False
        address = following
    return LinkMap(entries)


def read_name(read: Callable[[int, int], bytes], address: int) -> Optional[str]:
    """The NUL-terminated name at ``address``, read a chunk at a time
    (never past the page it ends in); None where it cannot be read or is
    longer than MAX_NAME bytes."""
    if not address:
        return ""
    name = b""
    while len(name) < MAX_NAME:
        at = address + len(name)
        size = min(_NAME_CHUNK, 0x1000 - at % 0x1000)
        try:
            chunk = read(at, size)
        except TargetMemoryError:
            return None
        end = chunk.find(b"\0")
        if end >= 0:
            name += chunk[:end]
            return name.decode("utf-8", "surrogateescape") if len(name) < MAX_NAME else None
        name += chunk
    return None


def find_r_debug(read: Callable[[int, int], bytes], modules: List[Module],
                 auxv: Dict[int, int], endian: str) -> Optional[int]:
    """Where ``r_debug`` is, as GDB's solib-svr4 finds it: DT_DEBUG in the
    dynamic section of the program (the module its entry point AT_ENTRY
    is in), else the ``_r_debug`` symbol of the dynamic linker (the module
    at AT_BASE; the program itself where AT_BASE is 0: the dynamic linker
    run as a program, ``ld.so ./prog``); None where neither gives one (a
    static program)."""
    def module_at(address: Optional[int]) -> Optional[Module]:
        return next((m for m in modules if address and m.image is None
                     and m.start <= address < m.end), None)
    program = module_at(auxv.get(AT_ENTRY))
    found = executable_r_debug(read, program, endian) if program is not None else None
    if found is None:
        loader = module_at(auxv.get(AT_BASE)) or program
        found = loader_r_debug(loader) if loader is not None else None
    return found


def executable_r_debug(read: Callable[[int, int], bytes], executable: Module,
                       endian: str) -> Optional[int]:
    """The address of ``r_debug`` that DT_DEBUG holds in the dynamic
    section of ``executable`` (its program headers and dynamic section
    read from memory, as the process has them); None where there is none
    (a static program, the dynamic linker) or it cannot be read."""
    try:
        image = memory_image(SimpleNamespace(read_memory=read), executable.image_base)
        dynamic = next((s for s in image.segments() if s.type == PT_DYNAMIC),
                       None) if image is not None else None
    except (TargetMemoryError, ElfError, struct.error):
        return None
    if dynamic is None:
        return None
    return r_debug_address(read, executable.load_bias + dynamic.vaddr, dynamic.memsz, endian)


def loader_r_debug(loader: Module) -> Optional[int]:
    """The run-time address of ``_r_debug`` among the dynamic symbols of
    the file ``loader`` is read from (the module's own file: found as the
    mapped one), or None."""
    def find(image: ElfImage) -> Optional[int]:
        symbols = image.section(type=SHT_DYNSYM)
        sections = image.sections()
        if symbols is None or not symbols.link < len(sections):
            return None
        strings = sections[symbols.link]
        names = image.read(strings.offset, min(strings.size, MAX_DYNAMIC_STRINGS))
        table = image.read(symbols.offset, min(symbols.size, MAX_DYNAMIC_SYMBOLS * 24))
        wanted = R_DEBUG_SYMBOL + b"\0"
        for name_at, _, _, section, value, _ in struct.iter_unpack(
                image.header.endian + "IBBHQQ", table[:len(table) // 24 * 24]):
            if section and names[name_at:name_at + len(wanted)] == wanted:
                return value
        return None
    found = read_elf(loader.path, find)
    return None if found is None else loader.load_bias + found


class LibraryNames:
    """The name GDB gives each library of a process or a core in its
    frames (``from LIB``): the ``l_name`` of the link map entry loaded at
    the module's load bias with its dynamic section in the module's
    range, as GDB opens it first (under ``sysroot`` when one is given and
    the name is absolute, else the name itself, relative ones from the
    current directory: the name GDB shows), where that is the very file
    the module is read from (same device and inode: ``os.stat`` only,
    nothing is opened by a name the process wrote).  ``__call__(module)`` is that name, or None
    (no link map, no entry, or another file, or none, at that name: the
    mapped path is shown).  The list is read on the first call, through
    ``r_debug()`` (its address or None) and ``read``; a list cut short
    names the entries before the cut."""

    def __init__(self, read: Callable[[int, int], bytes], r_debug: Callable[[], Optional[int]],
                 endian: str, sysroot: Optional[str] = None):
        self._read = read
        self._r_debug = r_debug
        self._endian = endian
        self._sysroot = sysroot
        self._entries: Optional[Dict[int, List[LinkMapEntry]]] = None  # by load bias
        self._names: Dict[Module, Optional[str]] = {}

    def __call__(self, module: Module) -> Optional[str]:
        if module not in self._names:
            self._names[module] = self._name(module)
        return self._names[module]

    def _name(self, module: Module) -> Optional[str]:
        if module.image is not None:  # the vDSO: GDB lists it as no library
            return None
        for entry in self._by_bias().get(module.load_bias, ()):
            if module.start <= entry.dynamic < module.end and entry.name:
                path = self._opened_as(entry.name)
                return path if _same_file(path, module.path) else None
        return None

    def _opened_as(self, name: str) -> str:
        """The path GDB opens first for a library named ``name``."""
        if self._sysroot and name.startswith("/"):
            return os.path.join(self._sysroot, name.lstrip("/"))
        return name

    def _by_bias(self) -> Dict[int, List[LinkMapEntry]]:
        if self._entries is None:
            self._entries = {}
            r_debug = self._r_debug()
            if r_debug is not None:
                for entry in read_link_map(self._read, r_debug, self._endian).entries:
                    self._entries.setdefault(entry.load_bias, []).append(entry)
        return self._entries


def _same_file(path: str, other: str) -> bool:
    """Whether ``path`` and ``other`` are one regular file (device and
    inode, through their links)."""
    try:
        one, two = os.stat(path), os.stat(other)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(two.st_mode) and (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino)
