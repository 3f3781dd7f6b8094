"""A compilation unit's debugging information entries read straight from
its bytes, for what inline chains need (sfbt.dwarf.inline).

pyelftools builds an object per entry and per attribute; a large unit of
the C library's takes it a tenth of a second.  Here a unit's abbreviation
table is parsed once, an entry is read by its abbreviation's forms (an
entry of fixed size skipped in one step), a subtree nobody asked for is
skipped through DW_AT_sibling, and only the attributes asked for are
decoded.  DWARF 2 to 5: strings through DW_FORM_strp, line_strp and strx
(DW_AT_str_offsets_base), addresses through addrx (DW_AT_addr_base), range
lists in .debug_ranges or .debug_rnglists, also through rnglistx
(DW_AT_rnglists_base)."""

from __future__ import annotations

import struct
from array import array

from .encoding import read_sleb128, read_uleb128

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, TypeVar, Union

    T = TypeVar("T")
    #: a section's bytes: a bytearray while it is inflated as read
    Data = Union[bytes, bytearray]
else:
    from ..values import NamedTuple

DW_AT_SIBLING = 0x01
DW_AT_NAME = 0x03
DW_AT_LANGUAGE = 0x13
DW_AT_LOW_PC = 0x11
DW_AT_HIGH_PC = 0x12
DW_AT_ABSTRACT_ORIGIN = 0x31
DW_AT_SPECIFICATION = 0x47
DW_AT_RANGES = 0x55
DW_AT_CALL_FILE = 0x58
DW_AT_CALL_LINE = 0x59
DW_AT_LINKAGE_NAME = 0x6E
DW_AT_STR_OFFSETS_BASE = 0x72
DW_AT_ADDR_BASE = 0x73
DW_AT_RNGLISTS_BASE = 0x74
DW_AT_MIPS_LINKAGE_NAME = 0x2007

DW_FORM_ADDR = 0x01
DW_FORM_STRING = 0x08
DW_FORM_SDATA = 0x0D
DW_FORM_STRP = 0x0E
DW_FORM_REF_ADDR = 0x10
DW_FORM_INDIRECT = 0x16
DW_FORM_SEC_OFFSET = 0x17
DW_FORM_FLAG_PRESENT = 0x19
DW_FORM_STRX = 0x1A
DW_FORM_ADDRX = 0x1B
DW_FORM_IMPLICIT_CONST = 0x21
DW_FORM_RNGLISTX = 0x23
DW_FORM_LINE_STRP = 0x1F
DW_FORM_GNU_ADDR_INDEX = 0x1F01
DW_FORM_GNU_STR_INDEX = 0x1F02

#: forms whose size does not depend on the unit: size in bytes
FIXED_SIZES = {0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1,
               0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8, 0x19: 0, 0x1C: 4, 0x1E: 16, 0x20: 8,
               0x21: 0, 0x24: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1, 0x2A: 2,
               0x2B: 3, 0x2C: 4}
#: forms of an offset into another section, as wide as the unit's offsets
OFFSET_FORMS = {DW_FORM_STRP, DW_FORM_SEC_OFFSET, DW_FORM_LINE_STRP, 0x1D, 0x1F20, 0x1F21}
#: forms of one LEB128 number
LEB_FORMS = {0x0D, 0x0F, 0x15, DW_FORM_STRX, DW_FORM_ADDRX, 0x22, DW_FORM_RNGLISTX,
             DW_FORM_GNU_ADDR_INDEX, DW_FORM_GNU_STR_INDEX}
#: forms of a block: the size of the length before the bytes (0: LEB128)
BLOCK_FORMS = {0x0A: 1, 0x03: 2, 0x04: 4, 0x09: 0, 0x18: 0}
#: forms of a reference inside the unit
UNIT_REFERENCES = {0x11, 0x12, 0x13, 0x14, 0x15}
#: forms of an index into .debug_addr
ADDRESS_INDICES = {DW_FORM_ADDRX, 0x29, 0x2A, 0x2B, 0x2C, DW_FORM_GNU_ADDR_INDEX}
#: forms of an address: in place or in .debug_addr
ADDRESS_FORMS = ADDRESS_INDICES | {DW_FORM_ADDR}
#: forms of an index into .debug_str_offsets
STRING_INDICES = {DW_FORM_STRX, 0x25, 0x26, 0x27, 0x28, DW_FORM_GNU_STR_INDEX}


#: the attributes of a unit's top entry read with its header: what the
#: unit's other entries need (bases) and what it covers (sfbt.dwarf.units)
TOP_ATTRIBUTES = frozenset((DW_AT_LOW_PC, DW_AT_HIGH_PC, DW_AT_RANGES, DW_AT_STR_OFFSETS_BASE,
                            DW_AT_ADDR_BASE, DW_AT_RNGLISTS_BASE, DW_AT_LANGUAGE))


class DwarfFormatError(ValueError):
    """The DWARF cannot be read as it says it is laid out."""


class Abbreviation(NamedTuple):
    """One entry of an abbreviation table: the tag, whether its entries
    have children, their attributes as (attribute, form, implicit
    value), and their size when every form has a fixed one."""

    tag: int
    children: bool
    attributes: Tuple[Tuple[int, int, int], ...]
    size: Optional[int]


#: the sections a unit's entries refer to, as Sections names them
#: (each ``.debug_<name>``)
ENTRY_SECTIONS = ("info", "abbrev", "str", "line_str", "addr", "str_offsets", "rnglists",
                  "ranges")


class Sections(NamedTuple):
    """The bytes of the sections a unit's entries refer to (b"" when a
    file has none).  ``grow(name, end)``, when given, inflates a
    compressed one further, in place, to ``end`` at least, and says
    whether it has more: one of them may then hold only its first bytes,
    and a reader that runs past them grows it and reads again
    (``_grown``)."""

    info: Data
    abbrev: Data
    str: Data
    line_str: Data
    addr: Data
    str_offsets: Data
    rnglists: Data
    ranges: Data
    little_endian: bool
    grow: Optional[Callable[[str, int], bool]] = None
    #: the abbreviation tables read so far, shared by the units of one
    #: file (AbbreviationTable.of): a table many units name is read once
    tables: Optional[Dict[tuple, "AbbreviationTable"]] = None


#: bytes of a compressed section inflated past where a read of it starts,
#: at first (twice as many at each retry): for a string, a range list...
FIRST_READ = 256
#: the same for an abbreviation table (a large unit's has some kB)
FIRST_TABLE_READ = 4096
#: attribute reads a unit's entries may take, per byte of the unit (and
#: READS_MORE besides): attributes of no byte (DW_FORM_flag_present,
#: implicit_const) read again at each entry of a hostile unit would
#: otherwise cost its size times its abbreviations' (GCC's: under 1 a byte)
READS_PER_BYTE = 64
READS_MORE = 1 << 16


def _grown(sections: Sections, name: str, start: int, read: Callable[[Data, int], T],
           first: int) -> T:
    """``read(data, start)`` of the section ``name`` of ``sections``,
    inflated ``first`` bytes past ``start`` first; read again, with twice
    as many inflated past it, while it runs past their end (IndexError,
    struct.error) and the section has more."""
    data = getattr(sections, name)
    grow = sections.grow
    end = start + first
    while True:
        more = grow is not None and grow(name, end)
        try:
            return read(data, start)
        except (IndexError, struct.error):
            if not more:
                raise
        end += end - start


def section_string(sections: Sections, name: str, offset: int) -> bytes:
    """The NUL-ended string at ``offset`` of the section ``name``."""
    try:
        return _grown(sections, name, offset, _nul_ended, FIRST_READ)
    except IndexError:
        raise DwarfFormatError(f"string at {offset:#x} past its section's end") from None


def _nul_ended(data: Data, at: int) -> bytes:
    end = data.find(b"\0", at)
    if at >= len(data) or end < 0:
        raise IndexError(at)
    return bytes(data[at:end])


class AbbreviationTable:
    """One abbreviation table of .debug_abbrev as far as it is read:
    ``codes``, its abbreviations by code; ``at``, where its next one
    starts; ``done``, whether its end was read."""

    def __init__(self, at: int):
        self.codes: Dict[int, Abbreviation] = {}
        self.at = at
        self.done = False

    @staticmethod
    def of(unit: "Unit", offset: int) -> "AbbreviationTable":
        """The table at ``offset`` as ``unit`` reads it (the sizes of its
        forms depend on the unit's version, address and offset sizes),
        shared through its Sections' tables."""
        tables = unit.sections.tables
        key = (offset, unit.version, unit.address_size, unit.offset_size)
        table = tables.get(key) if tables is not None else None
        if table is None:
            table = AbbreviationTable(offset)
            if tables is not None:
                tables[key] = table
        return table

    def extend(self, unit: "Unit", data: Data, last: Optional[int]) -> Dict[int, Abbreviation]:
        """Read on from ``at`` in data, to the end or to code ``last``; an
        abbreviation is kept only once read whole (a compressed section
        grown and read again goes on from there)."""
        at = self.at
        while True:
            code, at = read_uleb128(data, at)
            if code == 0:
                self.at, self.done = at, True
                return self.codes
            tag, at = read_uleb128(data, at)
            children = data[at] != 0
            at += 1
            attributes = []
            size: Optional[int] = 0
            while True:
                attribute, at = read_uleb128(data, at)
                form, at = read_uleb128(data, at)
                if attribute == 0 and form == 0:
                    break
                implicit = 0
                if form == DW_FORM_IMPLICIT_CONST:
                    implicit, at = read_sleb128(data, at)
                attributes.append((attribute, form, implicit))
                width = unit.fixed_size(form)
                size = None if size is None or width is None else size + width
            self.codes[code] = Abbreviation(tag, children, tuple(attributes), size)
            self.at = at
            if code == last:
                return self.codes


_SIBLING = frozenset((DW_AT_SIBLING,))


class Unit:
    """One unit of .debug_info: its header, its abbreviations and the
    bases (low pc, string offsets, addresses, range lists) of its top
    entry.  ``top_only``: the abbreviations parsed only as far as the top
    entry's, for a reader of nothing else."""

    def __init__(self, sections: Sections, offset: int, top_only: bool = False):
        self.sections = sections
        info = self.info = sections.info
        self.endian = "<" if sections.little_endian else ">"
        self.byteorder = "little" if sections.little_endian else "big"
        self.offset = offset
        grow = sections.grow
        if grow is not None:
            grow("info", offset + 12)  # its length
        (length,) = struct.unpack_from(self.endian + "I", info, offset)
        at = offset + 4
        self.offset_size = 4
        if length == 0xFFFFFFFF:
            (length,) = struct.unpack_from(self.endian + "Q", info, at)
            at += 8
            self.offset_size = 8
        self.end = at + length
        if grow is not None:
            grow("info", self.end)
        if self.end > len(info):
            raise DwarfFormatError(f"unit at {offset:#x} runs past .debug_info's end")
        (self.version,) = struct.unpack_from(self.endian + "H", info, at)
        at += 2
        offset_format = self.endian + ("I" if self.offset_size == 4 else "Q")
        if self.version >= 5:
            unit_type, self.address_size = info[at], info[at + 1]
            (abbrev_offset,) = struct.unpack_from(offset_format, info, at + 2)
            at += 2 + self.offset_size
            if unit_type in (4, 5):  # skeleton, split compile: a unit id
                at += 8
            elif unit_type in (2, 6):  # type, split type: signature, offset
                at += 8 + self.offset_size
        elif self.version >= 2:
            (abbrev_offset,) = struct.unpack_from(offset_format, info, at)
            self.address_size = info[at + self.offset_size]
            at += self.offset_size + 1
        else:
            raise DwarfFormatError(f"unit at {offset:#x}: DWARF version {self.version}")
        if self.address_size not in (4, 8):
            raise DwarfFormatError(f"unit at {offset:#x}: address size {self.address_size}")
        self.address_format = self.endian + ("I" if self.address_size == 4 else "Q")
        top_code = read_uleb128(info, at)[0] if top_only else None
        self.abbreviations = self._abbreviations(abbrev_offset, top_code)
        self.first = at
        #: attribute reads left to its entries (READS_PER_BYTE)
        self.reads = READS_PER_BYTE * (self.end - offset) + READS_MORE
        abbreviation, at = self.entry(at)
        #: the top entry's tag (0: a null entry) and the attributes of it read
        self.tag = abbreviation.tag if abbreviation is not None else 0
        top = self.top = self.attributes(at, TOP_ATTRIBUTES, abbreviation)[0] \
            if abbreviation is not None else {}
        header = 2 * self.offset_size  # the tables' headers, when no base is given
        self.str_offsets_base = self._constant(top, DW_AT_STR_OFFSETS_BASE, header)
        self.addr_base = self._constant(top, DW_AT_ADDR_BASE, header)
        self.rnglists_base = self._constant(top, DW_AT_RNGLISTS_BASE, header + 4)
        self.base = self.address(top[DW_AT_LOW_PC]) if DW_AT_LOW_PC in top else 0

    @staticmethod
    def _constant(attributes, attribute, default):
        return attributes[attribute][1] if attribute in attributes else default

    def _abbreviations(self, offset: int, last: Optional[int]) -> Dict[int, Abbreviation]:
        """The abbreviation table at ``offset``, read to its end or to
        code ``last``, once for all the units of the file that name it."""
        table = AbbreviationTable.of(self, offset)
        if not table.done and (last is None or last not in table.codes):
            _grown(self.sections, "abbrev", table.at,
                   lambda data, at: table.extend(self, data, last), FIRST_TABLE_READ)
        return table.codes

    def fixed_size(self, form: int) -> Optional[int]:
        if form in FIXED_SIZES:
            return FIXED_SIZES[form]
        if form == DW_FORM_ADDR:
            return self.address_size
        if form in OFFSET_FORMS:
            return self.offset_size
        if form == DW_FORM_REF_ADDR:
            return self.address_size if self.version == 2 else self.offset_size
        return None

    def entry(self, at: int) -> Tuple[Optional[Abbreviation], int]:
        """(abbreviation, offset of its attributes) of the entry at
        ``at``; (None, next offset) for a null entry."""
        code, at = read_uleb128(self.info, at)
        if code == 0:
            return None, at
        abbreviation = self.abbreviations.get(code)
        if abbreviation is None:
            raise DwarfFormatError(f"entry at {at:#x}: no abbreviation {code}")
        return abbreviation, at

    def skip(self, abbreviation: Abbreviation, at: int) -> int:
        """The offset after the attributes at ``at``."""
        if abbreviation.size is not None:
            return at + abbreviation.size
        return self.attributes(at, (), abbreviation)[1]

    def past_children(self, abbreviation: Abbreviation, at: int) -> Tuple[int, bool]:
        """(offset, True) of the next sibling of the entry with children
        whose attributes start at ``at``, where its DW_AT_sibling says so
        and stays inside the unit; else (offset after its attributes,
        False): its children are to be read.  A sibling at the attributes'
        end is not taken: the children (at least the null entry that
        closes them) come first, so it points at the first child."""
        attributes, after = self.attributes(at, _SIBLING, abbreviation)
        if DW_AT_SIBLING in attributes:
            sibling = self.reference(attributes[DW_AT_SIBLING])
            if sibling is not None and after < sibling <= self.end:
                return sibling, True
        return after, False

    def attributes(self, at: int, wanted, abbreviation: Abbreviation = None):
        """({attribute: (form, value)} of the wanted attributes, offset
        after the entry's attributes) of the entry whose attributes start
        at ``at`` (of the entry at ``at`` when no abbreviation is given).
        A value is the form's number (an offset, an index, a constant),
        or the bytes of a DW_FORM_string."""
        if abbreviation is None:
            abbreviation, at = self.entry(at)
            if abbreviation is None:
                return {}, at
        self.reads -= len(abbreviation.attributes)
        if self.reads < 0:
            raise DwarfFormatError(f"unit at {self.offset:#x}: its entries take more than "
                                   f"{READS_PER_BYTE} attribute reads a byte")
        info = self.info
        found = {}
        for attribute, form, implicit in abbreviation.attributes:
            while form == DW_FORM_INDIRECT:
                form, at = read_uleb128(info, at)
            width = FIXED_SIZES.get(form)
            if width is None and form not in LEB_FORMS and form not in BLOCK_FORMS \
                    and form != DW_FORM_STRING:
                width = self.fixed_size(form)
                if width is None:
                    raise DwarfFormatError(f"attributes at {at:#x}: unknown form {form:#x}")
            if width is not None:
                if attribute in wanted:
                    if form == DW_FORM_IMPLICIT_CONST:
                        value = implicit
                    elif form == DW_FORM_FLAG_PRESENT:
                        value = 1
                    else:
                        value = int.from_bytes(info[at:at + width], self.byteorder)
                    found[attribute] = (form, value)
                at += width
            elif form in LEB_FORMS:
                if attribute in wanted:
                    value, at = (read_sleb128 if form == DW_FORM_SDATA else read_uleb128)(info, at)
                    found[attribute] = (form, value)
                else:
                    while info[at] & 0x80:
                        at += 1
                    at += 1
            elif form == DW_FORM_STRING:
                end = info.index(b"\0", at)
                if attribute in wanted:
                    found[attribute] = (form, bytes(info[at:end]))
                at = end + 1
            else:
                prefix = BLOCK_FORMS[form]
                if prefix:
                    size = int.from_bytes(info[at:at + prefix], self.byteorder)
                    at += prefix
                else:
                    size, at = read_uleb128(info, at)
                at += size
        if at > self.end:
            raise DwarfFormatError(f"entry at {at:#x} runs past its unit's end")
        return found, at

    def _indexed(self, name: str, base: int, index: int, size: int) -> int:
        """Entry ``index`` of ``size`` bytes of the table at ``base`` of
        the section ``name``."""
        at = base + index * size
        table = getattr(self.sections, name)
        if self.sections.grow is not None:
            self.sections.grow(name, at + size)
        if at + size > len(table):
            raise DwarfFormatError(f"index {index} past its table's end")
        return struct.unpack_from(self.endian + ("I" if size == 4 else "Q"), table, at)[0]

    def address(self, value: Tuple[int, int]) -> int:
        """The address a (form, value) of DW_AT_low_pc and the like says."""
        form, number = value
        if form in ADDRESS_INDICES:
            return self._indexed("addr", self.addr_base, number, self.address_size)
        return number

    def string(self, value: Tuple[int, object]) -> Optional[bytes]:
        """The bytes of a string attribute's (form, value), or None when
        its form is not a string the file holds."""
        form, number = value
        if form == DW_FORM_STRING:
            return number
        if form == DW_FORM_STRP:
            name = "str"
        elif form == DW_FORM_LINE_STRP:
            name = "line_str"
        elif form in STRING_INDICES:
            name = "str"
            number = self._indexed("str_offsets", self.str_offsets_base, number,
                                   self.offset_size)
        else:
            return None
        return section_string(self.sections, name, number)

    def reference(self, value: Tuple[int, int]) -> Optional[int]:
        """The .debug_info offset a reference's (form, value) points at,
        or None when it points into another file or a type unit."""
        form, number = value
        if form in UNIT_REFERENCES:
            return self.offset + number
        if form == DW_FORM_REF_ADDR:
            return number
        return None

    def extent(self, attributes) -> List[Tuple[int, int]]:
        """[(low, high)] an entry covers, from its attributes: its low and
        high pc, or its range list."""
        if DW_AT_LOW_PC in attributes and DW_AT_HIGH_PC in attributes:
            low = self.address(attributes[DW_AT_LOW_PC])
            form, value = attributes[DW_AT_HIGH_PC]
            high = self.address((form, value)) if form in ADDRESS_FORMS else low + value
            return [(low, high)] if high > low else []
        if DW_AT_RANGES not in attributes:
            return []
        return self.ranges(attributes[DW_AT_RANGES])

    def ranges(self, value: Tuple[int, int]) -> List[Tuple[int, int]]:
        """[(low, high)] of a DW_AT_ranges' (form, value), empty ranges
        left out."""
        form, number = value
        if self.version >= 5:
            if form == DW_FORM_RNGLISTX:
                number = self.rnglists_base + self._indexed(
                    "rnglists", self.rnglists_base, number, self.offset_size)
            return self._range_list(number)
        return self._old_range_list(number)

    def _range_list(self, at: int) -> List[Tuple[int, int]]:
        """A .debug_rnglists list (DWARF 5)."""
        return _grown(self.sections, "rnglists", at, self._read_range_list, FIRST_READ)

    def _read_range_list(self, data: Data, at: int) -> List[Tuple[int, int]]:
        base, found = self.base, []
        address, size = self.address_format, self.address_size
        while True:
            kind = data[at]
            at += 1
            if kind == 0:  # end of list
                return found
            if kind == 1:  # base_addressx
                index, at = read_uleb128(data, at)
                base = self.address((DW_FORM_ADDRX, index))
                continue
            if kind == 5:  # base_address
                (base,) = struct.unpack_from(address, data, at)
                at += size
                continue
            if kind in (2, 3):  # startx_endx, startx_length
                index, at = read_uleb128(data, at)
                low = self.address((DW_FORM_ADDRX, index))
                second, at = read_uleb128(data, at)
                high = self.address((DW_FORM_ADDRX, second)) if kind == 2 else low + second
            elif kind == 4:  # offset_pair
                low, at = read_uleb128(data, at)
                high, at = read_uleb128(data, at)
                low, high = low + base, high + base
            elif kind == 6:  # start_end
                low, high = struct.unpack_from(self.endian + 2 * address[1], data, at)
                at += 2 * size
            elif kind == 7:  # start_length
                (low,) = struct.unpack_from(address, data, at)
                length, at = read_uleb128(data, at + size)
                high = low + length
            else:
                raise DwarfFormatError(f"range list entry at {at - 1:#x}: kind {kind}")
            if high > low:
                found.append((low, high))

    def _old_range_list(self, at: int) -> List[Tuple[int, int]]:
        """A .debug_ranges list (DWARF 2 to 4)."""
        return _grown(self.sections, "ranges", at, self._read_old_range_list, FIRST_READ)

    def _read_old_range_list(self, data: Data, at: int) -> List[Tuple[int, int]]:
        base, found = self.base, []
        pair = self.endian + 2 * self.address_format[1]
        largest = (1 << (8 * self.address_size)) - 1
        while True:
            low, high = struct.unpack_from(pair, data, at)
            at += 2 * self.address_size
            if low == 0 and high == 0:
                return found
            if low == largest:
                base = high
            elif high > low:
                found.append((low + base, high + base))


def unit_spans(sections: Sections) -> Iterator[Tuple[int, int]]:
    """(offset, end) of each unit of .debug_info, in order, as their
    lengths say."""
    at = 0
    info, grow = sections.info, sections.grow
    endian = "<" if sections.little_endian else ">"
    while True:
        if grow is not None:
            grow("info", at + 12)
        if at + 4 > len(info):
            return
        (length,) = struct.unpack_from(endian + "I", info, at)
        end = at + 4 + length
        if length == 0xFFFFFFFF:
            (length,) = struct.unpack_from(endian + "Q", info, at + 4)
            end = at + 12 + length
        yield at, end
        at = end


def unit_starts(sections: Sections) -> "array[int]":
    """The offsets of the units of .debug_info, in order (to find the one
    holding an offset by bisection)."""
    return array("Q", (at for at, _ in unit_spans(sections)))
