"""Synthesized sections kept between runs, in the ``synth`` part of sfbt's
private cache (see sfbt.cache), and in this process's memory.  An entry is
keyed by the file it was made from (its build id, device, inode, size and
change time, taken from the descriptor the rows were read through) and
holds the section with a JSON line of its statistics; a missing, stale,
corrupt or foreign entry is rebuilt."""

import json
import struct

from ..cache import Cache, identity
from ..elf import ElfError, open_elf
from ..errors import SfbtError
from ..sframe import constants as C
from ..sframe.reader import open_section
from ..sframe.writer import write_section
from ..sframe.errors import SFrameEncodeError
from .synthesize import SynthError, SynthResult, SynthStats, synthesize_image

#: Bumped whenever the synthesized bytes for the same input change, so old
#: cache entries are not used.
FORMAT = 3


def cache_key(stream, build_id):
    """The entry's key: what the file open as ``stream`` is."""
    return identity(stream.fileno(), "synth", FORMAT, build_id or "")


def file_cache_key(path):
    """The key of the file at path (for tests and benchmarks)."""
    stream, image = open_elf(str(path))
    with stream:
        return cache_key(stream, image.build_id())


class SynthesisStore:
    """SynthResults by what they were made from: this process's memory,
    then the disk cache (``cache``, the user's by default), then built."""

    def __init__(self, cache=None, use_disk=True):
        self.cache = cache or Cache("synth")
        self.use_disk = use_disk
        self._memory = {}

    def clear(self):
        self._memory.clear()

    def synthesize(self, path):
        """The SynthResult for the ELF file at path.  Raises SynthError."""
        try:
            stream, image = open_elf(str(path))
        except ElfError as error:
            raise SynthError(str(error)) from None
        except OSError as error:
            raise SynthError(f"{error.strerror or error}") from None
        with stream:
            try:
                key = cache_key(stream, image.build_id())
            except (OSError, ElfError, struct.error) as error:
                raise SynthError(f"not a readable ELF file: {error}") from None
            result = self._memory.get(key)
            if result is None and self.use_disk:
                result = _load(self.cache.get(key))
            if result is None:
                result = _built(image)
                if self.use_disk and cache_key(stream, image.build_id()) == key:
                    self.cache.put(key, _entry(result))
            result.made_from = key
            self._memory[key] = result
            return result


def _entry(result):
    data = write_section(result.section)
    meta = {"functions": len(result.section.functions),
            "stats": result.stats.to_json(),
            "left_out": [list(item) for item in result.left_out]}
    return json.dumps(meta, sort_keys=True).encode() + b"\n" + data


def _load(entry):
    """The SynthResult an entry holds, or None when there is none or it
    does not read back as what _entry writes."""
    if entry is None:
        return None
    meta_bytes, _, data = entry.partition(b"\n")
    try:
        meta = json.loads(meta_bytes)
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


def _built(image):
    """A SynthResult built afresh, its section read back from the bytes a
    cache would hold (so that a result from the cache is the same)."""
    try:
        result = synthesize_image(image)
    except ElfError as error:
        raise SynthError(f"not a readable ELF file: {error}") from None
    try:
        data = write_section(result.section)
    except SFrameEncodeError as error:
        raise SynthError(f"cannot write the synthesized section: {error}") from None
    result.section = open_section(data, 0)
    return result


def build(path):
    """A SynthResult built afresh from the ELF file at path, without the
    cache.  Raises SynthError or OSError."""
    try:
        stream, image = open_elf(str(path))
    except ElfError as error:
        raise SynthError(str(error)) from None
    with stream:
        return _built(image)
