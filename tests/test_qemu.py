"""sframe-bt and the SFrame frame unwinder on AArch64 and s390x, end to
end: the committed test programs of tests/cross/ run under qemu-user
(`qemu-aarch64 -cpu max`, `qemu-s390x`) with `-g PORT`, and gdb-multiarch
debugs them through qemu's gdb stub, a remote target with no /proc of
the debuggee.  s390x is big-endian; its SFrame data is v3 with flexible
FDEs (the FP saved in a floating-point register in leaf functions).

Each session stops at the entry of chain_VARIANT, single-steps down to
stop_here_VARIANT (recursion, a 70 KB frame, a variable-length array)
comparing sframe-bt with GDB's own frames at every instruction, stops
after stop_here's prologue for the full comparisons, then steps on back
to main.

gdb 13 against qemu 7.2's stub does not strip pointer-authentication
signatures: qemu reports no `pauth` register feature, so GDB's DWARF
unwinder takes a signed return address at face value and its `bt` ends
at the first signed frame.  For PAC-signed code sframe-bt is checked
against the known call chain instead, and must give clean addresses.

Also here: a PIE calling back through a shared library under qemu (module
and load bias discovery through GDB's shared-library list on a remote
target), and the same on x86-64 through gdbserver, where GDB reads the
files from the target (`target:` paths) and the SFrame data comes from
the target's memory.
"""

import re
import socket
import subprocess

import pytest

from gdb_support import (ROOT, gdb_pcs, run_gdb, sframe_frames,
                         split_sections)
from sfbt.arch import AARCH64

CROSS = ROOT / "tests" / "cross"
STEPS = CROSS / "gdb_steps.py"
QEMU = {"aarch64": ["qemu-aarch64", "-cpu", "max"], "s390x": ["qemu-s390x"]}
# Debian's cross runtime libraries (libc6-arm64-cross, libc6-s390x-cross)
SYSROOT = {"aarch64": "/usr/aarch64-linux-gnu", "s390x": "/usr/s390x-linux-gnu"}
DEPTH = 3
CLEAN = 1 << 48  # user addresses under qemu-aarch64 fit in 48 bits

# (arch, SFrame version, variant, PAC-signed)
STATIC = [("aarch64", "v1", v, v.startswith("pac")) for v in ("O0", "O2", "pac", "pacb")]
STATIC += [("aarch64", "v3", v, v.startswith("pac")) for v in ("O0", "O2", "pac", "pacb")]
STATIC += [("s390x", "v3", v, False) for v in ("O0", "O2", "O2fp")]

_UNWINDER = re.compile(r'get_prev_frame_always_1:\s+-> \{level=(\d+),type=\w+,unwinder="([^"]+)"')


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# what a stub prints when its port was taken between free_port() and bind
_PORT_TAKEN = ("could not open gdbserver", "Can't bind address", "Address already in use")


def with_stub(stub_command, debug, attempts=3, exit_wait=0, **options):
    """Start a gdb stub (qemu -g, gdbserver) on a free port, run
    ``debug(port)`` against it and return what that returns; the stub is
    always killed, after ``exit_wait`` seconds given it to exit (qemu
    writing a core).  A stub that could not listen (the port was taken in
    the meantime) is started again on another port.  ``options`` go to
    subprocess.Popen (cwd, preexec_fn)."""
    for _ in range(attempts):
        port = free_port()
        process = subprocess.Popen(stub_command(port), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, **options)
        try:
            result = debug(port)
            if exit_wait:
                try:
                    process.wait(exit_wait)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            process.kill()
            _, errors = process.communicate(timeout=30)
        if not any(text in errors for text in _PORT_TAKEN):
            return result
    raise AssertionError(f"{stub_command(0)[0]} found no free port: {errors}")


def debug_under_qemu(gdb, arch, program, arguments, commands, sysroot=False):
    """``gdb``'s output for ``commands`` run against ``program``
    under qemu's gdb stub.  gdb retries the connection until qemu listens
    (`set tcp auto-retry`, on by default)."""
    qemu = QEMU[arch] + (["-L", SYSROOT[arch]] if sysroot else [])
    setup = [f"source {STEPS}", "set tcp connect-timeout 30"]
    if sysroot:
        setup += [f"set sysroot {SYSROOT[arch]}",
                  f"set solib-search-path {program.parent}"]
    return with_stub(
        lambda port: qemu + ["-g", str(port), str(program), *arguments],
        lambda port: run_gdb(gdb, [str(program)], setup + [f"target remote 127.0.0.1:{port}"]
                             + commands + ["kill"], timeout=240))


def full_chain(variant):
    """The functions on the stack in stop_here, innermost first."""
    return ([f"stop_here_{variant}", f"with_vla_{variant}", f"large_frame_{variant}"]
            + [f"recurse_{variant}"] * (DEPTH + 1) + [f"chain_{variant}", "main"])


def library_chain(variant):
    """The same for the programs built with -DVIA_LIBRARY."""
    chain = full_chain(variant)
    return chain[:3] + ["twice", "lib_apply"] + chain[3:]


def build_dynamic(directory):
    """(program, library) built here from tests/cross/src with SFrame data
    (-O2): ``directory``/dynamic, chain.c's O2 variant calling back through
    ``directory``/libapply.so (found through $ORIGIN)."""
    source = CROSS / "src"
    library, program = directory / "libapply.so", directory / "dynamic"
    common = ["gcc", "-g", "-O2", "-Wa,--gsframe"]
    subprocess.run(common + ["-fPIC", "-shared", "-o", str(library),
                             str(source / "libapply.c")], check=True)
    subprocess.run(common + ["-fPIE", "-pie", "-DSUFFIX=_O2", "-DVIA_LIBRARY",
                             "-DVARIANTS=X(O2)", str(source / "chain.c"),
                             str(source / "main.c"), "-L", str(directory), "-lapply",
                             "-Wl,-rpath,$ORIGIN", "-o", str(program)], check=True)
    return program, library


def steps_agreed(text, minimum):
    """Every `test-qemu-steps` in the output agreed at every step."""
    assert "MISMATCH" not in text, text[-3000:]
    summaries = re.findall(r"^STEPS (\d+) AGREED (\d+)$", text, re.M)
    assert summaries, text[-3000:]
    for count, agreed in summaries:
        assert int(count) >= minimum and agreed == count, summaries
    return summaries


def unwinders_by_level(text):
    """{frame level: GDB unwinder name} from `set debug frame on` output."""
    return {int(level): name for level, name in _UNWINDER.findall(text)}


@pytest.mark.parametrize("arch,version,variant,pac", STATIC,
                         ids=[f"{a}-{v}-{o}" for a, v, o, _ in STATIC])
def test_static_program_under_qemu(cross_gdb, arch, version, variant, pac):
    program = CROSS / arch / f"chain-{version}"
    chain = full_chain(variant)
    # GDB's own frames, for comparison: the SFrame unwinder off.  For PAC
    # code they are wrong from the first signed return address on, so the
    # steps are checked against the known call chain.
    check = f" {','.join(chain)}" if pac else ""
    out = debug_under_qemu(cross_gdb, arch, program, [variant, str(DEPTH)], [
        "set sframe unwinder off", "set sframe fallback none",
        f"break chain_{variant}", "continue", "delete",
        f"test-qemu-steps 3000 break:stop_here_{variant}{check}",
        "echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v", "info sframe",
        # GDB's bt from the SFrame frame unwinder alone
        "echo ==UNWINDER==\\n", "set sframe unwinder on",
        "maint set dwarf unwinders off", "set debug frame on", "test-gdb-pcs",
        "set debug frame off", "maint set dwarf unwinders on",
        "set sframe unwinder off", "echo ==RETURN==\\n",
        f"test-qemu-steps 3000 function:main{check}"])
    before, stop = out.split("==STOP==\n", 1)
    stop, unwound = stop.split("==UNWINDER==\n", 1)
    unwound, after = unwound.split("==RETURN==\n", 1)
    steps_agreed(before, 30)
    steps_agreed(after, 30)

    frames = sframe_frames(stop)
    names = [name for _, _, name in frames]
    pcs = [pc for _, pc, _ in frames]
    assert names == chain, stop
    assert all(pc < CLEAN for pc in pcs), stop
    assert "Backtrace stopped" not in stop
    assert f"[sframe, chain-{version}]" in stop
    if arch == "s390x" and variant in ("O0", "O2fp"):
        # with_vla's caller row: a v3 flexible FDE (stop_here keeps the FP
        # in a floating-point register)
        assert re.search(rf"with_vla_{variant} at \S*chain.c:\d+  \[flex, chain-v3\]",
                         stop), stop
    assert re.search(rf"SFrame {version}, \d+ FDEs, from file\s+\S*chain-{version}", stop), stop
    (gdb_own,) = gdb_pcs(stop)
    if not pac:
        assert pcs == gdb_own, (stop, [hex(p) for p in gdb_own])
    elif all(pc < CLEAN for pc in gdb_own):
        # a GDB and stub that strip signatures themselves: compare fully
        assert pcs == gdb_own
    else:
        # GDB's first frames (before any signed return address) agree
        assert pcs[:2] == gdb_own[:2]

    # The frame unwinder, with GDB's DWARF unwinders off: a complete bt
    # whose every frame comes from the Python unwinder (s390x's prologue
    # analyzer alone would also get far, hence the check of unwinder names).
    (ours,) = gdb_pcs(unwound)
    assert ours == pcs
    used = unwinders_by_level(out)  # debug output is on stderr, at the end
    assert [used.get(level) for level in range(len(pcs))] == ["python"] * len(pcs), used


@pytest.mark.parametrize("arch,variant", [("aarch64", "O2"), ("s390x", "O0")])
def test_shared_library_under_qemu(cross_gdb, arch, variant):
    """A PIE calling back through libapply.so with the cross C library:
    modules and load biases from GDB's shared-library list on a remote
    target."""
    program = CROSS / arch / "dynamic-v3"
    out = debug_under_qemu(cross_gdb, arch, program, [variant, str(DEPTH)], [
        "set sframe unwinder off", "set sframe fallback none",
        f"break stop_here_{variant}", "continue",
        "echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v", "info sframe",
        "echo ==UNWINDER==\\n", "set sframe unwinder on",
        "maint set dwarf unwinders off", "test-gdb-pcs"], sysroot=True)
    stop, unwound = split_sections(out, "==STOP==")[0].split("==UNWINDER==\n")
    frames = sframe_frames(stop)
    names = [name for _, _, name in frames]
    assert names == library_chain(variant), stop
    (gdb_own,) = gdb_pcs(stop)
    assert [pc for _, pc, _ in frames] == gdb_own
    assert frames[0][1] >= 0x1000000  # a PIE: loaded away from 0
    assert "[sframe, libapply.so]" in stop
    assert re.search(r"SFrame v3, 2 FDEs, from file\s+\S*libapply.so", stop), stop
    assert re.search(r"0x[0-9a-f]+  0x[0-9a-f]+  .*\s/usr/\S+/libc.so.6$", stop, re.M), stop
    (ours,) = gdb_pcs(unwound)
    assert ours == gdb_own


def test_gdbserver_with_files_read_from_the_target(gdb, tmp_path):
    """x86-64 through gdbserver with GDB's default sysroot `target:`: GDB
    reads the files over the remote protocol, so the adapter cannot open
    them; load biases and SFrame data come from the target's memory."""
    program, _ = build_dynamic(tmp_path)
    out = with_stub(
        lambda port: ["gdbserver", "--once", f"127.0.0.1:{port}", str(program), "O2", "3"],
        lambda port: run_gdb(gdb, [], [
            "set tcp connect-timeout 30", f"target remote 127.0.0.1:{port}",
            "set sframe unwinder off", "set sframe fallback none",
            "break stop_here_O2", "continue",
            "echo ==STOP==\\n", "test-gdb-pcs", "sframe-bt -v", "info sframe",
            "kill"], timeout=240))
    stop = split_sections(out, "==STOP==")[0]
    frames = sframe_frames(stop)
    (gdb_own,) = gdb_pcs(stop)
    assert [pc for _, pc, _ in frames] == gdb_own, stop
    assert [name for _, _, name in frames] == library_chain("O2"), stop
    assert "[sframe, libapply.so]" in stop
    assert re.search(r"SFrame v1, \d+ FDEs, from memory\s+target:\S*/dynamic\n", stop), stop
    assert re.search(r"SFrame v1, \d+ FDEs, from memory\s+target:\S*/libapply.so", stop), stop


def test_virtual_address_size_from_a_pac_mask():
    # Linux's PAC mask for 48-bit user addresses: bits 48-54
    assert AARCH64.virtual_address_bits(0x007F000000000000) == 48
    assert AARCH64.virtual_address_bits(0x000F000000000000 << 4) == 52
    assert AARCH64.virtual_address_bits(0) == 48
    assert AARCH64.strip_return_address(0x004C000000400AB4) == 0x400AB4
    assert AARCH64.strip_return_address(0x0040_0123_4567_89AB, 52) == 0x0123_4567_89AB
