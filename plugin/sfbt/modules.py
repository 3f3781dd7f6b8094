"""Which loaded object covers an address, and its SFrame data.

SFrame sections are parsed once per build id (or per file when there is
none) and shared by every module map, so a new stop or a new thread costs a
dictionary look-up.
"""

import os
import struct
from bisect import bisect_right

from .sframe import SFrameError, read_section
from .sframe.constants import PT_GNU_SFRAME
from .sframe.elf import ElfInputError, read_elf_sframe
from .target import TargetMemoryError

_SECTIONS = {}  # cache key -> SFrameSection, or None for "no SFrame data"


def _cache_key(module):
    if module.build_id:
        return ("build-id", module.build_id)
    try:
        stat = os.stat(module.path)
    except OSError:
        return ("path", module.path)
    return ("file", module.path, stat.st_mtime_ns, stat.st_size)


class SFrameSource:
    """Where a module's SFrame data came from, for `info sframe`."""

    def __init__(self, section, origin, error=None):
        self.section = section
        self.origin = origin  # "file", "memory" or "none"
        self.error = error

    def describe(self):
        if self.section is None:
            return f"none ({self.error})" if self.error else "none"
        return (f"SFrame v{self.section.version}, "
                f"{len(self.section.functions)} FDEs, from {self.origin}")


def load_module_sframe(module, target=None):
    """The module's SFrame data: from its file on disk, else (the file is
    gone, as for a core whose files moved) from the target's memory through
    PT_GNU_SFRAME."""
    key = _cache_key(module)
    if key in _SECTIONS:
        return _SECTIONS[key]
    source = None
    if os.path.exists(module.path):
        try:
            section, _ = read_elf_sframe(module.path)
            source = SFrameSource(section, "file")
        except (SFrameError, ElfInputError, OSError) as error:
            source = SFrameSource(None, "none", f"{module.path}: {error}")
    if (source is None or source.section is None) and target is not None:
        from_memory = _sframe_from_memory(module, target)
        if from_memory is not None:
            source = from_memory
    if source is None:
        source = SFrameSource(None, "none")
    if source.section is not None and source.section.is_empty:
        source = SFrameSource(None, "none", "empty .sframe section")
    _SECTIONS[key] = source
    return source


def _sframe_from_memory(module, target):
    """Read PT_GNU_SFRAME through the ELF header mapped at module.start."""
    try:
        ident = target.read_memory(module.start, 64)
        if ident[:4] != b"\x7fELF" or ident[4] != 2:
            return None
        endian = "<" if ident[5] == 1 else ">"
        phoff, = struct.unpack_from(endian + "Q", ident, 32)
        phentsize, phnum = struct.unpack_from(endian + "HH", ident, 54)
        table = target.read_memory(module.start + phoff, phentsize * phnum)
        for i in range(phnum):
            p_type, _, _, p_vaddr, _, p_filesz = struct.unpack_from(
                endian + "IIQQQQ", table, i * phentsize)
            if p_type == PT_GNU_SFRAME:
                data = target.read_memory(module.load_bias + p_vaddr, p_filesz)
                return SFrameSource(read_section(data, p_vaddr), "memory")
    except (TargetMemoryError, struct.error):
        return None
    except SFrameError as error:
        return SFrameSource(None, "none", f"{module.path} (memory): {error}")
    return None


class ModuleMap:
    """Modules sorted by address, with their SFrame data loaded on demand."""

    def __init__(self, modules, target=None, loader=load_module_sframe):
        self.modules = sorted(modules, key=lambda m: m.start)
        self._starts = [m.start for m in self.modules]
        self._target = target
        self._loader = loader

    def module_for(self, pc):
        i = bisect_right(self._starts, pc) - 1
        if i >= 0 and pc < self.modules[i].end:
            return self.modules[i]
        return None

    def source_for(self, module):
        return self._loader(module, self._target)

    def row_for(self, pc):
        """(module, FrameRow or None) for a run-time address."""
        module = self.module_for(pc)
        if module is None:
            return None, None
        section = self.source_for(module).section
        if section is None:
            return module, None
        return module, section.find_row(pc - module.load_bias)
