"""The command line's `sfbt stack`, `sfbt record` and `sfbt flame`."""

import sys

from ..errors import SfbtError
from ..printable import printable

#: the commands added here, in the order --help lists them
COMMANDS = ("stack", "record", "flame")
FORMATS = ("text", "archive", "cbf", "json", "lws")
#: the saved forms that hold one backtrace (a bare CBF, Swift's JSON)
ONE_BACKTRACE = ("cbf", "json")


def _pid(text):
    import argparse
    try:
        pid = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return pid


def _session(args, error_type):
    """(SnapshotSession, check after the walks, files refused) of the core
    or process the arguments name."""
    from .session import core_session, process_session
    if args.core:
        return core_session(args.core, args.target, args.thread, args.trust_files,
                            args.sysroot)
    if args.target is None:
        raise error_type("which process? (sfbt stack PID, or --core CORE)")
    return (process_session(_pid_or_error(args.target, error_type), args.thread,
                            warn=lambda line: print(f"sfbt: warning: {printable(line)}",
                                                    file=sys.stderr, flush=True)),
            lambda: None, {})


def _run_stack(args, error_type):
    from .. import progress
    if args.format != "text" and not args.output:
        raise error_type(f"--format {args.format} needs -o FILE")
    with progress.ProgressLine():
        text_or_message, refused = _stack(args, error_type)
    for path, why in refused.items():
        sys.stderr.write(f"sfbt: warning: {printable(path)}: {printable(why)}; its frames "
                         "are unknown (--trust-files reads it)\n")
    print(text_or_message, end="")


def _stack(args, error_type):
    """(what `sfbt stack` prints: the text, or where it saved it; the
    files the core names that were not read: path -> why)."""
    from ..files import write_atomically
    from .stack import save_stacks, stack_text
    try:
        session, check, refused = _session(args, error_type)
        count = len(session.numbered)
        if args.format in ONE_BACKTRACE and count > 1:
            raise error_type(f"--format {args.format} holds one backtrace and "
                             f"{args.core or 'process ' + args.target} has "
                             f"{count} threads: add --thread TID, or use "
                             "--format archive")
        if args.format == "text":
            text = stack_text(session, ["-v"] if args.verbose else [])
            check()  # a core that changed while it was walked: one line, no stacks
            if not args.output:
                return text, refused
            write_atomically(args.output, text.encode())
            return "", refused
        return printable(save_stacks(session, args.output, args.format, check)) + "\n", refused
    except SfbtError as error:
        if isinstance(error, error_type):
            raise
        raise error_type(str(error)) from None
    except OSError as error:
        raise error_type(f"{getattr(error, 'filename', None) or args.output}: "
                         f"{error.strerror or error}") from None
    except KeyboardInterrupt:
        raise error_type("interrupted") from None


def _pid_or_error(text, error_type):
    try:
        return _pid(text)
    except Exception:
        raise error_type(f"not a process id: {text!r} (for a core: "
                         "sfbt stack --core CORE [EXE])") from None


#: the bounds of --stack-size (perf_events.MAX_STACK_COPY, the kernel's most)
MIN_STACK_SIZE, MAX_STACK_SIZE = 512, 65528
#: the largest --backlog, in MiB
MAX_BACKLOG_MB = 1 << 20


def _check_record_args(args, error_type):
    import math
    from .record import MAX_HZ, MIN_HZ
    targets = (args.pid is not None) + args.all + bool(args.command)
    if targets != 1:
        raise error_type("which process? (-p PID, -a for every process, or -- COMMAND "
                         "ARGS..., one of them)")
    if args.all and args.idle:
        raise error_type("--idle samples one process (-p PID or -- COMMAND), not -a")
    # comparisons that NaN fails
    if not MIN_HZ <= args.hz <= MAX_HZ:
        raise error_type(f"--hz {args.hz:g}: a rate from {MIN_HZ:g} to {MAX_HZ:g} "
                         "samples a second")
    if args.duration is not None and not 0 < args.duration < math.inf:
        raise error_type(f"--duration {args.duration:g}: a finite number of seconds above 0")
    if not MIN_STACK_SIZE <= args.stack_size <= MAX_STACK_SIZE:
        raise error_type(f"--stack-size {args.stack_size}: bytes from {MIN_STACK_SIZE} to "
                         f"{MAX_STACK_SIZE}")
    if args.backlog is not None:
        if args.idle:
            raise error_type("--backlog keeps the samples of perf events, not --idle's")
        if not 0 <= args.backlog <= MAX_BACKLOG_MB:
            raise error_type(f"--backlog {args.backlog:g}: megabytes from 0 to "
                             f"{MAX_BACKLOG_MB}")


#: what a command started for `sfbt record --` runs first: it waits at its
#: gate (a descriptor, read until the other end is closed), then execs
_GATE = ("import os, sys\n"
         "os.read(int(sys.argv[1]), 1)\n"
         "os.close(int(sys.argv[1]))\n"
         "try:\n"
         "    os.execvp(sys.argv[2], sys.argv[2:])\n"
         "except OSError as error:\n"
         "    sys.stderr.write(f'sfbt: {sys.argv[2]!r}: {error.strerror}\\n')\n"
         "    os._exit(127)\n")


def _start_command(command, error_type):
    """(subprocess.Popen of ``command``, the descriptor whose closing lets
    it run): it waits before its exec, so that its events are opened
    first."""
    import os
    import shutil
    import subprocess
    if shutil.which(command[0]) is None:
        raise error_type(f"{printable(command[0])}: no such command")
    gate, opener = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-S", "-c", _GATE, str(gate), *command],
                                 pass_fds=(gate,))
    except OSError as error:
        os.close(opener)
        raise error_type(f"{printable(command[0])}: {error.strerror or error}") from None
    finally:
        os.close(gate)
    return child, opener


def _open_gate(child, opener):
    """Let ``child`` exec, and wait (a second at most) until it did: its
    program, not sfbt's, is what a recorder then reads."""
    import os
    import time
    before = os.readlink(f"/proc/{child.pid}/exe")
    os.close(opener)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and child.poll() is None:
        try:
            if os.readlink(f"/proc/{child.pid}/exe") != before:
                return
        except OSError:
            return
        time.sleep(0.001)


def _recorder(args, say, error_type):
    """The stack source of the arguments: perf events, or where --idle or
    the kernel refuses them, ptrace (said in one line)."""
    from .record import Recorder
    child = opener = None
    if args.command:
        child, opener = _start_command(args.command, error_type)
    pid = child.pid if child is not None else args.pid
    try:
        if not args.idle:
            from .perf_events import PerfUnavailable
            from .perf_source import PerfRecorder
            try:
                label = (f"sfbt record of {' '.join(args.command)} at {args.hz:g} Hz on CPU"
                         if child is not None else "")
                backlog = {} if args.backlog is None else \
                    {"backlog": int(args.backlog * (1 << 20))}
                return PerfRecorder(None if args.all else pid, args.hz, args.stack_size,
                                    label=label, command=child, command_gate=opener,
                                    say=say, **backlog), child
            except PerfUnavailable as refused:
                if args.all:
                    raise error_type(f"{refused}: -a needs them") from None
                say(f"sfbt record: {refused}: sampling with ptrace instead (every "
                    "thread on the wall clock, as --idle does)")
        if child is not None:
            _open_gate(child, opener)
            opener = None
        return Recorder(pid, args.hz, say=say), child
    except BaseException:
        if child is not None:
            if opener is not None:
                import os
                os.close(opener)
            child.kill()
            child.wait()
        raise


def _run_record(args, error_type):
    _check_record_args(args, error_type)
    import errno
    import os
    from ..files import FileProblem, WritePlace
    try:  # said before recording, not after
        with WritePlace(args.output) as place:
            if not os.access(".", os.W_OK, dir_fd=place.directory):
                raise FileProblem(args.output, os.strerror(errno.EACCES), errno.EACCES)
    except FileProblem as problem:
        raise error_type(str(problem)) from None
    output = printable(args.output)

    from .. import progress
    line = progress.ProgressLine()  # until the first sample is walked
    child = None

    def say(said):
        print(printable(said), file=sys.stderr, flush=True)

    def started():
        line.stop()
        what = ("every process" if args.all else
                f"{printable(args.command[0])} (process {child.pid})" if child is not None
                else f"process {args.pid}")
        until = ("for %g s" % args.duration if args.duration else
                 "until Ctrl-C" if args.all else "until it exits")
        print(f"Recording {what} at {args.hz:g} Hz {recorder.how} ({until}; Ctrl-C stops).",
              file=sys.stderr, flush=True)

    try:
        line.start()
        try:
            recorder, child = _recorder(args, say, error_type)
            try:
                failure = recorder.record(args.output, args.duration, started)
            finally:
                recorder.close()
                if child is not None:
                    child.wait()
        finally:
            line.stop()
    except SfbtError as error:
        raise error_type(str(error)) from None
    except OSError as error:
        raise error_type(f"{output}: {error.strerror or error}") from None
    except KeyboardInterrupt:  # before the recording began
        raise error_type("interrupted") from None
    try:
        print(recorder.summary(output), flush=True)
    except OSError:  # standard output gone (SIGHUP: the terminal closed)
        pass
    if failure is not None:
        raise error_type(f"{output}: {failure.strerror or failure}: the recording "
                         f"stopped; the {recorder.stats.kept} stacks written before "
                         "are kept")


def _run_flame(args, error_type):
    from ..archive.saved import input_name
    from ..files import FileProblem, write_atomically
    from ..outputs import Options, write
    from .perf_data import open_saved
    try:
        with open_saved(args.file) as saved:
            options = Options(args.per_thread, args.title or f"sfbt: {args.file}")
            chunks, samples = write(args.format, saved, options)
            data = b"".join(chunks)
            damage = saved.error
    except FileProblem as problem:
        raise error_type(str(problem)) from None
    except (SfbtError, OSError) as error:
        raise error_type(f"{input_name(args.file)}: "
                         f"{getattr(error, 'strerror', None) or error}") from None
    if damage is not None and not samples.distinct:
        raise error_type(str(damage))
    try:
        write_atomically(args.output, data)
    except OSError as error:
        raise error_type(f"{args.output}: {error.strerror or error}") from None
    cut = f", {samples.stacks - samples.cut} complete, {samples.cut} cut" if samples.cut else ""
    print(f"{printable(args.output)}: {args.format} of {samples.stacks} stacks "
          f"({samples.distinct} distinct{cut})")
    if damage is not None:
        raise error_type(f"{damage} (the stacks before it were drawn)")


def add_commands(commands, error_type, names=COMMANDS):
    """Add the commands ``names`` (of COMMANDS, in its order) to the command
    line's subparsers; their errors are raised as ``error_type`` (printed
    as one line)."""
    for name in names:
        _ADDERS[name](commands, error_type)


def _add_stack(commands, error_type):
    from ..usage import with_example  # argparse: not for sfbt --version
    stack = commands.add_parser(
        "stack", help="every thread's backtrace of a running process or a "
        "core file, unwound with SFrame data, without a debugger",
        **with_example("sfbt stack 4242", "every thread's backtrace of process 4242"))
    stack.add_argument("target", nargs="?", metavar="PID | EXE",
                       help="the process id; with --core, the core's executable "
                       "(optional: checked against the core)")
    stack.add_argument("--core", metavar="CORE", help="read a core file instead")
    stack.add_argument("--trust-files", action="store_true",
                       help="with --core: read every file the core names, even "
                       "one the core's owner could not read")
    stack.add_argument("--sysroot", metavar="DIR",
                       help="with --core: look for the core's libraries under DIR "
                       "first, as gdb's `set sysroot` (a core of another machine, "
                       "qemu-user's cores)")
    stack.add_argument("--thread", type=int, metavar="TID",
                       help="only this thread (its LWP id)")
    stack.add_argument("--format", choices=FORMATS, default="text",
                       help="text (default), or saved with -o as cbf-save saves: "
                       "archive or lws hold every thread, cbf or json one "
                       "backtrace (with --thread TID, unless there is one thread)")
    stack.add_argument("-o", "--output", metavar="FILE",
                       help="where to write (the text too, instead of stdout)")
    stack.add_argument("-v", "--verbose", action="store_true",
                       help="text: say how each frame was found, as sframe-bt -v "
                       "does ([tailcall] for a frame a tail call left off the stack)")
    stack.set_defaults(run=lambda args: _run_stack(args, error_type))


def _add_record(commands, error_type):
    from ..usage import with_example
    record = commands.add_parser(
        "record", help="sample the stacks of the threads on a processor (the "
        "kernel's perf events) of a process, a command or every process, or of "
        "every thread with --idle, into one archive (each distinct stack once, "
        "with a count)",
        **with_example("sfbt record -p 4242 --duration 10 -o profile.sfbt",
                       "sample process 4242 at 99 Hz for 10 seconds"))
    record.add_argument("-p", "--pid", type=_pid, metavar="PID",
                        help="the process to sample")
    record.add_argument("-a", "--all", action="store_true",
                        help="every process of the machine (perf events only)")
    record.add_argument("--idle", action="store_true",
                        help="every thread on the wall clock, sleeping ones too (ptrace: "
                        "each sample stops each thread briefly); default: the threads "
                        "on a processor, sampled by the kernel's perf events")
    record.add_argument("--stack-size", type=int, default=MAX_STACK_SIZE, metavar="BYTES",
                        help="the user stack the kernel copies per sample (default "
                        "and most 65528); a deeper stack is kept as truncated")
    record.add_argument("--hz", type=float, default=99.0,
                        help="samples a second (default 99)")
    record.add_argument("--backlog", type=float, metavar="MB",
                        help="perf events: the samples kept, while no processor is "
                        "free, to walk once one is (or when the recording ends), at "
                        "most MB megabytes of them (default 256; past it the oldest "
                        "are walked at once; 0 walks each as it is read)")
    record.add_argument("--duration", type=float, metavar="S",
                        help="seconds to record (default: until the process exits "
                        "or Ctrl-C)")
    record.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the archive to write (read it with sfbt fold, "
                        "sfbt flame, sfbt cbf decode)")
    record.add_argument("command", nargs="*", metavar="-- COMMAND ARGS",
                        help="start COMMAND and sample it until it exits")
    record.set_defaults(run=lambda args: _run_record(args, error_type))


def _add_flame(commands, error_type):
    from ..usage import with_example
    flame = commands.add_parser(
        "flame", help="draw saved stacks (sfbt record, cbf-save) as an interactive "
        "SVG flame graph, or write speedscope's JSON or a pprof profile",
        **with_example("sfbt flame profile.sfbt -o profile.svg",
                       "a recording as a flame graph to open in a browser"))
    flame.add_argument("file", metavar="FILE",
                       help="an archive, a .cbf, JSON or lws file, or a perf.data "
                       "(perf record --call-graph dwarf)")
    flame.add_argument("-o", "--output", required=True, metavar="OUT")
    flame.add_argument("--format", choices=("svg", "speedscope", "pprof"), default="svg",
                       help="svg (default), speedscope (JSON) or pprof (gzipped "
                       "profile.proto, for go tool pprof, Pyroscope, Parca, Grafana)")
    flame.add_argument("--title", help="the graph's title (default: the file name)")
    flame.add_argument("--per-thread", action="store_true",
                       help="each thread's stacks apart: under a root frame per thread "
                       "(NAME (TID)), one speedscope profile per thread")
    flame.set_defaults(run=lambda args: _run_flame(args, error_type))


_ADDERS = {"stack": _add_stack, "record": _add_record, "flame": _add_flame}
