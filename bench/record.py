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

Run: python3 bench/record.py [--rounds N] [--seconds S] [--busy N]
"""

import argparse
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--busy", type=int, default=4,
                        help="computing workers (of 8; default 4)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-record-"))
    target = None
    try:
        program = compile_program(work, "workers", "O2", True, ["workers.c"])
        env = environment(str(work / "pycache"))
        command = [sys.executable, "-m", "sfbt", "record", "--hz", str(HZ),
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


if __name__ == "__main__":
    main()
