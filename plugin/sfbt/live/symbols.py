"""Names and source lines of run-time addresses, for `sfbt stack`.

Function names come from the module's symbol table (that of its separate
debug file when there is one: sfbt.debuginfo), read with
sfbt's own ELF reader.  Source lines come from DWARF through pyelftools,
but only for the compilation unit that holds the address (found through
.debug_aranges).  The function table, the address ranges and each unit's
rows are kept on disk per build id: the first look-up in a large library
costs one unit's parse, later runs read the cache."""

import marshal
import os
import struct
from bisect import bisect_right

from ..archive.symbolize import address_ranges, function_at, unit_rows
from ..debuginfo import DebugFiles
from ..elf import ElfError, open_elf
from ..files import write_atomically
from .mappings import display_path

STT_FUNC = 2
STT_GNU_IFUNC = 10
STB_LOCAL = 0
STB_GLOBAL = 1
#: bumped when what the cache holds changes meaning
CACHE_FORMAT = 2


def cache_directory():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sfbt", "symbols")


def _function_symbols(path):
    """Sorted [(start, end, name)] of the file's function symbols
    (.symtab, else .dynsym); of several names at one address, a global
    one is kept.  A symbol without a size ends where the next one starts."""
    try:
        stream, image = open_elf(path)
    except (OSError, ElfError):
        return []
    with stream:
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
                    name = strings[name_at:end].decode("utf-8", "replace")
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
        debug_files = debug_files or DebugFiles()
        self.path = debug_files.find(module.path, module.build_id,
                                     display_path(module)) or module.path
        self._functions = None
        self._dwarf = None  # pyelftools DWARFInfo, False when there is none
        self._aranges = None
        self._arange_starts = None
        self._units = {}  # CU offset -> (rows, starts)

    def function(self, address):
        if self._functions is None:
            symbols = self._cached("functions", self._function_symbols)
            self._functions = (symbols, [s[0] for s in symbols])
        return function_at(self._functions, address)

    def _function_symbols(self):
        symbols = _function_symbols(self.path)
        if not symbols and self.path != self.module.path:
            symbols = _function_symbols(self.module.path)
        return symbols

    def _dwarf_info(self):
        if self._dwarf is None:
            self._dwarf = False
            try:
                from elftools.elf.elffile import ELFFile
                stream = open(self.path, "rb")
                elf = ELFFile(stream)
                if elf.has_dwarf_info():
                    self._dwarf = elf.get_dwarf_info()
                    self._stream = stream
                else:
                    stream.close()
            except Exception:  # pyelftools on a damaged file: no lines
                self._dwarf = False
        return self._dwarf

    def _unit_offset(self, address):
        """The offset in .debug_info of the unit whose .debug_aranges
        ranges hold the address, or None."""
        if self._aranges is None:
            self._aranges = self._cached("aranges", lambda: address_ranges(self.path))
            self._arange_starts = [start for start, _, _ in self._aranges]
        i = bisect_right(self._arange_starts, address) - 1
        if i >= 0 and address < self._aranges[i][1]:
            return self._aranges[i][2]
        return None

    def _cached(self, name, build):
        """build(), kept on disk as ``BUILD-ID.NAME`` (marshal) when the
        module has a build id; None from build() is not kept."""
        build_id = self.module.build_id
        # what a separate debug file gives is kept apart from what the
        # module's own file gives (the debug file may come later)
        origin = "debug" if self.path != self.module.path else "file"
        path = (os.path.join(cache_directory(),
                             f"{build_id}.{origin}.{name}.s{CACHE_FORMAT}")
                if build_id else None)
        if path is not None:
            try:
                with open(path, "rb") as stream:
                    return marshal.load(stream)
            except (OSError, EOFError, ValueError, TypeError):
                pass
        value = build()
        if path is not None and value is not None:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                write_atomically(path, marshal.dumps(value))
            except OSError:
                pass  # an unwritable cache only costs time
        return value

    def _unit_rows(self, unit):
        rows = self._units.get(unit)
        if rows is None:
            table = self._cached(f"{unit:x}.lines", lambda: self._parse_unit(unit)) or []
            rows = self._units[unit] = (table, [row[0] for row in table])
        return rows

    def _parse_unit(self, unit):
        try:
            return unit_rows(self._dwarf_info(), unit)
        except Exception:  # pyelftools on damaged DWARF: no lines
            return None

    def line(self, address):
        """(file, line) of a file address, or None."""
        unit = self._unit_offset(address)
        if unit is None:
            return None
        rows, starts = self._unit_rows(unit)
        i = bisect_right(starts, address) - 1
        if i < 0 or rows[i][1] is None:
            return None
        return rows[i][1], rows[i][2]


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
            found = self._symbols[module] = ModuleSymbols(module, self.debug_files)
        return found

    def name(self, pc):
        module = self.module_map.module_for(pc)
        if module is None:
            return "??"
        return self.symbols(module).function(pc - module.load_bias) or "??"

    def __call__(self, pc):
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
