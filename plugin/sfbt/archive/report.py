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


def frame_lines(frames, truncated, describe):
    """``#N  0xADDR in FUNC at FILE:LINE`` lines; return addresses are
    looked up at address - 1 (inside the call), except a zero one (a
    smashed stack), as walk.Frame.lookup_pc does.  ``describe(address)``
    gives (name, where), printable (frame_line)."""
    lines, level = [], 0
    append, omitted = lines.append, cbf.Omitted
    for frame in frames:
        if frame.__class__ is omitted:
            append(f"... {frame.count} frames omitted")
            level += frame.count
            continue
        address = frame.address
        name, where = describe(address - 1 if frame.kind != "pc" and address else address)
        append(f"#{level:<2} {address:#018x} in {name}{where}")  # frame_line, inline:
        level += 1                                               # millions in an archive
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
    (frame_line), or the frame's address where it gives None."""
    names = []
    for frame in frames:
        if isinstance(frame, cbf.Omitted):
            continue
        address = frame.address
        name = name_of(address - 1 if frame.kind != "pc" and address else address)
        names.append(name if name is not None else f"{frame.address:#x}")
    return names


def folded_line(names, weight):
    """One line of folded stacks (flamegraph.pl, speedscope): root first."""
    return ";".join(reversed(names)) + f" {weight}"
