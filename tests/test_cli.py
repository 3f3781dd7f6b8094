"""The sfbt command line as a user runs it: python3 -m sfbt from a checkout."""

import argparse
import contextlib
import io
import shlex
import shutil
import struct
import subprocess

from elftools.elf.elffile import ELFFile

from conftest import FIXTURES, objdump_contents, run_sfbt
from sfbt.cli import build_parser

PROGRAM = FIXTURES / "v3" / "x86_64" / "callchain-O2"


def assert_one_line_error(result, *words):
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0]


def sframe_file_offset(path):
    with open(path, "rb") as stream:
        section = ELFFile(stream).get_section_by_name(".sframe")
        return section["sh_offset"], section["sh_size"]


def test_dump_of_an_executable():
    result = run_sfbt("sframe", "dump", PROGRAM)
    assert result.returncode == 0
    assert result.stdout.startswith(f"\n{PROGRAM}:     file format elf64-x86-64\n\n")
    assert objdump_contents(result.stdout) == objdump_contents(
        PROGRAM.with_name(PROGRAM.name + ".objdump").read_text())


def test_lookup_prints_one_line_per_address():
    result = run_sfbt("sframe", "lookup", PROGRAM, "0x0", "0x1040", "0x1041")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "0x0: none"
    assert len(lines) == 3 and all(line.startswith("0x104") for line in lines[1:])


def test_missing_file(tmp_path):
    assert_one_line_error(run_sfbt("sframe", "dump", tmp_path / "nope"),
                          "nope", "No such file")


def test_not_an_elf_file(tmp_path):
    path = tmp_path / "text"
    path.write_text("hello\n")
    assert_one_line_error(run_sfbt("sframe", "dump", path), "not a readable ELF file")


def test_truncated_elf_file(tmp_path):
    path = tmp_path / "truncated"
    path.write_bytes(PROGRAM.read_bytes()[:200])
    assert_one_line_error(run_sfbt("sframe", "lookup", path, "0x1000"), str(path))


def test_elf_file_without_sframe(tmp_path):
    source = tmp_path / "plain.c"
    source.write_text("int plain(void) { return 1; }\n")
    subprocess.run(["gcc", "-c", "-o", str(tmp_path / "plain.o"), str(source)],
                   check=True)
    assert_one_line_error(run_sfbt("sframe", "dump", tmp_path / "plain.o"),
                          "no SFrame section")


def test_corrupt_section_names_field_and_offset(tmp_path):
    path = tmp_path / "corrupt"
    data = bytearray(PROGRAM.read_bytes())
    offset, _ = sframe_file_offset(PROGRAM)
    struct.pack_into("<I", data, offset + 16, 0xFFFF)  # sfh_fre_len
    path.write_bytes(bytes(data))
    assert_one_line_error(run_sfbt("sframe", "dump", path),
                          str(path), ".sframe+0x10:", "FRE sub-section")


def test_raw_section_with_bad_magic(tmp_path):
    path = tmp_path / "raw"
    path.write_bytes(b"\x00" * 40)
    assert_one_line_error(run_sfbt("sframe", "dump", "--raw", path, "--address", "0x1000"),
                          ".sframe+0x0: bad magic")


def test_section_found_by_type_when_renamed(tmp_path):
    """binutils 2.45+ marks the section SHT_GNU_SFRAME: found by type."""
    path = tmp_path / "renamed"
    data = bytearray(PROGRAM.read_bytes())
    at = data.index(b".sframe\x00")
    data[at:at + 8] = b".sfrXme\x00"
    path.write_bytes(bytes(data))
    result = run_sfbt("sframe", "dump", path)
    assert result.returncode == 0
    assert "Contents of the SFrame section .sfrXme:" in result.stdout


def test_section_found_through_the_program_header(tmp_path):
    """No section headers at all: PT_GNU_SFRAME still finds the data."""
    path = tmp_path / "stripped"
    shutil.copy(PROGRAM, path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 40, 0)  # e_shoff
    struct.pack_into("<HH", data, 60, 0, 0)  # e_shnum, e_shstrndx
    path.write_bytes(bytes(data))
    result = run_sfbt("sframe", "dump", path)
    assert result.returncode == 0, result.stderr
    expected = objdump_contents(PROGRAM.with_name(PROGRAM.name + ".objdump").read_text())
    assert objdump_contents(result.stdout) == expected


def _commands(parser, path=()):
    """The words of every command under ``parser``, groups too."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


def test_every_commands_help_ends_with_an_example_that_parses():
    """As eu-stack's and py-spy's: the last lines of --help are an example,
    and the example is a command line this very command accepts."""
    commands = list(_commands(build_parser()))
    assert len(commands) > 12
    for path in commands:
        result = run_sfbt(*path, "--help")
        assert result.returncode == 0, result.stderr
        what, command = result.stdout.rstrip("\n").splitlines()[-2:]
        assert what.startswith("example: "), (path, result.stdout)
        words = shlex.split(command, posix=True)
        words = words[words.index("sfbt"):]  # after a pipe into it
        for end, word in enumerate(words):
            if word in ("|", "<", ">"):
                words = words[:end]
                break
        assert tuple(words[1:1 + len(path)]) == path, (path, command)
        build_parser().parse_args(words[1:])  # exits (fails the test) if it is wrong


def _parsed(parser, words):
    """What ``parser`` makes of ``words``: (the arguments, each command's
    run by name), or (its exit status, what it printed)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            args = parser.parse_args(words)
    except SystemExit as stopped:
        return stopped.code, printed.getvalue()
    return {name: getattr(value, "__qualname__", value) for name, value in vars(args).items()}


def test_the_parser_of_the_command_named_first_parses_as_the_whole_one():
    """sfbt builds only the parser of the command its first argument names:
    every command's help, command lines and mistakes come out as the whole
    parser's do."""
    whole = build_parser()
    paths = [path for path in _commands(whole) if path]
    lines = [["stack", "4242"], ["stack", "--core", "core", "exe", "--format", "json"],
             ["record", "-p", "7", "-o", "out.sfbt"], ["flame", "in.sfbt", "-o", "out.svg"],
             ["cbf", "decode", "crash.sfbt", "--exe", "p"], ["lws", "encode", "--legacy"],
             ["sframe", "lookup", "p", "0x10"], ["heapmap", "log"], ["fold", "in.sfbt"],
             # mistakes
             ["stack", "abc"], ["stack", "1", "extra"], ["stack", "--format", "svg"],
             ["stack", "1", "--version"], ["record", "-p", "x", "-o", "f"],
             ["sframe", "nothing"], ["cbf"], ["fold"], ["flame", "in.sfbt"]]
    for words in [[*path, "--help"] for path in paths] + lines:
        alone = build_parser(words[0])
        assert len(list(_commands(alone))) < len(paths), words
        assert _parsed(alone, words) == _parsed(whole, words), words
