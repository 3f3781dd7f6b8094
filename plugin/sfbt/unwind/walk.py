"""Walking a stack with SFrame data: one frame to its caller, to the end.

Debugger-free: it reads registers and memory through a Target and finds
SFrame rows through a ModuleMap.
"""

from dataclasses import dataclass, field

from ..errors import SfbtError
from ..sframe import SFrameError
from .target import TargetMemoryError

# How a frame was found.
INNERMOST = "innermost"
SFRAME = "sframe"
FLEX = "flex"
SIGNAL = "signal"
SYNTH = "synth"  # a row synthesized from DWARF CFI (sfbt.synth)
FRAME_POINTER = "fp"

# Why a walk ended, worded as GDB words "Backtrace stopped: ...".
STOP_OUTERMOST = "outermost frame"
STOP_LIMIT = "frame limit reached"


class UnwindStop(SfbtError):
    """The walk cannot go on; the message says why."""


@dataclass
class Frame:
    level: int
    pc: int
    registers: dict  # DWARF number -> value, for the registers known here
    how: str = INNERMOST
    #: the module whose SFrame data gave this frame (None: not SFrame)
    data_module: object = None
    #: the pc is where execution stopped (innermost frame, or a frame a
    #: signal interrupted), not a return address
    interrupted: bool = True
    #: this frame is the kernel's signal trampoline
    signal_trampoline: bool = False
    cfa: int = None
    extra: dict = field(default_factory=dict)

    @property
    def lookup_pc(self):
        """The address that identifies the frame's instruction: a return
        address is looked up one byte back, inside the call."""
        return self.pc if self.interrupted else self.pc - 1

    def sp(self, arch):
        return self.registers.get(arch.sp)


class Unwinder:
    def __init__(self, target, module_map, fallback="fp"):
        self.target = target
        self.arch = target.arch
        self.module_map = module_map
        self.fallback = fallback

    # -- memory -------------------------------------------------------------
    def read_word(self, address):
        size = self.arch.pointer_size
        data = self.target.read_memory(address, size)
        if len(data) != size:
            raise TargetMemoryError(address, size)
        return int.from_bytes(data, "big" if self.arch.big_endian else "little")

    # -- frames -------------------------------------------------------------
    def innermost(self):
        registers = dict(self.target.registers())
        pc = registers[self.arch.pc]
        return Frame(0, pc, registers,
                     signal_trampoline=self.is_signal_trampoline(pc))

    def is_signal_trampoline(self, pc):
        layout = self.arch.signal_frame
        if layout is None:
            return False
        try:
            return self.target.read_memory(pc, len(layout.code)) == layout.code
        except TargetMemoryError:
            return False

    def caller(self, frame):
        """The frame that called ``frame``; UnwindStop when there is none."""
        if frame.signal_trampoline:
            return self._caller_of_signal_frame(frame)
        try:
            module, row = self.module_map.row_for(frame.lookup_pc)
        except SFrameError as error:
            module = self.module_map.module_for(frame.lookup_pc)
            raise UnwindStop(f"bad SFrame data in {module.path}: {error}") from None
        if row is not None:
            if row.signal and self.arch.signal_frame is not None:
                # a v3 signal FDE: the kernel's frame, whatever its code
                return self._caller_of_signal_frame(frame)
            return self.caller_from_row(frame, module, row)
        if self.fallback == "fp" and self.arch.frame_record is not None:
            return self._caller_from_frame_pointer(frame)
        raise UnwindStop(f"no unwind data for PC {frame.pc:#x}")

    def _register(self, frame, number):
        value = frame.registers.get(number)
        if value is None:
            name = self.arch.register_names.get(number, f"r{number}")
            raise UnwindStop(f"no value for register {name} in frame "
                             f"#{frame.level}")
        return value

    def _location(self, frame, location, cfa):
        base = cfa if location.register is None else self._register(frame, location.register)
        address = (base + location.offset) & 0xFFFFFFFFFFFFFFFF
        return self.read_word(address) if location.deref else address

    def caller_from_row(self, frame, module, row):
        """The caller of ``frame`` by the SFrame row ``row`` of ``module``
        (the row in force at frame.lookup_pc)."""
        arch = self.arch
        if row.outermost:
            raise UnwindStop(STOP_OUTERMOST)
        cfa = self._location(frame, row.cfa, None)
        caller_sp = (cfa + arch.sp_from_cfa) & 0xFFFFFFFFFFFFFFFF
        self._check_progress(frame, caller_sp)
        if row.ra is None:
            if not arch.has_link_register:
                raise UnwindStop(f"no return address rule at PC {frame.pc:#x}")
            ra = self._register(frame, arch.ra)
        else:
            ra = self._location(frame, row.ra, cfa)
        if row.mangled_ra:
            ra = arch.strip_return_address(ra, self._virtual_address_bits())
        registers = {arch.sp: caller_sp, arch.pc: ra}
        if row.fp is None:
            if arch.fp in frame.registers:
                registers[arch.fp] = frame.registers[arch.fp]
        else:
            registers[arch.fp] = self._location(frame, row.fp, cfa)
        if arch.has_link_register:
            registers[arch.ra] = ra
        how = FLEX if row.function.is_flex else SFRAME
        if self.module_map.is_synthesized(module):
            how = SYNTH
        return Frame(frame.level + 1, ra, registers, how=how,
                     data_module=module, interrupted=False, cfa=cfa,
                     signal_trampoline=self.is_signal_trampoline(ra))

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
        return Frame(frame.level + 1, ra, registers, how=FRAME_POINTER,
                     interrupted=False, cfa=caller_sp,
                     signal_trampoline=self.is_signal_trampoline(ra))

    def _caller_of_signal_frame(self, frame):
        arch = self.arch
        layout = arch.signal_frame
        sp = self._register(frame, arch.sp)
        size = arch.pointer_size
        count = 1 + max(slot for _, slot in layout.slots)
        block = self.target.read_memory(sp + layout.registers_offset, count * size)
        order = "big" if arch.big_endian else "little"
        registers = {number: int.from_bytes(block[slot * size:(slot + 1) * size], order)
                     for number, slot in layout.slots}
        pc = registers[arch.pc]
        return Frame(frame.level + 1, pc, registers, how=SIGNAL,
                     interrupted=True, cfa=registers[arch.sp],
                     signal_trampoline=self.is_signal_trampoline(pc))

    def _virtual_address_bits(self):
        """What strip_return_address keeps: the target's virtual-address
        size when it knows it (GDB's $pauth_cmask), else 48 bits."""
        return getattr(self.target, "virtual_address_bits", None) or 48

    def _check_progress(self, frame, caller_sp):
        old_sp = frame.registers.get(self.arch.sp)
        # A frameless leaf (AArch64, s390x) leaves SP unchanged; walk()
        # catches a frame that repeats itself.
        if old_sp is not None and caller_sp < old_sp:
            raise UnwindStop("frame did not move up the stack (corrupt stack?)")

    def walk(self, limit=None, is_last=None):
        """(frames, stop reason or None).  ``is_last(frame)`` may end the
        walk early without a reason (as GDB stops at main).  Memory faults
        end the walk with GDB's wording; frames found so far are kept."""
        frames = []
        try:
            frame = self.innermost()
        except TargetMemoryError as error:
            return frames, str(error)
        frames.append(frame)
        same_sp = {(frame.sp(self.arch), frame.pc)}
        while True:
            if is_last is not None and is_last(frame):
                return frames, None
            if limit is not None and len(frames) >= limit:
                return frames, STOP_LIMIT
            try:
                caller = self.caller(frame)
            except UnwindStop as stop:
                return frames, str(stop)
            except TargetMemoryError as error:
                return frames, str(error)
            key = (caller.sp(self.arch), caller.pc)
            if key[0] != frame.sp(self.arch):
                same_sp = set()
            elif key in same_sp:
                return frames, "frame did not move up the stack (corrupt stack?)"
            same_sp.add(key)
            frames.append(caller)
            frame = caller
