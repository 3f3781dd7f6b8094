"""A small seeded dose of bench/fuzz_symbols.py: symbol, alias, name and
PLT bombs, mutated or not, and archives of thousands of distinct stacks
for fold and flame.  No traceback, hang or blow-up, and no case over
300 MB."""

from conftest import bench_module


def test_symbol_bombs_end_cleanly_or_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    module = bench_module("fuzz_symbols")
    counts, failures = module.fuzz_symbols(15, 2026, str(tmp_path))
    assert sum(counts[outcome] for outcome in module.OUTCOMES) == 15
    assert counts["clean"] > 0
    assert failures == [], "\n".join(f"{what}: {' '.join(argv)}\n{stderr}"
                                     for what, argv, stderr in failures[:5])
