"""A frame's name as every namer gives it (the symbolizer of a module's or
an archived image's files, GDB's own symbols, LLDB's own): one record,
formatted in one place, in each debugger's layout (sfbt.archive.layout),
and named in folded stacks by its functions.

The strings are as the namer read them (a hostile symbol or path
included): whoever prints them escapes them (sfbt.printable)."""

from __future__ import annotations

from .values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple


class FrameName(Value):
    """The name of a frame at a PC: ``function`` as the debugger prints it
    (None: unknown, ``??``), the source ``file`` and ``line`` (file None:
    no line known), ``module``, the library to say the code is from when
    no line is known (None: the program itself, or unknown, printed
    ``()``), and ``inlined``, the FrameNames of the calls inlined at the
    PC, innermost first, each a frame of its own in the debuggers' `bt`
    (their file and line where the call inside them is).  ``tail_call``:
    the frame of a call that left with a jump, rebuilt from DWARF call
    sites (sfbt.symbols.tail_calls), as GDB's `bt` shows it."""

    __slots__ = _fields = ("function", "file", "line", "module", "inlined", "tail_call")

    def __init__(self, function: Optional[str], file: Optional[str] = None, line: int = 0,
                 module: Optional[str] = None, inlined: Tuple["FrameName", ...] = (),
                 tail_call: bool = False):
        self.function = function
        self.file = file
        self.line = line
        self.module = module
        self.inlined = inlined
        self.tail_call = tail_call

    def lines(self) -> Tuple["FrameName", ...]:
        """The frame's lines in a `bt`, innermost first: the calls inlined
        at its PC, then the function's own (this record)."""
        return (*self.inlined, self) if self.inlined else (self,)

    def functions(self) -> Tuple[Optional[str], ...]:
        """The functions of lines(), innermost first (None where unknown)."""
        if not self.inlined:
            return (self.function,)
        return tuple(name.function for name in self.lines())

    def as_tail_call(self) -> "FrameName":
        """The frame of a tail call whose return lands at this frame's PC:
        named after its innermost function, with no inline frames."""
        first = self.inlined[0] if self.inlined else self
        return FrameName(first.function, first.file, first.line, first.module, (), True)


#: a frame nothing is known of
UNKNOWN = FrameName(None)
