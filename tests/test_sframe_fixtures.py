"""The committed fixtures, made by real toolchains (tests/fixtures/regen.sh):
sfbt's dump equals objdump's, sections round-trip byte for byte, and lookup
agrees with objdump's rows at every address of every function."""

import re

import pytest

from conftest import FIXTURES, objdump_contents
from sfbt.cli import main
from sfbt.sframe import lookup_text, read_section, write_section
from sfbt.sframe.in_elf import read_elf_sframe_bytes

DUMPS = sorted(FIXTURES.glob("v*/*/*.objdump"))


def fixture_id(path):
    return str(path.relative_to(FIXTURES)).removesuffix(".objdump")


def test_fixtures_cover_versions_and_abis():
    names = {fixture_id(p) for p in DUMPS}
    for prefix in ("v1/x86_64", "v1/aarch64", "v3/x86_64", "v3/aarch64",
                   "v3/s390x"):
        assert any(n.startswith(prefix + "/") for n in names), prefix


@pytest.mark.parametrize("dump", DUMPS, ids=fixture_id)
def test_dump_matches_objdump(dump, capsys):
    status = main(["sframe", "dump", str(dump.with_suffix(""))])
    out = capsys.readouterr().out
    assert status == 0
    expected = objdump_contents(dump.read_text())
    assert expected, "objdump found no SFrame section"
    assert objdump_contents(out) == expected


@pytest.mark.parametrize("dump", DUMPS, ids=fixture_id)
def test_section_round_trips_byte_for_byte(dump):
    (data, address, name), _ = read_elf_sframe_bytes(dump.with_suffix(""))
    assert write_section(read_section(data, address, name)) == data


_FUNCTION = re.compile(r"^    func idx \[\d+\]: pc = 0x([0-9a-f]+), size = (\d+) bytes")
_ROW = re.compile(r"^    ([0-9a-f]{16})  (.*)$")


def objdump_functions(text):
    """(start, size, is_mask, [(address, columns text)]) per function."""
    functions = []
    for line in objdump_contents(text).splitlines():
        if match := _FUNCTION.match(line):
            functions.append((int(match[1], 16), int(match[2]), False, []))
        elif line.startswith("    STARTPC[m]"):
            start, size, _, rows = functions[-1]
            functions[-1] = (start, size, True, rows)
        elif match := _ROW.match(line):
            functions[-1][3].append((int(match[1], 16), " ".join(match[2].split())))
    return functions


def test_lookup_agrees_with_objdump_at_every_address():
    checked = 0
    for dump in DUMPS:
        (data, address, name), _ = read_elf_sframe_bytes(dump.with_suffix(""))
        section = read_section(data, address, name)
        functions = objdump_functions(dump.read_text())
        ranges = sorted((start, start + size) for start, size, _, _ in functions)
        overlapping = {r for r, nxt in zip(ranges, ranges[1:]) if r[1] > nxt[0]}
        overlapping |= {nxt for r, nxt in zip(ranges, ranges[1:]) if r[1] > nxt[0]}
        for start, size, is_mask, rows in functions:
            if is_mask or (start, start + size) in overlapping:
                continue
            for pc in range(start, start + size):
                in_force = [cols for row_start, cols in rows if row_start <= pc]
                expected = in_force[-1] if in_force else "none"
                assert lookup_text(section, pc) == expected, (fixture_id(dump), hex(pc))
                checked += 1
    print(f"lookup matched objdump's rows at {checked} addresses")
    assert checked > 10000
