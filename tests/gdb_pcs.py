"""Loaded into gdb by the tests: `test-gdb-pcs` prints GDB's own frames'
PCs on one line, for comparison with sframe-bt.

GDB's tail-call frames are left out: GDB synthesizes them from DWARF call
site information for functions that left the stack with a jump; they have
no place on the real stack, which is what SFrame describes."""

import gdb


class GdbPcs(gdb.Command):
    def __init__(self):
        super().__init__("test-gdb-pcs", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        frame, pcs = gdb.newest_frame(), []
        while frame is not None:
            if frame.type() != gdb.TAILCALL_FRAME:
                pcs.append(f"{frame.pc():#x}")
            frame = frame.older()
        gdb.write("GDB-PCS " + " ".join(pcs) + "\n")


GdbPcs()
