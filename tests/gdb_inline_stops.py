"""Loaded into gdb (with the plugin, `set sframe unwinder off`, so that `bt`
is GDB's own) by the inline-frame differential runs: at each stop, the
function names of GDB's `bt` and of `sframe-bt -v` (inline frames included
in both, tail-call frames left out of both: tests/test_tail_calls.py
compares those), each cut after `main`, printed as one
line `STOP <json>` {"how", "pc", "bt", "sframe"}.

Commands:

``test-interrupt-stops SEED COUNT [MOVES]``
    COUNT times: continue, interrupted by SIGINT after a drawn delay (up
    to 50 ms), and compare; then run each of MOVES (commands joined by
    ",", default "step,step") and compare after it (`step` goes into
    inlined functions, `finish` out of them).
``test-insn-stops SEED COUNT FILE [MOVES]``
    breakpoints at COUNT instructions drawn from FILE (one address a
    line, the program's file addresses; the first line is main's), each
    deleted once hit; continue until the program exits, comparing at each
    stop and after each of MOVES (default "step").
``test-function-stops SEED COUNT FILE [MOVES]``
    the same, with breakpoints on COUNT functions drawn from FILE (one
    name a line), each deleted after three hits: a function inlined
    somewhere stops in its inlined copies, frame #0 the inlined function,
    as GDB shows it.

Nothing here reads sfbt's code: `sframe-bt` is run as a user runs it."""

import json
import os
import random
import re
import sys

import gdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdb_interrupts import interrupted_stops, run  # noqa: E402

# `bt`'s frame lines: "#3  0x... in name (args) at ...", "#4  name (...)",
# "#1  <signal handler called>"
BT_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(<signal handler called>|\S+)", re.M)
SFRAME_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(<signal handler called>|\S+?)"
                          r"(?: at | from | \(\)|$)", re.M)


def to_main(names):
    """``names`` cut after the first ``main`` (sframe-bt stops there)."""
    return names[:names.index("main") + 1] if "main" in names else names


def tail_call_levels():
    levels, frame, level = set(), gdb.newest_frame(), 0
    while frame is not None:
        if frame.type() == gdb.TAILCALL_FRAME:
            levels.add(level)
        frame, level = frame.older(), level + 1
    return levels


def compare(how):
    """Print one stop's names from `bt` and from `sframe-bt`."""
    if not gdb.selected_inferior().pid:
        return False
    try:
        skip = tail_call_levels()
    except gdb.error:
        skip = set()
    theirs = [m[2] for m in BT_FRAME.finditer(run("bt")) if int(m[1]) not in skip]
    ours = SFRAME_FRAME.findall("\n".join(
        line.rsplit("  [", 1)[0]  # -v's tag
        for line in run("sframe-bt -v").splitlines() if not line.endswith("  [tailcall]")))
    pc = int(gdb.newest_frame().pc())
    gdb.write("STOP " + json.dumps({"how": how, "pc": pc, "bt": to_main(theirs),
                                    "sframe": to_main(ours)}) + "\n")
    return True


def moves(how, commands):
    """Run each of ``commands`` and compare after it; False once the
    program has exited."""
    for command in commands:
        run(command)
        if not compare(f"{how} {command}"):
            return False
    return True


def load_base(main_address):
    """The program's load bias: main's address less its file address."""
    return int(gdb.parse_and_eval("&main")) - main_address


def stop_at(seed, count, locations, how, commands, hits):
    """Break at ``count`` of ``locations`` (drawn), each deleted after
    ``hits`` hits; run until the program exits, comparing at each stop
    (and after each of ``commands``)."""
    draw = random.Random(seed)
    points = {}
    for location in draw.sample(locations, min(count, len(locations))):
        point = gdb.Breakpoint(location, internal=True)
        points[point.number] = point
    while gdb.selected_inferior().pid:
        run("continue")
        if not gdb.selected_inferior().pid:
            break
        spent = [p for p in points.values() if p.is_valid() and p.hit_count >= hits]
        compare(how)
        for point in spent:
            point.delete()
        if not moves(how, commands):
            break
    for point in points.values():
        if point.is_valid():
            point.delete()


class InterruptStops(gdb.Command):
    def __init__(self):
        super().__init__("test-interrupt-stops", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        seed, count, *commands = argument.split()
        commands = (commands[0] if commands else "step,step").split(",")
        for _ in interrupted_stops(int(seed), int(count)):
            if not compare("interrupt") or not moves("interrupt", commands):
                return


class InstructionStops(gdb.Command):
    def __init__(self):
        super().__init__("test-insn-stops", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        seed, count, path, *commands = argument.split()
        with open(path) as lines:
            main, *addresses = [int(line, 16) for line in lines if line.strip()]
        base = load_base(main)
        stop_at(int(seed), int(count), [f"*{address + base:#x}" for address in addresses],
                "instruction", (commands[0] if commands else "step").split(","), 1)


class FunctionStops(gdb.Command):
    def __init__(self):
        super().__init__("test-function-stops", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        seed, count, path, *commands = argument.split()
        with open(path) as lines:
            names = sorted({line.strip() for line in lines if line.strip()})
        stop_at(int(seed), int(count), names, "function",
                (commands[0] if commands else "step").split(","), 3)


InterruptStops()
InstructionStops()
FunctionStops()
