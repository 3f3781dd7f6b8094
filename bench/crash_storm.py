"""A storm of crashes through sfbt's handler: N crashes (default 1,000) of
10 programs (tests/programs/crasher.c built 10 times, each with its own
build id, so 10 buckets), at most 16 at once (core_pipe_limit), against
the goal of 1,000 in a minute.  It checks what it measures: every crash in
the index, each bucket counted N/10, the store within its cap, every kept
archive decoding.

It sets the machine's core_pattern (root only) while it runs, under the
lock the tests take, and puts it back however it ends.

Run (as root): python3 bench/crash_storm.py [--crashes N] [--at-once K]
"""

import argparse
import atexit
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crashes import PROGRAMS, index, sfbt  # noqa: E402

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crashes", type=int, default=1000)
    parser.add_argument("--at-once", type=int, default=16)
    args = parser.parse_args()
    from test_crashes import machine_lock
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-storm-"))
    atexit.register(shutil.rmtree, work, True)
    programs = build(work)
    store = work / "store"
    with machine_lock():
        sfbt("crashes", "install", "--max-use", str(MAX_USE), "--store", store)
        try:
            started = time.perf_counter()
            running = []
            for number in range(args.crashes):
                running.append(subprocess.Popen(
                    [str(programs[number % PROGRAM_COUNT]), "segv"], cwd=work,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                if len(running) >= args.at_once:
                    running.pop(0).wait()
            for process in running:
                process.wait()
            while len(index(store)) < args.crashes and time.perf_counter() - started < 600:
                time.sleep(0.05)
            seconds = time.perf_counter() - started
        finally:
            sfbt("crashes", "uninstall", "--store", store)
        found = index(store)
    by_id = {entry["id"]: entry for entry in found}
    counts = {}
    for entry in found:
        executable = by_id.get(entry.get("of"), entry).get("executable")
        counts.setdefault((entry["bucket"], executable), 0)
        counts[(entry["bucket"], executable)] += 1
    used = sum(f.stat().st_size for f in store.iterdir()
               if f.is_file() and f.name not in ("sfbt", "settings"))
    undecoded = [e["file"] for e in found if e.get("file") and
                 subprocess.run([sys.executable, "-m", "sfbt", "cbf", "decode",
                                 str(store / e["file"])], capture_output=True,
                                env={"PYTHONPATH": str(PROGRAMS.parent.parent / "plugin"),
                                     "PATH": "/usr/bin:/bin"}).returncode]
    handler_ms = sorted(e["handler_ms"] for e in found if "handler_ms" in e)
    print(f"{len(found)} of {args.crashes} crashes of {PROGRAM_COUNT} programs "
          f"({args.at_once} at once) in {seconds:.1f} s: "
          f"{args.crashes / seconds * 60:.0f} a minute (goal >= 1,000)")
    print(f"  buckets: {len(counts)}, counted {sorted(set(counts.values()))} "
          f"(expected {PROGRAM_COUNT} of {args.crashes // PROGRAM_COUNT})")
    print(f"  store: {used} bytes (cap {MAX_USE}); kept archives not decoding: "
          f"{len(undecoded)}")
    if handler_ms:
        print(f"  handler_ms median {handler_ms[len(handler_ms) // 2]}, "
              f"max {handler_ms[-1]}")
    print(json.dumps({"ok": len(found) == args.crashes and len(counts) == PROGRAM_COUNT
                      and not undecoded and used <= MAX_USE}))


if __name__ == "__main__":
    main()
