"""Names and source lines of run-time addresses, for `sfbt stack`.

Function names come from the module's symbol table (that of its separate
debug file when there is one: sfbt.debuginfo), read with
sfbt's own ELF reader.  Source lines come from DWARF through pyelftools,
but only for the compilation unit that holds the address (found through
.debug_aranges).  The function table, the address ranges and each unit's
rows are kept in the ``symbols`` part of sfbt's private cache (sfbt.cache),
keyed by the file they were read from: the first look-up in a large
library costs one unit's parse, later runs read the cache.  The vDSO's
names come from the image its Module carries."""

import io
import json
import os
import struct
from bisect import bisect_right

from .. import progress
from ..archive.symbolize import address_ranges, function_at, unit_rows
from ..cache import Cache, identity
from ..debuginfo import DebugFiles
from ..dwarf.inline import UnitCalls, expanded, unit_calls
from ..elf import ElfError, ElfImage, open_elf
from ..files import open_regular
from .mappings import display_path

STT_FUNC = 2
STT_GNU_IFUNC = 10
STB_LOCAL = 0
STB_GLOBAL = 1
#: bumped when what the cache holds changes meaning
CACHE_FORMAT = 3
CACHE = Cache("symbols")
#: what each kind of entry holds: rows of these types
ROW_TYPES = {"functions": (int, int, str), "aranges": (int, int, int),
             "lines": (int, (str, type(None)), int, bool), "inlines": (int, int, list)}


def _function_symbols(image):
    """Sorted [(start, end, name)] of the image's function symbols
    (.symtab, else .dynsym); of several names at one address, a global
    one is kept.  A symbol without a size ends where the next one starts."""
    try:
        sections = image.sections()
        for wanted in (".symtab", ".dynsym"):
            table = image.section(wanted)
            if table is None or table.link >= len(sections):
                continue
            strings = image.section_data(sections[table.link])
            data = image.section_data(table)
            found = {}
            unpack = struct.Struct(image.header.endian + "IBBHQQ").iter_unpack
            for name_at, info, _, shndx, value, size in unpack(data[:len(data) // 24 * 24]):
                kind, binding = info & 0xF, info >> 4
                if kind not in (STT_FUNC, STT_GNU_IFUNC) or not value or not shndx:
                    continue
                end = strings.find(b"\0", name_at)
                # bytes that are not UTF-8 kept, to be printed escaped
                name = strings[name_at:end].decode("utf-8", "surrogateescape")
                # a global name, else a weak one, else a local one;
                # versioned names (clock_nanosleep@GLIBC_2.2.5) last
                rank = (binding == STB_LOCAL) + (binding not in (STB_GLOBAL, STB_LOCAL)) \
                    + 3 * ("@" in name)
                old = found.get(value)
                if old is None or rank < old[0]:
                    found[value] = (rank, size, name)
            if found:
                return _with_ends(sorted((a, s, n) for a, (_, s, n) in found.items()))
    except (OSError, ElfError, struct.error):
        return []
    return []


def _with_ends(symbols):
    """[(start, end, name)] from sorted [(start, size, name)]."""
    ends = []
    for index, (start, size, name) in enumerate(symbols):
        following = symbols[index + 1][0] if index + 1 < len(symbols) else start + 1
        ends.append((start, start + size if size else following, name))
    return ends


class ModuleSymbols:
    """The names and lines of one module's file addresses."""

    def __init__(self, module, debug_files=None):
        self.module = module
        #: the file names and lines come from; None for a module without one
        self.path = None if module.image is not None else (
            (debug_files or DebugFiles()).find(module.path, module.build_id)
            or module.path)
        self._functions = None
        self._line_stream = None  # the file DWARF lines come from, False if none
        self._dwarf = None  # pyelftools DWARFInfo, False when there is none
        self._aranges = None
        self._arange_starts = None
        self._units = {}  # CU offset -> (rows, starts)
        self._calls = {}  # CU offset -> UnitCalls

    def function(self, address):
        if self._functions is None:
            symbols = self._kept(self.path, "functions", _function_symbols)
            if not symbols and self.path not in (None, self.module.path):
                symbols = self._kept(self.module.path, "functions", _function_symbols)
            self._functions = (symbols, [s[0] for s in symbols])
        return function_at(self._functions, address)

    def _kept(self, path, kind, build):
        """build(ElfImage) of the ELF file at path (of the module's image
        when path is None), kept in the cache under what the file is;
        [] when it cannot be read."""
        if path is None:
            try:
                return build(ElfImage.from_file(io.BytesIO(self.module.image),
                                                self.module.path))
            except ElfError:
                return []
        try:
            stream, image = open_elf(path)
        except (OSError, ElfError):
            return []
        with stream:
            key = identity(stream.fileno(), CACHE_FORMAT, kind)
            value = _decoded(CACHE.get(key), kind)
            if value is None:
                value = build(image)
                _keep(key, stream, value)
        return value

    def _lines_file(self):
        """The open file DWARF lines come from, or None."""
        if self._line_stream is None:
            self._line_stream = False
            if self.path is not None:
                try:
                    self._line_stream = open_regular(self.path)
                except OSError:
                    pass
        return self._line_stream or None

    def _dwarf_info(self):
        if self._dwarf is None:
            self._dwarf = False
            try:
                from elftools.elf.elffile import ELFFile
                elf = ELFFile(self._lines_file())
                if elf.has_dwarf_info():
                    self._dwarf = elf.get_dwarf_info()
            except Exception:  # pyelftools on a damaged file: no lines
                self._dwarf = False
        return self._dwarf

    def _unit_offset(self, address):
        """The offset in .debug_info of the unit whose .debug_aranges
        ranges hold the address, or None."""
        if self._aranges is None:
            self._aranges = self._kept(self.path, "aranges", address_ranges)
            self._arange_starts = [start for start, _, _ in self._aranges]
        i = bisect_right(self._arange_starts, address) - 1
        if i >= 0 and address < self._aranges[i][1]:
            return self._aranges[i][2]
        return None

    def _unit_rows(self, unit):
        rows = self._units.get(unit)
        if rows is None:
            table = self._unit_table(unit) or []
            rows = self._units[unit] = (table, [row[0] for row in table])
        return rows

    def _unit_table(self, unit, kind="lines", parse=unit_rows):
        """The unit's rows of one kind (line rows, inline segments), from
        the cache or parse(DWARFInfo, unit) (None when its DWARF cannot
        be read)."""
        stream = self._lines_file()
        if stream is None:
            return None
        key = identity(stream.fileno(), CACHE_FORMAT, kind, unit)
        table = _decoded(CACHE.get(key), kind)
        if table is None:
            try:
                table = parse(self._dwarf_info(), unit)
            except Exception:  # pyelftools on damaged DWARF: nothing
                return None
            _keep(key, stream, table)
        return table

    def inlined(self, address):
        """[InlinedCall] around a file address, innermost first: the
        calls the compiler inlined there (sfbt.dwarf.inline)."""
        if self.path is None:
            return []
        unit = self._unit_offset(address)
        if unit is None:
            return []
        calls = self._calls.get(unit)
        if calls is None:
            calls = self._calls[unit] = UnitCalls(
                self._unit_table(unit, "inlines", unit_calls) or [])
        return calls.chain(address)

    def line(self, address):
        """(file, line) of a file address, or None."""
        if self.path is None:
            return None
        unit = self._unit_offset(address)
        if unit is None:
            return None
        rows, starts = self._unit_rows(unit)
        i = bisect_right(starts, address) - 1
        if i < 0 or rows[i][1] is None:
            return None
        return rows[i][1], rows[i][2]


def _keep(key, stream, rows):
    """Put rows read from the open stream under key, unless the file
    changed while they were read (the key would not say what they are)."""
    if identity(stream.fileno(), *key[:-4]) == key:
        CACHE.put(key, json.dumps(rows, separators=(",", ":")).encode())


def _decoded(data, kind):
    """The rows an entry holds, or None unless it is a list of rows of
    ROW_TYPES[kind]."""
    if data is None:
        return None
    try:
        rows = json.loads(data)
    except (ValueError, RecursionError):
        return None
    types = ROW_TYPES[kind]
    if not isinstance(rows, list) or not all(
            isinstance(row, list) and len(row) == len(types)
            and all(isinstance(value, wanted) for value, wanted in zip(row, types))
            for row in rows):
        return None
    return rows


class Describer:
    """describe(module map, lookup pc) -> (name, where) in sframe-bt's
    words, with names and lines from each module's files (and their debug
    files, found through ``debug_files``)."""

    def __init__(self, module_map, executable=None, debug_files=None):
        self.module_map = module_map
        self.executable = executable
        self.debug_files = debug_files or DebugFiles()
        self._symbols = {}

    def symbols(self, module):
        found = self._symbols.get(module)
        if found is None:
            progress.doing(f"reading the symbols of {module.name}")
            found = self._symbols[module] = ModuleSymbols(module, self.debug_files)
        return found

    def name(self, pc):
        module = self.module_map.module_for(pc)
        if module is None:
            return "??"
        return self.symbols(module).function(pc - module.load_bias) or "??"

    def frames(self, pc):
        """[(name, where)] of the frames at pc, innermost first: one per
        call inlined there (sfbt.dwarf.inline), then the function's own,
        each at the place the frame inside it was called from."""
        module = self.module_map.module_for(pc)
        if module is None:
            return [("??", " ()")]
        symbols = self.symbols(module)
        calls = symbols.inlined(pc - module.load_bias)
        if not calls:
            return [self(pc)]
        name = symbols.function(pc - module.load_bias) or "??"
        return [(name, f" at {line[0]}:{line[1]}" if line else " ()")
                for name, line in expanded(calls, name, symbols.line(pc - module.load_bias))]

    def __call__(self, pc):
        """(name, where) of the function that holds pc, without its
        inline frames."""
        module = self.module_map.module_for(pc)
        if module is None:
            return "??", " ()"
        symbols = self.symbols(module)
        name = symbols.function(pc - module.load_bias) or "??"
        line = symbols.line(pc - module.load_bias)
        if line is not None:
            return name, f" at {line[0]}:{line[1]}"
        if self.executable is not None and os.path.realpath(module.path) == os.path.realpath(
                self.executable):
            return name, " ()"
        return name, f" from {display_path(module)}"
