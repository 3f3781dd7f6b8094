"""Driving the real lldb in batch mode with the plugin loaded."""

import re
import shutil
import subprocess

from conftest import ROOT

LLDB_ENTRY = ROOT / "lldb" / "sfbt_lldb.py"
LLDB_PCS = ROOT / "tests" / "lldb_pcs.py"


def lldb_binary():
    return shutil.which("lldb") or "lldb-22"


def run_lldb(program, commands, timeout=300):
    command = [lldb_binary(), "--no-lldbinit", "-b",
               "-o", "settings set auto-confirm true",
               "-o", f"command script import {LLDB_ENTRY}",
               "-o", f"command script import {LLDB_PCS}"]
    for line in commands:
        command += ["-o", line]
    result = subprocess.run(command + [str(program)], capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL)
    return result.stdout + result.stderr


def mark(name):
    """A command that prints ==NAME== (the command's echo does not)."""
    return f"script print('==%s==' % '{name}')"


def lldb_pcs(text):
    return [[int(p, 16) for p in line.split()[1:]]
            for line in text.splitlines() if line.startswith("LLDB-PCS")]


def lldb_version():
    out = subprocess.run([lldb_binary(), "--version"], capture_output=True, text=True).stdout
    match = re.search(r"lldb version (\d+)", out)
    return int(match[1]) if match else 0
