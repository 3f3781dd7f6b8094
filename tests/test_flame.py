"""sfbt flame: the SVG's script (search, zoom, a width that follows the
window), run by node in a stand-in DOM; and --format pprof, read back by
Go's own `go tool pprof`."""

import json
import re
import shutil
import subprocess
import xml.dom.minidom
from collections import Counter
from pathlib import Path

import pytest

from conftest import require, run_sfbt
from test_stack import Running, _one_line_error, workers  # noqa: F401

HERE = Path(__file__).resolve().parent
STACKS = [(["main", "a", "compute"], 5), (["main", "b", "compute"], 3), (["main", "b"], 2),
          (["other"], 1)]
HIGHLIGHT = "rgb(230,0,230)"


def _tree(element):
    """An XML element as flame_dom.js takes it."""
    return {"tag": element.tagName, "attrs": dict(element.attributes.items()),
            "text": "".join(n.data for n in element.childNodes
                            if n.nodeType in (n.TEXT_NODE, n.CDATA_SECTION_NODE)),
            "children": [_tree(n) for n in element.childNodes if n.nodeType == n.ELEMENT_NODE]}


def _run_script(svg, steps):
    node = shutil.which("node")
    require(node, "node is not installed (./install.sh --test-debuggers)")
    document = xml.dom.minidom.parseString(svg)
    script = document.getElementsByTagName("script")[0].firstChild.data
    payload = {"tree": _tree(document.documentElement), "script": script, "steps": steps}
    result = subprocess.run([node, str(HERE / "flame_dom.js")], input=json.dumps(payload),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _frame(state, name, first=None):
    """The frame of that name (starting at sample ``first``)."""
    (frame,) = [f for f in state["frames"]
                if f["name"] == name and first in (None, f["s"])]
    return frame


def test_search_zoom_and_width(tmp_path):
    from sfbt.outputs.flame import flame_svg
    svg = flame_svg(STACKS, "a <title>", "sfbt record of process 1 (x) at 99 Hz: 11 stacks")
    names = [g.getAttribute("data-name")
             for g in xml.dom.minidom.parseString(svg).getElementsByTagName("g")]
    steps = [{"do": "resize", "width": 400},
             {"do": "key", "key": "f", "ctrl": True, "answer": "^comp"},
             {"do": "click", "frame": names.index("b")},
             {"do": "hover", "frame": len(names) - 1},
             {"do": "click", "id": "unzoom"},
             {"do": "click", "id": "search"},
             {"do": "click", "id": "search", "answer": "ma"},
             {"do": "click", "frame": names.index("a")},
             {"do": "key", "key": "Escape"}]
    result = _run_script(svg, steps)
    first, resized, found, zoomed, hovered, unzoomed, cleared, again, _, reset = \
        result["states"]
    fills = {f["name"]: f["fill"] for f in first["frames"]}

    # drawn at the window's width: 1200 at first, 400 after a resize
    assert first["svgWidth"] == "100%" and first["bands"] == ["1180"] * 3
    assert resized["bands"] == ["380"] * 3
    assert _frame(first, "other")["text"] == "other"  # 1/11 of 1180 px
    assert _frame(resized, "other")["text"] == "ot.."  # 1/11 of 380 px
    assert _frame(first, "all")["width"] == "100.0000%"
    assert _frame(first, "main")["width"] == f"{100 * 10 / 11:.4f}%"
    assert all(f["shown"] for f in first["frames"])
    assert not first["ids"]["unzoom"]["shown"] and first["ids"]["matched"]["text"] == ""

    # Ctrl-F: the browser's own search is kept away, matching frames lit,
    # the share of samples under them (each once) shown
    assert found["prevented"] and found["prompts"] == 1
    assert found["ids"]["matched"]["text"] == "Matched: 72.73% (8 of 11 samples)"
    assert found["ids"]["search"]["text"] == "Reset search"
    for frame in found["frames"]:
        assert frame["fill"] == (HIGHLIGHT if frame["name"] == "compute"
                                 else fills[frame["name"]]), frame

    # a click zooms: b over the whole width, its callers dimmed below,
    # the rest hidden; the search stays lit
    assert _frame(zoomed, "b")["width"] == "100.0000%"
    assert _frame(zoomed, "compute", 5) == {**_frame(zoomed, "compute", 5), "shown": True,
                                             "x": "0.0000%", "width": "60.0000%",
                                             "fill": HIGHLIGHT}
    assert [_frame(zoomed, n)["opacity"] for n in ("all", "main")] == [0.6, 0.6]
    assert not any(_frame(zoomed, n)["shown"] for n in ("a", "other"))
    assert not _frame(zoomed, "compute", 0)["shown"]
    assert zoomed["ids"]["unzoom"]["shown"]
    assert hovered["ids"]["status"]["text"] == "compute (5 samples, 45.45%)"

    # Reset zoom, then the search button resets the search and asks again
    assert all(f["shown"] for f in unzoomed["frames"]) and not unzoomed["ids"]["unzoom"]["shown"]
    assert cleared["ids"]["matched"]["text"] == ""
    assert all(f["fill"] == fills[f["name"]] for f in cleared["frames"])
    assert cleared["prompts"] == 1 and again["prompts"] == 2
    assert again["ids"]["matched"]["text"] == "Matched: 90.91% (10 of 11 samples)"

    # Escape: neither zoomed nor searching
    assert all(f["shown"] and f["opacity"] == 1 for f in reset["frames"])
    assert reset["ids"]["matched"]["text"] == "" and reset["ids"]["search"]["text"] == "Search"
    assert reset["ids"]["details"]["text"] == \
        "sfbt record of process 1 (x) at 99 Hz: 11 stacks"

    logic = result["logic"]
    assert logic["plain"] and logic["regex"] and logic["nested"] == 14
    assert logic["fit"] == ["", "comp..", "compute"]


def _fold_counts(text):
    """{name: (flat, cum)} of `sfbt fold` output."""
    flat, cum = Counter(), Counter()
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        names = stack.split(";")
        flat[names[-1]] += int(count)
        for name in set(names):
            cum[name] += int(count)
    return {name: (flat[name], cum[name]) for name in cum}


_TOP_ROW = re.compile(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$", re.M)


@pytest.fixture(scope="module")
def go():
    found = shutil.which("go")
    require(found, "go is not installed (golang-go: ./install.sh --test-debuggers)")
    return found


def test_pprof_read_by_go_tool_pprof(go, workers, tmp_path):  # noqa: F811
    archive, profile = tmp_path / "profile.sfbt", tmp_path / "profile.pb.gz"
    with Running(workers, 1) as running:
        run_sfbt("stack", running.pid)  # the caches filled: record's first sample is quick
        recorded = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "50", "--duration", "1",
                            "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    written = run_sfbt("flame", "--format", "pprof", archive, "-o", profile)
    assert written.returncode == 0, written.stderr
    assert re.fullmatch(rf"{profile}: pprof of \d+ stacks \(\d+ distinct\)\n", written.stdout)
    assert profile.read_bytes()[:2] == b"\x1f\x8b"  # gzip

    folded = _fold_counts(run_sfbt("fold", archive).stdout)
    total = sum(flat for flat, _ in folded.values())
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    top = subprocess.run([go, "tool", "pprof", "-top", "-nodefraction=0", str(profile)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert top.returncode == 0, top.stderr
    assert f"Total samples = {total}" in top.stdout, top.stdout
    assert f"sfbt record of process {running.pid} (workers) at 50 Hz" in top.stdout
    assert re.search(r"^File: workers$", top.stdout, re.M)  # the program's mapping first
    rows = {name: (int(flat), int(cum)) for flat, cum, name in _TOP_ROW.findall(top.stdout)}
    # every function both name alike (the program's own at least) has
    # fold's counts: flat as the innermost frame, cum anywhere in a stack
    same = {name for name in rows if name in folded}
    assert {"main", "worker", "work_at", "compute", "wait_for_nothing"} <= same
    for name in same:
        assert rows[name] == folded[name], name
    assert sum(flat for flat, _ in rows.values()) == total
    busiest = max(rows.values())[0]
    assert busiest == max(flat for flat, _ in folded.values())

    raw = subprocess.run([go, "tool", "pprof", "-raw", str(profile)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert raw.returncode == 0, raw.stderr
    # every thread sampled on the wall clock (--idle): wall time per sample
    assert re.search(r"^PeriodType: wall nanoseconds\nPeriod: \d+$", raw.stdout, re.M), \
        raw.stdout[:300]
    mappings = {}
    for start, limit, path, build_id in re.findall(
            r"^\d+: 0x([0-9a-f]+)/0x([0-9a-f]+)/0x0 (\S+) ([0-9a-f]*) ?\[FN\]\[FL\]\[LN\]$",
            raw.stdout, re.M):
        mappings[path] = (int(start, 16), int(limit, 16), build_id)
    program = mappings[str(workers)]
    readelf = subprocess.run(["readelf", "-n", str(workers)], capture_output=True, text=True)
    assert program[2] == re.search(r"Build ID: ([0-9a-f]+)", readelf.stdout)[1]
    assert any(Path(path).name == "libc.so.6" for path in mappings)
    locations = re.findall(r"^\s+\d+: 0x([0-9a-f]+) M=\d+ (\S+) (\S+):(\d+) s=0$",
                           raw.stdout, re.M)
    compute = [(int(a, 16), file) for a, name, file, _ in locations if name == "compute"]
    assert compute and all(program[0] <= a < program[1] and file.endswith("workers.c")
                           for a, file in compute)


def test_the_signal_trampoline_named_as_sframe_bt_names_it(go, tmp_path):
    """A stack saved in a signal handler: the flame graph and pprof name
    the kernel's signal trampoline `<signal handler called>`, pprof's
    Location at the trampoline's own address (not one byte before it)."""
    from gdb_support import compile_program
    program = compile_program(tmp_path, "handler_wait", "O2", True, ["handler_wait.c"])
    archive, profile, svg = (tmp_path / name for name in ("handler.sfbt", "handler.pb.gz",
                                                          "handler.svg"))
    with Running(program) as running:
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o", archive)
    assert saved.returncode == 0, saved.stderr
    (trampoline,) = re.findall(r"^#\d+\s+0x([0-9a-f]+) in <signal handler called>$",
                               run_sfbt("cbf", "decode", archive).stdout, re.M)
    assert run_sfbt("flame", archive, "-o", svg).returncode == 0
    assert "&lt;signal handler called&gt; (1 sample, 100.00%)" in svg.read_text()
    assert run_sfbt("flame", "--format", "pprof", archive, "-o", profile).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    raw = subprocess.run([go, "tool", "pprof", "-raw", str(profile)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert raw.returncode == 0, raw.stderr
    assert re.search(rf"^\s+\d+: 0x{int(trampoline, 16):x} M=\d+ <signal handler called> ",
                     raw.stdout, re.M), raw.stdout
    top = subprocess.run([go, "tool", "pprof", "-top", str(profile)],
                         capture_output=True, text=True, env=env, timeout=120)
    rows = {name: (int(flat), int(cum)) for flat, cum, name in _TOP_ROW.findall(top.stdout)}
    assert rows["<signal handler called>"] == (0, 1), top.stdout


def test_pprof_bad_input(tmp_path):
    out = tmp_path / "profile.pb.gz"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line_error(run_sfbt("flame", "--format", "pprof", bad, "-o", out),
                    rf"sfbt: {bad}: not a JSON document: .*")
    damaged = tmp_path / "damaged.sfbt"
    damaged.write_bytes(b"SFBTARC\x01" + b"\x02\xff\xff\xff\x00")
    _one_line_error(run_sfbt("flame", "--format", "pprof", damaged, "-o", out),
                    rf"sfbt: {damaged}\+0x8: record of \d+ bytes runs past the end .*")
    _one_line_error(run_sfbt("flame", "--format", "pprof", tmp_path / "missing", "-o", out),
                    rf"sfbt: {tmp_path}/missing: No such file or directory")
    assert not out.exists()


def test_what_was_sampled(tmp_path):
    """The line under the title, from an archive's events."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.archive.saved import SavedFile
    from sfbt.archive.store import MAGIC, Archive
    archive = Archive()
    images = ImageMap("linux-x86_64", [Image("/bin/true", 0x400000, 0x500000)])
    second = 1_700_000_000 * 10**9
    for thread, time_ns, address in (("1 (a)", second, 0x400100), ("2 (b)", second, 0x400200),
                                     ("1 (a)", second + 10**9, 0x400100)):
        archive.capture(cbf.encode([cbf.Frame("pc", address)]), images, thread=thread,
                        time_ns=time_ns, reason="sample", label="sfbt record of x")
    path = tmp_path / "three.sfbt"
    path.write_bytes(MAGIC + archive.pending_bytes())
    with SavedFile(str(path)) as saved:
        assert sum(trace.weight for trace in saved.traces()) == 3
        recording = saved.recording
    assert (recording.stacks, recording.samples, recording.threads) == (3, 2, 2)
    assert recording.rate == 1.0 and recording.duration_ns == 2 * 10**9
    assert recording.describe() == \
        "sfbt record of x: 2 samples over 2.0 s (1.0 Hz), 3 stacks of 2 threads"
    drawn = run_sfbt("flame", path, "-o", tmp_path / "three.svg")
    assert drawn.returncode == 0, drawn.stderr
    assert f">{recording.describe()}</text>" in (tmp_path / "three.svg").read_text()


def test_pprof_escapes_names_from_the_archive(go, tmp_path):
    """An image path and a label holding terminal escapes and a newline
    reach `go tool pprof`'s output escaped as sfbt prints names."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.archive.store import MAGIC, Archive
    archive, profile = tmp_path / "hostile.sfbt", tmp_path / "hostile.pb.gz"
    saved = Archive()
    images = ImageMap("linux-x86_64", [Image("/tmp/ev\x1b[31mil\n.so", 0x400000, 0x500000)])
    saved.capture(cbf.encode([cbf.Frame("pc", 0x400100)]), images, thread="1",
                  reason="SIGTRAP", label="lab\x1b]0;pwn\x07el")
    archive.write_bytes(MAGIC + saved.pending_bytes())
    assert run_sfbt("flame", "--format", "pprof", archive, "-o", profile).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for form in ("-top", "-raw"):
        shown = subprocess.run([go, "tool", "pprof", form, str(profile)],
                               capture_output=True, text=True, env=env, timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", shown.stdout), shown.stdout
        assert "lab\\033]0;pwn\\ael" in shown.stdout, shown.stdout
        assert "ev\\033[31mil\\n.so" in shown.stdout, shown.stdout
    assert re.search(r"^\d+: 0x400000/0x500000/0x0 /tmp/ev\\033\[31mil\\n\.so ",
                     shown.stdout, re.M), shown.stdout
