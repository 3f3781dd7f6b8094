"""Synthesized sections kept between runs: on disk per build id under
``$XDG_CACHE_HOME/sfbt/synth`` (``~/.cache/sfbt/synth``), each a section
file with a JSON sidecar holding its checksum, statistics and the build id
and size of the file it was made from, and in this process's memory.  The
directory is private to its user; a missing, stale, corrupt or foreign
entry is rebuilt."""

import errno
import hashlib
import json
import os
import stat
import struct

from ..elf import read_build_id
from ..errors import SfbtError
from ..sframe import constants as C
from ..sframe.reader import open_section
from ..sframe.writer import write_section
from ..sframe.errors import SFrameEncodeError
from .synthesize import SynthError, SynthResult, SynthStats, synthesize_elf

#: Bumped whenever the synthesized bytes for the same input change, so old
#: cache entries are not used.
FORMAT = 2

#: The largest cache entries read (a section, its JSON sidecar).
MAX_ENTRY_BYTES = 1 << 28
MAX_META_BYTES = 1 << 26


def cache_directory():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sfbt", "synth")


def cache_key(path, build_id=None):
    """The entry's name: the build id, else a digest of the file's path,
    size and modification time."""
    if build_id is None:
        build_id = read_build_id(path)
    if build_id:
        return f"{build_id}.f{FORMAT}"
    stat = os.stat(path)
    digest = hashlib.sha256(
        f"{os.path.realpath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()
    return f"file-{digest[:40]}.f{FORMAT}"


class CacheDirectory:
    """The cache directory, opened so that it is private to this user: each
    of ``sfbt`` and ``synth`` is created 0700 if missing, opened without
    following a symbolic link, and must be a directory owned by this user
    (group and other permissions are removed).  Entries are read and
    written relative to it, without following links, and an entry not
    owned by this user or not a regular file is ignored.  Raises OSError
    when the directory cannot be used so."""

    def __init__(self, path):
        base, synth = os.path.split(path)
        base, sfbt = os.path.split(base)
        descriptor = os.open(base or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for name in (sfbt, synth):
            # closes the parent, and its own descriptor when it fails
            descriptor = _private_subdirectory(descriptor, name)
        self.descriptor = descriptor

    def close(self):
        os.close(self.descriptor)

    def read(self, name, limit=MAX_ENTRY_BYTES):
        """The entry's bytes, or None if it is missing or not ours."""
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                 | os.O_CLOEXEC, dir_fd=self.descriptor)
        except OSError:
            return None
        with os.fdopen(descriptor, "rb") as stream:
            status = os.fstat(descriptor)
            if (not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid()
                    or status.st_size > limit):
                return None
            return stream.read(limit)

    def write(self, name, data):
        """Replace the entry through a temporary file and a rename."""
        temporary = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=self.descriptor)
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
            os.replace(temporary, name, src_dir_fd=self.descriptor,
                       dst_dir_fd=self.descriptor)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=self.descriptor)
            except OSError:
                pass
            raise


def _private_subdirectory(parent, name):
    """Open (creating 0700) the directory ``name`` under the directory
    open as ``parent``, which is closed; refuse a link, or a directory
    of another user."""
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
        descriptor = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                             | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)
    status = os.fstat(descriptor)
    if status.st_uid != os.geteuid():
        os.close(descriptor)
        raise PermissionError(errno.EPERM, f"cache directory {name} belongs to "
                              f"user {status.st_uid}")
    if stat.S_IMODE(status.st_mode) & 0o077:
        os.fchmod(descriptor, 0o700)
    return descriptor


class SynthesisStore:
    """SynthResults by cache key: this process's memory, then the disk
    cache (``directory``, the user's cache by default), then built."""

    def __init__(self, directory=None, use_disk=True):
        self._directory = directory
        self.use_disk = use_disk
        self._memory = {}

    @property
    def directory(self):
        return self._directory or cache_directory()

    def clear(self):
        self._memory.clear()

    def synthesize(self, path, build_id=None):
        """The SynthResult for the ELF file at path.  Raises SynthError."""
        try:
            if build_id is None:
                build_id = read_build_id(path)
            key = cache_key(path, build_id or "")
            size = os.stat(path).st_size
        except OSError as error:
            raise SynthError(f"{error.strerror or error}") from None
        if key in self._memory:
            return self._memory[key]
        cache = None
        if self.use_disk:
            try:
                cache = CacheDirectory(self.directory)
            except OSError:
                pass  # an unusable cache only costs time
        try:
            identity = {"build_id": build_id or "", "size": size}
            result = self._load(cache, key, identity) if cache else None
            if result is None:
                result = build(path)
                if cache:
                    try:
                        self._store(cache, key, identity, result)
                    except OSError:
                        pass  # an unwritable cache only costs time
        finally:
            if cache:
                cache.close()
        self._memory[key] = result
        return result

    @staticmethod
    def _load(cache, key, identity):
        """The cached SynthResult, or None when missing, stale, corrupt or
        made for another file (build id and size must match)."""
        meta_bytes = cache.read(key + ".json", MAX_META_BYTES)
        data = cache.read(key + ".sframe")
        if meta_bytes is None or data is None:
            return None
        try:
            meta = json.loads(meta_bytes)
            if (not isinstance(meta, dict) or meta.get("format") != FORMAT
                    or meta.get("file") != identity
                    or meta.get("sha256") != hashlib.sha256(data).hexdigest()):
                return None
            section = open_section(data, 0)
            if section.version != C.VERSION_3 or section.num_functions != meta["functions"]:
                return None
            left_out = [(int(start), int(end), str(reason))
                        for start, end, reason in meta["left_out"]]
            return SynthResult(section, SynthStats.from_json(meta["stats"]), left_out,
                               origin="cache")
        except (ValueError, KeyError, TypeError, AttributeError, IndexError,
                RecursionError, SfbtError, struct.error):
            return None

    @staticmethod
    def _store(cache, key, identity, result):
        data = write_section(result.section)
        meta = {"format": FORMAT, "file": identity,
                "sha256": hashlib.sha256(data).hexdigest(),
                "functions": len(result.section.functions),
                "stats": result.stats.to_json(),
                "left_out": [list(item) for item in result.left_out]}
        # The section first: a sidecar never names bytes that are not there.
        cache.write(key + ".sframe", data)
        cache.write(key + ".json", json.dumps(meta, sort_keys=True).encode())


def build(path):
    """A SynthResult built afresh, its section read back from the bytes a
    cache would hold (so that a result from the cache is the same)."""
    result = synthesize_elf(path)
    try:
        data = write_section(result.section)
    except SFrameEncodeError as error:
        raise SynthError(f"cannot write the synthesized section: {error}") from None
    result.section = open_section(data, 0)
    return result
