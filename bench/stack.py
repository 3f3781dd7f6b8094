"""`sfbt stack PID` against `gdb -batch -p PID -ex 'thread apply all bt'`
(gstack's way) on a 9-thread process (tests/programs/workers.c, -O2 PIE),
each a fresh process as a user runs them, cold (the interpreter's start
included), in paired, interleaved rounds (bench/pairing.py); eu-stack's
figure beside them when elfutils is installed.

sfbt runs as installed: from bytecode (compiled once into a cache of this
run's own), with its on-disk caches (synthesized SFrame rows, DWARF line
rows per file) filled by a first run, as they are after a user's
first run.  Goal: sfbt / gdb <= 0.2, each thread stopped <= 10 ms.

Then where sfbt's time goes, in one process: the interpreter's start,
imports, reading the process, the snapshots, the walks, symbolizing.

Run: python3 bench/stack.py [--rounds N] [--gdb PATH]
"""

import argparse
import json
import os
import shutil
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

PHASES = r"""
import sys, time, json
began = time.perf_counter()
from sfbt.live.process import Process
from sfbt.live.stack import Walker, thread_lines
imported = time.perf_counter()
process = Process(int(sys.argv[1]))
threads = process.threads()
opened = time.perf_counter()
states = [process.snapshot(tid, name) for tid, name in threads]
snapped = time.perf_counter()
walker = Walker(process.arch, process.modules(), process.read, process.executable)
walks = [walker.walk(state) for state in states]
walked = time.perf_counter()
lines = [thread_lines(walker, n, s, *w) for n, (s, w) in enumerate(zip(states, walks), 1)]
described = time.perf_counter()
print(json.dumps({"imports": imported - began, "process": opened - imported,
                  "snapshots": snapped - opened, "walks": walked - snapped,
                  "symbolize": described - walked,
                  "stopped": [s.extra["stopped"] for s in states]}))
"""


def environment(cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"), PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(command, env=None):
    began = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    seconds = time.perf_counter() - began
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return seconds, result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--gdb", default="gdb")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-stack-"))
    try:
        program = compile_program(work, "workers", "O2", True, ["workers.c"])
        env = environment(str(work / "pycache"))
        target = subprocess.Popen([str(program)], stdout=subprocess.PIPE, text=True)
        try:
            assert target.stdout.readline().strip() == "ready"
            measure(args, str(target.pid), env)
        finally:
            target.kill()
            target.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args, pid, env):
    sfbt = [sys.executable, "-m", "sfbt", "stack", pid]
    gdb = [args.gdb, "-nx", "-batch", "-p", pid, "-ex", "thread apply all bt"]
    _, text = timed(sfbt, env)  # fills the caches, compiles the bytecode
    threads = text.count("\nThread ") + text.startswith("Thread ")
    print(f"target: {threads} threads, pid {pid}")
    timed(gdb)

    def ours():
        return timed(sfbt, env)[0]

    def gdbs():
        return timed(gdb)[0]

    paired = paired_ratios(args.rounds, ours, gdbs)
    print(paired.line("sfbt stack / gdb thread apply all bt (cold)", goal=0.2))
    eu_stack = shutil.which("eu-stack")
    if eu_stack:
        eu = [eu_stack, "-p", pid]
        timed(eu)
        theirs = paired_ratios(args.rounds, ours, lambda: timed(eu)[0])
        print(theirs.line("sfbt stack / eu-stack -p (C, DWARF)"))
        print(paired_ratios(args.rounds, lambda: timed(eu)[0], gdbs).line(
            "eu-stack -p / gdb thread apply all bt"))
    else:
        print("eu-stack: not installed (apt-get install elfutils)")

    bare = statistics.median(timed([sys.executable, "-c", "pass"], env)[0]
                             for _ in range(args.rounds))
    phases = [json.loads(timed([sys.executable, "-c", PHASES, pid], env)[1])
              for _ in range(args.rounds)]
    print(f"where sfbt's time goes (medians of {args.rounds}): interpreter start "
          f"{bare * 1e3:.1f} ms, " + ", ".join(
              f"{name} {statistics.median(p[name] for p in phases) * 1e3:.1f} ms"
              for name in ("imports", "process", "snapshots", "walks", "symbolize")))
    stops = sorted(s for p in phases for s in p["stopped"])
    print(f"each thread stopped: median {statistics.median(stops) * 1e3:.3f} ms, "
          f"max {stops[-1] * 1e3:.3f} ms over {len(stops)} stops  goal <= 10 ms: "
          f"{'met' if stops[-1] <= 0.010 else 'NOT met'}")


if __name__ == "__main__":
    main()
