"""Reading the fields of DWARF call-frame data: LEB128 numbers, fixed-size
fields in one byte order, and .eh_frame's encoded pointers."""

from __future__ import annotations

import struct

from ..errors import LocatedError
from . import opcodes as op

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Tuple

_MASK64 = 0xFFFFFFFFFFFFFFFF


class CFIError(LocatedError):
    """Call-frame information that cannot be parsed."""


def read_uleb128(data, pos: int) -> Tuple[int, int]:
    """(value, position after it) of the unsigned LEB128 number at ``pos``;
    IndexError when the data ends inside it."""
    byte = data[pos]
    if byte < 0x80:  # most numbers in DWARF: one byte
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7


def read_sleb128(data, pos: int) -> Tuple[int, int]:
    """(value, position after it) of the signed LEB128 number at ``pos``."""
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


class FieldReader:
    """Fixed-size fields in one byte order: ``reader.u32(data, pos)`` gives
    a 1-tuple, as struct's unpack_from does."""

    def __init__(self, big_endian):
        self.big_endian = big_endian
        prefix = ">" if big_endian else "<"
        self.u16 = struct.Struct(prefix + "H").unpack_from
        self.u32 = struct.Struct(prefix + "I").unpack_from
        self.u64 = struct.Struct(prefix + "Q").unpack_from
        self.s16 = struct.Struct(prefix + "h").unpack_from
        self.s32 = struct.Struct(prefix + "i").unpack_from
        self.s64 = struct.Struct(prefix + "q").unpack_from


def read_encoded_pointer(reader, data, pos, encoding, address, address_size, *,
                         range_only=False):
    """(value, position after it) of a DW_EH_PE-encoded pointer at ``pos``;
    ``address`` is the run-time address of data[0] (for pcrel).  With
    ``range_only`` the value is a length: no application is added."""
    fmt = encoding & op.DW_EH_PE_FORMAT_MASK
    field = pos
    if fmt == op.DW_EH_PE_absptr:
        if address_size == 8:
            (value,), pos = reader.u64(data, pos), pos + 8
        else:
            (value,), pos = reader.u32(data, pos), pos + 4
    elif fmt == op.DW_EH_PE_udata4:
        (value,), pos = reader.u32(data, pos), pos + 4
    elif fmt == op.DW_EH_PE_sdata4:
        (value,), pos = reader.s32(data, pos), pos + 4
    elif fmt == op.DW_EH_PE_udata8:
        (value,), pos = reader.u64(data, pos), pos + 8
    elif fmt == op.DW_EH_PE_sdata8:
        (value,), pos = reader.s64(data, pos), pos + 8
    elif fmt == op.DW_EH_PE_udata2:
        (value,), pos = reader.u16(data, pos), pos + 2
    elif fmt == op.DW_EH_PE_sdata2:
        (value,), pos = reader.s16(data, pos), pos + 2
    elif fmt == op.DW_EH_PE_uleb128:
        value, pos = read_uleb128(data, pos)
    elif fmt == op.DW_EH_PE_sleb128:
        value, pos = read_sleb128(data, pos)
    else:
        raise CFIError(f"unsupported pointer encoding {encoding:#x}", field)
    if range_only:
        return value & _MASK64, pos
    application = encoding & op.DW_EH_PE_APPLICATION_MASK
    if application == op.DW_EH_PE_pcrel:
        value += address + field
    elif application not in (0, op.DW_EH_PE_aligned):
        # textrel/datarel/funcrel: not used by ELF toolchains for FDEs
        raise CFIError(f"unsupported pointer application {encoding:#x}", field)
    if encoding & op.DW_EH_PE_indirect:
        raise CFIError("indirect FDE pointers are not supported", field)
    return value & _MASK64, pos
