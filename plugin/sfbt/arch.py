"""Every per-architecture fact, in one table.

An ``Arch`` holds what the SFrame reader, the DWARF CFI synthesizer, the
unwinder, the ELF reader and the debugger adapters need to know about one
architecture: DWARF register numbers and how GDB and LLDB spell them, the
stack-pointer and return-address conventions, the kernel's signal frame,
pointer authentication, the kernel's register set (ptrace, core files),
and the numbers by which ELF files and SFrame sections name it.  Adding an architecture is adding one entry to ARCHES.
"""

from __future__ import annotations

import struct
from operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple, Optional
else:
    from .values import NamedTuple


# NamedTuples, not frozen dataclasses: defined at each start of `sfbt`, and a
# NamedTuple costs a tenth as much to define.  (Their dict defaults are
# shared and never changed.)


class SignalFrameLayout(NamedTuple):
    """Where the kernel's rt_sigreturn trampoline finds the interrupted
    registers: the trampoline's code, and the offset of the saved registers
    from the trampoline frame's stack pointer."""

    code: bytes
    registers_offset: int
    # (DWARF register number, index of its 8-byte slot) pairs
    slots: tuple


class Arch(NamedTuple):
    name: str
    #: the SFrame header's ABI/arch id (SFRAME_ABI_*; sfbt.sframe.constants
    #: names them after these entries)
    sframe_abi: int
    #: ELF e_machine
    elf_machine: int
    pointer_size: int
    big_endian: bool
    # DWARF numbers of the stack pointer, frame pointer, return-address
    # register (or column) and program counter
    sp: int
    fp: int
    ra: int
    pc: int
    #: DWARF register number -> name, as GDB spells it
    register_names: dict = {}
    #: where LLDB spells a register differently from GDB
    lldb_register_names: dict = {}
    #: GDB's names for the architecture (gdb.Architecture.name())
    gdb_names: tuple = ()
    #: LLDB's names (the first part of a target triple)
    lldb_names: tuple = ()
    #: objdump's name for the file format ("file format elf64-x86-64")
    bfd_name: str = ""
    #: relocations of relocatable objects that sfbt applies (to .sframe and
    #: .eh_frame): ELF relocation type -> (field size, PC-relative)
    relocations: dict = {}
    #: SP = CFA + sp_from_cfa (s390x keeps a 160-byte register save area)
    sp_from_cfa: int = 0
    #: SFrame stores CFA offsets divided by this (s390x: 8, after adding 160)
    sframe_cfa_alignment: int = 1
    #: the return address sits at CFA + fixed_ra_offset in every frame
    #: (AMD64: -8, pushed by the call); 0 where it moves
    fixed_ra_offset: int = 0
    #: return-address register distinct from the PC (AArch64 x30, s390x r14)
    has_link_register: bool = False
    #: return addresses may carry pointer-authentication signatures
    pointer_authentication: bool = False
    signal_frame: Optional[SignalFrameLayout] = None
    #: frame-pointer chain: (offset of saved FP, offset of saved RA) from FP
    frame_record: Optional[tuple] = None
    #: bytes per PLT entry: the rows of an SFrame v1 PC-mask (PLT) FDE
    #: repeat this often (v2 and v3 FDEs store the size themselves)
    plt_entry_size: int = 16
    #: the kernel's general-purpose register set (what PTRACE_GETREGSET
    #: NT_PRSTATUS fills in and a core's NT_PRSTATUS note holds in
    #: ``pr_reg``) as the DWARF number of each 8-byte slot, None for what
    #: has none; empty where sfbt does not read it (no live or core stacks)
    regset: tuple = ()

    @property
    def regset_size(self) -> int:
        return 8 * len(self.regset)

    def decode_regset(self, data: bytes) -> dict:
        """{DWARF number: value} of a register set's bytes."""
        decoder = _REGSET_DECODERS.get(self.name)
        if decoder is None:
            slots = [i for i, number in enumerate(self.regset) if number is not None]
            decoder = _REGSET_DECODERS[self.name] = (
                struct.Struct(f"{'>' if self.big_endian else '<'}{len(self.regset)}Q"),
                tuple(self.regset[i] for i in slots), itemgetter(*slots))
        layout, numbers, pick = decoder
        return dict(zip(numbers, pick(layout.unpack_from(data))))

    def register_name(self, number: int, debugger: str = "gdb") -> str:
        """How ``debugger`` ("gdb" or "lldb") spells DWARF register ``number``."""
        if debugger == "lldb" and number in self.lldb_register_names:
            return self.lldb_register_names[number]
        return self.register_names.get(number, f"r{number}")

    def follows_call(self, code: bytes) -> bool:
        """Whether the instruction bytes ``code`` (those just before a
        return address, 8 of them) end with a call instruction."""
        check = _CALL_CHECKS.get(self.name)
        return check is not None and check(code)

    def dwarf_number(self, name: str) -> int:
        for number, spelled in self.register_names.items():
            if spelled == name:
                return number
        raise KeyError(name)

    def strip_return_address(self, value: int, virtual_address_bits: int = 48) -> int:
        """Drop pointer-authentication bits from a signed return address."""
        return value & ((1 << virtual_address_bits) - 1)

    @staticmethod
    def virtual_address_bits(pac_mask: int, default: int = 48) -> int:
        """The virtual-address size a pointer-authentication mask implies
        (Linux's NT_ARM_PAC_MASK, GDB's $pauth_cmask: the bits holding the
        signature, from the lowest one up), or ``default`` for no mask."""
        if not pac_mask:
            return default
        return (pac_mask & -pac_mask).bit_length() - 1

    def encode_sframe_cfa_offset(self, offset: int) -> Optional[int]:
        """The CFA offset as a default SFrame row stores it, or None where it
        cannot be stored (an s390x offset that is not a multiple of 8)."""
        value = offset + self.sp_from_cfa if self.sframe_cfa_alignment > 1 else offset
        if value % self.sframe_cfa_alignment:
            return None
        return value // self.sframe_cfa_alignment

    def decode_sframe_cfa_offset(self, value: int) -> int:
        if self.sframe_cfa_alignment == 1:
            return value
        return value * self.sframe_cfa_alignment - self.sp_from_cfa


def _x86_64_call_length(modrm: int) -> int:
    """The length of `call *r/m` (FF /2) from its ModRM byte on."""
    mod, rm = modrm >> 6, modrm & 7
    if mod == 3:
        return 2
    sib = 1 if rm == 4 else 0
    if mod == 0:
        return 6 if rm == 5 else 2 + sib  # (a SIB base of 5 is rare enough)
    return (3 if mod == 1 else 6) + sib


def _x86_64_follows_call(code: bytes) -> bool:
    """call rel32 (E8), or call *r/m (FF /2) of the length that ends here."""
    if len(code) >= 5 and code[-5] == 0xE8:
        return True
    for length in range(2, 8):
        if length <= len(code) and code[-length] == 0xFF:
            modrm = code[-length + 1]
            if (modrm >> 3) & 7 == 2 and _x86_64_call_length(modrm) == length:
                return True
    return False


def _aarch64_follows_call(code: bytes) -> bool:
    """bl, blr, or a pointer-authenticating blr (blraa and relatives)."""
    if len(code) < 4:
        return False
    word = int.from_bytes(code[-4:], "little")
    return (word & 0xFC000000 == 0x94000000 or word & 0xFFFFFC1F == 0xD63F0000
            or word & 0xFEFFF800 == 0xD63F0800)


#: Arch name -> (its register set's struct, the DWARF numbers of the slots
#: that have one, what picks those slots): made on first use
_REGSET_DECODERS: dict = {}

_CALL_CHECKS = {"x86_64": _x86_64_follows_call, "aarch64": _aarch64_follows_call}

_X86_64_NAMES = {0: "rax", 1: "rdx", 2: "rcx", 3: "rbx", 4: "rsi", 5: "rdi",
                 6: "rbp", 7: "rsp", 8: "r8", 9: "r9", 10: "r10", 11: "r11",
                 12: "r12", 13: "r13", 14: "r14", 15: "r15", 16: "rip"}

# struct rt_sigframe after the handler returned: the ucontext is at SP;
# uc_mcontext.gregs starts 40 bytes in, in the order R8..R15, RDI, RSI, RBP,
# RBX, RDX, RAX, RCX, RSP, RIP.
_X86_64_GREGS = (8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 6, 3, 1, 0, 2, 7, 16)
# user_regs_struct: r15..rdi, orig_rax, rip, cs, eflags, rsp, ss, the
# segment bases and selectors.
_X86_64_REGSET = (15, 14, 13, 12, 6, 3, 11, 10, 9, 8, 0, 2, 1, 4, 5, None,
                  16, None, None, 7, None, None, None, None, None, None, None)

X86_64 = Arch(
    name="x86_64", sframe_abi=3, elf_machine=62, pointer_size=8,
    big_endian=False, sp=7, fp=6, ra=16, pc=16, register_names=_X86_64_NAMES,
    gdb_names=("i386:x86-64",), lldb_names=("x86_64",), bfd_name="elf64-x86-64",
    relocations={1: (8, False), 2: (4, True), 10: (4, False), 11: (4, False),
                 24: (8, True)},
    fixed_ra_offset=-8,
    signal_frame=SignalFrameLayout(
        # mov $15, %rax; syscall
        code=bytes.fromhex("48c7c00f0000000f05"), registers_offset=40,
        slots=tuple((reg, i) for i, reg in enumerate(_X86_64_GREGS))),
    frame_record=(0, 8), regset=_X86_64_REGSET)

_AARCH64_NAMES = {n: f"x{n}" for n in range(31)}
_AARCH64_NAMES.update({31: "sp", 32: "pc"})

AARCH64 = Arch(
    name="aarch64", sframe_abi=2, elf_machine=183, pointer_size=8,
    big_endian=False, sp=31, fp=29, ra=30, pc=32, register_names=_AARCH64_NAMES,
    lldb_register_names={29: "fp", 30: "lr", 31: "sp", 32: "pc"},
    gdb_names=("aarch64",), lldb_names=("aarch64", "arm64"),
    bfd_name="elf64-littleaarch64",
    relocations={257: (8, False), 258: (4, False), 260: (8, True), 261: (4, True)},
    has_link_register=True, pointer_authentication=True,
    signal_frame=SignalFrameLayout(
        # mov x8, #139; svc #0 (little-endian instruction words)
        code=bytes.fromhex("681180d2010000d4"),
        # siginfo (128) + ucontext up to uc_mcontext (176) + fault_address (8)
        registers_offset=128 + 176 + 8,
        slots=tuple((n, n) for n in range(31)) + ((31, 31), (32, 32))),
    frame_record=(0, 8),
    # user_pt_regs: x0..x30, sp, pc, pstate
    regset=tuple(range(33)) + (None,))

# Big-endian AArch64: the same registers and conventions, data and
# instructions' byte order aside (no signal-frame layout is known here).
AARCH64_BE = AARCH64._replace(name="aarch64_be", sframe_abi=1,
                              big_endian=True, gdb_names=(), lldb_names=("aarch64_be",),
                              bfd_name="elf64-bigaarch64",
                              signal_frame=None)

_S390X_NAMES = {n: f"r{n}" for n in range(16)}
# DWARF 16-31: the floating-point registers, in this order.  gcc keeps the
# FP or the RA of leaf functions in them (v3 flexible FDEs); a debugger
# adapter must read their raw 64 bits, not their value as a double.
_S390X_NAMES.update({16 + i: f"f{n}" for i, n in enumerate(
    (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15))})
_S390X_NAMES[64] = "pc"  # DWARF 64: the PSW address

S390X = Arch(
    name="s390x", sframe_abi=4, elf_machine=22, pointer_size=8,
    big_endian=True, sp=15, fp=11, ra=14, pc=64, register_names=_S390X_NAMES,
    gdb_names=("s390:64-bit",), lldb_names=("s390x",), bfd_name="elf64-s390",
    relocations={4: (4, False), 5: (4, True), 22: (8, False), 23: (8, True)},
    sp_from_cfa=-160, sframe_cfa_alignment=8, has_link_register=True,
    plt_entry_size=32,
    # s390_regs: the PSW (mask, address), r0..r15, the access registers
    # a0..a15 (4 bytes each), orig_gpr2
    regset=(None, 64) + tuple(range(16)) + (None,) * 9)

ARCHES = (X86_64, AARCH64, AARCH64_BE, S390X)
_BY_SFRAME_ABI = {arch.sframe_abi: arch for arch in ARCHES}


def with_register_sets() -> str:
    """The architectures whose stacks `sfbt stack` reads (those with a
    ``regset``), for an error message."""
    return ", ".join(arch.name for arch in ARCHES if arch.regset)


def arch_for_abi(abi: int) -> Arch:
    """The Arch of an SFrame ABI/arch id; KeyError for an unknown one."""
    return _BY_SFRAME_ABI[abi]


def arch_for_machine(machine: int, big_endian: bool) -> Optional[Arch]:
    """The Arch of an ELF e_machine and byte order, or None."""
    for arch in ARCHES:
        if arch.elf_machine == machine and arch.big_endian == big_endian:
            return arch
    return None


def arch_for_debugger(name: str, debugger: str) -> Optional[Arch]:
    """The Arch GDB ("gdb") or LLDB ("lldb") calls ``name``, or None."""
    for arch in ARCHES:
        if name in (arch.gdb_names if debugger == "gdb" else arch.lldb_names):
            return arch
    return None
