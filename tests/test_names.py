"""Names that cannot act: thread names, symbols, image paths and file names
that hold a terminal escape, a newline that starts a forged frame line, or
bytes that are not UTF-8 are printed escaped as GDB escapes them in
strings, by sfbt stack, record, cbf decode, fold, flame and by cbf-load in
GDB and LLDB; SVG and JSON stay valid whatever the names."""

import json
import os
import re
import subprocess
import xml.dom.minidom

import pytest

from conftest import run_sfbt
from gdb_support import compile_program, run_gdb
from lldb_support import run_lldb
from sfbt.archive import cbf
from sfbt.archive.imagemap import Image, ImageMap
from sfbt.archive.store import MAGIC, Archive
from sfbt.printable import printable
from test_stack import Running

EVIL_SYMBOL = b"evil\x1b[2J\n#9 fake\xff"
EVIL_THREAD = "\x1b[2J\n#9 fake"
#: each of the hostile names, as they must be printed (a byte that is not
#: UTF-8 in octal, as GDB prints it)
SHOWN_SYMBOL = r"evil\033[2J\n#9 fake\377"
SHOWN_THREADS = (r"\033[2J\n#9 fake", r"x\377")
#: what may start a line of sframe-bt's layout
_LINE = re.compile(r"^(Thread \d+ \(LWP \d+( \"[^\"]*\")?\):|#\d+ +0x[0-9a-f]+ in \S.*"
                   r"|Backtrace stopped: .*|Backtrace \d+, captured .*|)$")


@pytest.mark.parametrize("data", [
    b"a\x1b[2Jb", b"x\n#9 fake", b"\t\r\a\b\f\v", b"\x01\x7f\x00", b"x\xff9",
    "caf\u00e9 \u20ac".encode()], ids=lambda data: data.hex())
def test_escapes_as_gdb_prints_a_string(gdb, data):
    literal = "".join(f"\\{byte:03o}" for byte in data)
    out = run_gdb(gdb, [], [f'p "{literal}"'])
    (gdb_text,) = re.findall(r'^\$1 = "(.*)"$', out, re.M)
    assert printable(data.decode("utf-8", "surrogateescape")) == gdb_text


def test_escapes_what_would_reorder_or_hide_text():
    # GDB prints these as they are; they are not printable text, and
    # would reorder or hide what a reader sees
    assert printable("a\u202eb\u200bc") == r"a\342\200\256b\342\200\213c"
    assert printable("a\\b") == "a\\b"  # printable: kept, not doubled
    assert printable("\ud800") == r"\355\240\200"  # a lone surrogate


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """hostile_names.c, its function renamed to EVIL_SYMBOL and its DWARF
    left out (GDB and LLDB name it from the symbol table)."""
    directory = tmp_path_factory.mktemp("names")
    built = compile_program(directory, "hostile-built", "O2", True, ["hostile_names.c"])
    program = directory / "hostile"
    subprocess.run([b"objcopy", b"--strip-debug", b"--redefine-sym", b"hostile=" + EVIL_SYMBOL,
                    bytes(built), bytes(program)], check=True)
    return program


def _all_lines_are_frames(text):
    assert "\x1b" not in text
    for line in text.splitlines():
        assert _LINE.match(line), line
    assert not re.search(r"^#9 fake", text, re.M)


def test_stack_record_decode_fold_and_flame(hostile, tmp_path):
    archive = tmp_path / "names.sfbt"
    with Running(hostile) as running:
        stack = run_sfbt("stack", running.pid)
        recorded = run_sfbt("record", "--idle", "-p", running.pid, "--duration", "0.3", "-o", archive)
    assert stack.returncode == 0, stack.stderr
    _all_lines_are_frames(stack.stdout)
    names = re.findall(r'^Thread \d+ \(LWP \d+ "(.*)"\):$', stack.stdout, re.M)
    assert names == ["hostile", *SHOWN_THREADS]
    assert stack.stdout.count(f" in {SHOWN_SYMBOL}") == 3

    assert recorded.returncode == 0, recorded.stderr
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    _all_lines_are_frames(decoded.stdout)
    assert f" in {SHOWN_SYMBOL}" in decoded.stdout
    # threads as "N (TID name)", in the headings of the stacks they captured
    headings = "\n".join(re.findall(r"^Backtrace .*$", decoded.stdout, re.M))
    assert re.search(rf"threads? (.*, |.* and )?\d+ \(\d+ {re.escape(SHOWN_THREADS[0])}\)",
                     headings) \
        or re.search(rf"threads? (.*, |.* and )?\d+ \(\d+ {re.escape(SHOWN_THREADS[1])}\)",
                     headings)

    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    lines = folded.stdout.splitlines()
    assert len(lines) == decoded.stdout.count("Backtrace ")
    for line in lines:
        assert re.fullmatch(r"[^\x00-\x1f\x7f]+ \d+", line), line
    assert all(SHOWN_SYMBOL in line for line in lines)

    svg = tmp_path / "names.svg"
    assert run_sfbt("flame", archive, "-o", svg).returncode == 0
    document = xml.dom.minidom.parse(str(svg))
    shown = {g.getAttribute("data-name") for g in document.getElementsByTagName("g")}
    assert SHOWN_SYMBOL in shown
    speedscope = tmp_path / "names.json"
    assert run_sfbt("flame", archive, "--format", "speedscope", "-o", speedscope).returncode == 0
    frames = [f["name"] for f in json.loads(speedscope.read_text())["shared"]["frames"]]
    assert SHOWN_SYMBOL in frames


def test_thread_name_that_is_not_utf8_when_stacked_alone(hostile, tmp_path):
    """The thread named "x\\377": in the text, and in an archive of it."""
    with Running(hostile) as running:
        tid = max(int(t) for t in os.listdir(f"/proc/{running.pid}/task"))
        text = run_sfbt("stack", running.pid, "--thread", tid)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f'Thread 3 (LWP {tid} "{SHOWN_THREADS[1]}"):\n')


def _archive(path, program, thread, image_path=None):
    """An archive of one trace in ``program`` mapped at 0x555555554000: its
    renamed function, a zero return address (a smashed stack writes one),
    then main; ``image_path`` names the image instead of ``program``."""
    from elftools.elf.elffile import ELFFile
    with open(program, "rb") as stream:
        address = {symbol.name.split("\x1b")[0]: symbol["st_value"] for symbol in
                   ELFFile(stream).get_section_by_name(".symtab").iter_symbols()}
    base = 0x555555554000
    frames = [cbf.Frame("pc", base + address["evil"] + 1), cbf.Frame("ra", 0),
              cbf.Frame("ra", base + address["main"] + 4)]
    name = image_path or os.fsdecode(program)
    archive = Archive()
    archive.capture(cbf.encode(frames), ImageMap("linux-x86_64", [
        Image(name, base, base + 0x10000)]), architecture="x86_64", thread=thread,
        reason="SIG\x1bSEGV", label="l\nabel")
    path.write_bytes(MAGIC + archive.pending_bytes())
    return path


def _check_loaded(out, symbol, where):
    frames = re.findall(r"^#(\d+) +(0x[0-9a-f]+) in (.*)$", out, re.M)
    assert [f[:2] for f in frames] == [("0", frames[0][1]), ("1", "0x0000000000000000"),
                                       ("2", frames[2][1])], out
    assert frames[0][2].startswith(symbol + where)
    assert frames[1][2] == "?? ()" and frames[2][2].startswith("main")
    assert (rf"(thread 1 ({SHOWN_THREADS[0]}), SIG\033SEGV, 1970-01-01 00:00:00 UTC, "
            r"label 'l\nabel'):") in out
    for bad in ("\x1b", "Traceback", "Error", "not supported", "\n#9 fake"):
        assert bad not in out, out


def test_cbf_load_in_gdb(gdb, hostile, tmp_path):
    archive = _archive(tmp_path / "a.sfbt", hostile, f"1 ({EVIL_THREAD})")
    # the program loaded, not running: its frames moved to where it is now
    _check_loaded(run_gdb(gdb, [str(hostile)], [f"cbf-load {archive}"]), SHOWN_SYMBOL, " ()")
    # no program: GDB's architecture is its default, not the archive's;
    # the archive's image names every frame
    _check_loaded(run_gdb(gdb, [], [f"cbf-load {archive}"]), SHOWN_SYMBOL,
                  f" from {hostile}")


def test_cbf_load_in_lldb(lldb, hostile, tmp_path):
    archive = _archive(tmp_path / "a.sfbt", hostile, f"1 ({EVIL_THREAD})")
    _check_loaded(run_lldb(lldb, str(hostile), [f"cbf-load {archive}"]), SHOWN_SYMBOL, "")
    _check_loaded(run_lldb(lldb, "", [f"cbf-load {archive}"]), SHOWN_SYMBOL,
                  f" from {hostile}")


def test_image_path_with_control_characters_and_a_file_name_not_utf8(hostile, tmp_path):
    """An image path with a newline and an escape in the archive, and an
    archive file whose name is not UTF-8: every output escapes both."""
    name = os.fsencode(tmp_path) + b"/trace-\xff\x1b.sfbt"
    path = _archive(tmp_path / "plain.sfbt", hostile, "7", "/no/such/lib\x1b[2J\n#9 x.so")
    os.rename(path, name)
    shown_file = printable(os.fsdecode(name))
    assert shown_file.endswith(r"/trace-\377\033.sfbt")
    decoded = run_sfbt("cbf", "decode", os.fsdecode(name))
    assert decoded.returncode == 0, decoded.stderr
    _all_lines_are_frames(decoded.stdout)
    assert r"?? from /no/such/lib\033[2J\n#9 x.so" in decoded.stdout
    svg = tmp_path / "out.svg"
    drawn = run_sfbt("flame", os.fsdecode(name), "-o", svg)
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout == f"{svg}: svg of 1 stacks (1 distinct)\n"
    document = xml.dom.minidom.parse(str(svg))
    assert document.getElementsByTagName("title")[0].firstChild.data == f"sfbt: {shown_file}"
    assert r"lib\033[2J\n#9 x.so+0x" in svg.read_text()
    missing = run_sfbt("cbf", "decode", os.fsdecode(name) + "\n#9")
    assert missing.returncode == 1
    assert missing.stderr == f"sfbt: {shown_file}\\n#9: No such file or directory\n"


def test_long_names_are_escaped_but_not_remembered():
    """An event string may be 64 KiB: distinct long names must not fill the
    memo (sfbt.printable remembers names of at most MEMO_LENGTH)."""
    from sfbt import printable as module
    before = module._remembered.cache_info().currsize
    for number in range(50):
        long_name = f"{number}\n" + "x" * module.MEMO_LENGTH
        assert printable(long_name) == f"{number}\\n" + "x" * module.MEMO_LENGTH
    assert module._remembered.cache_info().currsize == before
    printable("short\x1b name")
    assert module._remembered.cache_info().currsize == before + 1
