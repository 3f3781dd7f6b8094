"""A walk that takes the outer frames of the same thread's previous walk
where they cannot differ.

Between two samples of `sfbt record`, a thread that computes changes its
innermost frames only: its callers, their registers and the stack they
were saved on stay as they were, at whatever depth the innermost frames
now reach.  A step is a function of the frame's registers and of the
memory it reads (its module map being the same), so once the new walk
reaches a frame equal to one of the previous walk's (the same CFA and PC,
the same registers), and every word the previous walk read from there on
lies in both stack copies with the same bytes, the rest of the walk is
the previous walk's, one level deeper or shallower."""

from __future__ import annotations

from .walk import _PAGE_OFFSET, _PAGE_START, STOP_LIMIT, Frame, Unwinder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

#: the span of a step that read no memory
_NOTHING = (1 << 64, -1)


class PreviousWalk:
    """One walk of a thread, kept for its next: its frames, its stop
    reason, the stack copy it read (start address, bytes), and the memory
    each step read: ``spans[i]`` is [low, high) of the addresses read in
    the step from frames[i] (the last may be the step that ended the
    walk).  ``rising``: every frame's SP was above all before it (the
    walk's loop check never compared frames: a walk that goes on from one
    of its frames ends as it did).  ``went_on``: (level, earlier level,
    PreviousWalk) where this walk took the frames after ``level`` from
    those after ``earlier level`` of an earlier one."""

    def __init__(self, frames: List[Frame], stop: Optional[str],
                 stack: Tuple[int, bytes], spans: List[Tuple[int, int]], rising: bool,
                 went_on: Optional[Tuple[int, int, "PreviousWalk"]] = None):
        self.frames = frames
        self.stop = stop
        self.stack = stack
        self.spans = spans
        self._went_on = went_on
        #: (CFA, PC) -> level of the frames a walk may go on from
        self.starts: Dict[Tuple[Optional[int], int], int] = (
            {(frame.cfa, frame.pc): frame.level for frame in frames[1:]} if rising else {})
        #: suffix[i]: [low, high) of all that the steps from frames[i] on
        #: read, or None where one of them read outside the stack copy
        self._suffix: Optional[List[Optional[Tuple[int, int]]]] = None

    def _prepare(self):
        """Fill _suffix, from the earlier walk's where this one went on
        from it (what it checked holds for the frames after)."""
        frames, spans = self.frames, self.spans
        start, data = self.stack
        end = start + len(data)
        suffix: List[Optional[Tuple[int, int]]] = [_NOTHING] * len(frames)
        first = len(spans) - 1
        if self._went_on is not None:
            level, earlier_level, earlier = self._went_on
            suffix[level:] = earlier._suffix[earlier_level:]
            first = level - 1
        low, high = suffix[first + 1] if first + 1 < len(frames) else _NOTHING
        for i in range(first, -1, -1):
            step_low, step_high = spans[i]
            if step_low < step_high:
                if not (start <= step_low and step_high <= end):
                    suffix[:i + 1] = [None] * (i + 1)
                    break
                low, high = min(low, step_low), max(high, step_high)
            suffix[i] = (low, high)
        self._suffix = suffix
        self._went_on = None

    def outer(self, caller: Frame, stack: Tuple[int, bytes], limit: Optional[int] = None
              ) -> Optional[Tuple[List[Frame], Optional[str], int]]:
        """(frames after ``caller``, stop reason, the level of this walk's
        frame equal to ``caller``) where the new walk, at ``caller``
        (whose stack copy is ``stack``), goes on as this one did, in at
        most ``limit`` frames; else None."""
        level = self.starts.get((caller.cfa, caller.pc))
        if level is None:
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
        if self._suffix is None:  # only once a frame is the same: most are not
            self._prepare()
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
        going = None if previous is None or not previous.starts else \
            _GoingOn(previous, stack, limit)
        frames, stop = Unwinder.walk(self, limit, is_last, going)
        spans = self._spans
        went_on = None
        if going is not None and going.at is not None:  # the steps from the frame it went on from
            level, previous_level = going.at
            spans = spans + previous.spans[previous_level:]
            went_on = (level, previous_level, previous)
        self.latest = PreviousWalk(frames, stop, stack, spans, not self.loop_checked, went_on)
        self.went_on_at = went_on[0] if went_on is not None else None
        return frames, stop
