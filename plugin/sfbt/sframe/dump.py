"""Text dumps in the format of ``objdump --sframe``.

v2 and v3 sections are printed as objdump 2.46+ prints them; v1 sections as
objdump 2.40 does (2.46 refuses v1).  The columns of one row are also what
``sfbt sframe lookup`` prints.
"""

from . import constants as C
from .lookup import find_entry, libsframe_2_40_entry
from .layout import to_signed

_MASK64 = 0xFFFFFFFFFFFFFFFF
_MISSING = -1  # what libsframe returns for an absent data word


def dump_text(section):
    """objdump's text from ``Contents of the SFrame section ...:`` on."""
    if section.is_empty:
        return ""
    out = [f"Contents of the SFrame section {section.name}:"]
    if section.version == C.VERSION_1:
        _dump_header_v1(section, out)
    else:
        _dump_header(section, out)
    out.append("\n  Function Index :\n")
    for index, function in enumerate(section.functions):
        _dump_function(section, index, function, out)
        out.append("\n")
    return "".join(out)


def _dump_header_v1(section, out):
    flags = section.flags
    if not flags:
        flags_text = "NONE"
    elif flags & C.F_FRAME_POINTER:
        # objdump 2.40 overwrites the first name with the second.
        flags_text = "SFRAME_F_FRAME_POINTER"
    else:
        flags_text = "SFRAME_F_FDE_SORTED"
    out.append("\n  Header :\n\n    Version: SFRAME_VERSION_1\n"
               f"    Flags: {flags_text}\n"
               f"    Num FDEs: {len(section.functions)}\n"
               f"    Num FREs: {section.num_rows}\n")


_FLAG_NAMES = [
    (C.F_FDE_SORTED, "SFRAME_F_FDE_SORTED"),
    (C.F_FRAME_POINTER, "SFRAME_F_FRAME_POINTER"),
    (C.F_FDE_FUNC_START_PCREL, "SFRAME_F_FDE_FUNC_START_PCREL"),
]


def _dump_header(section, out):
    out.append(f"\n  Header :\n\n    Version: SFRAME_VERSION_{section.version}\n")
    flags = section.flags
    prefix = "Flags: "
    if not flags:
        out.append(f"{prefix:>11}NONE\n")
    for bit, name in _FLAG_NAMES:
        if bit == C.F_FRAME_POINTER and section.version != C.VERSION_2:
            continue
        if flags & bit:
            flags &= ~bit
            out.append(f"{prefix:>11}{name}{',' if flags else ''}\n")
            prefix = " "
    if flags:
        out.append(f"{prefix:>11}{flags}\n")
    if section.cfa_fixed_fp_offset:
        out.append(f"    CFA fixed FP offset: {section.cfa_fixed_fp_offset}\n")
    if section.cfa_fixed_ra_offset:
        out.append(f"    CFA fixed RA offset: {section.cfa_fixed_ra_offset}\n")
    out.append(f"    Num FDEs: {len(section.functions)}\n"
               f"    Num FREs: {section.num_rows}\n")


def _dump_function(section, index, function, out):
    start = function.start & _MASK64
    out.append(f"\n    func idx [{index}]: pc = {start:#x}, "
               f"size = {to_signed(function.size, 4)} bytes")
    if section.version != C.VERSION_1:
        attrs = ("S" if function.signal else "") + ("F" if function.is_flex else "")
        if attrs:
            out.append(f', attr = "{attrs}"')
    if (section.abi in (C.ABI_AARCH64_BE, C.ABI_AARCH64_LE)
            and function.pauth_key == C.PAUTH_KEY_B):
        out.append(", pauth = B key")
    marker = "[m]" if function.is_mask else "   "
    out.append(f"\n    {'STARTPC':<7}{marker:<8} {'CFA':<10}{'FP':<10}{'RA':<13}")
    for entry in function.rows:
        address = entry.start_offset
        if not function.is_mask:
            address = (function.start + address) & _MASK64
        out.append(f"\n    {address:016x}")
        columns = row_columns(section, function, entry)
        if columns is None:
            out.append("  RA undefined")
        else:
            cfa, fp, ra = columns
            out.append(f"  {cfa:<10}{fp:<10}{ra:<13}")


def row_columns(section, function, entry):
    """objdump's (CFA, FP, RA) column texts for one row, or None when the
    row says the return address is undefined."""
    if section.version == C.VERSION_1:
        return _columns_v1(section, entry)
    if entry.ra_undefined:
        return None
    if function.is_flex:
        return _columns_flex(section, entry)
    return _columns_default(section, entry)


def _word(entry, index):
    return entry.words[index] if index < len(entry.words) else None


def _mangled_suffix(entry):
    return "[s]" if entry.mangled_ra else "   "


def _columns_v1(section, entry):
    base = "sp" if entry.base_reg == C.BASE_REG_SP else "fp"
    cfa = _word(entry, 0)
    cfa_text = f"{base}+{_MISSING if cfa is None else cfa}"
    fp_text = ra_text = "u"
    if not section.cfa_fixed_fp_offset:
        fp = _word(entry, 1 if section.cfa_fixed_ra_offset else 2)
        if fp is not None:
            fp_text = f"c{fp:+d}"
    if not section.cfa_fixed_ra_offset:
        ra = _word(entry, 1)
        if ra is not None:
            ra_text = f"c{ra:+d}"
    return cfa_text, fp_text, ra_text + _mangled_suffix(entry)


def _stack_or_register(section, value):
    if (section.abi == C.ABI_S390X_BE and section.version == C.VERSION_2
            and value & 1):
        return f"r{value >> 1}"
    return f"c{value:+d}"


def _columns_default(section, entry):
    base = "sp" if entry.base_reg == C.BASE_REG_SP else "fp"
    cfa = section.arch.decode_sframe_cfa_offset(entry.words[0])
    cfa_text = f"{base}+{cfa}"

    fixed_fp, fixed_ra = section.cfa_fixed_fp_offset, section.cfa_fixed_ra_offset
    fp = fixed_fp or _word(entry, 1 if fixed_ra else 2)
    fp_text = "u" if fp is None else _stack_or_register(section, fp)

    if fixed_ra:
        ra_text = "f"
    else:
        ra = _word(entry, 1)
        if ra is None:
            ra_text = "u"
        elif ra == 0:
            ra_text = "U"
        else:
            ra_text = _stack_or_register(section, ra)
    return cfa_text, fp_text, ra_text + _mangled_suffix(entry)


def _register_name(section, register):
    arch = section.arch
    if register == arch.sp:
        return "sp"
    if register == arch.fp:
        return "fp"
    return f"r{register}"


def _displacement(section, control, offset):
    """libsframe's "reg+offset" / "(reg+offset)"; reg "c" is the CFA."""
    reg_p = control & 1
    name = _register_name(section, control >> 3) if reg_p else "c"
    text = f"{name}{offset:+d}"
    return f"({text})" if reg_p and control & 2 else text


def _columns_flex(section, entry):
    mask = (1 << (8 * entry.word_size)) - 1

    def control(index):
        word = _word(entry, index)
        return None if word is None else word & mask

    fixed_fp, fixed_ra = section.cfa_fixed_fp_offset, section.cfa_fixed_ra_offset
    cfa_control, cfa_offset = control(0), _word(entry, 1)
    if cfa_control is None or cfa_offset is None:
        return "u", "u", "u" + _mangled_suffix(entry)
    cfa_offset = section.arch.decode_sframe_cfa_offset(cfa_offset)
    cfa_text = _displacement(section, cfa_control, cfa_offset)

    ra_control = control(2)
    ra_offset = _word(entry, 3)
    if ra_offset is None:
        ra_offset = fixed_ra or _MISSING
    fp_index = 3 if ra_control == 0 else 4
    fp_control, fp_offset = control(fp_index), _word(entry, fp_index + 1)
    if fp_offset is None and fixed_fp:
        fp_offset = fixed_fp
    if fp_control is None or fp_offset is None:
        fp_text = "u"
    else:
        fp_text = _displacement(section, fp_control, fp_offset)

    if ra_control is None:
        ra_text = "f" if fixed_ra else "u"
    elif ra_control == 0:
        ra_text = "U"
    else:
        ra_text = _displacement(section, ra_control, ra_offset)
    return cfa_text, fp_text, ra_text + _mangled_suffix(entry)


def lookup_text(section, pc):
    """One line of ``sfbt sframe lookup``: the row's columns single-spaced,
    ``RA undefined``, or ``none``."""
    function = section.find_function(pc)
    entry = find_entry(section, function, pc) if function else None
    return _entry_text(section, function, entry)


def _entry_text(section, function, entry):
    if entry is None:
        return "none"
    columns = row_columns(section, function, entry)
    if columns is None:
        return "RA undefined"
    return " ".join(c.strip() for c in columns)


def libsframe_2_40_text(section, pc):
    """What binutils 2.40's libsframe answers at ``pc`` (in lookup_text's
    words) where that differs from the row in force, else None: only v1
    PC-mask (PLT) FDEs, past the first PLT entry or so, are read wrong."""
    if section.version != C.VERSION_1:
        return None
    function = section.find_function(pc)
    if function is None or not function.is_mask:
        return None
    theirs = libsframe_2_40_entry(section, function, pc)
    if theirs is find_entry(section, function, pc):
        return None
    return _entry_text(section, function, theirs)
