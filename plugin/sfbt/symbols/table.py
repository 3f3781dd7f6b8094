"""An ELF file's minimal symbols, as GDB reads them (gdb/elfread.c) and
finds the one of an address (gdb/minsyms.c), read in place: sorted
starts, sizes, name offsets and sections in arrays (no object per
symbol), and a name read from the file's string table only when an
address falls in its symbol.

The symbols: each named one of an executable section (functions, and the
labels and objects hand-written assembly puts there), but section and
file symbols, compiler labels (``.L...``) and the mapping symbols of ARM,
AArch64 and RISC-V (``$x``, ``$d``); those of .symtab, of .dynsym in a
file without .symtab only (named without their versions, as BFD gives
them to GDB).  They are sorted by address, then by name (as strcmp), one
kept of each (address, section, name).

``best`` is GDB's lookup_minimal_symbol_by_pc_section: the symbols of
the address's section are looked at backwards from the last one (by
name) at the highest address at or before it, a global one taken before
a local or ifunc one just after it of the same address and size, until
one with a size: that one if it holds the address (a label inside a
function gives way to it), else the first without a size passed on the
way, if any (a symbol without a size reaches to the end of its section,
or to the next one with a size).  Of the aliases of one function GDB so
shows the last by name:
``__libc_start_main_impl`` of ``__libc_start_main_alias_1``,
``__libc_start_main_alias_2`` and ``__libc_start_main_impl``."""

from __future__ import annotations

import heapq
import re
import struct
import sys
from array import array
from bisect import bisect_right

from ..elf import ElfImage, Section
from ..errors import left_out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Sequence, Tuple

    #: an array's typecode and its item size, as sfbt's cache keeps it
    Kinds = Sequence[Tuple[str, int]]
#: the arrays of a cached table: starts, sizes, name offsets, sections
SYMBOL_KINDS: Kinds = (("Q", 8), ("Q", 8), ("I", 4), ("I", 4))


def packed_arrays(arrays: "List[array[int]]", kinds: Kinds) -> bytes:
    """Arrays of one length as sfbt's cache keeps them: little-endian, one
    after the other, of the typecodes of ``kinds``."""
    packed = [array(kind, values) for (kind, _), values in zip(kinds, arrays)]
    if sys.byteorder != "little":
        for values in packed:
            values.byteswap()
    return b"".join(values.tobytes() for values in packed)


def unpacked_arrays(data: bytes, at: int, count: int, kinds: Kinds) -> "List[array[int]]":
    """The arrays of ``count`` values that packed_arrays wrote at ``at``
    (the caller has checked the length)."""
    arrays = []
    for kind, size in kinds:
        values = array(kind)
        values.frombytes(data[at:at + size * count])
        if sys.byteorder != "little":
            values.byteswap()
        arrays.append(values)
        at += size * count
    return arrays


STT_SECTION = 3
STT_FILE = 4
STT_GNU_IFUNC = 10
STB_LOCAL = 0
#: the bindings of symbols GDB takes for global: global, weak, GNU unique
GLOBAL_BINDINGS = (1, 2, 10)
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_TLS = 0x400
SYMBOL_SIZE = 24
#: bytes of one name read at most
MAX_NAME = 4096
#: symbols looked at backwards from an address at most (GDB: all of them,
#: which a file of a million labels without a size would make slow)
MAX_SCAN = 1 << 12
#: symbols of one start ordered by their whole names at most (more, by
#: their first ALIAS_HEAD bytes: GDB orders them all by their whole names)
MAX_NAME_SORTED = 1 << 10
ALIAS_HEAD = 64
#: symbols of one start kept at most: the last by name (``best`` looks at
#: no more than MAX_SCAN of them)
MAX_ALIASES = 1 << 14
#: symbols of a table kept at most (about 60 bytes each while sorted):
#: more are left out, said in one line
MAX_SYMBOLS = 1 << 21
#: bytes of a string table read at most (symbols named beyond: left out)
MAX_STRINGS = 1 << 26
#: bytes of a symbol table read at a time (whole symbols)
MAX_CHUNK = SYMBOL_SIZE << 16
#: the machines whose mapping symbols BFD hides from GDB: ARM, AArch64, RISC-V
MAPPING_MACHINES = (40, 183, 243)
MAPPING_SYMBOL = re.compile(rb"\$([adtxmfp]|xrv.*)(\..*)?\Z", re.S)
#: the head of the table's bytes (sfbt's cache): string table's section, count
_HEAD = struct.Struct("<IQ")


def name_bytes(strings: bytes, at: int, most: int = MAX_NAME) -> bytes:
    """The name at ``at`` in a string table's bytes, at most ``most`` of them."""
    end = strings.find(b"\0", at, at + most)
    return strings[at:end if end >= 0 else at + most]


class FunctionTable:
    """The minimal symbols of one symbol table: ``starts`` sorted, and for
    each its ``sizes``, the offset of its name in the string table
    ``strings`` (a section) and ``sections``: its section's index times 2,
    plus 1 for a global symbol that is not an ifunc (GDB's mst_text);
    names are read from ``image``, whose sections say where an address
    is."""

    def __init__(self, starts: "array[int]", sizes: "array[int]", names: "array[int]",
                 sections: "array[int]", strings: Optional[Section], image: ElfImage):
        self.starts = starts
        self.sizes = sizes
        self.names = names
        self.sections = sections
        self.strings = strings
        self._read: Callable[[int, int], bytes] = image.read
        #: the string table's bytes and the symbols at each name offset (address_of)
        self._by_name: Optional[Tuple[bytes, Dict[int, List[int]]]] = None
        #: (start, end, index) of the sections an address may be in
        self._allocated = [(s.addr, s.addr + s.size, s.index) for s in image.sections()
                           if s.flags & SHF_ALLOC and not s.flags & SHF_TLS and s.size]

    def __len__(self) -> int:
        return len(self.starts)

    def best(self, address: int) -> Optional[int]:
        """The index of GDB's symbol of the file address, or None."""
        section = next((index for start, end, index in self._allocated
                        if start <= address < end), None)
        hi = bisect_right(self.starts, address) - 1
        if section is None or hi < 0:
            return None
        starts, sizes, sections = self.starts, self.sizes, self.sections
        unsized = -1
        stop = max(-1, hi - MAX_SCAN)
        while hi > stop:
            if sections[hi] >> 1 != section:
                hi -= 1
            elif hi and not sections[hi] & 1 and sections[hi - 1] & 1 \
                    and sizes[hi] == sizes[hi - 1] and starts[hi] == starts[hi - 1] \
                    and sections[hi] >> 1 == sections[hi - 1] >> 1:
                hi -= 1  # the global one of the same address and size
            elif not sizes[hi]:
                if unsized < 0:
                    unsized = hi
                hi -= 1
            elif hi and starts[hi] + sizes[hi] <= address < starts[hi - 1] + sizes[hi - 1]:
                hi -= 1  # inside the one before, which holds this one
            else:
                break
        if hi <= stop or address >= starts[hi] + sizes[hi]:
            return unsized if unsized >= 0 else None
        return hi

    def name(self, index: int) -> str:
        """The name of the symbol at ``index``."""
        strings, at = self.strings, self.names[index]
        if strings is None or at >= strings.size:
            return "??"
        data = self._read(strings.offset + at, min(MAX_NAME, strings.size - at))
        end = data.find(b"\0")
        # bytes that are not UTF-8 kept, to be printed escaped (sfbt.printable)
        return data[:end if end >= 0 else len(data)].decode("utf-8", "surrogateescape")

    def address_of(self, name: str) -> Optional[Tuple[bool, int]]:
        """(whether global, start) of GDB's minimal symbol ``name`` in this
        table (its lookup_minimal_symbol in one objfile), or None.  GDB
        names a symbol of a versioned name (``pthread_kill@@GLIBC_2.34``,
        and in a .symtab, which holds no versions' flags,
        ``pthread_kill@GLIBC_2.2.5`` too) also without its version; its
        hash chains hold the symbols in address order, the last first: it
        takes the first global one it meets (the highest), else the last
        local one (the lowest)."""
        strings = self.strings
        if strings is None or not len(self.starts):
            return None
        if self._by_name is None:
            symbols: Dict[int, List[int]] = {}
            for index, at in enumerate(self.names):
                symbols.setdefault(at, []).append(index)
            self._by_name = (self._read(strings.offset, min(strings.size, MAX_STRINGS)),
                             symbols)
        data, symbols = self._by_name
        encoded = name.encode("utf-8", "surrogateescape")
        best = None  # (global, start, or minus start where local)
        for wanted in (encoded + b"\0", encoded + b"@"):
            at = data.find(wanted)
            while at >= 0:
                for index in symbols.get(at, ()):
                    is_global = bool(self.sections[index] & 1)
                    start = self.starts[index]
                    found = (is_global, start if is_global else -start)
                    best = found if best is None else max(best, found)
                at = data.find(wanted, at + 1)
        return (best[0], abs(best[1])) if best is not None else None

    @classmethod
    def read(cls, image: ElfImage) -> "FunctionTable":
        """The table of the image's .symtab, else (a file without one) of
        its .dynsym.  Raises what image reads raise (ElfError, OSError)."""
        sections = image.sections()
        for wanted in (".symtab", ".dynsym"):
            table = image.section(wanted)
            if table is None or table.size < 2 * SYMBOL_SIZE \
                    or not 0 < table.link < len(sections):
                continue
            strings = sections[table.link]
            names = image.read(strings.offset, min(strings.size, MAX_STRINGS)) \
                if strings.size else b""
            found = _symbols(image, table, names, sections)
            beyond = found[4]
            if beyond or strings.size > MAX_STRINGS:
                left_out(_left_out_text(image, wanted, beyond, strings.size))
            return cls(*_arrays(found, names), strings, image)
        return cls.empty(image)

    @classmethod
    def empty(cls, image: ElfImage) -> "FunctionTable":
        """The table of a file without symbols."""
        return cls(array("Q"), array("Q"), array("I"), array("I"), None, image)

    def to_bytes(self) -> bytes:
        """The table as sfbt's cache keeps it (little-endian arrays)."""
        index = self.strings.index if self.strings is not None else 0
        return _HEAD.pack(index, len(self.starts)) + packed_arrays(
            [self.starts, self.sizes, self.names, self.sections], SYMBOL_KINDS)

    @classmethod
    def from_bytes(cls, data: bytes, image: ElfImage) -> Optional["FunctionTable"]:
        """The table to_bytes wrote for this image, or None when the bytes
        do not have its shape."""
        if len(data) < _HEAD.size:
            return None
        index, count = _HEAD.unpack_from(data)
        sections = image.sections()
        width = sum(size for _, size in SYMBOL_KINDS)
        if len(data) != _HEAD.size + width * count or (count and not 0 < index < len(sections)):
            return None
        starts, sizes, names, symbol_sections = unpacked_arrays(data, _HEAD.size, count,
                                                                 SYMBOL_KINDS)
        return cls(starts, sizes, names, symbol_sections, sections[index] if count else None,
                   image)


def _symbols(image: ElfImage, table: Section, strings: bytes, sections: List[Section]
             ) -> "Tuple[array[int], array[int], array[int], array[int], int]":
    """(starts, sizes, name offsets, sections * 2 + global) of the
    symbols GDB keeps of a symbol table, in the table's order, read
    MAX_CHUNK bytes at a time into arrays (no object per symbol, no name
    copied but a mapping symbol's: a hostile table's may be many and
    long), the first MAX_SYMBOLS of them; and how many more were left out."""
    code = {s.index for s in sections if s.flags & SHF_EXECINSTR}
    mapping = image.header.machine in MAPPING_MACHINES
    limit = len(strings)
    starts, sizes, names, kinds = array("Q"), array("Q"), array("I"), array("I")
    beyond = 0
    unpack = struct.Struct(image.header.endian + "IBBHQQ").iter_unpack
    total = table.size // SYMBOL_SIZE * SYMBOL_SIZE
    for at in range(0, total, MAX_CHUNK):
        data = image.read(table.offset + at, min(MAX_CHUNK, total - at))
        for name_at, info, _, shndx, value, size in unpack(data):
            kind, binding = info & 0xF, info >> 4
            if shndx not in code or kind in (STT_SECTION, STT_FILE) or name_at >= limit \
                    or not strings[name_at]:
                continue
            if mapping and strings[name_at] == 0x24 \
                    and MAPPING_SYMBOL.match(name_bytes(strings, name_at)):  # "$x", "$d"
                continue
            if binding == STB_LOCAL:
                if strings.startswith((b".L", b"$L"), name_at):  # compilers' labels
                    continue
                text = False
            elif binding in GLOBAL_BINDINGS:
                text = kind != STT_GNU_IFUNC
            else:
                continue
            if len(starts) >= MAX_SYMBOLS:
                beyond += 1
                continue
            starts.append(value)
            sizes.append(size)
            names.append(name_at)
            kinds.append(shndx << 1 | text)
    return starts, sizes, names, kinds, beyond


def _arrays(found: "Tuple[array[int], array[int], array[int], array[int], int]",
            strings: bytes) -> "Tuple[array[int], array[int], array[int], array[int]]":
    """(starts, sizes, name offsets, sections) of found, sorted by start
    then name, one of each (start, section, name) kept.  The order is one
    list of ints (start, then index: no tuple per symbol); names are read
    for the symbols of one start at a time, where there are several, and
    of more than MAX_ALIASES only the last MAX_ALIASES by name are kept
    (``best`` never looks further back than MAX_SCAN)."""
    starts, sizes, names, kinds, _ = found
    shift = max(1, len(starts).bit_length())
    order = sorted(start << shift | index for index, start in enumerate(starts))
    mask = (1 << shift) - 1
    kept = array("Q" if shift > 32 else "I")
    at = 0
    while at < len(order):
        end = at + 1
        start = order[at] >> shift
        while end < len(order) and order[end] >> shift == start:
            end += 1
        if end == at + 1:
            kept.append(order[at] & mask)
        else:  # a hostile table's thousands of long names at one start: their heads
            group = (order[i] & mask for i in range(at, end))
            width = MAX_NAME if end - at <= MAX_NAME_SORTED else ALIAS_HEAD

            def key(index: int) -> Tuple[bytes, int, int, int]:
                """The name, then as the symbols were sorted before (a tie)."""
                return (name_bytes(strings, names[index], width), names[index],
                        sizes[index], kinds[index])
            ordered = heapq.nlargest(MAX_ALIASES, group, key=key)[::-1] \
                if end - at > MAX_ALIASES else sorted(group, key=key)
            named = [(key(index)[0], index) for index in ordered]
            kept.extend(index for (name, index), after in zip(named, named[1:] + [None])
                        if after is None or (name, kinds[index] >> 1)
                        != (after[0], kinds[after[1]] >> 1))
        at = end
    del order
    return (array("Q", (starts[i] for i in kept)), array("Q", (sizes[i] for i in kept)),
            array("I", (names[i] for i in kept)), array("I", (kinds[i] for i in kept)))


def _left_out_text(image: ElfImage, table: str, beyond: int, strings_size: int) -> str:
    """The line that says what the limits left out of a symbol table."""
    parts = []
    if beyond:
        parts.append(f"{beyond:,} symbols beyond the first {MAX_SYMBOLS:,} left out")
    if strings_size > MAX_STRINGS:
        parts.append(f"symbols named beyond the first {MAX_STRINGS:,} bytes of its "
                     f"{strings_size:,}-byte string table left out")
    return f"{image.name}: {table}: " + "; ".join(parts)
