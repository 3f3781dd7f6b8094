"""Corrupt and truncated sections: one error type, naming field and offset;
never another exception, never a hang."""

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CONFORMANCE
from sframe_samples import amd64_section
from sfbt.sframe import (SFrameError, check_section, dump_text, lookup_text,
                         read_section, write_section)


def _conformance_samples():
    samples = []
    for path in sorted((CONFORMANCE / "simple-frame-rs").glob("*.json")):
        case = json.loads(path.read_text())
        if case["content"]:
            samples.append((bytes(case["content"]), case["section_base"]))
    return samples


SAMPLES = _conformance_samples() + [
    (write_section(amd64_section(v)), 0x402000) for v in (1, 2, 3)]


def exercise(data, address):
    """Everything a user can do with a section; only SFrameError may escape."""
    try:
        section = read_section(data, address)
        check_section(section)
        dump_text(section)
        for function in section.functions[:6]:
            for pc in (function.start, function.start + 1, function.end - 1,
                       function.start + 17):
                section.find_row(pc)
                lookup_text(section, pc)
    except SFrameError as error:
        assert str(error).startswith(".sframe")
        return error
    return None


def test_every_truncation_of_every_sample_fails_cleanly():
    failures = 0
    for data, address in SAMPLES:
        for length in range(1, len(data)):
            error = exercise(data[:length], address)
            if length < 28:
                assert error is not None and "header" in error.message
            failures += error is not None
    assert failures > 0


@settings(max_examples=3000, deadline=None)
@given(st.integers(0, len(SAMPLES) - 1), st.integers(0, 10**6),
       st.integers(0, 255), st.integers(1, 4))
def test_random_corruption_fails_cleanly(sample, position, value, count):
    data, address = SAMPLES[sample]
    corrupt = bytearray(data)
    for n in range(count):
        corrupt[(position + 7 * n) % len(data)] = (value + n) & 0xFF
    exercise(bytes(corrupt), address)


def _v2_with_fde_fre_offset(index, fre_offset):
    data = bytearray(write_section(amd64_section(2)))
    fde = 28 + index * 20
    struct.pack_into("<I", data, fde + 8, fre_offset)
    return bytes(data)


def test_error_names_the_fde_field_and_offset():
    data = _v2_with_fde_fre_offset(3, 0x9000)
    fre_len = struct.unpack_from("<I", data, 16)[0]
    with pytest.raises(SFrameError) as caught:
        read_section(data)
    assert str(caught.value) == (
        f".sframe+{28 + 3 * 20 + 8:#x}: FDE 3 FRE offset 0x9000 beyond FRE "
        f"sub-section ({fre_len:#x} bytes)")


@pytest.mark.parametrize("offset,value,message", [
    (0, b"\x00\x00", "bad magic"),
    (2, b"\x07", "unsupported SFrame version 7"),
    (3, b"\x80", "unknown flags 0x80"),
    (4, b"\x09", "unknown ABI/arch 9"),
    (7, b"\xff", "auxiliary header"),
    (8, b"\xff\xff\x00\x00", "FDE table"),
    (12, b"\x09\x00\x00\x00", "sfh_num_fres is 9"),
    (16, b"\xff\xff\x00\x00", "FRE sub-section"),
])
def test_header_corruption(offset, value, message):
    data = bytearray(write_section(amd64_section(3)))
    data[offset:offset + len(value)] = value
    with pytest.raises(SFrameError) as caught:
        read_section(bytes(data))
    assert message in caught.value.message
    assert caught.value.offset == offset


def test_bad_row_is_reported_when_its_function_is_used():
    section = amd64_section(3)
    data = bytearray(write_section(section))
    # v3: FRE sub-section after 4 index entries of 16 bytes; the second
    # function's rows follow the PLT's attribute (5) and two rows (3 bytes
    # each) and its own attribute (5): set its first row's word size to 3.
    rows_at = 28 + 4 * 16 + 5 + 2 * 3 + 5
    data[rows_at + 1] |= 0x60
    opened = read_section(bytes(data), 0x402000)
    assert opened.find_row(0x401005) is not None  # PLT rows are intact
    with pytest.raises(SFrameError) as caught:
        opened.find_row(0x401100)
    assert "FDE 1 FRE 0 has invalid data word size" in str(caught.value)
    assert caught.value.offset == rows_at + 1


def test_huge_counts_do_not_allocate_or_loop():
    data = bytearray(write_section(amd64_section(2)))
    struct.pack_into("<I", data, 28 + 12, 0xFFFFFFFF)  # FDE 0 num_fres
    with pytest.raises(SFrameError) as caught:
        read_section(bytes(data))
    assert "claims 4294967295 FREs" in caught.value.message
