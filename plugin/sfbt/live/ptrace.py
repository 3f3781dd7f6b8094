"""ptrace and process_vm_readv through ctypes on libc.

A thread is stopped only while its registers and stack are copied:
PTRACE_SEIZE (which does not stop it), PTRACE_INTERRUPT, a wait for the
ptrace-stop with ``__WALL`` (threads are not children), PTRACE_GETREGSET,
process_vm_readv, then PTRACE_DETACH (one snapshot) or PTRACE_CONT (a
thread that stays seized between samples).  A signal that arrives
meanwhile is handed back on detach or continue.
"""

import ctypes
import errno
import os
import time

from ..errors import SfbtError

PTRACE_CONT = 7
PTRACE_LISTEN = 0x4208
PTRACE_DETACH = 17
PTRACE_GETREGSET = 0x4204
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_EVENT_STOP = 128
WNOHANG = os.WNOHANG
#: the signals whose PTRACE_EVENT_STOP is a group-stop (the process was
#: stopped), not sfbt's PTRACE_INTERRUPT
GROUP_STOP_SIGNALS = {19, 20, 21, 22}  # SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU
NT_PRSTATUS = 1
WALL = 0x40000000
PAGE = os.sysconf("SC_PAGE_SIZE")


class PtraceError(SfbtError):
    """A ptrace request failed; ``errno`` says why."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.errno = code


class ThreadGone(SfbtError):
    """The thread exited (or was never there)."""


class DidNotStop(SfbtError):
    """The thread did not stop in time: it waits where a stop waits for
    it to come out (the parent of a vfork while its child runs, or any
    uninterruptible sleep).  It stays seized with the interrupt pending
    (it stops when it comes out); the kernel lets it go when sfbt exits."""

    def __init__(self, tid, seconds):
        super().__init__(f"thread {tid}: did not stop in {seconds:g} s (in vfork?)")
        self.tid = tid


#: how long a wait for one thread to stop lasts at most (interrupt_and_wait)
STOP_TIMEOUT = 1.0


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


_libc = None


def _lib():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_void_p]
        libc.ptrace.restype = ctypes.c_long
        libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec),
                                          ctypes.c_ulong, ctypes.POINTER(_IoVec),
                                          ctypes.c_ulong, ctypes.c_ulong]
        libc.process_vm_readv.restype = ctypes.c_ssize_t
        _libc = libc
    return _libc


def _ptrace(request, tid, address=0, data=0):
    result = _lib().ptrace(request, tid, address, data)
    if result == -1:
        code = ctypes.get_errno()
        if code == errno.ESRCH:
            raise ThreadGone(f"thread {tid} exited")
        raise PtraceError(os.strerror(code), code)
    return result


def seize(tid):
    _ptrace(PTRACE_SEIZE, tid)


def detach(tid, signal=0):
    try:
        _ptrace(PTRACE_DETACH, tid, 0, signal)
    except ThreadGone:
        pass


def resume(tid, signal=0):
    """Let a seized thread in a ptrace-stop run on (handing it ``signal``),
    still seized."""
    try:
        _ptrace(PTRACE_CONT, tid, 0, signal)
    except ThreadGone:
        pass


def listen(tid):
    """Leave a seized thread in its group-stop (the process was stopped)
    while it waits for SIGCONT, still seized."""
    try:
        _ptrace(PTRACE_LISTEN, tid)
    except ThreadGone:
        pass


def stop_signal(status):
    """What a ptrace-stop's wait status hands back when the thread runs
    on: the signal of a signal-delivery-stop, else 0 (sfbt's
    PTRACE_INTERRUPT, or a group-stop: -1, to leave stopped)."""
    if status >> 16 == PTRACE_EVENT_STOP:
        return -1 if os.WSTOPSIG(status) in GROUP_STOP_SIGNALS else 0
    return os.WSTOPSIG(status)


def wait_stop(tid, options=0):
    """The wait status of a seized thread's next ptrace-stop (None with
    WNOHANG when it has none).  ThreadGone if it exited."""
    try:
        waited, status = os.waitpid(tid, WALL | options)
    except ChildProcessError:
        raise ThreadGone(f"thread {tid} exited") from None
    if waited == 0:
        return None
    if os.WIFEXITED(status) or os.WIFSIGNALED(status):
        raise ThreadGone(f"thread {tid} exited")
    return status


def next_waiting():
    """The tid of a traced thread (or child) with a wait status to take,
    left to take (waitid's WNOWAIT): one system call tells that none of
    the seized threads stopped.  None where none has one."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | WNOHANG | os.WNOWAIT | WALL)
    except ChildProcessError:
        return None
    return info.si_pid if info is not None else None


def interrupt(tid):
    """Ask a seized thread to stop (wait_stop says when it did)."""
    _ptrace(PTRACE_INTERRUPT, tid)


def interrupt_and_wait(tid, timeout=STOP_TIMEOUT):
    """Stop a seized thread; returns the signal to hand back on detach (0
    for none; see stop_signal).  ThreadGone if it exits first, DidNotStop
    if it has not stopped after ``timeout`` seconds."""
    interrupt(tid)
    return wait_stopped(tid, time.monotonic() + timeout, timeout)


def wait_stopped(tid, deadline, timeout):
    """The signal to hand back (see stop_signal) of an interrupted
    thread's ptrace-stop, polled for until ``deadline`` (time.monotonic):
    a thread that cannot stop (in vfork) would hold a blocking wait, and
    the signals that end sfbt with it, for as long.  DidNotStop (saying
    ``timeout``) after it; ThreadGone if it exits first."""
    pause = 0.0001
    while True:
        status = wait_stop(tid, WNOHANG)
        if status is not None:
            # a signal-delivery-stop is a ptrace-stop too; the signal goes
            # back to the thread when it runs on
            return stop_signal(status)
        left = deadline - time.monotonic()
        if left <= 0:
            raise DidNotStop(tid, timeout)
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.01)


class _Buffer:
    """A ctypes buffer and its one-vector _IoVec, kept for the next call
    (a sample copies every thread: no allocation per copy), grown to the
    largest size asked."""

    def __init__(self):
        self.size = 0
        self.buffer = None
        self.vector = _IoVec()
        self.vector_ref = ctypes.byref(self.vector)

    def take(self, size):
        """The buffer, at least ``size`` bytes; its vector set to ``size``."""
        if size > self.size:
            self.buffer = ctypes.create_string_buffer(size)
            self.size = size
        self.vector.base = ctypes.addressof(self.buffer)  # a page-wise read moves it
        self.vector.length = size
        return self.buffer


_regset_buffer = _Buffer()
_read_buffer = _Buffer()
_remote = _IoVec()
_remote_ref = ctypes.byref(_remote)
#: a read larger than this gets a buffer of its own (the kept one stays
#: small); a stack copy (1 MiB at most, memory.STACK_COPY_LIMIT, and the
#: block of its red zone) fits
_KEPT_READ = 2 << 20


def get_regset(tid, size):
    """The thread's NT_PRSTATUS register set (``size`` bytes at most)."""
    buffer = _regset_buffer.take(size)
    _ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, ctypes.addressof(_regset_buffer.vector))
    return buffer.raw[:_regset_buffer.vector.length]


def read_pages(pid, address, size):
    """Bytes at [address, address + size) of process ``pid`` read with
    process_vm_readv: in one block where all of it is readable, else in
    page-sized blocks, as many as could be read, from the start (a short
    result ends at the first unreadable page)."""
    if size <= 0:
        return b""
    if size <= _KEPT_READ:
        buffer = _read_buffer.take(size)
        local, local_ref = _read_buffer.vector, _read_buffer.vector_ref
    else:
        buffer = ctypes.create_string_buffer(size)
        local = _IoVec(ctypes.addressof(buffer), size)
        local_ref = ctypes.byref(local)
    _remote.base, _remote.length = address, size
    # the kernel does not split a block: a range with an unreadable page
    # fails whole (or comes back short), and is read again page by page
    if _lib().process_vm_readv(pid, local_ref, 1, _remote_ref, 1, 0) == size:
        return ctypes.string_at(buffer, size)
    blocks = []
    at = address
    end = address + size
    while at < end:
        step = min(PAGE - at % PAGE, end - at)
        blocks.append((at, step))
        at += step
    remote = (_IoVec * len(blocks))(*[_IoVec(a, n) for a, n in blocks])
    done = 0
    # the kernel takes at most IOV_MAX (1024) vectors per call
    for first in range(0, len(blocks), 1024):
        chunk = blocks[first:first + 1024]
        length = sum(n for _, n in chunk)
        local.base = ctypes.addressof(buffer) + done
        local.length = length
        count = _lib().process_vm_readv(
            pid, local_ref, 1,
            ctypes.cast(ctypes.byref(remote, first * ctypes.sizeof(_IoVec)),
                        ctypes.POINTER(_IoVec)), len(chunk), 0)
        if count <= 0:
            break
        done += count
        if count < length:
            break
    return ctypes.string_at(buffer, done)
