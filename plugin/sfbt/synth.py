"""SFrame for code that has none: rows synthesized from DWARF call-frame
information (``.eh_frame``, else ``.debug_frame``).

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

The result is a real SFrame v3 section (the core's writer), cached on disk
per build id under ``$XDG_CACHE_HOME/sfbt/synth`` (``~/.cache/sfbt/synth``)
with a JSON sidecar holding its checksum and statistics; a missing, stale
or corrupt entry is rebuilt.
"""

import collections
import hashlib
import json
import os
import struct
from bisect import bisect_right

from . import cfi
from .elfimage import PT_NOTE, SHT_NOTE, FileImage, elf_header, program_headers
from .files import write_atomically
from .sframe import constants as C
from .sframe.model import FrameRowEntry, FunctionEntry, SFrameSection, minimal_word_size
from .sframe.reader import read_section
from .sframe.rules import Location
from .sframe.writer import write_section
from .sframe.errors import SFrameEncodeError, SFrameError
from .target import TargetMemoryError

#: Bumped whenever the synthesized bytes for the same input change, so old
#: cache entries are not used.
FORMAT = 1

_SIGNAL, _DEFAULT, _FLEX = "signal", "default", "flex"


class SynthError(Exception):
    """A file that cannot be synthesized from (not ELF, no CFI, unknown
    architecture)."""


class Inexpressible(Exception):
    """A DWARF row SFrame cannot say; the text is the reason."""


# -- per-ABI facts -----------------------------------------------------------------

class _Abi:
    def __init__(self, abi):
        self.abi = abi
        self.sp, self.fp, self.ra = C.ABI_REGISTERS[abi]
        self.fixed_ra = -8 if abi == C.ABI_AMD64_LE else 0
        self.s390x = abi == C.ABI_S390X_BE
        self.aarch64 = abi in (C.ABI_AARCH64_LE, C.ABI_AARCH64_BE)
        # SP = CFA + sp_from_cfa
        self.sp_from_cfa = C.S390X_SP_VAL_OFFSET if self.s390x else 0

    def encode_cfa_offset(self, offset):
        if not self.s390x:
            return offset
        value = offset + C.S390X_SP_VAL_OFFSET
        if value % C.S390X_CFA_ALIGNMENT:
            raise Inexpressible(f"s390x CFA offset {offset} is not a multiple of 8")
        return value // C.S390X_CFA_ALIGNMENT


_MACHINES = {
    (62, False): C.ABI_AMD64_LE,     # EM_X86_64
    (183, False): C.ABI_AARCH64_LE,  # EM_AARCH64
    (183, True): C.ABI_AARCH64_BE,
    (22, True): C.ABI_S390X_BE,      # EM_S390
}


# -- DWARF expressions SFrame can say ------------------------------------------------

def _breg(expr):
    """(register, offset, rest) of an expression starting with DW_OP_bregN
    or DW_OP_bregx, else None."""
    if not expr:
        return None
    op = expr[0]
    try:
        if 0x70 <= op <= 0x8F:
            offset, pos = cfi._sleb(expr, 1)
            return op - 0x70, offset, expr[pos:]
        if op == 0x92:
            register, pos = cfi._uleb(expr, 1)
            offset, pos = cfi._sleb(expr, pos)
            return register, offset, expr[pos:]
    except IndexError:
        return None
    return None


def _address_expr(expr):
    """Location of ``*(address)`` for DW_CFA_expression: the expression
    computes an address; SFrame can say register + offset, or CFA + offset
    (DW_OP_call_frame_cfa; DW_OP_plus_uconst or DW_OP_consts/plus)."""
    found = _breg(expr)
    if found is not None and not found[2]:
        return found[0], found[1]
    if expr[:1] == b"\x9c":  # DW_OP_call_frame_cfa
        rest = expr[1:]
        try:
            if not rest:
                return None, 0
            if rest[0] == 0x23:  # plus_uconst
                value, pos = cfi._uleb(rest, 1)
                if pos == len(rest):
                    return None, value
            if rest[0] == 0x11:  # consts
                value, pos = cfi._sleb(rest, 1)
                if rest[pos:] == b"\x22":  # plus
                    return None, value
        except IndexError:
            return None
    return None


def _plt_expr(expr):
    """x86-64 lazy PLT: DW_OP_breg7 A; DW_OP_breg16 0; DW_OP_litM; DW_OP_and;
    DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus, i.e.
    CFA = rsp + A + 8 * ((rip & M) >= K).  Returns (A, M, K) or None."""
    found = _breg(expr)
    if found is None or found[0] != 7:
        return None
    rest = found[2]
    if (len(rest) == 9 and rest[:2] == b"\x80\x00" and 0x30 <= rest[2] <= 0x4F
            and rest[3] == 0x1A and 0x30 <= rest[4] <= 0x4F
            and rest[5:] == b"\x2a\x33\x24\x22"):
        return found[1], rest[2] - 0x30, rest[4] - 0x30
    return None


# -- one DWARF row to SFrame rules -----------------------------------------------------

class _Plt:
    """Marker for a row whose CFA is the lazy-PLT expression."""

    def __init__(self, params):
        self.params = params

    def __eq__(self, other):
        return isinstance(other, _Plt) and other.params == self.params

    def __hash__(self):
        return hash(self.params)


_OUTERMOST = "outermost"


def _cfa_location(cfa):
    kind = cfa[0]
    if kind == "reg":
        return Location(cfa[1], cfa[2], False)
    if kind == "expr":
        found = _breg(cfa[1])
        if found is not None:
            register, offset, rest = found
            if not rest:
                return Location(register, offset, False)
            if rest == b"\x06":  # DW_OP_deref
                return Location(register, offset, True)
        plt = _plt_expr(cfa[1])
        if plt is not None:
            return _Plt(plt)
        raise Inexpressible("CFA is a DWARF expression")
    raise Inexpressible(f"CFA rule {kind}")


def _value_location(rule, what):
    """The caller's value of a register, as a Location relative to the
    (DWARF) CFA (register None) or to a register; None when unchanged."""
    kind = rule[0]
    if kind == "offset":
        return Location(None, rule[1], True)
    if kind == "register":
        return Location(rule[1], 0, False)
    if kind == "same":
        return None
    if kind == "val_offset":
        return Location(None, rule[1], False)
    if kind == "expr":
        found = _address_expr(rule[1])
        if found is None:
            raise Inexpressible(f"{what} saved at a DWARF expression")
        return Location(found[0], found[1], True)
    if kind == "val_expr":
        found = _breg(rule[1])
        if found is not None and not found[2]:
            return Location(found[0], found[1], False)
        raise Inexpressible(f"{what} value is a DWARF expression")
    if kind == "undefined":
        raise Inexpressible(f"{what} undefined")
    raise Inexpressible(f"{what} rule {kind}")


def _rebase(location, dwarf_cfa, what):
    """A CFA-relative Location made relative to the DWARF CFA's register,
    for when the SFrame CFA (the caller's SP) is not the DWARF CFA."""
    if location is None or location.register is not None:
        return location
    if dwarf_cfa.deref:
        raise Inexpressible(f"{what} relative to a dereferenced CFA that is not the caller's SP")
    return Location(dwarf_cfa.register, dwarf_cfa.offset + location.offset, location.deref)


def convert_state(state, abi):
    """SFrame rules (cfa, ra, fp, mangled) for one DWARF row state, or
    _OUTERMOST; a _Plt CFA for lazy-PLT rows.  Raises Inexpressible."""
    cfa_rule, sp_rule, fp_rule, ra_rule, mangled = state
    if ra_rule is not None and ra_rule[0] == "undefined":
        return _OUTERMOST
    dwarf_cfa = _cfa_location(cfa_rule)
    if isinstance(dwarf_cfa, _Plt):
        if sp_rule is not None or fp_rule is not None or ra_rule != ("offset", -8):
            raise Inexpressible("PLT CFA expression with other rules")
        return dwarf_cfa, Location(None, -8, True), None, False
    cfa = dwarf_cfa
    if sp_rule is not None and not abi.s390x:
        # On s390x the ABI defines the CFA as the caller's SP + 160, and
        # SFrame's CFA is the same; an SP rule (r15 saved with the other
        # GPRs, or kept in a floating-point register at -O0) says no more.
        caller_sp = _value_location(sp_rule, "SP")
        if caller_sp is None:
            caller_sp = Location(abi.sp, 0, False)
        if caller_sp != Location(None, -abi.sp_from_cfa, False):
            caller_sp = _rebase(caller_sp, dwarf_cfa, "SP")
            if caller_sp.deref:
                if abi.sp_from_cfa:
                    raise Inexpressible("SP restored from memory (s390x)")
                cfa = caller_sp
            else:
                cfa = Location(caller_sp.register,
                               caller_sp.offset - abi.sp_from_cfa, False)
    ra = None if ra_rule is None else _value_location(ra_rule, "RA")
    fp = None if fp_rule is None else _value_location(fp_rule, "FP")
    if cfa != dwarf_cfa:
        ra = _rebase(ra, dwarf_cfa, "RA")
        fp = _rebase(fp, dwarf_cfa, "FP")
    if ra is None and abi.fixed_ra:
        raise Inexpressible("RA not saved (no link register on this ABI)")
    return cfa, ra, fp, bool(mangled and abi.aarch64)


def default_words(rules, abi):
    """(base_reg, words) of a default-FDE row, or None if it needs a
    flexible FDE."""
    cfa, ra, fp, _ = rules
    if cfa.deref or cfa.register not in (abi.sp, abi.fp):
        return None
    base = C.BASE_REG_SP if cfa.register == abi.sp else C.BASE_REG_FP
    for location in (ra, fp):
        if location is not None and (location.register is not None
                                     or not location.deref or location.offset == 0):
            return None
    words = [abi.encode_cfa_offset(cfa.offset)]
    if abi.fixed_ra:
        if ra != Location(None, abi.fixed_ra, True):
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


def flex_words(rules, abi):
    cfa, ra, fp, _ = rules
    if cfa.register is None:
        raise Inexpressible("CFA relative to itself")
    words = [_control(cfa, "CFA"), abi.encode_cfa_offset(cfa.offset)]
    if fp is not None or (ra is not None and ra != Location(None, abi.fixed_ra, True)):
        if ra is None:
            words.append(0)  # padding: RA not saved
        else:
            words += [_control(ra, "RA"), ra.offset]
        if fp is not None:
            words += [_control(fp, "FP"), fp.offset]
    return C.BASE_REG_SP, words


# -- functions ---------------------------------------------------------------------------

class SynthStats:
    """What the synthesis made, for `sfbt sframe synth`, `info sframe` and the
    benchmark."""

    def __init__(self):
        self.sources = []
        self.dwarf_fdes = 0
        self.skipped_fdes = collections.Counter()  # reason -> count
        self.functions = collections.Counter()  # default/flex/signal
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
        stats.sources = list(data["sources"])
        stats.dwarf_fdes = data["dwarf_fdes"]
        stats.skipped_fdes.update(data["skipped_fdes"])
        stats.functions.update(data["functions"])
        stats.rows.update(data["rows"])
        stats.left_out.update(data["left_out"])
        return stats

    def summary(self):
        functions = self.functions
        total = sum(functions.values())
        rows = self.rows
        kept = rows[_DEFAULT] + rows[_FLEX] + rows[_SIGNAL]
        text = (f"{self.dwarf_fdes} DWARF FDEs from {', '.join(self.sources) or 'nothing'}"
                f" -> {total} SFrame FDEs ({functions[_DEFAULT]} default, "
                f"{functions[_FLEX]} flex, {functions[_SIGNAL]} signal"
                f"{', %d PLT' % functions['plt'] if functions['plt'] else ''}); "
                f"{kept} DWARF rows kept ({rows[_DEFAULT]} default, {rows[_FLEX]} flex, "
                f"{rows[_SIGNAL]} signal), {rows['left out']} left out")
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
        self._starts = [start for start, _, _ in left_out]

    def left_out_reason(self, pc):
        """Why there is no row at pc, when its row was left out; else None."""
        i = bisect_right(self._starts, pc) - 1
        if i >= 0 and pc < self.left_out[i][1]:
            return self.left_out[i][2]
        return None


def _plt_rows(start, size, params):
    """Rows of a PLT-style function (MASK) for the lazy-PLT CFA expression."""
    base, mask, threshold = params
    rep = mask + 1
    rows = []
    previous = None
    for offset in range(rep):
        value = base + (8 if ((start + offset) & mask) >= threshold else 0)
        if value != previous:
            rows.append(FrameRowEntry(offset, C.BASE_REG_SP, (value,)))
            previous = value
    return FunctionEntry(start, size, rows, pc_type=C.PC_TYPE_MASK, rep_size=rep)


_MAX_ROWS = 0xFFFF  # a v3 function's row count is 16 bits


def _functions(abi, start, end, rows, fde, flex):
    """FunctionEntries from [(address, _Row)] (first address == start): one,
    or consecutive pieces when there are more rows than a function holds."""
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
        pauth_key=C.PAUTH_KEY_B if (cie.bkey and abi.aarch64) else C.PAUTH_KEY_A)
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


class _Row:
    """One distinct DWARF state, classified: the SFrame rules, and the words
    of its default and flexible encodings (None where there is none)."""

    __slots__ = ("rules", "reason", "plt", "default", "flex")

    def __init__(self, rules=None, reason=None):
        self.rules = rules
        self.reason = reason
        self.plt = None
        self.default = None
        self.flex = None


def _classify(state, abi):
    try:
        rules = convert_state(state, abi)
    except Inexpressible as why:
        return _Row(reason=str(why))
    row = _Row(rules)
    if rules is _OUTERMOST:
        row.default = row.flex = (C.BASE_REG_SP, (), False)
        return row
    if isinstance(rules[0], _Plt):
        row.plt = rules[0].params
        return row
    mangled = rules[3]
    try:
        found = default_words(rules, abi)
    except Inexpressible:  # e.g. an s390x CFA offset not a multiple of 8
        found = None
    if found is not None:
        row.default = (found[0], tuple(found[1]), mangled)
    try:
        base, words = flex_words(rules, abi)
        row.flex = (base, tuple(words), mangled)
    except Inexpressible as why:
        if row.default is None:
            return _Row(reason=str(why))
    return row


def _convert_fde(fde, abi, stats, functions, left_out, memo):
    program = cfi.run_fde(fde, abi.sp, abi.fp, abi.ra)
    end = fde.end
    # [(address, rules or _Plt-rules, reason)] with rows past the end dropped
    converted = []
    for address, state in program.rows:
        if address >= end:
            break
        found = memo.get(state)
        if found is None:
            found = memo[state] = _classify(state, abi)
        converted.append((address, found))
    if program.error is not None and program.error_at < end:
        converted = [row for row in converted if row[0] < program.error_at]
        converted.append((max(program.error_at, fde.start), _Row(reason=program.error)))
    if not converted:
        return
    signal = fde.cie.signal
    # Split into runs: ordinary rows, PLT rows (one run per expression), left out.
    runs = []
    for address, row in converted:
        if row.reason is not None:
            kind = ("out", row.reason)
        elif row.plt is not None:
            kind = ("plt", row.plt)
        else:
            kind = ("rows",)
        if runs and runs[-1][0] == kind:
            runs[-1][1].append((address, row))
        else:
            runs.append((kind, [(address, row)]))
    for index, (kind, rows) in enumerate(runs):
        run_start = rows[0][0]
        run_end = runs[index + 1][1][0][0] if index + 1 < len(runs) else end
        if run_end <= run_start:
            continue
        if kind[0] == "out":
            stats.rows["left out"] += len(rows)
            stats.left_out[kind[1]] += len(rows)
            left_out.append((run_start, run_end, kind[1]))
            continue
        if kind[0] == "plt":
            functions.append(_plt_rows(run_start, run_end - run_start, kind[1]))
            stats.functions["plt"] += 1
            stats.rows[_DEFAULT] += len(rows)
            continue
        flex = any(row.default is None for _, row in rows)
        functions += _functions(abi, run_start, run_end, rows, fde, flex)
        kind_name = _SIGNAL if signal else (_FLEX if flex else _DEFAULT)
        stats.functions[kind_name] += 1
        stats.rows[kind_name] += len(rows)


def synthesize_cfi(abi, fde_lists, sources=(), relocatable=False):
    """SynthResult from parsed FDE lists, in priority order (.eh_frame
    first): an FDE overlapping one already taken is skipped, except in
    relocatable objects, whose text sections all start at 0."""
    abi_info = _Abi(abi)
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
        _convert_fde(fde, abi_info, stats, functions, left_out, memo)
    functions.sort(key=lambda f: f.start)
    section = SFrameSection(C.VERSION_3, abi, functions, flags=C.F_FDE_SORTED,
                            address=0)
    left_out.sort()
    return SynthResult(section, stats, left_out)


# -- ELF files -------------------------------------------------------------------------------

def _elf_abi(elffile):
    machine = elffile.header["e_machine"]
    numbers = {"EM_X86_64": 62, "EM_AARCH64": 183, "EM_S390": 22}
    machine = numbers.get(machine, machine)
    abi = _MACHINES.get((machine, not elffile.little_endian))
    if abi is None or elffile.elfclass != 64:
        raise SynthError(f"unsupported architecture {elffile.header['e_machine']} "
                         f"(ELF{elffile.elfclass}, "
                         f"{'little' if elffile.little_endian else 'big'}-endian)")
    return abi


def synthesize_elf(path):
    """SynthResult for the ELF file at path, from its .eh_frame and
    .debug_frame (relocated first in relocatable objects)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    from .sframe.elf import _relocated

    try:
        with open(path, "rb") as stream:
            elffile = ELFFile(stream)
            abi = _elf_abi(elffile)
            big_endian = not elffile.little_endian
            relocatable = elffile["e_type"] == "ET_REL"
            fde_lists, sources = [], []
            errors = 0
            for name, eh in ((".eh_frame", True), (".debug_frame", False)):
                section = elffile.get_section_by_name(name)
                if section is None or section["sh_type"] == "SHT_NOBITS":
                    continue
                data = section.data()
                if relocatable:
                    try:
                        data = _relocated(elffile, section, data)
                    except SFrameError as error:
                        raise SynthError(f"{name}: {error}") from None
                fdes, bad = cfi.parse_cfi(data, section["sh_addr"], eh_frame=eh,
                                          big_endian=big_endian)
                errors += bad
                if fdes:
                    fde_lists.append(fdes)
                    sources.append(name)
    except (ELFError, struct.error, ValueError) as error:
        raise SynthError(f"not a readable ELF file: {error}") from None
    if not fde_lists:
        raise SynthError("no call-frame information (.eh_frame or .debug_frame)")
    result = synthesize_cfi(abi, fde_lists, sources, relocatable)
    if errors:
        result.stats.skipped_fdes["unparsable entry"] += errors
    return result


# -- build ids and the cache -----------------------------------------------------------------

def read_build_id(path):
    """The GNU build id (hex) from the file's PT_NOTE segments or SHT_NOTE
    sections, read directly (cheaper than opening the file with pyelftools);
    None when it has none."""
    try:
        with open(path, "rb") as stream:
            image = FileImage(stream)
            elf = elf_header(image, 0)
            if elf is None:
                return None
            notes = [(s.offset, s.filesz) for s in program_headers(image, 0) or ()
                     if s.type == PT_NOTE]
            if not notes and elf.shnum:
                table = image.read_memory(elf.shoff, elf.shentsize * elf.shnum)
                for i in range(elf.shnum):
                    _, sh_type, _, _, sh_offset, sh_size = struct.unpack_from(
                        elf.endian + "IIQQQQ", table, i * elf.shentsize)
                    if sh_type == SHT_NOTE:
                        notes.append((sh_offset, sh_size))
            for offset, size in notes:
                stream.seek(offset)
                data = stream.read(min(size, 1 << 16))
                pos = 0
                while pos + 12 <= len(data):
                    namesz, descsz, kind = struct.unpack_from(elf.endian + "III", data, pos)
                    name_at = pos + 12
                    desc_at = name_at + ((namesz + 3) & ~3)
                    if (kind == 3 and data[name_at:name_at + namesz].rstrip(b"\0") == b"GNU"
                            and desc_at + descsz <= len(data)):
                        return data[desc_at:desc_at + descsz].hex()
                    pos = desc_at + ((descsz + 3) & ~3)
    except (OSError, struct.error, TargetMemoryError):
        return None
    return None


def cache_directory():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sfbt", "synth")


def cache_key(path, build_id=None):
    if build_id is None:
        build_id = read_build_id(path)
    if build_id:
        return f"{build_id}.f{FORMAT}"
    stat = os.stat(path)
    digest = hashlib.sha256(
        f"{os.path.realpath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()
    return f"file-{digest[:40]}.f{FORMAT}"


def _load_cached(directory, key):
    """The cached SynthResult, or None when missing, stale or corrupt."""
    try:
        with open(os.path.join(directory, key + ".json"), "rb") as stream:
            meta = json.loads(stream.read())
        with open(os.path.join(directory, key + ".sframe"), "rb") as stream:
            data = stream.read()
        if meta.get("format") != FORMAT or hashlib.sha256(data).hexdigest() != meta["sha256"]:
            return None
        section = read_section(data, 0)
        if section.version != C.VERSION_3 or len(section.functions) != meta["functions"]:
            return None
        left_out = [tuple(item) for item in meta["left_out"]]
        return SynthResult(section, SynthStats.from_json(meta["stats"]), left_out,
                           origin="cache")
    except (OSError, ValueError, KeyError, TypeError, SFrameError, struct.error):
        return None


def _store(directory, key, result, data):
    meta = {"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(),
            "functions": len(result.section.functions),
            "stats": result.stats.to_json(),
            "left_out": [list(item) for item in result.left_out]}
    os.makedirs(directory, exist_ok=True)
    # The section first: a sidecar never names bytes that are not there.
    write_atomically(os.path.join(directory, key + ".sframe"), data)
    write_atomically(os.path.join(directory, key + ".json"),
                      json.dumps(meta, sort_keys=True).encode())


_MEMORY = {}  # cache key -> SynthResult, for this process


def synthesize(path, build_id=None, use_cache=True, directory=None):
    """The SynthResult for an ELF file: from this process's memory, else the
    on-disk cache, else built (and stored in the cache).  Raises SynthError."""
    try:
        key = cache_key(path, build_id)
    except OSError as error:
        raise SynthError(f"{error.strerror or error}") from None
    if use_cache and key in _MEMORY:
        return _MEMORY[key]
    directory = directory or cache_directory()
    result = _load_cached(directory, key) if use_cache else None
    if result is None:
        result = synthesize_elf(path)
        try:
            data = write_section(result.section)
        except SFrameEncodeError as error:
            raise SynthError(f"cannot write the synthesized section: {error}") from None
        # What later runs read back from the cache: the same bytes.
        result.section = read_section(data, 0)
        if use_cache:
            try:
                _store(directory, key, result, data)
            except OSError:
                pass  # an unwritable cache only costs time
    if use_cache:
        _MEMORY[key] = result
    return result


__all__ = ["Inexpressible", "SynthError", "SynthResult", "SynthStats", "cache_directory",
           "convert_state", "read_build_id", "synthesize", "synthesize_cfi",
           "synthesize_elf"]
