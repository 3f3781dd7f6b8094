"""Debug sections compressed with zlib, in the two ways ELF files carry
them: SHF_COMPRESSED (an ELF compression header before the stream, what
``-gz`` and ``objcopy --compress-debug-sections=zlib`` write) and GNU's
older ``.zdebug_*`` sections ("ZLIB", the inflated size in 8 big-endian
bytes, the stream: ``--compress-debug-sections=zlib-gnu``).  Either is
inflated only as far as it is read, and never past the size its header
gives, itself bounded by the file's size."""

from __future__ import annotations

import struct
import zlib

from ..elf import SHF_COMPRESSED, SHT_NOBITS, ElfImage, Section
from ..errors import left_out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

#: A compressed debug section may expand to this many times the file's size.
MAX_EXPANSION = 64
#: bytes of one section inflated at most, whatever the file's size (a
#: zlib bomb in a large file): what lies past them is left out, and said so
MAX_INFLATED = 1 << 26
ELFCOMPRESS_ZLIB = 1
#: ch_type, ch_reserved, ch_size, ch_addralign of an Elf64_Chdr
_ELF_HEADER = 24
_GNU_MAGIC = b"ZLIB"
_GNU_HEADER = 12
#: bytes read from the file, and inflated beyond what is asked, at a time
CHUNK = 1 << 14


def debug_section(image: ElfImage, name: str) -> Optional[Section]:
    """The section ``name`` (``.debug_X``), else its GNU-compressed twin
    ``.zdebug_X``, or None."""
    section = image.section(name)
    if section is None and name.startswith(".debug_"):
        section = image.section(".z" + name[1:])
    return section


def compression(image: ElfImage, section: Section) -> Optional[int]:
    """Where its zlib stream starts in a compressed section, or None for a
    section stored as it is (a ``.zdebug_*`` section without "ZLIB"
    before its bytes included, as binutils reads one)."""
    if section.flags & SHF_COMPRESSED:
        return _ELF_HEADER
    if section.name.startswith(".zdebug_") and section.size >= _GNU_HEADER \
            and image.read(section.offset, 4) == _GNU_MAGIC:
        return _GNU_HEADER
    return None


def inflated_size(image: ElfImage, section: Section) -> int:
    """The size a compressed section's header says it inflates to; 0 for
    one compressed otherwise than with zlib, or whose header is cut
    short (read as empty)."""
    if not section.flags & SHF_COMPRESSED:
        return struct.unpack(">Q", image.read(section.offset + 4, 8))[0]
    if section.size < _ELF_HEADER:
        return 0
    kind, _, size = struct.unpack(image.header.endian + "IIQ",
                                  image.read(section.offset, 16))
    return size if kind == ELFCOMPRESS_ZLIB else 0


def expansion_limit(image: ElfImage) -> int:
    """The most bytes one of the image's sections may inflate to."""
    return MAX_EXPANSION * (image.file_size or 0) + (1 << 20)


class Inflating:
    """A compressed section (``compression`` says where its stream
    starts), inflated as far as asked, to MAX_INFLATED bytes at most;
    nothing when its size is beyond ``expansion_limit``.  Its stream is read from the file a chunk at a
    time, as far as inflating needs it."""

    def __init__(self, image: ElfImage, section: Section, start: int):
        size = inflated_size(image, section)
        usable = size <= expansion_limit(image) and section.type != SHT_NOBITS
        if usable and size > MAX_INFLATED:
            left_out(f"{image.name}: {section.name}: past its first {MAX_INFLATED} bytes "
                     f"inflated left out")
            size = MAX_INFLATED
        self.size = size if usable else 0
        #: the bytes inflated so far: grown in place, never replaced
        self.data = bytearray()
        self._read = image.read
        self._next = section.offset + start
        self._end = section.offset + section.size if usable else self._next
        self._input = b""  # read from the file, not yet inflated
        self._zlib = zlib.decompressobj()

    def to(self, end: int) -> bytearray:
        """The bytes inflated, to ``end`` at least (or all there are)."""
        end = min(end, self.size)
        data = self.data
        while len(data) < end:
            if not self._input:
                if self._next >= self._end or self._zlib.eof:
                    break
                size = min(CHUNK, self._end - self._next)
                self._input = self._read(self._next, size)
                self._next += size
            # at least a chunk's worth at a time: few calls, each copying
            # at most a chunk of input left over (unconsumed_tail)
            more = self._zlib.decompress(
                self._input, min(self.size, max(end, len(data) + CHUNK)) - len(data))
            self._input = self._zlib.unconsumed_tail
            data += more
        return data

    @property
    def whole(self) -> bool:
        """Whether all there is is inflated."""
        return len(self.data) >= self.size or self._zlib.eof \
            or not self._input and self._next >= self._end
