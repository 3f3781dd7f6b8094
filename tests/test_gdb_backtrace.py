"""sframe-bt and the SFrame frame unwinder in the real gdb, on C programs
compiled by the tests with gas --gsframe: at every stop, sframe-bt's PCs
equal GDB's own (DWARF) bt PCs, frame by frame, down to main or to the first
frame in a library without SFrame data."""

import re
import signal
import subprocess

import pytest

from conftest import FIXTURES
from gdb_support import (ROOT, build_recurse, compile_library, compile_program, gdb_pcs,
                        run_gdb, sframe_frames, split_sections, variant_id)

VARIANTS = [(opt, pie) for opt in ("O0", "O2") for pie in (True, False)]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("programs")


def assert_same_frames(sframe_text, gdb_pc_list, no_sframe_ok=True):
    """sframe-bt's frames match GDB's; a shorter sframe-bt must have stopped
    at a frame whose code has no SFrame data."""
    frames = sframe_frames(sframe_text)
    ours = [pc for _, pc, _ in frames]
    assert ours, sframe_text
    assert [level for level, _, _ in frames] == list(range(len(frames)))
    assert ours == gdb_pc_list[:len(ours)], (sframe_text, [hex(p) for p in gdb_pc_list])
    if len(ours) < len(gdb_pc_list):
        assert no_sframe_ok and "Backtrace stopped: no unwind data for PC" in sframe_text, sframe_text
    return frames


COMPARE = ["echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v"]
# SFrame from gas only: libc's rows synthesized from DWARF CFI are
# tested in test_gdb_libc.py.
SETUP = ["set sframe unwinder off", "set sframe fallback none",
         "set sframe synthesize off"]


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_recursion_1000_deep_through_a_shared_library(gdb, build_dir, variant):
    program = build_recurse(build_dir, *variant)
    out = run_gdb(gdb, [str(program)], SETUP + ["break stop_here", "run"] + COMPARE)
    section = split_sections(out, "==STOP==")[0]
    (expected,) = gdb_pcs(section)
    frames = assert_same_frames(section, expected, no_sframe_ok=False)
    names = [name for _, _, name in frames]
    assert names[:5] == ["stop_here", "with_vla", "with_alloca", "callback", "twice"]
    assert names.count("recurse") == 1001 and names[-1] == "main"
    assert "[sframe, libapply.so]" in section
    assert len(frames) == len(expected) == 1008


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_signal_handler_for_a_fault_in_user_code(gdb, build_dir, variant):
    program = compile_program(build_dir, f"signal-{variant_id(variant)}",
                              *variant, ["signal.c"])
    out = run_gdb(gdb, [str(program)], SETUP + ["handle SIGFPE nostop noprint pass",
                                           "break stop_here", "run"] + COMPARE)
    section = split_sections(out, "==STOP==")[0]
    (expected,) = gdb_pcs(section)
    frames = assert_same_frames(section, expected, no_sframe_ok=False)
    names = [name for _, _, name in frames]
    assert names == ["stop_here", "handler", "<signal", "divide", "compute", "main"]
    assert "in <signal handler called>  [sframe" in section or "<signal handler called>" in section
    assert "[signal]" in section


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_four_threads(gdb, build_dir, variant):
    program = compile_program(build_dir, f"threads-{variant_id(variant)}",
                              *variant, ["threads.c"])
    commands = SETUP + ["break stop_here", "run"]
    for thread in range(1, 6):
        commands += [f"thread {thread}"] + COMPARE
    commands += ["echo ==ALL==\\n", "thread apply all sframe-bt"]
    out = run_gdb(gdb, [str(program)], commands)
    sections = split_sections(out.split("==ALL==")[0], "==STOP==")
    assert len(sections) == 5
    deep = 0
    for section in sections:
        (expected,) = gdb_pcs(section)
        frames = assert_same_frames(section, expected)
        names = [name for _, _, name in frames]
        if "inner" in names:
            deep += 1
            assert "worker" in names and names[-1] == "start_thread"
    assert deep >= 1
    all_threads = out.split("==ALL==")[1]
    assert all_threads.count("\nThread ") == 5
    assert "#0  0x" in all_threads


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_library_loaded_with_dlopen(gdb, build_dir, variant):
    out_dir = build_dir / f"dlopen-{variant_id(variant)}"
    out_dir.mkdir(exist_ok=True)
    library = compile_library(out_dir, "libapply.so", variant[0], ["libapply.c"])
    program = compile_program(out_dir, "dlopen", *variant, ["dlopen.c"])
    out = run_gdb(gdb, [str(program)], SETUP + ["break stop_here", f"run {library}"]
                  + COMPARE + ["info sframe"])
    section = split_sections(out, "==STOP==")[0]
    (expected,) = gdb_pcs(section)
    frames = assert_same_frames(section, expected, no_sframe_ok=False)
    assert [name for _, _, name in frames] == [
        "stop_here", "callback", "twice", "lib_apply", "main"]
    assert "[sframe, libapply.so]" in section
    assert re.search(r"SFrame v1, \d+ FDEs, from file\s+\S*libapply.so", section)


def test_core_file(gdb, build_dir, tmp_path):
    program = build_recurse(build_dir, "O2", True)
    core = tmp_path / "core"
    run_gdb(gdb, [str(program)], ["break stop_here", "run 20", f"gcore {core}"])
    assert core.exists()
    out = run_gdb(gdb, [str(program), str(core)], SETUP + COMPARE)
    section = split_sections(out, "==STOP==")[0]
    (expected,) = gdb_pcs(section)
    frames = assert_same_frames(section, expected, no_sframe_ok=False)
    assert [name for _, _, name in frames].count("recurse") == 21


def test_attached_process(gdb, build_dir):
    program = compile_program(build_dir, "sleeper", "O2", True, ["sleeper.c"])
    process = subprocess.Popen([str(program)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        out = run_gdb(gdb, ["-p", str(process.pid)],
                      SETUP + ["set sframe fallback fp", "echo ==STOP==\\n",
                               "sframe-bt -v", "bt"])
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    section = split_sections(out, "==STOP==")[0]
    frames = sframe_frames(section)
    assert frames, section
    # Stopped inside libc's pause(): no SFrame there on Debian 12, so the
    # walk starts with the frame-pointer fallback or stops at frame 0.
    assert frames[0][0] == 0


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_gdb_bt_uses_the_sframe_unwinder(gdb, build_dir, variant):
    """With GDB's DWARF unwinders off, bt is complete only if ours ran."""
    program = build_recurse(build_dir, *variant)
    out = run_gdb(gdb, [str(program)], [
        "break stop_here", "run 5", "echo ==DWARF==\\n", "set sframe unwinder off",
        "test-gdb-pcs", "set sframe unwinder on", "maint set dwarf unwinders off",
        "echo ==SFRAME==\\n", "test-gdb-pcs", "up 3", "info frame"])
    (dwarf,) = gdb_pcs(out.split("==SFRAME==")[0])
    (ours,) = gdb_pcs(out.split("==SFRAME==")[1])
    assert len(dwarf) == 13  # stop_here ... lib_apply, 6 x recurse, main
    assert ours == dwarf


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_stepping_through_every_instruction(gdb, build_dir, variant):
    program = compile_program(build_dir, f"steps-{variant_id(variant)}",
                              *variant, ["steps.c"])
    out = run_gdb(gdb, [str(program)], SETUP + [
        f"source {ROOT / 'tests' / 'gdb_stepping.py'}", "break outer", "run",
        "test-step-compare 3000"])
    assert "MISMATCH" not in out, out[-3000:]
    steps = [line for line in out.splitlines() if line.startswith("STEPS")]
    assert steps, out[-2000:]
    _, count, _, agreed = steps[0].split()
    assert int(count) > 100 and agreed == count


def test_drap_function_through_a_flexible_fde(gdb):
    """aligned_local realigns its stack with DRAP: gas 2.46 describes it
    with a flexible FDE (CFA = *(rbp - 8)).  The committed fixture was built
    with binutils 2.46 and runs here."""
    program = FIXTURES / "v3" / "x86_64" / "drap"
    stop = ["echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v",
            "echo ==OURS==\\n", "maint set dwarf unwinders off",
            "set sframe unwinder on", "test-gdb-pcs",
            "set sframe unwinder off", "maint set dwarf unwinders on"]
    out = run_gdb(gdb, [str(program)], SETUP + ["break use", "run"] + stop + ["continue"] + stop)
    stops = split_sections(out, "==STOP==")
    assert len(stops) == 2
    for section, caller in zip(stops, ("aligned_local", "vla")):
        ours_text, frame_unwinder = section.split("==OURS==\n")
        (expected,) = gdb_pcs(ours_text)
        frames = assert_same_frames(ours_text, expected, no_sframe_ok=False)
        assert [name for _, _, name in frames] == ["use", caller, "main"]
        (with_sframe_unwinder,) = gdb_pcs(frame_unwinder)
        assert with_sframe_unwinder == expected
    assert "in main ()  [flex, drap]" in stops[0]
