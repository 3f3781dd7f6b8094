"""The SFrame frame unwinder: GDB's own bt, up, finish and info frame get
the frames SFrame rows describe; where there is no row GDB's other
unwinders take over.

The frame id's type is chosen once, at load: gdb.unwinder.FrameId on GDB
14 and newer; on GDB 13 an object whose sp and pc are gdb.Values (plain
ints fail with a misleading "frame_id should have 'sp' attribute").
"""

import gdb
import gdb.unwinder

from sfbt.unwind.walk import Frame, Unwinder

from sfbt_gdb_session import GdbTarget, arch_named, register_bits, state


class _FrameId13:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


FrameId = getattr(gdb.unwinder, "FrameId", _FrameId13)


class _PendingTarget(GdbTarget):
    """The registers of a frame GDB is building, read on demand."""

    def __init__(self, arch, pending):
        super().__init__(arch)
        self._pending = pending

    def read_register(self, number):
        return register_bits(self._pending.read_register(self.arch.register_names[number]))

    def _named_register(self, name):
        return self._pending.read_register(name)


class SFrameFrameUnwinder(gdb.unwinder.Unwinder):
    """Frames from SFrame rows; None (GDB's own unwinders) elsewhere."""

    def __init__(self):
        super().__init__("sframe")
        self._value_type = None

    def _value(self, number):
        if self._value_type is None:
            self._value_type = gdb.lookup_type("unsigned long")
        return gdb.Value(number).cast(self._value_type)

    def __call__(self, pending_frame):
        try:
            return self._unwind(pending_frame)
        except Exception as error:  # never let an error reach the user
            state.record_error("unwinder", error)
            return None

    def _unwind(self, pending):
        arch = arch_named(pending.architecture().name())
        if arch is None:
            return None
        pc_name = arch.register_names[arch.pc]
        pc = int(pending.read_register(pc_name)) & 0xFFFFFFFFFFFFFFFF
        level = pending.level()
        lookup_pc = pc if level == 0 else pc - 1
        module_map = state.module_map()
        # Own SFrame data only: where rows would be synthesized from DWARF
        # CFI, GDB's DWARF unwinder reads the same CFI and knows more.
        module, row = module_map.row_for(lookup_pc, synthesized=False)
        if row is None or row.outermost:
            return None
        if level > 0:
            # A frame interrupted by a signal is looked up at its PC, a
            # caller at PC - 1; where the two disagree, let GDB decide.
            _, row_at_pc = module_map.row_for(pc, synthesized=False)
            if row_at_pc is not None and row_at_pc.entry is not row.entry:
                return None
        target = _PendingTarget(arch, pending)
        registers = {}
        for location in (row.cfa, row.ra, row.fp):
            if location is not None and location.register is not None:
                registers[location.register] = target.read_register(location.register)
        for number in (arch.sp, arch.fp) + ((arch.ra,) if arch.has_link_register else ()):
            if number not in registers:
                registers[number] = target.read_register(number)
        frame = Frame(level, pc, registers, interrupted=(level == 0))
        caller = Unwinder(target, module_map, fallback="none").caller_from_row(
            frame, module, row)
        function_start = row.function.start + module.load_bias
        info = pending.create_unwind_info(
            FrameId(self._value(caller.cfa), self._value(function_start)))
        info.add_saved_register(pc_name, self._value(caller.pc))
        info.add_saved_register(arch.register_names[arch.sp],
                                self._value(caller.registers[arch.sp]))
        if arch.fp in caller.registers:
            info.add_saved_register(arch.register_names[arch.fp],
                                    self._value(caller.registers[arch.fp]))
        if arch.has_link_register:
            # After the return, x30 (AArch64) or r14 (s390x) holds the
            # return address; GDB reads it to unwind the caller's caller
            # (an unsaved register would read as <not saved>).
            info.add_saved_register(arch.register_names[arch.ra],
                                    self._value(caller.registers[arch.ra]))
        return info


frame_unwinder = SFrameFrameUnwinder()
