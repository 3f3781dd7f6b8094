"""Names per address: the one symbolizer of an ELF file, shared by the
debugger-free sessions (live/symbols.py) and the archive readers
(archive/symbolize.py).

- ``table``: the function symbols, read in place from the symbol table;
- ``plt``: the names of PLT stubs (``puts@plt``), as GDB gives them;
- ``line_table``: one unit's line rows in arrays, and ``Location``;
- ``symbolizer``: a file's function names, source lines and inline chains,
  each read on first use and kept in sfbt's cache.
"""
