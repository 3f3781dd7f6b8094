"""The inline model (sfbt.dwarf.inline) against binutils' addr2line -i."""

import os
import re
import signal
import shutil
import subprocess

import pytest

from conftest import require
from gdb_support import compile_program


@pytest.fixture(scope="module")
def inlined(tmp_path_factory):
    """inlined.c at -O2 -g: calls inlined three deep, from several sites."""
    return compile_program(tmp_path_factory.mktemp("inline"), "inlined", "O2", True,
                           ["inlined.c"])


def _text_addresses(path):
    """Every instruction address of the program's own functions
    (objdump -d), with the function that holds it."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)],
                          capture_output=True, text=True, check=True).stdout
    addresses, function = [], None
    for line in text.splitlines():
        heading = re.match(r"[0-9a-f]+ <(\w+)>:$", line)
        if heading:
            function = heading.group(1)
            continue
        instruction = re.match(r"\s+([0-9a-f]+):", line)
        if instruction and function in ("work", "main", "wait_forever"):
            addresses.append(int(instruction.group(1), 16))
    return addresses


def _frames(path, address):
    out = subprocess.run(["addr2line", "-i", "-f", "-e", str(path), f"{address:#x}"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    frames = []
    for name, where in zip(out[::2], out[1::2]):
        where = re.sub(r" \(discriminator \d+\)$", "", where)
        file, _, line = where.rpartition(":")
        frames.append((name, file, int(line) if line.isdigit() else 0))
    return frames


def _ours(symbols, address):
    """Frames as addr2line -i -f prints them, from the inline model: the
    innermost inlined function at the line table's line, each outer one
    at the call site of the one inside it."""
    line = symbols.line(address) or ("??", 0)
    frames = []
    for call in symbols.inlined(address):
        frames.append((call.name, *line))
        line = (call.file, call.line)
    frames.append((symbols.function(address), *line))
    return frames


def test_chains_match_addr2line(inlined):
    require(shutil.which("addr2line") and shutil.which("objdump"), "binutils missing")
    from sfbt.live.symbols import ModuleSymbols
    from sfbt.unwind.modules import Module
    symbols = ModuleSymbols(Module(str(inlined), 0, 0, 1 << 40))
    compared, deep = 0, 0
    for address in _text_addresses(inlined):
        if symbols.function(address) is None:
            continue  # padding after a function
        theirs = _frames(inlined, address)
        ours = _ours(symbols, address)
        # frame #0's line is the line table's, where sfbt, like GDB,
        # prefers a statement row to addr2line's last row at an address
        assert ours[1:] == theirs[1:] and ours[0][0] == theirs[0][0], hex(address)
        compared += 1
        deep += len(ours) >= 3
    print(f"inline chains equal to addr2line: {compared}, of them {deep} three frames deep or more")
    assert compared > 100 and deep > 20, (compared, deep)


_SFBT_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)(?: at | from | \(\)|$)")
_EU_FRAME = re.compile(r"^#\d+\s+0x[0-9a-f]+ (\S+)")


def _names(text, frame):
    """The function names of a one-thread backtrace's frames, to main."""
    names = [m[1] for m in map(frame.match, text.splitlines()) if m]
    return names[:names.index("main") + 1] if "main" in names else names


@pytest.mark.parametrize("argument", ["3", "200"])
def test_stack_lists_the_inline_frames_eu_stack_shows(inlined, argument):
    """sfbt stack on a stopped process names the frames eu-stack -i
    names (inline frames included), to main."""
    require(shutil.which("eu-stack"), "eu-stack (elfutils) missing")
    from live_harness import Started, sfbt_command, wait_stopped
    with Started([inlined, argument]) as started:
        os.kill(started.pid, signal.SIGSTOP)
        wait_stopped(started.pid)
        ours = sfbt_command("stack", started.pid)
        theirs = subprocess.run(["eu-stack", "-i", "-s", "-p", str(started.pid)],
                                capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    names = _names(ours.stdout, _SFBT_FRAME)
    assert names == _names(theirs.stdout, _EU_FRAME), (ours.stdout, theirs.stdout)
    assert "leaf" in names and names[-1] == "main"
    if argument == "200":
        assert names[names.index("leaf"):] == ["leaf", "inner", "outer", "work", "main"]
    print(f"sfbt stack {argument}: {len(names)} names equal to eu-stack -i's")
