"""sfbt.cache, the one on-disk cache: records checked against their key
and digest, whole files kept and opened as regular files only, and
directories used only when private."""

import io
import os
import stat
import time

import pytest

from sfbt.cache import Cache, identity


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    return Cache("part")


def test_a_record_reads_back_under_its_key_only(cache):
    assert cache.get(("a", 1)) is None
    assert cache.put(("a", 1), b"bytes\nof a")
    assert cache.get(("a", 1)) == b"bytes\nof a"
    assert cache.get(("a", 2)) is None
    entry = os.path.join(cache.path, cache.entry_name(("a", 1)))
    os.rename(entry, os.path.join(cache.path, cache.entry_name(("a", 2))))
    assert cache.get(("a", 2)) is None  # its head names ("a", 1)
    assert cache.get(("a", 1)) is None
    assert stat.S_IMODE(os.stat(cache.path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.dirname(cache.path)).st_mode) == 0o700


def test_a_record_larger_than_asked_for_is_not_read(cache):
    cache.put(("big",), b"x" * 5000)
    assert cache.get(("big",), limit=4000) is None
    assert cache.get(("big",)) == b"x" * 5000


def test_an_altered_record_reads_as_missing(cache):
    cache.put(("k",), b"payload")
    entry = os.path.join(cache.path, cache.entry_name(("k",)))
    data = open(entry, "rb").read()
    with open(entry, "wb") as stream:
        stream.write(data.replace(b"payload", b"paYload"))
    assert cache.get(("k",)) is None


def test_whole_files_are_kept_and_opened_as_regular_files(cache, tmp_path):
    key = ("debuginfo", "abcd")
    assert cache.open_file(key, ".debug") is None
    assert cache.put_file(key, io.BytesIO(b"\x7fELF..."), ".debug")
    with cache.open_file(key, ".debug") as stream:
        assert stream.read() == b"\x7fELF..."
    assert cache.open_file(key, ".debug", limit=3) is None
    assert not cache.put_file(("other",), io.BytesIO(b"y" * 100), limit=10)
    assert os.listdir(cache.path) == [cache.entry_name(key, ".debug")]
    entry = os.path.join(cache.path, cache.entry_name(key, ".debug"))
    os.unlink(entry)
    os.symlink(tmp_path / "elsewhere", entry)
    (tmp_path / "elsewhere").write_bytes(b"not ours to read")
    assert cache.open_file(key, ".debug") is None
    os.unlink(entry)
    os.mkfifo(entry)
    assert cache.open_file(key, ".debug") is None  # without blocking
    assert cache.put_file(key, io.BytesIO(b"new"), ".debug")  # replaces the FIFO
    assert (tmp_path / "elsewhere").read_bytes() == b"not ours to read"
    with cache.open_file(key, ".debug") as stream:
        assert stream.read() == b"new"


def test_identity_names_the_open_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"one")
    with open(path, "rb") as stream:
        first = identity(stream.fileno(), "x")
    status = os.stat(path)
    assert first == ("x", status.st_dev, status.st_ino, 3, status.st_ctime_ns)
    time.sleep(0.05)  # past the clock tick file times are taken from
    path.write_bytes(b"two")
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    with open(path, "rb") as stream:
        assert identity(stream.fileno(), "x") != first  # the change time moved


def test_a_directory_that_is_a_link_is_not_used(cache, tmp_path, capfd):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.makedirs(os.path.dirname(cache.path))
    os.symlink(elsewhere, cache.path)
    assert not cache.put(("k",), b"v") and cache.get(("k",)) is None
    assert os.listdir(elsewhere) == []
    assert capfd.readouterr().err == (f"sfbt: warning: cache directory {cache.path} is a "
                                      "link or not a directory: not used\n")
