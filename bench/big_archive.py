"""A legitimate large archive: 300,000 captures of distinct traces (about
68 MB), as a long-running program sampled by cbf-save --append would
leave.  Times `sfbt cbf decode`, `sfbt fold` and one `--append` (the save
path: lock, read the archive a record at a time, copy it, add a trace)
and their peak memory, each in its own process.

Goals (issue 14): decode under 10 s and 300 MB peak RSS.
Run: python3 bench/big_archive.py [--traces N] [--rounds R] [--baseline PLUGIN]

With --baseline (another checkout's plugin/ directory) each round runs
the baseline's command and ours in turn (the first of the two alternating)
and prints the median of the rounds' CPU ratios, ours over the baseline's:
on a shared machine the paired ratio says more than either time.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))

from sfbt.archive import cbf  # noqa: E402
from sfbt.archive.imagemap import Image, ImageMap, encode_image_map  # noqa: E402
from sfbt.archive.store import (KIND_EVENT, KIND_IMAGE_MAP, KIND_TRACE, MAGIC,  # noqa: E402
                                _EVENT_HEAD, _TRACE_HEAD, _pack_string, record_bytes,
                                trace_hash)

DECODE_SECONDS = 10.0
DECODE_MEGABYTES = 300
PROGRAM = ROOT / "tests" / "fixtures" / "v3" / "x86_64" / "callchain-O2"

APPEND = """
import sys
from sfbt.archive import cbf
from sfbt.archive.imagemap import Image, ImageMap
from sfbt.commands.save import Capture, SaveOptions, save_captures
images = ImageMap("linux-x86_64", [Image("/x", 0x400000, 0x500000)])
save_captures(SaveOptions(sys.argv[1], "archive", True), [Capture("1", [
    cbf.Frame("pc", 0x400123), cbf.Frame("ra", 0x400456)], False)],
    images, "x86_64", 64, "SIGPROF", 1)
"""


def image_map():
    """A program and the libraries of a typical process, the program being
    a real file so that its frames are symbolized."""
    images = [Image(str(PROGRAM), 0x400000, 0x402000, b"")]
    base = 0x7F0000000000
    for number in range(24):
        images.append(Image(f"/usr/lib/x86_64-linux-gnu/lib{number}.so.1", base,
                            base + 0x200000, bytes(range(number, number + 20))))
        base += 0x400000
    return ImageMap("linux-x86_64", images)


def write_archive(path, traces, seed=14):
    """``traces`` captures of distinct traces, 20 to 40 frames each: a
    unique innermost PC in front of one of 2,000 call chains (the CBF of
    the chain after an absolute first address is valid after any other
    instruction, so the bytes are spliced rather than encoded 300,000 times)."""
    rng = random.Random(seed)
    images = image_map()
    libraries = [(i.base, i.end_of_text) for i in images.images[1:]]
    chains = []
    for _ in range(2000):
        depth = rng.randint(19, 39)
        frames = [cbf.Frame("ra", rng.randrange(*rng.choice(libraries)))
                  for _ in range(depth - 3)]
        frames += [cbf.Frame("ra", 0x401000 + rng.randrange(0x800)) for _ in range(3)]
        chains.append(cbf.encode(frames)[1:-1])
    map_bytes = encode_image_map(images)
    with open(path, "wb") as out:
        out.write(MAGIC + record_bytes(KIND_IMAGE_MAP, map_bytes))
        for number in range(1, traces + 1):
            base, end = rng.choice(libraries)
            pc = cbf.encode([cbf.Frame("pc", base + number % (end - base))])[1:-1]
            data = b"\x02" + pc + rng.choice(chains) + b"\x00"
            strings = b"".join(_pack_string(text) for text in (
                "x86_64", f"{1 + number % 8} (4242)", "SIGPROF", ""))
            out.write(record_bytes(KIND_TRACE, _TRACE_HEAD.pack(number, trace_hash(data)) + data)
                      + record_bytes(KIND_EVENT, _EVENT_HEAD.pack(number, 0, number * 1000)
                                + strings))


def measure(command, plugin=ROOT / "plugin"):
    """(wall seconds, CPU seconds, peak RSS in MB) of a child process."""
    env = dict(os.environ, PYTHONPATH=str(plugin))
    began = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - began
    stderr = child.stderr.read().decode()
    child.stderr.close()
    if status:
        raise SystemExit(f"{command} failed: {stderr}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", help="a plugin/ directory to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "big.sfbt")
        began = time.perf_counter()
        write_archive(path, args.traces)
        size = os.path.getsize(path)
        print(f"archive: {args.traces} traces, {size / 1e6:.1f} MB "
              f"(made in {time.perf_counter() - began:.1f} s)")
        sfbt = [sys.executable, "-m", "sfbt"]
        for what, command in (("cbf decode", sfbt + ["cbf", "decode", path]),
                              ("fold", sfbt + ["fold", path]),
                              ("--append", [sys.executable, "-c", APPEND, path])):
            runs, ratios = [], []
            for number in range(args.rounds):
                if args.baseline and number % 2:
                    ours = measure(command)
                    theirs = measure(command, args.baseline)
                elif args.baseline:
                    theirs = measure(command, args.baseline)
                    ours = measure(command)
                else:
                    ours = measure(command)
                runs.append(ours)
                if args.baseline:
                    ratios.append(ours[1] / theirs[1])
            seconds = sorted(r[0] for r in runs)[len(runs) // 2]
            cpu = sorted(r[1] for r in runs)[len(runs) // 2]
            peak = max(r[2] for r in runs)
            line = f"{what}: {seconds:.2f} s ({cpu:.2f} s CPU), peak RSS {peak:.0f} MB"
            if what == "cbf decode":
                line += (f"  goal < {DECODE_SECONDS:.0f} s and < {DECODE_MEGABYTES} MB: "
                         + ("met" if seconds < DECODE_SECONDS and peak < DECODE_MEGABYTES
                            else "NOT met"))
            if ratios:
                line += (f"; CPU {sorted(ratios)[len(ratios) // 2]:.2f}x the baseline's "
                         f"(median of {len(ratios)} paired rounds)")
            print(line, flush=True)


if __name__ == "__main__":
    main()
