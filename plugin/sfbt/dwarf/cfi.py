"""Parsing ``.eh_frame`` and ``.debug_frame``: their CIEs and FDEs.

A direct parser rather than pyelftools': it keeps each FDE's CFA program
as bytes for sfbt.dwarf.cfa to run, and builds a big library's table in a
fraction of the time (libc: ~0.1 s; Debian 12's pyelftools 0.29, which is
what gdb's Python imports, needs ~10 s to decode the same).
"""

import struct

from .encoding import (CFIError, FieldReader, read_encoded_pointer, read_sleb128,
                       read_uleb128)
from . import opcodes as op


class CIE:
    """A Common Information Entry: what its FDEs share."""

    __slots__ = ("offset", "version", "augmentation", "code_align", "data_align",
                 "ra_column", "fde_encoding", "lsda_encoding", "signal", "bkey",
                 "address_size", "has_z", "program", "reader", "section_address",
                 "initial_state")

    def __init__(self, offset):
        self.offset = offset
        self.fde_encoding = op.DW_EH_PE_absptr
        self.lsda_encoding = op.DW_EH_PE_omit
        self.signal = False
        self.bkey = False
        self.has_z = False
        #: (registers tracked, state) after the initial instructions, cached
        #: by sfbt.dwarf.cfa
        self.initial_state = None


class FDE:
    """A Frame Description Entry: one function's address range and CFA
    program, ``(data, begin, end)``."""

    __slots__ = ("offset", "cie", "start", "size", "program", "source")

    def __init__(self, offset, cie, start, size, program, source):
        self.offset = offset
        self.cie = cie
        self.start = start
        self.size = size
        self.program = program
        self.source = source  # ".eh_frame" or ".debug_frame"

    @property
    def end(self):
        return self.start + self.size

    def __repr__(self):
        return (f"FDE({self.source}+{self.offset:#x}, {self.start:#x}..{self.end:#x}, "
                f"cie={self.cie.augmentation!r})")


def parse_cfi(data, address=0, *, eh_frame=True, big_endian=False, address_size=8):
    """The FDEs of one .eh_frame (``eh_frame=True``) or .debug_frame
    section, in section order, and the number of entries that could not be
    parsed.  ``address`` is the section's address (pcrel pointers)."""
    data = bytes(data)
    reader = FieldReader(big_endian)
    source = ".eh_frame" if eh_frame else ".debug_frame"
    cies = {}
    fdes = []
    errors = 0
    pos, size = 0, len(data)
    while pos + 4 <= size:
        entry = pos
        (length,) = reader.u32(data, pos)
        pos += 4
        offset_size = 4
        if length == 0xFFFFFFFF:
            if pos + 8 > size:
                break
            (length,) = reader.u64(data, pos)
            pos += 8
            offset_size = 8
        if length == 0:
            if eh_frame:
                break  # the terminator
            continue
        end = pos + length
        if end > size:
            errors += 1
            break
        id_at = pos
        (cie_id,) = (reader.u32 if offset_size == 4 else reader.u64)(data, pos)
        pos += offset_size
        is_cie = (cie_id == 0) if eh_frame else (cie_id == (1 << (8 * offset_size)) - 1)
        try:
            if is_cie:
                cies[entry] = _parse_cie(data, entry, pos, end, reader, address_size,
                                         address)
            else:
                cie_at = (id_at - cie_id) if eh_frame else cie_id
                cie = cies.get(cie_at)
                if cie is None and cie_at not in cies and 0 <= cie_at < size:
                    cie = cies[cie_at] = _parse_cie_at(data, cie_at, reader,
                                                       address_size, address)
                if cie is None:
                    raise CFIError(f"FDE names no CIE at {cie_at:#x}", entry)
                fdes.append(_parse_fde(data, entry, pos, end, cie, reader, address,
                                       source))
        except (CFIError, IndexError, ValueError, struct.error):
            errors += 1
        pos = end
    return fdes, errors


def fde_at(data, entry, address, cies, *, big_endian=False, address_size=8):
    """The .eh_frame FDE at offset ``entry`` (as .eh_frame_hdr's table
    names it); ``cies`` caches the CIEs parsed so far, by offset.  Raises
    CFIError when there is no FDE there."""
    reader = FieldReader(big_endian)
    try:
        (length,) = reader.u32(data, entry)
        if length in (0, 0xFFFFFFFF):
            raise CFIError("no 32-bit FDE here", entry)
        pos, end = entry + 8, entry + 4 + length
        (cie_id,) = reader.u32(data, entry + 4)
        cie_at = entry + 4 - cie_id
        if cie_id == 0 or end > len(data) or not 0 <= cie_at < len(data):
            raise CFIError("no FDE here", entry)
        cie = cies.get(cie_at)
        if cie is None:
            cie = cies[cie_at] = _parse_cie_at(data, cie_at, reader, address_size,
                                               address)
        return _parse_fde(data, entry, pos, end, cie, reader, address, ".eh_frame")
    except (IndexError, ValueError, struct.error):
        raise CFIError("FDE runs past the end of .eh_frame", entry) from None


def _parse_cie_at(data, at, reader, address_size, address):
    (length,) = reader.u32(data, at)
    pos = at + 4
    offset_size = 4
    if length == 0xFFFFFFFF:
        (length,) = reader.u64(data, pos)
        pos += 8
        offset_size = 8
    end = pos + length
    pos += offset_size
    return _parse_cie(data, at, pos, end, reader, address_size, address)


def _parse_cie(data, entry, pos, end, reader, address_size, address):
    cie = CIE(entry)
    cie.reader = reader
    cie.section_address = address
    cie.version = data[pos]
    pos += 1
    nul = data.index(b"\0", pos, end)
    augmentation = data[pos:nul].decode("ascii", "replace")
    cie.augmentation = augmentation
    pos = nul + 1
    cie.address_size = address_size
    if "eh" in augmentation:
        pos += address_size
    if cie.version >= 4:
        cie.address_size = data[pos]
        pos += 2  # address size, segment selector size
    cie.code_align, pos = read_uleb128(data, pos)
    cie.data_align, pos = read_sleb128(data, pos)
    if cie.version == 1:
        cie.ra_column = data[pos]
        pos += 1
    else:
        cie.ra_column, pos = read_uleb128(data, pos)
    if augmentation.startswith("z"):
        cie.has_z = True
        length, pos = read_uleb128(data, pos)
        aug_end = pos + length
        for char in augmentation[1:]:
            if char == "R":
                cie.fde_encoding = data[pos]
                pos += 1
            elif char == "L":
                cie.lsda_encoding = data[pos]
                pos += 1
            elif char == "P":
                encoding = data[pos]
                pos += 1
                _, pos = read_encoded_pointer(reader, data, pos,
                                              encoding & op.DW_EH_PE_FORMAT_MASK, 0,
                                              cie.address_size)
            elif char == "S":
                cie.signal = True
            elif char == "B":
                cie.bkey = True
            elif char == "G":
                pass  # AArch64 MTE tagged frames
            else:
                break  # unknown: the rest of the augmentation data is skipped
        pos = aug_end
    else:
        # Augmentations without "z" carry no data we need ("", "eh").
        cie.signal = "S" in augmentation
    cie.program = (data, pos, end)
    return cie


def _parse_fde(data, entry, pos, end, cie, reader, address, source):
    encoding = cie.fde_encoding
    start, pos = read_encoded_pointer(reader, data, pos, encoding, address,
                                      cie.address_size)
    size, pos = read_encoded_pointer(reader, data, pos, encoding, address,
                                     cie.address_size, range_only=True)
    if cie.has_z:
        length, pos = read_uleb128(data, pos)
        pos += length
    if pos > end:
        raise CFIError("FDE runs past its end", entry)
    return FDE(entry, cie, start, size, (data, pos, end), source)
