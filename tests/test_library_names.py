"""sfbt stack says a library's frames are `from` the name GDB gives the
library: the dynamic linker's name for it (the link map's ``l_name``, as
GDB opens it), not the path /proc/PID/maps or a core's NT_FILE give, which
differ where the library was loaded through a link (issue 31's last
difference: ``?? from /usr/lib/x86_64-linux-gnu/libgcc_s.so.1`` where
``gdb -nx -p`` says ``?? from /lib/x86_64-linux-gnu/libgcc_s.so.1``, /lib
a link to /usr/lib); the vDSO's frames name no library, as GDB's.

Checked against `gdb -nx` (every GDB of the matrix) at the same stop of a
program that loads a stripped library through a linked directory, by an
absolute and a relative name, and on the process's core; and on synthetic
link maps, where a name that is not the mapped file is not shown."""

import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from conftest import PLUGIN
from frame_lines import parsed
from gdb_support import compile_library, compile_program
from live_harness import wait_stopped

LIBRARY = "liblinked_name.so"


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """(directory, program): the library stripped in directory/real,
    directory/linkdir a link to real."""
    directory = tmp_path_factory.mktemp("linked")
    (directory / "real").mkdir()
    library = compile_library(directory / "real", LIBRARY, "O2", ["liblinked_name.c"])
    subprocess.run(["strip", str(library)], check=True)
    (directory / "linkdir").symlink_to("real")
    program = compile_program(directory, "linked_name", "O0", True, ["linked_name.c"])
    return directory, program


class Stopped:
    """The program started in ``cwd`` with ``argument``, stopped with
    SIGSTOP once it spins; killed on exit."""

    def __init__(self, program, argument, cwd):
        self.process = subprocess.Popen([str(program), argument], cwd=cwd,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout.readline().strip() == "ready"
        self.pid = self.process.pid

    def stop(self):
        """Stop it where it spins: not in a system call (the puts before)."""
        for _ in range(100):
            os.kill(self.pid, signal.SIGSTOP)
            wait_stopped(self.pid)
            with open(f"/proc/{self.pid}/syscall") as stream:
                if stream.read().split()[0] == "-1":
                    return
            self.go_on()
            time.sleep(0.05)
        raise AssertionError(f"process {self.pid} is still in a system call")

    def go_on(self):
        os.kill(self.pid, signal.SIGCONT)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.process.kill()
        self.process.wait()


def sfbt_stack(arguments, cwd):
    result = subprocess.run([sys.executable, "-m", "sfbt", "stack", *map(str, arguments)],
                            capture_output=True, text=True, timeout=120, cwd=cwd,
                            env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout


def gdb_bt(gdb, arguments, cwd):
    """`gdb -nx`'s bt (not the frame it prints on loading a core), run in
    ``cwd`` (where GDB looks for a relative library name first, as the
    program did)."""
    result = subprocess.run([gdb.command, "-nx", "-batch", "-ex", "set width 0",
                             "-ex", "set print frame-arguments none",
                             "-ex", "echo BACKTRACE\\n", "-ex", "bt", *map(str, arguments)],
                            capture_output=True, text=True, timeout=300, cwd=cwd,
                            stdin=subprocess.DEVNULL)
    assert "BACKTRACE\n" in result.stdout, result.stdout + result.stderr
    return result.stdout.split("BACKTRACE\n", 1)[1]


def wheres(text):
    """[(pc, where)] of a backtrace's frames: `` from LIB``, `` at FILE:LINE`` or ""."""
    return [(line[1], line[3]) for line in parsed(text)]


def compared(ours_text, theirs_text):
    """(sfbt's wheres, GDB's wheres) of one stop.  Where GDB's frame #0
    has no address (its PC starts a statement's line: GDB's
    frame_show_address leaves it out, sfbt prints it), sfbt's frame #0 is
    compared by its where alone."""
    ours, theirs = wheres(ours_text), wheres(theirs_text)
    if ours and theirs and theirs[0][0] is None:
        ours[0] = (None, ours[0][1])
    return ours, theirs


@pytest.mark.parametrize("named", ["absolute", "relative"])
def test_from_is_gdbs_library_name(gdb, linked, named, tmp_path):
    """A library loaded through a linked directory: each frame's `from`
    (and line) equals gdb -nx -p's at the same stop, then on the
    process's core (made by GDB's gcore) sfbt stack --core's equals gdb's
    on that core; the name is the one dlopen was given, not the mapped
    path (which the old code printed)."""
    directory, program = linked
    name = str(directory / "linkdir" / LIBRARY) if named == "absolute" \
        else os.path.join("linkdir", LIBRARY)
    core = tmp_path / "linked.core"
    with Stopped(program, name, directory) as stopped:
        for _ in range(2):
            stopped.stop()
            ours, theirs = compared(sfbt_stack([stopped.pid], directory),
                                    gdb_bt(gdb, ["-p", stopped.pid], directory))
            assert ours == theirs, (ours, theirs)
            stopped.go_on()
        stopped.stop()
        subprocess.run([gdb.command, "-nx", "-batch", "-p", str(stopped.pid),
                        "-ex", f"gcore {core}"], capture_output=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert core.exists(), "gdb's gcore made no core"
    ours, theirs = compared(sfbt_stack(["--core", core, program], directory),
                            gdb_bt(gdb, [program, core], directory))
    assert ours == theirs, (ours, theirs)
    # the innermost frames are the library's, the first without a name
    assert ours[0][1] == f" from {name}" and ours[1][1] == f" from {name}", ours


def interpreter(program):
    """The dynamic linker ``program`` names (PT_INTERP)."""
    from sfbt.elf import open_elf
    stream, image = open_elf(str(program))
    with stream:
        (segment,) = [s for s in image.segments() if s.type == 3]
        return image.read(segment.offset, segment.filesz).rstrip(b"\0").decode()


def test_the_dynamic_linker_run_as_the_program(gdb, linked):
    """`ld.so PROGRAM LIBRARY`: the process's program is the dynamic
    linker, whose dynamic section has no DT_DEBUG; the list is found
    through its `_r_debug` symbol, as GDB finds it, and the library's
    frames say the name it was loaded by, as gdb -nx -p's."""
    directory, program = linked
    name = str(directory / "linkdir" / LIBRARY)
    stopped = Stopped.__new__(Stopped)
    stopped.process = subprocess.Popen([interpreter(program), str(program), name],
                                       cwd=directory, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, text=True)
    assert stopped.process.stdout.readline().strip() == "ready"
    stopped.pid = stopped.process.pid
    with stopped:
        stopped.stop()
        ours, theirs = compared(sfbt_stack([stopped.pid], directory),
                                gdb_bt(gdb, ["-p", stopped.pid], directory))
    # (GDB knows no symbols of the program it did not load: its frames
    # after the library's are not compared)
    assert ours[:2] == theirs[:2] and ours[0][1] == f" from {name}", (ours, theirs)


def test_vdso_frames_name_no_library(gdb, linked):
    """A thread in clock_gettime: the vDSO's frame has no `from`, as
    GDB's (the old code said `from linux-vdso.so.1`); every frame's
    `where` equal to gdb -nx -p's at each of up to 10 stops, and at least
    one stop in the vDSO."""
    directory, program = linked
    in_vdso = 0
    with Stopped(program, "vdso", directory) as stopped:
        for _ in range(10):
            stopped.stop()
            ours_text = sfbt_stack([stopped.pid], directory)
            theirs = gdb_bt(gdb, ["-p", stopped.pid], directory)
            ours, theirs = compared(ours_text, theirs)
            assert ours == theirs, (ours, theirs)
            vdso = [m for m in open(f"/proc/{stopped.pid}/maps") if m.endswith("[vdso]\n")]
            start, end = (int(x, 16) for x in vdso[0].split()[0].split("-"))
            pc = parsed(ours_text)[0][1]
            in_vdso += start <= pc < end
            stopped.go_on()
            if in_vdso:
                break
    assert in_vdso, "no stop landed in the vDSO"
    assert "linux-vdso" not in ours_text, ours_text


def test_a_hostile_library_name_is_escaped(linked, tmp_path):
    """A library loaded through a directory whose name holds a newline and
    an escape: sfbt stack prints the link map's name escaped, each frame
    on one line."""
    directory, program = linked
    odd = tmp_path / "odd\ndir\033[31m"
    odd.symlink_to(directory / "real")
    with Stopped(program, str(odd / LIBRARY), directory) as stopped:
        stopped.stop()
        text = sfbt_stack([stopped.pid], directory)
    escaped = str(tmp_path / "odd\\ndir\\033[31m" / LIBRARY)
    frames = [line for line in text.splitlines() if line.startswith("#")]
    assert frames[0].endswith(f" from {escaped}") and "\033" not in text, text


# -- synthetic link maps --------------------------------------------------------

class Memory:
    """Bytes at addresses; a read outside them fails."""

    def __init__(self):
        self.blocks = {}

    def put(self, address, data):
        self.blocks[address] = data
        return self

    def read(self, address, size):
        from sfbt.errors import TargetMemoryError
        for start, data in self.blocks.items():
            if start <= address and address + size <= start + len(data):
                return data[address - start:address - start + size]
        raise TargetMemoryError(address, size)


R_DEBUG, FIRST = 0x1000, 0x2000
BIAS, DYNAMIC = 0x7F0000000000, 0x7F0000003000


def link_map(names):
    """Memory with r_debug at R_DEBUG and a chain of entries: the program,
    then one at BIAS (its dynamic section at DYNAMIC) for each name."""
    memory = Memory()
    memory.put(R_DEBUG, struct.pack("<iiQ", 1, 0, FIRST))
    entries = [(0x5555_0000_0000, b"", 0x5555_0000_2000)] + [
        (BIAS, name.encode("utf-8", "surrogateescape") + b"\0", DYNAMIC) for name in names]
    for index, (bias, name, dynamic) in enumerate(entries):
        at = FIRST + 0x100 * index
        name_at = 0x8000 + 0x100 * index
        following = at + 0x100 if index + 1 < len(entries) else 0
        memory.put(at, struct.pack("<QQQQQ", bias, name_at, dynamic, following, 0))
        memory.put(name_at, (name or b"\0").ljust(0x100, b"\0"))
    return memory


def library_module(path):
    from sfbt.live.mappings import MappedModule
    return MappedModule(str(path), BIAS, BIAS, BIAS + 0x5000, None, BIAS,
                        mapped_as=str(path))


def names_of(memory, module, sysroot=None):
    from sfbt.live.linkmap import LibraryNames
    return LibraryNames(memory.read, lambda: R_DEBUG, "<", sysroot)(module)


def test_the_link_map_name_is_shown_only_where_it_is_the_mapped_file(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "libx.so").write_bytes(b"\x7fELF")
    (tmp_path / "link").symlink_to("real")
    module = library_module(real / "libx.so")
    through_link = str(tmp_path / "link" / "libx.so")
    assert names_of(link_map([through_link]), module) == through_link
    # another file of the same name, a name of no file, the program's own
    # entry (the first, left out as GDB leaves it)
    other = tmp_path / "other"
    other.mkdir()
    (other / "libx.so").write_bytes(b"\x7fELF")
    assert names_of(link_map([str(other / "libx.so")]), module) is None
    assert names_of(link_map([str(tmp_path / "gone" / "libx.so")]), module) is None
    assert names_of(link_map([]), module) is None
    # an entry whose dynamic section is not in the module is not its entry
    elsewhere = library_module(real / "libx.so").replace(end=DYNAMIC)
    assert names_of(link_map([through_link]), elsewhere) is None


def test_relative_names_and_the_sysroot_as_gdb_opens_them(tmp_path, monkeypatch):
    """A relative name is GDB's where it names the file from the current
    directory; with a sysroot, the name GDB shows is the sysroot's file."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libx.so").write_bytes(b"\x7fELF")
    module = library_module(tmp_path / "lib" / "libx.so")
    monkeypatch.chdir(tmp_path)
    assert names_of(link_map(["lib/libx.so"]), module) == "lib/libx.so"
    monkeypatch.chdir(tmp_path / "lib")
    assert names_of(link_map(["lib/libx.so"]), module) is None
    assert names_of(link_map(["/lib/libx.so"]), module, sysroot=str(tmp_path)) == \
        str(tmp_path / "lib" / "libx.so")


def test_a_broken_link_map_names_what_it_can(tmp_path):
    """No r_debug, a name that cannot be read, the vDSO: no name, so the
    mapped path is shown."""
    from sfbt.live.linkmap import LibraryNames
    from sfbt.unwind.target import Module
    (tmp_path / "libx.so").write_bytes(b"\x7fELF")
    module = library_module(tmp_path / "libx.so")
    memory = link_map([str(tmp_path / "libx.so")])
    assert LibraryNames(memory.read, lambda: None, "<")(module) is None
    assert LibraryNames(memory.read, lambda: 0xBAD000, "<")(module) is None
    memory.blocks.pop(0x8100)  # the library's name
    assert names_of(memory, module) is None
    vdso = Module(str(tmp_path / "libx.so"), BIAS, BIAS, BIAS + 0x5000, image=b"\x7fELF")
    assert names_of(link_map([str(tmp_path / "libx.so")]), vdso) is None
