"""The session interface: what a debugger command needs from a debugger.

Every command (sframe-bt, cbf-save, cbf-load, info sframe) is written once,
in this package, against ``Session``; gdb/ and lldb/ implement it over
their debugger's API.  A session lives for one command; what it reads is
kept in two owners (commands.kept: ``stop_kept()``, ``modules_kept()``),
which a debugger's front end keeps from one command to the next.
"""

from __future__ import annotations

from ..arch import Arch
from ..archive.layout import layout_of
from ..frame_name import FrameName
from ..names import is_main
from ..unwind.modules import ModuleMap
from ..unwind.target import Module, Target
from ..unwind.walk import Frame
from ..values import Value
from .kept import Kept
from .settings import Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional, Tuple

    from ..debuginfo import DebugFiles
    from ..symbols.symbolizer import FileSymbolizer
    from ..symbols.tail_calls import TailCalls


def _elf_symbolizer(module: Module, debug_files: "DebugFiles") -> Optional["FileSymbolizer"]:
    """The symbolizer of the module's file (over its separate debug file
    when there is one), or None when it has no readable file.  A damaged
    or hostile table of it is passed over, said in one warning line (the
    backtrace is shown without what it would have given)."""
    from ..symbols.symbolizer import module_symbolizer
    if module.image is not None:
        return None
    return module_symbolizer(module, debug_files, strict=False)


class FileSymbolizers:
    """The symbolizer of each module's file (_elf_symbolizer), made once
    and kept in ``table`` (a table of a Kept: modules_kept()), found
    through ``debug_files``: what gives call sites and minimal symbols,
    without the session that made it."""

    def __init__(self, table: Any, debug_files: "DebugFiles"):
        self.table = table
        self.debug_files = debug_files

    def symbols(self, module: Module) -> Optional["FileSymbolizer"]:
        table = self.table
        if module not in table:
            table[module] = _elf_symbolizer(module, self.debug_files)
        found: Optional[FileSymbolizer] = table[module]
        return found


class Thread(Value):
    """One thread of the debugged process: its label in saved backtraces
    (``"1 (4242)"``: the debugger's number and the system's id) and the
    debugger's own handle for it."""

    __slots__ = _fields = ("label", "handle")

    def __init__(self, label: str, handle: Any):
        self.label = label
        self.handle = handle


class Session:
    """A debugger as the commands see it."""

    #: "gdb" or "lldb": spelling of registers and messages
    debugger: str = ""
    #: the debugger's sframe settings (each session sets its own)
    settings: Settings

    @property
    def arch(self) -> Arch:
        raise NotImplementedError

    def has_stack(self) -> bool:
        """Whether there is a live process or a core to walk."""
        raise NotImplementedError

    def threads(self) -> List[Thread]:
        """Every thread, in the debugger's order."""
        raise NotImplementedError

    def selected_thread(self) -> Thread:
        raise NotImplementedError

    def target(self, thread: Thread) -> Target:
        """Memory, ``thread``'s innermost registers and the modules."""
        raise NotImplementedError

    def module_map(self) -> ModuleMap:
        """The loaded modules (at their load addresses when a process runs,
        else where the debugger places them)."""
        raise NotImplementedError

    def debugger_frames(self, thread: Thread) -> List[Tuple[int, bool]]:
        """The debugger's own frames that are on the stack, innermost first:
        [(pc, interrupted)], ``interrupted`` when the pc is where execution
        stopped (frame 0, a frame a signal interrupted) rather than a
        return address."""
        raise NotImplementedError

    def describe(self, lookup_pc: int, module: Optional[Module] = None) -> FrameName:
        """The debugger's name of the frame at ``lookup_pc``, without the
        calls inlined there (frame_name() adds them): its function, and its
        line, else the library it is in (FrameName.module: None for the
        program itself).  ``lookup_pc`` is inside the instruction (a
        return address minus 1); ``module`` says which image it is in when
        addresses of images overlap (no process)."""
        raise NotImplementedError

    def in_main(self, lookup_pc: int) -> bool:
        """Whether ``lookup_pc`` is in main's own frame (main's code, or a
        function inlined into main): where bt stops unless past-main."""
        return is_main(self.describe(lookup_pc).function)

    def stop_reason(self, thread: Thread) -> str:
        """The signal that stopped ``thread`` (``"SIGSEGV"``), or "stopped"."""
        raise NotImplementedError

    def stop_kept(self) -> Kept:
        """What is kept while the program stays stopped where it is
        (commands.kept); by default, for this session only."""
        return self._own_kept("stop")

    def modules_kept(self) -> Kept:
        """What is kept while the loaded modules stay the same
        (commands.kept); by default, for this session only."""
        return self._own_kept("modules")

    def _own_kept(self, lifetime: str) -> Kept:
        kept: Kept = self.__dict__.setdefault(f"_kept_{lifetime}", Kept(lifetime))
        return kept

    def frame_name(self, lookup_pc: int, module: Optional[Module] = None) -> FrameName:
        """describe() with the calls inlined at ``lookup_pc`` (their chain
        from DWARF, sfbt.dwarf.inline), each a frame of its own.  The
        innermost line is named as describe() names it, the function's own
        by outer_name()."""
        described = self.describe(lookup_pc, module)
        if module is None:
            module = self.module_map().module_for(lookup_pc)
        if module is None:
            return described
        kept = self.modules_kept().table("inline sources")
        if module not in kept:
            kept[module] = self.inline_source(module)
        symbols = kept[module]
        calls = symbols.inlined(lookup_pc - module.load_bias) if symbols else []
        if not calls:
            return described
        from ..dwarf.chains import chain_name
        outer = (self.outer_name(lookup_pc) or symbols.function(lookup_pc - module.load_bias)
                 or described.function)
        named = chain_name(calls, outer, None)
        innermost = named.inlined[0]
        first = FrameName(innermost.function, described.file, described.line,
                          described.module)
        return named.replace(inlined=(first, *named.inlined[1:]))

    def tail_calls(self) -> "TailCalls":
        """What finds the frames tail calls left off the stack
        (sfbt.symbols.tail_calls), over the module map and
        call_site_symbols(), kept while the modules stay the same
        (modules_kept); it holds no session (a later command's finds it)."""
        kept = self.modules_kept().table("tail calls")
        finder: Optional[TailCalls] = kept.get("finder")
        if finder is None:
            from ..symbols.tail_calls import TailCalls
            finder = kept["finder"] = TailCalls(self.module_map(), self.call_site_symbols())
        return finder

    def call_site_symbols(self) -> Any:
        """What gives each module's call sites and minimal symbols
        (``symbols(module)``: a FileSymbolizer or None), holding no
        session: by default the symbolizers of the modules' files
        (file_symbols())."""
        return self._file_symbolizers()

    def file_symbols(self, module: Module) -> Optional["FileSymbolizer"]:
        """The FileSymbolizer of the module's file (over its separate debug
        file when there is one; sfbt.symbols, whose tables sfbt's cache
        keeps), kept while the modules stay the same (modules_kept), or None."""
        return self._file_symbolizers().symbols(module)

    def _file_symbolizers(self) -> FileSymbolizers:
        return FileSymbolizers(self.modules_kept().table("file symbols"), self.debug_files())

    def inline_source(self, module: Module) -> Optional["FileSymbolizer"]:
        """What gives the module's inline chains and function names
        (``inlined(file address)``, ``function(file address)``), or None:
        by default the FileSymbolizer of its file (sfbt.symbols, whose
        tables sfbt's cache keeps); the debugger-free session gives the
        one its describer already holds."""
        return self.file_symbols(module)

    def debuginfod_servers(self) -> Optional[str]:
        """The debuginfod servers the debugger itself would ask now
        (DEBUGINFOD_URLS' words; "" for none: downloads are off), or None
        to follow DEBUGINFOD_URLS, as the command line does."""
        return None

    def debug_files(self) -> "DebugFiles":
        """Where this command's separate debug files are found: on this
        machine, and from the servers debuginfod_servers() names."""
        if "_debug_files" not in self.__dict__:
            from ..debuginfo import DebugFiles
            self.__dict__["_debug_files"] = DebugFiles(servers=self.debuginfod_servers())
        files: DebugFiles = self.__dict__["_debug_files"]
        return files

    def source_name(self, path: str) -> str:
        """A source file's name as the debugger's bt shows it (its layout's,
        sfbt.archive.layout)."""
        return layout_of(self.debugger).source_name(path)

    def outer_name(self, lookup_pc: int) -> Optional[str]:
        """The name of the function whose own code holds ``lookup_pc``
        (the frame calls were inlined into) as the debugger names it, or
        None to take the symbol table's."""
        return None

    def innermost_frames(self, thread: Thread) -> Optional[FrameName]:
        """The name of ``thread``'s innermost stack frame as the debugger's
        own frames give it: the calls inlined there that it shows (at the
        entry of inlined calls GDB and LLDB stepped to, fewer than the
        DWARF chain has; at a breakpoint on one, all), then the function's
        own; None to let frame_name() name it."""
        return None

    def backtrace_limit(self) -> Optional[int]:
        """The most frames a backtrace shows (GDB's `set backtrace
        limit`), or None for no limit."""
        return None

    def past_main(self) -> bool:
        """Whether backtraces go on past main (GDB's `set backtrace past-main`)."""
        return False

    def why_stopped(self, last: Frame, stop: str) -> str:
        """The reason a walk stopped at frame ``last``, with what the
        session knows of it (a debugger-free session: the library was
        unloaded since the thread was copied)."""
        return stop

    def image_path(self, module: Module) -> str:
        """The module's name in saved image maps."""
        return module.path
