"""The typed seams (the [tool.mypy] files of pyproject.toml) pass mypy."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from conftest import require

ROOT = Path(__file__).resolve().parent.parent

#: the interfaces between the layers that must stay typed
SEAMS = (
    "plugin/sfbt/errors.py",         # SfbtError, CommandError, TargetMemoryError
    "plugin/sfbt/arch.py",           # Arch
    "plugin/sfbt/cache.py",          # Cache
    "plugin/sfbt/unwind/target.py",  # Target, Module
    "plugin/sfbt/unwind/modules.py",  # ModuleMap, SFrameSources
    "plugin/sfbt/commands/session.py",  # Session
    "plugin/sfbt/sframe/model.py",   # SFrameSection
    "plugin/sfbt/archive/store.py",  # Archive
    "plugin/sfbt/symbols/symbolizer.py",  # FileSymbolizer
    "plugin/sfbt/symbols/line_table.py",  # Location
    "plugin/sfbt/live/session.py",   # SnapshotSession
)


def checked_files():
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"^\[tool\.mypy\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M)
    assert section, "pyproject.toml has no [tool.mypy] section"
    files = re.search(r"^files = \[(.*?)\]", section.group(1), re.S | re.M)
    assert files, "[tool.mypy] lists no files"
    return re.findall(r'"([^"]+)"', files.group(1))


def test_the_seams_are_checked_strictly():
    files = checked_files()
    assert set(SEAMS) <= set(files)
    for name in files:
        assert (ROOT / name).is_file(), name
    text = (ROOT / "pyproject.toml").read_text()
    for option in ("disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs"):
        assert f"{option} = true" in text


def test_mypy_passes():
    require(importlib.util.find_spec("mypy") is not None,
            "mypy is not installed (./install.sh --test-debuggers)")
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"no issues found in (\d+) source files", done.stdout)
    assert found and int(found.group(1)) == len(checked_files()), done.stdout
