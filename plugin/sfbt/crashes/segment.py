"""A segment of the crash store: an sfbt archive that crashes are
appended to, under the store's lock, in one write each.  Each image
(path, build id, size) is written once, in the segment's image table
(KIND_IMAGE), and each crash's image map as its images' indexes and bases
(KIND_PLACED_MAP), and its threads' events as one KIND_CRASH record
(what they share written once, a few bytes a thread, its traces new to
the segment inline): a crash of a program seen before adds that record
and a map of a few bytes an image.  As in any archive, a trace (and a
map) is stored once a file."""

import os
import stat

from ..archive.imagemap import ImageMapError, decode_image_map
from ..archive.store import (KIND_CRASH, KIND_EVENT, KIND_IMAGE, KIND_IMAGE_MAP,
                             KIND_PLACED_MAP, KIND_TRACE, MAGIC, ArchiveError, archive_budget,
                             crash_events, crash_payload, event_record, image_record_payload,
                             iter_records, parse_archive, placed_map_payload, placed_places,
                             record_bytes, trace_record)
from ..files import FileProblem

#: the most of a segment read to append to it (segments close far earlier)
MAX_SEGMENT_READ = 64 << 20


class Segment:
    """The segment file at ``path``, created (0600) if missing, opened to
    append: its records read to know its image table, image maps, traces
    and events.  ``damaged``: a record is torn (a handler killed midway)
    or damaged; nothing more is appended to it (the index names its
    crashes by their events' places, which must not change), and
    readers read what comes before."""

    def __init__(self, path, create=True):
        self.path = path
        flags = os.O_RDWR | os.O_CREAT if create else os.O_RDONLY
        self.descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(self.descriptor).st_mode):
                raise FileProblem(path, "not a regular file")
            self._read()
        except BaseException:
            os.close(self.descriptor)
            raise

    def __enter__(self):
        return self

    def __exit__(self, *_):
        os.close(self.descriptor)

    def _read(self):
        self.images = {}  # (path, build id, size) -> table index
        self.image_paths = []  # the table's paths, in its order
        self.maps = {}  # placed map payload -> image map index
        self.traces = {}  # CBF bytes -> trace id: a trace is stored once a file
        self.map_count = self.event_count = 0
        size = os.fstat(self.descriptor).st_size
        with os.fdopen(os.dup(self.descriptor), "rb") as stream:
            if stream.read(len(MAGIC)) != MAGIC:
                self.end = 0
                self.damaged = size > 0  # not an archive: left as it is
                return
            self.end = len(MAGIC)
            budget = archive_budget()
            try:
                for at, kind, payload in iter_records(stream, self.path):
                    if at >= MAX_SEGMENT_READ:
                        break
                    if kind == KIND_IMAGE:
                        (image,) = decode_image_map(payload, budget).images
                        self.images.setdefault(
                            (image.path, image.build_id, image.end_of_text),
                            len(self.image_paths))
                        self.image_paths.append(image.path)
                    elif kind in (KIND_IMAGE_MAP, KIND_PLACED_MAP):
                        self.maps.setdefault((kind, payload), self.map_count)
                        self.map_count += 1
                    elif kind == KIND_TRACE:
                        self.traces.setdefault(payload[12:], len(self.traces) + 1)
                    elif kind == KIND_EVENT:
                        self.event_count += 1
                    elif kind == KIND_CRASH:
                        placed, traces, events = crash_events(
                            payload, at + 5, len(self.traces), self.map_count)
                        if placed is not None:  # its own map, keyed as append keys it
                            self.maps.setdefault((KIND_PLACED_MAP, placed_map_payload(
                                placed_places(payload[placed[0]:placed[1]], placed[2]))),
                                self.map_count)
                            self.map_count += 1
                        for start, end in traces:
                            self.traces.setdefault(payload[start:end], len(self.traces) + 1)
                        self.event_count += len(events)
                    self.end = at + 9 + len(payload)
            except (ArchiveError, ImageMapError, ValueError):
                pass
        self.damaged = self.end < size

    def append(self, archive_bytes):
        """Append the crash whose standalone archive is ``archive_bytes``
        (one image map); (index of its first event here, its events,
        {its images' paths: their numbers in the image table})."""
        crash, error = parse_archive(archive_bytes)
        if error is not None:
            raise error
        out = [] if self.end else [MAGIC]
        maps = {}  # the crash's map index -> this segment's
        numbers = {}  # the crash's images' paths -> their table numbers
        for index, map_bytes in enumerate(crash.image_maps):
            image_map = decode_image_map(map_bytes)
            places = []
            for image in image_map.images:
                key = (image.path, image.build_id, image.end_of_text - image.base)
                number = self.images.get(key)
                if number is None:
                    number = self.images[key] = len(self.image_paths)
                    self.image_paths.append(image.path)
                    out.append(record_bytes(KIND_IMAGE, image_record_payload(
                        image, image_map.platform, image_map.word_size)))
                places.append((number, image.base))
                numbers.setdefault(image.path, number)
            kind, payload = (KIND_PLACED_MAP, placed_map_payload(places)) if places \
                else (KIND_IMAGE_MAP, map_bytes)
            maps[index] = self.maps.get((kind, payload))
            if maps[index] is None:
                maps[index] = self.maps[(kind, payload)] = self.map_count
                self.map_count += 1
                out.append((kind, payload, places))
        first_event = crash.events[0] if crash.events else None
        one_record = first_event is not None and all(
            (e.image_map_index, e.time_ns, e.architecture, e.pid)
            == (first_event.image_map_index, first_event.time_ns,
                first_event.architecture, first_event.pid) for e in crash.events)
        image_map = maps.get(first_event.image_map_index) if one_record else None
        if one_record and len(crash.image_maps) == 1 and out and isinstance(out[-1], tuple) \
                and out[-1][0] == KIND_PLACED_MAP:
            image_map = out.pop()[2]  # the crash's new map: in its record
        out = [record if isinstance(record, bytes) else record_bytes(*record[:2])
               for record in out]
        if one_record:
            threads = []  # one KIND_CRASH record, its map and new traces inline
            for event in crash.events:
                data = crash.traces[event.trace_id].data
                trace_id = self.traces.get(data)
                if trace_id is None:
                    trace_id = self.traces[data] = len(self.traces) + 1
                    threads.append((event, trace_id, data))
                else:
                    threads.append((event, trace_id, None))
            out.append(record_bytes(KIND_CRASH, crash_payload(image_map, threads)))
        else:  # (not a crash as the handler makes one) a record a trace and an event
            traces = {}
            for trace_id, trace in crash.traces.items():
                traces[trace_id] = self.traces.get(trace.data)
                if traces[trace_id] is None:
                    traces[trace_id] = self.traces[trace.data] = len(self.traces) + 1
                    out.append(trace_record(traces[trace_id], trace.data))
            for event in crash.events:
                out.append(event_record(event, traces[event.trace_id],
                                        maps[event.image_map_index]))
        data = b"".join(out)
        written = os.pwrite(self.descriptor, data, self.end)
        if written != len(data):
            os.ftruncate(self.descriptor, self.end)
            raise FileProblem(self.path, f"{written} of {len(data)} bytes written")
        first = self.event_count
        self.event_count += len(crash.events)
        self.end += len(data)
        return first, len(crash.events), numbers


def image_paths(path):
    """The paths of the image table of the segment at ``path``, in table
    order (what is read before any damage)."""
    with Segment(path, create=False) as segment:
        return segment.image_paths
