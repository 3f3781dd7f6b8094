"""PLT (PC-mask) rows: the row in force at every byte of every AMD64 PLT
entry, in the v1 (ld 2.40) and v3 (ld 2.46) fixtures, and where binutils
2.40's libsframe answers differently."""

import ctypes
import random

import pytest

from conftest import FIXTURES, require, run_sfbt
from sfbt.dwarf.synth_cache import build
from sfbt.elf import open_elf
from sfbt.sframe import (FrameRowEntry, FunctionEntry, Location, SFrameSection,
                         lookup_text, open_section, write_section)
from sfbt.sframe import constants as C
from sfbt.sframe.dump import libsframe_2_40_text
from sfbt.sframe.in_elf import read_elf_sframe, read_elf_sframe_bytes
from sfbt.sframe.lookup import libsframe_2_40_entry

RSP = 7
PLT_FILES = [FIXTURES / version / "x86_64" / name
             for version in ("v1", "v3") for name in ("plt-main", "libplt.so")]


def plt_bytes(path):
    """(address, bytes) of the file's .plt section."""
    stream, image = open_elf(str(path))
    with stream:
        section = image.section(".plt")
        return section.addr, image.section_data(section)


def cfa_offsets_from_code(address, code):
    """{pc: CFA - SP} at every byte of a lazy-binding AMD64 PLT, from its
    instructions.  PLT0 (`push GOT+8; jmp *GOT+16`) is entered by a jump
    after an entry's push: SP+16, SP+24 past its push.  Every other entry
    (`jmp *GOT; push $n; jmp PLT0`) is entered by a call: SP+8, SP+16 past
    its push."""
    assert len(code) % 16 == 0 and len(code) >= 32
    assert code[0:2] == b"\xff\x35" and code[6:8] == b"\xff\x25"  # PLT0
    offsets = {address + i: 16 if i < 6 else 24 for i in range(16)}
    for entry in range(16, len(code), 16):
        assert code[entry:entry + 2] == b"\xff\x25", hex(address + entry)
        assert code[entry + 6] == 0x68 and code[entry + 11] == 0xE9
        for i in range(16):
            offsets[address + entry + i] = 8 if i < 11 else 16
    return offsets


@pytest.mark.parametrize("path", PLT_FILES, ids=lambda p: f"{p.parent.parent.name}-{p.name}")
def test_rows_hold_at_every_plt_byte(path):
    section, _ = read_elf_sframe(path)
    address, code = plt_bytes(path)
    expected = cfa_offsets_from_code(address, code)
    masks = {section.find_function(pc).start for pc in expected
             if section.find_function(pc).is_mask}
    assert masks, "no PC-mask FDE covers the PLT"
    for pc, offset in expected.items():
        row = section.find_row(pc)
        assert row.cfa == Location(RSP, offset, False), (hex(pc), row.cfa)
        assert row.ra == Location(None, -8, True)
        assert lookup_text(section, pc).split()[0] == f"sp+{offset}"


@pytest.mark.parametrize("path", PLT_FILES, ids=lambda p: f"{p.parent.parent.name}-{p.name}")
def test_plt_rows_equal_the_rows_of_lds_eh_frame(path):
    """ld also describes the PLT in .eh_frame (a CFA expression on the
    PC's low 4 bits); the rows synthesized from it agree at every byte."""
    section, _ = read_elf_sframe(path)
    synthesized = build(str(path)).section
    address, code = plt_bytes(path)
    for pc in range(address, address + len(code)):
        assert synthesized.find_row(pc).cfa == section.find_row(pc).cfa, hex(pc)


def test_libsframe_2_40_disagrees_past_the_first_plt_entry():
    section, _ = read_elf_sframe(FIXTURES / "v1" / "x86_64" / "plt-main")
    address, code = plt_bytes(FIXTURES / "v1" / "x86_64" / "plt-main")
    first_entry = address + 16
    # .sframe at 0x988: section-relative PLT entries start at low byte
    # 0x58, 0x68, ...; libsframe 2.40 matches the first row only on
    # 0x58..0x62, the first 11 bytes of the first entry.
    disagreements = {pc for pc in range(first_entry, address + len(code))
                     if libsframe_2_40_text(section, pc) is not None}
    expected = {first_entry + 16 * entry + i
                for entry in range(1, len(code) // 16 - 1) for i in range(11)}
    assert disagreements == expected
    assert libsframe_2_40_text(section, first_entry + 16) == "sp+16 u u"
    assert libsframe_2_40_text(section, address) is None  # PLT0 is PC-inc
    v3, _ = read_elf_sframe(FIXTURES / "v3" / "x86_64" / "plt-main")
    assert all(libsframe_2_40_text(v3, pc) is None for pc in range(0x690, 0x6f0))


def test_lookup_command_says_where_libsframe_2_40_disagrees():
    path = FIXTURES / "v1" / "x86_64" / "plt-main"
    result = run_sfbt("sframe", "lookup", path, "0x6e0", "0x6f0", "0x6fb")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "0x6e0: sp+8 u u",
        "0x6f0: sp+8 u u",
        "  (libsframe 2.40 says sp+16 u u: it matches v1 PLT rows on the low "
        "8 bits of the address)",
        "0x6fb: sp+16 u u",
    ]


def _libsframe():
    try:
        lib = ctypes.CDLL("libsframe.so.0")  # binutils 2.40's soname
    except OSError:
        lib = None
    require(lib is not None, "libsframe.so.0 (Debian's libbinutils, binutils 2.40)")
    lib.sframe_decode.restype = ctypes.c_void_p
    lib.sframe_decode.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_int)]
    lib.sframe_decoder_free.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.sframe_find_fre.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p]
    lib.sframe_fre_get_cfa_offset.restype = ctypes.c_int32
    lib.sframe_fre_get_cfa_offset.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                              ctypes.POINTER(ctypes.c_int)]
    return lib


def _their_cfa_offsets(lib, data, address, pcs):
    """libsframe's CFA offset at each pc (None: no row)."""
    error = ctypes.c_int()
    buffer = ctypes.create_string_buffer(data)
    context = ctypes.c_void_p(lib.sframe_decode(buffer, len(data), ctypes.byref(error)))
    assert context.value, error.value
    row = ctypes.create_string_buffer(64)
    try:
        return [None if lib.sframe_find_fre(context, pc - address, row)
                else lib.sframe_fre_get_cfa_offset(context, row, ctypes.byref(error))
                for pc in pcs]
    finally:
        lib.sframe_decoder_free(ctypes.byref(context))


def _our_2_40_cfa_offsets(section, pcs):
    offsets = []
    for pc in pcs:
        function = section.find_function(pc)
        entry = libsframe_2_40_entry(section, function, pc)
        offsets.append(None if entry is None else entry.words[0])
    return offsets


def test_libsframe_2_40_rule_is_libsframe_2_40s_on_the_fixtures():
    lib = _libsframe()
    for path in PLT_FILES[:2]:
        (data, address, name), _ = read_elf_sframe_bytes(path)
        section = open_section(data, address, name)
        plt = [f for f in section.functions if f.is_mask]
        pcs = [pc for f in plt for pc in range(f.start, f.end)]
        assert pcs
        assert _our_2_40_cfa_offsets(section, pcs) == _their_cfa_offsets(lib, data, address, pcs)


def test_libsframe_2_40_rule_is_libsframe_2_40s_on_random_plts():
    """Random PC-mask functions (rows, sizes, 1- and 2-byte start offsets,
    the section at random distances after them): every byte agrees."""
    lib = _libsframe()
    rng = random.Random(2040)
    checked = 0
    for _ in range(200):
        size = rng.choice([rng.randrange(1, 120), rng.randrange(200, 700)])
        starts = sorted(rng.sample(range(size), min(size, rng.randrange(1, 5))))
        if rng.random() < 0.7:
            starts[0] = 0
        rows = [FrameRowEntry(start, C.BASE_REG_SP, (8 + 8 * i,))
                for i, start in enumerate(starts)]
        address = rng.randrange(0x10000, 0x100000)
        plt = FunctionEntry(address - rng.randrange(1, 0x10000), size, rows,
                            pc_type=C.PC_TYPE_MASK)
        data = write_section(SFrameSection(1, C.ABI_AMD64_LE, [plt], address=address))
        section = open_section(data, address)
        pcs = list(range(plt.start, plt.end))
        assert _our_2_40_cfa_offsets(section, pcs) == _their_cfa_offsets(lib, data, address, pcs)
        checked += len(pcs)
    assert checked > 10000
