"""The differential harness at full size (tests/differential.py; the test
suite runs a short version): on every program (Debian's python3, perl and
bash; tests/programs with SFrame v1 at -O0 and -O2; the v1 and v3
fixtures), thousands of seeded random stops, and a `stepi` sweep of a
whole program from its first instruction to its exit, with the plugin's
`bt`, `bt full` and `sframe-bt` compared with GDB alone at each.  Prints,
per GDB, the stops, how many were equal, the mismatches grouped by
signature (the most frequent first, with examples), and the time taken.

Run: python3 bench/differential.py [--gdb PATH]... [--seed N] [--stops N]
         [--programs NAME,...] [--sweep PROGRAM] [--sweep-steps N|all]
         [--no-sweep] [--control] [--examples N]

`--control` replaces the plugin's gdb by a third GDB alone: the harness's
check of itself, which must report no mismatch.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from debuggers import gdb_slots  # noqa: E402
from differential import (Plan, debian_programs, fixture_programs,  # noqa: E402
                          project_programs, run_plan, summary, sweep)


def progress(result):
    print(f"    ... {result.line()}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gdb", action="append",
                        help="a gdb to run (default: every GDB of the test matrix)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stops", type=int, default=150,
                        help="stops per program, stepi after a stop not counted (default 150)")
    parser.add_argument("--breakpoints", type=int, default=120,
                        help="random breakpoints per program (default 120)")
    parser.add_argument("--programs", help="comma-separated names (default: all)")
    parser.add_argument("--sweep", default="v1-plt-main",
                        help="the program swept from its first instruction (default v1-plt-main)")
    parser.add_argument("--sweep-steps", default="all",
                        help="instructions to step, or all: to the exit (default all)")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--control", action="store_true",
                        help="GDB alone in place of the plugin: must find nothing")
    parser.add_argument("--examples", type=int, default=2,
                        help="examples printed per kind of mismatch (default 2)")
    options = parser.parse_args()

    gdbs = options.gdb or [slot.debugger.command for slot in gdb_slots()
                           if slot.debugger is not None]
    plan = Plan(seed=options.seed, breakpoints=options.breakpoints, max_stops=options.stops,
                hit_limit=3)
    steps = None if options.sweep_steps == "all" else int(options.sweep_steps)
    with tempfile.TemporaryDirectory(prefix="sfbt-differential-") as workdir:
        workdir = Path(workdir)
        programs = {p.name: p for p in debian_programs(workdir) + project_programs(workdir)
                    + fixture_programs()}
        names = options.programs.split(",") if options.programs else list(programs)
        for gdb in gdbs:
            print(f"== {gdb}{' (control: GDB alone three times)' if options.control else ''}")
            began = time.monotonic()
            results = []
            for name in names:
                result = run_plan(gdb, programs[name], plan, control=options.control)
                print(f"  {result.line()}", flush=True)
                results.append(result)
            print(f"  random stops: {time.monotonic() - began:.0f} s")
            if not options.no_sweep:
                began = time.monotonic()
                result = sweep(gdb, programs[options.sweep], steps, control=options.control,
                               batch=1000, progress=progress)
                result.program += " (stepi sweep)"
                print(f"  {result.line()}{', to its exit' if result.exited else ''}; "
                      f"{time.monotonic() - began:.0f} s", flush=True)
                results.append(result)
            for line in summary(results, examples=options.examples)[len(results):]:
                print(f"  {line}")


if __name__ == "__main__":
    main()
