"""C++ names as GDB prints them: on cxx_names.cpp (std::thread, templates,
lambdas, namespaces, an inlined template method; -O2 -g --gsframe),
`sfbt stack -p PID` names every frame of every thread as `gdb -nx` bt
does (qualified DWARF names without parameters, a minimal symbol of
libstdc++ demangled with them), `sframe-bt` in each GDB names them as
that GDB's bt and stops at main (in LLDB too); cbf decode, fold, flame,
speedscope and pprof carry the demangled names; files are named as GDB
names them; and the demangler (sfbt.names) is bounded and
leaves what it cannot read as it is."""

import gzip
import json
import re
import subprocess
import time

import pytest

from conftest import ROOT, run_sfbt
from live_harness import Started, sfbt_command
from sfbt import errors, names

PROGRAM = ROOT / "tests" / "programs" / "cxx_names.cpp"
#: a frame line of bt or sframe-bt (or sfbt stack): its number and name
_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(.+?)(?: \(.*\))?(?: at \S+:\d+| from \S+"
                    r"| \(\))?$")
_THREAD = re.compile(r"^Thread \d+ \((?:Thread 0x[0-9a-f]+ \()?LWP (\d+)", re.M)
#: names the program's frames must have (gdb's, checked against it below)
EXPECTED = {"app::wait_here", "app::Worker<double>::step", "app::Worker<double>::run",
            "app::Worker<unsigned long>::step", "operator()",
            "app::(anonymous namespace)::start<double>",
            "app::(anonymous namespace)::start<unsigned long>",
            "std::thread::join()", "app::pool", "main"}


#: the names of the build without DWARF: GDB's minimal symbols, demangled
#: with their parameters
EXPECTED_MINIMAL = {"app::wait_here(int)", "std::thread::join()", "app::pool()", "main"}


def _build(directory, *flags):
    path = directory / "cxx_names"
    subprocess.run(["g++", "-O2", *flags, "-Wa,--gsframe", "-pthread", "-o", str(path),
                    str(PROGRAM)], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cxx"), "-g")


@pytest.fixture(scope="module")
def program_without_dwarf(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cxx_symtab"))


def _names(text):
    """[name of each frame line] of one backtrace's text: bt's, which
    prints arguments after the name, or sframe-bt's and sfbt stack's."""
    return [name for _, name in _frames(text)]


def _frames(text):
    """[(pc or None, name)] of one backtrace's frame lines (an inline
    frame, and bt's frame 0 at the start of a line, shows no pc)."""
    found = []
    for line in text.splitlines():
        if line.startswith("#"):
            pc = re.match(r"^#\d+\s+(?:0x([0-9a-f]+) in )?", line)
            name = line[pc.end():].removesuffix(" [inlined]")  # LLDB's layout
            name = re.split(r" \(|\s+at \S+:\d+$|\s+from \S+$", name, maxsplit=1)[0]
            found.append((int(pc[1], 16) if pc[1] else None, name))
    return found


def _by_pc(text):
    """{pc: [names]} of one backtrace: the names of a frame on the stack
    and of the inline frames shown with it; frame 0's under 0 (bt shows no
    pc for a frame at the start of a line)."""
    groups = {}
    names = None
    for pc, name in _frames(text):
        if names is None or pc is not None:
            names = groups.setdefault(pc if groups else 0, [])
        names.append(name)
    return groups


def _by_thread(text):
    """{LWP: {pc: [names]}} of `thread apply all bt` or sfbt stack's text."""
    parts = _THREAD.split(text)
    return {int(lwp): _by_pc(body) for lwp, body in zip(parts[1::2], parts[2::2])}


def _started(program):
    running = Started([program])
    time.sleep(0.1)  # the threads past their counter, in pause()
    return running


def _named_as_gdb(ours, theirs):
    """The names of all frames of ``ours`` (sfbt stack's result), checked
    to be those of ``theirs`` (GDB's `thread apply all bt`), thread by
    thread (three) and frame by frame."""
    assert ours.returncode == 0, ours.stderr
    ours_named, theirs_named = _by_thread(ours.stdout), _by_thread(theirs)
    assert ours_named.keys() == theirs_named.keys() and len(ours_named) == 3, theirs
    for lwp, groups in ours_named.items():
        # each frame on the stack (GDB's tail-call frames are not) named alike
        assert groups == {pc: theirs_named[lwp].get(pc) for pc in groups}, lwp
    return {name for groups in ours_named.values() for names in groups.values()
            for name in names}


def _running_named_as_gdb(gdb, program):
    """_named_as_gdb of `sfbt stack PID` and GDB's bt on ``program`` running."""
    with _started(program) as running:
        ours = sfbt_command("stack", running.pid)
        theirs = gdb.run(["-p", running.pid], ["thread apply all bt"], plugin=False)
    return _named_as_gdb(ours, theirs)


def test_sfbt_stack_names_as_gdb(gdb, program):
    named = _running_named_as_gdb(gdb, program)
    assert EXPECTED <= named
    # a std::thread's _M_run: a name GDB cannot parse, printed with (void)
    assert any(name.endswith("::_M_run(void)") for name in named)


def test_sfbt_stack_minimal_symbols_as_gdb(gdb, program_without_dwarf):
    """Without DWARF, GDB names each frame by its minimal symbol,
    demangled with its parameters (``app::pool()``); sfbt stack too."""
    named = _running_named_as_gdb(gdb, program_without_dwarf)
    assert EXPECTED_MINIMAL <= named
    # GCC's clones as the demangler prints them
    assert any(name.startswith("app::Worker<double>::run(int) [clone .") for name in named)


def test_core_names_as_gdb(gdb, program, tmp_path):
    """`sfbt stack --core` of a gcore of it names the frames as GDB's bt of
    the same core does."""
    core = tmp_path / "core"
    with _started(program) as running:
        gdb.run(["-p", running.pid], [f"gcore {core}"], plugin=False)
    assert core.is_file()
    ours = sfbt_command("stack", "--core", core, program)
    theirs = gdb.run([program, core], ["thread apply all bt"], plugin=False)
    assert EXPECTED <= _named_as_gdb(ours, theirs)


def test_sframe_bt_names_as_bt(gdb, program):
    """sframe-bt names each thread's frames as that GDB's bt does (GDB
    names them itself: its print names without parameters, as bt does)
    and stops at main."""
    commands = []
    for number in (1, 2, 3):
        commands += [f"thread {number}", "echo @@bt\\n", "bt", "echo @@sframe\\n", "sframe-bt",
                     "echo @@end\\n"]
    with _started(program) as running:
        out = gdb.run(["-p", running.pid], commands)
    pairs = re.findall(r"@@bt\n(.*?)@@sframe\n(.*?)@@end", out, re.S)
    assert len(pairs) == 3, out
    for bt, sframe in pairs:
        ours, theirs = _by_pc(sframe), _by_pc(bt)
        # each frame on the stack (GDB's tail-call frames are not) named alike
        assert ours == {pc: theirs.get(pc) for pc in ours}, (bt, sframe)
    # the main thread's walk ends at main, as bt's does
    assert _names(pairs[0][1])[-1] == _names(pairs[0][0])[-1] == "main"
    assert "Backtrace stopped" not in pairs[0][1]
    assert EXPECTED <= {name for _, sframe in pairs for name in _names(sframe)}


def test_profiles_carry_demangled_names(program, tmp_path):
    archive = tmp_path / "cxx.sfbt"
    with _started(program) as running:
        recorded = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "20", "--duration", "0.3",
                            "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0, folded.stderr
    assert "main;app::pool;std::thread::join();" in folded.stdout
    assert ";app::Worker<double>::run;app::Worker<double>::step;app::wait_here;" \
        in folded.stdout
    assert "_Z" not in folded.stdout
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0, decoded.stderr
    assert " in app::(anonymous namespace)::start<double> at " in decoded.stdout
    assert " in std::thread::join() from " in decoded.stdout
    svg = tmp_path / "cxx.svg"
    assert run_sfbt("flame", archive, "-o", svg).returncode == 0
    assert 'data-name="app::Worker&lt;double&gt;::run"' in svg.read_text()
    speed = tmp_path / "cxx.speedscope.json"
    assert run_sfbt("flame", archive, "--format", "speedscope", "-o", speed).returncode == 0
    frames = {frame["name"] for frame in json.loads(speed.read_text())["shared"]["frames"]}
    assert {"app::Worker<double>::step", "std::thread::join()", "app::pool"} <= frames
    assert not any(name.startswith("_Z") for name in frames)
    profile = tmp_path / "cxx.pb.gz"
    assert run_sfbt("flame", "--format", "pprof", archive, "-o", profile).returncode == 0
    strings = gzip.decompress(profile.read_bytes())
    assert b"app::(anonymous namespace)::start<unsigned long>" in strings
    assert b"std::thread::join()" in strings


# -- the demangler ------------------------------------------------------------------------

@pytest.mark.parametrize("mangled, printed", [
    ("_ZN3app6WorkerIdE3runEi", "app::Worker<double>::run(int)"),
    ("_ZNSt6thread4joinEv", "std::thread::join()"),
    ("_ZNK5outer5inner3Box3getEi", "outer::inner::Box::get(int) const"),
    ("_ZN3foo3barEv.cold", "foo::bar() [clone .cold]"),
    ("main", "main"), ("__GI___clock_nanosleep", "__GI___clock_nanosleep"),
    ("_Znot_a_name", "_Znot_a_name"), ("_Z", "_Z"), ("", "")])
def test_demangled(mangled, printed):
    assert names.demangled(mangled) == printed


#: libstdc++'s functions whose names hold the standard substitutions
#: libiberty spells two ways (Ss, So, Si, Sd; a constructor, a destructor)
STANDARD_SUBSTITUTIONS = ["_ZNSs4_Rep9_S_createEmmRKSaIcE", "_ZNSo5flushEv", "_ZNSi3getEv",
                          "_ZNSdD0Ev", "_ZNSsC1EPKcRKSaIcE",
                          "_ZSt4endlIcSt11char_traitsIcEERSt13basic_ostreamIT_T0_ES6_"]


def test_standard_substitutions_spelled_as_gdb(gdb):
    """std::string, std::ostream... spelled out as GDB prints them
    (``std::basic_string<char, std::char_traits<char>, std::allocator<char>
    >::_Rep::_S_create(...)``, where __cxa_demangle says
    ``std::string::_Rep::_S_create(...)``: a difference found on a stop in
    libstdc++ during exception unwinding): equal to gdb -nx's `info symbol`
    in libstdc++; a class named ``string`` in a namespace ``std`` of the
    program's own keeps its name."""
    library = subprocess.run(["gcc", "-print-file-name=libstdc++.so.6"], capture_output=True,
                             text=True, check=True).stdout.strip()
    out = gdb.run([library], [f"info symbol {name}" for name in STANDARD_SUBSTITUTIONS],
                  plugin=False)
    theirs = [line.split(" in section ")[0] for line in out.splitlines()
              if " in section " in line]
    assert [names.demangled(name) for name in STANDARD_SUBSTITUTIONS] == theirs, out
    assert names.demangled("_ZN5mylib3std6stringC1Ev") == "mylib::std::string::string()"


def test_demangler_bounds():
    """A name over the length cap, one the demangler refuses however deep
    it nests, bytes that are not UTF-8 and a NUL inside stay as they are,
    quickly."""
    started = time.monotonic()
    too_long = "_ZN" + "3abc" * (names.MAX_MANGLED // 4) + "Ev"
    assert names.demangled(too_long) == too_long
    for hostile in ("_Z" + "P" * 16000 + "v", "_Z1f" + "IS_" * 5000, "_ZN" + "1a" * 7000 + "Ev",
                    "_ZN3foo\udcff3barEv", "_ZN3foo\x003barEv", "_Z" + "A1_" * 5000 + "i"):
        assert names.demangled(hostile) == hostile or len(hostile) <= names.MAX_MANGLED
    assert time.monotonic() - started < 5


def test_without_libstdcxx_names_stay_mangled(monkeypatch):
    monkeypatch.setattr(names, "_demangler", [None])
    names.demangled.cache_clear()
    errors.left_out_warning()  # the notes before this test, said
    try:
        assert names.demangled("_ZN3app6WorkerIdE3runEi") == "_ZN3app6WorkerIdE3runEi"
        assert names.demangled("_ZNSt6thread4joinEv") == "_ZNSt6thread4joinEv"
        warning = errors.left_out_warning()
    finally:
        names.demangled.cache_clear()
    # one note, however many names
    assert warning == "C++ names left mangled: no libstdc++ to demangle them with"


@pytest.mark.parametrize("name, bt_name", [
    ("app::pool(int)", "app::pool"), ("X::operator()(int) const", "X::operator()"),
    ("operator()", "operator()"), ("main", "main"), ("main(int, char**)", "main"),
    ("a<b(c)>::f()", "a<b(c)>::f"), ("g() &&", "g"), ("twice<long int>(long)", "twice<long>"),
    ("P<long unsigned int, short int>::f(unsigned long)", "P<unsigned long, short>::f"),
    ("s<f()::<lambda()> >::_M_run(void)", "s<f()::<lambda()> >::_M_run(void)"),
    # a demangled closure's name: GDB's parser refuses it, bt prints it whole
    ("n::W<3>::go(long)::{lambda(long)#1}::operator()(long) const",
     "n::W<3>::go(long)::{lambda(long)#1}::operator()(long) const"),
    ("apply<f()::{lambda(long)#1}>(f()::{lambda(long)#1}, long)",
     "apply<f()::{lambda(long)#1}>(f()::{lambda(long)#1}, long)"),
    ("g({unnamed type#1})", "g({unnamed type#1})")])
def test_without_parameters(name, bt_name):
    assert names.without_parameters(name) == bt_name


@pytest.mark.parametrize("name, dropped", [
    ("long n::tf<int>(int)", "n::tf<int>(int)"),
    ("unsigned long app::f<std::pair<int, int> >(std::pair<int, int>)",
     "app::f<std::pair<int, int> >(std::pair<int, int>)"),
    ("long app::apply<f(long, int)::{lambda(long)#1}>(f(long, int)::{lambda(long)#1}, long)",
     "app::apply<f(long, int)::{lambda(long)#1}>(f(long, int)::{lambda(long)#1}, long)"),
    ("app::Worker<double>::run(int)", "app::Worker<double>::run(int)"),
    ("bool std::operator< <int>(int const&, int const&)",
     "bool std::operator< <int>(int const&, int const&)"),
    ("main", "main")])
def test_without_return_type(name, dropped):
    """As GDB demangles a DWARF function's linkage name (DMGL_RET_DROP):
    a template function's return type dropped; a name with an operator
    left as it is."""
    assert names.without_return_type(name) == dropped


@pytest.mark.parametrize("name, main", [
    ("main", True), ("main(int, char**)", True), ("main(int, char const**)", True),
    ("main()", True), ("app::main", False), ("mainly", False), (None, False), ("??", False)])
def test_is_main(name, main):
    assert names.is_main(name) is main


# -- source paths ----------------------------------------------------------------------

@pytest.mark.parametrize("dwarf", [4, 5])
@pytest.mark.parametrize("where", ["here", "prefix-mapped", "below", "absolute"])
def test_source_paths_as_gdb(gdb, tmp_path, dwarf, where):
    """Each frame's file as GDB's bt prints it: the line table's file
    joined to its directory, to the compilation directory only where that
    is relative (DWARF 5: ``./src/sleeper.c`` built with its prefix mapped to
    ``.``, as Debian builds its C library: ``./nptl/...``)."""
    (tmp_path / "src").mkdir()
    source = tmp_path / "src" / "sleeper.c"
    source.write_bytes((ROOT / "tests" / "programs" / "sleeper.c").read_bytes())
    argument = {"here": "sleeper.c", "prefix-mapped": "sleeper.c", "below": "src/sleeper.c",
                "absolute": str(source)}[where]
    flags = [f"-ffile-prefix-map={tmp_path}=."] if where == "prefix-mapped" else []
    cwd = tmp_path if where == "below" else tmp_path / "src"
    program = tmp_path / "sleeper"
    subprocess.run(["gcc", "-O1", "-g", f"-gdwarf-{dwarf}", *flags, "-o", str(program),
                    argument], check=True, capture_output=True, cwd=cwd)
    with Started([program]) as running:
        ours = sfbt_command("stack", running.pid)
        theirs = gdb.run(["-p", running.pid], ["bt"], plugin=False)
    assert ours.returncode == 0, ours.stderr
    place = re.compile(r"^#\d+ .* at (\S+:\d+)$", re.M)
    assert place.findall(ours.stdout) == place.findall(theirs), (ours.stdout, theirs)
    expected = {"here": "sleeper.c", "below": "src/sleeper.c", "absolute": str(source),
                "prefix-mapped": "./src/sleeper.c" if dwarf == 5 else "sleeper.c"}[where]
    assert f" at {expected}:" in ours.stdout


def test_lldb_sframe_bt_names_and_main(lldb, program):
    """In LLDB, sframe-bt names the frames LLDB has no frame of its own
    for (inlined calls) by the same qualified names, LLDB's own frames by
    LLDB's names, and the main thread's walk ends at main."""
    commands = []
    for number in (1, 2):
        commands += [f"thread select {number}", "script print('@@sframe')", "sframe-bt",
                     "script print('@@end')"]
    with _started(program) as running:
        out = lldb.run(["-p", running.pid], commands)
    walks = re.findall(r"@@sframe\n(.*?)@@end", out, re.S)
    assert len(walks) == 2, out
    main_thread, worker = (_names(walk) for walk in walks)
    assert main_thread[-1] == "main" and "Backtrace stopped" not in walks[0], walks[0]
    assert "std::thread::join()" in main_thread
    assert "app::Worker<double>::step" in worker


LAMBDAS = r"""
volatile long sink;
__attribute__((noinline)) long leaf(long x) { sink += x; return x; }
template <typename F> __attribute__((noinline)) long apply(F f, long x) { return f(x) + 1; }
namespace n {
struct S { long go(long x); };
long S::go(long x) { auto a = [x](long v) { return leaf(v + x); }; return apply(a, x); }
template <int K> struct T {
    long go(long x) { auto b = [x](long v) { return leaf(v * K + x); }; return apply(b, x); }
};
}
int main(int argc, char **argv)
{
    n::S s;
    n::T<3> t;
    return (int)(s.go(argc) + t.go(argc));
}
"""


def test_lambdas_named_as_bt(gdb, tmp_path):
    """A lambda in a template's member has a linkage name, and GDB prints
    its frames by it demangled, whole (``n::T<3>::go(long)::{lambda(long)#1}
    ::operator()(long) const``, ``apply<...{lambda(long)#1}>(..., long)``,
    the return type dropped); one in a plain function has none
    (``operator()``).  sframe-bt, inline frames and all, names each line
    as bt does (before: ``operator()`` and the parameters cut)."""
    from frame_lines import parsed, to_main, with_kinds
    source = tmp_path / "lambdas.cc"
    source.write_text(LAMBDAS)
    program = tmp_path / "lambdas"
    subprocess.run(["g++", "-O2", "-g", "-Wa,--gsframe", "-o", str(program), str(source)],
                   check=True, capture_output=True)
    commands = ["set print frame-arguments none", "break leaf", "run"]
    for _ in range(2):
        commands += ["echo @@bt\\n", "bt", "echo @@sframe\\n", "sframe-bt -v",
                     "echo @@end\\n", "continue"]
    out = gdb.run([program], commands)
    pairs = re.findall(r"@@bt\n(.*?)@@sframe\n(.*?)@@end", out, re.S)
    assert len(pairs) == 2, out[-3000:]
    for bt, sframe in pairs:
        theirs = [line[2:4] for line in to_main(parsed(bt))]
        ours = [line[2:4] for line in to_main(with_kinds(parsed(sframe)))]
        assert ours == theirs, (bt, sframe)
    named = {line[2] for _, sframe in pairs for line in parsed(sframe)}
    assert "n::T<3>::go(long)::{lambda(long)#1}::operator()(long) const" in named, named
    assert "operator()" in named, named
