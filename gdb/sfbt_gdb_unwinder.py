"""The SFrame frame unwinder: GDB's own bt, up, finish and info frame get
frames from an object's own .sframe rows.

`set sframe unwinder auto` (the default) claims a frame only where GDB has
no DWARF call-frame information for its PC, an object whose .eh_frame
was stripped for instance: everywhere else GDB's DWARF unwinder runs, with
its tail-call frames and every callee-saved register.  `on` claims every
frame with a row; `off` none.  Where the unwinder does not claim a frame,
or anything goes wrong in one, it returns None and GDB's other unwinders
run: it never raises into GDB.

Each frame is unwound by the core's frame step (sfbt.unwind.walk,
Unwinder.caller_registers: Unwinder.step before its Frame), the one the
walk of `sframe-bt` takes: the row in force at
the frame's PC, or at PC - 1 where the frame made a call.  A frame made no
call where every frame below it is an inline frame (execution stopped in
it, and GDB shows the functions inlined there above it) or where the real
frame below it is the signal trampoline; GDB's `level` of a pending frame
counts inline frames, so it alone cannot say.  The inline frames GDB may
show come from its block information at the PC, and the frame below from
the order in which GDB asks about frames; both only where the rows at PC
and PC - 1 differ.

Per frame the work is small: the rows for an address are looked up once
while the modules stay the same (dropped when the objfiles, the module
map, the mode or the inferior change); stack memory is read a page at a time and kept while GDB
walks up one stack (from the frame this unwinder unwound the last frame
to; GDB may run the program without an event in between); the registers
this unwinder gave a caller are that caller's when GDB unwinds it, and
others are read from GDB only when the row needs them.

Chosen once, at load, by what this GDB offers (13.1 is the floor):
PendingFrame.pc() (GDB 14; on 13 a register read), Value.bytes for a
register's bits (GDB 14; on 13 int()), Progspace.objfile_for_address (on
13, the objfile named like the module).
"""

import gdb
import gdb.unwinder

from sfbt.dwarf.coverage import CfiCoverage
from sfbt.dwarf.encoding import CFIError
from sfbt.elf import ElfError
from sfbt.errors import SfbtError
from sfbt.unwind.walk import FLEX, SFRAME, UnwindStop, Unwinder, registers_read

from sfbt_gdb_session import (GdbTarget, arch_named, block_functions, register_bits, state,
                              virtual_address_bits)

_MASK64 = 0xFFFFFFFFFFFFFFFF


# -- what this GDB offers, chosen once ------------------------------------------

class _FrameId:
    """The frame id create_unwind_info reads: an object whose sp and pc
    are gdb.Values (GDB 14's gdb.unwinder.FrameId is one).  GDB copies
    them there and keeps nothing, so one is reused for every frame."""

    __slots__ = ("sp", "pc")
    #: asked for by GDB: an attribute it does not find costs it an
    #: AttributeError, message and all, per frame
    special = None


#: PendingFrame.pc() (GDB 14); on 13 the PC register is read
_PENDING_PC = hasattr(gdb.PendingFrame, "pc")
#: Value.bytes (GDB 14): a register's bits read from them, not by int()
#: (which costs GDB 18 five times as much)
_VALUE_BYTES = hasattr(gdb.Value, "bytes")

if hasattr(gdb.Progspace, "objfile_for_address"):
    def _objfile_at(address, module):
        objfile = gdb.current_progspace().objfile_for_address(address)
        return None if objfile is None else (objfile.owner or objfile)
else:
    def _objfile_at(address, module):
        return next((o for o in gdb.objfiles()
                     if o.is_valid() and o.owner is None and o.filename == module.path),
                    None)


# -- CFI coverage ---------------------------------------------------------------

class _Unknown:
    """An object whose CFI cannot be read here: GDB may have some."""

    @staticmethod
    def covers(address):
        return True


def cfi_coverage(module, address):
    """What GDB's DWARF unwinder covers in ``module``: the CFI of its
    objfile and of that objfile's separate debug files (.debug_frame)."""
    objfile = _objfile_at(address, module)
    if objfile is None:
        paths = [module.path]
    else:
        paths = [objfile.filename] + [o.filename for o in gdb.objfiles()
                                      if o.is_valid() and o.owner == objfile]
    coverages = []
    for path in paths:
        try:
            coverages.append(CfiCoverage.of_file(path))
        except (OSError, ElfError):
            return _Unknown
    return _AnyOf([c for c in coverages if c.has_cfi])


class _AnyOf:
    def __init__(self, coverages):
        self._coverages = coverages

    def covers(self, address):
        return any(c.covers(address) for c in self._coverages)


# -- the unwinder ---------------------------------------------------------------

class _Registers:
    """One architecture's register descriptors, by DWARF number."""

    def __init__(self, gdb_arch, arch):
        self.arch = arch
        self._descriptors = gdb_arch.registers()
        self._by_number = {}
        self.pc = self.descriptor(arch.pc)
        self.sp = self.descriptor(arch.sp)
        self.fp = self.descriptor(arch.fp)
        self.ra = self.descriptor(arch.ra) if arch.has_link_register else None
        self.order = "big" if arch.big_endian else "little"
        #: DWARF number -> how its gdb.Value becomes an int
        self._converters = {}

    def bits(self, number, value):
        """Register ``number``'s ``value`` (a gdb.Value) as an unsigned
        64-bit int, its raw bits where GDB gives it as a float (s390x
        keeps an FP or RA in floating-point registers): the way chosen once
        per register."""
        convert = self._converters.get(number)
        if convert is None:
            convert = self._converters[number] = self._converter(value)
        return convert(value)

    def _converter(self, value):
        type_ = value.type.strip_typedefs()
        if _VALUE_BYTES and type_.sizeof == 8:
            order = self.order
            return lambda value: int.from_bytes(value.bytes, order)
        if type_.code == gdb.TYPE_CODE_FLT:
            return register_bits
        return lambda value: int(value) & _MASK64

    def descriptor(self, number):
        descriptor = self._by_number.get(number)
        if descriptor is None:
            descriptor = self._descriptors.find(self.arch.register_names[number])
            if descriptor is None:
                raise LookupError(f"GDB has no register {self.arch.register_names[number]}")
            self._by_number[number] = descriptor
        return descriptor


class _PendingTarget(GdbTarget):
    """The inferior's memory as a frame unwinder may read it: the address
    size for signed return addresses read from the first pending frame of
    the walk, while it is valid (an unwinder may not ask GDB for frames),
    where return addresses may be signed."""

    def __init__(self, arch, module_map, pending):
        super().__init__(arch, module_map)
        if arch.pointer_authentication:
            self._va_bits = virtual_address_bits(arch, pending)

    @property
    def virtual_address_bits(self):
        return self._va_bits


def _inline_depth(pc):
    """How many inline frames GDB may show above the real frame stopped
    at ``pc``: the inlined-function blocks around it in GDB's debug
    information (GDB hides some where pc starts them, at a breakpoint,
    never more)."""
    functions = block_functions(pc)
    return max(len(functions) - 1, 0) if functions else 0


def _same_row(one, other):
    """Whether two (module, row or None, how) give the same step."""
    if one[1] is None or other[1] is None:
        return one[1] is other[1]
    return (one[0] == other[0] and one[1].function.start == other[1].function.start
            and one[1].entry == other[1].entry)


class SFrameFrameUnwinder(gdb.unwinder.Unwinder):
    """Frames from SFrame rows where the mode says so; None elsewhere."""

    def __init__(self):
        super().__init__("sframe")
        self.mode = "auto"
        self._architectures = {}  # gdb.Architecture -> _Registers or None
        self._frame_id = _FrameId()
        #: (level, pc) of the last frame GDB asked about: kept across
        #: forget_stop, which GDB's events may call between two frames of
        #: one walk up the stack.  GDB asks about a stack's frames innermost
        #: first, and its innermost frame made no call, whatever this says.
        self._younger = None
        #: the inferior and module map the rows were found in
        self._inferior = None
        self._rows_map = None
        self.forget_objfiles()

    # -- caches -------------------------------------------------------------
    # Two owners: the stop (the walk's stack pages, what the last frames
    # unwound were) and the modules (rows, plans and inline depths per
    # address: true while the objfiles, the module map, the mode and the
    # inferior stay the same).
    def forget_stop(self, *_):
        """Drop what holds for one stop: the walk's stack pages, what the
        last frames unwound were."""
        self._walker = None  # the core's Unwinder for this walk up the stack
        #: (level + 1, PC, SP, registers) of the caller of the last frame
        #: unwound: the registers known in that caller when GDB asks about it
        self._caller = None
        #: (FP, it as a gdb.Value): the frame pointer is often the same
        #: from frame to frame (a row without FP rule keeps it)
        self._fp_value = None
        #: return address -> it as a gdb.Value: a recursion returns to the
        #: same few addresses again and again
        self._ra_values = {}

    def forget_rows(self):
        """Drop what holds for an address while the modules stay the same:
        its rows and plans, whether PC and PC - 1 share a row, GDB's
        inline depth there."""
        self._rows_at = {}  # lookup address -> (module, row or None, how)
        #: the step's rows: every address it asks for was looked up first
        self._row_at = self._rows_at.__getitem__
        self._plans = {}  # lookup address -> _plan(address)
        #: pc -> the plan at pc - 1 for a frame above #0 where pc and
        #: pc - 1 have the same row (the frame made a call, whatever GDB shows)
        self._caller_plans = {}
        self._same_rows = {}  # pc -> whether pc and pc - 1 have the same row
        self._depths = {}  # pc -> _inline_depth(pc)

    def forget_objfiles(self, *_):
        """Drop what holds while the objfiles stay the same."""
        self._coverage = {}  # Module -> what its CFI covers
        #: Module -> whether it has SFrame rows for code GDB has no CFI for
        self._needs_rows = {}
        #: auto: True while no loaded object has code only SFrame rows
        #: describe, so every frame is GDB's (None: not known yet)
        self._idle = None
        self.forget_rows()
        self.forget_stop()

    def set_mode(self, mode):
        self.mode = mode
        self.enabled = mode != "off"
        self._idle = None
        self.forget_rows()
        self.forget_stop()

    # -- GDB's entry point --------------------------------------------------
    def __call__(self, pending_frame):
        if self._idle:
            return None
        try:
            return self._unwind(pending_frame)
        except Exception as error:  # never let an error reach GDB
            state.record_error("unwinder", error)
            return None

    def _unwind(self, pending):
        if self._idle is None:
            self._idle = self.mode == "auto" and not self._any_module_needs_rows()
            if self._idle:
                return None
        inferior = gdb.selected_inferior()
        if inferior is not self._inferior:
            self.forget_rows()
            self.forget_stop()
            self._inferior = inferior
        gdb_arch = pending.architecture()
        registers = self._architectures.get(gdb_arch, False)
        if registers is False:
            registers = self._architectures[gdb_arch] = self._registers(gdb_arch)
        if registers is None:
            return None
        arch = registers.arch
        # PC and SP: 64-bit integer registers on every architecture sfbt knows
        pc = (pending.pc() if _PENDING_PC
              else int(pending.read_register(registers.pc)) & _MASK64)
        level = pending.level()
        younger, self._younger = self._younger, (level, pc)
        try:
            value = pending.read_register(registers.sp)
            sp = (int.from_bytes(value.bytes, registers.order) if _VALUE_BYTES
                  else int(value) & _MASK64)
        except gdb.error:
            sp = None  # unavailable: the step says whether it needed it
        caller = self._caller
        walker = self._walker
        if caller is not None and caller[0] <= level and caller[1] == pc and caller[2] == sp:
            # the frame this unwinder unwound the last frame to: the same
            # walk up the same stack, whose registers it gave
            known = caller[3]
            from_caller = True
        else:
            # Another walk: GDB may have run the program since the last
            # (a `stepi N` stops N times, with no event for the first N-1),
            # so no stack page read before is kept.
            walker = None
            known = {arch.sp: sp}
            from_caller = False
        # known: the registers read so far, None where unavailable
        if walker is None or walker.arch is not arch:
            module_map = state.module_map()
            if module_map is not self._rows_map:  # rebuilt: the modules changed
                self.forget_rows()
                self._rows_map = module_map
            walker = self._walker = Unwinder(
                _PendingTarget(arch, module_map, pending), module_map)
        plan = self._caller_plans.get(pc) if level else None
        if plan is not None:
            is_caller = True
        else:
            is_caller = level > 0 and self._is_caller(pc, level, younger, walker)
            address = pc - 1 if is_caller and pc else pc  # lookup_pc
            plan = self._plans.get(address)
            if plan is None:
                plan = self._plans[address] = self._plan(address, registers)
            if not plan:
                return None
            if is_caller and self._same_rows[pc]:
                self._caller_plans[pc] = plan
        for number, descriptor in plan[2] if from_caller else plan[1]:
            if number not in known:
                try:
                    known[number] = registers.bits(number, pending.read_register(descriptor))
                except gdb.error:
                    known[number] = None
        try:
            found = walker.caller_registers(pc, is_caller, known, level, self._row_at)
        except UnwindStop:
            return None  # the row ends the stack, or it would not move up: GDB decides
        if found is None:
            return None
        # GDB's unwind info for this frame, from the caller the step found
        values, cfa, _, _ = found
        sp = values[arch.sp]
        fp = values.get(arch.fp)
        ra = values[arch.pc]
        frame_id = self._frame_id
        frame_id.sp = cfa_value = gdb.Value(cfa)
        frame_id.pc = plan[0]
        info = pending.create_unwind_info(frame_id)
        ra_value = self._ra_values.get(ra)
        if ra_value is None:
            ra_value = self._ra_values[ra] = gdb.Value(ra)
        info.add_saved_register(registers.pc, ra_value)
        info.add_saved_register(registers.sp, cfa_value if sp == cfa else gdb.Value(sp))
        if fp is not None:
            last = self._fp_value
            if last is None or last[0] != fp:
                last = self._fp_value = (fp, gdb.Value(fp))
            info.add_saved_register(registers.fp, last[1])
        if registers.ra is not None:
            # After the return, x30 (AArch64) or r14 (s390x) holds the
            # return address; GDB reads it to unwind the caller's caller.
            info.add_saved_register(registers.ra, ra_value)
        self._caller = (level + 1, ra, sp, values)
        return info

    @staticmethod
    def _registers(gdb_arch):
        arch = arch_named(gdb_arch.name())
        return None if arch is None else _Registers(gdb_arch, arch)

    def _is_caller(self, pc, level, younger, walker):
        """Whether the frame at ``pc`` at ``level`` (above frame #0) made a
        call, so that its row is the one at pc - 1.  It did not where every
        frame below it is an inline frame (it is where execution stopped)
        or the real frame below it is the signal trampoline (a signal
        interrupted it there).  Asked only where the answer matters: where
        the rows at pc and pc - 1 differ."""
        same = self._same_rows.get(pc)
        if same is None:
            same = self._same_rows[pc] = _same_row(self._rows(pc), self._rows(pc - 1))
        if same:
            return True
        depth = self._depths.get(pc)
        if depth is None:
            depth = self._depths[pc] = _inline_depth(pc)
        if level <= depth:
            return False
        return not (younger is not None and younger[0] < level
                    and walker.is_signal_trampoline(younger[1]))

    def _rows(self, address):
        """(module, row or None, how) for the step at ``address``: own
        SFrame rows only (where rows would be synthesized from DWARF CFI,
        GDB's DWARF unwinder reads the same CFI and knows more); None where
        GDB should decide: no row, the outermost frame, the signal
        trampoline, or, in `auto`, code GDB has CFI for."""
        found = self._rows_at.get(address)
        if found is None:
            module, row = state.module_map().row_for(address, synthesized=False)
            if (row is None or row.outermost or row.signal
                    or self.mode == "auto" and self._has_cfi(module, address)):
                found = (module, None, None)
            else:
                found = (module, row, FLEX if row.function.is_flex else SFRAME)
            self._rows_at[address] = found
        return found

    def _plan(self, address, registers):
        """What a frame whose row is in force at ``address`` needs beyond
        the step: (the frame id's function start, a gdb.Value; the
        registers other than SP (read for every frame) the step by the row
        reads, as (DWARF number, GDB's descriptor); those of them the
        registers the step gave a caller never hold); () where GDB should
        decide (see _rows)."""
        module, row, _ = self._rows(address)
        if row is None:
            return ()
        arch = registers.arch
        start = gdb.Value(row.function.start + module.load_bias)
        reads = tuple((number, registers.descriptor(number))
                      for number in registers_read(arch, row)[1:])
        given = (arch.pc, arch.fp, arch.ra if arch.has_link_register else arch.pc)
        return start, reads, tuple(read for read in reads if read[0] not in given)

    def _has_cfi(self, module, address):
        try:
            return self._coverage_of(module).covers(address - module.load_bias)
        except CFIError:
            return True  # an FDE GDB may read differently: its call

    def _coverage_of(self, module):
        coverage = self._coverage.get(module)
        if coverage is None:
            coverage = self._coverage[module] = cfi_coverage(module, module.start)
        return coverage

    def _any_module_needs_rows(self):
        """Whether a loaded object has a function with SFrame rows whose
        start GDB has no CFI for: otherwise `auto` has nothing to do until
        the objfiles change, and costs GDB nothing per frame.  Each object
        is checked once while the objfiles stay the same."""
        module_map = state.module_map()
        for module in module_map.modules:
            needs = self._needs_rows.get(module)
            if needs is None:
                needs = self._needs_rows[module] = self._needs(module_map, module)
            if needs:
                return True
        return False

    def _needs(self, module_map, module):
        try:
            section = module_map.source_for(module, synthesized=False).section
            if section is None:
                return False
            coverage = self._coverage_of(module)
            return not all(coverage.covers(f.start) for f in section.functions)
        except SfbtError:
            return True  # bad data: the frames there decide one by one


frame_unwinder = SFrameFrameUnwinder()
