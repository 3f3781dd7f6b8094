"""Reading and writing files safely: only regular files are read (a FIFO or
a device would block or never end), and a file is written whole through a
temporary file and a rename, so readers never see half of one."""

import contextlib
import errno
import fcntl
import io
import os
import stat
import struct
import time

from .errors import SfbtError


class FileProblem(SfbtError, OSError):
    """An OSError that names the file the user gave (never a temporary
    file) and prints as one line: ``PATH: what went wrong``."""

    def __init__(self, path, message, code=errno.EINVAL):
        OSError.__init__(self, code, message, path)

    def __str__(self):
        return f"{self.filename}: {self.strerror}"


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _not_regular(path, mode):
    kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    return FileProblem(path, f"not a regular file ({kind})", code)


def _named(path, error):
    """``error`` (an OSError) as a FileProblem naming ``path``."""
    if isinstance(error, FileProblem):
        return error
    return FileProblem(path, error.strerror or str(error), error.errno or errno.EIO)


def _regular_status(descriptor, path):
    """The opened file's status; FileProblem unless it is a regular file."""
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        raise _not_regular(path, status.st_mode)
    return status


def _make_blocking(descriptor):
    """Clear the O_NONBLOCK a file was opened with (so that a FIFO swapped
    in could not block the open)."""
    flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
    fcntl.fcntl(descriptor, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)


class OpenedPath(str):
    """The name of a file that is already open and checked (a debuginfod
    download, kept in the cache): open_regular reads it through its
    descriptor, never by the name again, so a file swapped in under the
    name afterwards is never read.  Otherwise a str: messages show the
    name."""

    def __new__(cls, path, stream):
        opened = super().__new__(cls, path)
        opened.stream = stream  # kept open as long as the name is
        return opened

    def reopen(self):
        """A new binary stream of the open file, from its first byte."""
        return io.BufferedReader(_PositionalReader(self.stream.fileno()))


class _PositionalReader(io.RawIOBase):
    """A reader of its own duplicate of a descriptor, keeping its own
    position (pread): two readers of one file do not move each other."""

    def __init__(self, descriptor):
        super().__init__()
        self._descriptor = os.dup(descriptor)
        self._at = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def fileno(self):
        return self._descriptor

    def readinto(self, buffer):
        data = os.pread(self._descriptor, len(buffer), self._at)
        buffer[:len(data)] = data
        self._at += len(data)
        return len(data)

    def seek(self, offset, whence=os.SEEK_SET):
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._at,
                os.SEEK_END: os.fstat(self._descriptor).st_size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, "seek before the start of the file")
        self._at = base + offset
        return self._at

    def tell(self):
        return self._at

    def close(self):
        if not self.closed:
            os.close(self._descriptor)
        super().close()


def open_regular(path, limit=None):
    """A binary stream reading the regular file at path.  Anything else
    (FIFO, device, directory, socket) is refused before it is opened for
    reading, and again on the opened descriptor (the name may have
    changed in between; O_NONBLOCK keeps a FIFO swapped in from blocking
    the open).  ``limit``: refuse a file of more bytes.  An OpenedPath is
    read through its descriptor.  Raises FileProblem."""
    if isinstance(path, OpenedPath):
        return _within(path.reopen(), path, limit)
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(path, status.st_mode)
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise _named(path, error) from None
    try:
        _make_blocking(descriptor)
        stream = os.fdopen(descriptor, "rb")
    except BaseException as error:
        os.close(descriptor)
        if isinstance(error, OSError):
            raise _named(path, error) from None
        raise
    return _within(stream, path, limit)


def _within(stream, path, limit):
    """stream, when it reads a regular file of at most ``limit`` bytes
    (None: any); else it is closed and FileProblem raised."""
    try:
        status = _regular_status(stream.fileno(), path)
        if limit is not None and status.st_size > limit:
            raise FileProblem(path, f"file of {status.st_size} bytes is larger than "
                              f"the {limit} bytes sfbt reads", errno.EFBIG)
        return stream
    except BaseException as error:
        stream.close()
        if isinstance(error, OSError):
            raise _named(path, error) from None
        raise


def read_regular(path, limit):
    """The bytes of the regular file at path, at most ``limit`` of them
    (a larger file is refused).  Raises FileProblem."""
    with open_regular(path, limit) as stream:
        try:
            data = stream.read(limit + 1)
        except OSError as error:
            raise _named(path, error) from None
    if len(data) > limit:  # grew since the check
        raise FileProblem(path, f"file is larger than the {limit} bytes sfbt reads",
                          errno.EFBIG)
    return data


#: symbolic links followed in one path before giving up, as the kernel does
MAX_LINKS = 40
_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def _others_may_write(status, group=False):
    """Whether the directory with ``status`` is sticky and writable by all
    (with ``group``: or by its group), where the kernel's protected_symlinks
    and protected_regular rules apply."""
    return bool(status.st_mode & stat.S_ISVTX
                and status.st_mode & (stat.S_IWOTH | (stat.S_IWGRP if group else 0)))


class _Resolved:
    """A path resolved by sfbt itself, a component at a time through
    directory descriptors, so that no link is followed that was not
    checked: a link in a sticky directory anyone may write to (/tmp) is
    followed only when it belongs to us or to the directory's owner, as
    the kernel's protected_symlinks rule would (root's writes would
    otherwise follow a link another user planted in /tmp).  ``directory``
    is the last directory reached; ``name`` the last component in it, None
    when the path ends on a directory.  With ``create``, missing
    directories on the way are made 0700.  Closes the directory on
    close() or as a context manager."""

    def __init__(self, path, create=False):
        self.path = path
        self.directory = None
        self.name = None
        try:
            self._resolve(os.fspath(path), create)
        except BaseException as error:
            self.close()
            if isinstance(error, OSError):
                raise _named(path, error) from None
            raise

    def _resolve(self, text, create):
        pending = [part for part in reversed(text.split("/")) if part not in ("", ".")]
        self._enter("/" if text.startswith("/") else ".")
        links = 0
        while pending:
            name = pending.pop()
            if name == "..":
                self._enter("..")
                continue
            try:
                status = os.stat(name, dir_fd=self.directory, follow_symlinks=False)
            except FileNotFoundError:
                if not pending:
                    self.name = name
                    return
                if not create:
                    raise
                self._make(name)
                continue
            if stat.S_ISLNK(status.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                self._check_link(name, status)
                target = os.readlink(name, dir_fd=self.directory)
                if target.startswith("/"):
                    self._enter("/")
                pending += [part for part in reversed(target.split("/"))
                            if part not in ("", ".")]
                continue
            if not pending:
                self.name = name
                return
            self._enter(name, os.O_NOFOLLOW)

    def _enter(self, name, flags=0):
        directory = os.open(name, _DIRECTORY | flags, dir_fd=self.directory)
        self.close()
        self.directory = directory

    def _make(self, name):
        """Make the directory name 0700 and enter it; FileProblem when
        another user made it first (between our look and our mkdir)."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=self.directory)
        where = self._where()
        self._enter(name, os.O_NOFOLLOW)
        owner = os.fstat(self.directory).st_uid
        if owner != os.geteuid():
            raise FileProblem(self.path, f"the directory {name} made in {where} belongs "
                              f"to user {owner}", errno.EACCES)

    def _where(self):
        try:
            return os.readlink(f"/proc/self/fd/{self.directory}")
        except OSError:
            return "a sticky directory"

    def _check_link(self, name, status):
        here = os.fstat(self.directory)
        if _others_may_write(here) and status.st_uid not in (os.geteuid(), here.st_uid):
            raise FileProblem(self.path, f"not following the link {name} that user "
                              f"{status.st_uid} owns in {self._where()} (sticky, writable "
                              "by all), as the kernel's protected_symlinks would not",
                              errno.EACCES)

    def status(self):
        """The target's status (not following a link), or None if there
        is none."""
        try:
            return os.stat(self.name, dir_fd=self.directory, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def close(self):
        if self.directory is not None:
            os.close(self.directory)
            self.directory = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


class WritePlace(_Resolved):
    """Where a write to a path lands: ``name`` in the directory open as
    ``directory``, links followed only as protected_symlinks would (see
    _Resolved).  An existing target that is not a regular file is refused,
    and so is a regular file in a sticky directory others may write to
    that belongs neither to us nor to the directory's owner, as the
    kernel's protected_regular=2 refuses to open one with O_CREAT (the
    file's owner would keep a hold on what we write: its mode, a link to
    it, a descriptor open on it).  Raises FileProblem naming path; use as
    a context manager (it closes the directory)."""

    def __init__(self, path):
        super().__init__(path)
        try:
            if self.name is None:
                raise FileProblem(path, "not a regular file (a directory)", errno.EISDIR)
            status = self.status()
            if status is not None:
                if not stat.S_ISREG(status.st_mode):
                    raise _not_regular(path, status.st_mode)
                self._check_regular(status)
        except BaseException:
            self.close()
            raise

    def _check_regular(self, status):
        here = os.fstat(self.directory)
        if (_others_may_write(here, group=True)
                and status.st_uid not in (os.geteuid(), here.st_uid)):
            raise FileProblem(self.path, f"not writing over the file {self.name} that user "
                              f"{status.st_uid} owns in {self._where()} (sticky, writable by "
                              "others), as the kernel's protected_regular would not",
                              errno.EACCES)


def open_directory(path, create=False):
    """A descriptor (O_PATH) of the directory at path, its links followed
    only as protected_symlinks would (see _Resolved); with ``create``, the
    missing directories are made 0700.  Raises FileProblem."""
    with _Resolved(path, create) as resolved:
        if resolved.name is not None:
            try:
                if create and resolved.status() is None:
                    resolved._make(resolved.name)
                else:
                    resolved._enter(resolved.name, os.O_NOFOLLOW)
            except OSError as error:
                raise _named(path, error) from None
        descriptor, resolved.directory = resolved.directory, None
        return descriptor


def _new_file_mode():
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _temporary(place):
    """(descriptor, temporary name or None): an unnamed O_TMPFILE file
    where the system has them (nothing is left behind if the process is
    killed), else a named one created exclusively."""
    if hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd"):
        try:
            return os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600,
                           dir_fd=place.directory), None
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL,
                                   errno.ENOENT):
                raise
    for _ in range(100):
        temporary = f".{place.name}.sfbt-{os.urandom(6).hex()}"
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                           | os.O_NOFOLLOW, 0o600, dir_fd=place.directory), temporary
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name")


def _publish(descriptor, temporary, place):
    """Rename the finished temporary file over the target."""
    if temporary is None:  # O_TMPFILE: give it a name first
        for _ in range(100):
            temporary = f".{place.name}.sfbt-{os.urandom(6).hex()}"
            # with dst_dir_fd, os.link is linkat(2) with AT_SYMLINK_FOLLOW,
            # which (unlike link(2)) names a file through /proc/self/fd
            try:
                os.link(f"/proc/self/fd/{descriptor}", temporary, dst_dir_fd=place.directory)
                break
            except FileExistsError:
                continue
    try:
        os.replace(temporary, place.name, src_dir_fd=place.directory,
                   dst_dir_fd=place.directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=place.directory)
        raise


def replace_file(path, write, mode=None):
    """Write a whole file: ``write(stream)`` fills a temporary file in the
    target's directory, which is flushed and renamed over the target, so
    readers see the old file or the new one.  The target is what path
    names after the symbolic links WritePlace follows; an existing one
    keeps its permissions and (as far as we may set them) its owner and
    group; a new one gets ``mode`` (default 0666 less the umask).  A
    target a recording is writing (record_into) is refused: the
    recording's rename would replace what we wrote.  Every failure removes
    the temporary file and raises FileProblem naming path."""
    _replace_file(path, write, mode, recording=False)


def replace_locked(path, write):
    """replace_file holding the lock appends take (locked_for_update), for
    files others append to: an append running meanwhile neither undoes
    the replace (its copy of the old file renamed over the new one) nor is
    undone by it."""
    with locked_for_update(path):
        replace_file(path, write)


def record_into(path, write):
    """replace_file for a recording (sfbt record): ``write(stream)`` may
    take as long as the recording, and the target is held locked as
    locked_for_update locks it, marked as being recorded to, until the
    new file is in its place: appends and replaces meanwhile are refused
    in one line instead of being lost to the rename."""
    with locked_for_update(path, recording=True):
        _replace_file(path, write, None, recording=True)


def _replace_file(path, write, mode, recording):
    with WritePlace(path) as place:
        temporary = None
        try:
            existing = place.status()
            if existing is not None and not recording:
                _refuse_if_recorded(place, path)
            descriptor, temporary = _temporary(place)
            try:
                if existing is not None:
                    os.fchmod(descriptor, stat.S_IMODE(existing.st_mode))
                    _keep_owner(descriptor, existing)
                else:
                    os.fchmod(descriptor, _new_file_mode() if mode is None else mode)
                with os.fdopen(descriptor, "wb", closefd=False) as stream:
                    write(stream)
                    stream.flush()
                    os.fsync(descriptor)
                _publish(descriptor, temporary, place)
                temporary = None
            finally:
                os.close(descriptor)
        except OSError as error:
            raise _named(path, error) from None
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=place.directory)


def _keep_owner(descriptor, existing):
    if (existing.st_uid, existing.st_gid) == (os.geteuid(), os.getegid()):
        return
    try:
        os.fchown(descriptor, existing.st_uid, existing.st_gid)
    except PermissionError:
        with contextlib.suppress(PermissionError):
            os.fchown(descriptor, -1, existing.st_gid)


def write_atomically(path, data):
    """Replace the file at path with data (see replace_file)."""
    replace_file(path, lambda stream: stream.write(data))


#: seconds an append waits for another process's lock on its file
LOCK_WAIT = 10.0


@contextlib.contextmanager
def locked_for_update(path, wait=None, recording=False):
    """Hold an exclusive advisory lock (flock) on the file at path for a
    read-modify-replace; yields a binary stream of its current bytes, or
    None when there is no file yet.

    The lock is on the file itself: a writer that replaces it renames a
    new file over it, so after taking the lock we check that path still
    names the locked file and start again if not.  A missing file is
    created empty to have something to lock (an empty file is read as no
    file).  Anyone who may read the file may lock it, so the lock is
    waited for ``wait`` seconds (LOCK_WAIT) at most: then FileProblem.

    ``recording`` (record_into): the lock is held for a whole recording,
    and marked so (_mark_recording): an update, or a replace
    (replace_file), that finds the mark is refused at once with a line
    saying the file is being recorded to, rather than said done and lost
    to the recording's rename."""
    deadline = time.monotonic() + (LOCK_WAIT if wait is None else wait)
    with WritePlace(path) as place:
        while True:
            try:
                descriptor = os.open(place.name, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK
                                     | os.O_CLOEXEC | os.O_NOFOLLOW, _new_file_mode(),
                                     dir_fd=place.directory)
            except OSError as error:
                raise _named(path, error) from None
            try:
                status = _regular_status(descriptor, path)
                _lock(descriptor, path, deadline)
                current = place.status()
                if current is None or (current.st_dev, current.st_ino) != (
                        status.st_dev, status.st_ino):
                    os.close(descriptor)
                    continue
                if recording:
                    _mark_recording(descriptor)
                _make_blocking(descriptor)
            except OSError as error:
                os.close(descriptor)
                raise _named(path, error) from None
            except BaseException:
                os.close(descriptor)
                raise
            break
        with os.fdopen(descriptor, "rb") as stream:
            empty = os.fstat(descriptor).st_size == 0
            try:
                yield None if empty else stream
            except BaseException:
                if empty:  # the file we created to lock: leave nothing behind
                    _remove_if_still(place, os.fstat(descriptor))
                raise


def _lock(descriptor, path, deadline):
    """flock(LOCK_EX) on descriptor, giving up at the deadline, or at once
    when a recording holds it."""
    pause = 0.001
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if _recording_to(descriptor):
                raise _being_recorded(path) from None
            left = deadline - time.monotonic()
            if left <= 0:
                raise FileProblem(path, "another process holds a lock on it; nothing "
                                  "was written", errno.EWOULDBLOCK) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)


#: struct flock of fcntl(2) (glibc, with 64-bit file offsets as CPython's):
#: l_type, l_whence, l_start, l_len, l_pid
_FLOCK = struct.Struct("@hhqqi")


def _mark_recording(descriptor):
    """Mark the locked file as being recorded to: a read lock of the open
    file description (F_OFD_SETLK, kept until it is closed, whatever else
    the process opens and closes), which only a write lock (no sfbt writer
    takes one) could keep from being taken; then appends wait for the
    flock as for any other."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(descriptor, fcntl.F_OFD_SETLK,
                    _FLOCK.pack(fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))


def _recording_to(descriptor):
    """Whether a recording's mark is on the open file: F_OFD_GETLK says
    whether the write lock asked about would conflict (nothing is locked
    or unlocked)."""
    asked = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    return (_FLOCK.unpack(fcntl.fcntl(descriptor, fcntl.F_OFD_GETLK, asked))[0]
            != fcntl.F_UNLCK)


def _refuse_if_recorded(place, path):
    """FileProblem when a recording holds its mark on the existing target."""
    try:
        descriptor = os.open(place.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW
                             | os.O_CLOEXEC, dir_fd=place.directory)
    except OSError:
        return  # gone, or not ours to read: the replace says what is wrong
    try:
        if _recording_to(descriptor):
            raise _being_recorded(path)
    finally:
        os.close(descriptor)


def _being_recorded(path):
    return FileProblem(path, "sfbt record is recording to it; nothing was written",
                       errno.EBUSY)


def _remove_if_still(place, status):
    with contextlib.suppress(OSError):
        current = place.status()
        if current is not None and (current.st_dev, current.st_ino) == (
                status.st_dev, status.st_ino) and current.st_size == 0:
            os.unlink(place.name, dir_fd=place.directory)


class ReadAs:
    """Whose word a file of data is (a core, an archive: its writer's): a
    file it names is read only if each of ``users`` [(uid, gid)] could
    read it by its mode, owner and group (checked on the opened
    descriptor, so a link or a rename cannot swap in another file).  Root
    and the invoking user are no restriction (the kernel checks our own
    opens); ``whose`` names the users in the refusal ("the core's
    owner")."""

    def __init__(self, users=(), whose="the writer"):
        self.users = sorted({(uid, gid) for uid, gid in users
                             if uid not in (0, os.geteuid())})
        self.whose = whose

    @classmethod
    def owner_of(cls, descriptor, whose, also=()):
        """The ReadAs of the file open as ``descriptor``: its owner and
        group, and ``also`` (another claim of the writer, as a core's
        NT_PRPSINFO: both must be able to read, the stricter)."""
        status = os.fstat(descriptor)
        return cls([(status.st_uid, status.st_gid), *also], whose)

    def refusal(self, status, what="read it", bits=(stat.S_IRUSR, stat.S_IRGRP,
                                                   stat.S_IROTH)):
        """Why these users could not ``what`` (read, or with the search
        bits, search) a file of ``status``; None if they could."""
        for uid, gid in self.users:
            owner, group, others = bits
            bit = owner if status.st_uid == uid else group if status.st_gid == gid \
                else others
            if not status.st_mode & bit:
                return (f"{self.whose} (user {uid}, group {gid}) may not {what} "
                        f"(mode {stat.S_IMODE(status.st_mode):04o}, owner "
                        f"{status.st_uid}, group {status.st_gid})")
        return None

    def _directory_refusal(self, descriptor):
        """Why these users could not search a directory on the way to the
        open file (by its name now, /proc/self/fd); None if they could."""
        try:
            where = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            return None  # no /proc: the file's own bits decide
        directory = os.path.dirname(where)
        while where != directory:
            try:
                why = self.refusal(os.stat(directory), f"search {directory}",
                                   (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH))
            except OSError:
                return None
            if why is not None:
                return why
            where, directory = directory, os.path.dirname(directory)
        return None

    def open(self, path, limit=None):
        """open_regular(path, limit), refused with FileProblem (EACCES)
        unless these users could read the file opened (and search the
        directories on its path).  A download sfbt made itself
        (OpenedPath) is no file the core or archive named: it is read."""
        stream = open_regular(path, limit)
        if self.users and not isinstance(path, OpenedPath):
            why = self.refusal(os.fstat(stream.fileno())) \
                or self._directory_refusal(stream.fileno())
            if why is not None:
                stream.close()
                raise FileProblem(path, f"not read: {why}", errno.EACCES)
        return stream


#: no restriction: the user's own files (--exe), or --trust-files
TRUSTED = ReadAs()
