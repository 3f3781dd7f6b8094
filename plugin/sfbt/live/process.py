"""A live process: its threads, mappings and modules, and a snapshot of
each thread (registers and stack) taken while it is stopped for as short
a time as that takes."""

import errno
import os
import struct
import time
from bisect import bisect_left, bisect_right

from ..arch import with_register_sets
from ..elf import ElfError, open_elf
from ..errors import SfbtError
from . import ptrace
from .images import ProcessImages
from .linkmap import LibraryNames, find_r_debug
from .mappings import VDSO, file_modules, mappings_of, read_maps, vdso_module
from .memory import CachedReads, ThreadState, stack_range



#: the most processor time a thread takes to go back into the system call
#: a copy interrupted (SeizedProcess.idle_mark), in nanoseconds, and the
#: most times it is given a processor meanwhile (once, and again where
#: another thread took the processor before it went back to sleep)
RESTART_RUN_NS = 200_000
RESTART_RUNS = 3


def _schedstat(counters):
    """(nanoseconds run, nanoseconds waited for a processor, times given
    one) of a thread's run_counters, or None."""
    fields = (counters or b"").split()
    try:
        return int(fields[0]), int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


class ProcessError(SfbtError):
    """A process sfbt cannot read: one line saying why."""


class ProcessExited(ProcessError):
    """The process exited (or there is no such process)."""


def _read_text(path, default=""):
    try:
        # a thread's name is any bytes its process chose
        with open(path, encoding="utf-8", errors="surrogateescape") as stream:
            return stream.read()
    except OSError:
        return default


def _status_field(pid, name):
    for line in _read_text(f"/proc/{pid}/status").splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].split()
    return []


def _overlaps(mappings, starts, mapping):
    """Whether ``mapping`` overlaps one of ``mappings`` (sorted, none
    overlapping another; ``starts`` their starts)."""
    i = bisect_left(starts, mapping.end) - 1
    return i >= 0 and mappings[i].end > mapping.start


def permission_error(pid, error):
    """Why ptrace was refused, in one line."""
    tracer = _status_field(pid, "TracerPid")
    if tracer and tracer[0] != "0":
        return ProcessError(f"cannot trace process {pid}: it is already traced by "
                            f"process {tracer[0]} (a debugger?)")
    uid = _status_field(pid, "Uid")
    if uid and os.geteuid() != 0 and int(uid[1]) != os.geteuid():
        return ProcessError(f"cannot trace process {pid}: it belongs to user "
                            f"{uid[1]} (run sfbt as that user, or as root)")
    scope = _read_text("/proc/sys/kernel/yama/ptrace_scope").strip()
    if scope and scope != "0" and os.geteuid() != 0:
        return ProcessError(
            f"cannot trace process {pid}: kernel.yama.ptrace_scope is {scope} "
            "(only a parent may trace; set it to 0, or run sfbt as root or with "
            "CAP_SYS_PTRACE)")
    return ProcessError(f"cannot trace process {pid}: {error}")


class Process:
    """Process ``pid`` as sfbt reads it."""

    def __init__(self, pid, arch=None, mappings=True):
        """Without ``mappings``, none are known until ``read_mappings`` or
        ``set_mappings``."""
        self.pid = pid
        if not os.path.isdir(f"/proc/{pid}/task"):
            raise ProcessExited(f"no process {pid}")
        self.reader = self._live_thread()
        self.executable = self._executable()
        self.arch = arch or self._arch()
        if self.arch is None or not self.arch.regset:
            name = self.arch.name if self.arch else "this architecture"
            raise ProcessError(f"process {pid}: {name} is not supported "
                               f"(sfbt stack reads {with_register_sets()})")
        self.images = ProcessImages(self.reader, lambda address, size: ptrace.read_pages(
            self.reader, address, size))
        #: the process's size in pages (statm) when its mappings were last read
        self._pages_read = None
        if mappings:
            self.read_mappings()
        else:
            self._set_mappings([])
        self._counters = {}  # tid -> open fds of its schedstat and syscall
        self._names = {}

    def _live_thread(self):
        """The process's id, or where its main thread exited (a zombie
        leader: its maps are empty and its memory unreadable) the id of a
        thread that runs on: what its mappings, files and memory are
        read through."""
        if not self._exited(self.pid):
            return self.pid
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{self.pid}/task"))
        except OSError:
            return self.pid
        return next((tid for tid in tids if not self._exited(tid)), self.pid)

    def read_mappings(self):
        """Read the mappings (/proc/PID/smaps) in place of those known."""
        self._pages_read = self._mapped_pages()
        try:
            self._set_mappings(read_maps(self.reader))
        except OSError as error:
            raise ProcessError(f"process {self.pid}: cannot read its mappings: "
                               f"{error.strerror or error}") from None

    def set_mappings(self, mappings):
        """Take ``mappings`` (sorted by address, none overlapping another)
        as the process's, as another source told them (perf events'
        MMAP2 records)."""
        self._set_mappings([], mappings)

    def _set_mappings(self, blocks, mappings=None):
        """The mappings read (read_maps' ``blocks``), or ``mappings`` made of
        them and of the ones kept."""
        if mappings is None:
            mappings = mappings_of(blocks)
        self.mappings = self.images.mappings = mappings
        self._lines = [line for line, _ in blocks]  # what maps said of them
        self._starts = [m.start for m in mappings]
        self.read = CachedReads(self._read_raw, mappings)
        self._modules = None

    def _read_raw(self, address, size):
        """From the mapped file where the mapping is its bytes (they do not
        change, and stay readable after the process unmaps them), else
        from the process."""
        mapping = self._mapping_at(address)
        if mapping is not None and address + size <= mapping.end:
            data = self.images.read(mapping, address, size)
            if data is not None:
                return data
        return ptrace.read_pages(self.reader, address, size)

    def _mapping_at(self, address):
        """The mapping that holds ``address``, or None."""
        i = bisect_right(self._starts, address) - 1
        if i >= 0 and address < self.mappings[i].end:
            return self.mappings[i]
        return None

    def read_memory(self, address, size):
        """The process's memory as a Target reads it (TargetMemoryError)."""
        return self.read(address, size)

    def reread_mappings(self, keep_gone=False):
        """Read the mappings again (new libraries, new thread stacks);
        whether they changed.  With ``keep_gone``, the mappings that are gone
        stay where no new one took their place: a thread copied before may
        still have frames in a library unloaded since.  ProcessError once
        the process is gone."""
        # maps says whether they changed; smaps, read only then, what
        # each mapping's pages are
        self._pages_read = self._mapped_pages()
        for changed in (False, True):
            try:
                blocks = read_maps(self.reader, changed)
            except OSError:
                # the thread read through exited: another, if any runs on
                self.reader = self.images.pid = self._live_thread()
                try:
                    blocks = read_maps(self.reader, changed)
                except OSError:
                    raise ProcessExited(f"process {self.pid} exited") from None
            if [line for line, _ in blocks] == self._lines:
                return False  # the lines the mappings were made of
            mappings = mappings_of(blocks)
            if keep_gone:
                starts = [m.start for m in mappings]
                mappings = sorted(mappings + [old for old in self.mappings
                                              if not _overlaps(mappings, starts, old)],
                                  key=lambda m: m.start)
            if mappings == self.mappings:
                return False
        self._set_mappings(blocks, mappings)
        return True

    def _executable(self):
        try:
            return os.readlink(f"/proc/{self.reader}/exe")
        except OSError:
            return None

    def _arch(self):
        path = f"/proc/{self.reader}/exe"
        try:
            stream, image = open_elf(path)
        except OSError as error:
            # open_elf names the file: a FileProblem that keeps the errno
            if error.errno == errno.ENOENT:
                if self._exited(self.reader):
                    raise ProcessExited(f"process {self.pid} exited") from None
                if os.path.isdir(f"/proc/{self.pid}"):
                    raise ProcessError(f"process {self.pid} has no executable (a kernel "
                                       "thread, or a process that is exiting)") from None
                raise ProcessExited(f"no process {self.pid}") from None
            if error.errno in (errno.EACCES, errno.EPERM):
                raise permission_error(self.pid, "permission denied") from None
            raise ProcessError(f"process {self.pid}: cannot read its executable: "
                               f"{error}") from None
        except ElfError as error:
            raise ProcessError(f"process {self.pid}: cannot read its executable: "
                               f"{error}") from None
        with stream:
            return image.arch

    def modules(self):
        if self._modules is None:
            modules = file_modules(self.mappings, self.images.locate, self)
            for mapping in self.mappings:
                if mapping.path == VDSO:
                    data = ptrace.read_pages(self.reader, mapping.start,
                                             mapping.end - mapping.start)
                    vdso = vdso_module(data, mapping.start)
                    if vdso is not None:
                        modules.append(vdso)
            self._modules = modules
        return self._modules

    def library_names(self):
        """The LibraryNames (sfbt.live.linkmap) of the process's modules:
        its link map read when a library's frame is first named."""
        endian = ">" if self.arch.big_endian else "<"
        return LibraryNames(self.read_memory, lambda: self._r_debug(endian), endian)

    def _r_debug(self, endian):
        """Where the process's r_debug is (sfbt.live.linkmap.find_r_debug),
        or None."""
        try:
            with open(f"/proc/{self.reader}/auxv", "rb") as stream:
                data = stream.read(1 << 16)
        except OSError:
            return None
        words = struct.unpack(f"{endian}{len(data) // 8}Q", data[:len(data) // 8 * 8])
        return find_r_debug(self.read_memory, self.modules(), dict(zip(words[::2], words[1::2])),
                            endian)

    def threads(self, fresh_names=True):
        """[(tid, name)], the main thread first, then as /proc/PID/task
        lists them; without ``fresh_names``, the name read when a thread
        was first seen."""
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            raise ProcessExited(f"process {self.pid} exited") from None
        if not tids:
            raise ProcessExited(f"process {self.pid} exited")
        # as GDB numbers them on attach: the main thread, then the order of
        # /proc/PID/task
        tids.sort(key=lambda tid: tid != self.pid)
        for gone in (self._names.keys() | self._counters.keys()) - set(tids):
            self._forget_thread(gone)
        threads = []
        for tid in tids:
            name = self._names.get(tid)
            if name is None or fresh_names:
                name = self._names[tid] = _read_text(
                    f"/proc/{self.pid}/task/{tid}/comm").strip()
            threads.append((tid, name))
        return threads

    def _counter_files(self, tid):
        """(schedstat, syscall) of thread ``tid``, open descriptors kept: a
        read at offset 0 gives their current text.  OSError once it is
        gone."""
        files = self._counters.get(tid)
        if files is None:
            base = f"/proc/{self.pid}/task/{tid}/"
            schedstat = os.open(base + "schedstat", os.O_RDONLY)
            try:
                syscall = os.open(base + "syscall", os.O_RDONLY)
            except OSError:
                os.close(schedstat)
                raise
            files = self._counters[tid] = (schedstat, syscall)
        return files

    def run_counters(self, tid):
        """Thread ``tid``'s run time, wait time and run count
        (/proc/.../schedstat's text), or None once it is gone.  The run
        count grows each time it gets a processor: where they are those of
        its idle mark (SeizedProcess.idle_mark), it has not run since."""
        try:
            return os.pread(self._counter_files(tid)[0], 128, 0)
        except OSError:
            self._forget_thread(tid)
            return None

    def _exited(self, tid):
        """Whether thread ``tid`` exited (gone, or a zombie)."""
        stat = _read_text(f"/proc/{self.pid}/task/{tid}/stat")
        return stat[stat.rfind(")") + 2:stat.rfind(")") + 3] in ("", "Z", "X")

    def _forget_thread(self, tid):
        """Close what was kept of thread ``tid``, gone (ESRCH, or no longer
        listed): a process that makes and ends threads without pause would
        otherwise hold two descriptors and a name for each it ever had."""
        self._names.pop(tid, None)
        for fd in self._counters.pop(tid, ()):
            os.close(fd)

    def close(self):
        for tid in list(self._counters):
            self._forget_thread(tid)
        self.images.close()

    def snapshot(self, tid, name=""):
        """The thread's ThreadState, or None if it exited.  It is stopped
        from PTRACE_INTERRUPT to PTRACE_DETACH only: the time to read its
        registers and copy its stack (``extra["stopped"]``, seconds).
        ptrace.DidNotStop where it does not stop in time (in vfork): it
        stays seized until sfbt exits, and stops only then, if ever."""
        if not self._seize(tid):
            return None
        signal = 0
        try:
            began = time.perf_counter()
            signal = ptrace.interrupt_and_wait(tid)
            state = self._copy(tid, name, began)
            self._hold_code_of(state)
            return state
        except ptrace.ThreadGone:
            return None
        finally:
            ptrace.detach(tid, max(signal, 0))

    def _hold_code_of(self, state):
        """Where a copied thread's PC is in no mapping read so far, or the
        process's size changed since they were read (a library mapped or
        unmapped: the thread may be in it, or have a caller in it, and
        dlclose it before the next read), read the mappings again while
        the thread is still stopped and cannot leave that code."""
        if (self._mapping_at(state.registers[self.arch.pc]) is None
                or self._mapped_pages() != self._pages_read):
            self.reread_mappings(keep_gone=True)

    def _mapped_pages(self):
        """The process's size in pages (/proc/PID/statm's first field: what
        mapping or unmapping a library changes), or None."""
        try:
            with open(f"/proc/{self.reader}/statm", "rb") as stream:
                return int(stream.read(64).split(None, 1)[0])
        except (OSError, ValueError, IndexError):
            return None

    def _seize(self, tid):
        """Seize ``tid`` (it runs on); False if it exited."""
        try:
            ptrace.seize(tid)
        except ptrace.ThreadGone:
            return False
        except ptrace.PtraceError as error:
            if self._exited(tid):  # a zombie: ptrace refuses it
                return False
            raise permission_error(self.pid, error) from None
        return True

    def _copy(self, tid, name, began):
        """The ThreadState of stopped thread ``tid``, stopped since
        ``began`` (time.perf_counter)."""
        raw = ptrace.get_regset(tid, self.arch.regset_size)
        registers = self.arch.decode_regset(raw)
        sp = registers[self.arch.sp]
        start, end = stack_range(sp, self._mapping_at(sp))
        stack = ptrace.read_pages(self.reader, start, end - start)
        stopped = time.perf_counter() - began
        return ThreadState(tid, name, registers, start, stack,
                           extra={"stopped": stopped})


class SeizedProcess(Process):
    """A process whose threads stay seized between snapshots (`sfbt
    record`): each thread is seized once, when first sampled, and each
    sample is a PTRACE_INTERRUPT and, once the thread is copied, a
    PTRACE_CONT.  ``interrupt()`` asks threads to stop and ``collect()``
    copies those that did: a thread that waits for a processor takes as
    long to stop, and runs on meanwhile, so sfbt does not wait for it.
    ``reap()`` between samples lets run on the threads that stopped by
    themselves (a signal to hand them); ``release()`` (and ``close()``)
    lets them all go.

    How long each copied thread was stopped (``extra["stopped"]``) is
    counted from the latest moment it can have stopped at: not before it
    was interrupted, nor before a check found it still running, nor
    before it had run and waited for a processor, since it was last let
    go, as long as the kernel says it did (schedstat, exact while it is
    stopped); up to the moment it runs on again."""

    def __init__(self, pid, arch=None):
        super().__init__(pid, arch)
        self._seized = set()
        #: tid -> [name, when it was last known not to have stopped yet]
        self._stopping = {}
        #: tid -> (when it was last let run on, its scheduled time and
        #: run_counters as it was copied)
        self._let_go = {}
        #: tid -> the wait status taken for it by ``_take_waiting`` and not
        #: yet handled (None: it exited)
        self._waited = {}
        #: whether every seized thread's wait status waiting was taken into
        #: ``_waited`` by the latest ``_take_waiting``
        self._all_taken = False
        #: seized threads seen gone (a count), and the latest listing of
        #: the threads with what it was made at (see threads)
        self._exits = 0
        self._listed = None

    def threads(self, fresh_names=True):
        """As Process.threads; without ``fresh_names``, /proc/PID/task is
        listed again only where its link count (two, and one per thread)
        changed or a seized thread was seen gone since it was: a seized
        thread that exits is counted until sfbt waits for it (and counts
        it gone), so the same count is the same threads."""
        if fresh_names:
            return super().threads()
        try:
            links = os.stat(f"/proc/{self.pid}/task").st_nlink
        except OSError:
            raise ProcessExited(f"process {self.pid} exited") from None
        made = (links, self._exits)
        if self._listed is None or self._listed[0] != made:
            self._listed = (made, super().threads(fresh_names=False))
        return self._listed[1]

    def stopping(self, tid):
        """Whether ``tid`` was interrupted and not yet collected."""
        return tid in self._stopping

    def interrupt(self, threads):
        """Ask ``threads`` ([(tid, name)]) to stop; those that exited are
        left out (``collect`` reports them gone)."""
        for tid, name in threads:
            if tid not in self._seized:
                if not self._seize(tid):
                    self._stopping[tid] = [name, None]
                    continue
                self._seized.add(tid)
            asked = time.perf_counter()
            try:
                ptrace.interrupt(tid)
            except ptrace.ThreadGone:
                self._gone(tid)
                self._stopping[tid] = [name, None]
                continue
            self._stopping[tid] = [name, asked]

    def _take_waiting(self):
        """Take the wait statuses waiting into ``_waited``, one waitid for
        none: most samples find most threads not stopped.  Where one not
        of a seized thread comes first (a child of sfbt's own), the rest
        are asked thread by thread (``_all_taken`` False).  The
        time.perf_counter before the last look: a thread whose status is
        not taken had not stopped then."""
        while True:
            looked = time.perf_counter()
            tid = ptrace.next_waiting()
            if tid is None:
                self._all_taken = True
                return looked
            if tid in self._waited or (tid not in self._seized
                                       and tid not in self._stopping):
                self._all_taken = False
                return looked
            try:
                status = ptrace.wait_stop(tid, ptrace.WNOHANG)
            except ptrace.ThreadGone:
                status = None
            else:
                if status is None:  # not what waitid said: ask each thread
                    self._all_taken = False
                    return looked
            self._waited[tid] = status

    def _wait(self, tid):
        """Thread ``tid``'s wait status (None where it has none);
        ThreadGone if it exited."""
        if tid in self._waited:
            status = self._waited.pop(tid)
            if status is None:
                raise ptrace.ThreadGone(f"thread {tid} exited")
            return status
        if self._all_taken:
            return None
        return ptrace.wait_stop(tid, ptrace.WNOHANG)

    def collect(self, until=0.0, sleep=None):
        """({tid: ThreadState}, [tids gone]) of the interrupted threads
        that stopped, each copied and let run on as soon as it is seen
        stopped; checked once, then, until ``until`` (time.perf_counter)
        while some are yet to stop, again each time ``sleep(seconds)``
        returns (it returns early when a thread stops: EndingSignals.sleep
        wakes on SIGCHLD)."""
        states, gone = {}, []
        while self._stopping:
            now = self._take_waiting()
            for tid, (name, running) in list(self._stopping.items()):
                try:
                    status = self._wait(tid) if running else None
                except ptrace.ThreadGone:
                    status = running = None
                if running is None:
                    del self._stopping[tid]
                    self._gone(tid)
                    gone.append(tid)
                    continue
                if status is None:
                    self._stopping[tid][1] = now
                    continue
                del self._stopping[tid]
                try:
                    states[tid] = self._copy_stopped(tid, name, running, status)
                except ptrace.ThreadGone:
                    self._gone(tid)
                    gone.append(tid)
            now = time.perf_counter()
            if not self._stopping or sleep is None or now >= until:
                break
            sleep(until - now)
        return states, gone

    def _copy_stopped(self, tid, name, running, status):
        """The ThreadState of ``tid``, seen stopped (wait ``status``) after
        it was last seen ``running`` (time.perf_counter); let run on."""
        counters = self.run_counters(tid)
        times = _schedstat(counters)
        # seconds it has run and waited for a processor in all (exact
        # while it is stopped)
        scheduled = (times[0] + times[1]) / 1e9 if times is not None else None
        try:
            state = self._copy(tid, name, running)
            self._hold_code_of(state)
        finally:
            let_go = time.perf_counter()
            self._run_on(tid, ptrace.stop_signal(status))
        stopped_from = running
        before = self._let_go.get(tid)
        # its counters read at both copies (where one was not readable, as
        # with every descriptor in use, it counts from ``running``)
        if before is not None and None not in (before[1], scheduled):
            stopped_from = max(running, before[0] + scheduled - before[1])
        self._let_go[tid] = (let_go, scheduled, counters)
        state.extra["stopped"] = time.perf_counter() - stopped_from
        return state

    def idle_mark(self, tid, state):
        """What says thread ``tid``, copied as ``state`` and let run on
        since, is still where the copy found it: its run_counters (which
        stay the same for as long as it does not run), or None where it
        may have moved on.  It has not where it was not given a processor
        since the copy, or once and briefly, to go back into the system
        call it was interrupted in: it then waits in a system call at the
        copy's PC and SP, its stack as copied."""
        counters = self.run_counters(tid)
        kept = self._let_go.get(tid)
        if counters is None or kept is None or kept[2] is None:
            return None
        if counters == kept[2]:
            return counters  # not run since it was copied
        now, copied = _schedstat(counters), _schedstat(kept[2])
        if now is None or copied is None:
            return None
        runs, ran = now[2] - copied[2], now[0] - copied[0]
        if not 0 < runs <= RESTART_RUNS or ran > RESTART_RUN_NS:
            return None
        try:
            fields = os.pread(self._counter_files(tid)[1], 256, 0).split()
            waiting = len(fields) >= 3 and not fields[0].startswith((b"r", b"-"))
            sp, pc = (int(fields[-2], 16), int(fields[-1], 16)) if waiting else (None, None)
        except (OSError, ValueError):
            return None
        registers = state.registers
        if not waiting or sp != registers.get(self.arch.sp) or pc != registers.get(self.arch.pc):
            return None
        start, end = state.stack_start, state.stack_start + len(state.stack)
        if not start <= sp <= end or \
                ptrace.read_pages(self.reader, sp, end - sp) != state.stack[sp - start:]:
            return None
        if self.run_counters(tid) != counters:  # it ran while its stack was read
            return None
        return counters

    def _gone(self, tid):
        self._exits += 1
        self._seized.discard(tid)
        self._let_go.pop(tid, None)
        self._waited.pop(tid, None)

    @staticmethod
    def _run_on(tid, signal):
        if signal < 0:  # a group-stop: the process stays stopped
            ptrace.listen(tid)
        else:
            ptrace.resume(tid, signal)

    def reap(self):
        """Let run on every seized thread waiting in a ptrace-stop that
        sfbt did not ask for: a signal for it (handed on), a group-stop,
        or sfbt's PTRACE_INTERRUPT where a signal came first."""
        self._take_waiting()
        for tid in list(self._seized - self._stopping.keys()):
            while True:
                try:
                    status = self._wait(tid)
                except ptrace.ThreadGone:
                    self._gone(tid)
                    break
                if status is None:
                    break
                self._run_on(tid, ptrace.stop_signal(status))

    def release(self):
        """Detach every seized thread (its memory stays readable).  Each is
        interrupted, then waited for until one deadline,
        ptrace.STOP_TIMEOUT on: one that did not stop by then (in vfork)
        stays seized, with the interrupt pending, until sfbt exits."""
        self._stopping.clear()  # interrupted again: one stop or two
        waited, self._waited = self._waited, {}
        stopping = []
        for tid in self._seized:
            if tid in waited:  # in a stop already waited for
                if waited[tid] is not None:
                    ptrace.detach(tid, max(ptrace.stop_signal(waited[tid]), 0))
                continue
            try:
                ptrace.interrupt(tid)
            except (ptrace.ThreadGone, ptrace.PtraceError):
                continue
            stopping.append(tid)
        deadline = time.monotonic() + ptrace.STOP_TIMEOUT
        for tid in stopping:
            try:
                signal = ptrace.wait_stopped(tid, deadline, ptrace.STOP_TIMEOUT)
            except (ptrace.ThreadGone, ptrace.DidNotStop):
                continue
            ptrace.detach(tid, max(signal, 0))
        self._seized.clear()

    def close(self):
        self.release()
        super().close()
