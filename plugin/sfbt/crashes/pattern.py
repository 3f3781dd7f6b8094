"""The kernel's core_pattern: sfbt's handler put in (install), the
settings it replaced put back (uninstall), and each core handed on to
the handler that was there before (--chain): a ``|program args`` pattern
run with its % specifiers expanded, or a file pattern written as the
kernel writes it (in the crashing process's root and directory, as its
user, within its RLIMIT_CORE)."""

import os
import sys

CORE_PATTERN = "/proc/sys/kernel/core_pattern"
CORE_PIPE_LIMIT = "/proc/sys/kernel/core_pipe_limit"
CORE_USES_PID = "/proc/sys/kernel/core_uses_pid"
#: the kernel's limit on core_pattern (CORENAME_MAX_SIZE), its newline included
MAX_PATTERN = 128
#: what the kernel passes the handler (crash-handler's arguments)
SPECIFIERS = "%P %i %s %t %u %g %e"
#: the handlers core_pipe_limit lets run at once, while the kernel keeps
#: each crashing process (and its /proc/PID) until its handler exits
PIPE_LIMIT = 16
LAUNCHER = "sfbt"
#: the crash handler's gc.set_threshold: at Python's 700, the objects its
#: imports make (some 100 modules) set off 14 collections (8 to 13 ms of
#: its 90 ms of CPU) that found 99 objects to free; at 20,000 a crash of
#: 10 threads sets off none, and a crash of thousands still collects
HANDLER_GC_THRESHOLD = 20000


class PatternError(Exception):
    pass


def read_setting(path):
    with open(path) as stream:
        return stream.read().rstrip("\n")


def write_setting(path, value):
    with open(path, "w") as stream:
        stream.write(value + "\n")


def launcher_text(store_path, settings):
    """The sfbt command line the kernel runs: this Python, this sfbt, its
    store fixed (the kernel gives a handler no environment to name it),
    and the store's ``settings`` (a dict of strings, numbers and booleans)
    as a literal, which the handler takes instead of reading the store's
    settings file (JSON: the json module is a fifth of its imports).  The
    handler's process ends with os._exit, once its output is flushed:
    the interpreter's teardown (its 100 modules freed one by one) was a
    fifth of the handler's CPU, and the handler closes every file it
    writes before it returns.  Its cyclic garbage collector runs after
    HANDLER_GC_THRESHOLD allocations, not 700."""
    plugin = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return (f"#!{sys.executable} -IS\n"
            "import os, sys\n"
            "for fd in (1, 2):  # the kernel gives a handler no stdout, stderr\n"
            "    try:\n"
            "        os.fstat(fd)\n"
            "    except OSError:\n"
            "        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)\n"
            "sys.stdout = sys.stdout or open(1, 'w', closefd=False)\n"
            "sys.stderr = sys.stderr or open(2, 'w', closefd=False)\n"
            f"sys.path.insert(0, {plugin!r})\n"
            f"os.environ['SFBT_CRASH_STORE'] = {store_path!r}\n"
            "if sys.argv[1:2] == ['crash-handler']:  # the kernel: no argparse\n"
            "    import gc\n"
            f"    gc.set_threshold({HANDLER_GC_THRESHOLD})  # not 14 collections in its imports\n"
            "    from sfbt.crashes.handler import main\n"
            f"    status = main(sys.argv[2:], {settings!r})\n"
            "    sys.stdout.flush()\n"
            "    sys.stderr.flush()\n"
            "    os._exit(status)  # all it wrote is closed: no interpreter teardown\n"
            "from sfbt.cli import main\n"
            "sys.exit(main())\n")


def handler_pattern(launcher):
    pattern = f"|{launcher} crash-handler {SPECIFIERS}"
    if len(pattern) + 1 > MAX_PATTERN:
        raise PatternError(f"core_pattern {pattern!r} would be {len(pattern) + 1} bytes "
                           f"with its newline, over the kernel's {MAX_PATTERN}: use a "
                           "store with a shorter path")
    if " " in launcher or "%" in launcher:
        raise PatternError(f"{launcher!r}: a store path with a space or % cannot be "
                           "in core_pattern")
    return pattern


def expand(pattern, values):
    """``pattern`` with its % specifiers replaced (the kernel's
    format_corename): ``values`` maps a specifier letter to its text."""
    out, at = [], 0
    while at < len(pattern):
        char = pattern[at]
        if char == "%" and at + 1 < len(pattern):
            letter = pattern[at + 1]
            out.append("%" if letter == "%" else values.get(letter, ""))
            at += 2
        else:
            out.append(char)
            at += 1
    return "".join(out)


def specifier_values(pid, tid, signal, seconds, uid, gid, command):
    """The text of each % specifier for the crashing process ``pid``
    (what the handler was given, and what /proc says of the rest)."""
    values = {"P": str(pid), "i": str(tid), "I": str(tid), "s": str(signal),
              "t": str(seconds), "u": str(uid), "g": str(gid), "e": command,
              "h": os.uname().nodename, "d": "1", "p": str(pid), "c": "0"}
    try:
        with open(f"/proc/{pid}/status", "rb") as stream:
            for line in stream.read(1 << 16).split(b"\n"):
                if line.startswith(b"NSpid:"):
                    values["p"] = line.split()[-1].decode()
    except OSError:
        pass
    limit = core_limit(pid)
    values["c"] = "18446744073709551615" if limit is None else str(limit)
    try:
        executable = os.readlink(f"/proc/{pid}/exe")
        values["E"] = executable.replace("/", "!")
        values["f"] = os.path.basename(executable)
    except OSError:
        values["E"] = values["f"] = command
    return values


def core_limit(pid):
    """The crashing process's RLIMIT_CORE soft limit in bytes (None:
    unlimited); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/limits") as stream:
            for line in stream:
                if line.startswith("Max core file size"):
                    soft = line[len("Max core file size"):].split()[0]
                    return None if soft == "unlimited" else int(soft)
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Chained:
    """The previous handler of ``pattern`` fed the whole core: ``write``
    each chunk, then ``close``."""

    def __init__(self, pattern, values, pid, uid, gid):
        self._process = None
        self._child = None
        self._out = None
        self._left = None  # bytes a file may still take (RLIMIT_CORE)
        if pattern.startswith("|"):
            words = [expand(word, values) for word in pattern[1:].split()]
            if words:
                import subprocess  # only here: the handler starts faster without it
                self._process = subprocess.Popen(
                    words, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, cwd="/", close_fds=True)
                self._out = self._process.stdin.fileno()
            return
        limit = core_limit(pid)
        if limit == 0 or not pattern:
            return
        name = expand(pattern, values)
        if "%p" not in pattern and _uses_pid():
            name += f".{values['p']}"
        self._left = limit
        self._start_file_writer(name, pid, uid, gid)

    def _start_file_writer(self, name, pid, uid, gid):
        """A child writes the file: in the process's root and directory,
        as its user, as the kernel does (never as root through the
        container's paths)."""
        try:
            directory = os.open(f"/proc/{pid}/cwd", os.O_PATH | os.O_DIRECTORY)
        except OSError:
            return
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover (the child)
            status = 1
            try:
                os.close(write_end)
                os.chroot(f"/proc/{pid}/root")
                os.fchdir(directory)
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                              0o600)
                found = os.fstat(out)
                if (found.st_nlink == 1 and found.st_uid == uid
                        and (found.st_mode & 0o170000) == 0o100000):
                    os.ftruncate(out, 0)
                    while True:
                        data = os.read(read_end, 1 << 20)
                        if not data:
                            break
                        os.write(out, data)
                    status = 0
            except BaseException:
                pass
            os._exit(status)
        os.close(read_end)
        os.close(directory)
        self._child, self._out = child, write_end

    def write(self, data):
        if self._out is None:
            return
        if self._left is not None:
            data = data[:self._left]
            self._left -= len(data)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view):]
        except OSError:  # the chained handler stopped reading
            self._stop()

    def _stop(self):
        if self._process is not None:
            self._process.stdin.close()
        elif self._out is not None:
            os.close(self._out)
        self._out = None

    def close(self):
        self._stop()
        if self._process is not None:
            self._process.wait()
        if self._child is not None:
            os.waitpid(self._child, 0)


def _uses_pid():
    try:
        return read_setting(CORE_USES_PID).strip() == "1"
    except OSError:
        return False
