"""The plugin's settings, defined once: GDB shows them as `set/show sframe
NAME` parameters, LLDB through the `sframe-settings` command."""

from __future__ import annotations

from ..errors import SfbtError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, NamedTuple
else:
    from ..values import NamedTuple

BOOLEAN, UINTEGER, ENUM = "boolean", "uinteger", "enum"


class Setting(NamedTuple):
    """One `set sframe` setting (a NamedTuple: defined at each start of
    `sfbt`, cheaper than a frozen dataclass)."""

    name: str
    kind: str  # BOOLEAN, UINTEGER (0: unlimited) or ENUM
    default: object
    set_doc: str
    show_doc: str
    #: what `show` prints, with {value}
    show_text: str
    choices: tuple = ()
    #: the debuggers that have it
    debuggers: tuple = ("gdb", "lldb")
    #: what `help set sframe NAME` explains after set_doc, if anything
    doc: str = ""

    @property
    def attribute(self) -> str:
        return self.name.replace("-", "_")

    def shown(self, value) -> str:
        if self.kind == BOOLEAN:
            text = "on" if value else "off"
        elif self.kind == UINTEGER:
            text = str(value) if value else "unlimited"
        else:
            text = str(value)
        return self.show_text.format(value=text)


SETTINGS = (
    Setting("unwinder", ENUM, "auto",
            "Set when GDB's frames come from SFrame data.",
            "Show when GDB's frames come from SFrame data.",
            "The SFrame frame unwinder is \"{value}\".",
            choices=("auto", "on", "off"), debuggers=("gdb",),
            doc="auto  where GDB has no DWARF call-frame information for a frame's code\n"
                "      (an object whose .eh_frame was stripped, left with .sframe);\n"
                "      GDB's own unwinders everywhere else.  The default.\n"
                "on    wherever an object's own .sframe has a row.  GDB then shows no\n"
                "      tail-call frames there, and of the callee-saved registers of\n"
                "      outer frames knows only the frame pointer (variables kept in\n"
                "      them, @entry values included, read as optimized out).\n"
                "off   never."),
    Setting("backtrace-limit", UINTEGER, 0,
            "Set the most frames sframe-bt unwinds (0 or unlimited: no limit).",
            "Show the most frames sframe-bt unwinds.",
            "The upper bound on sframe-bt frames is {value}."),
    Setting("fallback", ENUM, "fp",
            "Set what sframe-bt does where SFrame has no data: fp follows the "
            "frame-pointer chain, none stops.",
            "Show what sframe-bt does where SFrame has no data.",
            "Where SFrame has no data, sframe-bt falls back to: {value}.",
            choices=("fp", "none")),
    Setting("synthesize", BOOLEAN, True,
            "Set whether sframe-bt synthesizes SFrame rows from .eh_frame / "
            ".debug_frame for objects without .sframe (cached per file under "
            "$XDG_CACHE_HOME/sfbt).",
            "Show whether SFrame rows are synthesized from DWARF CFI.",
            "Synthesizing SFrame rows from .eh_frame/.debug_frame for objects "
            "without .sframe is {value}."),
    Setting("debug", BOOLEAN, False,
            "Set whether errors inside the SFrame frame unwinder are printed.",
            "Show whether SFrame unwinder errors are printed.",
            "SFrame unwinder debugging output is {value}."),
)

_BY_NAME = {setting.name: setting for setting in SETTINGS}
_TRUE = {"on", "1", "yes", "enable", "true"}
_FALSE = {"off", "0", "no", "disable", "false"}


class Settings:
    """The current values, as attributes (``settings.backtrace_limit``).
    Observers registered with ``observe`` hear of every change."""

    def __init__(self, debugger: str):
        self.debugger = debugger
        self._observers: List[Callable[[str, object], None]] = []
        for setting in self.available():
            setattr(self, setting.attribute, setting.default)

    def available(self) -> List[Setting]:
        return [s for s in SETTINGS if self.debugger in s.debuggers]

    def observe(self, callback: Callable[[str, object], None]) -> None:
        self._observers.append(callback)

    def assign(self, name: str, value) -> None:
        """Store an already checked value (a GDB parameter's)."""
        setattr(self, _BY_NAME[name].attribute, value)
        for callback in self._observers:
            callback(name, value)

    def set_text(self, name: str, text: str) -> None:
        """Parse and store a value given as text: `sframe-settings set NAME VALUE`."""
        setting = self.find(name)
        text = text.strip().lower()
        if setting.kind == BOOLEAN:
            if text not in _TRUE | _FALSE:
                raise SfbtError(f"{name} is on or off, not {text!r}")
            value = text in _TRUE
        elif setting.kind == UINTEGER:
            if text == "unlimited":
                value = 0
            else:
                try:
                    value = int(text, 0)
                except ValueError:
                    value = -1
                if value < 0:
                    raise SfbtError(f"{name} is a number of frames or unlimited, "
                                    f"not {text!r}")
        else:
            if text not in setting.choices:
                raise SfbtError(f"{name} is one of {', '.join(setting.choices)}, "
                                f"not {text!r}")
            value = text
        self.assign(setting.name, value)

    def find(self, name: str) -> Setting:
        setting = _BY_NAME.get(name)
        if setting is None or self.debugger not in setting.debuggers:
            names = ", ".join(s.name for s in self.available())
            raise SfbtError(f"no setting {name!r} (settings: {names})")
        return setting

    def show(self, name: str) -> str:
        setting = self.find(name)
        return setting.shown(getattr(self, setting.attribute))

    def values(self) -> Dict[str, object]:
        return {s.name: getattr(self, s.attribute) for s in self.available()}
