"""`sfbt crash-handler %P %i %s %t %u %g %e`: what the kernel runs for
each core (core_pattern "|..."), the core on standard input.

The core is read as it streams (crashes.streamed), every thread walked
by the unwinder `sfbt stack --core` uses (a SnapshotSession over the
kept stacks, the modules read through /proc/PID/map_files), and one
crash added to the store (crashes.store); then the pipe is let go of
unread, which ends the kernel's dump.  With a chained handler (install
--chain) or a kept core, the whole core is read and handed on.  Nothing
is written outside the store (sfbt's cache is the store's own) but by
the chained handler."""

import os
import resource
import sys
import time

from .store import CrashStore

#: bytes of the core a kept core is compressed from at most
MAX_KEPT_CORE = 4 << 30


class _KeptCore:
    """The whole core xz-compressed into a temporary file of the store, kept
    (renamed core-BUCKET.xz) for a bucket's first crash."""

    def __init__(self, store):
        import lzma
        import tempfile
        self._store = store
        self._file = tempfile.NamedTemporaryFile(dir=store.path, prefix=".core-",
                                                 delete=False)
        self._compressor = lzma.LZMACompressor(preset=1)
        self._left = MAX_KEPT_CORE
        self.name = None

    def write(self, data):
        if self._left > 0:
            data = data[:self._left]
            self._left -= len(data)
            self._file.write(self._compressor.compress(data))

    def keep(self, bucket, first):
        """Called under the store's lock (CrashStore.add)."""
        self._file.write(self._compressor.flush())
        self._file.close()
        if first:
            self.name = f"core-{bucket}.xz"
            os.replace(self._file.name, self._store.file(self.name))
            return self.name
        os.unlink(self._file.name)
        return None

    def discard(self):
        if self.name is None:
            self._file.close()
            try:
                os.unlink(self._file.name)
            except FileNotFoundError:
                pass


def _pipe_limit():
    from .pattern import CORE_PIPE_LIMIT, read_setting
    try:
        return int(read_setting(CORE_PIPE_LIMIT))
    except (OSError, ValueError):
        return 0


def handle(arguments, stdin=0, settings=None):
    """Handle one core; returns the entry stored (of a core sfbt cannot
    read: what the kernel said, and why).  ``settings``: install's (the
    launcher holds them), else read from the store."""
    pid, tid, signal, seconds, uid, gid = (int(a) for a in arguments[:6])
    command = arguments[6] if len(arguments) > 6 else ""
    started = time.monotonic()
    store = CrashStore()
    os.environ["XDG_CACHE_HOME"] = store.file("cache")  # sfbt's cache: the store's
    if settings is None:
        settings = store.saved_settings() or {}
    if isinstance(settings.get("max_use"), int):
        store.max_use = settings["max_use"]
    chained = kept = None
    copies = []
    if settings.get("chain") and settings.get("core_pattern"):
        from .pattern import Chained, specifier_values
        chained = Chained(settings["core_pattern"],
                          specifier_values(pid, tid, signal, seconds, uid, gid, command),
                          pid, uid, gid)
        copies.append(chained.write)
    if settings.get("keep_core"):
        kept = _KeptCore(store)
        copies.append(kept.write)
    from .streamed import StreamError, StreamedCore
    entry = {"time": seconds, "pid": pid, "tid": tid, "uid": uid, "gid": gid,
             "signal": signal, "command": command}
    core = None
    try:
        try:
            core = StreamedCore(stdin, pid, module_files=_pipe_limit() > 0, copies=copies)
            archive_bytes, details = _walked(core, tid, signal, seconds, store.repeated)
            entry.update(details)
        except StreamError as error:
            entry.update({"error": str(error), "bucket": f"unread-{signal}",
                          "executable": "", "threads": 0})
            archive_bytes = b""
        if copies and core is not None:
            core.drain()  # the whole core first: a chained handler, a kept core
        entry["handler_ms"] = round(_since_exec_ms(started))
        entry["handler_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        stored = store.add(entry, archive_bytes, kept.keep if kept else None)
    finally:
        if copies and core is None:  # a core not read: still handed on
            _drain(stdin, copies)
        elif copies:
            core.drain()
        if core is not None:
            core.close()
        _release(stdin)
        if kept is not None:
            kept.discard()
        if chained is not None:
            chained.close()
    return stored


def _since_exec_ms(started):
    """Milliseconds since the kernel started this process (its start time
    in /proc/self/stat, in clock ticks: to 10 ms); since ``started`` (a
    time.monotonic()) where that cannot be read."""
    try:
        with open("/proc/self/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        began = int(fields[19]) / ticks
        return round((time.clock_gettime(time.CLOCK_BOOTTIME) - began) * 1000, 1)
    except (OSError, ValueError, IndexError):
        return round((time.monotonic() - started) * 1000, 1)


def _release(descriptor):
    """Let go of the core's pipe unread: the kernel's next write to it
    fails, which ends the dump (the rest of a 2 GB core is seconds of the
    kernel's copying) and releases the process it holds.  The descriptor
    is made /dev/null's, not closed (sys.stdin holds it)."""
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, descriptor, inheritable=False)
    finally:
        os.close(null)


def _drain(descriptor, copies=()):
    while True:
        data = os.read(descriptor, 1 << 20)
        if not data:
            return
        for copy in copies:
            copy(data)


def _walked(core, tid, signal, seconds, repeated):
    """(the crash's archive bytes, the index's fields of the walk), its
    events at the time the kernel gave (``seconds``, %t); when
    ``repeated(bucket)`` says the crash will only be counted, no thread
    is walked after the crashing one (the first), and no archive is made
    (nor its modules imported)."""
    from ..commands.backtrace import cbf_frames, walk
    from ..unwind.walk import STOP_LIMIT, STOP_OUTERMOST
    from .session import CrashSession
    from .store import bucket_of
    states = core.threads
    for state in states:
        if state.tid == core.pid and core.command and not state.name:
            state.name = core.command
    crashed = next((s for s in states if s.tid == tid), states[0])
    numbered = list(enumerate(states, 1))
    session = CrashSession(core.arch, core.modules(), core.read_memory, numbered,
                           core.executable())
    walks = []  # (thread, its CBF frames, truncated, where its kept stack was cut)
    crashed_frames, cut, crashed_cut_at, counted = [], 0, None, False
    for thread in session.threads():
        core.missed = None
        frames, stop = walk(session, thread)
        cut_at = None
        if stop not in (None, STOP_LIMIT, STOP_OUTERMOST):
            cut_at = core.stack_cut_at(thread.handle, core.missed)
        cut += cut_at is not None
        one = cbf_frames(frames)
        walks.append((thread, one, stop == STOP_LIMIT or cut_at is not None, cut_at))
        if thread.handle is crashed:
            crashed_frames, crashed_cut_at = one, cut_at
            if repeated(bucket_of(signal, crashed_frames, session.modules)):
                counted = True  # no archive kept
                break
    siginfo = core.siginfo or (signal, 0, 0, 0)
    details = {"executable": core.executable(), "threads": len(states),
               "mappings": core.mappings_count,
               "threads_left_out": core.threads_left_out, "code": siginfo[2],
               "address": siginfo[3], "crashed_tid": crashed.tid,
               "memory_from": core.memory_from,
               "bucket": bucket_of(signal, crashed_frames, session.modules)}
    if not details["threads_left_out"]:
        del details["threads_left_out"]
    if cut:  # walks that ran past the kept stacks (STACK_LIMIT, TOTAL_STACK_LIMIT)
        details["stacks_cut"] = cut
    if crashed_cut_at is not None:
        details["crashed_stack_cut_at"] = crashed_cut_at
    return (b"" if counted else _archive(core, session, walks, crashed, seconds)), details


def _archive(core, session, walks, crashed, seconds):
    """A standalone archive of the ``walks`` (each thread an event, the
    crashed thread's labelled), their image map once."""
    from ..archive import cbf
    from ..archive.imagemap import encode_image_map
    from ..archive.store import MAGIC, Archive
    from ..commands.save import image_map
    word_size = 8 * core.arch.pointer_size
    archive = Archive()
    images_index = archive.add_image_map(encode_image_map(image_map(session)))  # once
    now = seconds * 10**9  # (a whole second: a crash record holds it in 5 bytes, not 9)
    for thread, frames, truncated, cut_at in walks:
        trace = archive.add_trace(cbf.encode(frames, word_size, truncated))
        archive.stream_event(trace, images_index, now,
                             (core.arch.name, thread.label, session.stop_reason(thread),
                              "crashed" if thread.handle is crashed else ""),
                             (core.pid, thread.handle.tid, thread.handle.name,
                              cut_at is not None))
    return MAGIC + archive.pending_bytes()


def main(arguments, settings=None):
    """The crash-handler command: never a traceback, always exit 0 (the
    kernel ignores the status; a failure is written to the kernel's log).
    ``settings``: the store's, as the launcher holds them."""
    try:
        if len(arguments) < 6:
            raise ValueError("usage: sfbt crash-handler %P %i %s %t %u %g %e")
        handle(arguments, settings=settings)
    except Exception as error:  # one line in the kernel's log, never a traceback
        from ..printable import printable
        _log(f"sfbt crash-handler: {printable(str(error))}")
        try:
            _release(0)
        except OSError:
            pass
    return 0


def _log(line):
    """One line on standard error (the kernel gives the handler none) and
    in the kernel's log."""
    sys.stderr.write(line + "\n")
    try:
        with open("/dev/kmsg", "w") as stream:
            stream.write(line[:900] + "\n")
    except OSError:
        pass

