"""DWARF line programs (versions 2 to 5) read with struct, without
pyelftools: the unit's ``DW_AT_stmt_list`` from its first DIE, then its
line program run into rows [(address, file name, line, is_stmt)], an
end of sequence as (address, None, 0, True), as pyelftools gives them.

A file is named as GDB names its symtab (dwarf2_start_subfile,
buildsym's start_subfile): its entry's name joined to its directory's
(DWARF 5's directory 0, the compilation directory, too; before 5 that
one never), and a name that comes out as the unit's own source file's
full path (its DW_AT_name, joined to an absolute DW_AT_comp_dir)
printed as the unit's DW_AT_name says it (where the unit is not known,
as DWARF 5's file 0, the unit's own, says it).  So a program built by ``gcc a.c`` shows
``a.c``, ``gcc sub/a.c`` ``sub/a.c``, and Debian's C library, whose
compilation directory is ``./nptl``, ``./nptl/futex-internal.c``."""

from __future__ import annotations

import os
import struct

from ..elf import ElfImage
from ..errors import left_out
from .compressed import Inflating, compression, debug_section
from .entries import (BLOCK_FORMS, DW_FORM_ADDR, DW_FORM_LINE_STRP, DW_FORM_SDATA,
                      DW_FORM_STRING, FIXED_SIZES, LEB_FORMS, OFFSET_FORMS, Sections, Unit,
                      section_string)
from .encoding import read_sleb128, read_uleb128

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Literal, Optional, Tuple

    from .entries import Data

    Row = Tuple[int, Optional[str], int, bool]
    #: a unit's own source file: (its full path, the name GDB shows for it)
    Primary = Tuple[str, str]

DW_AT_STMT_LIST = 0x10
DW_AT_NAME = 0x03
DW_AT_COMP_DIR = 0x1B
DW_LNCT_PATH = 1
DW_LNCT_DIRECTORY_INDEX = 2
#: bytes of one line program read at most (a Python step for each), and
#: of all of them in a file whose units do not say what they hold; the
#: rest is left out, and said so
MAX_PROGRAM = 1 << 23
#: rows a file's line programs give at most (each some hundred bytes in
#: memory); those past them are left out, and said so.  The C library's
#: largest unit has some ten thousand.
MAX_ROWS = 500_000


def _cstring(data: bytes, at: int) -> Tuple[bytes, int]:
    end = data.index(b"\0", at)
    return data[at:end], end + 1


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


class DwarfBytes:
    """The DWARF sections of one image, read on first use; a compressed
    one (sfbt.dwarf.compressed: SHF_COMPRESSED, or the ``.zdebug_*`` twin
    of the ``.debug_*`` name asked for) inflated only as far as what is
    asked of it."""

    def __init__(self, image: ElfImage):
        self.image = image
        self.endian = image.header.endian
        self.byteorder: Literal["little", "big"] = "big" if self.endian == ">" else "little"
        self._sections: Dict[str, bytes] = {}
        self._inflating: Dict[str, Optional[Inflating]] = {}
        self._entry_sections: Optional[Sections] = None

    def left_out(self, what: str) -> None:
        """Say that a limit left ``what`` (a section+offset: what) out of
        the answer (sfbt.errors.left_out), naming the file."""
        left_out(f"{self.image.name}: {what} left out")

    def __getitem__(self, name: str) -> bytes:
        """A whole section."""
        data = self._sections.get(name)
        if data is None:
            section = debug_section(self.image, name)
            inflating = self._inflated(name)
            if inflating is not None:
                data = bytes(inflating.to(1 << 62))
            else:
                data = self.image.section_data(section) if section is not None else b""
            self._sections[name] = data
        return data

    def piece(self, name: str, offset: int, size: int) -> bytes:
        """``size`` bytes of a section from ``offset`` (fewer at its end)."""
        section = debug_section(self.image, name)
        if section is None or offset < 0:
            return b""
        inflating = self._inflated(name)
        if inflating is not None:
            with memoryview(inflating.to(offset + size)) as view:  # one copy, not two
                return view[offset:offset + size].tobytes()
        size = min(size, section.size - offset)
        return self.image.read(section.offset + offset, size) if size > 0 else b""

    def _inflated(self, name: str) -> Optional[Inflating]:
        """The inflation of a compressed section, None for one stored as
        it is (or absent)."""
        if name not in self._inflating:
            section = debug_section(self.image, name)
            start = compression(self.image, section) if section is not None else None
            self._inflating[name] = Inflating(self.image, section, start) \
                if section is not None and start is not None else None
        return self._inflating[name]

    def program(self, offset: int) -> bytes:
        """The line program at ``offset`` of .debug_line, its first
        MAX_PROGRAM bytes (and a note of the rest, left out)."""
        size = self.unit_size(".debug_line", offset)
        if size > MAX_PROGRAM:
            self.left_out(f".debug_line+{offset:#x}: line program past its first "
                          f"{MAX_PROGRAM} bytes")
        return self.piece(".debug_line", offset, min(size, MAX_PROGRAM))

    def unit_size(self, name: str, offset: int) -> int:
        """The size of the unit at ``offset``, as its length says."""
        return _unit_head(self.piece(name, offset, 12), 0, self.endian)[2]

    def grow(self, field: str, end: int) -> bool:
        """Inflate the section ``.debug_<field>``, if it is compressed, to
        ``end`` at least; whether it has more (Sections.grow)."""
        inflating = self._inflated(".debug_" + field)
        if inflating is None:
            return False
        inflating.to(end)
        return not inflating.whole

    def _as_read(self, name: str) -> Data:
        """A section's bytes: all of them, unless it is compressed and not
        inflated whole yet (then those inflated so far, grown in place)."""
        inflating = self._inflated(name)
        if inflating is not None and name not in self._sections:
            return inflating.data
        return self[name]

    def entry_sections(self) -> Sections:
        """The sections a unit's entries refer to (sfbt.dwarf.entries),
        each compressed one inflated only as far as they are read."""
        if self._entry_sections is None:
            read = self._as_read
            self._entry_sections = Sections(
                read(".debug_info"), read(".debug_abbrev"), read(".debug_str"),
                read(".debug_line_str"), read(".debug_addr"), read(".debug_str_offsets"),
                read(".debug_rnglists"), read(".debug_ranges"), self.endian == "<", self.grow,
                {})
        return self._entry_sections

    def string(self, form: int, value: int) -> bytes:
        """The string a strp / line_strp form's offset names."""
        return section_string(self.entry_sections(),
                              "line_str" if form == DW_FORM_LINE_STRP else "str", value)


def _unit_head(data: bytes, at: int, endian: str) -> Tuple[int, int, int]:
    """(offset size, the position after unit_length, the unit's end)."""
    (length,) = struct.unpack_from(endian + "I", data, at)
    if length == 0xFFFFFFFF:
        (length,) = struct.unpack_from(endian + "Q", data, at + 4)
        return 8, at + 12, at + 12 + length
    return 4, at + 4, at + 4 + length


def _form(data: bytes, at: int, form: int, offset_size: int, address_size: int,
          byteorder: Literal["little", "big"]) -> Tuple[object, int]:
    """(value, position after it) of one value of a line table's entry
    formats (sfbt.dwarf.entries' forms): an int, or the bytes of a string
    or block."""
    if form == DW_FORM_STRING:
        return _cstring(data, at)
    if form in LEB_FORMS:
        return (read_sleb128 if form == DW_FORM_SDATA else read_uleb128)(data, at)
    if form in BLOCK_FORMS:
        width = BLOCK_FORMS[form]
        if width:
            length = int.from_bytes(data[at:at + width], byteorder)
            at += width
        else:
            length, at = read_uleb128(data, at)
        return data[at:at + length], at + length
    size = FIXED_SIZES.get(form, offset_size if form in OFFSET_FORMS
                           else address_size if form == DW_FORM_ADDR else None)
    if size is None:
        raise ValueError(f"unknown DWARF form {form:#x} in a line table")
    if at + size > len(data):
        raise ValueError("line table entry past the end of its program")
    return int.from_bytes(data[at:at + size], byteorder), at + size


def stmt_list(dwarf: DwarfBytes, unit: int) -> Optional[Tuple[int, Optional[Primary]]]:
    """(the offset in .debug_line of the line program of the unit at
    ``unit`` in .debug_info, its Primary file), or None when its first
    entry has no line program."""
    top = Unit(dwarf.entry_sections(), unit, top_only=True)
    found = top.attributes(top.first, {DW_AT_STMT_LIST, DW_AT_NAME, DW_AT_COMP_DIR})[0]
    if DW_AT_STMT_LIST not in found:
        return None
    name, directory = (top.string(found[key]) if key in found else None
                       for key in (DW_AT_NAME, DW_AT_COMP_DIR))
    primary = None
    if name:
        shown = _text(name)
        if shown.startswith("/"):
            primary = (shown, shown)
        elif directory and directory.startswith(b"/"):  # (GDB compares full paths)
            primary = (os.path.join(_text(directory), shown), shown)
    return found[DW_AT_STMT_LIST][1], primary


def unit_rows(dwarf: DwarfBytes, unit: int, debugger: str = "gdb") -> List[Row]:
    """preferred_rows (``debugger``'s) of the unit at ``unit`` in .debug_info."""
    program = stmt_list(dwarf, unit)
    if program is None:
        return []
    offset, primary = program
    rows = program_rows(dwarf, dwarf.program(offset), 0, MAX_ROWS, primary)[0]
    if len(rows) >= MAX_ROWS:
        dwarf.left_out(f".debug_line+{offset:#x}: line rows past the first {MAX_ROWS}")
    return preferred_rows(rows, debugger)


def every_unit_rows(dwarf: DwarfBytes, debugger: str = "gdb") -> List[Row]:
    """preferred_rows (``debugger``'s) of every line program: for a file
    without .debug_aranges."""
    rows: List[Row] = []
    data = dwarf.piece(".debug_line", 0, MAX_PROGRAM + 1)
    if len(data) > MAX_PROGRAM:
        dwarf.left_out(f".debug_line+{MAX_PROGRAM:#x}: line programs past the first "
                       f"{MAX_PROGRAM} bytes")
        data = data[:MAX_PROGRAM]
    at = 0
    while at < len(data):
        if len(rows) >= MAX_ROWS:
            dwarf.left_out(f".debug_line+{at:#x}: line rows past the first {MAX_ROWS}")
            break
        found, at = program_rows(dwarf, data, at, MAX_ROWS - len(rows))
        rows += found
    return preferred_rows(rows, debugger)


def preferred_rows(rows: List[Row], debugger: str = "gdb") -> List[Row]:
    """Line rows sorted by address, one per address: the one ``debugger``
    ("lldb", or GDB's otherwise) takes where several rows start there.
    GDB takes the last statement row, LLDB the last row (its line table
    keeps only the last of rows at one address): where GCC gives an
    address the lines of several statements, the last one not a
    statement row (code inlined there, a function's first line after
    its prologue), the two name different lines."""
    last_wins = debugger == "lldb"
    chosen: Dict[int, Row] = {}
    for row in sorted(rows, key=lambda row: row[0]):
        if last_wins or row[3] or not chosen.get(row[0], (0, None, 0, False))[3]:
            chosen[row[0]] = row
    return [chosen[address] for address in sorted(chosen)]


def program_rows(dwarf: DwarfBytes, data: bytes, at: int, most: int,
                 primary: Optional[Primary] = None) -> Tuple[List[Row], int]:
    """(rows, the offset after it) of the line program at ``at`` in data
    (.debug_line, or the program alone) of a unit whose own file is
    ``primary`` (None: not known): its ``most`` first rows."""
    state, program, end = _header(dwarf, data, at, primary)
    return state.run(data, program, end, dwarf.endian, most), end


def unit_files(dwarf: DwarfBytes, unit: int) -> Tuple[List[str], int]:
    """(the names of the files of the line program of the unit at
    ``unit`` in .debug_info, by index; the number of the first: 0 in
    DWARF 5, 1 before), as its header gives them; no names when the unit
    has no line program."""
    program = stmt_list(dwarf, unit)
    if program is None:
        return [], 0
    state = _header(dwarf, dwarf.program(program[0]), 0, program[1])[0]
    return state.names, state.base


def _header(dwarf: DwarfBytes, data: bytes, at: int, primary: Optional[Primary] = None
            ) -> Tuple["_Machine", int, int]:
    """(the state machine its header sets up, the offset of its opcodes,
    the offset after it) of the line program at ``at`` in data, of a unit
    whose own file is ``primary``."""
    endian = dwarf.endian
    offset_size, at, end = _unit_head(data, at, endian)
    if end > len(data) and len(data) < MAX_PROGRAM:
        raise ValueError("line program runs past the end of .debug_line")
    end = min(end, len(data))  # a program cut at MAX_PROGRAM: its first bytes
    (version,) = struct.unpack_from(endian + "H", data, at)
    at += 2
    address_size = 8
    if version >= 5:
        address_size = data[at]
        at += 2
    header_length = int.from_bytes(data[at:at + offset_size], dwarf.byteorder)
    at += offset_size
    program = at + header_length
    minimum_length = data[at]
    at += 2 if version >= 4 else 1  # maximum operations per instruction
    default_is_stmt, line_base, line_range, opcode_base = struct.unpack_from("<?bBB", data, at)
    if not line_range:
        raise ValueError("line program with a line range of 0")
    at += 4
    lengths = data[at:at + opcode_base - 1]
    at += opcode_base - 1
    if version >= 5:
        entries, at = _entries(dwarf, data, at, program, offset_size, address_size)
        directories = [_text(path) for path, _ in entries]
        files, at = _entries(dwarf, data, at, program, offset_size, address_size)
        names = [_joined(path, index, directories, True) for path, index in files]
        if primary is None and files and files[0][1] == 0 and directories \
                and directories[0].startswith("/") and not files[0][0].startswith(b"/"):
            # the unit not known (every_unit_rows): DWARF 5's file 0 is its own
            primary = (names[0], _text(files[0][0]))
    else:
        directories = []
        while data[at]:
            directory, at = _cstring(data, at)
            directories.append(_text(directory))
        at += 1
        names = []
        while data[at]:
            at = _v4_file(data, at, directories, names)
    if primary is not None:
        names = [primary[1] if name == primary[0] else name for name in names]
    state = _Machine(names, 0 if version >= 5 else 1, directories, minimum_length,
                     default_is_stmt, line_base, line_range, opcode_base, lengths)
    return state, program, end


def _joined(path: bytes, index: int, directories: List[str], join: bool) -> str:
    name = _text(path)
    if join and 0 <= index < len(directories) and not name.startswith("/"):
        name = os.path.join(directories[index], name)
    return name


def _v4_file(data: bytes, at: int, directories: List[str], names: List[str]) -> int:
    """Read one file entry (DWARF 2 to 4) into names; the position after it."""
    path, at = _cstring(data, at)
    index, at = read_uleb128(data, at)
    _, at = read_uleb128(data, at)  # modification time
    _, at = read_uleb128(data, at)  # length
    names.append(_joined(path, index - 1, directories, index >= 1))
    return at


def _entries(dwarf: DwarfBytes, data: bytes, at: int, program: int, offset_size: int,
             address_size: int) -> Tuple[List[Tuple[bytes, int]], int]:
    """DWARF 5 directory or file entries: [(path, directory index)]; no
    more of them than bytes left before ``program`` (the header's end:
    each has a path, of one byte at least)."""
    count = data[at]
    at += 1
    formats = []
    for _ in range(count):
        kind, at = read_uleb128(data, at)
        form, at = read_uleb128(data, at)
        formats.append((kind, form))
    total, at = read_uleb128(data, at)
    if total > program - at:
        raise ValueError(f"line table header at {at:#x} claims {total} entries in "
                         f"{max(0, program - at)} bytes")
    found: List[Tuple[bytes, int]] = []
    for _ in range(total):
        path, index = b"", 0
        for kind, form in formats:
            value, at = _form(data, at, form, offset_size, address_size, dwarf.byteorder)
            if kind == DW_LNCT_PATH and isinstance(value, int):
                path = dwarf.string(form, value)
            elif kind == DW_LNCT_PATH and isinstance(value, bytes):
                path = value
            elif kind == DW_LNCT_DIRECTORY_INDEX and isinstance(value, int):
                index = value
        found.append((path, index))
    return found, at


class _Machine:
    """The line-number state machine of one program (DWARF 5, 6.2.2)."""

    def __init__(self, names: List[str], base: int, directories: List[str],
                 minimum_length: int, default_is_stmt: bool, line_base: int, line_range: int,
                 opcode_base: int, lengths: bytes):
        self.names = names
        self.lengths = lengths  # of each standard opcode's operands
        self.base = base  # the number of the first file: 1 before DWARF 5
        self.directories = directories
        self.minimum_length = minimum_length
        self.default_is_stmt = default_is_stmt
        self.line_base = line_base
        self.line_range = line_range
        self.opcode_base = opcode_base

    def run(self, data: bytes, at: int, end: int, endian: str, most: int) -> List[Row]:
        """The program's rows from ``at`` to ``end`` of data, its
        ``most`` first."""
        rows: List[Row] = []
        lengths = self.lengths
        names, step = self.names, self.minimum_length
        address, file, line, is_stmt = 0, 1, 1, self.default_is_stmt

        def emit() -> None:
            index = file - self.base
            if 0 <= index < len(names):
                rows.append((address, names[index], line, bool(is_stmt)))

        while at < end and len(rows) < most:
            opcode = data[at]
            at += 1
            if opcode >= self.opcode_base:
                adjusted = opcode - self.opcode_base
                address += adjusted // self.line_range * step
                line += self.line_base + adjusted % self.line_range
                emit()
            elif opcode == 0:  # an extended opcode
                length, at = read_uleb128(data, at)
                after = at + length
                kind = data[at] if length else 0
                if kind == 1:  # end of sequence
                    rows.append((address, None, 0, True))
                    address, file, line, is_stmt = 0, 1, 1, self.default_is_stmt
                elif kind == 2:
                    address = int.from_bytes(data[at + 1:after], "big" if endian == ">"
                                             else "little")
                elif kind == 3 and self.base == 1:  # define a file (before DWARF 5)
                    _v4_file(data, at + 1, self.directories, names)
                at = after
            elif opcode == 1:
                emit()
            elif opcode == 2:
                value, at = read_uleb128(data, at)
                address += value * step
            elif opcode == 3:
                value, at = read_sleb128(data, at)
                line += value
            elif opcode == 4:
                file, at = read_uleb128(data, at)
            elif opcode == 6:
                is_stmt = not is_stmt
            elif opcode == 8:
                address += (255 - self.opcode_base) // self.line_range * step
            elif opcode == 9:
                address += struct.unpack_from(endian + "H", data, at)[0]
                at += 2
            else:  # operands this reader has no use for
                for _ in range(lengths[opcode - 1]):
                    _, at = read_uleb128(data, at)
        return rows
