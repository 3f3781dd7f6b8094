"""sframe-bt, the frame provider, cbf-save and cbf-load in the real lldb, on
the programs the GDB tests use: sframe-bt's PCs equal LLDB's own bt PCs down
to main."""

import pytest

from gdb_support import (build_recurse, compile_program, run_gdb, sframe_frames,
                         split_sections, variant_id)
from lldb_support import lldb_pcs, mark, run_lldb

VARIANTS = [("O0", True), ("O2", False), ("O2", True)]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("lldb-programs")


COMPARE = [mark("STOP"), "test-lldb-pcs", "sframe-bt -v"]


def assert_same_as_lldb(section):
    frames = sframe_frames(section)
    (theirs,) = lldb_pcs(section)
    ours = [pc for _, pc, _ in frames]
    assert ours and ours == theirs[:len(ours)], section[-3000:]
    assert frames[-1][2] == "main", section[-2000:]
    return frames


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_recursion_1000_deep(lldb, build_dir, variant):
    program = build_recurse(build_dir, *variant)
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run"] + COMPARE)
    frames = assert_same_as_lldb(split_sections(out, "==STOP==")[-1])
    names = [name for _, _, name in frames]
    assert names.count("recurse") == 1001 and "lib_apply" in names
    assert "[sframe, libapply.so]" in out


@pytest.mark.parametrize("variant", VARIANTS[:2], ids=variant_id)
def test_signal_handler(lldb, build_dir, variant):
    program = compile_program(build_dir, f"signal-{variant_id(variant)}", *variant,
                              ["signal.c"])
    out = run_lldb(lldb, program, ["process handle SIGFPE -s false -p true -n false",
                             "breakpoint set -n stop_here", "run"] + COMPARE)
    frames = assert_same_as_lldb(split_sections(out, "==STOP==")[-1])
    assert [name for _, _, name in frames] == [
        "stop_here", "handler", "<signal", "divide", "compute", "main"]


def test_threads(lldb, build_dir):
    program = compile_program(build_dir, "threads", "O2", True, ["threads.c"])
    commands = ["breakpoint set -n stop_here", "run"]
    for thread in range(1, 6):
        commands += [f"thread select {thread}", mark("STOP"),
                     "test-lldb-pcs", "sframe-bt"]
    out = run_lldb(lldb, program, commands)
    sections = split_sections(out, "==STOP==")
    assert len(sections) == 5
    deep = 0
    for section in sections:
        frames = sframe_frames(section)
        (theirs,) = lldb_pcs(section)
        ours = [pc for _, pc, _ in frames]
        assert ours and ours == theirs[:len(ours)], section
        deep += any(name == "inner" for _, _, name in frames)
    assert deep >= 1


def test_frame_provider_makes_bt_show_sframe_frames(lldb, build_dir):
    # every LLDB of the matrix is 22 or newer: scripted frame providers
    assert lldb.major >= 22
    program = build_recurse(build_dir, "O2", True)
    out = run_lldb(lldb, program, [
        "breakpoint set -n stop_here", "run 30", mark("OURS"), "sframe-bt",
        mark("PLAIN"), "test-lldb-pcs", "sframe-provider on",
        mark("PROVIDED"), "test-lldb-pcs", "bt 3", "frame select 2",
        "sframe-provider off", mark("OFF"), "test-lldb-pcs"])
    ours = [pc for _, pc, _ in sframe_frames(out.split("==OURS==")[1].split("==PLAIN==")[0])]
    (plain,) = lldb_pcs(out.split("==PLAIN==")[1].split("==PROVIDED==")[0])
    (provided,) = lldb_pcs(out.split("==PROVIDED==")[1].split("==OFF==")[0])
    (off,) = lldb_pcs(out.split("==OFF==")[1])
    assert len(plain) > len(ours)  # LLDB's own bt goes on past main
    assert provided == ours  # the provider's frames: it really ran
    assert off == plain
    assert "[synthetic]" in out.split("==PROVIDED==")[1]


def test_provider_command_errors(lldb):
    out = run_lldb(lldb, "", ["sframe-provider", "sframe-bt"])
    assert "usage: sframe-provider on|off" in out
    assert "error:" in out and "Traceback" not in out


def test_without_pyelftools_the_plugin_says_so_in_one_line(lldb, without_pyelftools):
    out = lldb.run([], ["help sframe-bt"], environment=without_pyelftools)
    assert "cannot import pyelftools; install it there (pip install pyelftools)" in out
    assert "Traceback" not in out
    assert "'sframe-bt' is not a known command" in out


def test_cbf_archives_cross_between_lldb_and_gdb(lldb, gdb, build_dir, tmp_path):
    program = build_recurse(build_dir, "O2", True)
    from_lldb, from_gdb = tmp_path / "lldb.sfbt", tmp_path / "gdb.sfbt"
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run 12",
                             mark("BT"), "sframe-bt",
                             f"cbf-save {from_lldb}", mark("LOAD"),
                             f"cbf-load {from_lldb}"])
    lldb_frames = sframe_frames(out.split("==BT==")[1].split("==LOAD==")[0])
    assert "Saved 1 backtrace" in out
    gdb_out = run_gdb(gdb, [str(program)], ["break stop_here", "run 12",
                                       "echo ==BT==\\n", "sframe-bt", f"cbf-save {from_gdb}",
                                       "echo ==LOAD==\\n", f"cbf-load {from_lldb}"])
    gdb_frames = sframe_frames(gdb_out.split("==BT==")[1].split("==LOAD==")[0])
    gdb_loaded = sframe_frames(gdb_out.split("==LOAD==")[1])
    assert [pc for _, pc, _ in lldb_frames] == [pc for _, pc, _ in gdb_frames]
    assert [(pc, name) for _, pc, name in gdb_loaded] == [
        (pc, name) for _, pc, name in gdb_frames]
    out = run_lldb(lldb, program, [mark("LOAD"), f"cbf-load {from_gdb}"])
    lldb_loaded = sframe_frames(out.split("==LOAD==")[1])
    assert [pc for _, pc, _ in lldb_loaded] == [pc for _, pc, _ in gdb_frames]
    assert [name for _, _, name in lldb_loaded] == [name for _, _, name in lldb_frames]


def test_ten_thousand_frames(lldb, build_dir):
    program = build_recurse(build_dir, "O2", True)
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run 10000",
                             mark("BT"), "sframe-bt -3"])
    frames = sframe_frames(out.split("==BT==")[1])
    # stop_here ... lib_apply (6 frames), 10,001 x recurse, main
    assert [level for level, _, _ in frames] == [10005, 10006, 10007]
    assert frames[-1][2] == "main"
