"""A storm of crashes through sfbt's handler: N crashes (default 1,000) of
10 programs (tests/programs/crasher.c built 10 times, each with its own
build id, so 10 buckets), at most 16 at once (core_pipe_limit), against
the goal of 1,000 in a minute.  It checks what it measures: every crash in
the index, each bucket counted N/10, the store within its cap, every kept
archive decoding.

With --baseline PLUGIN_DIR (another checkout's plugin directory), each
of --rounds rounds runs the storm through that checkout's handler and
then through this one's, on the same programs, and prints the median of
the paired ratios of their times (the machine's load changes from
minute to minute).

It sets the machine's core_pattern (root only) while it runs, under the
lock the tests take, and puts it back however it ends.

Run (as root): python3 bench/crash_storm.py [--crashes N] [--at-once K]
                   [--baseline PLUGIN_DIR] [--rounds R]
"""

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crashes import PLUGIN, PROGRAMS, index  # noqa: E402

PROGRAM_COUNT = 10
MAX_USE = 256 << 10


def build(directory):
    """The 10 programs: one source, a build id each."""
    library = directory / "libcrasher.so"
    subprocess.run(["gcc", "-g", "-O1", "-shared", "-fPIC", "-o", library,
                    PROGRAMS / "crasher_lib.c"], check=True)
    programs = []
    for number in range(PROGRAM_COUNT):
        program = directory / f"crasher{number}"
        subprocess.run(["gcc", "-g", "-O1", "-o", program, PROGRAMS / "crasher.c", library,
                        f"-Wl,-rpath,{directory}", f"-Wl,--build-id=0x5fb7{number:04x}",
                        "-lpthread"], check=True)
        programs.append(program)
    return programs


def sfbt(plugin, *arguments):
    return subprocess.run([sys.executable, "-m", "sfbt", *map(str, arguments)],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(plugin)))


def storm(plugin, programs, store, crashes, at_once, cwd):
    """Seconds for ``crashes`` crashes through the handler of ``plugin``
    (installed for ``store``) to be in its index."""
    sfbt(plugin, "crashes", "install", "--max-use", str(MAX_USE), "--store", store)
    try:
        started = time.perf_counter()
        running = []
        for number in range(crashes):
            running.append(subprocess.Popen(
                [str(programs[number % PROGRAM_COUNT]), "segv"], cwd=cwd,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            if len(running) >= at_once:
                running.pop(0).wait()
        for process in running:
            process.wait()
        while len(index(store)) < crashes and time.perf_counter() - started < 600:
            time.sleep(0.05)
        return time.perf_counter() - started
    finally:
        sfbt(plugin, "crashes", "uninstall", "--store", store)


def check(store, crashes):
    """Print what the store holds against what the storm should have left;
    whether it all holds."""
    found = index(store)
    by_id = {entry["id"]: entry for entry in found}
    counts = {}
    for entry in found:
        executable = by_id.get(entry.get("of"), entry).get("executable")
        counts.setdefault((entry["bucket"], executable), 0)
        counts[(entry["bucket"], executable)] += 1
    used = sum(f.stat().st_size for f in store.iterdir()
               if f.is_file() and f.name not in ("sfbt", "settings"))
    undecoded = [f.name for f in store.iterdir() if f.name.startswith("seg-") and
                 subprocess.run([sys.executable, "-m", "sfbt", "cbf", "decode", str(f)],
                                capture_output=True,
                                env={"PYTHONPATH": str(PLUGIN),
                                     "PATH": "/usr/bin:/bin"}).returncode]
    shown = [e["id"] for e in found if "seg" in e and subprocess.run(
        [sys.executable, "-m", "sfbt", "crashes", "show", str(e["id"]), "--store", str(store)],
        capture_output=True, env={"PYTHONPATH": str(PLUGIN), "PATH": "/usr/bin:/bin"}
    ).returncode]
    print(f"  {len(found)} of {crashes} crashes in the index; buckets: {len(counts)}, "
          f"counted {sorted(set(counts.values()))} (expected {PROGRAM_COUNT} of "
          f"{crashes // PROGRAM_COUNT})")
    print(f"  store: {used} bytes (cap {MAX_USE}); segments not decoding: {len(undecoded)}; "
          f"kept crashes not shown: {len(shown)}")
    handler_ms = sorted(e["handler_ms"] for e in found if "handler_ms" in e)
    if handler_ms:
        print(f"  handler_ms of the kept crashes: median {handler_ms[len(handler_ms) // 2]}, "
              f"max {handler_ms[-1]}")
    return (len(found) == crashes and len(counts) == PROGRAM_COUNT
            and set(counts.values()) == {crashes // PROGRAM_COUNT}
            and not undecoded and not shown and used <= MAX_USE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crashes", type=int, default=1000)
    parser.add_argument("--at-once", type=int, default=16)
    parser.add_argument("--baseline", metavar="PLUGIN_DIR")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    from test_crashes import machine_lock
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-storm-"))
    atexit.register(shutil.rmtree, work, True)
    programs = build(work)
    sides = ([("baseline", Path(args.baseline).resolve())] if args.baseline else []) + [
        ("this", PLUGIN)]
    ratios, ok = [], True
    with machine_lock():
        for round_number in range(args.rounds):
            seconds = {}
            for name, plugin in sides:
                store = work / f"store-{name}-{round_number}"
                seconds[name] = storm(plugin, programs, store, args.crashes, args.at_once,
                                      work)
                print(f"{name}: {args.crashes} crashes of {PROGRAM_COUNT} programs "
                      f"({args.at_once} at once) in {seconds[name]:.1f} s: "
                      f"{args.crashes / seconds[name] * 60:.0f} a minute (goal >= 1,000)")
                if name == "this":
                    ok = check(store, args.crashes) and ok
            if args.baseline:
                ratios.append(seconds["this"] / seconds["baseline"])
    if ratios:
        print(f"this / baseline time: median {statistics.median(ratios):.2f} of "
              f"{len(ratios)} paired rounds {[round(r, 2) for r in ratios]}")
    print(json.dumps({"ok": ok}))


if __name__ == "__main__":
    main()
