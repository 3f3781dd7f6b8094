"""Small SFrame sections built through the model, shared by several tests."""

from sfbt.sframe import FrameRowEntry, FunctionEntry, SFrameSection
from sfbt.sframe import constants as C

SP, FP = C.BASE_REG_SP, C.BASE_REG_FP


def amd64_section(version=3, address=0x402000):
    """Three frame-pointer functions and a PLT, like gas and ld make them."""
    prologue = [FrameRowEntry(0, SP, (8,)), FrameRowEntry(1, SP, (16, -16)),
                FrameRowEntry(4, FP, (16, -16)), FrameRowEntry(0x18, SP, (8, -16))]
    plt = [FrameRowEntry(0, SP, (16,)), FrameRowEntry(11, SP, (24,))]
    functions = [
        FunctionEntry(0x401000, 0x40, plt, pc_type=C.PC_TYPE_MASK,
                      rep_size=0 if version == 1 else 16),
        FunctionEntry(0x401100, 0x19, prologue),
        FunctionEntry(0x401120, 0x19, prologue),
        FunctionEntry(0x401140, 0x19, prologue),
    ]
    return SFrameSection(version, C.ABI_AMD64_LE, functions, address=address)
