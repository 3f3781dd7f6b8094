"""Printing archived backtraces outside the debugger: sframe-bt's layout,
and folded stacks for flame graphs."""

import functools
import time
from itertools import chain, islice
from operator import add

from ..printable import printable
from . import cbf
from .layout import SIGNAL_TRAMPOLINE, GdbLayout


class _NotAFrame(Exception):
    """An Omitted entry where FrameTexts takes each entry's lines to be
    its texts."""


#: the entries FrameTexts and FrameNames make texts and names of
_FRAMES = (cbf.Frame, cbf.SignalTrampoline)


class _Remembered(dict):
    """``make(key)`` of each key looked up, at most ``limit`` of them kept:
    what misses is made by the lookup itself, so that a trace's entries
    are looked up in one map() over them."""

    def __init__(self, make, limit):
        super().__init__()
        self.make = make
        self.limit = limit

    def __missing__(self, key):
        value = self.make(key)
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


class _PerCallers:
    """``make(callers, *details)`` remembered per tuple of callers that
    traces share (cbf.Backtrace.callers: the same tuple each time) and
    details, while the values kept measure at most ``limit`` (``size``
    of each)."""

    def __init__(self, make, size, limit):
        self.make = make
        self.size = size
        self.limit = limit
        self._kept = {}  # (id(callers), *details) -> (callers, value)
        self._used = 0

    def __call__(self, callers, *details):
        key = (id(callers), *details)
        kept = self._kept.get(key)
        if kept is not None and kept[0] is callers:
            return kept[1]
        value = self.make(callers, *details)
        size = self.size(value)
        if size <= self.limit:
            if self._used + size > self.limit:
                self._kept.clear()
                self._used = 0
            self._kept[key] = (callers, value)
            self._used += size
        return value


class FrameTexts:
    """A frame's lines after their levels (``layout.text``, of
    sfbt.archive.layout: ``0xADDR in FUNC at FILE:LINE``, then in GDB's
    layout one line per frame of a call inlined there), from
    ``describe(lookup address)`` -> FrameName (sfbt.frame_name), remembered per frame:
    an archive's traces share most of their frames, and formatting a
    line costs more than finding the line's names.  The lines of the
    callers traces share are joined once (text).  The kernel's signal
    trampoline is told by the frame after it (cbf.signal_trampolines)
    and remembered as a cbf.SignalTrampoline, apart from a return
    address at the same address.  ``kernel``: where the image map's
    kernel addresses are (symbolize.kernel_range), the user frame below
    a trace's kernel frames looked up at itself (cbf.kernel_entries)."""

    MAX_KEPT = 1 << 16
    MAX_KEPT_CHARACTERS = 1 << 24

    def __init__(self, describe, layout=GdbLayout, kernel=None):
        self.describe = describe
        self.layout = layout
        self.kernel = kernel
        self._texts = _Remembered(self._make, self.MAX_KEPT)
        self._callers_text = _PerCallers(self._joined_lines, len,
                                         self.MAX_KEPT_CHARACTERS)

    def _make(self, frame):
        if frame.__class__ not in _FRAMES:
            raise _NotAFrame
        address = frame[1]
        if frame.__class__ is cbf.SignalTrampoline:
            return (self.layout.signal_trampoline_text(address),)
        return self.layout.texts(address, self.describe(frame.lookup_address))

    def lines(self, frames, truncated):
        """frame_lines of frames."""
        lines = self._lines(frames, 0)[0]
        if truncated:
            lines.append("Backtrace stopped: truncated")
        return lines

    def text(self, frames, truncated, callers=()):
        """The lines of frames joined by newlines, ``callers`` being the
        frames' last entries as a tuple other traces share
        (cbf.Backtrace.callers), or ()."""
        if not callers or cbf.enters_kernel_at_callers(frames, callers, self.kernel):
            return "\n".join(self.lines(frames, truncated))
        own = cbf.read_entries(frames[:len(frames) - len(callers)], callers[0], self.kernel)
        lines, level = self._lines_one_by_one(own, 0)
        text = self._callers_text(callers, level)
        if text:
            lines.append(text)
        if truncated:
            lines.append("Backtrace stopped: truncated")
        return "\n".join(lines)

    def _joined_lines(self, frames, level):
        return "\n".join(self._lines(frames, level)[0])

    def _lines(self, frames, level):
        """(lines, the level after them) of frames from ``level`` on, the
        whole of a trace or its callers."""
        frames = cbf.read_entries(frames, kernel=self.kernel)
        try:
            # the usual entries, without omitted frames: each text of
            # each frame a line, its level the next one
            texts = list(chain.from_iterable(map(self._texts.__getitem__, frames)))
        except _NotAFrame:
            return self._lines_one_by_one(frames, level)
        return list(map(add, _levels(level, len(texts)), texts)), level + len(texts)

    def _lines_one_by_one(self, frames, level):
        """_lines of any entries: of a few, faster."""
        lines = []
        omitted, texts = cbf.Omitted, self._texts
        for frame in frames:
            if frame.__class__ is omitted:
                lines.append(f"... {frame.count} frames omitted")
                level += frame.count
                continue
            for text in texts[frame]:
                lines.append((_LEVELS[level] if level < len(_LEVELS) else f"#{level:<2} ")
                             + text)
                level += 1
        return lines, level


_LEVELS = [f"#{level:<2} " for level in range(1 << 10)]


def _levels(start, count):
    """The prefixes ``#N `` of levels start to start + count - 1 (or more)."""
    if start + count <= len(_LEVELS):
        return islice(_LEVELS, start, None)
    return [f"#{level:<2} " for level in range(start, start + count)]


def frame_lines(frames, truncated, describe, layout=GdbLayout):
    """``#N  0xADDR in FUNC at FILE:LINE`` lines in ``layout`` (of
    sfbt.archive.layout); each frame is looked up at its
    cbf.Frame.lookup_address (a return address at address - 1, as
    walk.Frame.lookup_pc does), but the kernel's signal trampoline
    (cbf.signal_trampolines), printed as sframe-bt prints it
    (``0xADDR in <signal handler called>``).  ``describe(address)`` gives
    its FrameName (sfbt.frame_name); a FrameTexts of it, kept across
    traces, formats each frame once."""
    return FrameTexts(describe, layout).lines(frames, truncated)


@functools.lru_cache(maxsize=1024)
def _utc_time(seconds):
    """The time of day in UTC at ``seconds``: a trace heading's; events
    come many to a second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


#: threads a heading names at most (the others counted)
HEADING_THREADS = 3


def trace_heading(number, event, groups):
    """The heading of a stored trace: how often it was captured (its
    threads.SampleGroups), by which threads (each named, up to
    HEADING_THREADS: a stack threads share is not headed with one
    thread's name), how many captures were cut, and its first capture's
    reason, time and label (event)."""
    if len(groups) == 1:  # the usual: one thread's, none cut or all
        (_, cut, count), = groups
        return _heading(number, count, f"thread {printable(event.thread)}", event,
                        count if cut else 0)
    threads = list(dict.fromkeys(group.thread.label for group in groups
                                 if group.thread is not None))
    if len(threads) <= 1:
        who = f"thread {printable(threads[0] if threads else event.thread)}"
    else:
        named = [printable(label) for label in threads[:HEADING_THREADS]]
        more = len(threads) - len(named)
        last = f"{more} more" if more else named.pop()
        who = f"threads {', '.join(named)} and {last}"
    return _heading(number, sum(group.weight for group in groups), who, event,
                    sum(group.weight for group in groups if group.cut))


def _heading(number, count, who, event, cut):
    """trace_heading of ``count`` captures by ``who``, ``cut`` of them cut."""
    details = [who, printable(event.reason), f"{_utc_time(int(event.time_ns / 1e9))} UTC"]
    if cut:
        details.append(f"{cut} cut")
    if event.label:
        details.append(f"label '{printable(event.label)}'")
    times = "once" if count == 1 else f"{count} times"
    return f"Backtrace {number}, captured {times} ({', '.join(details)}):"


class FrameNames:
    """trace_names' names of each frame, from ``describe(lookup address)``
    -> FrameName (trace_names), remembered per frame as FrameTexts' lines
    are, and those of the callers traces share joined once (folded).
    ``unnamed(frame)`` names a function not known (by default, by the
    frame's address); ``kernel`` as FrameTexts takes it."""

    MAX_KEPT_CHARACTERS = FrameTexts.MAX_KEPT_CHARACTERS

    def __init__(self, describe, unnamed=None, kernel=None):
        self.describe = describe
        self.unnamed = unnamed or _address_name
        self.kernel = kernel
        self._names = _Remembered(self._make, FrameTexts.MAX_KEPT)
        self._callers_folded = _PerCallers(self._folded, lambda value: len(value[0]),
                                           self.MAX_KEPT_CHARACTERS)

    def _make(self, frame):
        if frame.__class__ not in _FRAMES:
            return ()  # omitted frames have no names
        if frame.__class__ is cbf.SignalTrampoline:
            return (SIGNAL_TRAMPOLINE,)
        functions = self.describe(frame.lookup_address).functions()
        if not all(functions):
            return tuple(printable(name) if name else self.unnamed(frame)
                         for name in functions)
        return tuple(map(printable, functions))

    def names(self, frames, following=None):
        """trace_names of frames, ``following`` the entry after them (the
        next part of the same trace: cbf.signal_trampolines) or None."""
        frames = cbf.read_entries(frames, following, self.kernel)
        return list(chain.from_iterable(map(self._names.__getitem__, frames)))

    def _folded(self, frames):
        """(the names of frames, root first, joined by ";", how many)."""
        names = self.names(frames)
        return ";".join(reversed(names)), len(names)

    def folded(self, frames, weight, callers=()):
        """folded_line of the names of frames, ``callers`` as
        FrameTexts.text takes them."""
        if not callers or cbf.enters_kernel_at_callers(frames, callers, self.kernel):
            return folded_line(self.names(frames), weight)
        outer, count = self._callers_folded(callers)
        inner = self.names(frames[:len(frames) - len(callers)], callers[0])
        if not count:
            return folded_line(inner, weight)
        if not inner:
            return f"{outer} {weight}"
        return f"{outer};{folded_line(inner, weight)}"


def _address_name(frame):
    return f"{frame.address:#x}"


def trace_names(frames, describe, unnamed=None):
    """The names of a trace's frames, innermost first (omitted frames left
    out): the functions of ``describe(lookup address)``'s FrameName (as
    frame_lines looks up), escaped (sfbt.printable), the calls inlined at
    the address first; a function not known named ``unnamed(frame)``
    (by default by the frame's address).
    The kernel's signal trampoline (cbf.signal_trampolines) is named as
    sframe-bt names it, SIGNAL_TRAMPOLINE, whatever its symbol: the
    trampoline's symbol is often not there to read (a stripped libc,
    the vDSO) and is named differently by each C library, so samples of
    one stack would not fold into one.
    A FrameNames of describe, kept across traces, names each frame once."""
    return FrameNames(describe, unnamed).names(frames)


def folded_line(names, weight):
    """One line of folded stacks (flamegraph.pl, speedscope): root first."""
    return ";".join(reversed(names)) + f" {weight}"
