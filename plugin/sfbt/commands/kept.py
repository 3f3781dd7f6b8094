"""What a debugger command keeps for the next one, by how long it stays
true.

A session's caches have two owners, each forgotten at once by one
``forget()``: the stop (the frames a walk found, the debugger's innermost
frames: true until the program runs, or its memory or registers change)
and the modules (each PC's names and lines, the inline chains and unit
indexes of each module's files, whether a PC is in main: true until the
loaded modules change: a new object file, a library loaded or unloaded,
a new process).  A debugger's front end owns one of each for its whole
life and calls forget() on its events; a session of one command (the
command line's) gets fresh ones.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict

#: the entries one table keeps at most before it starts again (a stop
#: per instruction of a long sweep names a new PC each time)
MAX_ENTRIES = 100_000


class Kept:
    """Named tables (dicts) of one lifetime."""

    def __init__(self, lifetime: str):
        self.lifetime = lifetime
        #: how many times forget() dropped what was kept (for tests)
        self.forgotten = 0
        self._tables: Dict[str, Dict[Any, Any]] = {}

    def table(self, name: str) -> Dict[Any, Any]:
        """The table ``name``, empty after each forget(); one grown past
        MAX_ENTRIES is emptied (what it held is read again if asked)."""
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = {}
        elif len(table) > MAX_ENTRIES:
            table.clear()
        return table

    def forget(self, *_: Any) -> None:
        """Drop every table (an event handler of the debugger's may call it)."""
        if self._tables:
            self._tables = {}
            self.forgotten += 1
