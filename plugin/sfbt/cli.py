"""The ``sfbt`` command line."""

import argparse
import sys

from . import __version__
from .sframe import SFrameError, dump_text, lookup_text, read_section
from .sframe.elf import ElfInputError, read_elf_sframe


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 1."""


def _address(text):
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address: {text!r}") from None


def _load(args):
    """The SFrame section named by the command line, and the dump preamble."""
    path = args.file
    try:
        if args.raw:
            with open(path, "rb") as stream:
                data = stream.read()
            return read_section(data, args.address), ""
        section, fmt = read_elf_sframe(path)
    except SFrameError as error:
        raise CommandError(f"{path}: {error}") from None
    except (ElfInputError, OSError) as error:
        message = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise CommandError(f"{path}: {message}") from None
    if section is None:
        raise CommandError(f"{path}: no SFrame section (.sframe or PT_GNU_SFRAME)")
    return section, f"\n{path}:     file format {fmt}\n\n"


def _run_dump(args):
    section, preamble = _load(args)
    try:
        text = dump_text(section)
    except SFrameError as error:
        raise CommandError(f"{args.file}: {error}") from None
    sys.stdout.write(preamble + text)


def _run_lookup(args):
    section, _ = _load(args)
    lines = []
    for address in args.addresses:
        try:
            lines.append(f"{address:#x}: {lookup_text(section, address)}\n")
        except SFrameError as error:
            raise CommandError(f"{args.file}: {error}") from None
    sys.stdout.write("".join(lines))


def _add_input_arguments(parser):
    parser.add_argument("file", metavar="FILE",
                        help="an ELF file, or with --raw the bytes of a section")
    parser.add_argument("--raw", action="store_true",
                        help="FILE holds raw .sframe section bytes")
    parser.add_argument("--address", type=_address, default=0, metavar="ADDR",
                        help="the section's address, with --raw (default 0)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="sfbt", description="SFrame-driven stack traces: tools that "
        "work outside the debugger.")
    parser.add_argument("--version", action="version",
                        version=f"sfbt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     required=True)

    sframe = commands.add_parser("sframe", help="read SFrame sections")
    sframe_commands = sframe.add_subparsers(dest="sframe_command",
                                            metavar="SUBCOMMAND", required=True)
    dump = sframe_commands.add_parser(
        "dump", help="print a .sframe section as objdump --sframe does")
    _add_input_arguments(dump)
    dump.set_defaults(run=_run_dump)

    lookup = sframe_commands.add_parser(
        "lookup", help="print the CFA, FP and RA rules in force at addresses")
    _add_input_arguments(lookup)
    lookup.add_argument("addresses", metavar="ADDR", nargs="+", type=_address)
    lookup.set_defaults(run=_run_lookup)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except CommandError as error:
        print(f"sfbt: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()
        return 1
    return 0
