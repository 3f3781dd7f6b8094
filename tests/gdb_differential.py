"""Loaded into every gdb of the differential harness (tests/differential.py),
with the plugin and without.  It imports nothing of sfbt: without the
plugin, the gdb is plain GDB.

Commands (each answer is one line ``DIFF <json>`` on stdout):

``diff-resume COMMAND``
    run COMMAND (continue, stepi, starti ARGS); ``{"output": TEXT}``, with
    ``"exited": CODE`` when the program has exited.
``diff-record [-sframe]``
    the stop's record: its identity (pc, sp, thread, what stopped it),
    GDB's own frames that are on the stack (inline and tail-call frames
    left out), the text of ``bt`` and ``bt full``, and with ``-sframe`` the
    text of ``sframe-bt``.  Breakpoints and catchpoints that reached the
    hit limit are deleted after the record is taken.
``diff-limit N``
    the hit limit (default 1).
``diff-break COMMAND``
    run COMMAND (break, tbreak, catch); the number of the breakpoint it
    made, or null.
``diff-maps``
    ``{path: lowest address mapped from file offset 0}`` of the process.
``diff-insns START END``
    the addresses of the instructions from START up to END.
"""

import json
import re

import gdb

_MASK = 0xFFFFFFFFFFFFFFFF
# frames that have no place of their own on the stack
_NOT_ON_STACK = (gdb.INLINE_FRAME,)
_FRAME_TYPES = {getattr(gdb, name): name for name in (
    "NORMAL_FRAME", "DUMMY_FRAME", "INLINE_FRAME", "TAILCALL_FRAME",
    "SIGTRAMP_FRAME", "ARCH_FRAME", "SENTINEL_FRAME")}


def answer(value):
    gdb.write("DIFF " + json.dumps(value) + "\n")
    gdb.flush()


def run(command):
    """A command's text; a failing command gives its text so far and
    ``error: MESSAGE`` (what the user would see)."""
    try:
        return gdb.execute(command, to_string=True)
    except gdb.error as error:
        return f"error: {error}\n"


class _Stops:
    """What stopped the program last, from gdb.events.stop."""

    def __init__(self):
        self.last = None
        self.exit_code = None
        gdb.events.stop.connect(self._stopped)
        gdb.events.exited.connect(self._exited)

    def _stopped(self, event):
        if isinstance(event, gdb.BreakpointEvent):
            self.last = ["breakpoint", sorted(b.number for b in event.breakpoints)]
        elif isinstance(event, gdb.SignalEvent):
            self.last = ["signal", event.stop_signal]
        else:
            self.last = ["stop"]

    def _exited(self, event):
        self.exit_code = getattr(event, "exit_code", None)


_stops = _Stops()
_limit = [1]


def code_ranges():
    """[(start, end)] of the process's executable mappings."""
    ranges = []
    with open(f"/proc/{gdb.selected_inferior().pid}/maps") as maps:
        for line in maps:
            addresses, permissions = line.split()[:2]
            if "x" in permissions:
                start, end = addresses.split("-")
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def on_stack_frames():
    """[[pc, frame type, pc is in code]] of GDB's frames that are on the
    stack, innermost first, and the error that ended the walk (or None)."""
    frames = []
    code = code_ranges()
    try:
        frame = gdb.newest_frame()
        while frame is not None:
            kind = frame.type()
            if kind not in _NOT_ON_STACK:
                pc = int(frame.pc()) & _MASK
                frames.append([pc, _FRAME_TYPES.get(kind, str(kind)),
                               any(start <= pc < end for start, end in code)])
            frame = frame.older()
    except gdb.error as error:
        return frames, str(error)
    return frames, None


def stop_record(with_sframe):
    thread = gdb.selected_thread()
    frame = gdb.newest_frame()
    frames, frames_error = on_stack_frames()
    record = {
        "pc": int(frame.pc()) & _MASK,
        "sp": int(frame.read_register("sp")) & _MASK,
        "thread": thread.num,
        "stop": _stops.last,
        "frames": frames,
        "frames_error": frames_error,
        "bt": run("bt"),
        "bt_full": run("bt full"),
    }
    if with_sframe:
        record["sframe"] = run("sframe-bt")
    return record


def delete_spent_breakpoints():
    for breakpoint in gdb.breakpoints() or ():
        if breakpoint.is_valid() and breakpoint.hit_count >= _limit[0]:
            breakpoint.delete()


class DiffResume(gdb.Command):
    def __init__(self):
        super().__init__("diff-resume", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        _stops.last = None
        output = run(argument)
        if gdb.selected_inferior().pid:
            answer({"output": output})
        else:
            answer({"output": output, "exited": _stops.exit_code})


class DiffRecord(gdb.Command):
    def __init__(self):
        super().__init__("diff-record", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        answer(stop_record(argument.strip() == "-sframe"))
        delete_spent_breakpoints()


class DiffBreak(gdb.Command):
    def __init__(self):
        super().__init__("diff-break", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        before = {b.number for b in gdb.breakpoints() or ()}
        run(argument)
        made = {b.number for b in gdb.breakpoints() or ()} - before
        answer(max(made) if made else None)


class DiffLimit(gdb.Command):
    def __init__(self):
        super().__init__("diff-limit", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        _limit[0] = int(argument)
        answer(_limit[0])


_MAPPING = re.compile(r"^\s*0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)"
                      r"(?:\s+\S+)?\s+(/\S.*)$")


class DiffMaps(gdb.Command):
    def __init__(self):
        super().__init__("diff-maps", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        bases = {}
        for line in gdb.execute("info proc mappings", to_string=True).splitlines():
            match = _MAPPING.match(line)
            if match and int(match[3], 16) == 0:
                path = match[4].strip()
                start = int(match[1], 16)
                bases[path] = min(start, bases.get(path, start))
        answer(bases)


class DiffInsns(gdb.Command):
    def __init__(self):
        super().__init__("diff-insns", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        start, end = (int(word, 0) for word in argument.split())
        arch = gdb.selected_inferior().architecture()
        try:
            addresses = [i["addr"] for i in arch.disassemble(start, end - 1)]
        except gdb.error:
            addresses = []
        answer(addresses)


DiffResume()
DiffRecord()
DiffBreak()
DiffLimit()
DiffMaps()
DiffInsns()
