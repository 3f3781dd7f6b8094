"""A walk that takes the outer frames of the same thread's previous walk
where they cannot differ.

Between two samples of `sfbt record`, a thread that computes changes its
innermost frames only: its callers, their registers and the stack they
were saved on stay as they were.  A step is a function of the frame's
registers and of the memory it reads (its module map being the same), so
once the new walk reaches a frame equal to the previous walk's frame at
that level, and every word the previous walk read from there on lies in
both stack copies with the same bytes, the rest of the walk is the
previous walk's."""

from __future__ import annotations

from .walk import _PAGE_OFFSET, _PAGE_START, Frame, Unwinder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

#: the span of a step that read no memory
_NOTHING = (1 << 64, -1)


class PreviousWalk:
    """One walk of a thread, kept for its next: its frames, its stop
    reason, the stack copy it read (start address, bytes), and the memory
    each step read: ``spans[i]`` is [low, high) of the addresses read in
    the step from frames[i] (the last may be the step that ended the
    walk).  ``went_on``: (level, PreviousWalk) where this walk took the
    frames after ``level`` from an earlier one."""

    def __init__(self, frames: List[Frame], stop: Optional[str],
                 stack: Tuple[int, bytes], spans: List[Tuple[int, int]], sp_number: int,
                 went_on: Optional[Tuple[int, "PreviousWalk"]] = None):
        self.frames = frames
        self.stop = stop
        self.stack = stack
        self.spans = spans
        self._sp_number = sp_number
        self._went_on = went_on
        #: suffix[i]: [low, high) of all that the steps from frames[i] on
        #: read, or None where one of them read outside the stack copy
        self._suffix: Optional[List[Optional[Tuple[int, int]]]] = None
        #: the last level up to which every frame's SP is known and above
        #: the one before (the walk's loop check has gathered nothing yet)
        self._rising = 0

    def _prepare(self):
        """Fill _suffix and _rising, from the earlier walk's where this
        one went on from it (what it checked holds for the frames after)."""
        frames, spans, sp_number = self.frames, self.spans, self._sp_number
        start, data = self.stack
        end = start + len(data)
        suffix: List[Optional[Tuple[int, int]]] = [_NOTHING] * len(frames)
        if self._went_on is not None:
            level, earlier = self._went_on
            suffix[level:] = earlier._suffix[level:]
            first, rising = level - 1, earlier._rising
        else:
            first, rising = len(spans) - 1, 0
            while rising + 1 < len(frames):
                sp = frames[rising + 1].registers.get(sp_number)
                below = frames[rising].registers.get(sp_number)
                if sp is None or below is None or sp <= below:
                    break
                rising += 1
        low, high = suffix[first + 1] if first + 1 < len(frames) else _NOTHING
        for i in range(first, -1, -1):
            step_low, step_high = spans[i]
            if step_low < step_high:
                if not (start <= step_low and step_high <= end):
                    suffix[:i + 1] = [None] * (i + 1)
                    break
                low, high = min(low, step_low), max(high, step_high)
            suffix[i] = (low, high)
        self._suffix, self._rising = suffix, rising
        self._went_on = None

    def outer(self, caller: Frame, stack: Tuple[int, bytes]
              ) -> Optional[Tuple[List[Frame], Optional[str]]]:
        """(frames after ``caller``, stop reason) where the new walk, at
        ``caller`` (whose stack copy is ``stack``), goes on as this one
        did; else None."""
        level = caller.level
        if level >= len(self.frames):
            return None
        old = self.frames[level]
        if (old.pc != caller.pc or old.registers != caller.registers
                or old.interrupted != caller.interrupted or old.how != caller.how
                or old.cfa != caller.cfa or old.data_module is not caller.data_module
                or old.signal_trampoline != caller.signal_trampoline):
            return None
        if self._suffix is None:  # only once a frame is the same: most are not
            self._prepare()
        if level > self._rising:
            return None
        span = self._suffix[level]
        if span is None:
            return None
        low, high = span
        if low < high:
            start, data = stack
            old_start, old_data = self.stack
            if not (start <= low and high <= start + len(data)):
                return None
            if data[low - start:high - start] != old_data[low - old_start:high - old_start]:
                return None
        return self.frames[level + 1:], self.stop


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
        self._spans: List[Tuple[int, int]] = []
        self._low, self._high = _NOTHING
        self.latest: Optional[PreviousWalk] = None
        #: the level of the frame after which the latest walk took the
        #: previous walk's frames (None: it took none)
        self.went_on_at: Optional[int] = None

    def read(self, address, size):
        if address < self._low:
            self._low = address
        if address + size > self._high:
            self._high = address + size
        return Unwinder.read(self, address, size)

    def read_word(self, address):
        if address < self._low:
            self._low = address
        end = address + self._word_size
        if end > self._high:
            self._high = end
        data = self._pages.get(address & _PAGE_START)  # Unwinder.read_word's common case
        at = address & _PAGE_OFFSET
        if data and at <= self._last_word:
            return self._word(data, at)[0]
        return Unwinder.read_word(self, address)

    def is_signal_trampoline(self, pc, interrupted=False):
        """As Unwinder's; the code read for a pc in a module is not noted:
        the answer is kept in the module map for every walk (a module's
        code does not change while the map lives)."""
        low, high = self._low, self._high
        found = Unwinder.is_signal_trampoline(self, pc, interrupted)
        if self.module_map.module_for(pc) is not None:
            self._low, self._high = low, high
        return found

    def caller(self, frame):
        self._low, self._high = _NOTHING
        try:
            return Unwinder.caller(self, frame)
        finally:
            self._spans.append((self._low, self._high))

    def walk(self, limit=None, is_last=None):
        previous, stack = self._previous, self._stack
        went_on = None

        def outer(caller):
            nonlocal went_on
            found = previous.outer(caller, stack)
            if found is not None:
                went_on = (caller.level, previous)
            return found

        frames, stop = Unwinder.walk(self, limit, is_last,
                                     outer if previous is not None else None)
        spans = self._spans
        if went_on is not None:  # the steps from the frame it went on from
            spans = spans + previous.spans[len(spans):]
        self.latest = PreviousWalk(frames, stop, stack, spans, self._sp, went_on)
        self.went_on_at = went_on[0] if went_on is not None else None
        return frames, stop
