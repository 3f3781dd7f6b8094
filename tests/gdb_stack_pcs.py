"""Loaded into gdb by tests/test_gdb_libc.py: `test-stack-pcs` prints the
PCs of GDB's own frames that are on the stack, on one line, for comparison
with sframe-bt.

Inline frames (GDB shows a function inlined into another as a frame of its
own, with the same PC as the frame it was inlined into: libc's
__pthread_kill_implementation in __pthread_kill) and tail-call frames
(synthesized from DWARF call-site data) are left out: neither has a place
on the real stack, which is what SFrame describes."""

import gdb


class StackPcs(gdb.Command):
    def __init__(self):
        super().__init__("test-stack-pcs", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        frame, pcs = gdb.newest_frame(), []
        while frame is not None:
            if frame.type() not in (gdb.TAILCALL_FRAME, gdb.INLINE_FRAME):
                pcs.append(f"{frame.pc():#x}")
            frame = frame.older()
        gdb.write("STACK-PCS " + " ".join(pcs) + "\n")


StackPcs()
