"""sfbt stack on a live multi-threaded process and on its cores: the PCs
of every thread equal GDB's own (GDB's frames that are on the stack, with
sfbt's unwinder off in GDB), and the errors are one clear line."""

import ctypes
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import PLUGIN, run_sfbt
from gdb_support import compile_program, gdb_pcs, run_gdb
from live_harness import gdb_threads

_THREAD = re.compile(r"^Thread (\d+) \(LWP (\d+)(?: \"([^\"]*)\")?\):$", re.M)
_GDB_THREAD = re.compile(r"^Thread \d+ \(.*LWP (\d+)\)")


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    return compile_program(tmp_path_factory.mktemp("stack"), "workers", "O2", True,
                           ["workers.c"])


class Running:
    """The workers program, started for one test and killed after it."""

    def __init__(self, program, *arguments, cwd=None, core_limit=None):
        def limits():
            if core_limit is not None:
                resource.setrlimit(resource.RLIMIT_CORE, (core_limit, core_limit))
        self.process = subprocess.Popen([str(program), *map(str, arguments)],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        text=True, cwd=cwd, preexec_fn=limits)
        assert self.process.stdout.readline().strip() == "ready"
        self.pid = self.process.pid

    def __enter__(self):
        return self

    def __exit__(self, *_):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def sfbt_stacks(text):
    """{tid: [pc, ...]} from sfbt stack's output (its inline frames,
    which have no address of their own, left out; and, from `sfbt stack
    -v`, its tail-call frames)."""
    stacks, current = {}, None
    for line in text.splitlines():
        match = _THREAD.match(line)
        if match:
            current = stacks[int(match[2])] = []
        elif line.startswith("#") and current is not None and " 0x" in line \
                and not line.endswith("  [tailcall]"):  # -v's, not on the stack
            current.append(int(line.split()[1], 16))
    return stacks


def gdb_stacks(text):
    """{tid: [pc, ...]} from `thread apply all test-gdb-pcs`."""
    stacks, tid = {}, None
    for line in text.splitlines():
        match = _GDB_THREAD.match(line)
        if match:
            tid = int(match[1])
        elif line.startswith("GDB-PCS") and tid is not None:
            (stacks[tid],) = gdb_pcs(line)
    return stacks


GDB_OWN = ["set sframe unwinder off", "thread apply all test-gdb-pcs"]


def test_live_process_and_its_gcore(gdb, workers, tmp_path):
    core = tmp_path / "workers.core"
    with Running(workers) as running:
        ours = run_sfbt("stack", running.pid)
        assert ours.returncode == 0, ours.stderr
        out = run_gdb(gdb, ["-p", str(running.pid)], GDB_OWN + [f"gcore {core}"])
        again = run_sfbt("stack", running.pid)
    theirs = gdb_stacks(out)
    stacks = sfbt_stacks(ours.stdout)
    assert len(stacks) == 9 and len(theirs) == 9, out[-2000:]
    assert stacks == theirs
    # a second look, after GDB detached, finds every thread where it was
    assert sfbt_stacks(again.stdout) == stacks
    names = dict((int(m[2]), m[3]) for m in _THREAD.finditer(ours.stdout))
    assert names[running.pid] == "workers"
    assert sorted(names.values()) == [f"wait-{i}" for i in range(8)] + ["workers"]
    # frames as sframe-bt prints them, ending at main and at clone3
    assert re.search(r"^#1  0x[0-9a-f]{16} in main at \S*workers.c:\d+$", ours.stdout, re.M)
    assert ours.stdout.count("in worker at ") == 8
    assert core.exists()
    from_core = run_sfbt("stack", "--core", core, workers)
    assert from_core.returncode == 0, from_core.stderr
    assert sfbt_stacks(from_core.stdout) == theirs
    tid = max(theirs)
    one = run_sfbt("stack", "--core", core, "--thread", tid)
    assert sfbt_stacks(one.stdout) == {tid: theirs[tid]}
    # numbered as GDB numbers the core's threads (NT_PRSTATUS order)
    number = gdb_threads(gdb.command, [workers, core], tmp_path)[tid][0]
    assert one.stdout.startswith(f"Thread {number} (LWP {tid}):\n")
    # on attach, GDB numbers the main thread 1, then the order of /proc/PID/task
    numbers = {int(m[2]): int(m[1]) for m in _THREAD.finditer(ours.stdout)}
    assert numbers[running.pid] == 1 and sorted(numbers.values()) == list(range(1, 10))


def _kernel_core_pattern():
    try:
        with open("/proc/sys/kernel/core_pattern") as stream:
            pattern = stream.read().strip()
    except OSError:
        return None
    # a plain file name in the crashing process's directory is ours to read
    return pattern if pattern and "/" not in pattern and not pattern.startswith("|") \
        else None


def test_kernel_core(gdb, workers, tmp_path):
    """A core the kernel wrote (or, where the kernel's cores go elsewhere,
    gcore's): the same PCs as GDB's on the live process."""
    pattern = _kernel_core_pattern()
    with Running(workers, cwd=tmp_path, core_limit=resource.RLIM_INFINITY) as running:
        commands = GDB_OWN if pattern else GDB_OWN + [f"gcore {tmp_path / 'core'}"]
        theirs = gdb_stacks(run_gdb(gdb, ["-p", str(running.pid)], commands))
        if pattern:
            running.process.send_signal(signal.SIGQUIT)
            running.process.wait(timeout=60)
    cores = [p for p in tmp_path.iterdir() if p.name.startswith("core")]
    assert len(cores) == 1, list(tmp_path.iterdir())
    ours = run_sfbt("stack", "--core", cores[0])
    assert ours.returncode == 0, ours.stderr
    assert len(theirs) == 9
    assert sfbt_stacks(ours.stdout) == theirs


def test_one_thread_and_saved_forms(workers, tmp_path):
    with Running(workers) as running:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{running.pid}/task"))
        one = run_sfbt("stack", running.pid, "--thread", tids[3])
        everything = run_sfbt("stack", running.pid)
        archive = tmp_path / "all.sfbt"
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o", archive)
        single = tmp_path / "one.json"
        json_saved = run_sfbt("stack", running.pid, "--thread", tids[3],
                              "--format", "json", "-o", single)
        text_file = tmp_path / "stacks.txt"
        written = run_sfbt("stack", running.pid, "-o", text_file)
        verbose = run_sfbt("stack", running.pid, "-v")
        lws_file = tmp_path / "all.lws"
        lws_saved = run_sfbt("stack", running.pid, "--format", "lws", "-o", lws_file)
    stacks = sfbt_stacks(everything.stdout)
    assert written.returncode == 0 and written.stdout == ""
    assert sfbt_stacks(text_file.read_text()) == stacks
    assert list(sfbt_stacks(one.stdout)) == [tids[3]]
    assert one.stdout.startswith(f"Thread 4 (LWP {tids[3]} ")
    assert saved.returncode == 0 and "Saved 9 backtraces" in saved.stdout, saved.stderr
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    # the archive keeps each distinct stack once, with a count
    traces = [[int(m, 16) for m in re.findall(r"^#\d+\s+(0x[0-9a-f]+)", part, re.M)]
              for part in decoded.stdout.split("Backtrace ")[1:]]
    counts = re.findall(r"captured (once|\d+ times)", decoded.stdout)
    # archives hold the frames on the stack: not the tail-call ones (-v's
    # [tailcall], of qsort's jump to __qsort_r where the C library has DWARF)
    on_stack = sfbt_stacks("\n".join(line for line in verbose.stdout.splitlines()
                                     if not line.endswith("  [tailcall]")))
    assert on_stack.keys() == stacks.keys()
    assert sorted(map(tuple, traces)) == sorted(set(map(tuple, on_stack.values())))
    assert len(traces) < 9 and sum(1 if c == "once" else int(c.split()[0])
                                   for c in counts) == 9
    assert json_saved.returncode == 0, json_saved.stderr
    from_json = run_sfbt("cbf", "decode", single)
    assert [int(m, 16) for m in re.findall(r"^#\d+\s+(0x[0-9a-f]+)", from_json.stdout, re.M)] \
        == on_stack[tids[3]]
    assert lws_saved.returncode == 0
    assert lws_file.read_text().count("~m#") == 9


def _one_line_error(result, pattern):
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and re.fullmatch(pattern, lines[0]), result.stderr


def test_one_backtrace_forms_of_a_single_threaded_process(tmp_path):
    """cbf and json hold one backtrace: a process of one thread needs no
    --thread, and --help says so."""
    sleeper = compile_program(tmp_path, "sleeper", "O2", True, ["sleeper.c"])
    with Running(sleeper) as running:
        saved = {fmt: run_sfbt("stack", running.pid, "--format", fmt,
                               "-o", tmp_path / f"sleeper.{fmt}")
                 for fmt in ("cbf", "json")}
        text = run_sfbt("stack", running.pid)
    (pcs,) = sfbt_stacks(text.stdout).values()
    for fmt, result in saved.items():
        assert result.returncode == 0, result.stderr
        assert f"Saved 1 backtrace ({len(pcs)} frames)" in result.stdout
        decoded = run_sfbt("cbf", "decode", tmp_path / f"sleeper.{fmt}")
        assert [int(m, 16) for m in re.findall(r"^(?:#\d+\s+|pc |ra )(0x[0-9a-f]+)",
                                               decoded.stdout, re.M)] == pcs, decoded.stdout
    helped = " ".join(run_sfbt("stack", "--help").stdout.split())
    assert ("archive or lws hold every thread, cbf or json one backtrace (with "
            "--thread TID, unless there is one thread)") in helped


def test_errors(workers, tmp_path):
    free = max(int(p) for p in os.listdir("/proc") if p.isdigit()) + 100000
    _one_line_error(run_sfbt("stack", free), rf"sfbt: no process {free}")
    _one_line_error(run_sfbt("stack", "abc"), r"sfbt: not a process id: 'abc' .*")
    _one_line_error(run_sfbt("stack"), r"sfbt: which process\? .*")
    not_core = tmp_path / "not-a-core"
    not_core.write_bytes(b"\x7fELF" + bytes(100))
    _one_line_error(run_sfbt("stack", "--core", not_core), rf"sfbt: {not_core}: .*")
    _one_line_error(run_sfbt("stack", "--core", workers),
                    rf"sfbt: {workers}: not a core file \(ELF type 3\)")
    with Running(workers) as running:
        _one_line_error(run_sfbt("stack", running.pid, "--format", "cbf", "-o",
                                 tmp_path / "x.cbf"),
                        rf"sfbt: --format cbf holds one backtrace and process "
                        rf"{running.pid} has 9 threads: add --thread TID, or use "
                        r"--format archive")
        _one_line_error(run_sfbt("stack", running.pid, "--format", "archive"),
                        r"sfbt: --format archive needs -o FILE")
        _one_line_error(run_sfbt("stack", running.pid, "--thread", "1"),
                        rf"sfbt: process {running.pid} has no thread 1")
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.ptrace(0x4206, running.pid, None, None) == 0  # PTRACE_SEIZE
        try:
            _one_line_error(run_sfbt("stack", running.pid),
                            rf"sfbt: cannot trace process {running.pid}: it is already "
                            rf"traced by process {os.getpid()} \(a debugger\?\)")
        finally:
            libc.ptrace(0x4207, running.pid, None, None)  # PTRACE_INTERRUPT
            os.waitpid(running.pid, 0x40000000)
            libc.ptrace(17, running.pid, None, None)  # PTRACE_DETACH
        subprocess.run(["gcore", "-o", str(tmp_path / "core"), str(running.pid)],
                       capture_output=True, timeout=120)
    (core,) = tmp_path.glob("core.*")
    _one_line_error(run_sfbt("stack", "--core", core, "/bin/true"),
                    rf"sfbt: {core} is a core of \S+/workers \(build id [0-9a-f]+\), "
                    r"not of /bin/true \(build id [0-9a-f]+\)")


def readable_copy_of_the_package(directory):
    """sfbt's package copied under ``directory``, which every user may read
    and enter: the checkout may sit under a folder other users cannot
    enter (a `mktemp -d` one)."""
    shutil.copytree(PLUGIN / "sfbt", directory / "sfbt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for folder, _, files in os.walk(directory):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def test_another_users_process(workers):
    """A process of another user (root's, traced as nobody) is one line."""
    def as_nobody():
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
    # the interpreter must be one that user may run
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    with tempfile.TemporaryDirectory(prefix="sfbt-readable-") as copy, \
            Running(workers) as running:
        readable_copy_of_the_package(Path(copy))

        def run(*arguments):
            return subprocess.run(
                [python, "-m", "sfbt", *arguments], preexec_fn=as_nobody,
                capture_output=True, text=True, timeout=120, cwd="/",
                env=dict(os.environ, PYTHONPATH=copy, XDG_CACHE_HOME="/tmp"))
        owner = os.stat(f"/proc/{running.pid}").st_uid
        result = run("stack", str(running.pid))
        # sfbt record gives the same line, and writes nothing
        recorded = run("record", "--idle", "-p", str(running.pid), "--duration", "1", "-o",
                       "/tmp/sfbt-nobody-never-written.sfbt")
    if os.geteuid() == 0:
        for each in (result, recorded):
            _one_line_error(each, rf"sfbt: cannot trace process {running.pid}: it belongs "
                            rf"to user {owner} \(run sfbt as that user, or as root\)")
        assert not os.path.exists("/tmp/sfbt-nobody-never-written.sfbt")
    else:  # not root: our own process, which we may trace
        assert result.returncode == 0, result.stderr
        assert recorded.returncode == 0, recorded.stderr
        os.unlink("/tmp/sfbt-nobody-never-written.sfbt")


def test_a_process_that_exits_while_read(workers):
    """Threads that are gone are left out; a process that is gone is one
    line, never a traceback."""
    from sfbt.live.process import Process, ProcessError
    with Running(workers) as running:
        process = Process(running.pid)
        threads = process.threads()
        first = process.snapshot(*threads[1])
        assert first is not None and first.tid == threads[1][0]
        running.process.kill()
        running.process.wait()
        assert process.snapshot(*threads[2]) is None
        with pytest.raises(ProcessError, match=rf"process {running.pid} exited"):
            process.threads()
    with Running(workers) as running:
        pid = running.pid
    _one_line_error(run_sfbt("stack", pid), rf"sfbt: no process {pid}")


def test_threads_run_on_after_their_snapshot(workers):
    """Each thread is stopped only to read its registers and copy its
    stack: afterwards no thread is traced or stopped, and busy ones work."""
    from sfbt.live.process import Process
    with Running(workers, 2) as running:
        process = Process(running.pid)
        states = [process.snapshot(tid, name) for tid, name in process.threads()]
        assert all(state is not None and state.stack for state in states)
        sp = process.arch.sp
        assert all(state.stack_start <= state.registers[sp] < state.stack_start
                   + len(state.stack) for state in states)
        time.sleep(0.05)
        for tid, _ in process.threads():
            status = open(f"/proc/{running.pid}/task/{tid}/status").read()
            assert re.search(r"^TracerPid:\s+0$", status, re.M), status
            assert re.search(r"^State:\s+[RS]", status, re.M), status


def test_the_vdso_is_a_module_with_rows(workers):
    """The vDSO has no file: its image, read from memory, gets rows
    synthesized from its .eh_frame and names from its symbols, and
    nothing is written to the cache for it."""
    from sfbt.live.mappings import VDSO, VDSO_NAME
    from sfbt.live.process import Process
    from sfbt.live.symbols import module_symbols
    from sfbt.unwind.modules import SFrameSources
    with Running(workers) as running:
        process = Process(running.pid)
        (mapping,) = [m for m in process.mappings if m.path == VDSO]
        (vdso,) = [m for m in process.modules() if m.path == VDSO_NAME]
    assert (vdso.start, vdso.end) == (mapping.start, mapping.end)
    source = SFrameSources().for_module(vdso)
    assert source.origin == "synth" and source.section.functions
    symbols = module_symbols(vdso)
    names = {symbols.function(f.start) for f in source.section.functions}
    assert names & {"__vdso_clock_gettime", "clock_gettime"}, names
    assert not os.path.exists(os.path.join(os.environ["XDG_CACHE_HOME"], "sfbt", "vdso"))


def test_names_and_lines_are_cached_per_file(workers):
    """The second run reads a unit's functions and inlined calls (its
    DWARF entries) and its line rows from the private cache, keyed by the
    file they came from; a damaged entry is rebuilt, never believed."""
    from sfbt.cache import Cache, identity
    from sfbt.symbols.symbolizer import CACHE_FORMAT
    cache = Cache("symbols")
    with open(workers, "rb") as stream:  # workers.c is its one unit, at 0
        named = {cache.entry_name(identity(stream.fileno(), CACHE_FORMAT, *kind))
                 for kind in (("entries", 0), ("lines", 0))}
    with Running(workers) as running:
        first = run_sfbt("stack", running.pid)
        entries = set(os.listdir(cache.path))
        assert named < entries, (named, entries)
        assert stat.S_IMODE(os.stat(cache.path).st_mode) == 0o700
        for name in entries:
            assert stat.S_IMODE(os.stat(os.path.join(cache.path, name)).st_mode) == 0o600
            with open(os.path.join(cache.path, name), "wb") as stream:
                stream.write(b"\xff not an entry")
        second = run_sfbt("stack", running.pid)
    assert first.returncode == 0 and second.stdout == first.stdout
    assert re.search(r" in work_at at \S*workers.c:\d+$", first.stdout, re.M)


#: what `sfbt stack PID`'s text has no use for: dataclasses (and what it
#: imports), typing (mypy's alone), hashlib (OpenSSL: the cache hashes
#: with CPython's own SHA-256), the progress line's thread when stderr is
#: no terminal, the archive's codecs and cbf-save, a core's signal names,
#: and with sfbt's cache filled the reader of inlined calls
NOT_FOR_THE_TEXT = ("dataclasses", "inspect", "ast", "typing", "hashlib", "threading",
                    "signal", "sfbt.archive.cbf", "sfbt.archive.report",
                    "sfbt.commands.save", "sfbt.dwarf.inline")

#: the command line's main(ARGUMENTS...), then the names of every module
#: imported written to OUT (python3 -S -c IMPORTED OUT ARGUMENTS...)
IMPORTED = """
import sys
from sfbt.cli import main
status = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write("\\n".join(sorted(sys.modules)))
sys.exit(status)
"""


def _modules_imported(tmp_path, *arguments):
    """The modules imported by `sfbt ARGUMENTS` (without site's: -S), with
    the cache under ``tmp_path``."""
    listed = tmp_path / "modules"
    env = dict(os.environ, PYTHONPATH=str(PLUGIN), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-S", "-c", IMPORTED, str(listed),
                           *map(str, arguments)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, set(listed.read_text().split("\n"))


def test_stack_imports_only_what_it_uses(workers, tmp_path):
    """`sfbt stack PID` imports neither dataclasses, typing nor the
    archive's code (each a few ms of every run), nor, once its cache
    holds the inline chains, their DWARF reader; the first run and
    `--format archive` do import what they use."""
    with Running(workers) as running:
        _, first = _modules_imported(tmp_path, "stack", running.pid)
        text, imported = _modules_imported(tmp_path, "stack", running.pid)
        _, saving = _modules_imported(tmp_path, "stack", running.pid, "--format",
                                      "archive", "-o", tmp_path / "all.sfbt")
    assert len(sfbt_stacks(text)) == 9
    assert re.search(r" in work_at at \S*workers.c:\d+$", text, re.M), text
    assert {"sfbt.unwind.walk", "sfbt.live.stack"} <= imported
    assert imported.isdisjoint(NOT_FOR_THE_TEXT), sorted(imported & set(NOT_FOR_THE_TEXT))
    assert "sfbt.dwarf.inline" in first
    assert {"sfbt.archive.cbf", "sfbt.commands.save"} <= saving


_FRAME_LINE = re.compile(r"^#\d+ .*$", re.M)


def test_a_process_stopped_in_a_signal_handler_reads_back_as_stack_printed_it(tmp_path):
    """`sfbt stack --format archive` of a process waiting in a signal
    handler, decoded, prints the frames `sfbt stack` printed, the kernel's
    signal trampoline as `<signal handler called>`; `sfbt fold` names it
    so too."""
    program = compile_program(tmp_path, "handler_wait", "O2", True, ["handler_wait.c"])
    archive = tmp_path / "handler.sfbt"
    with Running(program) as running:
        text = run_sfbt("stack", running.pid)
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o", archive)
    assert text.returncode == 0 and saved.returncode == 0, text.stderr + saved.stderr
    shown = _FRAME_LINE.findall(text.stdout)
    names = [re.match(r"#\d+\s+0x[0-9a-f]+ in (\S+(?: handler called>)?)", line)[1]
             for line in shown]
    assert names[-6:] == ["wait_in_handler", "handler", "<signal handler called>",
                          "divide", "compute", "main"], text.stdout
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    assert _FRAME_LINE.findall(decoded.stdout) == shown
    folded = run_sfbt("fold", archive).stdout
    assert folded == ";".join(reversed(names)) + " 1\n"
