"""Backtrace archives: many backtraces in one file, each stored once.

Layout (docs/archive.md): an 8-byte magic, then records, each
``kind u8 | length u32 | payload | crc32 u32`` (little-endian; the CRC
covers kind, length and payload).  Image maps (Compact Image Map Format),
traces (CBF bytes, stored once per distinct trace, StackDepot-style) and
events (one per capture: thread, time, stop reason, label; for a sample,
its process, thread id and name and whether its stack was cut) are
records of their own, so appending only adds records and never rewrites
old ones.
"""

from __future__ import annotations

import io
import struct
import zlib
from array import array

#: typing (and the re it imports) kept off the crash handler's imports
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Dict, Iterator, List, Optional, Tuple, Union

    from .threads import SampledThread, SampleGroup

try:  # hashlib's own, without loading OpenSSL (a sixth of the crash handler's imports)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

from ..errors import LocatedError, left_out
from ..files import locked_for_update, open_regular, replace_file, replace_locked
from . import cbf
from .imagemap import (IMAGE_COST, DecodeBudget, Image, ImageMap, ImageMapError,
                       decode_image_map, encode_image_map)

MAGIC = b"SFBTARC\x01"
KIND_IMAGE_MAP = 1
KIND_TRACE = 2
KIND_EVENT = 3
#: an image of the file's image table (a Compact Image Map of that one
#: image at base 0): the table's entries are numbered from 0 in file order
KIND_IMAGE = 4
#: an image map by reference to the image table (PlacedImages): numbered
#: with the image maps, as the map it stands for
KIND_PLACED_MAP = 5
#: one crash's threads (the crash store's segments): their events in one
#: record, what they share written once, the traces not in the file
#: before inline (numbered after the file's traces, in order)
KIND_CRASH = 6
#: flags of a thread in a KIND_CRASH record
CRASH_CUT = 1  # the event is cut
CRASH_NEW_TRACE = 2  # its trace follows (length, CBF bytes), else a trace id
CRASH_CRASHED = 4  # labelled "crashed" (else no label, unless CRASH_LABEL)
CRASH_LABEL = 8  # a label string follows
CRASH_REASON = 16  # a stop reason follows (else the record's)
CRASH_NAME = 32  # a thread name follows (else the previous thread's; "" first)
CRASH_THREAD = 64  # a thread string follows (else "N (TID)", N its place from 1)
#: a KIND_CRASH record's image map: its own, its bases in pages or in
#: bytes, else the index of one before it plus CRASH_MAP_INDEX
CRASH_MAP_PAGES, CRASH_MAP_BYTES, CRASH_MAP_INDEX = 0, 1, 2
CRASH_PAGE = 4096
_RECORD_HEAD = struct.Struct("<BI")
_CRC = struct.Struct("<I")
_TRACE_HEAD = struct.Struct("<IQ")
_EVENT_HEAD = struct.Struct("<IIQ")
#: after an event's four strings, where the capture knows them: process
#: id, thread id, flags (EVENT_CUT), then the thread's name as a string.
#: Readers that predate it stop after the four strings: an archive with
#: it reads the same there, and one without it reads here with pid 0,
#: the thread id and name taken from the thread string (sampled_thread).
_EVENT_TAIL = struct.Struct("<IIB")
#: flag of an event's tail: the stack copy ended before the walk did
EVENT_CUT = 1

# Limits on what sfbt reads, so that a damaged or hostile file costs
# bounded memory and time: a record (a trace of a million distinct
# frames is a few MB), a whole archive, frames per byte of archive, and
# the bytes all of an archive's distinct image maps decode to (each is
# decoded once and kept).
MAX_RECORD_BYTES = 16 << 20
MAX_ARCHIVE_BYTES = 1 << 30
FRAMES_PER_BYTE = 4
MAX_ARCHIVE_DECODED_BYTES = 64 << 20


class ArchiveError(LocatedError):
    """A damaged archive: what is wrong and at which byte offset of which
    file (``where``)."""


def trace_hash(data: bytes) -> int:
    """The 64-bit hash that picks a trace's bucket."""
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")


def _read_varint(payload: bytes, at: int, what: str, offset: int) -> Tuple[int, int]:
    """(the varint at ``at`` of ``payload``, where it ends): at most 10
    bytes; ``what`` (a record at ``offset``) named where it is not one."""
    value, shift, end = 0, 0, len(payload)
    while True:
        if at >= end:
            raise ArchiveError(f"{what} ends inside a number", offset + at)
        byte = payload[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 70:
            raise ArchiveError(f"{what}: a number of over 10 bytes", offset + at)


def _write_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(0x80 | value & 0x7F)
        value >>= 7
    out.append(value)


def placed_map_payload(places: List[Tuple[int, int]]) -> bytes:
    """The payload of a KIND_PLACED_MAP record: the image count, then for
    each (table index, base) the index and the base's difference from the
    previous image's base (from 0), zigzag-coded; all LEB128 varints."""
    out = bytearray()
    _write_varint(out, len(places))
    last = 0
    for index, base in places:
        _write_varint(out, index)
        delta = base - last
        _write_varint(out, delta * 2 if delta >= 0 else -delta * 2 - 1)
        last = base
    return bytes(out)


def placed_places(payload: bytes, unit: int = 1) -> List[Tuple[int, int]]:
    """The (table index, base) of each image of a KIND_PLACED_MAP payload
    (its bases' differences in ``unit``s); ValueError where it is
    damaged."""
    numbers: List[int] = []
    value, shift = 0, 0
    for byte in payload:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            numbers.append(value)
            value, shift = 0, 0
    if shift or not numbers or len(numbers) != 1 + 2 * numbers[0]:
        raise ValueError("a damaged placed image map")
    places, base = [], 0
    for index, zigzag in zip(numbers[1::2], numbers[2::2]):
        base += unit * (zigzag >> 1 if not zigzag & 1 else -(zigzag >> 1) - 1)
        places.append((index, base))
    return places


def _write_text(out: bytearray, text: str) -> None:
    data = text.encode("utf-8", "surrogateescape")
    _write_varint(out, len(data))
    out += data


def crash_payload(image_map: Union[int, List[Tuple[int, int]]],
                  threads: List[Tuple[Event, int, Optional[bytes]]]) -> bytes:
    """The payload of a KIND_CRASH record: its image map (its index plus
    CRASH_MAP_INDEX, or the (table index, base) of its images, a map of its
    own numbered as the next image map of the file: CRASH_MAP_PAGES and
    the KIND_PLACED_MAP payload of its bases in pages, as a string, or,
    where a base is not a page's, CRASH_MAP_BYTES and the payload), the
    time (seconds * 2, + 1 and the nanoseconds where there are), the
    architecture, process id and stop reason of the first event,
    the count of ``threads``, then for each (event, trace id, CBF bytes
    where the trace is new here, else None): its CRASH_ flags, its thread
    id's difference from the process id (zigzag), its trace (CBF bytes, or
    id), and its strings that differ from what the flags imply; LEB128
    varints, a string a varint length and UTF-8 (a name's bytes as they
    were).  Every event has the first one's map, time, architecture and
    process."""
    first = threads[0][0]
    out = bytearray()
    if isinstance(image_map, int):
        _write_varint(out, image_map + CRASH_MAP_INDEX)
    else:
        pages = all(base % CRASH_PAGE == 0 for _, base in image_map)
        _write_varint(out, CRASH_MAP_PAGES if pages else CRASH_MAP_BYTES)
        placed = placed_map_payload([(index, base // CRASH_PAGE if pages else base)
                                     for index, base in image_map])
        _write_varint(out, len(placed))
        out += placed
    seconds, nanoseconds = divmod(first.time_ns, 10**9)
    _write_varint(out, seconds * 2 + bool(nanoseconds))
    if nanoseconds:
        _write_varint(out, nanoseconds)
    _write_text(out, first.architecture)
    _write_varint(out, first.pid)
    _write_text(out, first.reason)
    _write_varint(out, len(threads))
    name = ""
    for place, (event, trace_id, data) in enumerate(threads, 1):
        label = event.label if event.label != "crashed" else ""
        flags = (CRASH_CUT * event.cut | CRASH_NEW_TRACE * (data is not None)
                 | CRASH_CRASHED * (event.label == "crashed") | CRASH_LABEL * bool(label)
                 | CRASH_REASON * (event.reason != first.reason)
                 | CRASH_NAME * (event.thread_name != name)
                 | CRASH_THREAD * (event.thread != f"{place} ({event.tid})"))
        out.append(flags)
        delta = event.tid - first.pid
        _write_varint(out, delta * 2 if delta >= 0 else -delta * 2 - 1)
        if data is not None:
            _write_varint(out, len(data))
            out += data
        else:
            _write_varint(out, trace_id)
        for flag, text in ((CRASH_LABEL, label), (CRASH_REASON, event.reason),
                           (CRASH_NAME, event.thread_name), (CRASH_THREAD, event.thread)):
            if flags & flag:
                _write_text(out, text)
        name = event.thread_name
    return bytes(out)


def crash_events(payload: bytes, offset: int, trace_count: int, image_map_count: int
                 ) -> Tuple[Optional[Tuple[int, int, int]], List[Tuple[int, int]],
                            List[Event]]:
    """((start, end) in ``payload`` of its own placed map's payload and
    the unit of its bases, or None; [(start, end) of each new trace's CBF bytes]; the events) of a
    KIND_CRASH record at ``offset`` of a file holding ``trace_count``
    traces and ``image_map_count`` image maps before it."""
    at, end = 0, len(payload)

    def varint() -> int:
        nonlocal at
        value, at = _read_varint(payload, at, "crash record", offset)
        return value

    def span() -> Tuple[int, int]:
        nonlocal at
        size = varint()
        if at + size > end:
            raise ArchiveError("crash record ends inside a string", offset + at)
        at += size
        return at - size, at

    def text() -> str:
        start, stop = span()
        return payload[start:stop].decode("utf-8", "surrogateescape")

    index = varint()
    placed = None
    if index < CRASH_MAP_INDEX:
        unit = CRASH_PAGE if index == CRASH_MAP_PAGES else 1
        placed, index = (*span(), unit), image_map_count
    else:
        index -= CRASH_MAP_INDEX
        if index >= image_map_count:
            raise ArchiveError(f"crash record names unknown image map {index}", offset)
    seconds = varint()
    time_ns = (seconds >> 1) * 10**9 + (varint() if seconds & 1 else 0)
    architecture, pid, reason = text(), varint(), text()
    count = varint()
    if count > end:  # each thread takes three bytes at least
        raise ArchiveError(f"crash record of {count} threads in {end} bytes", offset)
    traces: List[Tuple[int, int]] = []
    events: List[Event] = []
    name = ""
    for place in range(1, count + 1):
        if at >= end:
            raise ArchiveError("crash record ends inside a thread", offset + at)
        flags = payload[at]
        at += 1
        zigzag = varint()
        tid = pid + (zigzag >> 1 if not zigzag & 1 else -(zigzag >> 1) - 1)
        if flags & CRASH_NEW_TRACE:
            traces.append(span())
            trace_id = trace_count + len(traces)
        else:
            trace_id = varint()
            if not 1 <= trace_id <= trace_count + len(traces):
                raise ArchiveError(f"crash record names unknown trace {trace_id}",
                                   offset + at)
        label = text() if flags & CRASH_LABEL else (
            "crashed" if flags & CRASH_CRASHED else "")
        thread_reason = text() if flags & CRASH_REASON else reason
        name = text() if flags & CRASH_NAME else name
        thread = text() if flags & CRASH_THREAD else f"{place} ({tid})"
        if not (0 <= tid <= 0xFFFFFFFF and pid <= 0xFFFFFFFF and time_ns < 1 << 64):
            raise ArchiveError("crash record: a thread id, process id or time out of "
                               "range", offset + at)
        events.append(Event(trace_id, index, time_ns, architecture, thread, thread_reason,
                            label, pid, tid, name, bool(flags & CRASH_CUT)))
    if at != end:
        raise ArchiveError(f"{end - at} bytes after the crash record's threads", offset + at)
    return placed, traces, events


def image_record_payload(image: Image, platform: str, word_size: int) -> bytes:
    """The payload of a KIND_IMAGE record: ``image`` at base 0."""
    size = (image.end_of_text - image.base) & ((1 << word_size) - 1)
    return encode_image_map(ImageMap(platform, [Image(image.path, 0, size, image.build_id)],
                                     word_size))


class ImageTable:
    """A file's image table (KIND_IMAGE records), and the image maps its
    KIND_PLACED_MAP records stand for: a store of many processes' maps
    writes each image's path and build id once, and each map as the
    images' indexes and bases."""

    def __init__(self) -> None:
        self.entries: List[ImageMap] = []  # each a map of one image at base 0

    def add(self, payload: bytes, offset: int, budget: DecodeBudget) -> ImageMap:
        entry = _check_image_map(payload, offset, budget)
        if len(entry.images) != 1:
            raise ArchiveError(f"image record holds {len(entry.images)} images, not 1",
                               offset)
        self.entries.append(entry)
        return entry

    def placed(self, payload: bytes, offset: int, budget: DecodeBudget,
               unit: int = 1) -> ImageMap:
        """The ImageMap a KIND_PLACED_MAP payload stands for (its bases'
        differences in ``unit``s of bytes: pages, in a KIND_CRASH record)."""
        at, end = 0, len(payload)

        def varint() -> int:
            nonlocal at
            value, at = _read_varint(payload, at, "placed image map", offset)
            return value
        count = varint()
        if count > end:  # each image takes two bytes at least
            raise ArchiveError(f"placed image map of {count} images in {end} bytes", offset)
        images: List[Image] = []
        base = 0
        platform, word_size = "", 64
        for _ in range(count):
            index = varint()
            if index >= len(self.entries):
                raise ArchiveError(f"placed image map names unknown image {index}",
                                   offset + at)
            entry = self.entries[index]
            if not images:
                platform, word_size = entry.platform, entry.word_size
            zigzag = varint()
            base = (base + unit * (zigzag >> 1 if not zigzag & 1 else -(zigzag >> 1) - 1)) \
                & ((1 << word_size) - 1)
            budget.spend(IMAGE_COST, offset)
            image = entry.images[0]
            images.append(Image(image.path, base, (base + image.end_of_text)
                                & ((1 << word_size) - 1), image.build_id))
        if at != end:
            raise ArchiveError(f"{end - at} bytes after the placed image map", offset + at)
        return ImageMap(platform, images, word_size)


class Event:
    """One capture of a trace: ``thread`` as the debugger numbers it
    (``"1 (4242 name)"``); ``pid``, ``tid`` and ``thread_name`` where the
    capture knew them (0 and "" where not); ``cut`` where the stack copy
    ended before the walk did (the trace lacks its outer frames).  (A
    plain class, not a dataclass: see cbf.Omitted.)"""

    __slots__ = ("trace_id", "image_map_index", "time_ns", "architecture", "thread",
                 "reason", "label", "pid", "tid", "thread_name", "cut")

    def __init__(self, trace_id: int, image_map_index: int, time_ns: int = 0,
                 architecture: str = "", thread: str = "", reason: str = "",
                 label: str = "", pid: int = 0, tid: int = 0, thread_name: str = "",
                 cut: bool = False) -> None:
        self.trace_id = trace_id
        self.image_map_index = image_map_index
        self.time_ns = time_ns
        self.architecture = architecture
        self.thread = thread
        self.reason = reason
        self.label = label
        self.pid = pid
        self.tid = tid
        self.thread_name = thread_name
        self.cut = cut

    @property
    def tail(self) -> Tuple[int, int, str, bool]:
        """(pid, tid, thread name, cut): what the event record's tail holds."""
        return self.pid, self.tid, self.thread_name, self.cut

    def _fields(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Event:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return "Event(" + ", ".join(f"{name}={getattr(self, name)!r}"
                                    for name in self.__slots__) + ")"


class Trace:
    __slots__ = ("trace_id", "data", "events")

    def __init__(self, trace_id: int, data: bytes, events: Optional[List[Event]] = None) -> None:
        self.trace_id = trace_id
        self.data = data  # CBF
        self.events: List[Event] = [] if events is None else events

    @property
    def count(self) -> int:
        return len(self.events)

    def decoded(self) -> cbf.Backtrace:
        return cbf.decode(self.data, strict=False)


#: the most distinct event strings Archive keeps packed (one set a thread
#: of a recording, and a process may make thousands of threads a second)
PACKED_STRINGS_KEPT = 1024


class Archive:
    """Traces stored once each, image maps, and the events that use them."""

    def __init__(self) -> None:
        self.traces: Dict[int, Trace] = {}  # ids sequential from 1
        self.image_maps: List[bytes] = []  # encoded image maps, in file order
        self.events: List[Event] = []
        self._buckets: Dict[int, List[int]] = {}  # hash -> trace ids
        self._image_map_index: Dict[bytes, int] = {}
        self._pending: List[Tuple[int, bytes]] = []  # records not yet written
        #: an event's strings and tail, packed once per distinct set (a
        #: recording repeats the same few)
        self._packed_strings: Dict[Tuple[Any, ...], bytes] = {}
        self.image_table = ImageTable()  # of the file read (parse_archive)

    def _add_record(self, kind: int, payload: bytes) -> None:
        self._pending.append((kind, payload))

    def add_image_map(self, image_map_bytes: bytes) -> int:
        index = self._image_map_index.get(image_map_bytes)
        if index is None:
            index = len(self.image_maps)
            self.image_maps.append(image_map_bytes)
            self._image_map_index[image_map_bytes] = index
            self._add_record(KIND_IMAGE_MAP, image_map_bytes)
        return index

    def add_trace(self, data: bytes) -> int:
        """The id of the trace with these CBF bytes, stored if new."""
        digest = trace_hash(data)
        for trace_id in self._buckets.get(digest, ()):
            if self.traces[trace_id].data == data:
                return trace_id
        trace_id = len(self.traces) + 1
        self.traces[trace_id] = Trace(trace_id, data)
        self._buckets.setdefault(digest, []).append(trace_id)
        self._add_record(KIND_TRACE, _TRACE_HEAD.pack(trace_id, digest) + data)
        return trace_id

    def add_event(self, event: Event) -> None:
        self.events.append(event)
        self.traces[event.trace_id].events.append(event)
        self.stream_event(event.trace_id, event.image_map_index, event.time_ns,
                          (event.architecture, event.thread, event.reason, event.label),
                          event.tail)

    def stream_event(self, trace_id: int, image_map_index: int, time_ns: int,
                     strings: Tuple[str, str, str, str],
                     tail: Tuple[int, int, str, bool] = (0, 0, "", False)) -> None:
        """Add the record of an event, (architecture, thread, reason,
        label) its ``strings``, (pid, tid, thread name, cut) its ``tail``
        (Event.tail), and keep no Event: an archive written as it grows
        (archive.stream) holds its distinct traces, not every sample of a
        long recording."""
        key = (*strings, *tail)
        packed = self._packed_strings.get(key)
        if packed is None:
            if len(self._packed_strings) >= PACKED_STRINGS_KEPT:
                self._packed_strings.clear()  # threads come and go: kept bounded
            packed = self._packed_strings[key] = _packed_event_strings(strings, tail)
        self._add_record(KIND_EVENT, _EVENT_HEAD.pack(trace_id, image_map_index, time_ns)
                         + packed)

    def capture(self, cbf_bytes: bytes, image_map: ImageMap, **details: Any) -> int:
        """Add one captured backtrace; returns its trace id."""
        index = self.add_image_map(encode_image_map(image_map))
        trace_id = self.add_trace(cbf_bytes)
        self.add_event(Event(trace_id, index, **details))
        return trace_id

    def image_map(self, index: int) -> ImageMap:
        return decode_image_map(self.image_maps[index])

    def pending_records(self) -> List[Tuple[int, bytes]]:
        """[(kind, record bytes)] of the records not yet written."""
        return [(kind, record_bytes(kind, payload)) for kind, payload in self._pending]

    def pending_bytes(self) -> bytes:
        return b"".join(record for _, record in self.pending_records())

    def mark_written(self) -> None:
        self._pending = []


def _packed_event_strings(strings: Tuple[str, ...],
                          tail: Tuple[int, int, str, bool]) -> bytes:
    """An event record's bytes after its head: the four strings, then the
    tail (_EVENT_TAIL and the thread's name) unless it says nothing (a
    debugger's capture: its record stays as older sfbt wrote it)."""
    packed = b"".join(_pack_string(s) for s in strings)
    pid, tid, name, cut = tail
    if pid or tid or name or cut:
        packed += _EVENT_TAIL.pack(pid & 0xFFFFFFFF, tid & 0xFFFFFFFF,
                                   EVENT_CUT if cut else 0) + _pack_string(name)
    return packed


def _pack_string(text: str) -> bytes:
    # surrogate escapes: the bytes of a thread name that is not UTF-8
    data = text.encode("utf-8", "surrogateescape")
    if len(data) > 0xFFFF:
        data = data[:0xFFFF]
    return struct.pack("<H", len(data)) + data


def _unpack_strings(payload: bytes, at: int, count: int,
                    offset: int) -> Tuple[List[str], int]:
    """(``count`` strings from ``at`` on, where they end)."""
    strings: List[str] = []
    end = len(payload)
    for _ in range(count):
        if at + 2 > end:
            raise ArchiveError("event record ends inside a string", offset + at)
        size = payload[at] | payload[at + 1] << 8  # little-endian, as _pack_string
        at += 2
        if at + size > end:
            raise ArchiveError("event record ends inside a string", offset + at)
        strings.append(payload[at:at + size].decode("utf-8", "surrogateescape"))
        at += size
    return strings, at


def is_archive(data: bytes) -> bool:
    return data[:len(MAGIC)] == MAGIC


#: How much of an archive iter_records reads at a time.
READ_AHEAD_BYTES = 1 << 20


def iter_records(stream: IO[bytes],
                 where: Optional[str] = None) -> Iterator[Tuple[int, int, bytes]]:
    """(offset, kind, payload) for each record of the archive open in
    ``stream`` (positioned after the magic), read READ_AHEAD_BYTES (or a
    whole record) at a time: the stream's position is anywhere after the
    records given.  The first damage, or a record beyond the limits,
    raises ArchiveError at its offset."""
    at = len(MAGIC)
    data, start = b"", 0  # data[start:] was read from ``at`` on
    view = memoryview(data)
    while True:
        if len(data) - start < _RECORD_HEAD.size:
            data = data[start:]
            data, start = data + stream.read(max(READ_AHEAD_BYTES,
                                                 _RECORD_HEAD.size - len(data))), 0
            view = memoryview(data)
            if not data:
                return
            if len(data) < _RECORD_HEAD.size:
                raise ArchiveError("truncated record header", at, where)
        kind, length = _RECORD_HEAD.unpack_from(data, start)
        if length > MAX_RECORD_BYTES:
            raise ArchiveError(f"record of {length} bytes is larger than the "
                               f"{MAX_RECORD_BYTES} sfbt reads", at, where)
        size = _RECORD_HEAD.size + length + _CRC.size
        if at + size > MAX_ARCHIVE_BYTES:
            raise ArchiveError(f"archive is larger than the {MAX_ARCHIVE_BYTES} "
                               "bytes sfbt reads", at, where)
        if len(data) - start < size:
            data = data[start:]
            data, start = data + stream.read(max(READ_AHEAD_BYTES, size - len(data))), 0
            view = memoryview(data)
            if len(data) < size:
                raise ArchiveError(f"record of {length} bytes runs past the end of the "
                                   f"file ({at + len(data)} bytes): truncated", at, where)
        payload_end = start + _RECORD_HEAD.size + length
        (crc,) = _CRC.unpack_from(data, payload_end)
        if zlib.crc32(view[start:payload_end]) != crc:
            raise ArchiveError("record checksum mismatch: corrupt", at, where)
        yield at, kind, data[start + _RECORD_HEAD.size:payload_end]
        at += size
        start += size


def archive_budget() -> DecodeBudget:
    """The DecodeBudget all of one archive's image maps share."""
    return DecodeBudget(MAX_ARCHIVE_DECODED_BYTES, "the archive's image maps")


def _check_image_map(payload: bytes, offset: int, budget: DecodeBudget) -> ImageMap:
    """Decode an image map record's payload, or raise ArchiveError there."""
    try:
        return decode_image_map(payload, budget)
    except ImageMapError as error:
        raise ArchiveError(f"image map: {error}", offset) from None


def _check_trace(payload: bytes, offset: int, expected_id: int) -> Tuple[int, int, bytes]:
    """(trace id, hash, CBF bytes) of a trace record's payload."""
    if len(payload) < _TRACE_HEAD.size:
        raise ArchiveError("trace record too short", offset)
    trace_id, digest = _TRACE_HEAD.unpack_from(payload)
    cbf_bytes = payload[_TRACE_HEAD.size:]
    if trace_id != expected_id:
        raise ArchiveError(f"trace id {trace_id} out of sequence", offset)
    if digest != trace_hash(cbf_bytes):
        raise ArchiveError(f"trace {trace_id} hash does not match its bytes", offset)
    return trace_id, digest, cbf_bytes


def _check_event(payload: bytes, offset: int, trace_count: int,
                 image_map_count: int) -> Event:
    if len(payload) < _EVENT_HEAD.size:
        raise ArchiveError("event record too short", offset)
    trace_id, index, time_ns = _EVENT_HEAD.unpack_from(payload)
    if not 1 <= trace_id <= trace_count:
        raise ArchiveError(f"event names unknown trace {trace_id}", offset)
    if index >= image_map_count:
        raise ArchiveError(f"event names unknown image map {index}", offset)
    return Event(trace_id, index, time_ns, *_event_strings(payload, offset))


#: An archive's events repeat a few blocks of strings (architecture,
#: thread, stop reason, label) and tails: up to MAX_KEPT_STRINGS of them,
#: of at most MAX_KEPT_STRINGS_BYTES each, are decoded once.
MAX_KEPT_STRINGS = 4096
MAX_KEPT_STRINGS_BYTES = 256
_kept_strings: Dict[bytes, Tuple[Any, ...]] = {}


def _event_strings(payload: bytes, offset: int) -> Tuple[Any, ...]:
    """The four strings of an event record (at ``offset``), then its
    tail's pid, tid, thread name and cut (0, 0, "", False without one;
    bytes after the tail, of a later sfbt, are passed over)."""
    block = payload[_EVENT_HEAD.size:]
    fields = _kept_strings.get(block)
    if fields is None:
        strings, at = _unpack_strings(payload, _EVENT_HEAD.size, 4, offset)
        tail: Tuple[Any, ...] = (0, 0, "", False)
        if at < len(payload):
            if at + _EVENT_TAIL.size > len(payload):
                raise ArchiveError("event record ends inside its thread ids", offset + at)
            pid, tid, flags = _EVENT_TAIL.unpack_from(payload, at)
            (name,), _ = _unpack_strings(payload, at + _EVENT_TAIL.size, 1, offset)
            tail = (pid, tid, name, bool(flags & EVENT_CUT))
        fields = (*strings, *tail)
        if len(block) <= MAX_KEPT_STRINGS_BYTES:
            if len(_kept_strings) >= MAX_KEPT_STRINGS:
                _kept_strings.clear()
            _kept_strings[block] = fields
    return fields


def parse_archive(data: bytes,
                  path: Optional[str] = None) -> Tuple[Archive, Optional[ArchiveError]]:
    """(Archive, ArchiveError or None): everything before the first damage."""
    archive = Archive()
    budget = archive_budget()
    if not is_archive(data):
        return archive, ArchiveError("not an sfbt archive (bad magic)", 0, path)
    stream = io.BytesIO(data)
    stream.seek(len(MAGIC))
    try:
        for at, kind, payload in iter_records(stream):
            _parse_record(archive, at, kind, payload, budget)
    except ArchiveError as error:
        error.where = path
        archive.mark_written()
        return archive, error
    archive.mark_written()
    return archive, None


def _parse_record(archive: Archive, at: int, kind: int, payload: bytes,
                  budget: DecodeBudget) -> None:
    offset = at + _RECORD_HEAD.size
    if kind == KIND_IMAGE_MAP:
        if payload not in archive._image_map_index:  # each distinct map once
            _check_image_map(payload, offset, budget)
        archive.add_image_map(payload)
    elif kind == KIND_TRACE:
        _, _, cbf_bytes = _check_trace(payload, offset, len(archive.traces) + 1)
        archive.add_trace(cbf_bytes)
    elif kind == KIND_EVENT:
        archive.add_event(_check_event(payload, offset, len(archive.traces),
                                       len(archive.image_maps)))
    elif kind == KIND_IMAGE:
        archive.image_table.add(payload, offset, budget)
    elif kind == KIND_PLACED_MAP:
        archive.add_image_map(encode_image_map(archive.image_table.placed(payload, offset,
                                                                           budget)))
    elif kind == KIND_CRASH:
        placed, traces, events = crash_events(payload, offset, len(archive.traces),
                                              len(archive.image_maps))
        if placed is not None:
            number = len(archive.image_maps)
            index = archive.add_image_map(encode_image_map(archive.image_table.placed(
                payload[placed[0]:placed[1]], offset + placed[0], budget, placed[2])))
            for event in events:  # (a map the file had: the archive keeps it once)
                if event.image_map_index == number:
                    event.image_map_index = index
        for start, end in traces:
            if archive.add_trace(payload[start:end]) != len(archive.traces):
                raise ArchiveError("crash record repeats a trace of the file", offset + start)
        for event in events:
            archive.add_event(event)
    else:
        raise ArchiveError(f"unknown record kind {kind}", at)


class ArchiveReader:
    """An archive read from a file a record at a time: a first pass notes
    where each image map and trace is, how often each trace was captured
    and its first capture; ``traces()`` then reads the traces one by one.
    Memory grows with the number of traces, never with their frames.

    ``error`` is the ArchiveError that ended the archive early (the
    records before it are used), or None; it is final once ``traces()``
    is exhausted, which also stops at the frame budget: a few bytes of
    ``rep`` can ask for millions of frames, so an archive may expand to
    FRAMES_PER_BYTE frames per byte of the file (at least a whole trace's
    worth, cbf.DEFAULT_LIMIT).  Each distinct image map is decoded once,
    in the first pass, and kept: all of them together within
    MAX_ARCHIVE_DECODED_BYTES.  ``recording`` sums up every event read;
    each trace's events are counted per thread and cut (``traces()``
    gives them), so that a stack several threads share is told apart."""

    def __init__(self, stream: IO[bytes], path: str, size: int):
        self.stream = stream
        self.path = path
        self.error: Optional[ArchiveError] = None
        self._maps: List[ImageMap] = []  # each image map record's
        self._decoded_maps: Dict[bytes, ImageMap] = {}  # by blake2b digest of its bytes
        self._budget = archive_budget()
        self._table = ImageTable()
        self._trace_offsets = array("Q")  # where each trace's CBF bytes are
        self._trace_lengths = array("L")
        # each trace's first event record (payload, or the Event of a
        # KIND_CRASH record), or None
        self._first_events: List[Union[bytes, Event, None]] = []
        #: each trace's captures per group, a group being thread number * 2
        #: + cut (threads numbered in ``_threads`` by what their events say
        #: of them): its first group and that group's count in arrays (most
        #: traces have one), the other groups' counts by trace index
        self._first_groups = array("q")
        self._first_counts = array("L")
        self._other_groups: Dict[int, Dict[int, int]] = {}
        self._thread_numbers: Dict[Tuple[str, int, int, str], int] = {}
        self._threads: List[Optional[SampledThread]] = []
        from .recording import Recording  # (a reader's: the crash handler only writes)
        self.recording = Recording()
        start = stream.read(len(MAGIC))
        self.frame_budget = max(cbf.DEFAULT_LIMIT, FRAMES_PER_BYTE * size)
        if not is_archive(start):
            self.error = ArchiveError("not an sfbt archive (bad magic)", 0, path)
            return
        try:
            for at, kind, payload in iter_records(stream):
                self._note(at, kind, payload)
        except ArchiveError as error:
            error.where = path
            self.error = error

    def _note(self, at: int, kind: int, payload: bytes) -> None:
        offset = at + _RECORD_HEAD.size
        if kind == KIND_IMAGE_MAP:
            digest = blake2b(payload, digest_size=16).digest()
            image_map = self._decoded_maps.get(digest)
            if image_map is None:
                image_map = _check_image_map(payload, offset, self._budget)
                self._decoded_maps[digest] = image_map
            self._maps.append(image_map)
        elif kind == KIND_TRACE:
            _check_trace(payload, offset, len(self._trace_offsets) + 1)
            self._trace_offsets.append(offset + _TRACE_HEAD.size)
            self._trace_lengths.append(len(payload) - _TRACE_HEAD.size)
            self._first_events.append(None)
            self._first_groups.append(-1)
            self._first_counts.append(0)
        elif kind == KIND_EVENT:
            self._note_event(_check_event(payload, offset, len(self._trace_offsets),
                                          len(self._maps)), payload)
        elif kind == KIND_IMAGE:
            self._table.add(payload, offset, self._budget)
        elif kind == KIND_PLACED_MAP:
            self._maps.append(self._table.placed(payload, offset, self._budget))
        elif kind == KIND_CRASH:
            placed, traces, events = crash_events(payload, offset, len(self._trace_offsets),
                                                  len(self._maps))
            if placed is not None:
                self._maps.append(self._table.placed(payload[placed[0]:placed[1]],
                                                     offset + placed[0], self._budget,
                                                     placed[2]))
            for start, end in traces:
                self._trace_offsets.append(offset + start)
                self._trace_lengths.append(end - start)
                self._first_events.append(None)
                self._first_groups.append(-1)
                self._first_counts.append(0)
            for event in events:
                self._note_event(event, event)
        else:
            raise ArchiveError(f"unknown record kind {kind}", at)

    def _note_event(self, event: Event, kept: Union[bytes, Event]) -> None:
        """Count ``event``; ``kept`` is what is kept of its trace's first
        (its record's payload, or the Event of a KIND_CRASH record)."""
        self.recording.add(event)
        index = event.trace_id - 1
        thread = self._thread_numbers.get(
            (event.thread, event.pid, event.tid, event.thread_name))
        if thread is None:
            thread = self._thread_number(event)
        group = thread * 2 + event.cut
        if self._first_groups[index] == group:
            self._first_counts[index] += 1
        elif self._first_groups[index] < 0:
            self._first_groups[index] = group
            self._first_counts[index] = 1
        else:
            others = self._other_groups.setdefault(index, {})
            others[group] = others.get(group, 0) + 1
        if self._first_events[index] is None:  # kept as bytes: a third of the memory
            self._first_events[index] = kept

    def _thread_number(self, event: Event) -> int:
        """The number of the event's thread in ``_threads``; past
        MAX_THREADS of them, the number of MORE_THREADS (said once)."""
        from .recording import MAX_THREADS
        from .threads import sampled_thread
        key = (event.thread, event.pid, event.tid, event.thread_name)
        number = self._thread_numbers.get(key)
        if number is None:
            if len(self._threads) >= MAX_THREADS:
                return self._more_threads()
            number = self._thread_numbers[key] = len(self._threads)
            self._threads.append(sampled_thread(event))
        return number

    def _more_threads(self) -> int:
        from .recording import MAX_THREADS
        from .threads import MORE_THREADS
        key = ("", -1, -1, "")  # no event's: their ids are unsigned
        number = self._thread_numbers.get(key)
        if number is None:
            left_out(f"{self.path}: the samples of threads past the first {MAX_THREADS:,} "
                     f"counted as {MORE_THREADS.label}")
            number = self._thread_numbers[key] = len(self._threads)
            self._threads.append(MORE_THREADS)
        return number

    def _read(self, offset: int, length: int) -> bytes:
        self.stream.seek(offset)
        return self.stream.read(length)

    def image_map(self, index: int) -> ImageMap:
        return self._maps[index]

    def traces(self) -> Iterator[Tuple[int, Event, List[SampleGroup], cbf.Backtrace]]:
        """(number, first Event, its SampleGroups, decoded Backtrace) for
        each captured trace, in id order."""
        from .threads import SampleGroup
        budget = self.frame_budget
        decoder = cbf.TraceDecoder()
        for number, (offset, length) in enumerate(
                zip(self._trace_offsets, self._trace_lengths), 1):
            payload = self._first_events[number - 1]
            if payload is None:
                continue
            event = payload if isinstance(payload, Event) else \
                _check_event(payload, 0, len(self._trace_offsets), len(self._maps))
            limit = min(cbf.DEFAULT_LIMIT, budget)
            decoded = decoder.decode(self._read(offset, length), limit)
            if decoded.over_limit and limit < cbf.DEFAULT_LIMIT:
                if (self.error is None or self.error.offset is None
                        or self.error.offset > offset):
                    self.error = ArchiveError(
                        f"trace {number}: the archive expands to more than "
                        f"{self.frame_budget} frames ({FRAMES_PER_BYTE} per byte "
                        "of the file); the rest is not read", offset, self.path)
                return
            budget -= len(decoded.frames)
            first = self._first_groups[number - 1]
            groups = [SampleGroup(self._threads[first >> 1], bool(first & 1),
                                  self._first_counts[number - 1])]
            others = self._other_groups.get(number - 1)
            if others:
                groups += [SampleGroup(self._threads[group >> 1], bool(group & 1), count)
                           for group, count in others.items()]
            yield number, event, groups, decoded


def read_archive(path: str) -> Tuple[Archive, Optional[ArchiveError]]:
    """(Archive, ArchiveError or None) of the archive file at path, read
    into memory whole (up to MAX_ARCHIVE_BYTES)."""
    with open_regular(path, MAX_ARCHIVE_BYTES) as stream:
        return parse_archive(stream.read(), path)


def trace_record(trace_id: int, data: bytes) -> bytes:
    """The record of trace ``trace_id`` (its CBF ``data``)."""
    return record_bytes(KIND_TRACE, _TRACE_HEAD.pack(trace_id, trace_hash(data)) + data)


def event_record(event: Event, trace_id: int, image_map_index: int) -> bytes:
    """The record of ``event``, naming trace ``trace_id`` and image map
    ``image_map_index`` (of the file it is written to)."""
    return record_bytes(KIND_EVENT, _EVENT_HEAD.pack(trace_id, image_map_index, event.time_ns)
                        + _packed_event_strings((event.architecture, event.thread,
                                                 event.reason, event.label), event.tail))


def record_bytes(kind: int, payload: bytes) -> bytes:
    head = _RECORD_HEAD.pack(kind, len(payload))
    return head + payload + _CRC.pack(zlib.crc32(head + payload))


class _StoredRecords:
    """What appending needs to know of an archive on disk, read a record
    at a time: its image maps and traces by hash (trace bytes are read
    back to compare), so that only new ones are added."""

    def __init__(self, stream: IO[bytes], path: str):
        self.stream = stream
        if not is_archive(stream.read(len(MAGIC))):
            raise ArchiveError("not an sfbt archive (bad magic)", 0, path)
        self.image_maps: Dict[bytes, int] = {}  # digest -> index
        self.image_map_count = 0
        self.budget = archive_budget()
        self.table = ImageTable()
        self.buckets: Dict[int, List[Tuple[int, int, int]]] = {}  # hash -> (id, offset, length)
        self.trace_count = 0
        self.size = len(MAGIC)
        try:
            for at, kind, payload in iter_records(stream):
                self._note(at, kind, payload)
                self.size = at + _RECORD_HEAD.size + len(payload) + _CRC.size
        except ArchiveError as error:
            error.where = path
            raise
        self.new_traces: Dict[int, bytes] = {}  # of traces added now

    def _note(self, at: int, kind: int, payload: bytes) -> None:
        offset = at + _RECORD_HEAD.size
        if kind in (KIND_IMAGE_MAP, KIND_PLACED_MAP):
            if kind == KIND_PLACED_MAP:
                payload = encode_image_map(self.table.placed(payload, offset, self.budget))
            digest = blake2b(payload, digest_size=16).digest()
            if digest not in self.image_maps and kind == KIND_IMAGE_MAP:
                _check_image_map(payload, offset, self.budget)
            self.image_maps.setdefault(digest, self.image_map_count)
            self.image_map_count += 1
        elif kind == KIND_IMAGE:
            self.table.add(payload, offset, self.budget)
        elif kind == KIND_TRACE:
            trace_id, hashed, _ = _check_trace(payload, offset, self.trace_count + 1)
            self.buckets.setdefault(hashed, []).append(
                (trace_id, offset + _TRACE_HEAD.size, len(payload) - _TRACE_HEAD.size))
            self.trace_count += 1
        elif kind == KIND_EVENT:
            _check_event(payload, offset, self.trace_count, self.image_map_count)
        elif kind == KIND_CRASH:
            placed, traces, _ = crash_events(payload, offset, self.trace_count,
                                             self.image_map_count)
            if placed is not None:
                map_bytes = encode_image_map(self.table.placed(
                    payload[placed[0]:placed[1]], offset + placed[0], self.budget, placed[2]))
                self.image_maps.setdefault(blake2b(map_bytes, digest_size=16).digest(),
                                           self.image_map_count)
                self.image_map_count += 1
            for start, end in traces:
                self.trace_count += 1
                self.buckets.setdefault(trace_hash(payload[start:end]), []).append(
                    (self.trace_count, offset + start, end - start))
        else:
            raise ArchiveError(f"unknown record kind {kind}", at)

    def _bytes_of(self, trace_id: int, offset: int, length: int) -> bytes:
        if trace_id in self.new_traces:
            return self.new_traces[trace_id]
        self.stream.seek(offset)
        return self.stream.read(length)

    def records_for(self, archive: Archive) -> bytes:
        """The records that add archive's events to these."""
        out = []
        for event in archive.events:
            map_bytes = archive.image_maps[event.image_map_index]
            digest = blake2b(map_bytes, digest_size=16).digest()
            index = self.image_maps.get(digest)
            if index is None:
                index = self.image_maps[digest] = self.image_map_count
                self.image_map_count += 1
                out.append(record_bytes(KIND_IMAGE_MAP, map_bytes))
            data = archive.traces[event.trace_id].data
            hashed = trace_hash(data)
            bucket = self.buckets.setdefault(hashed, [])
            trace_id = next((place[0] for place in bucket
                             if self._bytes_of(*place) == data), None)
            if trace_id is None:
                self.trace_count += 1
                trace_id = self.trace_count
                self.new_traces[trace_id] = data
                bucket.append((trace_id, 0, len(data)))
                out.append(record_bytes(KIND_TRACE, _TRACE_HEAD.pack(trace_id, hashed) + data))
            strings = _packed_event_strings((event.architecture, event.thread,
                                             event.reason, event.label), event.tail)
            out.append(record_bytes(KIND_EVENT, _EVENT_HEAD.pack(
                trace_id, index, event.time_ns) + strings))
        return b"".join(out)


def save_archive(path: str, archive: Archive, append: bool = False) -> None:
    """Write the archive's new records; with append, after the records of the
    file already at path (which must be undamaged).  Either holds the lock
    appends take, so that concurrent appends and replaces all land."""
    if not append:
        replace_locked(path, lambda out: out.write(MAGIC + archive.pending_bytes()))
        archive.mark_written()
        return
    with locked_for_update(path) as old:
        if old is None:
            new, keep = MAGIC + archive.pending_bytes(), 0
        else:
            stored = _StoredRecords(old, path)
            new, keep = stored.records_for(archive), stored.size

        def write(out: IO[bytes]) -> None:
            if keep:
                old.seek(0)
                _copy(old, out, keep)
            out.write(new)
        replace_file(path, write)
    archive.mark_written()


def _copy(source: IO[bytes], destination: IO[bytes], size: int) -> None:
    while size:
        chunk = source.read(min(size, 1 << 20))
        if not chunk:
            raise ArchiveError("the archive shrank while it was being appended to", size)
        destination.write(chunk)
        size -= len(chunk)
