"""`sfbt record`: sample every thread's stack at a fixed rate into one
archive, each distinct stack stored once with a count (one event per
sample).

The threads stay seized for the whole recording (process.SeizedProcess);
each sample stops a thread only to read its registers and copy its stack,
and the walks run on the copies between samples, while the threads run
on.  A thread that has not run since its previous sample (blocked in
a system call: its run time and run count in /proc/.../schedstat have not
moved) is not stopped again: its previous stack is counted again.  A
thread whose registers and stack are byte for byte those of its previous
sample is not walked again.

The archive is written as it grows (archive.stream), into a temporary file
renamed over the output (locked as appends lock it: an append or a replace
meanwhile is refused, see files.record_into) when the recording ends: by the process exiting,
--duration, Ctrl-C, SIGTERM or SIGHUP (each ends the recording, not sfbt),
or a write that fails (a full disk: the samples written before it are
kept)."""

import os
import random
import select
import signal
import time
from collections import deque
from dataclasses import dataclass, field

from ..archive.imagemap import encode_image_map
from ..archive.store import Archive
from ..archive.stream import ArchiveStream
from ..debuginfo import DebugFiles
from ..files import record_into
from ..commands.save import image_map
from . import ptrace
from .process import ProcessError, ProcessExited, SeizedProcess
from .samples import FLUSH_INTERVAL, SampleWriter, sampling_rounds
from .session import SnapshotSession

#: how often the mappings are read again (new libraries, new thread stacks)
MAPS_INTERVAL = 1.0
#: how often the samples taken are written out (and the longest sleep)
#: the rates `--hz` takes
MIN_HZ, MAX_HZ = 1e-6, 10000.0
#: how long a sample waits for the threads to stop, in periods (those
#: that take longer are collected when they stop)
STOP_SAMPLE = 0.25
#: how long the first and the last sample wait for every thread to stop
STOP_WAIT = 1.0
#: the walks between two samples end this long before the next is due
WALK_MARGIN = 0.0005
#: samples left to walk at most (seconds' worth, and bytes of stack
#: copies) before the walks run on the sampling path
MAX_BACKLOG = 1.0
MAX_BACKLOG_BYTES = 64 << 20
#: a rate below this part of the asked rate is said on stderr
#: (Shortfall), measured over windows of SHORTFALL_WINDOW seconds
SHORTFALL = 0.95
SHORTFALL_WINDOW = 1.0


class EndingSignals:
    """While entered, SIGINT, SIGTERM and SIGHUP end the recording rather
    than the program: the first notes its name in ``caught``, each counts
    in ``received`` and wakes ``sleep``; the loop then stops between two
    samples, never inside one.
    SIGCHLD (a seized thread stopped) wakes ``sleep`` too, and sets
    ``child_stopped``."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.caught = None
        self.received = 0
        #: set by each SIGCHLD: a seized thread stopped (cleared by its reader)
        self.child_stopped = False
        self._wake = None
        self._kept = {}
        self._kept_wakeup = None

    def __enter__(self):
        self._wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._kept_wakeup = signal.set_wakeup_fd(self._wake[1], warn_on_full_buffer=False)
        for number in self.SIGNALS:
            self._kept[number] = signal.signal(number, self._caught)
        self._kept[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._woken)
        return self

    def __exit__(self, *exception):
        for number, handler in self._kept.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(self._kept_wakeup)
        for descriptor in self._wake:
            os.close(descriptor)

    def _caught(self, number, frame):
        self.received += 1
        if self.caught is None:
            self.caught = signal.Signals(number).name

    def _woken(self, number, frame):
        """Notes the stop; ``sleep`` is woken through the wakeup descriptor."""
        self.child_stopped = True

    def sleep(self, seconds):
        """Sleep, until a signal at the latest."""
        if select.select([self._wake[0]], [], [], seconds)[0]:
            try:
                os.read(self._wake[0], 512)
            except BlockingIOError:
                pass


class StopTimes:
    """How long each copied thread was stopped: the longest, and for the
    median a uniform sample of at most KEPT of them (a reservoir), so a
    long recording keeps no list of every stop."""

    KEPT = 10_000

    def __init__(self):
        self.count = 0
        self.longest = 0.0
        self.kept = []
        self._random = random.Random(0)

    def add(self, seconds):
        self.count += 1
        self.longest = max(self.longest, seconds)
        if len(self.kept) < self.KEPT:
            self.kept.append(seconds)
        else:
            at = self._random.randrange(self.count)
            if at < self.KEPT:
                self.kept[at] = seconds

    def median(self):
        return sorted(self.kept)[len(self.kept) // 2] if self.kept else 0.0


@dataclass
class RecordStats:
    ticks: int = 0
    missed: int = 0
    samples: int = 0
    walks: int = 0
    stops: StopTimes = field(default_factory=StopTimes)  # seconds each thread was stopped
    elapsed: float = 0.0
    ended: str = ""
    kept: int = 0  # samples written to the file
    #: the ProcessError that ended the recording (None: time was up, or a signal)
    error: object = None

    @property
    def rate(self):
        return self.ticks / self.elapsed if self.elapsed else 0.0


@dataclass
class Forget:
    """Where thread ``tid`` was seen gone, in the pending samples: its
    walk state is dropped once the samples before it are walked."""

    tid: int
    awaited = False


@dataclass
class Pending:
    """A thread's sample not walked yet: its copy (``state``), or None
    where the thread has not run since its previous sample (counted
    again); ``awaited`` while the thread is yet to stop, ``dropped`` where
    it exited (or did not stop) before it was copied."""

    tid: int
    name: str
    time: int
    session: SnapshotSession
    image_map: int
    awaited: bool = False
    dropped: bool = False
    state: object = None


class Shortfall:
    """Says on stderr, once per reason, when the rate kept over the last
    second falls short of the asked rate (below SHORTFALL of it), and why:
    copying the threads takes longer than a sample's interval, walking
    them falls behind, or sfbt is not given the processor in time."""

    def __init__(self, hz, say):
        self.hz = hz
        self.say = say
        self.said = set()
        self.reset(time.monotonic())

    def reset(self, now):
        """Begin a window at ``now`` (time.monotonic)."""
        self.since = now
        self.ticks = 0
        self.copying = 0.0  # seconds spent stopping and copying threads
        self.walking = 0.0  # seconds of walks forced onto the sampling path

    def check(self, now, threads, backlog):
        elapsed = now - self.since
        if elapsed < SHORTFALL_WINDOW:
            return
        rate = self.ticks / elapsed
        if rate < SHORTFALL * self.hz:
            interval = 1e3 / self.hz
            copy = self.copying * 1e3 / max(self.ticks, 1)
            if copy > interval / 2:
                reason = "copying", (f"stopping and copying {threads} threads takes "
                                     f"{copy:.1f} ms a sample, of the {interval:.1f} ms "
                                     "between two")
            elif self.walking:
                reason = "walking", (f"walking the stacks falls behind ({backlog} "
                                     "samples wait): the processor time left between "
                                     "samples is not enough")
            else:
                reason = "late", ("sfbt is not given the processor in time "
                                  f"(load average {os.getloadavg()[0]:.1f} on "
                                  f"{os.cpu_count()} CPUs)")
            if reason[0] not in self.said:
                self.said.add(reason[0])
                self.say(f"sfbt record: {rate:.1f} Hz of {self.hz:g}: {reason[1]}")
        self.reset(now)


class Recorder:
    #: how it samples, as `sfbt record` says it
    how = "on the wall clock (ptrace)"

    def __init__(self, pid, hz=99.0, label="", say=lambda line: None):
        self.process = SeizedProcess(pid)
        self.hz = hz
        if not label:
            name = dict(self.process.threads()).get(pid, "")
            label = f"sfbt record of process {pid}{f' ({name})' if name else ''} at {hz:g} Hz"
        self.label = label
        self.archive = Archive()
        self.stats = RecordStats()
        self.shortfall = Shortfall(hz, say)
        #: samples taken, walked when the sampling leaves time (in order)
        self._pending = deque()
        self._pending_bytes = 0
        #: tid -> ((registers, stack), trace id, image map) of its latest walk
        self._walked = {}
        self.writer = SampleWriter(self.archive, self.process.arch, label)
        self._marks = {}  # tid -> its idle mark (SeizedProcess.idle_mark) after its last stop
        self._awaited = {}  # tid -> its Pending sample while it is yet to stop
        #: the threads that did not stop in ptrace.STOP_TIMEOUT (in vfork):
        #: not sampled until they stop
        self._stuck = set()
        self._say = say
        #: the latest listing of the threads, and its tids: a thread that
        #: leaves it is forgotten (``_forget``)
        self._listed = []
        self._listed_tids = set()
        #: the EndingSignals of the recording (set by run): its sleep is
        #: woken by a thread that stops
        self._signals = None
        self._copied = []  # ThreadStates copied since the idle marks were read
        # the walk names frames (to stop at main): from files on this
        # machine only, never a download between two samples
        self._debug_files = DebugFiles(download=False)
        self._new_session()

    def _new_session(self):
        """The session the samples are walked in, for the mappings as now
        read (the SFrame data already read kept)."""
        process = self.process
        sources = getattr(self, "session", None) and self.session.sources
        self.session = SnapshotSession(process.arch, process.modules(), process.read,
                                       executable=process.executable, sources=sources,
                                       mappings=process.mappings,
                                       debug_files=self._debug_files)
        self._image_map = self.archive.add_image_map(
            encode_image_map(image_map(self.session)))
        self._maps_read = time.monotonic()
        self._maps_read_ns = time.time_ns()

    def _refresh_mappings(self, keep_gone=False):
        self.process.reread_mappings(keep_gone)
        self._follow_mappings()
        self._maps_read = time.monotonic()
        self._maps_read_ns = time.time_ns()

    def _follow_mappings(self):
        """A new session where the process's mappings were read anew since
        this one was made: by _refresh_mappings, or by a thread's copy
        while it was stopped (Process._hold_code_of)."""
        if self.session.mappings is not self.process.mappings:
            self._new_session()

    def _walk(self, pending):
        """The walk of a copied thread; where one of its frames is in no
        known module (a library loaded after the mappings were read and
        before the copy: the walk may have gone on past it, by the return
        address at SP or the frame pointers, leaving a frame without a
        name), again in the session of the mappings read anew, if they
        were read before the copy (a later reading would have held it)
        and changed since the sample's session."""
        session = pending.session
        frames, stop = self.writer.walk(session, pending.state)
        module_for = session.module_map().module_for
        if any(module_for(frame.lookup_pc) is None for frame in frames):
            if self._maps_read_ns <= pending.time:
                self._refresh_mappings(keep_gone=True)
            else:
                self._follow_mappings()
            if self.session is not session:
                pending.image_map = self._image_map
                frames, stop = self.writer.walk(self.session, pending.state)
        return frames, stop

    def sample(self):
        """Copy every thread that ran since its previous sample (each
        stopped only for its own copy), waiting for the stops STOP_SAMPLE
        of a period at most; the copies wait in ``_pending`` for
        ``walk_pending``, those of the threads that take longer to stop
        (waiting for a processor) come in with ``collect``.  The threads
        that stopped by themselves since were let run on before (SIGCHLD
        said so: _take_stops)."""
        threads = self.process.threads(fresh_names=False)
        if threads is not self._listed:
            self._forget(threads)
        if (any(tid not in self._marks for tid, _ in threads)
                or time.monotonic() - self._maps_read > MAPS_INTERVAL):
            self._refresh_mappings()
        now = time.time_ns()
        began = time.perf_counter()
        # a thread not known idle (no mark, or False: it was running) is
        # copied without reading its counters again
        copying = [(tid, name) for tid, name in threads
                   if not self.process.stopping(tid)
                   and (not self._marks.get(tid)
                        or self.process.run_counters(tid) != self._marks[tid])]
        self.process.interrupt(copying)
        for tid, name in threads:
            if tid in self._stuck:
                continue
            if self.process.stopping(tid):
                # one copy for each tick until it stops: a thread yet to
                # stop has had no processor since it was interrupted
                pending = Pending(tid, name, now, self.session, self._image_map,
                                  awaited=True)
                awaited = self._awaited.setdefault(tid, [])
                awaited.append(pending)
                self._pending.append(pending)
                if now - awaited[0].time > ptrace.STOP_TIMEOUT * 1e9:
                    self._give_up(tid)
            elif tid in self._marks:
                self._pending.append(Pending(tid, name, now, self.session, self._image_map))
        gone = self.collect(began + STOP_SAMPLE / self.hz)
        self.shortfall.copying += time.perf_counter() - began
        if len(gone) == len(threads):
            raise ProcessExited(f"process {self.process.pid} exited")

    def _give_up(self, tid):
        """Drop the samples of thread ``tid``, yet to stop after
        ptrace.STOP_TIMEOUT (in vfork: it stops only once its child execs or
        exits), and take none of it until it stops: the walks that wait
        for the oldest pending sample go on, and the recording ends in
        time (said in one line)."""
        for pending in self._awaited.pop(tid):
            pending.awaited, pending.dropped = False, True
        self._stuck.add(tid)
        self._say(f"sfbt record: {ptrace.DidNotStop(tid, ptrace.STOP_TIMEOUT)}: "
                  "not sampled until it stops")

    def _forget(self, threads):
        """Take ``threads`` as the latest listing: what was kept of each
        thread no longer in it is dropped (its walk state once its
        pending samples are walked, see Forget)."""
        tids = {tid for tid, _ in threads}
        for tid in self._listed_tids - tids:
            self._marks.pop(tid, None)
            self._stuck.discard(tid)
            self._pending.append(Forget(tid))
        self._listed, self._listed_tids = threads, tids

    def collect(self, until=0.0):
        """Take in the copies of the threads that stopped since they were
        interrupted (waited for until ``until``, time.perf_counter); the
        tids gone."""
        states, gone = self.process.collect(until, self._signals.sleep)
        for tid, state in states.items():
            self._stuck.discard(tid)  # stopped at last: sampled again
            for pending in self._awaited.pop(tid, ()):
                pending.state, pending.awaited = state, False
                self._pending_bytes += len(state.stack)
            self.stats.stops.add(state.extra["stopped"])
            self._copied.append(state)
        for tid in gone:
            for pending in self._awaited.pop(tid, ()):
                pending.awaited, pending.dropped = False, True
            self._marks.pop(tid, None)
        return gone

    def _take_stops(self):
        """What SIGCHLD said: the threads that stopped since are collected
        (those interrupted) or let run on (those that stopped by
        themselves, see SeizedProcess.reap)."""
        self._signals.child_stopped = False
        self.collect()
        self.process.reap()

    def mark_idle(self):
        """Note what says each thread copied since is still where its
        latest copy found it (SeizedProcess.idle_mark): read once it ran on
        and blocked again (after the walks that fit), not right after the
        stop.  False (not known idle) where it may have moved on."""
        latest = {state.tid: state for state in self._copied}
        for tid, state in latest.items():
            if tid not in self._awaited:
                self._marks[tid] = self.process.idle_mark(tid, state) or False
        self._copied = []

    def walk_pending(self, until=None):
        """Walk the pending samples, in order, until ``until``
        (time.monotonic) or all are walked."""
        pending = self._pending
        while pending and (until is None or time.monotonic() < until):
            if self._signals.child_stopped:  # a thread that stopped waits no longer
                self._take_stops()
            if pending[0].awaited:
                break
            sample = pending.popleft()
            if isinstance(sample, Forget):
                self._walked.pop(sample.tid, None)
                self.writer.forget(sample.tid)
                continue
            if sample.dropped or (sample.state is None and sample.tid not in self._walked):
                continue  # it exited before it was copied
            if sample.state is None:
                _, trace_id, sample.image_map = self._walked[sample.tid]
            else:
                self._pending_bytes -= len(sample.state.stack)
                key = (sample.state.registers, sample.state.stack)
                previous = self._walked.get(sample.tid)
                if previous is not None and previous[0] == key:
                    # named by the modules it was walked with (its walk may
                    # have read the mappings again: _walk)
                    _, trace_id, sample.image_map = previous
                else:
                    trace_id = self.writer.trace_id(*self._walk(sample))
                    self.stats.walks += 1
                self._walked[sample.tid] = (key, trace_id, sample.image_map)
            self._record(trace_id, sample)

    def _behind(self):
        """Whether the pending samples are more than MAX_BACKLOG seconds'
        worth or MAX_BACKLOG_BYTES of stack copies."""
        return (len(self._pending) > MAX_BACKLOG * self.hz * max(len(self._marks), 1)
                or self._pending_bytes > MAX_BACKLOG_BYTES)

    def _record(self, trace_id, sample):
        # never cut: a walk reads past its copy from the process's memory
        self.writer.record(trace_id, sample.image_map, sample.time, self.process.pid,
                           sample.tid, sample.name)
        self.stats.samples += 1

    def run(self, duration, signals, flush, on_first_sample=None):
        """Sample at self.hz until ``duration`` seconds (None: no limit)
        passed, the process exited or could no longer be read
        (``stats.error`` says why), ``signals`` (EndingSignals) caught one,
        or ``flush()`` (called every FLUSH_INTERVAL) says the samples can no
        longer be written; a tick that comes late is skipped.  The first
        sample is walked at once (what a walk reads first is slow), then
        the rate is kept from there; the walks run between samples, and
        where they fall behind, on the sampling path; what is left is
        walked when the recording ends.  ``on_first_sample()`` is called
        once the first sample was taken."""
        interval = 1.0 / self.hz
        self._signals = signals
        if self._sample():
            self.collect(time.perf_counter() + STOP_WAIT)
            self.walk_pending()
            if on_first_sample is not None:
                on_first_sample()
        start = time.monotonic()
        self.shortfall.reset(start)  # the rate is kept from here (a first stop may wait)
        tick = 1
        for now in sampling_rounds(start, duration, signals, flush):
            if self.stats.error is not None:
                break
            due = start + tick * interval
            if now < due:
                # the time left before the next sample: walks (and the
                # threads that stopped late), then the marks of the
                # threads copied, then sleep (a stop wakes it: SIGCHLD)
                self.walk_pending(until=due - WALK_MARGIN)
                self.mark_idle()
                if signals.child_stopped:
                    self._take_stops()
                now = time.monotonic()
                if now < due:
                    signals.sleep(min(due - now, FLUSH_INTERVAL))
                continue
            missed = int((now - due) / interval)
            self.stats.missed += missed
            tick += missed + 1
            if signals.child_stopped:
                self._take_stops()
            self.mark_idle()
            if not self._sample():
                break
            if self._behind():
                began = time.perf_counter()
                self.walk_pending(until=time.monotonic() + interval)
                self.shortfall.walking += time.perf_counter() - began
            self.shortfall.check(time.monotonic(), len(self._marks), len(self._pending))
        if signals.caught is not None:
            self.stats.ended = ("interrupted" if signals.caught == "SIGINT"
                                else f"ended by {signals.caught}")
        self.stats.elapsed = time.monotonic() - start
        self.collect(time.perf_counter() + STOP_WAIT)
        for late in self._awaited.values():  # not stopped in time: dropped
            for pending in late:
                pending.awaited, pending.dropped = False, True
        self._awaited.clear()
        self.process.release()  # the threads run free while the rest is walked
        self.walk_pending()

    def _sample(self):
        """One tick's sample; False (``stats.error`` says why) once the
        process exited or can no longer be read."""
        try:
            self.sample()
        except ProcessError as error:
            self.stats.error = error
            self.stats.ended = ("the process exited" if isinstance(error, ProcessExited)
                                else str(error))
            return False
        self.stats.ticks += 1
        self.shortfall.ticks += 1
        return True

    def close(self):
        self.process.close()

    def record(self, path, duration=None, started=lambda: None):
        return record_archive(self, path, duration, started)

    def summary(self, path):
        """What the recording took, said once it ended."""
        stats = self.stats
        distinct = len(self.archive.traces)
        ended = f" ({stats.ended})" if stats.ended else ""
        saved = (f"saved to {path}" if stats.kept == stats.samples
                 else f"the first {stats.kept} saved to {path}")
        return (f"Recorded {stats.samples} stacks in {stats.ticks} samples over "
                f"{stats.elapsed:.1f} s ({stats.rate:.1f} Hz of {self.hz:g}){ended}: "
                f"{distinct} distinct, {saved}.\n"
                f"Each thread was stopped for {stats.stops.median() * 1e3:.3f} ms per sample "
                f"(median; at most {stats.stops.longest * 1e3:.3f} ms).")

    def no_stack(self):
        """The error of a recording that took no sample."""
        return self.stats.error or ProcessError(
            f"process {self.process.pid}: no stack recorded "
            f"({self.stats.ended or 'no sample'})")


def record_archive(recorder, path, duration=None, started=lambda: None):
    """Record with ``recorder`` (a stack source: Recorder, or
    perf_source.PerfRecorder) into the archive file at path (replaced when
    the recording ends, see files.record_into); ``started()`` is called
    once it samples.  Returns the OSError that stopped the writing early
    (the samples before it are in the file), or None.  Where no sample was
    taken, no file is written: ``recorder.no_stack()`` is raised."""
    def write(stream):
        out = ArchiveStream(recorder.archive, stream.fileno())
        recorder.run(duration, signals, out.flush, started)
        if not recorder.stats.samples:
            raise recorder.no_stack()
        out.flush()
        recorder.stats.kept = out.events
        failure[0] = out.failure
    failure = [None]
    # held until the file is in place: a signal while it is written
    # out does not lose it
    with EndingSignals() as signals:
        record_into(path, write)
    return failure[0]
