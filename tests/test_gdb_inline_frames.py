"""GDB's `bt` through the SFrame frame unwinder where frame #0 is an inline
frame: an SFrame-only program (.eh_frame stripped) built -O2, whose small
functions are inlined into their callers and scheduled into the callers'
prologues, so that the row at the PC where execution stopped often differs
from the row one byte before.  The real frame below the inline frames is
where execution stopped: its row is the one at its PC, as for frame #0.
At breakpoints on inlined functions, after `step` into them, and at every
instruction of a stepi sweep, GDB's frames with the plugin equal `gdb -nx`'s
on the same program with its .eh_frame, and none is garbage.  So do the
frames where a signal interrupted expression's first instructions (the
frame above the signal trampoline is unwound by the row at its PC too),
and those after `stepi N`, which stops N times with no event before the
last: nothing read from the stack at one of those stops is kept."""

import subprocess

import pytest

from gdb_support import OPTIMIZATIONS, PROGRAMS, ROOT, strip_eh_frame

INLINE_FRAMES = ROOT / "tests" / "gdb_inline_frames.py"


@pytest.fixture(scope="module")
def inlined(tmp_path_factory):
    """(with .eh_frame, SFrame only): the same code at the same addresses."""
    root = tmp_path_factory.mktemp("inlined")
    built = []
    for name in ("dwarf", "sfonly"):
        (root / name).mkdir()
        program = root / name / "inlined"
        subprocess.run(["gcc", "-g", "-Wa,--gsframe", *OPTIMIZATIONS["O2"], "-o",
                        str(program), str(PROGRAMS / "inlined.c")],
                       check=True, capture_output=True)
        built.append(program)
    strip_eh_frame(built[1])
    return built


# Breakpoints on inlined functions (one location per inlined copy), `step`
# into an inlined function at each; then, run again, a stepi sweep from
# expression's first instruction until main returns.
STOPS = ["set print frame-arguments none", "break peek", "break number", "run"]
for _ in range(10):
    STOPS += ["echo ==BT==\\n", "bt", "test-frames", "step", "echo ==BT==\\n", "bt",
              "test-frames", "continue"]
STOPS += ["delete", "break expression", "run", "delete", "test-stepi-frames 3000 main"]


def frames(gdb, program, plugin, commands=STOPS):
    out = gdb.run([str(program)], [f"source {INLINE_FRAMES}", *commands], timeout=600,
                  plugin=plugin)
    assert "Traceback" not in out and "Python Exception" not in out, out[-3000:]
    bts = [chunk.split("\nFRAMES ")[0] for chunk in out.split("==BT==\n")[1:]]
    return bts, [line[7:] for line in out.splitlines() if line.startswith("FRAMES ")]


def test_inline_frame_zero_bt_equals_gdb_with_cfi(gdb, inlined):
    with_dwarf, sframe_only = inlined
    expected_bts, expected = frames(gdb, with_dwarf, plugin=False)
    bts, got = frames(gdb, sframe_only, plugin=True)
    assert len(expected_bts) == 20 and len(expected) > 500
    # the premise: stops in inline frames, and frames above them
    inline_stops = [f for f in expected if f.split()[0].split(":")[1] in ("peek", "number")]
    assert len(inline_stops) > 100
    assert all(" in main " in bt for bt in expected_bts), expected_bts[0]
    for index, (theirs, ours) in enumerate(zip(expected_bts, bts)):
        assert ours == theirs, f"stop {index}:\n gdb with CFI:\n{theirs}\n SFrame only:\n{ours}"
    garbage = [f for f in got if "??" in f or "error:" in f]
    assert not garbage, garbage[:5]
    for index, (theirs, ours) in enumerate(zip(expected, got)):
        assert ours == theirs, f"stepi {index}:\n gdb with CFI: {theirs}\n SFrame only: {ours}"
    assert len(got) == len(expected)


# SIGUSR1 delivered at each of expression's first instructions, on_signal
# stopped in.
SIGNALS = ["break expression", "break on_signal"]
for count in range(14):
    SIGNALS += ["run", f"stepi {count}", "signal SIGUSR1", "test-frames"]


def test_frames_a_signal_interrupted_equal_gdb_with_cfi(gdb, inlined):
    with_dwarf, sframe_only = inlined
    _, expected = frames(gdb, with_dwarf, False, SIGNALS)
    _, got = frames(gdb, sframe_only, True, SIGNALS)
    assert len(expected) == 14
    assert all(f.split()[1].endswith(":__restore_rt") and f.endswith(":main")
               for f in expected), expected
    assert any(f.split()[2].endswith(":peek") for f in expected)  # inline, interrupted
    assert got == expected


def test_frames_after_stepi_counts_equal_gdb_with_cfi(gdb, inlined):
    with_dwarf, sframe_only = inlined
    commands = ["break expression", "run", "delete"]
    for count in (3, 5, 7, 11) * 12:
        commands += [f"stepi {count}", "test-frames"]
    _, expected = frames(gdb, with_dwarf, False, commands)
    _, got = frames(gdb, sframe_only, True, commands)
    assert len(expected) > 40
    assert any(":stop_here " in f for f in expected)  # stepped into a call
    assert got == expected
