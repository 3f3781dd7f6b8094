"""sframe-bt in the real gdb lists inline frames as GDB's own `bt` does:
the same function names, frame by frame, at breakpoints on inlined
functions and after `step` into them, on every GDB of the matrix."""

import re

import pytest

from gdb_support import compile_program, run_gdb, split_sections

BT_NAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(", re.M)
MARK, BETWEEN = "==STOP==", "==SFRAME=="
COMPARE = [f"echo {MARK}\\n", "bt", f"echo {BETWEEN}\\n", "sframe-bt"]


@pytest.fixture(scope="module")
def inlined(tmp_path_factory):
    return compile_program(tmp_path_factory.mktemp("gdb-inline"), "inlined", "O2", True,
                           ["inline_chain.c"])


def _names(text):
    return [m[1] for m in re.finditer(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+?)"
                                      r"(?: at | from | \(\)|$)", text, re.M)]


@pytest.mark.parametrize("where", ["steps", "breakpoints"])
def test_inline_frames_as_gdb_bt(gdb, inlined, where):
    if where == "steps":
        commands = ["break work", "run 3 nowait"] + (COMPARE + ["step"]) * 30
    else:
        commands = ["break leaf", "break inner", "break outer", "run 3 nowait"] \
            + (COMPARE + ["continue"]) * 20
    out = run_gdb(gdb, [str(inlined)], ["set sframe unwinder off"] + commands)
    compared = deep = 0
    for section in split_sections(out, MARK):
        theirs, _, ours = section.partition(BETWEEN + "\n")
        expected = BT_NAME.findall(theirs)
        if not expected:
            continue
        shown = _names(ours)
        # to main, as sframe-bt stops there
        expected = expected[:expected.index("main") + 1]
        assert shown == expected, section
        compared += 1
        deep += "work" in shown and shown.index("work") >= 2  # two calls inlined or more
    print(f"{gdb.id} {where}: {compared} stops, names equal to bt's ({deep} in inline calls)")
    assert compared >= 10 and deep >= 5, out[-3000:]


def test_cbf_load_expands_inline_frames(gdb, inlined, tmp_path):
    """An archive saved at a breakpoint in leaf(), inlined three deep, is
    loaded back with the inline frames bt shows."""
    archive = tmp_path / "leaf.sfbt"
    out = run_gdb(gdb, [str(inlined)], [
        "set sframe unwinder off", "break wait_forever", "run 200 nowait",
        f"echo {MARK}\\n", "bt", f"echo {BETWEEN}\\n",
        f"cbf-save {archive}", f"cbf-load {archive}"])
    theirs, _, ours = split_sections(out, MARK)[0].partition(BETWEEN + "\n")
    expected = BT_NAME.findall(theirs)
    assert expected[:6] == ["wait_forever", "leaf", "inner", "outer", "work", "main"], theirs
    assert _names(ours) == expected[:expected.index("main") + 1], ours


def test_counts_include_inline_frames(gdb, inlined):
    """sframe-bt N prints the frames bt N prints, inline frames counted."""
    out = run_gdb(gdb, [str(inlined)], [
        "set sframe unwinder off", "break wait_forever", "run 200 nowait",
        f"echo {MARK}\\n", "bt 3", f"echo {BETWEEN}\\n", "sframe-bt 3",
        f"echo {MARK}\\n", "bt -2", f"echo {BETWEEN}\\n", "sframe-bt -2"])
    first, last = split_sections(out, MARK)[:2]
    theirs, _, ours = first.partition(BETWEEN + "\n")
    assert _names(ours) == BT_NAME.findall(theirs) == ["wait_forever", "leaf", "inner"], first
    assert "(More stack frames follow...)" in ours
    theirs, _, ours = last.partition(BETWEEN + "\n")
    assert _names(ours) == ["work", "main"], last
    assert re.search(r"^#4\s+work at ", ours, re.M), ours


def test_verbose_marks_the_inlined_calls_as_info_frame_does(gdb, inlined):
    """sframe-bt -v marks [inline] the frames GDB's `info frame` says are
    "inlined into" the next (leaf, inner, outer), and says how the frame
    was found on the function's own line (work's), as LLDB's sframe-bt."""
    levels = range(6)
    commands = ["set sframe unwinder off", "break wait_forever", "run 200 nowait",
                f"echo {BETWEEN}\\n", "sframe-bt -v"]
    for level in levels:
        commands += [f"echo {MARK}\\n", f"frame {level}", "info frame"]
    out = run_gdb(gdb, [str(inlined)], commands)
    ours = out.split(BETWEEN + "\n")[1].split(MARK)[0]
    lines = re.findall(r"^#(\d+)\s.*$", ours, re.M)
    assert len(lines) == 6, ours
    marked = [int(level) for level in re.findall(r"^#(\d+)\s.*  \[inline\]$", ours, re.M)]
    inlined_frames = [level for level, section in zip(levels, split_sections(out, MARK))
                      if re.search(r"inlined into frame \d+", section)]
    assert marked == inlined_frames == [1, 2, 3], f"{ours}\n{out[-3000:]}"
    assert re.search(r"^#4\s+work at .*  \[sframe, ", ours, re.M), ours
