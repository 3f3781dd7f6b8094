"""One DWARF row state as SFrame rules, and those rules as the data words
of a default or a flexible (v3) SFrame row.

SFrame's CFA is the caller's stack pointer (plus the ABI's constant);
DWARF's may be anything.  Where they differ (longjmp-like code that
restores SP from another register, DRAP) the rules are rebased on the
caller's SP.  A row SFrame cannot say raises Inexpressible with the reason.
"""

from __future__ import annotations

from ..arch import Arch
from ..errors import SfbtError
from ..sframe import constants as C
from ..sframe.rules import Location
from . import cfa as dw
from .expressions import LazyPltCfa, lazy_plt_cfa, register_offset, saved_address

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple, Optional
else:
    from ..values import NamedTuple


class Inexpressible(SfbtError):
    """A DWARF row SFrame cannot say; the text is the reason."""


class SFrameRules(NamedTuple):
    """The caller's CFA, RA and FP as SFrame describes them (RA or FP None:
    unchanged / still in its register); ``cfa`` is a LazyPltCfa for the
    rows of x86-64's lazy-binding PLT."""

    cfa: object
    ra: Optional[Location]
    fp: Optional[Location]
    mangled_ra: bool


#: the rules of an outermost frame (RA undefined)
OUTERMOST = "outermost"

_DEREF = bytes([0x06])  # DW_OP_deref


def _cfa_location(cfa: dw.Cfa):
    if cfa.expression is None:
        return Location(cfa.register, cfa.offset, False)
    found = register_offset(cfa.expression)
    if found is not None:
        if not found.rest:
            return Location(found.register, found.offset, False)
        if found.rest == _DEREF:
            return Location(found.register, found.offset, True)
    plt = lazy_plt_cfa(cfa.expression)
    if plt is not None:
        return plt
    raise Inexpressible("CFA is a DWARF expression")


def _value_location(rule: dw.Rule, what: str) -> Optional[Location]:
    """The caller's value of a register, as a Location relative to the
    (DWARF) CFA (register None) or to a register; None when unchanged."""
    kind = rule.kind
    if kind == dw.OFFSET:
        return Location(None, rule.operand, True)
    if kind == dw.REGISTER:
        return Location(rule.operand, 0, False)
    if kind == dw.SAME_VALUE:
        return None
    if kind == dw.VAL_OFFSET:
        return Location(None, rule.operand, False)
    if kind == dw.EXPRESSION:
        found = saved_address(rule.operand)
        if found is None:
            raise Inexpressible(f"{what} saved at a DWARF expression")
        return Location(found.register, found.offset, True)
    if kind == dw.VAL_EXPRESSION:
        found = register_offset(rule.operand)
        if found is not None and not found.rest:
            return Location(found.register, found.offset, False)
        raise Inexpressible(f"{what} value is a DWARF expression")
    raise Inexpressible(f"{what} {kind}")


def _rebase(location, dwarf_cfa, what):
    """A CFA-relative Location made relative to the DWARF CFA's register,
    for when the SFrame CFA (the caller's SP) is not the DWARF CFA."""
    if location is None or location.register is not None:
        return location
    if dwarf_cfa.deref:
        raise Inexpressible(f"{what} relative to a dereferenced CFA that is not the caller's SP")
    return Location(dwarf_cfa.register, dwarf_cfa.offset + location.offset, location.deref)


def convert_state(state: dw.RowState, arch: Arch):
    """SFrameRules for one DWARF row state, or OUTERMOST.  Raises
    Inexpressible."""
    if state.ra is not None and state.ra.kind == dw.UNDEFINED:
        return OUTERMOST
    dwarf_cfa = _cfa_location(state.cfa)
    if isinstance(dwarf_cfa, LazyPltCfa):
        if state.sp is not None or state.fp is not None or state.ra != dw.Rule(dw.OFFSET, -8):
            raise Inexpressible("PLT CFA expression with other rules")
        return SFrameRules(dwarf_cfa, Location(None, -8, True), None, False)
    cfa = dwarf_cfa
    if state.sp is not None and not arch.sp_from_cfa:
        # On s390x the ABI defines the CFA as the caller's SP + 160, and
        # SFrame's CFA is the same; an SP rule (r15 saved with the other
        # GPRs, or kept in a floating-point register at -O0) says no more.
        caller_sp = _value_location(state.sp, "SP")
        if caller_sp is None:
            caller_sp = Location(arch.sp, 0, False)
        if caller_sp != Location(None, 0, False):  # other than "SP = CFA"
            cfa = _rebase(caller_sp, dwarf_cfa, "SP")
    ra = None if state.ra is None else _value_location(state.ra, "RA")
    fp = None if state.fp is None else _value_location(state.fp, "FP")
    if cfa != dwarf_cfa:
        ra = _rebase(ra, dwarf_cfa, "RA")
        fp = _rebase(fp, dwarf_cfa, "FP")
    if ra is None and arch.fixed_ra_offset:
        raise Inexpressible("RA not saved (no link register on this ABI)")
    return SFrameRules(cfa, ra, fp, bool(state.ra_mangled and arch.pointer_authentication))


def default_words(rules: SFrameRules, arch: Arch):
    """(base register, words) of a default SFrame row, or None where the
    row needs a flexible FDE."""
    cfa, ra, fp = rules.cfa, rules.ra, rules.fp
    if cfa.deref or cfa.register not in (arch.sp, arch.fp):
        return None
    base = C.BASE_REG_SP if cfa.register == arch.sp else C.BASE_REG_FP
    for location in (ra, fp):
        if location is not None and (location.register is not None
                                     or not location.deref or location.offset == 0):
            return None
    cfa_word = arch.encode_sframe_cfa_offset(cfa.offset)
    if cfa_word is None:
        return None
    words = [cfa_word]
    if arch.fixed_ra_offset:
        if ra != Location(None, arch.fixed_ra_offset, True):
            return None
        if fp is not None:
            words.append(fp.offset)
    elif ra is not None or fp is not None:
        words.append(ra.offset if ra is not None else 0)
        if fp is not None:
            words.append(fp.offset)
    return base, words


def _control(location, what):
    control = (location.register << 3 | 1) if location.register is not None else 0
    if location.deref:
        control |= 2
    if control == 0:
        raise Inexpressible(f"{what} = CFA + offset (not a saved slot)")
    return control


def flex_words(rules: SFrameRules, arch: Arch):
    """(base register, words) of a flexible SFrame row.  Raises
    Inexpressible."""
    cfa, ra, fp = rules.cfa, rules.ra, rules.fp
    if cfa.register is None:
        raise Inexpressible("CFA relative to itself")
    cfa_word = arch.encode_sframe_cfa_offset(cfa.offset)
    if cfa_word is None:
        raise Inexpressible(f"{arch.name} CFA offset {cfa.offset} is not a multiple "
                            f"of {arch.sframe_cfa_alignment}")
    words = [_control(cfa, "CFA"), cfa_word]
    if fp is not None or (ra is not None and ra != Location(None, arch.fixed_ra_offset, True)):
        if ra is None:
            words.append(0)  # padding: RA not saved
        else:
            words += [_control(ra, "RA"), ra.offset]
        if fp is not None:
            words += [_control(fp, "FP"), fp.offset]
    return C.BASE_REG_SP, words


class ClassifiedRow:
    """One distinct DWARF state, classified: the SFrame rules, and the words
    of its default and flexible encodings as (base, words, mangled), None
    where there is none; or the reason it cannot be said."""

    __slots__ = ("rules", "reason", "plt", "default", "flex")

    def __init__(self, rules=None, reason=None):
        self.rules = rules
        self.reason = reason
        self.plt = None
        self.default = None
        self.flex = None


def classify(state: dw.RowState, arch: Arch) -> ClassifiedRow:
    try:
        rules = convert_state(state, arch)
    except Inexpressible as why:
        return ClassifiedRow(reason=str(why))
    row = ClassifiedRow(rules)
    if rules is OUTERMOST:
        row.default = row.flex = (C.BASE_REG_SP, (), False)
        return row
    if isinstance(rules.cfa, LazyPltCfa):
        row.plt = rules.cfa
        return row
    found = default_words(rules, arch)
    if found is not None:
        row.default = (found[0], tuple(found[1]), rules.mangled_ra)
    try:
        base, words = flex_words(rules, arch)
        row.flex = (base, tuple(words), rules.mangled_ra)
    except Inexpressible as why:
        if row.default is None:
            return ClassifiedRow(reason=str(why))
    return row
