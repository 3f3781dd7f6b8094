"""sframe-bt against GDB's bt on a C++ program of a real interpreter's size
(bench/cxx_big.py: 22 MB with `-O2 -g -Wa,--gsframe`, stacks of 50 to 350
frames, most of them inlined calls, changing at every stop), each figure
a median of paired, interleaved rounds (bench/pairing.py), with `set print
frame-arguments none` (the layout sframe-bt prints):

1. warm: sframe-bt / bt, each called again at the same stop (goal <= 0.5);
2. first: the first sframe-bt / the first bt after a stop, at the same
   stop: before each, GDB's frame and register caches are flushed and the
   plugin forgets what it read at the stop, as at a new stop (goal <= 2);
3. sweep: 1,000 `stepi`s with sframe-bt at each / the same with bt, from
   a stop in `app::leaf` (goal <= 2);
4. stack: `sfbt stack PID` / `eu-stack -i -s -n 0 -p PID` (every frame,
   as sfbt prints) on the program running, its cache filled (goal <= 2);
5. memory: GDB's resident growth over 1,000 stops with sframe-bt at each
   (after the first), and with bt at each: GDB's own (its symbol tables)
   grows alike with either, so the plugin's growth is the difference
   (goal <= 50 MB).

``--plugin-root DIR`` measures the plugin of another checkout (an older
commit, to compare with); its figures of 3 are for ``--steps`` steps.

Run: python3 bench/gdb_cxx.py [--gdb PATH] [--rounds N] [--steps N]
                              [--measures 1,2,3,4,5] [--plugin-root DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import cxx_big  # noqa: E402
from debuggers import gdb_slots  # noqa: E402
from pairing import Paired, paired_ratios  # noqa: E402

# Sourced into gdb; each function prints one JSON line.
DRIVER = r'''
python
import json, time
import sfbt_gdb_session


def _timed(command):
    began = time.perf_counter()
    gdb.execute(command, to_string=True)
    return time.perf_counter() - began


def _as_at_a_new_stop():
    gdb.execute("maint flush register-cache", to_string=True)
    gdb.invalidate_cached_frames()
    sfbt_gdb_session.state.invalidate()


def _next_stop():
    gdb.execute("continue", to_string=True)


def bench_stops(rounds):
    """[[warm sframe-bt, warm bt, first sframe-bt, first bt, frames]] a round."""
    out = []
    for index in range(rounds):
        _next_stop()
        gdb.execute("sframe-bt", to_string=True)
        gdb.execute("bt", to_string=True)
        sides = ["sframe-bt", "bt"] if index % 2 == 0 else ["bt", "sframe-bt"]
        warm = {side: _timed(side) for side in sides}
        first = {}
        for side in sides:
            _as_at_a_new_stop()
            first[side] = _timed(side)
        frames = gdb.execute("bt", to_string=True).count("\n#") + 1
        out.append([warm["sframe-bt"], warm["bt"], first["sframe-bt"], first["bt"], frames])
    print("BENCH " + json.dumps(out))


def bench_sweep(rounds, steps):
    """[[sweep with sframe-bt, sweep with bt]] a round, each from a new stop."""
    out = []
    for index in range(rounds):
        times = {}
        for side in (["sframe-bt", "bt"] if index % 2 == 0 else ["bt", "sframe-bt"]):
            _next_stop()
            began = time.perf_counter()
            for _ in range(steps):
                gdb.execute("stepi", to_string=True)
                gdb.execute(side, to_string=True)
            times[side] = time.perf_counter() - began
        out.append([times["sframe-bt"], times["bt"]])
    print("BENCH " + json.dumps(out))


def _resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def bench_memory(command, stops):
    """[resident bytes after the first stop's command, after ``stops`` more]."""
    gdb.execute(command, to_string=True)
    before = _resident()
    for _ in range(stops):
        _next_stop()
        gdb.execute(command, to_string=True)
    print("BENCH " + json.dumps([before, _resident()]))
end
'''


class Gdb:
    """One gdb at the first stop in app::leaf of the program."""

    def __init__(self, debugger, program, entry, driver, cache):
        self.command = [debugger.command, "-nx", "-batch", "-ex", "set pagination off",
                        "-ex", "set confirm off", "-ex", f"source {entry}",
                        "-ex", f"source {driver}", "-ex", "set print frame-arguments none",
                        "-ex", "break app::leaf", "-ex", "run"]
        self.program = program
        self.environment = dict(os.environ, XDG_CACHE_HOME=str(cache))

    def run(self, *calls, timeout=3600):
        command = list(self.command)
        for call in calls:
            command += ["-ex", f"python {call}"]
        result = subprocess.run(command + [str(self.program)], capture_output=True,
                                text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                                env=self.environment)
        found = [json.loads(line[6:]) for line in result.stdout.splitlines()
                 if line.startswith("BENCH ")]
        if len(found) != len(calls):
            raise SystemExit(f"no result:\n{(result.stdout + result.stderr)[-3000:]}")
        return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gdb", help="the gdb to measure (default: Debian's)")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--stops", type=int, default=1000)
    parser.add_argument("--measures", default="1,2,3,4,5")
    parser.add_argument("--plugin-root", type=Path, default=ROOT,
                        help="the checkout whose plugin is measured")
    parser.add_argument("--build-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "sfbt-cxx-big",
                        help="where the program is built once and kept")
    args = parser.parse_args()
    measures = {int(m) for m in args.measures.split(",")}
    debugger = next(slot.debugger for slot in gdb_slots()
                    if slot.debugger is not None
                    and (args.gdb is None or slot.debugger.command == args.gdb))
    began = time.perf_counter()
    program = cxx_big.build(args.build_dir)
    print(f"program: {program.stat().st_size / 1e6:.1f} MB "
          f"({time.perf_counter() - began:.0f} s to build or find); {debugger.id}; "
          f"plugin of {args.plugin_root}")
    with tempfile.TemporaryDirectory(prefix="sfbt-bench-cxx-") as work:
        work = Path(work)
        driver = work / "driver.gdb"
        driver.write_text(DRIVER)
        gdb = Gdb(debugger, program, args.plugin_root / "gdb" / "sfbt_gdb.py", driver,
                  work / "cache")
        gdb.run("bench_stops(1)")  # fills the disk cache, as a user's first run
        if measures & {1, 2}:
            (rounds,) = gdb.run(f"bench_stops({args.rounds})")
            frames = sorted(r[4] for r in rounds)
            print(f"stops at app::leaf, {frames[0]}-{frames[-1]} frames (bt's)")
            if 1 in measures:
                print(Paired([r[0] / r[1] for r in rounds], [r[0] for r in rounds],
                             [r[1] for r in rounds]).line(
                    "warm: sframe-bt / bt, called again at the same stop", goal=0.5))
            if 2 in measures:
                print(Paired([r[2] / r[3] for r in rounds], [r[2] for r in rounds],
                             [r[3] for r in rounds]).line(
                    "first: sframe-bt / bt, the first after a stop", goal=2))
        if 3 in measures:
            sweeps = max(3, args.rounds // 3)
            (rounds,) = gdb.run(f"bench_sweep({sweeps}, {args.steps})")
            print(Paired([r[0] / r[1] for r in rounds], [r[0] for r in rounds],
                         [r[1] for r in rounds]).line(
                f"sweep: {args.steps} stepi with sframe-bt / with bt at each", goal=2,
                unit=1, unit_name="s"))
        if 4 in measures:
            against_eu_stack(args, program, work)
        if 5 in measures:
            growths = {}
            for command in ("sframe-bt", "bt"):
                ((before, after),) = gdb.run(f"bench_memory('{command}', {args.stops})")
                growths[command] = (after - before) / 2**20
                print(f"memory: GDB's resident growth over {args.stops} stops with "
                      f"{command} at each: {growths[command]:.1f} MB "
                      f"({before / 2**20:.0f} MB after the first)")
            # GDB's own (its symbol tables, read as the stops reach new code) grows
            # alike with either command: the plugin's is the difference
            plugin = growths["sframe-bt"] - growths["bt"]
            print(f"memory: the plugin's growth (sframe-bt's minus bt's): {plugin:.1f} MB"
                  f"  goal <= 50: {'met' if plugin <= 50 else 'NOT met'}")


def against_eu_stack(args, program, work):
    eu_stack = shutil.which("eu-stack")
    if not eu_stack:
        print("stack: eu-stack not installed (apt-get install elfutils)")
        return
    env = dict(os.environ, PYTHONPATH=str(args.plugin_root / "plugin"),
               PYTHONPYCACHEPREFIX=str(work / "pycache"), DEBUGINFOD_URLS="",
               XDG_CACHE_HOME=str(work / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # sfbt as installed: from bytecode
    target = subprocess.Popen([str(program)], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        pid = str(target.pid)

        def timed(command):
            began = time.perf_counter()
            result = subprocess.run(command, capture_output=True, text=True, env=env,
                                    timeout=300)
            if result.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
            return time.perf_counter() - began

        sfbt = [sys.executable, "-m", "sfbt", "stack", pid]
        # every frame, as sfbt prints (eu-stack stops at 256 and fails)
        eu = [eu_stack, "-i", "-s", "-n", "0", "-p", pid]
        timed(sfbt)  # fills the cache, as a user's first run
        timed(eu)
        print(paired_ratios(args.rounds, lambda: timed(sfbt), lambda: timed(eu)).line(
            "stack: sfbt stack / eu-stack -i -s -n 0 -p, the program running", goal=2))
    finally:
        target.kill()
        target.wait()


if __name__ == "__main__":
    main()
