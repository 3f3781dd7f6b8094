"""SFrame for code that has none: a v3 section synthesized from DWARF
call-frame information (``.eh_frame``, else ``.debug_frame``).

Each DWARF FDE becomes SFrame function entries:

- **default** FDEs where every row is the CFA from SP or FP plus an offset,
  with RA and FP unchanged or saved at CFA plus an offset (AMD64: the RA at
  the fixed CFA - 8);
- **flexible** (v3) FDEs where some row needs more: a CFA based on another
  register (DRAP) or dereferenced, RA or FP kept in a register or saved
  relative to another register;
- **signal** FDEs (CIE augmentation ``S``, e.g. libc's ``__restore_rt``),
  flexible or default as their rows need;
- x86-64 lazy-binding PLT rows (the CFA expression ld writes for ``.plt``)
  become a PLT-style function (``pc_type`` MASK, repetition size 16), as ld
  writes them in ``.sframe``.

A row SFrame cannot express (an arbitrary DWARF expression, a caller SP
that is not the CFA and cannot be made so, ...) is left out: its address
range gets no function entry, so a lookup there finds no row, and the
reason is counted and kept (``SynthResult.left_out``).
"""

import collections
from bisect import bisect_right

from ..arch import Arch
from ..elf import ElfError, ElfImage, open_elf
from ..errors import SfbtError
from ..sframe import constants as C
from ..sframe.model import FrameRowEntry, FunctionEntry, SFrameSection, minimal_word_size
from .cfa import run_fde
from .convert import ClassifiedRow, classify
from .expressions import LazyPltCfa
from .fdes import CfiUnavailable, FdeIndex, image_arch

DEFAULT, FLEX, SIGNAL, PLT, LEFT_OUT = "default", "flex", "signal", "plt", "left out"
_MAX_ROWS = 0xFFFF  # a v3 function's row count is 16 bits


class SynthError(SfbtError):
    """A file that cannot be synthesized from (not ELF, no CFI, unknown
    architecture)."""


class SynthStats:
    """What the synthesis made, for `sfbt sframe synth`, `info sframe` and the
    benchmark."""

    def __init__(self):
        self.sources = []
        self.dwarf_fdes = 0
        self.skipped_fdes = collections.Counter()  # reason -> count
        self.functions = collections.Counter()  # default/flex/signal/plt
        self.rows = collections.Counter()  # DWARF rows by class (+ "left out")
        self.left_out = collections.Counter()  # reason -> rows

    def to_json(self):
        return {"sources": self.sources, "dwarf_fdes": self.dwarf_fdes,
                "skipped_fdes": dict(self.skipped_fdes),
                "functions": dict(self.functions), "rows": dict(self.rows),
                "left_out": dict(self.left_out)}

    @classmethod
    def from_json(cls, data):
        stats = cls()
        stats.sources = [str(s) for s in data["sources"]]
        stats.dwarf_fdes = int(data["dwarf_fdes"])
        stats.skipped_fdes.update(dict(data["skipped_fdes"]))
        stats.functions.update(dict(data["functions"]))
        stats.rows.update(dict(data["rows"]))
        stats.left_out.update(dict(data["left_out"]))
        return stats

    def summary(self):
        functions = self.functions
        total = sum(functions.values())
        rows = self.rows
        kept = rows[DEFAULT] + rows[FLEX] + rows[SIGNAL]
        text = (f"{self.dwarf_fdes} DWARF FDEs from {', '.join(self.sources) or 'nothing'}"
                f" -> {total} SFrame FDEs ({functions[DEFAULT]} default, "
                f"{functions[FLEX]} flex, {functions[SIGNAL]} signal"
                f"{', %d PLT' % functions[PLT] if functions[PLT] else ''}); "
                f"{kept} DWARF rows kept ({rows[DEFAULT]} default, {rows[FLEX]} flex, "
                f"{rows[SIGNAL]} signal), {rows[LEFT_OUT]} left out")
        if self.left_out:
            text += " (" + ", ".join(f"{reason}: {count}" for reason, count
                                     in sorted(self.left_out.items())) + ")"
        if self.skipped_fdes:
            text += "; FDEs skipped: " + ", ".join(
                f"{reason}: {count}" for reason, count in sorted(self.skipped_fdes.items()))
        return text


class SynthResult:
    """A synthesized section, its statistics and the address ranges left out."""

    def __init__(self, section, stats, left_out, origin="built"):
        self.section = section
        self.stats = stats
        #: [(start, end, reason)] sorted: ranges whose rows were left out
        self.left_out = left_out
        self.origin = origin  # "built" or "cache"
        #: the cache key of the file it was made from (set by synth_cache)
        self.made_from = None
        self._starts = [start for start, _, _ in left_out]

    def left_out_reason(self, pc):
        """Why there is no row at pc, when its row was left out; else None."""
        i = bisect_right(self._starts, pc) - 1
        if i >= 0 and pc < self.left_out[i][1]:
            return self.left_out[i][2]
        return None


def _plt_function(start, size, plt: LazyPltCfa):
    """A PLT-style function (MASK) for the lazy-PLT CFA expression."""
    rep = plt.mask + 1
    rows = []
    previous = None
    for offset in range(rep):
        value = plt.base + (8 if ((start + offset) & plt.mask) >= plt.threshold else 0)
        if value != previous:
            rows.append(FrameRowEntry(offset, C.BASE_REG_SP, (value,)))
            previous = value
    return FunctionEntry(start, size, rows, pc_type=C.PC_TYPE_MASK, rep_size=rep)


def _functions(arch, start, end, rows, fde, flex):
    """FunctionEntries from [(address, ClassifiedRow)] (first address ==
    start): one, or consecutive pieces when there are more rows than a
    function holds."""
    kept = []
    previous = None
    for address, row in rows:
        key = row.flex if flex else row.default
        if key != previous:
            kept.append((address, key))
            previous = key
    cie = fde.cie
    attributes = dict(
        signal=cie.signal, fde_type=C.FDE_TYPE_FLEX if flex else C.FDE_TYPE_DEFAULT,
        pauth_key=(C.PAUTH_KEY_B if (cie.bkey and arch.pointer_authentication)
                   else C.PAUTH_KEY_A))
    functions = []
    for at in range(0, len(kept), _MAX_ROWS):
        piece = kept[at:at + _MAX_ROWS]
        piece_start = piece[0][0]
        piece_end = kept[at + _MAX_ROWS][0] if at + _MAX_ROWS < len(kept) else end
        entries = [FrameRowEntry(address - piece_start, base, words,
                                 minimal_word_size(words), mangled)
                   for address, (base, words, mangled) in piece]
        functions.append(FunctionEntry(piece_start, piece_end - piece_start, entries,
                                       **attributes))
    return functions


def _runs(converted):
    """Consecutive rows grouped by what becomes of them: ordinary rows, the
    rows of one PLT expression, or rows left out for one reason."""
    runs = []
    for address, row in converted:
        if row.reason is not None:
            kind = (LEFT_OUT, row.reason)
        elif row.plt is not None:
            kind = (PLT, row.plt)
        else:
            kind = ("rows",)
        if runs and runs[-1][0] == kind:
            runs[-1][1].append((address, row))
        else:
            runs.append((kind, [(address, row)]))
    return runs


def convert_fde(fde, arch, stats, functions, left_out, memo):
    program = run_fde(fde, arch.sp, arch.fp, arch.ra)
    end = fde.end
    converted = []  # [(address, ClassifiedRow)], rows past the end dropped
    for address, state in program.rows:
        if address >= end:
            break
        found = memo.get(state)
        if found is None:
            found = memo[state] = classify(state, arch)
        converted.append((address, found))
    if program.error is not None and program.error_at < end:
        converted = [row for row in converted if row[0] < program.error_at]
        converted.append((max(program.error_at, fde.start),
                          ClassifiedRow(reason=program.error)))
    if not converted:
        return
    runs = _runs(converted)
    for index, (kind, rows) in enumerate(runs):
        run_start = rows[0][0]
        run_end = runs[index + 1][1][0][0] if index + 1 < len(runs) else end
        if run_end <= run_start:
            continue
        if kind[0] == LEFT_OUT:
            stats.rows[LEFT_OUT] += len(rows)
            stats.left_out[kind[1]] += len(rows)
            left_out.append((run_start, run_end, kind[1]))
        elif kind[0] == PLT:
            functions.append(_plt_function(run_start, run_end - run_start, kind[1]))
            stats.functions[PLT] += 1
            stats.rows[DEFAULT] += len(rows)
        else:
            flex = any(row.default is None for _, row in rows)
            functions += _functions(arch, run_start, run_end, rows, fde, flex)
            kind_name = SIGNAL if fde.cie.signal else (FLEX if flex else DEFAULT)
            stats.functions[kind_name] += 1
            stats.rows[kind_name] += len(rows)


def synthesize_cfi(arch: Arch, fde_lists, sources=(), relocatable=False) -> SynthResult:
    """SynthResult from parsed FDE lists, in priority order (.eh_frame
    first): an FDE overlapping one already taken is skipped, except in
    relocatable objects, whose text sections all start at 0."""
    stats = SynthStats()
    stats.sources = list(sources)
    taken = []
    for fdes in fde_lists:
        for fde in fdes:
            stats.dwarf_fdes += 1
            if fde.size == 0:
                stats.skipped_fdes["empty"] += 1
                continue
            taken.append(fde)
    taken.sort(key=lambda f: f.start)
    chosen = []
    for fde in taken:
        if chosen and fde.start < chosen[-1].end and not relocatable:
            stats.skipped_fdes["overlapping"] += 1
            continue
        chosen.append(fde)
    functions, left_out, memo = [], [], {}
    for fde in chosen:
        convert_fde(fde, arch, stats, functions, left_out, memo)
    functions.sort(key=lambda f: f.start)
    section = SFrameSection(C.VERSION_3, arch.sframe_abi, functions,
                            flags=C.F_FDE_SORTED, address=0)
    left_out.sort()
    return SynthResult(section, stats, left_out)


def image_cfi(image: ElfImage):
    """(FDE lists in priority order, their section names, unparsable
    entries) of an ELF image: its .eh_frame and .debug_frame (relocated
    first in relocatable objects), or for an image in target memory, which
    has no section headers, the .eh_frame its PT_GNU_EH_FRAME names.
    Raises SynthError."""
    try:
        image_arch(image)
        index = FdeIndex.of_image(image)
    except CfiUnavailable as error:
        raise SynthError(str(error)) from None
    fde_lists, errors = index.fde_lists()
    kept = [(fdes, name) for fdes, name in zip(fde_lists, index.sources) if fdes]
    return [fdes for fdes, _ in kept], [name for _, name in kept], errors


def synthesize_image(image: ElfImage) -> SynthResult:
    """SynthResult for an ELF image (a file's, or one in target memory:
    ``image.in_memory``), from its call-frame information.  Raises
    SynthError."""
    try:
        fde_lists, sources, errors = image_cfi(image)
    except ElfError as error:
        raise SynthError(str(error)) from None
    if not fde_lists:
        raise SynthError("no call-frame information (.eh_frame or .debug_frame)")
    result = synthesize_cfi(image.arch, fde_lists, sources, image.relocatable)
    if errors:
        result.stats.skipped_fdes["unparsable entry"] += errors
    return result


def synthesize_elf(path) -> SynthResult:
    """SynthResult for the ELF file at path.  Raises SynthError or OSError."""
    try:
        stream, image = open_elf(str(path))
    except ElfError as error:
        raise SynthError(str(error)) from None
    with stream:
        try:
            return synthesize_image(image)
        except ElfError as error:
            raise SynthError(f"not a readable ELF file: {error}") from None
