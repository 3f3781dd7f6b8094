"""sfbt record, sfbt flame: sampling a live process into one archive,
then drawing it."""

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
import xml.dom.minidom

import pytest

from conftest import PLUGIN, run_sfbt
from gdb_support import compile_program
from sfbt.live.process import SeizedProcess
from test_stack import Running, _one_line_error, sfbt_stacks, workers  # noqa: F401

_FRAME = re.compile(r"^#\d+\s+(0x[0-9a-f]+) in (\S+)", re.M)


def test_record_fold_and_flame(workers, tmp_path):  # noqa: F811
    archive = tmp_path / "profile.sfbt"
    with Running(workers, 1) as running:
        stacks = sfbt_stacks(run_sfbt("stack", "-v", running.pid).stdout)
        recorded = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "50", "--duration", "1",
                            "-o", archive)
        after = run_sfbt("stack", running.pid)
    assert recorded.returncode == 0, recorded.stderr
    match = re.search(r"Recorded (\d+) stacks in (\d+) samples over ([\d.]+) s", recorded.stdout)
    assert match, recorded.stdout
    count, ticks = int(match[1]), int(match[2])
    assert ticks >= 10 and count == 9 * ticks
    # the process goes on, untraced, with every thread
    assert len(sfbt_stacks(after.stdout)) == 9
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    counts = [1 if c == "once" else int(c.split()[0])
              for c in re.findall(r"captured (once|\d+ times)", decoded.stdout)]
    assert sum(counts) == count
    # threads numbered as sfbt stack and GDB number them: the main thread 1
    assert f"(thread 1 ({running.pid} workers), sample" in decoded.stdout
    # every waiting thread's stack was recorded as sfbt stack sees it, once
    # per sample
    traces = [tuple(int(pc, 16) for pc, _ in _FRAME.findall(part))
              for part in decoded.stdout.split("Backtrace ")[1:]]
    weights = dict(zip(traces, counts))
    busy = min(t for t in stacks if t != running.pid)
    for tid, pcs in stacks.items():
        if tid != busy:
            assert weights.get(tuple(pcs), 0) >= ticks, (tid, pcs)
    assert any("compute" in part for part in decoded.stdout.split("Backtrace ")[1:])
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded.stdout.splitlines()) == count

    svg_path = tmp_path / "flame.svg"
    drawn = run_sfbt("flame", archive, "-o", svg_path)
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.strip() == f"{svg_path}: svg of {count} stacks ({len(counts)} distinct)"
    document = xml.dom.minidom.parse(str(svg_path))
    groups = document.getElementsByTagName("g")
    frames = {}
    for group in groups:
        title = group.getElementsByTagName("title")[0].firstChild.data
        frames.setdefault(group.getAttribute("data-name"), []).append(
            (title, int(group.getAttribute("data-s")), int(group.getAttribute("data-v")),
             int(group.getAttribute("data-d"))))
    (root,) = frames["all"]
    assert root == (f"all ({count} samples, 100.00%)", 0, count, 0)
    (main,) = frames["main"]
    assert main[0].startswith(f"main ({ticks} samples, ") and main[2] == ticks
    assert "compute" in frames and "start_thread" in frames
    # each frame lies within the samples of the one below it
    for group in groups:
        first, samples = int(group.getAttribute("data-s")), int(group.getAttribute("data-v"))
        assert 0 <= first and first + samples <= count
    # what was sampled, under the title
    details = [t for t in document.getElementsByTagName("text")
               if t.getAttribute("id") == "details"][0].firstChild.data
    assert re.fullmatch(rf"sfbt record of process {running.pid} \(workers\) at 50 Hz: "
                        rf"{ticks} samples over [\d.]+ s \([\d.]+ Hz\), {count} stacks "
                        r"of 9 threads", details), details
    script = document.getElementsByTagName("script")[0].firstChild.data
    assert "addEventListener(\"click\"" in script and "Escape" in script

    speed_path = tmp_path / "profile.speedscope.json"
    assert run_sfbt("flame", archive, "--format", "speedscope", "-o", speed_path).returncode == 0
    profile = json.loads(speed_path.read_text())
    names = [frame["name"] for frame in profile["shared"]["frames"]]
    (sampled,) = profile["profiles"]
    assert sampled["type"] == "sampled" and sum(sampled["weights"]) == count
    assert ["main", "__libc_pause"] in [[names[i] for i in s] for s in sampled["samples"]] \
        or ["main", "pause"] in [[names[i] for i in s] for s in sampled["samples"]]
    assert all(names[s[0]] in ("main", "__clone3", "clone3") for s in sampled["samples"])


def test_record_errors(workers, tmp_path):  # noqa: F811
    with Running(workers) as running:
        _one_line_error(run_sfbt("record", "--idle", "-p", running.pid, "--hz", "0", "-o",
                                 tmp_path / "x"), r"sfbt: --hz 0: .*")
        _one_line_error(run_sfbt("record", "--idle", "-p", running.pid, "--duration", "0.5", "-o",
                                 tmp_path / "no" / "such" / "dir"),
                        rf"sfbt: {tmp_path}/no/such/dir: No such file or directory")
    _one_line_error(run_sfbt("record", "--idle", "-p", running.pid, "-o", tmp_path / "x"),
                    rf"sfbt: no process {running.pid}")
    _one_line_error(run_sfbt("flame", tmp_path / "missing", "-o", tmp_path / "y.svg"),
                    rf"sfbt: {tmp_path}/missing: No such file or directory")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line_error(run_sfbt("flame", bad, "-o", tmp_path / "y.svg"),
                    rf"sfbt: {bad}: not a JSON document: .*")


def test_record_until_the_process_exits(workers, tmp_path):  # noqa: F811
    """The recording ends when the process does: workers exits a second
    after the line it reads, sent once sfbt records (a second counted from
    its start ran out before a loaded machine had sfbt attached)."""
    archive = tmp_path / "short.sfbt"
    program = subprocess.Popen([str(workers), "0", "1"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert program.stdout.readline().strip() == "ready"
        process = _sfbt_process("record", "--idle", "-p", program.pid, "-o", archive)
        assert process.stderr.readline().startswith(f"Recording process {program.pid} ")
        program.stdin.write("\n")
        program.stdin.flush()
        code, out, err, stacks = _record_until(process, archive)
    finally:
        if program.poll() is None:
            program.kill()
        program.wait()
    assert code == 0, err
    assert "(the process exited)" in out
    assert stacks > 0


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "1e-320", "20000"])
def test_rates_and_durations_that_are_not_finite_positive_numbers(workers, tmp_path,  # noqa: F811
                                                                  value):
    with Running(workers) as running:
        _one_line_error(run_sfbt("record", "--idle", "-p", running.pid, "--hz", value, "-o",
                                 tmp_path / "x"),
                        r"sfbt: --hz \S+: a rate from 1e-06 to 10000 samples a second")
        if value not in ("1e-320", "20000"):
            _one_line_error(run_sfbt("record", "--idle", "-p", running.pid, "--duration", value, "-o",
                                     tmp_path / "x"),
                            r"sfbt: --duration \S+: a finite number of seconds above 0")
    assert not (tmp_path / "x").exists()


def _record_until(process, archive):
    """(exit status, stdout, stderr, stacks in the archive it left) of the
    `sfbt record` that ``process`` runs."""
    out, err = process.communicate(timeout=60)
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    counts = [1 if c == "once" else int(c.split()[0])
              for c in re.findall(r"captured (once|\d+ times)", decoded.stdout)]
    return process.returncode, out, err, sum(counts)


@pytest.mark.parametrize("ending, said", [(signal.SIGTERM, "ended by SIGTERM"),
                                          (signal.SIGHUP, "ended by SIGHUP"),
                                          (signal.SIGINT, "interrupted")],
                         ids=lambda value: getattr(value, "name", ""))
def test_a_signal_ends_the_recording_and_keeps_it(workers, tmp_path, ending,  # noqa: F811
                                                 said):
    """`timeout 60 sfbt record ...` sends SIGTERM, a closed terminal SIGHUP,
    Ctrl-C SIGINT: each ends the recording, which is saved whole."""
    archive = tmp_path / "ended.sfbt"
    with Running(workers) as running:
        process = _sfbt_process("record", "--idle", "-p", running.pid, "-o", archive)
        assert process.stderr.readline().startswith("Recording process ")
        time.sleep(1.0)
        process.send_signal(ending)
        code, out, err, stacks = _record_until(process, archive)
    assert code == 0, err
    match = re.search(rf"Recorded (\d+) stacks .*\({said}\): \d+ distinct, "
                      rf"saved to {re.escape(str(archive))}\.", out)
    assert match, out
    assert stacks == int(match[1]) >= 9 * 10


def _sfbt_process(*args, preexec_fn=None):
    return subprocess.Popen([sys.executable, "-m", "sfbt", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(PLUGIN)),
                            preexec_fn=preexec_fn)


def _small_tmpfs(directory):
    """A command prefix that runs a command in a mount namespace of its own,
    where it may mount a 32 KiB tmpfs on ``directory``; None where it may
    not (no CAP_SYS_ADMIN).  (A user namespace would mount one, but sfbt in
    it could not trace a process outside it.)"""
    prefix = ["unshare", "--mount"]
    try:
        probe = subprocess.run(prefix + ["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs",
                                         str(directory)], capture_output=True)
    except OSError:  # no unshare(1)
        return None
    return prefix if probe.returncode == 0 else None


def test_a_full_disk_keeps_the_samples_written_before(workers, tmp_path):  # noqa: F811
    """The archive is written as it grows: when the disk is full (a 32 KiB
    tmpfs; where none can be mounted, a file size limit, which fails the
    same writes with EFBIG) the stacks written before are kept."""
    full = tmp_path / "full"
    full.mkdir()
    kept = tmp_path / "kept.sfbt"
    prefix = _small_tmpfs(full)
    with Running(workers) as running:
        if prefix is not None:
            script = ('mount -t tmpfs -o size=32k tmpfs "$1" && "$2" -m sfbt record --idle -p "$3" '
                      '--hz 200 --duration 30 -o "$1/out.sfbt"; code=$?; '
                      'cp "$1/out.sfbt" "$4"; exit $code')
            process = subprocess.Popen(
                prefix + ["sh", "-c", script, "sh", str(full), sys.executable,
                          str(running.pid), str(kept)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
            problem = "No space left on device"
        else:
            def limit():
                resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 10, 32 << 10))
            process = _sfbt_process("record", "--idle", "-p", running.pid, "--hz", "200",
                                    "--duration", "30", "-o", kept, preexec_fn=limit)
            problem = "File too large"
        code, out, err, stacks = _record_until(process, kept)
    assert code == 1
    started, line = err.splitlines()
    assert started.startswith("Recording process ")
    match = re.fullmatch(rf"sfbt: \S+: {problem}: the recording stopped; the (\d+) stacks "
                         r"written before are kept", line)
    assert match, err
    assert stacks == int(match[1]) > 100
    assert f"the first {stacks} saved to " in out
    assert kept.stat().st_size <= 32 << 10


SIGNALLED = r"""
import os, signal, sys, time
signal.signal(signal.SIGUSR1, lambda number, frame: print("got", number, flush=True))
print("ready", flush=True)
while True:
    sum(range(20000))  # runs: each sample stops it
    time.sleep(0.001)
"""


def _state(pid):
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    return text[text.rfind(")") + 2]


def test_signals_reach_a_process_while_its_threads_stay_seized(tmp_path):
    """The threads stay seized for the whole recording: a signal for the
    process is handed on at once (not when the recording ends), SIGSTOP
    stops it and SIGCONT lets it run on, and it runs free afterwards."""
    target = subprocess.Popen([sys.executable, "-c", SIGNALLED], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert target.stdout.readline() == "ready\n"
        archive = tmp_path / "signalled.sfbt"
        process = _sfbt_process("record", "--idle", "-p", target.pid, "--duration", "6", "-o", archive)
        assert process.stderr.readline().startswith("Recording process ")
        os.kill(target.pid, signal.SIGUSR1)
        began = time.monotonic()
        assert target.stdout.readline() == f"got {int(signal.SIGUSR1)}\n"
        assert time.monotonic() - began < 2.0 and process.poll() is None
        os.kill(target.pid, signal.SIGSTOP)
        time.sleep(0.5)
        assert _state(target.pid) in "tT" and process.poll() is None
        os.kill(target.pid, signal.SIGCONT)
        time.sleep(0.5)
        os.kill(target.pid, signal.SIGUSR1)
        assert target.stdout.readline() == f"got {int(signal.SIGUSR1)}\n"
        code, out, err, stacks = _record_until(process, archive)
        assert code == 0, err
        assert stacks > 0
        os.kill(target.pid, signal.SIGUSR1)  # let go: runs on, untraced
        assert target.stdout.readline() == f"got {int(signal.SIGUSR1)}\n"
        with open(f"/proc/{target.pid}/status") as status:
            assert "TracerPid:\t0\n" in status.read()
    finally:
        target.kill()
        target.wait()


def test_a_rate_it_cannot_keep_is_said_while_it_runs(workers, tmp_path):  # noqa: F811
    """10000 samples a second of nine threads are out of reach: one line on
    stderr says the rate kept and why, while the recording goes on."""
    archive = tmp_path / "fast.sfbt"
    with Running(workers) as running:
        recorded = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "10000", "--duration", "2.5",
                            "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    said = [line for line in recorded.stderr.splitlines() if line.startswith("sfbt record:")]
    assert said and all(
        re.fullmatch(r"sfbt record: [\d.]+ Hz of 10000: (stopping and copying \d+ threads "
                     r"takes [\d.]+ ms a sample, of the 0.1 ms between two|walking the "
                     r"stacks falls behind .*|sfbt is not given the processor in time .*)",
                     line) for line in said), recorded.stderr
    assert len(said) == len(set(line.split(": ", 2)[2][:12] for line in said))


def test_threads_are_collected_behind_a_child_of_sfbts_own(workers):  # noqa: F811
    """One waitid tells which seized threads stopped; where a child of
    sfbt's own comes first (here one that exited, not yet waited for),
    each thread is asked in turn: every thread is still copied and let run
    on, and the child is left for its own wait."""
    with Running(workers, 2) as running:
        child = subprocess.Popen(["true"])
        try:
            while os.waitid(os.P_PID, child.pid,
                            os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                time.sleep(0.01)
            process = SeizedProcess(running.pid)
            try:
                threads = process.threads()
                for _ in range(3):
                    process.interrupt(threads)
                    states, gone = process.collect(time.perf_counter() + 5,
                                                   lambda seconds: time.sleep(min(seconds, 0.01)))
                    assert sorted(states) == sorted(tid for tid, _ in threads)
                    assert not gone
                    assert all(state.stack for state in states.values())
            finally:
                process.close()
            assert os.waitid(os.P_PID, child.pid,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT).si_pid == child.pid
        finally:
            child.wait()
        assert running.process.poll() is None  # let run on, untraced


def _blocked_line(pid, tid):
    """Thread ``tid``'s /proc/.../syscall line once it sleeps in a system
    call."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/task/{tid}/syscall") as stream:
            line = stream.read().strip()
        with open(f"/proc/{pid}/task/{tid}/stat") as stat:
            text = stat.read()
        if text[text.rfind(")") + 2] == "S" and not line.startswith(("running", "-")):
            return line
        time.sleep(0.001)
    raise AssertionError(f"thread {tid} never slept in a system call")


def test_a_thread_that_moved_on_after_its_copy_is_sampled_where_it_is(tmp_path):
    """A thread copied while it waits, woken before sfbt notes that it has
    not run since, moves on and waits elsewhere: the next sample copies it
    again (its stack is not the one copied), while the threads that only
    went back into the system call the copy interrupted are counted again
    without a copy."""
    from sfbt.live.record import EndingSignals, Recorder

    program = compile_program(tmp_path, "moving", "O2", True, ["moving.c"])
    target = subprocess.Popen([str(program)], stdout=subprocess.PIPE)
    try:
        ready = target.stdout.readline().split()
        assert ready[0] == b"ready"
        worker = max(int(tid) for tid in os.listdir(f"/proc/{target.pid}/task"))
        waiting = _blocked_line(target.pid, worker)
        _blocked_line(target.pid, target.pid)
        recorder = Recorder(target.pid, hz=99)
        try:
            with EndingSignals() as signals:
                recorder._signals = signals

                def sample():
                    assert recorder._sample()
                    recorder.collect(time.perf_counter() + 5)
                    recorder.walk_pending()
                    return recorder.stats.stops.count

                assert sample() == 2  # both threads copied
                first = recorder._walked[worker][1]
                with open(f"/proc/{target.pid}/fd/{int(ready[1])}", "wb") as wake:
                    wake.write(b"x")
                assert target.stdout.read(1) == b"m"
                assert _blocked_line(target.pid, worker) != waiting
                recorder.mark_idle()
                assert sample() == 3  # the worker copied again, main counted again
                moved = recorder._walked[worker][1]
                frames = [len(recorder.archive.traces[trace].decoded().frames)
                          for trace in (first, moved)]
                assert moved != first and frames[1] == frames[0] + 1  # moved_on's frame
                recorder.mark_idle()
                assert sample() == 3  # both only went back into their system calls
                assert recorder.stats.samples == 6
        finally:
            recorder.close()
    finally:
        target.kill()
        target.wait()


def test_an_append_while_recording_is_refused_and_lands_after(workers, tmp_path):  # noqa: F811
    """A save appending to (or replacing) the file a recording is writing
    said "Saved" and was lost to the recording's rename: it is refused at
    once, with one line, and an append after the recording lands in the
    file."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.archive.store import read_archive
    from sfbt.commands.save import Capture, SaveOptions, save_captures
    from sfbt.files import FileProblem
    archive = tmp_path / "recorded.sfbt"
    images = ImageMap("linux-x86_64", [Image("/p", 0x400000, 0x401000, b"\xaa")])
    capture = Capture("1", [cbf.Frame("pc", 0x400100)], False)

    def append(fmt="archive", label="appended", appending=True):
        return save_captures(SaveOptions(str(archive), fmt, appending, label=label),
                             [capture], images, "x86_64", 64, "SIGTRAP", 1)
    with Running(workers) as running:
        process = _sfbt_process("record", "--idle", "-p", running.pid, "-o", archive)
        assert process.stderr.readline().startswith("Recording process ")
        # appends, and replaces (which the recording's rename would undo)
        for fmt, appending in (("archive", True), ("lws", True), ("archive", False),
                               ("cbf", False)):
            began = time.monotonic()
            with pytest.raises(FileProblem) as caught:
                append(fmt, "lost", appending)
            assert time.monotonic() - began < 1
            assert str(caught.value) == (f"{archive}: sfbt record is recording to it; "
                                         "nothing was written")
        process.send_signal(signal.SIGINT)
        code, _, err, stacks = _record_until(process, archive)
    assert code == 0 and stacks > 0, err
    assert append().startswith("Saved 1 backtrace")
    saved, error = read_archive(archive)
    assert error is None
    labels = [event.label for event in saved.events]
    assert labels.count("appended") == 1 and "lost" not in labels
    assert len(labels) == stacks + 1
