"""sfbt record on perf events with no processor to spare: the records read
are kept in order (the backlog) and walked once a processor is free or
after the recording, with what they need of /proc read as they are read.
Real processes on a machine made busy: more busy threads than processors."""

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from conftest import PLUGIN, run_sfbt
from gdb_support import compile_library
from test_perf_record import OUTERMOST, _events, _leaves, programs  # noqa: F401
from test_stack import Running

#: busy threads that leave no processor idle
BUSY_THREADS = 2 * (os.cpu_count() or 1) + 1
_RECORDED = re.compile(r"Recorded (\d+) stacks in (\d+) samples")
_KEPT = re.compile(r"^(\d+) kept while the processors were busy \(--backlog\), walked when "
                   r"one was free; (\d+) stacks walked after the recording, in [\d.]+ s of "
                   r"processor time\.$", re.M)
_UNWALKED = re.compile(r"^(\d+) not walked \(the walk after the recording was stopped\)\.$",
                       re.M)


def _summary(out):
    """(stacks, samples, kept for later, walked after the recording, not
    walked) of `sfbt record`'s summary."""
    recorded, kept, unwalked = _RECORDED.search(out), _KEPT.search(out), _UNWALKED.search(out)
    assert recorded, out
    return (int(recorded[1]), int(recorded[2]), int(kept[1]) if kept else 0,
            int(kept[2]) if kept else 0, int(unwalked[1]) if unwalked else 0)


def _recorder(*arguments):
    """`sfbt record ARGUMENTS...` started, once it said it records."""
    recorder = subprocess.Popen([sys.executable, "-m", "sfbt", "record", *map(str, arguments)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    line = recorder.stderr.readline()
    if not line.startswith("Recording"):
        recorder.kill()
        recorder.wait()
        raise AssertionError(line + recorder.stderr.read())
    return recorder


def _finished(recorder):
    """(stdout, stderr) of ``recorder`` once it ended (killed if it does not)."""
    try:
        return recorder.communicate(timeout=180)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()


def _complete(archive):
    """(stacks, the share of them not cut that end at main or a thread's
    start, the Counter of their innermost functions)."""
    events, text = _events(archive)
    traces = [part for part in re.split(r"^Backtrace (?=\d)", text, flags=re.M)[1:]
              if "Backtrace stopped: truncated" not in part]
    whole = [part for part in traces if OUTERMOST.search(part)]
    return events, len(whole) / len(traces), _leaves(archive)


def test_a_busy_machine_keeps_samples_and_walks_every_one_as_if_kept_none(  # noqa: F811
        programs, tmp_path):
    busy, _ = programs
    kept, none = tmp_path / "kept.sfbt", tmp_path / "none.sfbt"
    with Running(busy, BUSY_THREADS - 1) as running:
        later = run_sfbt("record", "-p", running.pid, "--duration", 3, "-o", kept)
        at_once = run_sfbt("record", "-p", running.pid, "--duration", 3, "--backlog", 0,
                           "-o", none)
    assert later.returncode == 0, later.stderr
    assert at_once.returncode == 0, at_once.stderr
    stacks, samples, deferred, after, unwalked = _summary(later.stdout)
    # every sample walked, most after the recording (no processor was free)
    assert stacks == samples >= 50 and deferred >= stacks // 2 and unwalked == 0, later.stdout
    assert f"sfbt: walking {after} samples kept while the processors were busy" in later.stderr
    assert _summary(at_once.stdout)[2:] == (0, 0, 0), at_once.stdout
    assert "walking" not in at_once.stderr
    events, whole, leaves = _complete(kept)
    events_at_once, whole_at_once, leaves_at_once = _complete(none)
    assert len(events) == stacks
    assert sum(truncated for *_, truncated in events) <= 0.02 * stacks
    assert whole == 1.0 and whole_at_once == 1.0
    # the same functions: each with 5% of one's samples is in the other's
    for one, other in ((leaves, leaves_at_once), (leaves_at_once, leaves)):
        total = sum(one.values())
        assert {name for name, count in one.items() if count >= 0.05 * total} <= set(other)
    assert leaves.most_common(1)[0][0] == leaves_at_once.most_common(1)[0][0] == "spin"


def test_a_library_deleted_while_its_samples_are_kept_still_walks_them(  # noqa: F811
        programs, tmp_path):
    """busy's loader thread dlopens a library, recurses through it and
    dlcloses it, again and again; the library's file is deleted while
    the samples in it wait (the next dlopen fails: the program exits).
    They are walked after the recording through the library's rows (its
    file held open since its mapping was read), as it was mapped then."""
    busy, _ = programs
    library = compile_library(tmp_path, "libbusy.so", "O2", ["libbusy.c"])
    gone = tmp_path / "libgone.so"
    shutil.copy(library, gone)
    archive = tmp_path / "gone.sfbt"
    with Running(busy, BUSY_THREADS - 1, gone) as running:
        recorder = _recorder("-p", running.pid, "-o", archive)
        time.sleep(1.5)
        gone.unlink()
        out, err = _finished(recorder)
    assert recorder.returncode == 0, err
    assert "(the process exited)" in out
    stacks, samples, deferred, _, _ = _summary(out)
    assert stacks == samples and deferred >= stacks // 2, out
    shutil.copy(library, gone)  # where fold reads its names (the same build)
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    stacks = [line.rsplit(" ", 1)[0].split(";") for line in folded.stdout.splitlines()]
    through = [stack for stack in stacks if "library_descend" in stack]
    assert through, folded.stdout
    for stack in through:
        assert stack[:6] == ["clone3", "start_thread", "loader", "library_descend", "around",
                             "descend"], stack
    # no stack starts at a frame without a module (an address)
    assert not [stack for stack in stacks if stack[0].startswith("0x")]


def test_threads_that_exit_while_their_samples_are_kept_keep_their_names(  # noqa: F811
        programs, tmp_path):
    """workers' computing threads, beside busy loops on every processor,
    recorded until the process exits: their samples are walked after
    their exit, under the names they had (read as the samples were)."""
    busy, workers = programs
    archive = tmp_path / "names.sfbt"
    with Running(busy, BUSY_THREADS - 1):
        with Running(workers, 2, 8) as running:  # exits 8 s after it started
            recorded = run_sfbt("record", "-p", running.pid, "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    assert "(the process exited)" in recorded.stdout
    stacks, samples, deferred, _, _ = _summary(recorded.stdout)
    assert stacks == samples and deferred >= stacks // 2, recorded.stdout
    events, _ = _events(archive)
    names = collections.defaultdict(set)
    for tid, name, _, _ in events:
        names[tid].add(name)
    assert {"busy-0", "busy-1"} <= {name for named in names.values() for name in named}
    assert all(len(named) == 1 and "" not in named for named in names.values()), names


def test_a_tiny_backlog_walks_the_oldest_at_once_and_loses_nothing(  # noqa: F811
        programs, tmp_path):
    busy, _ = programs
    archive = tmp_path / "tiny.sfbt"
    with Running(busy, BUSY_THREADS - 1) as running:
        recorded = run_sfbt("record", "-p", running.pid, "--duration", 3, "--backlog", 0.05,
                            "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    stacks, samples, deferred, after, unwalked = _summary(recorded.stdout)
    assert stacks == samples >= 50 and unwalked == 0, recorded.stdout
    # kept, but walked as the bound (about 50 KB) was passed (most as they
    # were read): few are left for the end
    assert deferred > 0 and after <= stacks // 4, recorded.stdout
    events, whole, _ = _complete(archive)
    assert len(events) == stacks and whole == 1.0
    for bad in ("-1", "nan"):
        refused = run_sfbt("record", "-p", 1, "--backlog", bad, "-o", tmp_path / "x")
        assert refused.returncode == 1
        assert refused.stderr == f"sfbt: --backlog {bad}: megabytes from 0 to 1048576\n"
    idle = run_sfbt("record", "-p", 1, "--idle", "--backlog", 1, "-o", tmp_path / "x")
    assert idle.stderr == "sfbt: --backlog keeps the samples of perf events, not --idle's\n"


def test_a_second_interrupt_stops_the_walk_after_the_recording(programs, tmp_path):  # noqa: F811,E501
    busy, _ = programs
    archive = tmp_path / "stopped.sfbt"
    with Running(busy, BUSY_THREADS - 1) as running:
        recorder = _recorder("-p", running.pid, "--hz", 499, "-o", archive)
        time.sleep(4)
        recorder.send_signal(signal.SIGINT)
        said = recorder.stderr.readline()
        recorder.send_signal(signal.SIGINT)
        out, err = _finished(recorder)
    assert recorder.returncode == 0, err
    assert re.fullmatch(r"sfbt: walking \d+ samples kept while the processors were busy "
                        r"\(Ctrl-C stops\)\n", said), said
    assert "(interrupted)" in out
    stacks, samples, deferred, _, unwalked = _summary(out)
    assert unwalked > 0 and stacks + unwalked == samples, out
    events, _ = _events(archive)  # read whole, `sfbt cbf decode` reads it
    assert len(events) == stacks
