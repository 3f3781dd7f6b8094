"""SFrame core speed against libsframe (issue 13).

The section: 20,000 functions generated in SFrame v1 (AMD64, rows like
gas 2.40 writes: frame-pointer prologues, stack adjustments, 1- and 2-byte
start offsets), or the .sframe of an ELF file given on the command line.
The anchor: binutils 2.40's libsframe.so.0 through ctypes.

Each figure is the median of per-round ratios sfbt / libsframe, the two
sides measured in turn within a round, alternating which goes first
(bench/pairing.py):

- open + first lookup: open_section + find_row at one PC, against
  sframe_decode + sframe_find_fre (goal <= 20);
- steady lookups: find_row on an opened, used section, against
  sframe_find_fre (goal <= 5);
- open + a lookup in every function (informative): every function's
  rows decoded once;
- with an ELF file: the whole dump against the `objdump --sframe` process.

Run: python3 bench/sframe_bench.py [--rounds N] [--functions N] [ELF]
"""

import argparse
import ctypes
import gc
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))
sys.path.insert(0, str(ROOT / "bench"))

from pairing import paired_ratios  # noqa: E402
from sfbt.sframe import (FrameRowEntry, FunctionEntry, SFrameSection,  # noqa: E402
                         dump_text, open_section, read_section, write_section)
from sfbt.sframe import constants as C  # noqa: E402
from sfbt.sframe.in_elf import read_elf_sframe_bytes  # noqa: E402

SP, FP = C.BASE_REG_SP, C.BASE_REG_FP


def generated_section(count, seed=13):
    """(bytes, address) of a v1 AMD64 section with ``count`` functions."""
    rng = random.Random(seed)
    functions, start = [], 0x401000
    for _ in range(count):
        size = rng.choice([rng.randrange(8, 64), rng.randrange(64, 250),
                           rng.randrange(250, 1200)])
        if rng.random() < 0.5:  # push %rbp; mov %rsp,%rbp; ...; leave; ret
            rows = [FrameRowEntry(0, SP, (8,)), FrameRowEntry(1, SP, (16, -16)),
                    FrameRowEntry(4, FP, (16, -16)),
                    FrameRowEntry(size - 1, SP, (8, -16))]
        else:  # pushes and a stack adjustment, popped before ret
            depth, offset, rows = 8, 0, [FrameRowEntry(0, SP, (8,))]
            for _ in range(rng.randrange(0, 5)):
                offset += rng.randrange(1, 4)
                depth += 8 * rng.randrange(1, 8)
                rows.append(FrameRowEntry(offset, SP, (depth,)))
            if len(rows) > 1 and size - 1 > offset:
                rows.append(FrameRowEntry(size - 1, SP, (8,)))
        functions.append(FunctionEntry(start, size, rows))
        start += (size + 15) & ~15
    address = (start + 0xFFF) & ~0xFFF
    section = SFrameSection(C.VERSION_1, C.ABI_AMD64_LE, functions,
                            address=address)
    return write_section(section), address


def libsframe():
    lib = ctypes.CDLL("libsframe.so.0")  # binutils 2.40 (Debian's libbinutils)
    lib.sframe_decode.restype = ctypes.c_void_p
    lib.sframe_decode.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_int)]
    lib.sframe_decoder_free.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.sframe_find_fre.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                    ctypes.c_char_p]
    lib.sframe_fre_get_cfa_offset.restype = ctypes.c_int32
    lib.sframe_fre_get_cfa_offset.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                              ctypes.POINTER(ctypes.c_int)]
    return lib


def timed(action):
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("elf", nargs="?", help="read this ELF file's .sframe")
    parser.add_argument("--functions", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    if args.elf:
        (data, address, name), _ = read_elf_sframe_bytes(args.elf)
        what = args.elf
    else:
        data, address = generated_section(args.functions)
        name, what = ".sframe", "generated"
    section = read_section(data, address, name)
    lib = libsframe()
    if section.version != C.VERSION_1:
        sys.exit(f"{what}: SFrame v{section.version}; libsframe 2.40 reads v1 only")
    rng = random.Random(1)
    pcs = [f.start + rng.randrange(max(f.size, 1)) for f in section.functions
           for _ in range(4)]
    rng.shuffle(pcs)
    relative = [pc - address for pc in pcs]
    print(f"{what}: SFrame v{section.version}, {section.num_functions} functions, "
          f"{section.num_rows} rows, {len(data)} bytes; {len(pcs)} PCs")

    error = ctypes.c_int()
    buffer = ctypes.create_string_buffer(data)
    size = len(data)
    decode, find, free = lib.sframe_decode, lib.sframe_find_fre, lib.sframe_decoder_free
    fre = ctypes.create_string_buffer(64)

    # Both read the same rows.
    context = ctypes.c_void_p(decode(buffer, size, ctypes.byref(error)))
    theirs = [None if find(context, pc, fre) else
              lib.sframe_fre_get_cfa_offset(context, fre, ctypes.byref(error))
              for pc in relative]
    opened = open_section(data, address, name)
    ours = []
    for pc in pcs:
        row = opened.find_row(pc)
        ours.append(None if row is None else row.entry.words[0])
    mismatches = sum(a != b for a, b in zip(ours, theirs))
    print(f"CFA offsets at {len(pcs)} PCs: {mismatches} differ from libsframe's")

    # Open + first lookup: several opens per round, a different PC each.
    opens = 50
    first = pcs[:opens]
    first_relative = relative[:opens]

    def ours_open():
        sections = []
        began = time.perf_counter()
        for pc in first:
            fresh = open_section(data, address, name)
            fresh.find_row(pc)
            sections.append(fresh)
        return time.perf_counter() - began

    def theirs_open():
        contexts = []
        began = time.perf_counter()
        for pc in first_relative:
            ctx = decode(buffer, size, ctypes.byref(error))
            find(ctx, pc, fre)
            contexts.append(ctx)
        elapsed = time.perf_counter() - began
        for ctx in contexts:
            free(ctypes.byref(ctypes.c_void_p(ctx)))
        return elapsed

    # Steady lookups: the opened section has seen every PC once.
    steady = pcs[:20000]
    steady_relative = relative[:20000]
    find_row = opened.find_row

    def ours_steady():
        return timed(lambda: [find_row(pc) for pc in steady])

    def theirs_steady():
        return timed(lambda: [find(context, pc, fre) for pc in steady_relative])

    # Open + a lookup in every function: every function's rows decoded.
    every = pcs[::4] if len(pcs) > 4 else pcs

    def ours_every_with_open():
        began = time.perf_counter()
        fresh = open_section(data, address, name)
        for pc in every:
            fresh.find_row(pc)
        return time.perf_counter() - began

    every_relative = [pc - address for pc in every]

    def theirs_every():
        began = time.perf_counter()
        ctx = decode(buffer, size, ctypes.byref(error))
        for pc in every_relative:
            find(ctx, pc, fre)
        elapsed = time.perf_counter() - began
        free(ctypes.byref(ctypes.c_void_p(ctx)))
        return elapsed

    gc.collect()
    rounds = args.rounds
    results = [
        ("open + first lookup", paired_ratios(rounds, ours_open, theirs_open),
         20, 1e6 / opens, "us"),
        ("steady lookups", paired_ratios(rounds, ours_steady, theirs_steady),
         5, 1e6 / len(steady), "us"),
        (f"open + {len(every)} lookups (one per function)",
         paired_ratios(max(5, rounds // 3), ours_every_with_open, theirs_every),
         None, 1e3, "ms"),
    ]
    for what_, paired, goal, unit, unit_name in results:
        suffix = " per call" if unit_name == "us" else ""
        print(paired.line(what_, goal, unit, unit_name) + suffix)

    if args.elf:
        def ours_dump():
            return timed(lambda: dump_text(read_section(data, address, name)))

        def objdump():
            return timed(lambda: subprocess.run(["objdump", "--sframe", args.elf],
                                                capture_output=True, check=True))

        print(paired_ratios(5, ours_dump, objdump).line(
            "dump vs the objdump --sframe process"))
    free(ctypes.byref(context))
    alone = statistics.median(timed(lambda: open_section(data, address, name))
                              for _ in range(21))
    print(f"open_section alone: {alone * 1e6:.1f} us")


if __name__ == "__main__":
    main()
