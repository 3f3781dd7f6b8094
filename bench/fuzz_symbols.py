"""Fuzzing symbol tables, PLT relocations, names and the outputs that grow
with their input (tests/crafted.py builds the bombs): ELF files of up to
hundreds of thousands of symbols, of thousands of aliases at one address,
of names of up to a megabyte and of PLT relocation bombs, mutated or not,
given to `cbf decode --exe`; and archives of thousands of distinct stacks
given to fold and flame (SVG, speedscope, pprof).

Each case runs in a forked child under bench/fuzz.py's memory and time
limits and is counted as one of its OUTCOMES; besides, HARMS counts a peak
resident size over 300 MB (all should be 0).

Run: python3 bench/fuzz_symbols.py [--cases N] [--seed S] [--keep DIR]
tests/test_fuzz_symbols.py runs a small seeded dose."""

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz import MEMORY_LIMIT, OUTCOMES, engine_main, mutate, run_measured  # noqa: E402
import crafted  # noqa: E402  (fuzz puts tests/ on the path)
from sfbt.archive import cbf  # noqa: E402

KINDS = ("symbols", "aliases", "names", "plt", "stacks")
HARMS = ("memory over 300 MB",)


def crafted_elf(kind, rng):
    """The bytes of a bomb of one kind, of a random size."""
    if kind == "symbols":
        return crafted.many_symbols_elf(rng.choice((1, 1000, 100_000, 300_000)))
    if kind == "aliases":
        return crafted.alias_elf(rng.choice((2, 1000, 20_000, 100_000)))
    if kind == "names":
        return crafted.long_names_elf(rng.choice((1, 4096, 1 << 16, 1 << 20)),
                                      rng.randint(1, 8))
    return crafted.plt_bomb_elf(rng.choice((1, 1000, 100_000)), rng.randint(1, 64))


def case(kind, rng, directory):
    """(argv, input bytes) of one case of a kind, its input written."""
    path = os.path.join(directory, "input")
    if kind == "stacks":
        data = crafted.many_stacks_archive(rng.choice((10, 500, 2000)), rng.randint(1, 24))
        command = rng.choice((["fold", path], ["flame", path, "-o", "OUT"],
                              ["flame", path, "--format", "speedscope", "-o", "OUT"],
                              ["flame", path, "--format", "pprof", "-o", "OUT"]))
    else:
        data = crafted_elf(kind, rng)
        trace = os.path.join(directory, "trace.cbf")
        with open(trace, "wb") as stream:
            stream.write(cbf.encode([cbf.Frame("pc" if n == 0 else "ra", crafted.TEXT + offset)
                                     for n, offset in enumerate((0x105, 0x10005, 0x205))]))
        command = ["cbf", "decode", trace, "--exe", path]
    if rng.random() < 0.5:
        data = mutate(data, rng)
    with open(path, "wb") as stream:
        stream.write(data)
    return [os.path.join(directory, "out") if arg == "OUT" else arg for arg in command], data


def fuzz_symbols(cases, seed, directory, keep=None):
    """Run cases: ({outcome or harm: count}, [(what, argv, stderr)])."""
    rng = random.Random(seed)
    counts = dict.fromkeys(OUTCOMES + HARMS, 0)
    failures = []
    for number in range(cases):
        kind = KINDS[number % len(KINDS)] if number < len(KINDS) else rng.choice(KINDS)
        argv, data = case(kind, rng, directory)
        outcome, stderr, peak_kb = run_measured(argv)
        counts[outcome] += 1
        bad = [outcome] if outcome not in ("clean", "error") else []
        if peak_kb > MEMORY_LIMIT >> 10:
            counts[HARMS[0]] += 1
            bad.append(f"{HARMS[0]} ({peak_kb >> 10} MB)")
        for what in bad:
            failures.append((what, argv, stderr))
            if keep:
                os.makedirs(keep, exist_ok=True)
                with open(os.path.join(keep, f"{kind}-{seed}-{number}"), "wb") as stream:
                    stream.write(data)
    return counts, failures


def main():
    return engine_main("fuzz-symbols", fuzz_symbols, keep=True)


if __name__ == "__main__":
    sys.exit(main())
