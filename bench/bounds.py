"""What hostile inputs cost the command line: peak memory (maximum
resident set, by /usr/bin/time) and time, for inputs built to cost (tests/crafted.py)
and for standard input without an end.

  maps64     64 image maps of 3.5 KB each decoding to 16 MB (cbf decode)
  maps1000   1,000 of them (fold)
  turns      66 maps of 5,200 images, 30,000 traces taking turns (fold)
  maps50k    50,000 maps of one image, each used by a trace (fold)
  zeros-*    /dev/zero on standard input
  encode-1M  `cbf encode` of 2^20 frame lines

Each case runs ROUNDS times in a child of its own; the median is printed.
Run: python3 bench/bounds.py [--rounds 3] [--plugin OTHER-CHECKOUT/plugin]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import crafted  # noqa: E402


def run(limit, argv, stdin, plugin, memory):
    """(seconds, peak RSS in MB, exit status, last line of sfbt's stderr),
    measured by /usr/bin/time: this process's own size would count in a
    child's peak (Linux keeps the larger of before and after exec)."""
    child = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", *limit, sys.executable,
                            "-m", "sfbt", *argv], stdin=stdin, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, preexec_fn=lambda: resource.setrlimit(
                               resource.RLIMIT_AS, (memory << 20, memory << 20)),
                           env=dict(os.environ, PYTHONPATH=plugin))
    lines = child.stderr.decode("utf-8", "replace").strip().splitlines()
    _, seconds, peak = lines[-1].split()
    said = [line for line in lines[:-1] if not line.startswith("Command exited")]
    return float(seconds), int(peak) / 1024, child.returncode, said[-1] if said else ""


def cases(directory):
    """[(name, argv, stdin file or None)]."""
    def written(name, data):
        path = os.path.join(directory, name)
        with open(path, "wb") as stream:
            stream.write(data)
        return path
    maps64 = written("maps64.sfbt", crafted.archive_of_maps(
        [crafted.doubling_image_map(n % 256) for n in range(64)]))
    maps1000 = written("maps1000.sfbt", crafted.archive_of_maps(
        [crafted.doubling_image_map(n % 256, doublings=14 - n // 256) for n in range(1000)]))
    turns = written("turns.sfbt", crafted.archive_of_maps(
        [crafted.wide_image_map(n, 5200) for n in range(66)], 0, 455))
    maps50k = written("maps50k.sfbt", crafted.archive_of_maps(crafted.one_image_maps(50_000)))
    frames = written("frames.txt", b"".join(b"ra %#x\n" % (0x400000 + n)
                                            for n in range(1 << 20)))
    return [("maps64", ["cbf", "decode", maps64], None),
            ("maps1000", ["fold", maps1000], None),
            ("turns", ["fold", turns], None),
            ("maps50k", ["fold", maps50k], None),
            ("zeros-lws-decode", ["lws", "decode"], "/dev/zero"),
            ("zeros-cbf-encode", ["cbf", "encode"], "/dev/zero"),
            ("zeros-fold", ["fold", "-"], "/dev/zero"),
            ("encode-1M", ["cbf", "encode"], frames)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plugin", default=str(ROOT / "plugin"), metavar="DIR",
                        help="the sfbt package's directory (another checkout's, "
                        "to compare)")
    parser.add_argument("--seconds", type=int, default=120,
                        help="a case's time limit (default 120)")
    parser.add_argument("--memory", type=int, default=2048,
                        help="a case's address-space limit in MB (default 2048: "
                        "unbounded reads would take the machine)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sfbt-bounds-") as directory:
        for name, argv, stdin_path in cases(directory):
            results = []
            for _ in range(args.rounds):
                with open(stdin_path or os.devnull, "rb") as stdin:
                    results.append(run(["timeout", str(args.seconds)], argv, stdin,
                                       args.plugin, args.memory))
            seconds = statistics.median(r[0] for r in results)
            peak = statistics.median(r[1] for r in results)
            status, last = results[-1][2], results[-1][3]
            print(f"{name:18} {seconds:7.2f} s {peak:7.1f} MB  exit {status}  {last[:90]}")


if __name__ == "__main__":
    main()
