"""Swift's Compact ImageMap Format (docs/CompactImageMapFormat.md in the
Swift repository), version 0: the images mapped into a process.

Layout::

    info byte     version << 2 | size (0, 1, 2: 16-, 32-, 64-bit words)
    platform      a length byte, then that many bytes of UTF-8
    image count   7-bit groups, most significant first, bit 7 set on all
                  but the last byte
    per image:
      r0aaaeee    r = 1: the base is a delta from the previous base
      aaa+1 bytes base (or delta), big-endian, sign-extended to the word
      eee+1 bytes end of text minus base, big-endian, sign-extended
      build id    its length in 7-bit groups, then its bytes
      path        prefix-coded, below

A path is a sequence of opcodes::

    00000000              end
    00cccccc  c bytes     str: verbatim; each prefix of this text that
                          stops before a '/' or '\\' gets the next code
    01cccccc  v, c+1 name framewk: /<name>.framework/Versions/<v>/<name>,
                          which also ends the path (no end byte follows)
    10cccccc              expand: append the prefix with code c
    11cccccc  c+1 bytes   expand: append the prefix with code v + 64

The prefix table starts with FIXED_PREFIXES (codes 12 to 31 are reserved)
and grows from code 32.  An empty path is a lone ``end``.

The encoder makes the choices of Swift's own (CompactImageMap.swift): a
base is absolute unless the delta is strictly shorter; a path takes the
longest known prefix again and again, then the framework form (the name
being the path's last component), else the rest as str chunks of up to 63
bytes and ``end``.  For 64-bit maps its bytes are Swift's except where
Swift's encoder is wrong: we write counts in the fewest 7-bit groups
(Swift adds a 0x80 byte when the bit length is a multiple of 7), expand
codes from 320 on in as many bytes as they need, and framework names of
over 64 bytes as text.  In 16- and 32-bit maps values are taken modulo the
word (Swift sign-extends them to 64 bits first, and its decoder gets
multi-byte negative fields wrong there).  The document's example shows an
``end`` after ``framewk``; its text, Swift's encoder and Swift's decoder
have none.
"""

import heapq
from bisect import bisect_right
from operator import itemgetter

from ..errors import EncodeError, LocatedError

VERSION = 0
WORD_SIZES = (16, 32, 64)  # index = the info byte's size field

IMAGE_RELATIVE = 0x80
IMAGE_RESERVED = 0x40

PATH_END = 0x00
PATH_FRAMEWORK = 0x40
PATH_EXPAND = 0x80
PATH_EXPAND_EXTERNAL = 0xC0
MAX_STR = 0x3F
MAX_FRAMEWORK_NAME = 64
FIRST_EXTERNAL_CODE = 64
FIRST_DEFINED_CODE = 32

FIXED_PREFIXES = (
    b"/lib", b"/usr/lib", b"/usr/local/lib", b"/opt/lib",
    b"/System/Library/Frameworks", b"/System/Library/PrivateFrameworks",
    b"/System/iOSSupport", b"/Library/Frameworks", b"/System/Applications",
    b"/Applications", b"C:\\Windows\\System32", b"C:\\Program Files",
)
_SEPARATORS = b"/\\"
_FRAMEWORK_MIDDLE = b".framework/Versions/"

# Not in the format: bounds on one decoded path and on all the bytes maps
# decode to, because a few expand bytes can each repeat a long prefix.
# What decoding spends: each path, build id and defined prefix, and
# IMAGE_COST more per image and MAP_COST per map for the objects that
# hold them and the lookup tables made for them.
MAX_PATH_BYTES = 1 << 15
MAX_DECODED_BYTES = 1 << 24
IMAGE_COST = 192
MAP_COST = 1024


class ImageMapError(LocatedError):
    """Malformed image map data, located by byte offset: ``CIF+0x3: ...``."""

    default_where = "CIF"


class DecodeBudget:
    """The bytes image maps may still decode to.  One budget may be
    shared by many maps (every map of an archive), so that the limit is
    on them all, not on each."""

    def __init__(self, limit=MAX_DECODED_BYTES, what="paths and prefixes"):
        self.limit = limit
        self.left = limit
        self.what = what

    def spend(self, count, at):
        self.left -= count
        if self.left < 0:
            raise ImageMapError(f"{self.what} expand to more than {self.limit} bytes", at)


class Image(tuple):
    """One mapped image.  An empty path means none is known.  (A tuple, as
    cbf.Frame: no dataclasses on the crash handler's import path.)"""

    __slots__ = ()

    def __new__(cls, path: str, base: int, end_of_text: int, build_id: bytes = b""):
        return tuple.__new__(cls, (path, base, end_of_text, build_id))

    path = property(itemgetter(0))
    base = property(itemgetter(1))
    end_of_text = property(itemgetter(2))
    build_id = property(itemgetter(3))

    def __repr__(self):
        return (f"Image(path={self[0]!r}, base={self[1]!r}, end_of_text={self[2]!r}, "
                f"build_id={self[3]!r})")


class ImageMap(tuple):
    """The images of one process, in the order written (the format expects
    increasing base addresses), and the platform that made the map."""

    __slots__ = ()

    def __new__(cls, platform: str, images, word_size: int = 64):
        return tuple.__new__(cls, (platform, tuple(images), word_size))

    platform = property(itemgetter(0))
    images = property(itemgetter(1))
    word_size = property(itemgetter(2))

    def __repr__(self):
        return f"ImageMap(platform={self[0]!r}, images={self[1]!r}, word_size={self[2]!r})"


def image_finder(images):
    """find(address): the first of images (in their order) whose text holds
    the address, or None, in logarithmic time however the images overlap.
    The boundaries of all images cut the addresses into pieces; a sweep
    over them notes each piece's first image."""
    edges = sorted({edge for image in images if image.base < image.end_of_text
                    for edge in (image.base, image.end_of_text)})
    starting = {}
    for index, image in enumerate(images):
        if image.base < image.end_of_text:
            starting.setdefault(image.base, []).append(index)
    owners = []  # owners[k]: the image holding edges[k]..edges[k + 1], or None
    active = []  # heap of (index, end) of images that began
    for edge in edges:
        for index in starting.get(edge, ()):
            heapq.heappush(active, (index, images[index].end_of_text))
        while active and active[0][1] <= edge:  # ended before this piece
            heapq.heappop(active)
        owners.append(images[active[0][0]] if active else None)

    def find(address):
        at = bisect_right(edges, address) - 1
        return owners[at] if at >= 0 else None
    return find


#: Images the lists PerImageMap keeps may hold in all (an archive's maps
#: hold at most its store.MAX_ARCHIVE_DECODED_BYTES / IMAGE_COST, about
#: 350,000).
MAX_KEPT_IMAGES = 1 << 20


class PerImageMap:
    """``make(images)`` of each list of images, made once and kept while
    the lists kept hold at most MAX_KEPT_IMAGES images: traces that take
    turns among many image maps must not make it again for each."""

    def __init__(self, make):
        self._make = make
        self._kept = {}  # id(images) -> (images, made)
        self._images = 0

    def __call__(self, images):
        kept = self._kept.get(id(images))
        if kept is not None and kept[0] is images:
            return kept[1]
        if self._images + len(images) > MAX_KEPT_IMAGES:
            self._kept.clear()
            self._images = 0
        self._images += len(images)
        made = self._make(images)
        self._kept[id(images)] = (images, made)
        return made


def _to_bytes(text):
    return text.encode("utf-8", "surrogateescape")


def _to_text(data):
    return data.decode("utf-8", "surrogateescape")


def _signed_length(value, bits):
    """The fewest bytes whose sign extension to ``bits`` gives ``value``."""
    if value >> (bits - 1):
        value -= 1 << bits
    return (value if value >= 0 else ~value).bit_length() // 8 + 1


class _PrefixTable:
    """Codes for path prefixes, grown the same way by writer and reader."""

    def __init__(self):
        self.by_code = {}
        self.by_prefix = {}  # prefix -> its lowest code
        self.lengths = set()
        for code, prefix in enumerate(FIXED_PREFIXES):
            self._add(code, prefix)
        self.next_code = FIRST_DEFINED_CODE

    def _add(self, code, prefix):
        self.by_code[code] = prefix
        self.by_prefix.setdefault(prefix, code)
        self.lengths.add(len(prefix))

    def define(self, prefix):
        self._add(self.next_code, prefix)
        self.next_code += 1

    def longest_match(self, text):
        """(code, prefix) of the longest prefix of text, lowest code on a tie."""
        for length in sorted(self.lengths, reverse=True):
            code = self.by_prefix.get(text[:length]) if length <= len(text) else None
            if code is not None:
                return code, self.by_code[code]
        return None


# Writing


def encode_image_map(image_map):
    """The image map's bytes."""
    bits = image_map.word_size
    if bits not in WORD_SIZES:
        raise EncodeError(f"word size {bits} is not one of 16, 32, 64")
    platform = _to_bytes(image_map.platform)
    if len(platform) > 0xFF:
        raise EncodeError(f"platform name of {len(platform)} bytes is longer "
                         "than 255")
    out = bytearray([VERSION << 2 | WORD_SIZES.index(bits), len(platform)])
    out += platform
    _write_count(out, len(image_map.images))
    prefixes = _PrefixTable()
    last_base = 0
    for image in image_map.images:
        _write_addresses(out, image, last_base, bits)
        last_base = image.base
        _write_count(out, len(image.build_id))
        out += image.build_id
        _write_path(out, _to_bytes(image.path), prefixes)
    return bytes(out)


def _write_count(out, value):
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append(0x80 | value & 0x7F)
        value >>= 7
    out += bytes(reversed(groups))


def _write_addresses(out, image, last_base, bits):
    mask = (1 << bits) - 1
    for what, value in (("base", image.base), ("end of text", image.end_of_text)):
        if not 0 <= value <= mask:
            raise EncodeError(f"{image.path or 'image'}: {what} {value:#x} does "
                             f"not fit a {bits}-bit word")
    base, flag = image.base, 0
    delta = (image.base - last_base) & mask
    if _signed_length(delta, bits) < _signed_length(base, bits):
        base, flag = delta, IMAGE_RELATIVE
    size = (image.end_of_text - image.base) & mask
    base_length = _signed_length(base, bits)
    size_length = _signed_length(size, bits)
    out.append(flag | (base_length - 1) << 3 | (size_length - 1))
    for value, length in ((base, base_length), (size, size_length)):
        out += (value & ((1 << 8 * length) - 1)).to_bytes(length, "big")


def _framework_name(path):
    """The last component of a path, the name the framework form repeats."""
    return path[max(path.rfind(b"/"), path.rfind(b"\\")) + 1:]


def _framework_version(rest, name):
    """The version byte if rest is /<name>.framework/Versions/<v>/<name>."""
    head = b"/" + name + _FRAMEWORK_MIDDLE
    if (0 < len(name) <= MAX_FRAMEWORK_NAME
            and len(rest) == len(head) + 2 + len(name)
            and rest.startswith(head) and rest[len(head) + 1:] == b"/" + name):
        return rest[len(head)]
    return None


def _write_path(out, path, prefixes):
    if len(path) > MAX_PATH_BYTES:
        raise EncodeError(f"path of {len(path)} bytes is longer than "
                         f"{MAX_PATH_BYTES}")
    rest = path
    while rest:
        match = prefixes.longest_match(rest)
        if match is None:
            break
        code, prefix = match
        rest = rest[len(prefix):]
        if code < FIRST_EXTERNAL_CODE:
            out.append(PATH_EXPAND | code)
        else:
            value = code - FIRST_EXTERNAL_CODE
            length = max(1, (value.bit_length() + 7) // 8)
            out.append(PATH_EXPAND_EXTERNAL | (length - 1))
            out += value.to_bytes(length, "big")
    if rest:
        name = _framework_name(path)
        version = _framework_version(rest, name)
        if version is not None:
            out += bytes([PATH_FRAMEWORK | (len(name) - 1), version]) + name
            return
        for position in range(1, len(rest)):
            if rest[position] in _SEPARATORS:
                prefixes.define(rest[:position])
        for start in range(0, len(rest), MAX_STR):
            chunk = rest[start:start + MAX_STR]
            out.append(len(chunk))
            out += chunk
    out.append(PATH_END)


# Reading


def decode_image_map(data, budget=None):
    """An ImageMap from its bytes; malformed data, or more decoded bytes
    than the DecodeBudget ``budget`` has left (default: a budget of
    MAX_DECODED_BYTES for this map alone), raises ImageMapError."""
    return _Reader(bytes(data), budget or DecodeBudget()).read()


class _Reader:
    def __init__(self, data, budget):
        self.data = data
        self.position = 0
        self.budget = budget

    def take(self, count, what):
        end = self.position + count
        if end > len(self.data):
            raise ImageMapError(f"data ends inside {what} ({len(self.data) - self.position} "
                                f"of {count} bytes)", self.position)
        chunk = self.data[self.position:end]
        self.position = end
        return chunk

    def byte(self, what):
        return self.take(1, what)[0]

    def count(self, what):
        value = 0
        while True:
            byte = self.byte(what)
            value = value << 7 | byte & 0x7F
            if not byte & 0x80:
                return value

    def read(self):
        self.budget.spend(MAP_COST, 0)
        info = self.byte("the info byte")
        if info & 3 == 3:
            raise ImageMapError(f"info byte {info:#04x} has the reserved word "
                                "size 3", 0)
        if info >> 2 != VERSION:
            raise ImageMapError(f"unsupported image map version {info >> 2}", 0)
        bits = WORD_SIZES[info & 3]
        mask = (1 << bits) - 1
        platform = _to_text(self.take(self.byte("the platform length"),
                                      "the platform name"))
        count = self.count("the image count")
        prefixes = _PrefixTable()
        images = []
        base = 0
        for index in range(count):
            header_at = self.position
            header = self.byte(f"image {index} of {count}")
            if header & IMAGE_RESERVED:
                raise ImageMapError(f"image {index} header {header:#04x} has "
                                    "reserved bit 6 set", header_at)
            delta = self.address((header >> 3 & 7) + 1, bits,
                                 f"image {index}'s base", header_at)
            base = (base + delta if header & IMAGE_RELATIVE else delta) & mask
            size = self.address((header & 7) + 1, bits,
                                f"image {index}'s end of text", header_at)
            build_id = self.take(self.count(f"image {index}'s build id length"),
                                 f"image {index}'s build id")
            path = self.path(prefixes, index)
            self.budget.spend(IMAGE_COST + len(build_id) + len(path), header_at)
            images.append(Image(_to_text(path), base, (base + size) & mask, build_id))
        if self.position < len(self.data):
            raise ImageMapError(f"{len(self.data) - self.position} bytes after "
                                "the last image", self.position)
        return ImageMap(platform, images, bits)

    def address(self, length, bits, what, header_at):
        if length * 8 > bits:
            raise ImageMapError(f"{what} of {length} bytes is wider than a "
                                f"{bits}-bit word", header_at)
        return int.from_bytes(self.take(length, what), "big", signed=True)

    def path(self, prefixes, index):
        what = f"image {index}'s path"
        result = bytearray()
        text_start = None  # where the first str began: prefixes count from there
        while True:
            at = self.position
            opcode = self.byte(what)
            if opcode == PATH_END:
                return bytes(result)
            if opcode < PATH_FRAMEWORK:
                if text_start is None:
                    text_start = len(result)
                for byte in self.take(opcode, what):
                    if byte in _SEPARATORS and len(result) > text_start:
                        self.budget.spend(len(result) - text_start, at)
                        prefixes.define(bytes(result[text_start:]))
                    result.append(byte)
            elif opcode < PATH_EXPAND:
                version = self.byte(what)
                name = self.take((opcode & 0x3F) + 1, what)
                result += b"/" + name + _FRAMEWORK_MIDDLE + bytes([version, 0x2F]) + name
            else:
                code = opcode & 0x3F
                if opcode >= PATH_EXPAND_EXTERNAL:
                    raw = self.take(code + 1, what)
                    code = int.from_bytes(raw, "big") + FIRST_EXTERNAL_CODE
                prefix = prefixes.by_code.get(code)
                if prefix is None:
                    raise ImageMapError(f"{what} expands unknown prefix code "
                                        f"{code}", at)
                result += prefix
            if len(result) > MAX_PATH_BYTES:
                raise ImageMapError(f"{what} is longer than {MAX_PATH_BYTES} "
                                    "bytes", at)
            if opcode & 0xC0 == PATH_FRAMEWORK:  # framewk ends the path
                return bytes(result)
