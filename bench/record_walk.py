"""The processor time `sfbt record` (perf events) spends per sample on
its own path, walk and encoding: this tree against a baseline tree.

perf-events samples of tests/programs/busy.c (-O2, no frame pointers,
2 busy threads: changing deep stacks through qsort and snprintf) are
captured once (registers and stack copies, at 999 Hz), then replayed
through PerfRecorder._take (the walk, its reuse of the thread's previous
walk, the trace's encoding, the event) in a process of each tree in turn,
the target still running (its read-only mappings are read as in a
recording).  Each replay first takes 50 samples (its files' rows and
symbols read), then times all of them (CPU time, the median of 3
passes); the figure is the median of the rounds' paired ratios
(bench/pairing.py).  Both trees must walk every sample to the same
frames: the replays print a digest of the walks, compared.

Run: python3 bench/record_walk.py --baseline DIR [--rounds N] [--seconds S]
(DIR: a checkout of the tree to compare with, e.g. `git worktree add`)."""

import argparse
import hashlib
import os
import pickle
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


def capture(pid, path, seconds):
    from live_harness import record_taking
    from sfbt.live import perf_source

    recorder = perf_source.PerfRecorder(pid, hz=999)
    kept = []
    take = recorder._take

    def keep(sample):
        if sample.pid == pid and sample.registers:
            kept.append((sample.pid, sample.tid, sample.time, dict(sample.registers),
                         bytes(sample.stack), sample.full))
        take(sample)

    record_taking(recorder, seconds, keep)
    with open(path, "wb") as out:
        pickle.dump(kept, out)
    return len(kept)


def replay(pid, path):
    """Prints the digest of the walks, then ms of CPU per sample of 3 passes."""
    from sfbt.live import perf_source
    from sfbt.live.perf_events import Sample
    from sfbt.live.samples import SampleWriter

    with open(path, "rb") as data:
        samples = [Sample(*fields) for fields in pickle.load(data)]
    recorder = perf_source.PerfRecorder(pid, hz=99)
    for sample in samples[:50]:
        recorder._take(sample)
    walks = []
    trace_id = recorder.writer.trace_id
    recorder.writer.trace_id = lambda frames, stop, *rest: (
        walks.append((stop, [(f.pc, f.interrupted, f.how, f.cfa, sorted(f.registers.items()))
                             for f in frames])), trace_id(frames, stop, *rest))[1]
    for sample in samples:
        recorder._take(sample)
    print(hashlib.sha1(repr(walks).encode()).hexdigest())
    times = []
    for _ in range(3):
        recorder.writer = SampleWriter(recorder.archive, recorder.writer.arch, recorder.label)
        start = time.process_time()
        for sample in samples:
            recorder._take(sample)
        times.append((time.process_time() - start) / len(samples) * 1e3)
    recorder.close()
    print(statistics.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="a checkout of the tree to compare")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--replay", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        replay(int(args.replay[0]), args.replay[1])
        return
    from gdb_support import compile_program
    from pairing import paired_ratios

    trees = {"this tree": ROOT / "plugin", "baseline": Path(args.baseline).resolve() / "plugin"}
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-walk-"))
    target = None
    try:
        program = compile_program(work, "busy", "O2", True, ["busy.c"])
        target = subprocess.Popen([str(program), "1"], stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)
        if target.stdout.readline().strip() != "ready":
            raise SystemExit("busy did not start")
        samples = work / "samples.pickle"
        env = dict(os.environ, PYTHONPATH=str(trees["this tree"]))
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import record_walk; print(record_walk.capture(int(sys.argv[2]), "
                        "sys.argv[3], float(sys.argv[4])), 'samples captured')",
                        str(ROOT / "bench"), str(target.pid), str(samples), str(args.seconds)],
                       env=env, check=True)
        digests = {}

        def side(name):
            def run():
                out = subprocess.run(
                    [sys.executable, __file__, "--baseline", args.baseline, "--replay",
                     str(target.pid), str(samples)],
                    env=dict(os.environ, PYTHONPATH=str(trees[name])),
                    capture_output=True, text=True, check=True).stdout.split()
                digests.setdefault(name, set()).add(out[0])
                return float(out[1])
            return run

        paired = paired_ratios(args.rounds, side("this tree"), side("baseline"))
        same = digests["this tree"] == digests["baseline"] and len(digests["baseline"]) == 1
        print(f"ms of CPU per sample (median of {args.rounds} rounds): this tree "
              f"{statistics.median(paired.ours):.3f}, baseline "
              f"{statistics.median(paired.anchor):.3f}; baseline / this tree "
              f"{1 / statistics.median(paired.ratios):.2f} (median of paired ratios); "
              f"walks {'identical' if same else 'DIFFER'}")
    finally:
        if target is not None:
            os.killpg(target.pid, 9)
            target.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
