"""The debuggers the suite runs its GDB and LLDB tests on.

Each test that drives a debugger runs once per *slot*: Debian's GDB, the
PyPI GDB (gdb-for-pwndbg), Debian's LLDB (any lldb-19 ... lldb-23 with
working Python bindings), LLDB 19 (Debian 12's own) and the PyPI LLDB
(lldb-for-pwndbg).  The PyPI builds live in venvs that `./install.sh
--test-debuggers` makes under ``$XDG_CACHE_HOME/sfbt/debuggers``
(``SFBT_DEBUGGERS`` overrides it), and LLDB 19 beside them, unpacked from
Debian's packages (``lldb-19/bin/lldb``) since its Python bindings cannot
be installed with another LLDB's; when Debian's LLDB is itself 19 it fills
both places.
Test ids name the debugger: ``test_x[gdb-18.1]``.  A slot with no
debugger set up skips its tests when run by hand and fails them under
``CI=true`` (conftest.require).
"""

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GDB_ENTRY = ROOT / "gdb" / "sfbt_gdb.py"
LLDB_ENTRY = ROOT / "lldb" / "sfbt_lldb.py"


def debugger_home():
    explicit = os.environ.get("SFBT_DEBUGGERS")
    if explicit:
        return Path(explicit)
    # conftest saved the user's cache directory before pointing
    # XDG_CACHE_HOME at a private one for the test run.
    cache = os.environ.get("SFBT_USER_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "sfbt" / "debuggers"


@dataclass(frozen=True)
class Debugger:
    """One debugger binary of the matrix."""

    kind: str  # "gdb" or "lldb"
    command: str  # its path
    version: str  # "13.1"
    origin: str  # "debian" or "pypi"

    @property
    def id(self):
        return f"{self.kind}-{self.version}"

    @property
    def major(self):
        return int(self.version.split(".")[0])

    def run(self, arguments, commands, timeout=300, plugin=True, extra_files=(),
            environment=None):
        """The debugger in batch mode with ``commands`` (one -ex / -o each)
        and, unless ``plugin`` is False, the plugin and ``extra_files``
        (test helper commands) loaded; ``environment`` adds to os.environ.
        Returns its whole output."""
        if self.kind == "gdb":
            command = [self.command, "-nx", "-batch", "-ex", "set pagination off",
                       "-ex", "set confirm off"]
            if plugin:
                for entry in (GDB_ENTRY, *extra_files):
                    command += ["-ex", f"source {entry}"]
            for line in commands:
                command += ["-ex", line]
        else:
            command = [self.command, "--no-lldbinit", "-b",
                       "-o", "settings set auto-confirm true"]
            if plugin:
                for entry in (LLDB_ENTRY, *extra_files):
                    command += ["-o", f"command script import {entry}"]
            for line in commands:
                command += ["-o", line]
        result = subprocess.run(command + [str(a) for a in arguments],
                                capture_output=True, text=True, timeout=timeout,
                                stdin=subprocess.DEVNULL,
                                env=dict(os.environ, **(environment or {})))
        return result.stdout + result.stderr


@dataclass(frozen=True)
class Slot:
    """A place in the matrix, filled by a Debugger or left empty."""

    kind: str
    origin: str
    debugger: Debugger = None

    @property
    def id(self):
        if self.debugger is not None:
            return self.debugger.id
        return f"{self.kind}-{self.origin}-missing"

    @property
    def missing_reason(self):
        return (f"no {self.origin} {self.kind} set up "
                f"(./install.sh --test-debuggers sets up all but Debian's)")


_VERSION = {"gdb": re.compile(r"^GNU gdb .*?(\d+\.\d+)", re.M),
            "lldb": re.compile(r"lldb version (\d+\.\d+)")}


def _probe(kind, command, origin):
    """A Debugger for ``command`` if it runs (and, for LLDB, is 19 or newer
    and can import its Python module), else None."""
    path = shutil.which(command)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION[kind].search(out)
    if match is None:
        return None
    debugger = Debugger(kind, path, match[1], origin)
    if kind == "lldb":
        if debugger.major < 19:
            return None
        out = debugger.run([], ["script print('PYTHON-' + 'OK')"], timeout=60,
                           plugin=False)
        if "PYTHON-OK" not in out:
            return None
    return debugger


def _first(kind, commands, origin):
    for command in commands:
        debugger = _probe(kind, command, origin)
        if debugger is not None:
            return debugger
    return None


@functools.lru_cache(maxsize=None)
def gdb_slots():
    home = debugger_home()
    return (Slot("gdb", "debian", _first("gdb", ["/usr/bin/gdb"], "debian")),
            Slot("gdb", "pypi", _first("gdb", [str(home / "gdb" / "bin" / "gdb")], "pypi")))


@functools.lru_cache(maxsize=None)
def cross_gdb_slots():
    """GDBs that debug AArch64 and s390x: Debian's gdb-multiarch and the
    PyPI GDB (built with every target)."""
    home = debugger_home()
    return (Slot("gdb", "debian", _first("gdb", ["/usr/bin/gdb-multiarch"], "debian")),
            Slot("gdb", "pypi", _first("gdb", [str(home / "gdb" / "bin" / "gdb")], "pypi")))


@functools.lru_cache(maxsize=None)
def lldb_slots():
    home = debugger_home()
    debian = _first("lldb", ["/usr/bin/lldb"] + [f"/usr/bin/lldb-{n}" for n in range(23, 18, -1)],
                    "debian")
    pypi = Slot("lldb", "pypi", _first("lldb", [str(home / "lldb" / "bin" / "lldb")], "pypi"))
    if debian is not None and debian.major == 19:
        return (Slot("lldb", "debian", debian), pypi)
    lldb19 = _first("lldb", [str(home / "lldb-19" / "bin" / "lldb")], "unpacked")
    return (Slot("lldb", "debian", debian), Slot("lldb", "unpacked", lldb19), pypi)



#: the first LLDB with scripted frame providers (sframe-provider)
FRAME_PROVIDERS = 22


def provider_lldb_slots():
    """The LLDB slots whose LLDB has frame providers (a slot whose LLDB is
    missing stays, so that CI fails on it)."""
    return tuple(slot for slot in lldb_slots()
                 if slot.debugger is None or slot.debugger.major >= FRAME_PROVIDERS)