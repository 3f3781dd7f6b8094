"""`info sframe` (GDB) and `sframe-info` (LLDB) say when rows from a
module's DWARF CFI filled the gaps of its own SFrame data: a program with
one object assembled without --gsframe, after a backtrace through it."""

import re

from gdb_support import run_gdb, split_sections
from lldb_support import mark, run_lldb
from test_partly_sframe import _build

#: the second line of a module whose .sframe gaps its CFI filled
GAPS = r"\n {40}\+ where it has no row: synthesized from \.eh_frame, \d+ FDEs\n"


def _partly(tmp_path):
    return _build(tmp_path, "partly")


def test_gdb_info_sframe_says_where_cfi_filled_gaps(gdb, tmp_path):
    program = _partly(tmp_path)
    out = run_gdb(gdb, [str(program)], [
        "set sframe unwinder off", "break innermost", "run",
        "echo ==BEFORE==\\n", "info sframe", "sframe-bt", "echo ==AFTER==\\n",
        "info sframe"])
    before, after = split_sections(out, "==BEFORE==")[0].split("==AFTER==\n")
    own = r"SFrame v1, \d+ FDEs, from file\s+\S*/partly"
    assert re.search(own + r"\n", before) and "where it has no row" not in before, before
    assert re.search(own + GAPS, after), after
    assert "middle" in before  # the backtrace went through middle, which has no SFrame FDE


def test_lldb_sframe_info_says_where_cfi_filled_gaps(lldb, tmp_path):
    program = _partly(tmp_path)
    out = run_lldb(lldb, program, ["breakpoint set -n innermost", "run", mark("BEFORE"),
                                   "sframe-info", "sframe-bt", mark("AFTER"), "sframe-info"])
    before = out[out.index("==BEFORE=="):out.index("==AFTER==")]
    after = out[out.index("==AFTER=="):]
    own = r"SFrame v1, \d+ FDEs, from file\s+\S*/partly"
    assert re.search(own + r"\n", before) and "where it has no row" not in before, before
    assert re.search(own + GAPS, after), after
