"""The inline model (sfbt.dwarf.inline) against binutils' addr2line -i (GCC's
DWARF), llvm-symbolizer (clang's) and pyelftools' reading of the same
entries (tests/inline_reference.py)."""

import io
import json
import os
import re
import signal
import time
import shutil
import subprocess
import sys

import pytest

from conftest import require
from gdb_support import PROGRAMS, compile_program


@pytest.fixture(scope="module")
def inlined(tmp_path_factory):
    """inline_chain.c at -O2 -g: calls inlined three deep, from several sites."""
    return compile_program(tmp_path_factory.mktemp("inline"), "inlined", "O2", True,
                           ["inline_chain.c"])


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
    from sfbt.live.symbols import module_symbols
    from sfbt.unwind.modules import Module
    symbols = module_symbols(Module(str(inlined), 0, 0, 1 << 40))
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
        time.sleep(0.3)  # from the write of "ready" into pause()
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


def _importing(arguments, cache):
    """`python3 -X importtime -m sfbt ARGUMENTS` from this checkout with the
    cache directory ``cache``: (its output, the modules it imported)."""
    from live_harness import ROOT
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"), XDG_CACHE_HOME=str(cache))
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "sfbt",
                          *map(str, arguments)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")}
    return run.stdout, imported


def test_inline_frames_need_no_pyelftools(inlined, tmp_path):
    """With an empty cache, sfbt stack and cbf decode read the inline
    chains (and the C library's, from its debug file) without importing
    pyelftools."""
    from live_harness import Started
    archive = tmp_path / "inlined.sfbt"
    with Started([inlined, "200"]) as started:
        time.sleep(0.3)
        shown, imported = _importing(["stack", started.pid], tmp_path / "stack")
        assert "sfbt.dwarf.inline" in imported
        assert not any(name.startswith("elftools") for name in imported)
        _importing(["stack", started.pid, "--format", "archive", "-o", archive],
                   tmp_path / "saving")
    names = _names(shown, _SFBT_FRAME)
    assert names[names.index("leaf"):] == ["leaf", "inner", "outer", "work", "main"], shown
    decoded, imported = _importing(["cbf", "decode", archive], tmp_path / "decode")
    assert "sfbt.dwarf.inline" in imported
    assert not any(name.startswith("elftools") for name in imported)
    assert " inner " in decoded and " outer " in decoded, decoded


@pytest.fixture(scope="module")
def inlined_archive(inlined, tmp_path_factory):
    """An archive of inline_chain.c stopped in wait_forever, called from calls
    inlined three deep into work()."""
    from live_harness import Started, sfbt_command
    path = tmp_path_factory.mktemp("inline-archive") / "inlined.sfbt"
    with Started([inlined, "200"]) as started:
        time.sleep(0.3)
        saved = sfbt_command("stack", started.pid, "--format", "archive", "-o", path)
    assert saved.returncode == 0, saved.stderr
    return path


CALLS = ["wait_forever", "leaf", "inner", "outer", "work", "main"]


def test_decode_and_fold_expand_inline_frames(inlined_archive):
    from live_harness import sfbt_command
    decoded = sfbt_command("cbf", "decode", inlined_archive)
    assert decoded.returncode == 0, decoded.stderr
    frames = [line for line in decoded.stdout.splitlines() if line.startswith("#")]
    names = [_SFBT_FRAME.match(line)[1] for line in frames]
    assert names[names.index("wait_forever"):] == CALLS, decoded.stdout
    # levels count inline frames; only a frame on the stack has an address
    assert [int(line[1:].split()[0]) for line in frames] == list(range(len(frames)))
    addressed = {name for name, line in zip(names, frames) if " 0x" in line}
    assert {"wait_forever", "leaf", "main"} <= addressed
    assert not addressed & {"inner", "outer", "work"}
    folded = sfbt_command("fold", inlined_archive)
    assert folded.returncode == 0, folded.stderr
    assert ";".join(reversed(CALLS)) + ";" in folded.stdout, folded.stdout


def test_flame_and_pprof_carry_inline_frames(inlined_archive, tmp_path):
    from live_harness import sfbt_command
    speedscope = tmp_path / "inlined.json"
    written = sfbt_command("flame", "--format", "speedscope", inlined_archive, "-o", speedscope)
    assert written.returncode == 0, written.stderr
    document = json.loads(speedscope.read_text())
    frames = [frame["name"] for frame in document["shared"]["frames"]]
    stack = [frames[i] for i in document["profiles"][0]["samples"][0]]
    assert stack[:len(CALLS)] == CALLS[::-1], stack
    svg = tmp_path / "inlined.svg"
    assert sfbt_command("flame", inlined_archive, "-o", svg).returncode == 0
    assert all(f"<title>{name} " in svg.read_text() for name in CALLS)

    go = shutil.which("go")
    require(go, "go is not installed (golang-go: ./install.sh --test-debuggers)")
    profile = tmp_path / "inlined.pb.gz"
    written = sfbt_command("flame", "--format", "pprof", inlined_archive, "-o", profile)
    assert written.returncode == 0, written.stderr
    traces = subprocess.run([go, "tool", "pprof", "-traces", str(profile)],
                            capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert traces.returncode == 0, traces.stderr
    lines = [line.split("|")[-1].strip() for line in traces.stdout.splitlines()]
    shown = [re.sub(r"^\d+\s+", "", line) for line in lines if line]
    start = shown.index("wait_forever")
    # one location holds leaf, inner, outer and work: pprof marks the
    # calls inlined into work
    assert shown[start:start + len(CALLS)] == [
        "wait_forever", "leaf (inline)", "inner (inline)", "outer (inline)", "work", "main"]


def _units(path):
    """pyelftools' DWARFInfo of an ELF file and its units' offsets."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as stream:
        dwarf = ELFFile(io.BytesIO(stream.read())).get_dwarf_info()
    return dwarf, [unit.cu_offset for unit in dwarf.iter_CUs()]


def _dwarf_bytes(path):
    """sfbt's section bytes (sfbt.dwarf.line_program.DwarfBytes) of an ELF file."""
    from sfbt.dwarf.line_program import DwarfBytes
    from sfbt.elf import ElfImage
    with open(path, "rb") as stream:
        return DwarfBytes(ElfImage.from_file(io.BytesIO(stream.read()), str(path)))


def _agreeing(path, every=1):
    """(units, segments) of the file's units (each ``every``th) whose
    inlined calls sfbt's entry reader (on sfbt's own section bytes) and
    pyelftools' entries (tests/inline_reference.py) read alike; fails at
    the first that differ."""
    from inline_reference import unit_calls as reference
    from sfbt.dwarf.inline import unit_frames
    theirs, offsets = _units(path)
    dwarf = _dwarf_bytes(path)
    segments = 0
    for offset in offsets[::every]:
        ours = unit_frames(dwarf, offset).calls
        assert ours == reference(theirs, offset), f"{path}: unit at {offset:#x}"
        segments += len(ours)
    return len(offsets[::every]), segments


@pytest.mark.parametrize("dwarf_version", ["4", "5"])
def test_entry_reader_agrees_with_pyelftools_on_the_test_programs(tmp_path, dwarf_version):
    """Every unit of every C program of the tests (a shared library for
    those without main; the libraries a program calls left unresolved),
    compiled at -O2: the same segments, DWARF 4 (.debug_ranges) and 5
    (.debug_rnglists, line_strp)."""
    units = segments = 0
    programs = sorted(PROGRAMS.glob("*.c"))
    for source in programs:
        output = tmp_path / source.stem
        kind = [] if "main(" in source.read_text() else ["-shared", "-fPIC"]
        subprocess.run(["gcc", "-O2", f"-gdwarf-{dwarf_version}", *kind, "-o", str(output),
                        str(source), "-Wl,--unresolved-symbols=ignore-all"],
                       check=True, capture_output=True)
        counted = _agreeing(output)
        units, segments = units + counted[0], segments + counted[1]
    print(f"DWARF {dwarf_version}: {units} units of {len(programs)} programs, "
          f"{segments} inline segments alike")
    assert units >= len(programs) and segments > 100, (units, segments)


def _libc_debug_file():
    from sfbt.debuginfo.search import build_id_path
    from sfbt.elf import read_build_id
    libc = next((path for path in ("/lib/x86_64-linux-gnu/libc.so.6",
                                   "/lib/aarch64-linux-gnu/libc.so.6")
                 if os.path.exists(path)), None)
    path = build_id_path("/usr/lib/debug", read_build_id(libc)) if libc else None
    require(path and os.path.exists(path),
            "libc6-dbg is not installed (./install.sh --test-debuggers)")
    return path


def test_entry_reader_agrees_with_pyelftools_on_libc():
    """One unit in 16 of the C library's debug file (libc6-dbg; every unit:
    bench/inline_units.py): the same segments."""
    units, segments = _agreeing(_libc_debug_file(), every=16)
    print(f"libc: {units} units, {segments} inline segments alike")
    assert units > 50 and segments > 100, (units, segments)


def _llvm_symbolizer_frames(path, addresses):
    """[[(name, file base name, line)] innermost first] of each address,
    as llvm-symbolizer --inlines shows them (short function names)."""
    out = subprocess.run(["llvm-symbolizer", "--inlines", "--functions=short",
                          f"--obj={path}"], input="".join(f"{a:#x}\n" for a in addresses),
                         capture_output=True, text=True, check=True, timeout=120).stdout
    frames = []
    for block in out.strip("\n").split("\n\n"):
        lines = block.splitlines()
        frames.append([(name, os.path.basename(where.rsplit(":", 2)[0]),
                        int(where.rsplit(":", 2)[1]))
                       for name, where in zip(lines[::2], lines[1::2])])
    return frames


def _forms(path):
    """{(tag, attribute, form)} of the abbreviations of a file's units."""
    from sfbt.dwarf.entries import Unit
    _, offsets = _units(path)
    sections = _dwarf_bytes(path).entry_sections()
    return {(abbreviation.tag, attribute, form) for offset in offsets
            for abbreviation in Unit(sections, offset).abbreviations.values()
            for attribute, form, _ in abbreviation.attributes}


def test_clang_dwarf5_chains_match_llvm_symbolizer(tmp_path):
    """inline_chain.c by clang -O2 -gdwarf-5: inlined calls' ranges through
    DW_FORM_rnglistx, their addresses through addrx, names through strx;
    at every instruction the inline chain llvm-symbolizer shows."""
    require(shutil.which("clang"), "clang is not installed (./install.sh --test-debuggers)")
    require(shutil.which("llvm-symbolizer"),
            "llvm-symbolizer (llvm) is not installed (./install.sh --test-debuggers)")
    from sfbt.dwarf import entries
    from sfbt.dwarf.inline import DW_TAG_INLINED
    from sfbt.live.symbols import module_symbols
    from sfbt.unwind.modules import Module
    program = tmp_path / "inline_chain"
    # clang leaves .debug_aranges out unless asked
    subprocess.run(["clang", "-O2", "-gdwarf-5", "-gdwarf-aranges", "-o", str(program),
                    str(PROGRAMS / "inline_chain.c")], check=True, capture_output=True)
    forms = _forms(program)
    assert (DW_TAG_INLINED, entries.DW_AT_RANGES, entries.DW_FORM_RNGLISTX) in forms, forms
    assert any(tag == DW_TAG_INLINED and attribute == entries.DW_AT_LOW_PC
               and form in entries.ADDRESS_INDICES for tag, attribute, form in forms), forms
    assert any(attribute == entries.DW_AT_NAME and form in entries.STRING_INDICES
               for _, attribute, form in forms), forms
    symbols = module_symbols(Module(str(program), 0, 0, 1 << 40))
    addresses = [a for a in _text_addresses(program) if symbols.function(a) is not None]
    compared = deep = 0
    for address, theirs in zip(addresses, _llvm_symbolizer_frames(program, addresses)):
        calls = symbols.inlined(address)
        names = [call.name for call in calls] + [symbols.function(address)]
        sites = [(os.path.basename(call.file or "??"), call.line) for call in calls]
        assert names == [name for name, _, _ in theirs], hex(address)
        assert sites == [(file, line) for _, file, line in theirs[1:]], hex(address)
        compared += 1
        deep += len(calls) >= 2
    print(f"clang: inline chains equal to llvm-symbolizer's at {compared} addresses, "
          f"{deep} of them two inlined calls deep or more")
    assert compared > 50 and deep > 10, (compared, deep)


def test_damaged_entries_end_in_an_error_not_a_hang(tmp_path):
    """inline_chain's unit with bytes of its entries, abbreviations and
    range lists overwritten at random (seeded): each read ends, in
    segments or in an error its callers catch, within a second."""
    import random
    import struct
    from sfbt.dwarf import inline
    from sfbt.dwarf.entries import Unit
    program = tmp_path / "inline_chain"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(program), str(PROGRAMS / "inline_chain.c")],
                   check=True, capture_output=True)
    _, offsets = _units(program)
    sections = _dwarf_bytes(program).entry_sections()
    offset = max(offsets, key=lambda o: len(inline._calls(Unit(sections, o))[0]))
    randomly = random.Random(2026)
    outcomes = {"segments": 0, "error": 0}
    for _ in range(400):
        damaged = sections._replace(**{
            name: _overwritten(getattr(sections, name), randomly, start)
            for name, start in (("info", offset + 12), ("abbrev", 0), ("rnglists", 12))})
        began = time.perf_counter()
        try:
            calls, functions = inline._calls(Unit(damaged, offset))
            inline._segments(calls)
            inline._segments(inline._preferred_first(functions))
            outcomes["segments"] += 1
        except (ValueError, IndexError, struct.error):
            outcomes["error"] += 1
        assert time.perf_counter() - began < 1, outcomes
    print(f"damaged units: {outcomes}")
    assert outcomes["segments"] > 0 and outcomes["error"] > 0, outcomes


def _overwritten(data, randomly, start):
    """data with one to four bytes after ``start`` set to random values."""
    data = bytearray(data)
    for _ in range(randomly.randint(1, 4)):
        data[randomly.randrange(start, len(data))] = randomly.randrange(256)
    return bytes(data)
