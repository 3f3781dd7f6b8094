"""Downloaded debug files, kept under ``$XDG_CACHE_HOME/sfbt/debuginfod/``.

This is the one place that says where and how they are kept.  The
directory is made and checked as the synthesized sections' cache is
(dwarf/store.py: created 0700, owned by this user, not a link), files are
written whole through files.replace_file, and a kept file is only handed
out when it is a regular file of this user's.  Whoever uses one still
checks that its build id is the one asked for."""

import contextlib
import os
import stat
import time

from ..dwarf.store import CacheDirectory
from ..dwarf.store import cache_directory as synth_directory
from ..files import replace_file


def directory():
    return os.path.join(os.path.dirname(synth_directory()), "debuginfod")


def _private_directory():
    """directory(), created and checked (and the user's cache directory
    made, as XDG says, where there is none yet).  Raises OSError."""
    path = directory()
    with contextlib.suppress(FileExistsError):  # a file there: said by CacheDirectory
        os.makedirs(os.path.dirname(os.path.dirname(path)), 0o700, exist_ok=True)
    CacheDirectory(path).close()
    return path


def store(name, write):
    """Keep a downloaded file as ``name``: ``write(stream)`` fills it (an
    exception it raises leaves nothing behind).  Returns its path; raises
    OSError (a FileProblem naming it) when it cannot be kept."""
    path = os.path.join(_private_directory(), name)
    replace_file(path, write, mode=0o600)
    return path


def kept(name):
    """The path of the file kept as ``name``, or None.  Raises OSError when
    the directory cannot be used."""
    path = os.path.join(_private_directory(), name)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid():
        return None
    return path


def discard(name):
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(directory(), name))


def remember_miss(name):
    """Note that ``name`` could not be downloaded now."""
    with contextlib.suppress(OSError):
        store(name + ".miss", lambda stream: None)


def recent_miss(name, seconds):
    """Whether remember_miss(name) was called in the last ``seconds``."""
    try:
        path = kept(name + ".miss")
        return path is not None and 0 <= time.time() - os.lstat(path).st_mtime < seconds
    except OSError:
        return False
