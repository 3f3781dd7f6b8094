"""Which loaded object covers an address, and its SFrame data.

A module's SFrame data is decided per PC: its own ``.sframe`` (from its
file, else from the target's memory through PT_GNU_SFRAME) where a row of
it covers the PC, else rows synthesized from its DWARF call-frame
information one function at a time, as walks reach them
(sfbt.dwarf.ondemand): a program only partly built with SFrame (an object
assembled without it, a static libc) has CFI for the rest.  ``SFrameSources`` loads
each once per file (device, inode, size and change time: never per build id
alone, which a copy with other contents may carry) or per image a module
carries, and keeps it: a debugger adapter holds one for its whole session,
so a new stop or a new thread costs a dictionary look-up.
"""

from __future__ import annotations

import io
import os
from bisect import bisect_right

from .. import progress
from ..cache import sha256_hex
from ..dwarf.fdes import CfiUnavailable
from ..dwarf.ondemand import function_rows_section
from ..elf import PT_GNU_SFRAME, ElfError, ElfImage, memory_image, open_elf
from ..errors import SfbtError, TargetMemoryError
from ..sframe import SFrameError, open_section
from ..sframe.in_elf import find_sframe
from .target import Module, Target
from .walk import FLEX, SFRAME, SYNTH

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

    from ..dwarf.cfa import Rule
    from ..dwarf.ondemand import FunctionRows
    from ..sframe.model import SFrameSection
    from ..sframe.rules import FrameRow
    from .plan import RowPlan

    #: {DWARF register: its rule, None where unchanged}
    RegisterRules = Dict[int, Optional[Rule]]
    #: where a module's data is read from (_cache_key)
    SourceKey = Tuple[Any, ...]
    #: (module, its row for a PC): either None where unknown
    Found = Tuple[Optional[Module], Optional[FrameRow]]
    #: Found, and how the row was made (SFRAME, FLEX, SYNTH; None without one)
    Step = Tuple[Optional[Module], Optional[FrameRow], Optional[str]]
    #: Found, and the SFrameSource the row came from (None without a module)
    Sourced = Tuple[Optional[Module], Optional[FrameRow], Optional["SFrameSource"]]


class SFrameSource:
    """Where a module's SFrame data came from, for `info sframe`."""

    def __init__(self, section: Optional["SFrameSection"], origin: str,
                 error: Optional[str] = None, rows: Optional["FunctionRows"] = None,
                 made_from: Optional[SourceKey] = None,
                 cfi: Optional[Callable[[], "SFrameSource"]] = None):
        self.section = section
        self.origin = origin  # "file", "memory", "synth" or "none"
        #: ("file", device, inode, size, change time) of the file it was
        #: read from, when it was read from one
        self.made_from = made_from
        self.error = error
        #: the dwarf.ondemand.FunctionRows the section's rows are made by,
        #: when origin is "synth"
        self.rows = rows
        #: the module's rows synthesized from its CFI, for the PCs its own
        #: section has no row for (loaded on the first such PC)
        self._cfi = cfi
        self._cfi_source: Optional[SFrameSource] = None

    def find_row(self, pc: int) -> Tuple[Optional[FrameRow], SFrameSource]:
        """(the FrameRow in force at ``pc``, the module's own address, or
        None; the SFrameSource it came from): this source's row where one
        covers the PC, else the row its CFI gives."""
        row = self.section.find_row(pc) if self.section is not None else None
        if row is None and self._cfi is not None:
            if self._cfi_source is None:
                self._cfi_source = self._cfi()
            cfi = self._cfi_source
            if cfi.section is not None:
                return cfi.section.find_row(pc), cfi
        return row, self

    def register_rules(self, pc: int, registers: List[int]) -> Optional[RegisterRules]:
        """{register: dwarf Rule or None (unchanged)} of the DWARF CFI at
        ``pc`` (the module's own addresses), or None where there is none."""
        if self.rows is None:
            return None
        return self.rows.register_rules(pc, registers)

    def describe(self) -> str:
        if self.section is None:
            return f"none ({self.error})" if self.error else "none"
        if self.origin == "synth" and self.rows is not None:
            return (f"synthesized from {'+'.join(self.rows.index.sources)}, "
                    f"{self.rows.num_fdes} FDEs")
        return (f"SFrame v{self.section.version}, "
                f"{self.section.num_functions} FDEs, from {self.origin}")


NONE = SFrameSource(None, "none")

#: files whose frame-step plans SFrameSources keeps at most
MAX_PLANNED_FILES = 512


class FilePlans:
    """What the frame step (unwind.walk) found at addresses of one file,
    each relative to where the file is loaded (its load bias): kept for
    every process and stop that maps the file (SFrameSources.step_plans),
    at most walk.MAX_FILE_STEP_PLANS addresses each (the walk adds no
    more)."""

    __slots__ = ("steps", "return_trampolines", "stopped_trampolines")

    def __init__(self) -> None:
        #: {lookup address: the step's plan there but the module
        #: (Unwinder._step_plan)}
        self.steps: Dict[int, tuple] = {}
        #: {address: whether it is in the signal trampoline}, as a return
        #: address and where execution stopped (Unwinder.is_signal_trampoline)
        self.return_trampolines: Dict[int, bool] = {}
        self.stopped_trampolines: Dict[int, bool] = {}


def _cache_key(module: Module) -> SourceKey:
    """What the module's data is read from: the image it carries, else its
    file as it is now."""
    if module.image is not None:
        return ("image", sha256_hex(module.image))
    try:
        return _file_key(os.stat(module.path))
    except OSError:
        return ("path", module.path, module.image_base)


def _file_key(status: os.stat_result) -> SourceKey:
    return ("file", status.st_dev, status.st_ino, status.st_size, status.st_ctime_ns)


def _kept(sources: Dict[SourceKey, SFrameSource], key: SourceKey,
          source: SFrameSource) -> SFrameSource:
    """Keep source under key unless it was read from another file than
    the one key names (the path was changed in between)."""
    if source.made_from is None or source.made_from[1:] == key[1:]:
        sources[key] = source
    return source


class SFrameSources:
    """Each module's SFrame data, loaded on first use and kept.

    ``synthesize``: whether modules without SFrame data get rows
    synthesized from their DWARF CFI (`set sframe synthesize`), per
    function as walks reach them (sfbt.dwarf.ondemand).
    """

    def __init__(self, synthesize: bool = True):
        self.synthesize = synthesize
        self._own: Dict[SourceKey, SFrameSource] = {}
        self._synthesized: Dict[SourceKey, SFrameSource] = {}
        #: (what a module's data was read from, architecture, synthesize)
        #: -> what the frame step found in that file
        self._step_plans: Dict[Tuple[SourceKey, str, bool], FilePlans] = {}

    def clear(self) -> None:
        self._own.clear()
        self._synthesized.clear()
        self._step_plans.clear()

    def step_plans(self, module: Module, source: SFrameSource,
                   arch_name: str) -> Optional[FilePlans]:
        """What the frame step found at addresses of ``module``'s file
        (FilePlans), shared by every ModuleMap over these sources that
        maps the same file, as its rows are (each process `sfbt record -a`
        meets maps libc), under what ``source`` (the module's data) was
        read from: None where that is neither a file nor an image the
        module carries.  At most MAX_PLANNED_FILES files are kept (the
        first planned dropped first)."""
        made_from = source.made_from
        if made_from is None:
            if module.image is None:
                return None
            made_from = _cache_key(module)
        key = (made_from, arch_name, self.synthesize)
        plans = self._step_plans.get(key)
        if plans is None:
            if len(self._step_plans) >= MAX_PLANNED_FILES:
                del self._step_plans[next(iter(self._step_plans))]
            plans = self._step_plans[key] = FilePlans()
        return plans

    def for_module(self, module: Module, target: Optional[Target] = None) -> SFrameSource:
        """The module's own SFrame data, else (when synthesis is on) rows
        synthesized from its .eh_frame / .debug_frame: for the whole module
        when it has no .sframe, else (SFrameSource.find_row) for each PC
        its .sframe has no row for."""
        source = self.own(module, target)
        if not self.synthesize:
            return source
        if source.section is None:
            synthesized = self.synthesized(module, target)
            return synthesized if synthesized.section is not None else source
        return SFrameSource(source.section, source.origin, source.error,
                            made_from=source.made_from,
                            cfi=lambda: self.synthesized(module, target))

    def gaps_filled(self, module: Module) -> Optional[SFrameSource]:
        """The rows synthesized from the CFI of a module, where a walk
        has needed them (a PC its own .sframe has no row for:
        SFrameSource.find_row), for `info sframe`; None where none has."""
        if not self.synthesize:
            return None
        found = self._synthesized.get(_cache_key(module))
        return found if found is not None and found.section is not None else None

    def own(self, module: Module, target: Optional[Target] = None) -> SFrameSource:
        """The module's SFrame data: from its file on disk, else (the file is
        gone, as for a core whose files moved) from the target's memory."""
        key = _cache_key(module)
        source = self._own.get(key)
        if source is None:
            source = _kept(self._own, key, self._load_own(module, target))
        return source

    def synthesized(self, module: Module,
                    target: Optional[Target] = None) -> SFrameSource:
        key = _cache_key(module)
        source = self._synthesized.get(key)
        if source is None:
            source = _kept(self._synthesized, key, self._synthesize(module, target))
        return source

    def _load_own(self, module: Module, target: Optional[Target]) -> SFrameSource:
        progress.doing(f"reading the unwind data of {module.name}")
        if module.image is not None:
            return _own_of_image(module, module.image)
        source = None
        if os.path.exists(module.path):
            try:
                source = _own_of_file(module.path)
            except (SfbtError, OSError) as error:
                source = SFrameSource(None, "none", f"{module.path}: {error}")
        if (source is None or source.section is None) and target is not None:
            from_memory = _sframe_from_memory(module, target)
            if from_memory is not None:
                source = from_memory
        if source is None:
            return NONE
        if source.section is not None and source.section.is_empty:
            return SFrameSource(None, "none", "empty .sframe section")
        return source

    def _synthesize(self, module: Module, target: Optional[Target]) -> SFrameSource:
        """Rows from the module's file, else (the vDSO, a deleted library)
        from its .eh_frame in the target's memory."""
        progress.doing(f"reading the DWARF CFI of {module.name}")
        if module.image is not None:
            image = module.image
            return _guarded(module.path, lambda: _rows_of_image(_image_of(image, module.path)))
        if not os.path.exists(module.path):
            if target is None:
                return NONE
            known: Target = target  # (a lambda sees target as Optional)
            return _guarded(f"{module.path} (memory)",
                            lambda: _rows_of_memory(module, known))
        return _guarded(module.path, lambda: cfi_rows_of_file(module.path))


def _own_of_file(path: str) -> SFrameSource:
    """The .sframe of the ELF file at path, read through one descriptor.
    Raises SfbtError or OSError."""
    stream, image = open_elf(path)
    with stream:
        made_from = _file_key(os.fstat(stream.fileno()))
        found = find_sframe(image)
    section = open_section(*found) if found is not None else None
    return SFrameSource(section, "file", made_from=made_from)


def _image_of(image: bytes, path: str) -> ElfImage:
    return ElfImage.from_file(io.BytesIO(image), path)


def _own_of_image(module: Module, image: bytes) -> SFrameSource:
    """The .sframe of the image a module carries."""
    try:
        found = find_sframe(_image_of(image, module.path))
        if found is None:
            return NONE
        data, address, name = found
        section = open_section(data, address, name)
    except SfbtError as error:
        return SFrameSource(None, "none", f"{module.path}: {error}")
    if section.is_empty:
        return SFrameSource(None, "none", "empty .sframe section")
    return SFrameSource(section, "memory")


def _guarded(where: str, make: Callable[[], SFrameSource]) -> SFrameSource:
    """make()'s SFrameSource of synthesized rows, or one saying why there
    are none."""
    try:
        return make()
    except (SfbtError, OSError) as error:  # unreadable file or memory, no CFI
        return SFrameSource(None, "none", f"{where}: {error}")
    except Exception as error:  # a synthesizer bug must not end the walk
        return SFrameSource(None, "none", f"{where}: synthesis failed: "
                            f"{type(error).__name__}: {error}")


def _rows_of_image(image: ElfImage, made_from: Optional[SourceKey] = None) -> SFrameSource:
    section, rows = function_rows_section(image)
    return SFrameSource(section, "synth", rows=rows, made_from=made_from)


def cfi_rows_of_file(path: str) -> SFrameSource:
    """Rows made per function from the ELF file at path (its CFI is read
    through one descriptor, now)."""
    stream, image = open_elf(path)
    with stream:
        return _rows_of_image(image, _file_key(os.fstat(stream.fileno())))


def _rows_of_memory(module: Module, target: Target) -> SFrameSource:
    """Rows made per function from the .eh_frame of the module's image in
    memory."""
    image = memory_image(target, module.image_base, module.path)
    if image is None:
        raise CfiUnavailable(f"no ELF header at {module.image_base:#x}")
    return _rows_of_image(image)


def _sframe_from_memory(module: Module, target: Target) -> Optional[SFrameSource]:
    """Read PT_GNU_SFRAME through the ELF header mapped at module.start."""
    try:
        image = memory_image(target, module.start, module.path)
        if image is None:
            return None
        for segment in image.segments():
            if segment.type == PT_GNU_SFRAME:
                data = image.segment_data(segment, module.load_bias)
                return SFrameSource(open_section(data, segment.vaddr), "memory")
    except TargetMemoryError:
        return None
    except (SFrameError, ElfError) as error:
        return SFrameSource(None, "none", f"{module.path} (memory): {error}")
    return None


if TYPE_CHECKING:
    class ModuleSources(Protocol):
        """What a ModuleMap asks of its sources (SFrameSources, or a test's)."""

        def for_module(self, module: Module, target: Optional[Target] = None) -> SFrameSource:
            ...

        def own(self, module: Module, target: Optional[Target] = None) -> SFrameSource:
            ...


class ModuleMap:
    """Modules sorted by address, with their SFrame data loaded on demand
    from ``sources``."""

    def __init__(self, modules: List[Module], target: Optional[Target] = None,
                 sources: Optional[ModuleSources] = None):
        self.modules = sorted(modules, key=lambda m: m.start)
        self._starts = [m.start for m in self.modules]
        self._target = target
        self.sources: ModuleSources = sources if sources is not None else SFrameSources()
        # Sources looked up before: a walk asks for the same modules' data
        # at every frame.
        self._cached: Dict[Tuple[Module, bool, bool], SFrameSource] = {}
        # (module, row) and DWARF register rules per PC: a deep stack
        # repeats the same few PCs.  The map lives as long as the set of
        # loaded objects, and so do they.
        self._rows: Dict[Tuple[int, bool], Sourced] = {}
        self._steps: Dict[bool, Dict[int, Step]] = {}
        self._rules: Dict[Tuple[Module, int], Optional[RegisterRules]] = {}
        self._plans: Dict[str, Dict[int, "RowPlan"]] = {}
        self._step_plans: Dict[Tuple[str, bool], Dict[int, tuple]] = {}
        self._file_plans: Dict[Tuple[int, str], Tuple[Module, Optional[FilePlans]]] = {}
        self._rule_registers: Optional[List[int]] = None
        #: {return address in a module: whether it is the first byte of
        #: the signal trampoline}, and {pc in a module where execution
        #: stopped: whether it is in the trampoline}, for every walk (a
        #: module's code does not change while the map lives)
        self.return_trampolines: Dict[int, bool] = {}
        self.stopped_trampolines: Dict[int, bool] = {}

    def module_for(self, pc: int) -> Optional[Module]:
        i = bisect_right(self._starts, pc) - 1
        if i >= 0 and pc < self.modules[i].end:
            return self.modules[i]
        return None

    def source_for(self, module: Module, synthesized: bool = True) -> SFrameSource:
        """The module's SFrameSource; with ``synthesized=False`` its own
        SFrame data only, never rows synthesized from DWARF CFI."""
        key = (module, synthesized, getattr(self.sources, "synthesize", True))
        source = self._cached.get(key)
        if source is None:
            if synthesized:
                source = self.sources.for_module(module, self._target)
            else:
                source = self.sources.own(module, self._target)
            self._cached[key] = source
        return source

    def row_for(self, pc: int, synthesized: bool = True) -> Found:
        """(module, FrameRow or None) for a run-time address."""
        module, row, _ = self.row_source(pc, synthesized)
        return module, row

    def row_source(self, pc: int, synthesized: bool = True) -> Sourced:
        """(module, FrameRow or None, the SFrameSource the row came from)
        for a run-time address: the module's own row where one covers it,
        else (unless ``synthesized`` is False) its CFI's."""
        key = (pc, synthesized and getattr(self.sources, "synthesize", True))
        found = self._rows.get(key)
        if found is None:
            module = self.module_for(pc)
            row = source = None
            if module is not None:
                row, source = self.source_for(module, synthesized).find_row(
                    pc - module.load_bias)
            found = self._rows[key] = (module, row, source)
        return found

    def steps(self) -> Dict[int, Step]:
        """{pc: what step_for(pc) gave}, as synthesis is now on or off: a
        walk looks there first."""
        return self._steps.setdefault(getattr(self.sources, "synthesize", True), {})

    def plans(self, arch_name: str) -> Dict[int, "RowPlan"]:
        """{id(row): the step's RowPlan for that row on the architecture}:
        kept as long as the rows, each plan holding the row it was made
        from (the step checks it is that row)."""
        return self._plans.setdefault(arch_name, {})

    def step_plans(self, arch_name: str) -> Dict[int, tuple]:
        """{lookup address: (module, RowPlan or None, how, the registers
        DWARF CFI leaves unchanged, those it gives otherwise, how the words
        at CFA + k are read at once)}, the
        walk's memo of all a step needs at an
        address (unwind.walk), as synthesis is now on or off."""
        key = (arch_name, getattr(self.sources, "synthesize", True))
        return self._step_plans.setdefault(key, {})

    def file_plans(self, module: Module, arch_name: str) -> Optional[FilePlans]:
        """What the frame step found in ``module``'s file, shared with the
        other maps over the same sources (SFrameSources.step_plans), or
        None (not shared: the step keeps its plans in step_plans alone)."""
        key = (module.start, arch_name)  # an int's hash, not a Module's
        kept = self._file_plans.get(key)
        if kept is None or kept[0] is not module:
            shared = getattr(self.sources, "step_plans", None)
            kept = self._file_plans[key] = (module, (
                None if shared is None or self._target is None
                else shared(module, self.source_for(module), arch_name)))
        return kept[1]

    def step_for(self, pc: int) -> Step:
        """(module, FrameRow or None, how: SFRAME, FLEX or SYNTH) for
        a run-time address, kept per address."""
        steps = self.steps()
        found = steps.get(pc)
        if found is None:
            module, row, source = self.row_source(pc)
            how = None
            if row is not None and source is not None:
                how = (SYNTH if source.origin == "synth"
                       else FLEX if row.function.is_flex else SFRAME)
            found = steps[pc] = (module, row, how)
        return found

    def register_rules(self, module: Module, pc: int) -> Optional[RegisterRules]:
        """{DWARF register: dwarf Rule or None (unchanged)} where the DWARF
        CFI that ``module``'s synthesized rows came from says how ``pc``'s
        caller gets its registers back (the stack, frame, return-address
        and PC registers left out: the rows give them); None if unknown."""
        key = (module, pc)
        if key in self._rules:
            return self._rules[key]
        arch = self._target.arch if self._target is not None else None
        rules = None
        _, _, source = self.row_source(pc)
        if arch is not None and source is not None and source.origin == "synth":
            if self._rule_registers is None:
                self._rule_registers = [n for n in arch.register_names
                                        if n not in (arch.sp, arch.fp, arch.ra, arch.pc)]
            rules = source.register_rules(pc - module.load_bias, self._rule_registers)
        self._rules[key] = rules
        return rules
