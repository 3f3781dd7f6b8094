"""Printing archived backtraces outside the debugger: sframe-bt's layout,
and folded stacks for flame graphs."""

import time

from ..printable import printable
from . import cbf


def frame_line(level, pc, name, where):
    """One frame in GDB's layout.  ``name`` and ``where`` are printable
    text: whoever names the frame escapes them (sfbt.printable), where its
    answers are remembered, so that a hostile symbol or path cannot forge
    a line and a large archive escapes each name once."""
    return f"#{level:<2} {pc:#018x} in {name}{where}"


def inline_frame_line(level, name, where):
    """A frame of a call inlined into the frame below it: GDB's layout
    without an address (the frame has none of its own)."""
    return f"#{level:<2} {name}{where}"


def frames_of(named):
    """[(name, where)], innermost first, of what a describe function
    gives: one (name, where), or a list of them where the calls inlined
    at the address come first (they are frames of their own)."""
    return named if isinstance(named, list) else [named]


def frame_lines(frames, truncated, describe):
    """``#N  0xADDR in FUNC at FILE:LINE`` lines; return addresses are
    looked up at address - 1 (inside the call), except a zero one (a
    smashed stack), as walk.Frame.lookup_pc does.  ``describe(address)``
    gives (name, where) or a list of them (frames_of), printable
    (frame_line)."""
    lines, level = [], 0
    for frame in frames:
        if isinstance(frame, cbf.Omitted):
            lines.append(f"... {frame.count} frames omitted")
            level += frame.count
            continue
        address = frame.address
        named = describe(address - 1 if frame.kind != "pc" and address else address)
        for index, (name, where) in enumerate(frames_of(named)):
            lines.append(frame_line(level, frame.address, name, where) if index == 0
                         else inline_frame_line(level, name, where))
            level += 1
    if truncated:
        lines.append("Backtrace stopped: truncated")
    return lines


def trace_heading(number, event, count):
    """The heading of a stored trace: how often (count), and its first
    capture (event)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event.time_ns / 1e9))
    details = [f"thread {printable(event.thread)}", printable(event.reason), f"{when} UTC"]
    if event.label:
        details.append(f"label '{printable(event.label)}'")
    times = "once" if count == 1 else f"{count} times"
    return f"Backtrace {number}, captured {times} ({', '.join(details)}):"


def trace_names(frames, name_of):
    """The names of a trace's frames, innermost first (omitted frames left
    out): ``name_of(lookup address)`` (as frame_lines looks up), printable
    (frame_line), or the frame's address where it gives None; or a list
    of them, innermost first, where calls were inlined at the address."""
    names = []
    for frame in frames:
        if isinstance(frame, cbf.Omitted):
            continue
        address = frame.address
        found = name_of(address - 1 if frame.kind != "pc" and address else address)
        for name in found if isinstance(found, list) else [found]:
            names.append(name if name is not None else f"{frame.address:#x}")
    return names


def folded_line(names, weight):
    """One line of folded stacks (flamegraph.pl, speedscope): root first."""
    return ";".join(reversed(names)) + f" {weight}"
