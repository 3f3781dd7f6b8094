"""Names and source lines of run-time addresses, for `sfbt stack`, `record`
and `flame`: each module's addresses, less its load bias, asked of the
FileSymbolizer of its file (sfbt.symbols), of its separate debug file when
there is one (sfbt.debuginfo), or of the vDSO's image read from memory."""

import os

from .. import progress
from ..frame_name import UNKNOWN, FrameName
from .mappings import display_path


def module_symbols(module, debug_files=None):
    """The FileSymbolizer of a module, or None; damaged tables give no
    names or lines (a stack prints what it can)."""
    # (imported here: the crash handler makes a Describer and names nothing)
    from ..debuginfo import DebugFiles
    from ..symbols.symbolizer import module_symbolizer
    return module_symbolizer(module, debug_files or DebugFiles(), strict=False)


class Describer:
    """describe(lookup pc) -> FrameName (sfbt.frame_name) over a module
    map, with names and lines from each module's files (and their debug
    files, found through ``debug_files``).  A frame without a line in a
    library is said to be from it as GDB says: by ``library_names(module)``
    (sfbt.live.linkmap.LibraryNames: the link map's name) where that gives
    one, else by the path it was mapped by; the program's frames and the
    vDSO's name no library (GDB lists neither among its libraries)."""

    def __init__(self, module_map, executable=None, debug_files=None, library_names=None):
        self.module_map = module_map
        self.executable = executable
        self.debug_files = debug_files  # None: made when a module is first named
        self.library_names = library_names
        self._symbols = {}

    def symbols(self, module):
        """The module's FileSymbolizer, or None when it has no readable file."""
        if module not in self._symbols:
            if self.debug_files is None:  # one for all modules: it remembers its searches
                from ..debuginfo import DebugFiles
                self.debug_files = DebugFiles()
            progress.doing(f"reading the symbols of {module.name}")
            self._symbols[module] = module_symbols(module, self.debug_files)
        return self._symbols[module]

    def name(self, pc):
        module = self.module_map.module_for(pc)
        symbols = self.symbols(module) if module is not None else None
        if symbols is None:
            return "??"
        return symbols.function(pc - module.load_bias) or "??"

    def __call__(self, pc):
        """The FrameName of the function that holds pc, without the calls
        inlined there (the session's frame_name() adds them)."""
        module = self.module_map.module_for(pc)
        if module is None:
            return UNKNOWN
        symbols = self.symbols(module)
        name = line = None
        if symbols is not None:
            name = symbols.function(pc - module.load_bias)
            line = symbols.line(pc - module.load_bias)
        if line is not None:
            return FrameName(name, line[0], line[1])
        if module.image is not None or self.executable is not None and os.path.realpath(
                module.path) == os.path.realpath(self.executable):
            return FrameName(name)
        linked = self.library_names(module) if self.library_names is not None else None
        return FrameName(name, module=linked or display_path(module))
