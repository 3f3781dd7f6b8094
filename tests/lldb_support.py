"""Driving the real lldb in batch mode with the plugin loaded."""

from conftest import ROOT

LLDB_PCS = ROOT / "tests" / "lldb_pcs.py"


def run_lldb(lldb, program, commands, timeout=300):
    """Run ``lldb`` (a tests/debuggers.Debugger) in batch mode with the
    plugin and `test-lldb-pcs` loaded; its whole output."""
    return lldb.run([program] if program else [], commands, timeout,
                    extra_files=[LLDB_PCS])


def mark(name):
    """A command that prints ==NAME== (the command's echo does not)."""
    return f"script print('==%s==' % '{name}')"


def lldb_pcs(text):
    return [[int(p, 16) for p in line.split()[1:]]
            for line in text.splitlines() if line.startswith("LLDB-PCS")]
