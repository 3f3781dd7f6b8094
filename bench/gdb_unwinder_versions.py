"""GDB's bt through this checkout's SFrame frame unwinder against another
revision's, in one gdb at a 10,000-frame -O2 recursion: both registered
(`set sframe unwinder on`, GDB's DWARF unwinders off), each enabled in
turn, the frame and register caches flushed before each bt; medians of
paired, interleaved rounds (bench/pairing.py) of the bt times and of the
time spent inside each unwinder, wall-clock and CPU time of GDB's thread
(on a shared machine the CPU time is the steadier figure).  The other revision's
gdb/sfbt_gdb_unwinder.py must import from this checkout's plugin (as
d0ce4d2's, the unwinder's own copy of the frame step, does).  Both bts
must print the same frames.

Run: python3 bench/gdb_unwinder_versions.py [--against REV] [--gdb PATH] [--rounds N]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from debuggers import gdb_slots  # noqa: E402
from gdb_bt import dwarf_unwinders_off  # noqa: E402
from gdb_support import build_recurse  # noqa: E402
from pairing import Paired  # noqa: E402

# Sourced into gdb after the plugin; %r: the directory holding the other
# revision's unwinder as sfbt_gdb_unwinder_other.py.
SCRIPT = r'''
python
import json, sys, time
sys.path.insert(0, %r)
import sfbt_gdb_unwinder_other
from sfbt_gdb_unwinder import frame_unwinder as ours
other = sfbt_gdb_unwinder_other.frame_unwinder
other.set_mode("on")
gdb.unwinder.register_unwinder(None, other, replace=True)
for event in (gdb.events.stop, gdb.events.cont, gdb.events.exited,
              gdb.events.memory_changed, gdb.events.register_changed,
              gdb.events.inferior_call, gdb.events.before_prompt):
    event.connect(other.forget_stop)
_inside = {}
def _timed_calls(unwinder):
    # a subclass whose __call__ adds up its time: GDB calls the instance
    call = type(unwinder).__call__
    def timed(self, pending):
        began, began_cpu = time.perf_counter(), time.thread_time()
        try:
            return call(self, pending)
        finally:
            spent = _inside[self]
            spent[0] += time.perf_counter() - began
            spent[1] += time.thread_time() - began_cpu
    unwinder.__class__ = type("Timed", (type(unwinder),), {"__call__": timed})
_timed_calls(ours)
_timed_calls(other)
def _bt(unwinder):
    ours.enabled = unwinder is ours
    other.enabled = unwinder is other
    _inside[unwinder] = [0.0, 0.0]
    gdb.execute("maint flush register-cache", to_string=True)
    gdb.invalidate_cached_frames()
    began = time.perf_counter()
    text = gdb.execute("bt", to_string=True)
    return time.perf_counter() - began, *_inside[unwinder], text
def bench_versions(rounds):
    times = []
    for index in range(rounds):
        order = (ours, other) if index %% 2 == 0 else (other, ours)
        done = {unwinder: _bt(unwinder) for unwinder in order}
        if done[ours][3] != done[other][3]:
            raise SystemExit("the two unwinders' bt differ")
        frames = done[ours][3].count("\n#") + 1
        times.append([done[ours][:3], done[other][:3], frames])
    print("BENCH " + json.dumps(times))
end
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="d0ce4d2",
                        help="the revision whose unwinder is the anchor (default: d0ce4d2)")
    parser.add_argument("--gdb", help="the gdb to measure (default: every gdb set up)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    other = subprocess.run(["git", "-C", str(ROOT), "show",
                            f"{args.against}:gdb/sfbt_gdb_unwinder.py"],
                           capture_output=True, text=True)
    if other.returncode:
        raise SystemExit(f"no gdb/sfbt_gdb_unwinder.py at {args.against}: "
                         f"{other.stderr.strip()}")
    gdbs = [slot.debugger for slot in gdb_slots() if slot.debugger is not None]
    if args.gdb:
        gdbs = [g for g in gdbs if g.command == args.gdb or g.id == args.gdb]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        # registered beside ours: GDB needs another name
        (out / "sfbt_gdb_unwinder_other.py").write_text(
            other.stdout.replace('super().__init__("sframe")',
                                 'super().__init__("sframe-other")'))
        script = out / "versions.gdb"
        script.write_text(SCRIPT % str(out))
        program = build_recurse(out, "O2", True)
        for gdb in gdbs:
            measure(gdb, program, script, args.rounds, args.against)
    return 0


def measure(gdb, program, script, rounds, against):
    out = gdb.run([str(program)], [
        "set print frame-arguments none", "set sframe unwinder on", f"source {script}",
        "break stop_here", "run 10000", *dwarf_unwinders_off(gdb),
        f"python bench_versions({rounds})"], timeout=1800)
    lines = [line for line in out.splitlines() if line.startswith("BENCH ")]
    if not lines:
        raise SystemExit(f"no result from {gdb.id}:\n{out[-3000:]}")
    times = json.loads(lines[-1][6:])
    frames = times[0][2]
    print(f"== {gdb.id} ({gdb.command}), {frames} frames, this checkout / {against}")
    bt = Paired([a[0] / b[0] for a, b, _ in times], [a[0] for a, _, _ in times],
                [b[0] for _, b, _ in times])
    print(bt.line("bt"))
    inside = Paired([a[1] / b[1] for a, b, _ in times], [a[1] for a, _, _ in times],
                    [b[1] for _, b, _ in times])
    print(inside.line("time inside the unwinder"))
    cpu = Paired([a[2] / b[2] for a, b, _ in times], [a[2] for a, _, _ in times],
                 [b[2] for _, b, _ in times])
    print(cpu.line("CPU time of GDB's thread inside the unwinder"))
    for what, index in (("time", 1), ("CPU time", 2)):
        per_frame = [(a[index] - b[index]) / frames * 1e6 for a, b, _ in times]
        print(f"inside the unwinder, this checkout minus {against}: "
              f"{statistics.median(per_frame):+.2f} us per frame ({what})")


if __name__ == "__main__":
    sys.exit(main())
