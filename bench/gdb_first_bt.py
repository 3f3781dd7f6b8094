"""The first `sframe-bt` of a fresh gdb with an empty sfbt cache against
the same with the cache filled, on a stack through libc and libstdc++
(neither has `.sframe`: their rows come from their `.eh_frame`), in
paired, interleaved rounds (bench/pairing.py).  Goal: empty / filled
<= 1.5.  Also the first `sframe-bt` against a second one in the same gdb
(frame and register caches flushed), which shows what the first costs.

The program: a std::thread (libstdc++'s execute_native_thread_routine,
libc's start_thread and clone3) runs qsort (libc's msort) whose
comparison function stops once.

Run: python3 bench/gdb_first_bt.py [--gdb PATH] [--rounds N]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from debuggers import gdb_slots  # noqa: E402
from pairing import Paired  # noqa: E402

PROGRAM = r"""
#include <cstdlib>
#include <thread>
extern "C" __attribute__((noinline)) void stop_here(void) { __asm__ volatile(""); }
static int stopped;
static int compare(const void *a, const void *b)
{
    if (!stopped++)
        stop_here();
    return *(const int *)a - *(const int *)b;
}
int main()
{
    static int numbers[4096];
    for (int i = 0; i < 4096; i++)
        numbers[i] = (i * 7919) % 4096;
    std::thread worker([] { qsort(numbers, 4096, sizeof numbers[0], compare); });
    worker.join();
    return 0;
}
"""

TIMER = r'''
python
import json, time
def bench_first(command):
    times = []
    for _ in range(2):
        gdb.execute("maint flush register-cache", to_string=True)
        gdb.invalidate_cached_frames()
        began = time.perf_counter()
        text = gdb.execute(command, to_string=True)
        times.append([time.perf_counter() - began, text.count("\n#") + text.startswith("#")])
    print("BENCH " + json.dumps(times))
end
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gdb", help="the gdb to measure (default: Debian's)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    debugger = next(slot.debugger for slot in gdb_slots()
                    if slot.debugger is not None
                    and (args.gdb is None or slot.debugger.command == args.gdb))
    with tempfile.TemporaryDirectory(prefix="sfbt-bench-first-bt-") as work:
        work = Path(work)
        source = work / "through_libs.cc"
        source.write_text(PROGRAM)
        program = work / "through_libs"
        subprocess.run(["g++", "-O2", "-g", "-Wa,--gsframe", "-pthread", "-o", str(program),
                        str(source)], check=True)
        timer = work / "timer.gdb"
        timer.write_text(TIMER)
        filled = work / "filled"
        filled.mkdir()

        def first(cache):
            out = debugger.run([str(program)], [
                "set print frame-arguments none", f"source {timer}", "break stop_here",
                "run", "python bench_first('sframe-bt')"],
                timeout=600, environment={"XDG_CACHE_HOME": str(cache)})
            lines = [line for line in out.splitlines() if line.startswith("BENCH ")]
            if not lines:
                raise SystemExit(f"no result from {debugger.id}:\n{out[-3000:]}")
            return json.loads(lines[-1][6:])

        first(filled)  # fills the cache
        rounds = []
        for index in range(args.rounds):
            with tempfile.TemporaryDirectory(dir=work) as empty:
                pair = ([first(empty), first(filled)] if index % 2 == 0
                        else list(reversed([first(filled), first(empty)])))
            rounds.append(pair)
        frames = rounds[0][0][0][1]
        print(f"{debugger.id}: sframe-bt of {frames} frames through libstdc++ and libc")
        cold = Paired([e[0][0] / f[0][0] for e, f in rounds],
                      [e[0][0] for e, _ in rounds], [f[0][0] for _, f in rounds])
        print(cold.line("first sframe-bt, empty cache / filled cache", goal=1.5))
        again = Paired([e[0][0] / e[1][0] for e, _ in rounds],
                       [e[0][0] for e, _ in rounds], [e[1][0] for e, _ in rounds])
        print(again.line("first sframe-bt, empty cache / second sframe-bt in the same gdb"))


if __name__ == "__main__":
    main()
