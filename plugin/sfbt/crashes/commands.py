"""The command line's `sfbt crash-handler` (what the kernel runs) and
`sfbt crashes install|uninstall|list|show` (docs/crashes.md)."""

import os
import sys

from ..errors import SfbtError
from ..printable import printable

COMMANDS = ("crash-handler", "crashes")


def _store(args, error_type, create=False):
    from ..files import FileProblem
    from .store import CrashStore
    try:
        store = CrashStore(args.store, create=create)
    except FileProblem as problem:
        raise error_type(str(problem)) from None
    return store


def _run_install(args, error_type):
    from ..files import replace_file
    from .pattern import (CORE_PATTERN, CORE_PIPE_LIMIT, LAUNCHER, PIPE_LIMIT, PatternError,
                          handler_pattern, launcher_text, read_setting, write_setting)
    from .store import store_path
    launcher = os.path.join(os.path.abspath(store_path(args.store)), LAUNCHER)
    try:
        pattern = handler_pattern(launcher)
        current, pipe_limit = read_setting(CORE_PATTERN), read_setting(CORE_PIPE_LIMIT)
    except (PatternError, OSError) as error:
        raise error_type(str(error)) from None
    store = _store(args, error_type, create=True)
    saved = store.saved_settings()
    if current == pattern and saved:  # installed already: the first settings stay
        current, pipe_limit = saved["core_pattern"], saved["core_pipe_limit"]
    if args.chain and current.startswith(f"|{launcher} "):
        raise error_type("--chain: the handler there is sfbt's own")
    settings = {"core_pattern": current, "core_pipe_limit": pipe_limit,
                "chain": args.chain, "keep_core": args.keep_core}
    if args.max_use is not None:
        settings["max_use"] = args.max_use
    try:
        replace_file(launcher, lambda out: out.write(launcher_text(store.path, settings)
                                                  .encode()),
                     0o700)
        store.save_settings(settings)
        write_setting(CORE_PIPE_LIMIT, str(max(int(pipe_limit or 0), PIPE_LIMIT)))
        write_setting(CORE_PATTERN, pattern)
    except (OSError, ValueError) as error:
        _restore(current, pipe_limit)
        raise error_type(f"{CORE_PATTERN}: {getattr(error, 'strerror', None) or error}") \
            from None
    chained = f"; each core handed on to {printable(current)}" if args.chain else ""
    print(f"core_pattern is {printable(pattern)}{chained}; crashes kept in "
          f"{printable(store.path)} (was {printable(current)})")


def _restore(pattern, pipe_limit):
    from .pattern import CORE_PATTERN, CORE_PIPE_LIMIT, write_setting
    try:
        write_setting(CORE_PATTERN, pattern)
        write_setting(CORE_PIPE_LIMIT, pipe_limit)
    except OSError:
        pass


def _run_uninstall(args, error_type):
    from .pattern import (CORE_PATTERN, CORE_PIPE_LIMIT, LAUNCHER, read_setting,
                          write_setting)
    store = _store(args, error_type)
    settings = store.saved_settings()
    if not settings:
        raise error_type(f"{printable(store.path)}: not installed (no settings kept)")
    current = read_setting(CORE_PATTERN)
    if not current.startswith(f"|{store.file(LAUNCHER)} "):
        store.forget_settings()
        raise error_type(f"core_pattern is {printable(current)}, not sfbt's: left as it is")
    try:
        write_setting(CORE_PATTERN, settings["core_pattern"])
        write_setting(CORE_PIPE_LIMIT, settings["core_pipe_limit"])
    except OSError as error:
        raise error_type(f"{CORE_PATTERN}: {error.strerror or error}") from None
    store.forget_settings()
    print(f"core_pattern is {printable(settings['core_pattern'])} again")


def _run_list(args, error_type):
    from .show import list_text
    sys.stdout.write(list_text(_store(args, error_type).entries()))


def _run_show(args, error_type):
    from ..archive.symbolize import Symbolizer
    from ..files import write_atomically
    from ..archive.store import MAGIC
    from .show import crash_archive, crash_threads, show_json, show_pprof, show_text
    store = _store(args, error_type)
    found = store.find(args.crash)
    if not found:
        raise error_type(f"no crash {printable(args.crash)} in {printable(store.path)}")
    buckets = {entry.get("bucket") for entry in found}
    if len(buckets) > 1:
        raise error_type(f"{printable(args.crash)} names {len(buckets)} buckets: "
                         "give more of the bucket")
    every = store.entries()
    count = sum(1 for e in every if e.get("bucket") in buckets)
    # a crash counted in its bucket is shown by the bucket's kept one
    kept = [e for e in found if e.get("file")] or [
        e for e in every if e.get("bucket") in buckets and e.get("file")]
    if not kept:
        raise error_type(f"crash {printable(args.crash)}: no backtraces of its bucket "
                         "are kept (removed for the size cap)")
    entry = kept[0]
    if args.format in ("pprof", "archive") and not args.output:
        raise error_type(f"--format {args.format} needs -o FILE")
    symbolizer = Symbolizer(executables=args.exe, debug_dirs=args.debug_dir)
    try:
        threads = crash_threads(store.file(entry["file"]), *entry["seg"][1:])
        if args.format == "archive":
            data = MAGIC + crash_archive(threads).pending_bytes()
        elif args.format == "pprof":
            data = show_pprof(threads, symbolizer)
        elif args.format == "json":
            data = show_json(entry, count, threads, symbolizer).encode()
        else:
            data = show_text(entry, count, threads, symbolizer).encode()
        if args.output:
            write_atomically(args.output, data)
        else:
            sys.stdout.write(data.decode())
    except (SfbtError, OSError) as error:
        raise error_type(f"crash {entry['id']}: {getattr(error, 'strerror', None) or error}") \
            from None


def _run_handler(args, error_type):
    from .handler import main
    sys.exit(main(args.arguments))


def add_commands(commands, error_type, names=COMMANDS):
    for name in names:
        _ADDERS[name](commands, error_type)


def _add_handler(commands, error_type):
    from ..usage import with_example
    handler = commands.add_parser(
        "crash-handler", help="what the kernel runs for each core (core_pattern, set by "
        "sfbt crashes install): the core on standard input",
        **with_example("cat core | sfbt crash-handler 4242 4242 11 1795900000 1000 1000 "
                       "crasher", "keep a core's backtraces as the kernel would have"))
    handler.add_argument("arguments", nargs="*", metavar="%P %i %s %t %u %g %e")
    handler.set_defaults(run=lambda args: _run_handler(args, error_type))


def _max_use(text):
    import argparse
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        value = int(text[:-1]) * units[text[-1].upper()] if text[-1:].upper() in units \
            else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return value


def _add_crashes(commands, error_type):
    from ..usage import with_example
    crashes = commands.add_parser(
        "crashes", help="keep the machine's crashes as backtraces: install sfbt as the "
        "kernel's core handler, list and show what it kept",
        **with_example("sfbt crashes install --chain", "keep every crash's backtraces, "
                       "and hand each core on to the handler that was there"))
    crash_commands = crashes.add_subparsers(dest="crashes_command", metavar="SUBCOMMAND",
                                            required=True)

    def with_store(parser):
        parser.add_argument("--store", metavar="DIR",
                            help="the crash store (default $SFBT_CRASH_STORE, else "
                            "/var/lib/sfbt/crashes)")
        return parser

    install = with_store(crash_commands.add_parser(
        "install", help="set core_pattern to sfbt's handler (the settings there kept "
        "to be put back by uninstall)",
        **with_example("sfbt crashes install --chain --max-use 256M",
                       "sfbt's handler, and the one that was there handed each core")))
    install.add_argument("--chain", action="store_true",
                         help="hand each whole core on to the handler that was there "
                         "(a |program, or a file as the kernel writes it)")
    install.add_argument("--keep-core", action="store_true",
                         help="also keep the xz-compressed core of each bucket's "
                         "first crash")
    install.add_argument("--max-use", type=_max_use, metavar="SIZE",
                         help="the store's size cap (default 64M; oldest crashes out first)")
    install.set_defaults(run=lambda args: _run_install(args, error_type))
    uninstall = with_store(crash_commands.add_parser(
        "uninstall", help="put back the core_pattern and core_pipe_limit install replaced",
        **with_example("sfbt crashes uninstall", "core_pattern as it was before install")))
    uninstall.set_defaults(run=lambda args: _run_uninstall(args, error_type))
    listed = with_store(crash_commands.add_parser(
        "list", help="the crashes kept: time, PID, UID, signal, bucket, count, executable",
        **with_example("sfbt crashes list", "every crash the store holds, oldest first")))
    listed.set_defaults(run=lambda args: _run_list(args, error_type))
    show = with_store(crash_commands.add_parser(
        "show", help="a crash's threads, symbolized now (debug files, debuginfod, "
        "inline frames)",
        **with_example("sfbt crashes show 3 --format json -o crash.json",
                       "crash 3's threads as JSON")))
    show.add_argument("crash", metavar="ID|BUCKET")
    show.add_argument("--format", choices=("text", "json", "pprof", "archive"),
                      default="text", help="archive: the crash as an sfbt archive of its "
                      "own (cbf-load FILE opens it in GDB and LLDB)")
    show.add_argument("-o", "--output", metavar="FILE")
    show.add_argument("--exe", action="append", default=[], metavar="FILE",
                      help="an image's file, found by its build id")
    show.add_argument("--debug-dir", action="append", default=[], metavar="DIR")
    show.set_defaults(run=lambda args: _run_show(args, error_type))


_ADDERS = {"crash-handler": _add_handler, "crashes": _add_crashes}
