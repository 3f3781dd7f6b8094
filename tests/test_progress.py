"""The progress line of long first runs: shown on a terminal only, after
progress.DELAY, escaped, and wiped when the command is done."""

import io
import time

from sfbt import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_long_run_says_what_it_does_on_a_terminal_and_wipes_it(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.05)
    monkeypatch.setattr(progress, "REFRESH", 0.01)
    terminal = Terminal()
    with progress.ProgressLine(terminal):
        progress.doing("reading the symbols of lib\033[2J.so")
        time.sleep(0.3)
    text = terminal.getvalue()
    assert "\rsfbt: reading the symbols of lib\\033[2J.so...\033[K" in text
    assert text.endswith("\r\033[K")
    assert "\033[2J" not in text.replace("\\033[2J", "")


def test_a_short_run_and_a_pipe_show_nothing(monkeypatch):
    monkeypatch.setattr(progress, "REFRESH", 0.01)
    terminal = Terminal()
    with progress.ProgressLine(terminal):
        progress.doing("reading the unwind data of libc.so.6")
    assert terminal.getvalue() == ""
    monkeypatch.setattr(progress, "DELAY", 0.0)
    pipe = io.StringIO()
    with progress.ProgressLine(pipe):
        progress.doing("reading the unwind data of libc.so.6")
        time.sleep(0.1)
    assert pipe.getvalue() == ""
