"""Fuzzing whose word a core or an archive is: run as root, `sfbt stack
--core` and `cbf decode` / `fold` read cores and archives owned by
``nobody`` that name files of random owners and modes (root's 0600,
nobody's 0000, open to all, ...), some in root's private directories,
directly or through a link nobody planted, over the stack, the heap (where the frame pointer leads) or the
code, with the region not in the core, dumped, or left out of a read-only
or a writable segment, and NT_PRPSINFO claiming root or nobody.

Besides bench/fuzz.py's outcomes (each case in a forked child under its
memory and time limits) it counts HARMS: output holding a byte pattern or
a symbol name of a file nobody could not read (the kernel says, setpriv).

Run (as root): python3 bench/fuzz_trust.py [--cases N] [--seed S]
"""

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz import OUTCOMES, engine_main, run_case  # noqa: E402
import crafted  # noqa: E402  (fuzz put tests/ on the path)
from sfbt.archive import cbf  # noqa: E402
from sfbt.archive.imagemap import Image, ImageMap  # noqa: E402
from sfbt.archive.store import MAGIC, Archive  # noqa: E402

NOBODY = 65534
#: the 8 bytes the text secret repeats: a harm if they show as a word
SECRET_WORD = b"Tr$9!kQz"
SECRET_NAME = "trust_secret_Fq3x"
SECRET_PROGRAM = f"""
void {SECRET_NAME}(void) {{ for (;;) ; }}
void _start(void) {{ {SECRET_NAME}(); }}
"""
CODE = 0x400000  # the secret ELF's first PT_LOAD; SECRET_NAME at 0x401000
HEAP = 0x600000
MODES = (0o600, 0o000, 0o640, 0o604, 0o644, 0o400, 0o060, 0o006)
PF_R, PF_W = 4, 2


def build_secret_elf(directory):
    """A static ELF whose function SECRET_NAME is at 0x401000."""
    source = os.path.join(directory, "secret.c")
    with open(source, "w") as stream:
        stream.write(SECRET_PROGRAM)
    program = os.path.join(directory, "secret.elf")
    subprocess.run(["gcc", "-O0", "-nostdlib", "-static", "-no-pie", "-Wl,--build-id",
                    "-o", program, source], check=True, capture_output=True)
    return program


def nobody_could_read(path):
    """Whether nobody (uid and gid 65534) could read the file at path
    (following links), asked of the kernel."""
    reader = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                             "--clear-groups", "head", "-c1", path], capture_output=True)
    return reader.returncode == 0


def core_bytes(rng, mapped_path, region, segment):
    """A core of one thread at 0x401000 whose NT_FILE maps ``mapped_path``
    over ``region`` (an address), the region being ``segment``: None (not
    in the core), "dumped", "omitted-ro" or "omitted-rw"."""
    fp = rng.choice((crafted.STACK + 0x100, HEAP + 0x100))
    notes = [(1, crafted.x86_64_prstatus(4242, 0x401000, crafted.STACK + 0x100, fp)),
             (0x46494C45, crafted.nt_file([(region, region + 3 * crafted.PAGE, 0,
                                            mapped_path)]))]
    if rng.random() < 0.5:
        prpsinfo = bytearray(136)
        struct.pack_into("<IIi", prpsinfo, 16, *[rng.choice((0, NOBODY))] * 2, 4242)
        notes.append((3, bytes(prpsinfo)))
    loads = []  # (address, dumped bytes, memory size, flags)
    if region != crafted.STACK:
        frames = struct.pack("<QQ", HEAP + 0x100, 0x401234)
        loads.append((crafted.STACK, bytes(0x100) + frames + bytes(crafted.PAGE - 0x110),
                      crafted.PAGE, PF_R | PF_W))
    if segment == "dumped":
        loads.append((region, bytes(3 * crafted.PAGE), 3 * crafted.PAGE, PF_R | PF_W))
    elif segment is not None:
        loads.append((region, b"", 3 * crafted.PAGE,
                      PF_R | (PF_W if segment == "omitted-rw" else 0)))
    return crafted.core_file(notes, sorted(loads))


def archive_bytes(image_path, build_id):
    archive = Archive()
    archive.capture(cbf.encode([cbf.Frame("pc", 0x401000), cbf.Frame("ra", 0x401004)]),
                    ImageMap("linux-x86_64", [Image(image_path, CODE, CODE + 0x100000,
                                                    build_id)]),
                    thread="1", reason="SIGTRAP")
    return MAGIC + archive.pending_bytes()


def secrets_shown(output):
    """The secret's symbol name and byte patterns that ``output`` shows."""
    word = struct.unpack("<Q", SECRET_WORD)[0]
    return [what for what in (SECRET_NAME, f"{word:#x}", f"{word:016x}",
                              SECRET_WORD.decode()) if what in output]


class TrustCases:
    """The files of a run: the secrets are copied per case with the mode
    and owner drawn, and linked to by nobody's links."""

    def __init__(self, directory):
        self.directory = directory
        self.elf = build_secret_elf(directory)
        with open(self.elf, "rb") as stream:
            self.elf_bytes = stream.read()
        from sfbt.elf import read_build_id
        self.build_id = bytes.fromhex(read_build_id(self.elf))

    def _secret(self, rng, number, elf):
        """(path to name, path of the file it reaches) of a fresh secret."""
        place = self.directory
        if rng.random() < 0.2:  # open to all, in root's private directory
            place = os.path.join(self.directory, f"private-{number}")
            os.mkdir(place, rng.choice((0o700, 0o711, 0o755)))
        target = os.path.join(place, f"secret-{number}")
        with open(target, "wb") as stream:
            stream.write(self.elf_bytes if elf else SECRET_WORD * (3 * crafted.PAGE // 8))
        owner = rng.choice((0, 0, NOBODY))
        os.chown(target, owner, rng.choice((0, NOBODY)))
        os.chmod(target, rng.choice(MODES))
        if rng.random() < 0.3:
            link = os.path.join(self.directory, f"link-{number}")
            os.symlink(target, link)
            os.lchown(link, NOBODY, NOBODY)
            return link, target
        return target, target

    def case(self, rng, number):
        """(argv, path whose mode decides, output path) of one case."""
        output = os.path.join(self.directory, f"out-{number}")
        data = os.path.join(self.directory, f"data-{number}")
        if rng.random() < 0.6:
            region = rng.choice((crafted.STACK, HEAP, CODE))
            named, target = self._secret(rng, number, elf=region == CODE or rng.random() < 0.2)
            segment = rng.choice((None, "dumped", "omitted-ro", "omitted-rw"))
            with open(data, "wb") as stream:
                stream.write(core_bytes(rng, named, region, segment))
            argv = ["stack", "--core", data]
        else:
            named, target = self._secret(rng, number, elf=True)
            with open(data, "wb") as stream:
                stream.write(archive_bytes(named, self.build_id if rng.random() < 0.5
                                           else b""))
            argv = rng.choice((["cbf", "decode"], ["fold"])) + [data]
        os.chown(data, NOBODY, NOBODY)
        return argv, target, output


def fuzz_trust(cases, seed, directory):
    """Run cases; returns {outcome: count, "harm": count, "shown": count
    of secrets nobody could read shown (not harm)} and the failing cases
    [(what, argv, output)]."""
    rng = random.Random(seed)
    os.chmod(directory, 0o755)  # (its parents must be searchable by nobody too)
    trust = TrustCases(directory)
    counts = dict.fromkeys(OUTCOMES + ("harm", "shown"), 0)
    failures = []
    for number in range(cases):
        argv, target, output = trust.case(rng, number)
        outcome, stderr = run_case(argv, output)
        counts[outcome] += 1
        with open(output, encoding="utf-8", errors="replace") as stream:
            text = stream.read() + stderr
        shown = secrets_shown(text)
        if shown and nobody_could_read(target):
            counts["shown"] += 1
        elif shown:
            counts["harm"] += 1
            failures.append((f"shows {', '.join(shown)} of a file nobody may not read",
                             argv, text))
        if outcome not in ("clean", "error"):
            failures.append((outcome, argv, stderr))
    return counts, failures


def main():
    return engine_main(
        "fuzz-trust", lambda cases, seed, directory, _: fuzz_trust(cases, seed, directory), cases=2000, root=True)


if __name__ == "__main__":
    sys.exit(main())
