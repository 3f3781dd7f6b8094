"""Backtrace archives: many backtraces in one file, each stored once.

Layout (docs/archive.md): an 8-byte magic, then records, each
``kind u8 | length u32 | payload | crc32 u32`` (little-endian; the CRC
covers kind, length and payload).  Image maps (Compact Image Map Format),
traces (CBF bytes, stored once per distinct trace, StackDepot-style) and
events (one per capture: thread, time, stop reason, label) are records of
their own, so appending only adds records and never rewrites old ones.
"""

import hashlib
import os
import struct
import zlib
from dataclasses import dataclass, field

from ..errors import LocatedError
from ..files import write_atomically
from . import cbf
from .imagemap import decode_image_map, encode_image_map

MAGIC = b"SFBTARC\x01"
KIND_IMAGE_MAP = 1
KIND_TRACE = 2
KIND_EVENT = 3
_RECORD_HEAD = struct.Struct("<BI")
_CRC = struct.Struct("<I")
_TRACE_HEAD = struct.Struct("<IQ")
_EVENT_HEAD = struct.Struct("<IIQ")


class ArchiveError(LocatedError):
    """A damaged archive: what is wrong and at which byte offset of which
    file (``where``)."""


def trace_hash(data):
    """The 64-bit hash that picks a trace's bucket."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


@dataclass
class Event:
    """One capture of a trace."""

    trace_id: int
    image_map_index: int
    time_ns: int = 0
    architecture: str = ""
    thread: str = ""
    reason: str = ""
    label: str = ""


@dataclass
class Trace:
    trace_id: int
    data: bytes  # CBF
    events: list = field(default_factory=list)

    @property
    def count(self):
        return len(self.events)

    def decoded(self):
        return cbf.decode(self.data, strict=False)


class Archive:
    """Traces stored once each, image maps, and the events that use them."""

    def __init__(self):
        self.traces = {}  # id -> Trace, ids sequential from 1
        self.image_maps = []  # encoded image maps, in file order
        self.events = []
        self._buckets = {}  # hash -> [trace ids]
        self._image_map_index = {}
        self._pending = []  # records not yet written

    def _add_record(self, kind, payload):
        self._pending.append((kind, payload))

    def add_image_map(self, image_map_bytes):
        index = self._image_map_index.get(image_map_bytes)
        if index is None:
            index = len(self.image_maps)
            self.image_maps.append(image_map_bytes)
            self._image_map_index[image_map_bytes] = index
            self._add_record(KIND_IMAGE_MAP, image_map_bytes)
        return index

    def add_trace(self, data):
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

    def add_event(self, event):
        self.events.append(event)
        self.traces[event.trace_id].events.append(event)
        strings = b"".join(_pack_string(s) for s in (
            event.architecture, event.thread, event.reason, event.label))
        self._add_record(KIND_EVENT, _EVENT_HEAD.pack(
            event.trace_id, event.image_map_index, event.time_ns) + strings)

    def capture(self, cbf_bytes, image_map, **details):
        """Add one captured backtrace; returns its trace id."""
        index = self.add_image_map(encode_image_map(image_map))
        trace_id = self.add_trace(cbf_bytes)
        self.add_event(Event(trace_id, index, **details))
        return trace_id

    def image_map(self, index):
        return decode_image_map(self.image_maps[index])

    def pending_bytes(self):
        out = []
        for kind, payload in self._pending:
            head = _RECORD_HEAD.pack(kind, len(payload))
            out.append(head + payload + _CRC.pack(zlib.crc32(head + payload)))
        return b"".join(out)

    def mark_written(self):
        self._pending = []


def _pack_string(text):
    data = text.encode("utf-8")
    if len(data) > 0xFFFF:
        data = data[:0xFFFF]
    return struct.pack("<H", len(data)) + data


def _unpack_strings(payload, at, count, offset):
    strings = []
    for _ in range(count):
        if at + 2 > len(payload):
            raise ArchiveError("event record ends inside a string", offset + at)
        (size,) = struct.unpack_from("<H", payload, at)
        at += 2
        if at + size > len(payload):
            raise ArchiveError("event record ends inside a string", offset + at)
        strings.append(payload[at:at + size].decode("utf-8", "replace"))
        at += size
    return strings


def is_archive(data):
    return data[:len(MAGIC)] == MAGIC


def parse_archive(data, path=None):
    """(Archive, ArchiveError or None): everything before the first damage."""
    archive = Archive()
    if not is_archive(data):
        return archive, ArchiveError("not an sfbt archive (bad magic)", 0, path)
    at = len(MAGIC)
    try:
        while at < len(data):
            at = _parse_record(archive, data, at)
    except ArchiveError as error:
        error.where = path
        archive.mark_written()
        return archive, error
    archive.mark_written()
    return archive, None


def _parse_record(archive, data, at):
    if at + _RECORD_HEAD.size > len(data):
        raise ArchiveError("truncated record header", at)
    kind, length = _RECORD_HEAD.unpack_from(data, at)
    end = at + _RECORD_HEAD.size + length + _CRC.size
    if end > len(data):
        raise ArchiveError(f"record of {length} bytes runs past the end of the "
                           f"file ({len(data)} bytes): truncated", at)
    body = data[at:end - _CRC.size]
    (crc,) = _CRC.unpack_from(data, end - _CRC.size)
    if zlib.crc32(body) != crc:
        raise ArchiveError("record checksum mismatch: corrupt", at)
    payload = body[_RECORD_HEAD.size:]
    offset = at + _RECORD_HEAD.size
    if kind == KIND_IMAGE_MAP:
        archive.add_image_map(payload)
    elif kind == KIND_TRACE:
        if len(payload) < _TRACE_HEAD.size:
            raise ArchiveError("trace record too short", offset)
        trace_id, digest = _TRACE_HEAD.unpack_from(payload)
        cbf_bytes = payload[_TRACE_HEAD.size:]
        if trace_id != len(archive.traces) + 1:
            raise ArchiveError(f"trace id {trace_id} out of sequence", offset)
        if digest != trace_hash(cbf_bytes):
            raise ArchiveError(f"trace {trace_id} hash does not match its bytes", offset)
        archive.add_trace(cbf_bytes)
    elif kind == KIND_EVENT:
        if len(payload) < _EVENT_HEAD.size:
            raise ArchiveError("event record too short", offset)
        trace_id, index, time_ns = _EVENT_HEAD.unpack_from(payload)
        if trace_id not in archive.traces:
            raise ArchiveError(f"event names unknown trace {trace_id}", offset)
        if index >= len(archive.image_maps):
            raise ArchiveError(f"event names unknown image map {index}", offset)
        strings = _unpack_strings(payload, _EVENT_HEAD.size, 4, offset)
        archive.add_event(Event(trace_id, index, time_ns, *strings))
    else:
        raise ArchiveError(f"unknown record kind {kind}", at)
    return end


def read_archive(path):
    with open(path, "rb") as stream:
        return parse_archive(stream.read(), path)


def save_archive(path, archive, append=False):
    """Write the archive's new records; with append, after the records of the
    file already at path (which must be undamaged)."""
    existing = MAGIC
    if append and os.path.exists(path):
        with open(path, "rb") as stream:
            existing = stream.read()
        old, error = parse_archive(existing, path)
        if error is not None:
            raise error
        merged = old
        for event in archive.events:
            trace = archive.traces[event.trace_id]
            index = merged.add_image_map(archive.image_maps[event.image_map_index])
            trace_id = merged.add_trace(trace.data)
            merged.add_event(Event(trace_id, index, event.time_ns, event.architecture,
                                   event.thread, event.reason, event.label))
        archive = merged
    write_atomically(path, existing + archive.pending_bytes())
    archive.mark_written()
