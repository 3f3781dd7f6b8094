"""The GDB adapter: sfbt's Target over GDB's Python API, the sframe-bt and
info sframe commands, `set/show sframe ...`, and a frame unwinder that
gives GDB's own bt, up and finish the frames SFrame describes.

Works on GDB 13.1: frame ids are plain objects with gdb.Value sp and pc
(gdb.unwinder.FrameId is GDB 14+), and the load bias of each object file
comes from `info files` (gdb.Objfile has no load address before GDB 14).
"""

import collections
import os
import re
import signal
import time

import gdb
import gdb.unwinder

from elftools.elf.elffile import ELFFile

from sfbt import cbf, frontend
from sfbt.arch import AARCH64, S390X, X86_64
from sfbt.archive import ArchiveError
from sfbt.elfimage import image_in_memory
from sfbt.imagemap import Image, ImageMap
from sfbt.symbolize import Symbolizer
from sfbt.modules import ModuleMap, set_synthesis
from sfbt.target import Module, Target, TargetMemoryError
from sfbt.unwinder import STOP_LIMIT, STOP_OUTERMOST, Frame, Unwinder

_GDB_ARCHES = {"i386:x86-64": X86_64, "aarch64": AARCH64, "s390:64-bit": S390X}


class SFrameGdbError(gdb.GdbError):
    pass


# -- target -------------------------------------------------------------------

def current_arch():
    try:
        name = gdb.selected_inferior().architecture().name()
    except (gdb.error, AttributeError):
        name = gdb.newest_frame().architecture().name()
    arch = _GDB_ARCHES.get(name)
    if arch is None:
        raise SFrameGdbError(f"sframe: architecture {name} is not supported")
    return arch


_SECTION_LINE = re.compile(
    r"^\s*0x([0-9a-f]+) - 0x([0-9a-f]+) is (\S+)(?: in (.+))?$")
_EXEC_LINE = re.compile(r"^\s*`(.+)', file type")


def parse_info_files(text):
    """{path: {section: (start, end)}} from `info files`."""
    exec_path = None
    files = collections.OrderedDict()
    for line in text.splitlines():
        match = _EXEC_LINE.match(line)
        if match:
            exec_path = match[1]
            continue
        match = _SECTION_LINE.match(line)
        if match:
            path = match[4] or exec_path
            if path is None:
                continue
            files.setdefault(path, {})[match[3]] = (int(match[1], 16),
                                                    int(match[2], 16))
    return files


_FILE_LAYOUTS = {}  # (path, mtime) -> ({section name: sh_addr}, first PT_LOAD vaddr)


def _file_layout(path):
    """Section addresses and the first loadable segment's address of an ELF
    file, or (None, None) when it cannot be read."""
    try:
        key = (path, os.stat(path).st_mtime_ns)
    except OSError:
        return None, None
    if key not in _FILE_LAYOUTS:
        try:
            with open(path, "rb") as stream:
                elf = ELFFile(stream)
                sections = {s.name: s["sh_addr"] for s in elf.iter_sections()
                            if s["sh_addr"]}
                loads = [p["p_vaddr"] for p in elf.iter_segments()
                         if p["p_type"] == "PT_LOAD"]
                _FILE_LAYOUTS[key] = (sections, min(loads) if loads else None)
        except Exception:  # not an ELF file we can read
            _FILE_LAYOUTS[key] = (None, None)
    return _FILE_LAYOUTS[key]


def loaded_modules(target=None):
    """Module for each object file GDB has loaded, from `info files`.  The
    load bias comes from the file; when GDB has a file that cannot be
    opened here (read from a remote target, `target:/lib/...`; a core
    whose files moved; the vDSO), from the ELF header in target memory."""
    build_ids = {o.filename: o.build_id for o in gdb.objfiles()
                 if o.is_valid() and o.filename}
    modules = []
    text = gdb.execute("info files", to_string=True)
    for path, sections in parse_info_files(text).items():
        file_sections, first_load = _file_layout(path)
        start = min(s for s, _ in sections.values())
        end = max(e for _, e in sections.values())
        image = None
        if file_sections is None and target is not None:
            image = image_in_memory(target, start)
        if image is not None:
            start, bias = image
            modules.append(Module(path, bias, start, end, build_ids.get(path), start))
            continue
        file_sections = file_sections or {}
        bias = 0
        for name, (section_start, _) in sections.items():
            if name in file_sections:
                bias = section_start - file_sections[name]
                break
        base = None if first_load is None else bias + first_load
        modules.append(Module(path, bias, start, end, build_ids.get(path), base))
    return modules


def register_bits(value):
    """A register's contents as an unsigned 64-bit int.  Floating-point
    registers (s390x keeps an FP or RA in them) give their raw bits, not
    their value as a double."""
    if value.type.strip_typedefs().code == gdb.TYPE_CODE_FLT:
        return int(value.format_string(format="x"), 16) & 0xFFFFFFFFFFFFFFFF
    return int(value) & 0xFFFFFFFFFFFFFFFF


class GdbTarget(Target):
    """The selected thread of GDB's selected inferior."""

    def __init__(self, arch):
        self.arch = arch
        self._inferior = gdb.selected_inferior()
        self._va_bits = None

    @property
    def virtual_address_bits(self):
        """For stripping signed return addresses: from $pauth_cmask where
        the target reports it (native AArch64 Linux, gdbserver), else 48.
        qemu 7.2's gdb stub does not report it."""
        if self._va_bits is None:
            try:
                mask = int(self._named_register("pauth_cmask"))
            except (gdb.error, ValueError, RuntimeError):
                mask = 0
            self._va_bits = self.arch.virtual_address_bits(mask)
        return self._va_bits

    def _named_register(self, name):
        return gdb.newest_frame().read_register(name)

    def read_memory(self, address, size):
        try:
            return self._inferior.read_memory(address, size).tobytes()
        except (gdb.MemoryError, gdb.error, OverflowError, ValueError):
            raise TargetMemoryError(address, size) from None

    def registers(self):
        frame = gdb.newest_frame()
        values = {}
        for number, name in self.arch.register_names.items():
            try:
                values[number] = register_bits(frame.read_register(name))
            except (gdb.error, ValueError):
                pass
        return values

    def modules(self):
        return state.module_map().modules


# -- shared state ---------------------------------------------------------------

class _State:
    """The module map, rebuilt only when the set of object files or the
    process changed (checked once after each stop, on first use)."""

    def __init__(self):
        self._map = None
        self._key = None
        self._checked = False
        self.errors = collections.deque(maxlen=50)

    def invalidate(self, *_):
        self._checked = False

    def forget(self, *_):
        self._map = None
        self._checked = False

    def module_map(self):
        if self._map is not None and self._checked:
            return self._map
        inferior = gdb.selected_inferior()
        key = (inferior.num, inferior.pid,
               tuple(o.filename for o in gdb.objfiles() if o.is_valid()))
        if self._map is None or key != self._key:
            arch = current_arch()
            target = GdbTarget(arch)
            self._map = ModuleMap(loaded_modules(target), target)
            self._key = key
        self._checked = True
        return self._map

    def record_error(self, where, error):
        message = f"{where}: {type(error).__name__}: {error}"
        self.errors.append(message)
        if debug_parameter.value:
            print(f"sframe: {message}")


state = _State()


# -- symbolization ----------------------------------------------------------------

def _minimal_symbol(pc):
    try:
        text = gdb.execute(f"info symbol {pc:#x}", to_string=True)
    except gdb.error:
        return None
    if text.startswith("No symbol matches"):
        return None
    return text.split(" in section ")[0].split(" + ")[0].strip()


def _function_name(pc):
    """The name of the function containing pc: from debug info, else from
    the minimal symbols, else None."""
    try:
        block = gdb.block_for_pc(pc)
    except RuntimeError:
        block = None
    while block is not None and block.function is None:
        block = block.superblock
    if block is not None:
        return block.function.print_name
    return _minimal_symbol(pc)


def describe_frame(frame, module_map):
    """(function name, location suffix) for a frame, in bt's words."""
    pc = frame.lookup_pc
    name = _function_name(pc) or "??"
    sal = gdb.find_pc_line(pc)
    if sal.symtab is not None and sal.line:
        return name, f" at {sal.symtab.filename}:{sal.line}"
    module = module_map.module_for(pc)
    progspace_file = gdb.current_progspace().filename
    if module is not None and module.path != progspace_file:
        return name, f" from {module.path}"
    return name, " ()"


# -- sframe-bt --------------------------------------------------------------------------

class SFrameBacktrace(gdb.Command):
    __doc__ = frontend.BACKTRACE_HELP + "\nSee also: info sframe, set sframe."

    def __init__(self):
        super().__init__("sframe-bt", gdb.COMMAND_STACK)

    def complete(self, text, word):
        # GDB breaks words at "-": complete the whole option being typed.
        typed = "" if not text or text.endswith(" ") else text.split()[-1]
        cut = len(typed) - len(word or "")
        return [option[cut:] for option in
                frontend.complete_option(frontend.BACKTRACE_OPTIONS, typed)]

    def invoke(self, argument, from_tty):
        try:
            count, verbose, full = frontend.parse_backtrace_arguments(
                gdb.string_to_argv(argument))
        except frontend.UsageError as error:
            raise SFrameGdbError(str(error)) from None
        if not gdb.selected_inferior().pid and not _has_core():
            raise SFrameGdbError("No stack.")
        try:
            frames, stop = walk_stack(limit_parameter.value or None)
            module_map = state.module_map()
            lines = frontend.backtrace_lines(
                frames, stop, count, verbose, full,
                lambda frame: describe_frame(frame, module_map), current_arch())
        except gdb.GdbError:
            raise
        except Exception as error:  # one line, never a traceback
            raise SFrameGdbError(f"sframe-bt: {error}") from None
        gdb.write("\n".join(lines) + "\n")


def _has_core():
    try:
        return gdb.selected_inferior().threads() != ()
    except gdb.error:
        return False


def _past_main():
    try:
        return gdb.parameter("backtrace past-main")
    except gdb.error:
        return False


def walk_stack(limit=None):
    """Frames of the selected thread, and the stop reason (None at main)."""
    arch = current_arch()
    module_map = state.module_map()
    target = GdbTarget(arch)
    unwinder = Unwinder(target, module_map, fallback=fallback_parameter.value)
    is_last = None if _past_main() else _is_main
    return unwinder.walk(limit=limit, is_last=is_last)


def _is_main(frame):
    return not frame.signal_trampoline and _function_name(frame.lookup_pc) == "main"


# -- backtrace archives ------------------------------------------------------------------

def gdb_stack_frames():
    """GDB's own frames that are on the stack: [(pc, interrupted)].

    Tail-call frames (synthesized from DWARF call-site data for functions
    that left with a jump) and inline frames (a function inlined into
    another, shown with the PC of the frame it sits in) are left out:
    neither has a place of its own on the stack.  ``interrupted``: the frame
    below is a signal trampoline, so the PC is not a return address."""
    result, frame, newer_is_signal = [], gdb.newest_frame(), True
    while frame is not None:
        if frame.type() not in (gdb.TAILCALL_FRAME, gdb.INLINE_FRAME):
            result.append((int(frame.pc()), newer_is_signal))
            newer_is_signal = frame.type() == gdb.SIGTRAMP_FRAME
        frame = frame.older()
    return result


def capture_backtrace():
    """The selected thread's frames as CBF frames, SFrame first and GDB's
    own frames where SFrame has none; and whether the trace was cut."""
    frames, stop = walk_stack(limit_parameter.value or None)
    captured = [cbf.Frame("pc" if f.interrupted else "ra", f.pc) for f in frames]
    if stop is not None and stop != STOP_LIMIT and stop != STOP_OUTERMOST:
        theirs = gdb_stack_frames()
        last = len(captured) - 1
        if last < len(theirs) and theirs[last][0] == captured[last].address:
            captured += [cbf.Frame("pc" if interrupted else "ra", pc)
                         for pc, interrupted in theirs[last + 1:]]
    return captured, stop == STOP_LIMIT


def current_image_map(arch):
    images = []
    for module in state.module_map().modules:
        build_id = bytes.fromhex(module.build_id) if module.build_id else b""
        images.append(Image(module.path, module.image_base, module.end, build_id))
    return ImageMap(f"linux-{arch.name}", images, 8 * arch.pointer_size)


def _stop_reason():
    try:
        number = int(gdb.parse_and_eval("$_siginfo.si_signo"))
        return signal.Signals(number).name
    except (gdb.error, ValueError, RuntimeError):
        return "stopped"


class CbfSave(gdb.Command):
    __doc__ = frontend.SAVE_HELP

    def __init__(self):
        super().__init__("cbf-save", gdb.COMMAND_STACK, gdb.COMPLETE_FILENAME)

    def invoke(self, argument, from_tty):
        try:
            options = frontend.parse_save_arguments(gdb.string_to_argv(argument))
            gdb.write(self.save(options) + "\n")
        except gdb.GdbError:
            raise
        except frontend.UsageError as error:
            raise SFrameGdbError(str(error)) from None
        except (ArchiveError, OSError, ValueError) as error:
            raise SFrameGdbError(f"cbf-save: {error}") from None
        except Exception as error:  # one line, never a traceback
            raise SFrameGdbError(f"cbf-save: {type(error).__name__}: {error}") from None

    @staticmethod
    def save(options):
        if not gdb.selected_inferior().threads():
            raise SFrameGdbError("cbf-save: No stack.")
        arch = current_arch()
        selected = gdb.selected_thread()
        threads = (sorted(gdb.selected_inferior().threads(), key=lambda t: t.num)
                   if options.all_threads else [selected])
        captures = []
        try:
            for thread in threads:
                thread.switch()
                frames, truncated = capture_backtrace()
                captures.append(frontend.Capture(f"{thread.num} ({thread.ptid[1]})",
                                                 frames, truncated))
        finally:
            selected.switch()
        return frontend.save_captures(options, captures, current_image_map(arch),
                                      arch.name, 8 * arch.pointer_size,
                                      _stop_reason(), time.time_ns())


class CbfLoad(gdb.Command):
    __doc__ = frontend.LOAD_HELP

    def __init__(self):
        super().__init__("cbf-load", gdb.COMMAND_STACK, gdb.COMPLETE_FILENAME)

    def invoke(self, argument, from_tty):
        words = gdb.string_to_argv(argument)
        if len(words) != 1:
            raise SFrameGdbError("cbf-load: usage: cbf-load FILE")
        path = os.path.expanduser(words[0])
        try:
            with open(path, "rb") as stream:
                traces, error = frontend.saved_traces(stream.read(), path)
            lines = frontend.saved_trace_lines(traces, self.describer)
        except (OSError, ArchiveError) + frontend.LOAD_ERRORS as failure:
            raise SFrameGdbError(f"cbf-load: {path}: {failure}") from None
        except Exception as failure:  # one line, never a traceback
            raise SFrameGdbError(f"cbf-load: {path}: {type(failure).__name__}: {failure}") from None
        gdb.write("\n".join(lines) + "\n")
        if error is not None:
            raise SFrameGdbError(f"cbf-load: {error}")

    @staticmethod
    def describer(images):
        """describe(saved lookup address) for the images of one trace."""
        module_map = state.module_map() if gdb.objfiles() else None
        translator = frontend.ImageTranslator(module_map.modules if module_map else ())
        offline = Symbolizer()

        def describe(address):
            now, _, unloaded = translator.translate(address, images)
            if unloaded is not None:
                return offline.describe(now, [unloaded])
            if module_map is None:
                return "??", " ()"
            return describe_frame(Frame(0, now, {}, interrupted=True), module_map)

        return describe


# -- info sframe ---------------------------------------------------------------------------

class InfoSFrame(gdb.Command):
    """List the loaded object files and where their SFrame data comes from.

Usage: info sframe
Each line shows a module's address range, its path, and its SFrame data:
the section version and FDE count and whether it was read from the file
or from the target's memory; "synthesized from .eh_frame" for rows made
from DWARF call-frame information (`set sframe synthesize`); or "none"."""

    def __init__(self):
        super().__init__("info sframe", gdb.COMMAND_STATUS, gdb.COMPLETE_NONE)

    def invoke(self, argument, from_tty):
        if argument.strip():
            raise SFrameGdbError("info sframe takes no arguments")
        module_map = state.module_map()
        if not module_map.modules:
            gdb.write("No object files loaded.\n")
            return
        lines = [f"{'From':<18}  {'To':<18}  {'SFrame':<40}  Object file"]
        for module in module_map.modules:
            source = module_map.source_for(module)
            lines.append(f"{module.start:#018x}  {module.end:#018x}  "
                         f"{source.describe():<40}  {module.path}")
        gdb.write("\n".join(lines) + "\n")


# -- settings ------------------------------------------------------------------------------

class _Prefix(gdb.Command):
    def __init__(self, name, doc):
        self.__doc__ = doc
        super().__init__(name, gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)


class _Parameter(gdb.Parameter):
    def __init__(self, name, kind, doc, show_doc, *extra, default=None):
        self.set_doc = doc
        self.show_doc = show_doc
        self.__doc__ = doc
        super().__init__(name, gdb.COMMAND_DATA, kind, *extra)
        if default is not None:
            self.value = default

    def get_set_string(self):
        gdb.invalidate_cached_frames()
        return ""


class UnwinderParameter(_Parameter):
    def get_show_string(self, value):
        return f"Unwinding GDB's frames with SFrame data is {value}."

    def get_set_string(self):
        frame_unwinder.enabled = bool(self.value)
        gdb.invalidate_cached_frames()
        return ""


class LimitParameter(_Parameter):
    def get_show_string(self, value):
        if self.value is None or value == "0":
            value = "unlimited"
        return f"The upper bound on sframe-bt frames is {value}."


class FallbackParameter(_Parameter):
    def get_show_string(self, value):
        return f"Where SFrame has no data, sframe-bt falls back to: {value}."


class SynthesizeParameter(_Parameter):
    def get_show_string(self, value):
        return (f"Synthesizing SFrame rows from .eh_frame/.debug_frame for "
                f"objects without .sframe is {value}.")

    def get_set_string(self):
        set_synthesis(self.value)
        gdb.invalidate_cached_frames()
        return ""


class DebugParameter(_Parameter):
    def get_show_string(self, value):
        return f"SFrame unwinder debugging output is {value}."

    def get_set_string(self):
        if self.value and state.errors:
            return "Recent SFrame unwinder errors:\n  " + "\n  ".join(state.errors)
        return ""


# -- the frame unwinder ----------------------------------------------------------------

class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class _PendingTarget(GdbTarget):
    """The registers of a frame GDB is building, read on demand."""

    def __init__(self, arch, pending):
        super().__init__(arch)
        self._pending = pending

    def read_register(self, number):
        name = self.arch.register_names[number]
        return register_bits(self._pending.read_register(name))

    def _named_register(self, name):
        return self._pending.read_register(name)


class SFrameFrameUnwinder(gdb.unwinder.Unwinder):
    """Frames from SFrame rows; None (GDB's own unwinders) elsewhere."""

    def __init__(self):
        super().__init__("sframe")
        self._value_type = None

    def _value(self, number):
        if self._value_type is None:
            self._value_type = gdb.lookup_type("unsigned long")
        return gdb.Value(number).cast(self._value_type)

    def __call__(self, pending_frame):
        try:
            return self._unwind(pending_frame)
        except Exception as error:  # never let an error reach the user
            state.record_error("unwinder", error)
            return None

    def _unwind(self, pending):
        arch = _GDB_ARCHES.get(pending.architecture().name())
        if arch is None:
            return None
        pc_name = arch.register_names[arch.pc]
        pc = int(pending.read_register(pc_name)) & 0xFFFFFFFFFFFFFFFF
        level = pending.level()
        lookup_pc = pc if level == 0 else pc - 1
        module_map = state.module_map()
        # Own SFrame data only: where rows would be synthesized from DWARF
        # CFI, GDB's DWARF unwinder reads the same CFI and knows more.
        module, row = module_map.row_for(lookup_pc, synthesized=False)
        if row is None or row.outermost:
            return None
        if level > 0:
            # A frame interrupted by a signal is looked up at its PC, a
            # caller at PC - 1; where the two disagree, let GDB decide.
            _, row_at_pc = module_map.row_for(pc, synthesized=False)
            if row_at_pc is not None and row_at_pc.entry is not row.entry:
                return None
        target = _PendingTarget(arch, pending)
        registers = {}
        for location in (row.cfa, row.ra, row.fp):
            if location is not None and location.register is not None:
                registers[location.register] = target.read_register(location.register)
        for number in (arch.sp, arch.fp) + ((arch.ra,) if arch.has_link_register else ()):
            if number not in registers:
                registers[number] = target.read_register(number)
        frame = Frame(level, pc, registers, interrupted=(level == 0))
        core = Unwinder(target, module_map, fallback="none")
        caller = core._caller_from_row(frame, module, row)
        function_start = row.function.start + module.load_bias
        info = pending.create_unwind_info(
            _FrameId(self._value(caller.cfa), self._value(function_start)))
        info.add_saved_register(pc_name, self._value(caller.pc))
        info.add_saved_register(arch.register_names[arch.sp],
                                self._value(caller.registers[arch.sp]))
        if arch.fp in caller.registers:
            info.add_saved_register(arch.register_names[arch.fp],
                                    self._value(caller.registers[arch.fp]))
        if arch.has_link_register:
            # After the return, x30 (AArch64) or r14 (s390x) holds the
            # return address; GDB reads it to unwind the caller's caller
            # (an unsaved register would read as <not saved>).
            info.add_saved_register(arch.register_names[arch.ra],
                                    self._value(caller.registers[arch.ra]))
        return info


frame_unwinder = SFrameFrameUnwinder()
unwinder_parameter = limit_parameter = fallback_parameter = debug_parameter = None


def register():
    global unwinder_parameter, limit_parameter, fallback_parameter, debug_parameter
    _Prefix("set sframe", "Settings of the SFrame unwinder and sframe-bt.")
    _Prefix("show sframe", "Show settings of the SFrame unwinder and sframe-bt.")
    unwinder_parameter = UnwinderParameter(
        "sframe unwinder", gdb.PARAM_BOOLEAN,
        "Set whether GDB's frames come from SFrame data where it has a row.",
        "Show whether GDB's frames come from SFrame data.", default=True)
    limit_parameter = LimitParameter(
        "sframe backtrace-limit", gdb.PARAM_UINTEGER,
        "Set the most frames sframe-bt unwinds (0 or unlimited: no limit).",
        "Show the most frames sframe-bt unwinds.")
    fallback_parameter = FallbackParameter(
        "sframe fallback", gdb.PARAM_ENUM,
        "Set what sframe-bt does where SFrame has no data: fp follows the "
        "frame-pointer chain, none stops.",
        "Show what sframe-bt does where SFrame has no data.", ["fp", "none"])
    global synthesize_parameter
    synthesize_parameter = SynthesizeParameter(
        "sframe synthesize", gdb.PARAM_BOOLEAN,
        "Set whether sframe-bt synthesizes SFrame rows from .eh_frame / "
        ".debug_frame for objects without .sframe (cached per build id under "
        "$XDG_CACHE_HOME/sfbt).",
        "Show whether SFrame rows are synthesized from DWARF CFI.", default=True)
    debug_parameter = DebugParameter(
        "sframe debug", gdb.PARAM_BOOLEAN,
        "Set whether errors inside the SFrame frame unwinder are printed.",
        "Show whether SFrame unwinder errors are printed.", default=False)
    SFrameBacktrace()
    InfoSFrame()
    CbfSave()
    CbfLoad()
    gdb.unwinder.register_unwinder(None, frame_unwinder, replace=True)
    gdb.events.new_objfile.connect(state.forget)
    gdb.events.clear_objfiles.connect(state.forget)
    gdb.events.stop.connect(state.invalidate)
    gdb.events.exited.connect(state.forget)
