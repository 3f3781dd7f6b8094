"""Hostile DWARF built on purpose (tests and bench/fuzz_dwarf.py): ELF
files whose one unit covers CODE..CODE+0x100 (listed in .debug_aranges)
and whose entries, abbreviations or line program cost without end unless
every table is bounded: zero-width attributes read again at each entry,
inline chains thousands deep, ranges shared by thousands of calls, long
names, line tables claiming 2^40 files, programs of millions of rows,
and zlib bombs."""

import struct
import subprocess
import zlib

#: the address the crafted unit covers (cbf decode --exe looks it up)
CODE = 0x401000
DW_TAG_COMPILE_UNIT = 0x11
DW_TAG_SUBPROGRAM = 0x2E
DW_TAG_INLINED = 0x1D
DW_AT_NAME, DW_AT_LOW_PC, DW_AT_HIGH_PC, DW_AT_STMT_LIST = 0x03, 0x11, 0x12, 0x10
DW_FORM_ADDR, DW_FORM_DATA4, DW_FORM_STRP, DW_FORM_FLAG_PRESENT = 0x01, 0x06, 0x0E, 0x19
DW_FORM_SEC_OFFSET = 0x17
SHF_COMPRESSED = 0x800


def uleb(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def abbreviation(code, tag, children, attributes):
    """One abbreviation: attributes as [(attribute, form)]."""
    return uleb(code) + uleb(tag) + bytes([children]) \
        + b"".join(uleb(a) + uleb(f) for a, f in attributes) + b"\0\0"


def unit(entries, abbrev_offset=0):
    """A DWARF 4 unit of .debug_info around the entries' bytes."""
    body = struct.pack("<HIB", 4, abbrev_offset, 8) + entries
    return struct.pack("<I", len(body)) + body


def aranges(unit_offset=0, start=CODE, size=0x100):
    body = struct.pack("<HIBB", 2, unit_offset, 8, 0) + b"\0" * 4 \
        + struct.pack("<QQQQ", start, size, 0, 0)
    return struct.pack("<I", len(body)) + body


#: the top entry's abbreviation (code 1): a compile unit with children,
#: low and high pc, its line program
TOP = abbreviation(1, DW_TAG_COMPILE_UNIT, 1, [(DW_AT_LOW_PC, DW_FORM_ADDR),
                                              (DW_AT_HIGH_PC, DW_FORM_DATA4),
                                              (DW_AT_STMT_LIST, DW_FORM_SEC_OFFSET)])


def top_entry(start=CODE, size=0x100):
    return uleb(1) + struct.pack("<QII", start, size, 0)


def line_program_v4(opcodes=b"", files=(b"a.c",)):
    """A DWARF 4 line program: its header (opcode base 13) and opcodes."""
    tables = b"\0" + b"".join(name + b"\0\0\0\0" for name in files) + b"\0"
    head = bytes([1, 1, 1, 0xFB, 14, 13]) + bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]) + tables
    body = struct.pack("<HI", 4, len(head)) + head + opcodes
    return struct.pack("<I", len(body)) + body


def line_program_v5(directories=1, files=1, header_bytes=b""):
    """A DWARF 5 line program header claiming ``directories`` and
    ``files`` entries whose only format takes no byte (DW_FORM_flag_present
    as DW_LNCT_path)."""
    head = bytes([1, 1, 1, 0xFB, 14, 13]) + bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
    head += bytes([1]) + uleb(1) + uleb(DW_FORM_FLAG_PRESENT) + uleb(directories)
    head += bytes([1]) + uleb(1) + uleb(DW_FORM_FLAG_PRESENT) + uleb(files) + header_bytes
    body = struct.pack("<HBBI", 5, 8, 0, len(head)) + head
    return struct.pack("<I", len(body)) + body


def elf(sections, compressed=()):
    """A 64-bit little-endian ELF relocatable with a .text at CODE and the
    given {name: bytes} sections (those named in ``compressed`` as
    SHF_COMPRESSED zlib with the size they claim: {name: claimed size})."""
    names = [b"", b".text"] + [n.encode() for n in sections] + [b".shstrtab"]
    shstrtab = b"\0".join(names) + b"\0"
    name_at = [shstrtab.index(n + b"\0") if n else 0 for n in names]
    blobs = [b"", b"\xc3" * 0x100] + list(sections.values()) + [shstrtab]
    data, offsets = bytearray(b"\0" * 64), []
    for blob in blobs:
        data += b"\0" * (-len(data) % 8)
        offsets.append(len(data))
        data += blob
    data += b"\0" * (-len(data) % 8)
    shoff = len(data)
    for i, blob in enumerate(blobs):
        kind, flags, address = (0, 0, 0) if i == 0 else (1, 0, 0)
        if i == 1:
            flags, address = 6, CODE
        elif i == len(blobs) - 1:
            kind = 3
        elif names[i].decode() in compressed:
            flags = SHF_COMPRESSED
        data += struct.pack("<IIQQQQIIQQ", name_at[i], kind, flags, address, offsets[i],
                            len(blob), 0, 0, 1, 0)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                          len(blobs), len(blobs) - 1)
    data[:64] = header
    return bytes(data)


def compressed(payload, claimed=None):
    """An SHF_COMPRESSED section's bytes: its header, the zlib stream."""
    size = len(payload) if claimed is None else claimed
    return struct.pack("<IIQQ", 1, 0, size, 1) + zlib.compress(payload, 9)


def dwarf_sections(abbrev, entries, line=None, strings=b"", start=CODE, size=0x100):
    """{name: bytes} of the debug sections of one unit over start..start+size
    (its top entry, then ``entries``), its line program (a plain one by
    default) and .debug_str."""
    return {".debug_info": unit(top_entry(start, size) + entries),
            ".debug_abbrev": TOP + abbrev, ".debug_aranges": aranges(0, start, size),
            ".debug_line": line or line_program_v4(), ".debug_str": strings or b"\0"}


def dwarf_elf(abbrev, entries, line=None, strings=b"", compress=(), padding=0):
    """An ELF of dwarf_sections; ``padding`` bytes of a section besides
    make the file large enough for what its compressed sections claim (64
    times the file's size at most)."""
    sections = {".pad": b"\0" * padding, **dwarf_sections(abbrev, entries, line, strings)}
    for name in compress:
        sections[name] = compressed(sections[name])
    return elf(sections, compress)


# -- the bombs ------------------------------------------------------------------------------


def zero_width_attributes(attributes=60_000, entries=20_000):
    """A subprogram abbreviation of thousands of attributes that take no
    byte, and thousands of entries of it (each one byte)."""
    abbrev = abbreviation(2, DW_TAG_SUBPROGRAM, 0, [(0x3F, DW_FORM_FLAG_PRESENT)] * attributes)
    return dwarf_elf(abbrev + b"\0", uleb(2) * entries + b"\0")


def deep_inline_sections(depth, name_size, start=CODE, size=0x100):
    """The dwarf_sections of inlined calls nested ``depth`` deep over
    start..start+size, each named by one string of ``name_size`` bytes."""
    abbrev = abbreviation(2, DW_TAG_INLINED, 1, [(DW_AT_NAME, DW_FORM_STRP),
                                                 (DW_AT_LOW_PC, DW_FORM_ADDR),
                                                 (DW_AT_HIGH_PC, DW_FORM_DATA4)])
    entry = uleb(2) + struct.pack("<IQI", 1, start, size)
    return dwarf_sections(abbrev + b"\0", entry * depth + b"\0" * (depth + 1),
                          strings=b"\0" + b"f" * name_size + b"\0", start=start, size=size)


def deep_chain_in_main(depth, start, size):
    """The dwarf_sections of a function ``main`` over start..start+size
    with ``f`` (a function declared inline) inlined into it ``depth``
    calls deep, each over all of main, called from a.c:5: DWARF as GDB
    reads it (abstract origins, calls inside a subprogram)."""
    abbrev = abbreviation(2, DW_TAG_SUBPROGRAM, 1, [(DW_AT_NAME, DW_FORM_STRP),
                                                    (DW_AT_LOW_PC, DW_FORM_ADDR),
                                                    (DW_AT_HIGH_PC, DW_FORM_DATA4)])
    abbrev += abbreviation(3, DW_TAG_INLINED, 1, [(0x31, 0x13), (DW_AT_LOW_PC, DW_FORM_ADDR),
                                                  (DW_AT_HIGH_PC, DW_FORM_DATA4),
                                                  (0x58, 0x0B), (0x59, 0x0B)])
    abbrev += abbreviation(4, DW_TAG_SUBPROGRAM, 0, [(DW_AT_NAME, DW_FORM_STRP), (0x20, 0x0B)])
    origin = 11 + len(top_entry())  # the unit's header, its top entry
    entries = uleb(4) + struct.pack("<IB", 6, 3)
    entries += uleb(2) + struct.pack("<IQI", 1, start, size)
    entries += (uleb(3) + struct.pack("<IQIBB", origin, start, size, 1, 5)) * depth
    return dwarf_sections(abbrev + b"\0", entries + b"\0" * (depth + 2),
                          strings=b"\0main\0f\0", start=start, size=size)


STOP_IN_MAIN = """
void __attribute__((noinline)) stop_here(void) { __asm__ volatile(""); }
int main(void) { stop_here(); return 0; }
"""


def program_with_deep_chain(directory, depth):
    """A program (gcc, SFrame, no DWARF of its own) given deep_chain_in_main's
    sections over its main: a debugger stopped in stop_here shows the chain."""
    built, source = directory / "stop_in_main", directory / "stop_in_main.c"
    source.write_text(STOP_IN_MAIN)
    subprocess.run(["gcc", "-O0", "-g0", "-Wa,--gsframe", "-fno-pie", "-no-pie", "-o",
                    str(built), str(source)], check=True, capture_output=True)
    listed = subprocess.run(["nm", "-S", str(built)], check=True, capture_output=True,
                            text=True).stdout
    start, size = next((int(a, 16), int(s, 16)) for a, s, _, name in
                       (line.split() for line in listed.splitlines() if len(line.split()) == 4)
                       if name == "main")
    program, adding = directory / "deep", []
    for name, data in deep_chain_in_main(depth, start, size).items():
        (directory / name[1:]).write_bytes(data)
        adding += ["--add-section", f"{name}={directory / name[1:]}"]
    subprocess.run(["objcopy", *adding, str(built), str(program)], check=True,
                   capture_output=True)
    return program


def deep_inline_chain(depth=3000, name_size=1 << 20):
    """An ELF of deep_inline_sections over the whole unit."""
    return elf(deep_inline_sections(depth, name_size))


def shared_ranges(calls=3000, name_size=4096):
    """Sibling inlined calls at one depth whose ranges all overlap, each
    starting one byte later: calls^2/2 marks."""
    abbrev = abbreviation(2, DW_TAG_INLINED, 0, [(DW_AT_NAME, DW_FORM_STRP),
                                                 (DW_AT_LOW_PC, DW_FORM_ADDR),
                                                 (DW_AT_HIGH_PC, DW_FORM_DATA4)])
    entries = b"".join(uleb(2) + struct.pack("<IQI", 1, CODE + i, 2 * calls)
                       for i in range(calls))
    return dwarf_elf(abbrev + b"\0", entries + b"\0",
                     strings=b"\0" + b"g" * name_size + b"\0")


def huge_file_count(count=1 << 40):
    """A DWARF 5 line table claiming ``count`` files of no byte each."""
    return dwarf_elf(b"\0", b"\0", line=line_program_v5(files=count))


def many_rows(rows=60_000_000):
    """A line program of one special opcode per row, compressed (a few
    KB for millions of rows) in a file large enough for them."""
    program = b"\0\x09\x02" + struct.pack("<Q", CODE) + b"\x20" * rows
    return dwarf_elf(b"\0", b"\0", line=line_program_v4(program), compress=(".debug_line",),
                     padding=rows // 60)


def zlib_bomb(size=256 << 20):
    """.debug_line compressed from ``size`` bytes of one opcode."""
    return many_rows(size)


def shared_abbreviations(units=20_000, codes=20_000):
    """Thousands of units, none listed in .debug_aranges, sharing one
    table of thousands of abbreviations whose last is their top entry's."""
    table = b"".join(abbreviation(code, 0x24, 0, [(DW_AT_NAME, DW_FORM_DATA4)])
                     for code in range(2, codes))
    top = abbreviation(codes, DW_TAG_COMPILE_UNIT, 0, [(DW_AT_LOW_PC, DW_FORM_ADDR),
                                                       (DW_AT_HIGH_PC, DW_FORM_DATA4)])
    info = b"".join(unit(uleb(codes) + struct.pack("<QI", CODE + 0x1000 + i, 1))
                    for i in range(units))
    return elf({".debug_info": info, ".debug_abbrev": table + top + b"\0",
                ".debug_line": line_program_v4()})


def references_to_many_units(units=20_000):
    """One unit of thousands of inlined calls, each named through
    DW_AT_abstract_origin by an entry of another unit."""
    call = abbreviation(2, DW_TAG_INLINED, 0, [(0x31, 0x10), (DW_AT_LOW_PC, DW_FORM_ADDR),
                                               (DW_AT_HIGH_PC, DW_FORM_DATA4)])
    named = abbreviation(3, DW_TAG_SUBPROGRAM, 0, [(DW_AT_NAME, DW_FORM_STRP)])
    first = unit(top_entry() + b"\0" * (17 * units) + b"\0")  # the calls' size
    others, offsets = b"", []
    for _ in range(units):
        offsets.append(len(first) + len(others) + 11)
        others += unit(uleb(3) + struct.pack("<I", 1), abbrev_offset=len(TOP + call) + 1)
    calls = b"".join(uleb(2) + struct.pack("<IQI", at, CODE + i % 0x100, 1)
                     for i, at in enumerate(offsets))
    first = unit(top_entry() + calls + b"\0")
    return elf({".debug_info": first + others, ".debug_abbrev": TOP + call + b"\0" + named
                + b"\0", ".debug_aranges": aranges(), ".debug_line": line_program_v4(),
                ".debug_str": b"\0callee\0"})


def many_units(units=2_500_000):
    """Millions of units, none listed in .debug_aranges, in a compressed
    .debug_info (a zlib bomb past 64 MiB for the default)."""
    info = unit(top_entry()) * units
    return elf({".pad": b"\0" * (len(info) // 60), ".debug_info": compressed(info),
                ".debug_abbrev": TOP + b"\0", ".debug_line": line_program_v4()},
               (".debug_info",))


#: every bomb, by name, at its default size
BOMBS = {"zero-width-attributes": zero_width_attributes, "deep-inline-chain": deep_inline_chain,
         "shared-ranges": shared_ranges, "huge-file-count": huge_file_count,
         "many-rows": many_rows, "zlib-bomb": zlib_bomb,
         "shared-abbreviations": shared_abbreviations,
         "references-to-many-units": references_to_many_units, "many-units": many_units}
