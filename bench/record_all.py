"""`sfbt record -a` at 99 Hz: sfbt's own processor time as a share of the
machine, beside `perf record -a -e cpu-clock -F 99 --call-graph dwarf`'s.

The load keeps every processor busy with several processes, some
short-lived: two busy programs (tests/programs/busy.c, one computing
thread each: recursion through qsort and snprintf, no frame pointers) and
a shell loop starting, over and over, a program that computes for a few
milliseconds and exits (tests/programs/brief.c) and /bin/true.  In each
round sfbt and perf record the machine for a window of S seconds each,
in turn (the one that goes first alternating); a recorder's share is its
processor time in the window (its threads' schedstat) over the window
times the processors.  Printed: sfbt's share (median of the rounds), the
median of the paired ratios sfbt / perf, each one's processor time after
the window until it exited (sfbt's walk of the samples it kept while no
processor was free, perf's writing out), and how many of the short-lived
processes sfbt recorded with their functions named.

Goal: sfbt's share <= 2% of the machine.

Run: python3 bench/record_all.py [--rounds N] [--seconds S] [--costs]
(--costs: one more recording with the processor time of its parts
counted, printed per call: a sample, its walk, a new process's session,
the trace's encoding; processor time, not wall time, so that a loaded
machine's waits for a processor are left out)
"""

import argparse
import json
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
from record import children_seconds, environment, recorder_window, run_time, started  # noqa: E402,E501

HZ = 99
#: how long a recorder runs before its window begins (its start, the
#: processes that already run read)
SETTLE = 1.0
#: milliseconds of processor time each short-lived process computes
BRIEF_MS = 20


#: `sfbt record` with the processor time of a few of its functions
#: counted (COSTS: a profiler's own cost per call would swamp them),
#: printed as the last line of its stderr: {name: [seconds, calls]}
TIMED = """
import json, sys, time
from sfbt.live import perf_source, samples
costs = {}

def timed(owner, name):
    original = getattr(owner, name)
    def counted(*args, **kwargs):
        began = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            cost = costs.setdefault(name, [0.0, 0])
            cost[0] += time.process_time() - began
            cost[1] += 1
    setattr(owner, name, counted)

for name in ("_take", "_find", "_read_rings", "_final_walk"):
    timed(perf_source.PerfRecorder, name)
timed(perf_source, "walk_sample")
timed(perf_source, "walking_session")
timed(samples.SampleWriter, "trace_id")
from sfbt.cli import main
sys.argv = ["sfbt"] + sys.argv[1:]
try:
    main()
finally:
    print(json.dumps(costs), file=sys.stderr)
"""
#: the functions whose processor time per call is printed
COSTS = (("_take", "a sample in all"), ("walk_sample", "its walk"),
         ("walking_session", "a process's session (its modules, image map)"),
         ("_find", "a process that ran before the recording, read from /proc"),
         ("trace_id", "a trace's encoding"),
         ("_read_rings", "a round's reading of the rings (records parsed, merged)"),
         ("_final_walk", "the walk after the recording"))


class Load:
    """The busy programs and the loop of short-lived ones."""

    def __init__(self, busy, brief):
        self.processes = [started([str(busy), "1"], "busy") for _ in range(2)]
        loop = f"while :; do {brief} {BRIEF_MS}; /bin/true; done"
        self.processes.append(subprocess.Popen(["sh", "-c", loop], start_new_session=True))

    def close(self):
        for process in self.processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def window(command, seconds, env):
    """(the recorder's processor seconds per second over ``seconds``, its
    processor seconds from their end until it exited, stdout, stderr) of
    ``command`` recording, stopped with SIGINT after them."""
    ended = []

    def used(pid):
        before, began = run_time(pid), time.monotonic()
        time.sleep(seconds)
        ended.append(run_time(pid))
        return (ended[0] - before) / (time.monotonic() - began)

    start = children_seconds()
    share, out, err = recorder_window(command, SETTLE, used, env)
    return share, max(0.0, children_seconds() - start - ended[0]), out, err


def brief_named(archive, env):
    """(short-lived processes recorded, those with brief_work named)."""
    decoded = subprocess.run([sys.executable, "-m", "sfbt", "cbf", "decode", str(archive)],
                             capture_output=True, text=True, env=env, check=True).stdout
    seen, named = set(), set()
    for part in re.split(r"^Backtrace (?=\d)", decoded, flags=re.M)[1:]:
        match = re.search(r"\(\d+ brief\) of process (\d+)", part)
        if match:
            seen.add(match[1])
            if " in brief_work " in part:
                named.add(match[1])
    return len(seen), len(named)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--costs", action="store_true",
                        help="one more recording, what each sample costs printed")
    args = parser.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("perf is not installed (linux-perf)")
    work = Path(tempfile.mkdtemp(prefix="sfbt-record-all-"))
    env = environment(str(work / "pycache"))
    cpus = os.cpu_count() or 1
    load = None
    try:
        busy = compile_program(work, "busy", "O2", True, ["busy.c"])
        brief = compile_program(work, "brief", "O2", True, ["brief.c"])
        load = Load(busy, brief)
        archive, data = work / "all.sfbt", work / "perf.data"
        sfbt = [sys.executable, "-m", "sfbt", "record", "-a", "--hz", str(HZ),
                "-o", str(archive)]
        perf = ["perf", "record", "-q", "-a", "-e", "cpu-clock", "-F", str(HZ),
                "--call-graph", "dwarf", "-o", str(data)]
        briefs = []
        after = {"sfbt": [], "perf": []}

        def ours():
            used, later, _, _ = window(sfbt, args.seconds, env)
            after["sfbt"].append(later)
            briefs.append(brief_named(archive, env))
            return used / cpus

        def anchor():
            used, later, _, _ = window(perf, args.seconds, env)
            after["perf"].append(later)
            return used / cpus

        paired = paired_ratios(args.rounds, ours, anchor)
        share = statistics.median(paired.ours)
        print(f"sfbt record -a at {HZ} Hz, own processor time: {share * 100:.2f}% of the "
              f"machine ({cpus} CPUs; median of {args.rounds}, range "
              f"{min(paired.ours) * 100:.2f}-{max(paired.ours) * 100:.2f}%)  goal <= 2%: "
              f"{'met' if share <= 0.02 else 'NOT met'}")
        print(f"perf record -a --call-graph dwarf: "
              f"{statistics.median(paired.anchor) * 100:.2f}% of the machine; sfbt / perf: "
              f"{paired.ratio:.2f} (median of paired ratios, range {min(paired.ratios):.2f}-"
              f"{max(paired.ratios):.2f})")
        for name, shares in (("sfbt", paired.ours), ("perf", paired.anchor)):
            later = statistics.median(after[name])
            share = later / (args.seconds * cpus)  # of the machine over the window
            print(f"{name}'s processor time after the window, until it exited: {later:.2f} s "
                  f"(median; range {min(after[name]):.2f}-{max(after[name]):.2f}), "
                  f"{share * 100:.2f}% of the machine over the window; window and after "
                  f"together: {(statistics.median(shares) + share) * 100:.2f}%")
        seen = sum(s for s, _ in briefs)
        named = sum(n for _, n in briefs)
        print(f"short-lived processes ({BRIEF_MS} ms each) recorded: {seen}, "
              f"{named} with brief_work named")
        if args.costs:
            _, _, out, err = window([sys.executable, "-c", TIMED, *sfbt[3:]], args.seconds, env)
            costs = json.loads(err.strip().splitlines()[-1])
            print(f"processor time in one more recording ({out.splitlines()[0]}):")
            for name, what in COSTS:
                seconds, calls = costs.get(name, (0.0, 0))
                if calls:
                    print(f"  {what}: {seconds / calls * 1e3:.2f} ms ({calls} calls)")
    finally:
        if load is not None:
            load.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
