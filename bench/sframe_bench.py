"""SFrame core speed against its anchors.

- open and lookup: sfbt against libsframe (the system's, binutils 2.40,
  through ctypes) on the same v1 section;
- dump: sfbt in-process against the `objdump --sframe` process.

Prints times and ratios (sfbt / anchor: below 1 is faster than the anchor).
Run: python3 bench/sframe_bench.py [ELF]
"""

import ctypes
import ctypes.util
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))

from sfbt.sframe import dump_text, read_section  # noqa: E402
from sfbt.sframe.elf import read_elf_sframe_bytes  # noqa: E402

DEFAULT = ROOT / "tests" / "fixtures" / "v1" / "x86_64" / "manyfuncs"


def best_of(repeats, action):
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - began)
    return best


def libsframe():
    path = ctypes.util.find_library("sframe") or "libsframe.so.0"
    lib = ctypes.CDLL(path)
    lib.sframe_decode.restype = ctypes.c_void_p
    lib.sframe_decode.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_int)]
    lib.sframe_decoder_free.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.sframe_find_fre.argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                    ctypes.c_char_p]
    return lib


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    (data, address, name), _ = read_elf_sframe_bytes(path)
    section = read_section(data, address, name)
    rng = random.Random(1)
    pcs = [f.start + rng.randrange(max(f.size, 1)) for f in section.functions
           for _ in range(4)]
    rng.shuffle(pcs)
    print(f"{path.name}: SFrame v{section.version}, "
          f"{len(section.functions)} functions, {section.num_rows} rows, "
          f"{len(pcs)} lookups")

    def sfbt_lookups():
        fresh = read_section(data, address, name)
        for pc in pcs:
            fresh.find_row(pc)

    t_open = best_of(20, lambda: read_section(data, address, name))
    t_lookup = best_of(5, sfbt_lookups) - t_open
    rows = []
    try:
        lib = libsframe()
    except OSError as error:
        print(f"libsframe not available ({error}): no ratio")
        lib = None
    if lib is not None and section.version == 1:
        error = ctypes.c_int()
        buffer = ctypes.create_string_buffer(data)

        def decode():
            ctx = ctypes.c_void_p(lib.sframe_decode(buffer, len(data),
                                                    ctypes.byref(error)))
            lib.sframe_decoder_free(ctypes.byref(ctx))

        ctx = lib.sframe_decode(buffer, len(data), ctypes.byref(error))
        fre = ctypes.create_string_buffer(64)
        relative = [pc - address for pc in pcs]
        found = sum(lib.sframe_find_fre(ctx, pc, fre) == 0 for pc in relative)
        ours = sum(section.find_row(pc) is not None for pc in pcs)
        t_lib_open = best_of(20, decode)
        find = lib.sframe_find_fre
        t_lib_lookup = best_of(5, lambda: [find(ctx, pc, fre) for pc in relative])
        rows.append(("open", t_open, t_lib_open))
        rows.append(("lookup (per address)", t_lookup / len(pcs),
                     t_lib_lookup / len(pcs)))
        print(f"rows found: sfbt {ours}, libsframe {found}")
    else:
        print(f"open: sfbt {t_open * 1e6:.1f} us")
        print(f"lookup: sfbt {t_lookup / len(pcs) * 1e6:.2f} us per address")

    t_dump = best_of(5, lambda: dump_text(read_section(data, address, name)))
    objdump = "objdump"
    t_objdump = best_of(3, lambda: subprocess.run(
        [objdump, "--sframe", str(path)], capture_output=True, check=True))
    rows.append(("dump (objdump: whole process)", t_dump, t_objdump))

    for what, ours, anchor in rows:
        print(f"{what:32} sfbt {ours * 1e6:10.2f} us   anchor {anchor * 1e6:10.2f} us"
              f"   ratio {ours / anchor:6.2f}")


if __name__ == "__main__":
    main()
