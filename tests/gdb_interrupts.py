"""Imported by the scripts loaded into gdb (tests/gdb_frame_lines.py,
tests/gdb_inline_stops.py): a command run with its error as text, and
the program stopped at random places by SIGINT."""

import random
import signal
import subprocess

import gdb

#: the longest delay (seconds) before the SIGINT that stops the program
MAX_DELAY = 0.05


def run(command):
    """``command``'s output, or its error as a line "error: ..."."""
    try:
        return gdb.execute(command, to_string=True)
    except gdb.error as error:
        return f"error: {error}\n"


def interrupted_stops(seed, count):
    """Up to ``count`` times, the program continued and interrupted by
    SIGINT after a delay drawn from ``seed`` (up to MAX_DELAY): a stop
    yielded each time; none more once the program has exited."""
    draw = random.Random(seed)
    for _ in range(count):
        pid = gdb.selected_inferior().pid
        if not pid:
            return
        # a process apart from gdb, so that the signal comes while
        # `continue` runs
        killer = subprocess.Popen(["sh", "-c", f"sleep {draw.uniform(0.001, MAX_DELAY):.4f};"
                                   f" kill -{signal.SIGINT.value} {pid}"])
        run("continue")
        killer.wait()
        yield
