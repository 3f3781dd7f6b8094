"""`sfbt stack`: every thread's backtrace from a live process or a core,
walked with the same core and rows as sframe-bt, printed as sframe-bt
prints frames or saved as cbf-save --all-threads saves them."""

import signal as signals
import time

from ..archive import cbf
from ..commands.backtrace import backtrace_lines
from ..printable import printable
from ..unwind.modules import ModuleMap, SFrameSources
from ..unwind.walk import STOP_LIMIT, Unwinder
from .mappings import display_path, mapping_at
from .memory import ThreadState, ThreadTarget
from .symbols import Describer

#: frames walked at most per thread
FRAME_LIMIT = 1000


class Walker:
    """Walks captured threads of one process (or core) with one module map
    and one SFrame cache."""

    def __init__(self, arch, modules, read, executable=None, sources=None,
                 past_main=False, mappings=None, debug_files=None):
        self.arch = arch
        #: a live process's mappings: a walk that ends at a PC in none of
        #: them says so
        self.modules = modules
        self.read = read
        self.sources = sources if sources is not None else SFrameSources()
        memory = ThreadTarget(arch, ThreadState(0, "", {}), read, modules)
        self.module_map = ModuleMap(modules, memory, self.sources)
        self.describe = Describer(self.module_map, executable, debug_files)
        self.past_main = past_main
        self.mappings = mappings

    def walk(self, state):
        """(frames, stop reason or None) of a captured thread."""
        target = ThreadTarget(self.arch, state, self.read, self.modules)
        unwinder = Unwinder(target, self.module_map, fallback="fp")
        is_last = None
        if not self.past_main:
            def is_last(frame):
                return (not frame.signal_trampoline
                        and self.describe.name(frame.lookup_pc) == "main")
        frames, stop = unwinder.walk(limit=FRAME_LIMIT, is_last=is_last)
        if stop is not None and frames:
            stop = self._why_stopped(frames[-1], stop)
        return frames, stop

    def _why_stopped(self, last, stop):
        """The walk's stop reason, with what sfbt knows of the last frame's
        image: gone since the thread was copied, or its file not the one
        mapped."""
        if self.mappings is not None and mapping_at(self.mappings, last.lookup_pc) is None:
            return (f"PC {last.pc:#x} is in no mapping (in a library unloaded "
                    "since the thread was copied?)")
        module = self.module_map.module_for(last.lookup_pc)
        if module is not None and getattr(module, "note", ""):
            return f"{stop} (in {display_path(module)})"
        return stop


def thread_heading(number, state):
    name = f' "{printable(state.name)}"' if state.name else ""
    return f"Thread {number} (LWP {state.tid}{name}):"


def thread_lines(walker, number, state, frames, stop):
    lines = [thread_heading(number, state)]
    lines += backtrace_lines(frames, stop, None, False, False,
                             lambda frame: walker.describe.frames(frame.lookup_pc), walker.arch)
    return lines


def stack_text(walker, walks):
    """`sfbt stack`'s text of [(number, ThreadState, frames, stop)]."""
    lines = []
    for number, state, frames, stop in walks:
        if lines:
            lines.append("")
        lines += thread_lines(walker, number, state, frames, stop)
    return "".join(line + "\n" for line in lines)


def live_threads(pid, only=None, sources=None):
    """(Walker, [(thread number, ThreadState)]) of process ``pid`` (only
    its thread ``only`` if given): each thread stopped in turn, only while
    its registers and stack are copied."""
    from .process import Process, ProcessError, ProcessExited
    process = Process(pid)
    try:
        threads = list(enumerate(process.threads(), 1))
        if only is not None:
            threads = [t for t in threads if t[1][0] == only]
            if not threads:
                raise ProcessError(f"process {pid} has no thread {only}")
        numbered = [(number, process.snapshot(tid, name)) for number, (tid, name) in threads]
        numbered = [(number, state) for number, state in numbered if state]
        if not numbered:
            raise ProcessExited(f"process {pid} exited")
        try:  # the libraries loaded while the threads were copied
            process.reread_mappings(keep_gone=True)
        except ProcessError:
            pass  # it exited since: the mappings read before are all there is
        walker = Walker(process.arch, process.modules(), process.read, process.executable,
                        sources=sources, mappings=process.mappings)
    finally:
        process.close()
    return walker, numbered


def live_stack_text(pid, sources=None):
    """What `sfbt stack PID` prints."""
    walker, numbered = live_threads(pid, sources=sources)
    return stack_text(walker, [(number, state, *walker.walk(state))
                               for number, state in numbered])


def cbf_frames(frames):
    return [cbf.Frame("pc" if f.interrupted else "ra", f.pc) for f in frames]


def stop_reason(state):
    if state.signal:
        try:
            return signals.Signals(state.signal).name
        except ValueError:
            return f"signal {state.signal}"
    return "stopped"


def capture(state, frames, stop, number):
    """What cbf-save stores for one thread."""
    from ..commands.save import Capture
    return Capture(f"{number} ({state.tid})", cbf_frames(frames), stop == STOP_LIMIT)


def image_map(arch, modules):
    from ..archive.imagemap import Image, ImageMap
    images = [Image(display_path(m), m.image_base, m.end,
                    bytes.fromhex(m.build_id) if m.build_id else b"")
              for m in modules]
    return ImageMap(f"linux-{arch.name}", images, 8 * arch.pointer_size)


def save(path, fmt, walker, captures, reason):
    """Write the captures as cbf-save does; returns its message."""
    from ..commands.save import SaveOptions, save_captures
    return save_captures(SaveOptions(path, fmt), captures,
                         image_map(walker.arch, walker.modules), walker.arch.name,
                         8 * walker.arch.pointer_size, reason, time.time_ns())
