"""What sframe-bt keeps in LLDB from one command to the next, as in GDB
(tests/test_gdb_kept.py; sfbt.commands.kept's modules owner): a second
sframe-bt at the same stop, and one after `thread step-inst`, read
nothing again from sfbt's disk cache (its read counter,
``sfbt.cache.Cache.reads``) and print what the first printed (before: each
command opened the files' symbols again, one cache read or more each); a
library loaded with dlopen, and a new process, make the plugin forget
what it kept for the modules.  Counted, never timed."""

import re
import subprocess

from gdb_support import PROGRAMS, compile_library, compile_program
from lldb_support import lldb_pcs, mark, run_lldb, stack_frames

#: prints the disk cache's read counter and how often the modules' owner forgot
COUNTERS = ("script import sfbt_lldb_session as s; from sfbt.cache import Cache; "
            "print('KEPT', Cache.reads, s.state.modules.forgotten)")


def counters(out):
    """[(disk reads, modules forgotten)], one a KEPT line."""
    return [tuple(int(n) for n in line.split()[1:])
            for line in out.splitlines() if line.startswith("KEPT ")]


def test_second_sframe_bt_and_after_a_step_read_nothing_again(lldb, tmp_path):
    program = tmp_path / "tail_calls"
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-o", str(program),
                    str(PROGRAMS / "tail_calls.c")], check=True, capture_output=True)
    out = run_lldb(lldb, program, [
        "breakpoint set -n stop_here", "run",
        mark("CMD"), "test-lldb-pcs", "sframe-bt", COUNTERS,
        mark("CMD"), "sframe-bt", COUNTERS,
        "thread step-inst", mark("CMD"), "test-lldb-pcs", "sframe-bt", COUNTERS])
    first, again, stepped = out.split("==CMD==\n")[1:]
    (read_first, forgotten), (read_again, _), (read_stepped, forgotten_stepped) = \
        counters(out)
    assert read_first > 0, first[-2000:]  # the first call looked in the cache
    assert read_again == read_first and read_stepped == read_first, out[-3000:]
    assert forgotten_stepped == forgotten  # a step changes no module
    shown = [line for line in first.splitlines() if line.startswith("#")]
    assert shown == [line for line in again.splitlines() if line.startswith("#")]
    for section in (first, stepped):
        (theirs,) = lldb_pcs(section)
        ours = [pc for _, pc, _ in stack_frames(section)]
        assert ours == theirs[:len(ours)] and len(ours) == 5, section[-3000:]


def test_a_library_loaded_and_a_new_process_forget_what_the_modules_kept(lldb, tmp_path):
    library = compile_library(tmp_path, "libapply.so", "O2", ["libapply.c"])
    program = compile_program(tmp_path, "dlopen", "O2", True, ["dlopen.c"])
    out = run_lldb(lldb, program, [
        "breakpoint set -n main", "breakpoint set -n stop_here", f"run {library}",
        "sframe-bt", COUNTERS, "continue", mark("CMD"), "test-lldb-pcs", "sframe-bt",
        COUNTERS, "process kill", f"run {library}", "sframe-bt", COUNTERS])
    (_, at_main), (_, at_stop), (_, rerun) = counters(out)
    assert at_stop > at_main, out[-3000:]  # libapply.so was loaded: forgotten
    assert rerun > at_stop, out[-3000:]  # another process
    section = out.split("==CMD==\n")[1].split("process kill")[0]
    (theirs,) = lldb_pcs(section)
    frames = stack_frames(section)
    assert [pc for _, pc, _ in frames] == theirs[:len(frames)], section[-3000:]
    assert [name for _, _, name in frames] == [
        "stop_here", "callback", "twice", "lib_apply", "main"], section[-3000:]
    assert re.search(r"^#0 .* in main at ", out.split("process kill")[-1], re.M), out[-2000:]
