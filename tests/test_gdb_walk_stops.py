"""Issue 11's stops in the real gdb (tests/programs/walk_stops.c, SFrame v1
from the system's gas, libc and ld.so rows synthesized from their
.eh_frame): at each, sframe-bt's PCs equal GDB's own frames' (`gdb -nx`
has the same frames: `set sframe unwinder off`), and where GDB stops
early, sframe-bt stops with a reason instead of raising or hanging.

- `catch syscall rt_sigreturn`: the PC is past the trampoline's last byte;
- a break in the vDSO: rows synthesized from its .eh_frame in memory;
- every instruction of the lazy-binding resolver (_dl_runtime_resolve_xsavec,
  _dl_fixup, the symbol lookup it calls): the caller's CFA is based on rbx,
  which the callee saved;
- `catch syscall clone3`: glibc's CFI has a hole there;
- a return address overwritten with 0: sframe-bt and cbf-save keep the
  frames;
- two signal frames whose saved SPs lead to each other: the walk ends,
  `sframe-bt 3` too, with GDB's `set backtrace limit` honoured."""

import json
import os
import re
from unittest import mock

import pytest

from gdb_support import compile_program, gdb_pcs, run_gdb, sframe_frames

SWEEP = r'''import re
from sfbt_gdb_session import gdb_stack_frames
def sweep(count):
    steps = differ = 0
    for _ in range(count):
        theirs = [pc for pc, _ in gdb_stack_frames()]
        text = gdb.execute("sframe-bt", to_string=True)
        ours = [int(m, 16) for m in re.findall(r"^#\d+\s+(0x[0-9a-f]+)", text, re.M)]
        steps += 1
        if ours != theirs:
            differ += 1
            print("DIFFER", [hex(pc) for pc in theirs], text)
        if gdb.newest_frame().name() == "lazy_case":
            break
        gdb.execute("stepi", to_string=True)
    print(f"SWEEP {steps} {differ}")
'''


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    # Debian's gcc links lazily (no -z now): the first strdup goes through
    # the resolver.
    return compile_program(tmp_path_factory.mktemp("walk_stops"), "walk_stops", "O2",
                           True, ["walk_stops.c"])


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("cache")
    with mock.patch.dict(os.environ, {"XDG_CACHE_HOME": str(home)}):
        yield home


def stop(gdb, program, case, setup, commands=("test-gdb-pcs", "sframe-bt -v")):
    out = run_gdb(gdb, [str(program)],
                  ["set sframe unwinder off", "handle SIGUSR1 nostop noprint",
                   "handle SIGUSR2 nostop noprint", *setup(case),
                   "echo ==STOP==\\n", *commands])
    assert "==STOP==" in out, out[-3000:]
    text = out.split("==STOP==\n", 1)[1]
    assert "Traceback" not in out and "Python Exception" not in out, out
    return text


def same_frames(text):
    (theirs,) = gdb_pcs(text)
    frames = sframe_frames(text)
    assert [pc for _, pc, _ in frames] == theirs, text
    return frames


def test_sigreturn_trampoline_past_its_last_byte(gdb, program, cache_home):
    text = stop(gdb, program, "sigreturn",
                lambda case: ["catch syscall rt_sigreturn", f"run {case}"])
    frames = same_frames(text)
    assert "<signal handler called>" in text.splitlines()[1], text
    assert frames[-1][2] == "main" and "[signal]" in text


def test_vdso_rows_from_its_eh_frame_in_memory(gdb, program, cache_home):
    text = stop(gdb, program, "vdso",
                lambda case: ["break vdso_case", f"run {case}",
                              "break __vdso_clock_gettime", "continue"],
                ("test-gdb-pcs", "sframe-bt -v", "info sframe"))
    frames = same_frames(text)
    assert frames[-1][2] == "main" and len(frames) >= 3
    assert re.search(r"\[synth, system-supplied DSO", text), text
    assert re.search(r"synthesized from \.eh_frame, \d+ FDEs\s+system-supplied DSO", text)


def test_every_instruction_of_the_lazy_binding_resolver(gdb, program, cache_home,
                                                        tmp_path):
    sweep = tmp_path / "sweep.py"
    sweep.write_text(SWEEP)
    text = stop(gdb, program, "lazy",
                lambda case: ["break lazy_case", f"run {case}",
                              "break _dl_runtime_resolve_xsavec", "continue", "delete"],
                [f"source {sweep}", "python sweep(600)"])
    steps, differ = map(int, re.search(r"SWEEP (\d+) (\d+)", text).groups())
    assert steps > 150 and differ == 0, text[-4000:]


def test_clone3_cfi_hole(gdb, program, cache_home):
    text = stop(gdb, program, "clone3",
                lambda case: ["catch syscall clone3", f"run {case}"])
    frames = same_frames(text)
    assert "[ra-at-sp]" in text and frames[-1][2] == "main", text


def test_return_address_zero(gdb, program, cache_home, tmp_path):
    saved = tmp_path / "ra0.json"
    text = stop(gdb, program, "ra0", lambda case: ["break stop_here", f"run {case}"],
                ("test-gdb-pcs", "sframe-bt", f"cbf-save --format json {saved}"))
    frames = same_frames(text)
    assert frames[-1][1] == 0 and len(frames) == 3, text
    assert "Saved 1 backtrace (3 frames)" in text, text
    assert json.loads(saved.read_text())["backtrace"]


def test_signal_frames_leading_to_each_other(gdb, program, cache_home):
    text = stop(gdb, program, "loop", lambda case: ["break stop_here", f"run {case}"],
                ("test-gdb-pcs", "sframe-bt", "echo ==THREE==\\n", "sframe-bt 3",
                 "echo ==LIMIT==\\n", "set backtrace limit 4", "sframe-bt"))
    whole, rest = text.split("==THREE==\n")
    three, limited = rest.split("==LIMIT==\n")
    frames = same_frames(whole)
    assert whole.rstrip().endswith(
        "Backtrace stopped: previous frame identical to this frame (corrupt stack?)")
    assert [level for level, _, _ in sframe_frames(three)] == [0, 1, 2]
    assert three.rstrip().endswith("(More stack frames follow...)")
    assert [pc for _, pc, _ in sframe_frames(limited)] == [pc for _, pc, _ in frames[:4]]
