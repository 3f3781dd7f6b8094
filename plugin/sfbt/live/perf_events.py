"""Linux perf events through ctypes: perf_event_open(2), the events'
ring buffers read from mmap, and the records in them (linux/perf_event.h).

A ``cpu-clock`` software event at a frequency samples a thread on the
processor, copying its user registers and the top of its user stack into
the ring while it runs on (what `perf record --call-graph dwarf` takes);
the ring's MMAP2, COMM, FORK and EXIT records say what each process maps
and what each thread is called.  Nothing here walks a stack: that is
perf_source's, through the one frame step."""

import ctypes
import errno
import mmap
import os
import platform
import struct
from dataclasses import dataclass

from ..errors import SfbtError

#: perf_event_open's system call number per machine
SYSCALLS = {"x86_64": 298, "aarch64": 241}

PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_CPU_CLOCK = 0

SAMPLE_TID = 1 << 1
SAMPLE_TIME = 1 << 2
SAMPLE_CALLCHAIN = 1 << 5
SAMPLE_REGS_USER = 1 << 12
SAMPLE_STACK_USER = 1 << 13

# perf_event_attr's flag bits
_DISABLED, _INHERIT, _EXCLUDE_KERNEL, _EXCLUDE_HV = 0, 1, 5, 6
_COMM, _FREQ, _TASK, _MMAP_DATA, _SAMPLE_ID_ALL = 9, 10, 13, 17, 18
_EXCLUDE_CALLCHAIN_USER, _MMAP2 = 22, 23
_COMM_EXEC, _USE_CLOCKID = 24, 25

RECORD_LOST, RECORD_COMM, RECORD_EXIT, RECORD_FORK = 2, 3, 4, 7
RECORD_SAMPLE, RECORD_MMAP2 = 9, 10
#: a COMM record's misc bit: the name changed by an exec
MISC_COMM_EXEC = 1 << 13
#: an MMAP2 record's misc bit: a build id in place of device and inode
MISC_MMAP_BUILD_ID = 1 << 14

PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_SET_OUTPUT = 0x2405

#: what every sample holds; with SAMPLE_CALLCHAIN, the kernel's part of
#: the call chain too
SAMPLE_TYPE = SAMPLE_TID | SAMPLE_TIME | SAMPLE_REGS_USER | SAMPLE_STACK_USER
#: the call chain's marks of where its kernel and user parts begin
#: (PERF_CONTEXT_*: the values from -4095 up, as unsigned 64-bit words)
CONTEXT_KERNEL = (1 << 64) - 128
CONTEXT_MAX = (1 << 64) - 4095

#: the largest user stack copy the kernel takes (a multiple of 8 below 64 KiB)
MAX_STACK_COPY = 65528
CLOCK_MONOTONIC = 1

#: perf_event_attr as written (PERF_ATTR_SIZE_VER5: up to sample_max_stack)
_ATTR = struct.Struct("<IIQQQQQIIQQQQIiQIHH")

#: the metadata page: data_head, data_tail, data_offset, data_size
_HEAD_AT = 1024
_U64 = struct.Struct("<Q")
_HEADER = struct.Struct("<IHH")
_TID_TIME = struct.Struct("<IIQ")
_MMAP2_RECORD = struct.Struct("<IIQQQIIQQII")
_TASK_RECORD = struct.Struct("<IIIIQ")


class PerfUnavailable(SfbtError):
    """The kernel refuses perf events here: one line saying why, and the
    errno it gave."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.errno = code


def register_bits(machine):
    """{perf_regs.h bit: DWARF register number} of the general registers
    on ``machine`` (empty where sfbt knows none)."""
    if machine == "x86_64":
        # perf_regs.h: AX BX CX DX SI DI BP SP IP, then R8-R15 at 16-23
        dwarf = {0: 0, 1: 3, 2: 2, 3: 1, 4: 4, 5: 5, 6: 6, 7: 7, 8: 16}
        dwarf.update({16 + n: 8 + n for n in range(8)})
        return dwarf
    if machine == "aarch64":
        return {n: n for n in range(33)}  # X0-X30, SP, PC: DWARF's numbers
    return {}


def _perf_regs(machine):
    """(sample_regs_user mask, [DWARF register number of each bit set, in
    bit order]) of the general registers on ``machine``."""
    dwarf = register_bits(machine)
    mask = sum(1 << bit for bit in dwarf)
    return mask, [dwarf[bit] for bit in sorted(dwarf)]


MACHINE = platform.machine()
REGS_MASK, REGS_DWARF = _perf_regs(MACHINE)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong)


def why_refused(code):
    """perf_event_open's errno ``code`` as the one line sfbt says."""
    paranoid = ""
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as stream:
            paranoid = stream.read().strip()
    except OSError:
        pass
    if code in (errno.EACCES, errno.EPERM):
        return (f"perf events refused ({os.strerror(code)}; "
                f"kernel.perf_event_paranoid is {paranoid or 'unknown'})")
    if code == errno.ENOSYS:
        return "perf events refused (no perf_event_open in this kernel)"
    if code == errno.ENOENT:
        return "perf events refused (no cpu-clock event in this kernel)"
    return f"perf events refused ({os.strerror(code)})"


def open_event(pid, cpu, hz, stack_size, inherit, tracking):
    """The descriptor of a cpu-clock event of ``pid`` (-1: every process)
    on ``cpu`` at ``hz``, copying the user registers and ``stack_size``
    bytes of user stack; ``tracking`` adds the MMAP2, COMM and FORK/EXIT
    records.  It counts the time in the kernel too (a sample there copies
    the registers and stack the thread entered the kernel with), or where
    perf_event_paranoid forbids that, only the time in user space.
    Disabled until ``enable``.  PerfUnavailable where the kernel refuses
    it (errno in ``.errno``)."""
    return open_sampling_event(pid, cpu, hz, stack_size, inherit, tracking)[0]


def open_sampling_event(pid, cpu, hz, stack_size, inherit, tracking, kernel_chain=False):
    """open_event's (descriptor, sample type): with ``kernel_chain``, where
    the kernel's time is sampled, each sample holds the kernel's part of
    its call chain too (SAMPLE_CALLCHAIN, the user part left out)."""
    try:
        return _open_event(pid, cpu, hz, stack_size, inherit, tracking, False,
                           kernel_chain)
    except PerfUnavailable as error:
        if error.errno not in (errno.EACCES, errno.EPERM):
            raise
    return _open_event(pid, cpu, hz, stack_size, inherit, tracking, True, False)


def _open_event(pid, cpu, hz, stack_size, inherit, tracking, user_only, kernel_chain):
    syscall = SYSCALLS.get(MACHINE)
    if syscall is None or not REGS_MASK or os.environ.get("SFBT_NO_PERF_EVENTS"):
        raise PerfUnavailable(why_refused(errno.ENOSYS) if syscall is None or not REGS_MASK
                              else "perf events refused (SFBT_NO_PERF_EVENTS is set)",
                              errno.ENOSYS)
    flags = 1 << _DISABLED | 1 << _EXCLUDE_HV | 1 << _FREQ
    if user_only:
        flags |= 1 << _EXCLUDE_KERNEL
    flags |= 1 << _SAMPLE_ID_ALL | 1 << _USE_CLOCKID
    if inherit:
        flags |= 1 << _INHERIT
    sample_type = SAMPLE_TYPE
    if kernel_chain:
        sample_type |= SAMPLE_CALLCHAIN
        flags |= 1 << _EXCLUDE_CALLCHAIN_USER
    if tracking:
        flags |= 1 << _COMM | 1 << _COMM_EXEC | 1 << _TASK | 1 << _MMAP2 | 1 << _MMAP_DATA
    attr = _ATTR.pack(PERF_TYPE_SOFTWARE, _ATTR.size, PERF_COUNT_SW_CPU_CLOCK,
                      max(1, int(round(hz))),
                      sample_type,
                      0, flags, 0, 0, 0, 0, 0, REGS_MASK, stack_size, CLOCK_MONOTONIC,
                      0, 0, 0, 0)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    fd = _libc.syscall(syscall, buffer, ctypes.c_int(pid), ctypes.c_int(cpu),
                       ctypes.c_int(-1), ctypes.c_ulong(0x8))  # PERF_FLAG_FD_CLOEXEC
    if fd < 0:
        code = ctypes.get_errno()
        raise PerfUnavailable(why_refused(code), code)
    return fd, sample_type


def _ioctl(fd, request, argument=0):
    if _libc.ioctl(fd, request, argument) < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def enable(fd):
    _ioctl(fd, PERF_EVENT_IOC_ENABLE)


def redirect(fd, into):
    """Send event ``fd``'s records into the ring of event ``into`` (same CPU)."""
    _ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, into)


@dataclass
class Sample:
    pid: int
    tid: int
    time: int  # CLOCK_MONOTONIC nanoseconds
    #: DWARF register number -> value; empty for a kernel thread or the
    #: idle task (no user registers)
    registers: dict
    #: the user stack from the stack pointer up (from the ring: a view of
    #: the bytes read, not a copy of its own)
    stack: bytes
    #: whether the copy took all the bytes asked for (the stack may go on
    #: above it) rather than ending where the stack's mapping ends
    full: bool
    #: the kernel's part of the call chain, innermost first (the PC, then
    #: return addresses), where the sample type holds it and the sample
    #: was taken in the kernel
    kernel: tuple = ()


@dataclass
class Mmap2:
    pid: int
    tid: int
    executable: bool
    start: int = 0
    length: int = 0
    offset: int = 0  # in the file
    device: str = ""  # "major:minor" in hex, as /proc/PID/maps shows it
    inode: int = 0
    writable: bool = False
    path: str = ""  # "//anon", "[vdso]", "[stack]"... where not a file's
    time: int = 0  # CLOCK_MONOTONIC nanoseconds (its sample_id's)


@dataclass
class Comm:
    pid: int
    tid: int
    name: str
    exec: bool  # named by an exec (a new program), not by the thread
    time: int = 0


@dataclass
class Exit:
    pid: int
    tid: int
    time: int = 0


@dataclass
class Fork:
    pid: int
    ppid: int  # the process it was made by (itself for a new thread)
    tid: int
    time: int = 0


@dataclass
class Lost:
    count: int


class Ring:
    """The mmap'ed ring buffer of one event: ``read()`` gives the records
    written since the last read, and frees their room."""

    def __init__(self, fd, pages):
        self.fd = fd
        page = mmap.PAGESIZE
        self.size = pages * page
        self.map = mmap.mmap(fd, page + self.size, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.data_at = page
        self.stack_size = 0

    def close(self):
        self.map.close()

    def read(self):
        """The records between the tail and the head, as bytes (the ring's
        wrap joined)."""
        head = _U64.unpack_from(self.map, _HEAD_AT)[0]
        tail = _U64.unpack_from(self.map, _HEAD_AT + 8)[0]
        if head == tail:
            return b""
        start, end = tail % self.size, head % self.size
        at = self.data_at
        if head - tail >= self.size or end <= start:
            data = self.map[at + start:at + self.size] + self.map[at:at + end]
        else:
            data = self.map[at + start:at + end]
        _U64.pack_into(self.map, _HEAD_AT + 8, head)
        return data


def open_ring(fd, pages):
    """A Ring of ``pages`` (a power of two) data pages on event ``fd``,
    fewer where the kernel's locked-memory limit refuses as many."""
    while True:
        try:
            return Ring(fd, pages)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOMEM) or pages <= 8:
                raise PerfUnavailable(f"perf events' ring refused ({error.strerror})",
                                      error.errno) from None
            pages //= 2


def _time(data, end, timed):
    """The time of the sample_id that ends at ``end``, or 0."""
    return _U64.unpack_from(data, end - 8)[0] if timed else 0


def kernel_chain(data, at, count):
    """The kernel part of the call chain of ``count`` words at ``at``: the
    addresses after its CONTEXT_KERNEL mark, up to the next mark."""
    chain = struct.unpack_from(f"<{count}Q", data, at)
    kernel = []
    inside = False
    for address in chain:
        if address >= CONTEXT_MAX:
            if inside:
                break
            inside = address == CONTEXT_KERNEL
        elif inside:
            kernel.append(address)
    return tuple(kernel)


def records(data, sample_type=SAMPLE_TYPE):
    """The records of ring bytes ``data``: Sample, Mmap2, Comm, Exit, Fork
    or Lost (the others passed over, and one shorter than its fields), its
    samples laid out as ``sample_type`` says (SAMPLE_TYPE, with or without
    SAMPLE_CALLCHAIN), the other records' times read from the sample_id
    that ends them (as sfbt opens its events: sample_id_all, TID and TIME;
    0 where ``sample_type`` has no SAMPLE_TIME).  A record that runs past
    the bytes ends them."""
    callchain = bool(sample_type & SAMPLE_CALLCHAIN)
    # the other records end with their sample_id (sample_id_all): pid and
    # tid, then the time
    timed = bool(sample_type & SAMPLE_TIME)
    n_regs = len(REGS_DWARF)
    regs_struct = struct.Struct(f"<{n_regs}Q")
    at, end = 0, len(data)
    view = memoryview(data)  # a sample's stack is sliced from it, not copied
    while at + 8 <= end:
        kind, misc, size = _HEADER.unpack_from(data, at)
        if size < 8 or at + size > end:
            return
        body = at + 8
        at += size
        if kind == RECORD_SAMPLE:
            if size < 8 + 16 + 8 + 8:
                continue
            pid, tid, when = _TID_TIME.unpack_from(data, body)
            place = body + 16
            kernel = ()
            if callchain:
                count = _U64.unpack_from(data, place)[0]
                if place + 8 + 8 * count + 16 > at:  # and the abi and copy sizes
                    continue
                kernel = kernel_chain(data, place + 8, count)
                place += 8 + 8 * count
            abi = _U64.unpack_from(data, place)[0]
            place += 8
            registers = {}
            if abi:
                if place + regs_struct.size + 8 > at:
                    continue
                registers = dict(zip(REGS_DWARF, regs_struct.unpack_from(data, place)))
                place += regs_struct.size
            copied = _U64.unpack_from(data, place)[0]
            place += 8
            stack, full = b"", False
            if copied:
                if place + copied + 8 > at:
                    continue
                dynamic = _U64.unpack_from(data, place + copied)[0]
                stack = view[place:place + min(dynamic, copied)]
                full = dynamic >= copied
            yield Sample(pid, tid, when, registers, stack, full, kernel)
        elif kind == RECORD_MMAP2 and size >= 8 + _MMAP2_RECORD.size:
            (pid, tid, start, length, offset, major, minor, inode, _, prot,
             _) = _MMAP2_RECORD.unpack_from(data, body)
            if misc & MISC_MMAP_BUILD_ID:  # a build id where the device and inode were
                major = minor = inode = 0
            path = data[body + _MMAP2_RECORD.size:at].split(b"\0", 1)[0]
            yield Mmap2(pid, tid, bool(prot & mmap.PROT_EXEC), start, length, offset,
                        f"{major:02x}:{minor:02x}", inode, bool(prot & mmap.PROT_WRITE),
                        path.decode("utf-8", "surrogateescape"), _time(data, at, timed))
        elif kind == RECORD_COMM and size >= 16:
            pid, tid = struct.unpack_from("<II", data, body)
            name = data[body + 8:at].split(b"\0", 1)[0]
            yield Comm(pid, tid, name.decode("utf-8", "surrogateescape"),
                       bool(misc & MISC_COMM_EXEC), _time(data, at, timed))
        elif kind in (RECORD_EXIT, RECORD_FORK) and size >= 8 + _TASK_RECORD.size:
            pid, ppid, tid, _, _ = _TASK_RECORD.unpack_from(data, body)
            yield (Exit(pid, tid, _time(data, at, timed)) if kind == RECORD_EXIT
                   else Fork(pid, ppid, tid, _time(data, at, timed)))
        elif kind == RECORD_LOST and size >= 24:
            yield Lost(struct.unpack_from("<QQ", data, body)[1])
