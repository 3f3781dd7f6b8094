"""A row's rules made ready for the frame step (sfbt.unwind.walk).

The step runs once per frame, thousands of times over the same few rows
in a deep stack: reading a row's rules generically (a rule per register,
each a Location asked whether it has a base register and whether it is
dereferenced) costs more than the arithmetic they ask for.  A RowPlan says
the same once per row, in the shape the step reads fastest: the common
rules (a register saved in the frame at CFA + k, as every AMD64 RA and
most saved FPs are) as that one offset, anything else as its Location.
"""

from ..sframe.rules import FrameRow

# What a row says before any rule: the step does not go on by it.
SIGNAL = "signal"  # the kernel's signal frame (a v3 signal FDE)
OUTERMOST = "outermost"  # the stack ends here (RA undefined)


class RowPlan:
    """How the step unwinds a frame by one row on one architecture."""

    __slots__ = ("row", "ends", "cfa_register", "cfa_offset", "cfa_deref",
                 "ra_saved_at", "ra", "fp_saved_at", "fp", "mangled_ra", "step")

    def __init__(self, row: FrameRow, has_signal_frame: bool):
        #: what it was made from: a cache of plans checks it
        self.row = row
        #: SIGNAL or OUTERMOST where the step ends at this row, else None
        self.ends = (SIGNAL if row.signal and has_signal_frame
                     else OUTERMOST if row.outermost else None)
        cfa = row.cfa
        if self.ends is None:
            self.cfa_register, self.cfa_offset, self.cfa_deref = cfa
        else:
            self.cfa_register = self.cfa_offset = self.cfa_deref = None
        #: the CFA offset where the RA is saved (the common rule), else None
        #: and ``ra`` the rule (None: the RA is still in its register)
        self.ra_saved_at, self.ra = _saved_at(row.ra)
        #: the same for the caller's FP (both None: the FP is unchanged)
        self.fp_saved_at, self.fp = _saved_at(row.fp)
        self.mangled_ra = row.mangled_ra
        #: all the above but the row, as the step reads them: in one
        #: unpacking, not an attribute lookup each
        self.step = (self.ends, self.cfa_register, self.cfa_offset, self.cfa_deref,
                     self.ra_saved_at, self.ra, self.fp_saved_at, self.fp, self.mangled_ra)


def _saved_at(rule):
    """(CFA offset, None) for a value saved at CFA + offset; (None, rule)
    for any other rule, or (None, None) without one."""
    if rule is not None and rule.register is None and rule.deref:
        return rule.offset, None
    return None, rule
