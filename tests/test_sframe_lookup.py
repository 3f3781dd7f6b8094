"""Frame rows for addresses: binary search over functions, row search within
one, and the meaning of each ABI's words."""

import random

from sframe_samples import FP, SP, amd64_section
from sfbt.sframe import (FrameRowEntry, FunctionEntry, Location, SFrameSection,
                         lookup_text, read_section, write_section)
from sfbt.sframe import constants as C
from sfbt.sframe.lookup import libsframe_2_40_entry


def reread(section):
    return read_section(write_section(section), section.address)


def test_amd64_rules_through_a_prologue():
    section = reread(amd64_section(3))
    row = section.find_row(0x401100)
    assert row.cfa == Location(7, 8, False)
    assert row.ra == Location(None, -8, True)
    assert row.fp is None and not row.outermost
    row = section.find_row(0x401104)
    assert row.cfa == Location(6, 16, False)
    assert row.fp == Location(None, -16, True)
    assert section.find_row(0x401118).cfa == Location(7, 8, False)
    assert section.find_row(0x401119) is None  # past the function's end
    assert section.find_row(0x400fff) is None
    assert lookup_text(section, 0x401124) == "fp+16 c-16 f"


def test_plt_rows_repeat_every_rep_size_bytes():
    section = reread(amd64_section(3))
    assert section.find_row(0x401000 + 16 * 3 + 5).cfa.offset == 16
    assert section.find_row(0x401000 + 16 * 3 + 11).cfa.offset == 24
    assert lookup_text(section, 0x40102c) == "sp+24 u f"


def test_v1_plt_rows_repeat_every_plt_entry():
    section = reread(amd64_section(1))
    # v1 has no rep_size: AMD64 PLT entries are 16 bytes, so the rows
    # repeat every 16 bytes, as v2 and v3 say with rep_size 16.
    for entry in range(4):
        assert section.find_row(0x401000 + 16 * entry + 5).cfa.offset == 16
        assert section.find_row(0x401000 + 16 * entry + 11).cfa.offset == 24
    # binutils 2.40's libsframe compares the low 8 bits of section-relative
    # addresses (section at 0x402000, PLT at 0x401000: relative -0x1000),
    # so past the first entry it keeps the last row.
    plt = section.find_function(0x401030)
    assert libsframe_2_40_entry(section, plt, 0x401005).words == (16,)
    assert libsframe_2_40_entry(section, plt, 0x401030).words == (24,)
    assert section.find_row(0x401030).cfa.offset == 16


def test_mask_function_without_rep_size_has_no_rows():
    plt = FunctionEntry(0x1000, 0x40, [FrameRowEntry(0, SP, (16,))],
                        pc_type=C.PC_TYPE_MASK, rep_size=0)
    section = reread(SFrameSection(2, C.ABI_AMD64_LE, [plt]))
    assert section.find_row(0x1004) is None


def test_aarch64_rules_with_pointer_authentication():
    rows = [FrameRowEntry(0, SP, (0,)), FrameRowEntry(4, SP, (0,), mangled_ra=True),
            FrameRowEntry(8, SP, (16, -8, -16), mangled_ra=True)]
    section = reread(SFrameSection(3, C.ABI_AARCH64_LE, [
        FunctionEntry(0x4000b0, 12, rows, pauth_key=C.PAUTH_KEY_B)]))
    first = section.find_row(0x4000b0)
    assert first.ra is None and first.fp is None and not first.mangled_ra
    row = section.find_row(0x4000b8)
    assert row.cfa == Location(31, 16, False)
    assert row.ra == Location(None, -8, True)
    assert row.fp == Location(None, -16, True)
    assert row.mangled_ra and row.pauth_key == C.PAUTH_KEY_B
    assert lookup_text(section, 0x4000b8) == "sp+16 c-16 c-8[s]"


def test_big_endian_aarch64_reads_the_same_rules():
    rows = [FrameRowEntry(0, FP, (32, -24, -32))]
    for abi in (C.ABI_AARCH64_BE, C.ABI_AARCH64_LE):
        section = reread(SFrameSection(3, abi, [FunctionEntry(0x1000, 8, rows)]))
        assert section.big_endian == (abi == C.ABI_AARCH64_BE)
        row = section.find_row(0x1004)
        assert row.cfa == Location(29, 32, False)
        assert row.ra == Location(None, -24, True)


def test_s390x_scales_the_cfa_and_decodes_registers():
    # CFA offset stored as (offset - 160) / 8; v2 odd RA/FP words hold
    # DWARF register numbers (regnum << 1 | 1); RA word 0 is padding.
    rows = [FrameRowEntry(0, SP, (0,)),
            FrameRowEntry(6, SP, (2, (14 << 1) | 1, (11 << 1) | 1)),
            FrameRowEntry(12, SP, (4, 0, -72))]
    section = reread(SFrameSection(2, C.ABI_S390X_BE,
                                   [FunctionEntry(0x1000, 16, rows)]))
    assert section.big_endian
    assert section.find_row(0x1000).cfa == Location(15, 160, False)
    row = section.find_row(0x1006)
    assert row.cfa == Location(15, 176, False)
    assert row.ra == Location(14, 0, False)
    assert row.fp == Location(11, 0, False)
    row = section.find_row(0x100c)
    assert row.cfa.offset == 192 and row.ra is None
    assert row.fp == Location(None, -72, True)
    assert lookup_text(section, 0x1006) == "sp+176 r11 r14"
    assert lookup_text(section, 0x100c) == "sp+192 c-72 U"


def test_flexible_rows_drap_and_registers():
    def control(register, deref):
        return (register << 3) | (int(deref) << 1) | 1

    rows = [
        # CFA = *(rbp - 8), RA at CFA - 8, FP = *(rbp + 0)
        FrameRowEntry(0, SP, (control(6, True), -8, 2, -8, control(6, True), 0)),
        # CFA = r10 + 0, RA padding (AMD64: at the fixed CFA - 8), FP untracked
        FrameRowEntry(4, SP, (control(10, False), 0, 0)),
        # CFA = rsp + 16, RA in r3
        FrameRowEntry(6, SP, (control(7, False), 16, control(3, False), 0)),
    ]
    function = FunctionEntry(0x2000, 8, rows, fde_type=C.FDE_TYPE_FLEX)
    section = reread(SFrameSection(3, C.ABI_AMD64_LE, [function]))
    row = section.find_row(0x2000)
    assert row.cfa == Location(6, -8, True)
    assert row.ra == Location(None, -8, True)
    assert row.fp == Location(6, 0, True)
    assert lookup_text(section, 0x2000) == "(fp-8) (fp+0) c-8"
    row = section.find_row(0x2004)
    assert row.cfa == Location(10, 0, False) and row.ra == Location(None, -8, True)
    assert lookup_text(section, 0x2004) == "r10+0 u U"
    row = section.find_row(0x2007)
    assert row.ra == Location(3, 0, False)
    assert lookup_text(section, 0x2007) == "sp+16 u r3+0"


def test_outermost_and_signal_frames():
    rows = [FrameRowEntry(0, SP, (8,)), FrameRowEntry(2, SP, ())]
    section = reread(SFrameSection(3, C.ABI_AMD64_LE, [
        FunctionEntry(0x3000, 4, rows, signal=True)]))
    assert section.find_row(0x3000).signal
    row = section.find_row(0x3003)
    assert row.outermost and row.cfa is None
    assert lookup_text(section, 0x3003) == "RA undefined"


def test_unsorted_function_table():
    functions = [FunctionEntry(0x10000 + 0x100 * i, 0x80,
                               [FrameRowEntry(0, SP, (8 + 8 * (i % 5),))])
                 for i in range(200)]
    random.Random(7).shuffle(functions)
    section = reread(SFrameSection(3, C.ABI_AMD64_LE, functions, flags=0))
    for i in range(200):
        assert section.find_row(0x10000 + 0x100 * i + 0x7f).cfa.offset == 8 + 8 * (i % 5)
        assert section.find_row(0x10000 + 0x100 * i + 0x80) is None


def test_rows_are_decoded_once_and_only_when_needed():
    section = reread(amd64_section(3))
    assert all(f._rows is None for f in section.functions)
    section.find_row(0x401124)
    decoded = [f._rows is not None for f in section.functions]
    assert decoded == [False, False, True, False]
    rows = section.functions[2].rows
    section.find_row(0x401125)
    assert section.functions[2].rows is rows
