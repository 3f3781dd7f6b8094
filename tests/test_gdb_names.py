"""Function names as GDB gives them, where several symbols name one
address: `sfbt stack` on aliases.c (a local function with global, weak
and local aliases, names the assembly gives to a function and to one
inlined, versioned names in libaliases.so) built four ways (with DWARF; symbol tables only; .dynsym
only; the library's symbols in a separate debug file) names each frame as
`gdb -nx` bt does; the symbolizer names every alias's address as
`info symbol` does, minimal symbols whose names GDB prints decoded
(``foo.constprop.0`` as ``foo.constprop``) too; and the C library's
functions (libc6-dbg's debug file) as GDB's frames and `info symbol`
name them, ``__libc_start_main_impl`` of its aliases among them."""

import os
import random
import re
import subprocess

import pytest

from conftest import ROOT, require
from live_harness import Started, sfbt_command
from test_symbols import _gdb_names, _nm

PROGRAMS = ROOT / "tests" / "programs"
FUNCTION_NAMES = ROOT / "tests" / "gdb_function_names.py"
VARIANTS = ("dwarf", "symtab", "dynsym", "debuglink")
_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", re.M)
#: names of minimal symbols GDB prints otherwise (its Ada decoding), and
#: some it leaves alone
DECODED = ["clone.constprop.0", "clone.part.0", "clone.isra.0.cold", "hot.cold",
           "lto.lto_priv.0", "two__parts", "bodyTB", "bodyB", "protN", "label$12",
           "under__3", "wideU61x", "Oadd", "keep___it", "Upper.cold", "dotted.0x",
           "aliasX", "kept"]


def _build(directory, variant):
    """aliases and libaliases.so, built as ``variant`` says, in
    directory/variant; the program's path."""
    out = directory / variant
    out.mkdir()
    flags = ["-O2", "-g"] if variant == "dwarf" else ["-O2"]
    library = out / "libaliases.so"
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", "-DVERSIONED",
                    f"-Wl,--version-script={PROGRAMS / 'libaliases.map'}", "-o", str(library),
                    str(PROGRAMS / "libaliases.c")], check=True, capture_output=True)
    program = out / "aliases"
    subprocess.run(["gcc", *flags, "-o", str(program), str(PROGRAMS / "aliases.c"),
                    str(library), f"-Wl,-rpath,{out}"], check=True, capture_output=True)
    if variant == "dynsym":
        subprocess.run(["strip", str(program), str(library)], check=True)
    elif variant == "debuglink":
        debug = out / "libaliases.so.debug"
        for command in (["objcopy", "--only-keep-debug", library, debug],
                        ["strip", library],
                        ["objcopy", f"--add-gnu-debuglink={debug}", library]):
            subprocess.run([str(word) for word in command], check=True, cwd=out)
    return program


@pytest.fixture(scope="module")
def aliases(tmp_path_factory):
    directory = tmp_path_factory.mktemp("aliases")
    return {variant: _build(directory, variant) for variant in VARIANTS}


def _stack_names(gdb, program):
    """(sfbt stack's, GDB bt's) function names of program's one thread,
    waiting in pause()."""
    with Started([program]) as running:
        ours = sfbt_command("stack", running.pid)
        theirs = gdb.run(["-p", running.pid], ["bt"], plugin=False)
    assert ours.returncode == 0, ours.stderr
    return _FRAME.findall(ours.stdout), _FRAME.findall(theirs)


#: the names each build gives the frames of aliases.c and libaliases.so
EXPECTED = {
    "dwarf": ["wait_local", "step_in_asm", "trio_c", "pair_zlocal", "lib_impl",
              "renamed_in_asm"],
    # the last name by name; a global one before a local one just after it
    "symtab": ["wait_weak", "trio_c", "pair_global", "lib_impl_v1", "renamed_in_asm"],
    "dynsym": ["??", "??", "??", "lib_api", "??"],
    # .dynsym's lib_api before the debug file's lib_impl_v1 at one address
    "debuglink": ["wait_weak", "trio_c", "pair_global", "lib_api", "renamed_in_asm"],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_stack_names_frames_as_gdb_does(gdb, aliases, variant):
    ours, theirs = _stack_names(gdb, aliases[variant])
    assert ours == theirs, (ours, theirs)
    expected = EXPECTED[variant]  # from #1: #0 is in pause()
    assert ours[1:1 + len(expected)] == expected, ours
    print(f"{variant}: {len(ours)} frame names equal to GDB's")


def test_the_c_library_start_frame_is_named_from_its_dwarf(gdb, aliases):
    """__libc_start_main_impl, of five names at its address (GDB's pick
    from its minimal symbols: __libc_start_main, of .dynsym's)."""
    require(_libc_debug_file(), "libc6-dbg is not installed (./install.sh --test-debuggers)")
    ours, theirs = _stack_names(gdb, aliases["dwarf"])
    assert ours == theirs and "__libc_start_main_impl" in ours, (ours, theirs)


@pytest.mark.parametrize("variant", ["symtab", "debuglink"])
def test_aliases_are_named_as_info_symbol_names_them(gdb, aliases, variant):
    from sfbt.debuginfo import DebugFiles
    from sfbt.symbols.symbolizer import file_symbolizer
    compared = 0
    for path in (aliases[variant], aliases[variant].parent / "libaliases.so"):
        debug = path.with_name(path.name + ".debug")  # the names a stripped file left there
        symbols = _nm(debug if debug.exists() else path)
        addresses = sorted({a + step for name, a in symbols.items() for step in (0, 1)
                            if re.match(r"(wait|trio|pair|lib|renamed|step)_", name)})
        assert len(addresses) >= 2, symbols
        symbolizer = file_symbolizer(str(path), None, DebugFiles())
        try:
            ours = [symbolizer.function(address) for address in addresses]
        finally:
            symbolizer.close()
        assert ours == _gdb_names(gdb, path, addresses)
        compared += len(addresses)
    print(f"{variant}: {compared} addresses named as `info symbol` names them")


def test_minimal_symbols_are_printed_as_gdb_prints_them(gdb, tmp_path):
    """GDB prints the names of minimal symbols through its Ada decoding:
    clones without their number, a compiler's suffix in brackets."""
    from sfbt.symbols.symbolizer import FileSymbolizer
    source = tmp_path / "decoded.c"
    source.write_text("".join(
        f'__asm__(".text\\n.globl \\"{name}\\"\\n.type \\"{name}\\",%function\\n'
        f'\\"{name}\\":\\n nop\\n nop\\n.size \\"{name}\\", 2\\n");\n' for name in DECODED)
        + "int main(void) { return 0; }\n")
    program = tmp_path / "decoded"
    subprocess.run(["gcc", "-o", str(program), str(source)], check=True)
    address = _nm(program)
    addresses = [address[name] + 1 for name in DECODED]
    symbols = FileSymbolizer.open(str(program))
    try:
        ours = [symbols.function(a) for a in addresses]
    finally:
        symbols.close()
    assert ours == _gdb_names(gdb, program, addresses)
    assert ours[:4] == ["clone.constprop", "clone.part", "clone.isra[cold]", "hot[cold]"]
    assert ours[-1] == "kept"


def _libc():
    return next((path for path in ("/lib/x86_64-linux-gnu/libc.so.6",
                                   "/lib/aarch64-linux-gnu/libc.so.6")
                 if os.path.exists(path)), None)


def _libc_debug_file():
    from sfbt.debuginfo.search import build_id_path
    from sfbt.elf import read_build_id
    libc = _libc()
    path = build_id_path("/usr/lib/debug", read_build_id(libc)) if libc else None
    return path if path and os.path.exists(path) else None


def test_c_library_functions_are_named_as_gdb_names_them(gdb, tmp_path):
    """2000 addresses in the C library's .text (seeded): the name of
    GDB's frame there (of its DWARF function, in libc6-dbg's debug file,
    else of its minimal symbol) is sfbt's."""
    require(_libc_debug_file(), "libc6-dbg is not installed (./install.sh --test-debuggers)")
    from sfbt.debuginfo import DebugFiles
    from sfbt.elf import read_build_id, read_elf
    from sfbt.symbols.symbolizer import file_symbolizer
    libc = _libc()
    text = read_elf(libc, lambda image: image.section(".text"))
    randomly = random.Random(2026)
    addresses = sorted(randomly.randrange(text.addr, text.addr + text.size)
                       for _ in range(2000))
    symbolizer = file_symbolizer(libc, read_build_id(libc), DebugFiles())
    try:
        ours = [symbolizer.function(address) or "??" for address in addresses]
    finally:
        symbolizer.close()
    listed = tmp_path / "addresses"
    listed.write_text("".join(f"{address:#x}\n" for address in addresses))
    out = gdb.run([], [f"file {libc}", f"source {FUNCTION_NAMES}",
                       f"test-function-names {listed}"], plugin=False)
    theirs = re.findall(r"^FUNCTION-NAME 0x[0-9a-f]+ (.*)$", out, re.M)
    assert len(theirs) == len(addresses), out[-2000:]
    differing = [(hex(a), o, t) for a, o, t in zip(addresses, ours, theirs) if o != t]
    assert not differing, differing[:10]
    print(f"C library: {len(addresses)} addresses named as GDB names them "
          f"({len(set(ours))} functions)")
    assert len(set(ours)) > 500, len(set(ours))
