"""sfbt's symbolizer (sfbt.symbols) against `eu-addr2line -f -e FILE`:
the function and source line of 50 addresses spread over the text of a
large library (libLLVM when it is installed, else libc; its separate debug
file, when there is one, read by both), each side a fresh
process, in paired, interleaved rounds (bench/pairing.py): sfbt with its
cache filled by a first run, and with an empty cache each run.

Run: python3 bench/symbols.py [--rounds N] [--file PATH]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "plugin"))

from pairing import paired_ratios  # noqa: E402
from sfbt.elf import open_elf  # noqa: E402

NAMES = r"""
import sys
from sfbt.debuginfo import DebugFiles
from sfbt.symbols.symbolizer import file_symbolizer
symbols = file_symbolizer(sys.argv[1], None, DebugFiles())
for address in sys.argv[2:]:
    print(symbols.function(int(address, 16)), symbols.line(int(address, 16)))
"""


def large_library():
    found = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libLLVM*.so.*"), key=os.path.getsize)
    return found[-1] if found else "/usr/lib/x86_64-linux-gnu/libc.so.6"


def text_addresses(path, count=50):
    stream, image = open_elf(path)
    with stream:
        text = image.section(".text")
    step = text.size // count
    return [f"{text.addr + i * step:#x}" for i in range(count)]


def timed(command, env):
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {done.stderr.decode().strip()}")
    return time.perf_counter() - began


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--file", default=large_library())
    args = parser.parse_args()
    eu = shutil.which("eu-addr2line")
    if eu is None:
        raise SystemExit("eu-addr2line: not installed (apt-get install elfutils)")
    addresses = text_addresses(args.file)
    work = tempfile.mkdtemp(prefix="sfbt-bench-symbols-")
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "plugin"), DEBUGINFOD_URLS="",
                   PYTHONPYCACHEPREFIX=os.path.join(work, "pycache"))
        filled = dict(env, XDG_CACHE_HOME=os.path.join(work, "filled"))
        ours = [sys.executable, "-c", NAMES, args.file, *addresses]
        theirs = [eu, "-f", "-e", args.file, *addresses]
        timed(ours, filled)

        def empty():
            with tempfile.TemporaryDirectory(dir=work) as cache:
                return timed(ours, dict(env, XDG_CACHE_HOME=cache))

        print(f"{args.file}: {len(addresses)} addresses")
        print(paired_ratios(args.rounds, lambda: timed(ours, filled),
                            lambda: timed(theirs, env)).line(
            "sfbt symbolizer (cache filled) / eu-addr2line -f"))
        print(paired_ratios(args.rounds, empty, lambda: timed(theirs, env)).line(
            "sfbt symbolizer (empty cache) / eu-addr2line -f"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
