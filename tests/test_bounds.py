"""Every read bounded: image maps that expand a few kilobytes into
gigabytes, standard input without an end, cores that lie or change.  Each
command runs under a 300 MB address-space limit and a time limit, and ends
in its output or one line naming the file and offset."""

import os
import resource
import struct
import subprocess
import sys

from conftest import PLUGIN
from crafted import (EM_AARCH64, PAGE, STACK, archive_of_maps, core_file, doubling_image_map,
                     nt_file, one_image_maps, record_offsets, stack_core, x86_64_prstatus)
from sfbt.archive.imagemap import (DecodeBudget, Image, ImageMapError, PerImageMap,
                                   decode_image_map, image_finder)
from sfbt.archive.store import MAX_ARCHIVE_DECODED_BYTES, parse_archive

MEMORY = 300 << 20


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_bounded(*args, input=None, stdin=None, seconds=60):
    """python3 -m sfbt ARGS under the memory limit, killed after seconds."""
    return subprocess.run([sys.executable, "-m", "sfbt", *map(str, args)],
                          capture_output=True, input=input, stdin=stdin,
                          env=dict(os.environ, PYTHONPATH=str(PLUGIN)),
                          preexec_fn=_limited, timeout=seconds)


def one_line(result, *words):
    """The one error line of a result (bytes), which holds each of words."""
    lines = result.stderr.decode("utf-8", "replace").splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and "Traceback" not in lines[0], result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# -- image maps ----------------------------------------------------------------

def test_a_doubling_map_alone_fits_the_limit_of_one_map():
    decoded = decode_image_map(doubling_image_map())
    assert len(doubling_image_map()) < 4000
    assert sum(len(image.path) for image in decoded.images) > 16_000_000


def test_the_limit_is_on_all_of_an_archives_maps(tmp_path):
    """64 maps of 3.5 KB, each decoding to 16 MB: the archive as a whole
    may decode to 64 MiB, so the fifth map ends it, at its offset, after
    the traces before it are printed."""
    data = archive_of_maps([doubling_image_map(n) for n in range(64)], traces_first=2)
    fifth = record_offsets(data)[5 + 4] + 5  # its payload
    path = tmp_path / "maps.sfbt"
    path.write_bytes(data)
    for command in (["cbf", "decode"], ["fold"], ["flame", "-o", tmp_path / "f.svg"]):
        result = run_bounded(*command, path)
        one_line(result, f"{path}+{fifth:#x}: image map: ",
                 f"the archive's image maps expand to more than {MAX_ARCHIVE_DECODED_BYTES}")
        if command == ["fold"]:
            assert result.stdout == b"0x400000 1\n0x400001 1\n"
    assert (tmp_path / "f.svg").exists()  # the stacks before the damage are drawn
    archive, error = parse_archive(data, "maps.sfbt")
    assert len(archive.image_maps) == 5 and error.offset == fifth


def test_each_map_counts_against_the_limit(tmp_path):
    """Maps of 11 bytes cost their objects and lookup tables: 60,000 of
    them pass the limit (50,000 would not, and fold in about 111 MB)."""
    data = archive_of_maps(one_image_maps(60_000), traces_first=1)
    path = tmp_path / "many.sfbt"
    path.write_bytes(data)
    result = run_bounded("fold", path)
    line = one_line(result, "the archive's image maps expand to more than")
    assert result.stdout == b"0x400000 1\n"
    offset = int(line.split("+")[1].split(":")[0], 16) - 5
    assert 50_000 < record_offsets(data).index(offset) - 3 < 60_000


def test_a_shared_budget_stops_the_second_map():
    budget = DecodeBudget(20 << 20, "all maps")
    decode_image_map(doubling_image_map(0), budget)
    try:
        decode_image_map(doubling_image_map(1), budget)
        raised = None
    except ImageMapError as error:
        raised = str(error)
    assert raised is not None and "all maps expand to more than 20971520 bytes" in raised


def test_image_finder_answers_as_a_scan_of_the_images_in_order():
    import random
    rng = random.Random(21)
    for _ in range(3000):
        images = []
        for _ in range(rng.randrange(9)):
            base = rng.randrange(60)
            images.append(Image("", base, base + rng.randrange(-3, 20)))
        find = image_finder(images)
        for address in range(-2, 90):
            expected = next((i for i in images if i.base <= address < i.end_of_text), None)
            assert find(address) is expected


def test_per_image_map_makes_each_once_while_they_fit():
    made = []
    kept = PerImageMap(lambda images: made.append(images) or len(made))
    maps = [[Image("", n, n + 1)] * 1000 for n in range(200)]
    for _ in range(3):
        for images in maps:
            kept(images)
    assert len(made) == 200  # traces taking turns among 200 maps: each made once


# -- standard input ----------------------------------------------------------------

def _zeros():
    return open("/dev/zero", "rb")


def test_filters_read_standard_input_a_bounded_line_at_a_time(tmp_path):
    for command in (["lws", "decode"], ["lws", "encode"], ["cbf", "encode"],
                    ["cbf", "decode", "-"], ["fold", "-"],
                    ["flame", "-", "-o", tmp_path / "f.svg"]):
        with _zeros() as zeros:
            result = run_bounded(*command, stdin=zeros)
        one_line(result, "sfbt: <stdin>: line 1 is longer than 1048576 bytes")
    assert not (tmp_path / "f.svg").exists()


def test_lws_filters_pass_lines_through_as_bytes():
    line = b"x\xff\r ~b#size: 16, 0x401000 0x7f0000001000 \n"
    encoded = run_bounded("lws", "encode", input=line)
    assert encoded.returncode == 0, encoded.stderr
    assert encoded.stdout.startswith(b"x\xff\r ~m#") and encoded.stdout.endswith(b"\n")
    decoded = run_bounded("lws", "decode", input=encoded.stdout)
    assert decoded.stdout == line


def test_cbf_encode_stops_at_the_frames_a_trace_decodes_to():
    from sfbt.archive.cbf import DEFAULT_LIMIT, decode
    text = b"pc 0x401000\n" + b"".join(b"ra %#x\n" % (0x400000 + n) for n in range(DEFAULT_LIMIT))
    result = run_bounded("cbf", "encode", input=text)
    one_line(result, f"<stdin>: line {DEFAULT_LIMIT + 1}: more than {DEFAULT_LIMIT} frames")
    assert result.stdout == b""
    fits = run_bounded("cbf", "encode", input=text[text.index(b"\n") + 1:] + b"truncated\n")
    assert fits.returncode == 0, fits.stderr
    trace = decode(fits.stdout)
    assert len(trace.frames) == DEFAULT_LIMIT and trace.truncated


def test_an_archive_on_standard_input_is_copied_a_record_at_a_time(tmp_path):
    from sfbt.archive.store import MAGIC
    data = archive_of_maps([], traces_first=3)
    path = tmp_path / "a.sfbt"
    path.write_bytes(data)
    assert run_bounded("fold", "-", input=data).stdout == run_bounded("fold", path).stdout
    damaged = run_bounded("fold", "-", input=data + b"\x07" * 100)
    assert damaged.stdout == b"0x400000 1\n0x400001 1\n0x400002 1\n"
    one_line(damaged, f"sfbt: <stdin>+{len(data):#x}: ")
    garbage = run_bounded("cbf", "decode", "-", input=MAGIC + bytes(1 << 20))
    one_line(garbage, "sfbt: <stdin>+0x8: ")


# -- cores ---------------------------------------------------------------------------

def test_a_crafted_core_walks(tmp_path):
    """The crafted core of the tests below, whole: its two frames."""
    core = tmp_path / "c.core"
    core.write_bytes(stack_core())
    result = run_bounded("stack", "--core", core)
    assert result.returncode == 0, result.stderr
    assert b"#1  0x0000000000401234 in ?? ()" in result.stdout


def test_a_fifo_as_core_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    one_line(run_bounded("stack", "--core", fifo, seconds=30),
             f"sfbt: {fifo}: not a regular file (a FIFO)")


def test_a_fifo_named_by_nt_file_is_not_read(tmp_path):
    """The stack is not dumped: its memory is in a mapped file, a FIFO."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    core = tmp_path / "c.core"
    core.write_bytes(stack_core([(STACK, STACK + PAGE, 0, str(fifo))], dump_stack=False))
    result = run_bounded("stack", "--core", core, seconds=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(b"Backtrace stopped: Cannot access memory at "
                                  b"address 0x7ff000000108\n")


def test_registers_of_another_machine_are_refused(tmp_path):
    core = tmp_path / "c.core"
    core.write_bytes(stack_core(machine=EM_AARCH64))  # x86-64 notes
    one_line(run_bounded("stack", "--core", core),
             f"sfbt: {core}: an NT_PRSTATUS note of 336 bytes, not the 392 of aarch64")
    short = tmp_path / "short.core"
    short.write_bytes(stack_core(prstatus_size=200))
    one_line(run_bounded("stack", "--core", short), "NT_PRSTATUS note of 200 bytes")


def test_short_notes_are_refused(tmp_path):
    prstatus = (1, x86_64_prstatus(1, 0x401000, STACK))
    lying = nt_file([(0x400000, 0x401000, 0, "/bin/true")])[:20]  # one mapping, cut
    cases = {"file": [prstatus, (0x46494C45, lying)], "psinfo": [prstatus, (3, b"x" * 20)]}
    for name, notes in cases.items():
        core = tmp_path / f"{name}.core"
        core.write_bytes(core_file(notes))
        one_line(run_bounded("stack", "--core", core), f"sfbt: {core}: an NT_")


TRUNCATE_WHILE_WALKING = """
import os, sys
from sfbt import cli
from sfbt.live.session import SnapshotSession
path = sys.argv[1]
target = SnapshotSession.target
def truncating_target(self, *args):
    os.truncate(path, 0x1000)  # the dumped stack page is gone, as the walk begins
    return target(self, *args)
SnapshotSession.target = truncating_target
sys.exit(cli.main(["stack", "--core", path]))
"""


def test_a_core_truncated_while_it_is_read(tmp_path):
    core = tmp_path / "c.core"
    core.write_bytes(stack_core())
    result = subprocess.run([sys.executable, "-c", TRUNCATE_WHILE_WALKING, str(core)],
                            capture_output=True, env=dict(os.environ, PYTHONPATH=str(PLUGIN)),
                            timeout=60)
    # the made-up core names no file: a warning says so before the walk
    named = b"the core names no file (no NT_FILE, no AT_EXECFN)"
    result.stderr = b"".join(line for line in result.stderr.splitlines(True)
                             if named not in line)
    one_line(result, f"sfbt: {core}: the core file changed while it was read")
    assert result.stdout == b""


def test_cbf_load_in_gdb_stops_at_the_archive_limit(gdb, tmp_path):
    """cbf-load reads archives as the command line does: the maps that
    needed 1 GB stop at the limit, and GDB stays small."""
    from conftest import FIXTURES
    from gdb_support import run_gdb
    path = tmp_path / "maps.sfbt"
    path.write_bytes(archive_of_maps([doubling_image_map(n) for n in range(64)]))
    out = run_gdb(gdb, [FIXTURES / "v3" / "x86_64" / "callchain-O2"], [
        f"cbf-load {path}", "python import resource; print('MAXRSS', "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"], timeout=120)
    assert "Backtrace 1, captured once" in out
    assert "the archive's image maps expand to more than 67108864 bytes" in out
    assert "Traceback" not in out and "Python Exception" not in out
    peak = int(out.split("MAXRSS ")[1].split()[0])  # KiB
    assert peak < MEMORY >> 10, out


def test_pn_xnum_cores_that_lie_are_refused(tmp_path):
    """e_phnum PN_XNUM (65,535 or more headers, their count in section
    header 0's sh_info): a count below PN_XNUM, one past the headers read
    (a core claiming 2**32 - 1 mappings), or no section header to hold
    it: one line each, nothing read past the bound."""
    def lying(count, section=True):
        data = bytearray(stack_core())
        struct.pack_into("<H", data, 56, 0xFFFF)  # e_phnum
        if section:
            shoff = len(data)
            header = bytearray(64)
            struct.pack_into("<I", header, 44, count)  # sh_info
            data += header
            struct.pack_into("<Q", data, 40, shoff)  # e_shoff
            struct.pack_into("<HH", data, 58, 64, 1)  # e_shentsize, e_shnum
        return bytes(data)
    for name, data, said in (
            ("few", lying(3), "counted 3 in section header 0 (fewer than 65535)"),
            ("many", lying(0xFFFFFFFF), "4294967295 program headers (PN_XNUM), more than "
                                        "the 299593 read"),
            ("none", lying(0, section=False), "no section header to give their count")):
        core = tmp_path / f"{name}.core"
        core.write_bytes(data)
        one_line(run_bounded("stack", "--core", core), said)
