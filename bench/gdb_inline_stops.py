"""Inline frames at random stops of -O2 real code: Lua built -O2 -g with
`-Wa,--gsframe` (bench/gdb_sframe_only.py's build) running a script that
computes something recursive (fib, Ackermann) among parsing, coroutines,
pattern matching, sorting and garbage collection.

In each GDB of the matrix (tests/inline_stops.py, tests/gdb_inline_stops.py),
the function names of `sframe-bt` (inline frames included) are compared
with those of GDB's own `bt` (tail-call frames left out), to main, at
- stops where SIGINT interrupted the running script after a drawn delay,
- breakpoints on drawn instructions of Lua's code,
- breakpoints on drawn functions that the compiler inlined somewhere,
and after `step`s from each of those stops (into inlined functions) and,
from breakpoints on inlined functions, `finish` (out of them).
Then `sfbt stack` on the script stopped (SIGSTOP) at drawn times is
compared with `eu-stack -i -s -p`, names to main.
Prints equal/total per GDB and per kind of stop, and the mismatches.

Lua's source is not in the repository: pass its src directory, e.g. from
Debian's source package (`apt-get source lua5.4`, in a directory of your
choice).

Run: python3 bench/gdb_inline_stops.py --lua SRC [--gdb PATH]... [--interrupts N]
         [--instructions N] [--functions N] [--seeds N] [--first-seed N] [--stacks N]
         [--examples N]
"""

import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from gdb_sframe_only import build, chosen_gdbs, lua_parser  # noqa: E402
from inline_stops import (Tally, describe, gdb_stops, inlined_functions,  # noqa: E402
                          instruction_file, symbol_addresses, thread_stops,
                          threads_alike)
from live_harness import LiveWalks  # noqa: E402

SCRIPT = r"""
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function ack(m, n)
  if m == 0 then return n + 1 elseif n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
local rounds = tonumber(arg[1]) or math.huge
local round = 0
while round < rounds do
  round = round + 1
  local results = {}
  for i = 1, 60 do
    local source = string.format([[
      local a, b = %d, %d
      local t = {}
      for i = 1, 8 do t[i] = (a - i) * b // 3 - -i >> 1 end
      while a > 3 and (b < 100 or a - 5 > 0) do a = a - 7; b = (b << 2) + 1 end
      if a > b and t[2] ~= 0 then return a - b + #t else return -b + a - 1 end]],
      i + round, i % 7)
    results[#results + 1] = assert(load(source))()
  end
  local co = coroutine.wrap(function()
    for i = 1, 20 do coroutine.yield(fib(i % 18)) end
  end)
  local sum = 0
  for _ = 1, 20 do sum = sum + co() end
  sum = sum + ack(2, round % 50)
  local words = {}
  for word in string.gmatch(string.rep("alpha beta gamma delta ", 60), "%a+") do
    words[#words + 1] = word:upper() .. #words
  end
  table.sort(words, function(x, y) return x > y end)
  local ok = pcall(error, {code = sum})
  local joined = table.concat(words, ","):gsub("A", "a")
  collectgarbage("step")
end
"""


def gdb_runs(options, program, script, workdir):
    """[(what, arguments, commands)] of the gdb runs."""
    instructions = workdir / "instructions"
    instruction_file(program, instructions)
    functions = workdir / "inlined"
    functions.write_text("\n".join(inlined_functions(program)) + "\n")
    runs = []
    for seed in range(options.first_seed, options.first_seed + options.seeds):
        runs.append((f"interrupts, seed {seed}", ["--args", program, script],
                     ["break main", "run", "delete",
                      f"test-interrupt-stops {seed} {options.interrupts} step,step"]))
        runs.append((f"instructions, seed {seed}", ["--args", program, script, "3"],
                     ["break main", "run", "delete",
                      f"test-insn-stops {seed} {options.instructions} {instructions} step"]))
        runs.append((f"inlined functions, seed {seed}", ["--args", program, script, "2"],
                     ["break main", "run", "delete",
                      f"test-function-stops {seed} {options.functions} {functions} step,step,finish"]))
    return runs


def compare_stacks(options, program, script):
    """sfbt stack against eu-stack -i -s on the script stopped at drawn times."""
    if not shutil.which("eu-stack"):
        print("eu-stack: not installed (apt-get install elfutils)")
        return
    walks = LiveWalks()
    process = subprocess.Popen([str(program), str(script)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    equal = alike = total = 0
    examples = []
    try:
        time.sleep(0.5)  # past the loading of libraries
        addresses = symbol_addresses(process.pid)
        for ours, theirs in thread_stops(process.pid, options.stacks, random.Random(1),
                                         walks.text):
            total += 1
            equal += ours == theirs
            alike += threads_alike(ours, theirs, addresses)
            if not threads_alike(ours, theirs, addresses):
                examples += [f"sfbt stack:  {' '.join(ours.get(tid, []))}\n"
                             f"    eu-stack -i: {' '.join(names)}"
                             for tid, names in theirs.items() if ours.get(tid) != names]
    finally:
        process.kill()
        process.wait()
    print(f"== sfbt stack against eu-stack -i -s -p: {equal}/{total} equal, {alike}/{total} "
          f"equal up to the names of functions' own frames (inline_stops.same_function)")
    for example in examples[:options.examples]:
        print(f"  {example}")


def main():
    parser = lua_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--interrupts", type=int, default=50,
                        help="interrupts per seed, each followed by 2 steps (default 50)")
    parser.add_argument("--instructions", type=int, default=400,
                        help="instruction breakpoints per seed (default 400)")
    parser.add_argument("--functions", type=int, default=40,
                        help="inlined-function breakpoints per seed (default 40)")
    parser.add_argument("--stacks", type=int, default=100,
                        help="sfbt stack / eu-stack comparisons (default 100)")
    parser.add_argument("--examples", type=int, default=10)
    options = parser.parse_args()
    gdbs = chosen_gdbs(parser, options)
    with tempfile.TemporaryDirectory(prefix="sfbt-inline-stops-") as workdir:
        workdir = Path(workdir)
        program = build(options.lua, workdir / "lua", False)
        script = workdir / "work.lua"
        script.write_text(SCRIPT)
        runs = gdb_runs(options, program, script, workdir)
        for gdb in gdbs:
            print(f"== {gdb.id} ({gdb.command})", flush=True)
            total = Tally()
            for what, arguments, commands in runs:
                stops, problems = gdb_stops(gdb, arguments, commands, timeout=3600)
                tally = Tally()
                for stop in stops:
                    tally.add(stop)
                    total.add(stop)
                print(f"  {what}: {tally.line()}"
                      f"{f'; {len(problems)} Python errors' if problems else ''}", flush=True)
                for problem in problems[:3]:
                    print(f"    {problem}")
            print(f"  all: {total.line()}")
            for stop in total.mismatches[:options.examples]:
                print(f"  {describe(stop)}")
        if options.stacks:
            compare_stacks(options, program, script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
