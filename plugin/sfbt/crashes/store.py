"""The machine's crash store: a directory root owns (0700) holding

- ``index``: one JSON line per crash (id, time, PID, UID, GID, signal,
  code, fault address, executable, command, bucket, threads, and the file
  of its backtraces when they were kept), rewritten whole under the lock
  appends take (files.locked_for_update) and renamed into place, so that
  concurrent crashes all land and a crash of the handler damages nothing;
- ``crash-ID.sfbt``: the backtraces of a crash kept whole, an sfbt
  archive (the format cbf-save and record write: cbf-load opens it), one
  event per thread, the crashing thread's labelled ``crashed``;
- ``core-BUCKET.xz``: with --keep-core, the core of a bucket's first crash;
- ``settings``: the core_pattern and core_pipe_limit install replaced.

A bucket is a hash of the signal and the crashing thread's top frames as
(build id, address in the file): stable across ASLR, and known without
symbols.  The first KEEP_PER_BUCKET crashes of a bucket are kept whole;
the rest are a line of the index each (counted).  The files together stay
under ``max_use`` bytes: the oldest crash's files go first."""

import hashlib
import json
import os
import stat

from ..files import FileProblem, locked_for_update, open_directory, open_regular, replace_file

#: the store when neither --store nor $SFBT_CRASH_STORE names another
DEFAULT_STORE = "/var/lib/sfbt/crashes"
STORE_VARIABLE = "SFBT_CRASH_STORE"
INDEX = "index"
SETTINGS = "settings"
#: crashes of a bucket whose backtraces are kept whole
KEEP_PER_BUCKET = 3
#: the store's size cap by default (systemd-coredump's MaxUse)
DEFAULT_MAX_USE = 64 << 20
#: the most of the index read; its oldest lines go past this many
MAX_INDEX_BYTES = 16 << 20
MAX_INDEX_LINES = 50_000
#: frames of the crashing thread its bucket is made of
BUCKET_FRAMES = 5
#: what the index keeps of a crash counted in its bucket (the rest is the
#: bucket's first crash's: "of" is its id)
REPEAT_FIELDS = ("id", "time", "pid", "tid", "uid", "gid", "signal", "code", "address",
                 "bucket", "handler_ms", "handler_kb")


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
    return hashlib.blake2b("\n".join(parts).encode("utf-8", "surrogateescape"),
                           digest_size=8).hexdigest()


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

    # -- the index -------------------------------------------------------------------
    def _index(self):
        """The index's lines, oldest first (a damaged line left out)."""
        try:
            with open_regular(self.file(INDEX)) as stream:
                return _parse_index(stream)
        except FileNotFoundError:
            return []
        except FileProblem as problem:
            if problem.errno == 2:
                return []
            raise

    def add(self, entry, archive_bytes, keep_core=None):
        """Add a crash (``entry``: a dict of the index's fields but id,
        file, count) with its archive's bytes; ``keep_core(bucket, first)``
        is called under the lock to keep the core of a bucket's first
        crash.  Returns the entry as stored."""
        index_path = self.file(INDEX)
        with locked_for_update(index_path) as old:
            entries = _parse_index(old) if old is not None else []
            entry = dict(entry)
            entry["id"] = entries[-1]["id"] + 1 if entries else 1
            seen = sum(1 for e in entries if e.get("bucket") == entry["bucket"])
            if not archive_bytes:  # a core that could not be read: counted
                pass
            elif seen < KEEP_PER_BUCKET:
                name = f"crash-{entry['id']}.sfbt"
                replace_file(self.file(name), lambda out: out.write(archive_bytes), 0o600)
                entry["file"] = name
            else:  # counted: what differs from the bucket's first crash
                first = next(e for e in entries if e.get("bucket") == entry["bucket"])
                entry = {key: entry[key] for key in REPEAT_FIELDS if key in entry}
                entry["of"] = first["id"]
            if keep_core is not None:
                core_name = keep_core(entry["bucket"], seen == 0)
                if core_name:
                    entry["core"] = core_name
            entries.append(entry)
            entries = self._capped(entries)
            text = "".join(index_line(e) for e in entries).encode()
            replace_file(index_path, lambda out: out.write(text), 0o600)
        return entry

    def _capped(self, entries):
        """``entries`` with the oldest crashes' files removed until the
        store's files fit in max_use, and at most MAX_INDEX_LINES lines."""
        entries = entries[-MAX_INDEX_LINES:]
        sizes = {}
        for entry in entries:
            for key in ("file", "core"):
                name = entry.get(key)
                if name and name not in sizes:
                    try:
                        sizes[name] = os.lstat(self.file(name)).st_size
                    except OSError:
                        entry[key] = None
        used = sum(sizes.values()) + sum(len(index_line(e)) for e in entries)
        for entry in entries[:-1]:  # the newest crash stays
            if used <= self.max_use:
                break
            for key in ("file", "core"):
                name = entry.get(key)
                if name and name in sizes:
                    try:
                        os.unlink(self.file(name))
                    except FileNotFoundError:
                        pass
                    used -= sizes.pop(name)
                    for other in entries:
                        if other.get(key) == name:
                            other[key] = None
        while used > self.max_use and len(entries) > 1:
            used -= len(index_line(entries.pop(0)))
        return entries

    def entries(self):
        """The index's crashes, oldest first, a counted one with the
        fields of its bucket's first crash it leaves out."""
        entries = self._index()
        by_id = {entry["id"]: entry for entry in entries}
        for entry in entries:
            first = by_id.get(entry.get("of"))
            if first is not None:
                for key, value in first.items():
                    if key not in REPEAT_FIELDS and key not in ("file", "core"):
                        entry.setdefault(key, value)
        return entries

    def find(self, which):
        """The crashes ``which`` names: an id, or a bucket (its prefix)."""
        entries = self.entries()
        if which.isdigit():
            return [e for e in entries if e.get("id") == int(which)]
        return [e for e in entries if str(e.get("bucket", "")).startswith(which.lower())]

    # -- install's settings ---------------------------------------------------------
    def saved_settings(self):
        try:
            with open_regular(self.file(SETTINGS), 1 << 16) as stream:
                settings = json.loads(stream.read())
        except (OSError, ValueError):
            return None
        return settings if isinstance(settings, dict) else None

    def save_settings(self, settings):
        data = json.dumps(settings).encode()
        replace_file(self.file(SETTINGS), lambda out: out.write(data), 0o600)

    def forget_settings(self):
        try:
            os.unlink(self.file(SETTINGS))
        except FileNotFoundError:
            pass


def index_line(entry):
    # ensure_ascii: a name's bytes that are not UTF-8 (surrogate escapes)
    # written as \udcXX and read back as they were
    return json.dumps(entry, separators=(",", ":")) + "\n"


def _parse_index(stream):
    data = stream.read(MAX_INDEX_BYTES + 1)
    if len(data) > MAX_INDEX_BYTES:  # (never written so long: MAX_INDEX_LINES)
        data = data[:data.rfind(b"\n", 0, MAX_INDEX_BYTES) + 1]
    entries = []
    for line in data.split(b"\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), int):
            entries.append(entry)
    return entries
