"""`sfbt record`: sample every thread's stack at a fixed rate into one
archive, each distinct stack stored once with a count (one event per
sample).

Each sample stops a thread only to read its registers and copy its stack
(process.Process.snapshot); the walk runs on the copy while the thread
runs on.  A thread that has not run since its previous sample (blocked in
a system call: its run time and run count in /proc/.../schedstat have not
moved) is not stopped again: its previous stack is counted again.  A
thread whose registers and stack are byte for byte those of its previous
sample is not walked again.

The archive is written as it grows (archive.stream), into a temporary file
renamed over the output when the recording ends: by the process exiting,
--duration, Ctrl-C, SIGTERM or SIGHUP (each ends the recording, not sfbt),
or a write that fails (a full disk: the samples written before it are
kept)."""

import os
import select
import signal
import time
from dataclasses import dataclass, field

from ..archive import cbf
from ..archive.imagemap import encode_image_map
from ..archive.store import Archive, Event
from ..archive.stream import ArchiveStream
from ..debuginfo import DebugFiles
from ..files import replace_file
from .process import Process, ProcessError, ProcessExited
from .stack import Walker, cbf_frames, image_map

#: how often the mappings are read again (new libraries, new thread stacks)
MAPS_INTERVAL = 1.0
#: how often the samples taken are written out (and the longest sleep)
FLUSH_INTERVAL = 0.5
#: the rates `--hz` takes
MIN_HZ, MAX_HZ = 1e-6, 10000.0


class EndingSignals:
    """While entered, SIGINT, SIGTERM and SIGHUP end the recording rather
    than the program: each notes its name in ``caught`` and wakes
    ``sleep``; the loop then stops between two samples, never inside one."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.caught = None
        self._wake = None
        self._kept = {}
        self._kept_wakeup = None

    def __enter__(self):
        self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._kept_wakeup = signal.set_wakeup_fd(self._wake[1], warn_on_full_buffer=False)
        for number in self.SIGNALS:
            self._kept[number] = signal.signal(number, self._caught)
        return self

    def __exit__(self, *exception):
        for number, handler in self._kept.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(self._kept_wakeup)
        for descriptor in self._wake:
            os.close(descriptor)

    def _caught(self, number, frame):
        if self.caught is None:
            self.caught = signal.Signals(number).name

    def sleep(self, seconds):
        """Sleep, until a signal at the latest."""
        select.select([self._wake[0]], [], [], seconds)


@dataclass
class RecordStats:
    ticks: int = 0
    missed: int = 0
    samples: int = 0
    walks: int = 0
    stops: list = field(default_factory=list)  # seconds each thread was stopped
    elapsed: float = 0.0
    ended: str = ""
    kept: int = 0  # samples written to the file
    #: the ProcessError that ended the recording (None: time was up, or a signal)
    error: object = None

    @property
    def rate(self):
        return self.ticks / self.elapsed if self.elapsed else 0.0


class Recorder:
    def __init__(self, pid, hz=99.0, label=""):
        self.process = Process(pid)
        self.hz = hz
        if not label:
            name = dict(self.process.threads()).get(pid, "")
            label = f"sfbt record of process {pid}{f' ({name})' if name else ''} at {hz:g} Hz"
        self.label = label
        self.archive = Archive()
        self.stats = RecordStats()
        self._previous = {}  # tid -> (registers, stack, cbf bytes)
        #: tid -> its number, as GDB numbers threads: in the order first
        #: seen (the main thread 1), never used again
        self._numbers = {}
        # the walk names frames (to stop at main): from files on this
        # machine only, never a download between two samples
        self._debug_files = DebugFiles(download=False)
        self._new_walker()

    def _new_walker(self):
        process = self.process
        sources = getattr(self, "walker", None) and self.walker.sources
        self.walker = Walker(process.arch, process.modules(), process.read,
                             process.executable, sources=sources, mappings=process.mappings,
                             debug_files=self._debug_files)
        self._image_map = self.archive.add_image_map(
            encode_image_map(image_map(process.arch, self.walker.modules)))
        self._maps_read = time.monotonic()

    def _refresh_mappings(self, keep_gone=False):
        if self.process.reread_mappings(keep_gone):
            self._new_walker()
        self._maps_read = time.monotonic()

    def _walk(self, state):
        """The walk of a copied thread; where it ends outside every known
        library, again with the mappings read anew (one loaded since)."""
        frames, stop = self.walker.walk(state)
        if stop is not None and frames and \
                self.walker.module_map.module_for(frames[-1].lookup_pc) is None:
            self._refresh_mappings(keep_gone=True)
            frames, stop = self.walker.walk(state)
        return frames, stop

    def sample(self):
        """Sample every thread once."""
        threads = self.process.threads(fresh_names=False)
        known = self._previous
        if (any(tid not in known for tid, _ in threads)
                or time.monotonic() - self._maps_read > MAPS_INTERVAL):
            self._refresh_mappings()
        now = time.time_ns()
        word_size = 8 * self.process.arch.pointer_size
        stopped = []
        gone = 0
        for tid, name in threads:
            previous = known.get(tid)
            if previous is not None and previous[2] is not None \
                    and self.process.idle_mark(tid) == previous[2]:
                data = previous[1]
            else:
                state = self.process.snapshot(tid, name)
                if state is None:
                    gone += 1
                    continue
                self.stats.stops.append(state.extra["stopped"])
                key = (state.registers, state.stack)
                if previous is not None and previous[0] == key:
                    data = previous[1]
                else:
                    frames, stop = self._walk(state)
                    data = cbf.encode(cbf_frames(frames), word_size,
                                      stop == "frame limit reached")
                    self.stats.walks += 1
                known[tid] = [key, data, None]
                stopped.append(tid)
            self._record(data, now, tid, name)
        if gone == len(threads):
            raise ProcessExited(f"process {self.process.pid} exited")
        # once they blocked again, what says the stopped threads have not
        # run since (read now, after the walks, not right after the stop)
        for tid in stopped:
            known[tid][2] = self.process.idle_mark(tid)

    def _record(self, data, now, tid, name):
        arch = self.process.arch
        trace_id = self.archive.add_trace(data)
        number = self._numbers.setdefault(tid, len(self._numbers) + 1)
        thread = f"{number} ({tid} {name})" if name else f"{number} ({tid})"
        self.archive.add_event(Event(trace_id, self._image_map, now, arch.name,
                                     thread, "sample", self.label))
        self.stats.samples += 1

    def run(self, duration, signals, flush, on_first_sample=None):
        """Sample at self.hz until ``duration`` seconds (None: no limit)
        passed, the process exited or could no longer be read
        (``stats.error`` says why), ``signals`` (EndingSignals) caught one,
        or ``flush()`` (called every FLUSH_INTERVAL) says the samples can no
        longer be written; a tick that comes late is skipped.
        ``on_first_sample()`` is called once a sample was taken."""
        interval = 1.0 / self.hz
        start = flushed = time.monotonic()
        tick = 0
        while signals.caught is None:
            now = time.monotonic()
            if duration is not None and now - start >= duration:
                break
            if now - flushed >= FLUSH_INTERVAL:
                flushed = now
                if not flush():
                    break
            due = start + tick * interval
            if now < due:
                signals.sleep(min(due - now, FLUSH_INTERVAL))
                continue
            missed = int((now - due) / interval)
            self.stats.missed += missed
            tick += missed + 1
            try:
                self.sample()
            except ProcessError as error:
                self.stats.error = error
                self.stats.ended = ("the process exited" if isinstance(error, ProcessExited)
                                    else str(error))
                break
            self.stats.ticks += 1
            if on_first_sample is not None and self.stats.ticks == 1:
                on_first_sample()
        if signals.caught is not None:
            self.stats.ended = ("interrupted" if signals.caught == "SIGINT"
                                else f"ended by {signals.caught}")
        self.stats.elapsed = time.monotonic() - start

    def close(self):
        self.process.close()

    def record(self, path, duration=None, started=lambda: None):
        """Record into the archive file at path (replaced when the
        recording ends, see files.replace_file); ``started()`` is called
        once a sample was taken.  Returns the OSError that stopped the
        writing early (the samples before it are in the file), or None.
        Where no sample was taken, no file is written: the ProcessError that
        ended the recording is raised (as sfbt stack words it)."""
        def write(stream):
            out = ArchiveStream(self.archive, stream.fileno())
            self.run(duration, signals, out.flush, started)
            if not self.stats.samples:
                raise self.stats.error or ProcessError(
                    f"process {self.process.pid}: no stack recorded "
                    f"({self.stats.ended or 'no sample'})")
            out.flush()
            self.stats.kept = out.events
            failure[0] = out.failure
        failure = [None]
        # held until the file is in place: a signal while it is written
        # out does not lose it
        with EndingSignals() as signals:
            replace_file(path, write)
        return failure[0]


def summary(recorder, path):
    stats = recorder.stats
    stops = sorted(stats.stops) or [0.0]
    median = stops[len(stops) // 2]
    distinct = len(recorder.archive.traces)
    ended = f" ({stats.ended})" if stats.ended else ""
    saved = (f"saved to {path}" if stats.kept == stats.samples
             else f"the first {stats.kept} saved to {path}")
    return (f"Recorded {stats.samples} stacks in {stats.ticks} samples over "
            f"{stats.elapsed:.1f} s ({stats.rate:.1f} Hz of {recorder.hz:g}){ended}: "
            f"{distinct} distinct, {saved}.\n"
            f"Each thread was stopped for {median * 1e3:.3f} ms per sample "
            f"(median; at most {stops[-1] * 1e3:.3f} ms).")
