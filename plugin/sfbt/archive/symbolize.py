"""Offline symbolization: function names and source lines from ELF files
(symbol tables and DWARF line tables, through pyelftools), for archived
backtraces read outside the debugger."""

import os
import struct
import zlib
from bisect import bisect_right

from ..debuginfo import DebugFiles
from ..elf import SHF_COMPRESSED, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB, ElfError, ElfImage
from ..files import open_regular
from ..printable import printable
from .imagemap import PerImageMap, image_finder


def _reason(error):
    """One line for an exception raised while reading a damaged file."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def function_at(table, address):
    """The name of the function holding ``address`` in ``table``:
    (sorted [(start, end, name)], their starts); None outside them."""
    symbols, starts = table
    i = bisect_right(starts, address) - 1
    if i < 0:
        return None
    start, end, name = symbols[i]
    return name if address < end else None


#: A compressed debug section may expand to this many times the file's size.
MAX_EXPANSION = 64
ELFCOMPRESS_ZLIB = 1


def _check_sections(image):
    """Refuse sections that pyelftools would read past the end of the file
    (it allocates the section's size before reading) or decompress beyond
    reason, and symbol tables whose entries are not 64-bit ones."""
    file_size = image.file_size
    for section in image.sections():
        if section.type == SHT_NOBITS:
            continue
        if section.offset + section.size > file_size:
            raise ElfError(f"section {section.name or section.index} of {section.size} "
                           f"bytes at {section.offset:#x} runs past the end of the file "
                           f"({file_size} bytes)")
        if section.flags & SHF_COMPRESSED and section.size >= 24:
            (size,) = struct.unpack_from(image.header.endian + "Q",
                                         image.read(section.offset + 8, 8))
            if size > MAX_EXPANSION * file_size + (1 << 20):
                raise ElfError(f"section {section.name} claims to expand to {size} bytes")
        if section.type in (SHT_SYMTAB, SHT_DYNSYM) and section.entsize != 24:
            raise ElfError(f"symbol table {section.name} has entries of "
                           f"{section.entsize} bytes, not 24")


def _section_bytes(image, section):
    """A section's bytes, inflated when SHF_COMPRESSED with zlib (to at
    most the size its header gives, itself bounded by MAX_EXPANSION);
    None for another compression or a size beyond reason."""
    data = image.section_data(section)
    if not section.flags & SHF_COMPRESSED:
        return data
    kind, _, size = struct.unpack_from(image.header.endian + "IIQ", data)
    if kind != ELFCOMPRESS_ZLIB or size > MAX_EXPANSION * len(data) + (1 << 20):
        return None
    return zlib.decompressobj().decompress(data[24:], size) if size else b""


def address_ranges(image):
    """Sorted [(start, end, unit offset)] of an ElfImage's .debug_aranges:
    which compilation unit holds an address, so that only its line program
    is read.  Empty when it has none or it cannot be read."""
    ranges = []
    try:
        section = image.section(".debug_aranges")
        data = _section_bytes(image, section) if section is not None else None
        if not data:
            return []
        endian = image.header.endian
        at = 0
        while at + 4 <= len(data):
            (length,) = struct.unpack_from(endian + "I", data, at)
            offset_size, head = 4, at + 4
            if length == 0xFFFFFFFF:
                (length,) = struct.unpack_from(endian + "Q", data, head)
                offset_size, head = 8, head + 8
            end = head + length
            unit = struct.unpack_from(endian + ("I" if offset_size == 4 else "Q"),
                                      data, head + 2)[0]
            address_size = data[head + 2 + offset_size]
            if address_size != 8:
                at = end
                continue
            pairs = head + 2 + offset_size + 2
            pairs += -(pairs - at) % 16
            for start, size in struct.iter_unpack(endian + "QQ",
                                                  data[pairs:end - (end - pairs) % 16]):
                if start == 0 and size == 0:
                    break
                if size:
                    ranges.append((start, start + size, unit))
            at = end
    except (OSError, ElfError, struct.error, zlib.error, IndexError):
        pass
    ranges.sort()
    return ranges


class ElfSymbolizer:
    """Names and lines for the file addresses of one ELF file; tables are
    built on first use."""

    def __init__(self, path):
        # pyelftools is imported on first use: `sfbt stack` takes only
        # function_at from here
        from elftools.elf.elffile import ELFFile
        self.path = path
        self._stream = open_regular(path)
        try:
            image = ElfImage.from_file(self._stream, path)
            self.build_id = image.build_id()
            self.base_address = image.first_load_address() or 0
            _check_sections(image)
            self._elf = ELFFile(self._stream)
        except Exception as error:  # pyelftools on damaged input: many kinds
            self._stream.close()
            raise ElfError(f"{path}: not a readable ELF file: {_reason(error)}") from None
        self._functions = None
        self._lines = None
        self._ranges = None  # (address_ranges, their starts)
        self._units = {}  # unit offset -> (rows, starts)
        self._calls = {}  # unit offset -> UnitCalls

    def close(self):
        self._stream.close()

    def _function_table(self):
        """(symbols, starts): (start, end, name) of each function, sorted.
        A symbol without a size (hand-written assembly: _init, _fini) ends
        where the next function starts, and at the latest at the end of
        its section, as GDB's minimal symbols do."""
        if self._functions is None:
            self._functions = self._table("symbol table", self._read_functions)
        return self._functions

    def _table(self, what, read):
        """read()'s table; pyelftools' errors on a damaged file (of many
        kinds) become one ElfError naming the file."""
        try:
            return read()
        except Exception as error:
            raise ElfError(f"{self.path}: unreadable {what}: {_reason(error)}") from None

    def _read_functions(self):
        found = []
        for name in (".symtab", ".dynsym"):
            table = self._elf.get_section_by_name(name)
            if table is None:
                continue
            for symbol in table.iter_symbols():
                if (symbol["st_info"]["type"] == "STT_FUNC"
                        and symbol["st_value"] and symbol.name):
                    found.append((symbol["st_value"], symbol["st_size"], symbol.name,
                                  symbol["st_shndx"]))
            if found:
                break
        found.sort()
        symbols = []
        for index, (start, size, name, section) in enumerate(found):
            if size:
                end = start + size
            else:
                end = self._section_end(section, start)
                following = next((s[0] for s in found[index + 1:] if s[0] > start), None)
                if following is not None:
                    end = min(end, following)
            symbols.append((start, end, name))
        return symbols, [s[0] for s in symbols]

    def _section_end(self, index, start):
        """The end of section ``index`` (a symbol's st_shndx), or just past
        ``start`` when the symbol names no section."""
        if not isinstance(index, int) or not 0 < index < self._elf.num_sections():
            return start + 1
        section = self._elf.get_section(index)
        return section["sh_addr"] + section["sh_size"]

    def function(self, address):
        return function_at(self._function_table(), address)

    def _line_table(self):
        """(rows, starts) of every unit: for a file without .debug_aranges."""
        if self._lines is None:
            self._lines = self._table("DWARF line table", self._read_lines)
        return self._lines

    def _read_lines(self):
        rows = []
        if self._elf.has_dwarf_info():
            dwarf = self._elf.get_dwarf_info()
            for unit in dwarf.iter_CUs():
                program = dwarf.line_program_for_CU(unit)
                if program is not None:
                    rows += _line_rows(program)
        return _indexed(preferred_rows(rows))

    def _unit_at(self, address):
        """The offset of the unit whose .debug_aranges hold the address;
        None when no unit does, False when the file has no aranges."""
        if self._ranges is None:
            ranges = address_ranges(ElfImage.from_file(self._stream, self.path))
            self._ranges = (ranges, [start for start, _, _ in ranges])
        ranges, starts = self._ranges
        if not ranges:
            return False
        i = bisect_right(starts, address) - 1
        if i < 0 or address >= ranges[i][1]:
            return None
        return ranges[i][2]

    def _rows_at(self, address):
        """(rows, starts) of the unit whose .debug_aranges hold the address
        (none when no unit does), or of every unit without them."""
        unit = self._unit_at(address)
        if unit is False:
            return self._line_table()
        if unit is None:
            return [], []
        if unit not in self._units:
            self._units[unit] = self._table(
                "DWARF line table",
                lambda: _indexed(unit_rows(self._elf.get_dwarf_info(), unit)))
        return self._units[unit]

    def inlined(self, address):
        """[InlinedCall] around an address, innermost first (none in a
        file without .debug_aranges)."""
        from ..dwarf.inline import UnitCalls, unit_calls
        unit = self._unit_at(address)
        if unit is None or unit is False:
            return []
        if unit not in self._calls:
            self._calls[unit] = UnitCalls(self._table(
                "DWARF inline entries", lambda: unit_calls(self._elf.get_dwarf_info(), unit)))
        return self._calls[unit].chain(address)

    def line(self, address):
        """(file, line) for an address, or None."""
        rows, starts = self._rows_at(address)
        i = bisect_right(starts, address) - 1
        if i < 0 or rows[i][1] is None:
            return None
        return rows[i][1], rows[i][2]


def _indexed(rows):
    return rows, [row[0] for row in rows]


def preferred_rows(rows):
    """Line rows sorted by address, one per address: like GDB, a statement
    row where there are several."""
    chosen = {}
    for row in sorted(rows, key=lambda row: row[0]):
        if row[3] or not chosen.get(row[0], (0, 0, 0, False))[3]:
            chosen[row[0]] = row
    return [chosen[address] for address in sorted(chosen)]


def unit_rows(dwarf, offset):
    """preferred_rows of the compilation unit at ``offset`` in .debug_info
    (pyelftools' DWARFInfo ``dwarf``)."""
    program = dwarf.line_program_for_CU(dwarf.get_CU_at(offset))
    return preferred_rows(_line_rows(program)) if program is not None else []


def file_names(program):
    """The names of a line program's files, by index (0-based: DWARF 5's
    file numbers; earlier versions' numbers less one)."""
    version = program["version"]
    directories = program["include_directory"]
    names = []
    for entry_file in program["file_entry"]:
        name = _text(entry_file.name)
        directory_index = entry_file.dir_index if version >= 5 else entry_file.dir_index - 1
        if directory_index > 0 or (version < 5 and directory_index >= 0):
            if 0 <= directory_index < len(directories) and not name.startswith("/"):
                name = os.path.join(_text(directories[directory_index]), name)
        names.append(name)
    return names


def _line_rows(program):
    version = program["version"]
    names = file_names(program)
    rows = []
    for entry in program.get_entries():
        state = entry.state
        if state is None:
            continue
        if state.end_sequence:
            rows.append((state.address, None, 0, True))
            continue
        index = state.file if version >= 5 else state.file - 1
        if not 0 <= index < len(names):
            continue
        rows.append((state.address, names[index], state.line, bool(state.is_stmt)))
    return rows


class Symbolizer:
    """Finds the ELF file for each archived image (by build id among the
    files given with --exe and in --debug-dir, else the image's own path),
    and its separate debug file (``debug_files``), and symbolizes run-time
    addresses against them."""

    def __init__(self, executables=(), debug_dirs=(), debug_files=None):
        self._candidates = list(executables)
        for directory in debug_dirs:
            for root, _, names in os.walk(directory):
                self._candidates += [os.path.join(root, n) for n in sorted(names)]
        self._debug_files = debug_files or DebugFiles()
        self._by_path = {}
        self._by_build_id = None
        self._for_image = {}  # (path, build id) -> ElfSymbolizer or None
        self._from = {}  # path -> " from PATH", one string for every frame
        self._describers = PerImageMap(self._describer)

    def _open(self, path):
        if path not in self._by_path:
            try:
                self._by_path[path] = ElfSymbolizer(path)
            except (OSError, ElfError):
                self._by_path[path] = None
        return self._by_path[path]

    def _index_build_ids(self):
        if self._by_build_id is None:
            self._by_build_id = {}
            for path in self._candidates:
                symbolizer = self._open(path)
                if symbolizer is not None and symbolizer.build_id:
                    self._by_build_id.setdefault(symbolizer.build_id, symbolizer)
        return self._by_build_id

    def for_image(self, image):
        key = (image.path, image.build_id)
        if key not in self._for_image:
            self._for_image[key] = self._find_for_image(image)
        return self._for_image[key]

    def _find_for_image(self, image):
        build_id = image.build_id.hex() if image.build_id else None
        return self._with_debug_file(self._find_file(image, build_id), build_id, image.path)

    def _find_file(self, image, build_id):
        if build_id:
            found = self._index_build_ids().get(build_id)
            if found is not None:
                return found
        own = self._open(image.path) if image.path and os.path.exists(image.path) else None
        if own is not None and (not build_id or own.build_id in (None, build_id)):
            return own
        if not build_id and len(self._candidates) == 1:
            return self._open(self._candidates[0])
        return None

    def _with_debug_file(self, found, build_id, what):
        """The symbolizer of the separate debug file of ``found`` (an
        ElfSymbolizer or None: only the build id is known), else found."""
        debug = self._debug_files.find(found.path if found else None,
                                       build_id or (found.build_id if found else None),
                                       what)
        return (self._open(debug) if debug else None) or found

    def describe_file_address(self, address):
        """(function, location suffix) for an address of the --exe file
        itself (a non-PIE program's run-time addresses are its file's),
        escaped (sfbt.printable)."""
        if not self._candidates:
            return "??", " ()"
        symbolizer = self._open(self._candidates[0])
        symbolizer = self._with_debug_file(symbolizer, None, self._candidates[0]) \
            if symbolizer is not None else None
        if symbolizer is None:
            return "??", " ()"
        name = printable(symbolizer.function(address) or "??")
        line = symbolizer.line(address)
        return name, f" at {printable(line[0])}:{line[1]}" if line else " ()"

    def describer(self, images):
        """describe(address) for the images of one image map, remembering
        its answers (an archive's traces share most of their addresses)."""
        return self._describers(images)

    def _describer(self, images):
        find = image_finder(images)
        answers = {}

        def describe(address):
            answer = answers.get(address)
            if answer is None:
                answer = self._describe_in(address, find(address))
                if len(answers) >= 1 << 20:
                    answers.clear()
                answers[address] = answer
            return answer
        return describe

    def describe(self, address, images):
        """(function, location suffix) in sframe-bt's words, escaped
        (sfbt.printable); a list of them, innermost first, where calls
        were inlined at the address (sfbt.archive.report.frames_of)."""
        image = next((i for i in images if i.base <= address < i.end_of_text), None)
        return self._describe_in(address, image)

    def _describe_in(self, address, image):
        if image is None:
            return "??", " ()"
        where = self._from.get(image.path)
        if where is None:
            where = self._from[image.path] = f" from {printable(image.path)}"
        symbolizer = self.for_image(image)
        if symbolizer is None:
            return "??", where
        file_address = address - image.base + symbolizer.base_address
        function = symbolizer.function(file_address) or "??"
        line = symbolizer.line(file_address)
        calls = symbolizer.inlined(file_address)
        if calls:
            from ..dwarf.inline import expanded
            return [(printable(name), f" at {printable(line[0])}:{line[1]}" if line else where)
                    for name, line in expanded(calls, function, line)]
        name = printable(function)
        if line is not None:
            return name, f" at {printable(line[0])}:{line[1]}"
        return name, where
