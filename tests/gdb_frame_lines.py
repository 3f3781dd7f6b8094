"""Loaded into gdb (with the plugin, `set sframe unwinder off`, so that `bt`
is GDB's own) by tests/test_cxx_differential.py: at each stop, every frame
line of GDB's `bt` and of `sframe-bt -v`, to main, as [level, pc, name,
where, kind], printed as one line `FRAMES <json>` {"how", "pc", "bt",
"sframe"}.  ``pc`` is the frame's (an inline frame's is that of the stack
frame it sits in: bt and sframe-bt print it on the innermost line only),
``name`` as printed (bt's argument list cut: `set print frame-arguments
none` prints ``(...)``), ``where`` `` at FILE:LINE``, `` from LIB`` or "",
``kind`` "inline", "tailcall" or "frame" (GDB's frame types; sframe-bt's
-v tags).

Commands:

``test-frame-lines HOW``
    compare the stop the program is at.
``test-interrupt-lines SEED COUNT``
    COUNT times: continue, interrupted by SIGINT after a drawn delay (up
    to 50 ms), and compare.
``test-stepi-lines COUNT``
    COUNT times: stepi, and compare.

Nothing here reads sfbt's code: `sframe-bt` is run as a user runs it."""

import json
import os
import sys

import gdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_lines import parsed, to_main, with_kinds  # noqa: E402
from gdb_interrupts import interrupted_stops, run  # noqa: E402

_KINDS = {gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall"}


def gdb_lines():
    """bt's frame lines, each with the pc and kind of GDB's frame."""
    lines = parsed(run("bt"))
    frame = gdb.newest_frame()
    for line in lines:
        if frame is None:
            line[1], line[4] = None, "missing"
            continue
        line[1] = int(frame.pc())
        line[4] = _KINDS.get(frame.type(), "frame")
        try:
            frame = frame.older()
        except gdb.error:
            frame = None
    return to_main(lines)


def sframe_lines():
    return to_main(with_kinds(parsed(run("sframe-bt -v"))))


def compare(how):
    if not gdb.selected_inferior().pid:
        return False
    pc = int(gdb.newest_frame().pc())
    gdb.write("FRAMES " + json.dumps({"how": how, "pc": pc, "bt": gdb_lines(),
                                      "sframe": sframe_lines()}) + "\n")
    return True


class FrameLines(gdb.Command):
    def __init__(self):
        super().__init__("test-frame-lines", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        compare(argument.strip() or "stop")


class InterruptLines(gdb.Command):
    def __init__(self):
        super().__init__("test-interrupt-lines", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        seed, count = (int(word) for word in argument.split())
        for _ in interrupted_stops(seed, count):
            if not compare("interrupt"):
                return


class StepiLines(gdb.Command):
    def __init__(self):
        super().__init__("test-stepi-lines", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        for _ in range(int(argument)):
            run("stepi")
            if not compare("stepi"):
                return


FrameLines()
InterruptLines()
StepiLines()
