"""Separate debug files: found where GDB and eu-stack find them
(``search``), downloaded from debuginfod servers (``debuginfod``) and kept
in the private cache (``downloads``).  Both symbolizers (live/symbols.py
and archive/symbolize.py) ask a ``DebugFiles``."""

from .search import DEFAULT_ROOTS, DebugFiles

__all__ = ["DEFAULT_ROOTS", "DebugFiles"]
