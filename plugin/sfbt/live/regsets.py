"""The kernel's general-purpose register sets as DWARF register numbers.

The same layout is what PTRACE_GETREGSET(NT_PRSTATUS) fills in and what a
core's NT_PRSTATUS note holds in ``pr_reg``: x86-64's ``user_regs_struct``,
AArch64's ``user_pt_regs``.
"""

import struct

from ..arch import AARCH64, X86_64

# user_regs_struct, in order; None for what has no DWARF number here.
_X86_64_ORDER = (15, 14, 13, 12, 6, 3, 11, 10, 9, 8, 0, 2, 1, 4, 5, None,  # r15..rdi, orig_rax
                 16, None, None, 7, None, None, None, None, None, None, None)
# user_pt_regs: x0..x30, sp, pc, pstate
_AARCH64_ORDER = tuple(range(31)) + (31, 32, None)

#: arch name -> DWARF numbers in the order of the register set
LAYOUTS = {X86_64.name: _X86_64_ORDER, AARCH64.name: _AARCH64_ORDER}

#: offset of pr_reg in struct elf_prstatus (the same on both)
PRSTATUS_REGISTERS = 112
#: offset of pr_pid in struct elf_prstatus
PRSTATUS_PID = 32


def regset_size(arch):
    return 8 * len(LAYOUTS[arch.name])


def supported(arch):
    return arch is not None and arch.name in LAYOUTS


def decode(arch, data):
    """{DWARF number: value} of a register set's bytes."""
    order = LAYOUTS[arch.name]
    values = struct.unpack_from(f"{'>' if arch.big_endian else '<'}{len(order)}Q", data)
    return {number: value for number, value in zip(order, values) if number is not None}
