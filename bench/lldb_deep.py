"""sframe-bt against LLDB's own `bt` at a 10,000-frame -O2 recursion, in
one LLDB process at one stop, for every LLDB of the test matrix.

Each round times `sframe-bt` and LLDB's first `bt` (LLDB's cached frames
are dropped before it by writing a register with its own value), in turn,
alternating which goes first (bench/pairing.py); the figure is the median
of the per-round ratios.  Goal: sframe-bt <= 0.5x the first bt.  A second
line pairs sframe-bt with a `bt` that finds LLDB's frames cached (the
printing of 10,000 frames alone).

Run: python3 bench/lldb_deep.py [--rounds N] [--depth N]
"""

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from debuggers import lldb_slots  # noqa: E402
from gdb_support import build_recurse  # noqa: E402
from lldb_support import run_lldb  # noqa: E402

GOAL = 0.5

# Runs inside LLDB (`command script import`): the paired rounds.
TIMER = """
import sys, time
import lldb
sys.path.insert(0, {bench!r})
from pairing import paired_ratios

def _timed(command, before=None):
    def run():
        if before is not None:
            before()
        result = lldb.SBCommandReturnObject()
        began = time.perf_counter()
        lldb.debugger.GetCommandInterpreter().HandleCommand(command, result)
        elapsed = time.perf_counter() - began
        if not result.Succeeded():
            raise SystemExit(command + ": " + result.GetError())
        _timed.lines[command] = result.GetOutput().count("\\n")
        return elapsed
    return run
_timed.lines = {{}}

def _drop_frames():
    frame = lldb.process.GetSelectedThread().GetFrameAtIndex(0)
    value = frame.FindRegister("rax").GetValue()
    lldb.debugger.HandleCommand("register write rax " + value)

def measure(rounds):
    paired = paired_ratios(rounds, _timed("sframe-bt"), _timed("bt", _drop_frames))
    print("RESULT " + paired.line("sframe-bt / first bt", {goal}))
    cached = paired_ratios(rounds, _timed("sframe-bt"), _timed("bt"))
    print("CACHED " + cached.line("sframe-bt / bt with LLDB's frames cached"))
    print("LINES sframe-bt %d, bt %d" % (_timed.lines["sframe-bt"], _timed.lines["bt"]))
"""


def measure(lldb, program, depth, rounds):
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "lldb_deep_timer.py"
        script.write_text(TIMER.format(bench=str(ROOT / "bench"), goal=GOAL))
        out = run_lldb(lldb, program, [
            "breakpoint set -n stop_here", f"run {depth}", "sframe-bt 1",
            f"command script import {script}",
            f"script lldb_deep_timer.measure({rounds})"], timeout=3600)
    found = re.search(r"^RESULT (.*)$", out, re.M)
    cached = re.search(r"^CACHED (.*)$", out, re.M)
    lines = re.search(r"^LINES (.*)$", out, re.M)
    if not (found and cached and lines):
        raise SystemExit(out[-3000:])
    return f"{found[1]}\n    {cached[1]}\n    ({lines[1]} lines)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--depth", type=int, default=10000)
    options = parser.parse_args()
    debuggers = [slot.debugger for slot in lldb_slots() if slot.debugger is not None]
    if not debuggers:
        raise SystemExit("no LLDB with Python found")
    with tempfile.TemporaryDirectory() as tmp:
        program = build_recurse(Path(tmp), "O2", True)
        for lldb in debuggers:
            print(f"{lldb.id}, {options.depth:,}-deep -O2 recursion: "
                  + measure(lldb, program, options.depth, options.rounds))


if __name__ == "__main__":
    main()
