"""`sfbt record --hz 99` on a 9-thread process (tests/programs/workers.c,
-O2 PIE: main, BUSY computing workers, the others waiting): the rate it
keeps, how long it stops each thread per sample, and the target's own
progress (the work its computing workers count in a fixed time) with and
without recording, in paired, interleaved rounds (bench/pairing.py).

Goals: the rate kept >= 95 Hz; slowdown (1 - work recorded / work alone)
<= 5%; each thread stopped <= 0.5 ms per sample (median).

Run: python3 bench/record.py [--rounds N] [--seconds S] [--busy N]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from gdb_support import compile_program  # noqa: E402
from pairing import paired_ratios  # noqa: E402

HZ = 99
SUMMARY = re.compile(r"in (\d+) samples over ([\d.]+) s \(([\d.]+) Hz of [\d.]+\).*"
                     r"stopped for ([\d.]+) ms per sample \(median; at most ([\d.]+) ms\)",
                     re.S)


def environment(cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"), PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def work_done(program, busy, seconds, record=None):
    """The target's work in ``seconds``, counted from the moment the
    recorder (``record(pid)``, which returns its Popen) samples."""
    target = subprocess.Popen([str(program), str(busy), str(seconds)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    recorder = None
    try:
        assert target.stdout.readline().strip() == "ready"
        if record is not None:
            recorder = record(target.pid)
            # sfbt record says so once it samples
            started = recorder.stderr.readline()
            if not started.startswith("Recording"):
                raise SystemExit(f"sfbt record failed: {started.strip()}")
        target.stdin.write("go\n")
        target.stdin.flush()
        line = target.stdout.readline()
        target.wait(timeout=seconds + 60)
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    summary = None
    if recorder is not None:
        out, err = recorder.communicate(timeout=120)
        if recorder.returncode != 0:
            raise SystemExit(f"sfbt record failed: {err.strip()}")
        summary = SUMMARY.search(out)
        if summary is None:
            raise SystemExit(f"unexpected sfbt record output: {out!r}")
    return int(line.split()[1]), summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=4,
                        help="computing workers (of 8; default 4)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-record-"))
    try:
        program = compile_program(work, "workers", "O2", True, ["workers.c"])
        env = environment(str(work / "pycache"))
        summaries = []

        def record(pid):
            return subprocess.Popen(
                [sys.executable, "-m", "sfbt", "record", "-p", str(pid), "--hz", str(HZ),
                 "-o", str(work / "profile.sfbt")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

        def recorded():
            done, summary = work_done(program, args.busy, args.seconds, record)
            summaries.append(summary)
            return 1.0 / done

        def alone():
            return 1.0 / work_done(program, args.busy, args.seconds)[0]

        recorded()  # compiles the bytecode, fills the caches
        summaries.clear()
        paired = paired_ratios(args.rounds, recorded, alone)
        print(f"target: 9 threads, {args.busy} computing, {args.seconds} s a run, "
              f"{os.cpu_count()} CPUs")
        slowdowns = [1 - 1 / ratio for ratio in paired.ratios]
        slowdown = statistics.median(slowdowns)
        print(f"slowdown of the target's work while recorded at {HZ} Hz: "
              f"{slowdown * 100:.1f}% (median of {len(slowdowns)} paired rounds, range "
              f"{min(slowdowns) * 100:.1f}% to {max(slowdowns) * 100:.1f}%)  goal <= 5%: "
              f"{'met' if slowdown <= 0.05 else 'NOT met'}")
        rates = [float(s[3]) for s in summaries]
        rate = statistics.median(rates)
        print(f"rate kept: {rate:.1f} Hz of {HZ} (median; range {min(rates):.1f}-"
              f"{max(rates):.1f})  goal >= 95: {'met' if rate >= 95 else 'NOT met'}")
        medians = [float(s[4]) for s in summaries]
        worst = max(float(s[5]) for s in summaries)
        median = statistics.median(medians)
        print(f"each thread stopped per sample: median {median:.3f} ms, at most "
              f"{worst:.3f} ms  goal median <= 0.5 ms: {'met' if median <= 0.5 else 'NOT met'}")
        eu_stack = shutil.which("eu-stack")
        if eu_stack:
            print("eu-stack has no sampling mode; bench/stack.py gives its one-shot time")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
