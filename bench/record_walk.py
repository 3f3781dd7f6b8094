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
passes), and the first 200 again each in a new session (as a process
`sfbt record -a` meets for the first time: a new module map, the
recorder's rows and files kept); each figure is the median of the
rounds' paired ratios (bench/pairing.py).  Both trees must walk every
sample to the same frames: the replays print a digest of the walks,
compared, and how many reached the outermost frame.

Then the same in real recordings: `sfbt record -p` of each tree in turn
on the same busy.c (2 busy threads) at 99 Hz, its processor time over a
window of S seconds once it sampled for 1 s (its start-up, its first
walks left out), over the samples it took in the window (its rate, from
its summary, times S): the ring's records, the walk, the encoding and
the collector, all a recording spends per sample.

Run: python3 bench/record_walk.py --baseline DIR [--rounds N] [--seconds S]
(DIR: a checkout of the tree to compare with, e.g. `git worktree add`)."""

import argparse
import hashlib
import os
import pickle
import re
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


#: samples replayed each in a new session
COLD = 200


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
    """Prints the digest of the walks, the share of them that reached the
    outermost frame, then ms of CPU per sample: in the process's one
    session (the median of 3 passes), and each sample in a new session
    (COLD of them: a process `-a` meets for the first time, its module
    map new, the recorder's rows and files kept)."""
    from sfbt.live import perf_source
    from sfbt.live.perf_events import Sample
    from sfbt.live.samples import SampleWriter
    from sfbt.unwind.walk import STOP_OUTERMOST

    with open(path, "rb") as data:
        samples = [Sample(*fields) for fields in pickle.load(data)]
    recorder = perf_source.PerfRecorder(pid, hz=99)
    recorder._processes[pid].start()  # its mappings, as once its events are enabled
    for sample in samples[:50]:
        recorder._take(sample)
    walks = []
    trace_id = recorder.writer.trace_id
    recorder.writer.trace_id = lambda frames, stop, *rest: (
        walks.append((stop, [(f.pc, f.interrupted, f.how, f.cfa, sorted(f.registers.items()))
                             for f in frames])), trace_id(frames, stop, *rest))[1]
    sampled = recorder._processes[pid]  # read from /proc at the start
    for n, sample in enumerate(samples):
        if n < COLD:
            sampled.session = None
        recorder._take(sample)
    print(hashlib.sha1(repr(walks).encode()).hexdigest())
    print(sum(stop == STOP_OUTERMOST for stop, _ in walks) / len(walks))
    times = []
    for _ in range(3):
        recorder.writer = SampleWriter(recorder.archive, recorder.writer.arch, recorder.label)
        start = time.process_time()
        for sample in samples:
            recorder._take(sample)
        times.append((time.process_time() - start) / len(samples) * 1e3)
    print(statistics.median(times))
    start = time.process_time()
    for sample in samples[:COLD]:
        sampled.session = None
        recorder._take(sample)
    print((time.process_time() - start) / min(COLD, len(samples)) * 1e3)
    recorder.close()


SUMMARY = re.compile(r"in (\d+) samples over ([\d.]+) s")


def recording(tree, pid, args, work):
    """A function that records process ``pid`` with the sfbt of ``tree``
    and gives its ms of CPU per sample in a window of args.seconds."""
    from record import environment, recorder_window, run_time

    env = environment(str(work / f"pycache-{tree.parent.name}"))
    env["PYTHONPATH"] = str(tree)
    command = [sys.executable, "-m", "sfbt", "record", "-p", str(pid), "--hz", "99",
               "-o", str(work / "live.sfbt")]

    def window(recorder_pid):
        before, began = run_time(recorder_pid), time.monotonic()
        time.sleep(args.seconds)
        return run_time(recorder_pid) - before, time.monotonic() - began

    def run():
        (used, seconds), out, _ = recorder_window(command, 1.0, window, env)
        found = SUMMARY.search(out)
        if found is None:
            raise SystemExit(f"unexpected sfbt record output: {out!r}")
        rate = int(found[1]) / float(found[2])
        return used / (rate * seconds) * 1e3
    return run


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

        complete, cold = {}, {}

        def side(name):
            """The replay's CPU per sample in one session; each in a new
            session kept in ``cold``."""
            def run():
                out = subprocess.run(
                    [sys.executable, __file__, "--baseline", args.baseline, "--replay",
                     str(target.pid), str(samples)],
                    env=dict(os.environ, PYTHONPATH=str(trees[name])),
                    capture_output=True, text=True, check=True).stdout.split()
                digests.setdefault(name, set()).add(out[0])
                complete.setdefault(name, set()).add(float(out[1]))
                cold.setdefault(name, []).append(float(out[3]))
                return float(out[2])
            return run

        paired = paired_ratios(args.rounds, side("this tree"), side("baseline"))
        cold_ratios = [ours / theirs for ours, theirs in zip(cold["this tree"], cold["baseline"])]
        for what, ours, theirs, ratios in (
                ("in the process's session", paired.ours, paired.anchor, paired.ratios),
                (f"each in a new session (a process met first; {COLD} samples)",
                 cold["this tree"], cold["baseline"], cold_ratios)):
            print(f"ms of CPU per sample {what}, median of {args.rounds} rounds: this tree "
                  f"{statistics.median(ours):.3f}, baseline {statistics.median(theirs):.3f}; "
                  f"baseline / this tree {1 / statistics.median(ratios):.2f} (median of "
                  f"paired ratios, range {1 / max(ratios):.2f}-{1 / min(ratios):.2f})")
        same = digests["this tree"] == digests["baseline"] and len(digests["baseline"]) == 1
        print(f"walks {'identical' if same else 'DIFFER'}; reached the outermost frame: "
              + ", ".join(f"{name} {min(shares) * 100:.1f}%" for name, shares in complete.items()))
        live = paired_ratios(args.rounds, recording(trees["this tree"], target.pid, args, work),
                             recording(trees["baseline"], target.pid, args, work))
        print(f"ms of CPU per sample recording (sfbt record -p, {args.seconds:g} s windows), "
              f"median of {args.rounds} rounds: this tree {statistics.median(live.ours):.3f}, "
              f"baseline {statistics.median(live.anchor):.3f}; baseline / this tree "
              f"{1 / live.ratio:.2f} (median of paired ratios, range "
              f"{1 / max(live.ratios):.2f}-{1 / min(live.ratios):.2f})")
    finally:
        if target is not None:
            os.killpg(target.pid, 9)
            target.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
