"""Running an FDE's CFA program into rows: at each address, how to find the
CFA and the caller's stack pointer, frame pointer and return address.

Only what SFrame can carry is tracked: the CFA and the rules of those three
registers (and AArch64's return-address signing state), which keeps a big
library's table cheap to build.
"""

from __future__ import annotations

import struct
from bisect import bisect_right

from . import opcodes as op
from .encoding import CFIError, read_encoded_pointer, read_sleb128, read_uleb128

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple, Optional
else:
    from ..values import NamedTuple


class Cfa(NamedTuple):
    """The CFA rule: ``register + offset``, or a DWARF ``expression``.

    While an expression is in force the register and offset it replaced
    are kept: DW_CFA_def_cfa_register and DW_CFA_def_cfa_offset still
    update them, and a later one brings them back (as GDB and libgcc do).
    """

    register: int
    offset: int
    expression: Optional[bytes] = None


# Kinds of register rule (DWARF 5, 6.4.1).
UNDEFINED = "undefined"
SAME_VALUE = "same value"
OFFSET = "offset"  # saved at CFA + operand
VAL_OFFSET = "val_offset"  # the value is CFA + operand
REGISTER = "register"  # the value is in register operand
EXPRESSION = "expression"  # saved at the address the operand computes
VAL_EXPRESSION = "val_expression"  # the value is what the operand computes


class Rule(NamedTuple):
    """How to recover a register of the caller: ``kind`` and its operand
    (an offset, a register number or expression bytes)."""

    kind: str
    operand: object = None


class RowState(NamedTuple):
    """The rules in force from one row's address to the next.  A register
    rule of None means the CIE gave none: the register is unchanged."""

    cfa: Cfa
    sp: Optional[Rule]
    fp: Optional[Rule]
    ra: Optional[Rule]
    ra_mangled: bool


class Program(NamedTuple):
    """The result of running one FDE's CFA program."""

    rows: list  # [(address, RowState)], address ascending
    error: Optional[str] = None  # why decoding stopped early
    error_at: Optional[int] = None  # the address from which there are no rows


class _Stop(Exception):
    """The program cannot go on: its message, at the current location."""


class _Machine:
    """The interpreter's registers while one program runs."""

    __slots__ = ("cie", "loc", "cfa", "rules", "mangled", "stack", "initial",
                 "rows", "emit", "sp", "fp", "ra", "end")

    def __init__(self, cie, loc, cfa, rules, mangled, initial, emit, sp, fp, ra):
        self.cie = cie
        self.loc = loc
        self.cfa = cfa
        self.rules = rules  # tracked register -> Rule or None
        self.mangled = mangled
        self.stack = []
        self.initial = initial  # the rules after the CIE's instructions
        self.rows = []
        self.emit = emit  # an FDE's program makes rows; a CIE's does not
        self.sp, self.fp, self.ra = sp, fp, ra
        self.end = 0  # where the running program ends

    def state(self):
        rules = self.rules
        return RowState(self.cfa, rules[self.sp], rules[self.fp], rules[self.ra],
                        self.mangled)

    def advance(self, new):
        if self.emit and new != self.loc:
            if new < self.loc:
                raise _Stop("location moves backwards")
            self.rows.append((self.loc, self.state()))
        self.loc = new

    def set_rule(self, register, rule):
        if register in self.rules:
            self.rules[register] = rule

    def restore(self, register):
        if register in self.rules:
            self.rules[register] = self.initial.get(register)


_HANDLERS = {}


def _handles(*opcodes):
    def register(function):
        for code in opcodes:
            _HANDLERS[code] = function
        return function
    return register


@_handles(op.DW_CFA_nop)
def _nop(m, data, pos):
    return pos


@_handles(op.DW_CFA_set_loc)
def _set_loc(m, data, pos):
    cie = m.cie
    new, pos = read_encoded_pointer(cie.reader, data, pos, cie.fde_encoding,
                                    cie.section_address, cie.address_size)
    m.advance(new)
    return pos


@_handles(op.DW_CFA_advance_loc1)
def _advance_loc1(m, data, pos):
    m.advance(m.loc + data[pos] * m.cie.code_align)
    return pos + 1


@_handles(op.DW_CFA_advance_loc2)
def _advance_loc2(m, data, pos):
    m.advance(m.loc + m.cie.reader.u16(data, pos)[0] * m.cie.code_align)
    return pos + 2


@_handles(op.DW_CFA_advance_loc4)
def _advance_loc4(m, data, pos):
    m.advance(m.loc + m.cie.reader.u32(data, pos)[0] * m.cie.code_align)
    return pos + 4


@_handles(op.DW_CFA_offset_extended, op.DW_CFA_val_offset,
          op.DW_CFA_GNU_negative_offset_extended)
def _offset_unsigned(m, data, pos):
    opcode = data[pos - 1]
    register, pos = read_uleb128(data, pos)
    value, pos = read_uleb128(data, pos)
    if opcode == op.DW_CFA_GNU_negative_offset_extended:
        value = -value
    kind = VAL_OFFSET if opcode == op.DW_CFA_val_offset else OFFSET
    m.set_rule(register, Rule(kind, value * m.cie.data_align))
    return pos


@_handles(op.DW_CFA_offset_extended_sf, op.DW_CFA_val_offset_sf)
def _offset_signed(m, data, pos):
    kind = VAL_OFFSET if data[pos - 1] == op.DW_CFA_val_offset_sf else OFFSET
    register, pos = read_uleb128(data, pos)
    value, pos = read_sleb128(data, pos)
    m.set_rule(register, Rule(kind, value * m.cie.data_align))
    return pos


@_handles(op.DW_CFA_restore_extended)
def _restore_extended(m, data, pos):
    register, pos = read_uleb128(data, pos)
    m.restore(register)
    return pos


@_handles(op.DW_CFA_undefined, op.DW_CFA_same_value)
def _undefined_or_same(m, data, pos):
    kind = UNDEFINED if data[pos - 1] == op.DW_CFA_undefined else SAME_VALUE
    register, pos = read_uleb128(data, pos)
    m.set_rule(register, Rule(kind))
    return pos


@_handles(op.DW_CFA_register)
def _register(m, data, pos):
    register, pos = read_uleb128(data, pos)
    other, pos = read_uleb128(data, pos)
    m.set_rule(register, Rule(REGISTER, other))
    return pos


def _expression_operand(data, pos, end):
    length, pos = read_uleb128(data, pos)
    if pos + length > end:
        raise IndexError("expression runs past the program")
    return bytes(data[pos:pos + length]), pos + length


@_handles(op.DW_CFA_expression, op.DW_CFA_val_expression)
def _expression(m, data, pos):
    kind = EXPRESSION if data[pos - 1] == op.DW_CFA_expression else VAL_EXPRESSION
    register, pos = read_uleb128(data, pos)
    expression, pos = _expression_operand(data, pos, m.end)
    m.set_rule(register, Rule(kind, expression))
    return pos


@_handles(op.DW_CFA_remember_state)
def _remember_state(m, data, pos):
    m.stack.append((m.cfa, dict(m.rules), m.mangled))
    return pos


@_handles(op.DW_CFA_restore_state)
def _restore_state(m, data, pos):
    if not m.stack:
        raise _Stop("DW_CFA_restore_state with an empty stack")
    m.cfa, m.rules, m.mangled = m.stack.pop()
    return pos


@_handles(op.DW_CFA_def_cfa)
def _def_cfa(m, data, pos):
    register, pos = read_uleb128(data, pos)
    offset, pos = read_uleb128(data, pos)
    m.cfa = Cfa(register, offset)
    return pos


@_handles(op.DW_CFA_def_cfa_sf)
def _def_cfa_sf(m, data, pos):
    register, pos = read_uleb128(data, pos)
    offset, pos = read_sleb128(data, pos)
    m.cfa = Cfa(register, offset * m.cie.data_align)
    return pos


@_handles(op.DW_CFA_def_cfa_register)
def _def_cfa_register(m, data, pos):
    register, pos = read_uleb128(data, pos)
    m.cfa = Cfa(register, m.cfa.offset)
    return pos


@_handles(op.DW_CFA_def_cfa_offset)
def _def_cfa_offset(m, data, pos):
    offset, pos = read_uleb128(data, pos)
    # With an expression in force the offset is only noted (see Cfa).
    m.cfa = m.cfa._replace(offset=offset)
    return pos


@_handles(op.DW_CFA_def_cfa_offset_sf)
def _def_cfa_offset_sf(m, data, pos):
    offset, pos = read_sleb128(data, pos)
    m.cfa = m.cfa._replace(offset=offset * m.cie.data_align)
    return pos


@_handles(op.DW_CFA_def_cfa_expression)
def _def_cfa_expression(m, data, pos):
    expression, pos = _expression_operand(data, pos, m.end)
    m.cfa = m.cfa._replace(expression=expression)
    return pos


@_handles(op.DW_CFA_AARCH64_negate_ra_state)
def _negate_ra_state(m, data, pos):
    m.mangled = not m.mangled
    return pos


@_handles(op.DW_CFA_GNU_args_size)
def _args_size(m, data, pos):
    _, pos = read_uleb128(data, pos)
    return pos


def _run(machine, program):
    """Interpret one program; the rows go to machine.rows.  Returns None, or
    (error message, address) when it had to stop early."""
    data, pos, end = program
    machine.end = end
    code_align, data_align = machine.cie.code_align, machine.cie.data_align
    handlers = _HANDLERS
    try:
        while pos < end:
            opcode = data[pos]
            pos += 1
            primary = opcode & op.PRIMARY_MASK
            if primary:
                operand = opcode & op.PRIMARY_OPERAND
                if primary == op.DW_CFA_advance_loc:
                    machine.advance(machine.loc + operand * code_align)
                elif primary == op.DW_CFA_offset:
                    value, pos = read_uleb128(data, pos)
                    machine.set_rule(operand, Rule(OFFSET, value * data_align))
                else:
                    machine.restore(operand)
                continue
            handler = handlers.get(opcode)
            if handler is None:
                return f"unknown DW_CFA opcode {opcode:#04x}", machine.loc
            pos = handler(machine, data, pos)
    except _Stop as stop:
        return str(stop), machine.loc
    except (IndexError, struct.error, CFIError):
        return "truncated CFA program", machine.loc
    return None


def _initial_rules(cie, sp, fp, ra):
    """The CFA and register rules after the CIE's initial instructions,
    cached on the CIE per register triple."""
    key = (sp, fp, ra)
    if cie.initial_state is not None and cie.initial_state[0] == key:
        return cie.initial_state[1]
    machine = _Machine(cie, 0, Cfa(sp, 0), {sp: None, fp: None, ra: None}, False,
                       {}, False, sp, fp, ra)
    error = _run(machine, cie.program)
    if error is not None:
        raise CFIError(f"CIE at {cie.offset:#x}: {error[0]}")
    cie.initial_state = (key, machine.state())
    return cie.initial_state[1]


def run_fde(fde, sp, fp, ra=None):
    """Run the FDE's program: a Program with its rows.  ``sp`` and ``fp``
    are the DWARF numbers of the stack and frame pointers; ``ra`` is the
    return-address column (the CIE's by default)."""
    cie = fde.cie
    if ra is None:
        ra = cie.ra_column
    try:
        initial = _initial_rules(cie, sp, fp, ra)
    except (CFIError, IndexError, struct.error) as error:
        return Program([], f"CIE: {error}", fde.start)
    rules = {sp: initial.sp, fp: initial.fp, ra: initial.ra}
    machine = _Machine(cie, fde.start, initial.cfa, rules, initial.ra_mangled,
                       dict(rules), True, sp, fp, ra)
    error = _run(machine, fde.program)
    if error is not None:
        return Program(machine.rows, *error)
    machine.rows.append((machine.loc, machine.state()))
    return Program(machine.rows)


class _AllRules(_Machine):
    """A machine whose rows hold every tracked register's rule."""

    __slots__ = ()

    def state(self):
        return self.cfa, dict(self.rules)


def register_rows(fde, registers):
    """The rules of ``registers`` (DWARF numbers) over the FDE, by running
    the CIE's and the FDE's programs once: (the rows' addresses, rising;
    {register: Rule or None (unchanged)} in force from each; the address
    where the program stopped early, else None), for rules_in; None where
    the CIE's program stops."""
    cie = fde.cie
    tracked = dict.fromkeys(registers)
    sp = fp = ra = next(iter(tracked))
    machine = _AllRules(cie, 0, Cfa(sp, 0), dict(tracked), False, {}, False, sp, fp, ra)
    if _run(machine, cie.program) is not None:
        return None
    initial = dict(machine.rules)
    machine = _AllRules(cie, fde.start, machine.cfa, dict(initial), False, initial,
                        True, sp, fp, ra)
    error = _run(machine, fde.program)
    rows = machine.rows
    if error is None:
        rows.append((machine.loc, machine.state()))
    return ([address for address, _ in rows], [rules for _, (_, rules) in rows],
            None if error is None else error[1])


def rules_in(rows, pc):
    """The rules of register_rows ``rows`` in force at ``pc``, or None
    where no row covers it (before the first, or where the program
    stopped before it)."""
    addresses, rules, stopped = rows
    if stopped is not None and stopped <= pc:
        return None
    index = bisect_right(addresses, pc) - 1
    return rules[index] if index >= 0 else None
