"""sfbt's one on-disk cache: ``$XDG_CACHE_HOME/sfbt/PART/``
(``~/.cache/sfbt/PART/``), one part per kind of entry (``synth``,
``symbols``, ...).

Root runs sfbt on other users' processes and files, so nothing here is
believed because of where it is:

- ``$XDG_CACHE_HOME`` is reached as outputs are (files.open_directory: a
  link another user planted in a sticky directory is not followed, the
  directories made on the way are 0700).
- ``sfbt/`` and ``PART/`` are created 0700, opened without following a
  link, and used only when they are directories of this user that no one
  else may write to (one warning line, and the command goes on without
  the cache); a directory of ours others may only read is made 0700.
- An entry is named by a digest of its key, and its key says what it was
  made from (``identity`` of the file read: build id, device, inode, size
  and change time), so an entry made from one file is never found for
  another with the same build id.
- Entries are opened without following links and without blocking, and
  are read only when they are regular files of this user no larger than
  the caller's limit.  A record (``get``/``put``) starts with its key and
  a SHA-256 of its bytes, both checked on every read; anything in doubt
  reads as missing, and the caller rebuilds it.
- Entries are written 0600 into a temporary file in the directory that is
  then renamed over the entry: nothing is ever written through a link.

``open_file``/``put_file`` keep whole files (a downloaded debug file)
without a header: their reader checks what it opened (its build id).
"""

from __future__ import annotations

import errno
import os
import stat
import sys

from .files import open_directory

# CPython's own SHA-256: the same digests without loading OpenSSL, which
# importing hashlib does (~4 ms of every run, for the ~100 kB a run hashes)
try:
    from _sha256 import sha256  # CPython up to 3.11
except ImportError:
    try:
        from _sha2 import sha256  # CPython 3.12 on
    except ImportError:
        from hashlib import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Callable, Optional, Set, Tuple, Union

    #: A key: a tuple of str and int (a build id, a format number, identity()).
    Key = Tuple[Union[str, int], ...]

#: The largest entry read unless the caller says otherwise.
MAX_ENTRY_BYTES = 1 << 26
_MAGIC = b"sfbt-cache 1\n"

_warned: Set[str] = set()


def cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sfbt")


def identity(descriptor: int, *extra: Union[str, int]) -> Key:
    """A key part naming the open file: device, inode, size and change time
    (which, unlike the modification time, no user can set back), after
    ``extra`` (a build id, a format number)."""
    status = os.fstat(descriptor)
    return (*extra, status.st_dev, status.st_ino, status.st_size, status.st_ctime_ns)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex: what names the cache's entries and
    checks their bytes."""
    return sha256(data).hexdigest()


def _key_text(key: Key) -> bytes:
    return "\0".join(map(str, key)).encode("utf-8", "surrogateescape")


class Cache:
    """One part of the cache.  Every method returns None or False when the
    cache cannot be used: a cache only saves time."""

    #: entries looked up on disk by this process, every part (a debug
    #: counter: tests check that what a debugger keeps in memory is not
    #: read again)
    reads = 0

    def __init__(self, part: str, root: Optional[str] = None):
        self.part = part
        self._root = root

    @property
    def path(self) -> str:
        return os.path.join(self._root or cache_root(), self.part)

    def entry_name(self, key: Key, suffix: str = "") -> str:
        """The file name of ``key``'s entry (a tuple of str and int)."""
        return sha256_hex(_key_text(key))[:40] + suffix

    # -- records: bytes checked against their key and digest -------------------------------

    def get(self, key: Key, limit: int = MAX_ENTRY_BYTES) -> Optional[bytes]:
        """The bytes put under key, or None if missing or in any doubt."""
        Cache.reads += 1
        with _Directory.open(self.path) as directory:
            if directory is None:
                return None
            data = directory.read(self.entry_name(key), limit + 1024)
        if data is None or not data.startswith(_MAGIC):
            return None
        head, _, rest = data[len(_MAGIC):].partition(b"\n")
        digest, _, payload = rest.partition(b"\n")
        if (head != _key_text(key).hex().encode() or len(payload) > limit
                or digest != sha256_hex(payload).encode()):
            return None
        return payload

    def put(self, key: Key, data: bytes) -> bool:
        """Keep data under key; False if the cache cannot be used."""
        head = _MAGIC + _key_text(key).hex().encode() + b"\n" \
            + sha256_hex(data).encode() + b"\n"
        return self._write(self.entry_name(key), lambda stream: (
            stream.write(head), stream.write(data)))

    # -- whole files ----------------------------------------------------------------------

    def open_file(self, key: Key, suffix: str = "",
                  limit: int = MAX_ENTRY_BYTES) -> Optional[IO[bytes]]:
        """A binary stream of the file put under key, or None."""
        Cache.reads += 1
        with _Directory.open(self.path) as directory:
            if directory is None:
                return None
            return directory.open_entry(self.entry_name(key, suffix), limit)

    def put_file(self, key: Key, source: IO[bytes], suffix: str = "",
                 limit: int = MAX_ENTRY_BYTES) -> bool:
        """Keep the bytes of the stream ``source`` (at most ``limit``)."""
        def copy(stream: IO[bytes]) -> None:
            left = limit
            while True:
                chunk = source.read(min(left + 1, 1 << 20))
                if not chunk:
                    return
                left -= len(chunk)
                if left < 0:
                    raise OSError(errno.EFBIG, "larger than the cache keeps")
                stream.write(chunk)
        return self._write(self.entry_name(key, suffix), copy)

    def _write(self, name: str, fill: Callable[[IO[bytes]], object]) -> bool:
        with _Directory.open(self.path, create=True) as directory:
            if directory is None:
                return False
            try:
                directory.write(name, fill)
                return True
            except OSError:
                return False


class _Directory:
    """A cache directory opened as private (see the module's docstring);
    ``descriptor`` None when it may not be used."""

    def __init__(self, descriptor: Optional[int]):
        self.descriptor = descriptor

    @classmethod
    def open(cls, path: str, create: bool = False) -> "_Directory":
        base, part = os.path.split(path)
        root, sfbt = os.path.split(base)
        try:  # $XDG_CACHE_HOME (~/.cache) itself is the user's to say, but
            # reached as outputs are (links planted in /tmp not followed)
            descriptor = open_directory(root or ".", create)
        except OSError as error:
            if error.errno == errno.EACCES:
                _warn(f"cache directory {error}; not used")
            return cls(None)
        try:
            for name, shown in ((sfbt, base), (part, path)):
                descriptor = _private_subdirectory(descriptor, name, shown, create)
        except OSError as error:
            if isinstance(error, _Unsafe):
                _warn(error.strerror or str(error))
            return cls(None)
        return cls(descriptor)

    def __enter__(self) -> Optional["_Directory"]:
        return self if self.descriptor is not None else None

    def __exit__(self, *_: object) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)

    def open_entry(self, name: str, limit: int) -> Optional[IO[bytes]]:
        """A stream of the entry if it is a regular file of ours of at
        most ``limit`` bytes, else None."""
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                 | os.O_CLOEXEC, dir_fd=self.descriptor)
        except OSError:
            return None
        status = os.fstat(descriptor)
        if (not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid()
                or status.st_size > limit):
            os.close(descriptor)
            return None
        return os.fdopen(descriptor, "rb")

    def read(self, name: str, limit: int) -> Optional[bytes]:
        stream = self.open_entry(name, limit)
        if stream is None:
            return None
        with stream:
            try:
                data = stream.read(limit + 1)
            except OSError:
                return None
        return data if len(data) <= limit else None

    def write(self, name: str, fill: Callable[[IO[bytes]], object]) -> None:
        """fill(stream) writes the entry into a new 0600 file that is then
        renamed over ``name``."""
        temporary = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=self.descriptor)
        try:
            with os.fdopen(descriptor, "wb") as stream:
                fill(stream)
            os.replace(temporary, name, src_dir_fd=self.descriptor,
                       dst_dir_fd=self.descriptor)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=self.descriptor)
            except OSError:
                pass
            raise


def _warn(line: str) -> None:
    """One warning line, once per process."""
    if line not in _warned:
        _warned.add(line)
        print(f"sfbt: warning: {line}", file=sys.stderr, flush=True)


class _Unsafe(PermissionError):
    """A cache directory others could have written to: said once."""


def _private_subdirectory(parent: int, name: str, shown: str, create: bool) -> int:
    """Open the directory ``name`` under the directory open as ``parent``
    (which is closed), creating it 0700 when ``create``.  Raises _Unsafe
    for a link, something else than a directory, or a directory of
    another user or that others may write to."""
    try:
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
            except FileExistsError:
                pass
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, dir_fd=parent)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _Unsafe(errno.EPERM, f"cache directory {shown} is a link or not a "
                              "directory: not used") from None
            raise
    finally:
        os.close(parent)
    status = os.fstat(descriptor)
    mode = stat.S_IMODE(status.st_mode)
    if status.st_uid != os.geteuid() or mode & 0o022:
        os.close(descriptor)
        whose = (f"belongs to user {status.st_uid}" if status.st_uid != os.geteuid()
                 else f"may be written by others (mode {mode:o})")
        raise _Unsafe(errno.EPERM, f"cache directory {shown} {whose}: not used")
    if mode & 0o077:
        os.fchmod(descriptor, 0o700)
    return descriptor
