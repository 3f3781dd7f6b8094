"""A short, seeded run of bench/fuzz_servers.py: `sfbt cbf decode` asking
hostile debuginfod servers (trickling, stalling, lying, redirecting,
many) ends within the time limit, in one line or cleanly, within the
memory limit, and never prints a URL's password."""

from conftest import bench_module


def test_hostile_servers_end_within_the_deadline(tmp_path):
    engine = bench_module("fuzz_servers")
    counts, failures = engine.fuzz_servers(8, 2026, str(tmp_path))
    assert counts["requests"] >= 8  # the cases reach the servers
    assert counts["clean"] + counts["error"] == 8, failures[:3]
    assert counts["traceback"] == counts["hang"] == counts["blowup"] == counts["harm"] == 0
    assert failures == []
