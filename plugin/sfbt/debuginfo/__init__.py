"""Separate debug files: found where GDB and eu-stack find them
(``search``), downloaded from debuginfod servers (``debuginfod``) and kept
in the private cache (``downloads``).  The symbolizer's adapters
(live/symbols.py, archive/symbolize.py, sfbt.symbols.module_symbolizer)
ask a ``DebugFiles``."""

from .search import DEFAULT_ROOTS, DebugFiles

__all__ = ["DEFAULT_ROOTS", "DebugFiles"]
