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


def _text_addresses(path, functions=("work", "main", "wait_forever")):
    """Every instruction address of the program's own ``functions``
    (objdump -d)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)],
                          capture_output=True, text=True, check=True).stdout
    addresses, function = [], None
    for line in text.splitlines():
        heading = re.match(r"[0-9a-f]+ <(\w+)>:$", line)
        if heading:
            function = heading.group(1)
            continue
        instruction = re.match(r"\s+([0-9a-f]+):", line)
        if instruction and function in functions:
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


def _zlib_gnu(program, output):
    """``program`` with its DWARF in GNU's older compressed sections
    (.zdebug_*: "ZLIB", size, zlib stream), as objcopy writes them (gcc
    -Wa,--compress-debug-sections=zlib-gnu does not: the linker writes
    its output's sections inflated)."""
    subprocess.run(["objcopy", "--compress-debug-sections=zlib-gnu", str(program),
                    str(output)], check=True)
    sections = subprocess.run(["readelf", "-SW", str(output)], capture_output=True,
                              text=True, check=True).stdout
    assert ".zdebug_info" in sections and ".zdebug_line" in sections, sections
    assert ".debug_info" not in sections and ".debug_line" not in sections, sections
    return output


def test_zlib_gnu_sections_read_as_the_plain_build(inlined, tmp_path):
    """The same program with .zdebug_* sections: at every instruction the
    same line and inline chain as from its plain build, the chains
    addr2line -i reads from the plain build (binutils 2.40's finds no
    .debug_rnglists in the compressed one)."""
    require(shutil.which("addr2line") and shutil.which("objcopy"), "binutils missing")
    from sfbt.symbols.symbolizer import FileSymbolizer
    compressed = _zlib_gnu(inlined, tmp_path / "zdebug")
    plain, ours = FileSymbolizer.open(str(inlined)), FileSymbolizer.open(str(compressed))
    compared = lines = deep = 0
    try:
        for address in _text_addresses(inlined):
            if plain.function(address) is None:
                continue  # padding after a function
            frames = _ours(ours, address)
            assert frames == _ours(plain, address), hex(address)
            assert frames[1:] == _frames(inlined, address)[1:], hex(address)
            compared += 1
            lines += ours.line(address) is not None
            deep += len(frames) >= 3
    finally:
        plain.close()
        ours.close()
    print(f"zlib-gnu: {compared} addresses alike, {lines} with a line, {deep} three "
          "frames deep or more")
    assert compared > 100 and lines == compared and deep > 20, (compared, lines, deep)


def test_a_zlib_gnu_section_claiming_too_much_is_refused_in_one_line(inlined, tmp_path):
    """A .zdebug_ section whose header says it inflates past the bound
    (64 times the file's size) makes the file refused, in one line."""
    from sfbt.elf import ElfError, open_elf
    from sfbt.symbols.symbolizer import FileSymbolizer
    compressed = _zlib_gnu(inlined, tmp_path / "zdebug")
    stream, image = open_elf(str(compressed))
    with stream:
        offset = image.section(".zdebug_info").offset
    data = bytearray(compressed.read_bytes())
    assert data[offset:offset + 4] == b"ZLIB"
    data[offset + 4:offset + 12] = (1 << 40).to_bytes(8, "big")
    compressed.write_bytes(bytes(data))
    with pytest.raises(ElfError) as raised:
        FileSymbolizer.open(str(compressed))
    message = str(raised.value)
    assert "section .zdebug_info claims to expand to 1099511627776 bytes" in message, message
    assert "\n" not in message


#: a program of several units, each with inlined calls or a range list
_SEVERAL_UNITS = ("libapply.c", "libbusy.c", "inline_chain.c")


def _compressed_build(tmp_path, dwarf_version):
    """(plain, compressed): _SEVERAL_UNITS at -O2, and the same with its
    debug sections compressed (SHF_COMPRESSED: objcopy's zlib)."""
    require(shutil.which("objcopy"), "binutils missing")
    plain, packed = tmp_path / "plain", tmp_path / "compressed"
    subprocess.run(["gcc", "-O2", f"-gdwarf-{dwarf_version}", "-o", str(plain),
                    *(str(PROGRAMS / source) for source in _SEVERAL_UNITS)],
                   check=True, capture_output=True)
    subprocess.run(["objcopy", "--compress-debug-sections=zlib", str(plain), str(packed)],
                   check=True)
    return plain, packed


@pytest.mark.parametrize("dwarf_version", ["4", "5"])
def test_compressed_units_are_read_inflating_only_what_they_need(tmp_path, monkeypatch,
                                                                 dwarf_version):
    """Each unit of a program whose debug sections are compressed, read by
    a fresh reader that inflates 7 bytes at a time and starts each read of
    a string, range list or abbreviation table 1 byte past where it
    starts (each grown and read again, many times): the same inlined
    calls, functions and line rows as from the plain build; the first
    unit leaves most of .debug_info, .debug_line and the string section
    compressed."""
    from sfbt.dwarf import compressed, entries
    from sfbt.dwarf.inline import unit_frames
    from sfbt.dwarf.line_program import unit_rows
    plain, packed = _compressed_build(tmp_path, dwarf_version)
    monkeypatch.setattr(compressed, "CHUNK", 7)
    monkeypatch.setattr(entries, "FIRST_READ", 1)
    monkeypatch.setattr(entries, "FIRST_TABLE_READ", 1)
    _, offsets = _units(plain)
    theirs = _dwarf_bytes(plain)
    calls = rows = 0
    for offset in offsets:
        ours = _dwarf_bytes(packed)
        frames = unit_frames(ours, offset)
        assert frames == unit_frames(theirs, offset), hex(offset)
        lines = unit_rows(ours, offset)
        assert lines == unit_rows(theirs, offset), hex(offset)
        calls, rows = calls + len(frames.calls), rows + len(lines)
        if offset == offsets[0]:
            read = {name: ours._inflated(name) for name in (".debug_info", ".debug_line",
                                                           ".debug_str")}
            assert all(0 < len(inflating.data) < inflating.size / 2
                       for inflating in read.values()), \
                {name: (len(inflating.data), inflating.size) for name, inflating in read.items()}
    print(f"DWARF {dwarf_version}: {len(offsets)} units, {calls} inline segments, "
          f"{rows} line rows alike")
    assert len(offsets) >= len(_SEVERAL_UNITS) and calls > 5 and rows > 50, (offsets, calls, rows)


def test_damaged_compressed_sections_end_in_an_error_not_a_hang(tmp_path):
    """The compressed build with bytes of its .debug_info, .debug_abbrev,
    .debug_str and .debug_rnglists streams overwritten at random (seeded):
    reading each unit's inlined calls and line rows ends, in them or in
    an error sfbt's symbolizer catches, within a second."""
    import random
    import struct
    import zlib
    from sfbt.dwarf.inline import unit_frames
    from sfbt.dwarf.line_program import DwarfBytes, unit_rows
    from sfbt.elf import ElfImage, open_elf
    plain, packed = _compressed_build(tmp_path, "5")
    _, offsets = _units(plain)
    stream, image = open_elf(str(packed))
    with stream:
        spans = [(section.offset + 24, section.offset + section.size) for section in
                 map(image.section, (".debug_info", ".debug_abbrev", ".debug_str",
                                     ".debug_rnglists"))]
    original = packed.read_bytes()
    randomly = random.Random(2026)
    outcomes = {"read": 0, "error": 0}
    for _ in range(150):
        data = bytearray(original)
        for _ in range(randomly.randint(1, 4)):
            data[randomly.randrange(*randomly.choice(spans))] = randomly.randrange(256)
        dwarf = DwarfBytes(ElfImage.from_file(io.BytesIO(bytes(data)), "damaged"))
        for offset in offsets:
            began = time.perf_counter()
            try:
                unit_frames(dwarf, offset)
                unit_rows(dwarf, offset)
                outcomes["read"] += 1
            except (ValueError, IndexError, struct.error, zlib.error):
                outcomes["error"] += 1
            assert time.perf_counter() - began < 1, outcomes
    print(f"damaged compressed units: {outcomes}")
    assert outcomes["read"] > 0 and outcomes["error"] > 0, outcomes


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


def _require_clang():
    require(shutil.which("clang"), "clang is not installed (./install.sh --test-debuggers)")
    require(shutil.which("llvm-symbolizer"),
            "llvm-symbolizer (llvm) is not installed (./install.sh --test-debuggers)")


def _match_llvm_symbolizer(program, functions=("work", "main", "wait_forever")):
    """Assert that at every instruction of ``functions`` the inline chain
    (names and call sites) is the one llvm-symbolizer --inlines shows, and
    that the address has a line; (addresses compared, of them two inlined
    calls deep or more)."""
    from sfbt.live.symbols import module_symbols
    from sfbt.unwind.modules import Module
    symbols = module_symbols(Module(str(program), 0, 0, 1 << 40))
    addresses = [a for a in _text_addresses(program, functions)
                 if symbols.function(a) is not None]
    compared = deep = 0
    for address, theirs in zip(addresses, _llvm_symbolizer_frames(program, addresses)):
        calls = symbols.inlined(address)
        names = [call.name for call in calls] + [symbols.function(address)]
        sites = [(os.path.basename(call.file or "??"), call.line) for call in calls]
        assert names == [name for name, _, _ in theirs], hex(address)
        assert sites == [(file, line) for _, file, line in theirs[1:]], hex(address)
        assert symbols.line(address) is not None, hex(address)
        compared += 1
        deep += len(calls) >= 2
    return compared, deep


def test_clang_dwarf5_chains_match_llvm_symbolizer(tmp_path):
    """inline_chain.c by clang -O2 -gdwarf-5: inlined calls' ranges through
    DW_FORM_rnglistx, their addresses through addrx, names through strx;
    at every instruction the inline chain llvm-symbolizer shows."""
    _require_clang()
    from sfbt.dwarf import entries
    from sfbt.dwarf.inline import DW_TAG_INLINED
    program = tmp_path / "inline_chain"
    subprocess.run(["clang", "-O2", "-gdwarf-5", "-gdwarf-aranges", "-o", str(program),
                    str(PROGRAMS / "inline_chain.c")], check=True, capture_output=True)
    forms = _forms(program)
    assert (DW_TAG_INLINED, entries.DW_AT_RANGES, entries.DW_FORM_RNGLISTX) in forms, forms
    assert any(tag == DW_TAG_INLINED and attribute == entries.DW_AT_LOW_PC
               and form in entries.ADDRESS_INDICES for tag, attribute, form in forms), forms
    assert any(attribute == entries.DW_AT_NAME and form in entries.STRING_INDICES
               for _, attribute, form in forms), forms
    compared, deep = _match_llvm_symbolizer(program)
    print(f"clang: inline chains equal to llvm-symbolizer's at {compared} addresses, "
          f"{deep} of them two inlined calls deep or more")
    assert compared > 50 and deep > 10, (compared, deep)


#: a second unit for the programs without .debug_aranges: calls inlined
#: in a function nothing calls
HELPER = """
static inline __attribute__((always_inline)) int twice(int x) { return 2 * x + x / 3; }
static inline __attribute__((always_inline)) int add_twice(int x, int y)
{
    return twice(x) * y + twice(y);
}
__attribute__((noinline)) int helper(int x, int y)
{
    return add_twice(x, y) * add_twice(y + 1, x);
}
"""


def _aranges_units(program):
    """The number of units .debug_aranges lists (readelf), None when the
    program has no .debug_aranges."""
    sections = subprocess.run(["readelf", "-SW", str(program)], capture_output=True,
                              text=True, check=True).stdout
    if ".debug_aranges" not in sections:
        return None
    dump = subprocess.run(["readelf", "--debug-dump=aranges", str(program)],
                          capture_output=True, text=True, check=True).stdout
    return dump.count("Offset into .debug_info:")


@pytest.mark.parametrize("dwarf_version", ["4", "5"])
@pytest.mark.parametrize("aranges", ["none", "helper-only"])
def test_clang_chains_without_aranges_match_llvm_symbolizer(tmp_path, dwarf_version, aranges):
    """clang -O2 -g leaves .debug_aranges out: inline_chain.c's unit is
    found through its top entry's DW_AT_ranges (-ffunction-sections: in
    .debug_ranges in DWARF 4, through rnglistx in .debug_rnglists in 5),
    helper.c's through its low and high pc, in a program with no aranges
    at all, and in one whose aranges list only helper.c's unit (built
    with -gdwarf-aranges); at every instruction the inline chain
    llvm-symbolizer shows."""
    _require_clang()
    from sfbt.dwarf import entries
    from sfbt.dwarf.units import CODE_UNITS
    helper = tmp_path / "helper.c"
    helper.write_text(HELPER)
    objects = []
    for source, extra in ((PROGRAMS / "inline_chain.c", ["-ffunction-sections"]),
                          (helper, ["-gdwarf-aranges"] if aranges == "helper-only" else [])):
        objects.append(tmp_path / f"{source.stem}.o")
        subprocess.run(["clang", "-O2", f"-gdwarf-{dwarf_version}", *extra, "-c",
                        "-o", str(objects[-1]), str(source)], check=True, capture_output=True)
    program = tmp_path / "inline_chain"
    subprocess.run(["clang", "-o", str(program), *map(str, objects)], check=True,
                   capture_output=True)
    assert _aranges_units(program) == (None if aranges == "none" else 1)
    tops = {(attribute, form) for tag, attribute, form in _forms(program)
            if tag in CODE_UNITS}
    ranges_form = entries.DW_FORM_SEC_OFFSET if dwarf_version == "4" \
        else entries.DW_FORM_RNGLISTX
    assert (entries.DW_AT_RANGES, ranges_form) in tops, tops
    assert any(attribute == entries.DW_AT_HIGH_PC for attribute, _ in tops), tops
    compared, deep = _match_llvm_symbolizer(program, ("work", "main", "wait_forever",
                                                      "helper"))
    print(f"clang DWARF {dwarf_version}, aranges {aranges}: inline chains equal to "
          f"llvm-symbolizer's at {compared} addresses, {deep} of them two inlined "
          "calls deep or more")
    assert compared > 50 and deep > 10, (compared, deep)


@pytest.fixture(scope="module")
def clang_built(tmp_path_factory):
    """inline_chain.c by clang -O2 -g: no .debug_aranges."""
    _require_clang()
    program = tmp_path_factory.mktemp("clang") / "inline_chain"
    subprocess.run(["clang", "-O2", "-g", "-o", str(program), str(PROGRAMS / "inline_chain.c")],
                   check=True, capture_output=True)
    assert _aranges_units(program) is None
    return program


def _base_line(symbols, address):
    """(file base name, line) of an address, or None."""
    line = symbols.line(address)
    return (os.path.basename(line.file), line.line) if line is not None else None


def test_split_dwarf_skeleton_units_give_the_lines(clang_built, tmp_path):
    """clang -gsplit-dwarf: the main file holds skeleton units only (their
    entries in a .dwo file sfbt does not read), no aranges; the skeleton's
    top entry says what it holds and finds its line program (not the
    whole line table read): the lines of the build without
    -gsplit-dwarf at every instruction (the file's directory aside: the
    .dwo is written in another)."""
    from sfbt.dwarf.units import UnitIndex
    from sfbt.symbols.symbolizer import FileSymbolizer
    split = tmp_path / "split"
    subprocess.run(["clang", "-O2", "-g", "-gsplit-dwarf", "-o", str(split),
                    str(PROGRAMS / "inline_chain.c")], check=True, capture_output=True,
                   cwd=tmp_path)
    assert _aranges_units(split) is None
    dump = subprocess.run(["readelf", "-wN", "--debug-dump=info", str(split)],
                          capture_output=True, text=True, check=True).stdout
    assert "DW_TAG_skeleton_unit" in dump and "DW_TAG_compile_unit" not in dump
    assert UnitIndex(_dwarf_bytes(split)).unit(_text_addresses(split, ("work",))[0]) == 0
    ours, plain = FileSymbolizer.open(str(split)), FileSymbolizer.open(str(clang_built))
    try:
        addresses = _text_addresses(split)
        assert addresses == _text_addresses(clang_built)
        lines = [_base_line(ours, address) for address in addresses]
        assert lines == [_base_line(plain, address) for address in addresses]
    finally:
        ours.close()
        plain.close()
    assert sum(line is not None for line in lines) > 50, lines


def test_unlisted_units_ranges_are_kept_and_a_damaged_entry_rebuilt(clang_built, monkeypatch):
    """The ranges read from the top entries of the units aranges leave out
    are kept in the symbols cache: a second symbolizer of the file reads
    no top entry; a damaged entry is read again and kept again."""
    from sfbt.cache import identity
    from sfbt.dwarf.units import top_entry_ranges
    from sfbt.symbols import symbolizer
    work = _text_addresses(clang_built, ("work",))
    read = []
    monkeypatch.setattr(symbolizer, "top_entry_ranges",
                        lambda *args: read.append(args) or top_entry_ranges(*args))
    with open(clang_built, "rb") as stream:
        key = identity(stream.fileno(), symbolizer.CACHE_FORMAT, "unit ranges")
    symbolizer.CACHE.put(key, b"")  # whatever an earlier test kept

    def inlined_names():
        """The names of the calls inlined at each instruction of work."""
        symbols = symbolizer.FileSymbolizer.open(str(clang_built))
        try:
            return [[call.name for call in symbols.inlined(address)] for address in work]
        finally:
            symbols.close()

    names = inlined_names()
    kept = symbolizer.CACHE.get(key)
    assert any(names) and len(read) == 1 and kept, (names, read, kept)
    assert inlined_names() == names and len(read) == 1
    for damaged in (kept[:-1], b'[[1,2,"x"]]', b"{}"):
        assert symbolizer.CACHE.put(key, damaged)
        assert inlined_names() == names
        assert symbolizer.CACHE.get(key) == kept  # read again and kept again
    assert len(read) == 4


def test_damaged_top_entries_end_in_an_error_not_a_hang(clang_built):
    """A clang program without aranges, bytes of its units' headers and
    top entries (and of their abbreviations) overwritten at random
    (seeded): each look-up of the unit at an address ends, in a unit or
    none or in an error its callers catch, within a second."""
    import random
    import struct
    from sfbt.dwarf.line_program import DwarfBytes
    from sfbt.dwarf.units import UnitIndex
    from sfbt.elf import ElfImage, open_elf
    program = clang_built
    _, offsets = _units(program)
    stream, image = open_elf(str(program))
    with stream:
        info, abbrev = image.section(".debug_info"), image.section(".debug_abbrev")
    places = [info.offset + unit + at for unit in offsets for at in range(40)] \
        + list(range(abbrev.offset, abbrev.offset + min(abbrev.size, 64)))
    work = _text_addresses(program, ("work",))[0]
    data = program.read_bytes()
    assert UnitIndex(_dwarf_bytes(program)).unit(work) == offsets[0]
    randomly = random.Random(2026)
    outcomes = {"found": 0, "none": 0, "error": 0}
    for _ in range(400):
        damaged = bytearray(data)
        for place in randomly.sample(places, 3):
            damaged[place] = randomly.randrange(256)
        began = time.perf_counter()
        try:
            dwarf = DwarfBytes(ElfImage.from_file(io.BytesIO(bytes(damaged)), "damaged"))
            outcomes["none" if UnitIndex(dwarf).unit(work) is None else "found"] += 1
        except (ValueError, IndexError, struct.error):
            outcomes["error"] += 1
        assert time.perf_counter() - began < 1, outcomes
    print(f"damaged top entries: {outcomes}")
    assert outcomes["found"] > 0 and outcomes["error"] > 0, outcomes


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
    offset = max(offsets, key=lambda o: len(inline._calls(Unit(sections, o), print)[0]))
    randomly = random.Random(2026)
    outcomes = {"segments": 0, "error": 0}
    for _ in range(400):
        damaged = sections._replace(tables={}, **{  # the abbreviations read afresh
            name: _overwritten(getattr(sections, name), randomly, start)
            for name, start in (("info", offset + 12), ("abbrev", 0), ("rnglists", 12))})
        began = time.perf_counter()
        try:
            calls, functions = inline._calls(Unit(damaged, offset), print)
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


def test_packed_lookups_round_trip_and_refuse_malformed_entries():
    """A unit's chains as the cache keeps them (UnitLookup.packed: each
    name, file and distinct chain once) give the chains they were made
    from; what a damaged entry points at wrongly gives no chain or name,
    never an error."""
    from sfbt.dwarf.chains import InlinedCall, UnitFrames, UnitLookup
    chain = [["inner", "a.c", 3], ["outer", None, 7]]
    frames = UnitFrames([[0x10, 0x20, chain], [0x20, 0x30, chain], [0x30, 0x38, chain[1:]]],
                        [[0x0, 0x40, "f"]])
    lookup = UnitLookup.from_packed(json.loads(json.dumps(UnitLookup.of(frames).packed())))
    assert lookup.chain(0x1f) == lookup.chain(0x20) == [
        InlinedCall("inner", "a.c", 3), InlinedCall("outer", None, 7)]
    assert lookup.chain(0x30) == [InlinedCall("outer", None, 7)] and lookup.chain(0x38) == []
    assert len(lookup.chains) == 2 and lookup.strings.count("inner") == 1
    assert lookup.function(0x3f) == "f" and lookup.function(0x40) is None
    for strings, chains, calls, functions in (
            (["x"], [[0, 5, 1]], [[0, 16, 0]], [[0, 16, 3]]),  # indexes out of range
            (["x"], [[0, -1, "1"]], [[0, 16, 0]], [[0, 16, "x"]]),  # a line, a name not ints
            ([7], [[0, -1, 1, 0]], [[0, 16, 0]], [[0, 16, 0]]),  # a name not a string
            (["x"], [[0, -1, 1]], [[0, 16, 9]], [[0, 16]]),  # no such chain, a short segment
            (["x"], [[0, -1]], [[0, 16, 0]], [[None, 16, 0]]),  # a chain cut short
            (["x"], [[0, -1, 1]], [[0, "16", 0]], [[0, 16.0, 0]])):  # bounds not ints
        broken = UnitLookup.from_packed([strings, chains, calls, functions])
        assert broken.chain(5) == [] and broken.function(5) is None
    assert UnitLookup.from_packed({"calls": []}) is None
    assert UnitLookup.from_packed([[], "chains", [], []]) is None
    assert UnitLookup.from_packed([[], [], []]) is None


def test_a_sibling_pointing_at_the_first_child_is_not_taken(inlined, tmp_path):
    """An entry with children whose DW_AT_sibling points at the end of its
    own attributes (its first child: the children, at least the null entry
    closing them, come before any sibling) is read child by child: the
    inline reader and the call-site reader find in the unit what they
    find with the true sibling (taking such a sibling read the children
    one level too high, and the unit's walk ended at their null entry,
    the functions after it lost)."""
    from elftools.elf.elffile import ELFFile
    from sfbt.dwarf.call_sites import unit_call_sites
    from sfbt.dwarf.inline import unit_frames
    data = bytearray(inlined.read_bytes())
    elf = ELFFile(io.BytesIO(bytes(data)))
    info = elf.get_section_by_name(".debug_info")
    unit = next(elf.get_dwarf_info().iter_CUs())
    children = list(unit.get_top_DIE().iter_children())
    first = next(i for i, entry in enumerate(children)
                 if entry.has_children and entry.tag == "DW_TAG_array_type"
                 and entry.attributes.get("DW_AT_sibling", None) is not None)
    entry = children[first]
    sibling = entry.attributes["DW_AT_sibling"]
    assert sibling.form == "DW_FORM_ref4"
    assert any(later.tag == "DW_TAG_subprogram" and "DW_AT_low_pc" in later.attributes
               for later in children[first + 1:]), "no function after the entry"
    at = info["sh_offset"] + sibling.offset
    data[at:at + 4] = (entry.offset + entry.size - unit.cu_offset).to_bytes(4, "little")
    patched = tmp_path / "first_child_sibling"
    patched.write_bytes(data)
    original, damaged = _dwarf_bytes(inlined), _dwarf_bytes(patched)
    expected = unit_frames(original, unit.cu_offset)
    assert expected.calls and expected.functions
    assert unit_frames(damaged, unit.cu_offset) == expected
    sites = unit_call_sites(original, unit.cu_offset)
    assert sites.sites
    found = unit_call_sites(damaged, unit.cu_offset)
    assert (found.sites, found.tail_calls) == (sites.sites, sites.tail_calls)
