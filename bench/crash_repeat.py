"""A crash counted in its bucket (a storm's usual crash): the handler's
time, from its launcher's start to its exit, against another checkout's
handler on the same crash, in paired, interleaved runs (median of the
paired ratios).

The crash: tests/programs/crasher.c waiting in `crasher later`, its core
saved by `gdb -batch -p PID -ex gcore` while it stays alive, so that each
handler reads the stacks and modules of the held process through
/proc/PID as it does under the kernel.  Each checkout gets a store of
its own with the store's launcher (`sfbt crashes install` writes the
same one, less core_pattern, which this bench leaves alone); the first
3 crashes fill the bucket's kept crashes, the rest are timed.

Run (as root, for /proc/PID/mem): python3 bench/crash_repeat.py
                   --baseline PLUGIN_DIR [--runs N]
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
from crashes import KEEP_PER_BUCKET, PLUGIN, build  # noqa: E402


def launcher(plugin, store):
    """A store for ``plugin``'s handler, its launcher written by that
    checkout's own launcher_text."""
    store.mkdir(mode=0o700)
    script = ("import sys; sys.path.insert(0, sys.argv[1]); "
              "from sfbt.crashes.pattern import launcher_text; "
              "sys.stdout.write(launcher_text(sys.argv[2], {'max_use': 256 << 10}))")
    text = subprocess.run([sys.executable, "-c", script, str(plugin), str(store)],
                          capture_output=True, text=True, check=True).stdout
    path = store / "sfbt"
    path.write_text(text)
    path.chmod(0o700)
    return path


def handled_seconds(path, pid, core):
    with open(core, "rb") as stream:
        before = time.perf_counter()
        subprocess.run([str(path), "crash-handler", str(pid), str(pid), "11", "1795900000",
                        "0", "0", "crasher"], stdin=stream, check=True)
        return time.perf_counter() - before


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="PLUGIN_DIR", required=True)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-repeat-"))
    atexit.register(shutil.rmtree, work, True)
    program = build(work)
    held = subprocess.Popen([str(program), "later"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline().strip() == "ready"
        core = work / "core"
        subprocess.run(["gdb", "-nx", "-batch", "-p", str(held.pid), "-ex", f"gcore {core}"],
                       capture_output=True, check=True)
        sides = {"baseline": Path(args.baseline).resolve(), "this": PLUGIN}
        paths = {name: launcher(plugin, work / f"store-{name}")
                 for name, plugin in sides.items()}
        for path in paths.values():
            for _ in range(KEEP_PER_BUCKET):
                handled_seconds(path, held.pid, core)
        seconds = {name: [] for name in sides}
        ratios = []
        for _ in range(args.runs):
            for name, path in paths.items():
                seconds[name].append(handled_seconds(path, held.pid, core))
            ratios.append(seconds["this"][-1] / seconds["baseline"][-1])
        for name in sides:
            lines = (work / f"store-{name}" / "index").read_bytes().splitlines()
            counted = [line for line in lines[KEEP_PER_BUCKET:] if line.endswith(b",1]")]
            # every timed crash counted in the bucket of the first ("of" 1)
            assert len(lines) == KEEP_PER_BUCKET + args.runs and len(counted) == args.runs, \
                (name, len(lines), len(counted))
            print(f"{name}: a counted crash in {statistics.median(seconds[name]) * 1000:.1f} "
                  f"ms (median of {args.runs}), {len(counted)} counted lines")
        print(f"this / baseline: median of {len(ratios)} paired ratios "
              f"{statistics.median(ratios):.3f}; load average {os.getloadavg()[0]:.1f}")
    finally:
        held.kill()
        held.wait()


if __name__ == "__main__":
    main()
