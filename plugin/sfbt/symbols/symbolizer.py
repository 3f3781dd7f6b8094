"""The one symbolizer of an ELF file: the function, source line and inline
chain of a file address, each table read on first use.

A function is named as GDB names a frame's: from the DWARF function whose
code holds the address (dwarf/inline.py: GDB's find_pc_function), else
from GDB's minimal symbol there (symbols/table.py, the symbol table read
in place), else from the PLT stub there (symbols/plt.py).
The DWARF, lines and inline chains come from the compilation unit that
holds the address only (found through .debug_aranges and, for the units
they leave out, the units' top entries: dwarf/units.py; a file where no
unit says what it holds has its whole line table read, and no inline
chains nor DWARF functions): its line program read with struct
(dwarf/line_program.py), its inlined calls and functions from its entries
(dwarf/inline.py), all from the same section bytes (each compressed
section inflated once, as far as they need).
What was read is kept in the ``symbols`` part of sfbt's private cache
(sfbt.cache), keyed by the file it was read from, so a second run reads
what the first one parsed.  `sfbt stack`, `record` and `flame` reach it
through live/symbols.py's ``Describer`` (a module map), `cbf decode`,
`fold` and `cbf-load` through archive/symbolize.py's ``Symbolizer`` (an
archived image map)."""

from __future__ import annotations

import io
import json
import struct

from ..cache import MAX_ENTRY_BYTES, Cache, identity
from ..debuginfo import DebugFiles
from ..dwarf.chains import InlinedCall, UnitLookup, chain_name
from ..dwarf.compressed import compression, expansion_limit, inflated_size
from ..dwarf.line_program import DwarfBytes, every_unit_rows, unit_rows
from ..dwarf.units import UnitIndex, top_entry_ranges
from ..elf import SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB, ElfError, ElfImage
from ..errors import left_out
from ..files import open_regular
from ..frame_name import FrameName
from .line_table import LineTable, Location
from .minimal_names import printed_name
from .plt import StubTable, in_plt, plt_table
from .table import FunctionTable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import (IO, Any, Callable, Dict, List, Optional, Protocol, Sequence, Set,
                        Tuple, TypeVar, Union)

    from ..cache import Key
    from ..dwarf.call_sites import UnitCallSites

    Rows = List[Sequence[Any]]
    T = TypeVar("T")

#: bumped when what the cache holds changes meaning
CACHE_FORMAT = 12
CACHE = Cache("symbols")
#: the unit key of a file's whole line table (a file where no unit says
#: what addresses it holds)
EVERY_UNIT = -1
#: the sections whose presence says a file has line tables
LINE_SECTIONS = (".debug_line", ".zdebug_line")


def _reason(error: BaseException) -> str:
    """One line for an exception raised while reading a damaged file."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def check_sections(image: ElfImage) -> None:
    """Refuse sections that run past the end of the file or decompress
    beyond reason, and symbol tables whose entries are not 64-bit ones."""
    file_size = image.file_size or 0
    limit = expansion_limit(image)
    for section in image.sections():
        if section.type == SHT_NOBITS:
            continue
        if section.offset + section.size > file_size:
            raise ElfError(f"section {section.name or section.index} of {section.size} "
                           f"bytes at {section.offset:#x} runs past the end of the file "
                           f"({file_size} bytes)")
        if compression(image, section) is not None:
            size = inflated_size(image, section)
            if size > limit:
                raise ElfError(f"section {section.name} claims to expand to {size} bytes, "
                               f"more than {limit}")
        if section.type in (SHT_SYMTAB, SHT_DYNSYM) and section.entsize != 24:
            raise ElfError(f"symbol table {section.name} has entries of "
                           f"{section.entsize} bytes, not 24")


class FileSymbolizer:
    """Names, lines and inline chains of one ELF file's addresses.

    ``strict``: a damaged symbol table or DWARF raises ElfError naming the
    file (`cbf decode` says so); otherwise it gives no names or lines
    (`sfbt stack` prints what it can).  A file whose sections cannot be
    read raises ElfError when opened, either way.  ``debugger`` ("lldb", or
    GDB's otherwise) picks the line of an address where several rows
    start (sfbt.dwarf.line_program.preferred_rows), as that debugger's bt does."""

    def __init__(self, stream: IO[bytes], name: str, strict: bool = True,
                 cached: bool = True, debugger: str = "gdb"):
        self.path = name
        self.strict = strict
        self.debugger = debugger
        self._stream = stream
        try:
            self._image = ElfImage.from_file(stream, name)
            self.build_id: Optional[str] = self._image.build_id()
            #: the address of the file's first byte as loaded
            self.base_address: int = self._image.first_load_address() or 0
            check_sections(self._image)
            self._has_lines = any(s.name in LINE_SECTIONS for s in self._image.sections())
        except (OSError, ElfError, struct.error) as error:
            stream.close()
            raise ElfError(f"{name}: not a readable ELF file: {_reason(error)}") from None
        self._cached = cached
        self._stripped: Optional[FileSymbolizer] = None
        self._functions: Optional[FunctionTable] = None
        self._plt: Optional[StubTable] = None
        self._dwarf_bytes = DwarfBytes(self._image)
        self._index: Optional[UnitIndex] = None
        self._units: Dict[int, LineTable] = {}
        self._lookups: Dict[int, UnitLookup] = {}
        #: units whose entries the cache does not hold (inlined_if_read)
        self._not_cached: Set[int] = set()
        self._call_sites: Dict[int, UnitCallSites] = {}

    @classmethod
    def open(cls, path: str, strict: bool = True, debugger: str = "gdb") -> "FileSymbolizer":
        """The symbolizer of the regular file at path (OSError, ElfError)."""
        return cls(open_regular(path), path, strict, debugger=debugger)

    @classmethod
    def of_image(cls, data: bytes, name: str) -> "FileSymbolizer":
        """The symbolizer of an image read from memory (the vDSO's): kept
        in no cache, whose keys name files."""
        return cls(io.BytesIO(data), name, strict=False, cached=False)

    def close(self) -> None:
        self._stream.close()

    def use_names_of(self, stripped: "FileSymbolizer") -> None:
        """Name functions from the symbols of ``stripped`` (the file this
        one is the separate debug file of) too, as GDB does."""
        self._stripped = stripped

    # -- function names ---------------------------------------------------------------------

    def function(self, address: int) -> Optional[str]:
        """The name GDB gives the function holding the file address: of
        the DWARF function there, else of the minimal symbol, else of the
        PLT stub (``puts@plt``); None when there is none."""
        lookup = self._unit_lookup(address)
        name = lookup.function(address) if lookup is not None else None
        return name or self._minimal_symbol(address) or self._plt_stub(address)

    def _minimal_symbol(self, address: int) -> Optional[str]:
        """The name GDB prints for its minimal symbol of the address: of
        this file's and (a separate debug file) the stripped file's, the one
        that starts higher, the stripped file's of two at one address (GDB
        looks in a file before its separate debug file)."""
        best: Optional[Tuple[FunctionTable, int]] = None
        tables = [self.function_table()]
        if self._stripped is not None:
            tables.insert(0, self._stripped.function_table())
        for table in tables:
            index = table.best(address)
            if index is not None and (best is None
                                      or table.starts[index] > best[0].starts[best[1]]):
                best = (table, index)
        return printed_name(best[0].name(best[1])) if best is not None else None

    def _plt_stub(self, address: int) -> Optional[str]:
        """The name of the PLT stub at the address (a separate debug
        file's stubs are the stripped file's), or None."""
        if not in_plt(self._image, address):
            return None
        if self._plt is None:
            try:
                self._plt = plt_table(self._image)
            except (OSError, ElfError, struct.error):  # a damaged PLT: no names
                self._plt = StubTable.empty()
        if not len(self._plt) and self._stripped is not None:
            return self._stripped._plt_stub(address)
        return self._plt.function(address)

    def function_table(self) -> FunctionTable:
        if self._functions is None:
            self._functions = self._function_table()
        return self._functions

    def _function_table(self) -> FunctionTable:
        key = self._key("functions")
        if key is not None:
            data = CACHE.get(key)
            table = FunctionTable.from_bytes(data, self._image) if data else None
            if table is not None:
                return table
        table = self._guarded("symbol table", lambda: FunctionTable.read(self._image))
        if table is None:
            return FunctionTable.empty(self._image)
        if key is not None:
            self._keep(key, table.to_bytes())
        return table

    # -- lines and inline chains ------------------------------------------------------------

    def line(self, address: int) -> Optional[Location]:
        """(file, line) of a file address, or None."""
        unit = self._unit_at(address)
        if unit is None:
            return None
        table = self._units.get(unit)
        if table is None:
            table = self._units[unit] = self._line_table(unit)
        return table.at(address)

    def inlined(self, address: int) -> List[InlinedCall]:
        """[InlinedCall] around a file address, innermost first: the calls
        the compiler inlined there (sfbt.dwarf.inline); none in a file
        where no unit says what it holds."""
        lookup = self._unit_lookup(address)
        return lookup.chain(address) if lookup is not None else []

    def frame_name(self, address: int, module: Optional[str] = None) -> FrameName:
        """The name of the frame at a file address: its function and line,
        and the calls inlined there (sfbt.dwarf.chains.chain_name);
        ``module``, the library it is said to be from where no line is known."""
        return chain_name(self.inlined(address), self.function(address), self.line(address),
                          module)

    def inlined_if_read(self, address: int) -> Optional[List[InlinedCall]]:
        """inlined(address), or None where the unit's entries would have
        to be read from its DWARF (neither looked up yet nor in the
        cache)."""
        unit = self._unit_at(address)
        if unit is not None and unit != EVERY_UNIT and unit not in self._lookups:
            if unit in self._not_cached:
                return None
            lookup = self._cached_lookup(self._key("entries", unit))
            if lookup is None:
                self._not_cached.add(unit)
                return None
            self._lookups[unit] = lookup
        return self.inlined(address)

    def _unit_lookup(self, address: int) -> Optional[UnitLookup]:
        """The inlined calls and functions of the unit that holds the file
        address, None when no unit does or none says what it holds."""
        unit = self._unit_at(address)
        if unit is None or unit == EVERY_UNIT:
            return None
        lookup = self._lookups.get(unit)
        if lookup is None:
            lookup = self._lookups[unit] = self._read_lookup(unit)
        return lookup

    def _unit_at(self, address: int) -> Optional[int]:
        """The offset in .debug_info of the unit that holds the address
        (sfbt.dwarf.units; None when none does), EVERY_UNIT in a file with
        lines where no unit says what it holds."""
        if not self._has_lines:
            return None
        if self._index is None:  # aranges read in place: faster than from the cache
            self._index = UnitIndex(self._dwarf_bytes, self._unlisted_ranges)
        index = self._index
        unit = self._guarded("DWARF unit ranges", lambda: index.unit(address))
        return EVERY_UNIT if unit is None and index.empty else unit

    def _unlisted_ranges(self, dwarf: DwarfBytes, listed: Set[int]) -> Sequence[Sequence[int]]:
        """The ranges of the units .debug_aranges leave out
        (sfbt.dwarf.units.top_entry_ranges), from the cache or their top
        entries: a file built by clang has all its units read so."""
        key = self._key("unit ranges")
        kept = _rows(CACHE.get(key), _is_span) if key is not None else None
        if kept is not None:
            return kept
        spans = top_entry_ranges(dwarf, listed)
        if key is not None:
            self._keep(key, json_entry(spans))
        return spans

    def _line_table(self, unit: int) -> LineTable:
        """The unit's line rows, from the cache or its line program; none
        when its DWARF cannot be read (ElfError when strict)."""
        # GDB's rows under the key they always had, LLDB's apart
        kind = ("lines", unit, "lldb") if self.debugger == "lldb" else ("lines", unit)
        key = self._key(*kind)
        data = CACHE.get(key) if key is not None else None
        table = LineTable.from_bytes(data) if data else None
        if table is None:
            table = self._guarded("DWARF line table", lambda: LineTable.from_rows(
                every_unit_rows(self._dwarf_bytes, self.debugger) if unit == EVERY_UNIT
                else unit_rows(self._dwarf_bytes, unit, self.debugger)))
            if table is None:
                return LineTable.from_rows([])
            if key is not None:
                self._keep(key, table.to_bytes())
        return table

    @staticmethod
    def _cached_lookup(key: Optional[Key]) -> Optional[UnitLookup]:
        """A unit's UnitLookup as sfbt's cache keeps it under ``key`` (its
        ("entries", unit)), or None."""
        return _lookup(CACHE.get(key)) if key is not None else None

    def _read_lookup(self, unit: int) -> UnitLookup:
        """The unit's inlined calls and functions (sfbt.dwarf.inline.
        unit_frames), from the cache or its DIEs; none when its DWARF
        cannot be read (ElfError when strict)."""
        key = self._key("entries", unit)
        # a unit inlined_if_read found missing from the cache is not looked for again
        lookup = None if unit in self._not_cached else self._cached_lookup(key)
        if lookup is None:
            from ..dwarf.inline import unit_frames  # not for what the cache holds
            frames = self._guarded("DWARF entries",
                                   lambda: unit_frames(self._dwarf_bytes, unit))
            if frames is None:
                return UnitLookup([], [], [], [])
            lookup = UnitLookup.of(frames)
            if key is not None:
                self._keep(key, json_entry(lookup.packed()))
        return lookup

    # -- call sites (sfbt.symbols.tail_calls) ----------------------------------------------

    def call_sites(self, address: int) -> UnitCallSites:
        """The call sites of the unit that holds the file address
        (sfbt.dwarf.call_sites), read once; none where no unit does or
        its DWARF cannot be read (ElfError when strict)."""
        from ..dwarf.call_sites import EMPTY, unit_call_sites  # not on every walk's path
        unit = self._unit_at(address)
        if unit is None or unit == EVERY_UNIT:
            return EMPTY
        found = self._call_sites.get(unit)
        if found is None:
            found = self._guarded("DWARF call sites",
                                  lambda: unit_call_sites(self._dwarf_bytes, unit))
            found = self._call_sites[unit] = found or EMPTY
        return found

    def symbol_address(self, name: str) -> Optional[Tuple[bool, int]]:
        """(whether global, file address) of GDB's minimal symbol named
        ``name`` in this file (its lookup of a function by its linkage
        name), or None."""
        return self.function_table().address_of(name)

    # -- what every table shares ------------------------------------------------------------

    def _guarded(self, what: str, read: Callable[[], T]) -> Optional[T]:
        """read()'s table; a damaged file's errors (of many kinds) become
        one ElfError naming the file when strict, else None (and a note
        of what was left out, sfbt.errors.left_out)."""
        try:
            return read()
        except Exception as error:
            if self.strict:
                raise ElfError(f"{self.path}: unreadable {what}: {_reason(error)}") from None
            left_out(f"{self.path}: {what} left out: {_reason(error)}")
            return None

    def _key(self, *kind: Union[str, int]) -> Optional[Key]:
        if not self._cached:
            return None
        try:
            return identity(self._stream.fileno(), CACHE_FORMAT, *kind)
        except OSError:
            return None

    def _keep(self, key: Key, data: Optional[bytes]) -> None:
        """Put data read from the file under key, unless the file changed
        while it was read (the key would not say what it is), or it is
        None or larger than the cache reads back."""
        if data is not None and len(data) <= MAX_ENTRY_BYTES and self._key(*key[1:-4]) == key:
            CACHE.put(key, data)


def json_entry(value: object) -> Optional[bytes]:
    """A cache entry of JSON, or None when it would be larger than the
    cache reads back or there is not the memory to make it: a hostile
    file's names (a megabyte each) can make it so, and a cache only saves
    time."""
    try:
        data = json.dumps(value, separators=(",", ":")).encode()
    except MemoryError:
        return None
    return data if len(data) <= MAX_ENTRY_BYTES else None


def _rows(data: Optional[bytes], well_formed: Callable[[list], bool]) -> Optional[Rows]:
    """The rows a cache entry of JSON holds: a list of lists each
    well_formed, or None."""
    if data is None:
        return None
    try:
        rows = json.loads(data)
    except (ValueError, RecursionError, MemoryError):  # an entry in doubt: rebuilt
        return None
    if not isinstance(rows, list) or not all(
            isinstance(row, list) and well_formed(row) for row in rows):
        return None
    return rows


def _lookup(data: Optional[bytes]) -> Optional[UnitLookup]:
    """The UnitLookup an entry holds (its packed lists), or None."""
    if data is None:
        return None
    try:
        return UnitLookup.from_packed(json.loads(data))
    except (ValueError, RecursionError, MemoryError):  # an entry in doubt: rebuilt
        return None


def _is_span(row: list) -> bool:
    """Whether a row is a unit's range [start, end, unit offset]."""
    return len(row) == 3 and all(isinstance(value, int) for value in row)


if TYPE_CHECKING:
    class ModuleFile(Protocol):
        """What a loaded module says of its file (sfbt.unwind.target.Module)."""

        @property
        def path(self) -> str: ...

        @property
        def build_id(self) -> Optional[str]: ...

        @property
        def image(self) -> Optional[bytes]: ...


def module_symbolizer(module: ModuleFile, debug_files: DebugFiles,
                      strict: bool = True) -> Optional[FileSymbolizer]:
    """The symbolizer of a loaded module: of its file (over its separate
    debug file), or of the image read from memory its Module carries (the
    vDSO's); None when it has none that can be read."""
    if module.image is not None:
        try:
            return FileSymbolizer.of_image(module.image, module.path)
        except ElfError:
            return None
    return file_symbolizer(module.path, module.build_id, debug_files, strict)


def file_symbolizer(path: Optional[str], build_id: Optional[str], debug_files: DebugFiles,
                    strict: bool = True) -> Optional[FileSymbolizer]:
    """The symbolizer of the file at ``path`` (None: only the build id is
    known), over its separate debug file when there is one; None when
    neither can be read."""
    found = _opened(path, strict) if path is not None else None
    return with_debug_file(found, path, build_id, debug_files,
                           lambda debug: _opened(debug, strict))


def with_debug_file(found: Optional[FileSymbolizer], path: Optional[str],
                    build_id: Optional[str], debug_files: DebugFiles,
                    open_file: Callable[[str], Optional[FileSymbolizer]],
                    what: Optional[str] = None) -> Optional[FileSymbolizer]:
    """The symbolizer (made by ``open_file``) of the separate debug file
    of the file at ``path``, whose symbolizer is ``found`` (None: only the
    build id is known), naming functions from found when it has no symbols
    of its own; else found.  ``what`` names the file in messages."""
    debug_path = debug_files.find(path, build_id or (found.build_id if found else None), what)
    debug = open_file(debug_path) if debug_path else None
    if debug is None:
        return found
    if found is not None:
        debug.use_names_of(found)
    return debug


def _opened(path: str, strict: bool) -> Optional[FileSymbolizer]:
    try:
        return FileSymbolizer.open(path, strict)
    except (OSError, ElfError):
        return None
