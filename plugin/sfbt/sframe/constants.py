"""Numbers fixed by the SFrame format (all versions)."""

from ..arch import AARCH64, AARCH64_BE, S390X, X86_64

MAGIC = 0xDEE2
HEADER_SIZE = 28

VERSION_1 = 1
VERSION_2 = 2
VERSION_3 = 3
VERSIONS = (VERSION_1, VERSION_2, VERSION_3)

F_FDE_SORTED = 0x1
F_FRAME_POINTER = 0x2  # v1 and v2 only
F_FDE_FUNC_START_PCREL = 0x4  # v2 (binutils 2.45+) and v3

VALID_FLAGS = {
    VERSION_1: F_FDE_SORTED | F_FRAME_POINTER,
    VERSION_2: F_FDE_SORTED | F_FRAME_POINTER | F_FDE_FUNC_START_PCREL,
    VERSION_3: F_FDE_SORTED | F_FDE_FUNC_START_PCREL,
}

# The ABI/arch ids are per-architecture facts, held by sfbt.arch.
ABI_AARCH64_BE = AARCH64_BE.sframe_abi
ABI_AARCH64_LE = AARCH64.sframe_abi
ABI_AMD64_LE = X86_64.sframe_abi
ABI_S390X_BE = S390X.sframe_abi
ABI_NAMES = {
    ABI_AARCH64_BE: "aarch64-be",
    ABI_AARCH64_LE: "aarch64",
    ABI_AMD64_LE: "amd64",
    ABI_S390X_BE: "s390x",
}
BIG_ENDIAN_ABIS = (ABI_AARCH64_BE, ABI_S390X_BE)

# FRE start-address widths, indexed by the FDE's "FRE type".
FRE_TYPE_ADDR1, FRE_TYPE_ADDR2, FRE_TYPE_ADDR4 = 0, 1, 2
FRE_ADDRESS_SIZES = (1, 2, 4)

PC_TYPE_INC = 0
PC_TYPE_MASK = 1

PAUTH_KEY_A = 0
PAUTH_KEY_B = 1

FDE_TYPE_DEFAULT = 0
FDE_TYPE_FLEX = 1
FDE_TYPES = (FDE_TYPE_DEFAULT, FDE_TYPE_FLEX)

BASE_REG_FP = 0
BASE_REG_SP = 1

WORD_SIZES = (1, 2, 4)  # indexed by the FRE info's 2-bit size code
MAX_WORDS = 6  # libsframe's MAX_NUM_DATAWORDS
