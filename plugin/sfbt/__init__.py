"""sfbt: SFrame-driven backtraces and compact backtrace archives.

The core package never imports a debugger; the adapters in ``gdb/`` and
``lldb/`` drive it through a narrow target interface.
"""

__version__ = "0.1.0"
