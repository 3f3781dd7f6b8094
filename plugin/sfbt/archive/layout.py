"""Frame lines in each debugger's words: sframe-bt's, and cbf-load's and
the command line's for saved backtraces.

Both debuggers print a stack frame as GDB's `bt` does (``#N  0xADDR in
FUNC at FILE:LINE``); they differ in the frames of the calls inlined
into it, each a frame of its own, innermost first.  GDB's `bt` shows
the address on the innermost of those lines only; LLDB's shows one on
every line and marks inlined code ``[inlined]``.

A layout gives a line after its level (``text``), which does not change
with the level: a saved frame's texts are made once however often the
frame is printed (report.FrameTexts).  Every namer gives a frame's name
as one record (sfbt.frame_name.FrameName); ``texts`` formats it here, the
only place, escaping each name and path (sfbt.printable) so that a
hostile symbol or path cannot forge a line.  (Not in report.py, which
sframe-bt's text does not import: nor the archive's codecs it imports.)"""

import os

from ..printable import printable

#: the kernel's signal trampoline as GDB's bt names it, and sframe-bt and
#: every reader of a saved trace in either debugger's layout
SIGNAL_TRAMPOLINE = "<signal handler called>"


class Layout:
    """The lines of a stack frame: ``index`` counts its lines ``0 ..
    last``, innermost first (the calls inlined at its PC, then the
    function's own)."""

    #: what -v says of a line that is not the frame's own (None: nothing)
    inline_how = None
    #: whether the debugger's bt shows the frames tail calls left off the
    #: stack (sfbt.symbols.tail_calls)
    tail_calls = False
    #: whether it shows them only where one path of tail calls leads to
    #: the callee (LLDB's rule; GDB's keeps what every path shares)
    unique_tail_calls = False
    #: what follows a tail-call frame's line
    tail_call_mark = ""

    @staticmethod
    def source_name(path):
        """A source file's name as the debugger's bt shows it."""
        raise NotImplementedError

    @staticmethod
    def is_own(index, last):
        """Whether line ``index`` is the one that carries the frame's own
        facts (-v's how, -full's registers): the function's own line, the
        last; the lines before it are inlined calls (GDB's `info frame`
        says each is "inlined into" the next frame)."""
        return index == last

    @staticmethod
    def text(pc, name, where, index, last):
        """Line ``index`` of the frame at ``pc`` after its level."""
        raise NotImplementedError

    @classmethod
    def where(cls, name):
        """What follows a FrameName's function on its line, escaped: ``
        at FILE:LINE``, `` from LIBRARY`` or `` ()``."""
        if name.file is not None:
            return f" at {printable(cls.source_name(name.file))}:{name.line}"
        if name.module is not None:
            return f" from {printable(name.module)}"
        return " ()"

    @classmethod
    def texts(cls, pc, name):
        """The texts of the lines of the frame at ``pc`` named ``name`` (a
        FrameName), innermost first: the calls inlined there, then the
        function's own."""
        lines = name.lines()
        last = len(lines) - 1
        return tuple(cls.text(pc, printable(line.function or "??"), cls.where(line),
                              index, last)
                     for index, line in enumerate(lines))

    @classmethod
    def signal_trampoline_text(cls, pc):
        """The line of the kernel's signal trampoline at ``pc``: one line,
        named SIGNAL_TRAMPOLINE, with nothing after the name."""
        return cls.text(pc, SIGNAL_TRAMPOLINE, "", 0, 0)


class GdbLayout(Layout):
    """GDB's `bt`: the frame's address on the innermost of its lines; the
    functions it sits in follow without one.  -v marks the inlined calls
    ``[inline]``.  The frames of tail calls rebuilt from DWARF call sites
    are frames of their own (GDB's TAILCALL_FRAME), -v marks them
    ``[tailcall]``."""

    inline_how = "inline"
    tail_calls = True

    @staticmethod
    def source_name(path):
        return path  # as the debug information gives it

    @staticmethod
    def text(pc, name, where, index, last):
        if index == 0:
            return f"{pc:#018x} in {name}{where}"
        return f"{name}{where}"


class LldbLayout(Layout):
    """LLDB's `bt`: every line with the frame's address, a call inlined
    into the next line's function marked ``[inlined]``; the function the
    code is in (the last line, LLDB's frame of that stack frame) is the
    frame's own line.  The frames of tail calls on the one path a caller's
    call site has to its callee are frames of their own, marked
    ``[artificial]``.  (LLDB shows, on the lines after the innermost,
    where the inlined code they call starts, and marks only the inline
    frames whose line does not sit inside a block nested in the inlined
    function, one of its local variables or of a loop, say: this layout
    shows the frame's address and marks every inlined call.)"""

    tail_calls = True
    unique_tail_calls = True
    tail_call_mark = " [artificial]"

    @staticmethod
    def source_name(path):
        return os.path.basename(path)

    @staticmethod
    def text(pc, name, where, index, last):
        text = f"{pc:#018x} in {name}{where}"
        return text + " [inlined]" if index < last else text


#: the layout of each Session.debugger; any other (sfbt's own commands) GDB's
LAYOUTS = {"gdb": GdbLayout, "lldb": LldbLayout}


def layout_of(debugger):
    return LAYOUTS.get(debugger, GdbLayout)
