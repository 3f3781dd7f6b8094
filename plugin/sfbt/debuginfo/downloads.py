"""Downloaded debug files, kept in the ``debuginfod`` part of sfbt's one
private cache (sfbt.cache: a 0700 directory of this user's, entries
written 0600 without following links, opened only when they are regular
files of ours).  This is the one place that says how they are kept.  A
kept file is handed out only when its build id is the one asked for."""

import os
import struct
import time

from ..cache import Cache
from ..elf import ElfError, ElfImage
from ..files import OpenedPath

CACHE = Cache("debuginfod")


def _key(build_id):
    return ("debuginfo", build_id)


def build_id_of(stream):
    """The build id of the ELF file open as ``stream``; None when it is
    not ELF with one."""
    try:
        return ElfImage.from_file(stream, "download").build_id()
    except (OSError, ElfError, struct.error):
        return None


def keep(build_id, stream, limit):
    """Keep the file open as ``stream`` (at most ``limit`` bytes) as the
    debug file of ``build_id``; the name of it that reads that stream,
    never the kept copy.  None when the cache cannot be used."""
    stream.seek(0)
    if not CACHE.put_file(_key(build_id), stream, ".debug", limit):
        return None
    return OpenedPath(_name(build_id), stream)


def kept(build_id, limit):
    """(name, the build id it holds: None when it is not ELF with one) of
    the file kept for ``build_id``, opened once and checked (a regular
    file of ours of at most ``limit`` bytes); the name reads that open
    file (files.OpenedPath), never the cache's entry again.  (None, None)
    when there is none."""
    stream = CACHE.open_file(_key(build_id), ".debug", limit)
    if stream is None:
        return None, None
    found = build_id_of(stream)
    if found != build_id:
        stream.close()
        return None, found
    return OpenedPath(_name(build_id), stream), found


def _name(build_id):
    return os.path.join(CACHE.path, CACHE.entry_name(_key(build_id), ".debug"))


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
