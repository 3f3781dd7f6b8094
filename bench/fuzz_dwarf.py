"""Fuzzing the DWARF readers with bombs (tests/crafted_dwarf.py): abbreviations
of thousands of attributes that take no byte, inline chains thousands deep
with long names, ranges shared by thousands of calls, DWARF 5 line tables
claiming 2^40 files, programs of millions of rows and zlib bombs, units
sharing one huge abbreviation table, thousands of references into other
units, millions of units in a zlib bomb; each of random size, and mutated (bench/fuzz.py's mutate) half the
time.  Each is given to ``sfbt cbf decode TRACE --exe FILE`` in a forked
child (bench/fuzz.py's run_measured: 300 MB address space, a time limit)
and counted as clean, error, traceback, hang or blowup; a peak resident
size over 300 MB counts as a harm.

Run: python3 bench/fuzz_dwarf.py [--cases N] [--seed S] [--keep DIR]
tests/test_fuzz_dwarf.py runs a small seeded dose."""

import os
import random
import sys

import fuzz  # bench/fuzz.py: puts plugin/ and tests/ on the path
import crafted_dwarf  # noqa: E402
from sfbt.archive import cbf  # noqa: E402

#: seconds a case may take before it counts as a hang
SECONDS = 60
#: peak resident kilobytes past which a case counts as a harm
PEAK_KB = fuzz.MEMORY_LIMIT >> 10


def bomb(rng):
    """(name, bytes) of one bomb of random size."""
    name = rng.choice(sorted(crafted_dwarf.BOMBS))
    size = rng.choice((1, 10, 100, 1000))
    made = {
        "zero-width-attributes": lambda: crafted_dwarf.zero_width_attributes(
            rng.randrange(1, 60 * size + 2), rng.randrange(1, 20 * size + 2)),
        "deep-inline-chain": lambda: crafted_dwarf.deep_inline_chain(
            rng.randrange(1, 3 * size + 2), rng.choice((1, 100, 70_000, 1 << 20))),
        "shared-ranges": lambda: crafted_dwarf.shared_ranges(
            rng.randrange(1, 3 * size + 2), rng.choice((1, 100, 4096))),
        "huge-file-count": lambda: crafted_dwarf.huge_file_count(
            rng.choice((0, 1, 1000, 1 << 20, 1 << 40, (1 << 64) - 1))),
        "many-rows": lambda: crafted_dwarf.many_rows(rng.randrange(1, 9000 * size + 2)),
        "zlib-bomb": lambda: crafted_dwarf.zlib_bomb(rng.choice((1 << 20, 1 << 24, 1 << 26))),
        "shared-abbreviations": lambda: crafted_dwarf.shared_abbreviations(
            rng.randrange(1, 20 * size + 2), rng.randrange(3, 20 * size + 4)),
        "references-to-many-units": lambda: crafted_dwarf.references_to_many_units(
            rng.randrange(1, 20 * size + 2)),
        "many-units": lambda: crafted_dwarf.many_units(rng.randrange(1, 3000 * size + 2)),
    }[name]
    return name, made()


def fuzz_dwarf(cases, seed, directory, keep=None, report=None):
    """Run cases; returns ({outcome: count, "harms": count}, [(outcome,
    bomb name, stderr)] of the failing ones)."""
    rng = random.Random(seed)
    trace = os.path.join(directory, "trace.cbf")
    with open(trace, "wb") as stream:
        stream.write(cbf.encode([cbf.Frame("pc", crafted_dwarf.CODE + 0x10),
                                 cbf.Frame("ra", crafted_dwarf.CODE + 0x20)]))
    counts = dict.fromkeys(fuzz.OUTCOMES + ("harms",), 0)
    failures = []
    path = os.path.join(directory, "bomb.elf")
    seconds, fuzz.SECONDS = fuzz.SECONDS, SECONDS
    try:
        for number in range(cases):
            name, data = bomb(rng)
            if rng.random() < 0.5:
                name, data = name + "+mutated", fuzz.mutate(data, rng)
            with open(path, "wb") as stream:
                stream.write(data)
            outcome, stderr, peak_kb = fuzz.run_measured(["cbf", "decode", trace, "--exe", path])
            counts[outcome] += 1
            harmed = peak_kb > PEAK_KB
            counts["harms"] += harmed
            if outcome not in ("clean", "error") or harmed:
                failures.append((outcome, name, stderr))
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    with open(os.path.join(keep, f"{outcome}-{seed}-{number}"), "wb") as kept:
                        kept.write(data)
            if report and (number + 1) % report == 0:
                print(f"{number + 1} cases: {counts}", flush=True)
    finally:
        fuzz.SECONDS = seconds
    return counts, failures


def main():
    return fuzz.engine_main(
        "fuzz-dwarf", lambda cases, seed, directory, keep: fuzz_dwarf(cases, seed, directory, keep, report=20), keep=True)


if __name__ == "__main__":
    sys.exit(main())
