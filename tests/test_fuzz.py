"""A short, seeded run of bench/fuzz.py's engine: mutated ELF files,
archives, CBF, JSON and lws inputs given to the command line, each in a
forked child under a memory and time limit.  Every case must end cleanly
or in one line of error: no traceback, hang or blow-up."""

import os

from conftest import bench_module, require


def test_mutated_inputs_end_cleanly_or_in_one_line(tmp_path):
    fuzz = bench_module("fuzz")
    counts, failures = fuzz.fuzz(100, 2026, str(tmp_path))
    assert sum(counts.values()) == 100
    assert counts["error"] > 0 and counts["clean"] > 0  # the cases reach both ends
    assert failures == [], "\n".join(f"{outcome}: {' '.join(argv)}\n{stderr}"
                                     for outcome, argv, _, stderr in failures[:5])


def test_the_engine_tells_outcomes_apart(tmp_path):
    fuzz = bench_module("fuzz")
    assert fuzz.run_case(["cbf", "decode", str(tmp_path / "missing")])[0] == "error"
    assert fuzz.run_case(["fold", "--no-such-option"])[0] == "traceback"  # usage: 2 lines
    good = tmp_path / "t.cbf"
    good.write_bytes(bytes([0x02, 0x18, 0x01, 0x00]))
    assert fuzz.run_case(["cbf", "decode", str(good)])[0] == "clean"


def test_planted_cache_entries_and_output_links_do_no_harm(tmp_path):
    """bench/fuzz.py --planted: hostile entries at the names a command's
    cache entries have, and an output link in a sticky directory."""
    require(os.geteuid() == 0, "planting files of another user needs root")
    fuzz = bench_module("fuzz")
    counts, failures = fuzz.fuzz_planted(40, 2026, str(tmp_path))
    assert sum(counts[outcome] for outcome in fuzz.OUTCOMES) == 40
    assert counts["clean"] > 0 and counts["error"] > 0
    assert failures == [], "\n".join(f"{what}: {' '.join(argv)}\n{stderr}"
                                     for what, argv, stderr in failures[:5])


def test_the_planted_engine_sees_harm(tmp_path, monkeypatch):
    require(os.geteuid() == 0, "planting files of another user needs root")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the engine sets it
    fuzz = bench_module("fuzz")
    planted = fuzz.Planted(str(tmp_path))
    try:
        assert planted._harms(100 * 1024, False) == []
        assert planted._harms(400 * 1024, True) == ["memory over 300 MB",
                                                    "names from another file"]
        with open(planted.keep, "ab") as stream:
            stream.write(b"changed")
        assert planted._harms(0, False) == ["writes outside"]
        assert planted._harms(0, False) == []  # each case is judged on its own
        open(planted.created, "wb").close()
        assert planted._harms(0, False) == ["writes outside"]
    finally:
        planted.close()


def test_hostile_names_cannot_act(tmp_path):
    """Thread names, stop reasons, labels, image paths and ELF symbols made
    of terminal escapes, forged lines, bytes that are not UTF-8 and markup:
    cbf decode, fold, flame (SVG, speedscope) and sfbt stack print them
    escaped, in their own layout, with valid XML and JSON."""
    fuzz = bench_module("fuzz")
    live = fuzz.build_hostile_names(str(tmp_path))
    counts, failures = fuzz.fuzz_names(60, 2026, str(tmp_path), live)
    assert sum(counts.values()) == 60 and counts["clean"] > 0
    assert failures == [], "\n".join(f"{outcome}: {argv!r}\n{detail}"
                                     for outcome, argv, _, detail in failures[:5])


def test_the_names_check_sees_a_name_act():
    fuzz = bench_module("fuzz")
    assert fuzz.names_acted("decode", "#0  0x0000000000401000 in f\x1b[2J ()\n")
    assert fuzz.names_acted("decode", "#0  0x0000000000401000 in f\n#9 fake\n")
    assert fuzz.names_acted("fold", "main;f 1\nfake 2\n", traces=1)
    assert fuzz.names_acted("svg", "<svg><text>\x01</text></svg>")
    assert fuzz.names_acted("decode", r"#0  0x0000000000401000 in f\033[2J\n#9 fake ()") is None


def test_crafted_maps_and_cores_end_cleanly_or_in_one_line(tmp_path):
    """Image maps built to expand and cores built to lie, mutated or not,
    each under the 300 MB limit."""
    fuzz = bench_module("fuzz")
    counts, failures = fuzz.fuzz(40, 2026, str(tmp_path), only=("maps", "core"))
    assert sum(counts.values()) == 40 and counts["error"] > 0 and counts["clean"] > 0
    assert failures == [], "\n".join(f"{outcome}: {' '.join(argv)}\n{stderr}"
                                     for outcome, argv, _, stderr in failures[:5])
