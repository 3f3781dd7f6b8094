"""Synthesized sections kept between runs: on disk per build id under
``$XDG_CACHE_HOME/sfbt/synth`` (``~/.cache/sfbt/synth``), each a section
file with a JSON sidecar holding its checksum and statistics, and in this
process's memory.  A missing, stale or corrupt entry is rebuilt."""

import hashlib
import json
import os
import struct

from ..elf import read_build_id
from ..errors import SfbtError
from ..files import write_atomically
from ..sframe import constants as C
from ..sframe.reader import open_section
from ..sframe.writer import write_section
from ..sframe.errors import SFrameEncodeError
from .synthesize import SynthError, SynthResult, SynthStats, synthesize_elf

#: Bumped whenever the synthesized bytes for the same input change, so old
#: cache entries are not used.
FORMAT = 1


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
            key = cache_key(path, build_id)
        except OSError as error:
            raise SynthError(f"{error.strerror or error}") from None
        if key in self._memory:
            return self._memory[key]
        result = self._load(key) if self.use_disk else None
        if result is None:
            result = build(path)
            if self.use_disk:
                try:
                    self._store(key, result)
                except OSError:
                    pass  # an unwritable cache only costs time
        self._memory[key] = result
        return result

    def _load(self, key):
        """The cached SynthResult, or None when missing, stale or corrupt."""
        directory = self.directory
        try:
            with open(os.path.join(directory, key + ".json"), "rb") as stream:
                meta = json.loads(stream.read())
            with open(os.path.join(directory, key + ".sframe"), "rb") as stream:
                data = stream.read()
            if meta.get("format") != FORMAT or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                return None
            section = open_section(data, 0)
            if section.version != C.VERSION_3 or section.num_functions != meta["functions"]:
                return None
            left_out = [tuple(item) for item in meta["left_out"]]
            return SynthResult(section, SynthStats.from_json(meta["stats"]), left_out,
                               origin="cache")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, SfbtError,
                struct.error):
            return None

    def _store(self, key, result):
        data = write_section(result.section)
        meta = {"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(),
                "functions": len(result.section.functions),
                "stats": result.stats.to_json(),
                "left_out": [list(item) for item in result.left_out]}
        directory = self.directory
        os.makedirs(directory, exist_ok=True)
        # The section first: a sidecar never names bytes that are not there.
        write_atomically(os.path.join(directory, key + ".sframe"), data)
        write_atomically(os.path.join(directory, key + ".json"),
                         json.dumps(meta, sort_keys=True).encode())


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
