"""Hostile inputs built on purpose (tests and bench/fuzz.py): image maps
that expand a few bytes into megabytes, archives of many of them, and
core files that lie."""

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugin"))

from sfbt.archive import cbf  # noqa: E402
from sfbt.archive.store import MAGIC, Archive, Event  # noqa: E402


def _expand(code):
    return bytes([0x80 | code]) if code < 64 else bytes([0xC0, code - 64])


def doubling_image_map(salt=0, images=500, doublings=14):
    """An image map of about 3.5 KB that decodes to 16 MB: its first path
    defines prefixes twice as long each time (``a``, ``a/a``, ``a/a/a/a``,
    ...), every other path expands the longest but one twice (32 KiB).
    ``salt`` (0-255) goes into the platform name, to make maps distinct."""
    body = bytearray([0x02, 0x01, salt & 0xFF])  # 64-bit, a 1-byte platform name
    body += bytes([0x80 | images >> 7, images & 0x7F])
    body += bytes([0x00, 0x00, 0x00, 0x00])  # base 0, size 0, no build id
    body += b"\x02a/"  # str "a/": defines "a" (code 32)
    for code in range(32, 32 + doublings):
        body += _expand(code) + b"\x01/"  # then "/": defines all so far
    body += b"\x00"
    twice = _expand(31 + doublings) * 2
    for _ in range(images - 1):
        body += bytes([0x00, 0x00, 0x00, 0x00]) + twice + b"\x00"
    return bytes(body)


def wide_image_map(salt=0, images=5000):
    """An image map of ``images`` images with no path or build id, one
    byte apart, 5 bytes each."""
    body = bytearray([0x02, 0x02, salt & 0xFF, salt >> 8 & 0xFF])
    body += bytes([0x80 | images >> 14 & 0x7F, 0x80 | images >> 7 & 0x7F, images & 0x7F])
    for _ in range(images):
        body += bytes([0x80, 0x01, 0x00, 0x00, 0x00])  # base + 1, size 0, none, no path
    return bytes(body)


def one_image_maps(count):
    """``count`` distinct image maps of 11 bytes, one image each."""
    return [bytes([0x02, 0x03]) + salt.to_bytes(3, "big") + bytes([0x01, 0x00, 0x05, 0x01,
                                                                    0x00, 0x00])
            for salt in range(count)]


def archive_of_maps(maps, traces_first=1, rounds=1):
    """Archive bytes: ``traces_first`` one-frame traces using a plain map,
    then the maps given (bytes, not checked), then ``rounds`` times one
    trace using each map in turn."""
    archive = Archive()
    plain = archive.add_image_map(bytes([0x02, 0x00, 0x00]))  # no images
    for number in range(traces_first):
        trace = archive.add_trace(cbf.encode([cbf.Frame("pc", 0x400000 + number)]))
        archive.add_event(Event(trace, plain, thread="1", reason="SIGTRAP"))
    indexes = [archive.add_image_map(data) for data in maps]
    for number, index in enumerate(indexes * rounds):
        trace = archive.add_trace(cbf.encode([cbf.Frame("pc", 0x500000 + number)]))
        archive.add_event(Event(trace, index, thread="1", reason="SIGTRAP"))
    return MAGIC + archive.pending_bytes()


def record_offsets(data):
    """The offset of each record of archive bytes (after the magic)."""
    import struct
    offsets, at = [], len(MAGIC)
    while at < len(data):
        offsets.append(at)
        at += 5 + struct.unpack_from("<I", data, at + 1)[0] + 4
    return offsets


# -- cores -----------------------------------------------------------------------

EM_X86_64 = 62
EM_AARCH64 = 183
X86_64_PRSTATUS = 336  # struct elf_prstatus on x86-64
PAGE = 0x1000


def _note(kind, desc, name=b"CORE"):
    import struct
    padded = (name + b"\0").ljust((len(name) + 4) & ~3, b"\0")
    return struct.pack("<III", len(name) + 1, len(desc), kind) + padded \
        + desc.ljust((len(desc) + 3) & ~3, b"\0")


def x86_64_prstatus(tid, pc, sp, fp=0, signal=11, size=X86_64_PRSTATUS):
    """An NT_PRSTATUS note's bytes: pr_cursig, pr_pid, and pr_reg with
    rip, rsp and rbp set; cut or padded to ``size``."""
    import struct
    desc = bytearray(max(size, X86_64_PRSTATUS))
    struct.pack_into("<H", desc, 12, signal)
    struct.pack_into("<i", desc, 32, tid)
    registers = [0] * 27
    registers[16], registers[19], registers[4] = pc, sp, fp
    struct.pack_into("<27Q", desc, 112, *registers)
    return bytes(desc[:size])


def nt_file(mappings):
    """An NT_FILE note's bytes for [(start, end, file offset, path)]."""
    import struct
    body = struct.pack("<QQ", len(mappings), PAGE)
    body += b"".join(struct.pack("<QQQ", start, end, offset // PAGE)
                     for start, end, offset, _ in mappings)
    return body + b"".join(path.encode() + b"\0" for _, _, _, path in mappings)


def core_file(notes, loads=(), machine=EM_X86_64):
    """An ELF core's bytes: one PT_NOTE of ``notes`` [(kind, desc)], then a
    PT_LOAD for each (address, bytes) of ``loads`` (readable and writable;
    or (address, bytes dumped, memory size, p_flags))."""
    import struct
    note_bytes = b"".join(_note(kind, desc) for kind, desc in notes)
    count = 1 + len(loads)
    offset = 64 + 56 * count
    headers = [struct.pack("<IIQQQQQQ", 4, 4, offset, 0, 0, len(note_bytes), 0, 4)]
    body = note_bytes
    for load in loads:
        address, data, size, flags = load if len(load) == 4 else (*load, len(load[1]), 6)
        body = body.ljust((offset + len(body) + PAGE - 1) // PAGE * PAGE - offset, b"\0")
        headers.append(struct.pack("<IIQQQQQQ", 1, flags, offset + len(body), address, 0,
                                   len(data), size, PAGE))
        body += data
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 4, machine, 1, 0, 64, 0, 0, 64, 56,
                                 count, 64, 0, 0)
    return header + b"".join(headers) + body


STACK = 0x7FF000000000


def stack_core(mappings=(), machine=EM_X86_64, prstatus_size=X86_64_PRSTATUS,
               dump_stack=True):
    """A core of one thread (tid 4242) stopped at 0x401000, its stack a
    page at STACK of frame pointers leading nowhere (dumped, or not), the
    files ``mappings`` (see nt_file) mapped and not dumped."""
    import struct
    stack = STACK
    frames = struct.pack("<QQ", 0, 0x401234)  # saved rbp 0, a return address
    notes = [(1, x86_64_prstatus(4242, 0x401000, stack + 0x100, stack + 0x100,
                                 size=prstatus_size))]
    if mappings:
        notes.append((0x46494C45, nt_file(mappings)))
    page = bytes(0x100) + frames + bytes(PAGE - 0x110)
    return core_file(notes, [(stack, page)] if dump_stack else [], machine)


# -- symbol tables -----------------------------------------------------------------

TEXT = 0x401000
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_DYNSYM = 1, 2, 3, 4, 11


def symbol_elf(symbols, strings, text_size=0x10000, plt=None):
    """The bytes of an x86-64 executable whose .text (at TEXT, text_size
    bytes of zeros) the symbol table ``symbols`` (bytes of 24-byte entries,
    see symbol()) names from ``strings`` (.strtab's bytes).  ``plt``: (its
    stub bytes, .rela.plt's bytes, .dynsym's bytes, .dynstr's bytes), the
    stubs at TEXT + text_size."""
    parts = [(".text", SHT_PROGBITS, 0x6, TEXT, bytes(text_size), 0, 0, 16),
             (".symtab", SHT_SYMTAB, 0, 0, symbols, 3, 0, 24),
             (".strtab", SHT_STRTAB, 0, 0, strings, 0, 0, 0)]
    if plt is not None:
        stubs, relocations, dynsym, dynstr = plt
        first = len(parts) + 1
        parts += [(".plt", SHT_PROGBITS, 0x6, TEXT + text_size, stubs, 0, 0, 16),
                  (".rela.plt", SHT_RELA, 0x2, 0, relocations, first + 2, first, 24),
                  (".dynsym", SHT_DYNSYM, 0x2, 0, dynsym, first + 3, 0, 24),
                  (".dynstr", SHT_STRTAB, 0x2, 0, dynstr, 0, 0, 0)]
    names = b"\0" + b"".join(part[0].encode() + b"\0" for part in parts) + b".shstrtab\0"
    parts.append((".shstrtab", SHT_STRTAB, 0, 0, names, 0, 0, 0))
    body, headers = bytearray(), [bytes(64)]
    at = 64 + 56  # the ELF header, one program header
    name_at = 1
    for name, kind, flags, address, data, link, info, entsize in parts:
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, kind, flags, address,
                                   at + len(body), len(data), link, info, 8, entsize))
        name_at += len(name) + 1
        body += data
    section_headers = 64 + 56 + len(body)
    header = (b"\x7fELF\x02\x01\x01" + bytes(9)
              + struct.pack("<HHIQQQIHHHHHH", 2, EM_X86_64, 1, TEXT, 64, section_headers,
                            0, 64, 56, 1, 64, len(headers), len(headers) - 1))
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, TEXT - 0x1000, TEXT - 0x1000,
                       section_headers, section_headers + 0x100000, 0x1000)
    return header + load + bytes(body) + b"".join(headers)


def symbol(name_at, value, size=16, binding=1, kind=2, section=1):
    """One 64-bit ELF symbol: a global function of .text by default."""
    return struct.pack("<IBBHQQ", name_at, binding << 4 | kind, 0, section, value, size)


def many_symbols_elf(count):
    """``count`` functions of 16 bytes named ``f``, one after the other
    (4 M of them: 96 MB of symbols)."""
    one = symbol(1, 0, 16)
    table = bytearray(bytes(24) + one * count)
    view = memoryview(table)
    for number in range(count):
        struct.pack_into("<Q", view, 24 + 24 * number + 8, TEXT + 16 * number)
    return symbol_elf(bytes(table), b"\0f\0", text_size=16 * count)


def alias_elf(count):
    """``count`` functions at one address, each its own name (f0, f1, ...)."""
    strings = bytearray(b"\0")
    table = bytearray(bytes(24))
    for number in range(count):
        table += symbol(len(strings), TEXT + 0x100, 16)
        strings += b"f%d\0" % number
    return symbol_elf(bytes(table), bytes(strings))


def long_names_elf(length=1 << 20, count=8):
    """``count`` functions whose names are ``length`` bytes each."""
    strings = bytearray(b"\0")
    table = bytearray(bytes(24))
    for number in range(count):
        table += symbol(len(strings), TEXT + 0x100 * number, 0x100)
        strings += bytes([0x61 + number % 26]) * length + b"\0"
    return symbol_elf(bytes(table), bytes(strings))


def plt_bomb_elf(relocations=600000, slots=4):
    """A .plt of ``slots`` stubs (``jmp *GOT(%rip)``) and a .rela.plt of
    ``relocations`` JUMP_SLOT relocations of as many GOT slots (only the
    first ``slots`` of them a stub's), naming .dynsym's 1,000 symbols."""
    got = 0x600000
    plt_address = TEXT + 0x10000
    stubs = b"".join(b"\xff\x25" + struct.pack("<i", got + 8 * n - (plt_address + 16 * n + 6))
                     + bytes(10) for n in range(slots))
    rela = bytearray()
    for number in range(relocations):
        index = (number * 2654435761) % 1001 or 1
        rela += struct.pack("<QQq", got + 8 * number, index << 32 | 7, 0)
    dynsym = bytes(24) + symbol(1, 0, 0, kind=2, section=0) * 1000
    return symbol_elf(bytes(24) + symbol(1, TEXT, 16), b"\0main\0",
                      plt=(stubs, bytes(rela), dynsym, b"\0puts\0"))


def many_stacks_archive(count=100000, depth=12):
    """Archive bytes of ``count`` distinct stacks of ``depth`` frames in no
    image (named by their addresses): frames near the root shared, the
    rest each stack's own."""
    archive = Archive()
    plain = archive.add_image_map(bytes([0x02, 0x00, 0x00]))  # no images
    for number in range(count):
        frames = [cbf.Frame("pc", 0x500000 + 16 * number)]
        frames += [cbf.Frame("ra", 0x600000 + 16 * (number % (7 << level)) + level)
                   for level in range(depth - 1)]
        trace = archive.add_trace(cbf.encode(frames))
        archive.add_event(Event(trace, plain, thread="1", reason="SIGPROF"))
    return MAGIC + archive.pending_bytes()
