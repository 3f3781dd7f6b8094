"""The synthesis cache on disk: private to its user, entries checked
against the file they describe, and damaged entries rebuilt."""

import os
import shutil
import stat

import pytest

from conftest import FIXTURES, require
from sfbt import dwarf
from sfbt.cache import Cache

PROGRAM = FIXTURES / "v3" / "x86_64" / "manyfuncs"
OTHER = FIXTURES / "v3" / "x86_64" / "callchain-O2"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "sfbt" / "synth"


def entry(path):
    cache = Cache("synth")
    return os.path.join(cache.path, cache.entry_name(dwarf.file_cache_key(path)))


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
    os.chmod(cache, 0o755)  # made by an older sfbt: ours, and only readable
    assert fresh(PROGRAM).origin == "cache"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_a_cache_others_may_write_to_is_not_used(cache, capfd):
    fresh(PROGRAM)
    os.chmod(cache, 0o777)
    assert fresh(PROGRAM).origin == "built"
    assert fresh(PROGRAM).origin == "built"
    warnings = capfd.readouterr().err.splitlines()
    assert warnings == [f"sfbt: warning: cache directory {cache} may be written by "
                        "others (mode 777): not used"]
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o777  # left for its user to judge


@pytest.mark.parametrize("content", [b"", b"[]", b"sfbt-cache 1\n", b"\x04\xff\xff\xff\x7f",
                                     b"[" * 100000])
def test_a_damaged_entry_is_rebuilt(cache, content):
    first = fresh(PROGRAM)
    good = open(entry(PROGRAM), "rb").read()
    with open(entry(PROGRAM), "wb") as stream:
        stream.write(content)
    again = fresh(PROGRAM)
    assert again.origin == "built" and again.section == first.section
    assert open(entry(PROGRAM), "rb").read() == good
    assert fresh(PROGRAM).origin == "cache"


def test_rows_of_another_file_are_not_used(cache):
    """Another file's entry copied under this file's name: its head names
    the other file, so it is rebuilt."""
    mine, other = fresh(PROGRAM), fresh(OTHER)
    assert mine.section != other.section
    shutil.copyfile(entry(OTHER), entry(PROGRAM))
    again = fresh(PROGRAM)
    assert again.origin == "built" and again.section == mine.section


def test_a_copy_with_the_same_build_id_has_its_own_entry(cache, tmp_path):
    """A copy of a file (same build id, whatever its contents): each file
    gets its own rows, whichever was synthesized first."""
    copy = tmp_path / "copy"
    shutil.copyfile(PROGRAM, copy)
    assert dwarf.file_cache_key(copy) != dwarf.file_cache_key(PROGRAM)
    first = fresh(copy)
    assert fresh(PROGRAM).origin == "built"
    assert fresh(copy).origin == "cache" and fresh(copy).section == first.section


def test_an_entry_is_stale_once_its_file_changes(cache, tmp_path):
    copy = tmp_path / "copy"
    shutil.copyfile(PROGRAM, copy)
    fresh(copy)
    os.utime(copy, ns=(0, 0))  # even with its times set back
    assert fresh(copy).origin == "built"


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
    os.chown(entry(PROGRAM), 4321, 4321)
    assert fresh(PROGRAM).origin == "built"
    assert os.stat(entry(PROGRAM)).st_uid == 0
    os.chown(cache, 4321, 4321)  # a directory of another user: not used
    assert fresh(PROGRAM).origin == "built"
    assert os.stat(entry(PROGRAM)).st_uid == 0


def test_a_fifo_entry_does_not_block(cache):
    fresh(PROGRAM)
    os.unlink(entry(PROGRAM))
    os.mkfifo(entry(PROGRAM))
    assert fresh(PROGRAM).origin == "built"
