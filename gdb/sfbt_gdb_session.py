"""sfbt's Session and Target over GDB's Python API.

GDB 13.1 is the floor.  Where newer GDBs offer more (GDB 14+:
gdb.unwinder.FrameId, PendingFrame.pc()), the code path is chosen once,
when this module is loaded (see sfbt_gdb_unwinder).  gdb.Objfile has no
load address in any version: the load bias of each object file comes from
`info files` and its file's section addresses, or from its ELF header in
target memory when the file cannot be read.
"""

import collections
import re
import signal

import gdb

from sfbt.arch import arch_for_debugger
from sfbt.commands import CommandError, Session, Settings, Thread
from sfbt.commands.kept import Kept
from sfbt.elf import ElfError, image_in_memory, open_elf
from sfbt.errors import TargetMemoryError
from sfbt.frame_name import FrameName
from sfbt.names import is_main, without_parameters
from sfbt.unwind.modules import ModuleMap, SFrameSources
from sfbt.unwind.target import Module, Target

_MASK64 = 0xFFFFFFFFFFFFFFFF


def arch_named(name):
    """The sfbt Arch of a gdb.Architecture name, or None."""
    return arch_for_debugger(name, "gdb")


def current_arch():
    inferior = gdb.selected_inferior()
    if gdb.current_progspace().filename is None and not inferior.pid:
        raise CommandError('No program loaded: use the "file" command, '
                           'attach to a process or open a core file.')
    try:
        name = gdb.selected_inferior().architecture().name()
    except (gdb.error, AttributeError):
        name = gdb.newest_frame().architecture().name()
    arch = arch_named(name)
    if arch is None:
        raise CommandError(f"sframe: architecture {name} is not supported")
    return arch


def register_bits(value):
    """A register's contents as an unsigned 64-bit int.  Floating-point
    registers (s390x keeps an FP or RA in them) give their raw bits, not
    their value as a double."""
    if value.type.strip_typedefs().code == gdb.TYPE_CODE_FLT:
        return int(value.format_string(format="x"), 16) & _MASK64
    return int(value) & _MASK64


def virtual_address_bits(arch, frame):
    """For stripping signed return addresses: from $pauth_cmask of
    ``frame`` (a gdb.Frame or gdb.PendingFrame) where the target reports it
    (native AArch64 Linux, gdbserver), else 48.  qemu 7.2's gdb stub does
    not report it."""
    try:
        mask = int(frame.read_register("pauth_cmask"))
    except (gdb.error, ValueError, RuntimeError):
        mask = 0
    return arch.virtual_address_bits(mask)


# -- text from GDB ------------------------------------------------------------

def decoded(read):
    """``read()``, a string from GDB; one that is not UTF-8 (a symbol or a
    file name a process chose: GDB will not decode it) as its bytes,
    surrogate-escaped as the file system's names are."""
    try:
        return read()
    except UnicodeDecodeError as error:
        return bytes(error.object).decode("utf-8", "surrogateescape")


def command_output(command):
    """What a GDB command prints (decoded())."""
    return decoded(lambda: gdb.execute(command, to_string=True))


# -- modules ------------------------------------------------------------------

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


def file_layout(path):
    """({section name: address}, first loadable segment's address) of an
    ELF file, or (None, None) when it cannot be read."""
    try:
        stream, image = open_elf(path)
    except (OSError, ElfError):
        return None, None
    with stream:
        try:
            sections = {s.name: s.addr for s in image.sections() if s.addr}
            return sections, image.first_load_address()
        except (OSError, ElfError):
            return None, None


def loaded_modules(target=None):
    """Module for each object file GDB has loaded, from `info files`.  The
    load bias comes from the file; when GDB has a file that cannot be
    opened here (read from a remote target, `target:/lib/...`; a core
    whose files moved; the vDSO), from the ELF header in target memory."""
    build_ids = {o.filename: o.build_id for o in gdb.objfiles()
                 if o.is_valid() and o.filename}
    modules = []
    text = command_output("info files")
    for path, sections in parse_info_files(text).items():
        file_sections, first_load = file_layout(path)
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


# -- the target ---------------------------------------------------------------

class GdbTarget(Target):
    """The selected thread of GDB's selected inferior."""

    def __init__(self, arch, module_map=None):
        self.arch = arch
        self._inferior = gdb.selected_inferior()
        self._module_map = module_map
        self._va_bits = None

    @property
    def virtual_address_bits(self):
        if self._va_bits is None:
            self._va_bits = virtual_address_bits(self.arch, gdb.newest_frame())
        return self._va_bits

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
        return self._module_map.modules if self._module_map else []


# -- what the plugin keeps between commands ----------------------------------

class State:
    """The plugin's state in this GDB: settings, SFrame data per module
    (kept for the session), the module map (rebuilt only when the set of
    object files or the process changed, checked once after each stop),
    what the commands keep for the next one (sfbt.commands.kept: ``stop``,
    forgotten when the program runs or its memory or registers change;
    ``modules``, forgotten with the module map), and the unwinder's recent
    errors."""

    def __init__(self):
        self.settings = Settings("gdb")
        self.sources = SFrameSources()
        self.settings.observe(self._setting_changed)
        self._map = None
        self._key = None
        self._checked = False
        self.errors = collections.deque(maxlen=50)
        self.stop = Kept("stop")
        self.modules = Kept("modules")

    def _setting_changed(self, name, value):
        if name == "synthesize":
            self.sources.synthesize = bool(value)
        self.stop.forget()

    def invalidate(self, *_):
        """The program ran or was changed: what a stop read is gone, and
        the modules are checked again at the next command."""
        self._checked = False
        self.stop.forget()

    def forget(self, *_):
        """The modules changed (an object file, a process)."""
        self._map = None
        self._checked = False
        self.stop.forget()
        self.modules.forget()

    def module_map(self):
        if self._map is not None and self._checked:
            return self._map
        inferior = gdb.selected_inferior()
        key = (inferior.num, inferior.pid,
               tuple(o.filename for o in gdb.objfiles() if o.is_valid()))
        if self._map is None or key != self._key:
            if self._map is not None:
                self.forget()
            target = GdbTarget(current_arch())
            self._map = ModuleMap(loaded_modules(target), target, self.sources)
            self._key = key
        self._checked = True
        return self._map

    def record_error(self, where, error):
        message = f"{where}: {type(error).__name__}: {error}"
        self.errors.append(message)
        if self.settings.debug:
            gdb.write(f"sframe: {message}\n")


state = State()


# -- symbolization ------------------------------------------------------------

def minimal_symbol(pc):
    try:
        text = command_output(f"info symbol {pc:#x}")
    except gdb.error:
        return None
    if text.startswith("No symbol matches"):
        return None
    return text.split(" in section ")[0].split(" + ")[0].strip()


def block_functions(pc):
    """The functions of GDB's blocks around pc, innermost first: the
    functions inlined there, then the one whose own code holds pc; None
    when GDB has no debug information there."""
    try:
        block = gdb.block_for_pc(pc)
    except RuntimeError:
        return None
    if block is None:
        return None
    functions = []
    while block is not None:
        if block.function is not None:
            functions.append(block.function)
        block = block.superblock
    return functions


def _print_name(function):
    """The name GDB's `bt` prints for a function symbol: its print name,
    without a C++ function's parameters (GDB's find_frame_funname)."""
    name = decoded(lambda: function.print_name)
    return without_parameters(name) if name is not None else None


def function_name(pc):
    """The name of the function containing pc: from debug info, else from
    the minimal symbols, else None."""
    functions = block_functions(pc)
    return _print_name(functions[0]) if functions else minimal_symbol(pc)


def outer_function_name(pc):
    """The name of the function whose own code holds pc: with functions
    inlined into it, the outermost one (GDB's frame of that code)."""
    functions = block_functions(pc)
    return (_print_name(functions[-1]) if functions else None) or minimal_symbol(pc)


def inlined_block_names(pc):
    """The functions GDB has inlined at pc, innermost first (one inline
    frame each in its `bt`), or None when GDB has no blocks there."""
    functions = block_functions(pc)
    if functions is None:
        return None
    return [_print_name(function) for function in functions[:-1]]


class GdbInlineSource:
    """A module's inline chains from DWARF (``symbols``, a FileSymbolizer),
    less the calls GDB has no inline block for at the PC: GDB shows no
    frame for those.  (GDB 18 has none for a call of glibc's extern-inline
    tolower that GCC 12 inlined into Lua's match_class, whose range list
    holds empty ranges; GDB 13, addr2line and eu-stack show the call.)"""

    def __init__(self, symbols, load_bias):
        self.symbols = symbols
        self.load_bias = load_bias
        #: PCs where GDB's blocks inline nothing, their unit not read
        self._bare = set()

    def function(self, address):
        return self.symbols.function(address)

    def inlined(self, address):
        pc = address + self.load_bias
        if pc in self._bare:
            return []
        calls = self.symbols.inlined_if_read(address)
        if calls is None:  # the unit's entries are not read yet
            names = inlined_block_names(pc)
            if names == []:  # GDB's blocks there inline nothing: none to read
                self._bare.add(pc)
                return []
            calls = self.symbols.inlined(address)
        else:
            names = inlined_block_names(pc) if calls else None
        if names is None or len(names) >= len(calls):
            return calls
        kept = []
        for call in calls:  # the calls GDB has, in order, by name
            if len(kept) < len(names) and call.name == names[len(kept)]:
                kept.append(call)
        # names GDB spells otherwise (C++'s print names): DWARF's chain
        return kept if len(kept) == len(names) else calls


def gdb_stack_frames():
    """GDB's own frames of the selected thread that are on the stack:
    [(pc, interrupted)].

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


# -- the session --------------------------------------------------------------

class GdbSession(Session):
    """GDB's selected inferior, for one command."""

    debugger = "gdb"

    def __init__(self):
        self.settings = state.settings
        self._arch = None

    @property
    def arch(self):
        if self._arch is None:
            self._arch = current_arch()
        return self._arch

    def has_stack(self):
        inferior = gdb.selected_inferior()
        if inferior.pid:
            return True
        try:
            return inferior.threads() != ()  # a core file
        except gdb.error:
            return False

    def threads(self):
        return [self._thread(t) for t in sorted(gdb.selected_inferior().threads(),
                                                 key=lambda t: t.num)]

    def selected_thread(self):
        return self._thread(gdb.selected_thread())

    @staticmethod
    def _thread(thread):
        return Thread(f"{thread.num} ({thread.ptid[1]})", thread)

    def target(self, thread):
        self._select(thread)
        return GdbTarget(self.arch, self.module_map())

    def module_map(self):
        return state.module_map()

    def debugger_frames(self, thread):
        self._select(thread)
        return gdb_stack_frames()

    @staticmethod
    def _select(thread):
        if thread.handle is not None and thread.handle != gdb.selected_thread():
            thread.handle.switch()

    def stop_kept(self):
        return state.stop

    def modules_kept(self):
        return state.modules

    def describe(self, lookup_pc, module=None):
        descriptions = state.modules.table("descriptions")
        key = (lookup_pc, module)
        found = descriptions.get(key)
        if found is None:
            found = descriptions[key] = self._describe(lookup_pc, module)
        return found

    def _describe(self, lookup_pc, module):
        name = function_name(lookup_pc)
        sal = gdb.find_pc_line(lookup_pc)
        if sal.symtab is not None and sal.line:
            return FrameName(name, decoded(lambda: sal.symtab.filename), sal.line)
        if module is None:
            module = self.module_map().module_for(lookup_pc)
        if module is not None and module.path != gdb.current_progspace().filename:
            return FrameName(name, module=module.path)
        return FrameName(name)

    def in_main(self, lookup_pc):
        return is_main(outer_function_name(lookup_pc))

    def outer_name(self, lookup_pc):
        return outer_function_name(lookup_pc)

    def inline_source(self, module):
        symbols = super().inline_source(module)
        return None if symbols is None else GdbInlineSource(symbols, module.load_bias)

    def innermost_frames(self, thread):
        """GDB's own frames down to its first one on the stack: the inline
        frames it shows there (as deep as it stepped into them), then
        the function's own."""
        self._select(thread)
        frames = []
        try:
            frame = gdb.newest_frame()
            while frame is not None:
                frames.append(self._describe_frame(frame))
                if frame.type() != gdb.INLINE_FRAME:
                    break
                frame = frame.older()
        except gdb.error:
            return None
        return frames[-1].replace(inlined=tuple(frames[:-1])) if frames else None

    def _describe_frame(self, frame):
        function = frame.function()
        name = _print_name(function) if function is not None else None
        sal = frame.find_sal()
        if sal.symtab is not None and sal.line:
            return FrameName(name or function_name(frame.pc()),
                             decoded(lambda: sal.symtab.filename), sal.line)
        return self.describe(frame.pc())

    def stop_reason(self, thread):
        try:
            number = int(gdb.parse_and_eval("$_siginfo.si_signo"))
            return signal.Signals(number).name
        except (gdb.error, ValueError, RuntimeError):
            return "stopped"

    def backtrace_limit(self):
        try:
            limit = gdb.parameter("backtrace limit")
        except gdb.error:
            return None
        return int(limit) if limit else None

    def debuginfod_servers(self):
        """GDB's `debuginfod urls` when `set debuginfod enabled` is on;
        none when it is off or ask (GDB has not been told yes: sfbt asks
        no question of its own).  A GDB without the setting: None."""
        try:
            if gdb.parameter("debuginfod enabled") != "on":
                return ""
            return gdb.parameter("debuginfod urls") or ""
        except (gdb.error, RuntimeError):
            return None

    def past_main(self):
        try:
            return bool(gdb.parameter("backtrace past-main"))
        except gdb.error:
            return False
