"""Fuzzing the command line with mutated inputs: ELF files (sframe dump,
dump --synth, lookup, cbf decode --exe), archives (cbf decode, fold), bare
CBF, Swift's JSON form and lws logs (cbf decode, fold, heapmap).

Each case runs in a forked child (the modules are loaded once) under a
memory limit (RLIMIT_AS) and a time limit (RLIMIT_CPU and a wall-clock
alarm), and is counted as one of:

  clean     exit 0
  error     exit 1 with one line "sfbt: ..." on stderr
  traceback an exception escaped, or more than one line of error
  hang      the time limit killed it
  blowup    the memory limit was hit (MemoryError), or it died of a signal

Run: python3 bench/fuzz.py [--cases N] [--seed S] [--jobs J]
Failing inputs are kept under --keep DIR.  tests/test_fuzz.py runs a few
hundred seeded cases of the same engine.
"""

import argparse
import io
import json
import base64
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))

from sfbt import cli  # noqa: E402
from sfbt.archive import cbf, lws  # noqa: E402
from sfbt.archive.imagemap import Image, ImageMap, encode_image_map  # noqa: E402
from sfbt.archive.store import Archive, MAGIC  # noqa: E402

OUTCOMES = ("clean", "error", "traceback", "hang", "blowup")
MEMORY_LIMIT = 1 << 30
SECONDS = 10
FIXTURES = ROOT / "tests" / "fixtures"
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFF, (1 << 40), (1 << 63) - 1, (1 << 63), (1 << 64) - 1)


def elf_seeds():
    names = ["callchain-O2", "callchain-O2.o", "cfi.o", "libplt.so", "drap", "manyfuncs"]
    seeds = [FIXTURES / "v3" / "x86_64" / name for name in names]
    seeds += sorted((FIXTURES / "v1").glob("*/callchain-O2"))
    return [path.read_bytes() for path in seeds if path.exists()]


def archive_seed():
    images = ImageMap("linux-x86_64", [
        Image("/usr/bin/prog", 0x400000, 0x401000, bytes.fromhex("aabbccdd")),
        Image("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7F0000000000, 0x7F0000200000,
              bytes(range(20))),
        Image("/usr/lib/x86_64-linux-gnu/libz.so.1", 0x7F0000400000, 0x7F0000480000, b"")])
    archive = Archive()
    for number in range(4):
        frames = [cbf.Frame("pc", 0x7F0000001000 + number)] + [
            cbf.Frame("ra", 0x400100 + 16 * k) for k in range(number + 2)]
        frames += [cbf.Omitted(3), cbf.Frame("ra", 0x7F0000400200)] * (number % 2)
        archive.capture(cbf.encode(frames, truncated=number == 3), images,
                        time_ns=number, architecture="x86_64", thread=str(number),
                        reason="SIGSEGV", label=f"l{number}")
    archive.capture(cbf.encode([cbf.Frame("pc", 0x7F0000001000)]), images)
    return MAGIC + archive.pending_bytes(), encode_image_map(images)


def seeds():
    """{kind: [seed bytes]} of well-formed inputs."""
    archive, image_map = archive_seed()
    trace = cbf.encode([cbf.Frame("pc", 0x401000), cbf.Frame("ra", 0x401234),
                        cbf.Omitted(40), cbf.Frame("async", 0x7F0000001000)] + [
                        cbf.Frame("ra", 0x402000)] * 9)
    document = json.dumps({"architecture": "x86_64",
                           "backtrace": base64.b64encode(trace).decode(),
                           "imageMap": base64.b64encode(image_map).decode()}).encode()
    log = "".join(f"[{k}] alloc {lws.encode([0x401000 + k, 0x7F0000001000, 0x401000], 16 * k)}\n"
                  for k in range(6)).encode()
    return {"elf": elf_seeds(), "archive": [archive], "cbf": [trace],
            "json": [document], "lws": [log]}


def commands(kind, path, helper):
    """The command lines a mutated input of this kind is given to."""
    if kind == "elf":
        return [["sframe", "dump", path], ["sframe", "dump", "--synth", "--no-cache", path],
                ["sframe", "lookup", path, "0x401000", "0x1130"],
                ["cbf", "decode", helper, "--exe", path]]
    if kind == "lws":
        return [["heapmap", path], ["cbf", "decode", path], ["fold", path]]
    return [["cbf", "decode", path], ["fold", path]]


def mutate(data, rng):
    """A few random damages: bit flips, interesting values, truncation,
    deletion, duplication and splices."""
    data = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        if not data:
            data += bytes([rng.randrange(256)])
        choice = rng.randrange(7)
        at = rng.randrange(len(data))
        if choice == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif choice == 1:
            data[at] = rng.randrange(256)
        elif choice == 2:
            width = rng.choice((1, 2, 4, 8))
            value = rng.choice(INTERESTING) & ((1 << 8 * width) - 1)
            data[at:at + width] = value.to_bytes(width, rng.choice(("little", "big")))
        elif choice == 3:
            del data[rng.randrange(len(data)):]
        elif choice == 4:
            del data[at:at + rng.randrange(1, 64)]
        elif choice == 5:
            start = rng.randrange(len(data))
            data[at:at] = data[start:start + rng.randrange(1, 256)]
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return bytes(data)


def _child(argv, stderr_write):
    """Run in the forked child: the command, its outcome as an exit code."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (SECONDS, SECONDS + 1))
    signal.alarm(SECONDS)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(stderr_write, 2)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=False)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    try:
        status = cli.main(argv)
        sys.stdout.flush()
    except MemoryError:
        os._exit(3)
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 2
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(2)
    sys.stderr.flush()
    os._exit(status)


def run_case(argv):
    """(outcome, stderr text) of one command line in a forked child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            _child(argv, write_end)
        finally:
            os._exit(4)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        if sum(map(len, chunks)) < 1 << 16:
            chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    stderr = b"".join(chunks).decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        killer = os.WTERMSIG(status)
        return ("hang" if killer in (signal.SIGALRM, signal.SIGXCPU, signal.SIGKILL)
                else "blowup"), stderr
    code = os.WEXITSTATUS(status)
    lines = stderr.splitlines()
    if code == 0:
        return "clean", stderr
    if code == 3 or "MemoryError" in stderr:
        return "blowup", stderr
    if code == 1 and len(lines) == 1 and lines[0].startswith("sfbt: ") \
            and "Traceback" not in stderr:
        return "error", stderr
    return "traceback", stderr


def fuzz(cases, seed, directory, keep=None, report=None):
    """Run cases; returns {outcome: count} and the failing cases
    [(outcome, argv, input bytes, stderr)]."""
    rng = random.Random(seed)
    corpus = seeds()
    kinds = [kind for kind in corpus if corpus[kind]]
    helper = os.path.join(directory, "helper.cbf")
    with open(helper, "wb") as stream:
        stream.write(cbf.encode([cbf.Frame("pc", 0x401000), cbf.Frame("ra", 0x1130)]))
    counts = dict.fromkeys(OUTCOMES, 0)
    failures = []
    path = os.path.join(directory, "input")
    for number in range(cases):
        kind = kinds[number % len(kinds)] if number < len(kinds) else rng.choice(
            kinds + ["elf", "archive"])  # ELF files and archives twice as often
        data = mutate(rng.choice(corpus[kind]), rng)
        with open(path, "wb") as stream:
            stream.write(data)
        argv = rng.choice(commands(kind, path, helper))
        outcome, stderr = run_case(argv)
        counts[outcome] += 1
        if outcome not in ("clean", "error"):
            failures.append((outcome, argv, data, stderr))
            if keep:
                os.makedirs(keep, exist_ok=True)
                name = os.path.join(keep, f"{outcome}-{seed}-{number}")
                with open(name, "wb") as stream:
                    stream.write(data)
                with open(name + ".txt", "w") as stream:
                    stream.write(" ".join(argv) + "\n" + stderr)
        if report and (number + 1) % report == 0:
            print(f"{number + 1} cases: {counts}", flush=True)
    return counts, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes, each running CASES/JOBS cases with its own seed")
    parser.add_argument("--keep", metavar="DIR", help="keep failing inputs here")
    args = parser.parse_args()
    began = time.time()
    children = []
    for job in range(args.jobs):
        pid = os.fork()
        if pid == 0:
            directory = tempfile.mkdtemp(prefix="sfbt-fuzz-")
            try:
                counts, failures = fuzz(args.cases // args.jobs, args.seed + job, directory,
                                        args.keep, report=1000)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            print(f"job {job}: {json.dumps(counts)}", flush=True)
            for outcome, argv, _, stderr in failures[:20]:
                print(f"  {outcome}: {' '.join(argv)}\n    "
                      + stderr.strip().replace("\n", "\n    ")[-2000:], flush=True)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    print(f"{args.cases} cases in {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
