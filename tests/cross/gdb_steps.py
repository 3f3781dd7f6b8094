"""Loaded into gdb-multiarch by tests/test_qemu.py.

`test-qemu-steps LIMIT UNTIL` single-steps from the current stop (at
most LIMIT instructions) and at each instruction compares sframe-bt's
frames with GDB's own (DWARF) frames.  UNTIL is `function:NAME` (stop on
entering function NAME) or `break:LOCATION` (stop where GDB puts a
breakpoint at LOCATION, after the prologue).

`test-qemu-steps LIMIT UNTIL NAME,NAME,...` does the same where GDB's own
frames cannot serve (return addresses signed with pointer authentication,
which gdb 13 does not strip against qemu's stub): sframe-bt's function
names must be the tail of the given call chain (innermost first, ending at
main), its frame 0 must be GDB's, and every PC must be a clean address.

Prints `MISMATCH ...` lines and a summary `STEPS count AGREED count`.
"""

import gdb

from sfbt.commands.backtrace import walk
from sfbt_gdb_session import GdbSession, function_name, gdb_stack_frames


def frame_name(frame):
    name = function_name(frame.lookup_pc)
    return name or "??"


class QemuSteps(gdb.Command):
    def __init__(self):
        super().__init__("test-qemu-steps", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        words = argument.split()
        limit, (kind, until) = int(words[0]), words[1].split(":", 1)
        chain = words[2].split(",") if len(words) > 2 else None
        breakpoint = gdb.Breakpoint(until, internal=True) if kind == "break" else None
        steps = agreed = 0
        for _ in range(limit):
            gdb.execute("stepi", to_string=True)
            if breakpoint is not None and breakpoint.hit_count:
                breakpoint.delete()
                break
            if breakpoint is None and gdb.newest_frame().name() == until:
                break
            steps += 1
            frames, stop = walk(GdbSession(), GdbSession().selected_thread())
            got = [f.pc for f in frames]
            if chain is None:
                expected = [pc for pc, _ in gdb_stack_frames()]
                ok = got == expected
                detail = f"gdb {[hex(p) for p in expected]}"
            else:
                names = [frame_name(f) for f in frames]
                ok = (stop is None and names == chain[len(chain) - len(names):]
                      and got[0] == int(gdb.newest_frame().pc())
                      and all(pc < (1 << 48) for pc in got))
                detail = f"names {names}"
            if ok:
                agreed += 1
            else:
                gdb.write(f"MISMATCH at {got[0]:#x}: {detail} "
                          f"sframe {[hex(p) for p in got]} ({stop})\n")
        gdb.write(f"STEPS {steps} AGREED {agreed}\n")


QemuSteps()
