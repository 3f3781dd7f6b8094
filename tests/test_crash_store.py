"""The crash store (docs/crashes.md) without the kernel: crashes added as
the handler adds them (CrashStore.add, a standalone archive of each
crash's threads), read back by `sfbt crashes list|show` and by the
archive's readers.  Segments write each image once, the cap evicts whole
segments, a torn append is cut off, a damaged image table is an error
naming its offset."""

import os

import pytest

from conftest import run_sfbt
from sfbt.archive import cbf
from sfbt.archive.imagemap import Image, ImageMap
from sfbt.archive.store import (CRASH_MAP_INDEX, CRASH_MAP_PAGES, KIND_CRASH, KIND_IMAGE,
                                KIND_PLACED_MAP, MAGIC, Archive,
                                image_record_payload, iter_records, placed_map_payload,
                                read_archive, record_bytes)
from sfbt.crashes.store import KEEP_PER_BUCKET, CrashStore

PROGRAM = "/srv/app/crasher"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def crash_archive(slide, threads=1, program=PROGRAM):
    """A crash's standalone archive as the handler makes it: its images
    where ASLR put them (``slide``), a thread in the program's code
    called from the C library's, the first labelled crashed."""
    images = ImageMap("linux-x86_64", [
        Image(program, 0x555500000000 + slide, 0x555500002000 + slide, b"\x5f" * 20),
        Image(LIBC, 0x7f0000000000 + slide, 0x7f0000180000 + slide, b"\x11" * 20)], 64)
    archive = Archive()
    for number in range(1, threads + 1):
        frames = [cbf.Frame("pc", 0x555500000100 + slide + number),
                  cbf.Frame("ra", 0x7f0000029d90 + slide)]
        archive.capture(cbf.encode(frames), images, time_ns=1_795_900_000 * 10**9,
                        architecture="x86_64", thread=f"{number} ({4000 + number})",
                        reason="SIGSEGV" if number == 1 else "",
                        label="crashed" if number == 1 else "")
    return MAGIC + archive.pending_bytes()


def add(store, number, bucket=None, threads=1, program=PROGRAM):
    entry = {"time": 1_795_900_000 + number, "pid": 4000 + number, "tid": 4001, "uid": 0,
             "gid": 0, "signal": 11, "code": 1, "address": 0, "executable": program,
             "threads": threads, "crashed_tid": 4001,
             "bucket": bucket or f"{number:016x}"}
    return store.add(entry, crash_archive(number << 12, threads, program))


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    path.mkdir(mode=0o700)
    return CrashStore(str(path))


def records(path):
    with open(path, "rb") as stream:
        assert stream.read(len(MAGIC)) == MAGIC
        return [(kind, payload) for _, kind, payload in iter_records(stream)]


def shown_pcs(store, crash_id):
    shown = run_sfbt("crashes", "show", crash_id, "--store", store.path)
    assert shown.returncode == 0, shown.stderr
    return [int(line.split()[1], 16) for line in shown.stdout.splitlines()
            if line.startswith("#")]


def test_two_crashes_of_one_program_write_its_images_once(store):
    first = add(store, 1)
    size_one = os.path.getsize(store.file("seg-1.sfbt"))
    second = add(store, 2)
    grown = os.path.getsize(store.file("seg-1.sfbt")) - size_one
    written = records(store.file("seg-1.sfbt"))
    kinds = [kind for kind, _ in written]
    # each crash one record: its map (two indexes and bases), its trace
    # and its event; the second crash added what the first did, less the images
    assert kinds == [KIND_IMAGE, KIND_IMAGE, KIND_CRASH, KIND_CRASH]
    images = sum(9 + len(payload) for kind, payload in written if kind == KIND_IMAGE)
    assert grown == size_one - len(MAGIC) - images and grown < 90, (grown, size_one)
    assert first["seg"] == [1, 0, 1] and second["seg"] == [1, 1, 1]
    # each crash read back where ASLR put it
    assert shown_pcs(store, 1) == [0x555500000100 + (1 << 12) + 1, 0x7f0000029d90 + (1 << 12)]
    assert shown_pcs(store, 2) == [0x555500000100 + (2 << 12) + 1, 0x7f0000029d90 + (2 << 12)]
    archive, error = read_archive(store.file("seg-1.sfbt"))
    assert error is None
    bases = [archive.image_map(e.image_map_index).images[1].base for e in archive.events]
    assert bases == [0x7f0000000000 + (1 << 12), 0x7f0000000000 + (2 << 12)]
    decoded = run_sfbt("cbf", "decode", store.file("seg-1.sfbt"))
    assert decoded.returncode == 0, decoded.stderr
    assert decoded.stdout.count(f"from {LIBC}") == 2


def test_a_kept_crash_is_a_short_line(store):
    """A kept crash's index line: its fields' values in their order (no
    names), the fields the rest of the line implies left out, the
    executable named by its number in the segment's image table, the
    bucket left to the kept list; read back whole."""
    add(store, 1, program="/srv/" + "long-directory-name/" * 5 + "crasher")
    (line,) = open(store.file("index"), "rb").read().splitlines()
    assert len(line) <= 60 and b'"' not in line, line  # no path, no bucket
    (entry,) = store.entries()
    assert entry["bucket"] == f"{1:016x}"
    assert entry["executable"] == "/srv/" + "long-directory-name/" * 5 + "crasher"
    assert (entry["tid"], entry["gid"], entry["threads"], entry["crashed_tid"],
            entry["seg"]) == (4001, 0, 1, 4001, [1, 0, 1])


@pytest.mark.parametrize("memory_from", ["core", "process and core"])
def test_where_the_stacks_were_read_is_a_number(store, memory_from):
    """A kept crash's memory_from other than the implied "process" is a
    number after its seg, not a named field (a SIGBUS's line held its 34
    bytes); read back as it was, as is the line an older sfbt wrote."""
    entry = {"time": 1_795_900_001, "pid": 4001, "uid": 0, "signal": 7, "code": 2,
             "address": 0x7F0000001000, "executable": PROGRAM, "bucket": f"{1:016x}",
             "memory_from": memory_from}
    store.add(entry, crash_archive(1 << 12))
    (line,) = open(store.file("index"), "rb").read().splitlines()
    code = {"core": 1, "process and core": 2}[memory_from]
    assert b'"' not in line and line.endswith(b",1,0,1,%d]" % code), line
    older = line[:line.rindex(b",")] + b',{"memory_from":"' + memory_from.encode() + b'"}]'
    with open(store.file("index"), "ab") as index:
        index.write(older.replace(b"[1,", b"[2,", 1) + b"\n")
    first, second = store.entries()
    for read in (first, second):
        assert (read["memory_from"], read["address"], read["executable"], read["seg"]) == \
            (memory_from, 0x7F0000001000, PROGRAM, [1, 0, 1])
    shown = run_sfbt("crashes", "show", "2", "--store", store.path)
    assert shown.returncode == 0 and "SIGBUS, code 2, address 0x7f0000001000" in shown.stdout, \
        shown.stdout + shown.stderr


def test_crashes_placed_alike_share_their_map(store):
    """Two crashes of a program placed at the same addresses (no ASLR),
    each added by a handler of its own: the second names the first's map
    (no map of its own), and both are shown."""
    for number in (1, 2):
        store.add({"time": 1_795_900_000, "pid": 4000 + number, "uid": 0, "signal": 11,
                   "code": 1, "address": 0, "executable": PROGRAM,
                   "bucket": f"{number:016x}"}, crash_archive(0))
    first, second = [payload for kind, payload in records(store.file("seg-1.sfbt"))
                     if kind == KIND_CRASH]
    assert first[0] == CRASH_MAP_PAGES and second[0] == CRASH_MAP_INDEX
    for crash_id in (1, 2):
        assert shown_pcs(store, crash_id) == [0x555500000101, 0x7f0000029d90]


def test_repeats_counted_in_small_lines(store):
    for number in range(KEEP_PER_BUCKET + 3):
        add(store, number + 1, bucket="feedfacefeedface")
    lines = open(store.file("index"), "rb").read().splitlines(keepends=True)
    repeats = [e for e in store.entries() if "of" in e]
    assert len(repeats) == 3 and {e["of"] for e in repeats} == {1}
    assert [len(line) for line in lines[KEEP_PER_BUCKET:]] and \
        max(len(line) for line in lines[KEEP_PER_BUCKET:]) <= 200
    assert store.repeated("feedfacefeedface") and not store.repeated("0" * 16)
    listed = run_sfbt("crashes", "list", "--store", store.path)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert [row[7:9] for row in rows] == [["6", "yes"]] * 3 + [["6", "-"]] * 3
    assert all(row[-1] == PROGRAM for row in rows)


def test_cap_evicts_whole_segments_oldest_first(store):
    store.max_use = 8 << 10  # segments of 4 KiB
    for number in range(1, 121):
        add(store, number, threads=3)
    names = sorted(n for n in os.listdir(store.path) if n.startswith("seg-"))
    used = sum(os.path.getsize(store.file(n)) for n in os.listdir(store.path))
    assert used <= store.max_use
    assert "seg-1.sfbt" not in names and len(names) >= 1
    entries = store.entries()
    ids = [e["id"] for e in entries]  # the oldest lines gone too, the newest all there
    assert ids == list(range(ids[0], 121)) and ids[0] > 1
    kept = [e for e in entries if e.get("file")]
    assert kept and kept[-1]["id"] == 120
    gone = [e for e in entries if "seg" in e and not e.get("file")]
    # what is kept is the newest; every kept crash shows its three threads
    assert all(e["id"] > g["id"] for e in kept for g in gone)
    shown = run_sfbt("crashes", "show", kept[0]["id"], "--store", store.path)
    assert shown.returncode == 0 and shown.stdout.count("Thread ") == 3, shown.stderr
    if gone:
        refused = run_sfbt("crashes", "show", gone[-1]["id"], "--store", store.path)
        assert refused.returncode == 1 and "removed for the size cap" in refused.stderr
    listed = run_sfbt("crashes", "list", "--store", store.path)
    assert listed.returncode == 0 and listed.stdout.count(" yes ") == len(kept)
    # the kept lines name live segments only
    for line in open(store.file("kept")).read().splitlines():
        assert f"seg-{line.split()[1]}.sfbt" in names


def test_cap_names_the_executables_of_the_segments_it_removes(store):
    """A kept crash's line names its executable by its number in its
    segment's image table, and leaves its bucket to the kept list: the cap
    writes both into the lines of the crashes of the segments it removes."""
    store.max_use = 8 << 10  # segments of 4 KiB
    for number in range(1, 31):
        add(store, number, threads=20, program=f"/srv/app{number % 3}/crasher")
    entries = store.entries()
    gone = [e for e in entries if "seg" in e and not e.get("file")]
    assert gone and len(entries) == 30 and "seg-1.sfbt" not in os.listdir(store.path)
    assert [e["executable"] for e in entries] == \
        [f"/srv/app{number % 3}/crasher" for number in range(1, 31)]
    assert [e["bucket"] for e in entries] == [f"{number:016x}" for number in range(1, 31)]
    listed = run_sfbt("crashes", "list", "--store", store.path)
    assert listed.returncode == 0, listed.stderr
    assert [row.split()[-1] for row in listed.stdout.splitlines()[1:]] == \
        [f"/srv/app{number % 3}/crasher" for number in range(1, 31)]


def test_a_torn_append_is_left_behind(store):
    """A handler killed inside its write leaves a torn record (and no
    index line): the segment is read up to it, and the next crash goes
    to a new segment (the index names crashes by their events' places in
    a segment, which must not change)."""
    add(store, 1)
    add(store, 2)
    segment = store.file("seg-1.sfbt")
    with open(segment, "ab") as stream:
        stream.write(record_bytes(3, b"\x01" * 40)[:25])
    torn = os.path.getsize(segment)
    with open(store.file("index"), "ab") as stream:
        stream.write(b'{"id":3,"time":17959')
    third = add(store, 3)
    assert third["id"] == 3 and third["seg"] == [2, 0, 1]
    assert os.path.getsize(segment) == torn
    archive, error = read_archive(segment)
    assert "truncated" in str(error) and len(archive.events) == 2
    assert [e["id"] for e in store.entries()] == [1, 2, 3]
    for crash_id in (1, 2, 3):
        assert shown_pcs(store, crash_id)[0] == 0x555500000100 + (crash_id << 12) + 1
    listed = run_sfbt("crashes", "list", "--store", store.path)
    assert listed.returncode == 0 and listed.stdout.count(" yes ") == 3


def test_export_is_a_standalone_archive(store, tmp_path):
    add(store, 1, threads=2)
    add(store, 2, threads=2)
    path = tmp_path / "crash.sfbt"
    done = run_sfbt("crashes", "show", "2", "--store", store.path, "--format", "archive",
                    "-o", path)
    assert done.returncode == 0, done.stderr
    kinds = [kind for kind, _ in records(path)]
    assert KIND_IMAGE not in kinds and KIND_PLACED_MAP not in kinds  # a plain map
    archive, error = read_archive(str(path))
    assert error is None and [e.label for e in archive.events] == ["crashed", ""]
    (image_map,) = {archive.image_map(e.image_map_index) for e in archive.events}
    assert image_map.images[0].base == 0x555500000000 + (2 << 12)
    needs_file = run_sfbt("crashes", "show", "2", "--store", store.path, "--format", "archive")
    assert needs_file.returncode == 1 and "needs -o FILE" in needs_file.stderr


def _placed_segment(tmp_path, payload):
    """An archive of one image in its table and one map placing it."""
    image = record_bytes(KIND_IMAGE, image_record_payload(
        Image(PROGRAM, 0x1000, 0x3000, b"\x5f" * 4), "linux-x86_64", 64))
    path = tmp_path / "placed.sfbt"
    path.write_bytes(MAGIC + image + record_bytes(KIND_PLACED_MAP, payload))
    return path


@pytest.mark.parametrize("payload, message", [
    (placed_map_payload([(1, 0x1000)]), "names unknown image 1"),
    (b"\x01\x00\x80", "ends inside a number"),
    (b"\x7f\x00", "placed image map of 127 images in 2 bytes"),
    (placed_map_payload([(0, 0x1000)]) + b"\x00", "1 bytes after the placed image map"),
])
def test_a_damaged_placed_map_is_named(tmp_path, payload, message):
    path = _placed_segment(tmp_path, payload)
    archive, error = read_archive(str(path))
    assert error is not None and message in str(error) and "placed.sfbt+0x" in str(error)
    decoded = run_sfbt("cbf", "decode", path)
    assert message in decoded.stderr and "Traceback" not in decoded.stderr


def test_a_placed_map_reads_as_the_map_it_stands_for(tmp_path):
    path = _placed_segment(tmp_path, placed_map_payload([(0, 0x555500001000)]))
    archive, error = read_archive(str(path))
    assert error is None
    (image,) = archive.image_map(0).images
    assert image == Image(PROGRAM, 0x555500001000, 0x555500003000, b"\x5f" * 4)
