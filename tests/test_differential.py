"""GDB with the plugin loaded is never worse than GDB alone (issue 11), shown
by the differential harness (tests/differential.py) on programs nobody here
wrote (Debian's python3, perl and bash), on tests/programs built with the
system's gas (SFrame v1) and on the committed v1 and v3 fixtures: at every
stop, seeded random breakpoints, PLT stubs, `catch syscall`, signals, library
loads and `stepi` through lazy binding and signal handlers, the plugin's `bt`
and `bt full` equal GDB's alone and `sframe-bt`'s PCs equal GDB's frames.
bench/differential.py runs thousands of stops and a whole-program sweep."""

import pytest

import differential
from differential import (Plan, debian_programs, fixture_programs, project_programs,
                          run_plan, summary, sweep)

# a few hundred stops in all: the bench runs thousands
PROGRAMS = ("python3", "perl", "bash", "mixed-O0", "mixed-O2", "recurse-O2",
            "libc_calls-O2-segv", "signal-O0", "v1-plt-main", "v3-plt-main")
PLAN = Plan(seed=11, breakpoints=20, max_stops=20, stepi_after_plt=12, stepi_burst=6)
# stepi at every instruction: ld.so's first ones; a first call through the
# PLT (lazy binding: _dl_runtime_resolve, _dl_fixup, the symbol lookup); a
# signal raised by user code, its handler, rt_sigreturn, then qsort's first
# call through the PLT
SWEEPS = (("v1-plt-main", None, 80), ("v1-plt-main", "lib_add@plt", 200),
          ("mixed-O2", "trap_here", 70))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("differential")
    return {program.name: program for program in
            debian_programs(workdir) + project_programs(workdir) + fixture_programs()}


def assert_same(result):
    report = "\n".join(summary([result], examples=3))
    assert not result.diverged, report
    assert result.mismatches == [], report


@pytest.mark.parametrize("name", PROGRAMS)
def test_plugin_bt_and_sframe_bt_equal_gdb_alone_at_random_stops(gdb, programs, name):
    result = run_plan(gdb.command, programs[name], PLAN)
    assert result.stops >= 10, summary([result])
    assert_same(result)


@pytest.mark.parametrize("name, start, steps", SWEEPS,
                         ids=[f"{n}-{s or 'starti'}" for n, s, _ in SWEEPS])
def test_plugin_bt_and_sframe_bt_equal_gdb_alone_at_every_instruction(
        gdb, programs, name, start, steps):
    result = sweep(gdb.command, programs[name], steps, start=start)
    assert result.stops == steps, summary([result])
    assert_same(result)


def test_harness_finds_no_difference_between_two_runs_of_gdb_alone(gdb, programs):
    """The harness's own check: with the plugin's gdb replaced by a third
    GDB alone, every stop is equal (the programs are deterministic, what
    varies from run to run is recognised), so a difference it reports
    is the plugin's."""
    result = run_plan(gdb.command, programs["mixed-O2"], PLAN, control=True)
    assert result.stops >= 20
    assert result.volatile > 0  # ld.so's timestamps and the clock were met
    assert_same(result)


# -- the comparisons themselves, without a debugger ---------------------------------

def test_a_line_gdb_alone_prints_differently_each_run_is_compared_without_its_numbers():
    theirs = "#0  f ()\n        start_time = 9867935138489\n"
    again = "#0  f ()\n        start_time = 9867917108555\n"
    difference, volatile = differential.text_difference(
        "#0  f ()\n        start_time = 9867911111111\n", theirs, again)
    assert (difference, volatile) == (None, True)
    difference, _ = differential.text_difference(
        "#0  f ()\n        start_time = <optimized out>\n", theirs, again)
    assert difference == ("line 2: gdb -nx '        start_time = 9867935138489' / "
                          "plugin '        start_time = <optimized out>'")
    # uninitialized bytes print as strings of any length
    theirs = '        _f = 0x7fffffffd08c "\\201\\236", <incomplete sequence \\342>}\n'
    again = '        _f = 0x7fffffffd08c "\\233\\"\\223\\277"}\n'
    assert differential.text_difference(
        '        _f = 0x7fffffffd08c "\\351\\235\\177"}\n', theirs, again) == (None, True)
    assert differential.text_difference(
        "        _f = <optimized out>}\n", theirs, again)[0] is not None


def test_a_line_both_runs_of_gdb_alone_agree_on_must_be_equal():
    theirs = "#0  f (x=x@entry=42)\n"
    difference, volatile = differential.text_difference(
        "#0  f (x=42, x@entry=<error reading variable>)\n", theirs, theirs)
    assert difference.startswith("line 1: gdb -nx '#0  f (x=x@entry=42)'")
    assert not volatile


def test_sframe_bt_pcs_are_compared_with_gdbs_frames_in_code():
    record = {"frames": [[0x1000, "NORMAL_FRAME", True], [0x2000, "NORMAL_FRAME", True],
                         [0x1, "NORMAL_FRAME", False], [0x0, "NORMAL_FRAME", False]]}
    expected, trimmed = differential.reference_pcs(record)
    assert (expected, trimmed) == ([0x1000, 0x2000], True)
    good = "#0  0x1000 in f ()\n#1  0x2000 in g ()\nBacktrace stopped: outermost frame\n"
    assert differential.sframe_difference(good, expected) is None
    short = "#0  0x1000 in f ()\nBacktrace stopped: no unwind data for PC 0x1000\n"
    assert differential.sframe_difference(short, expected) == (
        "frame 1 missing: gdb 0x2000 (1 frames, gdb 2); "
        "Backtrace stopped: no unwind data for PC 0x1000")
    wrong = "#0  0x1000 in f ()\n#1  0x7fffffffe528 in ?? ()\n"
    assert differential.sframe_difference(wrong, expected).startswith(
        "frame 1: gdb 0x2000 sframe-bt 0x7fffffffe528")
    assert differential.sframe_difference(
        "error: sframe-bt: OverflowError: x\n", expected) == "fails: error: sframe-bt: OverflowError: x"
