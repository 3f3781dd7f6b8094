"""Loaded into gdb by the tests: `test-gdb-pcs` prints the PCs of GDB's own
frames as sframe-bt prints them with an address (inline frames, which
share their frame's PC, left out; tail-call frames, which sframe-bt
rebuilds as GDB does, kept) on one line, for comparison with sframe-bt."""

import gdb


class GdbPcs(gdb.Command):
    def __init__(self):
        super().__init__("test-gdb-pcs", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        pcs, frame = [], gdb.newest_frame()
        while frame is not None:
            if frame.type() != gdb.INLINE_FRAME:
                pcs.append(f"{int(frame.pc()):#x}")
            frame = frame.older()
        gdb.write("GDB-PCS " + " ".join(pcs) + "\n")


GdbPcs()
