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


class FrameTexts:
    """A frame's lines after their levels (frame_line's layout, split
    after ``#N ``: ``0xADDR in FUNC at FILE:LINE``, then one line per
    frame of a call inlined there, inline_frame_line's), from
    ``describe(lookup address)`` -> (name, where) or a list of them
    (frames_of), printable (frame_line), remembered by address and whether
    it is a PC: an archive's traces share most of their frames, and
    formatting a line costs more than finding the line's names."""

    MAX_KEPT = 1 << 18

    def __init__(self, describe):
        self.describe = describe
        self.at_pc = {}
        self.at_return = {}  # return and async addresses, looked up at address - 1

    def text(self, frame):
        """The frame's texts: a tuple, innermost first."""
        address = frame.address
        at_pc = frame.kind == "pc"
        kept = self.at_pc if at_pc else self.at_return
        texts = kept.get(address)
        if texts is None:
            named = frames_of(self.describe(address if at_pc or not address else address - 1))
            texts = tuple(f"{address:#018x} in {name}{where}" if index == 0
                          else f"{name}{where}"
                          for index, (name, where) in enumerate(named))
            if len(kept) >= self.MAX_KEPT:
                kept.clear()
            kept[address] = texts
        return texts


_LEVELS = [f"#{level:<2} " for level in range(100)]


def frame_lines(frames, truncated, describe):
    """``#N  0xADDR in FUNC at FILE:LINE`` lines; return addresses are
    looked up at address - 1 (inside the call), except a zero one (a
    smashed stack), as walk.Frame.lookup_pc does.  ``describe`` is a
    FrameTexts, or describe(address) giving (name, where) or a list of
    them (frames_of), printable (frame_line)."""
    texts = describe if isinstance(describe, FrameTexts) else FrameTexts(describe)
    at_pc, at_return, text_of = texts.at_pc, texts.at_return, texts.text
    lines, level = [], 0
    append, omitted, levels = lines.append, cbf.Omitted, _LEVELS
    for frame in frames:
        if frame.__class__ is omitted:
            append(f"... {frame.count} frames omitted")
            level += frame.count
            continue
        # FrameTexts.text, its dictionaries read here: millions in an archive
        for text in (at_pc if frame.kind == "pc" else at_return).get(frame.address) \
                or text_of(frame):
            append((levels[level] if level < 100 else f"#{level:<2} ") + text)
            level += 1
    if truncated:
        append("Backtrace stopped: truncated")
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
