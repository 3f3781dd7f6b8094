"""The one symbolizer of an ELF file (sfbt.symbols): function names from
the symbol table read in place, with the choice rules GDB's minimal
symbols follow, PLT stubs named as GDB names them, the function table
kept in sfbt's cache, a damaged entry rebuilt, and line programs read
with struct into the rows pyelftools reads."""

import re
import subprocess
from pathlib import Path

import pytest

from sfbt.cache import identity
from sfbt.dwarf.line_program import DwarfBytes, every_unit_rows, preferred_rows
from sfbt.elf import ElfImage
from sfbt.symbols.symbolizer import CACHE, CACHE_FORMAT, FileSymbolizer

CROSS = Path(__file__).resolve().parent / "cross"

NAMES = r"""
#include <stdio.h>
#include <stdlib.h>
static int counted;
__attribute__((noinline)) static int local_work(int x) { return x * 3 + counted++; }
int global_work(int x) __attribute__((alias("local_work")));
int weak_work(int x) __attribute__((weak, alias("local_work")));
__asm__(".text\n.globl sizeless\n.type sizeless,@function\nsizeless:\n ret\n nop\n nop\n");
int main(int argc, char **argv) {
    puts("x");
    printf("%d\n", atoi(argv[0]) + global_work(argc));
    return 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """{binding: program}: the same source linked for lazy binding and
    with -z now (its stubs in .plt.got)."""
    directory = tmp_path_factory.mktemp("symbols")
    source = directory / "names.c"
    source.write_text(NAMES)
    built = {}
    for name, flags in (("lazy", []), ("now", ["-Wl,-z,now"])):
        built[name] = directory / name
        subprocess.run(["gcc", "-O1", "-fPIE", "-pie", *flags, "-o", str(built[name]),
                        str(source)], check=True)
    return built


def _nm(program):
    """{name: address} of the program's symbols."""
    listed = subprocess.run(["nm", str(program)], check=True, capture_output=True,
                            text=True).stdout
    return {fields[2]: int(fields[0], 16) for fields in map(str.split, listed.splitlines())
            if len(fields) == 3}


def _plt_addresses(program):
    """Each PLT stub's address and one inside it, from objdump."""
    dumped = subprocess.run(["objdump", "-d", "-j", ".plt", "-j", ".plt.sec", "-j",
                             ".plt.got", str(program)], capture_output=True, text=True).stdout
    starts = [int(start, 16) for start in re.findall(r"^([0-9a-f]+) <[^>]*@plt>:$",
                                                     dumped, re.M)]
    return [address for start in starts for address in (start, start + 4)]


def _gdb_names(gdb, program, addresses):
    """GDB's `info symbol` name of each address (None: no symbol)."""
    out = gdb.run([str(program)], [f"info symbol {a:#x}" for a in addresses], plugin=False)
    names = []
    for line in out.splitlines():
        if line.startswith("No symbol matches"):
            names.append(None)
        elif " in section " in line:
            names.append(re.sub(r" \+ \d+$", "", line.split(" in section ")[0]))
    assert len(names) == len(addresses), out
    return names


def test_plt_stubs_are_named_as_gdb_names_them(gdb, programs):
    compared = 0
    for program in programs.values():
        addresses = _plt_addresses(program)
        assert len(addresses) >= 6, program  # puts, printf, atoi (or strtol), ...
        symbols = FileSymbolizer.open(str(program))
        try:
            ours = [symbols.function(address) for address in addresses]
        finally:
            symbols.close()
        assert ours == _gdb_names(gdb, program, addresses)
        assert "puts@plt" in ours
        compared += len(addresses)
    print(f"PLT addresses named as GDB names them: {compared}")


def test_aarch64_plt_stubs_are_named_as_gdb_names_them(cross_gdb):
    program = CROSS / "aarch64" / "dynamic-v3"
    sections = subprocess.run(["readelf", "-SW", str(program)], check=True,
                              capture_output=True, text=True).stdout
    plt = re.search(r"\] \.plt\s+PROGBITS\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+)", sections)
    start, size = int(plt[1], 16), int(plt[2], 16)
    # the stubs after the 32 bytes of the PLT's head, which GDB leaves unnamed
    addresses = [a for stub in range(start, start + size, 16) for a in (stub, stub + 8)]
    symbols = FileSymbolizer.open(str(program))
    try:
        ours = [symbols.function(address) for address in addresses]
    finally:
        symbols.close()
    assert ours[:4] == [None] * 4 and len(set(ours)) >= 4
    assert ours == _gdb_names(cross_gdb, program, addresses)


def test_names_follow_gdbs_choice(gdb, programs):
    """Of the names at one address the last by name (weak_work of
    global_work, local_work and weak_work), as `info symbol` says; a
    symbol without a size reaches to the end of its section."""
    program = programs["lazy"]
    address = _nm(program)
    sections = subprocess.run(["readelf", "-SW", str(program)], check=True,
                              capture_output=True, text=True).stdout
    text = re.search(r"\] \.text\s+PROGBITS\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+)", sections)
    text_end = int(text[1], 16) + int(text[2], 16)
    sizeless = address["sizeless"]
    asked = [address["local_work"], address["main"] + 4, sizeless, sizeless + 2]
    symbols = FileSymbolizer.open(str(program))
    try:
        ours = [symbols.function(a) for a in asked]
        assert symbols.function(text_end) != "sizeless"
    finally:
        symbols.close()
    assert ours[0] == "weak_work" and ours[1] == "main" and ours[2:] == ["sizeless"] * 2
    assert ours == _gdb_names(gdb, program, asked)


def test_the_function_table_is_kept_and_a_damaged_entry_rebuilt(programs):
    program = str(programs["now"])
    main = _nm(program)["main"]
    first = FileSymbolizer.open(program)
    with open(program, "rb") as stream:
        key = identity(stream.fileno(), CACHE_FORMAT, "functions")
    try:
        assert first.function(main) == "main"
        kept = CACHE.get(key)
        assert kept is not None and len(kept) == 12 + 24 * len(first.function_table())
    finally:
        first.close()
    for damaged in (kept[:-1], kept[:12], b"\xff" * 7):
        assert CACHE.put(key, damaged)
        again = FileSymbolizer.open(program)
        try:
            assert again.function(main) == "main"
        finally:
            again.close()
        assert CACHE.get(key) == kept  # rebuilt and kept again


def _pyelftools_rows(path):
    """Every line program's rows as pyelftools runs them, as the reader
    gives them: (address, file name, line, is_stmt), an end of sequence
    (address, None, 0, True)."""
    from elftools.elf.elffile import ELFFile
    from inline_reference import file_names
    rows = []
    with open(path, "rb") as stream:
        dwarf = ELFFile(stream).get_dwarf_info()
        for unit in dwarf.iter_CUs():
            program = dwarf.line_program_for_CU(unit)
            names = file_names(program)
            first = 0 if program["version"] >= 5 else 1
            for entry in program.get_entries():
                state = entry.state
                if state is None:
                    continue
                if state.end_sequence:
                    rows.append((state.address, None, 0, True))
                elif 0 <= state.file - first < len(names):
                    rows.append((state.address, names[state.file - first], state.line,
                                 bool(state.is_stmt)))
    return rows


@pytest.mark.parametrize("flags", [["-gdwarf-4"], ["-gdwarf-5"], ["-gdwarf-5", "-gz"],
                                   ["-gdwarf-5", "zlib-gnu"]],
                         ids=["dwarf4", "dwarf5", "dwarf5-compressed", "dwarf5-zlib-gnu"])
def test_line_programs_read_as_pyelftools_reads_them(tmp_path, flags):
    """Also from GNU's older .zdebug_* sections (objcopy's zlib-gnu), read
    as pyelftools reads the build they were made from."""
    source = tmp_path / "names.c"
    source.write_text(NAMES)
    program = tmp_path / "program"
    subprocess.run(["gcc", "-O2", *(f for f in flags if f != "zlib-gnu"), "-o", str(program),
                    str(source)], check=True)
    ours_from = program
    if "zlib-gnu" in flags:
        ours_from = tmp_path / "zdebug"
        subprocess.run(["objcopy", "--compress-debug-sections=zlib-gnu", str(program),
                        str(ours_from)], check=True)
    cross = CROSS / "aarch64" / "dynamic-v3"
    for path, read in ((program, ours_from), (cross, cross)):
        theirs = _pyelftools_rows(path)
        with open(read, "rb") as stream:
            image = ElfImage.from_file(stream, str(read))
            assert (image.section(".zdebug_line") is not None) == (read != path)
            ours = every_unit_rows(DwarfBytes(image))
        assert len(ours) > 5
        assert ours == [tuple(row) for row in preferred_rows(theirs)]
        with open(path, "rb") as stream:
            lldb = every_unit_rows(DwarfBytes(ElfImage.from_file(stream, str(path))), "lldb")
        assert lldb == [tuple(row) for row in preferred_rows(theirs, "lldb")]


def test_each_debugger_takes_its_row_where_an_address_has_several():
    """GDB the last statement row, LLDB the last row (its line table keeps
    the last of rows at one address); one row is each one's."""
    rows = [(0x10, "a.c", 12, True), (0x10, "a.c", 13, True), (0x10, "a.c", 14, False),
            (0x16, "a.c", 13, False), (0x20, None, 0, True)]
    assert preferred_rows(rows) == [rows[1], rows[3], rows[4]]
    assert preferred_rows(rows, "lldb") == [rows[2], rows[3], rows[4]]
