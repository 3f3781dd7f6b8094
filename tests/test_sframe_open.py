"""Opening a section lazily: lookups reach only the FDEs they need, give the
same rows as a section built from its functions, and a bad FDE is reported
when something reaches it."""

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sframe_samples import amd64_section
from test_sframe_corrupt import SAMPLES
from sfbt.sframe import (FrameRowEntry, FunctionEntry, SFrameError, SFrameSection,
                         dump_text, lookup_text, open_section, write_section)
from sfbt.sframe import constants as C

ABIS = sorted(C.ABI_NAMES)


@st.composite
def many_functions(draw):
    """A section of 1 to 200 functions laid out one after another (or
    shuffled, with the sorted flag cleared), any version, ABI and order."""
    version = draw(st.sampled_from(C.VERSIONS))
    abi = draw(st.sampled_from(ABIS))
    address = draw(st.integers(0x1000, 1 << 40))
    count = draw(st.integers(1, 200))
    start = address - draw(st.integers(0, min(address, 1 << 24)))
    functions = []
    for number in range(count):
        size = draw(st.integers(1, 300))
        mask = draw(st.integers(0, 9)) == 0
        rows = [FrameRowEntry(0, C.BASE_REG_SP, (8,)),
                FrameRowEntry(min(size - 1, 1 + number % 5), C.BASE_REG_FP,
                              (16, -16))][:1 + (size > 1)]
        functions.append(FunctionEntry(
            start, size, rows, pc_type=C.PC_TYPE_MASK if mask else C.PC_TYPE_INC,
            rep_size=0 if version == C.VERSION_1 else 16))
        start += size + draw(st.integers(0, 40))
    flags = C.F_FDE_SORTED
    if version >= C.VERSION_2 and draw(st.booleans()):
        flags |= C.F_FDE_FUNC_START_PCREL
    if draw(st.booleans()):
        functions = draw(st.permutations(functions))
        flags &= ~C.F_FDE_SORTED
    return SFrameSection(version, abi, functions, flags=flags, address=address,
                         big_endian=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(many_functions(), st.randoms(use_true_random=False))
def test_lazy_lookups_equal_the_built_sections(section, rng):
    """Random PCs (the first ones answered by searching the bytes, later
    ones through the index of starts), every function's edges, and PCs
    outside every function."""
    opened = open_section(write_section(section), section.address)
    low = min(f.start for f in section.functions) - 8
    high = max(f.end for f in section.functions) + 8
    pcs = [rng.randrange(low, high) for _ in range(300)]
    for function in section.functions:
        pcs += [function.start - 1, function.start, function.end - 1, function.end]
    for pc in pcs:
        assert opened.find_row(pc) == section.find_row(pc), hex(pc)
        assert lookup_text(opened, pc) == lookup_text(section, pc), hex(pc)


@pytest.mark.parametrize("version,big_endian,pcrel", [
    (1, False, False), (2, True, False), (2, False, True), (3, True, True)])
def test_byte_search_then_index_of_starts(version, big_endian, pcrel):
    """A big sorted table is searched in its bytes (n/32 times), then
    through an index of every start; both give the built section's rows."""
    rng = random.Random(version)
    functions, start = [], 0x400000
    for number in range(5000):
        size = rng.randrange(1, 200)
        rows = [FrameRowEntry(0, C.BASE_REG_SP, (8 * (1 + number % 7),))]
        functions.append(FunctionEntry(start, size, rows))
        start += size + rng.randrange(0, 3)
    flags = C.F_FDE_SORTED | (C.F_FDE_FUNC_START_PCREL if pcrel else 0)
    section = SFrameSection(version, C.ABI_AARCH64_BE if big_endian else C.ABI_AMD64_LE,
                            functions, flags=flags, address=start + 0x1000)
    opened = open_section(write_section(section), section.address)
    pcs = [rng.randrange(0x400000 - 10, start + 10) for _ in range(2000)]
    for number, pc in enumerate(pcs):
        assert (opened._source._starts is None) == (number <= 5000 // 32)
        assert opened.find_row(pc) == section.find_row(pc), hex(pc)


def test_open_reads_only_the_fdes_a_lookup_reaches():
    functions = [FunctionEntry(0x10000 + 0x40 * i, 0x30,
                               [FrameRowEntry(0, C.BASE_REG_SP, (8,))])
                 for i in range(5000)]
    section = SFrameSection(C.VERSION_3, C.ABI_AMD64_LE, functions, address=0x200000)
    opened = open_section(write_section(section), section.address)
    assert opened.num_functions == 5000
    assert opened.find_row(0x10000 + 0x40 * 1234 + 5).cfa.offset == 8
    assert list(opened._source._functions) == [1234]
    assert opened.find_row(0x10000 + 0x40 * 1234 + 0x35) is None  # a gap
    assert opened.find_row(0x10000 + 0x40 * 77).cfa.offset == 8
    assert sorted(opened._source._functions) == [77, 1234]
    assert len(opened.functions) == 5000  # the whole table, read and checked


def _with_bad_fde(version):
    data = bytearray(write_section(amd64_section(version)))
    fde_size, fre_offset_field = {1: (17, 8), 2: (20, 8), 3: (16, 12)}[version]
    at = 28 + 2 * fde_size + fre_offset_field  # FDE 2's FRE offset
    struct.pack_into("<I", data, at, 0x9000)
    return bytes(data), at


@pytest.mark.parametrize("version", C.VERSIONS)
def test_a_bad_fde_is_reported_when_a_lookup_reaches_it(version):
    data, at = _with_bad_fde(version)
    opened = open_section(data, 0x402000)  # header and bounds are fine
    assert opened.find_row(0x401104).cfa.offset == 16  # FDE 1
    assert opened.find_row(0x401140).cfa.offset == 8  # FDE 3
    with pytest.raises(SFrameError) as caught:
        opened.find_row(0x401120)  # FDE 2
    assert caught.value.offset == at
    assert "FDE 2 FRE offset 0x9000 beyond FRE sub-section" in caught.value.message
    for whole_table in (lambda: opened.functions, lambda: dump_text(opened)):
        with pytest.raises(SFrameError) as caught:
            whole_table()
        assert caught.value.offset == at


def test_the_row_count_is_checked_with_the_whole_table():
    data = bytearray(write_section(amd64_section(3)))
    struct.pack_into("<I", data, 12, 9)  # sfh_num_fres
    opened = open_section(bytes(data), 0x402000)
    assert opened.find_row(0x401104) is not None
    with pytest.raises(SFrameError, match="sfh_num_fres is 9"):
        opened.functions


def _sample_pcs():
    """Each sample's function edges and a few PCs inside and around them."""
    pcs = []
    for data, address in SAMPLES:
        functions = open_section(data, address).functions
        pcs.append(sorted({pc for f in functions
                           for pc in (f.start - 1, f.start, f.start + 5, f.end - 1, f.end)}))
    return pcs


SAMPLE_PCS = _sample_pcs()


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, len(SAMPLES) - 1), st.integers(0, 10**6),
       st.integers(0, 255), st.integers(1, 4))
def test_lookups_on_corrupt_sections_fail_cleanly(sample, position, value, count):
    """Opened lazily, a corrupt section only ever raises SFrameError, at
    open or at the lookup that reaches the damage."""
    data, address = SAMPLES[sample]
    corrupt = bytearray(data)
    for n in range(count):
        corrupt[(position + 7 * n) % len(data)] = (value + n) & 0xFF
    try:
        opened = open_section(bytes(corrupt), address)
    except SFrameError:
        return
    for pc in SAMPLE_PCS[sample]:
        try:
            opened.find_row(pc)
            lookup_text(opened, pc)
        except SFrameError as error:
            assert str(error).startswith(".sframe")
