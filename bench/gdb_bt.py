"""sframe-bt and the SFrame frame unwinder against GDB's own bt, in the
real gdb, each figure a median of paired, interleaved rounds
(bench/pairing.py).  `set print frame-arguments none` everywhere: the
layout sframe-bt prints.

1. warm: sframe-bt / bt in one gdb at a 10,000-frame -O2 recursion (SFrame
   v1 from the system's gas), GDB's frame and register caches flushed
   before each command (goal <= 0.25);
2. cold: each the first command of a fresh gdb at the same stop (goal
   <= 0.33);
3. unwinder: GDB's bt through the SFrame frame unwinder (`set sframe
   unwinder on`, GDB's DWARF unwinders off) / bt with DWARF, fresh gdbs
   (goal <= 1.0); and the same in one gdb, frame cache flushed before each;
4. depth: the warm ratio and sframe-bt's time per frame at 1,000, 10,000
   and 100,000 frames (it must stay linear), and on a stack of 1,000
   distinct functions, where caching by PC cannot help;
5. memory: gdb's peak resident size after sframe-bt / after bt at 100,000
   frames, fresh gdbs (goal <= 0.2).

Run: python3 bench/gdb_bt.py [--gdb PATH] [--rounds N] [--measures 1,3,...]
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from debuggers import gdb_slots  # noqa: E402
from gdb_support import build_recurse, compile_program  # noqa: E402
from pairing import Paired, paired_ratios  # noqa: E402

# Sourced into gdb: `python bench_times(...)` prints one JSON line.
TIMER = r'''
python
import json, time
def _flush():
    gdb.execute("maint flush register-cache", to_string=True)
    gdb.invalidate_cached_frames()
def _timed(command):
    _flush()
    began = time.perf_counter()
    text = gdb.execute(command, to_string=True)
    return time.perf_counter() - began, text.count("\n#")+text.startswith("#")
def bench_pairs(ours, anchor, rounds):
    times = []
    for index in range(rounds):
        order = [(0, ours), (1, anchor)] if index % 2 == 0 else [(1, anchor), (0, ours)]
        pair = [None, None]
        for slot, command in order:
            pair[slot] = _timed(command)
        times.append(pair)
    print("BENCH " + json.dumps(times))
def bench_unwinder(rounds, dwarf_off, dwarf_on):
    # bt through the SFrame unwinder (mode on, DWARF unwinders off) against
    # bt through DWARF, at one stop: the unwinder is switched by its
    # enabled flag, which keeps what it caches for the stop.
    from sfbt_gdb_unwinder import frame_unwinder
    def ours():
        gdb.execute(dwarf_off, to_string=True)
        frame_unwinder.enabled = True
        return _timed("bt")
    def anchor():
        frame_unwinder.enabled = False
        gdb.execute(dwarf_on, to_string=True)
        return _timed("bt")
    times = []
    for index in range(rounds):
        if index % 2 == 0:
            pair = [ours(), anchor()]
        else:
            theirs = anchor()
            pair = [ours(), theirs]
        times.append(pair)
    print("BENCH " + json.dumps(times))
def bench_once(command):
    seconds, frames = _timed(command)
    with open("/proc/self/status") as status:
        peak = next(int(l.split()[1]) for l in status if l.startswith("VmHWM"))
    print("BENCH " + json.dumps([seconds, frames, peak * 1024]))
end
'''


def dwarf_unwinders_off(gdb):
    if gdb.major >= 17:
        return ["maint frame-unwinder disable -class DEBUGINFO"]
    return ["maint set dwarf unwinders off", "maint flush register-cache"]


def dwarf_unwinders_on(gdb):
    if gdb.major >= 17:
        return ["maint frame-unwinder enable -class DEBUGINFO"]
    return ["maint set dwarf unwinders on"]


class Session:
    def __init__(self, gdb, timer):
        self.gdb = gdb
        self.timer = timer

    def run(self, program, depth, commands, stop="stop_here"):
        out = self.gdb.run([str(program)], [
            "set print frame-arguments none", "set sframe unwinder off",
            f"source {self.timer}", f"break {stop}", f"run {depth}", *commands],
            timeout=1800)
        lines = [line for line in out.splitlines() if line.startswith("BENCH ")]
        if not lines:
            raise SystemExit(f"no result from {self.gdb.id}:\n{out[-3000:]}")
        return json.loads(lines[-1][6:])

    def warm(self, program, depth, rounds, stop="stop_here"):
        times = self.run(program, depth,
                         [f"python bench_pairs('sframe-bt', 'bt', {rounds})"], stop)
        frames = times[0][0][1]
        return Paired([a[0] / b[0] for a, b in times], [a[0] for a, _ in times],
                      [b[0] for _, b in times]), frames

    def once(self, program, depth, setup, command):
        return self.run(program, depth, setup + [f"python bench_once('{command}')"])


def distinct_functions(directory, count=1000):
    """A program whose stack at stop_here holds `count` distinct functions."""
    source = directory / "distinct.c"
    lines = ["__attribute__((noinline)) void stop_here(void) { __asm__ volatile(\"\"); }"]
    lines.append(f"__attribute__((noinline)) int f{count}(int x) {{ stop_here(); return x; }}")
    for index in range(count - 1, -1, -1):
        lines.append(f"__attribute__((noinline)) int f{index}(int x) "
                     f"{{ volatile int keep = x; return f{index + 1}(x + 1) + keep; }}")
    lines.append("int main(void) { return f0(0) & 0x7f; }")
    source.write_text("\n".join(lines) + "\n")
    return compile_program(directory, "distinct", "O2", True, [str(source)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gdb", help="the gdb to measure (default: every gdb set up)")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--measures", default="1,2,3,4,5",
                        help="which of the measures above to run (default: all)")
    args = parser.parse_args()
    gdbs = [slot.debugger for slot in gdb_slots() if slot.debugger is not None]
    if args.gdb:
        gdbs = [g for g in gdbs if g.command == args.gdb or g.id == args.gdb]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        timer = out / "timer.gdb"
        timer.write_text(TIMER)
        program = build_recurse(out, "O2", True)
        distinct = distinct_functions(out)
        for gdb in gdbs:
            measure(Session(gdb, timer), program, distinct, args.rounds,
                    {int(m) for m in args.measures.split(",")})
    return 0


def measure(session, program, distinct, rounds, measures):
    gdb = session.gdb
    print(f"== {gdb.id} ({gdb.command})")
    if 1 in measures:
        warm, frames = session.warm(program, 10000, rounds)
        print(warm.line(f"1. warm sframe-bt / bt, {frames} frames", 0.25))

    def cold(command, setup=()):
        return lambda: session.once(program, 10000, list(setup), command)[0]
    if 2 in measures:
        paired = paired_ratios(max(rounds // 2, 3), cold("sframe-bt"), cold("bt"))
        print(paired.line("2. cold sframe-bt / bt, first command of a fresh gdb", 0.33))
    if 3 in measures:
        unwinder = ["set sframe unwinder on"] + dwarf_unwinders_off(gdb)
        paired = paired_ratios(rounds, cold("bt", unwinder), cold("bt"))
        print(paired.line("3. bt through the SFrame unwinder / bt with DWARF, fresh gdb",
                          1.0))
        times = session.run(program, 10000, [
            "set sframe unwinder on",
            f"python bench_unwinder({rounds}, {dwarf_unwinders_off(gdb)[0]!r}, "
            f"{dwarf_unwinders_on(gdb)[0]!r})"])
        warm = Paired([a[0] / b[0] for a, b in times], [a[0] for a, _ in times],
                      [b[0] for _, b in times])
        print(warm.line("3. the same in one gdb, frame cache flushed before each"))
    if 4 in measures:
        depth_sweep(session, program, distinct, rounds)
    if 5 in measures:
        peak_memory(session, program)


def depth_sweep(session, program, distinct, rounds):
    for depth in (1000, 10000, 100000):
        warm, frames = session.warm(program, depth, max(rounds // 2, 3))
        per_frame = statistics.median(warm.ours) / frames * 1e6
        print(f"4. depth {frames:>6} frames: warm ratio {warm.ratio:.2f}, "
              f"sframe-bt {per_frame:.1f} us/frame")
    warm, frames = session.warm(distinct, "", max(rounds // 2, 3))
    print(warm.line(f"4. warm, {frames} frames of distinct functions"))


def peak_memory(session, program):
    ours = session.once(program, 100000, [], "sframe-bt")
    theirs = session.once(program, 100000, [], "bt")
    print(f"5. peak memory at {theirs[1]} frames: sframe-bt {ours[2] / 2**20:.0f} MB, "
          f"bt {theirs[2] / 2**20:.0f} MB, ratio {ours[2] / theirs[2]:.2f}  goal <= 0.2: "
          f"{'met' if ours[2] / theirs[2] <= 0.2 else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
