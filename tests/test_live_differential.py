"""sfbt stack and sfbt record on a process whose threads keep running
(tests/live_harness.py, a short run; bench/live_differential.py runs it
long): every stack walked while the threads run is complete; stopped,
every thread's PCs and number equal GDB's; its core read with the
executable named by a relative or an absolute path, the same."""

import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest

import live_harness as harness
from gdb_support import compile_library, compile_program

#: busy.c's threads: 3 workers, the loader, main; 300 us asleep at the
#: bottom of each recursion (the machine is shared)
WORKERS, NAP = 3, 300


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    return harness.build_busy(tmp_path_factory.mktemp("busy"))


def _started(busy):
    program, library = busy
    return harness.Started([program, WORKERS, library, NAP])


def test_running_stacks_are_complete(busy):
    """The stack pages around SP come from the copy made while the thread
    was stopped, never from the process that ran on (before, 10 of 100
    stacks were complete)."""
    walks = harness.LiveWalks()
    tally = harness.Tally()
    with _started(busy) as running:
        harness.walk_running(running.pid, walks, 12, tally, harness.BUSY_STARTS)
    assert tally.walked == 12 * (WORKERS + 2)
    assert tally.complete == tally.walked, "\n\n".join(tally.problems[:3])


def test_stopped_stacks_equal_gdbs(gdb, busy, tmp_path):
    """Stopped with SIGSTOP: each thread's PCs and number as GDB's own
    frames (inline and tail-call frames left out), and the process's core
    read with the executable named relatively or absolutely, the same."""
    program, _ = busy
    walks = harness.LiveWalks()
    comparison = harness.Comparison()
    core = tmp_path / "busy.core"
    with _started(busy) as running:
        for _ in range(2):
            harness.stopped_comparison(gdb.command, running.pid, walks, tmp_path, comparison,
                                       numbers=gdb.major == 13)
        os.kill(running.pid, signal.SIGSTOP)
        harness.wait_stopped(running.pid)
        live = walks.stacks(running.pid)
        made = subprocess.run([gdb.command, "-nx", "-batch", "-p", str(running.pid),
                               "-ex", f"gcore {core}"], capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)
        assert core.exists(), made.stdout + made.stderr
    assert comparison.threads == 2 * (WORKERS + 2)
    assert comparison.equal == comparison.threads and not comparison.differences, \
        "\n\n".join(comparison.differences[:3])
    theirs = harness.gdb_threads(gdb.command, [program, core], tmp_path)
    differing = [f"GDB on the core: {[hex(pc) for pc in pcs]}\n{live[tid].describe()}"
                 if tid in live else f"thread {tid}: not walked live"
                 for tid, (_, pcs) in theirs.items() if tid not in live or live[tid].pcs != pcs]
    assert not differing and theirs.keys() == live.keys(), "\n\n".join(differing)
    for executable, cwd in ((program.name, program.parent), (program, None)):
        result = harness.sfbt_command("stack", "--core", core, executable, cwd=cwd)
        assert result.returncode == 0, result.stderr
        from_core = harness.Comparison()
        harness.compare_with_gdb(harness.parse_stacks(result.stdout), theirs, from_core)
        assert from_core.equal == from_core.threads == WORKERS + 2, \
            "\n\n".join(from_core.differences[:3])


def test_recorded_stacks_are_complete(busy, tmp_path):
    archive = tmp_path / "busy.sfbt"
    with _started(busy) as running:
        recorded = harness.sfbt_command("record", "--idle", "-p", running.pid, "--hz", "40",
                                        "--duration", "1.5", "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    stacks = harness.recorded_stacks(archive)
    tally = harness.Tally()
    tally.add(dict(enumerate(stacks)), harness.BUSY_STARTS)
    assert tally.walked >= 10
    assert tally.complete == tally.walked, "\n\n".join(tally.problems[:3])


def test_recorded_stacks_name_a_library_loaded_after_the_maps_were_read(tmp_path):
    """late_library.c loads liblate.so 200 ms after sfbt record seized it
    and spins in it from then on: each sample copied before the mappings
    are read again is walked in the mappings read before the library
    came, where its PC is in no module (the walk went on by the return
    address at SP, leaving frame #0 without a name).  sfbt reads the
    mappings again and walks it anew: every stack is named."""
    library = compile_library(tmp_path, "liblate.so", "O2", ["liblate.c"])
    program = compile_program(tmp_path, "late_library", "O2", True, ["late_library.c"])
    archive = tmp_path / "late.sfbt"
    with harness.Started([program, library]) as running:
        recorded = harness.sfbt_command("record", "--idle", "-p", running.pid, "--hz", "50",
                                        "--duration", "0.8", "-o", archive)
        with open(f"/proc/{running.pid}/maps") as maps:
            spans = [[int(end, 16) for end in line.split()[0].split("-")]
                     for line in maps if line.rstrip().endswith("/liblate.so")]
    assert recorded.returncode == 0, recorded.stderr
    stacks = harness.recorded_stacks(archive)
    # those copied in the library (not those asleep before, or in dlopen)
    spinning = [stack for stack in stacks
                if any(start <= stack.frames[0][0] < end for start, end in spans)]
    assert spinning, "\n\n".join(stack.describe() for stack in stacks)
    for stack in spinning:
        assert [name for _, name in stack.frames] == ["library_spin", "main"], stack.describe()


@contextmanager
def _late_library(tmp_path, reader):
    """late_library.c started, ``reader(pid)`` (a Process of sfbt's) made
    of it before it loads liblate.so, then the library loaded and spun in
    (dlopen, then library_spin): that Process."""
    library = compile_library(tmp_path, "liblate.so", "O2", ["liblate.c"])
    program = compile_program(tmp_path, "late_library", "O2", True, ["late_library.c"])
    go = tmp_path / "go"
    with harness.Started([program, library, go]) as running:
        process = reader(running.pid)
        try:
            assert not any(m.path.endswith("/liblate.so") for m in process.mappings)
            go.touch()
            deadline = time.monotonic() + 30
            while "liblate.so" not in open(f"/proc/{running.pid}/maps").read():
                assert time.monotonic() < deadline, "liblate.so never loaded"
                time.sleep(0.05)
            time.sleep(0.2)  # from dlopen into library_spin
            yield process
        finally:
            process.close()


def _in_the_library(process, state):
    holding = [m for m in process.mappings
               if m.start <= state.registers[process.arch.pc] < m.end]
    return bool(holding) and holding[0].path.endswith("/liblate.so")


def test_a_thread_copied_in_a_library_loaded_after_the_maps_were_read(tmp_path):
    """sfbt stack reads the mappings before it copies each thread: a
    thread copied inside code mapped since (busy.c's loader, in a
    library's initializers) had frame #0 without a name, where the library
    was unloaded before the mappings were read again.  Once a copied
    thread's PC is in no mapping, they are read again while it is still
    stopped, and hold the library."""
    from sfbt.live.process import Process
    with _late_library(tmp_path, Process) as process:
        state = process.snapshot(process.pid, "late_library")
        assert _in_the_library(process, state), process.mappings


def test_a_thread_sampled_in_a_library_loaded_after_the_maps_were_read(tmp_path):
    """The same for `sfbt record --idle`, whose threads stay seized
    (SeizedProcess): a thread copied with its PC in no mapping read so far
    has the mappings read again before it runs on (the walk, later, could
    find the library unloaded and leave frame #0 without a name)."""
    from sfbt.live.process import SeizedProcess
    with _late_library(tmp_path, SeizedProcess) as process:
        process.interrupt([(process.pid, "late_library")])
        states, _ = process.collect(time.perf_counter() + 10, time.sleep)
        assert _in_the_library(process, states[process.pid]), process.mappings


def _one_line(result, pattern):
    assert result.returncode == 1, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and re.fullmatch(pattern, lines[0]), result.stderr


def test_record_says_why_nothing_was_recorded(busy, tmp_path):
    """A traced process: sfbt stack's reason, exit 1, no archive."""
    import ctypes
    archive = tmp_path / "none.sfbt"
    with _started(busy) as running:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.ptrace(0x4206, running.pid, None, None) == 0  # PTRACE_SEIZE
        try:
            recorded = harness.sfbt_command("record", "--idle", "-p", running.pid, "--duration", "1",
                                            "-o", archive)
            stacked = harness.sfbt_command("stack", running.pid)
        finally:
            libc.ptrace(0x4207, running.pid, None, None)  # PTRACE_INTERRUPT
            os.waitpid(running.pid, 0x40000000)
            libc.ptrace(17, running.pid, None, None)  # PTRACE_DETACH
    reason = (rf"sfbt: cannot trace process {running.pid}: it is already traced by "
              rf"process {os.getpid()} \(a debugger\?\)")
    _one_line(recorded, reason)
    _one_line(stacked, reason)
    assert not archive.exists()


def test_record_of_a_process_that_exited(tmp_path):
    """A process that exited (a zombie, not yet waited for): sfbt stack's
    line, exit 1, no archive."""
    archive = tmp_path / "none.sfbt"
    exited = subprocess.Popen(["true"])
    try:
        for _ in range(200):
            if harness.thread_state(exited.pid) == "Z":
                break
            time.sleep(0.05)
        recorded = harness.sfbt_command("record", "--idle", "-p", exited.pid, "-o", archive)
        stacked = harness.sfbt_command("stack", exited.pid)
    finally:
        exited.wait()
    _one_line(recorded, rf"sfbt: process {exited.pid} exited")
    _one_line(stacked, rf"sfbt: process {exited.pid} exited")
    assert not archive.exists()
