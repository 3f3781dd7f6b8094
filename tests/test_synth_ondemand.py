"""SFrame rows made per function as walks reach them (sfbt.dwarf.ondemand):
the FDE found through .eh_frame_hdr (or an index of a whole parse), the
same rows as a whole synthesis at every address, and the DWARF register
rules of the same FDE."""

import shutil
import struct
import subprocess

import pytest

from conftest import FIXTURES
from synth_support import fixture_files
from sfbt.dwarf import fdes as fde_lookup
from sfbt.dwarf import synthesize_elf
from sfbt.dwarf.cfa import register_rows
from sfbt.dwarf.cfi import parse_cfi
from sfbt.elf import open_elf
from sfbt.unwind.modules import ModuleMap, SFrameSources
from sfbt.unwind.target import Module

LD_SO = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"


def _linked(path):
    stream, image = open_elf(str(path))
    with stream:
        return not image.relocatable and image.section(".eh_frame") is not None


def _row_key(row):
    """What a walk reads of a row, and where its function and row start."""
    if row is None:
        return None
    function = row.function
    return (row[2:], function.start, function.size, function.fde_type, function.pc_type,
            row.entry.start_offset)


def _source(path):
    source = SFrameSources().synthesized(Module(str(path), 0, 0, 1 << 47, build_id=None))
    assert source.origin == "synth", source.describe()
    return source


def _same_rows_everywhere(path):
    """Compares every address from the first function's start to the last
    one's end (rows, left-out ranges and gaps); returns the count."""
    whole = synthesize_elf(path).section
    section = _source(path).section
    functions = whole.functions
    first, last = min(f.start for f in functions), max(f.end for f in functions)
    for pc in range(first, last + 1):
        assert _row_key(section.find_row(pc)) == _row_key(whole.find_row(pc)), hex(pc)
    return last + 1 - first


@pytest.mark.parametrize("path", [p for p in fixture_files() if _linked(p)],
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_rows_per_function_are_the_whole_synthesis_rows(path):
    assert _same_rows_everywhere(path) > 0


def test_rows_per_function_in_the_dynamic_linker():
    """ld.so: glibc's hand-written assembly (the lazy-binding resolver,
    _dl_runtime_resolve with its DRAP-like CFA) and the PLT."""
    whole = synthesize_elf(LD_SO).section
    section = _source(LD_SO).section
    compared = 0
    for function in whole.functions:
        for pc in range(function.start, function.end):
            assert _row_key(section.find_row(pc)) == _row_key(whole.find_row(pc)), hex(pc)
            compared += 1
    assert compared > 100000


def _rules_by_scan(fde, pc, registers):
    """The rules at pc of the FDE's programs run afresh, their rows
    scanned in order."""
    rows = register_rows(fde, registers)
    if rows is None or (rows[2] is not None and rows[2] <= pc):
        return None
    found = None
    for address, rules in zip(rows[0], rows[1]):
        if address > pc:
            break
        found = rules
    return found


def test_register_rules_are_those_of_the_covering_fde():
    source = _source(LD_SO)
    stream, image = open_elf(LD_SO)
    with stream:
        section = image.section(".eh_frame")
        fdes, _ = parse_cfi(image.section_data(section), section.addr)
    registers = list(range(17))
    checked = 0
    for fde in fdes[::7]:
        # backwards: each answer from the FDE's rows kept by the first
        for pc in range(fde.end - 1, fde.start - 1, -3):
            assert source.register_rules(pc, registers) == _rules_by_scan(fde, pc, registers)
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("flags", [["-Wl,--no-eh-frame-hdr"],
                                   ["-fno-asynchronous-unwind-tables", "-g"]],
                         ids=["no-eh-frame-hdr", "debug-frame-only"])
def test_rows_without_a_table(tmp_path, flags):
    """Without .eh_frame_hdr, and from .debug_frame, the FDEs are indexed
    from one parse: the same rows."""
    program = tmp_path / "callchain"
    subprocess.run(["gcc", "-O2", *flags, "-o", str(program),
                    str(FIXTURES / "src" / "callchain.c")], check=True, capture_output=True)
    stream, image = open_elf(str(program))
    with stream:
        has_hdr = image.section(".eh_frame_hdr") is not None
    assert not has_hdr or "-g" in flags
    assert _same_rows_everywhere(program) > 0


def test_a_walk_parses_no_more_than_the_fde_it_needs(monkeypatch):
    """With .eh_frame_hdr nothing is parsed whole: a lookup reads the
    table and one FDE."""
    whole = synthesize_elf(LD_SO).section

    def no_whole_parse(*args, **kwargs):
        raise AssertionError("the whole .eh_frame was parsed")

    monkeypatch.setattr(fde_lookup, "parse_cfi", no_whole_parse)
    module = Module(LD_SO, 0x10000, 0x10000, 0x10000 + (1 << 24), build_id=None)
    module_map = ModuleMap([module])
    function = whole.functions[len(whole.functions) // 2]
    _, row = module_map.row_for(0x10000 + function.start)
    assert _row_key(row) == _row_key(whole.find_row(function.start))
    assert module_map.source_for(module).describe().startswith(
        "synthesized from .eh_frame, ")


def test_a_table_pointing_at_no_fde_gives_no_row(tmp_path):
    """A .eh_frame_hdr whose entries point at the CIE, not at FDEs: no
    row where they lead, and no error out of the walk."""
    path = tmp_path / "libbad.so"
    shutil.copyfile(LD_SO, path)
    stream, image = open_elf(str(path))
    with stream:
        hdr = image.section(".eh_frame_hdr")
        eh_frame = image.section(".eh_frame")
        (count,) = struct.unpack_from("<I", image.section_data(hdr), 8)
    data = bytearray(path.read_bytes())
    for index in range(count):
        struct.pack_into("<i", data, hdr.offset + 12 + 8 * index + 4,
                         eh_frame.addr - hdr.addr)
    path.write_bytes(bytes(data))
    module = Module(str(path), 0, 0, 1 << 24, build_id=None)
    module_map = ModuleMap([module])
    whole = synthesize_elf(LD_SO).section
    assert all(module_map.row_for(f.start)[1] is None for f in whole.functions[::10])
    assert module_map.register_rules(module, whole.functions[0].start) is None
