"""cbf-save and cbf-load in the real gdb, and the archive tools outside it:
a backtrace saved in one session reads back the same in another session, in
`sfbt cbf decode` and as folded stacks."""

import base64
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import PLUGIN, frame0_rows, run_sfbt
from gdb_support import (compile_library, compile_program, frame0_place, run_gdb,
                         sframe_frames, split_sections)
from sfbt.archive import cbf, lws
from sfbt.archive.store import read_archive
from sfbt.archive.imagemap import decode_image_map


def base_name(name):
    """leaf.constprop.0 (ELF symbol) and leaf (DWARF) name one function."""
    return name.split(".")[0]


@pytest.fixture(scope="module")
def saved(gdb, tmp_path_factory):
    """One gdb session that stops 20 calls deep and saves in every format."""
    out_dir = tmp_path_factory.mktemp("archive")
    library = compile_library(out_dir, "libapply.so", "O2", ["libapply.c"])
    program = compile_program(out_dir, "recurse", "O2", True, ["recurse.c"], [library])
    files = {name: out_dir / name for name in ("trace.sfbt", "trace.cbf", "trace.json",
                                               "trace.lws")}
    out = run_gdb(gdb, [str(program)], [
        "break stop_here", "run 20", "echo ==BT==\\n", "sframe-bt", "echo ==SAVE==\\n",
        f"cbf-save --label first {files['trace.sfbt']}",
        f"cbf-save --append {files['trace.sfbt']}",
        f"cbf-save --format cbf {files['trace.cbf']}",
        f"cbf-save --format json {files['trace.json']}",
        f"cbf-save --format lws {files['trace.lws']}",
        "cbf-save --format json --append /dev/null",
        "cbf-save --format bogus x"])
    frames = sframe_frames(out.split("==BT==")[1].split("==SAVE==")[0])
    return program, files, frames, out.split("==SAVE==")[1]


def test_save_reports_and_refuses_bad_options(saved):
    _, _, frames, out = saved
    assert out.count(f"Saved 1 backtrace ({len(frames)} frames)") == 5
    assert "cbf-save: --append needs --format archive or lws" in out
    assert "cbf-save: unknown format 'bogus'" in out
    assert "Traceback" not in out


def test_archive_holds_the_trace_once_with_a_count(saved):
    program, files, frames, _ = saved
    archive, error = read_archive(files["trace.sfbt"])
    assert error is None
    (trace,) = archive.traces.values()
    assert trace.count == 2 and trace.events[0].label == "first"
    assert trace.events[0].reason == "SIGTRAP" and trace.events[0].architecture == "x86_64"
    decoded = trace.decoded()
    assert [f.address for f in decoded.frames] == [pc for _, pc, _ in frames]
    assert [f.kind for f in decoded.frames] == ["pc"] + ["ra"] * (len(frames) - 1)
    paths = [image.path for image in archive.image_map(0).images]
    assert str(program) in paths and any(p.endswith("libapply.so") for p in paths)


def test_bare_cbf_and_json_forms(saved):
    _, files, frames, _ = saved
    bare = cbf.decode(files["trace.cbf"].read_bytes())
    assert [f.address for f in bare.frames] == [pc for _, pc, _ in frames]
    document = json.loads(files["trace.json"].read_text())
    assert set(document) == {"architecture", "backtrace", "imageMap"}
    assert base64.b64decode(document["backtrace"]) == files["trace.cbf"].read_bytes()
    assert decode_image_map(base64.b64decode(document["imageMap"])).images


def test_lws_form_holds_return_addresses(saved):
    _, files, frames, _ = saved
    (line,) = files["trace.lws"].read_text().splitlines()
    addresses, size = lws.decode_blob(line)
    expected = [pc for _, pc, _ in frames][:31]
    expected[0] += 1  # the innermost PC, stored as a return address
    assert addresses == expected and size == 0


def test_load_in_a_new_session_gives_the_same_frames(gdb, saved):
    program, files, frames, _ = saved
    names = [base_name(name) for _, _, name in frames]
    # The program is loaded but not running: PIE addresses are moved to where
    # the file is now; libapply.so, not loaded, is read from its file.
    out = run_gdb(gdb, [str(program)], [
        "echo ==A==\\n", f"cbf-load {files['trace.sfbt']}",
        "echo ==C==\\n", f"cbf-load {files['trace.cbf']}",
        "echo ==J==\\n", f"cbf-load {files['trace.json']}",
        "echo ==E==\\n", "cbf-load /nonexistent/file"])
    archive_part = split_sections(out, "==A==")[0].split("==C==")[0]
    assert re.search(r"Backtrace 1, captured 2 times \(thread 1 \(\d+\), SIGTRAP, .* UTC, "
                     r"label 'first'\):", archive_part)
    loaded = sframe_frames(archive_part)
    assert [pc for _, pc, _ in loaded] == [pc for _, pc, _ in frames]
    assert [base_name(name) for _, _, name in loaded] == names
    json_part = out.split("==J==")[1].split("==E==")[0]
    assert [base_name(n) for _, _, n in sframe_frames(json_part)] == names
    assert "cbf-load: /nonexistent/file: " in out.split("==E==")[1]
    assert "Traceback" not in out


def test_sfbt_decode_and_fold_outside_the_debugger(saved):
    program, files, frames, _ = saved
    names = [base_name(name) for _, _, name in frames]
    result = run_sfbt("cbf", "decode", files["trace.sfbt"])
    assert result.returncode == 0, result.stderr
    decoded = sframe_frames(result.stdout)
    assert [base_name(n) for _, _, n in decoded] == names
    assert " at " in result.stdout and "recurse.c:" in result.stdout
    result = run_sfbt("fold", files["trace.sfbt"])
    (line,) = result.stdout.splitlines()
    stack, weight = line.rsplit(" ", 1)
    assert weight == "2"
    assert [base_name(n) for n in stack.split(";")] == list(reversed(names))
    result = run_sfbt("cbf", "decode", files["trace.cbf"])
    assert result.stdout.splitlines()[0] == f"pc {frames[0][1]:#x}"


def test_sfbt_decode_reads_every_form_cbf_save_writes(saved):
    """JSON (with its image map: symbolized from the images' files) and
    lws (return addresses only: PCs, not names, without --exe)."""
    _, files, frames, _ = saved
    result = run_sfbt("cbf", "decode", files["trace.json"])
    assert result.returncode == 0, result.stderr
    decoded = sframe_frames(result.stdout)
    assert [pc for _, pc, _ in decoded] == [pc for _, pc, _ in frames]
    assert [base_name(n) for _, _, n in decoded] == [base_name(n) for _, _, n in frames]
    result = run_sfbt("cbf", "decode", files["trace.lws"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Backtrace from line 1 (size 0):\n")
    expected = [pc for _, pc, _ in frames][:31]
    expected[0] += 1  # the innermost PC, stored as a return address
    assert [pc for _, pc, _ in sframe_frames(result.stdout)] == expected


def test_truncated_archive_reads_up_to_the_damage(saved, tmp_path):
    _, files, frames, _ = saved
    data = files["trace.sfbt"].read_bytes()
    damaged = tmp_path / "damaged.sfbt"
    damaged.write_bytes(data[:-5])
    result = run_sfbt("cbf", "decode", damaged)
    assert result.returncode == 1
    assert re.fullmatch(rf"sfbt: {re.escape(str(damaged))}\+0x[0-9a-f]+: record .* truncated\n",
                        result.stderr)
    assert "Backtrace 1, captured once" in result.stdout  # the first capture survives


def test_all_threads(gdb, tmp_path):
    program = compile_program(tmp_path, "threads", "O2", True, ["threads.c"])
    archive_path = tmp_path / "threads.sfbt"
    out = run_gdb(gdb, [str(program)], ["break stop_here", "run",
                                   f"cbf-save --all-threads {archive_path}",
                                   "thread"])
    assert "Saved 5 backtraces" in out
    archive, error = read_archive(archive_path)
    assert error is None and len(archive.events) == 5
    assert sorted(e.thread.split()[0] for e in archive.events) == ["1", "2", "3", "4", "5"]


#: two stops in wait_forever (inline_chain.c at -O2, run with one argument:
#: it waits there): at its breakpoint, an address GCC gives the rows of
#: several lines (GDB's bt shows one, LLDB's another), then at a
#: breakpoint on a line, whose first instruction follows another line's
#: (one byte before it is that line)
FRAME0_STOPS = ["break wait_forever", "run 200", "break inline_chain.c:16", "continue"]


def test_frame0_of_a_saved_trace_is_at_the_line_bt_shows(gdb, tmp_path):
    """A saved frame #0 is looked up at its PC, by the rows GDB takes:
    cbf-load with the program loaded and without one, and `sfbt cbf
    decode`, show the FILE:LINE GDB's bt showed at that stop."""
    program = compile_program(tmp_path, "chain", "O2", True, ["inline_chain.c"])
    archives = [tmp_path / "entry.sfbt", tmp_path / "line.sfbt"]
    commands = []
    for start, archive in zip((FRAME0_STOPS[:2], FRAME0_STOPS[2:]), archives):
        commands += start + ["echo ==BT==\\n", "bt 1", f"cbf-save {archive}"]
    out = run_gdb(gdb, [str(program)], commands)
    shown = [frame0_place(section) for section in split_sections(out, "==BT==")]
    assert len(shown) == 2, out[-3000:]
    at_entry, at_line = (frame0_rows(archive, program, "gdb") for archive in archives)
    assert at_line[0] != at_line[1], at_line  # PC - 1 is another line's
    loads = [command for archive in archives
             for command in ("echo ==LOAD==\\n", f"cbf-load {archive}")]
    for arguments in ([], [str(program)]):
        loaded = split_sections(run_gdb(gdb, arguments, loads), "==LOAD==")
        assert [frame0_place(section) for section in loaded] == shown, loaded
    decoded = [run_sfbt("cbf", "decode", archive).stdout for archive in archives]
    assert [frame0_place(text) for text in decoded] == shown, decoded
    assert [number for _, number in shown] == [at_entry[0].line, at_line[0].line]


#: frame lines as sframe-bt, cbf-load and `sfbt cbf decode` print them
FRAME_LINE = re.compile(r"^#\d+ .*$", re.M)
TRAMPOLINE_LINE = re.compile(r"^#2  0x[0-9a-f]{16} in <signal handler called>$", re.M)


def test_a_stop_in_a_signal_handler_reads_back_as_sframe_bt_printed_it(gdb, tmp_path):
    """The kernel's signal trampoline, saved as a return address directly
    followed by the PC the signal interrupted, is printed by cbf-load (in
    the session that saved it, with the program loaded and with none) and
    by `sfbt cbf decode` as sframe-bt printed it at that stop, and `sfbt
    fold` names it as sframe-bt does."""
    program = compile_program(tmp_path, "signal", "O2", True, ["signal.c"])
    archive = tmp_path / "signal.sfbt"
    load = ["echo ==LOAD==\\n", f"cbf-load {archive}"]
    out = run_gdb(gdb, [str(program)], ["handle SIGFPE nostop noprint pass",
                                        "break stop_here", "run", "echo ==BT==\\n",
                                        "sframe-bt", f"cbf-save {archive}"] + load)
    shown = FRAME_LINE.findall(split_sections(out, "==BT==")[0].split("==LOAD==")[0])
    assert len(shown) == 6 and TRAMPOLINE_LINE.search("\n".join(shown)), out[-3000:]
    loads = [split_sections(out, "==LOAD==")[0]]
    loads += [split_sections(run_gdb(gdb, arguments, load), "==LOAD==")[0]
              for arguments in ([str(program)], [])]
    for loaded in loads:
        assert FRAME_LINE.findall(loaded) == shown, loaded
    decoded = run_sfbt("cbf", "decode", archive)
    assert FRAME_LINE.findall(decoded.stdout) == shown, decoded.stdout
    (folded,) = run_sfbt("fold", archive).stdout.splitlines()
    names = [base_name(name) for _, _, name in sframe_frames("\n".join(shown))]
    names[2] = "<signal handler called>"
    assert folded == ";".join(reversed(names)) + " 1"


def test_a_stop_in_the_trampoline_itself_reads_back_as_sframe_bt_printed_it(gdb, tmp_path):
    """Stopped in the trampoline (after its rt_sigreturn), frame #0 is the
    trampoline, saved as a PC directly followed by the PC the signal
    interrupted: read back as sframe-bt printed it, but for its tail-call
    frames (__pthread_kill_internal's), which archives do not hold."""
    program = compile_program(tmp_path, "walk_stops", "O2", True, ["walk_stops.c"])
    archive = tmp_path / "sigreturn.sfbt"
    out = run_gdb(gdb, [str(program)], ["handle SIGUSR1 nostop noprint",
                                        "catch syscall rt_sigreturn", "run sigreturn",
                                        "echo ==BT==\\n", "sframe-bt", "echo ==TAGS==\\n",
                                        "sframe-bt -v", f"cbf-save {archive}",
                                        "echo ==LOAD==\\n", f"cbf-load {archive}"])
    printed, rest = split_sections(out, "==BT==")[0].split("==TAGS==\n")
    tagged = rest.split("==LOAD==")[0]
    tail_levels = set(re.findall(r"^#(\d+) .*\[tailcall\]$", tagged, re.M))
    shown = [re.sub(r"^#\d+\s+", "", line) for line in FRAME_LINE.findall(printed)
             if line.split()[0][1:] not in tail_levels]
    assert re.fullmatch(r"0x[0-9a-f]{16} in <signal handler called>", shown[0]), out
    loaded = [re.sub(r"^#\d+\s+", "", line)
              for line in FRAME_LINE.findall(split_sections(out, "==LOAD==")[0])]
    assert loaded == shown, out
    decoded = FRAME_LINE.findall(run_sfbt("cbf", "decode", archive).stdout)
    assert re.sub(r"^#\d+\s+", "", decoded[0]) == shown[0] and len(decoded) == len(shown)


def test_a_save_while_sfbt_record_writes_the_file(gdb, tmp_path):
    """The issue's case: cbf-save --append from GDB into the file that
    `sfbt record -o` of another process is writing said "Saved" and was
    lost to the recording's rename.  It is refused with one line; the
    save after the recording is in the file."""
    library = compile_library(tmp_path, "libapply.so", "O2", ["libapply.c"])
    program = compile_program(tmp_path, "recurse", "O2", True, ["recurse.c"], [library])
    archive, log = tmp_path / "recorded.sfbt", tmp_path / "record.log"
    other = subprocess.Popen(["sleep", "300"])
    try:
        with open(log, "w") as stdout:
            record = subprocess.Popen(
                [sys.executable, "-m", "sfbt", "record", "--idle", "-p", str(other.pid), "-o",
                 str(archive)], stdout=stdout, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
        assert record.stderr.readline().startswith("Recording process ")
        out = run_gdb(gdb, [str(program)], [
            "break stop_here", "run 20",
            f"cbf-save --append --label during {archive}", "echo ==AFTER==\\n",
            f"shell kill -INT {record.pid}; timeout 60 sh -c "
            f"'until grep -q Recorded {log}; do sleep 0.1; done'",
            f"cbf-save --append --label after {archive}"])
        assert record.wait(timeout=60) == 0, record.stderr.read()
    finally:
        other.kill()
        other.wait()
    # gdb's errors come after its output
    assert (f"cbf-save: {archive}: sfbt record is recording to it; nothing was written"
            in out.splitlines()), out
    assert re.search(rf"^Saved 1 backtrace \(\d+ frames\) to {archive} \(archive\)\.$",
                     split_sections(out, "==AFTER==")[0], re.M), out
    assert out.count("Saved ") == 1 and "Traceback" not in out
    saved, error = read_archive(archive)
    assert error is None
    labels = [event.label for event in saved.events]
    assert labels.count("after") == 1 and "during" not in labels and len(labels) > 1
