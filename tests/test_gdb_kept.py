"""What sframe-bt keeps in GDB from one command to the next
(sfbt.commands.kept): on a C++ program of a real interpreter's size
(bench/cxx_big.py), a second sframe-bt at the same stop, and one after
`stepi`, read nothing again from sfbt's disk cache (its read counter,
``sfbt.cache.Cache.reads``) and print what the first printed; a library
loaded with dlopen makes the plugin forget what it kept for the modules.
Counted, never timed (bench/gdb_cxx.py times it)."""

import re

from gdb_support import (build_recurse, compile_library, compile_program, gdb_pcs, run_gdb,
                         sframe_frames)

#: prints the disk cache's read counter and how often each owner forgot
COUNTERS = ("python import sfbt_gdb_session as s; from sfbt.cache import Cache; "
            "print('KEPT', Cache.reads, s.state.stop.forgotten, s.state.modules.forgotten)")


def counters(out):
    """[(disk reads, stop forgotten, modules forgotten)], one a KEPT line."""
    return [tuple(int(n) for n in line.split()[1:])
            for line in out.splitlines() if line.startswith("KEPT ")]


def test_second_sframe_bt_and_after_stepi_read_nothing_again(gdb, cxx_big):
    marker = "echo ==CMD==\\n"
    out = run_gdb(gdb, [str(cxx_big)], [
        "set print frame-arguments none", "break app::leaf", "run 100000",
        "ignore 1 37", "continue",
        marker, "test-gdb-pcs", "sframe-bt", COUNTERS,
        marker, "sframe-bt", COUNTERS,
        "stepi", marker, "test-gdb-pcs", "sframe-bt", COUNTERS], timeout=600)
    first, again, stepped = out.split("==CMD==\n")[1:]
    (at_stop,), (after_step,) = gdb_pcs(first), gdb_pcs(stepped)
    (read_first, _, _), (read_again, _, _), (read_stepped, stop_forgotten, _) = \
        counters(out)
    assert read_first > 0, first[-2000:]  # the first call looked in the cache
    assert read_again == read_first and read_stepped == read_first, out[-3000:]
    assert stop_forgotten >= 1  # stepi's stop dropped the walk of the first
    shown = [line for line in first.splitlines() if line.startswith("#")]
    assert shown == [line for line in again.splitlines() if line.startswith("#")]
    # the frames themselves: those of GDB's bt, the names of the C++ program
    assert [pc for _, pc, _ in sframe_frames(first)] == at_stop, first[-3000:]
    assert [pc for _, pc, _ in sframe_frames(stepped)] == after_step, stepped[-3000:]
    assert len(shown) > 40 and shown[-1].split(" in ")[1].startswith("main")
    assert any("Worker<app::u" in line for line in shown)


def test_a_library_loaded_with_dlopen_forgets_what_the_modules_kept(gdb, tmp_path):
    library = compile_library(tmp_path, "libapply.so", "O2", ["libapply.c"])
    program = compile_program(tmp_path, "dlopen", "O2", True, ["dlopen.c"])
    out = run_gdb(gdb, [str(program)], [
        "break main", "break stop_here", f"run {library}", "sframe-bt", COUNTERS,
        "python import sfbt_gdb_session as s; "
        "print('IN-MAIN', len(s.state.modules.table('in main')))",
        "continue", "echo ==CMD==\\n", "test-gdb-pcs", "sframe-bt", COUNTERS])
    (_, _, before), (_, _, after) = counters(out)
    assert int(re.search(r"^IN-MAIN (\d+)", out, re.M)[1]) > 0, out[-3000:]
    assert after > before, out[-3000:]  # libapply.so's objfile: forgotten
    section = out.split("==CMD==\n")[1]
    (expected,) = gdb_pcs(section)
    frames = sframe_frames(section)
    assert [pc for _, pc, _ in frames] == expected
    assert [name for _, _, name in frames] == [
        "stop_here", "callback", "twice", "lib_apply", "main"]


def test_the_frame_unwinder_keeps_its_rows_across_stops(gdb, tmp_path):
    """`set sframe unwinder on`: the rows and plans found for each address
    at one stop are still there at the next (after `stepi`), and GDB's bt
    through them still reaches main with the PCs sframe-bt finds."""
    program = build_recurse(tmp_path, "O2", True)
    rows = ("python from sfbt_gdb_unwinder import frame_unwinder as u; "
            "print('ROWS', len(u._rows_at), len(u._plans))")
    out = run_gdb(gdb, [str(program)], [
        "set sframe unwinder on", "break stop_here", "run 20", "bt", rows,
        "stepi", rows, "echo ==CMD==\\n", "bt", "echo ==CMD==\\n", "test-gdb-pcs",
        "sframe-bt"])
    (rows_found, plans), (rows_kept, plans_kept) = [
        tuple(int(n) for n in line.split()[1:])
        for line in out.splitlines() if line.startswith("ROWS ")]
    assert rows_found > 5 and plans > 0, out[-3000:]
    # kept: those of the first stop, and those stepi's own frames added
    assert rows_kept >= rows_found and plans_kept >= plans, out[-3000:]
    through_rows, section = out.split("==CMD==\n")[1:]
    (expected,) = gdb_pcs(section)
    assert [pc for _, pc, _ in sframe_frames(section)] == expected, section[-3000:]
    # GDB's bt through the kept rows (its frame #0 may print no address)
    shown = [pc for _, pc, _ in sframe_frames(through_rows)]
    assert len(shown) >= len(expected) - 1 and shown == expected[-len(shown):], out[-3000:]
    assert [name for _, _, name in sframe_frames(section)].count("recurse") == 21
