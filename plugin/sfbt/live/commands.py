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
        return core_session(args.core, args.target, args.thread, args.trust_files)
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


def _run_record(args, error_type):
    import math
    from .record import MAX_HZ, MIN_HZ, Recorder, summary
    # comparisons that NaN fails
    if not MIN_HZ <= args.hz <= MAX_HZ:
        raise error_type(f"--hz {args.hz:g}: a rate from {MIN_HZ:g} to {MAX_HZ:g} "
                         "samples a second")
    if args.duration is not None and not 0 < args.duration < math.inf:
        raise error_type(f"--duration {args.duration:g}: a finite number of seconds above 0")
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

    def started():
        line.stop()
        print(f"Recording process {args.pid} at {args.hz:g} Hz "
              f"({'for %g s' % args.duration if args.duration else 'until it exits'}"
              "; Ctrl-C stops).", file=sys.stderr, flush=True)

    try:
        line.start()
        try:
            recorder = Recorder(args.pid, args.hz, say=lambda said: print(
                printable(said), file=sys.stderr, flush=True))
            try:
                failure = recorder.record(args.output, args.duration, started)
            finally:
                recorder.close()
        finally:
            line.stop()
    except SfbtError as error:
        raise error_type(str(error)) from None
    except OSError as error:
        raise error_type(f"{output}: {error.strerror or error}") from None
    except KeyboardInterrupt:  # before the recording began
        raise error_type("interrupted") from None
    try:
        print(summary(recorder, output), flush=True)
    except OSError:  # standard output gone (SIGHUP: the terminal closed)
        pass
    if failure is not None:
        raise error_type(f"{output}: {failure.strerror or failure}: the recording "
                         f"stopped; the {recorder.stats.kept} stacks written before "
                         "are kept")


def _run_flame(args, error_type):
    from ..archive.saved import SavedFile, input_name
    from ..files import FileProblem, write_atomically
    try:
        with SavedFile(args.file) as saved:
            if args.format == "pprof":
                from .pprof import PprofProfile
                profile = PprofProfile()
                for trace in saved.traces():
                    profile.add(trace)
                data = profile.encode(saved.recording)
                total, distinct = profile.stacks, profile.distinct
            else:
                from .flame import flame_svg, folded_stacks, speedscope
                stacks = folded_stacks(saved.traces())
                total, distinct = sum(weight for _, weight in stacks), len(stacks)
                title = args.title or f"sfbt: {args.file}"
                details = saved.recording.describe() if saved.recording else \
                    f"{total} stack{'s' if total != 1 else ''}"
                text = speedscope(stacks, title) if args.format == "speedscope" \
                    else flame_svg(stacks, title, details)
                data = text.encode()
            damage = saved.error
    except FileProblem as problem:
        raise error_type(str(problem)) from None
    except (SfbtError, OSError) as error:
        raise error_type(f"{input_name(args.file)}: "
                         f"{getattr(error, 'strerror', None) or error}") from None
    if damage is not None and not distinct:
        raise error_type(str(damage))
    try:
        write_atomically(args.output, data)
    except OSError as error:
        raise error_type(f"{args.output}: {error.strerror or error}") from None
    print(f"{printable(args.output)}: {args.format} of {total} stacks ({distinct} distinct)")
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
        "record", help="sample every thread's stack of a running process at a "
        "fixed rate into one archive (each distinct stack once, with a count)",
        **with_example("sfbt record -p 4242 --duration 10 -o profile.sfbt",
                       "sample process 4242 at 99 Hz for 10 seconds"))
    record.add_argument("-p", "--pid", type=_pid, required=True, metavar="PID")
    record.add_argument("--hz", type=float, default=99.0,
                        help="samples a second (default 99)")
    record.add_argument("--duration", type=float, metavar="S",
                        help="seconds to record (default: until the process exits "
                        "or Ctrl-C)")
    record.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the archive to write (read it with sfbt fold, "
                        "sfbt flame, sfbt cbf decode)")
    record.set_defaults(run=lambda args: _run_record(args, error_type))


def _add_flame(commands, error_type):
    from ..usage import with_example
    flame = commands.add_parser(
        "flame", help="draw saved stacks (sfbt record, cbf-save) as an interactive "
        "SVG flame graph, or write speedscope's JSON or a pprof profile",
        **with_example("sfbt flame profile.sfbt -o profile.svg",
                       "a recording as a flame graph to open in a browser"))
    flame.add_argument("file", metavar="FILE",
                       help="an archive, a .cbf, JSON or lws file")
    flame.add_argument("-o", "--output", required=True, metavar="OUT")
    flame.add_argument("--format", choices=("svg", "speedscope", "pprof"), default="svg",
                       help="svg (default), speedscope (JSON) or pprof (gzipped "
                       "profile.proto, for go tool pprof, Pyroscope, Parca, Grafana)")
    flame.add_argument("--title", help="the graph's title (default: the file name)")
    flame.set_defaults(run=lambda args: _run_flame(args, error_type))


_ADDERS = {"stack": _add_stack, "record": _add_record, "flame": _add_flame}
