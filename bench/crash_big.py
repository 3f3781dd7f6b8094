"""The crash handler's time and peak memory on the 10-thread, 2 GB crash
(`crasher big`, a 2.2 GB core) through the kernel, this checkout's
handler against another checkout's, interleaved (a crash into the one,
then into the other, the order swapped each round), optionally beside N
busy loops (--load N).

Each handler is run by bench/programs/handler_timer.c in its place in
core_pattern, which times it from its own start (the kernel's exec of
it) to the handler's exit and takes its peak memory from wait4; the
record's `handler_ms` (from the handler's start to its record written)
is printed beside.  Each crash goes into a store of its own, so that
every crash is a bucket's first (every thread walked, the crash kept
whole).  Medians, and the median of the paired ratios this / baseline.
Goals: <= 200 ms and <= 60 MB.

It sets the machine's core_pattern and core_pipe_limit (root only) under
the lock the tests take, and puts them back however it ends.

Run (as root): python3 bench/crash_big.py --baseline PLUGIN_DIR
                   [--rounds N] [--load N]
"""

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash_repeat import launcher  # noqa: E402
from crashes import CORE_PATTERN, CORE_PIPE_LIMIT, PLUGIN, build, crash, entry_of  # noqa: E402

TIMER = Path(__file__).resolve().parent / "programs" / "handler_timer.c"


def timed_crash(program, work, timer, store_dir, plugin):
    """(ms from the kernel starting the handler to its exit, its record's
    handler_ms, peak MB) of one crash of ``program big`` into a new store
    of ``plugin``'s handler."""
    path = launcher(plugin, store_dir)
    with open(CORE_PATTERN, "w") as stream:
        stream.write(f"|{timer} {path} crash-handler %P %i %s %t %u %g %e\n")
    entry = entry_of(store_dir, crash(program, "big", work))
    times = Path(f"{path}.times")
    for _ in range(600):  # the timer writes after the handler's exit
        if times.exists() and times.read_text().endswith("\n"):
            break
        time.sleep(0.05)
    started, ended, kilobytes, status = map(int, times.read_text().split())
    assert status == 0, f"the handler exited with status {status}"
    return (ended - started) / 1e6, entry["handler_ms"], kilobytes / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="PLUGIN_DIR", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="busy loops running beside the crashes")
    args = parser.parse_args()
    from test_crashes import machine_lock
    work = Path(tempfile.mkdtemp(prefix="sfbt-big-"))
    atexit.register(shutil.rmtree, work, True)
    program = build(work)
    timer = work / "t"
    subprocess.run(["gcc", "-O2", "-o", timer, TIMER], check=True)
    sides = {"baseline": Path(args.baseline).resolve(), "this": PLUGIN}
    figures = {name: [] for name in sides}
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(args.load)]
    try:
        with machine_lock():
            with open(CORE_PIPE_LIMIT, "w") as stream:
                stream.write("16\n")
            for round_number in range(args.rounds):
                order = list(sides) if round_number % 2 == 0 else list(sides)[::-1]
                for name in order:
                    figures[name].append(timed_crash(
                        program, work, timer, work / f"{name[0]}{round_number}",
                        sides[name]))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"crasher big (10 threads, 2 GB), {args.rounds} rounds, {args.load} busy "
          f"loops beside; load average {os.getloadavg()[0]:.1f} at the end")
    for name in sides:
        exits, records, peaks = zip(*figures[name])
        print(f"  {name:8}: to its exit {statistics.median(exits):6.1f} ms "
              f"(min {min(exits):.1f}, max {max(exits):.1f}), to its record "
              f"{statistics.median(records):.0f} ms, peak {statistics.median(peaks):.1f} MB")
    for column, label in ((0, "to the exit"), (1, "to the record"), (2, "peak")):
        ratios = [this[column] / base[column]
                  for this, base in zip(figures["this"], figures["baseline"]) if base[column]]
        print(f"  this / baseline, {label}: {statistics.median(ratios):.2f} "
              f"(median of {len(ratios)} paired ratios)")


if __name__ == "__main__":
    main()
