"""Printing archived backtraces outside the debugger: sframe-bt's layout,
and folded stacks for flame graphs."""

import time

from ..printable import printable
from . import cbf


def frame_line(level, pc, name, where):
    """One frame in GDB's layout; the name and the place are escaped
    (sfbt.printable): a hostile symbol or path cannot forge a line."""
    return f"#{level:<2} {pc:#018x} in {printable(name)}{printable(where)}"


def lookup_address(frame):
    """Where a frame's function is looked up: a return address at
    address - 1 (inside the call), except a zero one (a smashed stack)."""
    if frame.kind == "pc" or not frame.address:
        return frame.address
    return frame.address - 1


def frame_lines(frames, truncated, describe):
    """``#N  0xADDR in FUNC at FILE:LINE`` lines; return addresses are
    looked up at address - 1.  ``describe(address)`` gives (name, where)."""
    lines, level = [], 0
    for frame in frames:
        if isinstance(frame, cbf.Omitted):
            lines.append(f"... {frame.count} frames omitted")
            level += frame.count
            continue
        name, where = describe(lookup_address(frame))
        lines.append(frame_line(level, frame.address, name, where))
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
    out), escaped (sfbt.printable): ``name_of(lookup address)``, or the
    frame's address where it gives None."""
    names = []
    for frame in frames:
        if isinstance(frame, cbf.Omitted):
            continue
        name = name_of(lookup_address(frame))
        names.append(printable(name) if name is not None else f"{frame.address:#x}")
    return names


def folded_line(names, weight):
    """One line of folded stacks (flamegraph.pl, speedscope): root first."""
    return ";".join(reversed(names)) + f" {weight}"
