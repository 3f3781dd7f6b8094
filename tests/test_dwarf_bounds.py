"""Hostile DWARF (tests/crafted_dwarf.py) bounded: each bomb, given to
`cbf decode --exe` under a 300 MB address-space limit, ends within
seconds in the backtrace (with one warning line naming the file, the
section and the offset of what a limit left out) or in one error line
naming the file and what is wrong; never a hang, a MemoryError or a
traceback.  On the readers before the bounds, each hung (over 30 s) or
ran out of memory."""

import time

import pytest

import crafted_dwarf
from sfbt.archive import cbf
from test_bounds import one_line, run_bounded

#: seconds a bomb may take (the bounded readers take under 4 on an idle
#: machine; the hostile readers took over 30, or ran out of memory)
SECONDS = 45


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.cbf"
    path.write_bytes(cbf.encode([cbf.Frame("pc", crafted_dwarf.CODE + 0x10),
                                 cbf.Frame("ra", crafted_dwarf.CODE + 0x20)]))
    return path


def _decoded(trace, tmp_path, bomb):
    """(result, seconds) of cbf decode --exe over the bomb's file."""
    path = tmp_path / f"{bomb.__name__}.elf"
    path.write_bytes(bomb())
    began = time.monotonic()
    result = run_bounded("cbf", "decode", trace, "--exe", path, seconds=SECONDS * 3)
    return result, time.monotonic() - began


def _warning(result, *words):
    """The backtrace was printed, and one warning line holding words."""
    assert result.returncode == 0, result.stderr
    assert b"#0  0x0000000000401010" in result.stdout, result.stdout
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sfbt: warning: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("bomb, words", [
    (crafted_dwarf.zero_width_attributes, ("unreadable DWARF entries", "unit at 0x0",
                                           "attribute reads")),
    (crafted_dwarf.shared_ranges, ("unreadable DWARF entries", "overlap more than")),
    (crafted_dwarf.huge_file_count, ("unreadable DWARF line table",
                                     "claims 1099511627776 entries")),
])
def test_a_bomb_ends_in_one_error_line(trace, tmp_path, bomb, words):
    result, seconds = _decoded(trace, tmp_path, bomb)
    one_line(result, f"{bomb.__name__}.elf", *words)
    assert seconds < SECONDS


@pytest.mark.parametrize("bomb, words", [
    (crafted_dwarf.deep_inline_chain, (".debug_info+0x0", "inlined calls nested deeper than "
                                       "256 left out", "1 more")),
    (crafted_dwarf.many_rows, (".debug_line+0x0", "line program past its first 8388608 "
                               "bytes left out")),
    (crafted_dwarf.zlib_bomb, (".debug_line: past its first 67108864 bytes inflated left out",
                               "2 more")),
])
def test_a_limit_leaves_out_what_is_past_it_and_says_so(trace, tmp_path, bomb, words):
    result, seconds = _decoded(trace, tmp_path, bomb)
    _warning(result, f"{bomb.__name__}.elf", *words)
    assert seconds < SECONDS


@pytest.mark.parametrize("bomb", [crafted_dwarf.shared_abbreviations,
                                  crafted_dwarf.references_to_many_units])
def test_work_shared_by_many_units_is_done_once(trace, tmp_path, bomb):
    """Thousands of units sharing an abbreviation table, or named from one
    unit: read in seconds (each unit's table once, a unit found by
    bisection), not in their number squared."""
    result, seconds = _decoded(trace, tmp_path, bomb)
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert seconds < SECONDS


def test_names_are_cut_and_inline_chains_kept_to_their_depth():
    """In the deep chain: 256 calls kept, each name cut to MAX_NAME
    characters and the marker."""
    import io
    from sfbt.dwarf import inline
    from sfbt.symbols.symbolizer import FileSymbolizer
    symbols = FileSymbolizer(io.BytesIO(crafted_dwarf.deep_inline_chain(300, 70_000)), "deep",
                             cached=False)
    chain = symbols.inlined(crafted_dwarf.CODE + 0x10)
    assert len(chain) == inline.MAX_INLINE_DEPTH
    assert {call.name for call in chain} == {"f" * inline.MAX_NAME + inline.CUT}


def test_millions_of_units_in_a_zlib_bomb_are_read_to_a_limit(trace, tmp_path):
    """2.5 million units of 28 bytes (70 MB), compressed: .debug_info
    inflated to its first 64 MiB and the top entries of its first 200,000
    units read, said in the warning line (before: out of memory)."""
    result, seconds = _decoded(trace, tmp_path, crafted_dwarf.many_units)
    lines = result.stderr.decode().splitlines()
    assert lines[-1].startswith("sfbt: warning: ") and "many_units.elf: .debug_info" in lines[-1]
    assert ".debug_info: past its first 67108864 bytes inflated left out (and 1 more left out)" \
        in lines[-1], lines
    assert seconds < SECONDS
