"""Reading one unit's inlined calls: sfbt's entry reader
(sfbt.dwarf.inline.unit_frames, its calls, the unit's functions read in
the same walk) against pyelftools' entries
(tests/inline_reference.py), on every unit of a file (default: the C
library's debug file, libc6-dbg), each unit's line program read before
either is timed (both share it, as sfbt stack's line look-ups do), sfbt's
sections inflated whole before.  Every
unit must give equal segments; prints the per-unit times (median, the
slowest, the total) and their paired ratio for the units sfbt stack meets
on a Python process (those holding the addresses given, file addresses).

Run: python3 bench/inline_units.py [--file PATH] [--address 0x...]...
"""

import argparse
import gc
import io
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))
sys.path.insert(0, str(ROOT / "tests"))

from elftools.common.exceptions import ELFError  # noqa: E402
from elftools.elf.elffile import ELFFile  # noqa: E402
from inline_reference import unit_calls as reference  # noqa: E402
from sfbt.debuginfo.search import build_id_path  # noqa: E402
from sfbt.dwarf.entries import ENTRY_SECTIONS  # noqa: E402
from sfbt.dwarf.inline import unit_frames  # noqa: E402
from sfbt.dwarf.line_program import DwarfBytes, unit_files  # noqa: E402
from sfbt.dwarf.units import UnitIndex  # noqa: E402
from sfbt.elf import ElfImage, read_build_id  # noqa: E402

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def seconds(read, dwarf, offset):
    began = time.perf_counter()
    segments = read(dwarf, offset)
    return time.perf_counter() - began, segments


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", help="an ELF file with DWARF (default: libc's debug file)")
    parser.add_argument("--address", action="append", type=lambda text: int(text, 0),
                        help="a file address whose unit sfbt stack reads")
    args = parser.parse_args()
    path = args.file or build_id_path("/usr/lib/debug", read_build_id(LIBC) or "")
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such file (libc6-dbg installs libc's debug file)")
    with open(path, "rb") as stream:
        data = stream.read()
    try:
        theirs_dwarf = ELFFile(io.BytesIO(data)).get_dwarf_info()
    except ELFError as error:
        raise SystemExit(f"{path}: {error}")
    offsets = [unit.cu_offset for unit in theirs_dwarf.iter_CUs()]
    if not offsets:
        raise SystemExit(f"{path}: no DWARF units")
    ours_dwarf = DwarfBytes(ElfImage.from_file(io.BytesIO(data), path))
    for name in ENTRY_SECTIONS:
        ours_dwarf.grow(name, 1 << 62)
    ours, theirs, differ, segments = {}, {}, [], 0
    # no collection of one reader's garbage timed in the other's read
    gc.disable()
    for offset in offsets:
        unit_files(ours_dwarf, offset)
        theirs_dwarf.line_program_for_CU(theirs_dwarf.get_CU_at(offset))
        ours[offset], mine = seconds(lambda *unit: unit_frames(*unit).calls, ours_dwarf, offset)
        theirs[offset], expected = seconds(reference, theirs_dwarf, offset)
        segments += len(mine)
        if mine != expected:
            differ.append(offset)
    print(f"{path}: {len(ours)} units, {segments} inline segments, "
          f"{len(differ)} units read differently{': ' if differ else ''}"
          + " ".join(f"{offset:#x}" for offset in differ[:10]))
    for name, times in (("sfbt's entry reader", ours), ("pyelftools' entries", theirs)):
        slowest = max(times, key=times.get)
        print(f"{name}: median {statistics.median(times.values()) * 1e3:.2f} ms a unit, "
              f"slowest {times[slowest] * 1e3:.1f} ms (unit {slowest:#x}), "
              f"all {sum(times.values()):.2f} s")
    ratios = sorted(ours[o] / theirs[o] for o in ours if theirs[o] > 0)
    print(f"per unit, sfbt / pyelftools: median ratio {statistics.median(ratios):.3f}")
    if args.address:
        index = UnitIndex(ours_dwarf)
        for address in args.address:
            unit = index.unit(address)
            if unit is not None:
                print(f"{address:#x}: unit {unit:#x}, sfbt {ours[unit] * 1e3:.2f} ms, "
                      f"pyelftools {theirs[unit] * 1e3:.2f} ms")
    if differ:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
