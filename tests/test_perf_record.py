"""sfbt record on perf events: the kernel samples the threads on a
processor and copies their stacks, sfbt walks the copies.  Real processes,
compared with perf where perf says the same thing."""

import collections
import os
import platform
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest

from conftest import PLUGIN, require, run_sfbt
from gdb_support import PROGRAMS, compile_library, compile_program
from test_stack import Running

#: a frame of main or of a thread's start in `sfbt cbf decode`'s text:
#: "#4  0x... in main (", or "#1  main at" where the frame above it is a
#: function inlined into it (main's line then has no address)
OUTERMOST = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(?:main|start_thread|clone3?) ", re.M)
#: an event's thread: "NUMBER (TID NAME)", with " of process PID" where a
#: recording holds several processes
_THREAD = re.compile(r"\d+ \((\d+)(?: (.*))?\)(?: of process (\d+))?")


def _perf_events_refused():
    """Why the kernel refuses sfbt's perf events here, or None."""
    from sfbt.live import perf_events
    try:
        os.close(perf_events.open_event(os.getpid(), 0, 99, 512, True, True))
    except perf_events.PerfUnavailable as refused:
        return str(refused)
    return None


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """(busy, workers): busy recurses to changing depths through qsort and
    snprintf (no frame pointers: -O2); workers has named threads."""
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    directory = tmp_path_factory.mktemp("perf")
    return (compile_program(directory, "busy", "O2", True, ["busy.c"]),
            compile_program(directory, "workers", "O2", True, ["workers.c"]))


def _events(archive):
    """[(tid, thread name, pid or None, truncated)] of the archive's events,
    and `sfbt cbf decode`'s text of it."""
    from sfbt.archive import cbf
    from sfbt.archive.store import read_archive
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    stored, error = read_archive(str(archive))
    assert error is None
    events = []
    for event in stored.events:
        match = _THREAD.fullmatch(event.thread)
        assert match, event.thread
        truncated = cbf.decode(stored.traces[event.trace_id].data).truncated
        events.append((int(match[1]), match[2] or "", int(match[3]) if match[3] else None,
                       truncated))
    return events, decoded.stdout


def _leaves(archive):
    """Counter of the innermost function of each folded stack."""
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    leaves = collections.Counter()
    for line in folded.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        leaves[stack.rsplit(";", 1)[-1]] += int(count)
    return leaves


def _perf_report(pid, tmp_path, seconds=2):
    """`perf report --no-children --sort sym` of process ``pid`` sampled
    by perf for ``seconds``."""
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "499", "-p", str(pid),
                    "-o", str(data), "--", "sleep", str(seconds)],
                   check=True, capture_output=True, timeout=60)
    return subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                           "--sort", "sym", "-q"], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def user_self_shares(report):
    """{symbol: self share} of the user symbols (``[.]``) of a `perf report
    --stdio --no-children --sort sym` text."""
    shares = {}
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(\S+)", line)
        if match:
            shares[match[2]] = float(match[1]) / 100
    return shares


def _cpu_seconds(pid):
    """Seconds process ``pid`` has run on a processor so far."""
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    fields = text[text.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def recording_seconds(pid, cpu_seconds=0.5, shortest=2, longest=12):
    """How long to record process ``pid`` (at least ``shortest`` seconds,
    at most ``longest``) for it to run about ``cpu_seconds`` on processors
    meanwhile, by the share of them it gets now: perf events sample
    processor time, which a loaded machine gives a process little of (2 s
    recorded 18 stacks of busy's three threads)."""
    before, began = _cpu_seconds(pid), time.monotonic()
    time.sleep(0.5)
    share = (_cpu_seconds(pid) - before) / (time.monotonic() - began)
    return round(min(longest, max(shortest, cpu_seconds / max(share, 0.01))), 1)


def _perf_self(pid, tmp_path, seconds=2):
    """{symbol: self share} perf gives process ``pid`` sampled for ``seconds``."""
    return user_self_shares(_perf_report(pid, tmp_path, seconds))


def test_record_samples_the_running_threads_where_perf_does(programs, tmp_path):
    busy, _ = programs
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    archive = tmp_path / "busy.sfbt"
    with Running(busy, 2) as running:
        seconds = recording_seconds(running.pid)
        recorded = run_sfbt("record", "-p", running.pid, "--duration", seconds, "-o", archive)
        perf = _perf_self(running.pid, tmp_path, seconds)
    assert recorded.returncode == 0, recorded.stderr
    assert "on CPU (perf events)" in recorded.stderr
    assert "ptrace" not in recorded.stderr
    match = re.search(r"Recorded (\d+) stacks in (\d+) samples .* on perf events\)",
                      recorded.stdout)
    assert match, recorded.stdout
    stacks = int(match[1])
    assert stacks >= 20, recorded.stdout
    leaves = _leaves(archive)
    assert sum(leaves.values()) == stacks
    hottest, count = leaves.most_common(1)[0]
    assert hottest == max(perf, key=perf.get), (leaves.most_common(5), perf)
    # the same share of the samples, within what two short samplings of a
    # loaded machine differ by
    assert abs(count / stacks - perf[hottest]) < 0.15, (count / stacks, perf[hottest])
    events, text = _events(archive)
    # each sample is one thread's, named; the stacks walked to main or the
    # thread's start, through the C library (qsort, snprintf) without
    # frame pointers, cut only where deeper than the 64 KiB copied
    assert len(events) == stacks
    assert {name for _, name, _, _ in events} <= {"busy", "busy-0", "busy-1"}
    assert {pid for _, _, pid, _ in events} == {None}
    assert sum(truncated for *_, truncated in events) <= 0.02 * stacks
    # each trace from its heading ("Backtrace N, captured ..."), its last
    # line "Backtrace stopped: truncated" where it was cut
    walked = [part for part in re.split(r"^Backtrace (?=\d)", text, flags=re.M)[1:]
              if "Backtrace stopped: truncated" not in part]
    unfinished = [part for part in walked
                  if not OUTERMOST.search(part)]
    assert not unfinished, unfinished
    assert "msort_with_tmp" in text and "printf_positional" in text


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the program is x86-64 code")
@pytest.mark.parametrize("rows", ["sframe", "cfi"])
def test_a_sample_past_an_epilogues_pop_walks_on_to_main(tmp_path, rows):
    """Samples in a function's epilogue after it popped the caller's
    frame pointer, where the CFI still says it is saved (below the stack
    pointer by then, where the stack copy does not reach): the register
    holds the caller's value, and the walk goes on through the caller,
    whose frame is on rbp, to main.  By the program's SFrame rows, and by
    rows synthesized from its .eh_frame (as libc's, where CI once sampled
    _IO_default_xsputn so)."""
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    if rows == "sframe":
        program = compile_program(tmp_path, "epilogue", "O2", True, ["epilogue.c"])
    else:
        program = tmp_path / "epilogue-cfi"
        subprocess.run(["gcc", "-g", "-O2", "-fomit-frame-pointer", "-o", str(program),
                        str(PROGRAMS / "epilogue.c")], check=True, capture_output=True)
    archive = tmp_path / "epilogue.sfbt"
    with Running(program) as running:
        recorded = run_sfbt("record", "-p", running.pid, "--duration",
                            recording_seconds(running.pid, 0.3), "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    counts = {}
    for line in folded.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        counts[stack] = int(count)
    in_popped = {stack: count for stack, count in counts.items() if stack.endswith(";popped")}
    assert sum(in_popped.values()) >= 0.8 * sum(counts.values()) > 0, counts
    assert all(stack.endswith(";main;framed;popped") for stack in in_popped), in_popped


#: Debian's own python3 (not a virtual environment's or pyenv's)
DEBIAN_PYTHON = "/usr/bin/python3"
#: a pure-Python loop: its time is the interpreter's (_PyEval_EvalFrameDefault)
PYTHON_LOOP = ("print('ready', flush=True)\n"
               "def leaf(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n"
               "    return total\n"
               "while True:\n    leaf(3000)\n")


def test_a_python_loop_is_sampled_where_perf_samples_it(tmp_path):
    """Debian's python3 (stripped, with .eh_frame: its rows synthesized
    from CFI) running a pure-Python loop: sfbt's hottest function is
    perf's, with the share perf gives it."""
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    require(os.path.isfile(DEBIAN_PYTHON), f"{DEBIAN_PYTHON} is not installed")
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    archive = tmp_path / "python.sfbt"
    with Running(DEBIAN_PYTHON, "-c", PYTHON_LOOP) as running:
        seconds = recording_seconds(running.pid)
        recorded = run_sfbt("record", "-p", running.pid, "--duration", seconds, "-o", archive)
        perf = _perf_self(running.pid, tmp_path, seconds)
    assert recorded.returncode == 0, recorded.stderr
    assert "on CPU (perf events)" in recorded.stderr
    match = re.search(r"Recorded (\d+) stacks in (\d+) samples", recorded.stdout)
    assert match, recorded.stdout
    stacks = int(match[1])
    assert stacks >= 20, recorded.stdout
    leaves = _leaves(archive)
    assert sum(leaves.values()) == stacks
    hottest, count = leaves.most_common(1)[0]
    assert hottest == "_PyEval_EvalFrameDefault" == max(perf, key=perf.get), \
        (leaves.most_common(5), perf)
    assert abs(count / stacks - perf[hottest]) < 0.15, (count / stacks, perf[hottest])
    # walked from the interpreter's loop out to _start, through the
    # functions python3's symbol table names
    folded = run_sfbt("fold", archive).stdout
    whole = [line for line in folded.splitlines() if line.startswith("_start;")]
    assert sum(int(line.rsplit(" ", 1)[1]) for line in whole) >= 0.95 * stacks
    assert all("Py_BytesMain;Py_RunMain;" in line for line in whole)


def test_only_threads_on_a_processor_are_sampled_each_with_its_name(programs, tmp_path):
    _, workers = programs
    archive = tmp_path / "workers.sfbt"
    with Running(workers, 2) as running:  # busy-0, busy-1 compute; six wait
        recorded = run_sfbt("record", "-p", running.pid, "--hz", "199", "--duration", "1.5",
                            "-o", archive)
        names = {int(tid): open(f"/proc/{running.pid}/task/{tid}/comm").read().strip()
                 for tid in os.listdir(f"/proc/{running.pid}/task")}
    assert recorded.returncode == 0, recorded.stderr
    events, text = _events(archive)
    seen = {tid: name for tid, name, _, _ in events}
    busy = {tid for tid, name in names.items() if name.startswith("busy-")}
    assert len(busy) == 2 and set(seen) == busy, (seen, names)
    assert all(seen[tid] == names[tid] for tid in seen)
    assert "compute" in text


def test_a_shallow_copy_keeps_the_deeper_stacks_as_truncated(programs, tmp_path):
    busy, _ = programs
    archive = tmp_path / "cut.sfbt"
    with Running(busy, 2) as running:
        recorded = run_sfbt("record", "-p", running.pid, "--stack-size", "1024",
                            "--duration", "1.5", "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    match = re.search(r"Recorded (\d+) stacks.*\n(\d+) longer than the stack copied "
                      r"\(--stack-size\), kept as truncated\.", recorded.stdout)
    assert match, recorded.stdout
    events, _ = _events(archive)
    assert sum(truncated for *_, truncated in events) == int(match[2]) > 0
    assert "--stack-size 100:" in run_sfbt("record", "-p", "1", "--stack-size", "100",
                                           "-o", tmp_path / "x").stderr


def test_every_process_with_a(programs, tmp_path):
    busy, _ = programs
    archive = tmp_path / "all.sfbt"
    with Running(busy, 1) as running:
        recorded = run_sfbt("record", "-a", "--duration", "1.5", "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stderr.startswith("Recording every process at 99 Hz")
    events, text = _events(archive)
    pids = {pid for _, _, pid, _ in events}
    assert running.pid in pids and None not in pids
    ours = text.split(f" of process {running.pid}, sample")
    assert len(ours) > 1 and any(" in descend at " in part for part in ours[1:])
    assert run_sfbt("record", "-a", "--idle", "-o", archive).stderr == \
        "sfbt: --idle samples one process (-p PID or -- COMMAND), not -a\n"


def test_a_process_that_exits_before_its_samples_are_read_is_walked_under_a(tmp_path):
    """Under -a, processes that start and exit while sfbt reads nothing
    (it is stopped meanwhile) are walked from the rings' records alone:
    their mappings, names and functions."""
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    brief = compile_program(tmp_path, "brief", "O2", True, ["brief.c"])
    archive = tmp_path / "brief.sfbt"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "sfbt", "record", "-a", "--stack-size", "16384", "--duration",
         "3", "-o", str(archive)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    pids = []
    try:
        assert recorder.stderr.readline().startswith("Recording every process at 99 Hz")
        os.kill(recorder.pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                started = subprocess.Popen([str(brief), "80"])
                started.wait(timeout=60)
                pids.append(started.pid)
        finally:
            os.kill(recorder.pid, signal.SIGCONT)
        out, err = recorder.communicate(timeout=120)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
    assert recorder.returncode == 0, err
    events, text = _events(archive)
    ours = [(pid, name) for _, name, pid, _ in events if pid in pids]
    assert {pid for pid, _ in ours} == set(pids), (pids, out)
    # brief's, or this process's in the child of its fork before brief's
    # exec (a loaded machine samples it there)
    with open("/proc/self/comm") as comm:
        forked = comm.read().strip()
    assert "brief" in {name for _, name in ours} <= {"brief", forked}
    traces = [part for part in re.split(r"^Backtrace (?=\d)", text, flags=re.M)[1:]
              if re.search(rf" brief\) of process ({'|'.join(map(str, pids))}),", part)]
    named = [part for part in traces if re.search(r" in brief_work .* in main ", part, re.S)]
    assert traces and len(named) >= 0.8 * len(traces), traces


#: runs `python3 -m sfbt ARGS...` counting the opens of /proc/PID/maps and
#: /proc/PID/smaps (PID the first argument) through an audit hook, which
#: sees every open() and os.open(); the count is written to the second
_COUNTING_MAPS_OPENS = """
import re, runpy, sys
pid, counted = sys.argv[1], sys.argv[2]
opens = []
pattern = re.compile(rf"/proc/{pid}/s?maps")
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and pattern.fullmatch(args[0]):
        opens.append(args[0])
sys.addaudithook(hook)
sys.argv = ["sfbt", *sys.argv[3:]]
try:
    runpy.run_module("sfbt", run_name="__main__")
finally:
    with open(counted, "w") as stream:
        stream.write(str(len(opens)))
"""


def test_a_library_loaded_while_recording_is_known_from_its_mmap2_record(tmp_path):
    """late_library loads liblate.so once the recording runs and spins in
    it: its frames are named from the library's MMAP2 record, and the
    process's mappings are read from /proc once, at the start."""
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    library = compile_library(tmp_path, "liblate.so", "O2", ["liblate.c"])
    program = compile_program(tmp_path, "late_library", "O2", True, ["late_library.c"])
    archive, go, counted = tmp_path / "late.sfbt", tmp_path / "go", tmp_path / "opens"
    with Running(program, library, go) as running:
        recorder = subprocess.Popen(
            [sys.executable, "-c", _COUNTING_MAPS_OPENS, str(running.pid), str(counted),
             "record", "-p", str(running.pid), "--duration", "2", "-o", str(archive)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
        try:
            assert recorder.stderr.readline().startswith(f"Recording process {running.pid}")
            go.touch()  # it loads the library 200 ms later
            out, err = recorder.communicate(timeout=120)
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
        with open(f"/proc/{running.pid}/maps") as maps:
            assert any(line.rstrip().endswith("/liblate.so") for line in maps)
    assert recorder.returncode == 0, err
    assert counted.read_text() == "1"
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    stacks = collections.Counter()
    for line in folded.stdout.splitlines():
        stack, count = line.rsplit(" ", 1)
        stacks[stack] += int(count)
    total = sum(stacks.values())
    spinning = sum(count for stack, count in stacks.items()
                   if stack.endswith(";main;library_spin"))
    # on CPU: the spin, after a dlopen of a few milliseconds
    assert total >= 20 and spinning >= 0.9 * total, stacks.most_common(5)


def test_a_command_is_started_recorded_and_ended_with(programs, tmp_path):
    _, workers = programs
    archive = tmp_path / "command.sfbt"
    # two computing threads for a second, then it exits
    recorded = subprocess.run(
        [sys.executable, "-m", "sfbt", "record", "-o", str(archive), "--",
         str(workers), "2", "1"], input="\n", capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    assert recorded.returncode == 0, recorded.stderr
    assert "(the command exited)" in recorded.stdout
    assert re.match(rf"Recording {re.escape(str(workers))} \(process (\d+)\) at 99 Hz on CPU",
                    recorded.stderr), recorded.stderr
    assert "ready" in recorded.stdout  # the command's own output
    events, text = _events(archive)
    assert {name for _, name, _, _ in events} >= {"busy-0", "busy-1"}
    assert " in compute " in text
    assert f"label 'sfbt record of {workers} 2 1 at 99 Hz on CPU'" in text


def test_where_perf_events_are_refused_ptrace_samples_and_says_why(programs, tmp_path):
    _, workers = programs
    archive = tmp_path / "refused.sfbt"
    with Running(workers, 1) as running:
        recorded = subprocess.run(
            [sys.executable, "-m", "sfbt", "record", "-p", str(running.pid), "--hz", "50",
             "--duration", "1", "-o", str(archive)], capture_output=True, text=True,
            timeout=120, env=dict(os.environ, PYTHONPATH=str(PLUGIN), SFBT_NO_PERF_EVENTS="1"))
        refused_all = subprocess.run(
            [sys.executable, "-m", "sfbt", "record", "-a", "-o", str(archive)],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(PLUGIN), SFBT_NO_PERF_EVENTS="1"))
    assert recorded.returncode == 0, recorded.stderr
    said = recorded.stderr.splitlines()
    assert said[0] == ("sfbt record: perf events refused (SFBT_NO_PERF_EVENTS is set): "
                       "sampling with ptrace instead (every thread on the wall clock, as "
                       "--idle does)")
    assert said[1].startswith(f"Recording process {running.pid} at 50 Hz on the wall "
                              "clock (ptrace)")
    # ptrace's samples: every thread, the waiting ones too
    events, _ = _events(archive)
    assert len({tid for tid, _, _, _ in events}) == 9
    assert refused_all.returncode == 1
    assert refused_all.stderr == ("sfbt: perf events refused (SFBT_NO_PERF_EVENTS is set): "
                                  "-a needs them\n")


def test_idle_samples_every_thread_with_ptrace(programs, tmp_path):
    _, workers = programs
    archive = tmp_path / "idle.sfbt"
    with Running(workers, 0) as running:  # every thread waits
        on_cpu = run_sfbt("record", "-p", running.pid, "--duration", "0.5",
                          "-o", tmp_path / "none.sfbt")
        idle = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "20",
                        "--duration", "0.5", "-o", archive)
    assert on_cpu.returncode == 1
    assert on_cpu.stderr.endswith(f"sfbt: process {running.pid}: no stack recorded (it did "
                                  "not run on a processor; --idle samples sleeping threads "
                                  "too)\n")
    assert not (tmp_path / "none.sfbt").exists()
    assert idle.returncode == 0, idle.stderr
    assert "on the wall clock (ptrace)" in idle.stderr
    events, _ = _events(archive)
    assert len({tid for tid, _, _, _ in events}) == 9


@pytest.mark.parametrize("ending, said", [(signal.SIGTERM, "ended by SIGTERM"),
                                          (signal.SIGINT, "interrupted")])
def test_a_signal_ends_the_recording_on_perf_events_and_keeps_it(programs, tmp_path, ending,
                                                                  said):
    busy, _ = programs
    archive = tmp_path / "ended.sfbt"
    with Running(busy, 1) as running:
        process = subprocess.Popen(
            [sys.executable, "-m", "sfbt", "record", "-p", str(running.pid), "-o",
             str(archive)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
        assert process.stderr.readline().startswith(f"Recording process {running.pid} ")
        time.sleep(1.0)
        process.send_signal(ending)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    match = re.search(rf"Recorded (\d+) stacks .*\({said}\): \d+ distinct, "
                      rf"saved to {re.escape(str(archive))}\.", out)
    assert match, out
    events, _ = _events(archive)
    assert len(events) == int(match[1]) > 0


def _perf_kernel_share(pid, tmp_path, seconds=2):
    """The share of perf's samples of process ``pid`` taken in the kernel
    (its [k] symbols), sampled for ``seconds``."""
    report = _perf_report(pid, tmp_path, seconds)
    return sum(float(share) for share in re.findall(r"^\s*([\d.]+)%\s+\[k\]", report, re.M)) / 100


def test_kernel_frames_atop_the_user_stack_named_from_kallsyms(tmp_path):
    """A loop of system calls: its samples in the kernel have the kernel's
    frames (named from /proc/kallsyms, as perf names them) atop the user
    stack, and are counted in the kernel as often as perf counts them (not
    under the user function that made the call); pprof's period is CPU
    time."""
    from sfbt.archive import cbf
    from sfbt.archive.store import read_archive
    from sfbt.symbols.kallsyms import kernel_text_start
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    require(kernel_text_start() is not None, "the kernel hides its addresses (kptr_restrict)")
    require(shutil.which("perf"), "perf is not installed (linux-perf)")
    program = compile_program(tmp_path, "syscalls", "O2", True, ["syscalls.c"])
    archive = tmp_path / "kernel.sfbt"
    with Running(program) as running:
        recorded = run_sfbt("record", "-p", running.pid, "--duration", "2", "-o", archive)
        perf = _perf_kernel_share(running.pid, tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    stored, error = read_archive(str(archive))
    assert error is None
    in_kernel = 0
    for event in stored.events:
        frames = cbf.decode(stored.traces[event.trace_id].data).frames
        in_kernel += frames[0].address >= 1 << 63
    share = in_kernel / len(stored.events)
    assert perf > 0.3 and abs(share - perf) < 0.15, (share, perf)
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    stacks = [line.rsplit(" ", 1)[0].split(";") for line in folded.stdout.splitlines()]
    entered = [stack for stack in stacks if "ask_kernel" in stack and
               any(name.startswith("entry_SYSCALL_64") for name in stack)]
    assert entered, folded.stdout
    for stack in entered:  # the user frames, the system call's entry, the kernel's
        entry = next(n for n, name in enumerate(stack) if name.startswith("entry_SYSCALL_64"))
        assert stack.index("ask_kernel") < entry < len(stack) - 1
        assert "??" not in stack[entry:] and "<signal handler called>" not in stack
    assert "do_syscall_64" in {name for stack in entered for name in stack}
    decoded = run_sfbt("cbf", "decode", archive).stdout
    assert re.search(r"^#0  0xffff[0-9a-f]+ in \S+ from \[kernel\.kallsyms\]$", decoded, re.M)
    go = shutil.which("go")
    require(go, "go is not installed (golang-go: ./install.sh --test-debuggers)")
    profile = tmp_path / "kernel.pb.gz"
    assert run_sfbt("flame", "--format", "pprof", archive, "-o", profile).returncode == 0
    raw = subprocess.run([go, "tool", "pprof", "-raw", str(profile)], capture_output=True,
                         text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                       "HOME": str(tmp_path)})
    assert raw.returncode == 0, raw.stderr
    # each sample stands for 1/99 s of a thread's processor time
    assert "PeriodType: cpu nanoseconds\nPeriod: 10101010\n" in raw.stdout, raw.stdout[:300]
    assert re.search(r" M=\d+ do_syscall_64 :0 s=0$", raw.stdout, re.M)


def _record(kind, body, misc=0):
    body += bytes(-len(body) % 8)
    return struct.pack("<IHH", kind, misc, 8 + len(body)) + body


def test_ring_records_are_read_within_their_sizes():
    """The ring's records as linux/perf_event.h lays them out; a record
    whose fields run past its size is passed over, one past the bytes
    read ends them, never an exception."""
    from sfbt.live import perf_events as pe
    registers = list(range(100, 100 + len(pe.REGS_DWARF)))
    stack = bytes(range(64))
    sample = struct.pack("<IIQQ", 7, 8, 123, 2) + struct.pack(
        f"<{len(registers)}Q", *registers) + struct.pack("<Q", 64) + stack + \
        struct.pack("<Q", 40)
    kernel = struct.pack("<IIQQQ", 9, 9, 5, 0, 0)  # no user registers, no stack
    lying = struct.pack("<IIQQ", 7, 8, 1, 2) + struct.pack(
        f"<{len(registers)}Q", *registers) + struct.pack("<Q", 1 << 20)  # a copy not there
    mmap2 = struct.pack("<IIQQQIIQQII", 7, 8, 0x1000, 0x2000, 0x3000, 8, 1, 42, 0, 5, 2) + \
        b"/lib/x.so\0"

    def timed(body, time):  # then its sample_id: pid, tid, time
        return body + bytes(-len(body) % 8) + struct.pack("<IIQ", 7, 8, time)
    data = b"".join([_record(pe.RECORD_SAMPLE, sample), _record(pe.RECORD_SAMPLE, kernel),
                     _record(pe.RECORD_SAMPLE, lying),
                     _record(pe.RECORD_MMAP2, timed(mmap2, 200)),
                     _record(pe.RECORD_COMM, timed(struct.pack("<II", 7, 8) + b"name\xff\0",
                                                   201)),
                     _record(pe.RECORD_COMM, timed(struct.pack("<II", 7, 7) + b"prog\0", 202),
                             pe.MISC_COMM_EXEC),
                     _record(pe.RECORD_FORK, timed(struct.pack("<IIIIQ", 9, 7, 9, 8, 9), 203)),
                     _record(pe.RECORD_EXIT, timed(struct.pack("<IIIIQ", 7, 1, 8, 1, 9), 204)),
                     _record(pe.RECORD_LOST, struct.pack("<QQ", 1, 17)),
                     _record(pe.RECORD_SAMPLE, sample)[:40]])  # cut by the read
    records = list(pe.records(data))
    assert records == [
        pe.Sample(7, 8, 123, dict(zip(pe.REGS_DWARF, registers)), stack[:40], False),
        pe.Sample(9, 9, 5, {}, b"", False),
        pe.Mmap2(7, 8, True, 0x1000, 0x2000, 0x3000, "08:01", 42, False, "/lib/x.so", 200),
        pe.Comm(7, 8, "name\udcff", False, 201), pe.Comm(7, 7, "prog", True, 202),
        pe.Fork(9, 7, 9, 203), pe.Exit(7, 8, 204), pe.Lost(17)]
    full = struct.pack("<IIQQ", 7, 8, 1, 2) + struct.pack(
        f"<{len(registers)}Q", *registers) + struct.pack("<Q", 64) + stack + \
        struct.pack("<Q", 64)
    assert list(pe.records(_record(pe.RECORD_SAMPLE, full)))[0].full
    # with the call chain's kernel part: its addresses between the kernel
    # mark and the next; a chain longer than its record passed over
    chain = [pe.CONTEXT_KERNEL, 0xffffffff81000100, 0xffffffff81000200,
             (1 << 64) - 512, 0x401000]
    chained = struct.pack("<IIQQ", 7, 8, 1, len(chain)) + struct.pack(
        f"<{len(chain)}Q", *chain) + full[16:]
    too_long = struct.pack("<IIQQ", 7, 8, 1, 1 << 40) + full[16:]
    with_chain = pe.SAMPLE_TYPE | pe.SAMPLE_CALLCHAIN
    assert list(pe.records(_record(pe.RECORD_SAMPLE, chained) +
                           _record(pe.RECORD_SAMPLE, too_long), with_chain)) == [
        pe.Sample(7, 8, 1, dict(zip(pe.REGS_DWARF, registers)), stack, True,
                  (0xffffffff81000100, 0xffffffff81000200))]
