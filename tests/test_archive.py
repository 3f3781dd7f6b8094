"""The archive file: traces stored once with a count, atomic writes, safe
appends, and damaged files read up to the damage."""

import io
import os
import struct

import pytest

from sfbt.archive import cbf
from sfbt.archive import store
from sfbt.archive.store import (KIND_EVENT, MAGIC, Archive, ArchiveError, iter_records,
                          parse_archive, read_archive, save_archive)
from sfbt.archive.imagemap import Image, ImageMap

IMAGES = ImageMap("linux-x86_64", [
    Image("/usr/bin/prog", 0x400000, 0x401000, bytes.fromhex("aabbccdd")),
    Image("/lib/libc.so.6", 0x7F0000000000, 0x7F0000200000, b"\x01\x02")])


def trace(*addresses):
    return cbf.encode([cbf.Frame("pc", addresses[0])]
                      + [cbf.Frame("ra", a) for a in addresses[1:]])


def sample_archive():
    archive = Archive()
    archive.capture(trace(0x400100, 0x400200), IMAGES, time_ns=1, thread="1",
                    reason="SIGSEGV", label="first")
    archive.capture(trace(0x400100, 0x400200), IMAGES, time_ns=2, thread="2",
                    reason="SIGSEGV")
    archive.capture(trace(0x400300), IMAGES, time_ns=3, thread="1", reason="SIGTRAP")
    return archive


def test_identical_traces_are_stored_once_with_a_count(tmp_path):
    path = tmp_path / "a.sfbt"
    save_archive(path, sample_archive())
    archive, error = read_archive(path)
    assert error is None
    assert [t.count for t in archive.traces.values()] == [2, 1]
    assert list(archive.traces) == [1, 2]
    assert len(archive.image_maps) == 1
    first = archive.traces[1]
    assert [e.thread for e in first.events] == ["1", "2"]
    assert first.events[0].label == "first" and first.events[0].reason == "SIGSEGV"
    assert first.decoded().frames == [cbf.Frame("pc", 0x400100), cbf.Frame("ra", 0x400200)]
    assert archive.image_map(0) == IMAGES


def test_append_adds_records_after_the_old_bytes(tmp_path):
    path = tmp_path / "a.sfbt"
    save_archive(path, sample_archive())
    before = path.read_bytes()
    more = Archive()
    more.capture(trace(0x400300), IMAGES, time_ns=4, thread="3", reason="SIGTRAP")
    more.capture(trace(0x400400), IMAGES, time_ns=5, thread="3", reason="SIGTRAP")
    save_archive(path, more, append=True)
    after = path.read_bytes()
    assert after.startswith(before)
    archive, error = read_archive(path)
    assert error is None
    assert [t.count for t in archive.traces.values()] == [2, 2, 1]
    assert len(archive.image_maps) == 1


def test_append_refuses_a_damaged_archive(tmp_path):
    path = tmp_path / "a.sfbt"
    save_archive(path, sample_archive())
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    with pytest.raises(ArchiveError) as caught:
        save_archive(path, sample_archive(), append=True)
    assert "truncated" in str(caught.value)
    assert path.read_bytes() == data[:-3]  # untouched


def test_truncated_archive_is_read_up_to_the_damage():
    data = MAGIC + sample_archive().pending_bytes()
    complete, _ = parse_archive(data)
    boundaries, at = {len(MAGIC)}, len(MAGIC)
    while at < len(data):  # kind u8, length u32, payload, crc32
        at += 5 + int.from_bytes(data[at + 1:at + 5], "little") + 4
        boundaries.add(at)
    for length in range(len(MAGIC), len(data)):
        archive, error = parse_archive(data[:length], "a.sfbt")
        if length in boundaries:  # a shorter archive, whole records only
            assert error is None
            continue
        assert error is not None and error.offset >= len(MAGIC)
        assert str(error).startswith(f"a.sfbt+{error.offset:#x}: ")
        assert "truncated" in error.message
        assert len(archive.events) < len(complete.events)


def test_corruption_is_caught_by_the_checksum():
    data = bytearray(MAGIC + sample_archive().pending_bytes())
    data[len(data) - 10] ^= 0x40
    archive, error = parse_archive(bytes(data), "a.sfbt")
    assert "checksum" in error.message
    assert len(archive.events) == 2  # the records before the damage


def test_not_an_archive():
    archive, error = parse_archive(b"hello", "x")
    assert error.offset == 0 and "bad magic" in error.message


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "a.sfbt"
    save_archive(path, sample_archive())
    before = path.read_bytes()

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        save_archive(path, sample_archive())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.sfbt"]


def test_events_must_name_known_traces():
    good = Archive()
    good.capture(trace(0x400100), IMAGES)
    assert parse_archive(MAGIC + good.pending_bytes())[1] is None
    broken = Archive()
    broken.add_image_map(good.image_maps[0])
    broken._add_record(KIND_EVENT, struct.pack("<IIQ", 7, 0, 0) + b"\0\0" * 4)
    archive, error = parse_archive(MAGIC + broken.pending_bytes())
    assert "event names unknown trace 7" in error.message
    assert len(archive.image_maps) == 1


def _records(data):
    """(the records iter_records gives, and the error it ends with)."""
    stream = io.BytesIO(data)
    stream.seek(len(MAGIC))
    records = []
    try:
        for record in iter_records(stream, "a.sfbt"):
            records.append(record)
    except ArchiveError as error:
        return records, str(error)
    return records, None


def test_records_read_ahead_in_any_size_of_piece(monkeypatch):
    """Whatever reads ahead (pieces smaller than a record header, than a
    record, larger than the file), the records and the damage found are
    the same, the size of a truncated file too."""
    whole = MAGIC + sample_archive().pending_bytes()
    corrupt = bytearray(whole)
    corrupt[len(whole) - 30] ^= 1
    cases = [whole[:length] for length in range(len(MAGIC), len(whole) + 1)]
    cases += [bytes(corrupt), whole + b"\x02", whole + b"\x09\xff\xff\xff\x7f"]
    expected = {data: _records(data) for data in cases}
    for size in (1, 3, 5, 7, 64):
        monkeypatch.setattr(store, "READ_AHEAD_BYTES", size)
        for data in cases:
            assert _records(data) == expected[data]
    assert expected[whole][1] is None and len(expected[whole][0]) == 6  # 1 map, 2 traces, 3 events
    assert expected[bytes(corrupt)][1].endswith("record checksum mismatch: corrupt")
    assert expected[whole[:-3]][1].endswith(f"the end of the file ({len(whole) - 3} bytes): "
                                            "truncated")
    assert expected[whole + b"\x02"][1] == f"a.sfbt+{len(whole):#x}: truncated record header"
