"""`sfbt record` on perf events: the kernel samples the threads on the
processor (a cpu-clock timer of CPU time, so only running threads) and
copies their user registers and the top of their stack into a ring while
they run on; sfbt walks each copy with the one frame step (samples.py).
No thread is ever stopped.

The rings are read every POLL_INTERVAL (cheap: their records parsed and
merged in time order); the records are then taken (walked, encoded,
written) for as long as the machine's processors were idle since the last
round (/proc/stat), as `perf record` leaves its unwinding to `perf report`
later: with a processor to spare, every record is taken as it is read;
with none, they are kept in order, samples and the records between them
(a process's mappings as they were at the sample's time, its exit after
its samples), in a backlog of at most ``backlog`` bytes (--backlog; past
it the oldest are taken at once), taken once a processor is free or when
the recording ends.  What the taking would read of /proc is read with the
record instead (the process may be gone by the time it is taken): a
process met first in a sample (Found), a thread's name (a COMM record made
for it), a child's mappings where the rings had not told of its parent
(Inherited), and the files a kept record maps are held open
(ring_processes.ModuleFiles.hold).

One event per CPU: of each thread of a process (``-p``; ``inherit`` follows
the threads and children it makes later, their records sent into one ring
per CPU), of a command started for it (``--``), or of every process
(``-a``).  Each process's mappings are kept from the rings' MMAP2 records
(ring_processes.py), as perf keeps them: one that ran before the recording
starts with those /proc/PID/smaps gives once (perf's synthesized mmap
events), one started while recording with its parent's or none.  COMM records say what threads are called.  Where
the kernel allows it, a sample taken in the kernel holds the kernel's
frames too, written atop the user stack (symbols.kallsyms).

Memory that is not in a sample's stack copy is read only where it cannot
have changed since: from the process's read-only mappings (its files,
the vDSO).  A walk that needed the stack above the copy (``--stack-size``
was too small for it) is stored as truncated, not as a complete stack."""

import errno
import gc
import heapq
import math
import os
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from itertools import islice

from ..archive.imagemap import Image, ImageMap, encode_image_map
from ..archive.recording import cpu_sample
from ..archive.store import Archive
from ..commands.save import image_map
from ..debuginfo import DebugFiles
from ..errors import TargetMemoryError
from ..symbols.kallsyms import KERNEL_IMAGE, kernel_text_start, running_kernel_build_id
from ..unwind.modules import SFrameSources
from ..unwind.walk import STOP_OUTERMOST
from . import perf_events
from .mappings import mappings_of, read_maps
from .memory import COPY_ALIGN, ThreadState
from .perf_events import Comm, Exit, Fork, Lost, Mmap2, PerfUnavailable, Sample
from .process import Process, ProcessError, ProcessExited, _read_text
from .ring_processes import ModuleFiles, RingProcess
from .record import record_archive
from .samples import FLUSH_INTERVAL, SampleWriter, sampling_rounds
from .session import SnapshotSession

#: how often the rings are read (and the longest sleep)
POLL_INTERVAL = 0.05
#: data pages of each CPU's ring (a power of two; fewer where refused)
RING_PAGES = 1024
#: the user stack copied per sample by default
STACK_SIZE = perf_events.MAX_STACK_COPY
#: rounds of listing a process's threads while events are opened for them
#: (a thread made meanwhile by one not yet followed)
LIST_ROUNDS = 10
#: the records kept for later at most by default (--backlog), in bytes
BACKLOG = 256 << 20
#: threads whose names are kept past their exit at most (the kernel
#: samples a thread on its way out after its EXIT record)
MAX_EXITED = 4096
#: what a kept record counts in the backlog beside a sample's stack bytes:
#: its header, registers and the Python object that holds them
RECORD_BYTES = 256


def online_cpus():
    """The numbers of the processors online."""
    text = _read_text("/sys/devices/system/cpu/online").strip()
    cpus = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus or list(range(os.cpu_count() or 1))


def _cpu_seconds(pid):
    """Seconds on a processor of process ``pid`` so far (its threads gone
    too), or None."""
    stat = _read_text(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return None


def machine_seconds():
    """(busy, idle) seconds of every processor so far, from /proc/stat's
    first line (idle: idle and iowait), or None."""
    try:
        with open("/proc/stat", "rb") as stream:
            line = stream.read(512).split(b"\n", 1)[0]
        values = [int(v) for v in line.split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(values) < 5:
        return None
    idle = values[3] + values[4]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - idle) / tick, idle / tick


def _note_exit(exits, tid, forget):
    """Note in ``exits`` (a deque) that thread ``tid`` exited; the one that
    exited MAX_EXITED exits before is forgotten (``forget(its tid)``)."""
    exits.append(tid)
    if len(exits) > MAX_EXITED:
        forget(exits.popleft())


def kernel_image():
    """The image of the running kernel's text, where its addresses can be
    read (its kernel frames are then recorded, in it), else None."""
    start = kernel_text_start()
    if start is None:
        return None
    build_id = running_kernel_build_id()
    # to the top of the address space: every kernel address from _stext
    return Image(KERNEL_IMAGE, start, (1 << 64) - 1, bytes.fromhex(build_id or ""))


def walking_session(arch, modules, read, mappings, archive, debug_files, sources,
                    kernel_image, executable=None):
    """(session, its image map's index in ``archive``) that a process's
    samples are walked in; the image map ends with ``kernel_image``
    where there is one (its base is the highest)."""
    session = SnapshotSession(arch, modules, read, executable=executable, sources=sources,
                              mappings=mappings, debug_files=debug_files, past_main=True)
    images = image_map(session)
    if kernel_image is not None:
        images = ImageMap(images.platform, images.images + (kernel_image,), images.word_size)
    return session, archive.add_image_map(encode_image_map(images))


class SampledProcess(RingProcess):
    """A process that ran before the recording: its mappings read from
    /proc/PID/smaps once (``start``, after its events are enabled: what
    it maps from then on is in the rings), then kept as the rings' MMAP2
    records say, as a process started while recording is (RingProcess);
    its files found and its memory read as `sfbt stack` reads them
    (Process: a file replaced since it was mapped read through
    /proc/PID/map_files) while it runs, from the files once it is gone
    (its kept samples walked after its exit); its vDSO is sfbt's own, as
    a RingProcess's (read from the process, it would be lost with it).  Its threads' names are
    those the rings gave, or /proc gave when their first sample was read
    (a COMM record made for them)."""

    def __init__(self, pid, files, read_mappings=True):
        """Without ``read_mappings``, its mappings are read by ``start``."""
        self.process = Process(pid, mappings=read_mappings)
        super().__init__(pid, self.process.arch, files)
        self.executable = self.process.executable

    def start(self):
        try:
            self.process.read_mappings()
        except ProcessError:
            return  # it exited: the recording ends with it
        self.session = None

    @property
    def mappings(self):
        return self.process.mappings

    def _set_mappings(self, mappings):
        self.process.set_mappings(mappings)

    def _locate(self, mapping):
        return self.files.locate(mapping, self.process.images.locate)

    @property
    def _memory(self):
        return self.process

    def _read_mapped(self, mapping, address, size):
        try:
            return self.process.read(address, size)
        except TargetMemoryError:  # gone: its files' bytes
            return super()._read_mapped(mapping, address, size)

    def close(self):
        self.process.close()


def walk_sample(writer, sampled, sample):
    """(frames, stop, cut) of perf_events.Sample ``sample`` walked with
    ``writer`` (SampleWriter) in ``sampled``'s session over its stack copy;
    ``cut``: the walk needed the stack above the copy and the copy ended
    short of the stack's end.  ``sampled`` (a RingProcess, or a process
    of a perf.data file) has ``session``, ``copy_end`` and ``past_copy``
    (set by its reads above the copy)."""
    sp = sample.registers.get(sampled.session.arch.sp, 0)
    start = sp & -COPY_ALIGN  # the walk reads whole pages: the one of SP from the copy
    state = ThreadState(sample.tid, "", sample.registers, start,
                        bytes(sp - start) + sample.stack)  # one copy (the stack is a view)
    frames, stop, cut = _walk_copy(writer, sampled, state)
    return frames, stop, cut and sample.full


def _walk_copy(writer, sampled, state):
    """(frames, stop, whether the walk asked for the stack above the copy
    and did not end at the outermost frame: a read above it that the
    walk went on from, as at _start, cut nothing)."""
    sampled.copy_end = state.stack_start + len(state.stack)
    sampled.past_copy = False
    frames, stop = writer.walk(sampled.session, state)
    return frames, stop, stop not in (None, STOP_OUTERMOST) and sampled.past_copy


@dataclass
class Found:
    """A process that ran before the recording, met first in a sample: read
    from /proc when that sample was read (None where it could not be)."""

    pid: int
    sampled: object


@dataclass
class Inherited:
    """The mappings of process ``pid``, made by a process the rings had not
    told of: its parent's, read from /proc when the child's first sample
    or mapping was read."""

    pid: int
    mappings: list


@dataclass
class _Told:
    """What the records read so far made of a process (mirrored when they
    are taken): whether it is a SampledProcess (its threads' names then
    read from /proc at reading where no record gave them), the threads
    named, and the parent whose mappings it awaits (see Inherited)."""

    sampled: bool
    named: set = field(default_factory=set)
    parent: object = None


class PerfStats:
    def __init__(self):
        self.samples = 0  # walked and recorded
        self.taken = 0  # the kernel's samples read, of the processes recorded
        self.cut = 0  # stacks longer than the copy
        self.lost = 0  # samples the kernel dropped (a full ring)
        self.unreadable = 0  # of processes that could not be read (gone, kernel threads)
        self.elapsed = 0.0
        self.cpu_seconds = None  # of what was sampled, while recorded
        self.ended = ""
        self.kept = 0  # samples written to the file
        self.error = None
        self.deferred = 0  # samples kept for a free processor (the backlog)
        self.walked_after = 0  # samples taken after the recording (its final walk)
        self.after_cpu = 0.0  # sfbt's processor seconds in that final walk
        self.unwalked = 0  # samples the final walk was stopped before (a second signal)

    @property
    def rate(self):
        """Samples per second of processor time of what was sampled."""
        return self.taken / self.cpu_seconds if self.cpu_seconds else 0.0


class PerfRecorder:
    """Samples process ``pid`` (None: every process; with ``command``, the
    process of that subprocess.Popen, started stopped at a gate:
    ``command_gate`` is the descriptor whose closing lets it run) on perf
    events at ``hz`` per second of each thread's processor time, keeping
    at most ``backlog`` bytes of records for a free processor (see the
    module's docstring); ``say(line)`` says what the recording does on
    stderr.  PerfUnavailable where the kernel refuses the events."""

    #: how it samples, as `sfbt record` says it
    how = "on CPU (perf events)"

    def __init__(self, pid=None, hz=99.0, stack_size=STACK_SIZE, label="",
                 command=None, command_gate=None, backlog=BACKLOG, say=None):
        self.pid = pid
        self.hz = hz
        self.command = command
        self._gate = command_gate
        self.every_process = pid is None
        self.backlog = backlog
        self._say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self._fds = []
        self.rings = []
        self._processes = {}  # pid -> SampledProcess, or None where it cannot be read
        #: the records read and not taken yet, in order; their bytes (as
        #: the backlog counts them) and samples
        self._kept = deque()
        self._kept_bytes = 0
        self._kept_samples = 0
        #: pid -> _Told (None: it cannot be read) by the records read so far
        self._told = {}
        #: the kernel threads (and threads exited) named by the records read
        #: so far, and the threads exited, the latest MAX_EXITED
        self._kernel_named = set()
        self._exits_read = deque()
        #: the machine's idle seconds at the last round
        self._idle = None
        #: the taking of each kind of record but samples (``_take``)
        self._takers = {Mmap2: self._mapped, Comm: self._named, Fork: self._forked,
                        Exit: self._exited, Found: self._found, Inherited: self._inherited}
        self._debug_files = DebugFiles(download=False)
        #: the SFrame data of every process's files, kept per file read: a
        #: library that many processes map is read once
        self._sources = SFrameSources()
        #: the mapped files of the processes the rings tell of
        self._files = ModuleFiles()
        self.archive = Archive()
        self.stats = PerfStats()
        self._kernel_image = kernel_image()
        #: the layout of the rings' samples (whether they hold kernel frames)
        self.sample_type = None
        #: the image map of kernel threads' samples (the kernel alone), and
        #: their names by tid (and those of the latest MAX_EXITED threads
        #: exited, by ``_exits``)
        self._kernel_map = None
        self._kernel_threads = {}
        self._exits = deque()
        if pid is not None:  # what cannot be read of it said now, in one line
            # its mappings read once its events are enabled (run)
            first = self._processes[pid] = SampledProcess(pid, self._files, False)
            arch = first.arch
            name = first.names[pid] = _read_text(f"/proc/{pid}/comm").strip()
            self._told[pid] = _Told(True, {pid})
        else:
            from ..arch import AARCH64, X86_64
            arch, name = (AARCH64 if perf_events.MACHINE == "aarch64" else X86_64), ""
        if not label:
            what = ("every process" if pid is None else
                    f"process {pid}{f' ({name})' if name else ''}")
            label = f"sfbt record of {what} at {hz:g} Hz on CPU"
        self.label = label
        self.writer = SampleWriter(self.archive, arch, label, cpu_sample(hz))
        self._wall = time.time_ns() - time.monotonic_ns()
        try:
            self._open(stack_size)
        except BaseException:
            self.close()
            raise

    def _open(self, stack_size):
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:  # one descriptor per thread and CPU, the files held
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        cpus = online_cpus()
        if self.every_process:
            for cpu in cpus:
                self._add(self._open_event(-1, cpu, stack_size, False), cpu)
            return
        followed = set()
        for _ in range(LIST_ROUNDS):
            try:
                tids = {int(t) for t in os.listdir(f"/proc/{self.pid}/task")} - followed
            except OSError:
                raise ProcessExited(f"process {self.pid} exited") from None
            if not tids:
                break
            for tid in sorted(tids):
                for cpu in cpus:
                    try:
                        fd = self._open_event(tid, cpu, stack_size, True)
                    except PerfUnavailable as error:
                        if error.errno == errno.ESRCH:  # it exited
                            break
                        raise
                    self._add(fd, cpu)
                followed.add(tid)

    def _open_event(self, pid, cpu, stack_size, inherit):
        """An event's descriptor, its samples laid out as the others' (with
        the kernel's frames where the first could have them)."""
        wanted = self._kernel_image is not None if self.sample_type is None else \
            bool(self.sample_type & perf_events.SAMPLE_CALLCHAIN)
        fd, sample_type = perf_events.open_sampling_event(pid, cpu, self.hz, stack_size,
                                                          inherit, True, wanted)
        if self.sample_type is None:
            self.sample_type = sample_type
            if not sample_type & perf_events.SAMPLE_CALLCHAIN:
                self._kernel_image = None  # the kernel's time is not sampled
        elif sample_type != self.sample_type:
            os.close(fd)
            raise PerfUnavailable("perf events refused (the kernel's time sampled for some "
                                  "threads but not others)")
        return fd

    def _add(self, fd, cpu):
        """Keep event ``fd`` of ``cpu``: its records go into the CPU's ring."""
        self._fds.append(fd)
        for ring_cpu, ring in self.rings:
            if ring_cpu == cpu:
                perf_events.redirect(fd, ring.fd)
                return
        ring = perf_events.open_ring(fd, RING_PAGES)
        self.rings.append((cpu, ring))

    def with_session(self, sampled):
        """``sampled`` (a RingProcess), its samples' walking session made
        where it is new or has mapped a file since."""
        if sampled.session is None:
            sampled.session, sampled.image_map = walking_session(
                self.writer.arch, sampled.modules(), sampled.read, sampled.mappings,
                self.archive, self._debug_files, self._sources, self._kernel_image,
                sampled.executable)
        return sampled

    # Reading: the rings' records into the backlog, with what taking them
    # would read of /proc

    def _read_rings(self):
        """Read every ring into the backlog, each record in the order of its
        time among every ring's (a process's start, mappings and exit may
        be in one CPU's ring and its samples in another's)."""
        batches = [list(perf_events.records(ring.read(), self.sample_type))
                   for _, ring in self.rings]
        ordered = batches[0] if len(batches) == 1 else \
            heapq.merge(*batches, key=lambda record: getattr(record, "time", 0))
        for record in ordered:
            self._read(record)

    def _keep(self, record):
        self._kept.append(record)
        if type(record) is Sample:
            self._kept_samples += 1
            self._kept_bytes += RECORD_BYTES + len(record.stack)
        else:
            self._kept_bytes += RECORD_BYTES

    def _read(self, record):
        """``record`` as read: kept, after what its taking needs of /proc
        (records of their own: Found, Inherited, a COMM record), and the
        reading's view of the processes (``_told``) moved on as the taking
        will move its own.  A sample that is not recorded (sfbt's own, a
        child's under -p, the idle task's) is left out, a LOST record
        counted."""
        told = self._told
        kind = type(record)
        if kind is Sample:
            if not self._read_sample(record):
                return
        elif kind is Mmap2:
            state = told.get(record.pid)
            if state is not None and state.parent is not None:
                self._inherit(record.pid, state)
            if record.path.startswith("/"):
                self._files.hold(record)  # read as mapped, should it be deleted
        elif kind is Comm:
            state = told.get(record.pid)
            if record.exec:  # a RingProcess from now on (_named)
                named = state.named if state is not None and not state.sampled else set()
                state = told[record.pid] = _Told(False, named)
            if state is not None:
                state.named.add(record.tid)
            else:
                self._kernel_named.add(record.tid)
        elif kind is Fork:
            if record.pid != record.ppid:
                self._read_fork(record)
                return
        elif kind is Exit:
            state = told.get(record.pid)
            if record.tid == record.pid:
                told.pop(record.pid, None)
            elif state is not None:
                state.named.discard(record.tid)
            self._kernel_named.add(record.tid)  # its name kept (_exited)
            _note_exit(self._exits_read, record.tid, self._kernel_named.discard)
        elif kind is Lost:
            self.stats.lost += record.count
            return
        self._keep(record)

    def _read_sample(self, sample):
        """Whether ``sample`` is recorded (counted in ``taken``); kept before
        it, what its taking needs of /proc: its process (Found), its
        mappings (Inherited), its thread's name."""
        if sample.pid == os.getpid():
            return False  # sfbt itself, under -a
        if not self.every_process and self.command is None and sample.pid != self.pid:
            return False  # a child it made (events follow children too)
        if not sample.registers:
            # a kernel thread, or a process's thread past the point where it
            # let its memory go (exiting); the idle task is not busy time
            if not (self.every_process and sample.pid):
                return False
            self.stats.taken += 1
            if not sample.kernel:
                return False
            state = self._told.get(sample.pid)
            if state is None:
                if sample.tid not in self._kernel_named:
                    self._name_thread(sample)
                    self._kernel_named.add(sample.tid)
                return True
        else:
            self.stats.taken += 1
            if sample.pid not in self._told:
                self._find(sample.pid)
            state = self._told[sample.pid]
            if state is None:
                return True  # it cannot be read
            if state.parent is not None:
                self._inherit(sample.pid, state)
        if state.sampled and sample.tid not in state.named:
            self._name_thread(sample)
            state.named.add(sample.tid)
        return True

    def _find(self, pid):
        """Process ``pid``, met first in a sample: one that ran before the
        recording, read from /proc now."""
        try:
            sampled = SampledProcess(pid, self._files)
        except ProcessError:
            sampled = None
        self._keep(Found(pid, sampled))
        self._told[pid] = None if sampled is None else _Told(True)

    def _inherit(self, pid, state):
        """The mappings of child ``pid`` from those of its parent (the rings
        had not told of it), read now, before its first sample or mapping."""
        try:
            mappings = mappings_of(read_maps(state.parent, False))
        except OSError:  # it exited meanwhile
            mappings = []
        self._keep(Inherited(pid, mappings))
        state.parent = None

    def _name_thread(self, sample):
        """A COMM record of the name /proc gives ``sample``'s thread."""
        name = _read_text(f"/proc/{sample.pid}/task/{sample.tid}/comm").strip()
        self._keep(Comm(sample.pid, sample.tid, name, False, sample.time))

    def _read_fork(self, fork):
        """A new process: it starts with its parent's name, read from /proc
        where no record gave it (a COMM record after the fork), and its
        parent's mappings (read from /proc at its first sample or mapping
        where the rings had not told of the parent)."""
        parent = self._told.get(fork.ppid)
        self._keep(fork)
        if parent is None or fork.ppid not in parent.named:
            name = _read_text(f"/proc/{fork.ppid}/comm").strip()
            self._keep(Comm(fork.pid, fork.tid, name, False, fork.time))
        self._told[fork.pid] = _Told(False, {fork.tid}, fork.ppid if parent is None else None)

    # Taking: each record in order, kept or not

    def _round(self):
        """One poll round: the rings read, then the records taken for as
        long as the machine's processors were idle since the last round
        (those past the backlog's bound at once); the rest kept, their
        stacks copied out of the rings' bytes."""
        before = len(self._kept)
        self._read_rings()
        read = len(self._kept) - before
        times = machine_seconds()
        if times is None:
            spare = math.inf
        else:
            spare = times[1] - self._idle if self._idle is not None else 0.0
            self._idle = times[1]
        self._take_kept(time.process_time() + spare)
        for record in islice(reversed(self._kept), min(read, len(self._kept))):
            if type(record) is Sample:
                record.stack = bytes(record.stack)  # the ring's bytes let go
                self.stats.deferred += 1

    def _take_kept(self, until=math.inf, stopped=None, bound=None):
        """Take the kept records in order: while they are over ``bound``
        bytes (default: the backlog's) at once, then until ``until``
        (time.process_time) or ``stopped()`` says so, looked at before
        each sample."""
        kept = self._kept
        bound = self.backlog if bound is None else bound
        # The collector runs once after the records, not every few hundred
        # objects within them: most of what a sample makes (frames, their
        # registers) is dropped at the thread's next sample, which a
        # collection in between would have scanned and moved on.
        collecting = gc.isenabled()
        gc.disable()
        try:
            while kept:
                record = kept[0]
                kind = type(record)
                if kind is Sample:
                    if self._kept_bytes <= bound and (
                            time.process_time() >= until or (stopped and stopped())):
                        break
                    self._kept_samples -= 1
                    self._kept_bytes -= RECORD_BYTES + len(record.stack)
                else:
                    self._kept_bytes -= RECORD_BYTES
                kept.popleft()
                if kind is Sample:
                    self._take(record)
                else:
                    self._takers[kind](record)
        finally:
            if collecting:
                gc.enable()

    def _final_walk(self, signals, flush, received, waited):
        """Take every record kept, said in one line where ``waited`` (the
        processors were too busy to take them all while recording); an
        ending signal past the ``received``-th (a second Ctrl-C) or a
        ``flush()`` that fails stops it once the records under way (up to
        POLL_INTERVAL of processor time) are taken, the samples left
        counted."""
        if waited:
            self._say(f"sfbt: walking {self._kept_samples} samples kept while the processors "
                      "were busy (Ctrl-C stops)")
        began, samples = time.process_time(), self.stats.samples
        flushed = time.monotonic()
        while self._kept:  # a signal stops it after the records under way
            self._take_kept(time.process_time() + POLL_INTERVAL, bound=math.inf)
            if signals.received > received:
                break
            if time.monotonic() - flushed >= FLUSH_INTERVAL:
                flushed = time.monotonic()
                if not flush():
                    break
        self.stats.after_cpu = time.process_time() - began
        self.stats.walked_after = self.stats.samples - samples
        self.stats.unwalked = self._kept_samples
        self._drop_kept()

    def _drop_kept(self):
        """Let the kept records go, untaken (the processes read for them
        closed)."""
        for record in self._kept:
            if type(record) is Found and record.sampled is not None:
                record.sampled.close()
        self._kept.clear()
        self._kept_bytes = self._kept_samples = 0

    def _mapped(self, record):
        sampled = self._processes.get(record.pid)
        if sampled is not None:
            sampled.mapped(record)

    def _named(self, record):
        sampled = self._processes.get(record.pid)
        if record.exec:  # a new program: its mappings follow
            if isinstance(sampled, SampledProcess):  # not read from /proc again
                sampled.close()
                sampled = None
            if sampled is None:
                sampled = self._processes[record.pid] = RingProcess(
                    record.pid, self.writer.arch, self._files)
            sampled.exec()
        if sampled is not None:
            sampled.names[record.tid] = record.name
        else:  # a kernel thread's (or a process's not sampled yet)
            self._kernel_threads[record.tid] = record.name

    def _forked(self, record):
        """A new process (not a new thread) starts with its parent's
        mappings and name (a COMM record follows where the parent's was
        read from /proc; Inherited where its mappings were)."""
        if record.pid == record.ppid:
            return
        parent = self._processes.get(record.ppid)
        mappings, name = (parent.mappings, parent.names.get(record.ppid)) \
            if parent is not None else ((), None)
        old = self._processes.pop(record.pid, None)
        if old is not None:
            old.close()
        self._processes[record.pid] = RingProcess(record.pid, self.writer.arch, self._files,
                                                  mappings, {record.tid: name} if name else {})

    def _found(self, record):
        if record.pid in self._processes:  # (the reading said it was not)
            if record.sampled is not None:
                record.sampled.close()
            return
        self._processes[record.pid] = record.sampled

    def _inherited(self, record):
        sampled = self._processes.get(record.pid)
        if sampled is not None:
            sampled.inherit(record.mappings)

    def _exited(self, record):
        """A thread exited: what was kept of it dropped but its name, kept
        for its samples on its way out (no user registers by then)."""
        sampled = self._processes.get(record.pid)
        self.writer.forget(record.tid)
        if sampled is not None:
            self._kernel_threads[record.tid] = sampled.thread_name(record.tid)
            sampled.names.pop(record.tid, None)
        _note_exit(self._exits, record.tid, lambda tid: self._kernel_threads.pop(tid, None))
        if record.tid == record.pid:
            if sampled is not None:
                sampled.close()
            self._processes.pop(record.pid, None)

    def _take(self, sample):
        if not sample.registers:
            self._take_kernel_thread(sample)
            return
        sampled = self._processes.get(sample.pid)
        if sampled is None:
            self.stats.unreadable += 1
            return
        self.with_session(sampled)
        frames, stop, cut = walk_sample(self.writer, sampled, sample)
        self.stats.cut += cut
        trace_id = self.writer.trace_id(frames, stop, cut, sample.kernel)
        self.writer.record(trace_id, sampled.image_map, sample.time + self._wall, sample.pid,
                           sample.tid, sampled.thread_name(sample.tid), cut,
                           name_process=self.every_process or self.command is not None)
        self.stats.samples += 1

    def _take_kernel_thread(self, sample):
        """A sample of a kernel thread, or of a process's thread past the
        point where it let its memory go (exiting): its kernel frames
        alone, under the name the rings (or /proc, when it was read) gave
        the thread."""
        if self._kernel_map is None:
            arch = self.writer.arch
            self._kernel_map = self.archive.add_image_map(encode_image_map(ImageMap(
                f"linux-{arch.name}", (self._kernel_image,), 8 * arch.pointer_size)))
        known = self._processes.get(sample.pid)  # a process exiting (its memory let go)
        name = known.thread_name(sample.tid) if known is not None \
            else self._kernel_threads.get(sample.tid, "")
        trace_id = self.writer.trace_id([], None, False, sample.kernel)
        self.writer.record(trace_id, self._kernel_map, sample.time + self._wall, sample.pid,
                           sample.tid, name, name_process=True)
        self.stats.samples += 1

    def _cpu_seconds(self):
        if self.every_process:
            times = machine_seconds()
            return times and times[0]
        if self.command is not None and self.command.returncode is not None:
            import resource  # the command waited for: its time and its children's
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime - self._children_before
        return _cpu_seconds(self.pid)

    def _ended(self):
        """Why the recording ends by itself now ("": it goes on)."""
        if self.command is not None:
            return "the command exited" if self.command.poll() is not None else ""
        if self.pid is not None:
            stat = _read_text(f"/proc/{self.pid}/stat")
            if stat[stat.rfind(")") + 2:stat.rfind(")") + 3] in ("", "Z", "X"):
                return "the process exited"
        return ""

    def run(self, duration, signals, flush, on_first_sample=None):
        """Sample until ``duration`` seconds (None: no limit) passed, the
        process (the command) exited, ``signals`` caught one, or
        ``flush()`` says the samples can no longer be written; then walk
        what was kept (_final_walk)."""
        for fd in self._fds:
            perf_events.enable(fd)
        first = self._processes.get(self.pid)
        if isinstance(first, SampledProcess):
            # its mappings as they are once its events are enabled: what it
            # maps from now on is in the rings (perf's synthesized mmaps)
            first.start()
        if self._gate is not None:
            os.close(self._gate)  # the command runs (execs) now
            self._gate = None
        if on_first_sample is not None:
            on_first_sample()
        if self.command is not None:
            import resource
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            self._children_before = usage.ru_utime + usage.ru_stime
        # a command's time is counted from its start
        cpu_before = 0.0 if self.command is not None else self._cpu_seconds()
        times = machine_seconds()
        self._idle = times and times[1]
        start = time.monotonic()
        for now in sampling_rounds(start, duration, signals, flush):
            self.stats.ended = self._ended()
            if self.stats.ended:
                break
            signals.sleep(POLL_INTERVAL if duration is None
                          else min(POLL_INTERVAL, max(0.0, start + duration - now)))
            self._round()
        received = signals.received
        self.stats.elapsed = time.monotonic() - start
        cpu_after = self._cpu_seconds()
        if None not in (cpu_before, cpu_after):
            self.stats.cpu_seconds = cpu_after - cpu_before
        for fd in self._fds:
            try:
                perf_events._ioctl(fd, perf_events.PERF_EVENT_IOC_DISABLE)
            except OSError:
                pass
        waited = self._kept_samples > 0
        self._read_rings()
        if signals.caught is not None:
            self.stats.ended = ("interrupted" if signals.caught == "SIGINT"
                                else f"ended by {signals.caught}")
        if self.command is not None and self.command.poll() is None:
            self.command.send_signal(signal.SIGTERM)  # its recording ended first
        self._final_walk(signals, flush, received, waited)

    def record(self, path, duration=None, started=lambda: None):
        return record_archive(self, path, duration, started)

    def no_stack(self):
        what = "no process" if self.every_process else f"process {self.pid}"
        reason = self.stats.ended or "it did not run on a processor"
        return ProcessError(f"{what}: no stack recorded ({reason}; --idle samples sleeping "
                            "threads too)")

    def summary(self, path):
        stats = self.stats
        ended = f" ({stats.ended})" if stats.ended else ""
        saved = (f"saved to {path}" if stats.kept == stats.samples
                 else f"the first {stats.kept} saved to {path}")
        per = "CPU second of the machine" if self.every_process else "CPU second of the process"
        notes = []
        if stats.cut:
            notes.append(f"{stats.cut} longer than the stack copied (--stack-size), "
                         "kept as truncated")
        if stats.lost:
            notes.append(f"{stats.lost} lost by the kernel (sfbt fell behind)")
        if stats.unreadable:
            notes.append(f"{stats.unreadable} of processes sfbt could not read")
        if stats.deferred:
            notes.append(f"{stats.deferred} kept while the processors were busy (--backlog), "
                         f"walked when one was free; {stats.walked_after} stacks walked after "
                         f"the recording, in {stats.after_cpu:.2f} s of processor time")
        if stats.unwalked:
            notes.append(f"{stats.unwalked} not walked (the walk after the recording was "
                         "stopped)")
        return (f"Recorded {stats.samples} stacks in {stats.taken} samples over "
                f"{stats.elapsed:.1f} s ({stats.rate:.1f} Hz of {self.hz:g} per {per}, "
                f"on perf events){ended}: {len(self.archive.traces)} distinct, {saved}."
                + "".join(f"\n{note[0].upper()}{note[1:]}." for note in notes))

    def close(self):
        for _, ring in self.rings:
            ring.close()
        self.rings = []
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self._drop_kept()
        for sampled in self._processes.values():
            if sampled is not None:
                sampled.close()
        self._processes.clear()
        self._files.close()
