"""SFrame bytes -> model, for v1, v2 and v3 in either byte order.

``open_section`` checks the header and the sub-section bounds only.  An
FDE is read and checked when something reaches it: a lookup binary-searches
the FDE table in the bytes and reads the FDE it lands on; a function's rows
are decoded when first needed; ``section.functions`` (and so
``read_section``, a dump, a comparison) reads and checks the whole table.
Every offset and count is checked against the section size before it is
used; corruption raises SFrameError naming the field and byte offset.
"""

from bisect import bisect_right

from . import constants as C
from . import layout as L
from .errors import SFrameError
from .model import FrameRowEntry, FunctionEntry, SFrameSection


def open_section(data, address=0, name=".sframe"):
    """Open the .sframe section ``data`` located at ``address``: its FDEs
    are read and checked as lookups reach them."""
    data = bytes(data)
    if not data:
        return SFrameSection.empty(address, name)
    return SectionReader(data, address, name).open()


def read_section(data, address=0, name=".sframe"):
    """Open a section and read and check its whole FDE table (rows are
    still decoded on first use; ``check_section`` decodes them all)."""
    section = open_section(data, address, name)
    section.functions
    return section


class SectionReader:
    """The bytes of one opened section, read on demand."""

    def __init__(self, data, address, name):
        self.data = data
        self.address = address
        self.name = name
        self._functions = {}  # FDE index -> FunctionEntry, once read
        # Every function's start, sorted, and the FDE index of each (None:
        # the FDE order); built once byte searches have cost about as much.
        self._starts = None
        self._start_fdes = None
        self._searches_left = 0

    def error(self, message, offset):
        return SFrameError(message, offset, self.name)

    def open(self):
        data, size = self.data, len(self.data)
        if size < C.HEADER_SIZE:
            raise self.error(f"section is {size} bytes, shorter than the "
                             f"{C.HEADER_SIZE}-byte SFrame header", 0)
        if data[:2] == b"\xe2\xde":
            big_endian = False
        elif data[:2] == b"\xde\xe2":
            big_endian = True
        else:
            raise self.error(f"bad magic 0x{data[0]:02x}{data[1]:02x} "
                             "(expected 0xdee2)", 0)
        (_, version, flags, abi, fixed_fp, fixed_ra, aux_len, num_fdes,
         num_fres, fre_len, fde_off, fre_off) = L.header_struct(big_endian).unpack_from(data)
        field = L.HEADER_FIELD_OFFSETS
        if version not in C.VERSIONS:
            raise self.error(f"unsupported SFrame version {version}",
                             field["sfh_version"])
        if flags & ~C.VALID_FLAGS[version]:
            raise self.error(f"unknown flags {flags:#x} for SFrame version "
                             f"{version}", field["sfh_flags"])
        if abi not in C.ABI_NAMES:
            raise self.error(f"unknown ABI/arch {abi}", field["sfh_abi_arch"])

        body = C.HEADER_SIZE + aux_len
        if body > size:
            raise self.error(f"auxiliary header ({aux_len} bytes) runs past "
                             f"the end of the section ({size} bytes)",
                             field["sfh_auxhdr_len"])
        fde_size = L.fde_size(version)
        fde_table_end = fde_off + num_fdes * fde_size
        if body + fde_table_end > size:
            raise self.error(f"FDE table ({num_fdes} FDEs of {fde_size} bytes "
                             f"at offset {fde_off:#x}) runs past the end of the "
                             f"section ({size - body:#x} bytes after the header)",
                             field["sfh_num_fdes"])
        if body + fre_off + fre_len > size:
            raise self.error(f"FRE sub-section (offset {fre_off:#x}, "
                             f"{fre_len:#x} bytes) runs past the end of the "
                             f"section ({size - body:#x} bytes after the header)",
                             field["sfh_fre_len"])
        if fde_off < fre_off + fre_len and fre_off < fde_table_end:
            raise self.error(f"FDE table [{fde_off:#x}, {fde_table_end:#x}) "
                             f"overlaps the FRE sub-section [{fre_off:#x}, "
                             f"{fre_off + fre_len:#x})", field["sfh_freoff"])

        self.version = version
        self.big_endian = big_endian
        self.num_fdes = num_fdes
        self.num_fres = num_fres
        self.fde_table = body + fde_off
        self.fde_size = fde_size
        self.fre_start = body + fre_off
        self.fre_end = self.fre_start + fre_len
        self.pcrel = bool(flags & C.F_FDE_FUNC_START_PCREL)
        self._fde_struct = L.fde_struct(version, big_endian)
        self._start_struct = L.fde_start_struct(version, big_endian)
        self._attr_struct = L.fde_attr_struct(big_endian)
        if flags & C.F_FDE_SORTED:
            # A search of the bytes costs about log2(n) reads of one start
            # field, indexing every start about n/32 of them.
            self._searches_left = num_fdes // 32
        return SFrameSection(
            version, abi, flags=flags, cfa_fixed_fp_offset=fixed_fp,
            cfa_fixed_ra_offset=fixed_ra, aux_header=data[C.HEADER_SIZE:body],
            big_endian=big_endian, address=self.address,
            padding=data[body + max(fde_table_end, fre_off + fre_len):],
            name=self.name, source=self)

    # -- one FDE ----------------------------------------------------------

    def function(self, index):
        """The FunctionEntry of FDE ``index``, read and checked once."""
        function = self._functions.get(index)
        if function is None:
            at = self.fde_table + index * self.fde_size
            function = self._functions[index] = self._read_fde(
                index, at, self._fde_struct.unpack_from(self.data, at))
        return function

    def _read_fde(self, index, at, fields):
        data, fre_start, fre_end = self.data, self.fre_start, self.fre_end
        fre_len = fre_end - fre_start
        if self.version == C.VERSION_3:
            start_value, func_size, fre_off = fields
            if fre_off + L.FDE_ATTR_V3_SIZE > fre_len:
                raise self.error(
                    f"FDE {index} FRE offset {fre_off:#x} beyond FRE "
                    f"sub-section ({fre_len:#x} bytes)", at + 12)
            attr_at = fre_start + fre_off
            num_fres, info, info2, rep_size = self._attr_struct.unpack_from(data, attr_at)
            rows_at = attr_at + L.FDE_ATTR_V3_SIZE
            fde_type = info2 & 0x1F
            if fde_type > C.FDE_TYPE_FLEX:
                raise self.error(f"FDE {index} has unknown FDE type {fde_type}",
                                 attr_at + 3)
            info_at = attr_at + 2
        else:
            start_value, func_size, fre_off, num_fres, info = fields[:5]
            rep_size = fields[5] if len(fields) > 5 else 0
            fde_type = C.FDE_TYPE_DEFAULT
            if fre_off > fre_len:
                raise self.error(
                    f"FDE {index} FRE offset {fre_off:#x} beyond FRE "
                    f"sub-section ({fre_len:#x} bytes)", at + 8)
            rows_at = fre_start + fre_off
            info_at = at + 16
        fre_type = info & 0xF
        if fre_type > C.FRE_TYPE_ADDR4:
            raise self.error(f"FDE {index} has invalid FRE type {fre_type}",
                             info_at)
        # Each FRE is at least its start address plus the info byte.
        if rows_at + num_fres * (C.FRE_ADDRESS_SIZES[fre_type] + 1) > fre_end:
            raise self.error(
                f"FDE {index} claims {num_fres} FREs at FRE offset "
                f"{fre_off:#x}, more than the FRE sub-section "
                f"({fre_len:#x} bytes) can hold", info_at)
        base = self.address + at if self.pcrel else self.address
        return FunctionEntry.from_reader(
            (base + start_value) & 0xFFFFFFFFFFFFFFFF, func_size, info,
            fde_type, rep_size, num_fres, (self, index, rows_at))

    # -- the whole table --------------------------------------------------

    def read_all(self):
        """(every FunctionEntry in FDE order, the order of their row blocks
        or None when it is the FDE order), checking every FDE."""
        table, fde_size, count = self.fde_table, self.fde_size, self.num_fdes
        records = self._fde_struct.iter_unpack(
            self.data[table:table + count * fde_size])
        cache = self._functions
        functions, block_offsets = [], []
        for index, fields in enumerate(records):
            function = cache.get(index)
            if function is None:
                function = cache[index] = self._read_fde(
                    index, table + index * fde_size, fields)
            functions.append(function)
            block_offsets.append(fields[2])
        total = sum(f.num_rows for f in functions)
        if total != self.num_fres:
            raise self.error(f"sfh_num_fres is {self.num_fres} but the FDEs hold "
                             f"{total} FREs", L.HEADER_FIELD_OFFSETS["sfh_num_fres"])
        # Functions without bytes in the FRE sub-section (v1/v2, no rows)
        # go before the block that shares their offset.
        version3 = self.version == C.VERSION_3
        keys = [(offset, version3 or function.num_rows > 0)
                for offset, function in zip(block_offsets, functions)]
        if all(a <= b for a, b in zip(keys, keys[1:])):
            return functions, None  # rows in FDE order, as gas writes them
        return functions, sorted(range(count), key=lambda i: (keys[i], i))

    # -- lookups ----------------------------------------------------------

    def find_function(self, pc):
        """The FunctionEntry covering ``pc``, or None: the last function
        (in start order) starting at or before ``pc``, if it reaches it."""
        starts = self._starts
        if starts is None:
            if self._searches_left > 0:
                self._searches_left -= 1
                return self._search_bytes(pc)
            starts = self._index_starts()
        i = bisect_right(starts, pc) - 1
        if i < 0:
            return None
        if self._start_fdes is not None:
            i = self._start_fdes[i]
        function = self._functions.get(i) or self.function(i)
        return function if pc < function.start + function.size else None

    def _search_bytes(self, pc):
        """Binary search of a sorted FDE table, reading start fields only."""
        data, read = self.data, self._start_struct.unpack_from
        table, size = self.fde_table, self.fde_size
        base, step = self.address, 0
        if self.pcrel:
            base, step = self.address + table, size
        low, high = 0, self.num_fdes
        while low < high:
            middle = (low + high) >> 1
            if read(data, table + middle * size)[0] + base + middle * step <= pc:
                low = middle + 1
            else:
                high = middle
        if low == 0:
            return None
        function = self.function(low - 1)
        return function if pc < function.start + function.size else None

    def _index_starts(self):
        table, size, count = self.fde_table, self.fde_size, self.num_fdes
        records = self._start_struct.iter_unpack(self.data[table:table + count * size])
        if self.pcrel:
            base = self.address + table
            starts = [value + base + i * size for i, (value,) in enumerate(records)]
        else:
            base = self.address
            starts = [value + base for (value,) in records]
        ordered = sorted(starts)
        if ordered != starts:  # not sorted, whatever the flags say
            self._start_fdes = sorted(range(count), key=starts.__getitem__)
        self._starts = ordered
        return ordered

    # -- rows -------------------------------------------------------------

    def decode_rows(self, index, at, count, fre_type):
        data, end = self.data, self.fre_end
        address_size = C.FRE_ADDRESS_SIZES[fre_type]
        read_address = L.fre_address_struct(address_size, self.big_endian).unpack_from
        info_table = L.fre_info_table(self.big_endian)
        new_row = tuple.__new__  # the fields are already what FrameRowEntry keeps
        rows = []
        for number in range(count):
            info_at = at + address_size
            if info_at >= end:
                raise self.error(f"FDE {index} FRE {number} runs past the end "
                                 "of the FRE sub-section", at)
            info = info_table[data[info_at]]
            if info is None:
                raise self._bad_fre_info(index, number, info_at)
            base_reg, word_count, word_size, mangled, words_struct = info
            at = info_at + 1 + words_struct.size
            if at > end:
                raise self.error(f"FDE {index} FRE {number} data words run past "
                                 "the end of the FRE sub-section", info_at)
            rows.append(new_row(FrameRowEntry, (
                read_address(data, info_at - address_size)[0], base_reg,
                words_struct.unpack_from(data, info_at + 1), word_size, mangled)))
        return rows

    def _bad_fre_info(self, index, number, info_at):
        _, word_count, size_code, _ = L.unpack_fre_info(self.data[info_at])
        if size_code >= len(C.WORD_SIZES):
            return self.error(f"FDE {index} FRE {number} has invalid data "
                              "word size code 3", info_at)
        return self.error(f"FDE {index} FRE {number} has {word_count} "
                          f"data words (at most {C.MAX_WORDS})", info_at)


def check_section(section):
    """Read every FDE and decode every function's rows, raising SFrameError
    at the first fault."""
    for function in section.functions:
        function.rows
    return section


__all__ = ["open_section", "read_section", "check_section"]
