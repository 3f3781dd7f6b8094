"""Hostile files in the real gdb: cbf-load of an archive naming a FIFO as
an image's file returns at once, and cbf-save refuses a FIFO or device and
writes through a symbolic link, each failure in one line."""

import os

import pytest

from conftest import archive_naming_a_fifo, one_frame_archive
from gdb_support import compile_library, compile_program, run_gdb
from sfbt.archive.store import read_archive


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("hostile")
    library = compile_library(out_dir, "libapply.so", "O0", ["libapply.c"])
    return compile_program(out_dir, "recurse", "O0", True, ["recurse.c"], [library])


def test_cbf_load_does_not_open_a_fifo_named_by_an_archive(gdb, program, tmp_path):
    fifo, path = archive_naming_a_fifo(tmp_path)
    out = run_gdb(gdb, [str(program)], [f"cbf-load {path}", "echo ==DONE==\\n"],
                  timeout=60)
    assert f"#0  0x0000000000400100 in ?? from {fifo}" in out
    assert "==DONE==" in out and "Traceback" not in out


def test_cbf_save_refuses_fifos_and_follows_symlinks(gdb, program, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "real.sfbt"
    link = tmp_path / "link.sfbt"
    link.symlink_to(target)
    out = run_gdb(gdb, [str(program)], [
        "break stop_here", "run 3", f"cbf-save {fifo}", "cbf-save --format lws /dev/null",
        f"cbf-save {link}", f"cbf-save --append {link}"], timeout=120)
    assert f"cbf-save: {fifo}: not a regular file (a FIFO)" in out
    assert "cbf-save: /dev/null: not a regular file (a character device)" in out
    assert link.is_symlink()
    archive, error = read_archive(target)
    assert error is None and len(archive.events) == 2
    assert "Traceback" not in out


def test_cbf_load_prints_a_path_that_is_not_utf8(gdb, program, tmp_path):
    """Escaped as GDB escapes such a byte in a string: in octal."""
    path = one_frame_archive(tmp_path / "a.sfbt", "/x/\udc8cbad")
    out = run_gdb(gdb, [str(program)], [f"cbf-load {path}"], timeout=60)
    assert "#0  0x0000000000400100 in ?? from /x/\\214bad" in out
    assert "Traceback" not in out and "Python Exception" not in out
