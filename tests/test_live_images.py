"""The file behind each mapping: a program replaced or deleted on disk
after it started is read through /proc/PID/map_files (root), and a core's
library whose file on disk is another build is not believed."""

import os
import shutil
import signal
import subprocess

import pytest

import live_harness as harness
from conftest import require


@pytest.fixture
def program(tmp_path):
    (tmp_path / "build").mkdir()
    program, _ = harness.build_busy(tmp_path / "build")
    copy = tmp_path / "busy"
    shutil.copy(program, copy)
    return copy


def _another_build(tmp_path, like):
    """A different ELF file (another build id) to put where ``like`` was."""
    other = tmp_path / "other"
    subprocess.run(["gcc", "-O2", "-Wl,--build-id", "-o", str(other), "-x", "c", "-"],
                   input="int main(void) { return 3; }\n", text=True, check=True)
    return other


@pytest.mark.parametrize("change", ["replaced", "deleted"])
def test_a_program_changed_on_disk(program, tmp_path, change):
    require(os.geteuid() == 0, "following /proc/PID/map_files takes root")
    with harness.Started([program, 2, "-", 300]) as running:
        if change == "replaced":
            os.replace(_another_build(tmp_path, program), program)
        else:
            os.unlink(program)
        tally = harness.Tally()
        harness.walk_running(running.pid, harness.LiveWalks(), 3, tally, ("worker",))
        text = harness.sfbt_command("stack", running.pid).stdout
    assert tally.complete == tally.walked == 9, "\n\n".join(tally.problems[:3])
    assert " in descend at " in text and "register_tm_clones" not in text


def test_a_core_whose_program_was_rebuilt(program, tmp_path):
    """The core's program file now holds another build: its frames say so
    instead of taking names and rows from the wrong file."""
    core = tmp_path / "busy.core"
    with harness.Started([program, 1, "-", 300]) as running:
        os.kill(running.pid, signal.SIGSTOP)
        harness.wait_stopped(running.pid)
        made = subprocess.run(["gcore", "-o", str(tmp_path / "core"), str(running.pid)],
                              capture_output=True, text=True, timeout=300)
    (core,) = tmp_path.glob("core.*") or [None]
    assert core is not None, made.stdout + made.stderr
    before = harness.sfbt_command("stack", "--core", core)
    assert before.returncode == 0 and " in main at " in before.stdout, before.stderr
    os.replace(_another_build(tmp_path, program), program)
    after = harness.sfbt_command("stack", "--core", core)
    assert after.returncode == 0, after.stderr
    assert " in main " not in after.stdout
    assert f"(in {program} (build id " in after.stdout and ", not the core's " \
        in after.stdout, after.stdout
