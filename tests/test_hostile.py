"""Hostile input on the command line: each one ends in one line naming the
file, in bounded time and memory, after whatever was readable."""

import json
import shutil
import struct
import subprocess
import zlib

from elftools.elf.elffile import ELFFile

from conftest import FIXTURES, archive_naming_a_fifo, one_frame_archive, run_sfbt
from sfbt.archive import cbf
from sfbt.archive.imagemap import Image, ImageMap, encode_image_map
from sfbt.archive.store import (KIND_IMAGE_MAP, KIND_TRACE, MAGIC, Archive,
                                _EVENT_HEAD, _TRACE_HEAD, trace_hash)

PROGRAM = FIXTURES / "v3" / "x86_64" / "callchain-O2"
OBJECT = FIXTURES / "v3" / "x86_64" / "callchain-O2.o"
IMAGES = ImageMap("linux-x86_64", [Image("/nonexistent/prog", 0x400000, 0x500000, b"\xaa")])


def one_line_error(result, *words):
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def record(kind, payload):
    head = struct.pack("<BI", kind, len(payload))
    return head + payload + struct.pack("<I", zlib.crc32(head + payload))


def trace_record(trace_id, data):
    return record(KIND_TRACE, _TRACE_HEAD.pack(trace_id, trace_hash(data)) + data)


def event_record(trace_id, image_map=0, label=""):
    strings = b"".join(struct.pack("<H", len(s)) + s for s in
                       (b"x86_64", b"1", b"SIGTRAP", label.encode()))
    return record(3, _EVENT_HEAD.pack(trace_id, image_map, 0) + strings)


def section_header_field(path, name, field_offset, fmt, value, output):
    data = bytearray(path.read_bytes())
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)
        at = elf["e_shoff"] + index * elf["e_shentsize"] + field_offset
    struct.pack_into(fmt, data, at, value)
    output.write_bytes(data)
    return output


def test_a_rep_bomb_archive_stops_at_the_frame_budget(tmp_path):
    """10 traces, each a rep of a million frames, in under a kilobyte."""
    # pc 0x4000NN, then a rep of 0xfffff more: 2**20 frames each
    traces = [bytes([0x02, 0x1A, 0x40, 0x00, number, 0x8A, 0x0F, 0xFF, 0xFF, 0x00])
              for number in range(10)]
    data = MAGIC + record(KIND_IMAGE_MAP, encode_image_map(IMAGES))
    for number, trace in enumerate(traces, 1):
        assert len(cbf.decode(trace).frames) == 1 << 20
        data += trace_record(number, trace) + event_record(number)
    path = tmp_path / "bomb.sfbt"
    path.write_bytes(data)
    assert len(data) < 1024
    for command in (["cbf", "decode"], ["fold"]):
        result = subprocess.run(["timeout", "60", *map(str, run_args(command, path))],
                                capture_output=True, text=True, env=run_env())
        line = one_line_error(result, f"{path}+0x", "trace 2", "expands to more than",
                              "frames")
        assert line.startswith("sfbt: ")
    decoded = run_sfbt("cbf", "decode", path)
    assert decoded.stdout.count("Backtrace ") == 1  # the first trace, whole
    assert decoded.stdout.endswith("\n#1048575 0x0000000000400000 in ?? from /nonexistent/prog\n")


def run_args(command, path):
    import sys
    return [sys.executable, "-m", "sfbt", *command, path]


def run_env():
    import os
    from conftest import PLUGIN
    return dict(os.environ, PYTHONPATH=str(PLUGIN))


def test_image_map_prefix_expansion_is_bounded(tmp_path):
    """Prefix codes that expand long prefixes again and again."""
    body = bytearray([0x02, 0x00])  # 64-bit map, no platform
    images = 3000
    body += bytes([0x80 | images >> 7, images & 0x7F])
    long_name = b"/" + b"a" * 62
    for index in range(images):
        body += bytes([0x00, 0x00, 0x00, 0x00])  # base 0, size 0, no build id
        if index == 0:
            for _ in range(500):  # defines prefixes of growing length
                body += bytes([len(long_name)]) + long_name
        else:
            body += bytes([0xC1, 0x01, 0xD2])  # expand code 530, 31374 bytes
        body += b"\x00"
    path = tmp_path / "map.sfbt"
    path.write_bytes(MAGIC + record(KIND_IMAGE_MAP, bytes(body)))
    result = run_sfbt("cbf", "decode", path)
    one_line_error(result, f"{path}+0xd: image map: ", "expand")


def test_a_bad_image_map_keeps_the_records_before_it(tmp_path):
    good = Archive()
    good.capture(cbf.encode([cbf.Frame("pc", 0x400100)]), IMAGES, thread="1",
                 reason="SIGTRAP", label="kept")
    data = MAGIC + good.pending_bytes()
    bad_at = len(data)
    data += record(KIND_IMAGE_MAP, b"\x03\x00")  # reserved word size
    data += trace_record(2, cbf.encode([cbf.Frame("pc", 0x400200)])) + event_record(2, 1)
    path = tmp_path / "a.sfbt"
    path.write_bytes(data)
    result = run_sfbt("cbf", "decode", path)
    assert "label 'kept'" in result.stdout and "0x0000000000400100" in result.stdout
    assert "0x400200" not in result.stdout
    one_line_error(result, f"{path}+{bad_at + 5:#x}: image map: CIF+0x0: info byte 0x03")


def test_a_large_file_of_zeros_is_refused_quickly(tmp_path):
    path = tmp_path / "zeros"
    with open(path, "wb") as stream:
        stream.truncate(64 << 20)
    for command in (["cbf", "decode"], ["fold"], ["heapmap"]):
        result = subprocess.run(["timeout", "60", *map(str, run_args(command, path))],
                                capture_output=True, text=True, env=run_env())
        one_line_error(result, f"{path}: ", "line 1 is longer than")


def test_an_oversized_record_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.sfbt"
    path.write_bytes(MAGIC + struct.pack("<BI", KIND_TRACE, 0xFFFFFFF0))
    one_line_error(run_sfbt("cbf", "decode", path), f"{path}+0x8: record of 4294967280 "
                   "bytes is larger than")


def test_elf_header_damage_is_one_line(tmp_path):
    data = bytearray(PROGRAM.read_bytes())
    struct.pack_into("<Q", data, 0x20, (1 << 64) - 1)  # e_phoff
    phoff = tmp_path / "phoff"
    phoff.write_bytes(data)
    trace = tmp_path / "t.cbf"
    trace.write_bytes(cbf.encode([cbf.Frame("pc", 0x401000)]))
    for args in (["sframe", "dump", "--synth", "--no-cache", phoff],
                 ["cbf", "decode", trace, "--exe", phoff]):
        result = run_sfbt(*args)
        assert "Traceback" not in result.stderr
    for size in ((1 << 63) - 1, 1 << 40):
        damaged = section_header_field(PROGRAM, ".sframe", 32, "<Q", size,
                                       tmp_path / f"size{size}")
        one_line_error(run_sfbt("sframe", "dump", damaged), f"{damaged}: ",
                       f"{size} bytes run past the end of the file")


def test_relocations_linked_to_a_section_that_is_not_a_symbol_table(tmp_path):
    with open(OBJECT, "rb") as stream:
        text = next(i for i, s in enumerate(ELFFile(stream).iter_sections())
                    if s.name == ".text")
    damaged = section_header_field(OBJECT, ".rela.sframe", 40, "<I", text,
                                   tmp_path / "linked.o")
    one_line_error(run_sfbt("sframe", "dump", damaged), f"{damaged}: ",
                   "relocations of .sframe name no symbol table")


def test_a_short_debug_line_given_to_exe(tmp_path):
    source = tmp_path / "p.c"
    source.write_text("int f(int x) { return x + 1; }\nint main(void) { return f(2); }\n")
    program = tmp_path / "prog"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(program), str(source)], check=True)
    trace = tmp_path / "t.cbf"
    trace.write_bytes(cbf.encode([cbf.Frame("pc", 0x1139)]))
    for size in (10, 40):
        damaged = section_header_field(program, ".debug_line", 32, "<Q", size,
                                       tmp_path / f"short{size}")
        one_line_error(run_sfbt("cbf", "decode", trace, "--exe", damaged),
                       f"{damaged}: unreadable DWARF line table")
    # A section past the end of the file (a reader that allocates its size
    # first would ask for a terabyte): the file is not used, nothing allocated.
    huge = section_header_field(program, ".debug_line", 32, "<Q", 1 << 40, tmp_path / "huge")
    result = run_sfbt("cbf", "decode", trace, "--exe", huge)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == "#0  0x0000000000001139 in ?? ()\n"
    assert f" at {source}:" in run_sfbt("cbf", "decode", trace, "--exe", program).stdout


def test_malformed_json(tmp_path):
    cases = {"deep": '{"backtrace":' + "[" * 100000 + "]" * 100000 + "}",
             "number": '{"backtrace": 5}', "other": '{"x":1}',
             "map": json.dumps({"backtrace": "AAE=", "imageMap": "AwA="}),
             "ascii": json.dumps({"backtrace": "AAE=", "imageMap": "A\u04b4A="}),
             "ascii2": json.dumps({"backtrace": "\u04b4"})}
    for name, text in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        for command in (["cbf", "decode"], ["fold"]):
            one_line_error(run_sfbt(*command, path), f"sfbt: {path}: ")


def test_cbf_load_names_no_fifo_image_path(tmp_path):
    """An archive naming a FIFO as its image's file: decoding does not
    open it (it would block) and prints the frame unsymbolized."""
    fifo, path = archive_naming_a_fifo(tmp_path)
    result = subprocess.run(["timeout", "30", *map(str, run_args(["cbf", "decode"], path))],
                            capture_output=True, text=True, env=run_env())
    assert result.returncode == 0, result.stderr
    assert f"#0  0x0000000000400100 in ?? from {fifo}" in result.stdout


def test_append_to_a_damaged_archive_is_refused_and_keeps_it(tmp_path):
    from sfbt.archive.store import ArchiveError, save_archive
    path = tmp_path / "a.sfbt"
    path.write_bytes(MAGIC + b"\x09junk")
    archive = Archive()
    archive.capture(cbf.encode([cbf.Frame("pc", 1)]), IMAGES)
    try:
        save_archive(path, archive, append=True)
        raised = None
    except ArchiveError as error:
        raised = error
    assert raised is not None and str(raised).startswith(f"{path}+0x8: ")
    assert path.read_bytes() == MAGIC + b"\x09junk"
    shutil.rmtree(tmp_path)


def test_image_paths_that_are_not_utf8_print_escaped(tmp_path):
    """As GDB prints a byte that is not UTF-8 in a string: in octal."""
    path = one_frame_archive(tmp_path / "a.sfbt", "/x/\udc8cbad")
    result = subprocess.run(run_args(["cbf", "decode"], path), capture_output=True,
                            env=run_env())
    assert result.returncode == 0, result.stderr
    assert b"in ?? from /x/\\214bad\n" in result.stdout


def test_decode_into_a_closed_pipe_ends_quietly(tmp_path):
    """`sfbt cbf decode FILE | head`: standard output closing early is not
    an error of FILE's, so nothing is printed about it."""
    archive = Archive()
    for n in range(3000):
        archive.capture(cbf.encode([cbf.Frame("pc", 0x400100 + n), cbf.Frame("ra", 0x400200)]),
                        IMAGES, thread="1", reason="SIGPROF")
    path = tmp_path / "many.sfbt"
    path.write_bytes(MAGIC + archive.pending_bytes())
    decode = subprocess.Popen(run_args(["cbf", "decode"], path), env=run_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = decode.stdout.readline()
    decode.stdout.close()  # as `head -1` does
    _, stderr = decode.communicate(timeout=60)
    assert first.startswith(b"Backtrace 1, captured once")
    assert stderr == b"", stderr


def test_a_relative_image_name_opens_no_file_in_the_current_directory(tmp_path):
    """An archive's image named as the loader names the vDSO
    (``linux-vdso.so.1``), or by any relative name, names no file: one
    planted under that name in the directory `cbf decode` runs in is not
    read for names; the same file named by its absolute path is."""
    import os
    import sys
    from conftest import PLUGIN
    planted = tmp_path / "linux-vdso.so.1"
    shutil.copy(PROGRAM, planted)
    env = dict(os.environ, PYTHONPATH=str(PLUGIN))
    for name, shown in (("linux-vdso.so.1", "in ?? from linux-vdso.so.1"),
                        (str(planted), "in main ")):
        archive = Archive()
        # main of the program (0x580), mapped at 0x400000
        archive.capture(cbf.encode([cbf.Frame("pc", 0x400584)]),
                        ImageMap("linux-x86_64", [Image(name, 0x400000, 0x401000)]),
                        thread="1", reason="SIGTRAP")
        path = tmp_path / "a.sfbt"
        path.write_bytes(MAGIC + archive.pending_bytes())
        result = subprocess.run([sys.executable, "-m", "sfbt", "cbf", "decode", path.name],
                                capture_output=True, text=True, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert shown in result.stdout, result.stdout
