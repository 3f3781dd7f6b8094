"""Hostile files in the real gdb: cbf-load of an archive naming a FIFO as
an image's file returns at once, and cbf-save refuses a FIFO or device and
writes through a symbolic link, each failure in one line."""

import os
import re

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



def test_sframe_bt_says_in_one_warning_what_a_limit_left_out(gdb, tmp_path):
    """A program whose DWARF has calls inlined 300 deep over main: GDB's
    sframe-bt shows main's frames with the 256 innermost calls and one
    warning line naming the file and the unit (before the bounds, every
    call, without a word: thousands deep, it ran out of memory)."""
    import crafted_dwarf
    program = crafted_dwarf.program_with_deep_chain(tmp_path, 300)
    out = run_gdb(gdb, [str(program)], ["break stop_here", "run", "sframe-bt",
                                        "echo ==DONE==\\n"], timeout=120)
    warnings = [line for line in out.splitlines() if line.startswith("warning: sfbt: ")]
    assert len(warnings) == 1, out
    assert f"{program}: .debug_info+0x0: inlined calls nested deeper than 256 left out" \
        in warnings[0], out
    # the innermost call at the frame's PC, the 255 others at their call sites
    assert len(re.findall(r"^#\d+\s+(0x[0-9a-f]+ in f \(\)|f at a\.c:5)$", out, re.M)) == 256, out
    assert re.search(r"^#257 main at a\.c:5$", out, re.M), out
    assert "==DONE==" in out and "Traceback" not in out
