"""Random models through the writer and the reader, every version, ABI and
byte order: read(write(m)) == m and write(read(b)) == b."""

from hypothesis import given, settings
from hypothesis import strategies as st

from sfbt.sframe import (FrameRowEntry, FunctionEntry, SFrameSection,
                         read_section, write_section)
from sfbt.sframe import constants as C

ABIS = sorted(C.ABI_NAMES)


@st.composite
def rows(draw, fre_type, version, flex):
    limit = (1 << (8 * C.FRE_ADDRESS_SIZES[fre_type])) - 1
    count = draw(st.integers(0, 6))
    starts = sorted(draw(st.lists(st.integers(0, limit), min_size=count,
                                  max_size=count, unique=True)))
    result = []
    for start in starts:
        word_size = draw(st.sampled_from(C.WORD_SIZES))
        bits = 8 * word_size
        word = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        words = draw(st.lists(word, max_size=6 if flex else 3))
        result.append(FrameRowEntry(
            start, draw(st.sampled_from([C.BASE_REG_FP, C.BASE_REG_SP])),
            tuple(words), word_size, draw(st.booleans())))
    return result


@st.composite
def functions(draw, version, address):
    fre_type = draw(st.sampled_from([0, 1, 2]))
    flex = version == C.VERSION_3 and draw(st.booleans())
    start = address + draw(st.integers(-(1 << 30), 1 << 30))
    return FunctionEntry(
        max(start, 0), draw(st.integers(0, 0xFFFFFFFF)),
        draw(rows(fre_type, version, flex)),
        pc_type=draw(st.sampled_from([C.PC_TYPE_INC, C.PC_TYPE_MASK])),
        fre_type=fre_type, pauth_key=draw(st.sampled_from([0, 1])),
        signal=draw(st.booleans()),
        fde_type=C.FDE_TYPE_FLEX if flex else C.FDE_TYPE_DEFAULT,
        rep_size=0 if version == C.VERSION_1 else draw(st.integers(0, 255)))


@st.composite
def sections(draw):
    version = draw(st.sampled_from(C.VERSIONS))
    abi = draw(st.sampled_from(ABIS))
    address = draw(st.integers(0, 1 << 48))
    funcs = draw(st.lists(functions(version, address), max_size=8))
    flag_bits = [b for b in (1, 2, 4) if b & C.VALID_FLAGS[version]]
    flags = sum(b for b in flag_bits if draw(st.booleans()))
    order = draw(st.permutations(range(len(funcs))))
    return SFrameSection(
        version, abi, funcs, flags=flags,
        cfa_fixed_fp_offset=draw(st.integers(-128, 127)),
        cfa_fixed_ra_offset=draw(st.integers(-128, 127)),
        aux_header=draw(st.binary(max_size=8)),
        padding=draw(st.binary(max_size=7)),
        big_endian=draw(st.booleans()), address=address, fre_order=order)


@settings(max_examples=400, deadline=None)
@given(sections())
def test_model_round_trips(section):
    data = write_section(section)
    again = read_section(data, section.address)
    assert again == section
    assert write_section(again) == data


@settings(max_examples=100, deadline=None)
@given(sections())
def test_reading_is_lazy(section):
    again = read_section(write_section(section), section.address)
    assert all(f._rows is None for f in again.functions)
    assert again.num_rows == section.num_rows
