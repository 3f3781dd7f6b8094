"""`sfbt record --hz 99` on a 9-thread process (tests/programs/workers.c,
-O2 PIE: main, BUSY computing workers, the others waiting): the rate it
keeps, how long it stops each thread per sample, what it costs the target,
and the processor time sfbt itself takes.

The target runs once for the whole bench and counts its work; each round
is a window of S seconds with `sfbt record` running on it (started before
the window, the window begun once it samples, ended before it stops) and
a window as long without, in turn, which goes first alternating
(bench/pairing.py).  The slowdown is 1 - (work per second recorded / work
per second alone), the median of the rounds' pairs.  With more computing
threads than processors, a thread that sfbt stops leaves its processor to
another: what the target loses is mostly the processor time sfbt takes
(its CPU seconds per second, over the processors, is printed beside it).
The measure's own noise: the same pairs with both windows alone.

How long the computing threads stay stopped is also counted by the
kernel: the time a thread was neither running nor waiting for a
processor (/proc/PID/task/TID/schedstat) in a recorded window, less that
in the window alone, per sample: a mean, which the few long stops weigh
on (a thread that stopped while sfbt waited for a processor), where sfbt
prints the median.

The target and sfbt each run in a session of their own, as a program and
the `sfbt record` a user types in another terminal do: with the kernel's
autogroups, sessions share the processors fairly, and sfbt does not wait
for a processor behind the very threads it stopped.  On a loaded machine
the target's share is then set by the other sessions, so its slowdown
shows little of sfbt's processor time: that time over the processors is
what it costs a target on a quiet machine.

Goals: the rate kept >= 95 Hz; slowdown <= 5%; each thread stopped
<= 0.5 ms per sample (median).

Run: python3 bench/record.py --idle [--rounds N] [--seconds S] [--busy N]

Without --idle, `sfbt record` on perf events (its default) beside `perf
record -e cpu-clock -F 99 --call-graph dwarf`, on tests/programs/busy.c
(-O2, no frame pointers: recursion of changing depth through qsort and
snprintf; its work counted in busy_work, read from its memory), 2 busy
threads on the machine's 2 CPUs:

- Slowdown: one target runs for the whole bench; windows of S seconds
  alone and with a recorder alternate (alone, X, alone, Y, alone, ...),
  X in each round perf, sfbt and nothing (the control: the measure's
  noise), the first turning.  A recorder is started before its window and
  warmed (its first walks read the target's files) and has exited before
  the next window alone.  A window's slowdown is against the mean of the
  windows alone on either side of it (a drift of the machine's load
  cancels), the figure the median of the rounds; also per second of the
  target's own processor time (what a sample costs inside the target,
  which the load of the machine moves less); and the target's processor
  time lost, against the same windows alone: the work a processor does
  in a second moves by up to a third from one window to the next on this
  virtual machine with the target's processor time the same (the
  control shows it), which the processor time the target gets does not;
  both recorders have the kernel copy the same stack at the same rate,
  so what one costs the target beyond the other's is the processor time
  it takes from it.  Each recorder's processor
  time in its windows, and after them, until it exited: what it left
  for later (sfbt's walk of the samples it kept while no processor was
  free, perf's writing out), which the window alone does not show.
  With --baseline DIR, `sfbt record` of another checkout (DIR/plugin)
  is one more recorder of each round.
- Agreement: sfbt and perf record the same process at the same time
  (both copying 64 KiB of stack); the 10 hottest functions, their self
  and total shares in both, counted per sample from the frames perf
  script prints (libdw's unwinding, as perf report's) and from sfbt
  fold's in the same way, on busy.c, on Debian's python3 running a pure-Python
  loop, and on busy.c at nice 19 beside two busy loops at normal priority
  in its session (at 999 Hz for 90 s: it gets a few percent of a CPU), with how
  far two samplings of that many samples spread.  Also sfbt's stacks walked
  whole, each file's bytes per sample and the samples each side lost.
- Rate: with 4 busy threads, both at once, the samples in a window over
  the target's processor time in it (schedstat, nanoseconds).
- `sfbt record -a`'s own processor time.

Goals: slowdown (and processor time lost) <= perf's + 3 points; >= 95 Hz with 4 busy threads;
>= 99% of stacks complete; the archive <= 1/20 of perf.data per sample;
the 10 hottest functions within 3 points of perf's; -a <= 2% of the
machine.

Run: python3 bench/record.py [--rounds N] [--seconds S] [--perf-stack BYTES]
     [--agree-seconds S] [--agree-runs N] [--nice-seconds S] [--baseline DIR]
"""

import argparse
import collections
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "plugin"))

from gdb_support import compile_program  # noqa: E402
from live_harness import run_interrupted  # noqa: E402
from pairing import paired_ratios  # noqa: E402
from sfbt.symbols.kallsyms import KERNEL_IMAGE  # noqa: E402

HZ = 99
#: how long a recording runs before its window begins (its first
#: mappings, names and walks done)
SETTLE = 0.3
#: how long a recording on perf events runs before its window begins: its
#: first walks read the rows and symbols of the target's files
WARM = 1.0
SUMMARY = re.compile(r"in (\d+) samples over ([\d.]+) s \(([\d.]+) Hz of [\d.]+\).*"
                     r"stopped for ([\d.]+) ms per sample \(median; at most ([\d.]+) ms\)",
                     re.S)


def environment(cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"), PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_time(pid):
    """Seconds on a processor of every thread of process ``pid`` so far."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stream:
                total += int(stream.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that exited meanwhile
    return total / 1e9


def started(command, what, **options):
    """``command`` started in a session of its own (its output piped,
    ``options`` to subprocess.Popen), once it printed "ready"."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                               start_new_session=True, **options)
    if process.stdout.readline().strip() != "ready":
        raise SystemExit(f"{what} did not start")
    return process


def sampling(recorder):
    """Wait until `sfbt record` ``recorder`` says it samples (its first
    line on stderr)."""
    line = recorder.stderr.readline()
    if not line.startswith("Recording"):
        raise SystemExit(f"sfbt record failed: {line.strip()}")


def recorder_window(command, settle, measure, env=None):
    """(what ``measure(pid)`` returned, stdout, stderr) of the recorder
    ``command`` (perf record, or sfbt record run by this Python: waited
    for until it samples) in a session of its own, as typed in another
    terminal: ``settle`` seconds after its start, ``measure`` is called;
    SIGINT ends the recording once it returned."""
    ours = command[0] == sys.executable

    def during(recorder):
        if ours:
            sampling(recorder)
        time.sleep(settle)
        return measure(recorder.pid)

    measured, done = run_interrupted(command, during, 300, env=env, start_new_session=True)
    if done.returncode not in ((0,) if ours else (0, -signal.SIGINT, 130)):
        raise SystemExit(f"{'sfbt record' if ours else command[0]} failed: "
                         f"{done.stderr.strip()}")
    return measured, done.stdout, done.stderr


class Target:
    """The workers program, counting its work for as long as the bench runs."""

    def __init__(self, program, busy):
        self.process = started([str(program), str(busy), "-1"], "the target",
                               stdin=subprocess.PIPE)
        self.pid = self.process.pid
        task = Path(f"/proc/{self.pid}/task")
        self.busy = [tid.name for tid in task.iterdir()
                     if (tid / "comm").read_text().startswith("busy-")]

    def work(self):
        """(work done so far, time.monotonic() when it was read)."""
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        return int(line.split()[1]), time.monotonic()

    def off_processor(self):
        """Seconds the computing threads spent neither running nor waiting
        for a processor (stopped), in all, and time.monotonic()."""
        run = 0
        for tid in self.busy:
            with open(f"/proc/{self.pid}/task/{tid}/schedstat") as stream:
                running, waiting = stream.read().split()[:2]
            run += int(running) + int(waiting)
        return run / 1e9, time.monotonic()

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)


class Window:
    """The target's work per second over ``seconds``, and what else
    happened meanwhile: its computing threads' stopped seconds per second
    each, and the CPU seconds per second of ``recorder`` (a pid) if any."""

    def __init__(self, target, seconds, recorder=None):
        cpu = run_time(recorder) if recorder else 0.0
        counted, began = target.off_processor()
        work, start = target.work()
        time.sleep(seconds)
        done, end = target.work()
        counted_end, ended = target.off_processor()
        elapsed = end - start
        self.rate = (done - work) / elapsed
        self.stopped = ((ended - began) * len(target.busy) - (counted_end - counted)) \
            / (ended - began) / len(target.busy)
        self.cpu = (run_time(recorder) - cpu) / elapsed if recorder else 0.0


def recorded_window(target, seconds, command, env):
    """(Window, sfbt's summary match, its lines about a rate it did not
    keep) of a window with `sfbt record` on."""
    window, out, err = recorder_window(command + ["-p", str(target.pid)], SETTLE,
                                       lambda pid: Window(target, seconds, pid), env)
    summary = SUMMARY.search(out)
    if summary is None:
        raise SystemExit(f"unexpected sfbt record output: {out!r}")
    shortfalls = [line for line in err.splitlines() if " Hz of " in line]
    return window, summary, shortfalls


def percent_range(values):
    return (f"{statistics.median(values) * 100:.1f}% (median of {len(values)} paired rounds, "
            f"range {min(values) * 100:.1f}% to {max(values) * 100:.1f}%)")


def idle_bench(args):
    """The ptrace sampler (--idle) on the workers program."""
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-record-"))
    target = None
    try:
        program = compile_program(work, "workers", "O2", True, ["workers.c"])
        env = environment(str(work / "pycache"))
        command = [sys.executable, "-m", "sfbt", "record", "--idle", "--hz", str(HZ),
                   "-o", str(work / "profile.sfbt")]
        target = Target(program, args.busy)
        recordings = []  # (Window, summary, shortfall lines)
        alone_windows = []

        def recorded():
            recordings.append(recorded_window(target, args.seconds, command, env))
            return 1.0 / recordings[-1][0].rate

        def alone():
            alone_windows.append(Window(target, args.seconds))
            return 1.0 / alone_windows[-1].rate

        recorded()  # compiles the bytecode, fills the caches
        recordings.clear()
        paired = paired_ratios(args.rounds, recorded, alone)
        control = paired_ratios(args.rounds, alone, alone)
        cpus = os.cpu_count()
        print(f"target: 9 threads, {args.busy} computing, {cpus} CPUs; windows of "
              f"{args.seconds:g} s; load average {os.getloadavg()[0]:.1f}")
        slowdowns = [1 - 1 / ratio for ratio in paired.ratios]
        slowdown = statistics.median(slowdowns)
        print(f"slowdown of the target's work while recorded at {HZ} Hz: "
              f"{percent_range(slowdowns)}  goal <= 5%: "
              f"{'met' if slowdown <= 0.05 else 'NOT met'}")
        print("the measure's noise (both windows alone): "
              f"{percent_range([1 - 1 / ratio for ratio in control.ratios])}")
        used = [window.cpu for window, _, _ in recordings]
        print(f"sfbt's own processor time: {statistics.median(used):.3f} CPU s per s "
              f"(median; range {min(used):.3f}-{max(used):.3f}), "
              f"{statistics.median(used) / cpus * 100:.1f}% of the machine")
        rates = [float(summary[3]) for _, summary, _ in recordings]
        rate = statistics.median(rates)
        print(f"rate kept: {rate:.1f} Hz of {HZ} (median; range {min(rates):.1f}-"
              f"{max(rates):.1f})  goal >= 95: {'met' if rate >= 95 else 'NOT met'}")
        medians = [float(summary[4]) for _, summary, _ in recordings]
        worst = max(float(summary[5]) for _, summary, _ in recordings)
        median = statistics.median(medians)
        print(f"each thread stopped per sample, as sfbt counts: median {median:.3f} ms, "
              f"at most {worst:.3f} ms  goal median <= 0.5 ms: "
              f"{'met' if median <= 0.5 else 'NOT met'}")
        kernel = [(window.stopped - alone_window.stopped) / float(summary[3]) * 1e3
                  for (window, summary, _), alone_window in zip(recordings, alone_windows)]
        print(f"each computing thread stopped per sample, as the kernel counts: mean "
              f"{statistics.median(kernel):.3f} ms (median of the windows; range "
              f"{min(kernel):.3f}-{max(kernel):.3f})")
        said = sorted({line for _, _, lines in recordings for line in lines})
        for line in said:
            print(f"  said: {line}")
        if shutil.which("eu-stack"):
            print("eu-stack has no sampling mode; bench/stack.py gives its one-shot time")
    finally:
        if target is not None:
            target.close()
        shutil.rmtree(work, ignore_errors=True)


class BusyTarget:
    """tests/programs/busy.c with ``threads`` busy threads (main and
    workers), its work read from its busy_work counter; ``shell``, a
    command of sh around it ("$0" the program, "$1" the workers) run in
    its place, in one session with it (one autogroup, where nice counts
    between them), killed with it."""

    def __init__(self, program, threads, shell=None):
        command = [str(program), str(threads - 1)]
        if shell is not None:
            command = ["sh", "-c", shell] + command
        self.process = started(command, "busy")
        self.pid = self.process.pid
        symbols = subprocess.run(["nm", str(program)], capture_output=True, text=True,
                                 check=True).stdout
        offset = next(int(line.split()[0], 16) for line in symbols.splitlines()
                      if line.endswith(" busy_work"))
        base = next(int(line.split("-")[0], 16)
                    for line in Path(f"/proc/{self.pid}/maps").read_text().splitlines()
                    if line.split()[2] == "00000000" and line.endswith(str(program)))
        self.counter = base + offset
        self.memory = open(f"/proc/{self.pid}/mem", "rb", buffering=0)

    def work(self):
        self.memory.seek(self.counter)
        return int.from_bytes(self.memory.read(8), "little"), time.monotonic()

    def close(self):
        self.memory.close()
        os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()


class PythonLoop:
    """Debian's python3 running a pure-Python loop (no work counter)."""

    CODE = ("def leaf(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n"
            "    return total\n"
            "def middle(n):\n    return leaf(n) + sum(leaf(k) for k in range(n // 100))\n"
            "while True:\n    middle(3000)\n")

    def __init__(self):
        self.process = subprocess.Popen([PYTHON, "-c", self.CODE], start_new_session=True)
        self.pid = self.process.pid
        time.sleep(0.3)  # past its start

    def close(self):
        self.process.kill()
        self.process.wait()


#: Debian's own python3 (not a virtual environment's or pyenv's)
PYTHON = "/usr/bin/python3"
#: the nice case's target: busy at nice 19 beside two busy loops at
#: normal priority
NICED = ('while :; do :; done & while :; do :; done & exec nice -n 19 "$0" "$1"')
#: the nice case's rate: the target gets a few percent of a CPU
NICE_HZ = 999


class BusyWindow:
    """Work per second of a BusyTarget over ``seconds``, the work per
    second of the target's own processor time, and the processor seconds
    per second of ``recorder`` (a pid) and of the target; ``used``, the
    recorder's processor seconds from its start to the window's end."""

    def __init__(self, target, seconds, recorder=None):
        cpu = run_time(recorder) if recorder else 0.0
        target_cpu = run_time(target.pid)
        work, start = target.work()
        time.sleep(seconds)
        done, end = target.work()
        elapsed = end - start
        self.rate = (done - work) / elapsed
        self.used = run_time(recorder) if recorder else 0.0
        self.cpu = (self.used - cpu) / elapsed if recorder else 0.0
        self.target_cpu = (run_time(target.pid) - target_cpu) / elapsed
        self.per_cpu = self.rate / self.target_cpu if self.target_cpu else 0.0
        self.after = 0.0


def children_seconds():
    """Processor seconds of this process's children waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def recording(command, target, seconds, env=None):
    """(BusyWindow, stdout, stderr) of a window with ``command`` recording;
    it is stopped with SIGINT after the window, and waited for: the
    window's ``after`` is the recorder's processor seconds from the
    window's end until it exited."""
    before = children_seconds()
    window, out, err = recorder_window(command, WARM,
                                       lambda pid: BusyWindow(target, seconds, pid), env)
    window.after = max(0.0, children_seconds() - before - window.used)
    return window, out, err


PERF_SUMMARY = re.compile(r"Recorded (\d+) stacks in (\d+) samples over ([\d.]+) s "
                          r"\(([\d.]+) Hz of [\d.]+ per CPU second of (?:the process|the "
                          r"machine), on perf events\)")
CUT = re.compile(r"^(\d+) longer than the stack copied", re.M)
LOST = re.compile(r"^(\d+) lost by the kernel", re.M)


def perf_samples(data):
    """The samples in a perf.data file."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid"],
                            capture_output=True, text=True, timeout=600)
    return len(script.stdout.splitlines())


def perf_times(data):
    """The CLOCK_MONOTONIC times (seconds) of a perf.data file's samples
    (recorded with -k CLOCK_MONOTONIC)."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "time"],
                            capture_output=True, text=True, timeout=600).stdout
    return [float(line.strip().rstrip(":")) for line in script.splitlines() if line.strip()]


def perf_lost(data):
    """Samples perf's ring dropped (its LOST records' count)."""
    stats = subprocess.run(["perf", "report", "-i", str(data), "--stats"],
                           capture_output=True, text=True, timeout=600).stdout
    match = re.search(r"LOST events:\s+(\d+)", stats)
    return int(match[1]) if match else 0


def function_name(name):
    """A function's name as both sides can be matched by: perf's and
    GDB's spellings of the same C library function differ in a prefix or a
    suffix (__GI___qsort_r, msort_with_tmp.part.0, "(inlined)"); an
    address no symbol covers is "[unnamed]" on both (perf script writes
    "[unknown]", sfbt the process's address)."""
    name = name.replace(" (inlined)", "")
    if re.fullmatch(r"0x[0-9a-f]+|\[unknown\]", name):
        return "[unnamed]"
    name = re.sub(r"\.(part|constprop|isra|cold)(\.\d+)?", "", name)
    return re.sub(r"^(__GI_)?_*", "", name)


#: a frame of `perf script -F ip,sym,dso`: address, name, file
SCRIPT_FRAME = re.compile(r"\s*[0-9a-f]+ (.*) \((.*)\)$")


def perf_shares(data):
    """({function: self share}, {function: total share}, samples) of a
    perf.data file, counted from each sample's frames as perf script
    prints them (libdw's unwinding, as perf report's), in the same way as
    sfbt's (sfbt_shares): a function's total is the samples with it in
    their stack.  perf report --children does not give that: its rows
    of one function (inlined and not, a symbol's aliases) overlap, and no
    row is the union.  Kernel functions are left out of the self table
    ("[k]" in perf report), their samples counted."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym,dso"],
                            capture_output=True, text=True, timeout=600).stdout
    stacks = []
    for block in script.split("\n\n"):
        frames = [SCRIPT_FRAME.match(line) for line in block.splitlines() if line.strip()]
        frames = [frame for frame in frames if frame]
        if frames:
            leaf = None if frames[0][2] == KERNEL_IMAGE else function_name(frames[0][1])
            stacks.append((leaf, [function_name(frame[1]) for frame in frames], 1))
    return shares(stacks)


def sfbt_shares(archive, env):
    """({function: self share}, {function: total share}, samples) of an
    sfbt archive, from sfbt fold."""
    folded = subprocess.run([sys.executable, "-m", "sfbt", "fold", str(archive)],
                            capture_output=True, text=True, env=env, timeout=600).stdout
    stacks = []
    for line in folded.splitlines():
        stack, count = line.rsplit(" ", 1)
        functions = [function_name(name) for name in stack.split(";")]
        stacks.append((functions[-1], functions, int(count)))
    return shares(stacks)


def shares(stacks):
    """({function: self share}, {function: total share}, samples) of
    ``stacks``: (its innermost function, or None where that is left out
    of the self table; its functions; its samples).  A function's total
    is the samples with it in their stack, counted once each."""
    own, total, samples = collections.Counter(), collections.Counter(), 0
    for leaf, functions, count in stacks:
        if leaf is not None:
            own[leaf] += count
        total.update(dict.fromkeys(set(functions) - {"[unnamed]"}, count))
        samples += count
    return ({name: count / samples for name, count in own.items()},
            {name: count / samples for name, count in total.items()}, samples)


class SideBySide:
    """`sfbt record -p` and `perf record -p` on the same process at the
    same time; a window of ``seconds`` within both in which the samples of
    each and the target's processor time (schedstat) are counted.
    Each recorder in a session of its own, as typed in another terminal."""

    def __init__(self, pid, seconds, env, work, perf_stack, hz=HZ):
        self.archive, self.data = work / "side.sfbt", work / "side.data"
        sfbt = subprocess.Popen(
            [sys.executable, "-m", "sfbt", "record", "--hz", str(hz), "-p", str(pid),
             "-o", str(self.archive)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, start_new_session=True)
        perf = None
        try:
            sampling(sfbt)
            perf = subprocess.Popen(
                ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock",
                 "-F", str(hz), "--call-graph", f"dwarf,{perf_stack}", "-p", str(pid),
                 "-o", str(self.data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True, start_new_session=True)
            time.sleep(WARM)
            cpu, began, wall = run_time(pid), time.monotonic_ns(), time.time_ns()
            time.sleep(seconds)
            self.cpu = run_time(pid) - cpu
            ended = time.monotonic_ns()
            time.sleep(0.2)
            for recorder in (sfbt, perf):
                recorder.send_signal(signal.SIGINT)
            out, err = sfbt.communicate(timeout=600)
            perf.communicate(timeout=600)
        finally:
            for recorder in (sfbt, perf):
                if recorder is not None and recorder.poll() is None:
                    recorder.kill()
                    recorder.wait()
        summary = PERF_SUMMARY.search(out)
        if summary is None:
            raise SystemExit(f"unexpected sfbt record output: {out!r} {err!r}")
        self.stacks = int(summary[1])
        self.cut = int(CUT.search(out)[1]) if CUT.search(out) else 0
        self.lost = int(LOST.search(out)[1]) if LOST.search(out) else 0
        self.perf_lost = perf_lost(self.data)
        from sfbt.archive.store import read_archive
        stored, error = read_archive(str(self.archive))
        if error is not None:
            raise SystemExit(f"{self.archive}: {error}")
        offset = wall - began  # sfbt's event times are the wall clock's
        self.sfbt_window = sum(began <= event.time_ns - offset < ended
                               for event in stored.events)
        self.perf_window = sum(began / 1e9 <= at < ended / 1e9 for at in perf_times(self.data))
        self.sfbt_bytes, self.perf_bytes = self.archive.stat().st_size, self.data.stat().st_size
        self.perf_samples = perf_samples(self.data)
        self.sfbt_profile = sfbt_shares(self.archive, env)
        self.perf_profile = perf_shares(self.data)

    def rates(self):
        """(sfbt's, perf's) samples per second of the target's processor
        time in the window."""
        return self.sfbt_window / self.cpu, self.perf_window / self.cpu


def agreement(what, runs):
    """Print the 10 hottest functions (perf's self) of SideBySide ``runs``
    (their profiles summed by samples), self and total shares, perf's and
    sfbt's; the largest difference."""
    profiles = []
    for side in ("perf_profile", "sfbt_profile"):
        own, total, samples = collections.Counter(), collections.Counter(), 0
        for run in runs:
            run_own, run_total, run_samples = getattr(run, side)
            own.update({name: share * run_samples for name, share in run_own.items()})
            total.update({name: share * run_samples for name, share in run_total.items()})
            samples += run_samples
        profiles.append(({name: count / samples for name, count in own.items()},
                         {name: count / samples for name, count in total.items()}, samples))
    perf, ours = profiles
    hottest = sorted(perf[0], key=perf[0].get, reverse=True)[:10]
    print(f"{what}: the 10 hottest functions (perf's), self and total shares: perf / sfbt")
    worst, worst_name, worst_share = 0.0, "", 0.0
    for name in hottest:
        shares = [(profile[0].get(name, 0.0), profile[1].get(name, 0.0))
                  for profile in (perf, ours)]
        compared = [(abs(shares[0][0] - shares[1][0]), shares[0][0])]
        total = "total -"  # the unnamed addresses of many functions: no one total
        if name != "[unnamed]":
            compared.append((abs(shares[0][1] - shares[1][1]), shares[0][1]))
            total = f"total {shares[0][1] * 100:.1f}% / {shares[1][1] * 100:.1f}%"
        difference, share = max(compared)
        if difference >= worst:
            worst, worst_name, worst_share = difference, name, share
        print(f"  {name}: self {shares[0][0] * 100:.1f}% / {shares[1][0] * 100:.1f}%, {total}")
    # two independent samplings of a share p differ by sqrt(p(1-p)(1/n1+1/n2)) (1 SD)
    if not perf[2] or not ours[2]:
        print(f"  no samples (perf {perf[2]}, sfbt {ours[2]})")
        return
    spread = (worst_share * (1 - worst_share) * (1 / perf[2] + 1 / ours[2])) ** 0.5
    # perf's samples in the kernel: its [k] rows, left out of the table;
    # sfbt counts them for the user function that entered the kernel
    print(f"  perf's samples in the kernel: {(1 - sum(perf[0].values())) * 100:.1f}%")
    print(f"  largest difference {worst * 100:.1f} points ({worst_name}; {perf[2]} and "
          f"{ours[2]} samples: two samplings of its share differ by {spread * 100:.1f} points "
          f"for one standard deviation)  goal <= 3: {'met' if worst <= 0.03 else 'NOT met'}")


def losses(windows, measure):
    """Of each (window, alone before, alone after) of ``windows``: 1 less
    the window's ``measure`` over the mean of the two alone beside it."""
    return [1 - getattr(window, measure)
            / ((getattr(alone, measure) + getattr(after, measure)) / 2)
            for window, alone, after in windows]


def slowdowns(args, target, env, work):
    """The interleaved windows: alone, then in each round perf, sfbt and
    alone again (the control) in turn, the first moving, each followed by
    a window alone; a window's slowdown is against the mean of the windows
    alone on either side of it."""
    archive, data = work / "profile.sfbt", work / "perf.data"
    sfbt = [sys.executable, "-m", "sfbt", "record", "--hz", str(HZ), "-p", str(target.pid),
            "-o", str(archive)]
    perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(HZ), "--call-graph",
            f"dwarf,{args.perf_stack}", "-p", str(target.pid), "-o", str(data)]
    recording(sfbt, target, 0.5)  # compiles the bytecode, fills the caches
    sides = {"perf": lambda: recording(perf, target, args.seconds)[0],
             "sfbt": lambda: recording(sfbt, target, args.seconds)[0],
             "alone": lambda: BusyWindow(target, args.seconds)}
    described = [("perf", "perf record --call-graph dwarf"), ("sfbt", "sfbt record"),
                 ("alone", "nothing (the measure's noise)")]
    if args.baseline:
        baseline_env = environment(str(work / "baseline-pycache"))
        baseline_env["PYTHONPATH"] = str(Path(args.baseline).resolve() / "plugin")
        recording(sfbt, target, 0.5, baseline_env)
        sides["baseline"] = lambda: recording(sfbt, target, args.seconds, baseline_env)[0]
        described.insert(2, ("baseline", f"sfbt record of {args.baseline}"))
    names = list(sides)
    windows = {name: [] for name in names}  # (window, alone before, alone after)
    before = BusyWindow(target, args.seconds)
    for index in range(args.rounds):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            window = sides[name]()
            after = BusyWindow(target, args.seconds)
            windows[name].append((window, before, after))
            before = after
    print(f"target: busy.c, 2 busy threads, {os.cpu_count()} CPUs; windows of "
          f"{args.seconds:g} s, {args.rounds} rounds; perf copies {args.perf_stack} bytes of "
          f"stack, sfbt {perf_source_stack()}; load average {os.getloadavg()[0]:.1f}")
    results = {}
    for name, what in described:
        slow, inside, taken = (losses(windows[name], measure)
                               for measure in ("rate", "per_cpu", "target_cpu"))
        results[name] = statistics.median(slow), statistics.median(taken)
        print(f"slowdown under {what} at {HZ} Hz: {percent_range(slow)}; per second of "
              f"the target's own CPU time: {percent_range(inside)}")
        print(f"  the target's processor time lost: {percent_range(taken)}")
        if name != "alone":
            used = [window.cpu for window, _, _ in windows[name]]
            # the target's samples: a sample per 1/HZ s of its processor time
            per_sample = [window.cpu / (window.target_cpu * HZ) * 1e3
                          for window, _, _ in windows[name] if window.target_cpu]
            print(f"  {name}'s own processor time: {statistics.median(used):.3f} CPU s per s "
                  f"(median; range {min(used):.3f}-{max(used):.3f}), "
                  f"{statistics.median(per_sample):.3f} ms per sample; with the target on "
                  f"every CPU, its share of the machine: "
                  f"{statistics.median(used) / os.cpu_count() * 100:.1f}%")
            after = [window.after for window, _, _ in windows[name]]
            lives = [window.used + window.after for window, _, _ in windows[name]]
            print(f"  {name}'s processor time after the window, until it exited (what it "
                  f"left for later): {statistics.median(after):.3f} s (median; range "
                  f"{min(after):.3f}-{max(after):.3f}); from its start until it exited "
                  f"({WARM:g} s warming, the window, what it left): "
                  f"{statistics.median(lives):.3f} s (range {min(lives):.3f}-"
                  f"{max(lives):.3f})")
    for index, what in enumerate(("slowdown", "processor time lost")):
        goal = results["perf"][index] + 0.03
        print(f"sfbt's {what} against perf's + 3 points ({goal * 100:.1f}%): "
              f"{'met' if results['sfbt'][index] <= goal else 'NOT met'}")


def perf_source_stack():
    """The stack sfbt record copies per sample by default."""
    from sfbt.live.perf_source import STACK_SIZE
    return STACK_SIZE


def perf_bench(args):
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-perf-"))
    cpus = os.cpu_count()
    targets = []
    try:
        program = compile_program(work, "busy", "O2", True, ["busy.c"])
        env = environment(str(work / "pycache"))
        os.environ.update(env)
        sys.path.insert(0, env["PYTHONPATH"])
        target = BusyTarget(program, 2)
        targets.append(target)
        if args.rounds:
            slowdowns(args, target, env, work)

        runs = [SideBySide(target.pid, args.agree_seconds, env, work, 65528)
                for _ in range(args.agree_runs)]
        target.close()
        targets.clear()
        stacks = sum(run.stacks for run in runs)
        complete = 1 - sum(run.cut for run in runs) / stacks
        print(f"sfbt's stacks walked whole: {complete * 100:.2f}% of {stacks}  goal >= 99%: "
              f"{'met' if complete >= 0.99 else 'NOT met'}")
        ours_per = sum(run.sfbt_bytes for run in runs) / stacks
        theirs_per = sum(run.perf_bytes for run in runs) / sum(run.perf_samples for run in runs)
        print(f"file bytes per sample, both copying 65528 bytes of stack: sfbt {ours_per:.0f}, "
              f"perf {theirs_per:.0f}: 1/{theirs_per / ours_per:.0f} (1/"
              f"{(theirs_per - 65528 + 8192) / ours_per:.0f} of perf's with its default 8192)"
              f"  goal <= 1/20: {'met' if ours_per * 20 <= theirs_per else 'NOT met'}")
        agreement(f"busy.c, 2 threads, {args.agree_runs} x {args.agree_seconds:g} s, "
                  "sfbt and perf at once", runs)

        python_runs = []
        for _ in range(args.agree_runs):
            loop = PythonLoop()
            targets.append(loop)
            python_runs.append(SideBySide(loop.pid, args.agree_seconds, env, work, 65528))
            loop.close()
            targets.remove(loop)
        agreement(f"{PYTHON} running a pure-Python loop", python_runs)

        # the target and the loops in one session (one autogroup, where
        # nice counts), the recorders each in its own, as typed in another
        # terminal
        niced = BusyTarget(program, 2, NICED)
        targets.append(niced)
        nice_runs = [SideBySide(niced.pid, args.nice_seconds, env, work, 65528, hz=NICE_HZ)]
        niced.close()
        targets.clear()
        agreement(f"busy.c under nice -n 19 beside two busy loops at normal priority in its "
                  f"session, {args.nice_seconds:g} s at {NICE_HZ} Hz", nice_runs)
        print(f"  the target's CPU time in the window: {nice_runs[0].cpu:.2f} s")
        for what, group in (("busy.c", runs), ("python3", python_runs),
                            ("busy.c under nice", nice_runs)):
            print(f"  {what}: samples lost, sfbt {sum(run.lost for run in group)}, perf "
                  f"{sum(run.perf_lost for run in group)}")

        four = BusyTarget(program, 4)
        targets.append(four)
        rate_runs = [SideBySide(four.pid, args.seconds * 2, env, work, 65528)
                     for _ in range(max(3, args.agree_runs))]
        ours = [run.rates()[0] for run in rate_runs]
        theirs = [run.rates()[1] for run in rate_runs]
        rate = statistics.median(ours)
        print(f"rate with 4 busy threads on {cpus} CPUs, samples per second of the target's "
              f"CPU time (schedstat), sfbt and perf at once: sfbt {rate:.1f} Hz (median; "
              f"range {min(ours):.1f}-{max(ours):.1f}), perf {statistics.median(theirs):.1f} "
              f"Hz ({min(theirs):.1f}-{max(theirs):.1f}) of {HZ}  goal >= 95: "
              f"{'met' if rate >= 95 else 'NOT met'}; samples lost: sfbt "
              f"{sum(run.lost for run in rate_runs)}, perf "
              f"{sum(run.perf_lost for run in rate_runs)}")
        archive = work / "all.sfbt"
        used = []
        for _ in range(3):
            window, out, _ = recording(
                [sys.executable, "-m", "sfbt", "record", "-a", "--hz", str(HZ),
                 "-o", str(archive)], four, args.seconds)
            used.append(window.cpu / cpus)
        share = statistics.median(used)
        print(f"sfbt record -a's own processor time: {share * 100:.1f}% of the machine "
              f"(median; range {min(used) * 100:.1f}-{max(used) * 100:.1f}%)  goal <= 2%: "
              f"{'met' if share <= 0.02 else 'NOT met'}")
    finally:
        for target in targets:
            target.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", action="store_true",
                        help="the ptrace sampler (sfbt record --idle) instead")
    parser.add_argument("--rounds", type=int, default=None,
                        help="paired rounds (default 9 with --idle, 15 on perf events; 0: "
                        "no slowdown windows)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds of a window (default 2 with --idle, 1.5 on perf events)")
    parser.add_argument("--busy", type=int, default=4,
                        help="with --idle: computing workers (of 8; default 4)")
    parser.add_argument("--perf-stack", type=int, default=65528,
                        help="the stack perf copies per sample in the slowdown windows "
                        "(default 65528, as sfbt; perf's own default is 8192)")
    parser.add_argument("--agree-seconds", type=float, default=10.0,
                        help="seconds of each side-by-side recording (default 10)")
    parser.add_argument("--agree-runs", type=int, default=2,
                        help="side-by-side recordings per program (default 2)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also `sfbt record` of the checkout in DIR (its plugin/), "
                        "interleaved in the slowdown rounds")
    parser.add_argument("--nice-seconds", type=float, default=90.0,
                        help="seconds of the nice case's recording (default 90: the target "
                        "gets a few percent of a CPU, some 2,600 samples at 999 Hz)")
    args = parser.parse_args()
    if args.idle:
        args.rounds = 9 if args.rounds is None else args.rounds
        args.seconds = 2.0 if args.seconds is None else args.seconds
        idle_bench(args)
    else:
        args.rounds = 15 if args.rounds is None else args.rounds
        args.seconds = 1.5 if args.seconds is None else args.seconds
        perf_bench(args)


if __name__ == "__main__":
    main()
