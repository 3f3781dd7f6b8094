"""Loaded into gdb by the tests: `test-gdb-pcs` prints GDB's own frames'
PCs on one line, for comparison with sframe-bt.

Tail-call frames (GDB synthesizes them from DWARF call-site data for
functions that left the stack with a jump) and inline frames (a function
inlined into another, shown as a frame of its own with the PC of the frame
it was inlined into, e.g. libc's __pthread_kill_implementation) are left
out: neither has a place on the real stack, which is what SFrame
describes."""

import gdb


class GdbPcs(gdb.Command):
    def __init__(self):
        super().__init__("test-gdb-pcs", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        frame, pcs = gdb.newest_frame(), []
        while frame is not None:
            if frame.type() not in (gdb.TAILCALL_FRAME, gdb.INLINE_FRAME):
                pcs.append(f"{frame.pc():#x}")
            frame = frame.older()
        gdb.write("GDB-PCS " + " ".join(pcs) + "\n")


GdbPcs()
