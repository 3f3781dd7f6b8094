"""The machine's crash store: a directory root owns (0700) holding

- ``index``: one JSON line per crash (what ``crashes list`` prints, and
  where a kept crash's backtraces are), appended under the store's lock
  in one write (O_APPEND), never rewritten but to drop its oldest lines
  for the size cap; a line torn by a handler killed midway is passed
  over;
- ``seg-N.sfbt``: segments, sfbt archives (the format cbf-save and record
  write: cbf-load opens them) that the crashes kept whole are appended
  to, one event per thread, the crashing thread's labelled ``crashed``.
  A segment writes each image (path, build id, size) once, in its image
  table, and each crash's image map as the indexes and bases of its
  images (archive.store.ImageTable);
- ``kept``: a line ``BUCKET SEGMENT ID`` per crash kept whole, read to
  tell a repeat of a bucket without reading the index;
- ``core-BUCKET.xz``: with --keep-core, the core of a bucket's first crash;
- ``settings``: the core_pattern and core_pipe_limit install replaced.

A bucket is a hash of the signal and the crashing thread's top frames as
(build id, address in the file): stable across ASLR, and known without
symbols.  The first KEEP_PER_BUCKET crashes of a bucket are kept whole;
the rest are a line of the index each (counted).  The files together stay
under ``max_use`` bytes: the oldest segments and cores go first (whole
files), then the oldest index lines."""

import errno
import fcntl
import os
import stat
import time

try:  # hashlib's own, without loading OpenSSL (a sixth of the crash handler's imports)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

from ..files import FileProblem, open_directory, open_regular, replace_file

#: the store when neither --store nor $SFBT_CRASH_STORE names another
DEFAULT_STORE = "/var/lib/sfbt/crashes"
STORE_VARIABLE = "SFBT_CRASH_STORE"
INDEX = "index"
KEPT = "kept"
LOCK = "lock"
SETTINGS = "settings"
SEGMENT_PREFIX, SEGMENT_SUFFIX = "seg-", ".sfbt"
#: crashes of a bucket whose backtraces are kept whole
KEEP_PER_BUCKET = 3
#: the store's size cap by default (systemd-coredump's MaxUse)
DEFAULT_MAX_USE = 64 << 20
#: a segment is closed (a new one begun) at max_use / SEGMENTS_PER_CAP
#: bytes, within these bounds: the cap evicts whole segments
SEGMENTS_PER_CAP = 8
MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES = 4 << 10, 1 << 20
#: the most of the index read; its oldest lines go past this many
MAX_INDEX_BYTES = 16 << 20
MAX_KEPT_BYTES = 4 << 20
#: seconds a handler waits for the store's lock
LOCK_WAIT = 30.0
#: frames of the crashing thread its bucket is made of
BUCKET_FRAMES = 5
#: what the index keeps of a crash counted in its bucket (the rest is the
#: bucket's kept crash's: "of" is its id)
REPEAT_FIELDS = ("id", "time", "pid", "tid", "uid", "gid", "signal", "code", "address",
                 "bucket")
#: fields of a crash the index leaves out where it knows the executable
_LEFT_OUT = ("command",)
#: fields of a line left out where they are what the rest of the line
#: implies: the thread the kernel named the process's (tid), the group
#: the user's (gid), of a kept crash, the crashing thread the kernel's
#: (crashed_tid), its threads all walked (the events of its seg), its
#: stacks read from the held process (memory_from)
_IMPLIED = {"tid": lambda entry: entry.get("pid"),
            "gid": lambda entry: entry.get("uid")}
_IMPLIED_KEPT = {"crashed_tid": lambda entry: entry.get("tid"),
                 "threads": lambda entry: entry["seg"][2],
                 "memory_from": lambda entry: "process"}
#: a kept crash's line, and a counted crash's: a JSON array of these
#: fields' values in this order (their names were half of a line), then,
#: where the crash has any, an object of its other fields; "seg" is its
#: three numbers; null for a field the crash has not.  Other lines (a
#: core not read), and the lines of an older sfbt, are an object of
#: every field.
KEPT_LINE = ("id", "time", "pid", "uid", "signal", "code", "address", "bucket",
             "executable", "mappings", "handler_ms", "handler_kb", "seg")
REPEAT_LINE = ("id", "time", "pid", "uid", "signal", "code", "address", "bucket", "of")
#: a kept crash's memory_from other than "process" (implied), as a number
#: after its seg: its index here
MEMORY_FROM = ("process", "core", "process and core")
_LINE_LENGTHS = {len(KEPT_LINE) + 2: KEPT_LINE, len(KEPT_LINE) + 3: KEPT_LINE,
                 len(REPEAT_LINE): REPEAT_LINE}


def store_path(given=None):
    return given or os.environ.get(STORE_VARIABLE) or DEFAULT_STORE


def bucket_of(signal, frames, modules):
    """The bucket (16 hex digits) of a crash: ``signal`` and the top
    BUCKET_FRAMES of ``frames`` (cbf.Frame) as (build id or file name,
    address in the file) of the ``modules`` they fall in."""
    parts = [str(signal)]
    for frame in frames[:BUCKET_FRAMES]:
        lookup = frame.address - (frame.kind != "pc")
        module = next((m for m in modules if m.start <= lookup < m.end), None)
        if module is None:
            parts.append("?")
        else:
            name = module.build_id or os.path.basename(getattr(module, "mapped_as", "")
                                                       or module.path)
            parts.append(f"{name}+{lookup - module.load_bias:x}")
    return blake2b("\n".join(parts).encode("utf-8", "surrogateescape"),
                           digest_size=8).hexdigest()


def segment_name(number):
    return f"{SEGMENT_PREFIX}{number}{SEGMENT_SUFFIX}"


def _segment_number(name):
    if name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX):
        digits = name[len(SEGMENT_PREFIX):-len(SEGMENT_SUFFIX)]
        if digits.isdigit():
            return int(digits)
    return None


class CrashStore:
    """The store at ``path`` (created 0700 when ``create``)."""

    def __init__(self, path=None, create=False, max_use=DEFAULT_MAX_USE):
        self.path = os.path.abspath(store_path(path))
        self.max_use = max_use
        if create:
            os.close(open_directory(self.path, create=True))
        self._check()

    def _check(self):
        try:
            status = os.lstat(self.path)
        except OSError as error:
            raise FileProblem(self.path, error.strerror or str(error), error.errno) from None
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or \
                stat.S_IMODE(status.st_mode) & 0o077:
            raise FileProblem(self.path, "not a crash store: it must be a directory "
                              "of its user's only (0700)")

    def file(self, name):
        return os.path.join(self.path, name)

    @property
    def segment_bytes(self):
        return max(MIN_SEGMENT_BYTES, min(MAX_SEGMENT_BYTES,
                                          self.max_use // SEGMENTS_PER_CAP))

    def _read(self, name, limit):
        """The bytes of the store's file ``name`` (at most ``limit``), b""
        where there is none."""
        try:
            with open_regular(self.file(name), limit) as stream:
                return stream.read(limit)
        except FileNotFoundError:
            return b""
        except FileProblem as problem:
            if problem.errno == errno.ENOENT:
                return b""
            raise

    # -- what is kept whole --------------------------------------------------------
    def _kept(self):
        """{bucket: [(segment, id)]} of the crashes kept whole, in the
        segments there are."""
        segments = self.segments()
        kept = {}
        for line in self._read(KEPT, MAX_KEPT_BYTES).split(b"\n"):
            words = line.split()
            if len(words) == 3 and words[1].isdigit() and words[2].isdigit() \
                    and int(words[1]) in segments:
                kept.setdefault(words[0].decode("ascii", "replace"), []).append(
                    (int(words[1]), int(words[2])))
        return kept

    def _kept_buckets(self):
        """{id: bucket} of every line of the kept list (a kept crash's
        index line leaves its bucket to it)."""
        buckets = {}
        for line in self._read(KEPT, MAX_KEPT_BYTES).split(b"\n"):
            words = line.split()
            if len(words) == 3 and words[2].isdigit():
                buckets[int(words[2])] = words[0].decode("ascii", "replace")
        return buckets

    def repeated(self, bucket):
        """Whether a crash of ``bucket`` will only be counted (its first
        crashes are kept): the handler then walks no other thread."""
        return len(self._kept().get(bucket, ())) >= KEEP_PER_BUCKET

    def segments(self):
        """{number: size} of the segments."""
        found = {}
        for name in os.listdir(self.path):
            number = _segment_number(name)
            if number is not None:
                try:
                    found[number] = os.lstat(self.file(name)).st_size
                except FileNotFoundError:
                    pass
        return found

    # -- adding a crash --------------------------------------------------------------
    def _locked(self):
        """The store's lock (a file in the 0700 store), held until the
        descriptor returned is closed."""
        descriptor = os.open(self.file(LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + LOCK_WAIT
        pause = 0.001
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return descriptor
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(descriptor)
                    raise FileProblem(self.file(LOCK), "another process holds the "
                                      "store's lock; nothing was written") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def add(self, entry, archive_bytes, keep_core=None):
        """Add a crash (``entry``: a dict of the index's fields but id,
        seg, of) with its archive's bytes (a standalone archive of its
        threads, or b"": counted only); ``keep_core(bucket, first)`` is
        called under the lock to keep the core of a bucket's first crash.
        Returns the entry as stored."""
        lock = self._locked()
        try:
            entry = {key: value for key, value in entry.items()
                     if key not in _LEFT_OUT or not entry.get("executable")}
            entry = {"id": self._last_id() + 1, **entry}
            kept = self._kept().get(entry["bucket"], [])
            written = dict(entry)  # what the line holds (entries() puts the rest back)
            if archive_bytes and len(kept) < KEEP_PER_BUCKET:
                segment, first, events, image_numbers = self._append_crash(archive_bytes)
                entry["seg"] = written["seg"] = [segment, first, events]
                for key, same in _IMPLIED_KEPT.items():
                    if key in written and written[key] == same(written):
                        del written[key]
                if written.get("executable") in image_numbers:  # the segment's image
                    written["executable"] = image_numbers[written["executable"]]
                del written["bucket"]  # the kept list's line holds it
                _append(self.file(KEPT), f"{entry['bucket']} {segment} {entry['id']}\n"
                        .encode())
            elif kept:  # counted: what differs from the bucket's kept crash
                entry = {key: entry[key] for key in REPEAT_FIELDS if key in entry}
                entry["of"] = kept[0][1]
                written = dict(entry)
            if keep_core is not None:
                core_name = keep_core(entry["bucket"], not kept)
                if core_name:
                    entry["core"] = written["core"] = core_name
            for key, same in _IMPLIED.items():
                if key in written and written[key] == same(written):
                    del written[key]
            _append(self.file(INDEX), index_line(_line_value(written)).encode(),
                    self._index_ends_torn())
            self._cap()
        finally:
            os.close(lock)
        return entry

    def _last_id(self):
        """The id of the index's last whole line (0: none): the number a
        line begins with (``[N,``), without the json module (re and enum
        with it: a fifth of the handler's imports), or, for a line of an
        object, its JSON's."""
        try:
            descriptor = os.open(self.file(INDEX), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0
        try:
            size = os.fstat(descriptor).st_size
            step = 4096
            while True:
                start = max(0, size - step)
                data = os.pread(descriptor, size - start, start)
                for line in reversed(data.split(b"\n")[1 if start else 0:-1]):
                    number = _leading_id(line)
                    if number is not None:
                        return number
                if not start or step >= MAX_INDEX_BYTES:
                    return 0
                step *= 4
        finally:
            os.close(descriptor)

    def _index_ends_torn(self):
        """Whether the index's last line has no newline (its writer was
        killed midway): the next line then starts on a line of its own."""
        try:
            descriptor = os.open(self.file(INDEX), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(descriptor).st_size
            return size > 0 and os.pread(descriptor, 1, size - 1) != b"\n"
        finally:
            os.close(descriptor)

    def _append_crash(self, archive_bytes):
        """Append a crash's archive to the newest segment (a new one when
        it is full or damaged); (segment number, index of its first event there,
        its events, {image path: its number in the segment's image table})."""
        from .segment import Segment
        segments = self.segments()
        number = max(segments, default=0)
        if not number or segments[number] >= self.segment_bytes:
            number += 1
        while True:
            with Segment(self.file(segment_name(number))) as segment:
                if not segment.damaged:
                    return (number, *segment.append(archive_bytes))
            number += 1  # a torn or damaged segment is left as it is

    def _cap(self):
        """Keep the store within max_use: the oldest segments and cores
        removed first (never the newest segment), then, if the store is
        still over, the index's oldest lines (rewritten to leave an eighth
        of the cap free, so that not every crash rewrites it; its last
        line stays: ids go on from it)."""
        files = []  # (segment number or 0, mtime, name, size)
        used = index_size = 0
        for name in os.listdir(self.path):
            if name == INDEX or name == KEPT or _segment_number(name) is not None or (
                    name.startswith("core-") and name.endswith(".xz")):
                try:
                    status = os.lstat(self.file(name))
                except FileNotFoundError:
                    continue
                used += status.st_size
                if name == INDEX:
                    index_size = status.st_size
                elif name != KEPT:
                    files.append((_segment_number(name) or 0, status.st_mtime, name,
                                  status.st_size))
        if used <= self.max_use:
            return
        newest = max((f[0] for f in files), default=0)
        removed = {}  # segment number -> its image table's paths
        for number, _, name, size in sorted(files, key=lambda f: (f[1], f[0])):
            if used <= self.max_use:
                break
            if number and number == newest:
                continue
            if number:
                removed[number] = self._image_paths(number)
            try:
                os.unlink(self.file(name))
            except FileNotFoundError:
                pass
            used -= size
        if removed:  # their crashes' lines made whole, the kept lines of segments gone
            self._complete_lines(removed)
            text = "".join(f"{bucket} {segment} {crash}\n"
                           for bucket, places in self._kept().items()
                           for segment, crash in places).encode()
            replace_file(self.file(KEPT), lambda out: out.write(text), 0o600)
        if used > self.max_use:
            self._trim_index(index_size - (used - self.max_use) - self.max_use // 8)

    def _complete_lines(self, removed):
        """Rewrite the index lines of the crashes kept in the ``removed``
        segments ({number: its image table's paths}) with what they left
        to the segment and the kept list: the executable's path where
        they name it by its number in that table, and the bucket."""
        import json
        buckets = self._kept_buckets()
        bucket = KEPT_LINE.index("bucket")
        data = self._read(INDEX, MAX_INDEX_BYTES + 1)
        lines = data.split(b"\n")
        changed = False
        executable, seg = KEPT_LINE.index("executable"), KEPT_LINE.index("seg")
        for at, line in enumerate(lines):
            if not line.startswith(b"["):
                continue
            try:
                value = json.loads(line)
            except ValueError:
                continue
            positional = value[:-1] if value and isinstance(value[-1], dict) else value
            if len(positional) != len(KEPT_LINE) + 2 or not isinstance(value[0], int) \
                    or not isinstance(positional[seg], int) or positional[seg] not in removed:
                continue
            if isinstance(positional[executable], int):
                table, number = removed[positional[seg]], positional[executable]
                value[executable] = table[number] if 0 <= number < len(table) else ""
            if value[bucket] is None:
                value[bucket] = buckets.get(value[0], "")
            lines[at] = index_line(value)[:-1].encode()
            changed = True
        if changed:
            text = b"\n".join(lines)
            replace_file(self.file(INDEX), lambda out: out.write(text), 0o600)

    def _trim_index(self, keep):
        """Rewrite the index to its newest lines within ``keep`` bytes (its
        last line at least)."""
        data = self._read(INDEX, MAX_INDEX_BYTES + 1)
        last = data.rfind(b"\n", 0, len(data) - 1) + 1  # where the last line starts
        start = len(data) - max(0, keep)
        cut = 0 if start <= 0 else min(last, data.find(b"\n", start - 1) + 1 or last)
        if cut:
            rest = data[cut:]
            replace_file(self.file(INDEX), lambda out: out.write(rest), 0o600)

    # -- reading ----------------------------------------------------------------------
    def _index(self):
        """The index's lines, oldest first (a damaged line left out)."""
        return _parse_index(self._read(INDEX, MAX_INDEX_BYTES + 1))

    def entries(self):
        """The index's crashes, oldest first, a counted one with the
        fields of its bucket's kept crash it leaves out; ``file`` names
        the segment of a crash kept whole, where it still is."""
        entries = self._index()
        segments = self.segments()
        by_id = {entry["id"]: entry for entry in entries}
        paths = {}  # segment number -> its image table's paths
        buckets = None
        for entry in entries:
            place = entry.get("seg")
            if _valid_place(place):
                if "bucket" not in entry:
                    if buckets is None:
                        buckets = self._kept_buckets()
                    entry["bucket"] = buckets.get(entry["id"], "")
                for key, same in _IMPLIED_KEPT.items():
                    if key not in entry:
                        entry[key] = same(entry)
                if place[0] in segments:
                    entry["file"] = segment_name(place[0])
                if isinstance(entry.get("executable"), int):
                    if place[0] not in paths:
                        paths[place[0]] = self._image_paths(place[0])
                    table = paths[place[0]]
                    number = entry["executable"]
                    entry["executable"] = table[number] if 0 <= number < len(table) else ""
        for entry in entries:
            first = by_id.get(entry.get("of"))
            if first is not None:
                for key, value in first.items():
                    if key not in REPEAT_FIELDS and key not in ("seg", "file", "core"):
                        entry.setdefault(key, value)
        return entries

    def _image_paths(self, number):
        """The paths of segment ``number``'s image table ([] where it is
        gone)."""
        from .segment import image_paths
        try:
            return image_paths(self.file(segment_name(number)))
        except (OSError, FileProblem):
            return []

    def find(self, which):
        """The crashes ``which`` names: an id, or a bucket (its prefix)."""
        entries = self.entries()
        if which.isdigit():
            return [e for e in entries if e.get("id") == int(which)]
        return [e for e in entries if str(e.get("bucket", "")).startswith(which.lower())]

    # -- install's settings ---------------------------------------------------------
    def saved_settings(self):
        import json
        try:
            with open_regular(self.file(SETTINGS), 1 << 16) as stream:
                settings = json.loads(stream.read())
        except (OSError, ValueError):
            return None
        return settings if isinstance(settings, dict) else None

    def save_settings(self, settings):
        import json
        data = json.dumps(settings).encode()
        replace_file(self.file(SETTINGS), lambda out: out.write(data), 0o600)

    def forget_settings(self):
        try:
            os.unlink(self.file(SETTINGS))
        except FileNotFoundError:
            pass


def _valid_place(place):
    return (isinstance(place, list) and len(place) == 3
            and all(isinstance(n, int) and n >= 0 for n in place))


def _append(path, data, new_line=False):
    """Append ``data`` in one write (O_APPEND), on a line of its own
    where ``new_line``."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise FileProblem(path, "not a regular file")
        data = b"\n" + data if new_line else data
        written = os.write(descriptor, data)
        if written != len(data):  # a full disk: the line torn, passed over on read
            raise FileProblem(path, f"{written} of {len(data)} bytes written")
    finally:
        os.close(descriptor)


def _line_value(entry):
    """What the index line of ``entry`` (the fields it holds) is: an
    array (KEPT_LINE, REPEAT_LINE) where it has their fields, else an
    object."""
    for fields in (KEPT_LINE, REPEAT_LINE):
        if fields[-1] in entry:  # (null for a field it has not)
            value = []
            for key in fields:
                value += entry[key] if key == "seg" else [entry.get(key)]
            rest = {key: entry[key] for key in entry if key not in fields}
            if fields is KEPT_LINE and rest.get("memory_from") in MEMORY_FROM:
                value.append(MEMORY_FROM.index(rest.pop("memory_from")))
            return value + [rest] if rest else value
    return entry


def _line_entry(value):
    """The fields of an index line's JSON ``value`` (None: not a crash's)."""
    if isinstance(value, list):
        rest = value.pop() if value and isinstance(value[-1], dict) else {}
        fields = _LINE_LENGTHS.get(len(value))
        if fields is None:
            return None
        if fields is KEPT_LINE:
            if len(value) > len(KEPT_LINE) + 2:
                code = value.pop()
                if not isinstance(code, int) or not 0 <= code < len(MEMORY_FROM):
                    return None
                rest["memory_from"] = MEMORY_FROM[code]
            value = value[:-3] + [value[-3:]]
        value = {**rest, **{key: item for key, item in zip(fields, value)
                            if item is not None}}
    if not isinstance(value, dict) or not isinstance(value.get("id"), int):
        return None
    for key, same in _IMPLIED.items():
        if key not in value:
            value[key] = same(value)
    return value


def index_line(value):
    """``value`` as a line of JSON, compact, ASCII (a name's bytes that are
    not UTF-8, surrogate escapes, written as \\udcXX and read back as they
    were), as json.dumps writes it, without importing json: its values
    are numbers, strings, lists and objects of them."""
    return _json_value(value) + "\n"


def _json_value(value):
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(key)}:{_json_value(item)}"
                              for key, item in value.items()) + "}"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json_value(item) for item in value) + "]"
    raise TypeError(f"an index line holds no {type(value).__name__}")


def _json_string(text):
    try:
        from _json import encode_basestring_ascii
    except ImportError:  # pragma: no cover (CPython has it)
        from json.encoder import encode_basestring_ascii
    return encode_basestring_ascii(text)


def _leading_id(line):
    """The id of an index line: the number after its opening ``[`` (as
    index_line writes a crash's), else its JSON's (a line of an object);
    None for a line that is not a crash's."""
    if line.startswith(b"["):
        digits = line[1:21].split(b",", 1)[0]
        if digits.isdigit() and line.endswith(b"]"):
            return int(digits)
    entries = _parse_index(line)
    return entries[0]["id"] if entries else None


def _parse_index(data):
    import json
    if len(data) > MAX_INDEX_BYTES:  # (never written so long: the cap trims it)
        data = data[data.find(b"\n", len(data) - MAX_INDEX_BYTES) + 1:]
    entries = []
    for line in data.split(b"\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        entry = _line_entry(entry)
        if entry is not None:
            entries.append(entry)
    return entries
