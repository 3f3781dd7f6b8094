"""A short, seeded run of bench/fuzz_trust.py (as root): cores and
archives owned by nobody naming files nobody may not read show none of
their bytes or names, and end cleanly or in one line of error."""

import os
import shutil
import tempfile

from conftest import bench_module, require


def test_files_the_writer_could_not_read_are_not_shown():
    require(os.geteuid() == 0, "files of another user need root")
    fuzz = bench_module("fuzz_trust")
    directory = tempfile.mkdtemp(prefix="sfbt-fuzz-trust-")  # searchable by nobody
    try:
        counts, failures = fuzz.fuzz_trust(40, 2026, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert sum(counts[outcome] for outcome in fuzz.OUTCOMES) == 40
    assert counts["shown"] > 0  # files nobody may read are read: the cases reach them
    assert (counts["harm"], counts["traceback"], counts["hang"], counts["blowup"]) == (
        0, 0, 0, 0), "\n".join(f"{what}: {' '.join(argv)}\n{detail}"
                               for what, argv, detail in failures[:5])
