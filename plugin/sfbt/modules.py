"""Which loaded object covers an address, and its SFrame data.

SFrame sections are parsed once per build id (or per file when there is
none) and shared by every module map, so a new stop or a new thread costs a
dictionary look-up.
"""

import os
from bisect import bisect_right

from .sframe import SFrameError, read_section
from .sframe.constants import PT_GNU_SFRAME
from .sframe.elf import ElfInputError, read_elf_sframe
from .elfimage import program_headers
from .target import TargetMemoryError
from . import synth

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

    def __init__(self, section, origin, error=None, synthesized=None):
        self.section = section
        self.origin = origin  # "file", "memory", "synth" or "none"
        self.error = error
        #: the synth.SynthResult when origin is "synth"
        self.synthesized = synthesized

    def describe(self):
        if self.section is None:
            return f"none ({self.error})" if self.error else "none"
        if self.origin == "synth":
            stats = self.synthesized.stats
            left_out = stats.rows["left out"]
            return (f"synthesized from {'+'.join(stats.sources)}, "
                    f"{len(self.section.functions)} FDEs"
                    + (f", {left_out} rows left out" if left_out else ""))
        return (f"SFrame v{self.section.version}, "
                f"{len(self.section.functions)} FDEs, from {self.origin}")


_SYNTHESIS = {"enabled": True}
_SYNTHESIZED = {}  # cache key -> SFrameSource


def set_synthesis(enabled):
    """Whether modules without SFrame data get rows synthesized from their
    DWARF call-frame information (on by default)."""
    _SYNTHESIS["enabled"] = bool(enabled)


def synthesis_enabled():
    return _SYNTHESIS["enabled"]


def load_module_sframe(module, target=None):
    """The module's own SFrame data, else (when synthesis is on) SFrame rows
    synthesized from its .eh_frame / .debug_frame."""
    source = load_own_sframe(module, target)
    if source.section is None and _SYNTHESIS["enabled"]:
        synthesized = load_synthesized_sframe(module)
        if synthesized.section is not None:
            return synthesized
    return source


def load_synthesized_sframe(module, target=None):
    """SFrame rows synthesized from the module's file (see sfbt.synth),
    cached per build id in memory and on disk."""
    key = _cache_key(module)
    if key in _SYNTHESIZED:
        return _SYNTHESIZED[key]
    if not os.path.exists(module.path):
        source = SFrameSource(None, "none")
    else:
        try:
            result = synth.synthesize(module.path, build_id=module.build_id)
            source = SFrameSource(result.section, "synth", synthesized=result)
        except (synth.SynthError, SFrameError, OSError) as error:
            source = SFrameSource(None, "none", f"{module.path}: {error}")
        except Exception as error:  # a synthesizer bug must not end the walk
            source = SFrameSource(None, "none", f"{module.path}: synthesis failed: "
                                  f"{type(error).__name__}: {error}")
    _SYNTHESIZED[key] = source
    return source


def load_own_sframe(module, target=None):
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
        segments = program_headers(target, module.start) or ()
        for segment in segments:
            if segment.type == PT_GNU_SFRAME:
                data = target.read_memory(module.load_bias + segment.vaddr,
                                          segment.filesz)
                return SFrameSource(read_section(data, segment.vaddr), "memory")
    except TargetMemoryError:
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
        # Own SFrame data only (no synthesis): for GDB's frame unwinder.
        self._own_loader = load_own_sframe if loader is load_module_sframe else None
        # Sources looked up before: a walk asks for the same modules' data
        # at every frame.
        self._sources = {}

    def module_for(self, pc):
        i = bisect_right(self._starts, pc) - 1
        if i >= 0 and pc < self.modules[i].end:
            return self.modules[i]
        return None

    def source_for(self, module, synthesized=True):
        """The module's SFrameSource; with ``synthesized=False`` its own
        SFrame data only, never rows synthesized from DWARF CFI."""
        key = (module, synthesized, _SYNTHESIS["enabled"])
        source = self._sources.get(key)
        if source is None:
            source = self._sources[key] = self._load_source(module, synthesized)
        return source

    def _load_source(self, module, synthesized):
        if not synthesized:
            if self._own_loader is not None:
                return self._own_loader(module, self._target)
            source = self._loader(module, self._target)
            return SFrameSource(None, "none") if source.origin == "synth" else source
        return self._loader(module, self._target)

    def is_synthesized(self, module):
        """Whether the module's rows come from synthesized SFrame data."""
        return module is not None and self.source_for(module).origin == "synth"

    def row_for(self, pc, synthesized=True):
        """(module, FrameRow or None) for a run-time address."""
        module = self.module_for(pc)
        if module is None:
            return None, None
        section = self.source_for(module, synthesized).section
        if section is None:
            return module, None
        return module, section.find_row(pc - module.load_bias)
