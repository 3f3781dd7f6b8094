"""sfbt as the kernel's core handler (docs/crashes.md) against keeping
the core (systemd-coredump's way), on real crashes of
tests/programs/crasher.c:

- per crash, the record sfbt keeps (what the store grew by: its events,
  traces and image map in a segment, its index line) against the same
  crash's core compressed with zstd -3 (systemd-coredump's default) and
  xz -6: goal <= 1/100 (and /usr/bin/python3 crashing, a program of a more
  usual size); the images a segment writes once (a program's first crash
  there) are counted apart;
- a crash of a bucket seen before: what the store grew by, goal <= 200
  bytes;
- for 10 threads and 2 GB of memory (crasher big): the handler's time
  from the kernel starting it to its record being written (it then drains
  the rest of the core), and its peak memory, goal <= 200 ms and <= 60 MB;
  beside `eu-stack --core` on the same crash's core, saved by the kernel
  to a file, in paired, interleaved rounds (median of the paired ratios).

It sets the machine's core_pattern (root only) while it runs, under the
lock the tests take, and puts it back however it ends.

Run (as root): python3 bench/crashes.py [--rounds N] [--skip-big]
"""

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
PROGRAMS = ROOT / "tests" / "programs"
PLUGIN = ROOT / "plugin"
#: crashes of a bucket kept whole (sfbt.crashes.store.KEEP_PER_BUCKET)
KEEP_PER_BUCKET = 3
CORE_PATTERN = "/proc/sys/kernel/core_pattern"
CORE_PIPE_LIMIT = "/proc/sys/kernel/core_pipe_limit"



def sfbt(*arguments):
    return subprocess.run([sys.executable, "-m", "sfbt", *map(str, arguments)],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(PLUGIN)))


def build(directory):
    flags = ["-g", "-O1", "-Wa,--gsframe"]
    library = directory / "libcrasher.so"
    program = directory / "crasher"
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", "-o", library,
                    PROGRAMS / "crasher_lib.c"], check=True)
    subprocess.run(["gcc", *flags, "-o", program, PROGRAMS / "crasher.c", library,
                    f"-Wl,-rpath,{directory}", "-lpthread"], check=True)
    return program


#: a crash of a program of a more usual size: the system's Python
PYTHON_CRASH = ["/usr/bin/python3", "-c", "import os, signal; os.kill(os.getpid(), "
                "signal.SIGSEGV)"]


MODES = ("segv", "abort", "bus", "fpe", "handler", "threads", "lib") + (
    ("python3",) if os.path.exists(PYTHON_CRASH[0]) else ())


def crash(program, mode, cwd):
    """Run ``program mode`` until the kernel is done with its core; its PID."""
    import resource

    def unlimited():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)
    command = PYTHON_CRASH if mode == "python3" else [str(program), mode]
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                               preexec_fn=unlimited)
    process.wait()
    return process.pid


def store_bytes(store):
    """(bytes of the store's index, kept list and segments, bytes of the
    segments' image tables)."""
    sys.path.insert(0, str(PLUGIN))
    from sfbt.archive.store import KIND_IMAGE, MAGIC, iter_records
    total = images = 0
    for path in store.iterdir():
        if path.name in ("index", "kept") or path.name.startswith("seg-"):
            total += path.stat().st_size
        if path.name.startswith("seg-"):
            with open(path, "rb") as stream:
                stream.read(len(MAGIC))
                images += sum(9 + len(payload) for _, kind, payload in iter_records(stream)
                              if kind == KIND_IMAGE)
    return total, images


def index(store):
    """The store's crashes as `sfbt crashes list` reads them (the index's
    short names long, a counted crash with its kept crash's fields)."""
    sys.path.insert(0, str(PLUGIN))
    from sfbt.crashes.store import CrashStore
    return CrashStore(str(store)).entries() if (store / "index").exists() else []


def entry_of(store, pid):
    for _ in range(600):
        for entry in index(store):
            if entry["pid"] == pid:
                return entry
        time.sleep(0.05)
    raise RuntimeError(f"no crash of {pid} in {store}")


def compressed_sizes(core):
    sizes = {}
    for name, command in (("zstd -3", ["zstd", "-3", "-c", "-q"]), ("xz -6", ["xz", "-6", "-c"])):
        if shutil.which(command[0]):
            with open(core, "rb") as stream:
                out = subprocess.run(command, stdin=stream, capture_output=True, check=True)
            sizes[name] = len(out.stdout)
    return sizes


def eu_stack(program, core):
    """(seconds, peak KiB) of eu-stack --core on the core, its peak memory
    as time(1) measures it (a child forked from this Python would count
    the interpreter's pages it had before exec)."""
    before = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "%M", "eu-stack", "--core", str(core),
                             "-e", str(program)], capture_output=True, text=True)
    seconds = time.perf_counter() - before
    return seconds, int(result.stderr.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args()
    from test_crashes import machine_lock
    work = Path(tempfile.mkdtemp(prefix="sfbt-bench-crashes-"))
    atexit.register(shutil.rmtree, work, True)
    program = build(work)
    store, cores = work / "store", work / "cores"
    cores.mkdir()
    with machine_lock():
        sfbt("crashes", "install", "--store", store)
        try:
            handled, grown = {}, {}
            for mode in MODES + ("segv",) * 4:
                before = store_bytes(store)
                entry = entry_of(store, crash(program, mode, work))
                after = store_bytes(store)
                grown.setdefault(mode, []).append((after[0] - before[0] - after[1] + before[1],
                                                   after[1] - before[1]))
                handled.setdefault(mode, entry)
        finally:
            sfbt("crashes", "uninstall", "--store", store)
        with open(CORE_PATTERN, "w") as stream:
            stream.write(f"{cores}/core.%p\n")
        kept = {mode: cores / f"core.{crash(program, mode, work)}" for mode in MODES}

        print("Per crash: sfbt's record (what the store grew by) against the compressed "
              "core (goal <= 1/100);\nimages: the image table's growth (a program's "
              "first crash in a segment), apart")
        print(f"{'crash':8} {'record':>7} {'images':>7} {'core':>10} {'zstd -3':>9} "
              f"{'xz -6':>9} {'ratio (zstd)':>13} {'with images':>12}")
        for mode in MODES:
            record, images = grown[mode][0]
            sizes = compressed_sizes(kept[mode])
            zstd = sizes.get("zstd -3") or sizes["xz -6"]
            print(f"{mode:8} {record:>7} {images:>7} {kept[mode].stat().st_size:>10} "
                  f"{sizes.get('zstd -3', 0):>9} {sizes.get('xz -6', 0):>9} "
                  f"{'1/%d' % round(zstd / record):>13} "
                  f"{'1/%d' % round(zstd / (record + images)):>12}")
        repeats = [record for record, _ in grown["segv"][KEEP_PER_BUCKET:]]
        print(f"\nA crash of a bucket seen before: {max(repeats)} bytes at most "
              f"(of {len(repeats)}; goal <= 200)")

        if args.skip_big:
            return
        print("\n10 threads, 2 GB of memory (crasher big): the handler, from the kernel "
              "starting it to its record written, and eu-stack --core on the saved core")
        times, memory, theirs, their_memory, ratios = [], [], [], [], []
        for round_number in range(args.rounds):
            # a store a round: a bucket's crashes after its first few are
            # only counted, without the handler's figures
            big_store = work / f"store-big-{round_number}"
            sfbt("crashes", "install", "--store", big_store)
            try:
                entry = entry_of(big_store, crash(program, "big", work))
            finally:
                sfbt("crashes", "uninstall", "--store", big_store)
            with open(CORE_PATTERN, "w") as stream:
                stream.write(f"{cores}/core.%p\n")
            core = cores / f"core.{crash(program, 'big', work)}"
            seconds, kilobytes = eu_stack(program, core)
            core.unlink()
            times.append(entry["handler_ms"])
            memory.append(entry["handler_kb"] / 1024)
            theirs.append(seconds * 1000)
            their_memory.append(kilobytes / 1024)
            ratios.append(entry["handler_ms"] / (seconds * 1000))
        print(f"  sfbt crash-handler: {statistics.median(times):.0f} ms, "
              f"{statistics.median(memory):.1f} MB peak (goals <= 200 ms, <= 60 MB)")
        print(f"  eu-stack --core:    {statistics.median(theirs):.0f} ms, "
              f"{statistics.median(their_memory):.1f} MB peak")
        print(f"  handler / eu-stack: {statistics.median(ratios):.2f} "
              f"(median of {len(ratios)} paired rounds)")


if __name__ == "__main__":
    main()
