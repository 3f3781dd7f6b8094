"""What a frame row means: CFA, RA and FP recovery rules for one PC.

Default FDEs store offsets whose meaning depends on the ABI (AMD64 keeps the
RA at a fixed CFA offset, s390x scales its CFA offset); flexible FDEs store
(control, offset) pairs.  Both become the same FrameRow.
"""

from __future__ import annotations

from . import constants as C
from .errors import SFrameError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple, Optional
else:
    from ..values import NamedTuple


class Location(NamedTuple):
    """value = *(base + offset) if deref else base + offset.

    ``register`` is a DWARF register number, or None for the CFA.
    """

    register: Optional[int]
    offset: int
    deref: bool

    def __str__(self):
        base = "cfa" if self.register is None else f"r{self.register}"
        text = f"{base}{self.offset:+d}"
        return f"[{text}]" if self.deref else text


class FrameRow(NamedTuple):
    """The unwinding rules in force at one PC.

    ``cfa`` is None only for the outermost frame (RA undefined).  ``ra`` is
    None when the return address has not been saved (it is still in the RA
    register, e.g. AArch64's x30); ``fp`` is None when the caller's frame
    pointer is unchanged.  (Tuples, like FrameRowEntry: a lookup makes one
    the first time a row is asked for.)
    """

    # sframe.model's FunctionEntry and FrameRowEntry (the model imports
    # this module through its lookups)
    function: Any
    entry: Any
    cfa: Optional[Location]
    ra: Optional[Location]
    fp: Optional[Location]
    outermost: bool
    mangled_ra: bool
    signal: bool
    pauth_key: int


def frame_row(section, function, entry):
    """Interpret one FrameRowEntry of ``function`` as a FrameRow."""
    if entry.ra_undefined:
        cfa = ra = fp = None
    elif function.is_flex:
        cfa, ra, fp = _flex_rules(section, entry)
    else:
        cfa, ra, fp = _default_rules(section, entry)
    return FrameRow(function, entry, cfa, ra, fp, entry.ra_undefined,
                    entry.mangled_ra, function.signal, function.pauth_key)


def _default_rules(section, entry):
    arch = section.arch
    words = entry.words
    cfa_offset = arch.decode_sframe_cfa_offset(words[0])
    base = arch.sp if entry.base_reg == C.BASE_REG_SP else arch.fp
    cfa = Location(base, cfa_offset, False)
    if section.cfa_fixed_ra_offset:
        ra = Location(None, section.cfa_fixed_ra_offset, True)
        fp_word = words[1] if len(words) > 1 else None
    else:
        ra = _saved_at(section, words[1] if len(words) > 1 else None)
        fp_word = words[2] if len(words) > 2 else None
    if section.cfa_fixed_fp_offset:
        fp = Location(None, section.cfa_fixed_fp_offset, True)
    else:
        fp = _saved_at(section, fp_word)
    return cfa, ra, fp


def _saved_at(section, word):
    """A default-FDE RA/FP word: a CFA offset, 0 for padding, or (s390x v2)
    an odd value holding a DWARF register number."""
    if not word:
        return None
    if (section.abi == C.ABI_S390X_BE and section.version == C.VERSION_2
            and word & 1):
        return Location(word >> 1, 0, False)
    return Location(None, word, True)


def _flex_rules(section, entry):
    words, size = entry.words, entry.word_size
    fixed_ra = section.cfa_fixed_ra_offset
    if len(words) < 2:
        raise SFrameError(f"flexible FRE at offset {entry.start_offset:#x} has "
                          f"{len(words)} data words; the CFA rule needs 2",
                          section=section.name)
    control = words[0] & ((1 << (8 * size)) - 1)
    if not control & 1:
        raise SFrameError(f"flexible FRE at offset {entry.start_offset:#x}: "
                          "CFA rule has no base register", section=section.name)
    cfa = _flex_location(control, words[1])
    cfa = Location(cfa.register, section.arch.decode_sframe_cfa_offset(cfa.offset),
                   cfa.deref)
    next_word = 2
    ra = Location(None, fixed_ra, True) if fixed_ra else None
    if len(words) > 2:
        control = words[2] & ((1 << (8 * size)) - 1)
        if control == 0:
            # Padding: the RA is not tracked here.  Where the ABI fixes its
            # place (AMD64: CFA - 8) it is there; elsewhere it was not saved.
            next_word = 3
        elif len(words) > 3:
            ra, next_word = _flex_location(control, words[3]), 4
        else:
            raise SFrameError(f"flexible FRE at offset {entry.start_offset:#x}: "
                              "RA rule has no offset word", section=section.name)
    fp = None
    if len(words) > next_word:
        if len(words) < next_word + 2:
            raise SFrameError(f"flexible FRE at offset {entry.start_offset:#x}: "
                              "FP rule has no offset word", section=section.name)
        control = words[next_word] & ((1 << (8 * size)) - 1)
        fp = _flex_location(control, words[next_word + 1])
    return cfa, ra, fp


def _flex_location(control, offset):
    register = control >> 3 if control & 1 else None
    return Location(register, offset, bool(control & 2))


__all__ = ["Location", "FrameRow", "frame_row"]
