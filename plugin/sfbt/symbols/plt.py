"""Names of PLT stubs, as GDB gives them (``puts@plt``): each entry of
.plt, .plt.sec and .plt.got jumps through a GOT slot, and the dynamic
relocation of that slot names the function, or is an IRELATIVE one
(``*ABS*+0x9f550@plt``): BFD's synthetic symbols, which GDB shows, are
found the same way.  The slot is decoded from the
entry's instructions: x86-64's ``jmp *disp32(%rip)``, AArch64's
``adrp x16, page`` then ``ldr x17, [x16, #offset]``."""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right

from ..elf import SHT_RELA, ElfImage, Section
from ..names import demangled
from .table import name_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterator, List, Optional, Tuple, Union

EM_X86_64 = 62
EM_AARCH64 = 183
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")
#: bytes of one section of stubs or relocations read at most
MAX_BYTES = 1 << 24
#: the IRELATIVE relocation type of each machine
IRELATIVE = {EM_X86_64: 37, EM_AARCH64: 1032}


def in_plt(image: ElfImage, address: int) -> bool:
    """Whether a file address is in a section of PLT stubs (a separate
    debug file keeps their addresses, not their bytes)."""
    return any(s.name in PLT_SECTIONS and s.addr <= address < s.addr + s.size
               for s in image.sections())


class StubTable:
    """The PLT stubs of one file: ``starts`` sorted, each stub's end and
    name."""

    def __init__(self, starts: "array[int]", ends: "array[int]", names: List[str]):
        self.starts = starts
        self.ends = ends
        self.names = names

    @classmethod
    def empty(cls) -> "StubTable":
        return cls(array("Q"), array("Q"), [])

    def __len__(self) -> int:
        return len(self.starts)

    def function(self, address: int) -> Optional[str]:
        """The name of the stub holding the file address, or None."""
        i = bisect_right(self.starts, address) - 1
        return self.names[i] if i >= 0 and address < self.ends[i] else None


def plt_table(image: ElfImage) -> StubTable:
    """The image's PLT entries whose GOT slot a dynamic relocation names,
    named after .dynsym's symbols (``puts@plt``)."""
    sections = image.sections()
    dynsym = image.section(".dynsym")
    decode = {EM_X86_64: _x86_64_slot, EM_AARCH64: _aarch64_slot}.get(image.header.machine)
    if decode is None or dynsym is None or not 0 < dynsym.link < len(sections):
        return StubTable.empty()
    stubs: Dict[int, List[Tuple[int, int]]] = {}  # GOT slot -> [(start, end)]
    for section in sections:
        if section.name not in PLT_SECTIONS or section.size > MAX_BYTES:
            continue
        data = image.section_data(section)
        size = section.entsize or 16
        for at in range(0, len(data) - size + 1, size):
            slot = decode(data[at:at + size], section.addr + at, image.header.endian)
            if slot >= 0:
                stubs.setdefault(slot, []).append((section.addr + at, section.addr + at + size))
    slots = _slot_names(image, sections, dynsym, stubs) if stubs else {}
    found = {start: (end, slots[slot]) for slot, entries in stubs.items() if slot in slots
             for start, end in entries}
    strings = sections[dynsym.link]
    names = image.section_data(strings) if found and strings.size <= MAX_BYTES else b""
    starts = array("Q", sorted(found))
    return StubTable(starts, array("Q", (found[s][0] for s in starts)),
                     [_stub_name(found[s][1], names) for s in starts])


def _stub_name(name: Union[int, str], strings: bytes) -> str:
    """A stub's name: of its symbol (the offset of its name in .dynstr),
    or of its IRELATIVE relocation, then ``@plt``."""
    if isinstance(name, str):
        return name + "@plt"
    if name >= len(strings):
        return "??"
    # bytes that are not UTF-8 kept, to be printed escaped (sfbt.printable);
    # a C++ name demangled (``std::thread::join()@plt``), as GDB prints it
    return demangled(name_bytes(strings, name).decode("utf-8", "surrogateescape")) + "@plt"


def _slot_names(image: ElfImage, sections: List[Section], dynsym: Section,
                stubs: Dict[int, List[Tuple[int, int]]]) -> Dict[int, Union[int, str]]:
    """{GOT slot address: name offset in .dynstr, or the name of an
    IRELATIVE relocation's target} of the dynamic relocations (.rela.plt's,
    .rela.dyn's) of the slots of ``stubs``: a relocation bomb (more
    relocations than stubs) costs no more than its bytes."""
    irelative = IRELATIVE.get(image.header.machine)
    symbols = image.section_data(dynsym) if dynsym.size <= MAX_BYTES else b""
    endian = image.header.endian
    slots: Dict[int, Union[int, str]] = {}
    for section in sections:
        if section.type != SHT_RELA or section.link != dynsym.index \
                or section.size > MAX_BYTES:
            continue
        data = image.section_data(section)
        for offset, info, addend in struct.iter_unpack(endian + "QQq",
                                                       data[:len(data) // 24 * 24]):
            if offset not in stubs:
                continue
            at = (info >> 32) * 24
            if at and at + 4 <= len(symbols):
                slots[offset] = struct.unpack_from(endian + "I", symbols, at)[0]
            elif not at and info & 0xFFFFFFFF == irelative:
                slots[offset] = f"*ABS*+{addend:#x}"
    return slots


def _x86_64_slot(entry: bytes, address: int, endian: str) -> int:
    """The slot of an entry's ``jmp *disp32(%rip)`` (ff 25), or -1."""
    at = entry.find(b"\xff\x25")
    if at < 0 or at + 6 > len(entry):
        return -1
    return address + at + 6 + struct.unpack_from("<i", entry, at + 2)[0]


def _aarch64_slot(entry: bytes, address: int, endian: str) -> int:
    """The slot of an entry's ``adrp x16`` and ``ldr x17, [x16, #imm]``, or -1."""
    words = list(_words(entry, endian))
    for i in range(len(words) - 1):
        adrp, ldr = words[i], words[i + 1]
        if adrp & 0x9F00001F == 0x90000010 and ldr & 0xFFC003FF == 0xF9400211:
            page = ((adrp >> 29) & 3 | (adrp >> 3) & 0x1FFFFC) << 12
            if page & (1 << 32):
                page -= 1 << 33
            return ((address + 4 * i) & ~0xFFF) + page + ((ldr >> 10) & 0xFFF) * 8
    return -1


def _words(entry: bytes, endian: str) -> Iterator[int]:
    for (word,) in struct.iter_unpack(endian + "I", entry[:len(entry) // 4 * 4]):
        yield word
