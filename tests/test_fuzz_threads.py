"""A short, seeded run of bench/fuzz_threads.py's engine: sfbt stack and
sfbt record of processes whose threads come and go, wait in vfork, exec,
or outlive their main thread.  Every case must end cleanly or in one line
of error, within its time and memory limits, the recorder's descriptors
flat."""

from conftest import bench_module


def test_hard_threads_end_cleanly_or_in_one_line(tmp_path):
    engine = bench_module("fuzz_threads")
    counts, failures = engine.fuzz_threads(12, 2405, str(tmp_path))  # vfork for stack and record
    assert sum(counts[outcome] for outcome in engine.OUTCOMES) == 12
    assert counts["clean"] > 0  # the cases reach a stack or a recording
    assert failures == [], "\n".join(f"{what}: {' '.join(argv)}\n{stderr}"
                                     for what, argv, stderr in failures[:5])
