"""Byte layout of SFrame sections: struct formats per version and byte order.

Nothing here builds model objects; reader.py and writer.py map between these
records and the model.
"""

import struct
from functools import lru_cache

from . import constants as C

# magic u16, version u8, flags u8, abi u8, fixed FP i8, fixed RA i8,
# aux header length u8, num_fdes u32, num_fres u32, fre_len u32,
# fdeoff u32, freoff u32
_HEADER = "HBBBbbBIIIII"
# Offsets of header fields, for error messages.
HEADER_FIELD_OFFSETS = {
    "sfh_magic": 0,
    "sfh_version": 2,
    "sfh_flags": 3,
    "sfh_abi_arch": 4,
    "sfh_auxhdr_len": 7,
    "sfh_num_fdes": 8,
    "sfh_num_fres": 12,
    "sfh_fre_len": 16,
    "sfh_fdeoff": 20,
    "sfh_freoff": 24,
}

# v1: start i32, size u32, fre_off u32, num_fres u32, info u8
# v2: v1 + rep_size u8, padding u16
# v3 index: start i64, size u32, fre_off u32 (num_fres and info live in
#   the 5-byte attribute record in front of the function's FREs)
_FDE = {C.VERSION_1: "iIIIB", C.VERSION_2: "iIIIBBH", C.VERSION_3: "qII"}
# The start field alone, then the rest of the FDE skipped.
_FDE_START = {C.VERSION_1: "i13x", C.VERSION_2: "i16x", C.VERSION_3: "q8x"}
# v3 attribute: num_fres u16, info u8, info2 u8, rep_size u8
_FDE_ATTR_V3 = "HBBB"
FDE_ATTR_V3_SIZE = 5

_WORD_FORMATS = {1: "b", 2: "h", 4: "i"}
_UWORD_FORMATS = {1: "B", 2: "H", 4: "I"}
_ADDRESS_FORMATS = {1: "B", 2: "H", 4: "I"}


def _prefix(big_endian):
    return ">" if big_endian else "<"


@lru_cache(maxsize=None)
def header_struct(big_endian):
    return struct.Struct(_prefix(big_endian) + _HEADER)


@lru_cache(maxsize=None)
def fde_struct(version, big_endian):
    return struct.Struct(_prefix(big_endian) + _FDE[version])


@lru_cache(maxsize=None)
def fde_start_struct(version, big_endian):
    """Reads one FDE's start field (and steps over the rest of the FDE)."""
    return struct.Struct(_prefix(big_endian) + _FDE_START[version])


@lru_cache(maxsize=None)
def fde_attr_struct(big_endian):
    return struct.Struct(_prefix(big_endian) + _FDE_ATTR_V3)


@lru_cache(maxsize=None)
def fre_address_struct(size, big_endian):
    return struct.Struct(_prefix(big_endian) + _ADDRESS_FORMATS[size])


@lru_cache(maxsize=None)
def fre_words_struct(word_size, count, big_endian):
    return struct.Struct(_prefix(big_endian) + _WORD_FORMATS[word_size] * count)


# FDE info byte (all versions): bits 0-3 FRE type, bit 4 PC type,
# bit 5 AArch64 PAuth key, bit 7 signal frame (v3).
def pack_fde_info(fre_type, pc_type, pauth_key, signal):
    return fre_type | (pc_type << 4) | (pauth_key << 5) | (int(signal) << 7)


def unpack_fde_info(info):
    return info & 0xF, (info >> 4) & 1, (info >> 5) & 1, bool(info >> 7)


# FRE info byte: bit 0 CFA base (1 = SP), bits 1-4 word count,
# bits 5-6 word size code, bit 7 mangled RA.
def pack_fre_info(base_reg, word_count, word_size, mangled_ra):
    size_code = C.WORD_SIZES.index(word_size)
    return base_reg | (word_count << 1) | (size_code << 5) | (int(mangled_ra) << 7)


def unpack_fre_info(info):
    return info & 1, (info >> 1) & 0xF, (info >> 5) & 3, bool(info >> 7)


@lru_cache(maxsize=None)
def fre_info_table(big_endian):
    """For each FRE info byte: (base register, word count, word size,
    mangled RA, struct reading the words), or None where the byte is
    invalid (size code 3, more than MAX_WORDS words)."""
    table = []
    for info in range(256):
        base_reg, count, size_code, mangled = unpack_fre_info(info)
        if size_code >= len(C.WORD_SIZES) or count > C.MAX_WORDS:
            table.append(None)
            continue
        size = C.WORD_SIZES[size_code]
        table.append((base_reg, count, size, mangled,
                      fre_words_struct(size, count, big_endian)))
    return tuple(table)


def fde_size(version):
    return struct.calcsize("<" + _FDE[version])


def fits_signed(value, size):
    bits = 8 * size
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def fits_word(value, size):
    """A data word may hold a signed offset or unsigned flex control data."""
    bits = 8 * size
    return -(1 << (bits - 1)) <= value < (1 << bits)


def to_signed(value, size):
    bits = 8 * size
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value
