"""A short, seeded run of bench/fuzz_dwarf.py: DWARF bombs of random size,
mutated or not, given to cbf decode --exe in forked children under a
memory and time limit.  Every case must end cleanly or in one line of
error: no traceback, hang (60 s) or blow-up, no peak over 300 MB."""

from conftest import bench_module

fuzz_dwarf = bench_module("fuzz_dwarf")


def test_dwarf_bombs_end_cleanly_or_in_one_line(tmp_path):
    counts, failures = fuzz_dwarf.fuzz_dwarf(16, 2026, str(tmp_path))
    assert sum(counts[outcome] for outcome in ("clean", "error", "traceback", "hang",
                                               "blowup", "acted")) == 16
    assert counts["clean"] > 0 and counts["error"] > 0  # the cases reach both ends
    assert failures == [], "\n".join(f"{outcome}: {name}\n{stderr}"
                                     for outcome, name, stderr in failures[:5])
    assert counts["harms"] == 0
