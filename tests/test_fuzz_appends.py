"""A short, seeded run of bench/fuzz_appends.py: appending saves and an
`sfbt record -o` of the same file, interleaved, at output names another
user may have planted a file or a link at.  No traceback, hang or
blow-up, and no harm: no save that said Saved missing from the final
file, no file left another user's or wider than the umask, no write
through a planted link."""

import os

from conftest import bench_module, require


def test_interleaved_appends_and_recordings_do_no_harm(tmp_path):
    require(os.geteuid() == 0, "planting files of another user and recording need root")
    engine = bench_module("fuzz_appends")
    counts, failures = engine.fuzz_appends(10, 2026, str(tmp_path))
    assert counts["clean"] > 0 and counts["error"] > 0  # saves land, and some are refused
    assert {what: counts[what] for what in ("traceback", "hang", "blowup", *engine.HARMS)} \
        == dict.fromkeys(("traceback", "hang", "blowup", *engine.HARMS), 0), failures[:5]


def test_the_engine_sees_harm(tmp_path):
    """A save said Saved but missing (and replaced by no later save), a
    file of another user's, and the file to keep changed are each counted."""
    require(os.geteuid() == 0, "a file of another user needs root")
    engine = bench_module("fuzz_appends")
    appends = engine.Appends(str(tmp_path))
    try:
        path = os.path.join(tmp_path, "case", "out.sfbt")
        os.mkdir(os.path.dirname(path))
        assert engine.run_case(engine.appender(path, "kept"))[0] == "clean"
        # "earlier" ended before a replacing save: its absence is no harm
        results = [("append", "kept", "clean", "", 2.0), ("append", "gone", "clean", "", 2.0),
                   ("replace", "kept", "clean", "", 1.0), ("append", "earlier", "clean", "", 0.5)]
        counts, _ = appends._judge(path, "new", results)
        assert (counts["lost save"], counts["foreign file"]) == (1, 0)
        os.mkdir(os.path.dirname(path))
        assert engine.run_case(engine.appender(path, "kept"))[0] == "clean"
        os.chown(path, engine.NOBODY, engine.NOBODY)
        with open(appends.keep, "ab") as stream:
            stream.write(b"changed")
        counts, _ = appends._judge(path, "new", results[:1])
        assert counts["foreign file"] == counts["written through"] == 1
        assert counts["lost save"] == 0
    finally:
        appends.close()
