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
snprintf; its work counted in busy_work, read from its memory): in each
round a window alone, one with perf recording and one with sfbt, the one
that goes first turning; the target's slowdown under each against the
round's window alone (median of the rounds), each recorder's processor
time, its file's bytes per sample and the share of sfbt's stacks walked
whole.  Then with 4 busy threads on the
machine's processors, the rate sfbt keeps per second of each thread's
processor time, and `sfbt record -a`'s own processor time.

Goals: slowdown <= perf's + 3 points; >= 95 Hz with 4 busy threads;
>= 99% of stacks complete; the archive <= 1/20 of perf.data per sample;
-a <= 2% of the machine.

Run: python3 bench/record.py [--rounds N] [--seconds S] [--perf-stack BYTES]
"""

import argparse
import collections
import os
import re
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

from gdb_support import compile_program  # noqa: E402
from pairing import paired_ratios  # noqa: E402

HZ = 99
#: how long a recording runs before its window begins (its first
#: mappings, names and walks done)
SETTLE = 0.3
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


class Target:
    """The workers program, counting its work for as long as the bench runs."""

    def __init__(self, program, busy):
        self.process = subprocess.Popen([str(program), str(busy), "-1"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("the target did not start")
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
    """(Window, sfbt's summary match) of a window with `sfbt record` on."""
    recorder = subprocess.Popen(command + ["-p", str(target.pid)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    try:
        started = recorder.stderr.readline()  # said once it samples
        if not started.startswith("Recording"):
            raise SystemExit(f"sfbt record failed: {started.strip()}")
        time.sleep(SETTLE)
        window = Window(target, seconds, recorder.pid)
        recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=120)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
    if recorder.returncode != 0:
        raise SystemExit(f"sfbt record failed: {err.strip()}")
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
    workers), its work read from its busy_work counter."""

    def __init__(self, program, threads):
        self.process = subprocess.Popen([str(program), str(threads - 1)],
                                        stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("busy did not start")
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
        self.process.kill()
        self.process.wait()


class BusyWindow:
    """Work per second of a BusyTarget over ``seconds``, the processor
    seconds per second of ``recorder`` (a pid) and of the target."""

    def __init__(self, target, seconds, recorder=None):
        cpu = run_time(recorder) if recorder else 0.0
        target_cpu = run_time(target.pid)
        work, start = target.work()
        time.sleep(seconds)
        done, end = target.work()
        elapsed = end - start
        self.rate = (done - work) / elapsed
        self.cpu = (run_time(recorder) - cpu) / elapsed if recorder else 0.0
        self.target_cpu = run_time(target.pid) - target_cpu


def recording(command, target, seconds, ready=lambda line: True):
    """(BusyWindow, stdout, stderr) of a window with ``command`` recording;
    it is stopped with SIGINT after the window."""
    recorder = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    try:
        if recorder.stderr is not None and command[0] == sys.executable:
            started = recorder.stderr.readline()
            if not started.startswith("Recording"):
                raise SystemExit(f"sfbt record failed: {started.strip()}")
        time.sleep(SETTLE)
        window = BusyWindow(target, seconds, recorder.pid)
        recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=300)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
    if recorder.returncode not in (0, -signal.SIGINT, 130):
        raise SystemExit(f"{command[0]} failed: {err.strip()}")
    return window, out, err


PERF_SUMMARY = re.compile(r"Recorded (\d+) stacks in (\d+) samples over ([\d.]+) s "
                          r"\(([\d.]+) Hz of [\d.]+ per CPU second of (?:the process|the "
                          r"machine), on perf events\)[^\n]*(?:\n(\d+) longer than)?")


def perf_samples(data):
    """The samples in a perf.data file."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid"],
                            capture_output=True, text=True, timeout=600)
    return len(script.stdout.splitlines())


def function_name(name):
    """A function's name as both sides can be matched by: perf's and
    GDB's spellings of the same C library function differ in a prefix or a
    suffix (__GI___qsort_r, msort_with_tmp.part.0, "(inlined)")."""
    name = name.replace(" (inlined)", "")
    name = re.sub(r"\.(part|constprop|isra|cold)(\.\d+)?", "", name)
    return re.sub(r"^(__GI_)?_*", "", name)


def perf_shares(data):
    """({function: self samples}, {function: samples it is in}, samples) of
    a perf.data file, from perf report (kernel functions left out of the
    tables, their samples counted)."""
    tables = []
    for mode in ("--no-children", "--children"):
        report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", mode, "-q",
                                 "--sort", "sym", "-n", "-g", "none"],
                                capture_output=True, text=True, timeout=600).stdout
        counts = collections.Counter()
        for line in report.splitlines():
            # children: "total% self% samples [.] name"; no children: "self% samples ..."
            match = re.match(r"\s*([\d.]+)%\s+(?:[\d.]+%\s+)?(\d+)\s+\[\.\]\s+(.+)$", line)
            if match:
                counts[function_name(match[3].strip())] = max(
                    counts[function_name(match[3].strip())],
                    int(match[2]) if mode == "--no-children" else float(match[1]))
        tables.append(counts)
    return tables[0], tables[1], perf_samples(data)


def sfbt_shares(archive, env):
    """({function: self samples}, {function: samples it is in}, samples)
    of an sfbt archive, from sfbt fold."""
    folded = subprocess.run([sys.executable, "-m", "sfbt", "fold", str(archive)],
                            capture_output=True, text=True, env=env, timeout=600).stdout
    own, total, samples = collections.Counter(), collections.Counter(), 0
    for line in folded.splitlines():
        stack, count = line.rsplit(" ", 1)
        functions = [function_name(name) for name in stack.split(";")]
        own[functions[-1]] += int(count)
        for name in set(functions):
            total[name] += int(count)
        samples += int(count)
    return own, total, samples


def perf_bench(args):
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-perf-"))
    cpus = os.cpu_count()
    targets = []
    try:
        program = compile_program(work, "busy", "O2", True, ["busy.c"])
        env = environment(str(work / "pycache"))
        os.environ.update(env)
        archive, data = work / "profile.sfbt", work / "perf.data"
        target = BusyTarget(program, 2)
        targets.append(target)
        sfbt = [sys.executable, "-m", "sfbt", "record", "--hz", str(HZ), "-p",
                str(target.pid), "-o", str(archive)]
        perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(HZ), "--call-graph",
                f"dwarf,{args.perf_stack}", "-p", str(target.pid), "-o", str(data)]
        ours, theirs = [], []
        # [self samples, total share x samples, samples] summed over the windows
        sfbt_profile = [collections.Counter(), collections.Counter(), 0]
        perf_profile = [collections.Counter(), collections.Counter(), 0]

        def add_shares(profile, shares):
            own, total, samples = shares
            profile[0].update(own)
            # perf's totals are percentages: weighed by the window's samples
            profile[1].update({name: (value * samples / 100 if profile is perf_profile
                                      else value) for name, value in total.items()})
            profile[2] += samples

        def with_sfbt():
            window, out, err = recording(sfbt, target, args.seconds)
            summary = PERF_SUMMARY.search(out)
            if summary is None:
                raise SystemExit(f"unexpected sfbt record output: {out!r} {err!r}")
            ours.append((window, summary, archive.stat().st_size))
            add_shares(sfbt_profile, sfbt_shares(archive, env))
            return 1.0 / window.rate

        def with_perf():
            window, _, _ = recording(perf, target, args.seconds)
            theirs.append((window, data.stat().st_size, perf_samples(data)))
            add_shares(perf_profile, perf_shares(data))
            return 1.0 / window.rate

        def alone():
            return 1.0 / BusyWindow(target, args.seconds).rate

        with_sfbt()  # compiles the bytecode, fills the caches
        ours.clear()
        sfbt_profile[:] = [collections.Counter(), collections.Counter(), 0]
        sfbt_slow, perf_slow = [], []
        sides = [alone, with_perf, with_sfbt]
        for index in range(args.rounds):  # each round the three in turn, the first moving
            times = {}
            for side in sides[index % 3:] + sides[:index % 3]:
                times[side] = side()
            sfbt_slow.append(1 - times[alone] / times[with_sfbt])
            perf_slow.append(1 - times[alone] / times[with_perf])
        print(f"target: busy.c, 2 busy threads, {cpus} CPUs; windows of {args.seconds:g} s; "
              f"perf copies {args.perf_stack} bytes of stack; load average "
              f"{os.getloadavg()[0]:.1f}")
        print(f"slowdown under perf record --call-graph dwarf at {HZ} Hz: "
              f"{percent_range(perf_slow)}")
        goal = statistics.median(perf_slow) + 0.03
        print(f"slowdown under sfbt record at {HZ} Hz: {percent_range(sfbt_slow)}  goal <= "
              f"perf's + 3 points ({goal * 100:.1f}%): "
              f"{'met' if statistics.median(sfbt_slow) <= goal else 'NOT met'}")
        for name, windows in (("perf", [w for w, _, _ in theirs]),
                              ("sfbt", [w for w, _, _ in ours])):
            used = [window.cpu for window in windows]
            print(f"{name}'s own processor time: {statistics.median(used):.3f} CPU s per s "
                  f"(median; range {min(used):.3f}-{max(used):.3f})")
        stacks = sum(int(summary[1]) for _, summary, _ in ours)
        cut = sum(int(summary[5] or 0) for _, summary, _ in ours)
        complete = 1 - cut / stacks if stacks else 0.0
        print(f"sfbt's stacks walked whole: {complete * 100:.2f}% of {stacks}  goal >= 99%: "
              f"{'met' if complete >= 0.99 else 'NOT met'}")
        ours_per = statistics.median(size / int(summary[1]) for _, summary, size in ours)
        theirs_per = statistics.median(size / count for _, size, count in theirs if count)
        print(f"file bytes per sample: sfbt {ours_per:.0f}, perf {theirs_per:.0f}: 1/"
              f"{theirs_per / ours_per:.0f}  goal <= 1/20: "
              f"{'met' if ours_per * 20 <= theirs_per else 'NOT met'}")
        hottest = [name for name, _ in perf_profile[0].most_common(10)]
        worst = 0.0
        print("the 10 hottest functions (perf's), self and total shares: perf / sfbt")
        for name in hottest:
            shares = [(profile[0][name] / profile[2], profile[1][name] / profile[2])
                      for profile in (perf_profile, sfbt_profile)]
            worst = max(worst, abs(shares[0][0] - shares[1][0]),
                        abs(shares[0][1] - shares[1][1]))
            print(f"  {name}: self {shares[0][0] * 100:.1f}% / {shares[1][0] * 100:.1f}%, "
                  f"total {shares[0][1] * 100:.1f}% / {shares[1][1] * 100:.1f}%")
        print(f"largest difference {worst * 100:.1f} points ({perf_profile[2]} and "
              f"{sfbt_profile[2]} samples)  goal <= 3: {'met' if worst <= 0.03 else 'NOT met'}")
        target.close()
        targets.clear()

        four = BusyTarget(program, 4)
        targets.append(four)
        rates = []
        for _ in range(max(3, args.rounds // 3)):
            window, out, _ = recording(
                [sys.executable, "-m", "sfbt", "record", "--hz", str(HZ), "-p", str(four.pid),
                 "-o", str(archive)], four, args.seconds)
            summary = PERF_SUMMARY.search(out)
            # the samples of the window alone are not told apart: the whole
            # recording's stacks over the target's processor time meanwhile
            rates.append(float(summary[4]))
        rate = statistics.median(rates)
        print(f"rate with 4 busy threads on {cpus} CPUs: {rate:.1f} Hz of {HZ} per second "
              f"of each thread's processor time (median; range {min(rates):.1f}-"
              f"{max(rates):.1f})  goal >= 95: {'met' if rate >= 95 else 'NOT met'}")
        used = []
        for _ in range(max(3, args.rounds // 3)):
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
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--busy", type=int, default=4,
                        help="with --idle: computing workers (of 8; default 4)")
    parser.add_argument("--perf-stack", type=int, default=8192,
                        help="the stack perf copies per sample (default 8192, perf's; "
                        "65528 as sfbt's: perf's totals of deep stacks are then whole)")
    args = parser.parse_args()
    if args.idle:
        idle_bench(args)
    else:
        perf_bench(args)


if __name__ == "__main__":
    main()
