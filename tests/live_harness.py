"""The differential harness of the debugger-free side: `sfbt stack` and
`sfbt record` on processes whose threads run on while they are walked.

- every thread's stack walked while the process runs must be complete: no
  frame without a name, and it ends at ``main`` or, for another thread,
  passes through its start routine and ends at the outermost frame
  (``clone3``; ``_start`` where ``main`` has no name); where a library was unloaded after the snapshot, a stop
  reason that says so;
- with the process stopped (SIGSTOP), each thread's PCs and number equal
  those of ``gdb -nx -batch -p PID`` (GDB's own frames with a PC of their
  own: inline frames left out, tail-call frames kept);
- the same for a core of the process, its executable named by a relative
  or an absolute path.

Used by tests/test_live_differential.py (a few seconds) and
bench/live_differential.py (minutes, and real programs nobody here wrote);
its recorders' helpers (record_taking, run_interrupted) by the tests and
benches of `sfbt record` and perf record.
"""

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from gdb_support import compile_library, compile_program

ROOT = Path(__file__).resolve().parent.parent

_THREAD = re.compile(r"^Thread (\d+) \(LWP (\d+)(?: \"([^\"]*)\")?\):$")
_FRAME = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+) in (.+?)(?: at | from | \(\)|$)")
_STOPPED = "Backtrace stopped: "
#: where a stack that does not end at main ends when it is complete: a
#: thread's at its clone, the main thread's at the entry point when main
#: has no name (a stripped program)
OUTERMOST = ("clone3", "__clone3", "clone", "__clone", "_start")
#: stop reasons of a complete stack
COMPLETE_STOPS = (None, "outermost frame")
#: the signal trampoline's names (glibc's, on x86-64 and AArch64)
SIGNAL_TRAMPOLINES = ("__restore_rt", "__kernel_rt_sigreturn")
#: what a stop reason says when a library was unloaded after the snapshot
UNLOADED = "unloaded"

# Prints each thread's number, LWP and the PCs of GDB's frames (GDB's
# `thread apply all bt` without its inline frames; its tail-call frames
# kept, as sfbt stack rebuilds them, marked "t"), as
# "GDB-THREAD number lwp pc tpc ...".
GDB_PCS = """\
import gdb
for thread in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    thread.switch()
    pcs = []
    frame = gdb.newest_frame()
    while frame is not None and (LIMIT is None or len(pcs) < LIMIT):
        if frame.type() != gdb.INLINE_FRAME:
            pcs.append(("t%#x" if frame.type() == gdb.TAILCALL_FRAME else "%#x") % frame.pc())
        try:
            frame = frame.older()
        except gdb.error:
            break
    gdb.write("GDB-THREAD %d %d %s\\n" % (thread.num, thread.ptid[1],
                                          " ".join(pcs)))
"""


@dataclass
class Stack:
    """One thread's stack as sfbt printed it."""

    number: int
    tid: int
    name: str
    frames: List[tuple] = field(default_factory=list)  # (pc, function name)
    stop: Optional[str] = None

    @property
    def pcs(self):
        return [pc for pc, _ in self.frames]

    def problem(self, start_routines=(), named=True):
        """Why the stack is not complete, or None; a stack cut short by a
        library unloaded after the snapshot is complete when its stop
        reason says so.  Without ``named`` (a program whose files have no
        names for their static functions), frames without a name pass."""
        if not self.frames:
            return f"no frames ({self.stop})"
        names = [name for _, name in self.frames]
        if self.stop is not None and UNLOADED in self.stop:
            return None
        if named and "??" in names:
            return f"a frame without a name at #{names.index('??')} ({self.stop})"
        if names[-1] == "main" and self.stop is None:
            return None
        if names[-1] not in OUTERMOST or self.stop not in COMPLETE_STOPS:
            return f"ends at {names[-1]} ({self.stop})"
        if start_routines and not set(names) & set(start_routines):
            return f"no start routine ({', '.join(start_routines)}) on the stack"
        return None

    def describe(self):
        lines = [f"Thread {self.number} (LWP {self.tid} {self.name!r}):"]
        lines += [f"  {pc:#x} {name}" for pc, name in self.frames]
        if self.stop:
            lines.append(f"  stopped: {self.stop}")
        return "\n".join(lines)


def parse_stacks(text) -> Dict[int, Stack]:
    """{tid: Stack} of `sfbt stack`'s text."""
    stacks, current = {}, None
    for line in text.splitlines():
        match = _THREAD.match(line)
        if match:
            current = stacks[int(match[2])] = Stack(int(match[1]), int(match[2]),
                                                    match[3] or "")
            continue
        if current is None:
            continue
        match = _FRAME.match(line)
        if match:
            current.frames.append((int(match[2], 16), match[3]))
        elif line.startswith(_STOPPED):
            current.stop = line[len(_STOPPED):]
    return stacks


# -- the programs -------------------------------------------------------------

def build_busy(directory):
    """(program, library) of tests/programs/busy.c and libbusy.c, -O2."""
    library = compile_library(directory, "libbusy.so", "O2", ["libbusy.c"])
    program = compile_program(directory, "busy", "O2", True, ["busy.c"])
    return program, library


#: the start routines of busy.c's threads
BUSY_STARTS = ("worker", "loader")


class Started:
    """A program started for a test, killed after it; ``ready``: a line it
    prints once it runs (None: wait ``settle`` seconds instead)."""

    def __init__(self, argv, ready="ready", cwd=None, settle=0.5, environment=None):
        self.process = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, text=True, cwd=cwd,
                                        env=dict(os.environ, **(environment or {})))
        if ready is not None:
            line = self.process.stdout.readline().strip()
            if line != ready:
                self.close()
                raise RuntimeError(f"{argv[0]} said {line!r}, not {ready!r}")
        else:
            time.sleep(settle)
        self.pid = self.process.pid

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def close(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
        self.process.wait()


# -- sfbt's side ----------------------------------------------------------------

class LiveWalks:
    """`sfbt stack PID` done in this process again and again (what the
    command does, without an interpreter's start each time), with one
    cache of SFrame data for all the walks."""

    def __init__(self):
        sys.path.insert(0, str(ROOT / "plugin"))
        from sfbt.unwind.modules import SFrameSources
        self.sources = SFrameSources()

    def text(self, pid, words=()):
        """`sfbt stack PID`'s text (with sframe-bt's ``words``: -v)."""
        from sfbt.live.session import process_session
        from sfbt.live.stack import stack_text
        return stack_text(process_session(pid, sources=self.sources), words)

    def stacks(self, pid):
        return parse_stacks(self.text(pid))


def sfbt_command(*arguments, cwd=None):
    """`python3 -m sfbt ARGUMENTS` from this checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"))
    return subprocess.run([sys.executable, "-m", "sfbt", *map(str, arguments)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


# -- GDB's side -------------------------------------------------------------------

def gdb_threads(gdb_command, arguments, directory, tail_calls=True, limit=None):
    """{tid: (thread number, [pc, ...])} of GDB (``gdb -nx -batch``) on
    ``arguments`` (``-p PID``, or an executable and a core); without
    ``tail_calls``, GDB's tail-call frames left out (to compare with saved
    stacks, which hold the frames on the stack only); each thread's first
    ``limit`` frames only, where given."""
    script = Path(directory) / "gdb_pcs.py"
    script.write_text(f"LIMIT = {limit!r}\n" + GDB_PCS)
    result = subprocess.run([gdb_command, "-nx", "-batch", "-ex", "set pagination off",
                             "-x", str(script), *map(str, arguments)],
                            capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    threads = {}
    for line in result.stdout.splitlines():
        if line.startswith("GDB-THREAD "):
            fields = line.split()
            threads[int(fields[2])] = (int(fields[1]), [
                int(pc.lstrip("t"), 16) for pc in fields[3:]
                if tail_calls or not pc.startswith("t")])
    if not threads:
        raise RuntimeError(f"gdb printed no threads: {(result.stdout + result.stderr)[-2000:]}")
    return threads


def thread_state(tid, pid=None):
    """The state letter of a thread (/proc/.../stat), "" when it is gone."""
    try:
        with open(f"/proc/{pid or tid}/task/{tid}/stat") as stream:
            text = stream.read()
    except OSError:
        return ""
    return text[text.rfind(")") + 2]


def wait_stopped(pid, timeout=10.0):
    """Wait until every thread of ``pid`` is stopped (after SIGSTOP)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [thread_state(int(tid), pid) for tid in os.listdir(f"/proc/{pid}/task")]
        states = [state for state in states if state]
        if states and all(state in "tT" for state in states):
            return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} did not stop")


@dataclass
class Comparison:
    threads: int = 0
    equal: int = 0
    differences: List[str] = field(default_factory=list)


def compare_with_gdb(stacks, theirs, comparison, numbers=True):
    """Count threads whose PCs and number (unless not ``numbers``) equal
    GDB's."""
    for tid in sorted(set(stacks) | set(theirs)):
        comparison.threads += 1
        ours = stacks.get(tid)
        number, pcs = theirs.get(tid, (None, None))
        if (ours is not None and pcs is not None and ours.pcs == pcs
                and (ours.number == number or not numbers)):
            comparison.equal += 1
        else:
            comparison.differences.append(
                f"thread {tid}: GDB's Thread {number} {[hex(p) for p in pcs or []]}\n"
                + (ours.describe() if ours else "  not in sfbt's output"))


def stopped_comparison(gdb_command, pid, walks, directory, comparison, numbers=True):
    """Stop the process, walk it, compare with GDB, let it go.  GDB 13.1
    numbers an attached process's threads as sfbt does (the main thread,
    then /proc/PID/task's order); GDB 18.1 the others in reverse, so
    ``numbers`` False compares only the PCs (the main thread is 1 in
    both)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_stopped(pid)
        stacks = walks.stacks(pid)
        theirs = gdb_threads(gdb_command, ["-p", pid], directory)
        compare_with_gdb(stacks, theirs, comparison, numbers)
        if stacks.get(pid) is None or stacks[pid].number != 1:
            comparison.differences.append(f"the main thread {pid} is not Thread 1")
        return stacks
    finally:
        os.kill(pid, signal.SIGCONT)


@dataclass
class Tally:
    walked: int = 0
    complete: int = 0
    #: of the complete ones: cut short by a library unloaded after the snapshot
    unloaded: int = 0
    problems: List[str] = field(default_factory=list)

    def add(self, stacks, start_routines=(), named=True):
        for stack in stacks.values():
            self.walked += 1
            problem = stack.problem(start_routines, named)
            if problem is None:
                self.complete += 1
                self.unloaded += stack.stop is not None and UNLOADED in stack.stop
            else:
                self.problems.append(f"{problem}\n{stack.describe()}")

    def line(self, what):
        unloaded = (f" ({self.unloaded} cut short by a library unloaded since)"
                    if self.unloaded else "")
        return f"{what}: {self.complete} of {self.walked} stacks complete{unloaded}"


def walk_running(pid, walks, rounds, tally, start_routines=(), pause=0.0, named=True):
    """Walk the running process ``rounds`` times."""
    for _ in range(rounds):
        tally.add(walks.stacks(pid), start_routines, named)
        if pause:
            time.sleep(pause)


# -- sfbt record ------------------------------------------------------------------

def record_taking(recorder, seconds, take):
    """Run ``recorder`` (a perf_source.PerfRecorder) for ``seconds``, each
    sample it reads given to ``take`` in place of its own, then close it
    (a recording's samples kept for a test or a benchmark to walk)."""

    class Signals:  # none caught: the recording runs its time
        caught = None
        received = 0

        def sleep(self, seconds):
            time.sleep(seconds)

    recorder._take = take
    try:
        recorder.run(seconds, Signals(), lambda: True)
    finally:
        recorder.close()


def run_interrupted(command, during, timeout, **options):
    """(what ``during(process)`` returned, the subprocess.CompletedProcess)
    of ``command`` (a recorder: perf record, sfbt record) started with its
    output piped as text (``options`` go to subprocess.Popen), interrupted
    by SIGINT once ``during`` returned, as a user stops it, and waited for
    ``timeout`` seconds at most; without ``during``, waited for to end.
    Killed if anything on the way fails."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    process = subprocess.Popen([str(word) for word in command], text=True, **options)
    try:
        result = during(process) if during is not None else None
        if during is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return result, subprocess.CompletedProcess(process.args, process.returncode, out, err)


def recorded_stacks(archive):
    """[Stack] of every distinct stack in an archive `sfbt record` wrote,
    named with the images its image map lists (their files as they are
    now), as sfbt stack names frames."""
    from sfbt.archive.saved import SavedFile
    from sfbt.live.mappings import Mapping, file_modules
    from sfbt.live.symbols import Describer
    from sfbt.unwind.modules import ModuleMap
    describers = {}
    stacks = []
    with SavedFile(str(archive)) as saved:
        for trace in saved.traces():
            key = tuple((image.path, image.base, image.end_of_text) for image in trace.images)
            describe = describers.get(key)
            if describe is None:
                modules = file_modules([Mapping(base, end, True, False, 0, path)
                                        for path, base, end in key])
                describe = describers[key] = Describer(ModuleMap(modules))
            stack = Stack(0, 0, trace.heading or "")
            for frame in trace.frames:
                lookup = frame.address if frame.kind == "pc" else frame.address - 1
                name = describe.name(lookup)
                if name == "??" and describe.name(frame.address) in SIGNAL_TRAMPOLINES:
                    # a return address at the first byte of the kernel's signal
                    # trampoline (its symbol does not cover the byte before)
                    name = "<signal handler called>"
                stack.frames.append((frame.address, name))
            # a stack that ends at the outermost frame or main is all sfbt
            # record keeps of the walk's stop
            stacks.append(stack)
        if saved.error is not None:
            raise RuntimeError(str(saved.error))
    return stacks
