"""Programs only partly covered by .sframe (an object assembled without
--gsframe linked in, a static program whose libc objects have none, C++
functions binutils 2.40 gives no SFrame entry): the rule is per PC, the
file's own SFrame row where one covers the PC, else its CFI's.  sfbt
stack equals GDB's `thread apply all bt` in PCs for every thread, sframe-bt
equals bt (GDB and LLDB), and `sfbt sframe lookup` prints the CFI row where .sframe has
none."""

import re
import subprocess

import pytest

import live_harness as harness
from gdb_support import PROGRAMS, gdb_pcs, run_gdb, sframe_frames, split_sections
from lldb_support import lldb_pcs, mark, run_lldb, stack_frames


def _build(directory, name, *link_flags):
    """partly_sframe.c with --gsframe, partly_sframe_middle.c without."""
    objects = []
    for source, flags in (("partly_sframe.c", ["-Wa,--gsframe"]),
                          ("partly_sframe_middle.c", [])):
        output = directory / (source[:-2] + ".o")
        subprocess.run(["gcc", "-O2", "-g", *flags, "-c", str(PROGRAMS / source),
                        "-o", str(output)], check=True)
        objects.append(str(output))
    program = directory / name
    subprocess.run(["gcc", "-pthread", *link_flags, *objects, "-o", str(program)], check=True)
    return program


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("partly")
    return {"dynamic": _build(directory, "partly"),
            "static": _build(directory, "partly_static", "-static")}


def _args_size_build(directory, optimization):
    """args_size.cc: caller()'s CFI has DW_CFA_GNU_args_size (its pushed
    arguments to a call that may throw, at -O0 and -O2) and gas gave it no
    SFrame entry (checked)."""
    program = directory / f"args_size{optimization}"
    subprocess.run(["g++", optimization, "-g", "-Wa,--gsframe", str(PROGRAMS / "args_size.cc"),
                    "-o", str(program)], check=True)
    frames = subprocess.run(["readelf", "--debug-dump=frames", str(program)],
                            capture_output=True, text=True, check=True).stdout
    assert "DW_CFA_GNU_args_size" in frames
    caller = _symbol(program, "_Z6calleri")
    sframe = subprocess.run(["objdump", "--sframe", str(program)],
                            capture_output=True, text=True, check=True).stdout
    assert f"pc = {caller:#x}" not in sframe and "func idx" in sframe
    return program


@pytest.fixture(scope="module")
def args_size_program(tmp_path_factory):
    return _args_size_build(tmp_path_factory.mktemp("args_size"), "-O0")


@pytest.fixture(scope="module")
def args_size_optimized(tmp_path_factory):
    return _args_size_build(tmp_path_factory.mktemp("args_size"), "-O2")


def _symbol(program, name):
    symbols = subprocess.run(["nm", str(program)], capture_output=True, text=True,
                             check=True).stdout
    (address,) = [int(line.split()[0], 16) for line in symbols.splitlines()
                  if line.split()[-1] == name]
    return address


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_stack_equals_gdbs_for_every_thread(gdb, programs, kind, tmp_path):
    """Before: the dynamic program's threads stopped at middle ("no unwind
    data"), the static one's at pause in libc."""
    walks = harness.LiveWalks()
    comparison = harness.Comparison()
    with harness.Started([programs[kind]]) as running:
        stacks = harness.stopped_comparison(gdb.command, running.pid, walks, tmp_path,
                                            comparison, numbers=gdb.major == 13)
    assert comparison.threads == 3
    assert comparison.equal == 3 and not comparison.differences, \
        "\n\n".join(comparison.differences)
    assert all(len(stack.pcs) >= 4 for stack in stacks.values())


def test_sframe_bt_equals_bt_through_the_function_without_sframe(gdb, programs):
    out = run_gdb(gdb, [str(programs["dynamic"])],
                  ["set sframe unwinder off", "set sframe fallback none",
                   "break innermost", "run", "echo ==STOP==\\n", "test-gdb-pcs",
                   "sframe-bt -v"])
    section = split_sections(out, "==STOP==")[0]
    (expected,) = gdb_pcs(section)
    frames = sframe_frames(section)
    assert [pc for _, pc, _ in frames] == expected, section
    names = [name for _, _, name in frames]
    assert names[:2] == ["innermost", "middle"] and names[2] in ("main", "thread_main")
    # (a frame's tag: the rows that found it, here middle's from its CFI)
    assert re.search(r"^#2 .*$", section, re.M)[0].endswith("[synth, partly]"), section


def test_lldb_sframe_bt_equals_bt_through_the_function_without_sframe(lldb, programs):
    out = run_lldb(lldb, programs["dynamic"],
                   ["breakpoint set -n innermost", "run", mark("STOP"),
                    "test-lldb-pcs", "sframe-bt -v"])
    section = split_sections(out, "==STOP==")[-1]
    (theirs,) = lldb_pcs(section)
    frames = stack_frames(section)
    ours = [pc for _, pc, _ in frames]
    names = [name for _, _, name in frames]
    # whichever of main and the thread reaches innermost first stops (a
    # race): sframe-bt in LLDB ends at main, as bt does in GDB, where
    # LLDB's frames go on to _start; in the thread both end at clone3
    assert len(ours) >= 3 and ours == theirs[:len(ours)], section[-3000:]
    assert names[-1] == "main" or ours == theirs, section[-3000:]
    assert names[:2] == ["innermost", "middle"], section[-3000:]
    assert re.search(r"^#2 .*$", section, re.M)[0].endswith("[synth, partly]"), section


def test_sframe_bt_at_the_entry_of_an_args_size_function(gdb, args_size_program):
    """Stopped after caller()'s first instruction (push %rbp): before, the
    frame-pointer guess skipped main."""
    out = run_gdb(gdb, [str(args_size_program)],
                  ["set sframe unwinder off", "break *caller+1", "run",
                   "echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v"])
    section = split_sections(out, "==STOP==")[0]
    (expected,) = gdb_pcs(section)
    frames = sframe_frames(section)
    # both stop at C++'s main, named as GDB's bt names them (its symbols'
    # print names are "caller(int)" and "main(int, char**)")
    assert [pc for _, pc, _ in frames] == expected, section
    assert [name for _, _, name in frames][:2] == ["caller", "main"], section


#: instructions stepped from the entry of caller() at -O2: its frame set
#: up, four arguments pushed, the call, into many()
ARGS_SIZE_STEPS = 14


def test_sframe_bt_through_an_optimized_args_size_function(gdb, args_size_optimized):
    """At each instruction of caller() at -O2 (no SFrame entry: rows from
    its .eh_frame, whose DW_CFA_GNU_args_size follows the pushes) and
    into many(), sframe-bt's PCs equal bt's: no caller skipped."""
    stop = ["echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v"]
    out = run_gdb(gdb, [str(args_size_optimized)],
                  ["set sframe unwinder off", "break *_Z6calleri", "run", *stop]
                  + ["stepi", *stop] * ARGS_SIZE_STEPS)
    sections = split_sections(out, "==STOP==")
    assert len(sections) == ARGS_SIZE_STEPS + 1, out[-3000:]
    tags = []
    for section in sections:
        (expected,) = gdb_pcs(section)
        frames = sframe_frames(section)
        assert [pc for _, pc, _ in frames] == expected, section
        assert frames[-1][2] == "main", section
        tags.append(re.search(r"^#1 .*$", section, re.M)[0])
    # main found through caller()'s CFI rows while stopped in it, then
    # caller() found below many()
    assert all(" in main " in tag and tag.endswith("[synth, args_size-O2]")
               for tag in tags[:12]), tags
    assert all(" in caller " in tag for tag in tags[12:]), tags


def test_lookup_prints_the_cfi_row_where_sframe_has_none(programs):
    program = programs["dynamic"]
    middle, innermost = _symbol(program, "middle"), _symbol(program, "innermost")
    # middle: sub $0x48, %rsp first
    result = harness.sfbt_command("sframe", "lookup", program, hex(middle + 4),
                                  hex(innermost))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{middle + 4:#x}: sp+80 u f (from CFI: .eh_frame)",
        f"{innermost:#x}: sp+8 u u"], result.stdout
