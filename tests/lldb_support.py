"""Driving the real lldb in batch mode with the plugin loaded."""

import re

from conftest import ROOT
from gdb_support import sframe_frames

LLDB_PCS = ROOT / "tests" / "lldb_pcs.py"


def run_lldb(lldb, program, commands, timeout=300, environment=None):
    """Run ``lldb`` (a tests/debuggers.Debugger) in batch mode with the
    plugin and `test-lldb-pcs` loaded; its whole output."""
    return lldb.run([program] if program else [], commands, timeout,
                    extra_files=[LLDB_PCS], environment=environment)


def mark(name):
    """A command that prints ==NAME== (the command's echo does not)."""
    return f"script print('==%s==' % '{name}')"


def lldb_pcs(text):
    return [[int(p, 16) for p in line.split()[1:]]
            for line in text.splitlines() if line.startswith("LLDB-PCS")]


def stack_frames(text):
    """[(level, pc, function)] of the stack frames sframe-bt prints in LLDB:
    its lines but those of inlined calls (marked [inlined])."""
    return sframe_frames("\n".join(line for line in text.splitlines()
                                    if not line.endswith(" [inlined]")))


_NAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+?)(?: at | from | \(\)| \[|$)", re.M)


def frame_names(text):
    """The function names of sframe-bt's or cbf-load's frame lines, inline
    frames included, in either layout (an inline frame with an address
    and [inlined], or without an address)."""
    return [m[2] for m in _NAME.finditer(text)]
