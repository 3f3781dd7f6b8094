"""sframe-bt through libc in the real gdb, with SFrame rows synthesized from
libc's .eh_frame (Debian 12's libc has no .sframe): stopped in a qsort
comparator, in a thread's function, at abort()'s SIGABRT, at a write
syscall, and in a signal handler for a fault in user code, sframe-bt's PCs
equal GDB's own frames' PCs, every frame down to main or the outermost
frame, libc's included."""

import os
import re
from unittest import mock

import pytest

from gdb_support import compile_program, gdb_pcs, run_gdb, sframe_frames, variant_id

VARIANTS = [("O2", True), ("O0", False)]
SCENARIOS = ("qsort", "thread", "abort", "write", "segv")


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    """gdb writes synthesized sections to a private cache, shared by this
    module's sessions (the first synthesizes libc, the others read it)."""
    home = tmp_path_factory.mktemp("cache")
    with mock.patch.dict(os.environ, {"XDG_CACHE_HOME": str(home)}):
        yield home


def compare(name):
    return [f"echo ==STOP== {name}\\n", "test-gdb-pcs", "sframe-bt -v"]


def session(gdb, program):
    commands = ["set sframe unwinder off",
                "set sframe fallback none", "handle SIGSEGV nostop noprint pass",
                "break stop_here",
                "run qsort", *compare("qsort"), "kill",
                "run thread", *compare("thread"), "kill",
                "delete",
                "run abort", *compare("abort"),
                # GDB's own bt does not use synthesized rows: the same frames
                "set sframe unwinder on", "echo ==UNWINDER-ON==\\n", "test-gdb-pcs",
                "set sframe unwinder off", "kill",
                "catch syscall write",
                "run write", *compare("write"), "kill",
                "run segv", *compare("segv"), "kill",
                "echo ==INFO==\\n", "info sframe"]
    return run_gdb(gdb, [str(program)], commands)


def stack_pcs(text):
    (pcs,) = gdb_pcs(text)
    return pcs


@pytest.fixture(scope="module", params=VARIANTS, ids=variant_id)
def stops(request, gdb, cache_home, tmp_path_factory):
    program = compile_program(tmp_path_factory.mktemp("libc"), "libc_calls",
                              *request.param, ["libc_calls.c"])
    out = session(gdb, program)
    sections = {}
    for chunk in out.split("==STOP== ")[1:]:
        name, _, text = chunk.partition("\n")
        sections[name] = text
    return out, sections


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sframe_bt_equals_gdb_through_libc(stops, scenario):
    out, sections = stops
    assert scenario in sections, out[-3000:]
    text = sections[scenario].split("==")[0]
    theirs = stack_pcs(text)
    frames = sframe_frames(text)
    ours = [pc for _, pc, _ in frames]
    assert ours == theirs, (text, [hex(pc) for pc in theirs])
    # every frame line numbered in turn, inline frames (no address) too
    levels = [int(level) for level in re.findall(r"^#(\d+)\s", text, re.M)]
    assert levels == list(range(len(levels))), text
    assert re.search(r"\[synth, libc\.so[.0-9]*\]", text), text
    # libc's own names need its debug symbols (libc6-dbg): "??" without
    names = [name for _, _, name in frames]
    if scenario == "qsort":
        assert names[:2] == ["stop_here", "compare"]
        assert names[-2:] == ["sort_some", "main"] and len(names) > 5
    elif scenario == "thread":
        assert names[:6] == ["stop_here"] + ["thread_inner"] * 4 + ["worker"]
        assert len(names) == 8  # start_thread, clone3
        assert names[6] in ("start_thread", "??") and names[7] in ("clone3", "??")
        assert "Backtrace stopped: outermost frame" in text
    elif scenario == "abort":
        assert names[-5:] == ["give_up"] * 4 + ["main"]
        assert any("abort" in name for name in names[:-5])
    elif scenario == "write":
        assert names[1:] == ["say"] * 4 + ["main"]
    else:
        assert names[1:3] == ["on_fault", "<signal"]
        assert names[3:] == ["fault"] * 4 + ["main"]
        assert "[signal]" in text


def test_gdb_bt_ignores_synthesized_rows(stops):
    out, sections = stops
    before = stack_pcs(sections["abort"].split("==UNWINDER-ON==")[0])
    after = stack_pcs(out.split("==UNWINDER-ON==")[1].split("==STOP==")[0])
    assert after == before


def test_info_sframe_says_which_modules_use_what(stops):
    out, _ = stops
    info = out.split("==INFO==")[1]
    assert re.search(r"SFrame v1, \d+ FDEs, from file\s+\S*libc_calls", info), info
    assert re.search(r"synthesized from \.eh_frame, \d+ FDEs\s+\S*libc\.so", info), info
