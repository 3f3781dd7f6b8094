"""A process's mappings as the rings' MMAP2 records make them
(live/ring_processes.py), without a process: each record maps its range
over whatever was there."""

import os
import random

from sfbt.arch import X86_64
from sfbt.live.mappings import Mapping
from sfbt.live.perf_events import Mmap2
from sfbt.live.ring_processes import ModuleFiles, RingProcess

PAGE = 0x1000


def test_each_record_maps_its_range_over_what_was_there():
    """After random records over a few pages, every page is the latest
    record's that covers it (its file at the offset the record gives
    there), an untouched page the first mappings'; the mappings stay
    sorted and none overlaps another."""
    generator = random.Random(32)
    for _ in range(200):
        first = [Mapping(0x10 * PAGE, 0x18 * PAGE, True, False, 0, "/lib/first", "08:01", 7),
                 Mapping(0x20 * PAGE, 0x22 * PAGE, True, True, 0, "[stack]")]
        process = RingProcess(1, X86_64, ModuleFiles(), first)
        pages = {page: ("/lib/first", (page - 0x10) * PAGE) for page in range(0x10, 0x18)}
        pages.update({page: ("[stack]", (page - 0x20) * PAGE) for page in (0x20, 0x21)})
        for number in range(generator.randint(1, 12)):
            start = generator.randrange(0x0c, 0x26)
            length = generator.randint(1, 6)
            path, offset = f"/lib/{number}", generator.randrange(0, 8) * PAGE
            process.mapped(Mmap2(1, 1, True, start * PAGE, length * PAGE, offset, "08:01",
                                 100 + number, False, path))
            for page in range(start, start + length):
                pages[page] = (path, offset + (page - start) * PAGE)
        mappings = process.mappings
        assert all(a.end <= b.start for a, b in zip(mappings, mappings[1:])), mappings
        found = {}
        for mapping in mappings:
            assert mapping.start % PAGE == 0 and mapping.end % PAGE == 0
            for page in range(mapping.start // PAGE, mapping.end // PAGE):
                found[page] = (mapping.path, mapping.offset + page * PAGE - mapping.start)
        assert found == pages


def _mapping_of(path, start=0x400000):
    status = os.stat(path)
    device = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}"
    return Mapping(start, start + PAGE, True, False, 0, str(path), device, status.st_ino)


def test_a_mapped_file_is_read_only_while_it_is_the_one_mapped(tmp_path):
    """ModuleFiles reads a mapped file's bytes through a file it opened
    only where that is still the mapped file (device and inode, checked
    on the opened descriptor): one held stays readable once deleted; one
    replaced at its path, or a FIFO put there, is not read (nor does the
    FIFO block the open)."""
    library = tmp_path / "libheld.so"
    library.write_bytes(b"\x7fELF" + bytes(range(60)))
    held = _mapping_of(library)
    files = ModuleFiles()
    try:
        files.hold(held)
        library.unlink()
        assert files.read(held, held.start + 4, 3) == bytes([0, 1, 2])
        assert files.locate(held).path.startswith("/proc/self/fd/")
    finally:
        files.close()

    replaced = tmp_path / "libreplaced.so"
    replaced.write_bytes(b"\x7fELF" + b"old")
    mapping = _mapping_of(replaced)
    keep = tmp_path / "keep"
    os.link(replaced, keep)  # the old inode stays, not reused by the new file
    replaced.unlink()
    replaced.write_bytes(b"\x7fELF" + b"new")
    files = ModuleFiles()
    try:
        files.hold(mapping)
        assert files.read(mapping, mapping.start, 7) is None
        assert files.locate(mapping).path == str(replaced)  # not held: its path
    finally:
        files.close()

    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    mapping = _mapping_of(fifo)
    files = ModuleFiles()
    try:
        files.hold(mapping)
        assert files.read(mapping, mapping.start, 4) is None
    finally:
        files.close()
