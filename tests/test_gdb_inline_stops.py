"""The inline-frame differential run on the project's -O2 programs (on Lua:
bench/gdb_inline_stops.py): in every GDB of the matrix, `sframe-bt`'s
function names, inline and tail-call frames included, equal GDB's own
`bt`'s, to main, at breakpoints on drawn instructions and on
the functions the compiler inlined, after `step`s (and `finish`) from
each of those stops, and where SIGINT interrupted busy.c's threads at drawn times
(recursing through qsort, snprintf and a signal handler).  And `sfbt
stack` names the frames `eu-stack -i -s` names on busy.c stopped at drawn
times (up to the name of a function's own frame where eu-stack's is not
GDB's, which sfbt takes: inline_stops.same_function)."""

import random
import shutil

import pytest

from conftest import require
from gdb_support import compile_program
from inline_stops import (Tally, describe, gdb_stops, inlined_functions, instruction_file,
                          symbol_addresses, thread_stops, threads_alike)

PROGRAMS = {
    "inlined": (["inlined.c"], ["1+2*(3+4*(5-6))-7*8+(9)*((2+3)*(4-1))+11*12"]),
    "inline_chain": (["inline_chain.c"], ["6", "nowait"]),
    "mixed": (["mixed.c"], []),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """{name: (program, arguments, instruction file, inlined-function file)}"""
    directory = tmp_path_factory.mktemp("inline-stops")
    built = {}
    for name, (sources, arguments) in PROGRAMS.items():
        program = compile_program(directory, name, "O2", True, sources)
        instructions = directory / f"{name}.instructions"
        instruction_file(program, instructions)
        functions = directory / f"{name}.inlined"
        functions.write_text("\n".join(inlined_functions(program)) + "\n")
        built[name] = (program, arguments, instructions, functions)
    busy = compile_program(directory, "busy", "O2", True, ["busy.c"])
    return built, busy


def _check(gdb, tally, stops, problems, what):
    assert not problems, problems[:3]
    for stop in stops:
        tally.add(stop)
    assert not tally.mismatches, f"{gdb.id} {what}:\n" + "\n".join(
        describe(stop) for stop in tally.mismatches[:5])


def test_names_at_random_stops_equal_gdb_bt(gdb, programs):
    built, _ = programs
    tally = Tally()
    inline_deep = 0
    for name, (program, arguments, instructions, functions) in built.items():
        inlined = set(functions.read_text().split())
        for command in (f"test-insn-stops 1 25 {instructions} step",
                        f"test-function-stops 1 40 {functions} step,step,finish"):
            stops, problems = gdb_stops(gdb, ["--args", program, *arguments],
                                        ["break main", "run", "delete", command], timeout=600)
            _check(gdb, tally, stops, problems, f"{name}: {command}")
            inline_deep += sum(1 for stop in stops if inlined & set(stop["bt"][1:]))
    print(f"{gdb.id}: {tally.line()}; {inline_deep} stops with inline frames above #0")
    assert tally.by_how["instruction"] >= 20 and tally.by_how["function"] >= 10 \
        and tally.by_how["function finish"] >= 5, tally.line()
    assert inline_deep >= 10


def test_names_where_sigint_interrupted_equal_gdb_bt(gdb, programs):
    _, busy = programs
    stops, problems = gdb_stops(gdb, ["--args", busy, "2"],
                                ["handle SIGUSR1 nostop noprint pass", "break main", "run",
                                 "delete", "test-interrupt-stops 1 12 step"], timeout=600)
    tally = Tally()
    _check(gdb, tally, stops, problems, "busy, interrupted")
    print(f"{gdb.id}: {tally.line()}")
    assert tally.by_how["interrupt"] == 12 and tally.by_how["interrupt step"] == 12
    # stops in the recursion, not only in main's loop
    assert sum("descend" in stop["bt"] for stop in stops) >= 6


def test_stack_names_equal_eu_stack(programs):
    require(shutil.which("eu-stack"), "eu-stack (elfutils) missing")
    from live_harness import LiveWalks, Started
    _, busy = programs
    walks = LiveWalks()
    compared = threads = strictly = 0
    with Started([busy, "2"]) as started:
        addresses = symbol_addresses(started.pid)
        for ours, theirs in thread_stops(started.pid, 8, random.Random(1), walks.text):
            assert threads_alike(ours, theirs, addresses), (ours, theirs)
            compared += 1
            threads += len(ours)
            strictly += ours == theirs
    print(f"sfbt stack: {compared} stops, {threads} threads named as by eu-stack -i -s "
          f"({strictly} stops with every name the same)")
    assert compared == 8 and threads == 24
