"""The simple-frame-rs conformance cases: raw sections with objdump's output
(binutils 2.40, 2.45 and 2.46)."""

import json

import pytest

from conftest import CONFORMANCE, objdump_contents, run_sfbt
from sfbt.cli import main
from sfbt.sframe import dump_text, read_section, write_section

CASES = sorted((CONFORMANCE / "simple-frame-rs").glob("*.json"))


def load(path):
    case = json.loads(path.read_text())
    return bytes(case["content"]), case["section_base"], case["groundtruth"]


def test_conformance_data_is_present():
    assert len(CASES) >= 100, f"conformance cases not found in {CONFORMANCE}"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_dump_matches_objdump(path):
    data, base, groundtruth = load(path)
    assert dump_text(read_section(data, base)) == objdump_contents(groundtruth)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_section_round_trips_byte_for_byte(path):
    data, base, _ = load(path)
    assert write_section(read_section(data, base)) == data


def test_cli_raw_dump_matches_objdump_for_every_case(tmp_path, capsys):
    matched = 0
    for path in CASES:
        data, base, groundtruth = load(path)
        raw = tmp_path / "section.bin"
        raw.write_bytes(data)
        status = main(["sframe", "dump", "--raw", str(raw), "--address", hex(base)])
        out = capsys.readouterr().out
        assert status == 0, path.name
        assert out == objdump_contents(groundtruth), path.name
        matched += 1
    with capsys.disabled():
        print(f"\nsfbt sframe dump --raw matched objdump on {matched} "
              "conformance cases")
    assert matched == len(CASES)


def test_cli_as_a_process(tmp_path):
    data, base, groundtruth = load(CONFORMANCE / "simple-frame-rs"
                                   / "cfi-sframe-x86_64-1-2.46.json")
    raw = tmp_path / "section.bin"
    raw.write_bytes(data)
    result = run_sfbt("sframe", "dump", "--raw", raw, "--address", hex(base))
    assert result.returncode == 0, result.stderr
    assert result.stdout == objdump_contents(groundtruth)
    result = run_sfbt("sframe", "lookup", "--raw", raw, "--address", hex(base),
                      "0x401000", "0x401004", "0x401018", "0x401019", "0x500000")
    assert result.stdout.splitlines() == [
        "0x401000: sp+8 u f",
        "0x401004: fp+16 c-16 f",
        "0x401018: sp+8 c-16 f",
        "0x401019: none",
        "0x500000: none",
    ]
