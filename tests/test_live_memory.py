"""A snapshot answers only from its copy: the walk's page cache reads
whole pages, and a page that holds part of the copied stack takes the
copy's bytes for that part, never the process's as they are now.  Code
comes from the mapped file where the mapping is the file's bytes."""

from sfbt.arch import X86_64
from sfbt.live.memory import ThreadState, ThreadTarget
from sfbt.live.process import Process
from sfbt.unwind.modules import ModuleMap
from sfbt.unwind.walk import Unwinder

import live_harness as harness

PAGE = 0x1000


def _target(live):
    """A thread whose stack copy is [0x10080, 0x12000) of "C" bytes, over
    a process whose memory now reads ``live`` everywhere."""
    state = ThreadState(1, "", {X86_64.sp: 0x10100, X86_64.pc: 0x400000},
                        0x10080, b"C" * (0x12000 - 0x10080))

    def read(address, size):
        return live * size

    return ThreadTarget(X86_64, state, read, [])


def test_reads_of_the_copied_span_come_from_the_copy():
    target = _target(b"L")
    unwinder = Unwinder(target, ModuleMap([], target))
    # the page that holds SP starts below the copy: the cache reads it whole
    assert unwinder.read(0x10100, 8) == b"C" * 8
    assert unwinder.read_word(0x10ff8) == int.from_bytes(b"C" * 8, "little")
    # a read across the copy's start or end: the copy for its part
    assert target.read_memory(0x10078, 16) == b"L" * 8 + b"C" * 8
    assert target.read_memory(0x11ffc, 8) == b"C" * 4 + b"L" * 4
    assert target.read_memory(0x9000, 16) == b"L" * 16


def test_a_page_below_the_copy_that_cannot_be_read():
    """The cache's whole-page read fails (the mapping starts at the copy):
    the read the walk asked for is still answered from the copy."""
    state = ThreadState(1, "", {X86_64.sp: 0x10100}, 0x10080, b"C" * 0x1f80)

    def read(address, size):
        from sfbt.errors import TargetMemoryError
        raise TargetMemoryError(address, size)

    target = ThreadTarget(X86_64, state, read, [])
    assert Unwinder(target, ModuleMap([], target)).read(0x10090, 8) == b"C" * 8


def test_code_is_read_from_the_mapped_file(tmp_path):
    (tmp_path / "build").mkdir()
    program, _ = harness.build_busy(tmp_path / "build")
    with harness.Started([program, 1, "-", 300]) as running:
        process = Process(running.pid)
        try:
            code = next(m for m in process.mappings
                        if m.path == str(program) and not m.writable and m.offset)
            relro = [m for m in process.mappings if m.path == str(program)
                     and not m.writable and m.changed]
            from_file = process.images.read(code, code.start, 64)
            with open(program, "rb") as stream:
                stream.seek(code.offset)
                assert from_file == stream.read(64)
            from sfbt.live import ptrace
            assert from_file == ptrace.read_pages(running.pid, code.start, 64)
            # pages relocated since they were mapped are the process's
            assert relro and all(process.images.read(m, m.start, 8) is None for m in relro)
        finally:
            process.close()


def test_a_walk_that_ends_in_no_mapping_says_so():
    """A thread copied while in a library that is unmapped by the time the
    mappings are read: the stop reason names the likely cause."""
    from sfbt.commands.backtrace import walk
    from sfbt.commands.session import Thread
    from sfbt.live.mappings import Mapping
    from sfbt.live.session import SnapshotSession
    stack = Mapping(0x10000, 0x12000, True, True, 0, "[stack]")
    state = ThreadState(1, "", {X86_64.sp: 0x10100, X86_64.pc: 0x7f0000001234,
                                X86_64.fp: 0}, 0x10080, bytes(0x1f80))

    def read(address, size):
        from sfbt.errors import TargetMemoryError
        raise TargetMemoryError(address, size)

    frames, stop = walk(SnapshotSession(X86_64, [], read, mappings=[stack]), Thread("", state))
    assert [frame.pc for frame in frames] == [0x7f0000001234]
    assert stop == ("PC 0x7f0000001234 is in no mapping (in a library unloaded since "
                    "the thread was copied?)")
    # without the mappings (a core), the walk's own reason
    assert walk(SnapshotSession(X86_64, [], read), Thread("", state))[1] == \
        "no unwind data for PC 0x7f0000001234"


def test_smaps_blocks_give_each_mapping_its_own_anonymous_pages():
    """smaps is searched block by block (not line by line): each mapping
    keeps its own Anonymous figure, a path with an escaped newline or
    spaces stays whole, and maps' text gives the same mappings."""
    from sfbt.live.mappings import parse_maps
    keys = "Size:                  4 kB\nRss:                   4 kB\n"
    smaps = (
        "55d0e0000000-55d0e0001000 r--p 00000000 fe:01 1234 /usr/bin/a\\012b\n"
        + keys + "Anonymous:             0 kB\nVmFlags: rd mr mw me\n"
        "55d0e0001000-55d0e0003000 r-xp 00001000 fe:01 1234 /usr/bin/a\\012b\n"
        + keys + "Anonymous:             8 kB\nVmFlags: rd ex mr mw me\n"
        "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
        + keys + "VmFlags: rd wr mr mw me ac\n"
        "7f0000002000-7f0000003000 r--p 00000000 fe:01 99 /lib/with space.so (deleted)\n"
        + keys + "Anonymous:             4 kB\nVmFlags: rd mr mw me")
    found = parse_maps(smaps)
    assert [(m.start, m.path, m.changed) for m in found] == [
        (0x55d0e0000000, "/usr/bin/a\\012b", 0), (0x55d0e0001000, "/usr/bin/a\\012b", 8),
        (0x7f0000000000, "", None), (0x7f0000002000, "/lib/with space.so", 4)]
    assert found[1].offset == 0x1000 and found[1].device == "fe:01" and found[1].inode == 1234
    maps = "".join(line + "\n" for line in smaps.splitlines() if line[:1].islower()
                   or line[:1].isdigit())
    assert parse_maps(maps) == found
    assert all(m.changed is None for m in parse_maps(maps))


def test_mappings_read_again_change_only_when_the_process_maps_something():
    """reread_mappings: maps' same lines are the same mappings (no change,
    nothing parsed), a new mapping is a change, and with ``keep_gone`` one
    unmapped since stays."""
    import subprocess
    import sys
    from sfbt.live.mappings import mapping_at
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import ctypes, mmap, sys, tempfile\n"
         "f = tempfile.TemporaryFile(); f.write(b'x' * 4096); f.flush()\n"
         "print('ready', flush=True); sys.stdin.readline()\n"
         "m = mmap.mmap(f.fileno(), 4096)  # a file's: merged with no neighbor\n"
         "print(ctypes.addressof(ctypes.c_char.from_buffer(m)), flush=True)\n"
         "sys.stdin.readline(); m.close(); print('closed', flush=True)\n"
         "sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        process = Process(child.pid)
        assert process.reread_mappings() is False
        child.stdin.write("\n")
        child.stdin.flush()
        address = int(child.stdout.readline())
        assert mapping_at(process.mappings, address) is None
        assert process.reread_mappings() is True
        assert mapping_at(process.mappings, address) is not None
        assert process.reread_mappings() is False
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "closed"
        assert process.reread_mappings(keep_gone=True) is False
        assert mapping_at(process.mappings, address) is not None
        assert process.reread_mappings() is True
        assert mapping_at(process.mappings, address) is None
    finally:
        child.kill()
        child.wait()
