"""sframe-bt in LLDB at a 10,000-frame -O2 recursion (where lldb-19's own bt
crashes: its unwinder recurses), against LLDB's own bt at 1,000 frames.

Prints both times (best of 3) and the per-frame ratio sframe-bt / bt.
Run: python3 bench/lldb_deep.py
"""

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "plugin"))

from gdb_support import compile_library, compile_program  # noqa: E402
from lldb_support import run_lldb  # noqa: E402

TIMER = """
import time
import lldb
def _sfbt_best(debugger, command, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        result = lldb.SBCommandReturnObject()
        began = time.perf_counter()
        debugger.GetCommandInterpreter().HandleCommand(command, result)
        best = min(best, time.perf_counter() - began)
        frames = result.GetOutput().count("\\n#") + result.GetOutput().count("frame #")
    return best, frames
"""


def measure(program, depth, command):
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "timer.py"
        script.write_text(TIMER)
        out = run_lldb(program, [
            "breakpoint set -n stop_here", f"run {depth}",
            f"command script import {script}",
            f"script t, n = timer._sfbt_best(lldb.debugger, '{command}'); "
            "print('RESULT %.6f %d' % (t, n))"])
    match = re.search(r"^RESULT ([0-9.]+) (\d+)", out, re.M)
    if not match:
        raise SystemExit(out[-3000:])
    return float(match[1]), int(match[2])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        library = compile_library(out, "libapply.so", "O2", ["libapply.c"])
        program = compile_program(out, "recurse", "O2", True, ["recurse.c"], [library])
        ours, ours_frames = measure(program, 10000, "sframe-bt")
        theirs, their_frames = measure(program, 1000, "bt")
    print(f"sframe-bt, 10,000-deep recursion: {ours * 1e3:.0f} ms for {ours_frames} frames "
          f"({ours / ours_frames * 1e6:.0f} us/frame)")
    print(f"LLDB bt, 1,000-deep recursion: {theirs * 1e3:.0f} ms for {their_frames} frames "
          f"({theirs / their_frames * 1e6:.0f} us/frame)")
    print(f"ratio per frame (sframe-bt / bt): "
          f"{(ours / ours_frames) / (theirs / their_frames):.2f}")


if __name__ == "__main__":
    main()
