"""libwebsockets compressed backtraces: the ``~m#`` allocation records that
lws_alloc_metadata emits, and the ``~b#`` lines its decode tool prints.

A blob is a bit stream followed by a big-endian u16 total byte count (which
counts itself). Every N-bit field is written MSB-first and followed by one
pad bit; bits fill each byte from bit 7 down::

    depth:5, depth x frame, sizebits:6, size:sizebits, zero fill to a byte
    frame = 0, bits:6, value:bits                  literal
          | 1, back:3, sign:1, bits:6, delta:bits  frame[i-back-1] +/- delta

The decoder is as lenient as lws's own: it ignores pad bits and anything
after the size, and does its arithmetic modulo 2**64.
"""

import base64
import re
import string
from collections import defaultdict

from ..errors import SfbtError

MAX_DEPTH = 31  # the depth field is 5 bits
VALUE_LIMIT = 1 << 63  # a field's bit count is 6 bits, so at most 63 bits
LOOKBACK = 8  # a delta can reference 1 to 8 frames back
_U64 = (1 << 64) - 1

_BLOB = re.compile(r"~m#[A-Za-z0-9+/_-]*=*")
_BARE_BLOB = re.compile(r"^\s*([A-Za-z0-9+/_-]+=*)\s*$")
_DECODED = re.compile(r"~b#size: *([0-9]+) *,((?: *0[xX][0-9a-fA-F]+)*) ?")
_B64_ALPHABET = frozenset(string.ascii_letters + string.digits + "+/-_")


class LwsFormatError(SfbtError):
    """A malformed blob, or a backtrace the format cannot hold."""


def _bits(value):
    """lws_sigbits(): the bit length, but 1 for 0."""
    return max(value.bit_length(), 1)


class _BitReader:
    def __init__(self, data):
        self.data = data
        self.position = 0

    def read(self, width, what):
        """A width-bit field, MSB-first, then skip its pad bit."""
        available = len(self.data) * 8 - self.position
        if width + 1 > available:
            raise LwsFormatError(
                f"truncated blob: {what} needs {width + 1} bits at bit "
                f"offset {self.position}, only {available} left")
        value = 0
        for _ in range(width):
            byte = self.data[self.position >> 3]
            bit = (byte >> (7 - (self.position & 7))) & 1
            value = (value << 1) | bit
            self.position += 1
        self.position += 1
        return value


def _legacy_bit_is_set(value, index):
    """Bit `index` as lws 4.3 tests it: `v & (1 << index)` with an int 1.

    That is undefined for index 31 and up and for the pad bit (index -1).
    What gcc makes of it on 64-bit targets, with the width a run-time
    argument as in the exported stream function: the shift count is taken
    mod 32 and the int result sign-extended, so indexes 32..62 test bit
    index-32, and 63, 31 and -1 all test "any of bits 31..63 set". Values
    below 2**31 come out right; larger ones are mangled.
    """
    shift = index & 31
    mask = 1 << shift if shift < 31 else _U64 & ~((1 << 31) - 1)
    return bool(value & mask)


class _BitWriter:
    def __init__(self, legacy):
        self.legacy = legacy
        self.bits = []

    def write(self, value, width):
        """A width-bit field, MSB-first, then its pad bit."""
        for index in range(width - 1, -2, -1):
            if self.legacy:
                self.bits.append(_legacy_bit_is_set(value, index))
            else:
                self.bits.append(index >= 0 and bool(value >> index & 1))

    def blob(self):
        """The bytes, zero-filled to a byte, with the u16 total length."""
        body = bytearray((len(self.bits) + 7) // 8)
        for position, bit in enumerate(self.bits):
            if bit:
                body[position >> 3] |= 0x80 >> (position & 7)
        return bytes(body) + (len(body) + 2).to_bytes(2, "big")


def _blob_bytes(text_or_bytes):
    """The raw bytes of a blob given as base64 text, with or without ~m#."""
    if isinstance(text_or_bytes, (bytes, bytearray)):
        text = bytes(text_or_bytes).decode("latin-1")
    else:
        text = text_or_bytes
    start = len(text) - len(text.lstrip())
    text = text.strip()
    if text.startswith("~m#"):
        text, start = text[3:], start + 3
    payload = text.rstrip("=")
    for offset, character in enumerate(payload):
        if character not in _B64_ALPHABET:
            raise LwsFormatError(
                f"bad base64 character {character!r} at character offset "
                f"{start + offset}")
    if len(payload) % 4 == 1:
        raise LwsFormatError(
            f"bad base64: {len(payload)} characters cannot end on a whole "
            f"byte (character offset {start + len(payload)})")
    payload += "=" * (-len(payload) % 4)
    # lws's decoder takes either alphabet, even mixed
    return base64.b64decode(payload.replace("-", "+").replace("_", "/"))


def decode_blob(text_or_bytes):
    """(frames, size) from one ``~m#`` blob: base64 text (standard or
    URL-safe, padded or not, lead-in optional), str or bytes."""
    data = _blob_bytes(text_or_bytes)
    if len(data) < 2:
        raise LwsFormatError(
            f"truncated blob: {len(data)} bytes, too short for the u16 "
            f"length at byte offset 0")
    recorded = int.from_bytes(data[-2:], "big")
    if recorded != len(data):
        raise LwsFormatError(
            f"length field at byte offset {len(data) - 2} says {recorded} "
            f"bytes, the blob has {len(data)}")
    reader = _BitReader(data[:-2])
    depth = reader.read(5, "the depth")
    frames = []
    for index in range(depth):
        where = reader.position
        if not reader.read(1, f"frame {index}'s kind"):
            width = reader.read(6, f"frame {index}'s bit count")
            frames.append(reader.read(width, f"frame {index}"))
            continue
        back = reader.read(3, f"frame {index}'s reference")
        subtract = reader.read(1, f"frame {index}'s sign")
        width = reader.read(6, f"frame {index}'s delta bit count")
        delta = reader.read(width, f"frame {index}'s delta")
        reference = index - back - 1
        if reference < 0:
            raise LwsFormatError(
                f"frame {index} at bit offset {where} is a delta against "
                f"frame {reference}, which does not exist")
        base = frames[reference]
        frames.append((base - delta if subtract else base + delta) & _U64)
    width = reader.read(6, "the size's bit count")
    return frames, reader.read(width, "the size")


def find_blobs(line):
    """Each ``~m#`` blob embedded in a line of log text, lead-in included."""
    return (match.group(0) for match in _BLOB.finditer(line))


def format_decoded(frames, size):
    """The line lws-api-test-backtrace prints, less its newline."""
    return f"~b#size: {size}, " + "".join(f"0x{frame:x} " for frame in frames)


def _delta_choice(frames, index, legacy):
    """(reference, delta, subtract) when lws writes frames[index] as a delta.

    It takes the closest of the up to LOOKBACK frames before it (on a tie
    the farthest back) and uses it only when that is shorter:
    bits(delta) + 11 < bits(value) + 7. The legacy encoder also refuses
    frame 0 as the reference.
    """
    value = frames[index]
    best = None
    for reference in range(max(index - LOOKBACK, 0), index):
        delta = abs(value - frames[reference])
        if best is None or delta < best[1]:
            best = (reference, delta, frames[reference] >= value)
    if best is None or (legacy and best[0] == 0):
        return None
    return best if _bits(best[1]) + 11 < _bits(value) + 7 else None


def _check_fits(what, value):
    if not 0 <= value < VALUE_LIMIT:
        raise LwsFormatError(
            f"{what} value {value:#x} does not fit: values must be 0 to "
            f"2**63-1")


def encode(frames, size, legacy=False):
    """The ``~m#`` text lws encodes for a backtrace and allocation size.

    legacy=True reproduces lws 4.3 (2022): it never deltas against frame 0
    and mangles values of 2**31 and up (see _legacy_bit_is_set), so only
    values below 2**31 survive it.
    """
    if len(frames) > MAX_DEPTH:
        raise LwsFormatError(
            f"depth {len(frames)} does not fit: the format holds at most "
            f"{MAX_DEPTH} frames")
    for index, frame in enumerate(frames):
        _check_fits(f"frame {index}", frame)
    _check_fits("size", size)
    writer = _BitWriter(legacy)
    writer.write(len(frames), 5)
    for index, value in enumerate(frames):
        choice = _delta_choice(frames, index, legacy)
        if choice:
            reference, delta, subtract = choice
            writer.write(1, 1)
            writer.write(index - reference - 1, 3)
            writer.write(int(subtract), 1)
            writer.write(_bits(delta), 6)
            writer.write(delta, _bits(delta))
        else:
            writer.write(0, 1)
            writer.write(_bits(value), 6)
            writer.write(value, _bits(value))
    writer.write(_bits(size), 6)
    writer.write(size, _bits(size))
    return "~m#" + base64.b64encode(writer.blob()).decode("ascii")


def _with_line_number(convert, lines):
    for number, line in enumerate(lines, 1):
        try:
            yield convert(line)
        except LwsFormatError as error:
            raise LwsFormatError(f"line {number}: {error}") from error


def _decode_all(line):
    return [decode_blob(blob) for blob in find_blobs(line)]


def _decode_match(match):
    return format_decoded(*decode_blob(match.group(0)))


def _decode_line(line):
    """A line with each ``~m#`` blob decoded; a line that is nothing but a
    blob without its lead-in is decoded too, when it is a well-formed one
    (its length field agrees), and otherwise left as it is."""
    if "~m#" in line:
        return _BLOB.sub(_decode_match, line)
    bare = _BARE_BLOB.match(line)
    if bare is None:
        return line
    try:
        decoded = decode_blob(bare.group(1))
    except LwsFormatError:
        return line
    return line[:bare.start(1)] + format_decoded(*decoded) + line[bare.end(1):]


def filter_decode(lines):
    """`sfbt lws decode`: each ``~m#`` blob in each line replaced by its
    ``~b#`` text, the rest of the line kept; like lws's own decoder, a
    line holding only a blob without the ``~m#`` lead-in is decoded too.
    Other lines pass through unchanged.  A malformed ``~m#`` blob raises
    LwsFormatError naming the line (1-based)."""
    return _with_line_number(_decode_line, lines)


def _parse_decoded(match):
    return [int(token, 16) for token in match.group(2).split()], \
        int(match.group(1))


def filter_encode(lines, legacy=False):
    """`sfbt lws encode [--legacy]`: each ``~b#size: N, 0x... `` in each line
    replaced by its ``~m#`` text (one trailing space is part of the ``~b#``
    form, so decoding then encoding gives back the original line). Lines
    without one pass through unchanged; a backtrace the format cannot hold
    raises LwsFormatError naming the line (1-based)."""
    def encode_match(match):
        return encode(*_parse_decoded(match), legacy=legacy)
    return _with_line_number(
        lambda line: _DECODED.sub(encode_match, line), lines)


def group_allocations(lines):
    """What contrib/heapmap.sh is for: the ``~m#`` records of a heap dump
    grouped by call site, as (frames tuple, count, total size), largest
    total first (then most allocations, then frames, for a stable order).
    Lines without a blob are skipped; a malformed blob raises
    LwsFormatError naming the line."""
    count = defaultdict(int)
    total = defaultdict(int)
    for records in _with_line_number(_decode_all, lines):
        for frames, size in records:
            count[tuple(frames)] += 1
            total[tuple(frames)] += size
    return sorted(((frames, count[frames], total[frames]) for frames in count),
                  key=lambda group: (-group[2], -group[1], group[0]))
