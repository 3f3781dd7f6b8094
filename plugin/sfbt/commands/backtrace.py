"""sframe-bt: the selected thread's backtrace from SFrame data."""

from __future__ import annotations

from ..archive.layout import layout_of
from ..errors import CommandError
from ..frame_name import UNKNOWN
from ..printable import printable
from ..unwind.walk import STOP_LIMIT, Frame, Unwinder
from .session import Session, Thread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

    from ..archive import cbf


def cbf_frames(frames) -> List[cbf.Frame]:
    """A walk's frames as CBF frames (archive.cbf imported here: sfbt
    stack, which never writes CBF, keeps it off its imports)."""
    from ..archive.cbf import Frame
    return [Frame("pc" if f.interrupted else "ra", f.pc) for f in frames]


USAGE = "sframe-bt [N | -N] [-v] [-full]"
OPTIONS = ("-v", "-full")
_HELP = """\
Print a backtrace unwound with SFrame data.

Usage: sframe-bt [N | -N] [-v] [-full]
  N      print the innermost N frames
  -N     print the outermost N frames
  -v     show how each frame was found: innermost, sframe, flex, synth
         (rows synthesized from DWARF CFI), signal, ra-at-sp (a checked
         return address at SP where the CFI has a hole) or fp, and from
         which module's rows: those of the frame below, which was unwound
         to find this one
  -full  also print each frame's recovered SP, FP and CFA

{layout}, with the address always shown:
  #3  0x00007ffff7e591f5 in start_thread at ./nptl/pthread_create.c:442
{ends}
Where a module has no SFrame data, the frame-pointer chain is followed
({fallback}).
Whatever stops the walk, the frames found are printed, then
`Backtrace stopped: REASON`."""

#: sframe-bt's help in each debugger's words: its settings as that
#: debugger's front end exposes them.
HELP = {
    "gdb": _HELP.format(
        layout="Frames are printed as GDB's `bt` prints them with `set print\n"
               "frame-arguments none`",
        ends="The walk ends at main (unless `set backtrace past-main on`), after\n"
             "N + 1 frames, or at the backtrace limit (`set sframe backtrace-limit`,\n"
             "GDB's own `set backtrace limit`).",
        fallback="`set sframe fallback fp|none`"),
    "lldb": _HELP.format(
        layout="Frames are printed in LLDB's `bt` layout, an address on every line,\n"
               "each call inlined into the function of the frame below it a frame\n"
               "of its own, marked [inlined] (LLDB's `bt` leaves the mark out where\n"
               "the call's line lies in a block nested in it: docs/lldb.md)",
        ends="The walk ends at main, after N + 1 frames, or at the backtrace\n"
             "limit (`sframe-settings set backtrace-limit N`).",
        fallback="`sframe-settings set fallback fp|none`"),
}


def parse_arguments(words) -> Tuple[Optional[int], bool, bool]:
    """(count or None, verbose, full)."""
    count, verbose, full = None, False, False
    for word in words:
        if word == "-v":
            verbose = True
        elif word == "-full":
            full = True
        else:
            try:
                count = int(word, 0)
            except ValueError:
                raise CommandError(f"sframe-bt: unknown argument {word!r} "
                                   f"(usage: {USAGE})") from None
    return count, verbose, full


def complete(typed: str) -> List[str]:
    """The options that complete the word being typed."""
    return [option for option in OPTIONS if option.startswith(typed)]


def walk(session: Session, thread: Thread, limit: Optional[int] = None,
         unwinder=Unwinder):
    """(frames, stop reason or None) of ``thread``: the SFrame walk, ending
    at main unless the session goes past main, and after at most ``limit``
    frames, `set sframe backtrace-limit` and the debugger's own limit
    (GDB's `set backtrace limit`), by ``unwinder(target, module_map,
    fallback)`` (an Unwinder).  Never raises."""
    settings = session.settings
    limits = [n for n in (limit, settings.backtrace_limit, session.backtrace_limit())
              if n]
    is_last = None
    if not session.past_main():
        in_main = session.modules_kept().table("in main")  # lookup pc -> whether in main

        def is_last(frame):
            if frame.signal_trampoline:
                return False
            pc = frame.lookup_pc
            found = in_main.get(pc)
            if found is None:
                found = in_main[pc] = session.in_main(pc)
            return found
    try:
        walker = unwinder(session.target(thread), session.module_map(), settings.fallback)
    except Exception as error:  # the debugger's registers, its modules
        return [], f"cannot start the walk: {error}"
    frames, stop = walker.walk(limit=min(limits) if limits else None, is_last=is_last)
    if stop is not None and frames:
        stop = session.why_stopped(frames[-1], stop)
    return frames, stop


#: what -v says of a tail-call frame
TAIL_CALL_HOW = "tailcall"


def how_found(frame: Frame) -> str:
    if frame.level == 0:
        return "innermost"
    if frame.data_module is not None:
        return f"{frame.how}, {printable(frame.data_module.name)}"
    return frame.how


def registers_line(frame: Frame, arch) -> str:
    parts = []
    for label, number in (("sp", arch.sp), ("fp", arch.fp)):
        value = frame.registers.get(number)
        parts.append(f"{label} = {value:#x}" if value is not None else f"{label} = <unknown>")
    if frame.cfa is not None:
        parts.append(f"cfa = {frame.cfa:#x}")
    return "        " + ", ".join(parts)


def backtrace_lines(frames, stop, count, verbose, full, describe, arch,
                    layout, tail_calls=None, kept_texts=None) -> List[str]:
    """sframe-bt's output.  ``describe(frame, lookup pc)`` gives the
    frame's FrameName (sfbt.frame_name): the calls inlined at the frame's
    PC, then the frame's own function; it is asked once per lookup PC, the
    innermost frame apart (a deep recursion repeats a few).  Inline frames
    are numbered and counted (N, -N) as frames of their own, as `bt` does,
    and printed as ``layout`` (sfbt.archive.layout) prints them.
    ``tail_calls(callee, caller)``, when given, gives the PCs of the
    tail-call frames between two frames (sfbt.symbols.tail_calls), each
    shown as a frame of its own named after the innermost function at its
    PC - 1, as the debugger's `bt` shows it (LLDB's marked
    ``[artificial]``).  ``kept_texts`` keeps the texts of the
    frames other than the innermost one ((pc, lookup pc, tail call) ->
    layout.texts) from one backtrace to the next."""
    rows = []  # (frame, pc, text, index among the frame's lines, last index)
    outer = {} if kept_texts is None else kept_texts
    innermost = {}  # the innermost frame's
    unnamed = {}  # the frames describe() failed on, this time

    def texts(frame, is_innermost, pc, lookup_pc, tail_call=False):
        kept = innermost if is_innermost else outer
        key = (pc, lookup_pc, tail_call)
        found = kept.get(key) or unnamed.get((is_innermost, key))
        if found is None:
            try:
                name = describe(frame, lookup_pc)
                found = kept[key] = layout.texts(pc, name.as_tail_call() if tail_call
                                                 else name)
            except Exception:  # a frame the debugger cannot name is still shown
                found = unnamed[is_innermost, key] = layout.texts(pc, UNKNOWN)
        return found

    for number, frame in enumerate(frames):
        if frame.signal_trampoline:
            rows.append((frame, frame.pc, layout.signal_trampoline_text(frame.pc), 0, 0))
            continue
        lines = texts(frame, frame.level == 0, frame.pc, frame.lookup_pc)
        last = len(lines) - 1
        for index, text in enumerate(lines):
            rows.append((frame, frame.pc, text, index, last))
        caller = frames[number + 1] if number + 1 < len(frames) else None
        if tail_calls is None or caller is None or caller.signal_trampoline:
            continue
        for pc in tail_calls(frame, caller):
            rows.append((None, pc, texts(None, False, pc, pc - 1, True)[0], 0, 0))
    shown, more = rows, False
    if count is not None and count >= 0:
        shown, more = rows[:count], len(rows) > count
    elif count is not None:
        shown = rows[count:]
    first = len(rows) - len(shown) if count is not None and count < 0 else 0
    lines = []
    for level, (frame, pc, text, index, last) in enumerate(shown, first):
        line = f"#{level:<2} {text}"
        own = layout.is_own(index, last)
        if frame is None:
            line += layout.tail_call_mark
        if verbose and frame is None:
            line += f"  [{TAIL_CALL_HOW}]"
        elif verbose and (own or layout.inline_how):
            line += f"  [{how_found(frame) if own else layout.inline_how}]"
        lines.append(line)
        if full and own and frame is not None:
            lines.append(registers_line(frame, arch))
    if more:
        lines.append("(More stack frames follow...)")
    elif stop is not None and not (count is not None and count < 0 and stop == STOP_LIMIT):
        lines.append(f"Backtrace stopped: {stop}")
    return lines


def sframe_bt(session: Session, words, thread: Optional[Thread] = None) -> str:
    """sframe-bt of ``thread`` (the selected thread if None)."""
    count, verbose, full = parse_arguments(words)
    if not session.has_stack():
        raise CommandError("No stack.")
    thread = thread or session.selected_thread()
    # `sframe-bt N` walks one frame more than it prints, to say whether
    # more follow.
    limit = count + 1 if count is not None and count >= 0 else None
    # the same walk at the same stop (a second sframe-bt) is not walked again
    walks = session.stop_kept().table("walks")
    key = (thread.label, limit, session.past_main(), session.backtrace_limit(),
           tuple(session.settings.values().items()))
    walked = walks.get(key)
    if walked is None:
        frames, stop = walk(session, thread, limit)
        walked = walks[key] = (frames, stop, session.innermost_frames(thread))
    frames, stop, innermost = walked

    def describe(frame, lookup_pc):
        if frame is not None and frame.level == 0 and innermost:
            return innermost
        return session.frame_name(lookup_pc)
    layout = layout_of(session.debugger)
    tail_calls = None
    if layout.tail_calls:
        finder = session.tail_calls()
        # (caller pc, callee's lookup pc) -> the PCs between: the call
        # sites say, which stay while the modules do (a deep recursion
        # asks the same pair at every frame, a sweep at every step)
        found = session.modules_kept().table("tail-call frames")

        def tail_calls(callee, caller):
            key = (caller.pc, callee.lookup_pc)
            pcs = found.get(key)
            if pcs is None:
                pcs = found[key] = finder.between(caller.pc, callee.lookup_pc,
                                                  layout.unique_tail_calls)
            return pcs
    lines = backtrace_lines(frames, stop, count, verbose, full, describe, session.arch,
                            layout, tail_calls, session.modules_kept().table("frame texts"))
    return "\n".join(lines)
