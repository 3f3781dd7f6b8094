"""Model -> SFrame bytes, for v1, v2 and v3 in either byte order.

The layout is the one binutils writes: header, auxiliary header, FDE table,
then the FRE sub-section with each function's rows (v3: behind its
attribute record) in the section's ``fre_order``.
"""

from . import constants as C
from . import layout as L
from .errors import SFrameEncodeError


def write_section(section):
    if section.is_empty:
        return b""
    version, big_endian = section.version, section.big_endian
    if version not in C.VERSIONS:
        raise SFrameEncodeError(f"cannot write SFrame version {version}")
    if section.flags & ~C.VALID_FLAGS[version]:
        raise SFrameEncodeError(f"flags {section.flags:#x} are not valid in "
                                f"SFrame version {version}")
    if len(section.aux_header) > 0xFF:
        raise SFrameEncodeError("auxiliary header longer than 255 bytes")

    functions = section.functions
    order = section.fre_order or range(len(functions))
    if sorted(order) != list(range(len(functions))):
        raise SFrameEncodeError("fre_order is not a permutation of the functions")
    blocks = []  # in FRE sub-section order
    block_offsets = [0] * len(functions)
    fre_len = 0
    for index in order:
        block = _function_rows(section, functions[index], index)
        blocks.append(block)
        block_offsets[index] = fre_len
        fre_len += len(block)

    body = C.HEADER_SIZE + len(section.aux_header)
    fde_size = L.fde_size(version)
    fde_struct = L.fde_struct(version, big_endian)
    pcrel = bool(section.flags & C.F_FDE_FUNC_START_PCREL)
    start_size = 8 if version == C.VERSION_3 else 4
    fdes = []
    for index, function in enumerate(functions):
        field_address = section.address + body + index * fde_size
        base = field_address if pcrel else section.address
        value = L.to_signed(function.start - base, 8)
        if not L.fits_signed(value, start_size):
            raise SFrameEncodeError(
                f"function {index} start {function.start:#x} is too far from "
                f"{base:#x} for a {start_size}-byte start field")
        _check_unsigned(function.size, 4, f"function {index} size")
        if version == C.VERSION_3:
            fdes.append(fde_struct.pack(value, function.size, block_offsets[index]))
            continue
        info = L.pack_fde_info(function.fre_type, function.pc_type,
                               function.pauth_key, function.signal)
        if function.fde_type != C.FDE_TYPE_DEFAULT:
            raise SFrameEncodeError(f"function {index}: flexible FDEs need "
                                    "SFrame version 3")
        fields = [value, function.size, block_offsets[index],
                  len(function.rows), info]
        if version == C.VERSION_2:
            _check_unsigned(function.rep_size, 1, f"function {index} rep_size")
            fields += [function.rep_size, 0]
        fdes.append(fde_struct.pack(*fields))

    num_fres = sum(len(f.rows) for f in functions)
    header = L.header_struct(big_endian).pack(
        C.MAGIC, version, section.flags, section.abi,
        section.cfa_fixed_fp_offset, section.cfa_fixed_ra_offset,
        len(section.aux_header), len(functions), num_fres, fre_len,
        0, len(functions) * fde_size)
    return b"".join([header, section.aux_header, *fdes, *blocks,
                     section.padding])


def _check_unsigned(value, size, what):
    if not 0 <= value < (1 << (8 * size)):
        raise SFrameEncodeError(f"{what} {value} does not fit in {size} bytes")


def _function_rows(section, function, index):
    big_endian = section.big_endian
    if function.fre_type >= len(C.FRE_ADDRESS_SIZES):
        raise SFrameEncodeError(f"function {index}: invalid FRE type "
                                f"{function.fre_type}")
    address_size = C.FRE_ADDRESS_SIZES[function.fre_type]
    address_struct = L.fre_address_struct(address_size, big_endian)
    parts = []
    if section.version == C.VERSION_3:
        if len(function.rows) > 0xFFFF:
            raise SFrameEncodeError(f"function {index}: more than 65535 rows")
        info = L.pack_fde_info(function.fre_type, function.pc_type,
                               function.pauth_key, function.signal)
        _check_unsigned(function.rep_size, 1, f"function {index} rep_size")
        parts.append(L.fde_attr_struct(big_endian).pack(
            len(function.rows), info, function.fde_type, function.rep_size))
    for number, row in enumerate(function.rows):
        where = f"function {index} row {number}"
        _check_unsigned(row.start_offset, address_size, f"{where} start offset")
        if len(row.words) > C.MAX_WORDS:
            raise SFrameEncodeError(f"{where}: more than {C.MAX_WORDS} data words")
        if row.word_size not in C.WORD_SIZES:
            raise SFrameEncodeError(f"{where}: invalid word size {row.word_size}")
        if not all(L.fits_word(w, row.word_size) for w in row.words):
            raise SFrameEncodeError(f"{where}: data word does not fit in "
                                    f"{row.word_size} bytes")
        words = [L.to_signed(w, row.word_size) for w in row.words]
        parts.append(address_struct.pack(row.start_offset))
        parts.append(bytes([L.pack_fre_info(row.base_reg, len(words),
                                            row.word_size, row.mangled_ra)]))
        parts.append(L.fre_words_struct(row.word_size, len(words),
                                        big_endian).pack(*words))
    return b"".join(parts)
