"""sfbt cbf, lws, heapmap and fold as a user runs them."""

import os
import subprocess
import sys

from elftools.elf.elffile import ELFFile

from conftest import PLUGIN, run_sfbt
from gdb_support import PROGRAMS
from sfbt.archive import lws

README_BLOB = "~m#IF0BmUQugNCkgCnkhdAYpQa6wAAV"
README_DECODED = "~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294 "


def test_lws_filters_round_trip_the_readme_example():
    log = f"[2024/01/01] N: alloc {README_BLOB} done\nplain line\n"
    decoded = run_sfbt("lws", "decode", input=log)
    assert decoded.returncode == 0
    assert decoded.stdout == f"[2024/01/01] N: alloc {README_DECODED} done\nplain line\n"
    encoded = run_sfbt("lws", "encode", "--legacy", input=decoded.stdout)
    assert encoded.stdout == log


def test_lws_decode_error_names_the_line():
    result = run_sfbt("lws", "decode", input="ok\n~m#IF0B\n")
    assert result.returncode == 1
    assert result.stderr.startswith("sfbt: <stdin>: line 2: ")
    assert len(result.stderr.splitlines()) == 1


def run_binary(*args, data):
    env = dict(os.environ, PYTHONPATH=str(PLUGIN))
    return subprocess.run([sys.executable, "-m", "sfbt", *args], input=data,
                          capture_output=True, env=env, timeout=60)


def test_cbf_encode_and_decode_text_form():
    texts = {
        "16": "pc 0x1000\nra 0x1123\nra 0x1123\nomit 40\nra 0xfff0\ntruncated\n",
        "32": "pc 0x401000\nra 0x401123\nra 0x401123\nomit 5\nasync 0x80001000\n",
        "64": "pc 0x401000\nra 0x401123\nra 0x401123\nomit 40\nasync 0x7fff00001000\ntruncated\n",
    }
    for word_size, text in texts.items():
        encoded = run_binary("cbf", "encode", "--word-size", word_size, data=text.encode())
        assert encoded.returncode == 0, encoded.stderr
        decoded = run_binary("cbf", "decode", "-", data=encoded.stdout)
        assert decoded.stdout.decode() == text


def test_cbf_encode_rejects_bad_text():
    result = run_sfbt("cbf", "encode", input="pc 0x10\njump 0x20\n")
    assert result.returncode == 1 and "line 2" in result.stderr


def test_heapmap_groups_allocations_by_call_site(tmp_path):
    program = tmp_path / "steps"
    subprocess.run(["gcc", "-g", "-O0", "-fno-pie", "-no-pie", "-o", str(program),
                    str(PROGRAMS / "steps.c")], check=True)
    with open(program, "rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab")
        address = {name: symbols.get_symbol_by_name(name)[0]["st_value"]
                   for name in ("leaf", "middle", "outer", "main")}
    site_a = [address["middle"] + 20, address["outer"] + 20, address["main"] + 10]
    site_b = [address["outer"] + 30, address["main"] + 10]
    log = tmp_path / "log"
    log.write_text("".join(
        [f"[t] N: {lws.encode(site_a, 100)}\n"] * 3 + ["unrelated\n"]
        + [f"x {lws.encode(site_b, 1000)} y\n"]))
    result = run_sfbt("heapmap", log, "--exe", program)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "1000 bytes in 1 allocation:"
    assert " in outer at " in lines[1] and "steps.c:" in lines[1]
    assert lines[3] == "300 bytes in 3 allocations:"
    assert " in middle at " in lines[4] and " in main at " in lines[6]


def test_fold_an_lws_log(tmp_path):
    log = tmp_path / "log"
    log.write_text(f"{README_BLOB}\n{README_BLOB}\n")
    result = run_sfbt("fold", log)
    assert result.stdout.splitlines() == [
        "0x406294;0x406c1b;0x406852;0x406651 1"] * 2


def test_bare_cbf_symbolized_with_exe(tmp_path):
    program = tmp_path / "steps"
    subprocess.run(["gcc", "-g", "-O0", "-fno-pie", "-no-pie", "-o", str(program),
                    str(PROGRAMS / "steps.c")], check=True)
    with open(program, "rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab")
        leaf = symbols.get_symbol_by_name("leaf")[0]["st_value"]
        main = symbols.get_symbol_by_name("main")[0]["st_value"]
    text = f"pc {leaf:#x}\nra {main + 12:#x}\n".encode()
    encoded = run_binary("cbf", "encode", data=text)
    trace = tmp_path / "t.cbf"
    trace.write_bytes(encoded.stdout)
    result = run_sfbt("cbf", "decode", trace, "--exe", program)
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"#0  {leaf:#018x} in leaf at ") and "steps.c:" in lines[0]
    assert lines[1].startswith(f"#1  {main + 12:#018x} in main at ")
