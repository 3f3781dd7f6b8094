"""What every stack source of `sfbt record` shares: a sample (a thread's
registers and stack copy, in the session of its process's mappings) is
walked with the one frame step, going on from the thread's previous walk
where it cannot differ (unwind.reuse), and written to the archive as one
event: its trace stored once per distinct walk, the thread as GDB numbers
it.  The sources (``record``: ptrace; ``perf_source``: perf events) only
say what a sample is."""

import time
from operator import attrgetter

from ..archive import cbf
from ..archive.recording import SAMPLE
from ..commands.backtrace import walk
from ..commands.session import Thread
from ..unwind.reuse import ReusingUnwinder
from ..unwind.walk import STOP_LIMIT

#: how often a recording's samples are written out
FLUSH_INTERVAL = 0.5
#: a frame's kind in CBF, by whether it was interrupted (a PC where
#: execution stopped) or not (a return address)
_KINDS = ("ra", "pc")
_INTERRUPTED = attrgetter("interrupted")
_PC = attrgetter("pc")


def sampling_rounds(start, duration, signals, flush):
    """The times (time.monotonic) of a sampling loop's rounds from
    ``start``, until ``duration`` seconds (None: no limit) passed,
    ``signals`` (record.EndingSignals) caught one, or ``flush()``, called
    every FLUSH_INTERVAL, says the samples can no longer be written."""
    flushed = start
    while signals.caught is None:
        now = time.monotonic()
        if duration is not None and now - start >= duration:
            return
        if now - flushed >= FLUSH_INTERVAL:
            flushed = now
            if not flush():
                return
        yield now


class SampleWriter:
    """Walks samples and writes them into ``archive`` (an Archive written
    as it grows), each event labelled ``label``, its stop reason
    ``reason`` (how it was sampled: archive.recording.SAMPLE,
    archive.recording.cpu_sample(hz))."""

    def __init__(self, archive, arch, label, reason=SAMPLE):
        self.archive = archive
        self.arch = arch
        self.label = label
        self.reason = reason
        self.word_size = 8 * arch.pointer_size
        #: tid -> (session, PreviousWalk) of its latest walk
        self._previous = {}
        #: (truncated, kernel frames, (kind, pc) of each frame...) -> its trace id
        self._trace_ids = {}
        #: tid -> its number, as GDB numbers threads: in the order first
        #: seen (the main thread 1), never used again (``_numbered`` given)
        self._numbers = {}
        self._numbered = 0
        #: tid -> (name, process, its events' strings: architecture,
        #: thread as they name it, reason, label)
        self._labels = {}
        self.samples = 0

    def walk(self, session, state):
        """(frames, stop) of thread state ``state`` walked in ``session``,
        going on from the thread's previous walk in it where that cannot
        differ (unwind.reuse)."""
        kept = self._previous.get(state.tid)
        previous = kept[1] if kept is not None and kept[0] is session else None
        made = []

        def unwinder(target, module_map, fallback):
            made.append(ReusingUnwinder(target, module_map, fallback,
                                        stack=(state.stack_start, state.stack),
                                        previous=previous))
            return made[0]

        frames, stop = walk(session, Thread("", state), unwinder=unwinder)
        if made and made[0].latest is not None:
            self._previous[state.tid] = (session, made[0].latest)
        return frames, stop

    def trace_id(self, frames, stop, cut=False, kernel=()):
        """The archive's id of a walk's trace, encoded once per distinct
        one, atop it the ``kernel`` frames (innermost first: the PC, then
        return addresses) where the sample was taken in the kernel; marked
        truncated where the walk reached the frame limit or ``cut`` (it
        ran past the stack copy).  Below kernel frames the user PC is
        written as a return address, which readers look up at itself
        (cbf.kernel_entries): a ``pc`` frame there would be read as one a
        signal interrupted, the kernel's frame as the signal trampoline
        (cbf.signal_trampolines)."""
        truncated = cut or stop == STOP_LIMIT
        # (kind, address) pairs: what cbf.encode writes, and the trace's key
        # (made in C: map and zip, no Python step per frame)
        written = list(zip(map(_KINDS.__getitem__, map(_INTERRUPTED, frames)),
                           map(_PC, frames)))
        key = (truncated, kernel, *written)
        trace_id = self._trace_ids.get(key)
        if trace_id is None:
            if kernel:
                if written and written[0][0] == "pc":
                    written[0] = ("ra", written[0][1])
                written = [("pc" if n == 0 else "ra", pc)
                           for n, pc in enumerate(kernel)] + written
            trace_id = self._trace_ids[key] = self.archive.add_trace(
                cbf.encode(written, self.word_size, truncated))
        return trace_id

    def record(self, trace_id, image_map, time_ns, pid, tid, name, cut=False,
               name_process=False):
        """One event: thread ``tid`` (named ``name``) of process ``pid`` had
        stack ``trace_id`` at ``time_ns``, ``cut`` where the walk ran past
        its stack copy.  ``name_process``: the thread's string names its
        process too (a recording of several processes); the event's tail
        (pid, tid, name, cut) holds them all in any case."""
        kept = self._labels.get(tid)
        if kept is not None and kept[0] == name and kept[1] == pid:
            strings = kept[2]
        else:
            number = self._numbers.get(tid)
            if number is None:
                self._numbered += 1
                number = self._numbers[tid] = self._numbered
            thread = f"{number} ({tid} {name})" if name else f"{number} ({tid})"
            if name_process:
                thread += f" of process {pid}"
            strings = (self.arch.name, thread, self.reason, self.label)
            self._labels[tid] = (name, pid, strings)
        self.archive.stream_event(trace_id, image_map, time_ns, strings, (pid, tid, name, cut))
        self.samples += 1

    def forget(self, tid):
        """Drop what was kept of thread ``tid`` (gone)."""
        self._previous.pop(tid, None)
        self._labels.pop(tid, None)
        self._numbers.pop(tid, None)
