"""A short, seeded run of bench/fuzz.py's engine: mutated ELF files,
archives, CBF, JSON and lws inputs given to the command line, each in a
forked child under a memory and time limit.  Every case must end cleanly
or in one line of error: no traceback, hang or blow-up."""

import importlib.util

from conftest import ROOT


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("sfbt_fuzz", ROOT / "bench" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mutated_inputs_end_cleanly_or_in_one_line(tmp_path):
    fuzz = _fuzz_module()
    counts, failures = fuzz.fuzz(100, 2026, str(tmp_path))
    assert sum(counts.values()) == 100
    assert counts["error"] > 0 and counts["clean"] > 0  # the cases reach both ends
    assert failures == [], "\n".join(f"{outcome}: {' '.join(argv)}\n{stderr}"
                                     for outcome, argv, _, stderr in failures[:5])


def test_the_engine_tells_outcomes_apart(tmp_path):
    fuzz = _fuzz_module()
    assert fuzz.run_case(["cbf", "decode", str(tmp_path / "missing")])[0] == "error"
    assert fuzz.run_case(["fold", "--no-such-option"])[0] == "traceback"  # usage: 2 lines
    good = tmp_path / "t.cbf"
    good.write_bytes(bytes([0x02, 0x18, 0x01, 0x00]))
    assert fuzz.run_case(["cbf", "decode", str(good)])[0] == "clean"
