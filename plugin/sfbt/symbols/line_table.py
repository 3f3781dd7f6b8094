"""One compilation unit's line rows as sfbt keeps them: sorted addresses,
and for each its file (an index into the unit's file names, or none: the
end of a sequence) and line, in arrays; the bytes sfbt's cache keeps are
the arrays themselves, read back without a loop and checked for shape."""

from __future__ import annotations

import json
import struct
from array import array
from bisect import bisect_right

from .table import packed_arrays, unpacked_arrays

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, NamedTuple, Optional, Sequence

    from .table import Kinds
else:
    from ..values import NamedTuple

#: the file index of a row that ends a sequence (no line there)
NO_FILE = 0xFFFFFFFF
#: the arrays of a cached table: addresses, lines, file indices
ROW_KINDS: Kinds = (("Q", 8), ("Q", 8), ("I", 4))
#: the head of the table's bytes: row count, bytes of the file names (JSON)
_HEAD = struct.Struct("<QQ")


class Location(NamedTuple):
    """A source line: the file's name as the line table gives it."""

    file: str
    line: int


class LineTable:
    """Look-ups in one unit's rows (sfbt.dwarf.line_program.unit_rows)."""

    def __init__(self, addresses: "array[int]", files: "array[int]", lines: "array[int]",
                 names: List[str]):
        self.addresses = addresses
        self.files = files
        self.lines = lines
        self.names = names

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]]) -> "LineTable":
        """The table of [(address, file or None, line, is_stmt)], sorted."""
        index: Dict[str, int] = {}
        files = array("I")
        for row in rows:
            files.append(NO_FILE if row[1] is None else index.setdefault(row[1], len(index)))
        return cls(array("Q", (row[0] for row in rows)), files,
                   array("Q", (max(0, min(row[2], (1 << 64) - 1)) for row in rows)),
                   list(index))

    def at(self, address: int) -> Optional[Location]:
        """(file, line) of the row that holds the address, or None."""
        i = bisect_right(self.addresses, address) - 1
        if i < 0 or self.files[i] == NO_FILE:
            return None
        return Location(self.names[self.files[i]], self.lines[i])

    def to_bytes(self) -> bytes:
        names = json.dumps(self.names).encode()
        return _HEAD.pack(len(self.addresses), len(names)) + names \
            + packed_arrays([self.addresses, self.lines, self.files], ROW_KINDS)

    @classmethod
    def from_bytes(cls, data: bytes) -> Optional["LineTable"]:
        """The table to_bytes wrote, or None when the bytes do not have
        its shape (a file index beyond the names included)."""
        if len(data) < _HEAD.size:
            return None
        count, size = _HEAD.unpack_from(data)
        at = _HEAD.size + size
        if len(data) != at + 20 * count:
            return None
        try:
            names = json.loads(data[_HEAD.size:at])
        except (ValueError, RecursionError):
            return None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return None
        addresses, lines, files = unpacked_arrays(data, at, count, ROW_KINDS)
        if any(f >= len(names) and f != NO_FILE for f in set(files)):
            return None
        return cls(addresses, files, lines, names)
