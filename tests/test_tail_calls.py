"""Tail-call frames rebuilt from DWARF call sites as GDB rebuilds them
(sfbt.dwarf.call_sites, sfbt.symbols.tail_calls): sframe-bt equals GDB's
`bt` (PCs, and which frames are tail-call frames) on tail_calls.c's
stops, `sfbt stack` equals `gdb -nx -p`'s frames, in LLDB sframe-bt
equals bt with its [artificial] frames (LLDB's rule: one path, or none);
the reader and the search bounded on crafted DWARF (loops, explosions of
paths, too many call sites)."""

import re
import struct
import subprocess
import time
from types import SimpleNamespace

import pytest

import crafted_dwarf as crafted
import live_harness as harness
from gdb_support import PROGRAMS, gdb_pcs, run_gdb, split_sections
from lldb_support import lldb_pcs, mark, run_lldb, stack_frames
from sfbt.dwarf import call_sites
from sfbt.symbols import tail_calls
from sfbt.symbols.symbolizer import FileSymbolizer

# GDB's frames, outermost last: "TAILCALL 0x..." or "FRAME 0x..." (inline
# frames left out, as sframe-bt prints them without an address)
GDB_FRAME_TYPES = ("python exec(\"f = gdb.newest_frame()\\nwhile f is not None:\\n"
                   " t = f.type()\\n"
                   " print('GDB-TYPE', 'TAILCALL' if t == gdb.TAILCALL_FRAME else 'FRAME',"
                   " hex(f.pc())) if t != gdb.INLINE_FRAME else None\\n"
                   " f = f.older()\")")
_TYPE = re.compile(r"^GDB-TYPE (\w+) (0x[0-9a-f]+)$", re.M)
_OURS = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+) in (\S+) .*?(?:  \[([^\]]+)\])?$", re.M)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    output = tmp_path_factory.mktemp("tail-calls") / "tail_calls"
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-o", str(output),
                    str(PROGRAMS / "tail_calls.c")], check=True, capture_output=True)
    return output


STOP = ["echo ==STOP==\\n", "test-gdb-pcs", GDB_FRAME_TYPES, "sframe-bt -v",
        "echo ==BT==\\n", "bt 3", "echo ==COUNT==\\n", "sframe-bt 3"]


def test_sframe_bt_equals_bt_with_its_tail_call_frames(gdb, program):
    """Before: sframe-bt left middle, outer, shared and __GI_qsort out."""
    out = run_gdb(gdb, [str(program)], ["set sframe unwinder off", "break stop_here",
                                        "run", *STOP, "continue", *STOP, "continue", *STOP])
    stops = split_sections(out, "==STOP==")
    assert len(stops) == 3, out[-3000:]
    tails_seen = []
    for stop in stops:
        section, rest = stop.split("==BT==\n")
        bt, counted = rest.split("==COUNT==\n")
        (expected,) = gdb_pcs(section)
        ours = [(int(level), int(pc, 16), name, how)
                for level, pc, name, how in _OURS.findall(section)]
        assert [pc for _, pc, _, _ in ours] == expected, section
        types = [(kind, int(pc, 16)) for kind, pc in _TYPE.findall(section)]
        assert [pc for _, pc in types] == expected, section
        tails = [pc for kind, pc in types if kind == "TAILCALL"]
        assert [pc for _, pc, _, how in ours if how == "tailcall"] == tails, section
        tails_seen.append([name for _, _, name, how in ours if how == "tailcall"])
        # counted as bt counts them: GDB's first three frames, one tail-call
        # frame among them in the first two stops
        theirs = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\w+)", bt, re.M)
        first = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\w+)", counted, re.M)
        assert first == theirs and len(first) == 3, (bt, counted)
        assert "#2 " in counted and "#3 " not in counted, counted
        assert "(More stack frames follow...)" in counted, counted
    assert tails_seen[:2] == [["middle", "outer"], ["shared"]], tails_seen
    # the C library's qsort jumps to __qsort_r: GDB shows it where it has
    # the library's DWARF (libc6-dbg)
    assert tails_seen[2] in ([], ["__GI_qsort"]), tails_seen


def test_stack_equals_gdbs_with_its_tail_call_frames(gdb, program, tmp_path):
    walks = harness.LiveWalks()
    comparison = harness.Comparison()
    with harness.Started([program, "wait"]) as running:
        stacks = harness.stopped_comparison(gdb.command, running.pid, walks, tmp_path,
                                            comparison, numbers=gdb.major == 13)
    assert comparison.threads == 1
    assert comparison.equal == 1 and not comparison.differences, \
        "\n\n".join(comparison.differences)
    (stack,) = stacks.values()
    names = [name for _, name in stack.frames]
    assert names[-5:] == ["stop_here", "inner", "middle", "outer", "main"], stack.describe()


def test_the_kept_tail_call_finder_holds_no_session(program):
    """The finder is kept while the modules stay the same (a debugger's
    front end keeps them from one command to the next): it holds the
    module map and the modules' symbolizers, not the session that made
    it (before, its session's bound call_site_source, and with it that
    stop's threads and memory), and finds the tail-call frames once that
    session is gone."""
    import gc
    import weakref
    from sfbt.live.session import process_session
    from sfbt.live.stack import stack_text
    with harness.Started([program, "wait"]) as running:
        session = process_session(running.pid)
        (stack,) = harness.parse_stacks(stack_text(session)).values()
    names = [name for _, name in stack.frames]
    assert names[-5:] == ["stop_here", "inner", "middle", "outer", "main"], stack.describe()
    inner, middle, outer, main = (pc for pc, _ in stack.frames[-4:])
    finder = session.tail_calls()
    made_by = weakref.ref(session)
    del session
    gc.collect()
    assert made_by() is None
    assert finder.between(main, inner - 1) == [middle, outer]


def test_lldb_sframe_bt_equals_bt_with_its_artificial_frames(lldb, program):
    """LLDB's bt shows the frames of a tail-call path where it is the one
    path, marked [artificial] (middle and outer; none for the ambiguous
    chain, where GDB shows shared; __GI_qsort with the C library's
    DWARF); sframe-bt in LLDB's layout shows the same, to main.  Before:
    it left them all out."""
    out = run_lldb(lldb, program, ["breakpoint set -n stop_here", "run"]
                   + [mark("STOP"), "test-lldb-pcs", "bt", mark("OURS"), "sframe-bt -v",
                      "continue"] * 3)
    stops = split_sections(out, "==STOP==")
    assert len(stops) == 3, out[-3000:]
    artificial_names = []
    for stop in stops:
        theirs_text, ours_text = stop.split("==OURS==\n")
        (theirs,) = lldb_pcs(theirs_text)
        artificial = re.findall(r"frame #\d+: (0x[0-9a-f]+) [^`]*`(\S+?)\(.*\[artificial\]$",
                                theirs_text, re.M)
        frames = stack_frames(ours_text)  # to main: sframe-bt in LLDB ends there
        assert [pc for _, pc, _ in frames] == theirs[:len(frames)], stop[-3000:]
        assert frames[-1][2] == "main", ours_text
        ours_artificial = [(f"{int(pc, 16):#x}", name) for pc, name in re.findall(
            r"^#\d+\s+(0x[0-9a-f]+) in (\S+) .*\[artificial\]  \[tailcall\]$", ours_text, re.M)]
        assert ours_artificial == [(f"{int(pc, 16):#x}", name) for pc, name in artificial], \
            stop[-3000:]
        artificial_names.append([name for _, name in artificial])
    assert artificial_names[:2] == [["middle", "outer"], []], artificial_names
    assert artificial_names[2] in ([], ["__GI_qsort"], ["qsort"]), artificial_names


JOINING = r"""
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *run(void *arg) { for (;;) pause(); return arg; }
int main(void)
{
    pthread_t thread;
    pthread_create(&thread, 0, run, 0);
    puts("ready");
    fflush(stdout);
    pthread_join(thread, 0);
    return 0;
}
"""


@pytest.fixture(scope="module")
def joining(tmp_path_factory):
    directory = tmp_path_factory.mktemp("joining")
    source = directory / "joining.c"
    source.write_text(JOINING)
    program = directory / "joining"
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-o", str(program), str(source),
                    "-lpthread"], check=True, capture_output=True)
    return program


def test_a_call_into_a_library_by_its_versioned_name(gdb, joining):
    """main calls pthread_join, which the C library's .symtab names
    pthread_join@@GLIBC_2.34 (with libc6-dbg), and which jumps on to
    __pthread_clockjoin_ex: GDB shows ___pthread_join as a tail-call
    frame, and sframe-bt too (before: the name was not found, no frame)."""
    with harness.Started([joining]) as running:
        time.sleep(0.2)
        out = run_gdb(gdb, ["-p", str(running.pid)], ["thread 1", "echo ==STOP==\\n",
                                                      "test-gdb-pcs", GDB_FRAME_TYPES,
                                                      "sframe-bt -v"])
    section = split_sections(out, "==STOP==")[-1]
    (expected,) = gdb_pcs(section)
    ours = [(int(pc, 16), how) for _, pc, _, how in _OURS.findall(section)]
    assert [pc for pc, _ in ours] == expected, section
    tails = [int(pc, 16) for kind, pc in _TYPE.findall(section) if kind == "TAILCALL"]
    assert [pc for pc, how in ours if how == "tailcall"] == tails, section


KILLING = r"""
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
static void *run(void *arg) { for (;;) pause(); return arg; }
int main(void)
{
    pthread_t thread;
    pthread_create(&thread, 0, run, 0);
    for (;;)
        pthread_kill(thread, 0);
    return 0;
}
"""


def test_a_call_by_a_name_two_versions_of_a_library_define(gdb, tmp_path):
    """main calls pthread_kill, which the C library defines twice, in
    pthread_kill@@GLIBC_2.34 and the older pthread_kill@GLIBC_2.2.5 (its
    .symtab with libc6-dbg), each jumping on to
    __pthread_kill_implementation.  GDB names both pthread_kill (a
    .symtab holds no versions' flags) and takes the one at the higher
    address for the call's target: sframe-bt's tail-call frame is where
    GDB's is (before: in the other version, at a lower address)."""
    source = tmp_path / "killing.c"
    source.write_text(KILLING)
    program = tmp_path / "killing"
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-o", str(program), str(source),
                    "-lpthread"], check=True, capture_output=True)
    out = run_gdb(gdb, [str(program)], ["set breakpoint pending on",
                                        "break __pthread_kill_implementation", "run",
                                        "echo ==STOP==\\n", "test-gdb-pcs", GDB_FRAME_TYPES,
                                        "sframe-bt -v", "kill"])
    section = split_sections(out, "==STOP==")[-1]
    (expected,) = gdb_pcs(section)
    ours = [(int(pc, 16), how) for _, pc, _, how in _OURS.findall(section)]
    assert [pc for pc, _ in ours] == expected, section
    tails = [int(pc, 16) for kind, pc in _TYPE.findall(section) if kind == "TAILCALL"]
    assert tails and [pc for pc, how in ours if how == "tailcall"] == tails, section


LOADING = r"""
#include <dlfcn.h>
#include <pthread.h>
static void *load(void *arg)
{
    for (;;) {
        void *library = dlopen("libz.so.1", RTLD_NOW);
        if (library)
            dlclose(library);
    }
    return arg;
}
int main(void)
{
    pthread_t thread;
    pthread_create(&thread, 0, load, 0);
    pthread_join(thread, 0);
    return 0;
}
"""


def test_a_call_by_a_name_two_libraries_hold_as_local_symbols(gdb, tmp_path):
    """The dynamic linker's _dl_get_file_id calls __fstat64, which jumps on
    to __fstatat64; the C library and the dynamic linker each have a
    local __fstat64.  GDB takes a global symbol of the name from the first
    objfile that has one, else the last local one (the dynamic linker's):
    `sfbt stack --core` shows __GI___fstat64's tail-call frame where GDB
    does on the core (before: it looked in the C library's, and no chain
    led from there)."""
    source = tmp_path / "loading.c"
    source.write_text(LOADING)
    program = tmp_path / "loading"
    subprocess.run(["gcc", "-O2", "-g", "-Wa,--gsframe", "-o", str(program), str(source),
                    "-ldl", "-lpthread"], check=True, capture_output=True)
    core = tmp_path / "loading.core"
    gdb.run([str(program)], ["set breakpoint pending on", "break pthread_create", "run",
                             "break _dl_get_file_id", "continue", "delete",
                             "break *(__GI___fstatat64 + 10)", "continue", f"gcore {core}",
                             "kill"], 300)
    assert core.exists()
    theirs = harness.gdb_threads(gdb.command, [program, core], tmp_path)
    frames = harness.gdb_threads(gdb.command, [program, core], tmp_path, tail_calls=False)
    assert sum(len(pcs) for _, pcs in theirs.values()) \
        > sum(len(pcs) for _, pcs in frames.values())  # GDB's tail-call frames among them
    result = harness.sfbt_command("stack", "--core", core, program)
    assert result.returncode == 0, result.stderr
    stacks = harness.parse_stacks(result.stdout)
    comparison = harness.Comparison()
    harness.compare_with_gdb(stacks, theirs, comparison)
    assert comparison.equal == comparison.threads == 2, "\n\n".join(comparison.differences)
    assert "in __GI___fstat64 " in result.stdout, result.stdout


def test_lldb_reads_a_functions_own_call_sites_only(lldb, joining):
    """The main thread waits in pthread_join: __pthread_clockjoin_ex calls
    the futex wait from code inlined into it, and that tail-jumps on.
    With the C library's DWARF GDB shows a tail-call frame there; LLDB
    reads only the call sites that are children of a function's own
    entry and shows none: sframe-bt in LLDB neither (before: it showed
    __GI___futex_abstimed_wait_cancelable64 [artificial]), and shows the
    one LLDB shows, ___pthread_join (pthread_join's)."""
    with harness.Started([joining]) as running:
        time.sleep(0.2)
        out = run_lldb(lldb, None, [
            f"process attach -p {running.pid}", "thread select 1", mark("STOP"),
            "test-lldb-pcs", "bt", mark("OURS"), "sframe-bt -v"])
    theirs_text, ours_text = split_sections(out, "==STOP==")[-1].split("==OURS==\n")
    (theirs,) = lldb_pcs(theirs_text)
    frames = stack_frames(ours_text)
    assert len(frames) >= 3 and frames[-1][2] == "main", ours_text
    assert [pc for _, pc, _ in frames] == theirs[:len(frames)], out[-3000:]
    artificial = re.findall(r"frame #\d+: (0x[0-9a-f]+) .*\[artificial\]$",
                            theirs_text.split("`main")[0], re.M)
    ours_artificial = re.findall(r"^#\d+\s+(0x[0-9a-f]+) in .*\[artificial\]  \[tailcall\]$",
                                 ours_text, re.M)
    assert [int(pc, 16) for pc in ours_artificial] == [int(pc, 16) for pc in artificial], \
        out[-3000:]
    assert "futex_abstimed_wait_cancelable" not in "".join(
        line for line in ours_text.splitlines() if "[artificial]" in line)


# -- crafted DWARF ----------------------------------------------------------------------------

DW_FORM_REF4 = 0x13
#: the abbreviations of the crafted call sites: 2 a function listing all
#: its calls, 3 a tail call, 4 a call, each site naming its callee's entry
ABBREVIATIONS = (
    crafted.abbreviation(2, 0x2E, 1, [(crafted.DW_AT_LOW_PC, crafted.DW_FORM_ADDR),
                                      (crafted.DW_AT_HIGH_PC, crafted.DW_FORM_DATA4),
                                      (0x7A, crafted.DW_FORM_FLAG_PRESENT)])
    + crafted.abbreviation(3, 0x48, 0, [(0x7D, crafted.DW_FORM_ADDR),
                                        (0x82, crafted.DW_FORM_FLAG_PRESENT),
                                        (0x7F, DW_FORM_REF4)])
    + crafted.abbreviation(4, 0x48, 0, [(0x7D, crafted.DW_FORM_ADDR), (0x7F, DW_FORM_REF4)])
    + b"\0")
#: bytes of code per crafted function
SIZE = 0x10
#: the offset of the first entry after the top one, in its unit
FIRST = 11 + len(crafted.top_entry())


def call_graph(calls, functions):
    """An ELF whose unit has ``functions`` functions (function i at
    CODE + SIZE * i) and, in function i, the calls ``calls[i]``: [(callee,
    tail)], call j returning to CODE + SIZE * i + j + 1."""
    entry_size = 1 + 8 + 4
    offsets, at = [], FIRST
    for i in range(functions):
        offsets.append(at)
        at += entry_size + len(calls.get(i, ())) * (1 + 8 + 4) + 1
    entries = b""
    for i in range(functions):
        entries += crafted.uleb(2) + struct.pack("<QI", crafted.CODE + SIZE * i, SIZE)
        for j, (callee, tail) in enumerate(calls.get(i, ())):
            entries += crafted.uleb(3 if tail else 4) + struct.pack(
                "<QI", crafted.CODE + SIZE * i + j + 1, offsets[callee])
        entries += b"\0"
    return crafted.elf(crafted.dwarf_sections(ABBREVIATIONS, entries + b"\0",
                                              size=SIZE * functions))


class OneModule:
    """A module map of one module at its file addresses."""

    load_bias = 0

    def __init__(self):
        self.modules = [self]

    def module_for(self, pc):
        return self


def finder(data):
    symbols = FileSymbolizer.of_image(data, "crafted")
    return tail_calls.TailCalls(OneModule(), SimpleNamespace(symbols=lambda module: symbols)), \
        symbols


def at(function, offset=0):
    return crafted.CODE + SIZE * function + offset


def test_the_call_sites_of_a_unit():
    _, symbols = finder(call_graph({0: [(1, False)], 1: [(2, True)]}, 3))
    sites = symbols.call_sites(at(1))
    assert sites.sites == {
        at(0, 1): call_sites.CallSite(at(0, 1), (at(1),), False),
        at(1, 1): call_sites.CallSite(at(1, 1), (at(2),), True)}
    assert sites.tail_calls == {at(1): [sites.sites[at(1, 1)]]}
    assert sites.function_entry(at(2, 5)) == at(2)
    assert sites.function_entry(at(3)) is None


def test_a_chain_of_tail_calls_and_what_an_ambiguous_one_keeps():
    # 0 calls 1; 1 jumps to 2, 2 to 3: two frames, 2's then 1's
    found, _ = finder(call_graph({0: [(1, False)], 1: [(2, True)], 2: [(3, True)]}, 4))
    assert found.between(at(0, 1), at(3, 4)) == [at(2, 1), at(1, 1)]
    # a direct call: none
    assert found.between(at(0, 1), at(1, 4)) == []
    # 0 calls 1; 1 jumps to 2 or 3, both jump to 4, which jumps to 5: of
    # the two paths only the last call is shared
    found, _ = finder(call_graph({0: [(1, False)], 1: [(2, True), (3, True)],
                                  2: [(4, True)], 3: [(4, True)], 4: [(5, True)]}, 6))
    assert found.between(at(0, 1), at(5, 2)) == [at(4, 1)]
    # two paths sharing nothing: none
    found, _ = finder(call_graph({0: [(1, False)], 1: [(2, True), (3, True)],
                                  2: [(4, True)], 3: [(4, True)]}, 5))
    assert found.between(at(0, 1), at(4, 2)) == []


def test_lldb_keeps_the_one_path_only():
    """LLDB's rule (unique): the frames of the one path; none where two
    paths lead to the callee (GDB keeps the calls they share) or a
    function is reached twice; a function whose calls lead nowhere is
    passed over."""
    found, _ = finder(call_graph({0: [(1, False)], 1: [(2, True)], 2: [(3, True)]}, 4))
    assert found.between(at(0, 1), at(3, 4), unique=True) == [at(2, 1), at(1, 1)]
    assert found.between(at(0, 1), at(1, 4), unique=True) == []
    diamond = {0: [(1, False)], 1: [(2, True), (3, True)], 2: [(4, True)], 3: [(4, True)],
               4: [(5, True)]}
    found, _ = finder(call_graph(diamond, 6))
    assert found.between(at(0, 1), at(5, 2)) == [at(4, 1)]
    assert found.between(at(0, 1), at(5, 2), unique=True) == []
    # 1 jumps to 2 (which makes no call) or to 3, which jumps to 4: the
    # one path is through 3
    found, _ = finder(call_graph({0: [(1, False)], 1: [(2, True), (3, True)], 3: [(4, True)]},
                                 5))
    assert found.between(at(0, 1), at(4, 2), unique=True) == [at(3, 1), at(1, 2)]


def test_a_loop_of_tail_calls_ends():
    # 1 and 2 jump to each other; the callee (3) is never reached
    found, _ = finder(call_graph({0: [(1, False)], 1: [(2, True)], 2: [(1, True)]}, 4))
    assert found.between(at(0, 1), at(3, 2)) == []
    # a function that jumps to itself on the way
    found, _ = finder(call_graph({0: [(1, False)], 1: [(1, True), (2, True)]}, 3))
    assert found.between(at(0, 1), at(2, 2)) == [at(1, 2)]


def test_an_explosion_of_paths_is_bounded():
    """Every one of 12 functions jumps to every other: billions of paths
    to a callee none of them reaches; MAX_VISITS ends the search."""
    count = 12
    graph = {i: [(j, True) for j in range(1, count) if j != i] for i in range(1, count)}
    graph[0] = [(1, False)]
    found, _ = finder(call_graph(graph, count + 1))
    began = time.monotonic()
    assert found.between(at(0, 1), at(count, 2)) == []
    assert time.monotonic() - began < 10


def test_too_many_call_sites_leave_the_unit_out(monkeypatch):
    monkeypatch.setattr(call_sites, "MAX_CALL_SITES", 3)
    found, symbols = finder(call_graph({0: [(1, False)], 1: [(2, True)] * 3}, 3))
    assert symbols.call_sites(at(1)) is call_sites.EMPTY
    assert found.between(at(0, 1), at(2, 2)) == []


def test_a_reference_out_of_its_section_leaves_the_unit_out():
    entries = crafted.uleb(2) + struct.pack("<QI", at(0), SIZE)
    entries += crafted.uleb(4) + struct.pack("<QI", at(0, 1), 1 << 30) + b"\0\0"
    found, symbols = finder(crafted.elf(crafted.dwarf_sections(ABBREVIATIONS, entries)))
    assert symbols.call_sites(at(0)) is call_sites.EMPTY
    assert found.between(at(0, 1), at(1, 2)) == []
