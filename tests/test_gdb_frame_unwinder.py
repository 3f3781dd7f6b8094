"""The SFrame frame unwinder in the real gdb.

- SFrame-only code (.eh_frame and .eh_frame_hdr stripped, .sframe kept):
  GDB alone loses the stack; with the plugin loaded (`set sframe unwinder
  auto`, the default) GDB's own frames at every instruction, stepped one
  by one through a program and a library, equal GDB's frames for the same
  code with its .eh_frame.
- Everywhere GDB has DWARF CFI, `auto` leaves the frames to GDB: `bt`,
  `bt full` and `info frame` print exactly what `gdb -nx` prints, at a tail
  call, at arguments kept in callee-saved registers (@entry values) and at
  a PLT stub.  `on` claims those frames and costs what docs/gdb.md says.
- The setting, its help, and errors that never reach the user.
"""

import subprocess

import pytest

from gdb_support import OPTIMIZATIONS, PROGRAMS, ROOT, run_gdb, strip_eh_frame

STEP_FRAMES = ROOT / "tests" / "gdb_step_frames.py"


def build(directory, optimization, strip):
    """recurse.c and libapply.so (found through $ORIGIN) with SFrame data;
    with ``strip``, both lose .eh_frame and .eh_frame_hdr."""
    directory.mkdir()
    flags = ["-g", "-Wa,--gsframe", *OPTIMIZATIONS[optimization]]
    library = directory / "libapply.so"
    program = directory / "recurse"
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", "-o", str(library),
                    str(PROGRAMS / "libapply.c")], check=True, capture_output=True)
    subprocess.run(["gcc", *flags, "-o", str(program), str(PROGRAMS / "recurse.c"),
                    str(library), "-Wl,-rpath,$ORIGIN"], check=True, capture_output=True)
    if strip:
        for path in (program, library):
            strip_eh_frame(path)
    return program


_BUILT = {}


def program_pair(tmp_path_factory, optimization):
    """(with .eh_frame, SFrame only): the same code at the same addresses,
    in directories whose names have the same length (ld.so's work at run
    time, and so the instructions stepped, depend on the path)."""
    if optimization not in _BUILT:
        root = tmp_path_factory.mktemp(f"sframe-only-{optimization}")
        _BUILT[optimization] = (build(root / "dwarf", optimization, False),
                                build(root / "sfonly", optimization, True))
    return _BUILT[optimization]


@pytest.fixture(params=["O0", "O2"])
def programs(request, tmp_path_factory):
    return program_pair(tmp_path_factory, request.param)


def step_frames(gdb, program, plugin=True, steps=3000, until="main", stop="callback"):
    """GDB's on-stack frames after each of ``steps`` stepi from callback
    (depth 2: callback, with_alloca, memset@plt and ld.so's lazy binding,
    libc's memset, with_vla, stop_here, and back out of main; then the
    C runtime's code, which has no .sframe, runs: ``until`` main has
    returned)."""
    commands = [f"source {STEP_FRAMES}", f"break {stop}", "run 2",
                f"test-step-frames {steps} {until or ''}"]
    out = gdb.run([str(program)], commands, timeout=600, plugin=plugin)
    assert "Traceback" not in out and "Python Exception" not in out, out[-3000:]
    return [line[5:] for line in out.splitlines() if line.startswith("STEP ")]


def test_sframe_only_bt_is_complete_at_every_instruction(gdb, programs):
    with_dwarf, sframe_only = programs
    expected = step_frames(gdb, with_dwarf)
    got = step_frames(gdb, sframe_only)
    assert len(expected) > 500
    innermost = {step.split()[0].split(":")[1] for step in expected}
    # every function of the program and the library, stepped through
    assert {"callback", "with_alloca", "with_vla", "stop_here", "twice", "lib_apply",
            "recurse", "main", "_dl_runtime_resolve_xsavec"} <= innermost, innermost
    for index, (theirs, ours) in enumerate(zip(expected, got)):
        assert ours == theirs, f"step {index}:\n gdb with CFI: {theirs}\n SFrame only: {ours}"
    assert len(got) == len(expected)


def test_sframe_only_plt_entries(gdb, programs):
    """Stepping from lib_apply@plt, the third PLT entry (SFrame v1 gives the
    PLT one FDE whose rows repeat every 16 bytes) into ld.so's resolver."""
    with_dwarf, sframe_only = programs
    expected = step_frames(gdb, with_dwarf, steps=12, stop="lib_apply@plt")
    assert expected[0].split()[0].endswith(":lib_apply@plt")
    assert step_frames(gdb, sframe_only, steps=12, stop="lib_apply@plt") == expected


def test_gdb_alone_loses_sframe_only_frames(gdb, tmp_path_factory):
    """What the plugin fixes: without it, GDB's frames for the SFrame-only
    program built with -O2 -fomit-frame-pointer differ from the real ones
    at many instructions (with frame pointers, -O0, its heuristics cope)."""
    with_dwarf, sframe_only = program_pair(tmp_path_factory, "O2")
    expected = step_frames(gdb, with_dwarf)
    alone = step_frames(gdb, sframe_only, plugin=False, steps=len(expected), until=None)
    wrong = sum(theirs != ours for theirs, ours in zip(expected, alone))
    assert wrong > len(expected) // 2, wrong
    assert any(" 0x0:?? " in step + " " for step in alone)


def test_sframe_only_bt_finish_and_info_frame(gdb, programs):
    _, sframe_only = programs
    out = run_gdb(gdb, [str(sframe_only)], [
        "break stop_here", "run 3", "echo ==BT==\\n", "bt", "echo ==UP==\\n",
        "up 4", "info frame", "frame 0", "echo ==FINISH==\\n", "finish",
        "echo ==DEBUG==\\n", "set sframe debug on"])
    assert "Python Exception" not in out and "Traceback" not in out
    bt = out.split("==BT==\n")[1].split("==UP==")[0]
    names = [line.split(" in ")[1].split(" (")[0] if " in " in line else line.split()[1]
             for line in bt.splitlines() if line.startswith("#")]
    assert names == ["stop_here", "with_vla", "with_alloca", "callback", "twice",
                     "lib_apply", "recurse", "recurse", "recurse", "recurse", "main"]
    up = out.split("==UP==\n")[1].split("==FINISH==")[0]
    assert "twice" in up and "caller of frame at" in up and "called by frame at" in up
    finish = out.split("==FINISH==\n")[1].split("==DEBUG==")[0]
    assert finish.splitlines()[-2].startswith("with_vla (n=4")
    assert "Recent SFrame unwinder errors" not in out.split("==DEBUG==")[1]


def test_sframe_only_unreadable_stack_defers_to_gdb(gdb, programs):
    """A stack pointer into unmapped memory: the unwinder cannot read the
    return address, leaves the frame to GDB and says why under `set sframe
    debug on`; no Python error reaches the user."""
    _, sframe_only = programs
    out = run_gdb(gdb, [str(sframe_only)], [
        "break stop_here", "run 1", "set $sp = 0x10", "set $rbp = 0x10",
        "echo ==BT==\\n", "bt", "echo ==DEBUG==\\n", "set sframe debug on"])
    bt = out.split("==BT==\n")[1].split("==DEBUG==")[0]
    assert bt.startswith("#0  ") and "stop_here" in bt.splitlines()[0]
    assert "Python Exception" not in out and "Traceback" not in out
    assert "Recent SFrame unwinder errors:" in out.split("==DEBUG==")[1]
    assert "Cannot access memory at address 0x" in out.split("==DEBUG==")[1]


def test_sframe_only_library_loaded_with_dlopen(gdb, tmp_path):
    """The program has CFI everywhere, so `auto` has nothing to do when it
    starts; the SFrame-only library dlopen'd later is unwound."""
    flags = ["-g", "-Wa,--gsframe", *OPTIMIZATIONS["O2"]]
    library, program = tmp_path / "libapply.so", tmp_path / "dlopen"
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", "-o", str(library),
                    str(PROGRAMS / "libapply.c")], check=True, capture_output=True)
    strip_eh_frame(library)
    subprocess.run(["gcc", *flags, "-o", str(program), str(PROGRAMS / "dlopen.c")],
                   check=True, capture_output=True)
    commands = ["break main", f"run {library}", "bt", "break stop_here", "continue",
                "echo ==BT==\\n", "bt"]
    ours = run_gdb(gdb, [str(program)], commands).split("==BT==\n")[1]
    alone = gdb.run([str(program)], commands, plugin=False).split("==BT==\n")[1]
    names = [line.split(" in ")[1].split(" (")[0] if " in " in line else line.split()[1]
             for line in ours.splitlines() if line.startswith("#")]
    assert names == ["stop_here", "callback", "twice", "lib_apply", "main"], ours
    assert " in main " not in alone  # GDB alone loses the way after lib_apply


# -- `auto` leaves GDB its own frames ------------------------------------------

STOPS = [
    # a tail call (mid jumps to leaf) and keeper's arguments in callee-saved
    # registers, base@entry=42
    "break stop_here", "run", "echo ==STOP tail call==\\n", "bt", "bt full",
    "up 3", "info frame", "frame 0",
    # a PLT stub, before and after lazy binding
    "delete", "break puts@plt", "continue", "echo ==STOP puts@plt==\\n", "bt",
    "bt full", "stepi", "echo ==STOP puts@plt+6==\\n", "bt", "stepi 4",
    "echo ==STOP lazy binding==\\n", "bt",
    # inside libc, at the write system call
    "delete", "catch syscall write", "continue", "echo ==STOP write==\\n", "bt",
    "echo ==END==\\n",
]


def stops(out):
    sections = {}
    for chunk in out.split("==STOP ")[1:]:
        name, _, text = chunk.partition("==\n")
        sections[name] = text.split("==END==")[0]
    return sections


@pytest.fixture(scope="module")
def entry_values(tmp_path_factory):
    output = tmp_path_factory.mktemp("entry-values") / "entry_values"
    subprocess.run(["gcc", "-g", "-Wa,--gsframe", *OPTIMIZATIONS["O2"], "-o", str(output),
                    str(PROGRAMS / "entry_values.c")], check=True, capture_output=True)
    return output


def test_auto_prints_what_gdb_alone_prints(gdb, entry_values):
    alone = stops(gdb.run([str(entry_values)], STOPS, plugin=False))
    ours = stops(run_gdb(gdb, [str(entry_values)], ["show sframe unwinder"] + STOPS))
    assert list(alone) == ["tail call", "puts@plt", "puts@plt+6", "lazy binding", "write"]
    tail_call = alone["tail call"]
    assert " in mid (" in tail_call and "base=base@entry=42" in tail_call
    assert "puts@plt" in alone["puts@plt"] and "in keeper" in alone["puts@plt"]
    for name, text in alone.items():
        assert ours[name] == text, name


def test_on_costs_tail_call_frames_and_entry_values(gdb, entry_values):
    """What docs/gdb.md says `on` costs, shown: the frames below leaf come
    from SFrame rows, GDB's tail-call frame for mid is gone and keeper's
    arguments, kept in callee-saved registers, are lost."""
    out = run_gdb(gdb, [str(entry_values)], [
        "set sframe unwinder on", "break stop_here", "run", "echo ==BT==\\n", "bt"])
    bt = out.split("==BT==\n")[1]
    assert " in leaf (" in bt and " in keeper (" in bt and " in main ()" in bt
    assert " in mid (" not in bt
    assert "n=<optimized out>, n@entry=5" in bt  # GDB alone: n=n@entry=5


def test_setting_and_help(gdb):
    out = run_gdb(gdb, [], [
        "show sframe unwinder", "set sframe unwinder on", "show sframe unwinder",
        "set sframe unwinder off", "show sframe unwinder", "set sframe unwinder bogus",
        "help set sframe unwinder"])
    assert 'The SFrame frame unwinder is "auto".' in out
    assert 'The SFrame frame unwinder is "on".' in out
    assert 'The SFrame frame unwinder is "off".' in out
    assert 'Undefined item: "bogus".' in out  # on stderr, after the rest
    help_text = out.split('The SFrame frame unwinder is "off".\n')[1]
    assert help_text.startswith("Set when GDB's frames come from SFrame data.\n"
                                "auto  where GDB has no DWARF call-frame information")


def test_sframe_only_program_copied_keeps_its_rows(tmp_path):
    """The objcopy'd program still has its .sframe (the premise of the
    tests above)."""
    program = build(tmp_path / "p", "O2", True)
    sections = subprocess.run(["readelf", "-S", str(program)], capture_output=True,
                              text=True, check=True).stdout
    assert ".sframe" in sections and ".eh_frame" not in sections
