"""The SFrame frame unwinder: GDB's own bt, up, finish and info frame get
frames from an object's own .sframe rows.

`set sframe unwinder auto` (the default) claims a frame only where GDB has
no DWARF call-frame information for its PC, an object whose .eh_frame
was stripped for instance: everywhere else GDB's DWARF unwinder runs, with
its tail-call frames and every callee-saved register.  `on` claims every
frame with a row; `off` none.  Where the unwinder does not claim a frame,
or anything goes wrong in one, it returns None and GDB's other unwinders
run: it never raises into GDB.

Per frame the work is small: what to do at a PC (a "plan": the row's rules
with register descriptors, or None to defer) is worked out once per stop;
stack memory is read a page at a time; the frame pointer this unwinder
gave a caller is handed back when GDB unwinds that caller.  All of it is
dropped when the program runs or its memory, registers or objfiles change.

Chosen once, at load, by what this GDB offers (13.1 is the floor):
gdb.unwinder.FrameId (GDB 14; on 13 an object whose sp and pc are
gdb.Values), PendingFrame.pc() (GDB 14; on 13 a register read),
Progspace.objfile_for_address (on 13, the objfile named like the module).
"""

import struct

import gdb
import gdb.unwinder

from sfbt.dwarf.coverage import CfiCoverage
from sfbt.dwarf.encoding import CFIError
from sfbt.elf import ElfError
from sfbt.errors import SfbtError

from sfbt_gdb_session import arch_named, register_bits, state, virtual_address_bits

_MASK64 = 0xFFFFFFFFFFFFFFFF
_PAGE = 0x1000


# -- what this GDB offers, chosen once ------------------------------------------

if hasattr(gdb.unwinder, "FrameId"):
    FrameId = gdb.unwinder.FrameId
else:
    class FrameId:
        """GDB 13's frame id: an object whose sp and pc are gdb.Values."""

        __slots__ = ("sp", "pc")

        def __init__(self, sp, pc):
            self.sp = sp
            self.pc = pc

if hasattr(gdb.PendingFrame, "pc"):
    def _pending_pc(pending, registers):
        return pending.pc()
else:
    def _pending_pc(pending, registers):
        return int(pending.read_register(registers.pc)) & _MASK64

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
        #: a stack word at an offset of a buffer, as a 1-tuple
        self.word = struct.Struct(">Q" if arch.big_endian else "<Q").unpack_from

    def descriptor(self, number):
        descriptor = self._by_number.get(number)
        if descriptor is None:
            descriptor = self._descriptors.find(self.arch.register_names[number])
            if descriptor is None:
                raise LookupError(f"GDB has no register {self.arch.register_names[number]}")
            self._by_number[number] = descriptor
        return descriptor


class _Plan:
    """How to unwind a frame at one PC: its SFrame row's rules, ready."""

    __slots__ = ("cfa_base", "cfa_offset", "cfa", "ra_offset", "ra", "fp", "start",
                 "mangled_ra")

    def __init__(self, row, start, registers):
        cfa = row.cfa
        #: the common case, CFA = register + offset
        self.cfa_base = (registers.descriptor(cfa.register)
                         if cfa.register is not None and not cfa.deref else None)
        self.cfa_offset = cfa.offset
        #: any other CFA rule (a flexible row's)
        self.cfa = cfa if self.cfa_base is None else None
        ra = row.ra
        #: the common case, RA saved at CFA + offset
        self.ra_offset = (ra.offset if ra is not None and ra.register is None
                          and ra.deref else None)
        #: any other RA rule; None with ra_offset None: still in the RA register
        self.ra = ra if self.ra_offset is None else None
        self.fp = row.fp  # None: the caller's FP is this frame's
        self.start = gdb.Value(start)
        self.mangled_ra = row.mangled_ra


class SFrameFrameUnwinder(gdb.unwinder.Unwinder):
    """Frames from SFrame rows where the mode says so; None elsewhere."""

    def __init__(self):
        super().__init__("sframe")
        self.mode = "auto"
        self._architectures = {}  # gdb.Architecture -> _Registers or None
        self._word = None  # the current architecture's _Registers.word
        self.forget_objfiles()

    # -- caches -------------------------------------------------------------
    def forget_stop(self, *_):
        """Drop what holds for one stop: plans, stack pages, the last
        caller's registers."""
        self._plans = {}
        self._pages = {}
        self._inferior = None
        self._caller = None
        self._va_bits = None

    def forget_objfiles(self, *_):
        """Drop what holds while the objfiles stay the same."""
        self._coverage = {}  # Module -> what its CFI covers
        #: Module -> whether it has SFrame rows for code GDB has no CFI for
        self._needs_rows = {}
        #: auto: True while no loaded object has code only SFrame rows
        #: describe, so every frame is GDB's (None: not known yet)
        self._idle = None
        self.forget_stop()

    def set_mode(self, mode):
        self.mode = mode
        self.enabled = mode != "off"
        self._idle = None
        self.forget_stop()

    # -- memory -------------------------------------------------------------
    def _read_word(self, address):
        page = address & ~(_PAGE - 1)
        data = self._pages.get(page)
        if data is None:
            try:
                data = self._inferior.read_memory(page, _PAGE).tobytes()
            except gdb.MemoryError:
                data = b""  # part of the page is not readable: word by word
            self._pages[page] = data
        offset = address - page
        if offset + 8 <= len(data):
            return self._word(data, offset)[0]
        return self._word(self._inferior.read_memory(address, 8).tobytes())[0]

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
            self.forget_stop()
            self._inferior = inferior
        gdb_arch = pending.architecture()
        registers = self._architectures.get(gdb_arch, False)
        if registers is False:
            registers = self._architectures[gdb_arch] = self._registers(gdb_arch)
        if registers is None:
            return None
        self._word = registers.word
        pc = _pending_pc(pending, registers)
        level = pending.level()
        key = pc if level == 0 else -pc  # looked up at pc, or at pc - 1
        plan = self._plans.get(key, False)
        if plan is False:
            plan = self._plans[key] = self._plan(pc, level, registers)
        if plan is None:
            return None
        return self._unwind_with(pending, plan, pc, level, registers)

    @staticmethod
    def _registers(gdb_arch):
        arch = arch_named(gdb_arch.name())
        return None if arch is None else _Registers(gdb_arch, arch)

    def _plan(self, pc, level, registers):
        """The plan for a frame at ``pc``, or None to let GDB unwind it."""
        lookup_pc = pc if level == 0 else pc - 1
        module_map = state.module_map()
        # Own SFrame data only: where rows would be synthesized from DWARF
        # CFI, GDB's DWARF unwinder reads the same CFI and knows more.
        module, row = module_map.row_for(lookup_pc, synthesized=False)
        if row is None or row.outermost or row.signal:
            return None
        if level > 0:
            # A frame interrupted by a signal is looked up at its PC, a
            # caller at PC - 1; where the two disagree, let GDB decide.
            _, row_at_pc = module_map.row_for(pc, synthesized=False)
            if row_at_pc is not None and (row_at_pc.function.start, row_at_pc.entry) != (
                    row.function.start, row.entry):
                return None
        if self.mode == "auto" and self._has_cfi(module, lookup_pc):
            return None
        return _Plan(row, row.function.start + module.load_bias, registers)

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

    def _unwind_with(self, pending, plan, pc, level, registers):
        arch = registers.arch
        sp = None
        if plan.cfa_base is not None:
            base = int(pending.read_register(plan.cfa_base)) & _MASK64
            if plan.cfa_base is registers.sp:
                sp = base
            cfa = (base + plan.cfa_offset) & _MASK64
        else:
            cfa = self._rule(pending, plan.cfa, None, registers)
        caller_sp = (cfa + arch.sp_from_cfa) & _MASK64
        if sp is not None and caller_sp < sp:
            return None  # the stack would not move up: GDB decides
        if plan.ra_offset is not None:
            ra = self._read_word((cfa + plan.ra_offset) & _MASK64)
        elif plan.ra is not None:
            ra = self._rule(pending, plan.ra, cfa, registers)
        else:
            ra = register_bits(pending.read_register(registers.ra))
        if plan.mangled_ra:
            ra = arch.strip_return_address(ra, self._virtual_address_bits(pending, registers))
        if plan.fp is not None:
            fp = gdb.Value(self._rule(pending, plan.fp, cfa, registers))
        else:
            fp = self._unchanged_fp(pending, pc, level, sp, registers)
        cfa_value = gdb.Value(cfa)
        sp_value = cfa_value if caller_sp == cfa else gdb.Value(caller_sp)
        ra_value = gdb.Value(ra)
        info = pending.create_unwind_info(FrameId(cfa_value, plan.start))
        info.add_saved_register(registers.pc, ra_value)
        info.add_saved_register(registers.sp, sp_value)
        info.add_saved_register(registers.fp, fp)
        if registers.ra is not None:
            # After the return, x30 (AArch64) or r14 (s390x) holds the
            # return address; GDB reads it to unwind the caller's caller.
            info.add_saved_register(registers.ra, ra_value)
        self._caller = (level + 1, ra, caller_sp, fp)
        return info

    def _unchanged_fp(self, pending, pc, level, sp, registers):
        """This frame's FP, which its caller shares: the value this
        unwinder gave when it unwound the frame below to this one, when
        that is this frame (same level, PC and SP), else read."""
        caller = self._caller
        if (caller is not None and sp is not None and caller[0] == level
                and caller[1] == pc and caller[2] == sp):
            return caller[3]
        return pending.read_register(registers.fp)

    def _rule(self, pending, location, cfa, registers):
        """The value of a general rule: *(base + offset) or base + offset."""
        if location.register is None:
            base = cfa
        else:
            base = register_bits(pending.read_register(registers.descriptor(location.register)))
        address = (base + location.offset) & _MASK64
        return self._read_word(address) if location.deref else address

    def _virtual_address_bits(self, pending, registers):
        if self._va_bits is None:
            self._va_bits = virtual_address_bits(registers.arch, pending)
        return self._va_bits


frame_unwinder = SFrameFrameUnwinder()
