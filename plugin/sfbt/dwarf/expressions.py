"""The few DWARF expressions SFrame can say, recognised by their bytes."""

from __future__ import annotations

from . import opcodes as op
from .encoding import read_sleb128, read_uleb128

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple, Optional
else:
    from ..values import NamedTuple


class RegisterOffset(NamedTuple):
    """``register + offset`` (register None: the CFA), and the bytes after it."""

    register: Optional[int]
    offset: int
    rest: bytes = b""


def register_offset(expression: bytes) -> Optional[RegisterOffset]:
    """An expression starting with DW_OP_bregN or DW_OP_bregx, else None."""
    if not expression:
        return None
    code = expression[0]
    try:
        if op.DW_OP_breg0 <= code <= op.DW_OP_breg31:
            offset, pos = read_sleb128(expression, 1)
            return RegisterOffset(code - op.DW_OP_breg0, offset, expression[pos:])
        if code == op.DW_OP_bregx:
            register, pos = read_uleb128(expression, 1)
            offset, pos = read_sleb128(expression, pos)
            return RegisterOffset(register, offset, expression[pos:])
    except IndexError:
        return None
    return None


def saved_address(expression: bytes) -> Optional[RegisterOffset]:
    """The address a DW_CFA_expression computes, when SFrame can say it:
    register + offset (DW_OP_bregN), or CFA + offset (DW_OP_call_frame_cfa,
    then nothing, DW_OP_plus_uconst N, or DW_OP_consts N; DW_OP_plus)."""
    found = register_offset(expression)
    if found is not None and not found.rest:
        return found
    if expression[:1] != bytes([op.DW_OP_call_frame_cfa]):
        return None
    rest = expression[1:]
    try:
        if not rest:
            return RegisterOffset(None, 0)
        if rest[0] == op.DW_OP_plus_uconst:
            value, pos = read_uleb128(rest, 1)
            if pos == len(rest):
                return RegisterOffset(None, value)
        if rest[0] == op.DW_OP_consts:
            value, pos = read_sleb128(rest, 1)
            if rest[pos:] == bytes([op.DW_OP_plus]):
                return RegisterOffset(None, value)
    except IndexError:
        return None
    return None


class LazyPltCfa(NamedTuple):
    """CFA = rsp + base + 8 * ((rip & mask) >= threshold)."""

    base: int
    mask: int
    threshold: int


_RSP, _RIP = 7, 16
_PLT_TAIL = bytes([op.DW_OP_ge, op.DW_OP_lit0 + 3, op.DW_OP_shl, op.DW_OP_plus])


def lazy_plt_cfa(expression: bytes) -> Optional[LazyPltCfa]:
    """The CFA expression ld writes for x86-64's lazy-binding .plt:
    DW_OP_breg7 A; DW_OP_breg16 0; DW_OP_litM; DW_OP_and; DW_OP_litK;
    DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus.  Else None."""
    found = register_offset(expression)
    if found is None or found.register != _RSP:
        return None
    rest = found.rest
    lit = range(op.DW_OP_lit0, op.DW_OP_lit31 + 1)
    if (len(rest) == 9 and rest[:2] == bytes([op.DW_OP_breg0 + _RIP, 0])
            and rest[2] in lit and rest[3] == op.DW_OP_and and rest[4] in lit
            and rest[5:] == _PLT_TAIL):
        return LazyPltCfa(found.offset, rest[2] - op.DW_OP_lit0, rest[4] - op.DW_OP_lit0)
    return None
