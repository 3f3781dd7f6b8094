"""Walking a stack with SFrame data: one frame to its caller, to the end.

Debugger-free: it reads registers and memory through a Target and finds
SFrame rows through a ModuleMap.  A walk never raises: whatever goes wrong
in one step (unreadable memory, an address that does not fit, bad data, a
bug) ends it with a reason, and the frames found so far are kept.
"""

import gc
import struct

from ..errors import SfbtError, TargetMemoryError
from ..sframe import SFrameError
from .plan import SIGNAL as SIGNAL_ROW, RowPlan

# How a frame was found.
INNERMOST = "innermost"
SFRAME = "sframe"
FLEX = "flex"
SIGNAL = "signal"
SYNTH = "synth"  # a row synthesized from DWARF CFI (sfbt.synth)
FRAME_POINTER = "fp"
RETURN_ADDRESS = "ra-at-sp"  # no row; the word at SP is a checked return address

# Why a walk ended, worded as GDB words "Backtrace stopped: ...".
STOP_OUTERMOST = "outermost frame"
STOP_LIMIT = "frame limit reached"
STOP_NOT_UP = "frame did not move up the stack (corrupt stack?)"
STOP_LOOP = "previous frame identical to this frame (corrupt stack?)"

_MASK64 = 0xFFFFFFFFFFFFFFFF
#: addresses of one file whose step plans (and signal trampoline answers)
#: are shared between module maps at most (ModuleMap.file_plans)
MAX_FILE_STEP_PLANS = 1 << 16
_PAGE = 0x1000
_PAGE_START = ~(_PAGE - 1)
_PAGE_OFFSET = _PAGE - 1
# How the step finds a register that DWARF CFI gives (Unwinder._saved_ops).
_SAVED_AT = "saved at CFA + offset"
_IN_REGISTER = "in a register"
_CFA_PLUS = "CFA + offset"


class UnwindStop(SfbtError):
    """The walk cannot go on; the message says why."""


def lookup_pc(pc, is_caller):
    """The address whose row is in force in a frame at ``pc``: a caller's
    pc is a return address, looked up one byte back, inside the call (the
    call may be the last instruction of its function); where execution
    stopped, or a signal interrupted it, pc itself."""
    return pc - 1 if is_caller and pc else pc


def registers_read(arch, row):
    """The DWARF numbers of the registers a step by ``row`` asks the frame
    for, SP first: SP (the stack must move up), the registers its rules
    are based on, FP where the caller keeps this frame's, the
    return-address register where the return address is still in it.  A
    caller of Unwinder.step that reads registers one at a time (GDB's
    frame unwinder) need read only these.  A row synthesized from DWARF
    CFI also asks for those its DWARF register rules name."""
    if row.outermost:
        return ()
    numbers = [arch.sp]
    for rule in (row.cfa, row.ra, row.fp):
        if rule is not None and rule.register is not None:
            numbers.append(rule.register)
    if row.fp is None:
        numbers.append(arch.fp)
    if row.ra is None and arch.has_link_register:
        numbers.append(arch.ra)
    return tuple(dict.fromkeys(numbers))


class Frame:
    """One frame of a walk: its PC and the registers known in it."""

    __slots__ = ("level", "pc", "registers", "how", "data_module", "interrupted",
                 "signal_trampoline", "cfa")

    def __init__(self, level, pc, registers, how=INNERMOST, data_module=None,
                 interrupted=True, signal_trampoline=False, cfa=None):
        self.level = level
        self.pc = pc
        #: DWARF number -> value, for the registers known here
        self.registers = registers
        self.how = how
        #: the module whose SFrame data gave this frame (None: not SFrame)
        self.data_module = data_module
        #: the pc is where execution stopped (innermost frame, or a frame a
        #: signal interrupted), not a return address
        self.interrupted = interrupted
        #: this frame is the kernel's signal trampoline
        self.signal_trampoline = signal_trampoline
        self.cfa = cfa

    @property
    def lookup_pc(self):
        """The address that identifies the frame's instruction."""
        return lookup_pc(self.pc, not self.interrupted)

    def sp(self, arch):
        return self.registers.get(arch.sp)

    def __repr__(self):
        return f"Frame(#{self.level}, pc={self.pc:#x}, {self.how})"


class Unwinder:
    """One walk's view of a target: its memory (read a page at a time and
    kept for the walk: unwinding reads the same stack and code pages again
    and again) and its modules' rows."""

    def __init__(self, target, module_map, fallback="fp"):
        self.target = target
        self.arch = target.arch
        self.module_map = module_map
        self.fallback = fallback
        self._pages = {}  # page address -> its bytes (b"" when unreadable whole)
        # pc -> whether it is in the signal trampoline: as a return address
        # (in a module: kept in the module map, for every walk; elsewhere
        # for this walk), and where execution stopped
        self._kept_trampolines = module_map.return_trampolines
        self._kept_stopped_trampolines = module_map.stopped_trampolines
        self._return_trampolines = {}
        self._stopped_trampolines = {}
        arch = self.arch
        self._order = "big" if arch.big_endian else "little"
        self._word_size = arch.pointer_size
        self._last_word = _PAGE - arch.pointer_size  # the last offset a word in a page starts at
        #: (a word,) at an offset of a buffer
        self._word = struct.Struct(("<", ">")[arch.big_endian]
                                   + {4: "I", 8: "Q"}[arch.pointer_size]).unpack_from
        self._steps = module_map.steps()
        self._plans = module_map.plans(arch.name)  # id(row) -> its RowPlan
        #: lookup address -> (module, RowPlan or None, how, unchanged, saved,
        #: window): all the step needs of the address, found once
        #: (``unchanged``, ``saved``: _saved_ops; ``window``: _window)
        self._step_plans = module_map.step_plans(arch.name)
        self._sp, self._pc, self._fp, self._ra = arch.sp, arch.pc, arch.fp, arch.ra
        self._sp_from_cfa = arch.sp_from_cfa
        self._link_register = arch.has_link_register

    # -- memory -------------------------------------------------------------
    def read(self, address, size):
        """``size`` bytes at ``address``, from the walk's copy of the page
        that holds them; TargetMemoryError where the target cannot read
        them (or the address does not fit in 64 bits)."""
        if address < 0 or address + size > _MASK64 + 1:
            raise TargetMemoryError(address & _MASK64, size)
        page = address & ~(_PAGE - 1)
        data = self._pages.get(page)
        if data is None:
            try:
                data = self.target.read_memory(page, _PAGE)
            except TargetMemoryError:
                data = b""  # part of the page may still be readable
            if len(data) != _PAGE:
                data = b""
            self._pages[page] = data
        at = address - page
        if at + size <= len(data):
            return data[at:at + size]
        data = self.target.read_memory(address, size)
        if len(data) != size:
            raise TargetMemoryError(address, size)
        return data

    def read_word(self, address):
        data = self._pages.get(address & _PAGE_START)
        at = address & _PAGE_OFFSET
        if data and at <= self._last_word:  # the common case: the page is read
            return self._word(data, at)[0]
        return self._word(self.read(address, self._word_size))[0]

    # -- frames -------------------------------------------------------------
    def innermost(self):
        registers = {number: value & _MASK64
                     for number, value in self.target.registers().items()
                     if value is not None}
        if self._pc not in registers:
            raise UnwindStop("no value for the PC in frame #0")
        pc = registers[self._pc]
        return Frame(0, pc, registers,
                     signal_trampoline=self.is_signal_trampoline(pc, True))

    def is_signal_trampoline(self, pc, interrupted=False):
        """Whether ``pc`` is in the kernel's rt_sigreturn trampoline: a
        return address only at its first byte (where the handler returns
        to), a PC where execution stopped anywhere in it (`catch syscall
        rt_sigreturn` stops after its last instruction)."""
        layout = self.arch.signal_frame
        if layout is None:
            return False
        kept = self._kept_stopped_trampolines if interrupted else self._kept_trampolines
        found = kept.get(pc)
        if found is not None:
            return found
        cache = self._stopped_trampolines if interrupted else self._return_trampolines
        found = cache.get(pc)
        if found is None:
            module = self.module_map.module_for(pc)
            code = layout.code
            # a module's code is its file's: the answer is shared where the
            # bytes it reads lie in the module
            shared = None if module is None or not (
                module.start <= pc - len(code) and pc + len(code) <= module.end) \
                else self.module_map.file_plans(module, self.arch.name)
            if shared is not None:
                shared = shared.stopped_trampolines if interrupted \
                    else shared.return_trampolines
                found = shared.get(pc - module.load_bias)
            if found is None:
                found = self._trampoline_code_at(pc, interrupted, code)
                if shared is not None and len(shared) < MAX_FILE_STEP_PLANS:
                    shared[pc - module.load_bias] = found
            if module is not None:
                cache = kept
            cache[pc] = found
        return found

    def _trampoline_code_at(self, pc, interrupted, code):
        """Whether the code at ``pc`` is the signal trampoline's ``code``:
        starting there (a return address), or holding pc (a PC where
        execution stopped)."""
        if not interrupted:
            return self._code_at(pc, code)
        try:  # the code starts at most len(code) bytes before pc
            return code in self.read(pc - len(code), 2 * len(code))
        except TargetMemoryError:  # it may start or end a mapping
            return any(self._code_at(start, code) for start in range(pc - len(code), pc + 1))

    def _code_at(self, address, code):
        try:
            return self.read(address, len(code)) == code
        except TargetMemoryError:
            return False

    def caller(self, frame):
        """The frame that called ``frame``; UnwindStop when there is none."""
        level = frame.level
        if frame.signal_trampoline:
            registers = self._signal_frame_registers(level, frame.registers)
            return self._frame(level + 1, registers, registers[self._sp], SIGNAL, None)
        found = self.caller_registers(frame.pc, not frame.interrupted, frame.registers, level)
        if found is not None:
            registers, cfa, how, module = found
            if how == SIGNAL:
                return self._frame(level + 1, registers, cfa, how, module)
            pc = registers[self._pc]  # _frame's common case, inline: once per frame
            trampoline = self._kept_trampolines.get(pc)
            if trampoline is None:
                trampoline = self.is_signal_trampoline(pc)
            return Frame(level + 1, pc, registers, how, module, False, trampoline, cfa)
        caller = self._caller_from_return_address_at_sp(frame)
        if caller is not None:
            return caller
        if self.fallback == "fp" and self.arch.frame_record is not None:
            return self._caller_from_frame_pointer(frame)
        raise UnwindStop(f"no unwind data for PC {frame.pc:#x}")

    def step(self, pc, is_caller, known, level=0, rows=None):
        """One frame step by the rows, the walk's and GDB's frame
        unwinder's: the caller (a Frame) of the frame at ``pc`` at
        ``level``, by the row in force at lookup_pc(pc, is_caller); None
        where no row covers that address.  ``is_caller``: pc is a return
        address (the frame made a call); else execution stopped at pc or a
        signal interrupted it there.  ``known``: the frame's registers
        ({DWARF number: value or None}, or any object whose get() reads
        them when asked; registers_read(arch, row) says which a row
        needs).  ``rows(address)``: (module, row or None, how) (default:
        the module map's, rows synthesized from DWARF CFI included).
        UnwindStop where the row ends the stack or the stack would not move
        up; TargetMemoryError where a saved word cannot be read."""
        found = self.caller_registers(pc, is_caller, known, level, rows)
        if found is None:
            return None
        registers, cfa, how, module = found
        return self._frame(level + 1, registers, cfa, how, module)

    def caller_registers(self, pc, is_caller, known, level=0, rows=None):
        """The step (see step()) up to the caller's Frame: (the caller's
        registers, its CFA, how it was found, the module whose rows gave
        it), or None.  GDB's frame unwinder wants no more, once per frame."""
        address = pc - 1 if is_caller and pc else pc  # lookup_pc, once per frame
        window = None
        if rows is None:
            found = self._step_plans.get(address)
            if found is None:
                found = self._step_plan(address)
            module, plan, how, unchanged, saved, window = found
            if plan is None:
                return None
        else:
            module, row, how = rows(address)
            if row is None:
                return None
            plan = self._plan(row)
            unchanged, saved = self._saved_ops(module, address) if how == SYNTH else ((), ())
        (ends, cfa_register, cfa_offset, cfa_deref, ra_saved_at, ra_rule, fp_saved_at,
         fp_rule, mangled_ra) = plan.step
        if ends is not None:
            if ends == SIGNAL_ROW:  # a v3 signal FDE: the kernel's frame, whatever its code
                registers = self._signal_frame_registers(level, known)
                return registers, registers[self._sp], SIGNAL, None
            raise UnwindStop(STOP_OUTERMOST)
        read_word = self.read_word
        sp_number = self._sp
        base = known.get(cfa_register)
        if base is None:
            base = self._register(known, level, cfa_register)
        cfa = (base + cfa_offset) & _MASK64
        if cfa_deref:
            cfa = read_word(cfa)
        caller_sp = (cfa + self._sp_from_cfa) & _MASK64
        old_sp = known.get(sp_number)
        # A frameless leaf (AArch64, s390x) leaves SP unchanged; walk()
        # catches a frame that repeats itself.
        if old_sp is not None and caller_sp < old_sp:
            raise UnwindStop(STOP_NOT_UP)
        words = None
        popped = 0  # the window's words below SP (see below)
        if window is not None:  # every word read at CFA + k, in one read
            low, size, unpack, ra_at, fp_at, window_saved, in_window = window
            try:
                words = unpack(self.read((cfa + low) & _MASK64, size))
            except TargetMemoryError:  # read a word at a time: which fails matters
                pass
            else:
                ra = words[ra_at]
                saved = window_saved
                start = (cfa + low) & _MASK64
                if old_sp is not None and start < old_sp:  # words of it an epilogue popped
                    popped = -((start - old_sp) // self._word_size)
        if words is None:
            if ra_saved_at is not None:
                ra = read_word((cfa + ra_saved_at) & _MASK64)
            elif ra_rule is not None:
                ra = self._location(known, level, ra_rule, cfa)
            elif self._link_register:
                ra = self._register(known, level, self._ra)
            else:
                raise UnwindStop(f"no return address rule at PC {pc:#x}")
        if mangled_ra:
            ra = self.arch.strip_return_address(ra, self._virtual_address_bits())
        registers = {sp_number: caller_sp, self._pc: ra}
        get = known.get
        for number in unchanged:  # none of SP, PC, FP and RA
            value = get(number)
            if value is not None:
                registers[number] = value
        # A register "saved" below SP was popped by the frame's epilogue
        # already (GCC's CFI keeps the save rule until the return): the
        # frame's register holds the caller's value again, which a stack
        # copied from SP up (perf's) does not have.
        if words is not None:
            if popped:
                for number, index in in_window:
                    registers[number] = get(number, words[index]) if index < popped \
                        else words[index]
            else:
                for number, index in in_window:
                    registers[number] = words[index]
        for number, kind, operand in saved:  # none of SP, PC, FP and RA
            if kind is _SAVED_AT:
                at = (cfa + operand) & _MASK64
                value = known.get(number) if old_sp is not None and at < old_sp else None
                if value is None:
                    try:
                        value = read_word(at)
                    except TargetMemoryError:
                        continue
            elif kind is _IN_REGISTER:
                value = known.get(operand)
                if value is None:
                    continue
            else:
                value = (cfa + operand) & _MASK64
            registers[number] = value
        if fp_saved_at is not None:
            if words is not None:
                fp = words[fp_at]
                if fp_at < popped:
                    fp = known.get(self._fp, fp)
            else:
                at = (cfa + fp_saved_at) & _MASK64
                fp = known.get(self._fp) if old_sp is not None and at < old_sp else None
                if fp is None:
                    fp = read_word(at)
            registers[self._fp] = fp
        elif fp_rule is not None:
            registers[self._fp] = self._location(known, level, fp_rule, cfa)
        else:
            fp = known.get(self._fp)
            if fp is not None:
                registers[self._fp] = fp
        if self._link_register:
            registers[self._ra] = ra
        return registers, cfa, how, module

    def _frame(self, level, registers, cfa, how, module):
        """The Frame at ``level`` whose registers a step found: one a
        signal interrupted (its pc where execution stopped), or one whose
        pc is a return address."""
        pc = registers[self._pc]
        if how == SIGNAL:
            return Frame(level, pc, registers, SIGNAL, None, True,
                         self.is_signal_trampoline(pc, True), cfa)
        trampoline = self._kept_trampolines.get(pc)
        if trampoline is None:
            trampoline = self.is_signal_trampoline(pc)
        return Frame(level, pc, registers, how, module, False, trampoline, cfa)

    def _register(self, registers, level, number):
        value = registers.get(number)
        if value is None:
            name = self.arch.register_names.get(number, f"r{number}")
            raise UnwindStop(f"no value for register {name} in frame #{level}")
        return value

    def _location(self, registers, level, location, cfa):
        base = (cfa if location.register is None
                else self._register(registers, level, location.register))
        address = (base + location.offset) & _MASK64
        return self.read_word(address) if location.deref else address

    def _plan(self, row):
        """The RowPlan of ``row``, kept per row on the module map."""
        plan = self._plans.get(id(row))
        if plan is None or plan.row is not row:
            plan = self._plans[id(row)] = RowPlan(row, self.arch.signal_frame is not None)
        return plan

    def _step_plan(self, address):
        """Find and keep what the step needs at lookup address ``address``
        by the module map's rows (see _step_plans), or as planned already
        at that address of the module's file in another map
        (ModuleMap.file_plans: a new process maps the same libc)."""
        module_map = self.module_map
        module = module_map.module_for(address)
        shared = None if module is None else module_map.file_plans(module, self.arch.name)
        if shared is not None:
            shared = shared.steps
            planned = shared.get(address - module.load_bias)
            if planned is not None:
                found = self._step_plans[address] = (module, *planned)
                return found
        try:
            module, row, how = self._steps.get(address) or module_map.step_for(address)
        except SFrameError as error:
            raise UnwindStop(f"bad SFrame data in {module.path}: {error}") from None
        if row is None:
            found = (module, None, how, (), (), None)
        else:
            plan = self._plan(row)
            unchanged, saved = self._saved_ops(module, address) if how == SYNTH else ((), ())
            found = (module, plan, how, unchanged, saved, self._window(plan, saved))
        self._step_plans[address] = found
        if shared is not None and len(shared) < MAX_FILE_STEP_PLANS:
            shared[address - module.load_bias] = found[1:]
        return found

    def _window(self, plan, saved):
        """How the step reads every word it reads at CFA + k at once, where
        the RA is one of them and there are more (the FP, the registers
        DWARF CFI saves): (the lowest k, the size of the words from there
        to the highest, their unpacker, the RA's index among them, the
        FP's, ``saved`` without the registers saved at CFA + k, those as
        (register, index of its word)); None where the step reads the RA
        otherwise, or only it, or the words span more than a page."""
        ra_saved_at, fp_saved_at = plan.ra_saved_at, plan.fp_saved_at
        if plan.ends is not None or ra_saved_at is None:
            return None
        offsets = [ra_saved_at]
        if fp_saved_at is not None:
            offsets.append(fp_saved_at)
        offsets += [operand for _, kind, operand in saved if kind is _SAVED_AT]
        if len(offsets) < 2 or any(offset % self._word_size for offset in offsets):
            return None
        low, high = min(offsets), max(offsets) + self._word_size
        if high - low > _PAGE:
            return None
        size = self._word_size
        count = (high - low) // size
        unpack = struct.Struct(("<", ">")[self.arch.big_endian]
                               + {4: "I", 8: "Q"}[size] * count).unpack
        at = {offset: (offset - low) // size for offset in offsets}
        return (low, high - low, unpack, at[ra_saved_at],
                None if fp_saved_at is None else at[fp_saved_at],
                tuple(op for op in saved if op[1] is not _SAVED_AT),
                tuple((number, at[operand]) for number, kind, operand in saved
                      if kind is _SAVED_AT))

    def _saved_ops(self, module, address):
        """The registers besides SP, PC, FP and RA that the DWARF CFI at
        ``address`` (a row synthesized from it) gives the caller, as the
        step computes them: (those unchanged (the frame's value), the
        others: (register, _SAVED_AT, CFA offset) for one saved in the
        frame, (register, _IN_REGISTER, where) for one in another register
        of the frame, (register, _CFA_PLUS, offset) for CFA + offset);
        registers with any other rule (undefined, a DWARF expression) are
        not known in the caller."""
        from ..dwarf.cfa import OFFSET, REGISTER, SAME_VALUE, VAL_OFFSET

        rules = self.module_map.register_rules(module, address)
        unchanged, ops = [], []
        for number, rule in (rules or {}).items():
            if rule is None or rule.kind == SAME_VALUE or (
                    rule.kind == REGISTER and rule.operand == number):
                unchanged.append(number)
            elif rule.kind == OFFSET:
                ops.append((number, _SAVED_AT, rule.operand))
            elif rule.kind == VAL_OFFSET:
                ops.append((number, _CFA_PLUS, rule.operand))
            elif rule.kind == REGISTER:
                ops.append((number, _IN_REGISTER, rule.operand))
        return tuple(unchanged), tuple(ops)

    def _caller_from_return_address_at_sp(self, frame):
        """Where the CFI has a hole (glibc's clone3 around its syscall): the
        caller when the word at SP is a return address that follows a call
        instruction in a module with rows for it, else None.  Only for a
        frame where execution stopped: a frame that made a call has its
        own data on the stack above SP."""
        arch = self.arch
        if not frame.interrupted or arch.has_link_register or arch.fixed_ra_offset == 0:
            return None
        sp = frame.registers.get(self._sp)
        if sp is None:
            return None
        try:
            ra = self.read_word(sp)
            if not self._is_return_address(ra):
                return None
        except TargetMemoryError:
            return None
        caller_sp = (sp - arch.fixed_ra_offset) & _MASK64
        registers = {number: frame.registers[number] for number in (self._fp,)
                     if number in frame.registers}
        registers[self._sp] = caller_sp
        registers[self._pc] = ra
        return Frame(frame.level + 1, ra, registers, RETURN_ADDRESS, None, False,
                     self.is_signal_trampoline(ra), caller_sp)

    def _is_return_address(self, address):
        """Whether ``address`` follows a call instruction in code that a
        module's rows cover."""
        if address < 0x1000:
            return False
        module, row = self.module_map.row_for(address - 1)
        if row is None:
            return False
        code = self.read(address - 8, 8)
        return self.arch.follows_call(code)

    def _caller_from_frame_pointer(self, frame):
        """The frame-pointer chain, with the checks sanitizers make: the
        frame pointer is aligned, above the stack pointer and not too far,
        and the return address is outside page 0."""
        arch = self.arch
        fp = frame.registers.get(arch.fp)
        sp = frame.registers.get(arch.sp)
        if (not fp or sp is None or fp % arch.pointer_size
                or fp < sp or fp - sp > (1 << 24)):
            raise UnwindStop(f"no unwind data for PC {frame.pc:#x}")
        caller_sp = fp + 2 * arch.pointer_size
        self._check_progress(frame, caller_sp)
        saved_fp_at, saved_ra_at = arch.frame_record
        ra = self.read_word(fp + saved_ra_at)
        caller_fp = self.read_word(fp + saved_fp_at)
        if ra < 0x1000:
            raise UnwindStop(f"no unwind data for PC {frame.pc:#x}")
        if arch.has_link_register:
            ra = arch.strip_return_address(ra, self._virtual_address_bits())
        registers = {arch.sp: caller_sp, arch.pc: ra, arch.fp: caller_fp}
        return Frame(frame.level + 1, ra, registers, FRAME_POINTER, None, False,
                     self.is_signal_trampoline(ra), caller_sp)

    def _signal_frame_registers(self, level, registers):
        """The registers the kernel saved in the signal frame at
        ``level``, whose SP is in ``registers``."""
        arch = self.arch
        layout = arch.signal_frame
        sp = self._register(registers, level, arch.sp)
        size = arch.pointer_size
        count = 1 + max(slot for _, slot in layout.slots)
        block = self.read((sp + layout.registers_offset) & _MASK64, count * size)
        order = self._order
        return {number: int.from_bytes(block[slot * size:(slot + 1) * size], order)
                for number, slot in layout.slots}

    def _virtual_address_bits(self):
        """What strip_return_address keeps: the target's virtual-address
        size when it knows it (GDB's $pauth_cmask), else 48 bits."""
        return getattr(self.target, "virtual_address_bits", None) or 48

    def _check_progress(self, frame, caller_sp):
        old_sp = frame.registers.get(self._sp)
        # A frameless leaf (AArch64, s390x) leaves SP unchanged; walk()
        # catches a frame that repeats itself.
        if old_sp is not None and caller_sp < old_sp:
            raise UnwindStop(STOP_NOT_UP)

    def walk(self, limit=None, is_last=None, outer=None):
        """(frames, stop reason or None): at most ``limit`` frames.
        ``is_last(frame)`` may end the walk early without a reason (as GDB
        stops at main).  ``outer``, where the walk may go on as an earlier
        one did (unwind.reuse): ``outer.starts`` holds the (CFA, PC) of
        the frames it may go on from, and ``outer(frame)``, asked of such
        a frame found while every SP is above the one before, gives (the
        frames after it, the stop reason) where the walk is known to go on
        as those, else None.  After the walk, ``loop_checked`` says whether
        some frame's SP was not above all before it.  Never raises: any
        failure of a step ends the walk with its reason; the frames found
        so far are kept."""
        frames = []
        self.loop_checked = False
        # Frames make no reference cycles: the collector's passes over a
        # growing list of them would only cost time.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return frames, self._walk(frames, limit, is_last, outer)
        except (UnwindStop, TargetMemoryError) as stop:
            return frames, str(stop)
        except SfbtError as error:
            return frames, f"bad unwind data: {error}"
        except Exception as error:  # a bug must not take the frames found with it
            return frames, f"internal error: {type(error).__name__}: {error}"
        finally:
            if collecting:
                gc.enable()

    #: where a subclass notes each read (unwind.reuse): the walk notes in
    #: ``_marks`` where each step's reads begin in it
    _reads = None

    def _walk(self, frames, limit, is_last, outer):
        """Fill ``frames``; the stop reason, or raise it."""
        sp_number = self._sp
        caller_of = self.caller
        reads = self._reads
        mark = None if reads is None else self._marks.append
        append = frames.append
        starts = () if outer is None else outer.starts
        frame = self.innermost()
        append(frame)
        # A stack that leads back to a frame already walked (signal frames
        # whose saved SPs point at each other) ends the walk, as GDB's
        # frame stash does.  While each SP is above all before it no frame
        # can repeat: the (SP, PC) of the frames are only gathered from the
        # first SP that is not.
        top = frame.registers.get(sp_number)
        seen = None
        while True:
            if is_last is not None and is_last(frame):
                return None
            if limit is not None and len(frames) >= limit:
                return STOP_LIMIT
            if mark is not None:
                mark(len(reads))
            caller = caller_of(frame)
            sp = caller.registers.get(sp_number)
            if top is not None and sp is not None and sp > top:
                top = sp
                if seen is not None:
                    seen.add((sp, caller.pc))
            else:
                if seen is None:
                    self.loop_checked = True
                    seen = {(f.registers.get(sp_number), f.pc) for f in frames}
                key = (sp, caller.pc)
                if key in seen:
                    if sp == frame.registers.get(sp_number):
                        return STOP_NOT_UP
                    return STOP_LOOP
                seen.add(key)
            append(caller)
            if not caller.pc and not caller.interrupted:
                # A return address of 0 ends the stack (GDB: "zero PC").
                return None
            if seen is None and (caller.cfa, caller.pc) in starts:
                found = outer(caller)
                if found is not None:
                    frames.extend(found[0])
                    return found[1]
            frame = caller
