"""SFrame rows per function, made when a walk first reaches it.

A walk needs rows for the few functions on its stacks, not for a whole
library: the FDE that covers a PC is found through ``.eh_frame_hdr``
(sfbt.dwarf.fdes), its CFA program is run, and its rows are converted as
a whole synthesis converts them (the same FunctionEntry model, rules and
left-out rows: sfbt.dwarf.synthesize), then kept per FDE.  The result is
an SFrameSection whose functions are read on demand, as a section opened
from bytes reads its FDEs; its ``functions`` (every function, for
`info`-like uses and tests) synthesizes the whole image once.
"""

from bisect import bisect_right

from ..sframe import constants as C
from ..sframe.layout import fits_word
from ..sframe.model import SFrameSection
from .cfa import register_rows, rules_in
from .encoding import CFIError
from .fdes import CfiUnavailable, FdeIndex, image_arch
from .synthesize import SynthStats, convert_fde, synthesize_cfi


class FunctionRows:
    """The SFrame functions of one image's FDEs, made per FDE on first use
    (the ``source`` of an SFrameSection: ``find_function``, ``num_fdes``,
    ``read_all``)."""

    def __init__(self, arch, index: FdeIndex, relocatable=False):
        self.arch = arch
        self.index = index
        self._relocatable = relocatable
        self._made = {}  # (section name, FDE offset) -> ([starts], [FunctionEntry])
        self._memo = {}  # DWARF row state -> ClassifiedRow, shared by the FDEs
        self._register_rows = {}  # (section name, FDE offset, registers) -> register_rows

    @property
    def num_fdes(self):
        return self.index.count

    def fde(self, pc):
        """The FDE covering pc, or None (also where it cannot be read: a
        lookup there finds no row, as for an unparsable entry)."""
        try:
            return self.index.find(pc)
        except CFIError:
            return None

    def find_function(self, pc):
        fde = self.fde(pc)
        if fde is None:
            return None
        key = (fde.source, fde.offset)
        made = self._made.get(key)
        if made is None:
            functions = []
            try:
                convert_fde(fde, self.arch, SynthStats(), functions, [], self._memo)
            except Exception:  # a synthesizer bug must not end the walk: no rows here
                functions = []
            functions = sorted((f for f in functions if _writable(f)),
                               key=lambda f: f.start)
            made = self._made[key] = ([f.start for f in functions], functions)
        starts, functions = made
        i = bisect_right(starts, pc) - 1
        if i >= 0 and pc < functions[i].end:
            return functions[i]
        return None

    def read_all(self):
        """(every function, row-block order None): the whole image's."""
        fde_lists, _ = self.index.fde_lists()
        result = synthesize_cfi(self.arch, [fdes for fdes in fde_lists if fdes],
                                relocatable=self._relocatable)
        return result.section.functions, None

    def register_rules(self, pc, registers):
        """{register: dwarf Rule or None (unchanged)} of the CFI at ``pc``
        for each of ``registers``, or None where there is none."""
        fde = self.fde(pc)
        if fde is None:
            return None
        key = (fde.source, fde.offset, tuple(registers))
        if key not in self._register_rows:  # run once: a walk asks at many PCs of a function
            self._register_rows[key] = register_rows(fde, registers)
        rows = self._register_rows[key]  # None where the CIE's program stops
        return None if rows is None else rules_in(rows, pc)


def _writable(function):
    """Whether a section could hold the function's rows (a whole synthesis
    that cannot write one fails): data words of at most 4 bytes."""
    return all(fits_word(word, 4) for row in function.rows for word in row.words)


def function_rows_section(image):
    """(an SFrameSection of rows made per function, its FunctionRows) for an
    ELF image (a file's or one in target memory).  Raises CfiUnavailable
    (no CFI, no architecture sfbt knows); reads raise what the image's
    reads raise."""
    arch = image_arch(image)
    index = FdeIndex.of_image(image)
    if not index.has_cfi:
        raise CfiUnavailable("no call-frame information (.eh_frame or .debug_frame)")
    rows = FunctionRows(arch, index, image.relocatable)
    section = SFrameSection(C.VERSION_3, arch.sframe_abi, flags=C.F_FDE_SORTED,
                            address=0, source=rows)
    return section, rows
