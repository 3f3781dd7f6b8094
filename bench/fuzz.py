"""Fuzzing the command line with mutated inputs: ELF files (sframe dump,
dump --synth, lookup, cbf decode --exe), archives (cbf decode, fold), bare
CBF, Swift's JSON form and lws logs (cbf decode, fold, heapmap); and with
hostile names (--names): thread names, stop reasons, labels, image paths
and ELF symbols made of control characters, newlines that start forged
lines, bytes that are not UTF-8 and markup, in archives given to cbf decode
(--exe), fold and flame (SVG, speedscope), and thread names of a live
process given to sfbt stack; and with inputs crafted to cost
(tests/crafted.py), mutated or not: archives of image maps that expand a
few bytes into megabytes, maps of thousands of images that traces take
turns among, tens of thousands of maps, overlapping images (cbf decode,
fold, flame), and cores that lie: registers of another machine, notes cut
short, NT_FILE naming a FIFO, a device, a directory or nothing, the stack
dumped or not (stack --core).

Each case runs in a forked child (the modules are loaded once) under a
memory limit (RLIMIT_AS) and a time limit (RLIMIT_CPU: SECONDS of
processor time, what a loop takes; and a wall-clock alarm, WAIT_SECONDS,
for a case that blocks: a shared machine's load stretches a case's wall
time many times over, not its processor time), and is counted as one of:

  clean     exit 0
  error     exit 1 with one line "sfbt: ..." on stderr
  traceback an exception escaped, or more than one line of error
  hang      the time limit killed it
  blowup    the memory limit (300 MB) was hit (MemoryError), or it died of
            a signal
  acted     (names) a name acted: a control character or a byte that is
            not UTF-8 on the output, a line that is not the command's
            layout, SVG that is not XML or JSON that does not parse

Run: python3 bench/fuzz.py [--cases N] [--seed S] [--jobs J] [--names]
     [--kinds maps,core]
Failing inputs are kept under --keep DIR.  tests/test_fuzz.py runs a few
hundred seeded cases of the same engine.

With --planted (as root), `sfbt stack PID` and `sfbt sframe dump --synth
FILE` run over a cache whose entries were replaced (PLANTS: links to a file
to keep and to a place to create, FIFOs, /dev/urandom, directories, short,
mutated, swapped and resealed entries, huge sparse files, cache
directories that are links, open to all or another user's), and `sframe
synth -o` writes to a link another user planted in a sticky directory.
Besides the outcomes it counts HARMS: a peak resident size over 300 MB, a
write outside what the user named (the file to keep changed, the place to
create created), and output that differs from a clean cache's (names from
another file; not counted for resealed entries, which only the cache's
owner could write).
"""

import argparse
import io
import json
import base64
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugin"))
sys.path.insert(0, str(ROOT / "tests"))

from sfbt import cli  # noqa: E402
from sfbt.archive import cbf, lws  # noqa: E402
from sfbt.archive.imagemap import Image, ImageMap, encode_image_map  # noqa: E402
from sfbt.archive.store import Archive, MAGIC  # noqa: E402
import crafted  # noqa: E402

OUTCOMES = ("clean", "error", "traceback", "hang", "blowup", "acted")
MEMORY_LIMIT = 300 << 20
SECONDS = 10
WAIT_SECONDS = 90
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


def crafted_maps(rng):
    """An archive of image maps built to cost: doubling prefixes, many
    images that traces take turns among, overlapping images, or many
    maps."""
    shape = rng.randrange(4)
    if shape == 0:
        doublings = rng.randrange(1, 15)
        maps = [crafted.doubling_image_map(salt, rng.choice((2, 50, 500)), doublings)
                for salt in range(rng.choice((1, 4, 5, 64)))]
        rounds = 1
    elif shape == 1:
        maps = [crafted.wide_image_map(salt, rng.choice((10, 1000, 5000)))
                for salt in range(rng.choice((2, 65, 70)))]
        rounds = rng.choice((1, 20))
    elif shape == 2:
        maps, rounds = crafted.one_image_maps(rng.choice((100, 20_000, 60_000))), 1
    else:
        images = []
        for _ in range(rng.randrange(1, 400)):
            base = rng.randrange(0x500000, 0x500000 + 0x1000)
            images.append(Image(f"/x/{rng.randrange(9)}", base, base + rng.randrange(0x2000)))
        maps = [encode_image_map(ImageMap("linux-x86_64", images))]
        rounds = rng.choice((1, 100))
    return crafted.archive_of_maps(maps, rng.randrange(3), rounds)


def crafted_core(rng, directory):
    """A core file built to lie (see crafted.stack_core), in directory
    with a FIFO its NT_FILE may name."""
    fifo = os.path.join(directory, "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    stack = crafted.STACK
    named = rng.choice((fifo, "/dev/zero", directory, os.path.join(directory, "missing"),
                        "/bin/true", sys.executable))
    mappings = rng.choice(((), [(stack, stack + crafted.PAGE, 0, named)],
                           [(0x400000, 0x500000, 0, named)]))
    machine = rng.choice((crafted.EM_X86_64,) * 3 + (crafted.EM_AARCH64, 3, 0xFFFF))
    size = rng.choice((crafted.X86_64_PRSTATUS,) * 3 + (0, 100, 328, 392, 4096))
    return crafted.stack_core(mappings, machine, size, dump_stack=rng.random() < 0.5)


def crafted_input(kind, rng, directory):
    return crafted_maps(rng) if kind == "maps" else crafted_core(rng, directory)


CRAFTED = ("maps", "core")


def commands(kind, path, helper):
    """The command lines a mutated input of this kind is given to."""
    if kind == "maps":
        out = os.path.join(os.path.dirname(path), "out.svg")
        return [["cbf", "decode", path], ["fold", path], ["flame", path, "-o", out]]
    if kind == "core":
        return [["stack", "--core", path]]
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


def _status_kb(field):
    """A size of this process from /proc/self/status (VmSize, VmRSS), in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _child(argv, stderr_write, stdout_path=None):
    """Run in the forked child: the command (a command line, or a function
    returning an exit status), its outcome as an exit code.  The command
    may add MEMORY_LIMIT to the address space it was forked with (a test
    run's interpreter may already hold hundreds of MB)."""
    limit = _status_kb("VmSize") * 1024 + MEMORY_LIMIT
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (SECONDS, SECONDS + 1))
    signal.alarm(WAIT_SECONDS)
    output = os.open(stdout_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(output, 1)
    os.dup2(stderr_write, 2)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=False)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    try:
        status = argv() if callable(argv) else cli.main(argv)
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


def run_case(argv, stdout_path=None):
    """(outcome, stderr text) of one command line in a forked child; its
    standard output goes to stdout_path when given."""
    outcome, stderr, _ = run_measured(argv, stdout_path)
    return outcome, stderr


def run_measured(argv, stdout_path=None):
    """(outcome, stderr text, peak resident kilobytes) of one command line
    in a forked child, its standard output written to stdout_path.  The
    peak counts what the command added to the resident size it was forked
    with."""
    forked_with = _status_kb("VmRSS")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            _child(argv, write_end, stdout_path)
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
    _, status, usage = os.wait4(pid, 0)
    stderr = b"".join(chunks).decode("utf-8", "replace")
    return _outcome(status, stderr), stderr, max(0, usage.ru_maxrss - forked_with)


def _outcome(status, stderr):
    if os.WIFSIGNALED(status):
        killer = os.WTERMSIG(status)
        return ("hang" if killer in (signal.SIGALRM, signal.SIGXCPU, signal.SIGKILL)
                else "blowup")
    code = os.WEXITSTATUS(status)
    lines = [line for line in stderr.splitlines() if not line.startswith("sfbt: warning: ")]
    if code == 0:
        return "clean"
    if code == 3 or "MemoryError" in stderr:
        return "blowup"
    if code == 1 and len(lines) == 1 and lines[0].startswith("sfbt: ") \
            and "Traceback" not in stderr:
        return "error"
    return "traceback"


def fuzz(cases, seed, directory, keep=None, report=None, only=None):
    """Run cases (of the kinds in ``only``, default all); returns
    {outcome: count} and the failing cases [(outcome, argv, input bytes,
    stderr)]."""
    rng = random.Random(seed)
    corpus = seeds()
    kinds = [kind for kind in corpus if corpus[kind]] + list(CRAFTED)
    if only:
        kinds = [kind for kind in kinds if kind in only]
    helper = os.path.join(directory, "helper.cbf")
    with open(helper, "wb") as stream:
        stream.write(cbf.encode([cbf.Frame("pc", 0x401000), cbf.Frame("ra", 0x1130)]))
    counts = dict.fromkeys(OUTCOMES, 0)
    failures = []
    path = os.path.join(directory, "input")
    for number in range(cases):
        kind = kinds[number % len(kinds)] if number < len(kinds) else rng.choice(
            kinds + [k for k in ("elf", "archive") if k in kinds])  # twice as often
        if kind in CRAFTED:
            data = crafted_input(kind, rng, directory)
            if rng.random() < 0.5:
                data = mutate(data, rng)
        else:
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


# -- planted cache entries and output links ------------------------------------------------------

#: what is planted at the names of cache entries a command will read
PLANTS = ("link-to-file", "dangling-link", "fifo", "urandom", "directory", "short",
          "mutated", "copied", "resealed", "huge", "part-link", "part-open", "part-theirs")
#: counts beyond the outcomes; all should be 0
HARMS = ("memory over 300 MB", "writes outside", "names from another file")
NOBODY = 65534


class Witnesses:
    """What a hostile case must leave as it was, in ``directory``: a file
    to keep, a place where nothing may be created, and a sleeping process
    for `sfbt stack` and `record` to read."""

    def __init__(self, directory):
        self.directory = directory
        self.keep = os.path.join(directory, "keep")
        self.created = os.path.join(directory, "created")
        self._restore()
        self.sleeper = subprocess.Popen(["sleep", "1000"])
        time.sleep(0.2)  # in nanosleep

    def close(self):
        self.sleeper.kill()
        self.sleeper.wait()

    def _restore(self):
        """The file to keep as it was, and nothing at the place to create."""
        if os.path.lexists(self.keep):
            os.unlink(self.keep)
        with open(self.keep, "wb") as stream:
            stream.write(b"precious\n")
        if os.path.lexists(self.created):
            os.unlink(self.created)


class Planted(Witnesses):
    """Commands run with a cache whose entries someone else planted: a
    long-running process for `sfbt stack` and an ELF file for `sframe dump
    --synth`, each run first with a clean cache (its output is the one to
    get) and a full one (whose entries are the names to plant at)."""

    def __init__(self, directory):
        super().__init__(directory)
        elf = str(FIXTURES / "v3" / "x86_64" / "manyfuncs")
        self.commands = {"stack": ["stack", str(self.sleeper.pid)],
                         "dump": ["sframe", "dump", "--synth", elf]}
        self.expected, self.full = {}, {}
        for name, argv in self.commands.items():
            home = self._home(f"full-{name}")
            outcome, stdout = self._run(argv, home)[:2]
            again = self._run(argv, home)[:2]
            assert outcome == "clean" and again == (outcome, stdout), (argv, again)
            self.expected[name], self.full[name] = stdout, home
        sticky = os.path.join(directory, "sticky")
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        self.link = os.path.join(sticky, "out")
        os.symlink(self.keep, self.link)
        os.lchown(self.link, NOBODY, NOBODY)
        self.output_commands = [["sframe", "synth", elf, "-o", self.link]]

    def _home(self, name):
        home = os.path.join(self.directory, name)
        os.makedirs(home)
        return home

    def _run(self, argv, home):
        os.environ["XDG_CACHE_HOME"] = home
        output = os.path.join(self.directory, "stdout")
        outcome, stderr, peak = run_measured(argv, output)
        with open(output, "rb") as stream:
            return outcome, stream.read(), stderr, peak

    def case(self, rng, number):
        """(outcome, [harms], argv, stderr) of one planted case."""
        if rng.random() < 0.1:
            argv = rng.choice(self.output_commands)
            outcome, _, stderr, peak = self._run(argv, self._home(f"case-{number}"))
            return outcome, self._harms(peak, False), argv, stderr
        name = rng.choice(sorted(self.commands))
        home = os.path.join(self.directory, f"case-{number}")
        shutil.copytree(self.full[name], home, symlinks=True)
        plant = rng.choice(PLANTS)
        self._plant(rng, os.path.join(home, "sfbt"), plant)
        outcome, stdout, stderr, peak = self._run(self.commands[name], home)
        foreign = stdout != self.expected[name] and outcome == "clean" and plant != "resealed"
        shutil.rmtree(home, ignore_errors=True)
        return outcome, self._harms(peak, foreign), [plant, *self.commands[name]], stderr

    def _harms(self, peak_kb, foreign):
        harms = []
        if peak_kb > 300 * 1024:
            harms.append("memory over 300 MB")
        with open(self.keep, "rb") as stream:
            if stream.read() != b"precious\n" or os.path.lexists(self.created):
                harms.append("writes outside")
                self._restore()
        if foreign:
            harms.append("names from another file")
        return harms

    def _plant(self, rng, root, plant):
        parts = [os.path.join(root, part) for part in sorted(os.listdir(root))]
        if plant.startswith("part-"):
            part = rng.choice(parts)
            if plant == "part-link":
                shutil.rmtree(part)
                os.symlink(self.directory, part)
            elif plant == "part-open":
                os.chmod(part, 0o777)
            else:
                os.chown(part, NOBODY, NOBODY)
            return
        entries = [os.path.join(part, name) for part in parts for name in os.listdir(part)]
        chosen = rng.sample(entries, rng.randint(1, len(entries)))
        for path in chosen:
            with open(path, "rb") as stream:
                data = stream.read()
            os.unlink(path)
            if plant == "link-to-file":
                os.symlink(self.keep, path)
            elif plant == "dangling-link":
                os.symlink(self.created, path)
            elif plant == "fifo":
                os.mkfifo(path)
            elif plant == "urandom":
                os.symlink("/dev/urandom", path)
            elif plant == "directory":
                os.mkdir(path)
            elif plant == "huge":
                with open(path, "wb") as stream:
                    stream.truncate(rng.choice((1 << 26, 1 << 30)))
            elif plant == "copied":  # another entry's bytes under this name
                other = rng.choice([e for e in entries if e != path] or [path])
                data = _saved(other, path, data)
                with open(path, "wb") as stream:
                    stream.write(data)
            else:
                with open(path, "wb") as stream:
                    stream.write(_damaged(rng, plant, data))


def _saved(other, path, data):
    try:
        with open(other, "rb") as stream:
            return stream.read()
    except OSError:  # already replaced by a plant
        return data


def _damaged(rng, plant, data):
    if plant == "short":
        return rng.choice((b"\xdb\xff\xff\xff\x7f", b"", b"sfbt-cache 1\n", b"[" * 100000))
    if plant == "mutated":
        return mutate(data, rng)
    # resealed: the payload damaged and the head made to match, as the
    # cache's owner could
    import hashlib
    magic, key, _, payload = data.split(b"\n", 3)
    payload = mutate(payload, rng)
    return b"\n".join((magic, key, hashlib.sha256(payload).hexdigest().encode(), payload))


def fuzz_planted(cases, seed, directory, keep=None, report=None):
    """Run planted cases; returns ({outcome or harm: count}, failures
    [(what, argv, stderr)])."""
    rng = random.Random(seed)
    counts = dict.fromkeys(OUTCOMES + HARMS, 0)
    failures = []
    old_home = os.environ.get("XDG_CACHE_HOME")
    planted = Planted(directory)
    try:
        for number in range(cases):
            outcome, harms, argv, stderr = planted.case(rng, number)
            counts[outcome] += 1
            for harm in harms:
                counts[harm] += 1
            if outcome not in ("clean", "error") or harms:
                failures.append((", ".join([outcome, *harms]), argv, stderr))
            if report and (number + 1) % report == 0:
                print(f"{number + 1} planted cases: {counts}", flush=True)
    finally:
        planted.close()
        if old_home is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old_home
    return counts, failures


# -- hostile names --------------------------------------------------------------

#: pieces hostile names are made of: terminal escapes, a newline that starts
#: a forged frame line or folded stack, bytes that are not UTF-8 (surrogate
#: escapes), bidirectional overrides, markup and the folded-stack separators
NAME_PIECES = ["\x1b[2J", "\x1b]0;title\x07", "\n#9  0x0000000000401000 in fake ()",
               "\na;b 1000000", "\r", "\t", "\x00", "\x7f", "\x9b", "\udcff", "\udc80",
               "\u202e", "\u200b", "\ufeff", "<script>", "]]>", "&amp;", '"', "'", ";",
               " 12", "\\033", "é", "€", "main"]
LINE_LAYOUTS = {
    "decode": re.compile(r"(Backtrace \d+, captured .*:|#\d+ +0x[0-9a-f]+ in .+"
                         r"|\.\.\. \d+ frames omitted|Backtrace stopped: .*)"),
    "fold": re.compile(r".+ \d+"),
    "stack": re.compile(r'(Thread \d+ \(LWP \d+( "[^\n]*")?\):|#\d+ +0x[0-9a-f]+ in .+'
                        r"|Backtrace stopped: .*|)"),
}
#: what no output may hold: control characters but the newline, and bytes
#: that are not UTF-8 (read back as surrogate escapes)
_ACTING = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\udc80-\udcff\u202a-\u202e\u2066-\u2069]")


def hostile_name(rng, printable_only=False):
    pieces = NAME_PIECES if not printable_only else [p for p in NAME_PIECES if p.isprintable()]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))


def hostile_bytes(rng, size):
    """``size`` bytes of a hostile name with no NUL (C strings, ELF symbols)."""
    data = b"".join(piece.encode("utf-8", "surrogateescape")
                    for piece in (hostile_name(rng) for _ in range(size))).replace(b"\0", b"")
    return (data * (size // max(len(data), 1) + 1))[:size] if data else b"x" * size


def elf_with_hostile_symbols(path, rng):
    """Write at path callchain-O2 with each function's name in .strtab
    overwritten by hostile bytes of its length; {name offset: address}."""
    from elftools.elf.elffile import ELFFile
    source = FIXTURES / "v3" / "x86_64" / "callchain-O2"
    data = bytearray(source.read_bytes())
    with open(source, "rb") as stream:
        elf = ELFFile(stream)
        strtab = elf.get_section_by_name(".strtab")
        functions = [(symbol["st_name"], symbol["st_value"], len(symbol.name.encode()))
                     for symbol in elf.get_section_by_name(".symtab").iter_symbols()
                     if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_value"]]
    for name_at, _, size in functions:
        at = strtab["sh_offset"] + name_at
        data[at:at + size] = hostile_bytes(rng, size)
    with open(path, "wb") as stream:
        stream.write(data)
    return [address for _, address, _ in functions]


def hostile_archive(path, elf_path, addresses, rng):
    """An archive of a few traces: frames in the hostile ELF file (mapped at
    0x555555554000) and in an image of a hostile path; hostile thread
    names, stop reasons and labels.  Returns the number of traces."""
    base = 0x555555554000
    images = ImageMap("linux-x86_64", [
        Image(elf_path, base, base + 0x2000),
        Image("/no/such/" + hostile_name(rng).replace("/", "|") + ".so", 0x7F0000000000,
              0x7F0000100000, b"")])
    archive = Archive()
    count = rng.randint(1, 4)
    for number in range(count):
        frames = [cbf.Frame("pc", base + rng.choice(addresses) + 1)]
        frames += [cbf.Frame("ra", rng.choice([0, 0x7F0000000100 + number,
                                               base + rng.choice(addresses) + 5]))
                   for _ in range(rng.randint(0, 4))]
        frames.append(cbf.Frame("ra", 0x7F0000000010 + 64 * number))  # traces differ
        for _ in range(rng.randint(1, 3)):
            archive.capture(cbf.encode(frames), images, time_ns=number,
                            architecture="x86_64", thread=hostile_name(rng),
                            reason=hostile_name(rng), label=hostile_name(rng))
    with open(path, "wb") as stream:
        stream.write(MAGIC + archive.pending_bytes())
    return count


def names_acted(kind, text, traces=None):
    """What a command printed lets a name act (see OUTCOMES), or None."""
    if _ACTING.search(text):
        return f"{_ACTING.search(text)[0]!r} on the output"
    if kind in LINE_LAYOUTS:
        lines = text.splitlines()
        bad = next((line for line in lines if not LINE_LAYOUTS[kind].fullmatch(line)), None)
        if bad is not None:
            return f"line {bad!r}"
        if kind == "fold" and len(lines) != traces:
            return f"{len(lines)} folded lines for {traces} traces"
    if kind == "svg":
        import xml.dom.minidom
        try:
            xml.dom.minidom.parseString(text)
        except Exception as error:  # expat's errors: any of them is a failure
            return f"SVG is not XML: {error}"
    if kind == "speedscope":
        try:
            json.loads(text)
        except ValueError as error:
            return f"JSON: {error}"
    return None


def _read_text(path):
    try:
        with open(path, "rb") as stream:
            return stream.read().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return ""


def _names_case(rng, directory, live):
    """(outcome, argv, stderr) of one hostile-names case."""
    out = os.path.join(directory, "out")
    if live is not None and rng.random() < 0.1:
        names = [hostile_bytes(rng, rng.randint(1, 15)) for _ in range(2)]
        process = subprocess.Popen([live, *names], stdout=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL)
        try:
            process.stdout.readline()
            argv, kind, traces = ["stack", str(process.pid)], "stack", None
            outcome, stderr = run_case(argv, out)
        finally:
            process.kill()
            process.wait()
            process.stdout.close()
        text = _read_text(out)
        if outcome == "clean" and text.count("Thread ") != 3:
            return "acted", argv, f"{text.count('Thread ')} thread headings"
    else:
        elf_path = os.path.join(directory, "lib" + hostile_name(rng, True).replace("/", "|"))
        addresses = elf_with_hostile_symbols(elf_path, rng)
        archive = os.path.join(directory, "trace-" + hostile_name(rng).replace("/", "|")
                               .replace("\x00", "") + ".sfbt")
        traces = hostile_archive(archive, elf_path, addresses, rng)
        kind = rng.choice(["decode", "decode-exe", "fold", "svg", "speedscope"])
        argv = {"decode": ["cbf", "decode", archive],
                "decode-exe": ["cbf", "decode", archive, "--exe", elf_path],
                "fold": ["fold", archive],
                "svg": ["flame", archive, "-o", out + ".svg"],
                "speedscope": ["flame", archive, "--format", "speedscope",
                               "-o", out + ".json"]}[kind]
        kind = "decode" if kind == "decode-exe" else kind
        outcome, stderr = run_case(argv, out)
        text = _read_text(out)
        if kind in ("svg", "speedscope") and outcome == "clean":  # the file, not the summary
            text = _read_text(argv[-1]) if not _ACTING.search(text) else text
        elif kind in ("svg", "speedscope"):
            kind = None
        os.unlink(archive)
        os.unlink(elf_path)
    if outcome in ("clean", "error"):
        acted = names_acted(kind, text, traces) or (
            "stderr holds " + repr(_ACTING.search(stderr)[0]) if _ACTING.search(stderr)
            else None)
        if acted:
            return "acted", argv, acted
    return outcome, argv, stderr


def fuzz_names(cases, seed, directory, live=None):
    """Run hostile-names cases (``live``: the hostile_names program, for
    sfbt stack cases); returns {outcome: count} and the failing cases
    [(outcome, argv, None, detail)]."""
    rng = random.Random(seed)
    counts = dict.fromkeys(OUTCOMES, 0)
    failures = []
    for _ in range(cases):
        outcome, argv, detail = _names_case(rng, directory, live)
        counts[outcome] += 1
        if outcome not in ("clean", "error"):
            failures.append((outcome, argv, None, detail))
    return counts, failures


def build_hostile_names(directory):
    """tests/programs/hostile_names.c, compiled with SFrame data."""
    program = os.path.join(directory, "hostile_names")
    subprocess.run(["gcc", "-O2", "-Wa,--gsframe", "-o", program,
                    str(ROOT / "tests" / "programs" / "hostile_names.c"), "-lpthread"],
                   check=True, capture_output=True)
    return program


def _shown(what):
    return " ".join(map(str, what)) if isinstance(what, (list, tuple)) else str(what)


def print_results(counts, failures, cases, began, label="cases"):
    """An engine's counts, its first failures ((outcome, argv or what,
    stderr) each) and its time, as every engine of bench/ prints them."""
    print(json.dumps(counts))
    for outcome, what, stderr in failures[:20]:
        print(f"  {outcome}: {_shown(what)}\n    "
              + stderr.strip().replace("\n", "\n    ")[-2000:], flush=True)
    print(f"{cases} {label} in {time.time() - began:.0f} s")


def engine_main(name, run, cases=200, keep=False, root=False):
    """The command line of an engine of bench/fuzz_*.py: --cases, --seed
    (and --keep DIR), a scratch directory, then its results.  ``run(cases,
    seed, directory, keep)`` gives (counts, failures)."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__
                                     .splitlines()[0])
    parser.add_argument("--cases", type=int, default=cases)
    parser.add_argument("--seed", type=int, default=1)
    if keep:
        parser.add_argument("--keep", metavar="DIR", help="keep failing inputs here")
    args = parser.parse_args()
    if root and os.geteuid() != 0:
        sys.exit(f"{name}: run as root (its files belong to another user)")
    began = time.time()
    directory = tempfile.mkdtemp(prefix=f"sfbt-{name}-")
    try:
        counts, failures = run(args.cases, args.seed, directory, getattr(args, "keep", None))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print_results(counts, failures, args.cases, began)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes, each running CASES/JOBS cases with its own seed")
    parser.add_argument("--keep", metavar="DIR", help="keep failing inputs here")
    parser.add_argument("--planted", action="store_true",
                        help="plant hostile cache entries and output links instead "
                        "(as root: some plants belong to another user)")
    parser.add_argument("--names", action="store_true",
                        help="hostile names instead of mutated inputs")
    parser.add_argument("--kinds", metavar="K,K", help="only these kinds of input: "
                        "elf, archive, cbf, json, lws, maps, core (default all)")
    args = parser.parse_args()
    began = time.time()
    if args.planted:
        directory = tempfile.mkdtemp(prefix="sfbt-fuzz-planted-")
        try:
            counts, failures = fuzz_planted(args.cases, args.seed, directory, report=100)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        print_results(counts, failures, args.cases, began, "planted cases")
        return
    children = []
    for job in range(args.jobs):
        pid = os.fork()
        if pid == 0:
            directory = tempfile.mkdtemp(prefix="sfbt-fuzz-")
            try:
                if args.names:
                    counts, failures = fuzz_names(args.cases // args.jobs, args.seed + job,
                                                  directory, build_hostile_names(directory))
                else:
                    counts, failures = fuzz(args.cases // args.jobs, args.seed + job,
                                            directory, args.keep, report=1000,
                                            only=args.kinds and args.kinds.split(","))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            print(f"job {job}: {json.dumps(counts)}", flush=True)
            for outcome, argv, _, stderr in failures[:20]:
                print(f"  {outcome}: {' '.join(map(repr, argv))}\n    "
                      + stderr.strip().replace("\n", "\n    ")[-2000:], flush=True)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    print(f"{args.cases} cases in {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
