"""Per-architecture facts the unwinder needs: registers, signal frames,
return-address signatures."""

from dataclasses import dataclass, field

from .sframe import constants as C


@dataclass(frozen=True)
class SignalFrameLayout:
    """Where the kernel's rt_sigreturn trampoline finds the interrupted
    registers: the trampoline's code, and the offset of the saved registers
    from the trampoline frame's stack pointer."""

    code: bytes
    registers_offset: int
    # (DWARF register number, index of its 8-byte slot) pairs
    slots: tuple


@dataclass(frozen=True)
class Arch:
    name: str
    abi: int
    pointer_size: int
    big_endian: bool
    sp: int
    fp: int
    ra: int  # DWARF number of the return-address register (or of the PC)
    pc: int
    #: names of DWARF registers, as debuggers spell them
    register_names: dict = field(default_factory=dict)
    #: SP = CFA + sp_from_cfa (s390x keeps a 160-byte register save area)
    sp_from_cfa: int = 0
    #: return-address register distinct from the PC (AArch64 x30, s390x r14)
    has_link_register: bool = False
    signal_frame: SignalFrameLayout = None
    #: frame-pointer chain: (offset of saved FP, offset of saved RA) from FP
    frame_record: tuple = None

    def strip_return_address(self, value, virtual_address_bits=48):
        """Drop pointer-authentication bits from a signed return address."""
        return value & ((1 << virtual_address_bits) - 1)

    @staticmethod
    def virtual_address_bits(pac_mask, default=48):
        """The virtual-address size a pointer-authentication mask implies
        (Linux's NT_ARM_PAC_MASK, GDB's $pauth_cmask: the bits holding the
        signature, from the lowest one up), or ``default`` for no mask."""
        if not pac_mask:
            return default
        return (pac_mask & -pac_mask).bit_length() - 1

    def dwarf_number(self, name):
        for number, spelled in self.register_names.items():
            if spelled == name:
                return number
        raise KeyError(name)


_X86_64_NAMES = {0: "rax", 1: "rdx", 2: "rcx", 3: "rbx", 4: "rsi", 5: "rdi",
                 6: "rbp", 7: "rsp", 8: "r8", 9: "r9", 10: "r10", 11: "r11",
                 12: "r12", 13: "r13", 14: "r14", 15: "r15", 16: "rip"}

# struct rt_sigframe after the handler returned: the ucontext is at SP;
# uc_mcontext.gregs starts 40 bytes in, in the order R8..R15, RDI, RSI, RBP,
# RBX, RDX, RAX, RCX, RSP, RIP.
_X86_64_GREGS = (8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 6, 3, 1, 0, 2, 7, 16)

X86_64 = Arch(
    name="x86_64", abi=C.ABI_AMD64_LE, pointer_size=8, big_endian=False,
    sp=7, fp=6, ra=16, pc=16, register_names=_X86_64_NAMES,
    signal_frame=SignalFrameLayout(
        # mov $15, %rax; syscall
        code=bytes.fromhex("48c7c00f0000000f05"), registers_offset=40,
        slots=tuple((reg, i) for i, reg in enumerate(_X86_64_GREGS))),
    frame_record=(0, 8))

_AARCH64_NAMES = {n: f"x{n}" for n in range(31)}
_AARCH64_NAMES.update({29: "x29", 30: "x30", 31: "sp", 32: "pc"})

AARCH64 = Arch(
    name="aarch64", abi=C.ABI_AARCH64_LE, pointer_size=8, big_endian=False,
    sp=31, fp=29, ra=30, pc=32, register_names=_AARCH64_NAMES,
    has_link_register=True,
    signal_frame=SignalFrameLayout(
        # mov x8, #139; svc #0 (little-endian instruction words)
        code=bytes.fromhex("681180d2010000d4"),
        # siginfo (128) + ucontext up to uc_mcontext (176) + fault_address (8)
        registers_offset=128 + 176 + 8,
        slots=tuple((n, n) for n in range(31)) + ((31, 31), (32, 32))),
    frame_record=(0, 8))

_S390X_NAMES = {n: f"r{n}" for n in range(16)}
# DWARF 16-31: the floating-point registers, in this order.  gcc keeps the
# FP or the RA of leaf functions in them (v3 flexible FDEs); a debugger
# adapter must read their raw 64 bits, not their value as a double.
_S390X_NAMES.update({16 + i: f"f{n}" for i, n in enumerate(
    (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15))})
_S390X_NAMES[64] = "pc"  # DWARF 64: the PSW address

S390X = Arch(
    name="s390x", abi=C.ABI_S390X_BE, pointer_size=8, big_endian=True,
    sp=15, fp=11, ra=14, pc=64, register_names=_S390X_NAMES,
    sp_from_cfa=C.S390X_SP_VAL_OFFSET, has_link_register=True)

ARCHES = {a.name: a for a in (X86_64, AARCH64, S390X)}


def arch_for_abi(abi):
    for arch in ARCHES.values():
        if arch.abi == abi or (abi == C.ABI_AARCH64_BE and arch is AARCH64):
            return arch
    raise KeyError(abi)
