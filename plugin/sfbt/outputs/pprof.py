"""`sfbt flame --format pprof`: saved stacks as a gzipped profile.proto
profile (github.com/google/pprof, proto/profile.proto), the form that
`go tool pprof`, Pyroscope, Parca and Grafana read.

It is written by the small encoder of protobuf's wire format below, not
with the protobuf package and messages generated from profile.proto: the
profile needs seven messages made of varints, strings and packed varints,
which take forty lines to write, where the package would be a dependency
(with its license and its native parts) for one export.  Go's own reader
(`go tool pprof`) checks the result in the tests.

Each distinct saved trace is one Sample per thread that captured it: its
location ids leaf first, as its one value how often that thread captured
it (sample type samples/count), and labels where the archive knows them:
``thread`` and ``pid`` numbers (``num``: `go tool pprof -tagfocus
thread=4243` takes a number as a numeric range, and matches no string
label with it), ``thread_name`` a string (Pyroscope takes string labels
only; where the thread id is not known, its thread string).
A stack cut short by the end of its copy has a root Location of its own,
a function named ``[cut]``, as `sfbt fold` puts it under ``[cut]``.
A Location is one address in one image: the address looked up (a return
address less one, as sfbt names frames; the user PC below kernel frames
itself: sfbt.archive.cbf.kernel_entries), its Mapping (the image's path,
text range and build id) and its Lines (function, source line): one per
call inlined at the address, innermost first, then the function's own.  Names and
lines are those of `sfbt flame`'s SVG (sfbt.outputs.names.ImageNamer); an
address outside every image, or in one whose file is not found, gets a
function named as the flame graph names it.  The kernel's signal
trampoline (sfbt.archive.cbf.signal_trampolines) is its own Location, at
its address, with one Line: a function named as the flame graph names it,
``<signal handler called>``, whose system name is the symbol at the
address.

Every string (image paths, function and file names, the label) is escaped
as sfbt prints names (sfbt.printable): no control byte reaches a terminal
through `go tool pprof`."""

import gzip

from ..archive import cbf
from ..archive.imagemap import PerImageMap
from ..archive.symbolize import kernel_range
from ..archive.layout import SIGNAL_TRAMPOLINE
from ..printable import printable
from . import CUT_ROOT
from .names import ImageNamer

#: every sample by its thread: its labels
BY_THREAD = True

# Field numbers of proto/profile.proto
PROFILE_SAMPLE_TYPE, PROFILE_SAMPLE, PROFILE_MAPPING, PROFILE_LOCATION = 1, 2, 3, 4
PROFILE_FUNCTION, PROFILE_STRING_TABLE, PROFILE_TIME_NANOS = 5, 6, 9
PROFILE_DURATION_NANOS, PROFILE_PERIOD_TYPE, PROFILE_PERIOD, PROFILE_COMMENT = 10, 11, 12, 13
VALUE_TYPE_TYPE, VALUE_TYPE_UNIT = 1, 2
SAMPLE_LOCATION_ID, SAMPLE_VALUE, SAMPLE_LABEL = 1, 2, 3
LABEL_KEY, LABEL_STR, LABEL_NUM = 1, 2, 3
MAPPING_ID, MAPPING_MEMORY_START, MAPPING_MEMORY_LIMIT, MAPPING_FILENAME = 1, 2, 3, 5
MAPPING_BUILD_ID, MAPPING_HAS_FUNCTIONS, MAPPING_HAS_FILENAMES = 6, 7, 8
MAPPING_HAS_LINE_NUMBERS = 9
LOCATION_ID, LOCATION_MAPPING_ID, LOCATION_ADDRESS, LOCATION_LINE = 1, 2, 3, 4
LINE_FUNCTION_ID, LINE_LINE = 1, 2
FUNCTION_ID, FUNCTION_NAME, FUNCTION_SYSTEM_NAME, FUNCTION_FILENAME = 1, 2, 3, 4

WIRE_VARINT, WIRE_LENGTH = 0, 2


def _varint(value):
    value &= (1 << 64) - 1  # an int64 below zero is written as its two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _number(field, value):
    """A varint field (integers, booleans); zero is left out, as proto3 does."""
    return _varint(field << 3 | WIRE_VARINT) + _varint(int(value)) if value else b""


def _bytes(field, data):
    """A length-delimited field: a string, a message, packed varints."""
    return _varint(field << 3 | WIRE_LENGTH) + _varint(len(data)) + data


def _packed(field, values):
    return _bytes(field, b"".join(map(_varint, values))) if values else b""


class PprofProfile:
    """A profile built a saved trace at a time (``add``), then written
    (``encode``)."""

    def __init__(self):
        self.namer = ImageNamer()
        # where each image is in its map, found without a scan of the map
        self._places = PerImageMap(lambda images: {id(image): place
                                                   for place, image in enumerate(images)})
        self._kernel = PerImageMap(kernel_range)
        self.stacks = 0
        self._strings = {"": 0}  # string_table[0] must be ""
        self._samples = []
        self._mappings = {}  # image key -> (id, Mapping bytes, place in its image map)
        self._locations = {}  # (address, image key, trampoline) -> (id, Location bytes)
        self._functions = {}  # (name, file, system name) -> (id, Function bytes)
        self._thread_labels = {}  # SampledThread or None -> its Label fields

    def _string(self, text):
        """The index of ``text`` in the string table, escaped as sfbt
        prints names (sfbt.printable): image paths, file names and the
        label come from the archive, and pprof prints them as they are."""
        return self._strings.setdefault(printable(text), len(self._strings))

    def add(self, sample):
        """One sfbt.outputs.Sample as one Sample, labelled with its thread."""
        trace = sample.trace
        ids = [self._location(frame.lookup_address, trace.images,
                              frame.__class__ is cbf.SignalTrampoline)
               for frame in cbf.read_entries(trace.frames,
                                             kernel=self._kernel(trace.images))
               if not isinstance(frame, cbf.Omitted)]
        if sample.cut:
            ids.append(self._cut_location())
        self._samples.append(_packed(SAMPLE_LOCATION_ID, ids)
                             + _packed(SAMPLE_VALUE, [sample.weight])
                             + self._labels(sample.thread))
        self.stacks += sample.weight

    def _labels(self, thread):
        """The Label fields of a thread's samples (none where it is not
        known), made once per thread: its ids numbers, its name a string."""
        found = self._thread_labels.get(thread)
        if found is None:
            labels = []
            if thread is not None:
                if thread.tid:
                    labels.append(_number(LABEL_KEY, self._string("thread"))
                                  + _number(LABEL_NUM, thread.tid))
                if thread.name or not thread.tid:
                    labels.append(_number(LABEL_KEY, self._string("thread_name"))
                                  + _number(LABEL_STR, self._string(thread.name
                                                                    or thread.label)))
                if thread.pid:
                    labels.append(_number(LABEL_KEY, self._string("pid"))
                                  + _number(LABEL_NUM, thread.pid))
            found = self._thread_labels[thread] = b"".join(
                _bytes(SAMPLE_LABEL, label) for label in labels)
        return found

    def _cut_location(self):
        """The Location of CUT_ROOT: no mapping, no address."""
        key = (CUT_ROOT, 0, False)
        found = self._locations.get(key)
        if found is None:
            number = len(self._locations) + 1
            line = _bytes(LOCATION_LINE, _number(LINE_FUNCTION_ID,
                                                 self._function(CUT_ROOT, "", CUT_ROOT)))
            found = self._locations[key] = (number, _number(LOCATION_ID, number) + line)
        return found[0]

    def _mapping(self, image, images):
        key = (image.path, image.base, image.end_of_text, image.build_id)
        found = self._mappings.get(key)
        if found is None:
            number = len(self._mappings) + 1
            symbols = self.namer.has_symbols(image)
            found = self._mappings[key] = (number, b"".join((
                _number(MAPPING_ID, number),
                _number(MAPPING_MEMORY_START, image.base),
                _number(MAPPING_MEMORY_LIMIT, image.end_of_text),
                _number(MAPPING_FILENAME, self._string(image.path)),
                _number(MAPPING_BUILD_ID, self._string(
                    image.build_id.hex() if image.build_id else "")),
                _number(MAPPING_HAS_FUNCTIONS, symbols),
                _number(MAPPING_HAS_FILENAMES, symbols),
                _number(MAPPING_HAS_LINE_NUMBERS, symbols))), self._places(images)[id(image)])
        return found[0]

    def _location(self, address, images, trampoline=False):
        image = self.namer.image_of(address, images)
        mapping = self._mapping(image, images) if image is not None else 0
        key = (address, mapping, trampoline)
        found = self._locations.get(key)
        if found is None:
            lines = []
            named = self.namer.frame_name(address, images).lines()
            names = self.namer.function_names(address, images)
            if trampoline:
                # pprof takes a system name with "<" for C++ and cuts
                # the template parameters out, all of this one: the
                # symbol at the address is the system name instead
                lines_named = [(SIGNAL_TRAMPOLINE, "", 0, names[-1])]
            else:
                lines_named = [(name, line.file or "", line.line if line.file is not None else 0,
                                name) for name, line in zip(names, named)]
            for name, file, line, system_name in lines_named:
                function = self._function(name, file, system_name)
                lines.append(_bytes(LOCATION_LINE, _number(LINE_FUNCTION_ID, function)
                                    + _number(LINE_LINE, line)))
            number = len(self._locations) + 1
            found = self._locations[key] = (number, b"".join((
                _number(LOCATION_ID, number),
                _number(LOCATION_MAPPING_ID, mapping),
                _number(LOCATION_ADDRESS, address),
                *lines)))
        return found[0]

    def _function(self, name, file, system_name):
        key = (name, file, system_name)
        found = self._functions.get(key)
        if found is None:
            number = len(self._functions) + 1
            found = self._functions[key] = (number, b"".join((
                _number(FUNCTION_ID, number),
                _number(FUNCTION_NAME, self._string(name)),
                _number(FUNCTION_SYSTEM_NAME, self._string(system_name)),
                _number(FUNCTION_FILENAME, self._string(file)))))
        return found[0]

    def _value_type(self, kind, unit):
        return (_number(VALUE_TYPE_TYPE, self._string(kind))
                + _number(VALUE_TYPE_UNIT, self._string(unit)))

    def encode(self, recording=None):
        """The gzipped profile; ``recording`` (sfbt.archive.recording),
        when the file had events, gives its start, duration, sampling
        period (CPU nanoseconds where it sampled on CPU, as perf's and Go's
        CPU profiles say it; else wall-clock nanoseconds: every thread is
        sampled, running or not) and a comment (the events' label)."""
        parts = [_bytes(PROFILE_SAMPLE_TYPE, self._value_type("samples", "count"))]
        parts += [_bytes(PROFILE_SAMPLE, sample) for sample in self._samples]
        # the main program first (pprof takes the first mapping for it): in
        # the order of the image maps, which list it first
        mappings = sorted(self._mappings.values(), key=lambda m: (m[2], m[0]))
        parts += [_bytes(PROFILE_MAPPING, message) for _, message, _ in mappings]
        for table, field in ((self._locations, PROFILE_LOCATION),
                             (self._functions, PROFILE_FUNCTION)):
            parts += [_bytes(field, message) for _, message in table.values()]
        if recording is not None:
            parts.append(_number(PROFILE_TIME_NANOS, recording.first_ns or 0))
            parts.append(_number(PROFILE_DURATION_NANOS, recording.duration_ns))
            if recording.cpu_period_ns:
                parts.append(_bytes(PROFILE_PERIOD_TYPE,
                                    self._value_type("cpu", "nanoseconds")))
                parts.append(_number(PROFILE_PERIOD, recording.cpu_period_ns))
            elif recording.rate:
                parts.append(_bytes(PROFILE_PERIOD_TYPE,
                                    self._value_type("wall", "nanoseconds")))
                parts.append(_number(PROFILE_PERIOD, round(1e9 / recording.rate)))
            if recording.label:
                parts.append(_packed(PROFILE_COMMENT, [self._string(recording.label)]))
        # the string table last: every other part has added its strings
        parts += [_bytes(PROFILE_STRING_TABLE, text.encode("utf-8", "replace"))
                  for text in self._strings]
        return gzip.compress(b"".join(parts), mtime=0)



def write(samples, options):
    profile = PprofProfile()
    for sample in samples:
        profile.add(sample)
    yield profile.encode(samples.recording)
