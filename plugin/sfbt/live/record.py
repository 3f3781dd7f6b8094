"""`sfbt record`: sample every thread's stack at a fixed rate into one
archive, each distinct stack stored once with a count (one event per
sample).

Each sample stops a thread only to read its registers and copy its stack
(process.Process.snapshot); the walk runs on the copy while the thread
runs on.  A thread that has not run since its previous sample (blocked in
a system call: its run time and run count in /proc/.../schedstat have not
moved) is not stopped again: its previous stack is counted again.  A
thread whose registers and stack are byte for byte those of its previous
sample is not walked again."""

import time
from dataclasses import dataclass, field

from ..archive import cbf
from ..archive.imagemap import encode_image_map
from ..archive.store import Archive, Event, save_archive
from ..debuginfo import DebugFiles
from .process import Process, ProcessError
from .stack import Walker, cbf_frames, image_map

#: how often the mappings are read again (new libraries, new thread stacks)
MAPS_INTERVAL = 1.0


@dataclass
class RecordStats:
    ticks: int = 0
    missed: int = 0
    samples: int = 0
    walks: int = 0
    stops: list = field(default_factory=list)  # seconds each thread was stopped
    elapsed: float = 0.0
    ended: str = ""

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
        # the walk names frames (to stop at main): from files on this
        # machine only, never a download between two samples
        self._debug_files = DebugFiles(download=False)
        self._new_walker()

    def _new_walker(self):
        process = self.process
        sources = getattr(self, "walker", None) and self.walker.sources
        self.walker = Walker(process.arch, process.modules(), process.read,
                             process.executable, sources=sources,
                             debug_files=self._debug_files)
        self._image_map = self.archive.add_image_map(
            encode_image_map(image_map(process.arch, self.walker.modules)))
        self._maps_read = time.monotonic()

    def _refresh_mappings(self):
        if self.process.reread_mappings():
            self._new_walker()
        self._maps_read = time.monotonic()

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
        for tid, name in threads:
            previous = known.get(tid)
            if previous is not None and previous[2] is not None \
                    and self.process.idle_mark(tid) == previous[2]:
                data = previous[1]
            else:
                state = self.process.snapshot(tid, name)
                if state is None:
                    continue
                self.stats.stops.append(state.extra["stopped"])
                key = (state.registers, state.stack)
                if previous is not None and previous[0] == key:
                    data = previous[1]
                else:
                    frames, stop = self.walker.walk(state)
                    data = cbf.encode(cbf_frames(frames), word_size,
                                      stop == "frame limit reached")
                    self.stats.walks += 1
                known[tid] = [key, data, None]
                stopped.append(tid)
            self._record(data, now, tid, name)
        # once they blocked again, what says the stopped threads have not
        # run since (read now, after the walks, not right after the stop)
        for tid in stopped:
            known[tid][2] = self.process.idle_mark(tid)

    def _record(self, data, now, tid, name):
        arch = self.process.arch
        trace_id = self.archive.add_trace(data)
        self.archive.add_event(Event(trace_id, self._image_map, now, arch.name,
                                     f"{tid} ({name})" if name else str(tid),
                                     "sample", self.label))
        self.stats.samples += 1

    def run(self, duration=None, should_stop=lambda: False):
        """Sample at self.hz until ``duration`` seconds passed, the process
        exited or ``should_stop()``; a tick that comes late is skipped."""
        interval = 1.0 / self.hz
        start = time.monotonic()
        tick = 0
        try:
            while not should_stop():
                now = time.monotonic()
                if duration is not None and now - start >= duration:
                    break
                due = start + tick * interval
                if now < due:
                    time.sleep(due - now)
                    continue
                missed = int((now - due) / interval)
                self.stats.missed += missed
                tick += missed + 1
                try:
                    self.sample()
                except ProcessError:
                    self.stats.ended = "the process exited"
                    break
                self.stats.ticks += 1
        except KeyboardInterrupt:
            self.stats.ended = "interrupted"
        self.stats.elapsed = time.monotonic() - start

    def close(self):
        self.process.close()

    def save(self, path):
        save_archive(path, self.archive)


def summary(recorder, path):
    stats = recorder.stats
    stops = sorted(stats.stops) or [0.0]
    median = stops[len(stops) // 2]
    distinct = len(recorder.archive.traces)
    ended = f" ({stats.ended})" if stats.ended else ""
    return (f"Recorded {stats.samples} stacks in {stats.ticks} samples over "
            f"{stats.elapsed:.1f} s ({stats.rate:.1f} Hz of {recorder.hz:g}){ended}: "
            f"{distinct} distinct, saved to {path}.\n"
            f"Each thread was stopped for {median * 1e3:.3f} ms per sample "
            f"(median; at most {stops[-1] * 1e3:.3f} ms).")
