"""An ELF file's function symbols, read in place: sorted starts, ends and
name offsets in three arrays (no object per symbol), and a name read from
the file's string table only when an address falls in its function.

Of the symbols at one address a global one is kept, else a weak one,
else a local one, unversioned names (``clock_nanosleep``) before
versioned ones (``clock_nanosleep@GLIBC_2.2.5``).  A symbol without a
size (hand-written assembly: ``_init``, ``_fini``) ends where the next
one starts, and at the latest at the end of its section, as GDB's
minimal symbols do."""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right

from ..elf import ElfImage, Section

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Tuple


#: the arrays of a cached table: two of 64-bit values, one of 32-bit ones
ARRAY_KINDS = (("Q", 8), ("Q", 8), ("I", 4))


def packed_arrays(arrays: "List[array[int]]") -> bytes:
    """ARRAY_KINDS arrays of one length as sfbt's cache keeps them:
    little-endian, one after the other."""
    packed = [array(kind, values) for (kind, _), values in zip(ARRAY_KINDS, arrays)]
    if sys.byteorder != "little":
        for values in packed:
            values.byteswap()
    return b"".join(values.tobytes() for values in packed)


def unpacked_arrays(data: bytes, at: int, count: int) -> "List[array[int]]":
    """The ARRAY_KINDS arrays of ``count`` values that packed_arrays wrote
    at ``at`` (the caller has checked the length)."""
    arrays = []
    for kind, size in ARRAY_KINDS:
        values = array(kind)
        values.frombytes(data[at:at + size * count])
        if sys.byteorder != "little":
            values.byteswap()
        arrays.append(values)
        at += size * count
    return arrays

STT_FUNC = 2
STT_GNU_IFUNC = 10
STB_LOCAL = 0
STB_GLOBAL = 1
SYMBOL_SIZE = 24
#: bytes of one name read at most
MAX_NAME = 4096
#: the head of the table's bytes (sfbt's cache): string table's section, count
_HEAD = struct.Struct("<IQ")


def _rank(info: int, name: bytes) -> int:
    """Lower is preferred: global, weak, local; unversioned first."""
    binding = info >> 4
    return (binding == STB_LOCAL) + (binding not in (STB_GLOBAL, STB_LOCAL)) + 3 * (b"@" in name)


def _name_bytes(strings: bytes, at: int) -> bytes:
    end = strings.find(b"\0", at, at + MAX_NAME)
    return strings[at:end if end >= 0 else at + MAX_NAME]


class FunctionTable:
    """The function symbols of one symbol table: ``starts`` sorted, and
    for each its ``ends`` and the offset of its name in the string table
    ``strings`` (a section); ``read(offset, size)`` reads the file.  Each
    name is shown followed by ``suffix`` (PLT stubs': ``@plt``)."""

    def __init__(self, starts: "array[int]", ends: "array[int]", names: "array[int]",
                 strings: Optional[Section], read: Callable[[int, int], bytes],
                 suffix: str = ""):
        self.starts = starts
        self.ends = ends
        self.names = names
        self.strings = strings
        self._read = read
        self.suffix = suffix
        self._named: Dict[int, str] = {}

    def name_entries(self, names: Dict[int, str]) -> None:
        """Give entries (by index) names of their own, not in the string
        table."""
        self._named.update(names)

    def __len__(self) -> int:
        return len(self.starts)

    def function(self, address: int) -> Optional[str]:
        """The name of the function holding the file address, or None."""
        i = bisect_right(self.starts, address) - 1
        if i < 0 or address >= self.ends[i]:
            return None
        name = self._named.get(i)
        if name is None:
            name = self._named[i] = self._name(self.names[i])
        return name

    def _name(self, at: int) -> str:
        strings = self.strings
        if strings is None or at >= strings.size:
            return "??"
        data = self._read(strings.offset + at, min(MAX_NAME, strings.size - at))
        end = data.find(b"\0")
        # bytes that are not UTF-8 kept, to be printed escaped (sfbt.printable)
        return data[:end if end >= 0 else len(data)].decode("utf-8", "surrogateescape") \
            + self.suffix

    @classmethod
    def read(cls, image: ElfImage) -> "FunctionTable":
        """The table of the image's .symtab, else of its .dynsym; empty
        when neither has a function symbol.  Raises what image reads
        raise (ElfError, OSError)."""
        sections = image.sections()
        for wanted in (".symtab", ".dynsym"):
            table = image.section(wanted)
            if table is None or not 0 < table.link < len(sections):
                continue
            strings = sections[table.link]
            found = _functions(image.section_data(table), image.section_data(strings),
                               image.header.endian)
            if found:
                return cls(*_with_ends(found, sections), strings, image.read)
        return cls.empty(image)

    @classmethod
    def empty(cls, image: ElfImage) -> "FunctionTable":
        """The table of a file without function symbols."""
        return cls(array("Q"), array("Q"), array("I"), None, image.read)

    def to_bytes(self) -> bytes:
        """The table as sfbt's cache keeps it (little-endian arrays)."""
        index = self.strings.index if self.strings is not None else 0
        return _HEAD.pack(index, len(self.starts)) + packed_arrays(
            [self.starts, self.ends, self.names])

    @classmethod
    def from_bytes(cls, data: bytes, image: ElfImage) -> Optional["FunctionTable"]:
        """The table to_bytes wrote for this image, or None when the bytes
        do not have its shape."""
        if len(data) < _HEAD.size:
            return None
        index, count = _HEAD.unpack_from(data)
        sections = image.sections()
        if len(data) != _HEAD.size + 20 * count or (count and not 0 < index < len(sections)):
            return None
        starts, ends, names = unpacked_arrays(data, _HEAD.size, count)
        return cls(starts, ends, names, sections[index] if count else None, image.read)


def _functions(data: bytes, strings: bytes, endian: str) -> Dict[int, Tuple[int, int, int, int]]:
    """{start: (size, name offset, section index, info)} of the function
    symbols of a symbol table's bytes, one per start (the preferred)."""
    found: Dict[int, Tuple[int, int, int, int]] = {}
    unpack = struct.Struct(endian + "IBBHQQ").iter_unpack
    limit = len(strings)
    for name_at, info, _, shndx, value, size in unpack(
            data[:len(data) // SYMBOL_SIZE * SYMBOL_SIZE]):
        if (info & 0xF) not in (STT_FUNC, STT_GNU_IFUNC) or not value or not shndx \
                or name_at >= limit or not strings[name_at]:
            continue
        old = found.get(value)
        if old is None or _rank(info, _name_bytes(strings, name_at)) < _rank(
                old[3], _name_bytes(strings, old[1])):
            found[value] = (size, name_at, shndx, info)
    return found


def _with_ends(found: Dict[int, Tuple[int, int, int, int]], sections: List[Section]
               ) -> Tuple["array[int]", "array[int]", "array[int]"]:
    """(starts, ends, name offsets) of found, sorted by start."""
    starts = array("Q", sorted(found))
    ends = array("Q", bytes(8 * len(starts)))
    names = array("I", bytes(4 * len(starts)))
    last = len(starts) - 1
    for i, start in enumerate(starts):
        size, name_at, shndx, _ = found[start]
        if size:
            end = start + size
        else:
            end = start + 1
            if shndx < len(sections):
                section = sections[shndx]
                if section.addr + section.size > start:
                    end = section.addr + section.size
            if i < last:
                end = min(end, starts[i + 1])
        ends[i] = min(end, (1 << 64) - 1)
        names[i] = name_at
    return starts, ends, names
