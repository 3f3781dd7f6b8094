"""One progress line on a terminal for the command line's long first runs
(reading a big library's unwind data or symbols the first time): the
code says what it is doing with ``doing()``, which costs one assignment;
under a ``ProgressLine``, once the command has run for DELAY seconds and stderr
is a terminal, a thread writes that on one line of stderr, rewritten as it
changes and wiped when the command is done."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import IO, Optional

#: seconds a command runs before its progress line is shown
DELAY = 1.0
#: seconds between two rewrites of the line
REFRESH = 0.2

_doing = ""


def doing(what: str) -> None:
    """Say what sfbt does now (untrusted names in it are escaped when shown)."""
    global _doing
    _doing = what


class ProgressLine:
    """While entered, the progress line on ``stream`` (stderr) when it is
    a terminal."""

    #: set to end the thread (made with it: only a terminal's line imports
    #: threading)
    _stop: threading.Event

    def __init__(self, stream: Optional[IO[str]] = None):
        self.stream = stream or sys.stderr
        self._thread: Optional[threading.Thread] = None
        self._written = False

    def __enter__(self) -> "ProgressLine":
        self.start()
        return self

    def __exit__(self, *exception: object) -> None:
        self.stop()

    def start(self) -> None:
        """Show the line from DELAY seconds on (a terminal only)."""
        try:
            terminal = self.stream.isatty()
        except (AttributeError, ValueError):
            terminal = False
        if terminal:
            import threading
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._show, daemon=True)
            self._thread.start()

    def _show(self) -> None:
        from .printable import printable
        if self._stop.wait(DELAY):
            return
        import shutil
        width = max(shutil.get_terminal_size().columns - 1, 10)
        while True:
            line = f"sfbt: {printable(_doing) if _doing else 'working'}..."
            try:
                self.stream.write("\r" + line[:width] + "\033[K")
                self.stream.flush()
            except (OSError, ValueError):
                return
            self._written = True
            if self._stop.wait(REFRESH):
                return

    def stop(self) -> None:
        """Wipe the line (again: nothing)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._written:
            try:
                self.stream.write("\r\033[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        doing("")
