"""The synthesis cache on disk: private to its user, entries checked
against the file they describe, and damaged entries rebuilt."""

import json
import os
import stat

import pytest

from conftest import FIXTURES, require
from sfbt import dwarf

PROGRAM = FIXTURES / "v3" / "x86_64" / "manyfuncs"
OTHER = FIXTURES / "v3" / "x86_64" / "callchain-O2"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "sfbt" / "synth"


def entry(path):
    return dwarf.cache_directory() + "/" + dwarf.cache_key(str(path))


def fresh(path):
    return dwarf.SynthesisStore().synthesize(str(path))


def test_the_cache_directory_is_private(cache, tmp_path):
    os.chmod(tmp_path, 0o777)
    assert fresh(PROGRAM).origin == "built"
    for directory in (cache.parent, cache):
        status = os.stat(directory)
        assert stat.S_IMODE(status.st_mode) == 0o700 and status.st_uid == os.geteuid()
    assert all(stat.S_IMODE(os.stat(cache / name).st_mode) == 0o600
               for name in os.listdir(cache))
    assert fresh(PROGRAM).origin == "cache"
    os.chmod(cache, 0o777)
    assert fresh(PROGRAM).origin == "cache"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


@pytest.mark.parametrize("content", [b"[]", b"null", b'"x"', b"{}", b'{"format": 2, "file": 5}',
                                     b"[" * 100000])
def test_a_damaged_sidecar_is_rebuilt(cache, content):
    first = fresh(PROGRAM)
    sidecar = entry(PROGRAM) + ".json"
    good = open(sidecar, "rb").read()
    with open(sidecar, "wb") as stream:
        stream.write(content)
    again = fresh(PROGRAM)
    assert again.origin == "built" and again.section == first.section
    assert open(sidecar, "rb").read() == good
    assert fresh(PROGRAM).origin == "cache"


def test_rows_of_another_file_are_not_used(cache):
    """Another file's entry copied under this file's name (libz's rows
    under libc's build id): the sidecar names the other file, so it is
    rebuilt."""
    mine, other = fresh(PROGRAM), fresh(OTHER)
    assert mine.section != other.section
    for suffix in (".sframe", ".json"):
        with open(entry(OTHER) + suffix, "rb") as source, \
                open(entry(PROGRAM) + suffix, "wb") as target:
            target.write(source.read())
    again = fresh(PROGRAM)
    assert again.origin == "built" and again.section == mine.section


def test_an_entry_claiming_another_size_is_not_used(cache):
    fresh(PROGRAM)
    sidecar = entry(PROGRAM) + ".json"
    meta = json.loads(open(sidecar).read())
    meta["file"]["size"] += 1
    with open(sidecar, "w") as stream:
        stream.write(json.dumps(meta))
    assert fresh(PROGRAM).origin == "built"


def test_a_symlinked_cache_directory_is_not_followed(cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.parent.mkdir()
    cache.symlink_to(elsewhere)
    assert fresh(PROGRAM).origin == "built"
    assert os.listdir(elsewhere) == []
    assert fresh(PROGRAM).origin == "built"  # no cache, but no failure


def test_entries_of_another_user_are_ignored(cache):
    require(os.geteuid() == 0, "making files of another user needs root")
    fresh(PROGRAM)
    for suffix in (".sframe", ".json"):
        os.chown(entry(PROGRAM) + suffix, 4321, 4321)
    assert fresh(PROGRAM).origin == "built"
    assert os.stat(entry(PROGRAM) + ".json").st_uid == 0
    os.chown(cache, 4321, 4321)  # a directory of another user: not used
    assert fresh(PROGRAM).origin == "built"
    assert os.stat(entry(PROGRAM) + ".json").st_uid == 0


def test_a_fifo_entry_does_not_block(cache):
    fresh(PROGRAM)
    sidecar = entry(PROGRAM) + ".json"
    os.unlink(sidecar)
    os.mkfifo(sidecar)
    assert fresh(PROGRAM).origin == "built"
