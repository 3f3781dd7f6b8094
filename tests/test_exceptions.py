"""Exception unwinding (issue 31's Must show): stopped at `catch throw`
(in __cxa_throw), in _Unwind_RaiseException, in the personality routine
(__gxx_personality_v0) and at each instruction of a stepi sweep from
there, sframe-bt's PCs equal `bt`'s on every GDB of the matrix.
libstdc++ and libgcc_s have no .sframe: their frames come from rows
synthesized from their CFI."""

import subprocess

import pytest

from gdb_support import PROGRAMS, gdb_pcs, run_gdb, sframe_frames, split_sections

#: instructions stepped from the personality routine's entry, each a stop
SWEEP = 60
STOP = ["echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v"]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    output = tmp_path_factory.mktemp("throwing") / "throwing"
    subprocess.run(["g++", "-O2", "-g", "-Wa,--gsframe", "-o", str(output),
                    str(PROGRAMS / "throwing.cc")], check=True, capture_output=True)
    return output


def test_sframe_bt_equals_bt_while_an_exception_unwinds(gdb, program):
    commands = ["set debuginfod enabled off", "set sframe unwinder off", "break main", "run",
                "catch throw", "break _Unwind_RaiseException",
                "break __gxx_personality_v0", "continue", *STOP, "continue", *STOP,
                "continue", *STOP, "delete"]
    commands += ["stepi", *STOP] * SWEEP
    out = run_gdb(gdb, [str(program)], commands, timeout=600)
    stops = split_sections(out, "==STOP==")
    assert len(stops) == 3 + SWEEP, out[-3000:]
    names = []
    for stop in stops:
        (expected,) = gdb_pcs(stop)
        frames = sframe_frames(stop)
        assert [pc for _, pc, _ in frames] == expected, stop
        assert frames[-1][2].startswith("main"), stop
        names.append([name for _, _, name in frames])
    assert names[0][:2] == ["__cxa_throw", "thrower"], names[0]
    assert names[1][:2] == ["_Unwind_RaiseException", "__cxa_throw"], names[1]
    assert names[2][:3] == ["__gxx_personality_v0", "_Unwind_RaiseException",
                            "__cxa_throw"], names[2]
    # the sweep left the personality routine's first instructions, stayed
    # inside the unwinder
    assert any(name[0] != "__gxx_personality_v0" for name in names[3:]), names
    assert all("__cxa_throw" in name for name in names[3:]), names
