"""sfbt's Session and Target over LLDB's SB API."""

import collections
import re
import signal

import lldb

from sfbt.arch import arch_for_debugger
from sfbt.commands import CommandError, Session, Settings, Thread
from sfbt.commands.kept import Kept
from sfbt.errors import TargetMemoryError
from sfbt.frame_name import FrameName
from sfbt.unwind.modules import ModuleMap, SFrameSources
from sfbt.unwind.target import Module, Target

_INVALID = lldb.LLDB_INVALID_ADDRESS


def lldb_version():
    match = re.search(r"lldb version (\d+)", lldb.SBDebugger.GetVersionString())
    return int(match[1]) if match else 0


def arch_of(target):
    name = target.GetTriple().split("-")[0]
    arch = arch_for_debugger(name, "lldb")
    if arch is None:
        raise CommandError(f"architecture {name} is not supported")
    return arch


def _normalized_uuid(module):
    text = module.GetUUIDString()
    return text.replace("-", "").lower() if text else None


def target_modules(target):
    """Module for each image LLDB knows, at its load address when the
    process runs, else at its file address."""
    modules = []
    for image in target.module_iter():
        path = image.GetFileSpec().fullpath
        if not path:
            continue
        header = image.GetObjectFileHeaderAddress()
        header_file = header.GetFileAddress()
        header_load = header.GetLoadAddress(target)
        bias = 0 if header_load == _INVALID else header_load - header_file
        ranges = []
        for section in image.section_iter():
            start = section.GetLoadAddress(target)
            if start == _INVALID:
                start = section.GetFileAddress() + bias
            if section.GetByteSize() and start != _INVALID:
                ranges.append((start, start + section.GetByteSize()))
        if not ranges:
            continue
        base = header_file + bias if header_file != _INVALID else None
        modules.append(Module(path, bias, min(r[0] for r in ranges),
                              max(r[1] for r in ranges), _normalized_uuid(image), base))
    return modules


def frame_registers(arch, frame):
    """{DWARF number: value} of the registers LLDB knows in ``frame``."""
    values = {}
    for number in arch.register_names:
        value = frame.FindRegister(arch.register_name(number, "lldb"))
        if value.IsValid() and value.GetValue() is not None:
            values[number] = value.GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF
    return values


PAGE = 4096


class LldbTarget(Target):
    """One thread of LLDB's process at one stop; registers of its innermost
    frame (``frame0``, read when first asked, or ``registers`` read
    before).  Memory is read a page at a time and kept: a walk reads a
    word or two per frame, mostly from the same stack pages, and one
    SBProcess.ReadMemory costs as much as a page."""

    def __init__(self, arch, process, frame0=None, modules=(), registers=None):
        self.arch = arch
        self._process = process
        self._frame0 = frame0
        self._registers = registers
        self._modules = modules
        self._pages = {}  # page address -> its bytes, or None: unreadable

    def _read(self, address, size):
        error = lldb.SBError()
        data = self._process.ReadMemory(address, size, error)
        if error.Fail() or data is None or len(data) != size:
            return None
        return bytes(data)

    def read_memory(self, address, size):
        page = address & ~(PAGE - 1)
        offset = address - page
        if offset + size <= PAGE:
            if page not in self._pages:
                self._pages[page] = self._read(page, PAGE)
            data = self._pages[page]
            if data is not None:
                return data[offset:offset + size]
        data = self._read(address, size)  # across pages, or a page partly mapped
        if data is None:
            raise TargetMemoryError(address, size)
        return data

    def registers(self):
        if self._registers is None:
            self._registers = frame_registers(self.arch, self._frame0)
        return self._registers

    def modules(self):
        return self._modules


class State:
    """The plugin's state in this LLDB: settings, SFrame data per module
    (kept for the session), the module map of the current stop and what
    the commands keep for the modules (sfbt.commands.kept's ``modules``,
    as in GDB), forgotten when the target's images (their files and load
    addresses) or the process change.  What a stop read (the walk) is kept
    for one command only: LLDB tells the plugin of no register or memory
    write, and its stop id stays the same through them."""

    def __init__(self):
        self.settings = Settings("lldb")
        self.sources = SFrameSources()
        self.settings.observe(self._setting_changed)
        self._key = None
        self._map = None
        self.errors = collections.deque(maxlen=50)
        #: the frame provider's last plan per thread index: a summary line
        self.provider_plans = {}
        self.modules = Kept("modules")
        self._modules_key = None

    def _setting_changed(self, name, value):
        if name == "synthesize":
            self.sources.synthesize = bool(value)

    def modules_kept(self, target):
        """The modules' owner, forgotten first where the target's images
        or the process changed since the last command (LLDB calls the
        plugin on no event: checked at each command)."""
        process = target.GetProcess()
        key = (target.GetExecutable().fullpath, process.GetProcessID(), tuple(
            (image.GetFileSpec().fullpath,
             image.GetObjectFileHeaderAddress().GetLoadAddress(target))
            for image in target.module_iter()))
        if key != self._modules_key:
            self.modules.forget()
            self._modules_key = key
        return self.modules

    def module_map(self, target, arch, frame0=None):
        """The module map, rebuilt when the target's images or the stop
        changed.  ``frame0`` is a frame whose registers the map's target may
        read; inside a frame provider it must come from the provider's
        input frames (asking the thread for its frames there aborts LLDB)."""
        process = target.GetProcess()
        key = (target.GetNumModules(), process.GetProcessID(), process.GetStopID())
        if self._map is None or key != self._key:
            modules = target_modules(target)
            self._map = ModuleMap(modules, LldbTarget(arch, process, frame0, modules),
                                  self.sources)
            self._key = key
        return self._map


state = State()


def _is_running(process):
    return process.IsValid() and process.GetState() in (
        lldb.eStateStopped, lldb.eStateSuspended, lldb.eStateCrashed)

#: the setting that names the servers LLDB (18 and later) downloads from
DEBUGINFOD_SETTING = "plugin.symbol-locator.debuginfod.server-urls"
MAX_URL = 4096


class LldbSession(Session):
    """LLDB's selected target, for one command."""

    debugger = "lldb"

    def __init__(self, debugger, exe_ctx=None, target=None):
        if target is None and exe_ctx is not None:
            target = exe_ctx.GetTarget()
        if target is None or not target.IsValid():
            target = debugger.GetSelectedTarget()
        if not target.IsValid():
            raise CommandError("no target: load a program first")
        self.settings = state.settings
        self.lldb_debugger = debugger
        self.lldb_target = target
        self.process = target.GetProcess()
        self.running = _is_running(self.process)
        self._exe_ctx = exe_ctx
        self._arch = arch_of(target)
        self._modules_kept = state.modules_kept(target)

    @property
    def arch(self):
        return self._arch

    def debuginfod_servers(self):
        """The servers LLDB's debuginfod symbol locator asks
        (plugin.symbol-locator.debuginfod.server-urls, which LLDB fills
        from DEBUGINFOD_URLS; empty: none); None for an LLDB without it."""
        urls = self.lldb_debugger.GetSetting(DEBUGINFOD_SETTING)
        if not urls.IsValid():
            return None
        return " ".join(urls.GetItemAtIndex(i).GetStringValue(MAX_URL)
                        for i in range(urls.GetSize()))

    def has_stack(self):
        return self.running

    def threads(self):
        return [self._thread(t) for t in self.process]

    def selected_thread(self):
        thread = None
        if self._exe_ctx is not None and self._exe_ctx.GetThread().IsValid():
            thread = self._exe_ctx.GetThread()
        return self._thread(thread or self.process.GetSelectedThread())

    @staticmethod
    def _thread(thread):
        return Thread(f"{thread.GetIndexID()} ({thread.GetThreadID()})", thread)

    def target(self, thread):
        frame0 = thread.handle.GetFrameAtIndex(0)
        module_map = self.module_map()
        return LldbTarget(self.arch, self.process, frame0, module_map.modules)

    def module_map(self):
        return state.module_map(self.lldb_target, self.arch)

    def debugger_frames(self, thread):
        frames = thread.handle
        return [(frames.GetFrameAtIndex(i).GetPC(), i == 0)
                for i in range(frames.GetNumFrames())]

    def modules_kept(self):
        return self._modules_kept

    def describe(self, lookup_pc, module=None):
        """Without a process every image sits at its file addresses, which
        overlap: ``module`` then says which image the address is in.  Kept
        while the modules stay the same (a deep recursion repeats a few
        addresses; the next command names the same ones)."""
        described = self._modules_kept.table("descriptions")
        key = (lookup_pc, module)
        if key not in described:
            described[key] = self._describe(lookup_pc, module)
        return described[key]

    def _describe(self, lookup_pc, module):
        target = self.lldb_target
        if self.running or module is None:
            resolved = (target.ResolveLoadAddress(lookup_pc) if self.running
                        else target.ResolveFileAddress(lookup_pc))
        else:
            image = target.FindModule(lldb.SBFileSpec(module.path))
            resolved = image.ResolveFileAddress(lookup_pc - module.load_bias)
        context = target.ResolveSymbolContextForAddress(resolved,
                                                        lldb.eSymbolContextEverything)
        function = context.GetFunction()
        if function.IsValid():
            name = function.GetName()
        elif context.GetSymbol().IsValid():
            name = context.GetSymbol().GetName()
        else:
            name = None
        line = context.GetLineEntry()
        if line.IsValid() and line.GetLine():
            return FrameName(name, line.GetFileSpec().GetFilename(), line.GetLine())
        if module is None:
            module = self.module_map().module_for(lookup_pc)
        if module is not None and module.path != target.GetExecutable().fullpath:
            return FrameName(name, module=module.path)
        return FrameName(name)

    def outer_name(self, lookup_pc):
        return self.describe(lookup_pc).function

    def innermost_frames(self, thread):
        """LLDB's own frames down to its first one on the stack: the frames
        of the inlined calls it shows there (as deep as it stepped into
        them), then the function's own."""
        frames = []
        frame = thread.handle.GetFrameAtIndex(0)
        while frame.IsValid():  # (not thread.frames: that unwinds them all)
            frames.append(self._describe_frame(frame))
            if not frame.IsInlined():
                return frames[-1].replace(inlined=tuple(frames[:-1]))
            frame = thread.handle.GetFrameAtIndex(len(frames))
        return None  # no frame of a function's own: LLDB could not say

    def _describe_frame(self, frame):
        """The FrameName of one of LLDB's frames: where its line entry says
        (for a function that calls an inlined one, the call's place)."""
        name = frame.GetFunctionName()
        line = frame.GetLineEntry()
        if name and line.IsValid() and line.GetLine():
            return FrameName(name, line.GetFileSpec().GetFilename(), line.GetLine())
        return self.describe(frame.GetPC())

    def stop_reason(self, thread):
        handle = thread.handle
        if handle.GetStopReason() == lldb.eStopReasonSignal:
            try:
                return signal.Signals(handle.GetStopReasonDataAtIndex(0)).name
            except ValueError:
                pass
        return "stopped"
