"""Building the C test programs and driving a real gdb in batch mode."""

import re
import subprocess

from conftest import ROOT

PROGRAMS = ROOT / "tests" / "programs"
GDB_PCS = ROOT / "tests" / "gdb_pcs.py"

OPTIMIZATIONS = {"O0": ["-O0"], "O2": ["-O2", "-fomit-frame-pointer"]}


def compile_program(outdir, name, optimization, pie, sources, libraries=()):
    """Compile sources from tests/programs with SFrame data (gas --gsframe),
    once per output path: every debugger of the matrix debugs the same
    binary."""
    output = outdir / name
    if output.exists():
        return output
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
    if output.exists():
        return output
    subprocess.run(["gcc", "-g", "-Wa,--gsframe", "-shared", "-fPIC",
                    *OPTIMIZATIONS[optimization], "-o", str(output),
                    *(str(PROGRAMS / s) for s in sources)],
                   check=True, capture_output=True)
    return output


def strip_eh_frame(path):
    """Leave ``path`` SFrame-only: its .eh_frame and .eh_frame_hdr removed."""
    subprocess.run(["objcopy", "--remove-section", ".eh_frame", "--remove-section",
                    ".eh_frame_hdr", str(path)], check=True, capture_output=True)


def run_gdb(gdb, arguments, commands, timeout=300, environment=None):
    """Run ``gdb`` (a tests/debuggers.Debugger) in batch mode with the
    plugin and the `test-gdb-pcs` command loaded; its whole output."""
    return gdb.run(arguments, commands, timeout, extra_files=[GDB_PCS],
                   environment=environment)


_FRAME = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+) in (\S+)", re.M)


def sframe_frames(text):
    """[(level, pc, function)] from sframe-bt output."""
    return [(int(m[1]), int(m[2], 16), m[3]) for m in _FRAME.finditer(text)]


#: the FILE:LINE of frame #0 in a backtrace GDB's bt, sframe-bt or
#: cbf-load printed (``#0  0x... in f at file.c:14``)
FRAME0_PLACE = re.compile(r"^#0 .* at (\S+):(\d+)$", re.M)


def frame0_place(text, pattern=FRAME0_PLACE):
    """(file, line) of frame #0 in text, as ``pattern`` finds it."""
    found = pattern.search(text)
    assert found, text[-2000:]
    return found[1], int(found[2])


def gdb_pcs(text):
    """Each `test-gdb-pcs` line, as a list of PCs."""
    return [[int(p, 16) for p in line.split()[1:]]
            for line in text.splitlines() if line.startswith("GDB-PCS")]


def split_sections(text, marker):
    """Output split at lines equal to ``marker``."""
    return text.split(marker + "\n")[1:]
