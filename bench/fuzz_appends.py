"""Fuzzing concurrent writers of one output file: random interleavings of
saves (cbf-save's writer, sfbt.commands.save: mostly --append, some
replacing the file) with an `sfbt record -o` of the same file, at output names where another user
(nobody) may have planted a file or a link in a sticky directory.

Each writer runs in a forked child of bench/fuzz.py's harness (memory and
time limits, outcomes clean/error/traceback/hang/blowup); the appenders
start at random moments while the recording runs and after it ended.
Besides the outcomes it counts HARMS:

  lost save        a save that said Saved (or a recording that said
                   saved) is not in the final file, and no replacing save
                   that said Saved ended after it
  foreign file     a file a writer said it wrote is owned by another user
                   or has a mode wider than the umask allows
  written through  a write through a planted link: the file to keep
                   changed, or the place a dangling link names created

Run (as root: the plants belong to nobody, and record seizes a process):
    python3 bench/fuzz_appends.py [--cases N] [--seed S]
tests/test_fuzz_appends.py runs a few seeded cases."""

import os
import random
import shutil
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fuzz import NOBODY, OUTCOMES, Witnesses, engine_main, run_case  # noqa: E402
from sfbt.archive import cbf  # noqa: E402
from sfbt.archive.imagemap import Image, ImageMap  # noqa: E402
from sfbt.archive.store import read_archive  # noqa: E402
from sfbt.commands.save import Capture, SaveOptions, save_captures  # noqa: E402
from sfbt.errors import SfbtError  # noqa: E402

#: what is at the output name before the writers start
PLACES = ("new", "ours", "sticky-new", "sticky-ours", "sticky-theirs", "sticky-link",
          "sticky-dangling")
#: counts beyond the outcomes; all should be 0
HARMS = ("lost save", "foreign file", "written through")
IMAGES = ImageMap("linux-x86_64", [Image("/p", 0x400000, 0x401000, b"\xaa")])
RECORDED = "sfbt record"  # how a recording's events are labelled


def appender(path, label, append=True):
    """cbf-save [--append] --label LABEL PATH's writer, as a function for
    the harness: exit 0 when it said Saved, 1 with one line when refused."""
    def save():
        capture = Capture("1", [cbf.Frame("pc", 0x400100)], False)
        try:
            said = save_captures(SaveOptions(path, "archive", append, label=label), [capture],
                                 IMAGES, "x86_64", 64, "SIGTRAP", time.time_ns())
        except (OSError, SfbtError) as error:
            print(f"sfbt: cbf-save: {error}", file=sys.stderr)
            return 1
        print(said)
        return 0
    return save


def _seized(pid):
    """Whether a tracer (the recording) has seized process pid."""
    with open(f"/proc/{pid}/status") as status:
        return any(line.split()[1:] != ["0"] for line in status
                   if line.startswith("TracerPid:"))


class Appends(Witnesses):
    """Cases of writers at one output name, in a fresh directory each."""

    def __init__(self, directory):
        super().__init__(directory)
        mask = os.umask(0o022)
        os.umask(mask)
        self.widest = 0o666 & ~mask

    def _place(self, rng, number):
        """(output path, place kind) of a new case."""
        place = rng.choice(PLACES)
        where = os.path.join(self.directory, f"case-{number}")
        os.mkdir(where, 0o700 if not place.startswith("sticky") else 0o1777)
        os.chmod(where, 0o700 if not place.startswith("sticky") else 0o1777)
        path = os.path.join(where, "out.sfbt")
        if place.endswith("ours"):
            assert run_case(appender(path, "before"))[0] == "clean"
        elif place == "sticky-theirs":
            with open(path, "w") as stream:
                stream.write("theirs\n")
            os.chmod(path, 0o666)
            os.chown(path, NOBODY, NOBODY)
        elif place in ("sticky-link", "sticky-dangling"):
            os.symlink(self.keep if place == "sticky-link" else self.created, path)
            os.lchown(path, NOBODY, NOBODY)
        return path, place

    def case(self, rng, number):
        """({outcome or harm: count}, [(what, writer, stderr)]) of one case."""
        path, place = self._place(rng, number)
        results = []  # (writer, label, outcome, stderr, when it ended)

        def run(writer, label, argv, delay=0.0):
            time.sleep(delay)
            results.append((writer, label, *run_case(argv), time.monotonic()))
        threads = []
        if rng.random() < 0.75:
            duration = rng.uniform(0.3, 1.0)
            recording = threading.Thread(target=run, args=(
                "record", RECORDED, ["record", "--idle", "-p", str(self.sleeper.pid), "--hz", "20",
                                     "--duration", f"{duration:.2f}", "-o", path]))
            recording.start()
            threads.append(recording)
            began = time.monotonic()
            while recording.is_alive() and not _seized(self.sleeper.pid) \
                    and time.monotonic() - began < 10:
                time.sleep(0.005)
            time.sleep(0.05)  # the recording's lock follows the seizing
            span = duration + 0.5
        else:
            span = 0.3
        for writer in range(rng.randint(1, 4)):
            kind = "replace" if rng.random() < 0.2 else "append"
            label = f"{kind}-{number}-{writer}"
            thread = threading.Thread(target=run, args=(
                kind, label, appender(path, label, kind == "append"), rng.uniform(0, span)))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        return self._judge(path, place, results)

    def _judge(self, path, place, results):
        counts = dict.fromkeys(OUTCOMES + HARMS, 0)
        failures = []
        for writer, _, outcome, stderr, _ in results:
            counts[outcome] += 1
            if outcome not in ("clean", "error"):
                failures.append((f"{outcome} ({place})", writer, stderr))
        said = [(writer, label, ended) for writer, label, outcome, _, ended in results
                if outcome == "clean"]
        replaced = max((ended for writer, _, ended in said if writer == "replace"),
                       default=0.0)
        labels = []
        if said:
            archive, error = read_archive(path)
            labels = [event.label for event in archive.events]
            status = os.lstat(path)
            if (status.st_uid != os.geteuid() or not stat.S_ISREG(status.st_mode)
                    or stat.S_IMODE(status.st_mode) & ~self.widest):
                counts["foreign file"] += 1
                failures.append((f"foreign file ({place})", "", f"{status}"))
        for writer, label, ended in said:
            if ended < replaced:  # a replacing save after it: gone, as it should be
                continue
            if not any(text == label or text.startswith(label + " ") for text in labels):
                counts["lost save"] += 1
                failures.append((f"lost save ({place})", writer, label))
        with open(self.keep, "rb") as stream:
            if stream.read() != b"precious\n" or os.path.lexists(self.created):
                counts["written through"] += 1
                failures.append((f"written through ({place})", "", ""))
                self._restore()
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        return counts, failures


def fuzz_appends(cases, seed, directory, report=None):
    """Run cases; returns ({outcome or harm: count}, failures [(what,
    writer, detail)])."""
    rng = random.Random(seed)
    counts = dict.fromkeys(OUTCOMES + HARMS, 0)
    failures = []
    appends = Appends(directory)
    try:
        for number in range(cases):
            one, failed = appends.case(rng, number)
            for what, count in one.items():
                counts[what] += count
            failures += failed
            if report and (number + 1) % report == 0:
                print(f"{number + 1} cases: {counts}", flush=True)
    finally:
        appends.close()
    return counts, failures


def main():
    return engine_main(
        "fuzz-appends", lambda cases, seed, directory, _: fuzz_appends(cases, seed, directory, report=20))


if __name__ == "__main__":
    sys.exit(main())
