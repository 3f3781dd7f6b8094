"""Loaded into gdb by the stepping test: `test-step-compare N` single-steps
up to N instructions while the PC stays in the program's own code, and at
each one compares sframe-bt's frames with GDB's own (DWARF) frames."""

import gdb

from sfbt.commands.backtrace import walk
from sfbt_gdb_session import GdbSession, gdb_stack_frames, state


class StepCompare(gdb.Command):
    def __init__(self):
        super().__init__("test-step-compare", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        limit = int(argument)
        program = gdb.current_progspace().filename
        steps = agreed = 0
        for _ in range(limit):
            gdb.execute("stepi", to_string=True)
            pc = int(gdb.newest_frame().pc())
            module = state.module_map().module_for(pc)
            if module is None or module.path != program:
                break
            steps += 1
            expected = [pc for pc, _ in gdb_stack_frames()]
            frames, stop = walk(GdbSession(), GdbSession().selected_thread())
            got = [f.pc for f in frames]
            if got == expected:
                agreed += 1
            else:
                gdb.write(f"MISMATCH at {pc:#x}: gdb {[hex(p) for p in expected]} "
                          f"sframe {[hex(p) for p in got]} ({stop})\n")
        gdb.write(f"STEPS {steps} AGREED {agreed}\n")


StepCompare()
