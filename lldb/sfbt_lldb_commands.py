"""LLDB's commands for sfbt and their registration: sframe-bt, cbf-save,
cbf-load, sframe-info, sframe-settings (the core's commands, run against an
LldbSession) and sframe-provider."""

import shlex

import lldb

from sfbt.commands import CommandError
from sfbt.commands import backtrace, info, load, save
from sfbt.errors import SfbtError, left_out_warning
from sfbt.printable import printable

from sfbt_lldb_session import LldbSession, lldb_version, state

# The module LLDB imported (the entry file), where it finds our classes.
_ENTRY = {"module": __name__}


class _Command:
    """An LLDB command class: one-line errors, never a traceback."""

    help_text = ""
    #: options of `command script add` beyond the class: how LLDB parses
    #: and completes the command
    registration = ""

    def __init__(self, debugger, internal_dict):
        self.debugger = debugger

    def get_short_help(self):
        return self.help_text.splitlines()[0]

    def get_long_help(self):
        return self.help_text

    def words(self, command):
        """The command's words: a raw command's line, split as a shell would."""
        return shlex.split(command)

    def __call__(self, debugger, command, exe_ctx, result):
        try:
            text, error = self.run(debugger, self.words(command), exe_ctx)
            if text:
                result.AppendMessage(text)
            if error:
                result.SetError(error)
            else:
                result.SetStatus(lldb.eReturnStatusSuccessFinishResult)
        except SfbtError as error:
            result.SetError(printable(str(error)))
        except Exception as error:  # one line, never a traceback
            result.SetError(printable(f"{type(error).__name__}: {error}"))
        finally:
            warning = left_out_warning()  # what a limit left out, in one line
            if warning is not None:
                result.AppendWarning(printable(f"sfbt: {warning}"))


class SFrameBacktraceCommand(_Command):
    help_text = backtrace.HELP["lldb"] + "\nSee also: sframe-info, sframe-settings, sframe-provider."

    def run(self, debugger, words, exe_ctx):
        return backtrace.sframe_bt(LldbSession(debugger, exe_ctx), words), None


class CbfSaveCommand(_Command):
    """A parsed command (`command script add -p`): LLDB parses its options
    and completes them, the formats after --format and (LLDB 20 and newer,
    through handle_argument_completion) file names.  The options are handed
    to the core as the words GDB's cbf-save reads."""

    help_text = save.HELP
    registration = "-p"
    #: long option -> (short option, what it means, the kind of value
    #: LLDB's help names, or None for none, and the values it completes)
    OPTIONS = {
        "format": ("f", "the form written (default archive)",
                   lldb.eArgTypeFormat, save.FORMATS),
        "append": ("a", "add to an existing archive or lws file", None, ()),
        "all-threads": ("t", "every thread, not just the selected one", None, ()),
        "label": ("l", "a label saved with an archive's backtraces",
                  lldb.eArgTypeValue, ()),
    }

    def __init__(self, debugger, internal_dict):
        super().__init__(debugger, internal_dict)
        self.given = {}

    def get_flags(self):
        return 0

    def get_options_definition(self):
        definition = {}
        for name, (short, meaning, kind, values) in self.OPTIONS.items():
            option = {"short_option": short, "required": False, "help": meaning}
            if kind is not None:
                option.update(value_type=kind, dest=name, default=None,
                              completion_type=lldb.eNoCompletion)
            if values:
                option["enum_values"] = [[value, ""] for value in values]
            definition[name] = option
        return definition

    def get_args_definition(self):
        return [[{"arg_type": lldb.eArgTypeFilename, "repeat": "plain"}]]

    def option_parsing_started(self):
        self.given = {}

    def set_option_value(self, exe_ctx, name, value):
        self.given[name] = value
        return True

    def handle_argument_completion(self, args, arg_pos, cursor_pos):
        found = save.file_names(args[arg_pos][:cursor_pos])
        if len(found) == 1:
            return {"completion": found[0],
                    "mode": "partial" if found[0].endswith("/") else "complete"}
        return {"values": found} if found else True

    def words(self, arguments):
        words = []
        for name, value in self.given.items():
            words += [f"--{name}"] if self.OPTIONS[name][2] is None else [f"--{name}", value]
        return words + parsed_arguments(arguments)

    def run(self, debugger, words, exe_ctx):
        return save.cbf_save(LldbSession(debugger, exe_ctx), words), None


#: the longest argument a parsed command takes (a path is at most 4096 bytes)
_ARGUMENT_LIMIT = 1 << 16


def parsed_arguments(arguments):
    """The strings of a parsed command's arguments, an SBStructuredData
    array on every LLDB: its items read one by one, since iterating it gives
    strings from LLDB 20 on but SBStructuredData items on LLDB 19."""
    words = []
    for index in range(arguments.GetSize()):
        word = arguments.GetItemAtIndex(index).GetStringValue(_ARGUMENT_LIMIT)
        if len(word) >= _ARGUMENT_LIMIT - 1:
            raise CommandError(f"argument {index + 1} is longer than "
                               f"{_ARGUMENT_LIMIT - 2} bytes")
        words.append(word)
    return words


class CbfLoadCommand(_Command):
    help_text = load.HELP
    registration = "-C disk-file"

    def run(self, debugger, words, exe_ctx):
        try:
            session = LldbSession(debugger, exe_ctx)
        except CommandError:  # no target: the archive's images name the frames
            session = None
        return load.cbf_load(session, words, LldbSession.debugger)


class SFrameInfoCommand(_Command):
    help_text = info.HELP.replace("\n\n", "\n\nUsage: sframe-info\n", 1)

    def run(self, debugger, words, exe_ctx):
        return info.info_sframe(LldbSession(debugger, exe_ctx), words, "sframe-info"), None


class SFrameSettingsCommand(_Command):
    help_text = ("Show or change sfbt's settings.\n\n"
                 "Usage: sframe-settings [show [NAME]] | set NAME VALUE\n"
                 + "\n".join(f"  {s.name}: {s.set_doc[4:]}"
                             for s in state.settings.available()))

    def run(self, debugger, words, exe_ctx):
        settings = state.settings
        if words[:1] in ([], ["show"]) and len(words) <= 2:
            names = words[1:] or [s.name for s in settings.available()]
            return "\n".join(settings.show(name) for name in names), None
        if words[:1] == ["set"] and len(words) == 3:
            settings.set_text(words[1], words[2])
            return settings.show(words[1]), None
        raise CommandError("usage: sframe-settings [show [NAME]] | set NAME VALUE")


class SFrameProviderCommand(_Command):
    help_text = """\
Turn the SFrame frame provider on or off (LLDB 22 and newer).

Usage: sframe-provider on|off|status
With the provider on, LLDB's own `bt`, `frame select`, `up`/`down` and
`finish` use the frames SFrame data gives (the same frames as sframe-bt).
Where LLDB's own unwinder finds the same frame, it is LLDB's own frame,
with its registers and variables; frames only SFrame data gives are
marked [synthetic] and have no registers.  On a multi-threaded process,
turn it on before `run` (LLDB 22 and 23 hang in `bt all` when a frame
provider is registered at a stop of several threads)."""

    def run(self, debugger, words, exe_ctx):
        if words == ["status"]:
            return "\n".join([f"thread #{index}: {line}" for index, line
                              in sorted(state.provider_plans.items())]
                             or ["The SFrame frame provider has made no frames."]), None
        if words not in (["on"], ["off"]):
            raise CommandError("usage: sframe-provider on|off|status")
        version = lldb_version()
        if version < 22:
            raise CommandError(f"sframe-provider needs LLDB 22 or newer "
                               f"(this is LLDB {version})")
        target = LldbSession(debugger, exe_ctx).lldb_target
        process = target.GetProcess()
        if (words == ["on"] and process.IsValid()
                and process.GetState() == lldb.eStateStopped
                and process.GetNumThreads() > 1):
            raise CommandError(
                f"sframe-provider: not turned on: the process has "
                f"{process.GetNumThreads()} threads, and LLDB hangs in `bt all` "
                "when a frame provider is registered at a stop of a multi-threaded "
                "process; turn it on before `run` (sframe-bt works now)")
        interpreter = debugger.GetCommandInterpreter()
        result = lldb.SBCommandReturnObject()
        if words == ["on"]:
            command = ("target frame-provider register -C "
                       f"{_ENTRY['module']}.SFrameFrameProvider")
        else:
            command = "target frame-provider clear"
            state.provider_plans.clear()
        interpreter.HandleCommand(command, result)
        if not result.Succeeded():
            raise CommandError(f"sframe-provider: {result.GetError().strip()}")
        return f"SFrame frame provider {'on' if words == ['on'] else 'off'}.", None


COMMANDS = {
    "sframe-bt": SFrameBacktraceCommand,
    "cbf-save": CbfSaveCommand,
    "cbf-load": CbfLoadCommand,
    "sframe-info": SFrameInfoCommand,
    "sframe-settings": SFrameSettingsCommand,
    "sframe-provider": SFrameProviderCommand,
}


def classes():
    """The classes LLDB looks up by name in the entry module."""
    from sfbt_lldb_provider import SFrameFrameProvider
    return {cls.__name__: cls for cls in [*COMMANDS.values(), SFrameFrameProvider]}


def register(debugger, entry_module):
    _ENTRY["module"] = entry_module
    for name, command in COMMANDS.items():
        debugger.HandleCommand(f"command script add -o {command.registration} -c "
                               f"{entry_module}.{command.__name__} {name}")
