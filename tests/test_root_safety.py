"""sfbt run as root on what other users made: the private cache is neither
written through a link nor believed for a file it was not made from, an
output path follows a link only where the kernel's protected_symlinks
would, and an append does not wait for ever on another user's lock.
The other user is ``nobody`` (setpriv)."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import FIXTURES, PLUGIN, require, run_sfbt
from sfbt.cache import Cache, identity
from sfbt.symbols.symbolizer import CACHE_FORMAT

NOBODY = 65534
LIBRARY = r"""
#include <unistd.h>
__attribute__((noinline)) void victim_wait(void) { for (;;) pause(); }
"""
MAIN = r"""
#include <stdio.h>
void victim_wait(void);
int main(void) { puts("ready"); fflush(stdout); victim_wait(); return 0; }
"""


def as_nobody(*argv):
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


@pytest.fixture
def shared():
    """A directory under /tmp that nobody may read and enter."""
    require(os.geteuid() == 0, "acting as another user needs root")
    require(shutil.which("setpriv") is not None, "setpriv (util-linux) is not installed")
    directory = tempfile.mkdtemp(prefix="sfbt-root-safety-")
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def victim_program(shared):
    """(program, directory of the real library, directory of a copy of it
    with the same build id and ``lib_PWN_wai`` for ``victim_wait``)."""
    real, evil = os.path.join(shared, "real"), os.path.join(shared, "evil")
    os.mkdir(real)
    os.mkdir(evil)
    for name, text in (("victim.c", LIBRARY), ("main.c", MAIN)):
        with open(os.path.join(shared, name), "w") as stream:
            stream.write(text)
    library = os.path.join(real, "libvictim.so")
    subprocess.run(["gcc", "-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id", "-o", library,
                    os.path.join(shared, "victim.c")], check=True)
    program = os.path.join(shared, "main")
    subprocess.run(["gcc", "-O2", "-o", program, os.path.join(shared, "main.c"),
                    f"-L{real}", "-lvictim"], check=True)
    data = open(library, "rb").read()
    # .dynstr's name kept (the program links to it), .debug_str's and
    # .symtab's after it renamed
    at = data.index(b"victim_wait\0") + 1
    assert data.find(b"victim_wait\0", at) > at
    with open(os.path.join(evil, "libvictim.so"), "wb") as stream:
        stream.write(data[:at] + data[at:].replace(b"victim_wait\0", b"lib_PWN_wai\0"))
    for path in (library, os.path.join(evil, "libvictim.so"), program):
        os.chmod(path, 0o755)
    return program, real, evil


class Started:
    """A program started (as nobody when ``user`` says so) and killed after."""

    def __init__(self, argv, library_path, nobody=False):
        env = dict(os.environ, LD_LIBRARY_PATH=library_path)
        self.process = subprocess.Popen(as_nobody(*argv) if nobody else argv, env=env,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"
        self.pid = self.process.pid

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.process.kill()
        self.process.wait()


def stack(pid, *options, timeout=120):
    return subprocess.run(["timeout", str(timeout), sys.executable, "-m", "sfbt", "stack",
                           str(pid), *options], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(PLUGIN)))


# -- the cache ---------------------------------------------------------------------------------

def test_a_copy_with_the_same_build_id_does_not_poison_later_stacks(victim_program):
    """nobody maps a copy of a library with the same build id and another
    name for its function; root stacks it, then a process mapping the real
    library: that one gets the real names (and rows of its own)."""
    program, real, evil = victim_program
    with Started([program], evil, nobody=True) as poisoner:
        first = stack(poisoner.pid)
    assert first.returncode == 0, first.stderr
    assert " in lib_PWN_wai " in first.stdout  # it did read the copy
    with Started([program], real) as honest:
        second = stack(honest.pid)
    assert second.returncode == 0 and second.stderr == "", second.stderr
    assert " in victim_wait " in second.stdout and "PWN" not in second.stdout
    assert " in main " in second.stdout  # the library's rows took the walk on


def _planted_names(program):
    cache = Cache("symbols")
    with open(program, "rb") as stream:
        # the functions and inlined calls (DWARF entries) and the line
        # rows of its one unit (at 0)
        return [cache.entry_name(identity(stream.fileno(), CACHE_FORMAT, *kind))
                for kind in (("entries", 0), ("lines", 0))]


def test_planted_entries_are_neither_written_through_nor_believed(victim_program, tmp_path):
    """Links to a file to keep and to a place to create, a FIFO, a link
    to /dev/urandom and a short entry, at the names root's stack uses:
    the stack is the same as with a clean cache, in bounded time, and
    nothing outside the cache is written."""
    program, real, _ = victim_program
    with Started([program], real) as running:
        clean = stack(running.pid)
        assert clean.returncode == 0 and " in victim_wait " in clean.stdout
        cache = Cache("symbols")
        shutil.rmtree(cache.path)
        os.makedirs(cache.path, 0o700)
        keep = tmp_path / "keep"
        keep.write_text("precious\n")
        created = tmp_path / "created"
        # the library's: its DWARF is read (the program has none)
        entries, lines = _planted_names(os.path.join(real, "libvictim.so"))
        os.symlink(keep, os.path.join(cache.path, entries))
        os.symlink(created, os.path.join(cache.path, lines))
        os.makedirs(Cache("synth").path, 0o700, exist_ok=True)
        os.symlink(keep, os.path.join(Cache("synth").path, "x"))
        os.makedirs(os.path.join(os.path.dirname(cache.path), "vdso"), exist_ok=True)
        os.symlink(created, os.path.join(os.path.dirname(cache.path), "vdso", "y.so"))
        planted = stack(running.pid, timeout=60)
        assert planted.stdout == clean.stdout and planted.stderr == ""
        assert keep.read_text() == "precious\n" and not created.exists()
        for name in (entries, lines):
            status = os.lstat(os.path.join(cache.path, name))
            assert stat.S_ISREG(status.st_mode) and stat.S_IMODE(status.st_mode) == 0o600
        for plant in (lambda path: os.mkfifo(path), lambda path: os.symlink("/dev/urandom", path),
                      lambda path: open(path, "wb").write(b"\xdb\xff\xff\xff\x7f")):
            for name in (entries, lines):
                os.unlink(os.path.join(cache.path, name))
                plant(os.path.join(cache.path, name))
            began = time.monotonic()
            again = stack(running.pid, timeout=60)
            assert again.stdout == clean.stdout and again.stderr == ""
            assert time.monotonic() - began < 30


def test_a_cache_of_another_user_is_not_used(victim_program, shared):
    """$XDG_CACHE_HOME kept from a user's environment (sudo -E): the sfbt
    directories there are nobody's, with links planted in them."""
    program, real, _ = victim_program
    home = os.path.join(shared, "home")
    os.mkdir(home)
    os.chown(home, NOBODY, NOBODY)
    subprocess.run(as_nobody("mkdir", "-p", f"{home}/sfbt/symbols", f"{home}/sfbt/synth"),
                   check=True)
    keep = os.path.join(shared, "keep")
    with open(keep, "w") as stream:
        stream.write("precious\n")
    old_home = os.environ["XDG_CACHE_HOME"]
    try:
        os.environ["XDG_CACHE_HOME"] = home
        for name in _planted_names(program):
            subprocess.run(as_nobody("ln", "-s", keep, f"{home}/sfbt/symbols/{name}"), check=True)
        with Started([program], real) as running:
            result = stack(running.pid)
    finally:
        os.environ["XDG_CACHE_HOME"] = old_home
    assert result.returncode == 0 and " in victim_wait " in result.stdout
    assert result.stderr.splitlines() == [
        f"sfbt: warning: cache directory {home}/sfbt belongs to user {NOBODY}: not used"]
    assert open(keep).read() == "precious\n"
    assert all(os.lstat(os.path.join(root, name)).st_uid == NOBODY
               for root, _, names in os.walk(home) for name in names)


def test_the_cache_is_private(victim_program):
    program, real, _ = victim_program
    shutil.rmtree(os.path.join(os.environ["XDG_CACHE_HOME"], "sfbt"), ignore_errors=True)
    with Started([program], real) as running:
        assert stack(running.pid).returncode == 0
    root = os.path.join(os.environ["XDG_CACHE_HOME"], "sfbt")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    parts = sorted(os.listdir(root))
    # neither the vDSO nor rows made from .eh_frame (per function, in memory)
    assert parts == ["symbols"]
    for part in parts:
        assert stat.S_IMODE(os.stat(os.path.join(root, part)).st_mode) == 0o700
        for name in os.listdir(os.path.join(root, part)):
            assert stat.S_IMODE(os.stat(os.path.join(root, part, name)).st_mode) == 0o600


def _own_vdso():
    with open("/proc/self/maps") as maps:
        line = next(line for line in maps if line.rstrip().endswith("[vdso]"))
    start, end = (int(value, 16) for value in line.split()[0].split("-"))
    with open("/proc/self/mem", "rb") as memory:
        memory.seek(start)
        return start, memory.read(end - start)


def test_a_rewritten_vdso_names_only_itself():
    """A process may rewrite its vDSO in memory: its names stay its own."""
    from sfbt.live.mappings import vdso_module
    from sfbt.live.symbols import module_symbols
    from sfbt.unwind.modules import SFrameSources
    start, data = _own_vdso()
    require(b"__vdso_clock_gettime\0" in data, "this vDSO has no __vdso_clock_gettime")
    honest = vdso_module(data, start)
    # __vdso_clock_gettime and clock_gettime (often the end of the other)
    rewritten = vdso_module(data.replace(b"clock_gettime\0", b"PWNED_gettime\0"), start)
    assert honest.build_id == rewritten.build_id
    sources = SFrameSources()
    for module, own, other in ((rewritten, "PWNED_gettime", "clock_gettime"),
                               (honest, "clock_gettime", "PWNED_gettime")):
        source = sources.for_module(module)
        names = {module_symbols(module).function(f.start) or "??"
                 for f in source.section.functions}
        assert any(name.endswith(own) for name in names), names
        assert not any(other in name for name in names), names
    assert not os.path.exists(os.path.join(os.environ["XDG_CACHE_HOME"], "sfbt", "vdso"))


# -- output paths ------------------------------------------------------------------------------

@pytest.fixture
def sticky(shared):
    """A sticky directory anyone may write to (as /tmp), and a file that
    must not change."""
    directory = os.path.join(shared, "sticky")
    os.mkdir(directory)
    os.chmod(directory, 0o1777)
    keep = os.path.join(shared, "important")
    with open(keep, "w") as stream:
        stream.write("precious\n")
    return directory, keep


def planted(directory, name, target):
    path = os.path.join(directory, name)
    subprocess.run(as_nobody("ln", "-s", target, path), check=True)
    return path


def refused(result, path, name):
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [
        f"sfbt: {path}: not following the link {name} that user {NOBODY} owns in "
        f"{os.path.dirname(path.rstrip('/'))} (sticky, writable by all), as the kernel's "
        "protected_symlinks would not"], result.stderr


def test_command_outputs_do_not_follow_a_link_planted_in_tmp(victim_program, sticky):
    program, real, _ = victim_program
    directory, keep = sticky
    out = planted(directory, "out.txt", keep)
    archive = os.path.join(directory, "a.sfbt")
    with Started([program], real) as running:
        refused(stack(running.pid, "-o", out), out, "out.txt")
        refused(run_sfbt("record", "--idle", "-p", running.pid, "--duration", "0.2", "-o", out),
                out, "out.txt")
        assert stack(running.pid, "--format", "archive", "-o", archive).returncode == 0
    refused(run_sfbt("flame", archive, "-o", out), out, "out.txt")
    refused(run_sfbt("sframe", "synth", FIXTURES / "v3" / "x86_64" / "cfi.o", "-o", out),
            out, "out.txt")
    assert open(keep).read() == "precious\n"
    assert sorted(os.listdir(directory)) == ["a.sfbt", "out.txt"]


def test_cbf_save_does_not_follow_a_link_planted_in_tmp(sticky, shared):
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.commands.save import Capture, SaveOptions, save_captures
    from sfbt.files import FileProblem
    directory, keep = sticky
    os.mkdir(os.path.join(shared, "elsewhere"))
    out = planted(directory, "out.sfbt", keep)
    through = os.path.join(planted(directory, "dir", os.path.join(shared, "elsewhere")), "out")
    images = ImageMap("linux-x86_64", [Image("/p", 0x400000, 0x401000, b"\xaa")])
    capture = Capture("1", [cbf.Frame("pc", 0x400100)], False)
    for path, name in ((out, "out.sfbt"), (through, "dir")):
        for fmt in ("archive", "cbf", "json", "lws"):
            for append in ((False, True) if fmt in ("archive", "lws") else (False,)):
                with pytest.raises(FileProblem) as caught:
                    save_captures(SaveOptions(path, fmt, append), [capture], images,
                                  "x86_64", 64, "SIGTRAP", 1)
                assert str(caught.value) == (
                    f"{path}: not following the link {name} that user {NOBODY} owns in "
                    f"{directory} (sticky, writable by all), as the kernel's "
                    "protected_symlinks would not")
    assert open(keep).read() == "precious\n"
    assert os.listdir(os.path.join(shared, "elsewhere")) == []


def test_links_the_kernel_would_follow_are_followed(sticky, shared):
    """In a sticky directory: a link of our own, or of the directory's
    owner; anywhere else: any link."""
    from sfbt.files import write_atomically
    directory, keep = sticky
    mine = os.path.join(directory, "mine")
    os.symlink(os.path.join(shared, "a"), mine)
    write_atomically(mine, b"a")
    assert open(os.path.join(shared, "a"), "rb").read() == b"a"
    os.chown(directory, NOBODY, NOBODY)
    theirs = planted(directory, "theirs", os.path.join(shared, "b"))
    write_atomically(theirs, b"b")
    assert open(os.path.join(shared, "b"), "rb").read() == b"b"
    plain = os.path.join(shared, "plain")
    os.mkdir(plain)
    os.chmod(plain, 0o777)  # writable by all, but not sticky
    link = planted(plain, "link", os.path.join(shared, "c"))
    write_atomically(link, b"c")
    assert open(os.path.join(shared, "c"), "rb").read() == b"c"
    assert os.path.islink(mine) and os.path.islink(theirs) and os.path.islink(link)
    assert open(keep).read() == "precious\n"


# -- the append lock ---------------------------------------------------------------------------

def test_an_append_waits_for_a_readers_lock_a_bounded_time(shared, monkeypatch):
    """Anyone who may read an archive may hold `flock -s` on it."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.commands.save import Capture, SaveOptions, save_captures
    from sfbt import files
    path = os.path.join(shared, "a.sfbt")
    images = ImageMap("linux-x86_64", [Image("/p", 0x400000, 0x401000, b"\xaa")])
    capture = Capture("1", [cbf.Frame("pc", 0x400100)], False)

    def append():
        save_captures(SaveOptions(path, "archive", True), [capture], images,
                      "x86_64", 64, "SIGTRAP", 1)
    append()
    os.chmod(path, 0o644)
    before = open(path, "rb").read()
    holder = subprocess.Popen(as_nobody("flock", "-s", path, "-c", "echo locked; exec sleep 60"),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        monkeypatch.setattr(files, "LOCK_WAIT", 0.5)
        began = time.monotonic()
        with pytest.raises(files.FileProblem) as caught:
            append()
        assert 0.5 <= time.monotonic() - began < 5
        assert str(caught.value) == (f"{path}: another process holds a lock on it; "
                                     "nothing was written")
        assert open(path, "rb").read() == before
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock and the sleep holding its lock
        holder.wait()
    append()
    assert len(open(path, "rb").read()) > len(before)


def test_sources_in_memory_are_kept_per_file_not_per_build_id(victim_program):
    """A record or debugger session keeps each module's rows: a copy with
    the same build id gets its own, and rows read from another file than
    the one the path named when looked up are not kept under it."""
    from sfbt.unwind.modules import SFrameSources
    from sfbt.unwind.target import Module
    _, real, evil = victim_program
    sources = SFrameSources()
    modules = [Module(os.path.join(where, "libvictim.so"), 0, 0, 0x10000, build_id="same")
               for where in (real, evil)]
    first, second = (sources.for_module(module) for module in modules)
    assert first.origin == second.origin == "synth"
    assert first is not second and first.made_from != second.made_from
    assert sources.for_module(modules[0]) is first
    from sfbt.unwind import modules as module_map
    kept = {}
    module_map._kept(kept, ("file", 1, 2, 3, 4), second)  # looked up for another file
    assert kept == {}
    module_map._kept(kept, second.made_from, second)
    assert kept == {second.made_from: second}


# -- the cache root ----------------------------------------------------------------------------

def test_the_cache_root_is_not_reached_through_a_link_planted_in_tmp(sticky, shared, capsys):
    """$XDG_CACHE_HOME at a link nobody planted in /tmp (or under one):
    the cache is not used, said once, and nothing is made where it
    leads; a link of our own there is followed."""
    directory, _ = sticky
    elsewhere = os.path.join(shared, "elsewhere")
    os.mkdir(elsewhere)
    os.chown(elsewhere, NOBODY, NOBODY)
    link = planted(directory, "cache", elsewhere)
    for root in (link, os.path.join(link, "deeper")):
        cache = Cache("symbols", root=os.path.join(root, "sfbt"))
        assert not cache.put(("key",), b"data") and not cache.put(("key",), b"data")
        assert cache.get(("key",)) is None
    assert os.listdir(elsewhere) == []
    assert capsys.readouterr().err.splitlines() == [
        f"sfbt: warning: cache directory {root}: not following the link cache that user "
        f"{NOBODY} owns in {directory} (sticky, writable by all), as the kernel's "
        "protected_symlinks would not; not used" for root in (link, os.path.join(link, "deeper"))]
    mine = os.path.join(directory, "mine")
    os.mkdir(os.path.join(shared, "ours"))
    os.symlink(os.path.join(shared, "ours"), mine)
    cache = Cache("symbols", root=os.path.join(mine, "new", "sfbt"))
    assert cache.put(("key",), b"data") and cache.get(("key",)) == b"data"
    for made in ("new", "new/sfbt", "new/sfbt/symbols"):
        status = os.lstat(os.path.join(shared, "ours", made))
        assert stat.S_ISDIR(status.st_mode) and stat.S_IMODE(status.st_mode) == 0o700
        assert status.st_uid == 0


# -- another user's file at an output path -----------------------------------------------------

def test_outputs_do_not_write_over_a_file_another_user_made_in_tmp(victim_program, sticky):
    """nobody makes the output file first, mode 0666, in a sticky
    directory: every output refuses it, as the kernel's protected_regular=2
    refuses root's O_CREAT open of it, and it is left as it was."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.commands.save import Capture, SaveOptions, save_captures
    from sfbt.files import FileProblem
    program, real, _ = victim_program
    directory, _ = sticky
    out = os.path.join(directory, "out")
    subprocess.run(as_nobody("sh", "-c", f"umask 0; echo theirs > {out}"), check=True)
    line = (f"{out}: not writing over the file out that user {NOBODY} owns in {directory} "
            "(sticky, writable by others), as the kernel's protected_regular would not")

    def refused_here(result):
        assert result.returncode == 1 and result.stderr.splitlines() == [f"sfbt: {line}"], \
            result.stderr
    archive = os.path.join(directory, "a.sfbt")
    with Started([program], real) as running:
        refused_here(run_sfbt("record", "--idle", "-p", running.pid, "--duration", "0.2", "-o", out))
        refused_here(stack(running.pid, "-o", out))
        assert stack(running.pid, "--format", "archive", "-o", archive).returncode == 0
    refused_here(run_sfbt("flame", archive, "-o", out))
    refused_here(run_sfbt("sframe", "synth", FIXTURES / "v3" / "x86_64" / "cfi.o", "-o", out))
    images = ImageMap("linux-x86_64", [Image("/p", 0x400000, 0x401000, b"\xaa")])
    capture = Capture("1", [cbf.Frame("pc", 0x400100)], False)
    for fmt in ("archive", "cbf", "json", "lws"):
        for append in ((False, True) if fmt in ("archive", "lws") else (False,)):
            with pytest.raises(FileProblem) as caught:
                save_captures(SaveOptions(out, fmt, append), [capture], images,
                              "x86_64", 64, "SIGTRAP", 1)
            assert str(caught.value) == line
    status = os.stat(out)
    assert open(out).read() == "theirs\n"
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (NOBODY, 0o666)
    assert sorted(os.listdir(directory)) == ["a.sfbt", "out"]


def test_files_the_kernel_would_open_are_written(sticky):
    """In a sticky directory: a file of our own, or one of the directory's
    owner, is written over as before."""
    from sfbt.files import write_atomically
    directory, _ = sticky
    mine = os.path.join(directory, "mine")
    write_atomically(mine, b"old")
    write_atomically(mine, b"new")
    assert open(mine, "rb").read() == b"new"
    os.chown(directory, NOBODY, NOBODY)
    theirs = os.path.join(directory, "theirs")
    subprocess.run(as_nobody("sh", "-c", f"echo old > {theirs}"), check=True)
    write_atomically(theirs, b"new")
    assert open(theirs, "rb").read() == b"new"


def test_a_cache_directory_another_user_made_first_is_not_used(sticky, monkeypatch, capsys):
    """nobody makes the directory the cache root is to be made at between
    sfbt's look and its mkdir (the race, made certain here): not used."""
    from sfbt import files
    directory, _ = sticky
    root = os.path.join(directory, "cache")
    made = os.mkdir

    def nobody_first(name, mode=0o777, *, dir_fd=None):
        if name == "cache":
            subprocess.run(as_nobody("mkdir", root), check=True)
        made(name, mode, dir_fd=dir_fd)
    monkeypatch.setattr(files.os, "mkdir", nobody_first)
    cache = Cache("symbols", root=os.path.join(root, "sfbt"))
    assert not cache.put(("key",), b"data")
    assert os.listdir(root) == []
    assert capsys.readouterr().err.splitlines() == [
        f"sfbt: warning: cache directory {root}: the directory cache made in {directory} "
        f"belongs to user {NOBODY}; not used"]
