"""SFrame bytes -> model, for v1, v2 and v3 in either byte order.

Every offset and count is checked against the section size before it is
used; corruption raises SFrameError naming the field and byte offset.
Opening a section reads the header and the FDE index only; a function's
rows are decoded when first needed.
"""


from . import constants as C
from . import layout as L
from .errors import SFrameError
from .model import FrameRowEntry, FunctionEntry, SFrameSection


def read_section(data, address=0, name=".sframe"):
    """Parse a whole .sframe section located at ``address``."""
    data = bytes(data)
    if not data:
        return SFrameSection.empty(address, name)
    return _SectionReader(data, address, name).read()


class _SectionReader:
    def __init__(self, data, address, name):
        self.data = data
        self.address = address
        self.name = name

    def error(self, message, offset):
        return SFrameError(message, offset, self.name)

    def read(self):
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
        self.fre_start = body + fre_off
        self.fre_end = self.fre_start + fre_len
        pcrel = bool(flags & C.F_FDE_FUNC_START_PCREL)
        functions, block_offsets = self._read_fdes(
            body + fde_off, num_fdes, fde_size, pcrel)
        total = sum(f.num_rows for f in functions)
        if total != num_fres:
            raise self.error(f"sfh_num_fres is {num_fres} but the FDEs hold "
                             f"{total} FREs", field["sfh_num_fres"])
        # Functions without bytes in the FRE sub-section (v1/v2, no rows)
        # go before the block that shares their offset.
        keys = [(offset, version == C.VERSION_3 or function.num_rows > 0)
                for offset, function in zip(block_offsets, functions)]
        if all(a <= b for a, b in zip(keys, keys[1:])):
            order = None  # rows in FDE order, as gas writes them
        else:
            order = sorted(range(num_fdes), key=lambda i: (keys[i], i))
        return SFrameSection(
            version, abi, functions, flags=flags, cfa_fixed_fp_offset=fixed_fp,
            cfa_fixed_ra_offset=fixed_ra, aux_header=data[C.HEADER_SIZE:body],
            big_endian=big_endian, address=self.address, fre_order=order,
            padding=data[body + max(fde_table_end, fre_off + fre_len):],
            name=self.name)

    def _read_fdes(self, table, count, fde_size, pcrel):
        data, fre_start, fre_end = self.data, self.fre_start, self.fre_end
        fre_len = fre_end - fre_start
        records = L.fde_struct(self.version, self.big_endian).iter_unpack(
            data[table:table + count * fde_size])
        attr_struct = L.fde_attr_struct(self.big_endian)
        version3 = self.version == C.VERSION_3
        address = self.address
        functions, block_offsets = [], []
        for index, fields in enumerate(records):
            at = table + index * fde_size
            if version3:
                start_value, func_size, fre_off = fields
                if fre_off + L.FDE_ATTR_V3_SIZE > fre_len:
                    raise self.error(
                        f"FDE {index} FRE offset {fre_off:#x} beyond FRE "
                        f"sub-section ({fre_len:#x} bytes)", at + 12)
                attr_at = fre_start + fre_off
                num_fres, info, info2, rep_size = attr_struct.unpack_from(data, attr_at)
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
            base = address + at if pcrel else address
            functions.append(FunctionEntry.from_reader(
                (base + start_value) & 0xFFFFFFFFFFFFFFFF, func_size, info,
                fde_type, rep_size, num_fres, (self, index, rows_at)))
            block_offsets.append(fre_off)
        return functions, block_offsets

    def decode_rows(self, index, at, count, fre_type):
        data, end, big_endian = self.data, self.fre_end, self.big_endian
        address_size = C.FRE_ADDRESS_SIZES[fre_type]
        address_struct = L.fre_address_struct(address_size, big_endian)
        rows = []
        for number in range(count):
            if at + address_size + 1 > end:
                raise self.error(f"FDE {index} FRE {number} runs past the end "
                                 "of the FRE sub-section", at)
            (start_offset,) = address_struct.unpack_from(data, at)
            info_at = at + address_size
            base_reg, word_count, size_code, mangled = L.unpack_fre_info(data[info_at])
            if size_code >= len(C.WORD_SIZES):
                raise self.error(f"FDE {index} FRE {number} has invalid data "
                                 "word size code 3", info_at)
            if word_count > C.MAX_WORDS:
                raise self.error(f"FDE {index} FRE {number} has {word_count} "
                                 f"data words (at most {C.MAX_WORDS})", info_at)
            word_size = C.WORD_SIZES[size_code]
            words_at = info_at + 1
            if words_at + word_count * word_size > end:
                raise self.error(f"FDE {index} FRE {number} data words run past "
                                 "the end of the FRE sub-section", info_at)
            words = L.fre_words_struct(word_size, word_count, big_endian).unpack_from(data, words_at)
            rows.append(FrameRowEntry(start_offset, base_reg, words, word_size,
                                      mangled))
            at = words_at + word_count * word_size
        return rows


def check_section(section):
    """Decode every function's rows, raising SFrameError at the first fault."""
    for function in section.functions:
        function.rows
    return section


__all__ = ["read_section", "check_section"]
