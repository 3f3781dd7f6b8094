"""The differential harness: GDB with the plugin loaded against GDB alone.

Three gdb processes debug the same program in lockstep: GDB alone
(``gdb -nx``), GDB alone again, and GDB with the plugin (``gdb -nx`` +
``source gdb/sfbt_gdb.py``, as a user loads it), each with
tests/gdb_differential.py.  Every command goes to all three; the program
runs the same way in each (GDB turns address randomization off, the
programs are deterministic, all runs are pinned to one CPU), so they stop
at the same places.  At each stop:

(a) the plugin's `bt` and `bt full` text equal GDB's alone, and so does
    what GDB printed when the program stopped.  A line the two runs of GDB
    alone print differently (ld.so's rdtsc timestamps, bytes from
    AT_RANDOM) is the program's doing: there the plugin's line must keep,
    numbers masked, what the two have in common;
(b) `sframe-bt`'s PCs equal the PCs of GDB's own frames that are on the
    stack (inline and tail-call frames left out), from GDB alone.  Where
    GDB alone shows frames outside any code (``0x1 in ?? ()`` past ld.so's
    ``_start``), its frames up to the first of them are compared.

Stops: seeded random breakpoints (at function entries and at random
instructions inside functions, from the ELF symbol tables of the program
and of every library it loads), PLT stubs (``break NAME@plt``), `catch
syscall`, signals and library loads (``stop-on-solib-events``), with a few
``stepi`` after some of them (`run_plan`); or ``stepi`` at every
instruction from the program's first, or from a breakpoint (`sweep`).  A
stop whose pc, sp, thread or cause differ between the gdbs means the runs
diverged: that is reported, and the program's comparison ends there.
"""

import difflib
import json
import os
import queue
import random
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from gdb_support import compile_library, compile_program

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_ENTRY = ROOT / "gdb" / "sfbt_gdb.py"
HELPER = ROOT / "tests" / "gdb_differential.py"
FIXTURES = ROOT / "tests" / "fixtures"

DONE = "==DIFF-DONE=="
# What every program gets: no locale, no hash randomization, no .pyc files.
BASE_ENVIRONMENT = {"LC_ALL": "C", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
                    "PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"}
SYSCALLS = ("openat", "mmap", "read", "close", "brk", "newfstatat", "mprotect",
            "munmap", "lseek", "ioctl", "getdents64", "rt_sigaction")


class HarnessError(Exception):
    """The harness itself failed (a gdb died, timed out or answered
    nonsense), as opposed to a difference between the gdbs."""


# -- the programs -------------------------------------------------------------

@dataclass
class Program:
    name: str
    argv: List[str]
    environment: Dict[str, str] = field(default_factory=dict)
    #: locations to break at, and step from (besides the random ones)
    breaks: List[str] = field(default_factory=list)


PYTHON_SCRIPT = """\
import json, os, re, signal, struct, sys

def on_signal(signum, frame):
    sys.stdout.write("signal %d\\n" % signum)

signal.signal(signal.SIGUSR1, on_signal)

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

data = {"k%d" % i: [i, str(i) * 3, {"x": i / 7}] for i in range(150)}
text = json.dumps(data, sort_keys=True)
back = json.loads(text)
words = re.findall(r"k(\\d+)", text)
print(fib(12), len(words), sorted(back)[:3], struct.pack("<I", 7))
os.kill(os.getpid(), signal.SIGUSR1)
try:
    1 / 0
except ZeroDivisionError as error:
    print(error)
print(sum(x * x for x in range(500)), sorted(set(text))[:5])
"""

PERL_SCRIPT = """\
$SIG{USR1} = sub { print "usr1\\n" };
my %h;
$h{"k$_"} = $_ * 3 % 101 for 1 .. 300;
my @s = sort { $h{$a} <=> $h{$b} or $a cmp $b } keys %h;
my $t = join ",", map { sprintf "%s=%d", $_, $h{$_} } @s[0 .. 40];
my @m = ($t =~ /k(\\d+)=/g);
sub fib { my $n = shift; $n < 2 ? $n : fib($n - 1) + fib($n - 2) }
print fib(12), " ", scalar(@m), "\\n";
kill 'USR1', $$;
eval { die "oops\\n" };
print $@, length($t), "\\n";
"""

BASH_SCRIPT = """\
trap 'echo usr1' USR1
fib() {
    local n=$1
    if (( n < 2 )); then r=$n; return; fi
    fib $((n - 1)); local a=$r
    fib $((n - 2)); r=$((a + r))
}
fib 10
printf '%d\\n' "$r"
declare -A h
for i in {1..150}; do h[k$i]=$((i * i % 97)); done
s=""
for k in "${!h[@]}"; do s+="$k=${h[$k]};"; done
[[ $s =~ k1([0-9]+)= ]] && echo "${BASH_REMATCH[1]}"
kill -USR1 $$
x=${s//;/ }
echo ${#x} "${x:0:20}"
"""


def debian_programs(workdir: Path) -> List[Program]:
    """Debian's python3, perl and bash, each running a short deterministic
    script (written to ``workdir``) that raises a signal it handles."""
    programs = []
    for name, interpreter, options, script in (
            ("python3", "/usr/bin/python3", ["-s", "-B"], PYTHON_SCRIPT),
            ("perl", "/usr/bin/perl", [], PERL_SCRIPT),
            ("bash", "/usr/bin/bash", ["--norc", "--noprofile"], BASH_SCRIPT)):
        path = workdir / f"script.{name}"
        path.write_text(script)
        programs.append(Program(name, [os.path.realpath(interpreter), *options, str(path)]))
    return programs


def project_programs(workdir: Path) -> List[Program]:
    """tests/programs built with gas's --gsframe (SFrame v1), PIE, at -O0
    and at -O2 -fomit-frame-pointer."""
    programs = []
    for opt in ("O0", "O2"):
        out = workdir / opt
        out.mkdir(exist_ok=True)
        library = compile_library(out, "libapply.so", opt, ["libapply.c"])
        mixed = compile_program(out, "mixed", opt, True, ["mixed.c"])
        programs.append(Program(f"mixed-{opt}", [str(mixed)],
                                breaks=["clock_gettime", "raise", "trap_here", "on_ill"]))
        recurse = compile_program(out, "recurse", opt, True, ["recurse.c"], [library])
        programs.append(Program(f"recurse-{opt}", [str(recurse), "6"]))
        calls = compile_program(out, "libc_calls", opt, True, ["libc_calls.c"])
        for mode in ("qsort", "write", "segv", "abort"):
            programs.append(Program(f"libc_calls-{opt}-{mode}", [str(calls), mode]))
        signal = compile_program(out, "signal", opt, True, ["signal.c"])
        programs.append(Program(f"signal-{opt}", [str(signal)]))
        dlopen = compile_program(out, "dlopen", opt, True, ["dlopen.c"])
        programs.append(Program(f"dlopen-{opt}", [str(dlopen), str(library)]))
    return programs


def fixture_programs() -> List[Program]:
    """The committed SFrame executables: v1 (gas/ld 2.40) and v3
    (binutils 2.46)."""
    programs = []
    for version in ("v1", "v3"):
        directory = FIXTURES / version / "x86_64"
        programs += [Program(f"{version}-{name}", [str(directory / name)])
                     for name in ("callchain-O0", "callchain-O2", "callchain-O2-fp", "drap",
                                  "manyfuncs")]
        programs.append(Program(f"{version}-plt-main", [str(directory / "plt-main"), "word"],
                                {"LD_LIBRARY_PATH": str(directory)}))
    return programs


# -- one gdb ------------------------------------------------------------------

class Gdb:
    """One gdb process reading commands from a pipe."""

    def __init__(self, command, program: Program, plugin: bool, timeout: float):
        self.plugin = plugin
        self.timeout = timeout
        arguments = [command, "-nx", "-q",
                     "-ex", "set prompt", "-ex", "set pagination off",
                     "-ex", "set confirm off", "-ex", "set width 0", "-ex", "set height 0",
                     "-ex", "set breakpoint pending on",
                     # one CPU for every run: CPUID's APIC id is in ld.so's data
                     "-ex", f"set exec-wrapper taskset -c {min(os.sched_getaffinity(0))}",
                     "-ex", "set debuginfod enabled off"]
        if plugin:
            arguments += ["-ex", f"source {PLUGIN_ENTRY}"]
        arguments += ["-ex", f"source {HELPER}", "--args", program.argv[0]]
        self.process = subprocess.Popen(arguments, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, bufsize=1, start_new_session=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send("\n".join(f"set environment {key} {value}" for key, value
                             in {**BASE_ENVIRONMENT, **program.environment}.items()))
        self.receive()

    @property
    def name(self):
        return "plugin" if self.plugin else "gdb -nx"

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, command):
        try:
            self.process.stdin.write(f"{command}\necho \\n{DONE}\\n\n")
            self.process.stdin.flush()
        except OSError as error:
            raise HarnessError(f"{self.name}: gdb is gone ({error})") from None

    def receive(self):
        """[(text printed before it, answer of the helper)] and the text
        after the last answer, up to the end of the last command sent."""
        answers, text = [], []
        while True:
            try:
                line = self.lines.get(timeout=self.timeout)
            except queue.Empty:
                raise HarnessError(f"{self.name}: no answer in {self.timeout:.0f} s") from None
            if line is None:
                raise HarnessError(f"{self.name}: gdb exited; it said:\n" + "".join(text[-20:]))
            if line.rstrip("\n").endswith(DONE):
                return answers, "".join(text)
            at = line.find("DIFF ")
            if at >= 0 and line[at + 5:at + 6] in "{[0123456789n":
                text.append(line[:at])
                answers.append(("".join(text), json.loads(line[at + 5:])))
                text = []
            else:
                text.append(line)

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()


# -- comparing one stop ---------------------------------------------------------

# what differs between two runs of the same program: process and thread ids
_IDS = re.compile(r"\b(process|LWP) \d+")
_NUMBER = re.compile(r"-?\b(?:0x[0-9a-f]+|\d+)\b")
# a string or character as GDB prints it, with what it may append
_STRING = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\[0-7]{1,3}|\\.)')"""
                     r"(?:, <incomplete sequence [^>]*>|\s*<repeats \d+ times>)*")
_SFRAME_FRAME = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+) in ", re.M)
_ADDRESS = re.compile(r"0x[0-9a-f]+")


def without_ids(text):
    return _IDS.sub(lambda m: m[1] + " N", text)


def text_difference(ours: str, theirs: str, again: str) -> Tuple[Optional[str], bool]:
    """(where ``ours`` first differs from ``theirs``: ``line N: gdb -nx
    '...' / plugin '...'``, or None; whether a volatile line was met).
    ``again`` is GDB alone's text from a second run: a line where the two
    runs of GDB alone differ (ld.so's rdtsc timestamps, a clock_gettime
    result, bytes from AT_RANDOM) is volatile: ours must keep what the two
    have in common, in the same order, and may differ where they do."""
    if ours == theirs:
        return None, False
    a, b, c = theirs.splitlines(), ours.splitlines(), again.splitlines()
    volatile = False
    for index in range(max(len(a), len(b))):
        left = a[index] if index < len(a) else "<none>"
        right = b[index] if index < len(b) else "<none>"
        if left == right:
            continue
        if (len(a) == len(c) and c[index] != left
                and _common_parts(_data(left), _data(c[index])).fullmatch(_data(right))):
            volatile = True
            continue
        return f"line {index + 1}: gdb -nx {left!r} / plugin {right!r}", volatile
    return None, volatile


def _data(line: str) -> str:
    """``line`` with every number replaced by ``N`` and every string's
    contents by ``S`` (bytes of garbage print as strings of any length)."""
    return _NUMBER.sub("N", _STRING.sub("S", line))


def _common_parts(one: str, other: str):
    """A pattern of what two lines have in common, in order, with
    anything allowed where they differ."""
    matcher = difflib.SequenceMatcher(None, one, other, autojunk=False)
    parts = [re.escape(one[block.a:block.a + block.size])
             for block in matcher.get_matching_blocks() if block.size]
    return re.compile(".*?".join(parts), re.S)


def sframe_pcs(text: str) -> List[int]:
    return [int(m[2], 16) for m in _SFRAME_FRAME.finditer(text)]


def sframe_ending(text: str) -> str:
    """The line that says why sframe-bt stopped (or its error)."""
    for line in reversed(text.splitlines()):
        if line.startswith(("Backtrace stopped", "error:", "(More stack")):
            return line
    return "(no reason given)"


def reference_pcs(record) -> Tuple[List[int], bool]:
    """GDB's on-stack frames' PCs, up to the first one outside any code;
    and whether any were left out for that reason."""
    pcs = []
    for pc, _, in_code in record["frames"]:
        if not in_code:
            return pcs, True
        pcs.append(pc)
    return pcs, False


def sframe_difference(text: str, expected: List[int]) -> Optional[str]:
    """How sframe-bt's output ``text`` differs from GDB's PCs, or None."""
    if text.startswith("error:"):
        return f"fails: {text.strip()}"
    got = sframe_pcs(text)
    if got == expected:
        return None
    index = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                 min(len(got), len(expected)))
    if index >= len(expected):
        what = f"extra frame {index} {got[index]:#x}"
    elif index >= len(got):
        what = f"frame {index} missing: gdb {expected[index]:#x}"
    else:
        what = f"frame {index}: gdb {expected[index]:#x} sframe-bt {got[index]:#x}"
    return f"{what} ({len(got)} frames, gdb {len(expected)}); {sframe_ending(text)}"


@dataclass
class Mismatch:
    program: str
    stop: int  # index of the stop in the program's run
    how: str  # the command that led there and what stopped the program
    where: str  # frame #0 as GDB alone prints it
    check: str  # "stop print", "bt", "bt full", "sframe-bt", "gdb -nx twice"
    detail: str

    def line(self):
        return (f"{self.program} stop {self.stop} [{self.how}] at {self.where}: "
                f"{self.check}: {self.detail}")

    @property
    def signature(self):
        """The difference with addresses and numbers masked: mismatches
        with one signature are likely one bug."""
        text = _ADDRESS.sub("ADDR", self.detail)
        text = re.sub(r"\b(line|frame) \d+", r"\1 N", text)
        text = re.sub(r"#\d+", "#N", text)
        text = re.sub(r"\(\d+ frames, gdb \d+\)", "", text)
        return f"{self.check}: {text}"


# -- one program, three gdbs ----------------------------------------------------

@dataclass
class Result:
    program: str
    stops: int = 0
    equal: int = 0
    trimmed: int = 0  # stops where GDB alone showed frames outside any code
    volatile: int = 0  # stops where GDB alone printed a value differently twice
    mismatches: List[Mismatch] = field(default_factory=list)
    diverged: Optional[str] = None
    exited: bool = False

    @property
    def mismatched(self):
        return len({m.stop for m in self.mismatches})

    def line(self):
        text = (f"{self.program}: {self.stops} stops, {self.equal} equal, "
                f"{self.mismatched} with mismatches")
        notes = []
        if self.trimmed:
            notes.append(f"{self.trimmed} where GDB alone shows frames outside code")
        if self.volatile:
            notes.append(f"{self.volatile} with values that vary from run to run")
        if notes:
            text += f" ({'; '.join(notes)})"
        if self.diverged:
            text += f"; DIVERGED: {self.diverged}"
        return text


def _where(record) -> str:
    first = record["bt"].splitlines()[:1]
    return first[0] if first else "?"


class Pair:
    """GDB alone and GDB with the plugin debugging one program in lockstep,
    and a second GDB alone: what differs between the two runs of GDB alone
    is the program's own doing (a timestamp), not the plugin's."""

    def __init__(self, gdb_command, program: Program, timeout=120.0, control=False):
        """``control``: the third gdb runs without the plugin too (the
        harness's check of itself: it must find no difference)."""
        self.program = program
        self.control = control
        self.result = Result(program.name)
        self.sides = []
        try:
            for plugin in (False, False, not control):
                self.sides.append(Gdb(gdb_command, program, plugin, timeout))
        except BaseException:
            self.close()
            raise
        self.theirs, self.again, self.ours = self.sides
        self.labels = {}  # breakpoint number -> what it is
        self.last_stop = None

    def close(self):
        for side in self.sides:
            side.close()

    def all(self, command, sframe=False):
        """Send ``command`` to the three gdbs; their answers, each
        [(text printed before it, answer)], in the order of ``sides``.
        With ``sframe``, the plugin's side runs it with `-sframe` added."""
        for side in self.sides:
            side.send(f"{command} -sframe" if sframe and side.plugin else command)
        return [side.receive()[0] for side in self.sides]

    def theirs_only(self, command):
        """The answers of (the first) GDB alone to ``command``."""
        self.theirs.send(command)
        return [answer for _, answer in self.theirs.receive()[0]]

    def breakpoint(self, command, label):
        """Set a breakpoint in all; its number, or None when GDB refused."""
        numbers = {answers[0][1] if answers else None
                   for answers in self.all(f"diff-break {command}")}
        if len(numbers) != 1:
            raise HarnessError(f"{command}: breakpoint numbers differ: {numbers}")
        (number,) = numbers
        if number is not None:
            self.labels[number] = label
        return number

    def resume(self, command, count=1) -> bool:
        """Run ``command`` ``count`` times in every gdb, comparing each
        stop; False when the program exited or the runs diverged.

        The gdbs resume one after the other, GDB alone first and again
        last, then take their records together: a value that grows with
        time (the clock, the uptime in `sysinfo`) which both runs of GDB
        alone saw the same, the plugin's run, in between, saw too."""
        for _ in range(count):
            resumed = {}
            for side in (self.theirs, self.ours, self.again):
                side.send(f"diff-resume {command}")
                answers, _ = side.receive()
                if len(answers) != 1:
                    raise HarnessError(f"{side.name}: {len(answers)} answers to diff-resume")
                resumed[side] = answers[0]
            exits = [resumed[side][1].get("exited", "stopped") for side in self.sides]
            if any(code != "stopped" for code in exits):
                if len(set(map(str, exits))) != 1:
                    self.result.diverged = f"after {command}: exit {self._sides(exits)}"
                else:
                    self.result.exited = True
                return False
            records = []
            for side, answers in zip(self.sides, self.all("diff-record", sframe=True)):
                text, output = resumed[side]
                record = answers[0][1]
                record["printed"] = without_ids(text + output["output"])
                records.append(record)
            if not self.compare(command, *records):
                return False
            self.last_stop = records[0]["stop"]
        return True

    @staticmethod
    def _sides(values):
        return " / ".join(f"{name} {value}" for name, value
                          in zip(("gdb -nx", "gdb -nx again", "plugin"), values))

    def last_label(self):
        """What made the last stop (breakpoint labels), or ''."""
        stop = self.last_stop
        if stop and stop[0] == "breakpoint":
            return " ".join(self.labels.get(n, "") for n in stop[1])
        return ""

    def compare(self, command, theirs, again, ours) -> bool:
        result = self.result
        identity = [[record[k] for k in ("pc", "sp", "thread", "stop")]
                    for record in (theirs, again, ours)]
        if identity[0] != identity[1] or identity[0] != identity[2]:
            who = "the program is not deterministic" if identity[0] != identity[1] else \
                "the plugin changed the program's course"
            result.diverged = (f"stop {result.stops} after {command} ({who}): "
                               f"{self._sides(identity)}")
            return False
        stop = result.stops
        result.stops += 1
        problems, volatile = [], False
        for check, key in (("stop print", "printed"), ("bt", "bt"), ("bt full", "bt_full")):
            difference, varies = text_difference(ours[key], theirs[key], again[key])
            volatile |= varies
            if difference:
                problems.append((check, difference))
        expected, trimmed = reference_pcs(theirs)
        if reference_pcs(again)[0] != expected:
            problems.append(("gdb -nx twice", "GDB alone's frames differ between two runs"))
        difference = None if self.control else sframe_difference(ours["sframe"], expected)
        if difference:
            if trimmed:  # sframe-bt may be right where GDB alone is not: say so
                difference += f"; GDB alone's frames leave code after #{len(expected) - 1}"
            problems.append(("sframe-bt", difference))
        result.trimmed += trimmed
        result.volatile += volatile
        if not problems:
            result.equal += 1
        how = f"{command} -> {self.describe_stop(theirs['stop'])}"
        for check, detail in problems:
            result.mismatches.append(Mismatch(self.program.name, stop, how, _where(theirs),
                                              check, detail))
        return True

    def describe_stop(self, stop):
        if not stop:
            return "stopped"
        if stop[0] == "breakpoint":
            return ", ".join(self.labels.get(n, f"breakpoint {n}") for n in stop[1])
        if stop[0] == "signal":
            return f"signal {stop[1]}"
        return stop[0]


# -- what to stop at --------------------------------------------------------------

@dataclass
class Plan:
    """How many stops of each kind; the same seed gives the same stops."""

    seed: int = 1
    breakpoints: int = 40  # random breakpoints over the program and its libraries
    plt: int = 3  # PLT stubs of the executable
    syscalls: int = 2  # catch syscall, besides write and rt_sigreturn
    hit_limit: int = 2  # a breakpoint is deleted after this many hits
    max_stops: int = 60
    stepi_after_plt: int = 40  # stepi this many times after a PLT stop
    stepi_chance: float = 0.1  # ... and after this share of the other stops
    stepi_burst: int = 10


def elf_functions(path):
    """[(name, address in file, size)] of the functions of an ELF file's
    symbol tables (.symtab, else .dynsym), one per address, in code."""
    try:
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            code = [(s["sh_addr"], s["sh_addr"] + s["sh_size"]) for s in elf.iter_sections()
                    if s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR]
            functions = {}
            for table in (".symtab", ".dynsym"):
                section = elf.get_section_by_name(table)
                if section is None:
                    continue
                for symbol in section.iter_symbols():
                    value, size = symbol["st_value"], symbol["st_size"]
                    if (symbol["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC")
                            and size > 0 and value not in functions
                            and any(lo <= value < hi for lo, hi in code)):
                        functions[value] = (symbol.name, value, size)
                if functions:
                    break
            return sorted(functions.values(), key=lambda f: f[1])
    except (OSError, ELFError):
        return []


def elf_load_base(path):
    """(is a shared object or PIE, lowest PT_LOAD address, page-aligned)."""
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        loads = [s["p_vaddr"] & ~0xFFF for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        return elf["e_type"] == "ET_DYN", min(loads)


def plt_names(path):
    """Names of the functions the executable calls through its PLT."""
    names = []
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        for section in elf.iter_sections():
            if isinstance(section, RelocationSection) and section.name == ".rela.plt":
                symbols = elf.get_section(section["sh_link"])
                for relocation in section.iter_relocations():
                    name = symbols.get_symbol(relocation["r_info_sym"]).name
                    if name:
                        names.append(name)
    return sorted(set(names))


def weight(path, executable):
    name = os.path.basename(path)
    if path == executable:
        return 4
    if name.startswith("libc.so"):
        return 3
    return 1


class Stops:
    """Sets the plan's breakpoints as the program's files get mapped."""

    def __init__(self, pair: Pair, plan: Plan):
        self.pair = pair
        self.plan = plan
        self.random = random.Random(f"{plan.seed}:{pair.program.name}")
        self.executable = os.path.realpath(pair.program.argv[0])
        self.seen = set()

    def new_files(self):
        """Break at random places in files mapped since the last call."""
        (bases,) = self.pair.theirs_only("diff-maps")
        for path in sorted(bases):
            real = os.path.realpath(path)
            if real in self.seen or not os.path.isfile(real):
                continue
            self.seen.add(real)
            functions = elf_functions(real)
            if not functions:
                continue
            share = weight(real, self.executable) / 10
            count = max(1, round(self.plan.breakpoints * share))
            is_dyn, first_load = elf_load_base(real)
            bias = bases[path] - first_load if is_dyn else 0
            for name, address, size in self.random.sample(functions, min(count, len(functions))):
                self.add(os.path.basename(real), name, address + bias, size)

    def add(self, module, name, start, size):
        at = start
        if self.random.random() < 0.5 and size > 1:
            (insns,) = self.pair.theirs_only(f"diff-insns {start:#x} {start + size:#x}")
            if insns:
                at = self.random.choice(insns)
        self.pair.breakpoint(f"break *{at:#x}", f"{module}:{name}+{at - start}")

    def setup(self):
        pair, plan = self.pair, self.plan
        pair.all(f"diff-limit {plan.hit_limit}")
        for name in ["write", "rt_sigreturn",
                     *self.random.sample(SYSCALLS, plan.syscalls)]:
            pair.breakpoint(f"catch syscall {name}", f"catch syscall {name}")
        names = plt_names(self.executable)
        for name in self.random.sample(names, min(plan.plt, len(names))):
            pair.breakpoint(f"break {name}@plt", f"{name}@plt")
        for location in pair.program.breaks:
            pair.breakpoint(f"break {location}", f"{location} (then stepi)")
        pair.all("set stop-on-solib-events 1")


def run_plan(gdb_command, program: Program, plan: Plan, timeout=120.0,
             control=False) -> Result:
    """Stop ``program`` where ``plan`` says, comparing the gdbs at every
    stop."""
    def drive(pair):
        stops = Stops(pair, plan)
        pair.resume(f"starti {redirect(program)}")
        stops.setup()
        stops.new_files()
        while pair.result.stops < plan.max_stops:
            if not pair.resume("continue"):
                return
            if pair.last_label().endswith(("@plt", "(then stepi)")):
                burst = plan.stepi_after_plt
            elif stops.random.random() < plan.stepi_chance:
                burst = plan.stepi_burst
            else:
                burst = 0
            if burst and not pair.resume("stepi", burst):
                return
            stops.new_files()
    return _run(gdb_command, program, timeout, control, drive)


def sweep(gdb_command, program: Program, steps: Optional[int] = None, start=None,
          batch=100, timeout=300.0, control=False, progress=None) -> Result:
    """`stepi` from the program's first instruction (or, with ``start``
    a breakpoint location, from there) to its exit or ``steps`` steps,
    comparing the gdbs at every instruction; ``progress(result)`` after
    every ``batch`` steps."""
    def drive(pair):
        pair.resume(f"starti {redirect(program)}")
        if start is not None:
            pair.breakpoint(f"tbreak {start}", start)
            while pair.last_label() != start:  # signals may stop the program first
                if not pair.resume("continue"):
                    return
        while steps is None or pair.result.stops < steps:
            count = batch if steps is None else min(batch, steps - pair.result.stops)
            if not pair.resume("stepi", count):
                return
            if progress is not None:
                progress(pair.result)
    return _run(gdb_command, program, timeout, control, drive)


def _run(gdb_command, program, timeout, control, drive) -> Result:
    """``drive(pair)`` on a new Pair; its result.  A gdb that hangs, dies
    or cannot start ends the comparison, and the result says so."""
    pair = None
    try:
        pair = Pair(gdb_command, program, timeout=timeout, control=control)
        drive(pair)
        return pair.result
    except HarnessError as error:
        result = pair.result if pair is not None else Result(program.name)
        result.diverged = f"harness: {error}"
        return result
    finally:
        if pair is not None:
            pair.close()


def redirect(program: Program) -> str:
    """The arguments of `run`/`starti`: the program's own, with its
    standard streams away from gdb's."""
    return " ".join([*(_quote(a) for a in program.argv[1:]),
                     "< /dev/null > /dev/null 2>&1"])


def _quote(word):
    return "'" + word.replace("'", "'\\''") + "'"


# -- reporting ------------------------------------------------------------------

def summary(results: List[Result], examples=1) -> List[str]:
    """One line per program, then the mismatches grouped by signature
    (most frequent first), each with its count, its programs and its
    first occurrences."""
    lines = [result.line() for result in results]
    total_stops = sum(r.stops for r in results)
    total_equal = sum(r.equal for r in results)
    lines.append(f"total: {total_stops} stops, {total_equal} equal, "
                 f"{total_stops - total_equal} with mismatches, "
                 f"{sum(1 for r in results if r.diverged)} programs diverged")
    groups = {}
    for result in results:
        for mismatch in result.mismatches:
            groups.setdefault(mismatch.signature, []).append(mismatch)
    for signature, members in sorted(groups.items(), key=lambda g: -len(g[1])):
        programs = sorted({m.program for m in members})
        lines.append(f"[{len(members)}x in {', '.join(programs)}] {signature}")
        for mismatch in members[:examples]:
            lines.append(f"    e.g. {mismatch.line()}")
    return lines
