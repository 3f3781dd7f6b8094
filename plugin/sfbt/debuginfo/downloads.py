"""Downloaded debug files, kept in the ``debuginfod`` part of sfbt's one
private cache (sfbt.cache: a 0700 directory of this user's, entries
written 0600 without following links, opened only when they are regular
files of ours).  This is the one place that says how they are kept.  A
kept file is handed out only when its build id is the one asked for."""

import io
import os
import struct
import time

from ..cache import Cache
from ..elf import ElfError, ElfImage

CACHE = Cache("debuginfod")


def _key(build_id):
    return ("debuginfo", build_id)


def store(build_id, source, limit):
    """Keep the bytes read from the stream ``source`` (at most ``limit``;
    an exception its read raises leaves nothing behind) as the debug file
    of ``build_id``.  False when the cache cannot be used."""
    return CACHE.put_file(_key(build_id), source, ".debug", limit)


def kept(build_id, limit):
    """(path, the build id it holds: None when it is not ELF with one) of
    the file kept for ``build_id``; (None, None) when there is none (or it
    is not ours, or larger than ``limit``)."""
    stream = CACHE.open_file(_key(build_id), ".debug", limit)
    if stream is None:
        return None, None
    with stream:
        try:
            found = ElfImage.from_file(stream, "download").build_id()
        except (OSError, ElfError, struct.error):
            found = None
    return os.path.join(CACHE.path, CACHE.entry_name(_key(build_id), ".debug")), found


def discard(build_id):
    """Empty the file kept for ``build_id`` (it holds another build's)."""
    CACHE.put_file(_key(build_id), io.BytesIO(), ".debug")


def remember_miss(build_id):
    """Note that ``build_id`` could not be downloaded now."""
    CACHE.put(("miss", build_id), str(time.time()).encode())


def recent_miss(build_id, seconds):
    """Whether remember_miss(build_id) was called in the last ``seconds``."""
    data = CACHE.get(("miss", build_id), 64)
    try:
        return data is not None and 0 <= time.time() - float(data) < seconds
    except ValueError:
        return False


def directory():
    return CACHE.path
