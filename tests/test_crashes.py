"""sfbt as the kernel's core handler (docs/crashes.md): real crashes
through core_pattern, each shown as GDB shows the same crash's core.

core_pattern is the machine's: a test sets it only holding the file lock
every such test takes (machine_lock), and puts it back in a finally and
at exit, whatever happens.  sfbt's handler is installed with --chain, so
that cores of other processes crashing meanwhile still go where they
went."""

import atexit
import contextlib
import fcntl
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import tempfile
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import PLUGIN, ROOT, require, run_sfbt
from gdb_support import strip_eh_frame
from live_harness import gdb_threads

PROGRAMS = ROOT / "tests" / "programs"
CORE_PATTERN = "/proc/sys/kernel/core_pattern"
CORE_PIPE_LIMIT = "/proc/sys/kernel/core_pipe_limit"
#: the lock every test that changes the machine's core settings holds
LOCK = os.path.join(tempfile.gettempdir(), "sfbt-tests-core-pattern.lock")


def _read(path):
    with open(path) as stream:
        return stream.read().rstrip("\n")


def _write(path, value):
    with open(path, "w") as stream:
        stream.write(value + "\n")


def _writable():
    try:
        _write(CORE_PATTERN, _read(CORE_PATTERN))
        return True
    except OSError:
        return False


def _terminated(number, frame):
    raise SystemExit(128 + number)


@contextmanager
def machine_lock():
    """Hold the lock on the machine's core settings; they are put back as
    they were when it was taken, in a finally and at exit, and when the
    run is ended by SIGTERM (which would otherwise end it without either:
    a killed run once left core_pattern naming a test's store)."""
    descriptor = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    saved = _read(CORE_PATTERN), _read(CORE_PIPE_LIMIT)

    def restore():
        if (_read(CORE_PATTERN), _read(CORE_PIPE_LIMIT)) != saved:
            _write(CORE_PATTERN, saved[0])
            _write(CORE_PIPE_LIMIT, saved[1])
    atexit.register(restore)
    ending = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield saved
    finally:
        try:
            restore()
        finally:
            signal.signal(signal.SIGTERM, ending)
            atexit.unregister(restore)
            os.close(descriptor)


@contextlib.contextmanager
def installed_store(tmp_path, *options):
    """A store, sfbt's handler installed for it (`crashes install` with
    ``options``), under the machine's lock; uninstalled after, and the
    machine's settings checked to be as they were."""
    require(os.geteuid() == 0 and _writable(), "core_pattern is root's to write")
    store = tmp_path / "store"
    with machine_lock() as saved:
        done = run_sfbt("crashes", "install", *options, "--store", store)
        assert done.returncode == 0, done.stderr
        try:
            yield store
        finally:
            gone = run_sfbt("crashes", "uninstall", "--store", store)
            assert gone.returncode == 0, gone.stderr
            assert (_read(CORE_PATTERN), _read(CORE_PIPE_LIMIT)) == saved


@pytest.fixture
def installed(tmp_path):
    """A store, sfbt's handler installed (--chain --keep-core) for it."""
    with installed_store(tmp_path, "--chain", "--keep-core") as store:
        yield store


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """crasher (with its library), and the same crasher SFrame-only (its
    .eh_frame removed) at a path of the same length: without ASLR both
    crash at the same addresses, and GDB, which has no SFrame, shows the
    crash of the one with .eh_frame."""
    directory = tmp_path_factory.mktemp("crashers")
    flags = ["-g", "-O1", "-Wa,--gsframe"]
    library = directory / "libcrasher.so"
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", "-o", library,
                    PROGRAMS / "crasher_lib.c"], check=True, capture_output=True)
    built = {"crasher": directory / "eh" / "crasher",
             "sframe-only": directory / "sf" / "crasher"}
    built["crasher"].parent.mkdir()
    built["sframe-only"].parent.mkdir()
    subprocess.run(["gcc", *flags, "-o", built["crasher"], PROGRAMS / "crasher.c", library,
                    f"-Wl,-rpath,{directory}", "-lpthread"], check=True, capture_output=True)
    shutil.copy(built["crasher"], built["sframe-only"])
    strip_eh_frame(built["sframe-only"])
    return built


def _no_aslr():
    import ctypes
    ADDR_NO_RANDOMIZE = 0x0040000
    ctypes.CDLL(None).personality(ADDR_NO_RANDOMIZE)


def crash(program, mode, cwd, aslr=True):
    """Run ``program mode`` until it crashes; its PID."""
    process = subprocess.Popen([str(program), mode], cwd=cwd, stdout=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True,
                               preexec_fn=None if aslr else _no_aslr)
    assert process.stdout.readline().strip() == "ready"
    process.wait(timeout=120)
    process.stdout.close()
    assert process.returncode < 0, process.returncode
    return process.pid


def entries(store, pid=None):
    """The store's crashes (of process ``pid``), as `sfbt crashes` reads
    them: a counted crash with its bucket's kept crash's fields, ``file``
    the segment of a crash kept whole."""
    return [e for e in entries_of(store) if pid is None or e["pid"] == pid]


def index_lines(store):
    """{id: length of its index line}: what the index holds of each crash
    (a line an array of values, the id first, or an object)."""
    lengths = {}
    for line in (store / "index").read_bytes().splitlines(keepends=True):
        value = json.loads(line)
        lengths[value[0] if isinstance(value, list) else value["id"]] = len(line)
    return lengths


def wait_entry(store, pid, timeout=60):
    """The index's entry of crash ``pid`` (the kernel holds the process
    until its handler exits, so it is there once the process is reaped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = entries(store, pid)
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no crash of process {pid} in {store}")


_THREAD = re.compile(r'^Thread (\d+) \(LWP (\d+)(?: ".*")?\):( crashed)?$')


def show(store, entry, *options):
    """`sfbt crashes show` of ``entry`` (its id) in ``store``, which must
    succeed: its output."""
    shown = run_sfbt("crashes", "show", entry["id"], "--store", store, *options)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def shown_stacks(text):
    """{tid: (thread number, [pc, ...], crashed)} of `sfbt crashes show`."""
    stacks, current = {}, None
    for line in text.splitlines():
        match = _THREAD.match(line)
        if match:
            current = stacks[int(match[2])] = (int(match[1]), [], bool(match[3]))
        elif line.startswith("#") and current is not None and " 0x" in line:
            current[1].append(int(line.split()[1], 16))
    return stacks


def kept_core(store, entry, directory):
    core = directory / f"core.{entry['pid']}"
    core.write_bytes(lzma.decompress((store / entry["core"]).read_bytes()))
    return core


SIGNALS = {"segv": signal.SIGSEGV, "abort": signal.SIGABRT, "bus": signal.SIGBUS,
           "fpe": signal.SIGFPE, "handler": signal.SIGSEGV, "threads": signal.SIGSEGV,
           "lib": signal.SIGSEGV}


@pytest.mark.parametrize("mode", [*SIGNALS, "sframe-only"])
def test_crash_shown_as_gdb_shows_its_core(gdb, installed, programs, mode, tmp_path):
    sframe_only = mode == "sframe-only"
    program = programs[mode if sframe_only else "crasher"]
    if sframe_only:  # GDB has no SFrame: it shows the same crash of the program with .eh_frame
        twin = wait_entry(installed, crash(programs["crasher"], "segv", tmp_path, aslr=False))
    pid = crash(program, "segv" if sframe_only else mode, tmp_path, aslr=not sframe_only)
    entry = wait_entry(installed, pid)
    expected = SIGNALS.get(mode, signal.SIGSEGV)
    assert entry["signal"] == expected and entry["executable"] == str(program)
    assert entry["file"] and (sframe_only or entry["core"]), entry
    shown = show(installed, entry)
    assert shown.startswith(f"Crash {entry['id']} of {program} (PID {pid}, "
                           f"UID {os.getuid()}): {expected.name}")
    ours = shown_stacks(shown)
    if sframe_only:
        assert twin["bucket"] == entry["bucket"]  # the same code at the same place
        program, entry, ours = programs["crasher"], twin, {twin["crashed_tid"]: ours[pid]}
    core = kept_core(installed, entry, tmp_path)
    theirs = gdb_threads(gdb.command, [program, core], tmp_path, tail_calls=False)
    assert {tid: (number, pcs) for tid, (number, pcs, _) in ours.items()} == theirs
    crashed = [tid for tid, (_, _, marked) in ours.items() if marked]
    assert crashed == [entry["crashed_tid"]]
    assert len(ours) == (11 if mode == "threads" else 1)
    if mode in ("segv", "threads", "lib", "sframe-only"):
        assert entry["address"] == 0 and entry["code"] == 1  # SEGV_MAPERR at NULL
    names = " ".join(re.findall(r" in (\S+)", shown))
    wanted = {"lib": "crasher_lib_apply", "handler": "on_usr1", "abort": "aborting",
              "bus": "bus", "fpe": "fpe"}.get(mode, "segv")
    assert wanted in names and "main" in names


def test_formats_and_buckets(installed, programs, tmp_path):
    first = wait_entry(installed, crash(programs["crasher"], "threads", tmp_path))
    again = wait_entry(installed, crash(programs["crasher"], "threads", tmp_path))
    other = wait_entry(installed, crash(programs["crasher"], "fpe", tmp_path))
    # the same crash in another process (ASLR: other addresses): the same bucket
    assert first["bucket"] == again["bucket"] != other["bucket"]
    document = run_sfbt("crashes", "show", first["bucket"], "--store", installed,
                        "--format", "json")
    assert document.returncode == 0, document.stderr
    shown = json.loads(document.stdout)
    assert shown["count"] == 2 and len(shown["threads"]) == 11
    (crashed,) = [t for t in shown["threads"] if t["crashed"]]
    assert crashed["frames"][0]["functions"] == ["segv"] and crashed["reason"] == "SIGSEGV"
    profile = tmp_path / "crash.pb.gz"
    show(installed, other, "--format", "pprof", "-o", profile)
    import gzip
    assert b"fpe" in gzip.decompress(profile.read_bytes())
    listed = run_sfbt("crashes", "list", "--store", installed)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    ours = {int(row[0]): row for row in rows}
    assert ours[first["id"]][5:9] == ["SIGSEGV", first["bucket"], "2", "yes"]
    assert ours[other["id"]][5] == "SIGFPE" and ours[other["id"]][-1] == str(
        programs["crasher"])
    third = wait_entry(installed, crash(programs["crasher"], "fpe", tmp_path))
    fourth = wait_entry(installed, crash(programs["crasher"], "fpe", tmp_path))
    counted = wait_entry(installed, crash(programs["crasher"], "fpe", tmp_path))
    assert third.get("file") and fourth.get("file") and "file" not in counted
    assert counted["of"] == other["id"]
    assert index_lines(installed)[counted["id"]] <= 200
    by_repeat = run_sfbt("crashes", "show", counted["id"], "--store", installed)
    assert by_repeat.returncode == 0, by_repeat.stderr
    assert by_repeat.stdout.startswith(f"Crash {other['id']} of ")
    assert f": 4 crashes\n" in by_repeat.stdout
    missing = run_sfbt("crashes", "show", "99999", "--store", installed)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    # five crashes kept of one program: each of its images written once
    from sfbt.archive.imagemap import decode_image_map
    from sfbt.archive.store import KIND_IMAGE, MAGIC, iter_records
    (segment,) = installed.glob("seg-*.sfbt")
    with open(segment, "rb") as stream:
        assert stream.read(len(MAGIC)) == MAGIC
        paths = [decode_image_map(payload).images[0].path
                 for _, kind, payload in iter_records(stream) if kind == KIND_IMAGE]
    assert str(programs["crasher"]) in paths and len(paths) == len(set(paths)), paths


def test_install_and_uninstall_put_back_what_was_there(tmp_path):
    require(os.geteuid() == 0 and _writable(), "core_pattern is root's to write")
    store = tmp_path / "store"
    with machine_lock():
        _write(CORE_PATTERN, "|/bin/false %p sfbt-test")
        _write(CORE_PIPE_LIMIT, "3")
        first = run_sfbt("crashes", "install", "--store", store)
        assert first.returncode == 0, first.stderr
        pattern = _read(CORE_PATTERN)
        assert pattern == f"|{store}/sfbt crash-handler %P %i %s %t %u %g %e"
        assert len(pattern) < 128 and int(_read(CORE_PIPE_LIMIT)) >= 1
        assert oct(store.stat().st_mode & 0o777) == "0o700"
        again = run_sfbt("crashes", "install", "--store", store)  # twice: the first kept
        assert again.returncode == 0, again.stderr
        gone = run_sfbt("crashes", "uninstall", "--store", store)
        assert gone.returncode == 0, gone.stderr
        assert (_read(CORE_PATTERN), _read(CORE_PIPE_LIMIT)) == ("|/bin/false %p sfbt-test",
                                                                 "3")
        twice = run_sfbt("crashes", "uninstall", "--store", store)
        assert twice.returncode == 1 and "not installed" in twice.stderr
        long_store = tmp_path / ("x" * 120)
        too_long = run_sfbt("crashes", "install", "--store", long_store)
        assert too_long.returncode == 1 and "128" in too_long.stderr
        assert _read(CORE_PATTERN) == "|/bin/false %p sfbt-test"


_SET_AND_WAIT = """\
import time
from test_crashes import CORE_PATTERN, _write, machine_lock
with machine_lock():
    _write(CORE_PATTERN, "|/bin/false %p sfbt-test-terminated")
    print("set", flush=True)
    time.sleep(120)
"""


def test_a_run_ended_by_sigterm_puts_the_core_settings_back():
    """A test process holding the machine's lock, core_pattern changed,
    ended by SIGTERM (as a CI job's timeout or a kill ends a run): the
    settings are as they were before it (the old lock left them changed)."""
    require(os.geteuid() == 0 and _writable(), "core_pattern is root's to write")
    before = _read(CORE_PATTERN), _read(CORE_PIPE_LIMIT)
    child = subprocess.Popen([sys.executable, "-c", _SET_AND_WAIT], cwd=Path(__file__).parent,
                             stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    try:
        assert child.stdout.readline() == "set\n"
        assert _read(CORE_PATTERN) == "|/bin/false %p sfbt-test-terminated"
        child.terminate()
        assert child.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        after = _read(CORE_PATTERN), _read(CORE_PIPE_LIMIT)
        if after != before:  # left changed (the test fails): put back under the lock
            descriptor = os.open(LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            _write(CORE_PATTERN, before[0])
            _write(CORE_PIPE_LIMIT, before[1])
            os.close(descriptor)
    assert after == before


def test_chain_hands_the_whole_core_on(tmp_path, programs):
    """--chain to a file pattern: the core written as the kernel writes it
    (in the process's directory, as its user, within its RLIMIT_CORE)."""
    require(os.geteuid() == 0 and _writable(), "core_pattern is root's to write")
    store = tmp_path / "store"
    cwd = Path(tempfile.mkdtemp(prefix="sfbt-chain-"))  # where nobody may go
    atexit.register(shutil.rmtree, cwd, True)
    os.chmod(cwd, 0o777)
    program = cwd / "crasher"
    shutil.copy(programs["crasher"].parent.parent / "libcrasher.so", cwd)
    subprocess.run(["gcc", "-O1", "-o", program, PROGRAMS / "crasher.c", cwd / "libcrasher.so",
                    "-Wl,-rpath,$ORIGIN", "-lpthread"], check=True, capture_output=True)
    with machine_lock():
        _write(CORE_PATTERN, "sfbt-test-core.%p")
        done = run_sfbt("crashes", "install", "--chain", "--keep-core", "--store", store)
        assert done.returncode == 0, done.stderr
        try:
            import resource

            def as_nobody():
                resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
                os.setgid(65534)
                os.setuid(65534)
            process = subprocess.Popen([str(program), "segv"], cwd=cwd,
                                       stdout=subprocess.DEVNULL, preexec_fn=as_nobody)
            process.wait(timeout=60)
            entry = wait_entry(store, process.pid)
        finally:
            gone = run_sfbt("crashes", "uninstall", "--store", store)
        assert gone.returncode == 0, gone.stderr
    written = cwd / f"sfbt-test-core.{process.pid}"
    status = written.stat()
    assert (status.st_uid, oct(status.st_mode & 0o777)) == (65534, "0o600")
    assert written.read_bytes() == lzma.decompress((store / entry["core"]).read_bytes())
    assert entry["uid"] == 65534


def test_storm(installed, programs, tmp_path):
    """200 crashes of 4 kinds at once: none lost or damaged, each bucket
    counted, its first few kept whole, a repeat a line of at most 200
    bytes, the store within its cap."""
    run_sfbt("crashes", "install", "--chain", "--max-use", "96K", "--store", installed)
    modes = ("segv", "abort", "fpe", "bus") * 50
    running = []
    for mode in modes:
        running.append(subprocess.Popen([str(programs["crasher"]), mode], cwd=tmp_path,
                                        stdout=subprocess.DEVNULL))
        if len(running) >= 8:
            running.pop(0).wait(timeout=120)
    for process in running:
        process.wait(timeout=120)
    found = entries(installed)
    ours = [e for e in found if e.get("executable") == str(programs["crasher"])]
    by_bucket = {}
    for entry in ours:
        by_bucket.setdefault(entry["bucket"], []).append(entry)
    assert sorted(len(group) for group in by_bucket.values()) == [50] * 4, \
        {b: len(g) for b, g in by_bucket.items()}
    for group in by_bucket.values():
        kept = [e for e in group if e.get("file")]
        assert 1 <= len(kept) <= 3
        repeats = [e for e in group if "of" in e]
        assert len(repeats) == 47
        lines = index_lines(installed)
        assert max(lines[e["id"]] for e in repeats) <= 200
    used = sum(f.stat().st_size for f in installed.iterdir() if f.is_file()
               and f.name != "sfbt" and f.name != "settings")
    assert used <= 96 << 10
    for entry in ours:
        if entry.get("file"):
            decoded = run_sfbt("cbf", "decode", installed / entry["file"])
            assert decoded.returncode == 0, decoded.stderr


def test_hostile_names_and_a_deleted_executable(installed, programs, tmp_path):
    """A program whose name is not UTF-8, deleted before it crashes: its
    modules are read through map_files, so the walk is whole; every name
    is escaped where it is printed."""
    directory = tmp_path / os.fsdecode(b"d\xff\x1b[31m")
    directory.mkdir()
    program = directory / os.fsdecode(b"cr\xfe\nash")
    shutil.copy(programs["crasher"], program)
    process = subprocess.Popen([str(program), "later"], cwd=tmp_path, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    assert process.stdout.readline().strip() == b"ready"
    program.unlink()
    process.stdin.write(b"go\n")
    process.stdin.close()
    process.wait(timeout=60)
    entry = wait_entry(installed, process.pid)
    assert entry["executable"].startswith(str(program))
    with open(installed / entry["file"], "rb") as stream:
        assert stream.read(8) == b"SFBTARC\x01"
    listed = subprocess.run([sys.executable, "-m", "sfbt", "crashes", "list", "--store",
                             installed], capture_output=True, env=dict(
                                 os.environ, PYTHONPATH=str(PLUGIN)), timeout=120)
    shown = subprocess.run([sys.executable, "-m", "sfbt", "crashes", "show",
                            str(entry["id"]), "--store", installed], capture_output=True,
                           env=dict(os.environ, PYTHONPATH=str(PLUGIN)), timeout=120)
    for result in (listed, shown):
        assert result.returncode == 0, result.stderr
        text = result.stdout.decode("utf-8")  # escaped: UTF-8, no control character
        assert "\x1b" not in text and "\\377\\033" in text
    # the walk read the deleted program through map_files: every frame is
    # there, past its four frames (segv's, main's: not named now, its file
    # gone) into the C library's
    frames = [line for line in shown.stdout.decode().splitlines() if line.startswith("#")]
    assert all(" 0x" in line for line in frames) and " in ?? from " in frames[0]
    assert " in __libc_start" in "".join(frames[5:])


def exported(store, entry, directory):
    """The crash exported as an archive of its own (show --format archive)."""
    path = directory / f"crash-{entry['id']}.sfbt"
    show(store, entry, "--format", "archive", "-o", path)
    return path


def test_cbf_load_opens_a_crash(gdb, lldb, installed, programs, tmp_path):
    """A crash exported (show --format archive) and the store's segment
    that holds it (its images in the segment's image table) are sfbt
    archives: cbf-load prints the crash's threads in GDB and in LLDB, the
    crashing thread's labelled, its frames the ones `sfbt crashes show`
    prints (show ends at main; the archive goes on)."""
    from gdb_support import run_gdb, sframe_frames
    from lldb_support import run_lldb, stack_frames
    entry = wait_entry(installed, crash(programs["crasher"], "lib", tmp_path))
    (ours,) = [pcs for _, pcs, _ in shown_stacks(show(installed, entry)).values()]
    runs = []
    for archive in (exported(installed, entry, tmp_path), installed / entry["file"]):
        runs.append((run_gdb(gdb, [], [f"cbf-load {archive}"]), sframe_frames))
        runs.append((run_lldb(lldb, None, [f"cbf-load {archive}"]), stack_frames))
    for out, frames in runs:
        assert "label 'crashed'" in out, out[-2000:]
        loaded = frames(out)
        assert [pc for _, pc, _ in loaded][:len(ours)] == ours
        assert [name for _, _, name in loaded][:2] == ["crasher_lib_apply"] * 2


def test_memory_from_the_held_process_is_the_streams(installed, programs, tmp_path):
    """Without a chained handler or a kept core, the stacks are read from
    the process the kernel holds instead of the stream.  Two crashes of
    `crasher threads` without ASLR (each thread parked in pause() before
    one crashes, so both crashes stop every thread at the same place) walk
    to the same frames, every thread's every frame, whether the stacks
    were read from the stream or from the held process.  (The threads'
    numbers are the order of the core's notes: the crashing thread first,
    the others as they came to the kernel's dump, not the same every run.)"""
    def stacks(entry):
        found = shown_stacks(show(installed, entry)).values()
        assert [number for number, _, crashed in found if crashed] == [1]
        return sorted((pcs, crashed) for _, pcs, crashed in found)
    from_stream, from_process = _from_stream_then_process(installed, programs, "threads",
                                                          tmp_path)
    stream_threads, process_threads = stacks(from_stream), stacks(from_process)
    assert len(stream_threads) == 11 and stream_threads == process_threads
    # the crashing thread's and the others' (parked in waiting: main's ends
    # at main, the workers' at clone3's)
    assert [len(pcs) for pcs, crashed in stream_threads if crashed] == [7]
    assert len({pcs[-1] for pcs, _ in stream_threads}) == 2


def _from_stream_then_process(installed, programs, mode, tmp_path):
    """The store's entries of two crashes of `crasher MODE` without ASLR:
    the first as ``installed`` installs the store (--chain --keep-core:
    the stacks read from the core's stream), the second after a plain
    `crashes install` (no --chain, --keep-core: from the held process)."""
    from_stream = wait_entry(installed, crash(programs["crasher"], mode, tmp_path, aslr=False))
    done = run_sfbt("crashes", "install", "--store", installed)
    assert done.returncode == 0, done.stderr
    from_process = wait_entry(installed, crash(programs["crasher"], mode, tmp_path, aslr=False))
    assert from_stream["memory_from"] == "core" and from_process["memory_from"] == "process"
    return from_stream, from_process


def test_a_stack_of_two_mappings_from_the_held_process(installed, programs, tmp_path):
    """From the held process the handler reads each stack only up to the
    end of the mapping its stack pointer is in, and the rest of what it
    keeps of the stack where a walk reads it.  `crasher split` crashes in
    a thread whose stack is two mappings (its top 256 KiB a mapping of its
    own), the crash in the lower one, 6 frames of 64 KiB deep: walked from
    the held process, every frame is there (through both mappings, to
    clone3's), as walked from the stream (which keeps 512 KiB from the
    stack pointer up whatever the mappings); without ASLR both crashes
    stop at the same addresses."""
    def crashed_stack(entry):
        return [pcs for _, pcs, crashed in shown_stacks(show(installed, entry)).values()
                if crashed]
    from_stream, from_process = _from_stream_then_process(installed, programs, "split",
                                                          tmp_path)
    assert "stacks_cut" not in from_process
    stream_stack, process_stack = crashed_stack(from_stream), crashed_stack(from_process)
    # segv's 4 frames, deep's 6, deep_thread, start_thread, clone3 (shown
    # to main's: the thread's own, past main)
    assert len(process_stack) == 1 and len(process_stack[0]) >= 13, process_stack
    assert process_stack == stream_stack


def _handler(store, arguments, data):
    return subprocess.run([sys.executable, "-m", "sfbt", "crash-handler", *map(str, arguments)],
                          input=data, capture_output=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(PLUGIN),
                                   SFBT_CRASH_STORE=str(store)))


def test_what_is_not_a_core(tmp_path):
    """Bad input on the handler's standard input: counted with the reason,
    exit 0, no traceback; a damaged index line is passed over."""
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    arguments = [999999999, 999999999, 11, 1795900000, 1000, 1000, "bad"]
    elf_head = b"\x7fELF\x02\x01\x01" + bytes(57)
    for data in (b"garbage" * 1000, elf_head[:20], elf_head):
        result = _handler(store, arguments, data)
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr
    with open(store / "index", "ab") as index:
        index.write(b'{"id": 4, "bucket": "torn')  # a line torn by a crash of its writer
    result = _handler(store, arguments, b"\x7fELF")
    assert result.returncode == 0, result.stderr
    found = entries_of(store)
    assert [e["id"] for e in found] == [1, 2, 3, 4]
    assert all(e["bucket"] == "unread-11" and e["error"] for e in found)
    assert "not a 64-bit ELF core" in found[0]["error"]
    assert "ends at byte 20" in found[1]["error"]
    assert [e.get("file") for e in found[:3]] == [None, None, None]
    few = _handler(store, [1, 2], b"")
    assert few.returncode == 0 and b"usage: sfbt crash-handler" in few.stderr
    assert len(entries_of(store)) == 4


def entries_of(store):
    """The store's crashes, as `sfbt crashes` reads them (damage passed over)."""
    sys.path.insert(0, str(PLUGIN))
    from sfbt.crashes.store import CrashStore
    return CrashStore(str(store)).entries()


def test_chain_to_a_program(tmp_path, programs):
    """--chain to a "|program args" pattern: the program run with its %
    specifiers expanded, the whole core on its standard input."""
    require(os.geteuid() == 0 and _writable(), "core_pattern is root's to write")
    store = tmp_path / "store"
    short = Path(tempfile.mkdtemp(prefix="sfbt-"))  # a pattern within 128 bytes
    atexit.register(shutil.rmtree, short, True)
    saver = short / "save-core"
    saver.write_text('#!/bin/sh\ncat > "$1/chained.$2.$3"\n')
    saver.chmod(0o755)
    with machine_lock():
        _write(CORE_PATTERN, f"|{saver} {short} %p %s")
        done = run_sfbt("crashes", "install", "--chain", "--keep-core", "--store", store)
        assert done.returncode == 0, done.stderr
        try:
            pid = crash(programs["crasher"], "abort", tmp_path)
            entry = wait_entry(store, pid)
        finally:
            gone = run_sfbt("crashes", "uninstall", "--store", store)
        assert gone.returncode == 0, gone.stderr
        assert _read(CORE_PATTERN) == f"|{saver} {short} %p %s"
    chained = short / f"chained.{pid}.{int(signal.SIGABRT)}"
    assert chained.read_bytes() == lzma.decompress((store / entry["core"]).read_bytes())


def test_crash_in_a_mount_and_pid_namespace(installed, programs, tmp_path):
    """A container's crash: its program's path names another file on the
    host (planted there).  The handler reads the program through
    map_files, never by its path, so the walk is whole; PIDs are the
    host's."""
    require(shutil.which("unshare") is not None, "unshare (util-linux)")
    inside = Path(tempfile.mkdtemp(prefix="sfbt-ns-"))
    atexit.register(shutil.rmtree, inside, True)
    shutil.copy("/bin/true", inside / "crasher")  # the host's file at the path
    script = (f"mount -t tmpfs none {inside} && cp {programs['crasher']} {inside}/crasher "
              f"&& exec {inside}/crasher segv")
    process = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "sh", "-c", script],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process.wait(timeout=120)
    found = [e for e in entries(installed) if e.get("executable") == f"{inside}/crasher"]
    assert len(found) == 1, entries(installed)
    (entry,) = found
    assert entry["pid"] != 1 and entry["signal"] == signal.SIGSEGV
    own = exported(installed, entry, tmp_path)
    decoded = run_sfbt("cbf", "decode", own)
    assert decoded.returncode == 0, decoded.stderr
    crashed = decoded.stdout.split("label 'crashed'")[1].split("Backtrace ")[0]
    addresses = re.findall(r"^#\d+\s+(0x[0-9a-f]+)", crashed, re.M)
    # segv four times, main, and on into the C library: the program's own
    # rows read from the mapped file (the planted one has none of them)
    assert len(addresses) >= 7, decoded.stdout
    # the image map names the program by its path in the container, with
    # the build id of the file it mapped, not of the host's file there
    sys.path.insert(0, str(PLUGIN))
    from sfbt.archive.store import read_archive
    from sfbt.elf import read_build_id
    archive, error = read_archive(str(own))
    assert error is None
    (image,) = [i for i in archive.image_map(0).images if i.path == f"{inside}/crasher"]
    assert image.build_id.hex() == read_build_id(str(programs["crasher"]))
    assert read_build_id(str(inside / "crasher")) != image.build_id.hex()


def test_five_thousand_threads(installed, programs, tmp_path):
    """A crash of 5,001 threads: the first 4,096 kept and walked (the
    crashing thread's first), the rest counted, the handler's memory
    bounded."""
    entry = wait_entry(installed, _crash_many(programs["crasher"], 5000, tmp_path))
    assert entry["threads"] == 4096 and entry["threads_left_out"] == 5001 - 4096
    assert entry["handler_kb"] < 100 << 10
    stacks = shown_stacks(show(installed, entry))
    assert len(stacks) == 4096
    ((number, pcs, _),) = [s for s in stacks.values() if s[2]]
    assert number == 1 and len(pcs) == 5  # segv four times, main


def _crash_many(program, count, cwd):
    process = subprocess.Popen([str(program), "many", str(count)], cwd=cwd,
                               stdout=subprocess.DEVNULL)
    process.wait(timeout=300)
    assert process.returncode < 0
    return process.pid
