"""The inline-frame differential runs, shared by tests/test_gdb_inline_stops.py
(the project's -O2 programs, a few seconds per GDB) and
bench/gdb_inline_stops.py (Lua, hundreds of stops per GDB):

- in gdb (tests/gdb_inline_stops.py), at random stops, the function names
  of `sframe-bt` (inline and tail-call frames included) against GDB's own
  `bt`, to main;
- on a process stopped at random times (SIGSTOP), the names of `sfbt stack`
  against `eu-stack -i -s -p`, to main (sfbt's tail-call frames, which
  eu-stack does not make, left out).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from conftest import ROOT
from live_harness import wait_stopped

GDB_INLINE_STOPS = ROOT / "tests" / "gdb_inline_stops.py"
#: the C runtime's code linked into every program: no debug information
CRT_FUNCTIONS = {"deregister_tm_clones", "register_tm_clones", "frame_dummy"}


def instruction_file(program, path):
    """Write ``path``: main's file address, then the address of every
    instruction of the program's own functions (objdump -d; not the C
    runtime's, where GDB's prologue analysis guesses), one a line."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", str(program)],
                          capture_output=True, text=True, check=True).stdout
    main, addresses, function = None, [], None
    for line in text.splitlines():
        heading = re.match(r"([0-9a-f]+) <([^>]+)>:$", line)
        if heading:
            function = heading[2]
            if function == "main":
                main = heading[1]
            continue
        instruction = re.match(r"\s+([0-9a-f]+):\s+(\S+)", line)
        if instruction and function and not function.startswith("_") \
                and function not in CRT_FUNCTIONS \
                and instruction[2] not in ("nop", "nopw", "nopl", "xchg", "cs"):
            addresses.append(instruction[1])
    Path(path).write_text("\n".join([main, *addresses]) + "\n")


def inlined_functions(program):
    """The names of the program's functions that the compiler inlined
    somewhere (DW_AT_inline: inlined, declared inline or not)."""
    text = subprocess.run(["readelf", "--debug-dump=info", str(program)],
                          capture_output=True, text=True, check=True).stdout
    names, name, inlined, in_subprogram = set(), None, False, False
    for line in text.splitlines():
        if re.match(r"\s*<\d+><[0-9a-f]+>: Abbrev", line):
            if in_subprogram and inlined and name:
                names.add(name)
            in_subprogram = "DW_TAG_subprogram" in line
            name, inlined = None, False
        elif in_subprogram and "DW_AT_name" in line:
            name = line.rsplit(": ", 1)[-1].strip()
        elif in_subprogram and re.search(r"DW_AT_inline\s*:\s*[13]\s", line + " "):
            inlined = True
    return sorted(names)


class Tally:
    """Stops compared, stops equal, and the mismatches (kept whole)."""

    def __init__(self):
        self.total = self.equal = 0
        self.by_how = Counter()
        self.equal_by_how = Counter()
        self.mismatches = []

    def add(self, stop):
        how = stop["how"]
        self.total += 1
        self.by_how[how] += 1
        if stop["bt"] == stop["sframe"]:
            self.equal += 1
            self.equal_by_how[how] += 1
        else:
            self.mismatches.append(stop)

    def line(self):
        kinds = ", ".join(f"{how} {self.equal_by_how[how]}/{count}"
                          for how, count in sorted(self.by_how.items()))
        return f"{self.equal}/{self.total} equal ({kinds})"


def gdb_stops(gdb, arguments, commands, timeout=1800):
    """The STOP records of one gdb run: the plugin and
    tests/gdb_inline_stops.py loaded, GDB's own unwinders for `bt`."""
    out = gdb.run(arguments, ["set sframe unwinder off", *commands], timeout=timeout,
                  extra_files=[GDB_INLINE_STOPS])
    problems = [line for line in out.splitlines()
                if "Traceback" in line or "Python Exception" in line]
    stops = [json.loads(line[5:]) for line in out.splitlines() if line.startswith("STOP ")]
    return stops, problems


def describe(stop):
    return (f"{stop['how']} at {stop['pc']:#x}:\n    bt:        {' '.join(stop['bt'])}\n"
            f"    sframe-bt: {' '.join(stop['sframe'])}")


# -- sfbt stack against eu-stack -i -------------------------------------------

_SFBT_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(<signal handler called>|\S+?)"
                         r"(?: at | from | \(\)|$)")
_SFBT_THREAD = re.compile(r"^Thread \d+ \(LWP (\d+)")
#: eu-stack names no PLT stub: its frame is the address alone
_EU_FRAME = re.compile(r"^#\d+\s+0x[0-9a-f]+(?: (\S+))?")
_EU_THREAD = re.compile(r"^TID (\d+):")


def thread_names(text, thread, frame):
    """{tid: function names of its frames, to main} of a backtrace of
    every thread."""
    threads, names = {}, None
    for line in text.splitlines():
        match = thread.match(line)
        if match:
            names = threads[int(match[1])] = []
        elif line.endswith("  [tailcall]"):  # sframe-bt -v's: eu-stack makes none
            continue
        elif names is not None and frame.match(line.rsplit("  [", 1)[0]):  # -v's tag cut
            names.append(frame.match(line.rsplit("  [", 1)[0])[1] or "??")
    return {tid: names[:names.index("main") + 1] if "main" in names else names
            for tid, names in threads.items()}


#: a GCC clone's suffix: sfbt names the clone's frame after its symbol
#: (luaV_concat.part.0), eu-stack -i after DWARF's function (luaV_concat)
_CLONE = re.compile(r"(?:\.(?:part|isra|constprop|cold)(?:\.\d+)?)+$")


def symbol_addresses(pid):
    """{name: {(file, address)}} of the code symbols of each file mapped
    executable in ``pid`` and of its separate debug file (nm): names that
    share one name one function."""
    sys.path.insert(0, str(ROOT / "plugin"))
    from sfbt.debuginfo import DebugFiles
    from sfbt.elf import read_build_id
    with open(f"/proc/{pid}/maps") as maps:
        files = {fields[5] for fields in map(str.split, maps)
                 if len(fields) >= 6 and "x" in fields[1] and fields[5].startswith("/")}
    found = defaultdict(set)
    debug_files = DebugFiles()
    for path in files:
        debug = debug_files.find(path, read_build_id(path))
        for source, dynamic in ((path, ["-D"]), (path, []), (debug, [])):
            if source is None:
                continue
            listed = subprocess.run(["nm", "--defined-only", *dynamic, source],
                                    capture_output=True, text=True).stdout
            for fields in map(str.split, listed.splitlines()):
                if len(fields) == 3 and fields[1] in "tTwWiI":
                    found[fields[2].split("@")[0]].add((path, int(fields[0], 16)))
    return found


def same_function(ours, theirs, addresses):
    """Whether sfbt stack's ``ours`` and eu-stack's ``theirs`` name one
    frame alike but for how each names a function's own frame: a clone's
    symbol against DWARF's name, one of a function's aliases against
    another (``realloc``, ``__GI___libc_realloc``: ``addresses`` from
    symbol_addresses), the signal trampoline, which sfbt shows as
    `bt` does, and a PLT stub, which sfbt names as `bt` does (``free@plt``,
    ``*ABS*+0x9c840@plt``) and eu-stack not at all."""
    if ours == "<signal handler called>":
        return theirs == "__restore_rt"
    if theirs == "??":
        return ours.endswith("@plt")
    ours, theirs = _CLONE.sub("", ours), _CLONE.sub("", theirs)
    return ours == theirs or bool(addresses.get(ours, set()) & addresses.get(theirs, set()))


def threads_alike(ours, theirs, addresses):
    """Whether two {tid: names} match thread by thread, frame by frame,
    up to same_function."""
    return ours.keys() == theirs.keys() and all(
        len(ours[tid]) == len(names)
        and all(same_function(a, b, addresses) for a, b in zip(ours[tid], names))
        for tid, names in theirs.items())


def thread_stops(pid, count, draw, walk, max_delay=0.05):
    """``count`` times: let ``pid`` run a drawn time, stop it (SIGSTOP),
    and yield ({tid: sfbt stack's names}, {tid: eu-stack -i -s's names});
    ``walk(pid, words)`` is sfbt stack's text, here with -v (its
    tail-call frames marked)."""
    for _ in range(count):
        os.kill(pid, signal.SIGCONT)
        time.sleep(draw.uniform(0.001, max_delay))
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)
        ours = thread_names(walk(pid, ["-v"]), _SFBT_THREAD, _SFBT_FRAME)
        theirs = subprocess.run(["eu-stack", "-i", "-s", "-p", str(pid)],
                                capture_output=True, text=True, timeout=120)
        yield ours, thread_names(theirs.stdout, _EU_THREAD, _EU_FRAME)
