"""sframe-bt in the real lldb lists inline frames as LLDB's own `bt` does:
the same function names, frame by frame down to main, inline frames
included, and an inline frame marked [inlined] where LLDB's frame is
inlined; at breakpoints on inlined functions, after `step` into them and
at stops inside -O2 code (the programs of the GDB inline tests), on every
LLDB the suite finds.  cbf-load prints a backtrace cbf-save saved there
as sframe-bt printed it."""

import re

import pytest

from gdb_support import compile_program, split_sections
from lldb_support import frame_names, mark, run_lldb
from sfbt.arch import X86_64
from sfbt.commands.backtrace import backtrace_lines
from sfbt.archive.layout import GdbLayout, LldbLayout
from sfbt.frame_name import FrameName
from sfbt.unwind.walk import Frame

# `  * frame #0: 0x000055555555539c inlined`leaf(n=3) at inline_chain.c:24:15 [inlined]`,
# on LLDB 19 `frame #1: 0x000055555555542e chain`work [inlined] leaf(n=201) at ...`
BT_NAME = re.compile(r"^\s*(?:\* )?frame #\d+: 0x[0-9a-f]+ (?:[^`\s]+`)?(?:\S+ \[inlined\] )?"
                     r"([^\s(]+)", re.M)
SFRAME_LINE = re.compile(r"^#\d+\s.*$", re.M)
COMPARE = [mark("STOP"), "bt", mark("SFRAME"), "test-lldb-inlined", "sframe-bt"]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lldb-inline")
    return {name: compile_program(root, name, "O2", True, [source])
            for name, source in (("chain", "inline_chain.c"), ("inlined", "inlined.c"))}


def command_output(text, command):
    """What ``command`` printed in ``text``: up to the next prompt."""
    return text.split(f"(lldb) {command}\n", 1)[-1].split("(lldb) ", 1)[0]


def compared_stops(out):
    """[(LLDB's names, sframe-bt's names, sframe-bt's [inlined] marks,
    LLDB's inlined flags)] of each stop, LLDB's cut after main (where
    sframe-bt stops)."""
    stops = []
    for section in split_sections(out, "==STOP=="):
        theirs, _, ours = section.partition("==SFRAME==\n")
        expected = BT_NAME.findall(theirs)
        if "main" not in expected:
            continue
        expected = expected[:expected.index("main") + 1]
        inlined = re.search(r"^LLDB-INLINED ([01 ]*)$", ours, re.M)
        shown = command_output(ours, "sframe-bt")
        lines = SFRAME_LINE.findall(shown)
        stops.append((expected, frame_names(shown),
                      [line.endswith(" [inlined]") for line in lines],
                      [flag == "1" for flag in inlined[1].split()][:len(expected)]))
    return stops


SCENARIOS = {
    # breakpoints on each inlined function of a chain three deep
    "breakpoints": ("chain", ["breakpoint set -n leaf", "breakpoint set -n inner",
                              "breakpoint set -n outer", "run 3 nowait"],
                    COMPARE + ["continue"], 20),
    # `step` from work's entry into the calls inlined there, and on
    "steps": ("chain", ["breakpoint set -n work", "run 3 nowait"], COMPARE + ["step"], 30),
    # stops in -O2 code whose small functions are inlined into their
    # callers' prologues: breakpoints on them, `step` into them
    "O2 stops": ("inlined", ["breakpoint set -n peek", "breakpoint set -n number",
                             "breakpoint set -n stop_here", "run"],
                 COMPARE + ["step"] + COMPARE + ["continue"], 10),
    # every instruction of expression's first calls
    "stepi": ("inlined", ["breakpoint set -n expression", "run", "breakpoint delete"],
              COMPARE + ["thread step-inst"], 60),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_inline_frames_as_lldb_bt(lldb, programs, scenario):
    program, start, each, times = SCENARIOS[scenario]
    out = run_lldb(lldb, programs[program], start + each * times)
    assert "Traceback" not in out, out[-3000:]
    stops = compared_stops(out)
    inline_frames = deep = 0
    for expected, shown, marked, inlined in stops:
        assert shown == expected, f"lldb bt: {expected}\nsframe-bt: {shown}\n{out[-3000:]}"
        assert marked == inlined, f"{shown}: [inlined] {marked}, LLDB's {inlined}"
        inline_frames += sum(marked)
        deep += marked[:2] == [True, True]
    print(f"{lldb.id} {scenario}: {len(stops)} stops, names equal to bt's, "
          f"{inline_frames} inline frames ({deep} stops two calls deep or more at frame #0)")
    assert len(stops) >= 10 and inline_frames >= 10, out[-3000:]


#: stops inside code inlined three deep, and in a function called from
#: there: (program, commands to the first stop, stops)
LOAD_SCENARIOS = {
    "chain": ("chain", ["breakpoint set -n leaf", "breakpoint set -n inner",
                        "breakpoint set -n outer", "breakpoint set -n wait_forever",
                        "run 200 nowait"], 12),
    "O2 stops": ("inlined", ["breakpoint set -n peek", "breakpoint set -n number",
                             "breakpoint set -n stop_here", "run"], 10),
}


@pytest.mark.parametrize("scenario", list(LOAD_SCENARIOS))
def test_cbf_load_prints_what_sframe_bt_printed(lldb, programs, tmp_path, scenario):
    """cbf-save then cbf-load at a stop prints sframe-bt's lines at that
    stop: LLDB's layout (an address on every line, calls [inlined]), the
    inline frames included, the names those of LLDB's `bt`."""
    program, start, times = LOAD_SCENARIOS[scenario]
    archive = tmp_path / "stop.sfbt"
    each = [mark("STOP"), "bt", mark("SFRAME"), "sframe-bt", f"cbf-save {archive}",
            f"cbf-load {archive}", "continue"]
    out = run_lldb(lldb, programs[program], start + each * times)
    assert "Traceback" not in out, out[-3000:]
    compared = inline_lines = 0
    for section in split_sections(out, "==STOP=="):
        theirs, _, ours = section.partition("==SFRAME==\n")
        expected = BT_NAME.findall(theirs)
        if "main" not in expected:
            continue
        shown = SFRAME_LINE.findall(command_output(ours, "sframe-bt"))
        loaded = command_output(ours, f"cbf-load {archive}")
        assert loaded.startswith("Backtrace 1, captured once "), loaded
        loaded = SFRAME_LINE.findall(loaded)
        assert loaded == shown, f"sframe-bt: {shown}\ncbf-load: {loaded}"
        assert frame_names("\n".join(loaded)) == expected[:expected.index("main") + 1], \
            f"lldb bt: {expected}\ncbf-load: {loaded}"
        compared += 1
        inline_lines += sum(line.endswith(" [inlined]") for line in loaded)
    print(f"{lldb.id} {scenario}: {compared} stops, cbf-load's lines equal to "
          f"sframe-bt's, {inline_lines} inline frames")
    assert compared >= 8 and inline_lines >= 20, out[-3000:]


def test_counts_include_inline_frames(lldb, programs):
    """sframe-bt N prints the frames `bt N` prints, inline frames counted;
    -N the outermost N, numbered as in the whole backtrace."""
    out = run_lldb(lldb, programs["chain"], [
        "breakpoint set -n wait_forever", "run 200 nowait",
        mark("STOP"), "bt 3", mark("SFRAME"), "sframe-bt 3", "sframe-bt -2"])
    theirs, _, ours = split_sections(out, "==STOP==")[0].partition("==SFRAME==\n")
    first, _, last = ours.partition("(lldb) sframe-bt -2\n")
    assert frame_names(first) == BT_NAME.findall(theirs) == [
        "wait_forever", "leaf", "inner"], out[-3000:]
    assert re.search(r"^#1  0x[0-9a-f]+ in leaf at inline_chain\.c:26 \[inlined\]$",
                     first, re.M), first
    assert "(More stack frames follow...)" in first
    assert re.findall(r"^#(\d+)\s+0x[0-9a-f]+ in (\w+) ", last, re.M) == [
        ("4", "work"), ("5", "main")], last


def test_each_layout_puts_the_frames_own_facts_on_its_own_line():
    """GDB's layout: the address on the innermost line of a stack frame,
    -v's [inline] on the inlined calls; LLDB's: the address on every line,
    [inlined] on the calls; in both -v's how and -full's registers on the
    function's own line."""
    frames = [Frame(0, 0x1000, {X86_64.sp: 0x7000}),
              Frame(1, 0x2000, {X86_64.sp: 0x7100}, how="sframe", interrupted=False)]
    named = {0x1000: FrameName("work", "a.c", 9, inlined=(FrameName("leaf", "a.c", 3),)),
             0x1fff: FrameName("main", "a.c", 20)}

    def lines(layout, count=None):
        return backtrace_lines(frames, None, count, True, True,
                               lambda frame, pc: named[pc], X86_64, layout)
    assert lines(GdbLayout) == [
        "#0  0x0000000000001000 in leaf at a.c:3  [inline]",
        "#1  work at a.c:9  [innermost]",
        "        sp = 0x7000, fp = <unknown>",
        "#2  0x0000000000002000 in main at a.c:20  [sframe]",
        "        sp = 0x7100, fp = <unknown>"]
    assert lines(LldbLayout) == [
        "#0  0x0000000000001000 in leaf at a.c:3 [inlined]",
        "#1  0x0000000000001000 in work at a.c:9  [innermost]",
        "        sp = 0x7000, fp = <unknown>",
        "#2  0x0000000000002000 in main at a.c:20  [sframe]",
        "        sp = 0x7100, fp = <unknown>"]
    assert lines(LldbLayout, -2)[0] == "#1  0x0000000000001000 in work at a.c:9  [innermost]"
    assert lines(LldbLayout, 1) == ["#0  0x0000000000001000 in leaf at a.c:3 [inlined]",
                                     "(More stack frames follow...)"]
