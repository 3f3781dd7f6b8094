"""sframe-bt, the frame provider, cbf-save and cbf-load in the real lldb, on
the programs the GDB tests use: sframe-bt's PCs equal LLDB's own bt PCs down
to main."""

import ast
import os
import re
import subprocess

import pytest

from gdb_support import (build_recurse, compile_program, frame0_place, run_gdb,
                         sframe_frames, split_sections, variant_id)
from conftest import ROOT, frame0_rows, run_sfbt
from debuggers import FRAME_PROVIDERS
from lldb_support import frame_names, lldb_pcs, mark, run_lldb, stack_frames
from sfbt.archive import cbf, lws

VARIANTS = [("O0", True), ("O2", False), ("O2", True)]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("lldb-programs")


COMPARE = [mark("STOP"), "test-lldb-pcs", "sframe-bt -v"]


def assert_same_as_lldb(section):
    frames = stack_frames(section)
    (theirs,) = lldb_pcs(section)
    ours = [pc for _, pc, _ in frames]
    assert ours and ours == theirs[:len(ours)], section[-3000:]
    assert frames[-1][2] == "main", section[-2000:]
    return frames


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_recursion_1000_deep(lldb, build_dir, variant):
    program = build_recurse(build_dir, *variant)
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run"] + COMPARE)
    frames = assert_same_as_lldb(split_sections(out, "==STOP==")[-1])
    names = [name for _, _, name in frames]
    assert names.count("recurse") == 1001 and "lib_apply" in names
    assert "[sframe, libapply.so]" in out


@pytest.mark.parametrize("variant", VARIANTS[:2], ids=variant_id)
def test_signal_handler(lldb, build_dir, variant):
    program = compile_program(build_dir, f"signal-{variant_id(variant)}", *variant,
                              ["signal.c"])
    out = run_lldb(lldb, program, ["process handle SIGFPE -s false -p true -n false",
                             "breakpoint set -n stop_here", "run"] + COMPARE)
    frames = assert_same_as_lldb(split_sections(out, "==STOP==")[-1])
    assert [name for _, _, name in frames] == [
        "stop_here", "handler", "<signal", "divide", "compute", "main"]


#: the last address of x86-64 user space
USER_SPACE_END = 0x7fffffffffff


def test_threads(lldb, build_dir):
    program = compile_program(build_dir, "threads", "O2", True, ["threads.c"])
    commands = ["breakpoint set -n stop_here", "run"]
    for thread in range(1, 6):
        commands += [f"thread select {thread}", mark("STOP"),
                     "test-lldb-pcs", "sframe-bt"]
    out = run_lldb(lldb, program, commands)
    sections = split_sections(out, "==STOP==")
    assert len(sections) == 5
    deep = 0
    for section in sections:
        frames = stack_frames(section)
        (theirs,) = lldb_pcs(section)
        ours = [pc for _, pc, _ in frames]
        if lldb.major == 19 and theirs[:len(ours)] != ours:
            # LLDB 19's own unwinder stops early in threads (at
            # create_thread, or at frame 0 in a barrier) or goes on to an
            # address outside user space there: as far as its frames go
            # or make sense they begin ours, which go on to the thread's
            # outermost frame
            agreed = next((n for n, (a, b) in enumerate(zip(theirs, ours)) if a != b),
                          min(len(theirs), len(ours)))
            assert agreed >= 1 and (agreed == len(theirs)
                                    or theirs[agreed] > USER_SPACE_END), section
            assert frames[-1][2] in ("main", "__clone3"), section
        else:
            assert ours and ours == theirs[:len(ours)], section
        deep += "inner" in frame_names(section)
    assert deep >= 1


# What a user does at a stop in recurse 3 (stop_here is reached twice, from
# lib_apply's two callbacks): bt, variables in outer frames, up/down,
# finish, thread step-out and a later stop.
PROVIDER_SESSION = [
    "bt", "frame select 2", "frame variable", "frame select 9", "frame variable",
    "p depth", "register read rbp", "up", "down", "down", "frame select 0",
    "finish", "bt", "thread step-out", "bt 4", "continue", "bt",
    "frame select 2", "frame variable"]


def provider_run(lldb, program, when):
    """The session's output, with the provider turned on ``when`` ("never",
    "before run", "at the stop", "after a bt")."""
    on = ["sframe-provider on"]
    if when != "before run":
        # LLDB prints the stop again when a provider is registered at a
        # stop, from its event thread: let it do so before the session.
        on.append("script import time; time.sleep(1.5)")
    commands = (on if when == "before run" else []) + ["breakpoint set -n stop_here",
                                                       "run 3"]
    commands += on if when == "at the stop" else []
    commands += ["bt"] + (on if when == "after a bt" else [])
    commands += [mark("SESSION")] + PROVIDER_SESSION + [mark("END"), "sframe-provider status"]
    return run_lldb(lldb, program, commands)


def comparable(text):
    """A session's lines, without what differs between runs and with the
    provider on: process ids, [synthetic] marks, LLDB 23's wider margin
    for those marks, the provider's own messages, and the stop that LLDB
    prints again, at some later moment, when a provider is registered."""
    lines, reprint = [], False
    for line in text.split("==SESSION==")[1].split("==END==")[0].splitlines():
        line = re.sub(r"Process \d+", "Process N", line.replace(" [synthetic]", "")).strip()
        if line.startswith("* thread #") and not (
                lines and (lines[-1].startswith("Process N stopped")
                           or lines[-1].startswith(("(lldb) bt", "(lldb) thread backtrace")))):
            reprint = True
            continue
        if (reprint or not lines) and re.match(r"(frame #0: |\d+ |-> |\^|$)", line):
            continue
        reprint = False
        lines.append(line)
    return lines


@pytest.mark.parametrize("when", ["before run", "at the stop", "after a bt"])
@pytest.mark.parametrize("variant", [("O0", True), ("O2", True)], ids=variant_id)
def test_provider_frames_behave_like_lldbs_own(provider_lldb, build_dir, variant, when):
    program = build_recurse(build_dir, *variant)
    plain = provider_run(provider_lldb, program, "never")
    provided = provider_run(provider_lldb, program, when)
    assert "Traceback" not in provided and "error: " not in comparable(provided)
    assert comparable(provided) == comparable(plain)
    if variant[0] == "O0":  # the variables LLDB finds with its frame base
        assert "(int) depth = 3" in plain and "(int) n = 1" in plain
    assert "stop reason = step out" in plain
    # the provider made the frames: the SFrame walk agreed with LLDB's own
    status = provided.split("sframe-provider status")[-1]
    counts = re.search(r"thread #1: (\d+) frames from SFrame data; (\d+) of LLDB's own "
                       r"frames, 0 synthetic", status)
    assert counts and int(counts[1]) >= 10, status


def test_provider_bt_all_on_threads_returns(provider_lldb, build_dir):
    # LLDB 22 and 23 hang in `bt all` when a provider is registered at a
    # stop of several threads; turned on before `run`, it works.  (Twice at
    # one stop: the four threads may all report the breakpoint at once, so
    # a `continue` may end the process instead of stopping again.)
    program = compile_program(build_dir, "threads", "O2", True, ["threads.c"])
    commands = ["sframe-provider on", "breakpoint set -n stop_here", "run",
                mark("ALL"), "bt all", "bt all", mark("EACH")]
    for thread in range(1, 6):
        commands += [f"thread select {thread}", mark("THREAD"), "test-lldb-pcs", "sframe-bt"]
    out = run_lldb(provider_lldb, program, commands + ["sframe-provider status"], timeout=120)
    every = out.split("==ALL==")[1].split("==EACH==")[0]
    assert every.count("(lldb) bt all") == 2 and every.count("thread #5") >= 2
    sections = split_sections(out.split("==EACH==")[1], "==THREAD==")
    assert len(sections) == 5
    for section in sections:
        (provided,) = lldb_pcs(section)
        ours = [pc for _, pc, _ in stack_frames(section)]
        assert ours and provided[:len(ours)] == ours, section
    assert "thread #5: " in out.split("sframe-provider status")[-1]


def test_provider_refuses_a_stop_of_several_threads(provider_lldb, build_dir):
    program = compile_program(build_dir, "threads", "O2", True, ["threads.c"])
    out = run_lldb(provider_lldb, program, ["breakpoint set -n stop_here", "run",
                                   "sframe-provider on"], timeout=120)
    assert ("sframe-provider: not turned on: the process has 5 threads, and LLDB "
            "hangs in `bt all`") in out


#: LLDB's bt line: ``frame #2: 0x... prog`caller(n=3) at file.c:12:5 [synthetic]``
BT_LINE = re.compile(r"frame #\d+: 0x[0-9a-f]+ [^`\s]+`([^\s(]+)\S*(?: at ([^\s:]+):(\d+))?(.*)$",
                     re.M)


def test_provider_frames_carry_the_calls_line(provider_lldb, build_dir):
    """Frames only SFrame data finds (past sframe_only.S's frame, which
    LLDB's own unwinder loses) are the provider's own: named and given the
    line of the call, looked up at the return address less one, as LLDB's
    own frames are (not the next line, nor the inlined call_init that
    starts after __libc_start_main_impl's call)."""
    program = compile_program(build_dir, "sframe_only", "O0", True,
                              ["sframe_only.c", "sframe_only.S"])
    source = (ROOT / "tests" / "programs" / "sframe_only.c").read_text().splitlines()
    call_line = {name: str(source.index(next(line for line in source
                                             if f"/* {name}'s call */" in line)) + 1)
                 for name in ("caller", "main")}
    out = run_lldb(provider_lldb, program, ["sframe-provider on", "breakpoint set -n stop_here",
                                   "run", mark("BT"), "bt", mark("SFRAME"), "sframe-bt"])
    theirs, ours = out.split("==BT==")[1].split("==SFRAME==")
    frames = BT_LINE.findall(theirs.split("(lldb) bt")[1])
    names = [name for name, _, _, _ in frames]
    assert names[:4] == ["stop_here", "sframe_only_frame", "caller", "main"], theirs
    assert frame_names(ours) == names[:4], ours
    for name, path, line, rest in frames[2:4]:
        assert "[synthetic]" in rest and (path, line) == ("sframe_only.c", call_line[name]), \
            theirs
    assert "__libc_start_main_impl" in names and "call_init" not in names, theirs


def test_provider_command_errors(lldb):
    out = run_lldb(lldb, "", ["sframe-provider", "sframe-bt"])
    assert "usage: sframe-provider on|off|status" in out
    assert "error:" in out and "Traceback" not in out
    if lldb.major < FRAME_PROVIDERS:
        out = run_lldb(lldb, "", ["sframe-provider on"])
        assert (f"error: sframe-provider needs LLDB 22 or newer (this is LLDB {lldb.major})"
                in out), out


def test_without_pyelftools_sframe_bt_walks_to_main(lldb, without_pyelftools, build_dir):
    # The plugin reads symbols, line programs, inline entries and CFI
    # itself: pyelftools is a test dependency only.
    program = build_recurse(build_dir, "O2", True)
    out = run_lldb(lldb, program, [
        "script import importlib.util as u; print('ELFTOOLS-AT', u.find_spec('elftools').origin)",
        "breakpoint set -n stop_here", "run 3"] + COMPARE, environment=without_pyelftools)
    hidden = os.path.join(without_pyelftools["PYTHONPATH"], "elftools", "__init__.py")
    assert f"ELFTOOLS-AT {hidden}" in out, out
    assert "Traceback" not in out, out
    frames = assert_same_as_lldb(split_sections(out, "==STOP==")[-1])
    names = [name for _, _, name in frames]
    assert names[0] == "stop_here" and names.count("recurse") == 4, out[-3000:]


def test_cbf_archives_cross_between_lldb_and_gdb(lldb, gdb, build_dir, tmp_path):
    program = build_recurse(build_dir, "O2", True)
    from_lldb, from_gdb = tmp_path / "lldb.sfbt", tmp_path / "gdb.sfbt"
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run 12",
                             mark("BT"), "sframe-bt",
                             f"cbf-save {from_lldb}", mark("LOAD"),
                             f"cbf-load {from_lldb}"])
    lldb_bt = out.split("==BT==")[1].split("==LOAD==")[0]
    lldb_frames = stack_frames(lldb_bt)
    assert "Saved 1 backtrace" in out
    gdb_out = run_gdb(gdb, [str(program)], ["break stop_here", "run 12",
                                       "echo ==BT==\\n", "sframe-bt", f"cbf-save {from_gdb}",
                                       "echo ==LOAD==\\n", f"cbf-load {from_lldb}"])
    gdb_frames = sframe_frames(gdb_out.split("==BT==")[1].split("==LOAD==")[0])
    gdb_loaded = sframe_frames(gdb_out.split("==LOAD==")[1])
    assert [pc for _, pc, _ in lldb_frames] == [pc for _, pc, _ in gdb_frames]
    assert [(pc, name) for _, pc, name in gdb_loaded] == [
        (pc, name) for _, pc, name in gdb_frames]
    out = run_lldb(lldb, program, [mark("LOAD"), f"cbf-load {from_gdb}"])
    loaded = out.split("==LOAD==")[1]
    assert [pc for _, pc, _ in stack_frames(loaded)] == [pc for _, pc, _ in gdb_frames]
    assert frame_names(loaded) == frame_names(lldb_bt)


def test_ten_thousand_frames(lldb, build_dir):
    program = build_recurse(build_dir, "O2", True)
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run 10000",
                             mark("BT"), "sframe-bt -3"])
    frames = stack_frames(out.split("==BT==")[1])
    # stop_here ... lib_apply (6 frames), 10,001 x recurse, main
    assert [level for level, _, _ in frames] == [10005, 10006, 10007]
    assert frames[-1][2] == "main"


def test_bare_cbf_of_a_pie_program_names_no_function_after_the_last(lldb, build_dir,
                                                                    tmp_path):
    # A bare .cbf has no image map: a PIE program's run-time addresses are
    # not addresses of its file, and no function covers them (_fini, the
    # last symbol, has no size).
    from conftest import run_sfbt
    from sfbt.symbols.symbolizer import FileSymbolizer

    program = build_recurse(build_dir, "O2", True)
    saved = tmp_path / "bare.cbf"
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run 3",
                                   f"cbf-save --format cbf {saved}", mark("LOAD"),
                                   f"cbf-load {saved}"])
    loaded = sframe_frames(out.split("==LOAD==")[1])
    decoded = sframe_frames(run_sfbt("cbf", "decode", "--exe", str(program),
                                     str(saved)).stdout)
    assert len(decoded) == len(loaded) == 11
    assert [name for _, _, name in decoded] == ["??"] * 11
    assert [pc for _, pc, _ in decoded] == [pc for _, pc, _ in loaded]
    listed = subprocess.run(["nm", str(program)], check=True, capture_output=True,
                            text=True).stdout.split("\n")
    address = {fields[2]: int(fields[0], 16) for fields in map(str.split, listed)
               if len(fields) == 3}
    symbols = FileSymbolizer.open(str(program))
    try:
        assert symbols.function(address["_fini"]) == "_fini"
        assert symbols.function(address["_fini"] + 0x1000) is None
        assert symbols.function(address["recurse"] + 4) == "recurse"
    finally:
        symbols.close()


def test_provider_plan_keeps_lldbs_frames_while_they_agree(lldb):
    out = run_lldb(lldb, "", ["test-provider-plans"])
    assert "PLAN-AGREEING [0, 1, 2, 3, 4, 5]" in out, out
    # the provider's own frames at their lookup PCs (a return address less one)
    assert ("PLAN-PARTING [0, 1, 2, {'idx': 3, 'pc': 12287}, {'idx': 4, 'pc': 16383}]"
            in out), out


def test_help_speaks_of_lldbs_own_settings(lldb):
    out = run_lldb(lldb, "", ["help sframe-bt", "sframe-settings set fallback none",
                              "sframe-settings show fallback"])
    assert "(`sframe-settings set fallback fp|none`)" in out
    assert "`sframe-settings set backtrace-limit N`" in out
    assert "See also: sframe-info, sframe-settings, sframe-provider." in out
    assert "set sframe" not in out and "past-main" not in out
    assert "Where SFrame has no data, sframe-bt falls back to: none." in out


COMPLETE = ("script line = {!r}; found = lldb.SBStringList(); "
            "lldb.debugger.GetCommandInterpreter().HandleCompletion("
            "line, len(line), 0, -1, found); "
            "print('FOUND', [found.GetStringAtIndex(i) for i in range(found.GetSize())])")


def completions(lldb, lines):
    """What LLDB offers at the end of each line: its list of matches
    (after the common part it adds)."""
    out = run_lldb(lldb, "", [COMPLETE.format(line) for line in lines])
    found = [ast.literal_eval(line[len("FOUND "):]) for line in out.splitlines()
             if line.startswith("FOUND")]
    assert len(found) == len(lines), out
    return [matches[1:] for matches in found]


def test_cbf_save_completes_options_formats_and_files(lldb, tmp_path):
    """cbf-save is a parsed command: LLDB completes its options and the
    formats; file names come from its own completer (LLDB 20 and newer);
    cbf-load's file name from LLDB's."""
    (tmp_path / "saved.sfbt").write_bytes(b"")
    options, formats, json, files, loaded = completions(lldb, [
        "cbf-save --", "cbf-save --format ", "cbf-save --append -f j",
        f"cbf-save --append {tmp_path}/s", f"cbf-load {tmp_path}/s"])
    assert options == ["--all-threads", "--append", "--format", "--label"]
    assert formats == ["archive", "cbf", "json", "lws"]
    assert json == ["json"]
    assert loaded == [f"{tmp_path}/saved.sfbt"]
    assert files == (loaded if lldb.major >= 20 else [])


def test_cbf_save_hands_its_options_to_the_core(lldb, build_dir, tmp_path):
    program = compile_program(build_dir, "threads", "O2", True, ["threads.c"])
    saved = tmp_path / "all.sfbt"
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run",
                                   f"cbf-save -t --label 'two words' {saved}",
                                   "cbf-save --format bogus x"])
    assert "Saved 5 backtraces" in out and f"to {saved} (archive)." in out, out
    assert "cbf-save: unknown format 'bogus' (one of archive, cbf, json, lws)" in out
    decoded = run_sfbt("cbf", "decode", saved)
    assert decoded.stdout.count("label 'two words'") == 5, decoded.stdout


def test_cbf_save_writes_every_format_and_cbf_load_reads_them(lldb, build_dir, tmp_path):
    """cbf-save in each format, then cbf-load of each loadable one, give
    sframe-bt's frames (LLDB 19 hands a parsed command its arguments as
    SBStructuredData items, not strings)."""
    program = build_recurse(build_dir, "O0", True)
    files = {form: tmp_path / f"trace.{form}" for form in ("archive", "cbf", "json", "lws")}
    commands = ["breakpoint set -n stop_here", "run 20", mark("BT"), "sframe-bt", mark("SAVE")]
    commands += [f"cbf-save --format {form} {path}" for form, path in files.items()]
    commands += [f"cbf-save --append {files['archive']}"]
    for form in ("archive", "cbf", "json"):
        commands += [mark("LOAD"), f"cbf-load {files[form]}"]
    out = run_lldb(lldb, program, commands)
    assert "Traceback" not in out and "error:" not in out, out[-3000:]
    frames = stack_frames(out.split("==BT==")[1].split("==SAVE==")[0])
    pcs = [pc for _, pc, _ in frames]
    assert len(pcs) > 20 and frames[-1][2] == "main"
    saved = out.split("==SAVE==")[1].split("==LOAD==")[0]
    assert saved.count(f"Saved 1 backtrace ({len(pcs)} frames)") == 5, saved
    assert [f.address for f in cbf.decode(files["cbf"].read_bytes()).frames] == pcs
    (line,) = files["lws"].read_text().splitlines()
    assert lws.decode_blob(line)[0] == [pcs[0] + 1] + pcs[1:31]
    archive, bare, json_form = split_sections(out, "==LOAD==")
    assert "Backtrace 1, captured 2 times " in archive, archive
    for loaded in (archive, bare, json_form):
        assert [pc for _, pc, _ in stack_frames(loaded)] == pcs, loaded


#: LLDB's bt's frame #0: ``frame #0: 0x... prog`f(n=3) at file.c:14:5``
BT_FRAME0_PLACE = re.compile(r"frame #0: .* at ([^\s:]+):(\d+)")


def test_frame0_of_a_saved_trace_is_at_the_line_bt_shows(lldb, build_dir, tmp_path):
    """cbf-load, with no target, with the program as target and with it
    running, shows frame #0 at the FILE:LINE LLDB's bt showed where it was
    saved: looked up at its PC, by the row LLDB takes where an address
    has several (the last: at wait_forever's breakpoint, not GDB's) and
    with the file's base name, as LLDB shows them."""
    # the stops of test_gdb_archive's test of the same name, in LLDB's words
    program = compile_program(build_dir, "chain", "O2", True, ["inline_chain.c"])
    archives = [tmp_path / "entry.sfbt", tmp_path / "line.sfbt"]
    loads = [command for archive in archives
             for command in (mark("LOAD"), f"cbf-load {archive}")]
    out = run_lldb(lldb, program, [
        "breakpoint set -n wait_forever", "run 200", mark("BT"), "bt 1",
        f"cbf-save {archives[0]}", "breakpoint set -f inline_chain.c -l 16", "continue",
        mark("BT"), "bt 1", f"cbf-save {archives[1]}"] + loads)
    shown = [frame0_place(section, BT_FRAME0_PLACE)
             for section in split_sections(out, "==BT==")]
    at_entry, at_line = (frame0_rows(archive, program, "lldb") for archive in archives)
    assert frame0_rows(archives[0], program, "gdb")[0] != at_entry[0]  # GDB's row is another
    assert at_line[0] != at_line[1], at_line  # PC - 1 is another line's
    assert [number for _, number in shown] == [at_entry[0].line, at_line[0].line]
    running = split_sections(out, "==LOAD==")
    not_running = split_sections(run_lldb(lldb, program, loads), "==LOAD==")
    no_target = split_sections(run_lldb(lldb, "", loads), "==LOAD==")
    for loaded in (running, not_running, no_target):
        assert [frame0_place(section) for section in loaded] == shown, loaded


def test_a_stop_in_a_signal_handler_reads_back_as_sframe_bt_printed_it(lldb, build_dir,
                                                                      tmp_path):
    """cbf-load, in the session that saved at a stop in a signal handler,
    with the program as target and with no target, prints the frames
    sframe-bt printed there, the kernel's signal trampoline (saved as a
    return address directly followed by the PC the signal interrupted)
    as `<signal handler called>`, not as the symbol one byte before it."""
    program = compile_program(build_dir, "signal-O2-pie", "O2", True, ["signal.c"])
    archive = tmp_path / "signal.sfbt"
    load = [mark("LOAD"), f"cbf-load {archive}"]
    out = run_lldb(lldb, program, ["process handle SIGFPE -s false -p true -n false",
                                   "breakpoint set -n stop_here", "run", mark("BT"),
                                   "sframe-bt", f"cbf-save {archive}"] + load)
    frame_line = re.compile(r"^#\d+ .*$", re.M)
    shown = frame_line.findall(split_sections(out, "==BT==")[0].split("==LOAD==")[0])
    assert len(shown) == 6, out[-3000:]
    assert re.fullmatch(r"#2  0x[0-9a-f]{16} in <signal handler called>", shown[2]), shown
    loads = [split_sections(out, "==LOAD==")[0]]
    loads += [split_sections(run_lldb(lldb, target, load), "==LOAD==")[0]
              for target in (program, "")]
    for loaded in loads:
        assert frame_line.findall(loaded) == shown, loaded


def test_sframe_bt_says_in_one_warning_what_a_limit_left_out(lldb, tmp_path):
    """A program whose DWARF has calls inlined 300 deep over main: LLDB's
    sframe-bt shows 256 of them and one warning naming the file and the
    unit (before the bounds, every call, without a word)."""
    import crafted_dwarf
    program = crafted_dwarf.program_with_deep_chain(tmp_path, 300)
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run", "sframe-bt"],
                   timeout=120)
    warnings = [line for line in out.splitlines() if "warning: sfbt: " in line]
    assert len(warnings) == 1, out[-3000:]
    assert f"{program}: .debug_info+0x0: inlined calls nested deeper than 256 left out" \
        in warnings[0], out[-3000:]
    assert len(re.findall(r"^#\d+ +0x[0-9a-f]+ in f ", out, re.M)) == 256, out[-3000:]
    assert re.search(r"^#257 +0x[0-9a-f]+ in main at a\.c:5$", out, re.M), out[-3000:]
