"""The base of every error sfbt reports, so that each front end (a GDB or
LLDB command, the command line) catches one type and prints one line."""


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


#: what a limit left out of the current command's answer, one line each
#: (in order, once each, the first NOTES_KEPT): the front end says it in
#: one warning line; [0] counts the notes past those
_left_out: dict = {}
_notes_past = [0]
NOTES_KEPT = 64


def left_out(line: str) -> None:
    """Note that a limit (a hostile file's table too large, a damaged one
    passed over) left something out of the answer: ``line`` names what and
    where (file, section, offset)."""
    if line in _left_out:
        return
    if len(_left_out) < NOTES_KEPT:
        _left_out[line] = None
    else:
        _notes_past[0] += 1


def left_out_warning() -> str | None:
    """The one line saying what the command left out since the last call
    (the first note, and how many more), or None; the notes are cleared."""
    notes, past = list(_left_out), _notes_past[0]
    _left_out.clear()
    _notes_past[0] = 0
    if not notes:
        return None
    more = len(notes) - 1 + past
    return notes[0] + (f" (and {more} more left out)" if more else "")
