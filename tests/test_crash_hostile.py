"""Hostile crashers through the kernel (docs/crashes.md): a 1 GB stack,
an executable replaced while it runs, 10,000 threads, 70,000 mappings,
names that are not UTF-8.  sfbt's handler is installed as a machine
would have it (no --chain, no --keep-core: the stacks read from the
process the kernel holds), under test_crashes' lock on the machine's
core settings, which it puts back.  Each crash's handler is bounded: its
peak memory and its time (the index's handler_kb, the handler's own
getrusage at its end, and handler_ms, from the kernel starting it to its
record written) and the crash's whole time, the kernel's writing of the
core included."""

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest

from conftest import PLUGIN, require, run_sfbt
from live_harness import gdb_threads, parse_stacks
from test_crashes import (CORE_PATTERN, _no_aslr, _read, _write, _writable, entries,
                          installed_store, machine_lock, programs, show, shown_stacks,
                          wait_entry)

assert programs  # the fixture, used by name
MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"
#: the handler's peak memory, whatever the crash (docs/crashes.md's goal
#: is 60 MB for a usual one)
MAX_HANDLER_KB = 100 << 10


@pytest.fixture
def held(tmp_path):
    """A store, sfbt's handler installed for it alone (the held process
    read), the machine's settings put back after."""
    with installed_store(tmp_path) as store:
        yield store


def run_crash(program, *arguments, cwd, timeout=300, aslr=True, stack=None):
    """Run the crasher until it crashes: (its PID, seconds from its
    "ready" to its being reaped: the kernel holds it until the handler
    exits).  Its RLIMIT_CORE is unlimited (a core file pattern needs it),
    its RLIMIT_STACK ``stack`` where given."""

    def limits():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
        if stack is not None:
            resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
        if not aslr:
            _no_aslr()
    process = subprocess.Popen([str(program), *map(str, arguments)], cwd=cwd,
                               stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               preexec_fn=limits)
    assert process.stdout.readline().strip() == b"ready"
    started = time.monotonic()
    process.wait(timeout=timeout)
    process.stdout.close()
    assert process.returncode == -signal.SIGSEGV, process.returncode
    return process.pid, time.monotonic() - started


def bounded(entry, seconds, most_seconds):
    assert entry["signal"] == signal.SIGSEGV and "error" not in entry, entry
    assert entry["handler_kb"] < MAX_HANDLER_KB, entry
    assert entry["handler_ms"] < most_seconds * 1000 and seconds < most_seconds, \
        (entry, seconds)
    assert entry["memory_from"] == "process", entry


def test_a_1gb_stack(held, programs, tmp_path):
    """A thread 1 GB of stack deep (16,384 frames of 64 KiB, each touched):
    512 KiB of it kept, the walk cut where the kept stack ends, and the
    record says so (the thread's event cut, its trace truncated, the
    index's stacks_cut and where the crashing thread's kept stack ended)."""
    pid, seconds = run_crash(programs["crasher"], "deep", 1024, cwd=tmp_path)
    entry = wait_entry(held, pid)
    bounded(entry, seconds, 60)
    assert entry["stacks_cut"] == 1
    document = json.loads(show(held, entry, "--format", "json"))
    (thread,) = [t for t in document["threads"] if t["crashed"]]
    assert thread["cut"] and all(not t["cut"] for t in document["threads"] if t is not thread)
    functions = [f["functions"][0] for f in thread["frames"] if f["functions"]]
    # segv four times, then as many 64 KiB frames of deep as 512 KiB hold
    # (their return addresses within it)
    assert functions[:4] == ["segv"] * 4
    deep = functions[4:]
    assert set(deep) == {"deep"} and 7 <= len(deep) <= 9, functions
    # kept: from the crashing thread's stack pointer (below segv's frames,
    # under deep's first frame) 512 KiB up, the last deep frame's within it
    assert document["crashed_stack_cut_at"] == entry["crashed_stack_cut_at"] > 0
    text = show(held, entry)
    of_crashed = text[text.index(": crashed\n"):].split("\n\n")[0]
    assert of_crashed.endswith("\nBacktrace stopped: truncated"), text
    assert text.count("Backtrace stopped: truncated") == 1, text


def test_a_replaced_executable(held, programs, tmp_path):
    """The program's file renamed over while it runs: its modules read
    through map_files (the file it mapped), the record naming that file's
    build id, not the new file's at its path."""
    directory = tmp_path / "bin"
    directory.mkdir()
    program = directory / "crasher"
    shutil.copy(programs["crasher"], program)
    process = subprocess.Popen([str(program), "later"], cwd=tmp_path, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    assert process.stdout.readline().strip() == b"ready"
    replacement = directory / "replacement"
    shutil.copy("/bin/true", replacement)
    os.rename(replacement, program)
    started = time.monotonic()
    process.stdin.write(b"go\n")
    process.stdin.close()
    process.wait(timeout=120)
    entry = wait_entry(held, process.pid)
    bounded(entry, time.monotonic() - started, 30)
    assert entry["executable"] == f"{program} (deleted)"
    sys.path.insert(0, str(PLUGIN))
    from sfbt.archive.store import read_archive
    from sfbt.elf import read_build_id
    archive, error = read_archive(str(held / entry["file"]))
    assert error is None
    (image,) = [i for i in archive.image_map(0).images if i.path == entry["executable"]]
    assert image.build_id.hex() == read_build_id(str(programs["crasher"]))
    assert read_build_id(str(program)) != image.build_id.hex()
    # the walk read the program it mapped: segv's four frames, main, and
    # on into the C library (its rows were read from the mapped file)
    decoded = run_sfbt("cbf", "decode", held / entry["file"])
    assert decoded.returncode == 0, decoded.stderr
    addresses = re.findall(r"^#\d+\s+(0x[0-9a-f]+)", decoded.stdout, re.M)
    assert len(addresses) >= 7, decoded.stdout


def test_ten_thousand_threads(held, programs, tmp_path):
    """10,000 threads: the first 4,096 kept and walked (the crashing
    thread's first), each with the least stack kept (4 KiB: 16 MiB among
    4,096), the rest counted; memory and time bounded."""
    pid, seconds = run_crash(programs["crasher"], "many", 9999, cwd=tmp_path)
    entry = wait_entry(held, pid)
    bounded(entry, seconds, 120)
    assert entry["threads"] == 4096 and entry["threads_left_out"] == 10000 - 4096
    stacks = shown_stacks(show(held, entry))
    assert len(stacks) == 4096
    ((number, pcs, _),) = [s for s in stacks.values() if s[2]]
    assert number == 1 and len(pcs) == 5  # segv four times, main
    # the others wait in pause: waiting, worker, start_thread, clone3
    assert all(len(pcs) >= 4 for _, pcs, crashed in stacks.values() if not crashed)


@contextlib.contextmanager
def raised_map_count():
    """vm.max_map_count raised to let a process map 70,000 times (under
    the machine's lock), put back after."""
    saved = _read(MAX_MAP_COUNT)
    _write(MAX_MAP_COUNT, str(max(int(saved), 100000)))
    try:
        yield
    finally:
        _write(MAX_MAP_COUNT, saved)
        assert _read(MAX_MAP_COUNT) == saved


@pytest.fixture
def many_mappings():
    """raised_map_count, under the lock the held fixture holds."""
    with raised_map_count():
        yield


@contextlib.contextmanager
def cores_to_files(directory):
    """The kernel writing each core to ``directory``/core.PID (under the
    machine's lock, its settings put back after)."""
    require(os.geteuid() == 0 and _writable(), "core_pattern is root's to write")
    with machine_lock():
        _write(CORE_PATTERN, f"{directory}/core.%p")
        yield


def gdb_frames_equal(gdb, program, core, directory, ours):
    """{tid: [pc, ...]} of GDB's `thread apply all bt` on ``core``, and
    asserts ``ours`` ({tid: (number, [pc, ...])}) is equal to it."""
    theirs = gdb_threads(gdb.command, [program, core], directory, tail_calls=False)
    assert ours == theirs
    return theirs


def test_seventy_thousand_mappings(held, many_mappings, programs, tmp_path):
    """A core of more than 65,534 mappings (PN_XNUM: the count is not in
    the ELF header): its headers counted where the notes start, every
    mapping counted, memory and time bounded, the crash walked."""
    pid, seconds = run_crash(programs["crasher"], "maps", 70000, cwd=tmp_path)
    entry = wait_entry(held, pid)
    bounded(entry, seconds, 60)
    with open(f"/proc/{os.getpid()}/maps") as maps:  # the test's own, for scale
        assert entry["mappings"] > 70000 > len(maps.readlines())
    stacks = shown_stacks(show(held, entry))
    ((_, pcs, _),) = stacks.values()
    assert len(pcs) == 5  # segv four times, main


@pytest.fixture(scope="module")
def many_mappings_core(programs, tmp_path_factory):
    """The kernel's core file of a crash with 70,000 more mappings."""
    directory = tmp_path_factory.mktemp("pn-xnum")
    with cores_to_files(directory), raised_map_count():
        pid, _ = run_crash(programs["crasher"], "maps", 70000, cwd=directory)
    return directory / f"core.{pid}"


def test_a_core_file_of_seventy_thousand_mappings(gdb, programs, many_mappings_core,
                                                  tmp_path):
    """`sfbt stack --core` on the kernel's core of more than 65,534
    mappings: e_phnum is PN_XNUM, the count in section header 0's sh_info
    (what the streamed reader counts where the notes start); every thread's
    frames GDB's on the same core."""
    core = many_mappings_core
    with open(core, "rb") as stream:
        header = stream.read(64)
    assert struct.unpack_from("<H", header, 56) == (0xFFFF,)  # e_phnum: PN_XNUM
    result = run_sfbt("stack", "--core", core, programs["crasher"])
    assert result.returncode == 0, result.stderr
    ours = {tid: (s.number, s.pcs) for tid, s in parse_stacks(result.stdout).items()}
    theirs = gdb_threads(gdb.command, [programs["crasher"], core], tmp_path, tail_calls=False)
    assert ours == theirs
    ((_, pcs),) = theirs.values()
    assert len(pcs) == 5  # segv four times, main (where GDB and sfbt stack end)


@pytest.fixture(scope="module")
def main_thread_1gb(programs, tmp_path_factory):
    """The main thread 1 GB of stack deep (ulimit -s unlimited), crashed
    twice without ASLR (the same addresses): (the handler's index entry,
    seconds the crash took, `crashes show`'s text) of the crash the
    handler read from the held process, and the kernel's core file of the
    other."""
    directory = tmp_path_factory.mktemp("deep-main")
    with installed_store(directory) as store:
        pid, seconds = run_crash(programs["crasher"], "deepmain", 1024, cwd=directory,
                                 aslr=False, stack=resource.RLIM_INFINITY)
        entry = wait_entry(store, pid)
        text = show(store, entry)
    with cores_to_files(directory):
        pid, _ = run_crash(programs["crasher"], "deepmain", 1024, cwd=directory,
                           aslr=False, stack=resource.RLIM_INFINITY)
    core = directory / f"core.{pid}"
    yield entry, seconds, text, core
    core.unlink()


def test_a_1gb_stack_on_the_main_thread(gdb, programs, main_thread_1gb, tmp_path):
    """The main thread 1 GB of stack deep: the handler bounded as on a
    thread, the walk cut where its 512 KiB kept end; its frames, up to
    there, GDB's on a core of the same crash."""
    entry, seconds, text, core = main_thread_1gb
    bounded(entry, seconds, 60)
    assert entry["stacks_cut"] == 1 and entry["crashed_stack_cut_at"] > 0
    ((number, kept, crashed),) = shown_stacks(text).values()
    assert crashed and number == 1
    assert text.rstrip().endswith("\nBacktrace stopped: truncated"), text
    ((_, theirs),) = gdb_threads(gdb.command, [programs["crasher"], core], tmp_path,
                                 tail_calls=False, limit=20).values()
    # segv four times and deep's frames as many as 512 KiB hold: GDB's first
    assert 11 <= len(kept) <= 13 and kept == theirs[:len(kept)], (kept, theirs)


def test_names_that_are_not_utf8(held, programs, tmp_path):
    """A process and a thread named with bytes that are not UTF-8 and with
    control characters: the thread's name read from the held process, kept
    as it was, and escaped wherever it is printed."""
    pid, seconds = run_crash(programs["crasher"], "names", cwd=tmp_path)
    entry = wait_entry(held, pid)
    bounded(entry, seconds, 30)
    listed = run_sfbt("crashes", "list", "--store", held)
    assert listed.returncode == 0, listed.stderr
    text = show(held, entry)
    document = show(held, entry, "--format", "json")
    for out in (listed.stdout, text, document):
        assert "\x1b" not in out and "\ufffd" not in out
    names = re.findall(r'^Thread \d+ \(LWP \d+ "(.*)"\):', text, re.M)
    assert sorted(names) == ["m\\376\\033[31m", "w\\377\\033[31m\\n"], text
    threads = json.loads(document)["threads"]
    assert sorted(t["name"] for t in threads) == sorted(
        os.fsdecode(name) for name in (b"m\xfe\x1b[31m", b"w\xff\x1b[31m\n"))
    assert "\\udcfe" in document and "\\u001b" in document
    # the crashing thread's, read from the held process (the kernel's %e
    # is kept in the index only where the executable is not known)
    assert [t["name"] for t in threads if t["crashed"]] == [os.fsdecode(b"w\xff\x1b[31m\n")]
    assert entries(held, pid)[0]["id"] == entry["id"]


def test_a_made_up_core_of_too_many_mappings(tmp_path):
    """PN_XNUM cores that are not as the kernel writes them, or of more
    mappings than are read: counted with the reason, exit 0, nothing read
    past the headers' bound (the core claims gigabytes of them)."""
    from test_crashes import _handler, entries_of
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    struct.pack_into("<HH", header, 16, 4, 62)  # ET_CORE, x86-64
    struct.pack_into("<Q", header, 32, 64)  # e_phoff
    struct.pack_into("<HH", header, 54, 56, 0xFFFF)  # e_phentsize, e_phnum: PN_XNUM

    def core(p_type, notes_at):
        return bytes(header) + struct.pack("<IIQQQQQQ", p_type, 0, notes_at, 0, 0, 0, 0, 0)
    arguments = [999999999, 999999999, 11, 1795900000, 1000, 1000, "bad"]
    for data in (core(4, 64 + 80000 * 56), core(1, 64 + 70000 * 56), core(4, 1 << 40),
                 core(4, 64 + 1000 * 56)):
        started = time.monotonic()
        result = _handler(store, arguments, data)
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr
        assert time.monotonic() - started < 30
    found = entries_of(store)
    assert [e["bucket"] for e in found] == ["unread-11"] * 4
    assert "a core of 80000 mappings, more than the 74897 read" in found[0]["error"]
    assert "the first not the notes'" in found[1]["error"]
    assert "mappings, more than the 74897 read" in found[2]["error"]
    assert "the first not the notes'" in found[3]["error"]  # fewer than PN_XNUM
