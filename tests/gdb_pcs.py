"""Loaded into gdb by the tests: `test-gdb-pcs` prints the PCs of GDB's own
frames that are on the stack (sfbt_gdb_session.gdb_stack_frames: tail-call
and inline frames left out) on one line, for comparison with sframe-bt."""

import gdb

from sfbt_gdb_session import gdb_stack_frames


class GdbPcs(gdb.Command):
    def __init__(self):
        super().__init__("test-gdb-pcs", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        pcs = [f"{pc:#x}" for pc, _ in gdb_stack_frames()]
        gdb.write("GDB-PCS " + " ".join(pcs) + "\n")


GdbPcs()
