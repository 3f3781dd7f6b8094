"""A file `perf record --call-graph dwarf` wrote (perf.data), its samples
unwound with SFrame: each sample's copied user registers and stack are
walked with the one frame step `sfbt record` uses (perf_source.walk_sample)
and written into an sfbt archive (a temporary file), which `sfbt fold`,
`sfbt flame` and the other outputs then read as they read any archive.

The file (the kernel tree's tools/perf/Documentation/perf.data-file-format.txt):
a header (magic ``PERFILE2``, the attrs and data sections, a bitmap of
the feature sections that follow the data), each event's attr (its
sample_type, sample_regs_user, sample_stack_user and the ids of its
samples), the data section's records (SAMPLE, MMAP, MMAP2, COMM, FORK,
EXIT; the others passed over) and of the features, HEADER_BUILD_ID (the
build id of each file the samples hit: a file on disk of another build is
not read) and HEADER_ARCH.

A perf.data is its writer's data: every size is checked against the
file (one line naming the offset where one is wrong, never a traceback or
a loop), and a file its MMAP records name is read only if the perf.data's
owner could read it (files.ReadAs, the trust rule of cores and archives).
The records are in the order perf wrote its rings, not in time: the
mappings each sample is walked with are those its process had mapped by
the sample's time, and its thread's name the one it had then (a first
pass collects both, with their times)."""

import errno
import os
import struct
import tempfile
from bisect import bisect_right

from ..arch import AARCH64, X86_64
from ..archive.imagemap import Image, ImageMap, encode_image_map
from ..archive.store import Archive
from ..archive.stream import ArchiveStream
from ..commands.save import image_map
from ..elf import PT_LOAD, read_elf_stream
from ..errors import SfbtError, TargetMemoryError
from ..files import TRUSTED, FileProblem, ReadAs, open_regular
from ..symbols.kallsyms import (KERNEL_IMAGE, kernel_image_start, kernel_text_start,
                                running_kernel_build_id)
from ..symbols.vdso import own_vdso
from ..unwind.modules import SFrameSources
from .core_notes import PF_W
from .mappings import VDSO, MappedModule, vdso_module
from .perf_events import (RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_MMAP2,
                          RECORD_SAMPLE, MISC_COMM_EXEC, Sample, kernel_chain, register_bits)
from .perf_source import walk_sample
from .samples import SampleWriter
from .session import SnapshotSession

MAGIC = b"PERFILE2"
#: the magic as a big-endian machine's perf writes it
MAGIC_BIG_ENDIAN = b"2ELIFREP"
_FILE_HEADER = struct.Struct("<8sQQQQQQQQ4Q")
_SECTION = struct.Struct("<QQ")
_RECORD_HEADER = struct.Struct("<IHH")
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")

#: the attr fields read (perf_event_attr's offsets; a shorter attr's
#: missing fields are 0)
_ATTR_FIRST = struct.Struct("<IIQQQQ")  # type, size, config, period, sample_type, read_format
_ATTR_FLAGS, _ATTR_BRANCH_TYPE, _ATTR_REGS_USER = 40, 72, 80
_SAMPLE_ID_ALL = 18  # the flag's bit
#: the smallest attr perf ever wrote (PERF_ATTR_SIZE_VER0) and a bound
_ATTR_MIN, _ATTR_MAX = 64, 4096

RECORD_MMAP = 1
RECORD_COMPRESSED = 81
#: MMAP2's misc bit: a build id instead of the device and inode
_MISC_MMAP_BUILD_ID = 1 << 14
#: a build id event's misc bit: its size is in the byte after 20
_MISC_BUILD_ID_SIZE = 1 << 15

HEADER_BUILD_ID, HEADER_ARCH = 2, 6
#: the most bytes of the feature sections read (build ids: a few KiB)
MAX_FEATURE_BYTES = 16 << 20

SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_ADDR = 1, 1 << 1, 1 << 2, 1 << 3
SAMPLE_READ, SAMPLE_CALLCHAIN, SAMPLE_ID, SAMPLE_CPU = 1 << 4, 1 << 5, 1 << 6, 1 << 7
SAMPLE_PERIOD, SAMPLE_STREAM_ID, SAMPLE_RAW = 1 << 8, 1 << 9, 1 << 10
SAMPLE_BRANCH_STACK, SAMPLE_REGS_USER, SAMPLE_STACK_USER = 1 << 11, 1 << 12, 1 << 13
SAMPLE_IDENTIFIER = 1 << 16
#: read_format bits
_READ_TOTAL_ENABLED, _READ_TOTAL_RUNNING, _READ_ID, _READ_GROUP, _READ_LOST = 1, 2, 4, 8, 16
_BRANCH_HW_INDEX = 1 << 17

#: the data section is read this many bytes at a time (a record is < 64 KiB)
_CHUNK = 1 << 20
#: archive records written out every this many samples (memory bounded)
_FLUSH_EVERY = 4096
#: sessions kept per process (its mappings at a few times)
_SESSIONS_KEPT = 4

_ARCHES = {"x86_64": X86_64, "aarch64": AARCH64}


class PerfDataError(SfbtError):
    """A perf.data file sfbt cannot read: one line, naming the offset."""


def is_perf_data(head):
    """Whether a file's first bytes are a perf.data's (of either byte order)."""
    return head[:8] in (MAGIC, MAGIC_BIG_ENDIAN)


class _Attr:
    """What of one event's perf_event_attr a sample's layout depends on."""

    def __init__(self, data, at):
        _, size, _, _, self.sample_type, self.read_format = _ATTR_FIRST.unpack_from(data, at)
        #: whether the records other than samples end with the sample's ids
        self.sample_id_all = bool(_U64.unpack_from(data, at + _ATTR_FLAGS)[0]
                                  >> _SAMPLE_ID_ALL & 1)

        def field(offset, form):
            return struct.unpack_from(form, data, at + offset)[0] if offset < size else 0
        self.branch_type = field(_ATTR_BRANCH_TYPE, "<Q")
        self.regs_user = field(_ATTR_REGS_USER, "<Q")

    def read_size(self):
        """Bytes of a sample's SAMPLE_READ part before its group count."""
        per_value = 8 * (1 + bool(self.read_format & _READ_ID)
                         + bool(self.read_format & _READ_LOST))
        times = 8 * (bool(self.read_format & _READ_TOTAL_ENABLED)
                     + bool(self.read_format & _READ_TOTAL_RUNNING))
        return per_value, times


class PerfData:
    """The perf.data file open as ``stream`` (named ``path``): its attrs,
    features and data section, checked against its size."""

    def __init__(self, stream, path):
        self.stream = stream
        self.path = path
        self.size = os.fstat(stream.fileno()).st_size
        head = self._read(0, min(self.size, _FILE_HEADER.size), "the file header")
        if head[:8] == MAGIC_BIG_ENDIAN:
            raise PerfDataError("a big-endian perf.data (sfbt reads little-endian ones)")
        if head[:8] != MAGIC:
            raise PerfDataError("offset 0: not a perf.data file (no PERFILE2 header)")
        if len(head) < _FILE_HEADER.size:
            raise PerfDataError(f"offset 0: a header of {_FILE_HEADER.size} bytes in a file "
                                f"of {self.size}: truncated?")
        (_, header_size, attr_size, attrs_at, attrs_size, self.data_at, self.data_size,
         _, _, *features) = _FILE_HEADER.unpack(head)
        if header_size != _FILE_HEADER.size:  # 16: written to a pipe (perf record -o -)
            raise PerfDataError(f"offset 8: a header of {header_size} bytes, not "
                                f"{_FILE_HEADER.size} (a perf.data written to a pipe is "
                                "not read)")
        self._section(attrs_at, attrs_size, "the attrs section", 24)
        self._section(self.data_at, self.data_size, "the data section", 40)
        if not _ATTR_MIN + _SECTION.size <= attr_size <= _ATTR_MAX:
            raise PerfDataError(f"offset 16: an attr size of {attr_size} bytes")
        if attrs_size % attr_size or not attrs_size:
            raise PerfDataError(f"offset 24: an attrs section of {attrs_size} bytes, not "
                                f"a whole number of {attr_size}-byte attrs")
        self.attrs = []
        self._by_id = {}
        data = self._read(attrs_at, attrs_size, "the attrs section")
        for at in range(0, attrs_size, attr_size):
            own = _U32.unpack_from(data, at + 4)[0]
            if not _ATTR_MIN <= own <= attr_size - _SECTION.size:
                raise PerfDataError(f"offset {attrs_at + at + 4}: an attr of size {own} "
                                    f"in {attr_size}-byte entries")
            attr = _Attr(data, at)
            self.attrs.append(attr)
            ids_at, ids_size = _SECTION.unpack_from(data, at + attr_size - _SECTION.size)
            self._section(ids_at, ids_size, "an attr's ids", attrs_at + at + attr_size - 16)
            if ids_size % 8:
                raise PerfDataError(f"offset {attrs_at + at + attr_size - 8}: ids of "
                                    f"{ids_size} bytes")
            ids = self._read(ids_at, ids_size, "an attr's ids")
            for (event_id,) in struct.iter_unpack("<Q", ids):
                self._by_id[event_id] = attr
        first = self.attrs[0]
        same = all((a.sample_type, a.read_format, a.regs_user, a.branch_type)
                   == (first.sample_type, first.read_format, first.regs_user,
                       first.branch_type) for a in self.attrs)
        if not same and not first.sample_type & (SAMPLE_IDENTIFIER | SAMPLE_ID):
            raise PerfDataError(f"offset {attrs_at}: events of different sample layouts "
                                "and no sample id to tell them apart")
        self._same_layout = same
        self.build_ids, machine = self._features(features)
        self.machine = machine or os.uname().machine
        self.arch = _ARCHES.get(self.machine)
        if self.arch is None:
            raise PerfDataError(f"a recording of {self.machine}, whose registers sfbt "
                                "does not know")
        self.registers = register_bits(self.machine)

    def _read(self, offset, size, what):
        try:
            data = os.pread(self.stream.fileno(), size, offset)
        except OSError as error:
            raise PerfDataError(f"offset {offset}: {error.strerror or error}") from None
        if len(data) != size:
            raise PerfDataError(f"offset {offset}: {what} runs past the end of the file "
                                f"({self.size} bytes): truncated?")
        return data

    def _section(self, offset, size, what, named_at):
        if offset + size > self.size:
            raise PerfDataError(f"offset {named_at}: {what} ({size} bytes at {offset}) "
                                f"runs past the end of the file ({self.size} bytes): "
                                "truncated?")

    def _features(self, bitmap):
        """({path: build id hex}, machine or "") of the feature sections."""
        bits = [bit for bit in range(256) if bitmap[bit // 64] >> (bit % 64) & 1]
        table_at = self.data_at + self.data_size
        if not bits or table_at + len(bits) * _SECTION.size > self.size:
            return {}, ""  # perf killed before it wrote them: none
        table = self._read(table_at, len(bits) * _SECTION.size, "the feature table")
        build_ids, machine = {}, ""
        for index, bit in enumerate(bits):
            if bit not in (HEADER_BUILD_ID, HEADER_ARCH):
                continue
            at, size = _SECTION.unpack_from(table, index * _SECTION.size)
            where = table_at + index * _SECTION.size
            self._section(at, size, f"feature {bit}", where)
            if size > MAX_FEATURE_BYTES:
                raise PerfDataError(f"offset {where}: a feature section of {size} bytes")
            data = self._read(at, size, f"feature {bit}")
            if bit == HEADER_ARCH:
                machine = _perf_string(data, at)
            else:
                build_ids = _build_ids(data, at)
        return build_ids, machine

    def records(self):
        """(offset, type, misc, bytes) of each record of the data section."""
        end = self.data_at + self.data_size
        at = self.data_at
        chunk, chunk_at = b"", at
        while at < end:
            if at + 8 > end:
                raise PerfDataError(f"offset {at}: a record header runs past the data "
                                    f"section's end ({end})")
            if at + 8 > chunk_at + len(chunk):
                chunk_at = at
                chunk = self._read(at, min(_CHUNK, end - at), "the data section")
            kind, misc, size = _RECORD_HEADER.unpack_from(chunk, at - chunk_at)
            if size < 8:
                raise PerfDataError(f"offset {at}: a record of size {size}")
            if at + size > end:
                raise PerfDataError(f"offset {at}: a record of {size} bytes runs past the "
                                    f"data section's end ({end})")
            if at + size > chunk_at + len(chunk):
                chunk_at = at
                chunk = self._read(at, min(max(_CHUNK, size), end - at), "the data section")
            if kind == RECORD_COMPRESSED:
                raise PerfDataError(f"offset {at}: compressed records (perf record -z), "
                                    "which sfbt does not read")
            yield at, kind, misc, chunk[at - chunk_at:at - chunk_at + size]
            at += size

    def attr_of(self, record, at):
        """The attr of sample ``record`` (at file offset ``at``), or None."""
        if self._same_layout:
            return self.attrs[0]
        sample_type = self.attrs[0].sample_type
        if sample_type & SAMPLE_IDENTIFIER:
            place = 8
        else:  # SAMPLE_ID: after IP, TID, TIME and ADDR
            place = 8 + 8 * sum(bool(sample_type & bit) for bit in
                                (SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_ADDR))
        if place + 8 > len(record):
            raise PerfDataError(f"offset {at}: a sample too short for its id")
        return self._by_id.get(_U64.unpack_from(record, place)[0])

    def sample(self, record, at, attr):
        """The perf_events.Sample of SAMPLE record bytes ``record`` (at
        ``at`` in the file) of ``attr``; its registers empty where it has
        no user registers (a kernel thread's)."""
        sample_type = attr.sample_type
        place = 8
        pid = tid = when = 0
        try:
            place += 8 * bool(sample_type & SAMPLE_IDENTIFIER) + 8 * bool(sample_type & SAMPLE_IP)
            if sample_type & SAMPLE_TID:
                pid, tid = struct.unpack_from("<II", record, place)
                place += 8
            if sample_type & SAMPLE_TIME:
                when = _U64.unpack_from(record, place)[0]
                place += 8
            for bit in (SAMPLE_ADDR, SAMPLE_ID, SAMPLE_STREAM_ID, SAMPLE_CPU, SAMPLE_PERIOD):
                place += 8 * bool(sample_type & bit)
            if sample_type & SAMPLE_READ:
                per_value, times = attr.read_size()
                if attr.read_format & _READ_GROUP:
                    count = _U64.unpack_from(record, place)[0]
                    place += 8 + times + self._bounded(count, per_value, record, at)
                else:
                    place += times + per_value
            kernel = ()
            if sample_type & SAMPLE_CALLCHAIN:
                count = _U64.unpack_from(record, place)[0]
                self._bounded(count, 8, record, at, place + 8)
                kernel = kernel_chain(record, place + 8, count)
                place += 8 + 8 * count
            if sample_type & SAMPLE_RAW:
                place += 4 + self._bounded(_U32.unpack_from(record, place)[0], 1, record, at)
            if sample_type & SAMPLE_BRANCH_STACK:
                count = _U64.unpack_from(record, place)[0]
                place += 8 + 8 * bool(attr.branch_type & _BRANCH_HW_INDEX)
                place += self._bounded(count, 24, record, at)
            registers = {}
            if sample_type & SAMPLE_REGS_USER:
                abi = _U64.unpack_from(record, place)[0]
                place += 8
                if abi:
                    bits = [bit for bit in range(64) if attr.regs_user >> bit & 1]
                    values = struct.unpack_from(f"<{len(bits)}Q", record, place)
                    place += 8 * len(bits)
                    registers = {self.registers[bit]: value for bit, value in zip(bits, values)
                                 if bit in self.registers}
            stack, full = b"", False
            if sample_type & SAMPLE_STACK_USER:
                copied = _U64.unpack_from(record, place)[0]
                place += 8
                if copied:
                    self._bounded(copied + 8, 1, record, at, place)
                    dynamic = _U64.unpack_from(record, place + copied)[0]
                    stack = record[place:place + min(dynamic, copied)]
                    full = dynamic >= copied
        except struct.error:
            raise PerfDataError(f"offset {at}: a sample shorter than its fields "
                                f"({len(record)} bytes)") from None
        return Sample(pid, tid, when, registers, stack, full, kernel)

    @staticmethod
    def _bounded(count, each, record, at, place=0):
        """count * each bytes, if they fit in the record."""
        if count * each > len(record) - place:
            raise PerfDataError(f"offset {at}: a sample's field of {count} entries runs past "
                                f"its {len(record)} bytes")
        return count * each


def _perf_string(data, at):
    """A feature's string (u32 length, then the bytes, NUL-padded)."""
    if len(data) < 4 or 4 + _U32.unpack_from(data)[0] > len(data):
        raise PerfDataError(f"offset {at}: a string runs past its section")
    length = _U32.unpack_from(data)[0]
    return data[4:4 + length].split(b"\0", 1)[0].decode("ascii", "replace")


def _build_ids(data, at):
    """{path: build id hex} of HEADER_BUILD_ID's build_id_events."""
    found = {}
    place = 0
    while place + 8 <= len(data):
        _, misc, size = _RECORD_HEADER.unpack_from(data, place)
        if size < 8 + 4 + 24 or place + size > len(data):
            raise PerfDataError(f"offset {at + place}: a build id record of {size} bytes")
        raw = data[place + 12:place + 36]
        length = raw[20] if misc & _MISC_BUILD_ID_SIZE else 20
        name = data[place + 36:place + size].split(b"\0", 1)[0]
        if 0 < length <= 20:
            found[name.decode("utf-8", "surrogateescape")] = raw[:length].hex()
        place += size
    return found


class _Mapped:
    """One MMAP or MMAP2 record: ``path`` mapped at start..end from its
    offset ``offset``; ``build_id`` where MMAP2 carries it."""

    __slots__ = ("start", "end", "offset", "path", "build_id")

    def __init__(self, start, end, offset, path, build_id):
        self.start, self.end, self.offset, self.path, self.build_id = \
            start, end, offset, path, build_id


def _mapping_record(kind, misc, record):
    """(pid, _Mapped) of an MMAP or MMAP2 record, or None where it is short."""
    if kind == RECORD_MMAP:
        if len(record) < 40:
            return None
        pid, _, start, length, offset = struct.unpack_from("<IIQQQ", record, 8)
        name_at, build_id = 40, None
    else:
        if len(record) < 72:
            return None
        pid, _, start, length, offset = struct.unpack_from("<IIQQQ", record, 8)
        build_id = None
        if misc & _MISC_MMAP_BUILD_ID:
            size = record[40]
            build_id = record[44:44 + min(size, 20)].hex() if size else None
        name_at = 72
    name = record[name_at:].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    return pid, _Mapped(start, start + length, offset, name, build_id)


def _record_time(attr, record):
    """The time in a non-sample record's sample_id trailer (sample_id_all),
    or None: it ends the record, TIME after TID."""
    sample_type = attr.sample_type
    if not sample_type & SAMPLE_TIME or not attr.sample_id_all:
        return None
    after = 8 * sum(bool(sample_type & bit) for bit in
                    (SAMPLE_ID, SAMPLE_STREAM_ID, SAMPLE_CPU, SAMPLE_IDENTIFIER))
    at = len(record) - after - 8
    if at < 8:
        return None
    return _U64.unpack_from(record, at)[0]


def _pid_time(attr, record):
    """(pid, time) of a sample (0 where it has none)."""
    sample_type = attr.sample_type
    place = 8 + 8 * bool(sample_type & SAMPLE_IDENTIFIER) + 8 * bool(sample_type & SAMPLE_IP)
    pid = when = 0
    if sample_type & SAMPLE_TID and place + 8 <= len(record):
        pid = _U32.unpack_from(record, place)[0]
        place += 8
    if sample_type & SAMPLE_TIME and place + 8 <= len(record):
        when = _U64.unpack_from(record, place)[0]
    return pid, when


class _Timeline:
    """A process's mapping changes in time order: ("map", _Mapped), or
    ("exec", None) where it ran a new program (its mappings dropped);
    ``seal()`` once all are added."""

    def __init__(self):
        self.changes = []  # (time, order added, change)
        self.times = []

    def add(self, when, change):
        self.changes.append((when, len(self.changes), change))

    def seal(self):
        self.changes.sort(key=lambda entry: entry[:2])
        self.times = [when for when, _, _ in self.changes]

    def epoch(self, when):
        """How many changes happened by ``when``."""
        return bisect_right(self.times, when)

    def mappings(self, epoch):
        """The mappings after the first ``epoch`` changes (a later one
        over an earlier one's addresses replacing it), by address."""
        starts, kept = [], []  # kept do not overlap: sorted by start and by end
        for _, _, (kind, mapped) in self.changes[:epoch]:
            if kind == "exec":
                starts, kept = [], []
                continue
            first = bisect_right(starts, mapped.start) - 1
            if first < 0 or kept[first].end <= mapped.start:
                first += 1
            last = bisect_right(starts, mapped.end - 1)
            pieces = [mapped]  # what it leaves of those it overlaps
            if first < last and kept[first].start < mapped.start:
                old = kept[first]
                pieces.insert(0, _Mapped(old.start, mapped.start, old.offset, old.path,
                                         old.build_id))
            if first < last and kept[last - 1].end > mapped.end:
                old = kept[last - 1]
                pieces.append(_Mapped(mapped.end, old.end, old.offset + mapped.end - old.start,
                                      old.path, old.build_id))
            starts[first:last] = [piece.start for piece in pieces]
            kept[first:last] = pieces
        return kept


class _ThreadNames:
    """Each thread's names in time order (its COMM records: perf's made
    at time 0 for threads that ran before it, an exec's, a renaming's),
    so that a sample is named as its thread was called at the sample's
    time, wherever the records lie in the file (perf writes each CPU's
    ring in turn: an exec's COMM may follow the new program's samples)."""

    def __init__(self):
        self._changes = {}  # tid -> [(time, order added, name)]
        self._times = {}

    def add(self, tid, when, name):
        changes = self._changes.setdefault(tid, [])
        changes.append((when, len(changes), name))

    def seal(self):
        for tid, changes in self._changes.items():
            changes.sort(key=lambda entry: entry[:2])
            self._times[tid] = [when for when, _, _ in changes]

    def name(self, tid, when):
        """The thread's name at ``when`` (its first where none is that
        early), or "" where no record names it."""
        changes = self._changes.get(tid)
        if not changes:
            return ""
        return changes[max(0, bisect_right(self._times[tid], when) - 1)][2]


class _Files:
    """The files the recording's mappings name, read as the perf.data's
    owner could (``read_as``), and only where their build id is the one
    the recording has for them: each file's path read, PT_LOAD segments
    and build id, found once."""

    def __init__(self, read_as, build_ids):
        self.read_as = read_as
        self.build_ids = build_ids
        self._found = {}  # (path, recorded build id) -> _find's
        self._streams = {}  # path read -> open stream
        #: files the perf.data's owner could not read: path -> why
        self.refused = {}
        #: files of another build than the recorded one: path -> how
        self.other_builds = {}
        self._own_vdso = None

    def find(self, path, recorded):
        key = (path, recorded)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = self._find(path, recorded or self.build_ids.get(path))
        return found

    def _find(self, path, recorded):
        """(the path read, "" where the file is not read; its PT_LOAD
        segments; its build id)."""
        try:
            stream = self.read_as.open(path)
        except FileProblem as problem:
            if problem.errno == errno.EACCES:
                self.refused.setdefault(path, problem.strerror)
            return "", [], None
        except OSError:
            return "", [], None
        read = read_elf_stream(stream, path, lambda image: (image.segments(),
                                                            image.build_id()))
        if read is None or (recorded and read[1] != recorded):
            stream.close()  # not ELF (a locale archive, a font), or another build
            if read is not None:
                self.other_builds[path] = (f"build id {read[1] or 'none'} on disk, not the "
                                           f"recording's {recorded}")
            return "", [], None
        segments, build_id = read
        self._streams[path] = stream
        return path, [s for s in segments if s.type == PT_LOAD], build_id

    def vdso(self, mapped):
        """(path read, its PT_LOAD segments, build id) of the vDSO the
        recording mapped as ``mapped``: the copy in perf's build-id cache
        (perf record keeps it there), where it is the recorded build; else
        (the bytes, None, build id) of this machine's own vDSO where it is
        that build; else None."""
        recorded = mapped.build_id or self.build_ids.get(VDSO)
        if not recorded:
            return None
        cached = os.path.join(perf_buildid_dir(), VDSO, recorded, "vdso")
        if os.path.isfile(cached):
            found = self.find(cached, recorded)
            if found[0]:
                return found
        if self._own_vdso is None:
            self._own_vdso = own_vdso()
        module = vdso_module(self._own_vdso, mapped.start)
        if module is not None and module.build_id == recorded:
            return self._own_vdso, None, recorded
        return None

    def read(self, path, offset, size):
        stream = self._streams.get(path)
        if stream is None:
            return b""
        try:
            return os.pread(stream.fileno(), size, offset)
        except OSError:
            return b""

    def close(self):
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()


def perf_buildid_dir():
    """perf's build-id cache: $PERF_BUILDID_DIR, else ~/.debug."""
    return os.environ.get("PERF_BUILDID_DIR") or os.path.expanduser("~/.debug")


class _FileModule:
    """A module of the recording: its MappedModule and the read-only
    segments whose bytes its file supplies, or the ``image`` it carries
    (this machine's vDSO) whose bytes are its memory from its start."""

    def __init__(self, module, segments, image=None):
        self.module = module
        self.segments = segments
        self.image = image


def _modules(mappings, files):
    """([_FileModule] of the files mapped: each placed by its first
    mapping (the segment that holds that mapping's file offset), [Image]
    of a vDSO whose image is not found: named ``[vdso]`` as perf names
    it)."""
    made, unknown = [], []
    seen = set()
    for mapped in mappings:
        if mapped.path in seen or not (mapped.path.startswith("/") or mapped.path == VDSO):
            continue  # [stack], //anon: no file of the recording's
        seen.add(mapped.path)
        if mapped.path == VDSO:
            found = files.vdso(mapped)
            if found is None:
                unknown.append(Image(VDSO, mapped.start, mapped.end))
                continue
            if found[1] is None:  # this machine's vDSO, of the recorded build
                module = vdso_module(found[0], mapped.start)
                made.append(_FileModule(module, [], found[0]))
                continue
        else:
            found = files.find(mapped.path, mapped.build_id)
        path, segments, build_id = found
        holding = next((s for s in segments if s.offset <= mapped.offset < s.offset + max(
            s.filesz, 1)), None)
        if holding is None:  # not read (refused, another build), or not ELF
            continue
        bias = mapped.start - mapped.offset - (holding.vaddr - holding.offset)
        first = min(segments, key=lambda s: s.vaddr)
        start = (bias + first.vaddr) & -4096
        end = max(bias + s.vaddr + s.memsz for s in segments)
        # (a vDSO from perf's cache is named by that file, which has its symbols)
        module = MappedModule(path, bias, start, end, build_id,
                              bias + first.vaddr - first.offset,
                              mapped_as=path if mapped.path == VDSO else mapped.path)
        made.append(_FileModule(module, [s for s in segments if not s.flags & PF_W]))
    return made, unknown


class _RecordedProcess:
    """A process of the recording at one time: the session its samples
    are walked in (its mappings then), and reads of its files' read-only
    bytes (the rest of its memory is only the stacks the samples copied)."""

    def __init__(self, arch, mappings, files, archive, sources, kernel_image=None):
        """``kernel_image``: the Image of the recording's kernel, for the
        kernel frames of its samples."""
        self._files = files
        self._modules, unknown = _modules(mappings, files)
        self.copy_end = 0
        self.past_copy = False
        main = next((m.module.path for m in self._modules), None)
        self.session = SnapshotSession(arch, [m.module for m in self._modules], self._read,
                                       executable=main, sources=sources, past_main=True)
        images = image_map(self.session)
        extra = tuple(unknown) + ((kernel_image,) if kernel_image is not None else ())
        if extra:
            images = ImageMap(images.platform, images.images + extra, images.word_size)
        self.image_map = archive.add_image_map(encode_image_map(images))

    def _read(self, address, size):
        for made in self._modules:
            module = made.module
            if not module.start <= address < module.end:
                continue
            if made.image is not None:
                at = address - module.start
                data = made.image[at:at + size]
                if len(data) == size:
                    return data
                continue
            file_address = address - module.load_bias
            for segment in made.segments:
                if segment.vaddr <= file_address and \
                        file_address + size <= segment.vaddr + segment.filesz:
                    data = self._files.read(module.path, segment.offset + file_address
                                            - segment.vaddr, size)
                    if len(data) == size:
                        return data
        if address >= self.copy_end:
            self.past_copy = True
        raise TargetMemoryError(address, size)


class _Stats:
    def __init__(self):
        self.samples = 0
        self.cut = 0
        self.no_registers = 0  # samples without user registers (kernel threads)
        self.refused = {}  # files the perf.data's owner could not read: path -> why
        self.other_builds = {}  # files of another build than recorded: path -> how


def _kernel_image(text, build_id):
    """The Image of the recording's kernel, whose ``_text`` was at
    ``text`` (None: the file says nothing of it), named from this
    machine's /proc/kallsyms only where ``build_id`` is the running
    kernel's (symbols.kallsyms), and starting at its ``_stext`` as sfbt
    record's kernel image does."""
    if text is None:
        return None
    base = text
    if build_id and build_id == running_kernel_build_id():
        stext, running_text = kernel_text_start(), kernel_image_start()
        if stext is not None and running_text is not None:
            base += stext - running_text
    return Image(KERNEL_IMAGE, base, (1 << 64) - 1, bytes.fromhex(build_id or ""))


def convert(perf, read_as, out_descriptor, label):
    """Walk every sample of PerfData ``perf`` and write the archive of
    their stacks to ``out_descriptor``; _Stats."""
    timelines = {}
    names = _ThreadNames()
    pids = set()
    last_time = 0
    kernel_text = None  # where the recording's kernel's _text was
    for at, kind, misc, record in perf.records():
        if kind in (RECORD_MMAP, RECORD_MMAP2):
            found = _mapping_record(kind, misc, record)
            if found is not None and found[0] == 0xFFFFFFFF:  # the kernel's, its modules'
                if found[1].path.startswith(KERNEL_IMAGE):
                    # "[kernel.kallsyms]_text": its offset is _text's address
                    kernel_text = (found[1].offset if found[1].path.endswith("_text")
                                   else found[1].start)
            elif found is not None:
                when = _record_time(perf.attrs[0], record)
                timelines.setdefault(found[0], _Timeline()).add(when or 0, ("map", found[1]))
        elif kind == RECORD_COMM and len(record) >= 16:
            pid, tid = struct.unpack_from("<II", record, 8)
            when = _record_time(perf.attrs[0], record) or 0
            names.add(tid, when,
                      record[16:].split(b"\0", 1)[0].decode("utf-8", "surrogateescape"))
            if misc & MISC_COMM_EXEC:
                timelines.setdefault(pid, _Timeline()).add(when, ("exec", None))
        elif kind == RECORD_FORK and len(record) >= 32:
            pid, parent = struct.unpack_from("<II", record, 8)
            when = _record_time(perf.attrs[0], record) or 0
            # a new process: its parent's mappings (by the fork's time); not
            # one perf synthesized (time 0) for a process that ran before it,
            # whose own mappings its synthesized MMAP records give
            if pid != parent and parent in timelines and pid not in timelines and when:
                child = timelines[pid] = _Timeline()
                timelines[parent].seal()
                for mapped in timelines[parent].mappings(timelines[parent].epoch(when)):
                    child.add(0, ("map", mapped))
        elif kind == RECORD_SAMPLE:
            attr = perf.attr_of(record, at)
            if attr is not None:
                pid, when = _pid_time(attr, record)
                pids.add(pid)
                last_time = max(last_time, when)
    # perf's clock is CPU time since boot; the wall time of a sample is
    # taken as the file's time less how long before the last sample it was
    wall = os.fstat(perf.stream.fileno()).st_mtime_ns - last_time
    for timeline in timelines.values():
        timeline.seal()
    names.seal()
    files = _Files(read_as, perf.build_ids)
    sources = SFrameSources()
    archive = Archive()
    writer = SampleWriter(archive, perf.arch, label)
    stats = _Stats()
    out = ArchiveStream(archive, out_descriptor)
    processes = {}  # (pid, epoch) -> _RecordedProcess
    kernel = _kernel_image(kernel_text, perf.build_ids.get(KERNEL_IMAGE))
    kernel_map = None  # the image map of samples of kernel threads
    try:
        for at, kind, misc, record in perf.records():
            if kind == RECORD_EXIT and len(record) >= 24:
                writer.forget(_U32.unpack_from(record, 16)[0])
                continue
            if kind != RECORD_SAMPLE:
                continue
            attr = perf.attr_of(record, at)
            if attr is None:
                continue
            sample = perf.sample(record, at, attr)
            if not sample.registers:
                if not sample.kernel:
                    stats.no_registers += 1
                    continue
                # a kernel thread's (the idle task's too): its kernel frames alone
                if kernel_map is None:
                    kernel_map = archive.add_image_map(encode_image_map(ImageMap(
                        f"linux-{perf.arch.name}", (kernel,) if kernel else (),
                        8 * perf.arch.pointer_size)))
                writer.record(writer.trace_id([], None, False, sample.kernel), kernel_map,
                              sample.time + wall, sample.pid, sample.tid,
                              names.name(sample.tid, sample.time), name_process=len(pids) > 1)
                stats.samples += 1
                continue
            timeline = timelines.get(sample.pid) or _Timeline()
            epoch = timeline.epoch(sample.time)
            process = processes.get((sample.pid, epoch))
            if process is None:
                if len(processes) >= _SESSIONS_KEPT * max(1, len(pids)):
                    processes.pop(next(iter(processes)))
                process = processes[(sample.pid, epoch)] = _RecordedProcess(
                    perf.arch, timeline.mappings(epoch), files, archive, sources, kernel)
            frames, stop, cut = walk_sample(writer, process, sample)
            stats.cut += cut
            trace_id = writer.trace_id(frames, stop, cut, sample.kernel)
            writer.record(trace_id, process.image_map, sample.time + wall, sample.pid, sample.tid,
                          names.name(sample.tid, sample.time), cut,
                          name_process=len(pids) > 1)
            stats.samples += 1
            if stats.samples % _FLUSH_EVERY == 0 and not out.flush():
                raise out.failure
        if not out.flush():
            raise out.failure
    finally:
        files.close()
    stats.refused, stats.other_builds = files.refused, files.other_builds
    return stats


def open_saved(path, trust_files=False):
    """The archive.saved.SavedFile of the file at ``path``: of the archive
    of its samples' stacks where it is a perf.data, else of the file as it
    is (an archive, a .cbf, JSON, a log; "-" standard input).
    ``trust_files``: a perf.data's files are read whoever could read them."""
    from ..archive.saved import SavedFile
    if path == "-":
        return SavedFile(path)
    stream = open_regular(path)
    with stream:
        if not is_perf_data(os.pread(stream.fileno(), 8, 0)):
            return SavedFile(path)
        read_as = TRUSTED if trust_files else ReadAs.owner_of(stream.fileno(),
                                                              "the perf.data's owner")
        perf = PerfData(stream, path)
        out = tempfile.TemporaryFile()
        try:
            stats = convert(perf, read_as, out.fileno(),
                            f"perf record of {os.path.basename(path)}")
            out.seek(0)
        except BaseException:
            out.close()
            raise
    if not stats.samples:
        out.close()
        raise PerfDataError("no sample with user registers and stack "
                            "(recorded with --call-graph dwarf?)")
    return SavedFile.made_from(path, out, read_as, stats.refused, stats.other_builds)
