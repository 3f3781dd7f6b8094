"""The base of every error sfbt reports, so that each front end (a GDB or
LLDB command, the command line) catches one type and prints one line."""

import sys


class SfbtError(Exception):
    """A failure the user is told about in one line: its text."""


class LocatedError(SfbtError):
    """Bad input at a known place, printed ``WHERE+0xOFFSET: message``.

    ``where`` names the input (a file, a section, a format such as CBF);
    either part may be unknown.  A reader that knows only the offset lets
    its caller fill in ``where`` (the file it read).
    """

    default_where: str | None = None

    def __init__(self, message: str, offset: int | None = None,
                 where: str | None = None):
        self.message = message
        self.offset = offset
        self.where = where if where is not None else self.default_where
        super().__init__(message)

    def __str__(self) -> str:
        if self.offset is None:
            return self.message if self.where is None else f"{self.where}: {self.message}"
        if self.where is None:
            return f"offset {self.offset:#x}: {self.message}"
        return f"{self.where}+{self.offset:#x}: {self.message}"


class CommandError(SfbtError):
    """Bad command arguments, or a command that cannot run now (a debugger
    command or the command line): printed as one line."""


class TargetMemoryError(SfbtError):
    """Memory the target (a debugger, a process, a core, an ELF image read
    from memory) cannot read."""

    def __init__(self, address: int, size: int = 1) -> None:
        self.address = address
        self.size = size
        super().__init__(f"Cannot access memory at address {address:#x}")


class EncodeError(SfbtError, ValueError):
    """A value the output format cannot hold (an address too wide for the
    word size, too many frames, ...)."""


_said: "set[str]" = set()


def left_out(text: str) -> None:
    """Say once, in one line on standard error, what a limit left out of a
    table or an output (``FILE: .symtab: N symbols beyond ... left out``):
    the command goes on with the rest."""
    if text not in _said:
        _said.add(text)
        print(f"sfbt: warning: {text}", file=sys.stderr, flush=True)
