"""The debugger-free differential harness (tests/live_harness.py), long:
`sfbt stack` walked many times on processes whose threads keep running,
checked complete; stopped (SIGSTOP), each thread's PCs against
`gdb -nx -batch -p PID`; a core of each, read with the executable named
relatively and absolutely, against GDB on the core; `sfbt record`'s
samples checked complete.

Programs: tests/programs/busy.c (recursion of random depth through
qsort's and snprintf's callbacks, signal handlers, a library loaded and
unloaded over and over), and Debian's python3 and perl running busy
loops of their own (threads in python3).

Run: python3 bench/live_differential.py [--rounds N] [--stops N] [--gdb PATH]
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import live_harness as harness  # noqa: E402

PYTHON_LOOP = """\
import json, re, sys, threading

def nest(depth, data):
    if depth == 0:
        text = json.dumps(data, sort_keys=True)
        return len(re.findall(r"[0-9]+", text)) + len(sorted(data, key=lambda k: -len(k)))
    return nest(depth - 1, {"d%d" % depth: data, "k": list(range(depth))})

def work(seed):
    n = seed
    while True:
        n = (n * 1103515245 + 12345) % 2147483648
        nest(1 + n % 40, {"x": n})

for seed in range(3):
    threading.Thread(target=work, args=(seed,), daemon=True).start()
print("ready", flush=True)
work(7)
"""

PERL_LOOP = """\
$| = 1;
sub nest { my ($d, $h) = @_; return scalar(sort { $a cmp $b } map { "$_=$h->{$_}" } keys %$h)
    if $d == 0; return nest($d - 1, { %$h, "k$d" => $d * 3 }) }
my $n = 7;
print "ready\\n";
while (1) { $n = ($n * 1103515245 + 12345) % 2147483648; nest(1 + $n % 60, { x => $n }) }
"""


def real_programs(work):
    """[(name, argv)] of Debian's interpreters running busy loops."""
    programs = []
    if os.path.exists("/usr/bin/python3"):
        script = work / "loop.py"
        script.write_text(PYTHON_LOOP)
        programs.append(("python3", ["/usr/bin/python3", script]))
    if os.path.exists("/usr/bin/perl"):
        script = work / "loop.pl"
        script.write_text(PERL_LOOP)
        programs.append(("perl", ["/usr/bin/perl", script]))
    return programs


def core_comparison(gdb, running, program, work, walks, comparison):
    """gcore the stopped process; `sfbt stack --core` with the executable
    relative and absolute against GDB on the core."""
    core = work / "bench.core"
    os.kill(running.pid, signal.SIGSTOP)
    try:
        harness.wait_stopped(running.pid)
        subprocess.run([gdb, "-nx", "-batch", "-p", str(running.pid), "-ex", f"gcore {core}"],
                       capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    finally:
        os.kill(running.pid, signal.SIGCONT)
    theirs = harness.gdb_threads(gdb, [program, core], work)
    relative = os.path.relpath(program, work)
    for executable in (relative, str(program)):
        result = harness.sfbt_command("stack", "--core", core, executable, cwd=work)
        if result.returncode != 0:
            comparison.threads += len(theirs)
            comparison.differences.append(f"sfbt stack --core: {result.stderr.strip()}")
            continue
        harness.compare_with_gdb(harness.parse_stacks(result.stdout), theirs, comparison)
    core.unlink()


def one_program(name, argv, starts, args, work, gdb_is_13):
    """The counts of one program; ``starts``: its threads' start routines
    (none: a program whose static functions have no names, whose frames
    without a name pass)."""
    named = bool(starts)
    walks = harness.LiveWalks()
    running_tally = harness.Tally()
    recorded_tally = harness.Tally()
    stopped = harness.Comparison()
    cores = harness.Comparison()
    began = time.monotonic()
    with harness.Started(argv) as running:
        time.sleep(0.3)
        harness.walk_running(running.pid, walks, args.rounds, running_tally, starts,
                             named=named)
        for _ in range(args.stops):
            harness.stopped_comparison(args.gdb, running.pid, walks, work, stopped,
                                       numbers=gdb_is_13)
            time.sleep(0.05)
        core_comparison(args.gdb, running, Path(argv[0]), work, walks, cores)
        archive = work / "bench.sfbt"
        recorded = harness.sfbt_command("record", "--idle", "-p", running.pid, "--hz", "99",
                                        "--duration", str(args.record), "-o", archive)
        if recorded.returncode == 0:
            stacks = harness.recorded_stacks(archive)
            recorded_tally.add(dict(enumerate(stacks)), starts, named)
        else:
            recorded_tally.problems.append(recorded.stderr.strip())
    print(f"{name} ({time.monotonic() - began:.0f} s):")
    print(f"  {running_tally.line('running, sfbt stack')}")
    print(f"  stopped: PCs{' and numbers' if gdb_is_13 else ''} equal to gdb -nx on "
          f"{stopped.equal} of {stopped.threads} threads")
    print(f"  cores (EXE relative and absolute): equal to gdb -nx on {cores.equal} of "
          f"{cores.threads} threads")
    print(f"  {recorded_tally.line('sfbt record samples (distinct stacks)')}")
    for problem in (running_tally.problems[:2] + stopped.differences[:2]
                    + cores.differences[:2] + recorded_tally.problems[:2]):
        print("    " + problem.replace("\n", "\n    "))
    return running_tally, stopped, cores, recorded_tally


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100,
                        help="sfbt stack walks of each running program")
    parser.add_argument("--stops", type=int, default=20,
                        help="comparisons with GDB of each program stopped")
    parser.add_argument("--record", type=float, default=3.0,
                        help="seconds of sfbt record on each program")
    parser.add_argument("--gdb", default=shutil.which("gdb") or "gdb")
    args = parser.parse_args()
    version = subprocess.run([args.gdb, "--version"], capture_output=True, text=True).stdout
    gdb_is_13 = " 13." in version.splitlines()[0] if version else False
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-live-"))
    try:
        build = work / "build"
        build.mkdir()
        program, library = harness.build_busy(build)
        runs = [("busy.c (4 workers, a library loaded and unloaded)",
                 [program, 4, library], harness.BUSY_STARTS)]
        runs += [(name, argv, ()) for name, argv in real_programs(work)]
        totals = [harness.Tally(), harness.Comparison(), harness.Comparison(), harness.Tally()]
        for name, argv, starts in runs:
            results = one_program(name, argv, starts, args, work, gdb_is_13)
            for total, result in zip(totals, results):
                if isinstance(total, harness.Tally):
                    total.walked += result.walked
                    total.complete += result.complete
                else:
                    total.threads += result.threads
                    total.equal += result.equal
        running, stopped, cores, recorded = totals
        print(f"all: running stacks complete {running.complete}/{running.walked}; "
              f"stopped PCs equal {stopped.equal}/{stopped.threads}; cores equal "
              f"{cores.equal}/{cores.threads}; recorded stacks complete "
              f"{recorded.complete}/{recorded.walked}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
