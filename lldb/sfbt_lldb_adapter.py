"""The LLDB adapter: sfbt's Target over LLDB's SB API, and the commands
sframe-bt, cbf-save, cbf-load, sframe-info and sframe-provider (LLDB 22's
scripted frame providers, so that LLDB's own `bt` shows SFrame frames)."""

import os
import re
import shlex
import signal
import time

import lldb

from sfbt import cbf, frontend
from sfbt.arch import AARCH64, S390X, X86_64
from sfbt.archive import ArchiveError
from sfbt.imagemap import Image, ImageMap
from sfbt.modules import ModuleMap
from sfbt.symbolize import Symbolizer
from sfbt.target import Module, Target, TargetMemoryError
from sfbt.unwinder import STOP_LIMIT, STOP_OUTERMOST, Unwinder

_ARCHES = {"x86_64": X86_64, "aarch64": AARCH64, "arm64": AARCH64,
           "s390x": S390X}
# LLDB spells some registers its own way.
_LLDB_NAMES = {AARCH64.name: {29: "fp", 30: "lr", 31: "sp", 32: "pc"},
               S390X.name: {64: "pc"}}
_INVALID = lldb.LLDB_INVALID_ADDRESS
# The module LLDB imported (the entry file), where it finds our classes.
_ENTRY = {"module": __name__}


class CommandError(Exception):
    pass


def lldb_version():
    match = re.search(r"lldb version (\d+)", lldb.SBDebugger.GetVersionString())
    return int(match[1]) if match else 0


def arch_of(target):
    name = target.GetTriple().split("-")[0]
    arch = _ARCHES.get(name)
    if arch is None:
        raise CommandError(f"architecture {name} is not supported")
    return arch


def register_name(arch, number):
    return _LLDB_NAMES.get(arch.name, {}).get(number, arch.register_names[number])


# -- target ---------------------------------------------------------------------

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


class LldbTarget(Target):
    """One thread of LLDB's process; registers of its innermost frame."""

    def __init__(self, arch, process, frame0):
        self.arch = arch
        self._process = process
        self._frame0 = frame0

    def read_memory(self, address, size):
        error = lldb.SBError()
        data = self._process.ReadMemory(address, size, error)
        if error.Fail() or data is None or len(data) != size:
            raise TargetMemoryError(address, size)
        return bytes(data)

    def registers(self):
        values = {}
        for number in self.arch.register_names:
            value = self._frame0.FindRegister(register_name(self.arch, number))
            if value.IsValid() and value.GetValue() is not None:
                values[number] = value.GetValueAsUnsigned() & 0xFFFFFFFFFFFFFFFF
        return values

    def modules(self):
        return target_modules(self._process.GetTarget())


class _ModuleMaps:
    """The module map of each process, rebuilt when its images change."""

    def __init__(self):
        self._key = None
        self._map = None

    def for_target(self, target, arch):
        process = target.GetProcess()
        key = (target.GetNumModules(), process.GetProcessID(), process.GetStopID())
        if self._map is None or key != self._key:
            frame0 = process.GetSelectedThread().GetFrameAtIndex(0)
            self._map = ModuleMap(target_modules(target),
                                  LldbTarget(arch, process, frame0))
            self._key = key
        return self._map


module_maps = _ModuleMaps()


# -- symbolization ----------------------------------------------------------------

def describe_address(target, module_map, address, running, module=None):
    """(function, where) for an address, in sframe-bt's words.  Without a
    process every image sits at its file addresses, which overlap: the
    Module then says which image the address is in."""
    if running or module is None:
        resolved = (target.ResolveLoadAddress(address) if running
                    else target.ResolveFileAddress(address))
    else:
        image = target.FindModule(lldb.SBFileSpec(module.path))
        resolved = image.ResolveFileAddress(address - module.load_bias)
    context = target.ResolveSymbolContextForAddress(resolved, lldb.eSymbolContextEverything)
    function = context.GetFunction()
    if function.IsValid():
        name = function.GetName()
    elif context.GetSymbol().IsValid():
        name = context.GetSymbol().GetName()
    else:
        name = "??"
    line = context.GetLineEntry()
    if line.IsValid() and line.GetLine():
        return name, f" at {line.GetFileSpec().GetFilename()}:{line.GetLine()}"
    if module is None and module_map is not None:
        module = module_map.module_for(address)
    executable = target.GetExecutable().fullpath
    if module is not None and module.path != executable:
        return name, f" from {module.path}"
    return name, " ()"


def _is_running(process):
    return process.IsValid() and process.GetState() in (
        lldb.eStateStopped, lldb.eStateSuspended, lldb.eStateCrashed)


class Session:
    """What one command needs: target, process, arch and module map."""

    def __init__(self, debugger, exe_ctx=None, need_process=True):
        target = exe_ctx.GetTarget() if exe_ctx is not None else None
        if target is None or not target.IsValid():
            target = debugger.GetSelectedTarget()
        if not target.IsValid():
            raise CommandError("no target: load a program first")
        self.target = target
        self.process = target.GetProcess()
        self.running = _is_running(self.process)
        if need_process and not self.running:
            raise CommandError("No stack: the process is not running")
        self.arch = arch_of(target)
        self.module_map = module_maps.for_target(target, self.arch)

    def describe(self, frame):
        return describe_address(self.target, self.module_map, frame.lookup_pc, self.running)

    def walk(self, thread, limit=None, frame0=None):
        frame0 = frame0 or thread.GetFrameAtIndex(0)
        unwinder = Unwinder(LldbTarget(self.arch, self.process, frame0), self.module_map)

        def is_main(frame):
            return (not frame.signal_trampoline
                    and self.describe(frame)[0] == "main")

        return unwinder.walk(limit=limit, is_last=is_main)


# -- commands -------------------------------------------------------------------------

class _Command:
    """Base of the LLDB commands: one-line errors, never a traceback."""

    help_text = ""

    def __init__(self, debugger, internal_dict):
        self.debugger = debugger

    def get_short_help(self):
        return self.help_text.splitlines()[0]

    def get_long_help(self):
        return self.help_text

    def __call__(self, debugger, command, exe_ctx, result):
        try:
            text = self.run(debugger, shlex.split(command), exe_ctx)
            if text:
                result.AppendMessage(text)
            result.SetStatus(lldb.eReturnStatusSuccessFinishResult)
        except (CommandError, frontend.UsageError) as error:
            result.SetError(str(error))
        except Exception as error:  # one line, never a traceback
            result.SetError(f"{type(error).__name__}: {error}")


class SFrameBacktraceCommand(_Command):
    help_text = frontend.BACKTRACE_HELP

    def run(self, debugger, words, exe_ctx):
        count, verbose, full = frontend.parse_backtrace_arguments(words)
        session = Session(debugger, exe_ctx)
        thread = exe_ctx.GetThread() if exe_ctx.GetThread().IsValid() \
            else session.process.GetSelectedThread()
        frames, stop = session.walk(thread)
        return "\n".join(frontend.backtrace_lines(frames, stop, count, verbose, full,
                                                  session.describe, session.arch))


def capture_backtrace(session, thread):
    """CBF frames: SFrame first, LLDB's own frames where SFrame has none."""
    frames, stop = session.walk(thread)
    captured = [cbf.Frame("pc" if f.interrupted else "ra", f.pc) for f in frames]
    if stop is not None and stop not in (STOP_LIMIT, STOP_OUTERMOST):
        theirs = [thread.GetFrameAtIndex(i).GetPC() for i in range(thread.GetNumFrames())]
        last = len(captured) - 1
        if last < len(theirs) and theirs[last] == captured[last].address:
            captured += [cbf.Frame("ra", pc) for pc in theirs[last + 1:]]
    return captured, stop == STOP_LIMIT


def _stop_reason(thread):
    if thread.GetStopReason() == lldb.eStopReasonSignal:
        try:
            return signal.Signals(thread.GetStopReasonDataAtIndex(0)).name
        except ValueError:
            pass
    return "stopped"


def image_map(session):
    images = [Image(m.path, m.image_base, m.end,
                    bytes.fromhex(m.build_id) if m.build_id else b"")
              for m in session.module_map.modules]
    return ImageMap(f"linux-{session.arch.name}", images, 8 * session.arch.pointer_size)


class CbfSaveCommand(_Command):
    help_text = frontend.SAVE_HELP

    def run(self, debugger, words, exe_ctx):
        options = frontend.parse_save_arguments(words)
        session = Session(debugger, exe_ctx)
        selected = session.process.GetSelectedThread()
        threads = list(session.process) if options.all_threads else [selected]
        captures = []
        for thread in threads:
            frames, truncated = capture_backtrace(session, thread)
            captures.append(frontend.Capture(
                f"{thread.GetIndexID()} ({thread.GetThreadID()})", frames, truncated))
        try:
            return frontend.save_captures(options, captures, image_map(session),
                                          session.arch.name,
                                          8 * session.arch.pointer_size,
                                          _stop_reason(selected), time.time_ns())
        except (ArchiveError, OSError, ValueError) as error:
            raise CommandError(f"cbf-save: {error}") from None


class CbfLoadCommand(_Command):
    help_text = frontend.LOAD_HELP

    def run(self, debugger, words, exe_ctx):
        if len(words) != 1:
            raise CommandError("cbf-load: usage: cbf-load FILE")
        path = os.path.expanduser(words[0])
        session = Session(debugger, exe_ctx, need_process=False)
        translator = frontend.ImageTranslator(session.module_map.modules)
        offline = Symbolizer()

        def describer(images):
            def describe(address):
                now, module, unloaded = translator.translate(address, images)
                if unloaded is not None:
                    return offline.describe(now, [unloaded])
                return describe_address(session.target, session.module_map, now,
                                        session.running, module)
            return describe

        try:
            with open(path, "rb") as stream:
                traces, error = frontend.saved_traces(stream.read(), path)
            lines = frontend.saved_trace_lines(traces, describer)
        except (OSError, ArchiveError) + frontend.LOAD_ERRORS as failure:
            raise CommandError(f"cbf-load: {path}: {failure}") from None
        if error is not None:
            lines.append(f"error: cbf-load: {error}")
        return "\n".join(lines)


class SFrameInfoCommand(_Command):
    help_text = """\
List the loaded images and where their SFrame data comes from.

Usage: sframe-info
Each line shows an image's address range, its SFrame data (section version
and FDE count, read from the file or from the process's memory, or none)
and its path."""

    def run(self, debugger, words, exe_ctx):
        if words:
            raise CommandError("sframe-info takes no arguments")
        session = Session(debugger, exe_ctx, need_process=False)
        lines = [f"{'From':<18}  {'To':<18}  {'SFrame':<40}  Object file"]
        for module in session.module_map.modules:
            source = session.module_map.source_for(module)
            lines.append(f"{module.start:#018x}  {module.end:#018x}  "
                         f"{source.describe():<40}  {module.path}")
        return "\n".join(lines)


class SFrameProviderCommand(_Command):
    help_text = """\
Turn the SFrame frame provider on or off (LLDB 22 and newer).

Usage: sframe-provider on|off
With the provider on, LLDB's own `bt` and `frame select` show the frames
that SFrame data gives (the same frames as sframe-bt)."""

    def run(self, debugger, words, exe_ctx):
        if words not in (["on"], ["off"]):
            raise CommandError("usage: sframe-provider on|off")
        version = lldb_version()
        if version < 22:
            raise CommandError(f"sframe-provider needs LLDB 22 or newer "
                               f"(this is LLDB {version})")
        interpreter = debugger.GetCommandInterpreter()
        result = lldb.SBCommandReturnObject()
        if words == ["on"]:
            command = ("target frame-provider register -C "
                       f"{_ENTRY['module']}.SFrameFrameProvider")
        else:
            command = "target frame-provider clear"
        interpreter.HandleCommand(command, result)
        if not result.Succeeded():
            raise CommandError(f"sframe-provider: {result.GetError().strip()}")
        return f"SFrame frame provider {'on' if words == ['on'] else 'off'}."


try:
    from lldb.plugins.scripted_frame_provider import ScriptedFrameProvider
except ImportError:  # LLDB older than 22
    ScriptedFrameProvider = object


class SFrameFrameProvider(ScriptedFrameProvider):
    """Frames for LLDB's own bt, walked with SFrame data on first use."""

    @staticmethod
    def get_description():
        return "sfbt: frames unwound with SFrame data"

    def __init__(self, input_frames, args):
        super().__init__(input_frames, args)
        self._frames = None

    def _walk(self):
        try:
            session = Session(self.target.GetDebugger(), None)
            frames, _ = session.walk(self.thread,
                                     frame0=self.input_frames.GetFrameAtIndex(0))
        except Exception:  # LLDB's own frames then
            frames = []
        return frames

    def get_frame_at_index(self, index):
        if self._frames is None:
            self._frames = self._walk()
        if not self._frames:
            return index if index < self.input_frames.GetSize() else None
        if index < len(self._frames):
            return {"idx": index, "pc": self._frames[index].pc}
        return None


COMMANDS = {
    "sframe-bt": SFrameBacktraceCommand,
    "cbf-save": CbfSaveCommand,
    "cbf-load": CbfLoadCommand,
    "sframe-info": SFrameInfoCommand,
    "sframe-provider": SFrameProviderCommand,
}


CLASSES = {cls.__name__: cls for cls in [*COMMANDS.values(), SFrameFrameProvider]}


def register(debugger, entry_module):
    _ENTRY["module"] = entry_module
    for name, command in COMMANDS.items():
        debugger.HandleCommand(
            f"command script add -o -c {entry_module}.{command.__name__} {name}")
