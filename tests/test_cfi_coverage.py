"""sfbt.dwarf.coverage: which addresses an ELF file's DWARF CFI covers, the
frame unwinder's `auto` test.  Checked against pyelftools' reading of the
same FDEs at every address of the code, through .eh_frame_hdr's table, a
full parse of .eh_frame (no .eh_frame_hdr) and .debug_frame."""

import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from gdb_support import PROGRAMS
from sfbt.dwarf.coverage import CfiCoverage
from sfbt.dwarf.fdes import EhFrameHdrTable, ParsedFdes


def build(directory, name, *flags):
    output = directory / name
    subprocess.run(["gcc", "-g", "-O2", "-Wa,--gsframe", *flags, "-o", str(output),
                    str(PROGRAMS / "recurse.c"), str(PROGRAMS / "libapply.c")],
                   check=True, capture_output=True)
    return output


def pyelftools_ranges(path):
    """[(start, end)] of every FDE, as pyelftools reads them."""
    ranges = []
    with open(path, "rb") as stream:
        dwarf = ELFFile(stream).get_dwarf_info()
        entries = (list(dwarf.EH_CFI_entries()) if dwarf.has_EH_CFI() else []) + (
            list(dwarf.CFI_entries()) if dwarf.has_CFI() else [])
        for entry in entries:
            if hasattr(entry, "header") and "initial_location" in entry.header:
                start = entry.header["initial_location"]
                ranges.append((start, start + entry.header["address_range"]))
    return ranges


def code_addresses(path):
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        spans = [(s["sh_addr"], s["sh_addr"] + s["sh_size"]) for s in elf.iter_sections()
                 if s["sh_flags"] & 4 and s["sh_size"]]  # SHF_EXECINSTR
    return [address for start, end in spans for address in range(start, end)]


def assert_agrees(path, lookup_type):
    coverage = CfiCoverage.of_file(str(path))
    assert [type(lookup) for lookup in coverage.index.lookups] == [lookup_type]
    ranges = pyelftools_ranges(path)
    assert ranges
    covered = 0
    for address in code_addresses(path):
        expected = any(start <= address < end for start, end in ranges)
        assert coverage.covers(address) == expected, hex(address)
        covered += expected
    assert covered > 100
    return coverage


def test_eh_frame_through_its_header_table(tmp_path):
    assert_agrees(build(tmp_path, "with-hdr"), EhFrameHdrTable)


def test_eh_frame_without_a_header_table(tmp_path):
    program = build(tmp_path, "no-hdr")
    subprocess.run(["objcopy", "--remove-section", ".eh_frame_hdr", str(program)],
                   check=True, capture_output=True)
    assert_agrees(program, ParsedFdes)


def test_debug_frame_only(tmp_path):
    program = build(tmp_path, "debug-frame", "-fno-asynchronous-unwind-tables",
                    "-fno-unwind-tables")
    subprocess.run(["objcopy", "--remove-section", ".eh_frame", "--remove-section",
                    ".eh_frame_hdr", str(program)], check=True, capture_output=True)
    assert_agrees(program, ParsedFdes)


@pytest.mark.parametrize("flags", [(), ("-fno-asynchronous-unwind-tables",
                                        "-fno-unwind-tables")])
def test_sframe_only_code_has_no_coverage(tmp_path, flags):
    program = build(tmp_path, "sframe-only", "-g0", *flags)
    subprocess.run(["objcopy", "--remove-section", ".eh_frame", "--remove-section",
                    ".eh_frame_hdr", "--remove-section", ".debug_frame", str(program)],
                   check=True, capture_output=True)
    coverage = CfiCoverage.of_file(str(program))
    assert not coverage.has_cfi
    assert not any(coverage.covers(address) for address in code_addresses(program))
