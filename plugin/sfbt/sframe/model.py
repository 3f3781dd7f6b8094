"""The one model of SFrame data, shared by every version and byte order.

A section is a list of FunctionEntry (one per FDE), each owning its
FrameRowEntry list (one per FRE).  Addresses in the model are absolute
(function start = where the function is in the section's address space);
how a version encodes them is the reader's and writer's business.
"""

from __future__ import annotations

from ..arch import Arch, arch_for_abi
from . import constants as C
from . import lookup
from .layout import fits_signed, unpack_fde_info

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, List, NamedTuple, Optional, Protocol, Sequence, Tuple
else:
    from ..values import NamedTuple


def minimal_word_size(words: Iterable[int]) -> int:
    for size in C.WORD_SIZES:
        if all(fits_signed(w, size) for w in words):
            return size
    return 4


def minimal_fre_type(size: int, rows: Iterable["FrameRowEntry"] = ()) -> int:
    """The narrowest FRE start-address width for a function, as gas picks it."""
    limit = max([size] + [r.start_offset for r in rows])
    if limit <= 0xFF:
        return C.FRE_TYPE_ADDR1
    if limit <= 0xFFFF:
        return C.FRE_TYPE_ADDR2
    return C.FRE_TYPE_ADDR4


class _FrameRowFields(NamedTuple):
    start_offset: int
    base_reg: int
    words: Tuple[int, ...]
    word_size: int
    mangled_ra: bool


class FrameRowEntry(_FrameRowFields):
    """One FRE: the rules that hold from start_offset to the next row.

    ``words`` are the FRE's signed data words, as stored: for default FDEs
    the CFA offset then the RA/FP offsets the ABI tracks; for flexible FDEs
    (control, offset) pairs for CFA, RA and FP.  No words means the return
    address is undefined (outermost frame).  ``word_size`` 0 picks the
    narrowest size that holds every word.  (A tuple: the reader makes one
    per row it decodes, and tuples are the cheapest immutable records.)
    """

    __slots__ = ()

    def __new__(cls, start_offset: int, base_reg: int = C.BASE_REG_SP,
                words: Iterable[int] = (), word_size: int = 0,
                mangled_ra: bool = False) -> "FrameRowEntry":
        words = tuple(words)
        return super().__new__(cls, start_offset, base_reg, words,
                               word_size or minimal_word_size(words), mangled_ra)

    @property
    def ra_undefined(self) -> bool:
        return not self.words


class FunctionEntry:
    """One FDE: a function's address range, attributes and rows.

    Rows read from a section are decoded on first use and then kept.
    """

    __slots__ = ("start", "size", "pc_type", "fre_type", "pauth_key", "signal",
                 "fde_type", "rep_size", "_rows", "_load_rows", "num_rows",
                 "_row_index")

    def __init__(self, start: int, size: int, rows: Iterable[FrameRowEntry] = (), *,
                 pc_type: int = C.PC_TYPE_INC, fre_type: Optional[int] = None,
                 pauth_key: int = C.PAUTH_KEY_A, signal: bool = False,
                 fde_type: int = C.FDE_TYPE_DEFAULT, rep_size: int = 0):
        self.start = start
        self.size = size
        self.pc_type = pc_type
        self.pauth_key = pauth_key
        self.signal = signal
        self.fde_type = fde_type
        self.rep_size = rep_size
        rows = tuple(rows)
        self._rows: Optional[Tuple[FrameRowEntry, ...]] = rows
        self.num_rows = len(rows)
        #: (reader, FDE index, offset of the rows) until the rows are read
        self._load_rows: Optional[Tuple["SectionSource", int, int]] = None
        self._row_index: Optional[lookup.RowIndex] = None  # built on first lookup
        self.fre_type = (minimal_fre_type(size, rows)
                         if fre_type is None else fre_type)

    @classmethod
    def from_reader(cls, start: int, size: int, info: int, fde_type: int, rep_size: int,
                    num_rows: int,
                    source: Tuple["SectionSource", int, int]) -> "FunctionEntry":
        """A function read from a section; ``source`` is (reader, FDE index,
        offset of its rows), used to decode the rows on first use."""
        function = cls.__new__(cls)
        function.start, function.size = start, size
        function.fre_type, function.pc_type, function.pauth_key, function.signal = \
            unpack_fde_info(info)
        function.fde_type, function.rep_size = fde_type, rep_size
        function.num_rows, function._rows, function._load_rows = num_rows, None, source
        function._row_index = None
        return function

    @property
    def rows(self) -> Tuple[FrameRowEntry, ...]:
        if self._rows is None:
            assert self._load_rows is not None  # (from_reader sets one of them)
            reader, index, rows_at = self._load_rows
            self._rows = tuple(reader.decode_rows(index, rows_at, self.num_rows,
                                                  self.fre_type))
            self._load_rows = None
        return self._rows

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def is_flex(self) -> bool:
        return self.fde_type == C.FDE_TYPE_FLEX

    @property
    def is_mask(self) -> bool:
        return self.pc_type == C.PC_TYPE_MASK

    def _key(self) -> tuple:
        return (self.start, self.size, self.pc_type, self.fre_type,
                self.pauth_key, self.signal, self.fde_type, self.rep_size,
                self.rows)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FunctionEntry):
            return NotImplemented
        return self._key() == other._key()

    def __repr__(self) -> str:
        return (f"FunctionEntry(start={self.start:#x}, size={self.size}, "
                f"pc_type={self.pc_type}, fre_type={self.fre_type}, "
                f"pauth_key={self.pauth_key}, signal={self.signal}, "
                f"fde_type={self.fde_type}, rep_size={self.rep_size}, "
                f"rows={self.rows!r})")


if TYPE_CHECKING:
    class SectionSource(Protocol):
        """What a section opened from bytes reads its functions and rows
        through (reader.SectionReader)."""

        num_fdes: int

        def read_all(self) -> Tuple[List[FunctionEntry], Optional[Sequence[int]]]:
            ...

        def find_function(self, pc: int) -> Optional[FunctionEntry]:
            ...

        def decode_rows(self, index: int, rows_at: int, count: int,
                        fre_type: int) -> Iterable[FrameRowEntry]:
            ...


class SFrameSection:
    """A whole .sframe section.  version 0 stands for a zero-length section.

    A section built from a list of functions holds them; a section opened
    from bytes (reader.open_section) reads its FDEs on demand: lookups
    binary-search the FDE table in the bytes and decode only the functions
    they reach, and ``functions`` reads and checks the whole table once.
    """

    def __init__(self, version: int, abi: int, functions: Iterable[FunctionEntry] = (), *,
                 flags: Optional[int] = None, cfa_fixed_fp_offset: int = 0,
                 cfa_fixed_ra_offset: Optional[int] = None, aux_header: bytes = b"",
                 big_endian: Optional[bool] = None, address: int = 0,
                 fre_order: Optional[Sequence[int]] = None, padding: bytes = b"",
                 name: str = ".sframe", source: Optional["SectionSource"] = None):
        self.version = version
        self.abi = abi
        # The section's bytes (reader.SectionReader) when it was opened from
        # them; the functions are then read from there on demand.
        self._source = source
        self._functions: Optional[List[FunctionEntry]] = (
            None if source is not None else list(functions))
        if flags is None:
            flags = C.F_FDE_SORTED
            if version >= C.VERSION_2:
                flags |= C.F_FDE_FUNC_START_PCREL
        self.flags = flags
        self.cfa_fixed_fp_offset = cfa_fixed_fp_offset
        if cfa_fixed_ra_offset is None:
            cfa_fixed_ra_offset = self.arch.fixed_ra_offset if abi else 0
        self.cfa_fixed_ra_offset = cfa_fixed_ra_offset
        self.aux_header = bytes(aux_header)
        # Bytes after the last sub-section: assemblers pad object files'
        # sections to their alignment.
        self.padding = bytes(padding)
        self.big_endian = (abi in C.BIG_ENDIAN_ABIS
                           if big_endian is None else big_endian)
        self.address = address
        # Order of the functions' row blocks in the FRE sub-section, as
        # function indices; None when it is the FDE order.
        self._fre_order = None if source is not None else self._canonical_order(fre_order)
        self.name = name
        self._lookup_index: Optional[lookup._LookupIndex] = None

    @property
    def functions(self) -> List[FunctionEntry]:
        """Every FunctionEntry, in FDE order.  For an opened section the
        first use reads and checks the whole FDE table."""
        if self._functions is None:
            assert self._source is not None  # (the constructor sets one of them)
            self._functions, order = self._source.read_all()
            self._fre_order = self._canonical_order(order)
        return self._functions

    @property
    def fre_order(self) -> Optional[Tuple[int, ...]]:
        self.functions
        return self._fre_order

    @property
    def num_functions(self) -> int:
        """The number of FDEs (an opened section's header says it)."""
        if self._functions is None:
            assert self._source is not None
            return self._source.num_fdes
        return len(self._functions)

    def _canonical_order(self, order: Optional[Sequence[int]]) -> Optional[Tuple[int, ...]]:
        """The order as it can be read back: v1/v2 functions without rows
        take no bytes, so they share their offset with the block that
        follows them; the reader puts them before it, in FDE order."""
        if order is None:
            return None
        result: List[int] = []
        empty: List[int] = []
        for index in order:
            if self.version == C.VERSION_3 or self.functions[index].num_rows:
                result += sorted(empty) + [index]
                empty = []
            else:
                empty.append(index)
        result += sorted(empty)
        return None if result == list(range(len(self.functions))) else tuple(result)

    @classmethod
    def empty(cls, address: int = 0, name: str = ".sframe") -> "SFrameSection":
        return cls(0, 0, flags=0, cfa_fixed_ra_offset=0, big_endian=False,
                   address=address, name=name)

    @property
    def is_empty(self) -> bool:
        return self.version == 0

    @property
    def num_rows(self) -> int:
        return sum(f.num_rows for f in self.functions)

    @property
    def arch(self) -> Arch:
        """The sfbt.arch.Arch of the section's ABI (KeyError if unknown)."""
        return arch_for_abi(self.abi)

    def _key(self) -> tuple:
        return (self.version, self.abi, self.flags, self.cfa_fixed_fp_offset,
                self.cfa_fixed_ra_offset, self.aux_header, self.padding,
                self.big_endian, self.address, self.fre_order, self.functions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SFrameSection):
            return NotImplemented
        return self._key() == other._key()

    def __repr__(self) -> str:
        return (f"SFrameSection(version={self.version}, abi={self.abi}, "
                f"flags={self.flags:#x}, functions={self.num_functions}, "
                f"address={self.address:#x})")

    #: find_function(pc): the FunctionEntry covering pc, or None.
    find_function = lookup.find_function
    #: find_row(pc): the FrameRow in force at pc, or None where no row
    #: covers it.
    find_row = lookup.find_row
