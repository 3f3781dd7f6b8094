"""sframe-bt's frame lines in each debugger's words.

Both debuggers print a stack frame as GDB's `bt` does (``#N  0xADDR in
FUNC at FILE:LINE``); they differ in the frames of the calls inlined
into it, each a frame of its own, innermost first.  GDB's `bt` shows
the address on the innermost of those lines only; LLDB's shows one on
every line and marks inlined code ``[inlined]``."""

from ..archive.frames import frame_line, inline_frame_line


class GdbLayout:
    """GDB's `bt`: the frame's address on the innermost of its lines (the
    frame's own line, where -v and -full say how it was found); the
    functions it sits in follow without one."""

    #: what -v says of a line that is not the frame's own
    inline_how = "inline"

    @staticmethod
    def is_own(index, last):
        """Whether line ``index`` of a stack frame's lines ``0 .. last``
        is the one that carries the frame's own facts."""
        return index == 0

    @staticmethod
    def line(level, pc, name, where, index, last):
        if index == 0:
            return frame_line(level, pc, name, where)
        return inline_frame_line(level, name, where)


class LldbLayout:
    """LLDB's `bt`: every line with the frame's address, a call inlined
    into the next line's function marked ``[inlined]``; the function the
    code is in (the last line, LLDB's frame of that stack frame) is the
    frame's own line.  (LLDB shows, on the lines after the innermost,
    where the inlined code they call starts, and marks only the inline
    frames whose call does not sit inside a nested block, a loop's say:
    sframe-bt shows the frame's address and marks every inlined call.)"""

    inline_how = None  # [inlined] says it

    @staticmethod
    def is_own(index, last):
        return index == last

    @staticmethod
    def line(level, pc, name, where, index, last):
        line = frame_line(level, pc, name, where)
        return line + " [inlined]" if index < last else line


#: the layout of each Session.debugger; any other (sfbt's own commands) GDB's
LAYOUTS = {"gdb": GdbLayout, "lldb": LldbLayout}


def layout_of(debugger):
    return LAYOUTS.get(debugger, GdbLayout)
