"""Building the C test programs and driving the real gdb in batch mode."""

import re
import subprocess

from conftest import ROOT

PROGRAMS = ROOT / "tests" / "programs"
GDB_ENTRY = ROOT / "gdb" / "sfbt_gdb.py"
GDB_PCS = ROOT / "tests" / "gdb_pcs.py"

OPTIMIZATIONS = {"O0": ["-O0"], "O2": ["-O2", "-fomit-frame-pointer"]}


def compile_program(outdir, name, optimization, pie, sources, libraries=()):
    """Compile sources from tests/programs with SFrame data (gas --gsframe)."""
    output = outdir / name
    flags = ["-g", "-Wa,--gsframe", *OPTIMIZATIONS[optimization]]
    flags += ["-fPIE", "-pie"] if pie else ["-fno-pie", "-no-pie"]
    command = ["gcc", *flags, "-o", str(output),
               *(str(PROGRAMS / s) for s in sources)]
    for library in libraries:
        command += [str(library), f"-Wl,-rpath,{library.parent}"]
    subprocess.run(command + ["-lpthread"], check=True, capture_output=True)
    return output


def variant_id(variant):
    """Test id of an (optimization, pie) pair: O2-pie, O0-nopie."""
    opt, pie = variant
    return f"{opt}-{'pie' if pie else 'nopie'}"


def build_recurse(build_dir, opt, pie):
    """recurse.c with libapply.so: deep recursion, a library callback, alloca."""
    out = build_dir / f"recurse-{opt}-{pie}"
    out.mkdir(exist_ok=True)
    library = compile_library(out, "libapply.so", opt, ["libapply.c"])
    return compile_program(out, "recurse", opt, pie, ["recurse.c"], [library])


def compile_library(outdir, name, optimization, sources):
    output = outdir / name
    subprocess.run(["gcc", "-g", "-Wa,--gsframe", "-shared", "-fPIC",
                    *OPTIMIZATIONS[optimization], "-o", str(output),
                    *(str(PROGRAMS / s) for s in sources)],
                   check=True, capture_output=True)
    return output


def run_gdb(arguments, commands, timeout=300, gdb="gdb"):
    """Run gdb -batch with the plugin loaded; return its whole output.
    ``gdb`` names the debugger (gdb-multiarch for the qemu tests)."""
    command = [gdb, "-nx", "-batch", "-ex", "set pagination off",
               "-ex", "set confirm off", "-ex", f"source {GDB_ENTRY}",
               "-ex", f"source {GDB_PCS}"]
    for line in commands:
        command += ["-ex", line]
    result = subprocess.run(command + list(arguments), capture_output=True,
                            text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return result.stdout + result.stderr


_FRAME = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+) in (\S+)", re.M)


def sframe_frames(text):
    """[(level, pc, function)] from sframe-bt output."""
    return [(int(m[1]), int(m[2], 16), m[3]) for m in _FRAME.finditer(text)]


def gdb_pcs(text):
    """Each `test-gdb-pcs` line, as a list of PCs."""
    return [[int(p, 16) for p in line.split()[1:]]
            for line in text.splitlines() if line.startswith("GDB-PCS")]


def split_sections(text, marker):
    """Output split at lines equal to ``marker``."""
    return text.split(marker + "\n")[1:]
