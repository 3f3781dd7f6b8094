"""The file behind each mapping: a program replaced or deleted on disk
after it started is read through /proc/PID/map_files (root), and a core's
library whose file on disk is another build is not believed."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import live_harness as harness
from conftest import require
from test_stack import readable_copy_of_the_package


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
    from sfbt.elf import read_build_id
    original = read_build_id(str(program))
    other = _another_build(tmp_path, program)
    other_id = read_build_id(str(other))
    os.replace(other, program)
    after = harness.sfbt_command("stack", "--core", core)
    assert after.returncode == 0, after.stderr
    # never frames from the new file: the same frames, as far as the core's
    # own copy of the program's pages (and names cached for its build id)
    # lead, and a stack cut short says why
    right = harness.parse_stacks(before.stdout)
    for tid, stack in harness.parse_stacks(after.stdout).items():
        assert stack.pcs == right[tid].pcs[:len(stack.pcs)], after.stdout
        if len(stack.pcs) < len(right[tid].pcs):
            assert stack.stop.endswith(f"(in {program} (build id {other_id} on disk, "
                                       f"not the core's {original}))"), after.stdout
    assert "register_tm_clones" not in after.stdout


def test_without_root_a_file_of_the_same_build(tmp_path):
    """A user who may not open /proc/PID/map_files: a file of the same
    build id at the path is read (a copy, or a file system such as
    overlayfs that reports other device numbers); another build is not,
    and the frames say so."""
    require(os.geteuid() == 0, "running a process as another user takes root")
    (tmp_path / "build").mkdir()
    built, _ = harness.build_busy(tmp_path / "build")
    shared = Path(tempfile.mkdtemp(prefix="sfbt-test-nobody-"))
    try:
        shared.chmod(0o777)
        program = shared / "busy"
        shutil.copy(built, program)
        program.chmod(0o755)
        readable_copy_of_the_package(shared / "package")
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

        def as_nobody():
            os.setgid(65534)
            os.setuid(65534)

        def stack(pid):
            cache = Path(tempfile.mkdtemp(dir=shared))
            cache.chmod(0o777)
            return subprocess.run(
                [python, "-m", "sfbt", "stack", str(pid)], preexec_fn=as_nobody,
                capture_output=True, text=True, timeout=120, cwd="/",
                env=dict(os.environ, PYTHONPATH=str(shared / "package"),
                         XDG_CACHE_HOME=str(cache)))

        running = subprocess.Popen([str(program), "1", "-", "300"], preexec_fn=as_nobody,
                                   stdout=subprocess.PIPE, text=True)
        try:
            assert running.stdout.readline().strip() == "ready"
            copy = shared / "copy"
            shutil.copy(program, copy)
            os.replace(copy, program)  # the same build, another inode
            same = stack(running.pid)
            os.replace(_another_build(tmp_path, program), program)
            other = stack(running.pid)
        finally:
            running.kill()
            running.wait()
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert same.returncode == 0, same.stderr
    assert " in descend " in same.stdout and "replaced" not in same.stdout, same.stdout
    assert other.returncode == 0, other.stderr
    assert "register_tm_clones" not in other.stdout and " in descend " not in other.stdout
    assert f"from {program} (replaced since it was mapped; its file cannot be read)" \
        in other.stdout, other.stdout
