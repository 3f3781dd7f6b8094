"""Facts of the Arch table that other tables used to hold: the kernel's
register set (ptrace, cores) and the SFrame ABI ids."""

import struct

import pytest

from sfbt.arch import AARCH64, AARCH64_BE, ARCHES, S390X, X86_64, arch_for_abi
from sfbt.sframe import constants as C


def test_x86_64_register_set_is_user_regs_struct():
    # user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx
    # rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs
    values = list(range(100, 127))
    registers = X86_64.decode_regset(struct.pack("<27Q", *values))
    assert X86_64.regset_size == 27 * 8
    assert registers[16] == 116  # rip
    assert registers[7] == 119  # rsp
    assert registers[6] == 104  # rbp
    assert registers[0] == 110 and registers[5] == 114  # rax, rdi
    assert len(registers) == 17  # orig_rax, cs, eflags, ss and the segments have no number


@pytest.mark.parametrize("arch, order", [(AARCH64, "<"), (AARCH64_BE, ">")])
def test_aarch64_register_set_is_user_pt_regs(arch, order):
    values = [0x1000 + n for n in range(34)]  # x0..x30, sp, pc, pstate
    registers = arch.decode_regset(struct.pack(f"{order}34Q", *values))
    assert arch.regset_size == 34 * 8
    assert registers[arch.sp] == 0x1000 + 31
    assert registers[arch.pc] == 0x1000 + 32
    assert registers[arch.ra] == 0x1000 + 30
    assert 33 not in registers and len(registers) == 33


def test_s390x_register_set_is_s390_regs():
    """The PSW (mask, address), r0-r15, a0-a15 (4 bytes each), orig_gpr2:
    216 bytes, big-endian, as a core's NT_PRSTATUS holds them."""
    import struct
    assert S390X.regset_size == 216
    data = struct.pack(">QQ16Q16IQ", 0x0705000180000000, 0x1000AA0, *range(100, 116),
                       *range(16), 0xFFFF)
    registers = S390X.decode_regset(data)
    assert registers == {64: 0x1000AA0, **{n: 100 + n for n in range(16)}}


def test_sframe_abi_ids_are_the_format_numbers():
    # SFRAME_ABI_AARCH64_ENDIAN_BIG 1, _LITTLE 2, SFRAME_ABI_AMD64_ENDIAN_LITTLE 3,
    # SFRAME_ABI_S390X_ENDIAN_BIG 4
    assert (C.ABI_AARCH64_BE, C.ABI_AARCH64_LE, C.ABI_AMD64_LE, C.ABI_S390X_BE) == (1, 2, 3, 4)
    assert sorted(arch_for_abi(abi).name for abi in C.ABI_NAMES) == sorted(a.name for a in ARCHES)
    assert set(C.BIG_ENDIAN_ABIS) == {a.sframe_abi for a in ARCHES if a.big_endian}
    with pytest.raises(KeyError):
        arch_for_abi(5)
