"""The ``sfbt`` command line.

Each command imports what it uses when it runs: `sfbt --version` or
`sfbt stack` do not pay for the SFrame dumper, the archive codecs or the
symbolizer of `cbf decode`.
"""

import sys

from . import __version__
from .errors import CommandError, SfbtError, left_out_warning
from .crashes.commands import COMMANDS as CRASH_COMMANDS
from .crashes.commands import add_commands as add_crash_commands
from .live.commands import COMMANDS as LIVE_COMMANDS
from .live.commands import add_commands as add_live_commands
from .printable import printable


#: The largest raw .sframe section file read (--raw).
MAX_SECTION_BYTES = 1 << 30


def _address(text):
    import argparse
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address: {text!r}") from None


def _failure(path, error):
    """One line for an error reading ``path``."""
    message = error.strerror if isinstance(error, OSError) and error.strerror else error
    return CommandError(f"{path}: {message}")


def _synthesized(path, use_cache=True):
    """The SynthResult for an ELF file: errors become one line."""
    from .dwarf import SynthesisStore
    from .dwarf.synth_cache import build
    try:
        return SynthesisStore().synthesize(path) if use_cache else build(path)
    except (SfbtError, OSError) as error:
        raise _failure(path, error) from None


def _load(args):
    """The SFrame section named by the command line, and the dump preamble."""
    from .files import read_regular
    from .sframe import open_section
    from .sframe.in_elf import read_elf_sframe
    path = args.file
    if getattr(args, "synth", False):
        if args.raw:
            raise CommandError("--synth reads an ELF file's CFI; it does not go with --raw")
        args.synth_result = _synthesized(path, not args.no_cache)
        try:
            _, fmt = read_elf_sframe(path)
        except (SfbtError, OSError):
            fmt = "elf64"
        return args.synth_result.section, f"\n{printable(path)}:     file format {fmt}\n\n"
    try:
        if args.raw:
            return open_section(read_regular(path, MAX_SECTION_BYTES), args.address), ""
        section, fmt = read_elf_sframe(path)
    except (SfbtError, OSError) as error:
        raise _failure(path, error) from None
    if section is None:
        raise CommandError(f"{path}: no SFrame section (.sframe or PT_GNU_SFRAME)")
    return section, f"\n{printable(path)}:     file format {fmt}\n\n"


def _run_dump(args):
    from .sframe import dump_text
    section, preamble = _load(args)
    try:
        text = dump_text(section)
    except SfbtError as error:
        raise CommandError(f"{args.file}: {error}") from None
    sys.stdout.write(preamble + text)


def _run_lookup(args):
    from .sframe import lookup_text
    from .sframe.dump import libsframe_2_40_text
    section, _ = _load(args)
    result = getattr(args, "synth_result", None)
    cfi = None  # the file's CFI rows, for the addresses its .sframe has no row for
    lines = []
    for address in args.addresses:
        try:
            text = lookup_text(section, address)
            if text == "none" and result is not None and result.left_out_reason(address):
                text += f" (left out: {result.left_out_reason(address)})"
            elif text == "none" and result is None and not args.raw:
                if cfi is None:
                    cfi = _cfi_rows(args.file)
                text = _cfi_lookup_text(cfi, address) or text
            lines.append(f"{address:#x}: {text}\n")
            theirs = libsframe_2_40_text(section, address)
            if theirs is not None:
                lines.append(f"  (libsframe 2.40 says {theirs}: it matches v1 PLT "
                             "rows on the low 8 bits of the address)\n")
        except SfbtError as error:
            raise CommandError(f"{args.file}: {error}") from None
    sys.stdout.write("".join(lines))


def _cfi_rows(path):
    """The rows synthesized per function from the file's CFI (an
    SFrameSource whose section is None where it has none)."""
    from .unwind.modules import SFrameSource, cfi_rows_of_file
    try:
        return cfi_rows_of_file(path)
    except (SfbtError, OSError) as error:
        return SFrameSource(None, "none", str(error))


def _cfi_lookup_text(cfi, address):
    """lookup's line for the CFI row at address, marked with the section it
    came from, or None where the CFI gives none."""
    from .sframe import lookup_text
    if cfi.section is None:
        return None
    text = lookup_text(cfi.section, address)
    if text == "none":
        return None
    return f"{text} (from CFI: {cfi.rows.fde(address).source})"


def _run_synth(args):
    from .files import write_atomically
    from .sframe import write_section
    result = _synthesized(args.file, not args.no_cache)
    data = write_section(result.section)
    try:
        write_atomically(args.output, data)
    except OSError as error:
        raise CommandError(f"{args.output}: {error.strerror or error}") from None
    sys.stdout.write(f"{printable(args.output)}: SFrame v3, {len(data)} bytes, "
                     f"{len(result.section.functions)} FDEs, "
                     f"{result.section.num_rows} FREs (from {result.origin})\n"
                     f"{result.stats.summary()}\n")
    if args.verbose:
        for start, end, reason in result.left_out:
            sys.stdout.write(f"left out {start:#x}..{end:#x}: {reason}\n")


def _add_synth_arguments(parser):
    parser.add_argument("--synth", action="store_true",
                        help="use SFrame rows synthesized from the file's "
                        ".eh_frame / .debug_frame instead of its .sframe")
    parser.add_argument("--no-cache", action="store_true",
                        help="with --synth: synthesize afresh, neither reading "
                        "nor writing the cache")


def _symbolizer(args):
    from .archive.symbolize import Symbolizer
    return Symbolizer(executables=args.exe, debug_dirs=args.debug_dir,
                      trust_files=args.trust_files)


def _per_image_map(symbolizer, make):
    """A make_describer(images) giving ``make(describe, kernel=...)`` for
    each image map (its kernel's addresses: symbolize.kernel_range), kept
    while its images are (PerImageMap), so that what traces share is
    worked out once.  Without an image map (a bare .cbf, an lws
    log) addresses are taken as addresses of the --exe file (a non-PIE
    program's)."""
    from .archive.imagemap import PerImageMap
    from .archive.symbolize import kernel_range
    without_map = make(symbolizer.describe_file_address)
    per_map = PerImageMap(lambda images: make(symbolizer.describer(images),
                                              kernel=kernel_range(images)))
    return lambda images: per_map(images) if images else without_map


#: The most text `sfbt cbf encode` reads: a million frame lines and room
#: to spare.
MAX_FRAME_TEXT_BYTES = 64 << 20


def _run_cbf_encode(args):
    from .archive import cbf
    from .lines import bounded_lines
    try:
        parsed = cbf.FrameText(bounded_lines(sys.stdin.buffer, max_bytes=MAX_FRAME_TEXT_BYTES),
                               cbf.DEFAULT_LIMIT)
        encoder = cbf.Encoder(args.word_size)
        for entry in parsed:
            encoder.add(entry)
        data = encoder.finish(parsed.truncated)
    except SfbtError as error:
        raise CommandError(f"<stdin>: {error}") from None
    sys.stdout.buffer.write(data)


def _each_saved_file(path, read, symbolizer, bare_cbf=None, trust_files=False):
    """Open the saved file at path and hand it to ``read(saved)`` (a
    SavedFile, read a backtrace at a time); a bare CBF file goes to
    ``bare_cbf(data)`` instead when given.  ``symbolizer`` reads the image
    files the file names as its owner could (one line on stderr for each
    it refused; a perf.data's too, unless ``trust_files``).  Errors become
    one line naming the file, after the traces read before an archive's
    damage."""
    from .archive.saved import input_name
    from .files import FileProblem
    from .live.perf_data import open_saved
    refused, other_builds = symbolizer.refused, {}
    try:
        with open_saved(path, trust_files) as saved:
            refused, other_builds = {**saved.refused, **refused}, saved.other_builds
            symbolizer.read_images_as(saved.read_as())
            if bare_cbf is not None and saved.form == "cbf":
                bare_cbf(saved.data)
                return
            read(saved)
            error = saved.error
    except FileProblem as problem:
        raise CommandError(str(problem)) from None
    except BrokenPipeError:
        raise  # standard output closed (`| head`): not the file's fault
    except (SfbtError, OSError) as problem:
        raise _failure(input_name(path), problem) from None
    finally:
        for image, why in {**refused, **symbolizer.refused}.items():
            sys.stderr.write(f"sfbt: warning: {printable(image)}: {printable(why)}; its frames "
                             "are unknown (--trust-files reads it)\n")
        for image, how in other_builds.items():
            sys.stderr.write(f"sfbt: warning: {printable(image)}: {printable(how)}; its "
                             "frames are unknown\n")
    if error is not None:
        raise CommandError(str(error))


def _run_cbf_decode(args):
    from .archive import cbf
    from .archive.report import FrameTexts
    from .archive.saved import saved_trace_text
    symbolizer = _symbolizer(args)
    frame_texts = _per_image_map(symbolizer, FrameTexts)

    def write_trace(trace):
        text = saved_trace_text(trace, frame_texts)
        if text:
            sys.stdout.write(text + "\n")

    def bare_cbf(data):
        sys.stdout.write(cbf.format_frames(cbf.decode(data, strict=True)))

    def read(saved):
        for trace in saved.traces():
            write_trace(trace)

    plain = not args.exe and not args.debug_dir
    _each_saved_file(args.file, read, symbolizer, bare_cbf if plain else None,
                     args.trust_files)


def _run_fold(args):
    from .archive.report import FrameNames
    from .outputs import Options, write
    symbolizer = _symbolizer(args)
    frame_names = _per_image_map(symbolizer, FrameNames)
    options = Options(args.per_thread, frame_names=frame_names)
    counted = []

    def write_samples(saved):
        chunks, samples = write("fold", saved, options)
        counted.append(samples)
        for chunk in chunks:
            sys.stdout.buffer.write(chunk)

    _each_saved_file(args.file, write_samples, symbolizer, trust_files=args.trust_files)
    if counted and counted[0].cut:
        samples = counted[0]
        sys.stderr.write(f"sfbt fold: {samples.stacks} stacks, {samples.stacks - samples.cut} "
                         f"complete, {samples.cut} cut (under [cut])\n")


def _run_lws_filter(args):
    from .archive import lws
    from .lines import bounded_lines
    convert = (lws.filter_decode if args.lws_command == "decode"
               else lambda lines: lws.filter_encode(lines, legacy=args.legacy))
    try:
        # Bytes that are not UTF-8 pass through as they are.
        for line in convert(bounded_lines(sys.stdin.buffer, "surrogateescape")):
            sys.stdout.write(line)
    except SfbtError as error:
        raise CommandError(f"<stdin>: {error}") from None


def _run_heapmap(args):
    from .archive import cbf, lws
    from .archive.report import frame_lines
    from .files import open_regular
    from .lines import bounded_lines
    try:
        with open_regular(args.log) as stream:
            groups = lws.group_allocations(bounded_lines(stream))
    except OSError as error:
        raise CommandError(f"{args.log}: {error.strerror or error}") from None
    except SfbtError as error:
        raise CommandError(f"{args.log}: {error}") from None
    symbolizer = _symbolizer(args)
    lines = []
    for frames, count, total in groups:
        lines.append(f"{total} bytes in {count} allocation{'s' if count != 1 else ''}:")
        lines += frame_lines([cbf.Frame("ra", a) for a in frames], False,
                             lambda address: symbolizer.describe_file_address(address))
    sys.stdout.write("".join(line + "\n" for line in lines))


def _add_symbol_arguments(parser):
    parser.add_argument("--exe", action="append", default=[], metavar="PATH",
                        help="an ELF file to symbolize with (matched by build id)")
    parser.add_argument("--debug-dir", action="append", default=[], metavar="DIR",
                        help="a directory of ELF or debug files, matched by build id")
    parser.add_argument("--trust-files", action="store_true",
                        help="read every image file the archive names, even one "
                        "the archive's owner could not read")


def _add_input_arguments(parser):
    parser.add_argument("file", metavar="FILE",
                        help="an ELF file, or with --raw the bytes of a section")
    parser.add_argument("--raw", action="store_true",
                        help="FILE holds raw .sframe section bytes")
    parser.add_argument("--address", type=_address, default=0, metavar="ADDR",
                        help="the section's address, with --raw (default 0)")


def _add_sframe(commands):
    from .usage import with_example
    sframe = commands.add_parser(
        "sframe", help="read SFrame sections",
        **with_example("sfbt sframe dump ./program", "print a program's .sframe section"))
    sframe_commands = sframe.add_subparsers(dest="sframe_command",
                                            metavar="SUBCOMMAND", required=True)
    dump = sframe_commands.add_parser(
        "dump", help="print a .sframe section as objdump --sframe does",
        **with_example("sfbt sframe dump --synth /bin/ls",
                       "the rows synthesized from /bin/ls's .eh_frame"))
    _add_input_arguments(dump)
    _add_synth_arguments(dump)
    dump.set_defaults(run=_run_dump)

    lookup = sframe_commands.add_parser(
        "lookup", help="print the CFA, FP and RA rules in force at addresses",
        **with_example("sfbt sframe lookup ./program 0x1139 0x1140",
                       "the rules at two addresses of a program"))
    _add_input_arguments(lookup)
    _add_synth_arguments(lookup)
    lookup.add_argument("addresses", metavar="ADDR", nargs="+", type=_address)
    lookup.set_defaults(run=_run_lookup)

    synth_parser = sframe_commands.add_parser(
        "synth", help="write SFrame v3 rows synthesized from an ELF file's "
        ".eh_frame / .debug_frame (cached per file they come from)",
        **with_example("sfbt sframe synth /bin/ls -o ls.sframe",
                       "write rows for /bin/ls; read them with --raw"))
    synth_parser.add_argument("file", metavar="FILE", help="an ELF file")
    synth_parser.add_argument("-o", "--output", required=True, metavar="OUT",
                              help="where to write the section's bytes (read "
                              "them back with --raw; addresses are the file's)")
    synth_parser.add_argument("--no-cache", action="store_true",
                              help="synthesize afresh, neither reading nor "
                              "writing the cache")
    synth_parser.add_argument("-v", "--verbose", action="store_true",
                              help="also list the address ranges left out")
    synth_parser.set_defaults(run=_run_synth)


def _add_cbf(commands):
    from .usage import with_example
    cbf_parser = commands.add_parser(
        "cbf", help="Compact Backtrace Format",
        **with_example("sfbt cbf decode crash.sfbt --exe ./program",
                       "print saved backtraces, named from the program"))
    cbf_commands = cbf_parser.add_subparsers(dest="cbf_command",
                                             metavar="SUBCOMMAND", required=True)
    encode = cbf_commands.add_parser(
        "encode", help="frames as text on stdin (pc/ra/async ADDR, omit N, "
        "truncated) to CBF bytes on stdout",
        **with_example("printf 'pc 0x401136\\nra 0x401189\\n' | sfbt cbf encode > trace.cbf",
                       "two frames as a bare .cbf file"))
    encode.add_argument("--word-size", type=int, choices=(16, 32, 64), default=64)
    encode.set_defaults(run=_run_cbf_encode)
    decode = cbf_commands.add_parser(
        "decode", help="print a bare .cbf file's frames as text, or the "
        "backtraces of any form cbf-save writes, symbolized",
        **with_example("sfbt cbf decode crash.sfbt --exe ./program",
                       "print saved backtraces, named from the program"))
    decode.add_argument("file", metavar="FILE",
                        help="an archive, a .cbf, JSON or lws file (as cbf-save "
                        "writes them), or -")
    _add_symbol_arguments(decode)
    decode.set_defaults(run=_run_cbf_decode)


def _add_fold(commands):
    from .usage import with_example
    fold = commands.add_parser(
        "fold", help="folded stacks (main;f;g COUNT) for flamegraph.pl and speedscope",
        **with_example("sfbt fold profile.sfbt | flamegraph.pl > profile.svg",
                       "a recording drawn by flamegraph.pl"))
    fold.add_argument("file", metavar="FILE",
                      help="an archive, a .cbf or JSON file, a log with ~m# lines, "
                      "or a perf.data (perf record --call-graph dwarf)")
    fold.add_argument("--per-thread", action="store_true",
                      help="each thread's stacks under a root frame of its own, "
                      "NAME (TID)")
    _add_symbol_arguments(fold)
    fold.set_defaults(run=_run_fold)


def _add_lws(commands):
    from .usage import with_example
    lws_parser = commands.add_parser(
        "lws", help="libwebsockets ~m# backtraces",
        **with_example("sfbt lws decode < server.log",
                       "a log's ~m# blobs as ~b#size: lines"))
    lws_commands = lws_parser.add_subparsers(dest="lws_command",
                                             metavar="SUBCOMMAND", required=True)
    lws_decode = lws_commands.add_parser(
        "decode", help="stdin to stdout: ~m# blobs to ~b#size: N, 0x... lines",
        **with_example("sfbt lws decode < server.log",
                       "a log's ~m# blobs as ~b#size: lines"))
    lws_decode.set_defaults(run=_run_lws_filter)
    lws_encode = lws_commands.add_parser(
        "encode", help="stdin to stdout: ~b#size: lines to ~m# blobs",
        **with_example("sfbt lws encode < decoded.log > server.log",
                       "~b#size: lines back into ~m# blobs"))
    lws_encode.add_argument("--legacy", action="store_true",
                            help="encode as libwebsockets' 2022 release did")
    lws_encode.set_defaults(run=_run_lws_filter)


def _add_heapmap(commands):
    from .usage import with_example
    heapmap = commands.add_parser(
        "heapmap", help="group a log's ~m# allocation records by call site, "
        "largest total first",
        **with_example("sfbt heapmap server.log --exe ./server",
                       "a log's allocations by call site, named from the server"))
    heapmap.add_argument("log", metavar="LOG")
    _add_symbol_arguments(heapmap)
    heapmap.set_defaults(run=_run_heapmap)


#: the commands of cli.py, in the order --help lists them (sfbt.live's
#: follow), and what adds each to the parser
_COMMANDS = {"sframe": _add_sframe, "cbf": _add_cbf, "fold": _add_fold, "lws": _add_lws,
             "heapmap": _add_heapmap}


def build_parser(command=None):
    """The command line's parser.  Given a command's name (the first
    argument), one with that command alone: the top parser only picks a
    command by its name, then that command's parser reads the rest, so
    `sfbt COMMAND ...` parses (and fails) as with every command's, without
    the time every other command's parser takes."""
    import argparse

    from .usage import with_example
    parser = argparse.ArgumentParser(
        prog="sfbt", description="SFrame-driven stack traces: tools that "
        "work outside the debugger.",
        **with_example("sfbt stack 4242", "every thread's backtrace of process 4242"))
    parser.add_argument("--version", action="version",
                        version=f"sfbt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     required=True)
    if command in _COMMANDS:
        _COMMANDS[command](commands)
    elif command in LIVE_COMMANDS:
        add_live_commands(commands, CommandError, [command])
    elif command in CRASH_COMMANDS:
        add_crash_commands(commands, CommandError, [command])
    else:
        for add in _COMMANDS.values():
            add(commands)
        add_live_commands(commands, CommandError, LIVE_COMMANDS)
        add_crash_commands(commands, CommandError, CRASH_COMMANDS)
    return parser


def main(argv=None):
    arguments = sys.argv[1:] if argv is None else argv
    if arguments == ["--version"]:  # without importing argparse or building the parser
        print(f"sfbt {__version__}")
        return 0
    args = build_parser(arguments[0] if arguments else None).parse_args(arguments)
    # Names are escaped before they are printed (sfbt.printable); a byte
    # that is not UTF-8 and was missed is printed as it is, not a traceback.
    sys.stdout.reconfigure(errors="surrogateescape")
    try:
        args.run(args)
    except SfbtError as error:  # CommandError, or any other one-line failure
        print(f"sfbt: {printable(str(error))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    finally:
        warning = left_out_warning()
        if warning is not None and not sys.stderr.closed:
            print(f"sfbt: warning: {printable(warning)}", file=sys.stderr)
    return 0
