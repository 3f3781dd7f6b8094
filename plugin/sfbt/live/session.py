"""The debugger-free Session: the threads of a live process or a core,
each captured (registers and stack) when the session is made and walked
after, the process's threads let go meanwhile.  `sfbt stack` is sframe-bt
on each of its threads and, with --format, cbf-save --all-threads
(live/stack.py); `sfbt record` walks its samples through one."""

from __future__ import annotations

from ..arch import Arch

from ..commands.session import Session, Thread
from ..commands.settings import Settings
from ..frame_name import FrameName
from ..names import is_main
from ..unwind.modules import ModuleMap, SFrameSources
from ..unwind.target import Module
from ..unwind.walk import Frame
from .mappings import Mapping, display_path, mapping_at
from .memory import ThreadState, ThreadTarget
from .symbols import Describer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, Iterable, List, Optional, Tuple

    from ..debuginfo import DebugFiles
    from ..symbols.symbolizer import FileSymbolizer

#: frames walked at most per thread
FRAME_LIMIT = 1000


def signal_name(number: int) -> str:
    """A signal's name as ``signal.Signals(number).name`` gives it (of
    aliases, the first in alphabetical order: SIGABRT, not SIGIOT), from
    _signal's constants: the signal module builds an enum, and enum is a
    large part of the crash handler's imports."""
    import _signal
    names = sorted(name for name, value in vars(_signal).items()
                   if value == number and isinstance(value, int)
                   and name.startswith("SIG") and not name.startswith("SIG_"))
    return names[0] if names else f"signal {number}"


class SnapshotSession(Session):
    """Captured threads of one process (or core) with one module map, one
    SFrame cache and one symbolizer.  ``numbered`` is [(thread number,
    ThreadState)] in the order GDB numbers them; each Thread's handle is
    its ThreadState (any captured state can be walked, a sample of
    `sfbt record` too)."""

    #: bt's words, as GDB prints them
    debugger = "gdb"

    def __init__(self, arch: Arch, modules: List[Module],
                 read: Callable[[int, int], bytes],
                 numbered: Iterable[Tuple[int, ThreadState]] = (),
                 executable: Optional[str] = None, sources: Optional[SFrameSources] = None,
                 mappings: Optional[List[Mapping]] = None,
                 debug_files: Optional[DebugFiles] = None,
                 virtual_address_bits: Optional[int] = None, past_main: bool = False,
                 library_names: Optional[Callable[[Module], Optional[str]]] = None):
        self._arch = arch
        #: what strips AArch64 return addresses (a core's NT_ARM_PAC_MASK)
        self.virtual_address_bits = virtual_address_bits
        #: walks go on past main, to the outermost frame (no frame is
        #: named while walking: perf events' recordings, of any process)
        self._past_main = past_main
        self.modules = modules
        self.read = read
        self.settings = Settings("gdb")
        self.numbered = list(numbered)
        self.sources = sources if sources is not None else SFrameSources()
        memory = ThreadTarget(arch, ThreadState(0, "", {}), read, modules)
        self._module_map = ModuleMap(modules, memory, self.sources)
        #: ``library_names(module)``: the name a library's frames are said
        #: to be from (sfbt.live.linkmap.LibraryNames), None: its mapped path
        self.describer = Describer(self._module_map, executable, debug_files, library_names)
        self._in_main: Dict[int, bool] = {}  # lookup pc -> whether it is in main, every walk
        #: a live process's mappings: a walk that ends at a PC in none of
        #: them says so
        self.mappings = mappings

    @property
    def arch(self) -> Arch:
        return self._arch

    def has_stack(self) -> bool:
        return True

    def threads(self) -> List[Thread]:
        return [Thread(f"{number} ({state.tid})", state) for number, state in self.numbered]

    def selected_thread(self) -> Thread:
        return self.threads()[0]

    def target(self, thread: Thread) -> ThreadTarget:
        target = ThreadTarget(self._arch, thread.handle, self.read, self.modules)
        target.virtual_address_bits = self.virtual_address_bits
        return target

    def module_map(self) -> ModuleMap:
        return self._module_map

    def debugger_frames(self, thread: Thread) -> List[Tuple[int, bool]]:
        return []  # no debugger: SFrame's frames are all there are

    def describe(self, lookup_pc: int, module: Optional[Module] = None) -> FrameName:
        return self.describer(lookup_pc)

    def inline_source(self, module: Module) -> Optional[FileSymbolizer]:
        """The module's symbols, their inline chains kept in sfbt's cache."""
        return self.describer.symbols(module)

    def past_main(self) -> bool:
        return self._past_main

    def call_site_symbols(self) -> Describer:
        return self.describer

    def in_main(self, lookup_pc: int) -> bool:
        found = self._in_main.get(lookup_pc)
        if found is None:
            found = self._in_main[lookup_pc] = is_main(self.describer.name(lookup_pc))
        return found

    def stop_reason(self, thread: Thread) -> str:
        number = thread.handle.signal
        if not number:
            return "stopped"
        return signal_name(number)

    def backtrace_limit(self) -> Optional[int]:
        return FRAME_LIMIT

    def why_stopped(self, last: Frame, stop: str) -> str:
        """The walk's stop reason, with what sfbt knows of the last frame's
        image: gone since the thread was copied, or its file not the one
        mapped."""
        if self.mappings is not None and mapping_at(self.mappings, last.lookup_pc) is None:
            return (f"PC {last.pc:#x} is in no mapping (in a library unloaded "
                    "since the thread was copied?)")
        module = self._module_map.module_for(last.lookup_pc)
        if module is not None and getattr(module, "note", None):
            return f"{stop} (in {display_path(module)})"
        return stop

    def image_path(self, module: Module) -> str:
        return display_path(module)


def process_session(pid: int, only: Optional[int] = None,
                    sources: Optional[SFrameSources] = None,
                    warn: Callable[[str], None] = lambda line: None) -> SnapshotSession:
    """The SnapshotSession of process ``pid`` (only its thread ``only`` if
    given): each thread stopped in turn, only while its registers and
    stack are copied, and let go before the session is returned.  A
    thread that does not stop in time (in vfork) is left out, said in one
    line to ``warn``."""
    from .process import Process, ProcessError, ProcessExited
    from .ptrace import DidNotStop
    process = Process(pid)
    try:
        threads = list(enumerate(process.threads(), 1))
        if only is not None:
            threads = [t for t in threads if t[1][0] == only]
            if not threads:
                raise ProcessError(f"process {pid} has no thread {only}")
        numbered = []
        for number, (tid, name) in threads:
            try:
                state = process.snapshot(tid, name)
            except DidNotStop as error:
                warn(f"{error}: its stack is left out")
                continue
            if state is not None:
                numbered.append((number, state))
        if not numbered:
            raise ProcessExited(f"process {pid} exited")
        try:  # the libraries loaded while the threads were copied
            process.reread_mappings(keep_gone=True)
        except ProcessError:
            pass  # it exited since: the mappings read before are all there is
        return SnapshotSession(process.arch, process.modules(), process.read, numbered,
                               process.executable, sources=sources,
                               mappings=process.mappings,
                               library_names=process.library_names())
    finally:
        process.close()


def core_session(path: str, executable: Optional[str] = None, only: Optional[int] = None,
                 trust_files: bool = False, sysroot: Optional[str] = None
                 ) -> Tuple[SnapshotSession, Callable[[], None], Dict[str, str]]:
    """(SnapshotSession, check, refused) of the core file at ``path`` (only
    its thread ``only`` if given); ``check()`` after the walks raises where
    the core changed while it was read; ``refused`` (filled as the walks
    go) holds the files the core names that its writer could not read, and
    why (see sfbt.live.corefile; ``trust_files`` reads them anyway);
    ``sysroot``: where the core's libraries are looked for first."""
    from .corefile import Core, CoreError
    core = Core(path, executable, trust_files, sysroot)
    states = core.thread_states()
    for state in states:
        if state.tid == core.pid and core.command:
            state.name = core.command
    numbered = list(enumerate(states, 1))
    if only is not None:
        numbered = [(n, s) for n, s in numbered if s.tid == only]
        if not numbered:
            raise CoreError(f"{path} has no thread {only}")
    return (SnapshotSession(core.arch, core.modules(), core.read_memory, numbered,
                            core.executable,
                            virtual_address_bits=core.virtual_address_bits,
                            library_names=core.library_names()),
            core.check_unchanged, core.refused)
