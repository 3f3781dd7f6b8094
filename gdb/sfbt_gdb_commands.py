"""GDB's commands and settings for sfbt, and their registration: the
commands themselves live in sfbt.commands, run against a GdbSession."""

import gdb
import gdb.unwinder

from sfbt.commands import SETTINGS
from sfbt.commands import backtrace, info, load, save
from sfbt.commands.settings import BOOLEAN, ENUM, UINTEGER
from sfbt.errors import SfbtError, left_out_warning
from sfbt.printable import printable

from sfbt_gdb_session import GdbSession, state
from sfbt_gdb_unwinder import frame_unwinder


class SfbtGdbError(gdb.GdbError):
    """What GDB prints as a one-line error."""


def run(command, argument, name):
    """Run a core command on a new GdbSession; its text, or one-line
    errors, never a traceback, and one warning line of what a limit left
    out.  The selected thread is kept."""
    selected = gdb.selected_thread()
    try:
        return command(GdbSession(), gdb.string_to_argv(argument))
    except SfbtError as error:
        raise SfbtGdbError(printable(str(error))) from None
    except gdb.GdbError:
        raise
    except Exception as error:  # one line, never a traceback
        raise SfbtGdbError(printable(f"{name}: {type(error).__name__}: {error}")) from None
    finally:
        if selected is not None and selected.is_valid() and selected != gdb.selected_thread():
            selected.switch()
        warning = left_out_warning()  # what a limit left out, in one line
        if warning is not None:
            gdb.write(f"warning: sfbt: {printable(warning)}\n", gdb.STDERR)


class SFrameBacktrace(gdb.Command):
    __doc__ = backtrace.HELP["gdb"] + "\nSee also: info sframe, set sframe."

    def __init__(self):
        super().__init__("sframe-bt", gdb.COMMAND_STACK)

    def complete(self, text, word):
        # GDB breaks words at "-": complete the whole option being typed.
        typed = "" if not text or text.endswith(" ") else text.split()[-1]
        cut = len(typed) - len(word or "")
        return [option[cut:] for option in backtrace.complete(typed)]

    def invoke(self, argument, from_tty):
        gdb.write(run(backtrace.sframe_bt, argument, "sframe-bt") + "\n")


class CbfSave(gdb.Command):
    __doc__ = save.HELP

    def __init__(self):
        super().__init__("cbf-save", gdb.COMMAND_STACK)

    def complete(self, text, word):
        """Options, the formats after --format, else file names (GDB 13
        does no file-name completion after a first word when a Python
        completer returns COMPLETE_FILENAME)."""
        words = text.split()
        typed = "" if not text or text.endswith(" ") else words.pop()
        choices = save.complete(words, typed)
        # GDB breaks words at "-": complete the whole word being typed.
        cut = len(typed) - len(word or "")
        return [choice[cut:] for choice in choices]

    def invoke(self, argument, from_tty):
        gdb.write(run(save.cbf_save, argument, "cbf-save") + "\n")


class CbfLoad(gdb.Command):
    __doc__ = load.HELP

    def __init__(self):
        super().__init__("cbf-load", gdb.COMMAND_STACK, gdb.COMPLETE_FILENAME)

    def invoke(self, argument, from_tty):
        text, error = run(load.cbf_load, argument, "cbf-load")
        gdb.write(text + "\n")
        if error is not None:
            raise SfbtGdbError(printable(error))


class InfoSFrame(gdb.Command):
    __doc__ = info.HELP.replace("\n\n", "\n\nUsage: info sframe\n", 1)

    def __init__(self):
        super().__init__("info sframe", gdb.COMMAND_STATUS, gdb.COMPLETE_NONE)

    def invoke(self, argument, from_tty):
        gdb.write(run(info.info_sframe, argument, "info sframe") + "\n")


# -- settings -------------------------------------------------------------------

class _Prefix(gdb.Command):
    def __init__(self, name, doc):
        self.__doc__ = doc
        super().__init__(name, gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)


class _ShowPrefix(_Prefix):
    """`show sframe`: every setting, as GDB's `show history` lists its own."""

    def __init__(self):
        super().__init__("show sframe", "Show settings of the SFrame unwinder and sframe-bt.")

    def invoke(self, argument, from_tty):
        if argument.strip():
            raise SfbtGdbError(f'Undefined show sframe command: "{argument.strip()}".  '
                               'Try "help show sframe".')
        for setting in sorted(state.settings.available(), key=lambda s: s.name):
            gdb.write(f"sframe {setting.name}:  {state.settings.show(setting.name)}\n")


_KINDS = {BOOLEAN: gdb.PARAM_BOOLEAN, UINTEGER: gdb.PARAM_UINTEGER, ENUM: gdb.PARAM_ENUM}


class SFrameParameter(gdb.Parameter):
    """`set/show sframe NAME`, mirrored into the shared Settings."""

    def __init__(self, setting):
        self.setting = setting
        self.set_doc = setting.set_doc
        self.show_doc = setting.show_doc
        self.__doc__ = setting.doc or setting.set_doc
        extra = (list(setting.choices),) if setting.kind == ENUM else ()
        super().__init__(f"sframe {setting.name}", gdb.COMMAND_DATA,
                         _KINDS[setting.kind], *extra)
        self.value = setting.default

    def get_set_string(self):
        value = self.value
        if self.setting.kind == UINTEGER:
            value = value or 0  # GDB gives None for unlimited
        state.settings.assign(self.setting.name, value)
        gdb.invalidate_cached_frames()
        if self.setting.name == "debug" and value and state.errors:
            return "Recent SFrame unwinder errors:\n  " + "\n  ".join(state.errors)
        return ""

    def get_show_string(self, value):
        return self.setting.shown(getattr(state.settings, self.setting.attribute))


def _setting_changed(name, value):
    if name == "unwinder":
        frame_unwinder.set_mode(value)


def register():
    _Prefix("set sframe", "Settings of the SFrame unwinder and sframe-bt.")
    _ShowPrefix()
    for setting in SETTINGS:
        if "gdb" in setting.debuggers:
            SFrameParameter(setting)
    state.settings.observe(_setting_changed)
    SFrameBacktrace()
    InfoSFrame()
    CbfSave()
    CbfLoad()
    gdb.unwinder.register_unwinder(None, frame_unwinder, replace=True)
    for event in (gdb.events.stop, gdb.events.cont, gdb.events.exited,
                  gdb.events.memory_changed, gdb.events.register_changed,
                  gdb.events.inferior_call, gdb.events.before_prompt):
        event.connect(frame_unwinder.forget_stop)
    for event in (gdb.events.new_objfile, gdb.events.clear_objfiles):
        event.connect(frame_unwinder.forget_objfiles)
    gdb.events.new_objfile.connect(state.forget)
    gdb.events.clear_objfiles.connect(state.forget)
    for event in (gdb.events.stop, gdb.events.cont, gdb.events.memory_changed,
                  gdb.events.register_changed, gdb.events.inferior_call):
        event.connect(state.invalidate)
    gdb.events.exited.connect(state.forget)
