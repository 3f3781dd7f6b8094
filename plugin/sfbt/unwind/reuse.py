"""A walk that takes the outer frames of the same thread's previous walk
where they cannot differ.

Between two samples of `sfbt record`, a thread that computes changes its
innermost frames only: its callers, their registers and the stack they
were saved on stay as they were, at whatever depth the innermost frames
now reach.  A step is a function of the frame's registers and of the
memory it reads (its module map being the same), so once the new walk
reaches a frame equal to one of the previous walk's (the same CFA and PC,
the same registers), and every byte the previous walk read from there on
lies in both stack copies with the same value, the rest of the walk is
the previous walk's, one level deeper or shallower.

What each step read is noted as cheaply as the walk allows (it runs once
per sample): the start and end of every read in two lists, and where
each step's reads begin in them; the span that a walk going on from
level j relies on is then the min and max of the lists from there (C
loops, asked only of a frame that matched)."""

from __future__ import annotations

from operator import attrgetter

from .walk import _PAGE, _PAGE_OFFSET, _PAGE_START, STOP_LIMIT, Frame, Unwinder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple


_CFA_PC = attrgetter("cfa", "pc")
_LEVEL = attrgetter("level")


class PreviousWalk:
    """One walk of a thread, kept for its next: its frames, its stop
    reason, the stack copy it read (start address, bytes), and the memory
    its steps read: read i was [lows[i], highs[i]), and the step from
    frames[k] made the reads from marks[k] on (the last step may be the
    one that ended the walk).  ``rising``: every frame's SP was above all
    before it (the walk's loop check never compared frames: a walk that
    goes on from one of its frames ends as it did)."""

    def __init__(self, frames: List[Frame], stop: Optional[str],
                 stack: Tuple[int, bytes], lows: List[int], highs: List[int],
                 marks: List[int], rising: bool):
        self.frames = frames
        self.stop = stop
        self.stack = stack
        self.lows = lows
        self.highs = highs
        self.marks = marks
        #: (CFA, PC) -> level of the frames a walk may go on from (made in
        #: C: map and zip, no Python step per frame)
        self.starts: Dict[Tuple[Optional[int], int], int] = (
            dict(zip(map(_CFA_PC, frames[1:]), map(_LEVEL, frames[1:]))) if rising else {})

    def outer(self, caller: Frame, stack: Tuple[int, bytes], limit: Optional[int] = None
              ) -> Optional[Tuple[List[Frame], Optional[str], int]]:
        """(frames after ``caller``, stop reason, the level of this walk's
        frame equal to ``caller``) where the new walk, at ``caller``
        (whose stack copy is ``stack``), goes on as this one did, in at
        most ``limit`` frames; else None."""
        level = self.starts.get((caller.cfa, caller.pc))
        if level is None or level >= len(self.marks):
            return None
        old = self.frames[level]
        if (old.registers != caller.registers or old.interrupted != caller.interrupted
                or old.how != caller.how or old.data_module is not caller.data_module
                or old.signal_trampoline != caller.signal_trampoline):
            return None
        rest = self.frames[level + 1:]
        count = caller.level + 1 + len(rest)
        if limit is not None and (count > limit or
                                  (self.stop == STOP_LIMIT and count != limit)):
            return None  # the new walk reaches its limit elsewhere
        first = self.marks[level]
        if first < len(self.lows):
            low, high = min(self.lows[first:]), max(self.highs[first:])
            start, data = stack
            old_start, old_data = self.stack
            if not (start <= low and high <= start + len(data)
                    and old_start <= low and high <= old_start + len(old_data)):
                return None  # read outside a copy: not known to be the same
            if data[low - start:high - start] != old_data[low - old_start:high - old_start]:
                return None
        shift = caller.level - level
        if shift:
            rest = [Frame(f.level + shift, f.pc, f.registers, f.how, f.data_module,
                          f.interrupted, f.signal_trampoline, f.cfa) for f in rest]
        return rest, self.stop, level


class _GoingOn:
    """A walk's view of the previous walk it may go on from (walk()'s
    ``outer``): ``at`` is (level, previous level) where it did."""

    __slots__ = ("previous", "starts", "stack", "limit", "at")

    def __init__(self, previous, stack, limit):
        self.previous = previous
        self.starts = previous.starts
        self.stack = stack
        self.limit = limit
        self.at = None

    def __call__(self, caller):
        found = self.previous.outer(caller, self.stack, self.limit)
        if found is None:
            return None
        self.at = (caller.level, found[2])
        return found[0], found[1]


class ReusingUnwinder(Unwinder):
    """An Unwinder that notes what memory each step reads, and goes on
    from ``previous`` (a PreviousWalk of the same thread in the same
    module map, or None) where it can.  ``stack``: the stack copy the
    target reads, (start address, bytes).  After walk(), ``latest`` is the
    PreviousWalk of this walk."""

    def __init__(self, target, module_map, fallback="fp", *, stack, previous=None):
        super().__init__(target, module_map, fallback)
        self._stack = stack
        self._previous = previous
        self._lows: List[int] = []
        self._reads = self._lows  # Unwinder._walk notes where each step's begin
        self._highs: List[int] = []
        self._marks: List[int] = []
        self.latest: Optional[PreviousWalk] = None
        #: the level of the frame after which the latest walk took the
        #: previous walk's frames (None: it took none)
        self.went_on_at: Optional[int] = None

    def read(self, address, size):
        self._lows.append(address)
        self._highs.append(address + size)
        data = self._pages.get(address & _PAGE_START)  # Unwinder.read's common case
        at = address & _PAGE_OFFSET
        if data and at + size <= _PAGE:
            return data[at:at + size]
        return Unwinder.read(self, address, size)

    def read_word(self, address):
        self._lows.append(address)
        self._highs.append(address + self._word_size)
        data = self._pages.get(address & _PAGE_START)  # Unwinder.read_word's common case
        at = address & _PAGE_OFFSET
        if data and at <= self._last_word:
            return self._word(data, at)[0]
        return Unwinder.read_word(self, address)

    def is_signal_trampoline(self, pc, interrupted=False):
        """As Unwinder's; the code read for a pc in a module is not noted:
        the answer is kept in the module map for every walk (a module's
        code does not change while the map lives)."""
        noted = len(self._lows)
        found = Unwinder.is_signal_trampoline(self, pc, interrupted)
        if self.module_map.module_for(pc) is not None:
            del self._lows[noted:], self._highs[noted:]
        return found

    def walk(self, limit=None, is_last=None):
        previous, stack = self._previous, self._stack
        going = None if previous is None or not previous.starts else \
            _GoingOn(previous, stack, limit)
        frames, stop = Unwinder.walk(self, limit, is_last, going)
        lows, highs, marks = self._lows, self._highs, self._marks
        self.went_on_at = None
        if going is not None and going.at is not None:  # the reads of the steps it took
            level, previous_level = going.at
            first = previous.marks[previous_level]
            moved = len(lows) - first
            marks += [mark + moved for mark in previous.marks[previous_level:]]
            lows += previous.lows[first:]
            highs += previous.highs[first:]
            self.went_on_at = level
        self.latest = PreviousWalk(frames, stop, stack, lows, highs, marks,
                                   not self.loop_checked)
        return frames, stop
