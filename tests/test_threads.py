"""sfbt record and sfbt stack of processes whose threads come and go
(tests/programs/churn.c) or wait in vfork (tests/programs/vforking.c):
nothing is kept of a thread once it is gone, and a thread that cannot be
stopped is left out in one line, never waited for without end."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import PLUGIN, bench_module, run_sfbt
from gdb_support import compile_program


def test_record_of_thread_churn_keeps_memory_and_descriptors_flat(tmp_path):
    """About a thousand threads made and ended a second, recorded for 12 s:
    the recorder's resident size and descriptors after 3 s are those at
    the end (the code before kept two descriptors, a name, a stack copy
    and a walk for every thread it had seen: some 50 descriptors and
    2 MiB more each second).  Two descriptors are kept for each thread
    of the latest listing, so those follow how many threads churn.c has
    at that moment (up to AT_ONCE besides its main one, more of them
    caught alive on a loaded machine): they are bounded by that, the
    modules' files by the modules, and the others must not grow."""
    churn = bench_module("record_churn")
    figures, (code, out, err) = churn.record_churn(str(tmp_path), 12, 1, 99,
                                                   lambda *figure: None)
    assert code == 0, err
    assert re.search(r"Recorded \d+ stacks .*\(ended by SIGTERM\)", out), out
    early = [figure for figure in figures if figure[0] >= 3][0]
    last = figures[-1]
    assert last[0] >= 11
    assert all(thread_fds <= 2 * churn.AT_ONCE for *_, thread_fds, _ in figures), figures
    # the modules' files (and debug files): opened once a frame in them is
    # first walked, so some only after 3 s on a loaded machine; churn.c
    # maps itself, the C library and the loader, each a file, its debug
    # file and a descriptor for its rows at most
    assert all(module_fds <= 3 * 3 for *_, module_fds in figures), figures
    # the others: one more for a /proc file (maps, a new thread's comm)
    # being read at that moment
    others = [fds - thread_fds - module_fds for _, _, fds, thread_fds, module_fds in figures]
    assert others[figures.index(last)] - others[figures.index(early)] <= 1, figures
    # KiB: a backlog of samples on a loaded machine may hold a few MiB;
    # the leak grew some 18 MiB over these 9 s
    assert last[1] - early[1] <= 6 * 1024, figures


@pytest.fixture(scope="module")
def vforking(tmp_path_factory):
    return compile_program(tmp_path_factory.mktemp("vfork"), "vforking", "O2", True,
                           ["vforking.c"])


class Started:
    """``program`` with ``arguments``, in a session of its own, once it
    said "ready"; killed whole (with a vfork child) after the test."""

    def __init__(self, program, *arguments):
        self.process = subprocess.Popen([str(program), *map(str, arguments)],
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        assert self.process.stdout.readline().strip() == b"ready"
        self.pid = self.process.pid
        #: the thread made last (in vforking, the one in vfork)
        self.vforker = max(int(tid) for tid in os.listdir(f"/proc/{self.pid}/task"))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended, and its child
            pass
        self.process.wait()
        self.process.stdout.close()


def test_stack_leaves_out_a_thread_in_vfork_in_one_line(vforking):
    """The thread in vfork cannot stop until its child exits: sfbt stack
    prints the two others long before (it waited without end before),
    says so in one line, and the process runs on untraced once the child
    exits (killed once sfbt is done: a child that slept 6 s had exited
    before sfbt started on a loaded machine)."""
    with Started(vforking, 60) as waiting:
        began = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "sfbt", "stack", str(waiting.pid)],
                                capture_output=True, text=True, timeout=30,
                                env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
        took = time.monotonic() - began
        assert result.returncode == 0, result.stderr
        # far less than the child's 60 s (a start on a loaded machine took 9)
        assert took < 30, took
        assert result.stderr == (f"sfbt: warning: thread {waiting.vforker}: did not stop "
                                 "in 1 s (in vfork?): its stack is left out\n")
        headings = re.findall(r"^Thread \d+ \(LWP (\d+)", result.stdout, re.M)
        assert sorted(map(int, headings)) == sorted(
            int(tid) for tid in os.listdir(f"/proc/{waiting.pid}/task")
            if int(tid) != waiting.vforker)
        assert "in sleeping at " in result.stdout and "in main at " in result.stdout
        # sfbt let it go: once the child exits the program ends
        with open(f"/proc/{waiting.pid}/task/{waiting.vforker}/children") as children:
            os.kill(int(children.read().split()[0]), signal.SIGKILL)
        assert waiting.process.wait(timeout=15) == 0


@pytest.mark.parametrize("ending, said", [(signal.SIGTERM, "ended by SIGTERM"),
                                          (signal.SIGINT, "interrupted")],
                         ids=lambda value: getattr(value, "name", ""))
def test_record_of_a_thread_in_vfork_ends_on_a_signal_and_keeps_its_samples(
        vforking, tmp_path, ending, said):
    """The recording goes on without the thread in vfork (one line says
    so) and ends on SIGTERM or Ctrl-C within seconds, its samples kept
    (before, it waited for that thread without end, deaf to both)."""
    archive = tmp_path / "vfork.sfbt"
    with Started(vforking, 60) as waiting:
        recorder = subprocess.Popen(
            [sys.executable, "-m", "sfbt", "record", "--idle", "-p", str(waiting.pid), "-o", archive],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
        try:
            assert recorder.stderr.readline().startswith("Recording process ")
            time.sleep(2.5)
            recorder.send_signal(ending)
            began = time.monotonic()
            out, err = recorder.communicate(timeout=30)
            took = time.monotonic() - began
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
    assert recorder.returncode == 0, err
    assert took < 5, took
    assert (f"sfbt record: thread {waiting.vforker}: did not stop in 1 s (in vfork?): "
            "not sampled until it stops\n") in err
    match = re.search(rf"Recorded (\d+) stacks .*\({said}\)", out)
    assert match and int(match[1]) >= 2 * 50, out
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    counts = [1 if c == "once" else int(c.split()[0])
              for c in re.findall(r"captured (once|\d+ times)", decoded.stdout)]
    assert sum(counts) == int(match[1])
    assert f"({waiting.vforker} " not in decoded.stdout  # never sampled


def test_stack_of_a_zombie_leaders_threads(tmp_path):
    """A zombie leader has no mappings and no memory of its own: the
    threads that run on are read through one of them (before, sfbt stack
    said the process had exited)."""
    games = compile_program(tmp_path, "thread_games", "O2", True, ["thread_games.c"])
    with Started(games, "zombie", 30, 2) as running:
        deadline = time.monotonic() + 5
        while "Z" not in open(f"/proc/{running.pid}/stat").read().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        result = run_sfbt("stack", running.pid)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("in lasting at ") == 2, result.stdout
