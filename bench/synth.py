"""Synthesizing SFrame from DWARF CFI: the system's libc, the first time
(parse .eh_frame, run every CFA program, convert, write the section, store
it in the cache) and from the cache (read and check the stored section).

Goals: under 2 s the first time, under 20 ms from the cache.  Prints times
and ratios (time / goal: below 1 meets the goal).  The cache lives in a
temporary directory; the user's is not touched.
Run: python3 bench/synth.py [ELF]
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))

from sfbt import dwarf  # noqa: E402
from sfbt.cache import Cache  # noqa: E402

FIRST_GOAL = 2.0
CACHED_GOAL = 0.020


def system_libc():
    """The C library this Python runs with (from /proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if Path(path).name.startswith("libc.so"):
                return Path(path)
    raise SystemExit("no libc in /proc/self/maps; name an ELF file")


def timed(action):
    began = time.perf_counter()
    result = action()
    return time.perf_counter() - began, result


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else system_libc()
    firsts, cached = [], []
    result = None
    with tempfile.TemporaryDirectory() as scratch:
        for attempt in range(3):
            os.environ["XDG_CACHE_HOME"] = os.path.join(scratch, str(attempt))
            seconds, result = timed(lambda: dwarf.SynthesisStore().synthesize(str(path)))
            assert result.origin == "built"
            firsts.append(seconds)
            for _ in range(10):
                seconds, again = timed(lambda: dwarf.SynthesisStore().synthesize(str(path)))
                assert again.origin == "cache"
                cached.append(seconds)
        cache = Cache("synth")
        entry = os.path.join(cache.path, cache.entry_name(dwarf.file_cache_key(path)))
        size = os.path.getsize(entry)
    first, from_cache = min(firsts), statistics.median(cached)
    print(f"{path}: {result.stats.summary()}")
    print(f"cache entry: {size} bytes, {len(result.section.functions)} FDEs, "
          f"{result.section.num_rows} FREs")
    print(f"first time:  {first * 1000:8.1f} ms (best of {len(firsts)}; "
          f"goal {FIRST_GOAL * 1000:.0f} ms, ratio {first / FIRST_GOAL:.2f})")
    print(f"from cache:  {from_cache * 1000:8.1f} ms (median of {len(cached)}; "
          f"goal {CACHED_GOAL * 1000:.0f} ms, ratio {from_cache / CACHED_GOAL:.2f})")


if __name__ == "__main__":
    main()
