"""`sfbt stack --core` on cores without a file list (NT_FILE), as
qemu-user writes them, compared with GDB on the same stop.

Each core is made from a program of tests/cross/ (or, for x86-64, one
built here) run under qemu-user's gdb stub with `ulimit -c unlimited`:
GDB (no plugin) stops it in stop_here_VARIANT, prints its own `bt`, and
delivers SIGSEGV, on which qemu writes the guest's core
`qemu_PROG_DATE_PID.core` in its working directory.  `sfbt stack --core
CORE EXE` must then give the frames (PCs and names) that GDB gives live
at that stop, and GDB on the core, down to main.  GDB 13 against qemu's
stub does not strip pointer-authentication signatures, and on a PIE whose
first page qemu did not dump it cannot place the program: there GDB's
frames up to the first it gets wrong must be sfbt's, and sfbt's names the
whole known chain.
"""

import re
import shutil

import pytest

from conftest import require, run_sfbt
from test_qemu import (CLEAN, CROSS, DEPTH, QEMU, SYSROOT, build_dynamic, full_chain,
                       library_chain, with_stub)

QEMU = {**QEMU, "x86_64": ["qemu-x86_64"]}

# (id, arch, program, variant, where the core is made, with the sysroot)
CASES = [
    # stop_here at -O2 is a leaf without a frame: its caller comes from LR
    ("aarch64-static", "aarch64", "chain-v3", "O2", "stop_here_O2", False),
    ("aarch64-pac-ret", "aarch64", "chain-v3", "pac", "stop_here_pac", False),
    ("aarch64-pac-ret-v1", "aarch64", "chain-v1", "pac", "stop_here_pac", False),
    ("aarch64-dynamic", "aarch64", "dynamic-v3", "O2", "stop_here_O2", True),
    ("s390x-static", "s390x", "chain-v3", "O2", "stop_here_O2", False),
    # at the leaf's first instruction: r14 holds the return address (after
    # its prologue the caller's r11 is in f0, which qemu's core lacks)
    ("s390x-static-O0", "s390x", "chain-v3", "O0", "*stop_here_O0", False),
    ("s390x-dynamic", "s390x", "dynamic-v3", "O0", "*stop_here_O0", True),
]

_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(\S+) \(", re.M)
_SFBT_FRAME = re.compile(r"^#(\d+)\s+(0x[0-9a-f]+) in (\S+)", re.M)
_PC = re.compile(r"^PC=(0x[0-9a-f]+)$", re.M)


def gdb_frames(text):
    """[(pc, name)] of GDB's bt, frame 0's pc from the `PC=` line before it
    (GDB's frame lines before that are not its bt's)."""
    text = text[text.index("PC="):]
    frames = []
    for match in _GDB_FRAME.finditer(text):
        pc = match[2] or _PC.search(text)[1]
        frames.append((int(pc, 16), match[3]))
    return frames


def sfbt_frames(text):
    return [(int(pc, 16), name) for _, pc, name in _SFBT_FRAME.findall(text)]


def make_core(gdb, arch, program, arguments, stop, directory, sysroot):
    """(GDB's output at the stop, the core qemu wrote in ``directory``)."""
    require(shutil.which(QEMU[arch][0]) is not None, f"{QEMU[arch][0]} is not installed")
    qemu = QEMU[arch] + (["-L", SYSROOT[arch]] if sysroot else [])
    setup = ["set tcp connect-timeout 30"]
    if sysroot:
        setup += [f"set sysroot {SYSROOT[arch]}", f"set solib-search-path {program.parent}"]

    def limited():
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)

    def stub(port):
        return qemu + ["-g", str(port), str(program), *arguments]

    def debug(port):
        return gdb.run([str(program)], setup + [
            f"target remote 127.0.0.1:{port}", f"break {stop}", "continue",
            'printf "PC=%#lx\\n", $pc', "bt", "echo ==SIGNAL==\\n", "signal SIGSEGV"],
            timeout=240, plugin=False)

    out = with_stub(stub, debug, exit_wait=60, cwd=directory, preexec_fn=limited)
    cores = sorted(directory.glob(f"qemu_{program.name}_*.core"))
    assert len(cores) == 1, (out[-2000:], list(directory.iterdir()))
    return out.split("==SIGNAL==")[0], cores[0]


def gdb_on_core(gdb, program, core, arch, sysroot):
    commands = []
    if sysroot:
        commands += [f"set sysroot {SYSROOT[arch]}", f"set solib-search-path {program.parent}"]
    return gdb.run([str(program), str(core)], commands + ['printf "PC=%#lx\\n", $pc', "bt"],
                   timeout=120, plugin=False)


def agreed_prefix(ours, theirs):
    """How many of GDB's frames ``theirs`` are right: up to its first
    unclean address or unknown name.  They must be ``ours``' first ones."""
    good = 0
    for pc, name in theirs:
        if pc >= CLEAN or name == "??":
            break
        good += 1
    assert ours[:good] == theirs[:good], (ours, theirs)
    return good


def check_stack(gdb, tmp_path, arch, program, arguments, stop, chain, sysroot):
    live, core = make_core(gdb, arch, program, arguments, stop, tmp_path, sysroot)
    command = ["stack", "--core", core, program]
    if sysroot:
        command += ["--sysroot", SYSROOT[arch]]
    result = run_sfbt(*command)
    assert result.returncode == 0, result.stderr
    assert not result.stderr, result.stderr
    ours = sfbt_frames(result.stdout)
    assert [name for _, name in ours] == chain, result.stdout
    assert all(pc < CLEAN for pc, _ in ours), result.stdout
    assert "Backtrace stopped" not in result.stdout, result.stdout

    theirs = gdb_frames(live)
    assert agreed_prefix(ours, theirs) >= 2, live
    on_core = gdb_frames(gdb_on_core(gdb, program, core, arch, sysroot))
    assert on_core[0][0] == ours[0][0], on_core  # the core's PC, named or not
    agreed_prefix(ours, on_core)
    return ours, theirs, on_core, core


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_qemu_core_without_a_file_list(cross_gdb, tmp_path, case):
    name, arch, program_name, variant, stop, sysroot = case
    program = CROSS / arch / program_name
    chain = library_chain(variant) if sysroot else full_chain(variant)
    ours, theirs, on_core, core = check_stack(cross_gdb, tmp_path, arch, program,
                                              [variant, str(DEPTH)], stop, chain, sysroot)
    if not variant.startswith("pac"):
        # GDB's own frames at the stop, every one
        assert ours == theirs
    if arch == "aarch64" and not sysroot and not variant.startswith("pac"):
        assert ours == on_core  # gdb-multiarch places a static program itself
    if name == "aarch64-static":
        # without EXE: the program AT_EXECFN names (a file the core names)
        alone = run_sfbt("stack", "--core", core)
        assert alone.returncode == 0 and not alone.stderr, alone.stderr
        assert sfbt_frames(alone.stdout) == ours
        # the core is of chain-v3, not of chain-v1 nor of an s390x program
        for other, wanted in ((CROSS / "aarch64" / "chain-v1", r"is not a core of \S+chain-v1"),
                              (CROSS / "s390x" / "chain-v3", "is not a program of aarch64")):
            result = run_sfbt("stack", "--core", core, other)
            assert result.returncode == 1
            assert re.fullmatch(rf"sfbt: \S+ ?{wanted}.*\n", result.stderr), result.stderr


def test_x86_64_qemu_core_without_a_file_list(cross_gdb, tmp_path):
    """qemu-x86_64's core of a PIE calling back through a library: the
    same frames as GDB's, live and on the core."""
    program, _ = build_dynamic(tmp_path)
    cores = tmp_path / "cores"
    cores.mkdir()
    ours, theirs, on_core, _ = check_stack(cross_gdb, cores, "x86_64", program, ["O2", "3"],
                                           "stop_here_O2", library_chain("O2"), False)
    assert ours == on_core
    assert ours[:3] == theirs[:3]


# -- the link map reader over synthetic memory --------------------------------

class Memory:
    """Little-endian memory of whole 4 KiB pages, zeros but for what is put
    in them; a read that reaches a page never put fails."""

    PAGE = 0x1000

    def __init__(self):
        self.pages = {}
        self.reads = 0

    def put(self, address, data):
        for offset, byte in enumerate(data):
            page = self.pages.setdefault((address + offset) // self.PAGE, bytearray(self.PAGE))
            page[(address + offset) % self.PAGE] = byte
        return self

    def read(self, address, size):
        from sfbt.errors import TargetMemoryError
        self.reads += 1
        data = b""
        for page in range(address // self.PAGE, (address + size - 1) // self.PAGE + 1):
            if page not in self.pages:
                raise TargetMemoryError(address, size)
            data += self.pages[page]
        start = address % self.PAGE
        return data[start:start + size]


def link_map_memory(names, r_debug=0x1000, first=0x2000, loop_to=None):
    """r_debug at ``r_debug`` and a link map of the program (no name) then
    one entry per name, each 0x100 bytes apart from ``first``; the last
    entry's l_next is ``loop_to`` (0: the end)."""
    import struct
    memory = Memory().put(r_debug, struct.pack("<iiQ", 1, 0, first))
    entries = [None, *names]
    for index, name in enumerate(entries):
        at = first + 0x100 * index
        following = at + 0x100 if index + 1 < len(entries) else (loop_to or 0)
        name_at = at + 0x80 if name is not None else 0
        memory.put(at, struct.pack("<QQQQQ", 0x1000 * index, name_at, 0, following, 0))
        if name is not None:
            memory.put(name_at, name)
    return memory


def test_link_map_lists_the_libraries_after_the_program():
    from sfbt.live.linkmap import read_link_map
    memory = link_map_memory([b"/lib/libc.so.6\0", b"linux-vdso.so.1\0"])
    found = read_link_map(memory.read, 0x1000, "<")
    assert found.problem is None
    assert [(e.load_bias, e.name) for e in found.entries] == [
        (0x1000, "/lib/libc.so.6"), (0x2000, "linux-vdso.so.1")]


def test_a_link_map_that_loops_ends_with_the_entries_before():
    from sfbt.live.linkmap import read_link_map
    memory = link_map_memory([b"/lib/a.so\0", b"/lib/b.so\0"], loop_to=0x2100)
    found = read_link_map(memory.read, 0x1000, "<")
    assert [e.name for e in found.entries] == ["/lib/a.so", "/lib/b.so"]
    assert found.problem == "the link map loops back to its entry at 0x2100"


def test_a_bogus_pointer_ends_the_link_map():
    from sfbt.live.linkmap import read_link_map
    memory = link_map_memory([b"/lib/a.so\0"], loop_to=0xDEAD0000)
    found = read_link_map(memory.read, 0x1000, "<")
    assert [e.name for e in found.entries] == ["/lib/a.so"]
    assert found.problem == "a link map entry at 0xdead0000 cannot be read"
    found = read_link_map(memory.read, 0xBAD000, "<")
    assert found == ([], "r_debug at 0xbad000 cannot be read")


def test_a_huge_or_unreadable_name_is_not_read_past_its_bound():
    from sfbt.live.linkmap import MAX_NAME, read_link_map
    memory = link_map_memory([b"/lib/a.so\0", b"/" * (1 << 20)])
    found = read_link_map(memory.read, 0x1000, "<")
    assert [e.name for e in found.entries] == ["/lib/a.so"]
    assert "cannot be read or is longer than 4096 bytes" in found.problem
    assert memory.reads < 10 + MAX_NAME // 256 + 2  # read a chunk at a time, then stopped
    # a name that runs, without its NUL, into memory that cannot be read
    memory = link_map_memory([b"/lib/a.so\0"])
    memory.put(0x2108, (0x2FF8).to_bytes(8, "little")).put(0x2FF8, b"/lib/abc")
    found = read_link_map(memory.read, 0x1000, "<")
    assert found.entries == [] and "(at 0x2ff8) cannot be read" in found.problem


def test_a_link_map_longer_than_the_bound_is_cut():
    """A chain of distinct entries that never ends (each made as read)."""
    import struct
    from sfbt.errors import TargetMemoryError
    from sfbt.live.linkmap import MAX_ENTRIES, read_link_map

    def read(address, size):
        if address == 0x1008:  # r_debug.r_map
            return struct.pack("<Q", 0x10000)[:size]
        if address >= 0x10000 and address % 0x100 == 0:
            return struct.pack("<QQQQ", 0, address + 0x80, 0, address + 0x100)[:size]
        if address % 0x100 == 0x80:
            return b"/lib/x.so\0"[:size]
        raise TargetMemoryError(address, size)
    found = read_link_map(read, 0x1000, "<")
    assert len(found.entries) == MAX_ENTRIES - 1
    assert found.problem == f"the link map has more than {MAX_ENTRIES} entries"


def test_r_debug_comes_from_dt_debug():
    import struct
    from sfbt.live.linkmap import r_debug_address
    dynamic = struct.pack("<qQqQqQ", 1, 5, 21, 0x7000, 0, 0)
    assert r_debug_address(Memory().put(0x500, dynamic).read, 0x500, len(dynamic), "<") == 0x7000
    unset = struct.pack("<qQqQ", 21, 0, 0, 0)  # a static program, or ld.so not there yet
    assert r_debug_address(Memory().put(0x500, unset).read, 0x500, len(unset), "<") is None
    after_null = struct.pack("<qQqQ", 0, 0, 21, 0x7000)
    assert r_debug_address(Memory().put(0x500, after_null).read, 0x500, 32, "<") is None
    assert r_debug_address(Memory().read, 0x500, 32, "<") is None  # not in the core
    big_endian = struct.pack(">qQqQ", 21, 0x7000, 0, 0)
    assert r_debug_address(Memory().put(0x500, big_endian).read, 0x500, 32, ">") == 0x7000


def test_libraries_from_the_link_map_are_read_as_the_core_says(cross_gdb, tmp_path):
    """A library the link map names is a file the core names: read only if
    the core's owner could read it (here: in a sysroot under a directory
    only root may search), else its frames are unknown and one warning
    line says why; --trust-files reads it."""
    import os
    require(os.geteuid() == 0, "a core owned by another user needs root")
    program = CROSS / "aarch64" / "dynamic-v3"
    _, core = make_core(cross_gdb, "aarch64", program, ["O2", str(DEPTH)], "stop_here_O2",
                        tmp_path, True)
    sysroot = tmp_path / "sysroot"
    copy = sysroot / str(program.parent / "libapply.so").lstrip("/")
    copy.parent.mkdir(parents=True)
    shutil.copy(program.parent / "libapply.so", copy)
    os.chown(core, 65534, 65534)
    refused = run_sfbt("stack", "--core", core, program, "--sysroot", sysroot)
    assert refused.returncode == 0, refused.stderr
    assert re.fullmatch(rf"sfbt: warning: {re.escape(str(copy))}: not read: the core's "
                        r"owner \(user 65534, group 65534\) may not search "
                        rf"{re.escape(str(tmp_path))} .*; its frames are unknown "
                        r"\(--trust-files reads it\)\n", refused.stderr), refused.stderr
    names = [name for _, name in sfbt_frames(refused.stdout)]
    assert names[:3] == library_chain("O2")[:3] and "twice" not in names, refused.stdout
    trusted = run_sfbt("stack", "--core", core, program, "--sysroot", sysroot,
                       "--trust-files")
    assert not trusted.stderr, trusted.stderr
    assert [name for _, name in sfbt_frames(trusted.stdout)] == library_chain("O2")


def _file_offset(core, address):
    """Where the core file holds the byte at ``address``."""
    from sfbt.elf import PT_LOAD, ElfImage
    with open(core, "rb") as stream:
        for segment in ElfImage.from_file(stream, str(core)).segments():
            if segment.type == PT_LOAD and segment.vaddr <= address < segment.vaddr + \
                    segment.filesz:
                return segment.offset + address - segment.vaddr
    raise AssertionError(f"{address:#x} is not in {core}")


def test_a_core_whose_link_map_loops(cross_gdb, tmp_path):
    """The last link map entry of a real core made to point back at the
    first library's: the libraries before are found, one warning line
    says where the list ended, the stack is whole."""
    from sfbt.elf import read_elf
    from sfbt.live.corefile import PT_DYNAMIC, Core
    from sfbt.live.linkmap import L_NEXT, r_debug_address, read_link_map
    program = CROSS / "aarch64" / "dynamic-v3"
    _, core = make_core(cross_gdb, "aarch64", program, ["O2", str(DEPTH)], "stop_here_O2",
                        tmp_path, True)
    dynamic = read_elf(str(program), lambda image: next(
        s for s in image.segments() if s.type == PT_DYNAMIC))
    opened = Core(str(core), str(program), sysroot=SYSROOT["aarch64"])
    try:  # the PIE's first PT_LOAD is at 0: its first mapping's start is its bias
        bias = next(m.start for m in opened.mappings if m.path == str(program))
        r_debug = r_debug_address(opened.read_memory, bias + dynamic.vaddr, dynamic.memsz, "<")
        entries = read_link_map(opened.read_memory, r_debug, "<").entries
    finally:
        opened.close()
    assert [e.name.rsplit("/", 1)[-1] for e in entries] == [
        "libapply.so", "libc.so.6", "ld-linux-aarch64.so.1"]
    with open(core, "r+b") as stream:
        stream.seek(_file_offset(core, entries[-1].address + L_NEXT))
        stream.write(entries[0].address.to_bytes(8, "little"))
    result = run_sfbt("stack", "--core", core, program, "--sysroot", SYSROOT["aarch64"])
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"sfbt: warning: {core}: libraries after the first 3 left out: "
                             f"the link map loops back to its entry at "
                             f"{entries[0].address:#x}\n")
    assert [name for _, name in sfbt_frames(result.stdout)] == library_chain("O2")


def test_sysroot_for_the_libraries_a_file_list_names(gdb, tmp_path):
    """--sysroot applies to the libraries NT_FILE names too (a core of
    another machine): a gcore of a native program, its library mirrored
    under a sysroot.  The mirror is the file read (a core owned by nobody
    cannot have it read there: the warning names it), the stack the same."""
    import os
    require(os.geteuid() == 0, "a core owned by another user needs root")
    program, library = build_dynamic(tmp_path)
    core = tmp_path / "core"
    gdb.run([str(program)], ["break stop_here_O2", "run O2 3", f"gcore {core}"],
            timeout=120, plugin=False)
    sysroot = tmp_path / "sysroot"
    mirror = sysroot / str(library).lstrip("/")
    mirror.parent.mkdir(parents=True)
    shutil.copy(library, mirror)
    plain = run_sfbt("stack", "--core", core, program)
    assert plain.returncode == 0 and not plain.stderr, plain.stderr
    assert [name for _, name in sfbt_frames(plain.stdout)] == library_chain("O2")
    mirrored = run_sfbt("stack", "--core", core, program, "--sysroot", sysroot)
    assert mirrored.stdout == plain.stdout and not mirrored.stderr, mirrored.stderr
    os.chown(core, 65534, 65534)
    refused = run_sfbt("stack", "--core", core, program, "--sysroot", sysroot)
    assert f"sfbt: warning: {mirror}: not read:" in refused.stderr, refused.stderr
    assert "twice" not in refused.stdout


def _aarch64_core(notes):
    """An AArch64 core's bytes: its ELF header and one PT_NOTE holding
    ``notes`` [(name, kind, desc)]."""
    import struct
    body = b""
    for name, kind, desc in notes:
        body += struct.pack("<III", len(name) + 1, len(desc), kind)
        body += (name + b"\0").ljust((len(name) + 4) & ~3, b"\0") + desc
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack(
        "<HHIQQQIHHHHHH", 4, 183, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    note_header = struct.pack("<IIQQQQQQ", 4, 4, 120, 0, 0, len(body), 0, 4)
    return header + note_header + body


def test_a_pac_mask_note_sets_the_bits_kept(tmp_path):
    """NT_ARM_PAC_MASK (a LINUX note, as the kernel writes it): a 52-bit
    address space keeps 52 bits of a signed return address; without the
    note, 48."""
    import struct
    from sfbt.live.corefile import Core
    prstatus = bytearray(392)
    struct.pack_into("<i", prstatus, 32, 7)
    struct.pack_into("<33Q", prstatus, 112, *range(31), 0x7FFF0000, 0x400000)
    masks = struct.pack("<QQ", 0x00F0 << 48, 0x00F0 << 48)  # bits 52-55
    for notes, bits in (([], None), ([(b"LINUX", 0x406, masks)], 52)):
        path = tmp_path / f"core-{bits}"
        path.write_bytes(_aarch64_core([(b"CORE", 1, bytes(prstatus))] + notes))
        core = Core(str(path))
        try:
            assert core.virtual_address_bits == bits
            (state,) = core.thread_states()
            assert state.tid == 7 and state.registers[32] == 0x400000
        finally:
            core.close()
