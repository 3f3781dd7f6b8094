"""The shared libraries a core's memory lists: the dynamic linker's
``r_debug`` (found through DT_DEBUG in the executable's dynamic section)
and its chain of ``link_map`` entries, each a library's load bias
(``l_addr``) and name (``l_name``).  GDB reads the same list
(solib-svr4) where a core has no file list (NT_FILE: qemu-user's cores,
some dumpers and older kernels).

The memory is the core's, written by the process: every read is bounded
(MAX_DYNAMIC_BYTES of dynamic section, MAX_ENTRIES entries, MAX_NAME
bytes of a name) and a chain that loops ends the list.  What cannot be
read ends the list there: the entries before it are kept and ``problem``
says why."""

from __future__ import annotations

import struct

from ..errors import TargetMemoryError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, NamedTuple, Optional
else:
    from ..values import NamedTuple

DT_NULL = 0
DT_DEBUG = 21
#: the most bytes of a dynamic section read (a few hundred in practice)
MAX_DYNAMIC_BYTES = 64 << 10
#: the most link_map entries followed (a process with more libraries is
#: shown with the first ones)
MAX_ENTRIES = 4096
#: the longest library name read (PATH_MAX)
MAX_NAME = 4096
#: offsets in struct r_debug (64-bit) of r_map, and in struct link_map of
#: l_addr, l_name and l_next
R_MAP = 8
L_ADDR, L_NAME, L_NEXT = 0, 8, 24
_NAME_CHUNK = 256


class LinkMapEntry(NamedTuple):
    """One loaded object: where its link_map is, its load bias, its name."""

    address: int
    load_bias: int
    name: str


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
    seen = set()
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
        load_bias, name_at = struct.unpack_from(endian + "QQ", record, L_ADDR)
        (following,) = word.unpack_from(record, L_NEXT)
        if not first:
            name = read_name(read, name_at)
            if name is None:
                return LinkMap(entries, f"the name of the link map entry at {address:#x} "
                               f"(at {name_at:#x}) cannot be read or is longer than "
                               f"{MAX_NAME} bytes")
            entries.append(LinkMapEntry(address, load_bias, name))
        first = False
        address = following
    return LinkMap(entries)


def read_name(read, address) -> Optional[str]:
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
