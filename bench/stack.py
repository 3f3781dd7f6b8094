"""`sfbt stack PID` against `gdb -batch -p PID -ex 'thread apply all bt'`
(gstack's way) on a 9-thread process (tests/programs/workers.c, -O2 PIE),
each a fresh process as a user runs them, cold (the interpreter's start
included), in paired, interleaved rounds (bench/pairing.py); eu-stack's
figure beside them when elfutils is installed.

sfbt runs as installed: from bytecode (compiled once into a cache of this
run's own), with its on-disk caches (synthesized SFrame rows, DWARF line
rows per file) filled by a first run, as they are after a user's
first run.  Goal: sfbt / gdb <= 0.2, each thread stopped <= 10 ms.

Then where sfbt's time goes, in one process: the interpreter's start,
imports, reading the process, the snapshots, the session, the walks and names.

Then `sfbt stack PID` against `eu-stack -s -p PID` (names and source
lines, as sfbt prints), with sfbt's cache filled and with an empty one each
run (goals <= 2 and <= 4), on three targets: Debian's /usr/bin/python3
running 5 threads (no `.sframe`: every row comes from `.eh_frame`), the
9-thread program above, and bench/programs/many_libraries.c with 100
distinct libraries loaded (generated here, each a function or two,
dlopen'ed), 3 threads waiting inside them.  And `sfbt --version` against
`/usr/bin/python3 -c pass` (goal <= 2).

Then what `sfbt stack PID` of the python3 target imports, as `-X
importtime` counts it (the cache filled).

Run: python3 bench/stack.py [--rounds N] [--gdb PATH]
                            [--parts workers,python,libraries,version,imports]
"""

import argparse
import contextlib
import json
import os
import shutil
import statistics
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

PHASES = r"""
import sys, time, json
began = time.perf_counter()
from sfbt.live.process import Process
from sfbt.live.session import SnapshotSession
from sfbt.live.stack import stack_text
imported = time.perf_counter()
process = Process(int(sys.argv[1]))
threads = process.threads()
opened = time.perf_counter()
states = [process.snapshot(tid, name) for tid, name in threads]
snapped = time.perf_counter()
process.reread_mappings(keep_gone=True)
session = SnapshotSession(process.arch, process.modules(), process.read,
                          list(enumerate(states, 1)), process.executable,
                          mappings=process.mappings)
made = time.perf_counter()
stack_text(session)  # sframe-bt of each thread: its walk, then its names
described = time.perf_counter()
print(json.dumps({"imports": imported - began, "process": opened - imported,
                  "snapshots": snapped - opened, "session": made - snapped,
                  "walks and names": described - made,
                  "stopped": [s.extra["stopped"] for s in states]}))
"""


def environment(cache):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"), PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(command, env=None):
    began = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    seconds = time.perf_counter() - began
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return seconds, result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--gdb", default="gdb")
    parser.add_argument("--parts", default="workers,python,libraries,version,imports",
                        help="what to measure, comma-separated")
    args = parser.parse_args()
    parts = args.parts.split(",")
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-stack-"))
    try:
        env = environment(str(work / "pycache"))
        if "workers" in parts:
            program = compile_program(work, "workers", "O2", True, ["workers.c"])
            with running([str(program)]) as pid:
                measure(args, pid, env)
                against_eu_stack(args, pid, env, work, "the 9-thread program (workers.c)")
        if "python" in parts:
            with running([PYTHON, "-c", PYTHON_THREADS]) as pid:
                against_eu_stack(args, pid, env, work, PYTHON)
        if "libraries" in parts:
            with running(many_libraries(work)) as pid:
                against_eu_stack(args, pid, env, work,
                                 f"many_libraries.c, {LIBRARIES} libraries loaded")
        if "version" in parts:
            version(args, env)
        if "imports" in parts:
            with running([PYTHON, "-c", PYTHON_THREADS]) as pid:
                imports(args, pid, env, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


#: Debian's own interpreter, as the issue measured it
PYTHON = "/usr/bin/python3"
PYTHON_THREADS = ("import threading, time\n"
                  "for _ in range(4):\n"
                  "    threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()\n"
                  "print('ready', flush=True)\n"
                  "time.sleep(1e6)\n")


#: how many distinct libraries many_libraries.c loads
LIBRARIES = 100
#: each library: lib_wait, which calls back (a frame in it on the stack),
#: and a function of its own (no two libraries alike)
LIBRARY = ("__attribute__((noinline)) void lib_wait(void (*wait)(void))\n"
           "{{\n    wait();\n    __asm__ volatile(\"\" ::: \"memory\");\n}}\n"
           "int lib_value_{n}(int x) {{ return x * {n} + 1; }}\n")


def many_libraries(work):
    """The command of bench/programs/many_libraries.c with its LIBRARIES
    libraries, built in ``work`` with SFrame data as tests/programs are."""
    directory = work / "libraries"
    directory.mkdir()
    flags = ["gcc", "-g", "-O2", "-Wa,--gsframe"]
    builds, libraries = [], []
    for n in range(LIBRARIES):
        source = directory / f"lib{n}.c"
        source.write_text(LIBRARY.format(n=n))
        libraries.append(str(directory / f"lib{n}.so"))
        builds.append(subprocess.Popen(flags + ["-shared", "-fPIC", "-o", libraries[-1],
                                                str(source)]))
    program = str(directory / "many_libraries")
    builds.append(subprocess.Popen(flags + ["-fPIE", "-pie", "-o", program,
                                            str(ROOT / "bench/programs/many_libraries.c"),
                                            "-lpthread", "-ldl"]))
    if any(build.wait() for build in builds):
        raise SystemExit("building many_libraries.c and its libraries failed")
    return [program] + libraries


@contextlib.contextmanager
def running(command):
    """The pid (text) of a process that has printed "ready"."""
    target = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        yield str(target.pid)
    finally:
        target.kill()
        target.wait()


def against_eu_stack(args, pid, env, work, what):
    eu_stack = shutil.which("eu-stack")
    if not eu_stack:
        print("eu-stack: not installed (apt-get install elfutils)")
        return
    env = dict(env, DEBUGINFOD_URLS="")
    filled = dict(env, XDG_CACHE_HOME=str(work / "filled"))
    sfbt = [sys.executable, "-m", "sfbt", "stack", pid]
    eu = [eu_stack, "-s", "-p", pid]
    _, text = timed(sfbt, filled)
    threads = text.count("\nThread ") + text.startswith("Thread ")
    print(f"target: {what}, {threads} threads, pid {pid}")
    timed(eu, env)

    def eus():
        return timed(eu, env)[0]

    def empty():
        with tempfile.TemporaryDirectory(dir=work) as cache:
            return timed(sfbt, dict(env, XDG_CACHE_HOME=cache))[0]

    print(paired_ratios(args.rounds, lambda: timed(sfbt, filled)[0], eus).line(
        "sfbt stack (cache filled) / eu-stack -s -p", goal=2))
    print(paired_ratios(args.rounds, empty, eus).line(
        "sfbt stack (empty cache) / eu-stack -s -p", goal=4))


def version(args, env):
    """sfbt --version as its console script runs it (``from sfbt.cli import
    main``), against the same interpreter's ``-c pass`` and against
    Debian's python3's, the issue's anchor (both run sfbt too: Debian's
    interpreter with this tree on its path).  The goal is the installed
    sfbt's, which runs Debian's interpreter: another one's start is its
    own."""
    entry = ["-c", "import sys; from sfbt.cli import main; sys.exit(main())", "--version"]
    for python in dict.fromkeys((sys.executable, PYTHON)):
        ours = [python, *entry]
        timed(ours, env)
        print(paired_ratios(args.rounds, lambda: timed(ours, env)[0],
                            lambda: timed([PYTHON, "-c", "pass"])[0]).line(
            f"sfbt --version ({python}) / {PYTHON} -c pass",
            goal=2 if python == PYTHON else None))
    same = [sys.executable, *entry]
    print(paired_ratios(args.rounds, lambda: timed(same, env)[0],
                        lambda: timed([sys.executable, "-c", "pass"], env)[0]).line(
        f"sfbt --version / {sys.executable} -c pass"))


def imports(args, pid, env, work):
    """The medians of `sfbt stack PID`'s -X importtime total (each
    top-level import's cumulative time, the interpreter's own included)
    and of its count of imports.  -X importtime does not see a module
    imported through importlib.import_module (sfbt.lazy's exports)."""
    filled = dict(env, XDG_CACHE_HOME=str(work / "filled"), DEBUGINFOD_URLS="")
    timed([sys.executable, "-m", "sfbt", "stack", pid], filled)  # fills the cache
    totals, counts = [], []
    for _ in range(args.rounds):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "sfbt", "stack", pid],
                              capture_output=True, text=True, env=filled, timeout=120)
        rows = [line.split("|") for line in done.stderr.splitlines()
                if line.startswith("import time:") and "[us]" not in line]
        totals.append(sum(int(row[1]) for row in rows if not row[2][1:].startswith(" ")))
        counts.append(len(rows))
    print(f"sfbt stack's imports ({PYTHON} target, -X importtime, medians of "
          f"{args.rounds}): {statistics.median(totals) / 1e3:.1f} ms, "
          f"{statistics.median(counts):g} imports")


def measure(args, pid, env):
    sfbt = [sys.executable, "-m", "sfbt", "stack", pid]
    gdb = [args.gdb, "-nx", "-batch", "-p", pid, "-ex", "thread apply all bt"]
    _, text = timed(sfbt, env)  # fills the caches, compiles the bytecode
    threads = text.count("\nThread ") + text.startswith("Thread ")
    print(f"target: {threads} threads, pid {pid}")
    timed(gdb)

    def ours():
        return timed(sfbt, env)[0]

    def gdbs():
        return timed(gdb)[0]

    paired = paired_ratios(args.rounds, ours, gdbs)
    print(paired.line("sfbt stack / gdb thread apply all bt (cold)", goal=0.2))
    eu_stack = shutil.which("eu-stack")
    if eu_stack:
        eu = [eu_stack, "-p", pid]
        timed(eu)
        theirs = paired_ratios(args.rounds, ours, lambda: timed(eu)[0])
        print(theirs.line("sfbt stack / eu-stack -p (C, DWARF)"))
        print(paired_ratios(args.rounds, lambda: timed(eu)[0], gdbs).line(
            "eu-stack -p / gdb thread apply all bt"))
    else:
        print("eu-stack: not installed (apt-get install elfutils)")

    bare = statistics.median(timed([sys.executable, "-c", "pass"], env)[0]
                             for _ in range(args.rounds))
    phases = [json.loads(timed([sys.executable, "-c", PHASES, pid], env)[1])
              for _ in range(args.rounds)]
    print(f"where sfbt's time goes (medians of {args.rounds}): interpreter start "
          f"{bare * 1e3:.1f} ms, " + ", ".join(
              f"{name} {statistics.median(p[name] for p in phases) * 1e3:.1f} ms"
              for name in ("imports", "process", "snapshots", "session", "walks and names")))
    stops = sorted(s for p in phases for s in p["stopped"])
    print(f"each thread stopped: median {statistics.median(stops) * 1e3:.3f} ms, "
          f"max {stops[-1] * 1e3:.3f} ms over {len(stops)} stops  goal <= 10 ms: "
          f"{'met' if stops[-1] <= 0.010 else 'NOT met'}")


if __name__ == "__main__":
    main()
