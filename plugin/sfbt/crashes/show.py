"""`sfbt crashes list` and `sfbt crashes show`: the store's crashes as
coredumpctl lists them, and one crash's threads symbolized when shown by
the archive's symbolizer (debug files, debuginfod, inline frames), as
text, JSON or a pprof profile."""

import json
import re
import signal
import time

from ..errors import SfbtError
from ..printable import printable

#: a thread's label in the crash's archive: "NUMBER (TID)"
_LABEL = re.compile(r"^(\d+) \((\d+)\)$")


def _when(seconds):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def list_text(entries):
    """One line per crash, newest last; COUNT is the crashes of its bucket
    the index holds."""
    counts = {}
    for entry in entries:
        counts[entry.get("bucket")] = counts.get(entry.get("bucket"), 0) + 1
    lines = [f"{'ID':>5} {'TIME (UTC)':19} {'PID':>7} {'UID':>6} {'SIG':8} "
             f"{'BUCKET':16} {'COUNT':>5} {'KEPT':4} EXE"]
    for entry in entries:
        kept = "yes" if entry.get("file") else "-"
        lines.append(f"{entry['id']:>5} {_when(entry.get('time', 0)):19} "
                     f"{entry.get('pid', 0):>7} {entry.get('uid', 0):>6} "
                     f"{signal_name(entry.get('signal', 0)):8} "
                     f"{printable(str(entry.get('bucket', ''))):16} "
                     f"{counts[entry.get('bucket')]:>5} {kept:4} "
                     f"{printable(entry.get('executable') or entry.get('command', ''))}")
    return "".join(line + "\n" for line in lines)


def crash_heading(entry, count):
    code = f", code {entry['code']}" if "code" in entry else ""
    address = f", address {entry['address']:#x}" if "address" in entry else ""
    return (f"Crash {entry['id']} of {printable(entry.get('executable', ''))} "
            f"(PID {entry.get('pid')}, UID {entry.get('uid')}): "
            f"{signal_name(entry.get('signal', 0))}{code}{address}, "
            f"{_when(entry.get('time', 0))} UTC\n"
            f"Bucket {printable(str(entry.get('bucket')))}: {count} "
            f"crash{'es' if count != 1 else ''}\n")


def crash_threads(path, first, count):
    """[(event, decoded backtrace, image map, CBF bytes)] of the crash
    whose events are the ``count`` from ``first`` on of the segment at
    ``path``, in the order its threads were numbered."""
    from ..archive.store import read_archive
    archive, error = read_archive(path)
    events = archive.events[first:first + count]
    if len(events) < count:
        raise error or SfbtError(f"{path}: {len(archive.events)} events, not "
                                 f"{first + count}")
    threads, maps = [], {}
    for event in events:
        trace = archive.traces[event.trace_id]
        if event.image_map_index not in maps:
            maps[event.image_map_index] = archive.image_map(event.image_map_index)
        threads.append((event, trace.decoded(), maps[event.image_map_index], trace.data))
    return threads


def crash_archive(threads):
    """A standalone archive of a crash's threads (crash_threads): one
    image map written whole, as cbf-save writes one."""
    from ..archive.store import Archive
    archive = Archive()
    for event, _, image_map, data in threads:
        archive.capture(data, image_map, time_ns=event.time_ns,
                        architecture=event.architecture, thread=event.thread,
                        reason=event.reason, label=event.label, pid=event.pid, tid=event.tid,
                        thread_name=event.thread_name, cut=event.cut)
    return archive


def through_main(decoded, describe):
    """(frames, callers) of a thread to show: the handler walked past main
    (crashes.session); GDB's bt ends at main's frame."""
    from ..archive import cbf
    for index, frame in enumerate(decoded.frames):
        if isinstance(frame, cbf.Omitted):
            continue
        if describe(frame.lookup_address).function == "main":
            return decoded.frames[:index + 1], ()
    return decoded.frames, decoded.callers


def thread_heading(event):
    match = _LABEL.match(event.thread)
    number, tid = (match[1], match[2]) if match else ("?", printable(event.thread))
    crashed = " crashed" if event.label == "crashed" else ""
    name = f' "{printable(event.thread_name)}"' if event.thread_name else ""  # as `sfbt stack`
    return f"Thread {number} (LWP {tid}{name}):{crashed}"


def show_text(entry, count, threads, symbolizer):
    from ..archive.report import FrameTexts
    lines = [crash_heading(entry, count)]
    texts = {}
    for event, decoded, image_map, _ in threads:
        images = image_map.images
        key = id(images)
        if key not in texts:
            texts[key] = FrameTexts(symbolizer.describer(images))
        lines.append(thread_heading(event) + "\n")
        frames, callers = through_main(decoded, texts[key].describe)
        text = texts[key].text(frames, decoded.truncated, callers)
        lines.append(text + "\n" if text else "")
        lines.append("\n")
    return "".join(lines)


def show_json(entry, count, threads, symbolizer):
    from ..archive import cbf
    from ..archive.layout import GdbLayout
    document = dict(entry, count=count, threads=[])
    for event, decoded, image_map, _ in threads:
        describe = symbolizer.describer(image_map.images)
        frames = []
        for frame in through_main(decoded, describe)[0]:
            if isinstance(frame, cbf.Omitted):
                continue
            named = describe(frame.lookup_address)
            frames.append({"address": frame.address, "kind": frame.kind,
                           "functions": [printable(name or "??")
                                         for name in named.functions()],
                           "where": GdbLayout.where(named.lines()[0]).strip()})
        match = _LABEL.match(event.thread)
        document["threads"].append({"thread": event.thread,
                                    "tid": int(match[2]) if match else None,
                                    "name": event.thread_name, "cut": event.cut,
                                    "crashed": event.label == "crashed",
                                    "reason": event.reason, "frames": frames})
    return json.dumps(document, indent=1) + "\n"


def show_pprof(threads, symbolizer):
    """A pprof profile of the crash: one sample per thread."""
    from ..archive.saved import SavedTrace
    from ..archive.threads import sampled_thread
    from ..outputs import Sample
    from ..outputs.pprof import PprofProfile
    profile = PprofProfile()
    for event, decoded, image_map, _ in threads:
        images = image_map.images
        frames = through_main(decoded, symbolizer.describer(images))[0]
        profile.add(Sample(SavedTrace(None, frames, decoded.truncated, images, 1),
                           sampled_thread(event), decoded.truncated, 1))
    return profile.encode()


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
