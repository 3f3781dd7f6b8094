"""Printing archived traces: what FrameTexts and FrameNames remember (each
frame's lines and names, the joined lines and names of callers traces
share) never changes what they print, in either debugger's layout,
written here plainly as the layout is defined: each layout's line, folded
stacks root first (an unknown function named by its address), the frame before a `pc` frame (not frame #0) the
kernel's signal trampoline."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from sfbt.archive.cbf import Frame, Omitted
from sfbt.archive.layout import SIGNAL_TRAMPOLINE, GdbLayout, LldbLayout
from sfbt.archive.report import FrameNames, FrameTexts, folded_line, trace_heading
from sfbt.archive.store import Event
from sfbt.archive.threads import SampleGroup, sampled_thread
from sfbt.frame_name import FrameName


def describe(address):
    """A FrameName: a function unknown, or in a library without a line,
    or with calls inlined into it (one of them unknown, one with a name
    to escape)."""
    if address % 11 == 0:
        return FrameName(None)
    if address % 7 == 0:
        return FrameName(f"outer{address % 3}", "src/a.c", 9, inlined=(
            FrameName(f"inlined{address % 5}", "a.h", 3), FrameName("", "b\nh", 4),
            FrameName(None, None, 0, "/lib/l.so")))
    return FrameName(f"f{address % 13}\x1b", module=f"/lib/l{address % 2}.so")


def _escaped(text):
    return text.replace("\n", "\\n").replace("\x1b", "\\033")


def plain_where(layout, name):
    if name.file is not None:
        file = name.file if layout is GdbLayout else name.file.rsplit("/", 1)[-1]
        return f" at {_escaped(file)}:{name.line}"
    return f" from {name.module}" if name.module is not None else " ()"


def plain_line(layout, level, pc, name, where, index, last):
    if layout is GdbLayout:
        text = f"{pc:#018x} in {name}{where}" if index == 0 else f"{name}{where}"
    else:
        text = f"{pc:#018x} in {name}{where}" + (" [inlined]" if index < last else "")
    return f"#{level:<2} {text}"


def _lookup(frame):
    """A return address (not zero) one byte back; a PC or an async resume
    point (a function's entry, CBF says) itself."""
    return frame.address - 1 if frame.kind == "ra" and frame.address else frame.address


def is_trampoline(frames, at):
    """Whether frames[at] is the kernel's signal trampoline: a frame
    directly followed by a `pc` frame."""
    after = frames[at + 1] if at + 1 < len(frames) else None
    return (isinstance(frames[at], Frame) and isinstance(after, Frame)
            and after.kind == "pc")


def plain_lines(frames, truncated, layout=GdbLayout):
    lines, level = [], 0
    for at, entry in enumerate(frames):
        if isinstance(entry, Omitted):
            lines.append(f"... {entry.count} frames omitted")
            level += entry.count
            continue
        if is_trampoline(frames, at):
            lines.append(f"#{level:<2} {entry.address:#018x} in <signal handler called>")
            level += 1
            continue
        named = describe(_lookup(entry))
        named = [*named.inlined, named]
        for index, name in enumerate(named):
            lines.append(plain_line(layout, level, entry.address,
                                    _escaped(name.function or "??"),
                                    plain_where(layout, name), index, len(named) - 1))
            level += 1
    if truncated:
        lines.append("Backtrace stopped: truncated")
    return lines


def plain_folded(frames, weight):
    names = []
    for at, entry in enumerate(frames):
        if is_trampoline(frames, at):
            names.append(SIGNAL_TRAMPOLINE)
        elif isinstance(entry, Frame):
            found = describe(_lookup(entry))
            for name in [*found.inlined, found]:
                names.append(_escaped(name.function) if name.function
                             else f"{entry.address:#x}")
    return ";".join(reversed(names)) + f" {weight}"


entries = st.one_of(
    st.builds(Frame, st.sampled_from(["pc", "ra", "async"]), st.integers(0, 80)),
    st.builds(Omitted, st.integers(1, 2000)))


@st.composite
def traces(draw):
    """(frames, truncated, callers) of a few traces, their callers (a
    tuple, or none) drawn from a few shared ones."""
    shared = draw(st.lists(st.lists(entries, max_size=8).map(tuple), min_size=1, max_size=3))
    out = []
    for _ in range(draw(st.integers(1, 10))):
        head = draw(st.lists(entries, max_size=3))
        callers = draw(st.sampled_from(shared + [()]))
        out.append((head + list(callers), draw(st.booleans()), callers))
    return out


@settings(max_examples=300, deadline=None)
@given(traces(), st.sampled_from([GdbLayout, LldbLayout]))
def test_frame_texts_print_the_plain_layout(cases, layout):
    texts = FrameTexts(describe, layout)
    for frames, truncated, callers in cases + cases:
        expected = plain_lines(frames, truncated, layout)
        assert texts.lines(frames, truncated) == expected
        assert texts.text(frames, truncated, callers) == "\n".join(expected)


@settings(max_examples=300, deadline=None)
@given(traces(), st.integers(1, 1000))
def test_frame_names_fold_the_plain_names(cases, weight):
    names = FrameNames(describe)
    for frames, _, callers in cases + cases:
        assert names.folded(frames, weight, callers) == plain_folded(frames, weight)
        assert folded_line(names.names(frames), weight) == plain_folded(frames, weight)


def test_a_return_address_and_the_trampoline_at_it_are_remembered_apart():
    """One saved frame, a return address in one trace and the signal
    trampoline in the next (a `pc` frame follows it there, as the first
    of the callers traces share): what is remembered of one is not
    printed for the other."""
    frame, callers = Frame("ra", 0x31), (Frame("pc", 0x40), Frame("ra", 0x50))
    texts, names = FrameTexts(describe), FrameNames(describe)
    traces = [([Frame("pc", 1), frame, Frame("ra", 2)], ()), ([frame, *callers], callers)]
    for frames, shared in traces + traces:
        assert texts.text(frames, False, shared) == "\n".join(plain_lines(frames, False))
        assert names.folded(frames, 3, shared) == plain_folded(frames, 3)
    assert "#0  0x0000000000000031 in <signal handler called>" in plain_lines(traces[1][0], False)
    assert "<signal handler called>" not in "".join(plain_lines(traces[0][0], False))


def test_the_user_frame_below_kernel_frames_is_named_at_itself():
    """A sample taken in the kernel: the user PC below its frames (a
    return address as written) is named at itself, the kernel's frames
    as return addresses, and so where the kernel's frames end just where
    the callers traces share begin; without a kernel in the image map
    the frame is a return address."""
    kernel = (0xff00, 0xffff)
    user, caller = Frame("ra", 0x70), Frame("ra", 0x50)
    traces = [[Frame("pc", 0xff10), user, caller], [Frame("pc", 0xff10), Frame("ra", 0xff20), user]]
    texts, names = FrameTexts(describe, kernel=kernel), FrameNames(describe, kernel=kernel)
    for frames in traces + traces:
        # (the model's async frame: looked up at itself, no trampoline)
        exact = [Frame("async", 0x70) if frame == user else frame for frame in frames]
        callers = tuple(frames[1:])
        assert texts.text(frames, False, callers) == "\n".join(plain_lines(exact, False))
        assert names.folded(frames, 2, callers) == plain_folded(exact, 2)
    assert describe(0x70) != describe(0x6f)
    plain = FrameNames(describe)
    assert plain.folded(traces[0], 2, tuple(traces[0][1:])) == plain_folded(traces[0], 2)


def test_levels_past_the_prepared_ones():
    callers = tuple(Frame("ra", 1 + address % 60) for address in range(1100))
    texts = FrameTexts(describe)
    for head in ([], [Frame("pc", 3)] * 1030, [Omitted(5000), Frame("pc", 7)]):
        frames = head + list(callers)
        assert texts.text(frames, False, callers) == "\n".join(plain_lines(frames, False))


def test_what_is_kept_is_bounded(monkeypatch):
    monkeypatch.setattr(FrameTexts, "MAX_KEPT", 3)
    monkeypatch.setattr(FrameTexts, "MAX_KEPT_CHARACTERS", 200)
    monkeypatch.setattr(FrameNames, "MAX_KEPT_CHARACTERS", 20)
    texts, names = FrameTexts(describe), FrameNames(describe)
    shared = [tuple(Frame("ra", a) for a in range(start, start + length))
              for start, length in ((1, 2), (20, 9), (40, 1))]
    for number in range(60):
        callers = shared[number % 3]
        frames = [Frame("pc", number)] + list(callers)
        assert texts.text(frames, False, callers) == "\n".join(plain_lines(frames, False))
        assert names.folded(frames, 1, callers) == plain_folded(frames, 1)
        assert len(texts._texts) <= 3 and len(names._names) <= 3
        assert texts._callers_text._used <= 200 and names._callers_folded._used <= 20


def test_headings_tell_the_time_as_gmtime_does():
    for time_ns in (0, 999_999_999, 1_000_000_000, 1_764_115_200_999_999_999,
                    (1 << 63) - 1, (1 << 64) - 1):
        event = Event(1, 0, time_ns, "x86_64", "1 (4242)", "SIGPROF")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time_ns / 1e9))
        groups = [SampleGroup(sampled_thread(event), False, 2)]
        assert trace_heading(3, event, groups) == (f"Backtrace 3, captured 2 times (thread 1 (4242), "
                                              f"SIGPROF, {when} UTC):")
