"""Symbol tables, PLT relocations, names and flame graphs that grow with
hostile input: each command runs under a 300 MB address-space limit
(test_bounds.run_bounded), ends in its output, and says in one warning
line what a limit left out."""

import sys
import xml.dom.minidom

import pytest

from conftest import ROOT
from crafted import (TEXT, alias_elf, long_names_elf, many_stacks_archive, many_symbols_elf,
                     plt_bomb_elf)
from sfbt.archive import cbf
from sfbt.outputs.flame import MAX_FRAMES
from sfbt.symbols.table import MAX_NAME, MAX_SYMBOLS
from test_bounds import run_bounded

sys.path.insert(0, str(ROOT / "bench"))
from fuzz import run_measured  # noqa: E402


def _decode(tmp_path, elf, *addresses):
    """cbf decode --exe of a trace of the addresses in the ELF file's bytes
    (None: the file of the last call): (its output lines, its warning
    lines), after checking it succeeded."""
    exe, trace = tmp_path / "exe", tmp_path / "trace.cbf"
    if elf is not None:
        exe.write_bytes(elf)
    trace.write_bytes(cbf.encode([cbf.Frame("pc" if n == 0 else "ra", address)
                                  for n, address in enumerate(addresses)]))
    result = run_bounded("cbf", "decode", trace, "--exe", exe, seconds=120)
    assert result.returncode == 0, result.stderr
    errors = result.stderr.decode("utf-8", "replace").splitlines()
    assert all(line.startswith("sfbt: warning: ") for line in errors), errors
    return result.stdout.decode("utf-8", "replace").splitlines(), errors


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_four_million_symbols_keep_the_first_millions(tmp_path, cache):
    lines, warnings = _decode(tmp_path, many_symbols_elf(4 << 20), TEXT + 0x105,
                              TEXT + 16 * (3 << 20) + 5)
    assert " in f (" in lines[0] and " in ?? (" in lines[1], lines
    assert len(warnings) == 1, warnings
    assert f"{(4 << 20) - MAX_SYMBOLS:,} symbols beyond the first {MAX_SYMBOLS:,}" \
        in warnings[0] and ".symtab" in warnings[0]
    again, warnings = _decode(tmp_path, None, TEXT + 0x105)
    assert " in f (" in again[0] and not warnings  # the cached table


def test_a_million_aliases_name_the_last_by_name(tmp_path, cache):
    lines, warnings = _decode(tmp_path, alias_elf(1 << 20), TEXT + 0x105)
    assert " in f999999 (" in lines[0] and not warnings, lines  # as GDB orders names


def test_megabyte_names_are_cut(tmp_path, cache):
    lines, _ = _decode(tmp_path, long_names_elf(), TEXT + 0x105, TEXT + 0x205)
    assert f" in {'b' * MAX_NAME} (" in lines[0] and f" in {'c' * MAX_NAME} (" in lines[1]


def test_a_plt_relocation_bomb_costs_no_more_than_its_bytes(tmp_path, cache):
    lines, _ = _decode(tmp_path, plt_bomb_elf(), TEXT + 0x10005)
    assert " in puts@plt (" in lines[0], lines
    # 600,000 relocations of 4 stubs' slots and others (14 MB): no table of them
    trace = tmp_path / "trace.cbf"
    outcome, stderr, peak_kb = run_measured(["cbf", "decode", str(trace), "--exe",
                                             str(tmp_path / "exe")], str(tmp_path / "out"))
    assert outcome == "clean" and peak_kb < 40 << 10, (outcome, stderr, peak_kb)


def test_a_flame_graph_of_100000_stacks_opens(tmp_path):
    archive, svg = tmp_path / "stacks.sfbt", tmp_path / "out.svg"
    archive.write_bytes(many_stacks_archive(100000))
    result = run_bounded("flame", archive, "-o", svg, seconds=600)
    assert result.returncode == 0, result.stderr
    warnings = result.stderr.decode().splitlines()
    assert len(warnings) == 1 and "frames narrower than 0.1 px" in warnings[0], warnings
    assert svg.stat().st_size < 10 << 20
    document = xml.dom.minidom.parse(str(svg))
    frames = [g for g in document.getElementsByTagName("g") if g.getAttribute("class") == "f"]
    assert 0 < len(frames) <= MAX_FRAMES
    assert frames[0].getAttribute("data-name") == "all"


def test_a_json_entry_larger_than_the_cache_reads_is_not_made():
    from sfbt.cache import MAX_ENTRY_BYTES
    from sfbt.symbols.symbolizer import json_entry
    names = ["x" * (1 << 20)] * (MAX_ENTRY_BYTES >> 20)  # megabyte names, 64 MB of them
    assert json_entry(names) is None
    assert json_entry(names[:2]) == b'["' + b"x" * (1 << 20) + b'","' + b"x" * (1 << 20) + b'"]'


def test_fold_names_frames_of_a_million_aliases(tmp_path, cache):
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.archive.store import MAGIC, Archive
    exe, archive = tmp_path / "exe", tmp_path / "stacks.sfbt"
    exe.write_bytes(alias_elf(1 << 20))
    saved = Archive()
    saved.capture(cbf.encode([cbf.Frame("pc", TEXT + 0x105)]),
                  ImageMap("linux-x86_64", [Image(str(exe), TEXT - 0x1000, TEXT + 0x10000)]),
                  time_ns=1, architecture="x86_64", thread="1", reason="SIGPROF")
    archive.write_bytes(MAGIC + saved.pending_bytes())
    result = run_bounded("fold", archive, seconds=120)
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert result.stdout.decode().splitlines() == ["f999999 1"]
