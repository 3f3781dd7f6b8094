"""GDB's `bt` on an SFrame-only build of real code nobody here wrote: Lua
built -O2 -g with `-Wa,--gsframe`, once as built and once with .eh_frame
and .eh_frame_hdr stripped, both running one deterministic Lua script
(string hashing seeded with 0).  At seeded random stops (breakpoints on
functions drawn from the program's symbols, then a drawn number of
`stepi`) and in `stepi` sweeps from functions whose code inlines others
(finishbinexpneg, primaryexp, luaK_jump, ...), GDB's frames (inline frames
included, tail-call frames left out: GDB makes those only where it has
CFI) with the plugin on the stripped build are compared with `gdb -nx` on
the build as built.  Prints per GDB: stops, stops with no garbage frame
(`??` or an error), stops equal to `gdb -nx`, and examples of the rest.

Lua's source is not in the repository: pass its src directory, e.g. from
Debian's source package (`apt-get source lua5.4`, in a directory of your
choice).

Run: python3 bench/gdb_sframe_only.py --lua SRC [--gdb PATH]... [--seeds N]
         [--stops N] [--sweep-steps N] [--examples N]
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from debuggers import gdb_slots  # noqa: E402
from gdb_support import strip_eh_frame  # noqa: E402

INLINE_FRAMES = ROOT / "tests" / "gdb_inline_frames.py"
RANDOM_STOPS = ROOT / "bench" / "gdb_random_stops.py"
SWEEPS = ["finishbinexpneg", "primaryexp", "luaK_jump", "subexpr", "luaH_getshortstr",
          "luaV_execute"]

SCRIPT = r"""
local results = {}
for i = 1, 200 do
  local source = string.format([[
    local a, b = %d, %d
    local t = {}
    for i = 1, 8 do t[i] = (a - i) * b // 3 - -i >> 1 end
    while a > 3 and (b < 100 or a - 5 > 0) do a = a - 7; b = (b << 2) + 1 end
    if a > b and t[2] ~= 0 then return a - b + #t else return -b + a - 1 end]], i, i % 7)
  results[#results + 1] = assert(load(source))()
end
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local co = coroutine.wrap(function()
  for i = 1, 40 do coroutine.yield(fib(i % 14)) end
end)
local sum = 0
for _ = 1, 40 do sum = sum + co() end
local words = {}
for word in string.gmatch(string.rep("alpha beta gamma delta ", 150), "%a+") do
  words[#words + 1] = word:upper() .. #words
end
table.sort(words)
local ok = pcall(error, {code = 1})
print(#results, sum, #words, words[1], ok)
"""


def build(source, directory, strip):
    """Lua from ``source`` (its src directory) into ``directory``/lua."""
    directory.mkdir(parents=True)
    program = directory / "lua"
    files = [str(f) for f in sorted(Path(source).glob("*.c")) if f.name != "luac.c"]
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-DLUA_USE_LINUX",
                    "-Dluai_makeseed(L)=0", "-o", str(program), *files, "-lm", "-ldl"],
                   check=True, capture_output=True)
    if strip:
        strip_eh_frame(program)
    return program


def function_names(program):
    out = subprocess.run(["nm", "--defined-only", str(program)], capture_output=True,
                         text=True, check=True).stdout
    names = {line.split()[2] for line in out.splitlines()
             if len(line.split()) == 3 and line.split()[1] in "tT"}
    return sorted(n for n in names if not n.startswith("_") and "." not in n)


def frames(gdb, program, script, commands, plugin):
    out = gdb.run(["--args", str(program), str(script)],
                  ["set confirm off", f"source {INLINE_FRAMES}", f"source {RANDOM_STOPS}",
                   *commands], timeout=3600, plugin=plugin)
    return [line[7:] for line in out.splitlines() if line.startswith("FRAMES ")]


class Count:
    def __init__(self):
        self.stops = self.clean = self.equal = self.diverged = 0
        self.examples = []

    def add(self, what, theirs, ours):
        """Compare two runs' frames stop by stop, until the programs part."""
        for index, (expected, got) in enumerate(zip(theirs, ours)):
            if expected.split()[:1] != got.split()[:1]:
                self.diverged += 1
                return
            self.stops += 1
            clean = "??" not in got and "error:" not in got
            self.clean += clean
            self.equal += got == expected
            if got != expected:
                self.examples.append(f"{what} stop {index}:\n    gdb -nx: {expected}\n"
                                     f"    plugin: {got}")


def lua_parser(description):
    """An argument parser with --lua (Lua's src directory) and --gdb."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--lua", required=True, help="Lua's src directory")
    parser.add_argument("--gdb", action="append", help="a gdb (default: every GDB set up)")
    return parser


def chosen_gdbs(parser, options):
    """The GDBs --gdb names (every GDB set up without it), after checking
    that --lua is Lua's src directory."""
    if not (Path(options.lua) / "lparser.c").is_file():
        parser.error(f"{options.lua}: not Lua's src directory (no lparser.c)")
    gdbs = [slot.debugger for slot in gdb_slots() if slot.debugger is not None]
    if options.gdb:
        gdbs = [g for g in gdbs if g.command in options.gdb or g.id in options.gdb]
    return gdbs


def main():
    parser = lua_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--stops", type=int, default=60, help="stops per seed (default 60)")
    parser.add_argument("--sweep-steps", type=int, default=1000)
    parser.add_argument("--examples", type=int, default=3)
    options = parser.parse_args()
    gdbs = chosen_gdbs(parser, options)
    with tempfile.TemporaryDirectory(prefix="sfbt-sframe-only-") as workdir:
        workdir = Path(workdir)
        # directories of one length: the same stack addresses on both sides
        with_cfi = build(options.lua, workdir / "cfi", False)
        sframe_only = build(options.lua, workdir / "sfo", True)
        script = workdir / "work.lua"
        script.write_text(SCRIPT)
        names = workdir / "functions"
        names.write_text("\n".join(function_names(with_cfi)) + "\n")
        runs = [(f"seed {seed}", ["break main", "run",
                                  f"test-random-stops {seed} {options.stops} {names}"])
                for seed in range(1, options.seeds + 1)]
        runs += [(f"stepi from {name}", [f"break {name}", "run", "delete",
                                         f"test-stepi-frames {options.sweep_steps}"])
                 for name in SWEEPS]
        for gdb in gdbs:
            print(f"== {gdb.id} ({gdb.command})", flush=True)
            total = Count()
            for what, commands in runs:
                count = Count()
                count.add(what, frames(gdb, with_cfi, script, commands, False),
                          frames(gdb, sframe_only, script, commands, True))
                print(f"  {what}: {count.stops} stops, {count.clean} with no garbage frame, "
                      f"{count.equal} equal to gdb -nx"
                      f"{', then the runs parted' if count.diverged else ''}", flush=True)
                for name in ("stops", "clean", "equal", "diverged"):
                    setattr(total, name, getattr(total, name) + getattr(count, name))
                total.examples += count.examples
            print(f"  all: {total.stops} stops, {total.clean} with no garbage frame, "
                  f"{total.equal} equal to gdb -nx")
            for example in total.examples[:options.examples]:
                print(f"  {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
