"""`sfbt fold perf.data` beside `perf script` on the same file: a `perf
record --call-graph dwarf -F 499` of tests/programs/busy.c (-O2, no
frame pointers: recursion of changing depth through qsort and snprintf,
2 busy threads), walked by sfbt with SFrame and by perf with libdw.

Each round runs both on the file, in turn, the one that goes first
alternating (bench/pairing.py); the figure is the median of the rounds'
ratios of wall time (sfbt's over perf's).  Both start cold each round
(a new process; sfbt's private cache of symbols kept, as a user's would
be after a first run, and perf's build-id cache likewise).

Goal: a ratio of at most about 1.

Run: python3 bench/perf_fold.py [--rounds N] [--seconds S]"""

import argparse
import os
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


def _timed(command, env=None):
    """Seconds ``command`` took (its output thrown away); it must succeed."""
    began = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True, env=env)
    return time.perf_counter() - began


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="how long busy.c is recorded")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        directory = Path(directory)
        busy = compile_program(directory, "busy", "O2", True, ["busy.c"])
        data = directory / "busy.data"
        recorder = subprocess.Popen(
            ["perf", "record", "-q", "--call-graph", "dwarf", "-F", "499", "-o", str(data),
             "--", str(busy), "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(args.seconds)
        recorder.send_signal(2)  # SIGINT: perf writes the file and ends busy
        recorder.wait(timeout=120)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"))
        sfbt = [sys.executable, "-m", "sfbt", "fold", str(data)]
        perf = ["perf", "script", "-i", str(data)]
        _timed(sfbt, env)  # a first run fills sfbt's cache of symbols
        _timed(perf)
        paired = paired_ratios(args.rounds, lambda: _timed(sfbt, env), lambda: _timed(perf))
        print(f"perf.data of busy.c: {data.stat().st_size / 1e6:.1f} MB, "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        print(paired.line("sfbt fold perf.data vs perf script", goal=1.0, unit=1, unit_name="s"))


if __name__ == "__main__":
    main()
