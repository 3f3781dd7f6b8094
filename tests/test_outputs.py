"""The outputs of saved stacks told apart by thread (sfbt.outputs): a
real recording of the workers program (threads named with
pthread_setname_np, two pairs of which share a stack) read by `sfbt fold
--per-thread`, `sfbt flame --per-thread` (SVG, speedscope), pprof's
labels (the protobuf decoded here, and read by `go tool pprof`), the
headings of `sfbt cbf decode`; the archive event's tail (pid, tid, name,
cut) written and read back, old events without it; cut stacks marked."""

import gzip
import json
import os
import re
import shutil
import subprocess
import xml.dom.minidom
from collections import Counter, defaultdict

import pytest

from conftest import require, run_sfbt
from test_stack import Running, workers  # noqa: F401

#: the workers program's threads that wait in the same stack: same wait
#: (id % 4), same depth (id % 2)
SHARED = (("wait-2", "wait-6"), ("wait-3", "wait-7"))


def _changed(event, **fields):
    """A copy of archive Event ``event`` with ``fields`` changed."""
    from sfbt.archive.store import Event
    copy = Event(*(getattr(event, name) for name in Event.__slots__))
    for name, value in fields.items():
        setattr(copy, name, value)
    return copy


@pytest.fixture(scope="module")
def recorded(workers, tmp_path_factory):  # noqa: F811
    """(archive, pid, {tid: name}, ticks) of a 1-second recording of the
    workers program, one thread computing."""
    archive = tmp_path_factory.mktemp("outputs") / "profile.sfbt"
    with Running(workers, 1) as running:
        task = f"/proc/{running.pid}/task"
        names = {int(tid): open(f"{task}/{tid}/comm").read().strip()
                 for tid in os.listdir(task)}
        run_sfbt("stack", running.pid)  # the caches filled: the first sample is quick
        done = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "50", "--duration", "1",
                        "-o", archive)
    assert done.returncode == 0, done.stderr
    ticks = int(re.search(r"Recorded \d+ stacks in (\d+) samples", done.stdout)[1])
    assert len(names) == 9 and {"busy-0", "wait-2", "wait-6"} <= set(names.values())
    return archive, running.pid, names, ticks


def _folded(text):
    """[(names root first, count)] of folded stacks."""
    stacks = []
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        stacks.append((stack.split(";"), int(count)))
    return stacks


def test_fold_per_thread_gives_each_thread_its_root(recorded):
    archive, pid, names, ticks = recorded
    by_thread = run_sfbt("fold", "--per-thread", archive)
    assert by_thread.returncode == 0 and by_thread.stderr == "", by_thread.stderr
    counts = Counter()
    for stack, count in _folded(by_thread.stdout):
        counts[stack[0]] += count
        # the thread's own stack under its root: main's, or a thread's start
        assert stack[1] in ("main", "clone3", "__clone3"), stack
    # `name (tid)`, every thread once per sample
    assert counts == {f"{name} ({tid})": ticks for tid, name in names.items()}
    plain = _folded(run_sfbt("fold", archive).stdout)
    assert sum(c for _, c in plain) == 9 * ticks
    assert {stack[0] for stack, _ in plain} <= {"main", "clone3", "__clone3"}
    # the stack two threads share is one line without --per-thread, and
    # a line under each thread with it
    for first, second in SHARED:
        mine = {tuple(s[1:]) for s, _ in _folded(by_thread.stdout)
                if s[0].startswith(f"{first} (")}
        theirs = {tuple(s[1:]) for s, _ in _folded(by_thread.stdout)
                  if s[0].startswith(f"{second} (")}
        assert mine == theirs and len(mine) == 1
        (shared,) = mine
        assert [c for s, c in plain if tuple(s) == shared] == [2 * ticks]


def test_a_shared_stack_is_headed_with_every_thread(recorded):
    """`sfbt cbf decode` heads a stack two threads share with both (it
    named the first thread that captured it alone)."""
    archive, pid, names, ticks = recorded
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    tids = {name: tid for tid, name in names.items()}
    headings = re.findall(r"^Backtrace \d+, captured (\d+) times \((thread|threads) (.*?), "
                          r"sample, ", decoded.stdout, re.M)
    for first, second in SHARED:
        both = [(int(count), threads) for count, kind, threads in headings
                if kind == "threads" and f"{tids[first]} {first})" in threads]
        assert len(both) == 1, decoded.stdout
        count, threads = both[0]
        assert count == 2 * ticks
        assert re.fullmatch(rf"\d+ \({tids[first]} {first}\) and \d+ \({tids[second]} "
                            rf"{second}\)", threads), threads


def test_flame_and_speedscope_per_thread(recorded, tmp_path):
    archive, pid, names, ticks = recorded
    svg = tmp_path / "threads.svg"
    drawn = run_sfbt("flame", "--per-thread", archive, "-o", svg)
    assert drawn.returncode == 0, drawn.stderr
    assert re.fullmatch(rf"{svg}: svg of {9 * ticks} stacks \(\d+ distinct\)\n", drawn.stdout)
    levels = defaultdict(dict)
    for group in xml.dom.minidom.parse(str(svg)).getElementsByTagName("g"):
        levels[int(group.getAttribute("data-d"))][group.getAttribute("data-name")] = \
            int(group.getAttribute("data-v"))
    assert levels[0] == {"all": 9 * ticks}
    assert levels[1] == {f"{name} ({tid})": ticks for tid, name in names.items()}

    speed = tmp_path / "threads.json"
    assert run_sfbt("flame", "--per-thread", "--format", "speedscope", archive,
                    "-o", speed).returncode == 0
    document = json.loads(speed.read_text())
    frames = [frame["name"] for frame in document["shared"]["frames"]]
    profiles = {p["name"]: p for p in document["profiles"]}
    assert set(profiles) == {f"{name} ({tid})" for tid, name in names.items()}
    for tid, name in names.items():
        profile = profiles[f"{name} ({tid})"]
        assert sum(profile["weights"]) == ticks
        roots = {frames[stack[0]] for stack in profile["samples"]}
        assert roots <= ({"main"} if tid == pid else {"clone3", "__clone3"}), roots
    one = json.loads(run_sfbt_output(archive, tmp_path, "speedscope"))
    assert len(one["profiles"]) == 1 and sum(one["profiles"][0]["weights"]) == 9 * ticks


def run_sfbt_output(archive, tmp_path, form):
    out = tmp_path / f"out.{form}"
    done = run_sfbt("flame", "--format", form, archive, "-o", out)
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


#: a frame named after its address (fold) or its image and offset (flame):
#: its function unknown
_UNNAMED = re.compile(r"(.*\+)?0x[0-9a-f]+")


def test_fold_and_flame_name_frames_alike(recorded, tmp_path):
    """`sfbt fold` and `sfbt flame` name frames through one namer (the
    archive's Symbolizer): every stack has the same names, frame for frame,
    in both, but where a function is unknown (each names it its way)."""
    archive = recorded[0]

    def known(stack):
        return tuple("?" if _UNNAMED.fullmatch(name) else name for name in stack)
    folded = Counter()
    for stack, count in _folded(run_sfbt("fold", archive).stdout):
        folded[known(stack)] += count
    document = json.loads(run_sfbt_output(archive, tmp_path, "speedscope"))
    names = [frame["name"] for frame in document["shared"]["frames"]]
    (profile,) = document["profiles"]
    drawn = Counter()
    for sample, weight in zip(profile["samples"], profile["weights"]):
        drawn[known(names[index] for index in sample)] += weight
    assert drawn == folded
    assert any(len(stack) > 3 and "?" not in stack for stack in folded), folded


# -- pprof, decoded here -------------------------------------------------------

def _varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _message(data):
    """{field: [value]} of a protobuf message: ints for varints, bytes for
    length-delimited fields."""
    fields, at = defaultdict(list), 0
    while at < len(data):
        key, at = _varint(data, at)
        if key & 7 == 0:
            value, at = _varint(data, at)
        elif key & 7 == 2:
            size, at = _varint(data, at)
            value, at = data[at:at + size], at + size
        else:
            raise AssertionError(f"wire type {key & 7}")
        fields[key >> 3].append(value)
    return fields


def _packed(data):
    values, at = [], 0
    while at < len(data):
        value, at = _varint(data, at)
        values.append(value)
    return values


def pprof_samples(data):
    """[(count, {label: value}, [function name, root first])] of a gzipped
    profile.proto profile (field numbers of pprof's proto/profile.proto)."""
    profile = _message(gzip.decompress(data))
    strings = [s.decode() for s in profile[6]]
    functions = {}
    for raw in profile[5]:
        function = _message(raw)
        functions[function[1][0]] = strings[function[2][0]]
    locations = {}
    for raw in profile[4]:
        location = _message(raw)
        locations[location[1][0]] = [functions[_message(line)[1][0]] for line in location[4]]
    samples = []
    for raw in profile[2]:
        sample = _message(raw)
        labels = {}
        for label in map(_message, sample[3]):
            key = strings[label[1][0]]
            assert (2 in label) != (3 in label), key  # a string or a number
            labels[key] = strings[label[2][0]] if 2 in label else label[3][0]
        names = [name for id_ in _packed(sample[1][0]) for name in locations[id_]]
        samples.append((_packed(sample[2][0])[0], labels, names[::-1]))
    return samples


def test_pprof_samples_carry_their_thread(recorded, tmp_path):
    archive, pid, names, ticks = recorded
    samples = pprof_samples(run_sfbt_output(archive, tmp_path, "pprof"))
    per_thread = Counter()
    for count, labels, stack in samples:
        assert set(labels) == {"thread", "thread_name", "pid"}, labels
        assert labels["pid"] == pid and names[labels["thread"]] == labels["thread_name"]
        per_thread[labels["thread"]] += count
    assert per_thread == {tid: ticks for tid in names}
    # the stack two threads share: a sample of each, told apart
    for first, second in SHARED:
        stacks = {labels["thread_name"]: stack for _, labels, stack in samples
                  if labels["thread_name"] in (first, second)}
        assert stacks[first] == stacks[second]


def test_go_tool_pprof_focuses_on_a_thread(recorded, tmp_path):
    go = shutil.which("go")
    require(go, "go is not installed (golang-go: ./install.sh --test-debuggers)")
    archive, pid, names, ticks = recorded
    profile = tmp_path / "profile.pb.gz"
    profile.write_bytes(run_sfbt_output(archive, tmp_path, "pprof"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    tags = subprocess.run([go, "tool", "pprof", "-tags", str(profile)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert tags.returncode == 0, tags.stderr
    for key in ("thread", "thread_name", "pid"):
        assert re.search(rf"^ {key}: Total {9 * ticks}", tags.stdout, re.M), tags.stdout
    tid = next(tid for tid, name in names.items() if name == "wait-2")
    for focus in (f"thread={tid}", "thread_name=wait-2", f"pid={pid}"):
        top = subprocess.run([go, "tool", "pprof", "-top", f"-tagfocus={focus}",
                              str(profile)], capture_output=True, text=True, env=env,
                             timeout=120)
        assert top.returncode == 0, top.stderr
        shown = 9 * ticks if focus.startswith("pid") else ticks
        assert f"Showing nodes accounting for {shown}, " in top.stdout, (focus, top.stdout)


# -- the event's tail, and cut stacks ---------------------------------------------

def _rewritten(source, path, change):
    """Write at path the archive at source with each event changed by
    ``change(event)`` (events written as a sampler writes them)."""
    from sfbt.archive.store import Archive, read_archive, save_archive
    old, error = read_archive(str(source))
    assert error is None
    new = Archive()
    for image_map in old.image_maps:
        new.add_image_map(image_map)
    for trace_id in sorted(old.traces):
        assert new.add_trace(old.traces[trace_id].data) == trace_id
    for event in old.events:
        new.add_event(change(event))
    save_archive(str(path), new)
    return path


def test_event_tail_round_trip_and_old_events(recorded, tmp_path):
    """What `sfbt record` writes in an event's tail reads back; an event
    without one (as sfbt wrote them before) gives its thread id and name
    from its thread string, its process as unknown; appends keep tails."""

    from sfbt.archive.store import (ArchiveError, Archive, Event, parse_archive,
                                    read_archive, save_archive)
    from sfbt.archive.threads import sampled_thread
    archive, pid, names, ticks = recorded
    events = read_archive(str(archive))[0].events
    assert {(e.pid, e.tid, e.thread_name, e.cut) for e in events} == \
        {(pid, tid, name, False) for tid, name in names.items()}
    assert all(e.thread.endswith(f"({e.tid} {e.thread_name})") for e in events)

    old = _rewritten(archive, tmp_path / "old.sfbt",
                     lambda e: _changed(e, pid=0, tid=0, thread_name=""))
    # without a tail, each event record is what older sfbt wrote
    assert old.stat().st_size < archive.stat().st_size
    olds = read_archive(str(old))[0].events
    assert {sampled_thread(e)[:3] for e in olds} == {(0, t, n) for t, n in names.items()}
    by_thread = run_sfbt("fold", "--per-thread", old)
    assert {s[0] for s, _ in _folded(by_thread.stdout)} == \
        {f"{name} ({tid})" for tid, name in names.items()}

    # a name that is not UTF-8 and has a newline comes back as it was,
    # and is escaped where it is shown
    odd = Archive()
    odd.add_image_map(read_archive(str(archive))[0].image_maps[0])
    odd.add_trace(read_archive(str(archive))[0].traces[1].data)
    name = "bad\udcff\nname"
    odd.add_event(Event(1, 0, 1, "x86_64", "1 (77 x)", "sample", "", 5, 77, name, True))
    path = tmp_path / "odd.sfbt"
    save_archive(str(path), odd)
    save_archive(str(path), odd, append=True)
    back = read_archive(str(path))[0].events
    assert [(e.pid, e.tid, e.thread_name, e.cut) for e in back] == [(5, 77, name, True)] * 2
    folded = run_sfbt("fold", "--per-thread", path)
    assert folded.stdout.startswith("bad\\377\\nname (77);[cut];"), folded.stdout
    # a tail cut inside its ids is damage, said at its offset
    data = path.read_bytes()
    parsed, error = parse_archive(data)
    assert error is None and len(parsed.events) == 2
    _, damaged = parse_archive(_cut_tail(data))
    assert isinstance(damaged, ArchiveError) and "thread ids" in str(damaged)


def _cut_tail(data):
    """The archive ``data`` with its last event record's tail cut to 3
    bytes (its length and CRC made right)."""
    import struct
    import zlib
    from sfbt.archive.store import MAGIC
    at, last = len(MAGIC), None
    while at < len(data):
        kind, length = struct.unpack_from("<BI", data, at)
        if kind == 3:
            last = at
        at += 5 + length + 4
    kind, length = struct.unpack_from("<BI", data, last)
    payload = data[last + 5:last + 5 + length]
    strings_end = 16
    for _ in range(4):
        strings_end += 2 + int.from_bytes(payload[strings_end:strings_end + 2], "little")
    payload = payload[:strings_end + 3]
    head = struct.pack("<BI", kind, len(payload))
    record = head + payload + struct.pack("<I", zlib.crc32(head + payload))
    return data[:last] + record


def test_cut_stacks_are_marked(recorded, tmp_path):
    """Samples whose stack copy ended before the walk (the event's cut
    flag, set here on the busy thread's samples as a sampler sets it)
    fold under [cut], count apart in every summary line, and get a [cut]
    root in pprof."""
    archive, pid, names, ticks = recorded
    busy = next(tid for tid, name in names.items() if name == "busy-0")
    cut = _rewritten(archive, tmp_path / "cut.sfbt",
                     lambda e: _changed(e, cut=e.tid == busy))

    folded = run_sfbt("fold", cut)
    assert folded.returncode == 0
    assert folded.stderr == (f"sfbt fold: {9 * ticks} stacks, {8 * ticks} complete, "
                             f"{ticks} cut (under [cut])\n")
    stacks = _folded(folded.stdout)
    assert sum(c for s, c in stacks if s[0] == "[cut]") == ticks
    assert all("compute" in s for s, _ in stacks if s[0] == "[cut]")
    by_thread = _folded(run_sfbt("fold", "--per-thread", cut).stdout)
    assert all(s[1] == "[cut]" for s, _ in by_thread if s[0] == f"busy-0 ({busy})")
    assert not any("[cut]" in s for s, _ in by_thread if s[0] != f"busy-0 ({busy})")

    svg = tmp_path / "cut.svg"
    drawn = run_sfbt("flame", cut, "-o", svg)
    assert re.fullmatch(rf"{svg}: svg of {9 * ticks} stacks \(\d+ distinct, {8 * ticks} "
                        rf"complete, {ticks} cut\)\n", drawn.stdout), drawn.stdout
    details = [t for t in xml.dom.minidom.parse(str(svg)).getElementsByTagName("text")
               if t.getAttribute("id") == "details"][0].firstChild.data
    assert f"{9 * ticks} stacks ({8 * ticks} complete, {ticks} cut) of 9 threads" in details

    decoded = run_sfbt("cbf", "decode", cut).stdout
    assert re.search(rf"\(thread \d+ \({busy} busy-0\), sample, .* UTC, \d+ cut, label",
                     decoded)
    samples = pprof_samples(run_sfbt_output(cut, tmp_path, "pprof"))
    assert sum(c for c, labels, s in samples if s[0] == "[cut]") == ticks
    assert all(labels["thread"] == busy for _, labels, s in samples if s[0] == "[cut]")


def test_threads_past_the_limit_are_counted_together(recorded, monkeypatch):
    """An archive of more distinct threads than the reader keeps apart
    counts the rest as one, said in one note; every sample is kept."""
    from sfbt import errors
    from sfbt.archive import recording
    from sfbt.archive.saved import SavedFile
    from sfbt.outputs import Samples
    archive, pid, names, ticks = recorded
    monkeypatch.setattr(recording, "MAX_THREADS", 4)  # (read by archive.store when used)
    errors.left_out_warning()
    with SavedFile(str(archive)) as saved:
        samples = Samples(saved, per_thread=True)
        weights = Counter()
        for sample in samples:
            weights[sample.thread.heading()] += sample.weight
    assert sum(weights.values()) == 9 * ticks
    assert len(weights) == 5 and weights["[more threads]"] == 5 * ticks
    assert "past the first 4 counted as [more threads]" in errors.left_out_warning()
