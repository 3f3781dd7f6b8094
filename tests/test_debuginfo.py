"""Separate debug files, found where GDB and eu-stack find them: by build
id and by .gnu_debuglink under a debug root and beside the file, then from
a real debuginfod server (Debian's, started here on a free port of
127.0.0.1 over a folder holding a split-off .debug file) for a stripped
program; servers that fail give one line and the command goes on."""

import http.server
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib

import pytest

from conftest import PLUGIN, require, run_sfbt
from gdb_support import PROGRAMS
from test_stack import Running, workers  # noqa: F401

from sfbt.debuginfo import DebugFiles
from sfbt.debuginfo import downloads
from sfbt.debuginfo.search import build_id_path, file_facts
from sfbt.elf import SHF_COMPRESSED, open_elf, read_build_id
from sfbt.files import FileProblem, OpenedPath, open_regular

_FRAME = re.compile(r"^#\d+\s+0x[0-9a-f]+ in (\S+)( at \S+:\d+| from \S+| \(\))?$", re.M)
#: sleeper.c's functions, innermost first
OURS = ["wait_forever", "middle", "middle", "middle", "middle", "main"]


def frames(text):
    """[(name, where)] of sframe-bt's frame lines."""
    return [(m[1], (m[2] or "").strip()) for m in _FRAME.finditer(text)]


def named_ours(text):
    """Whether sleeper's frames are named, each with its line in sleeper.c."""
    ours = [(name, where) for name, where in frames(text) if name in OURS]
    return ([name for name, _ in ours] == OURS
            and all(re.fullmatch(r"at \S*sleeper\.c:\d+", where) for _, where in ours))


def split(directory, name, *flags):
    """sleeper.c built with -g (and ``flags``), then split as distributions
    do: (the stripped program, its debug file, whose DWARF sections are
    zlib-compressed as Debian's are)."""
    directory.mkdir(parents=True, exist_ok=True)
    full = directory / f"{name}.full"
    subprocess.run(["gcc", "-g", "-O0", "-Wa,--gsframe", "-fPIE", "-pie", *flags,
                    "-o", str(full), str(PROGRAMS / "sleeper.c")], check=True)
    debug = directory / f"{name}.debug"
    program = directory / name
    subprocess.run(["objcopy", "--only-keep-debug", "--compress-debug-sections=zlib",
                    str(full), str(debug)], check=True)
    subprocess.run(["strip", "-o", str(program), str(full)], check=True)
    return program, debug


def with_debuglink(program, debug):
    """``program`` with a .gnu_debuglink naming ``debug`` (name and CRC)."""
    subprocess.run(["objcopy", f"--add-gnu-debuglink={debug}", str(program)], check=True,
                   cwd=debug.parent)
    return program


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    """(stripped program, its debug file in a folder of its own, build id)."""
    base = tmp_path_factory.mktemp("debuginfo")
    program, debug = split(base / "bin", "sleeper")
    served = base / "served"
    served.mkdir()
    debug = debug.rename(served / debug.name)
    build_id = read_build_id(str(program))
    assert build_id and read_build_id(str(debug)) == build_id
    stream, image = open_elf(str(debug))
    with stream:
        assert image.section(".debug_info").flags & SHF_COMPRESSED
    return program, debug, build_id


@pytest.fixture(autouse=True)
def no_downloads_yet(monkeypatch):
    """Every test starts with no download kept and no miss remembered, and
    without debuginfod's bounds or proxies from the environment (conftest
    leaves out its servers)."""
    for name in ("DEBUGINFOD_TIMEOUT", "DEBUGINFOD_MAXSIZE", "DEBUGINFOD_MAXTIME",
                 "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    shutil.rmtree(downloads.directory(), ignore_errors=True)
    yield
    shutil.rmtree(downloads.directory(), ignore_errors=True)


# -- on this machine: a debug root, the file's own directory -----------------

def test_build_id_path_under_a_debug_root(stripped, tmp_path):
    program, debug, build_id = stripped
    root = tmp_path / "root"
    found = DebugFiles(roots=[str(root)], download=False)
    assert found.find(str(program)) is None
    target = build_id_path(str(root), build_id)
    assert target == f"{root}/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    os.makedirs(os.path.dirname(target))
    shutil.copy(debug, target)
    assert DebugFiles(roots=[str(root)], download=False).find(str(program)) == target
    # only the build id is known (an archive from another machine, or one
    # naming a file no file system has)
    assert DebugFiles(roots=[str(root)], download=False).find(None, build_id) == target
    assert DebugFiles(roots=[str(root)], download=False).find(f"{program}\0",
                                                              build_id) == target
    # a file of another build at that path is not believed
    other, _ = split(tmp_path / "other", "other", "-O1")
    shutil.copy(other.with_suffix(".full"), target)
    assert DebugFiles(roots=[str(root)], download=False).find(str(program)) is None


def test_debuglink_beside_in_dot_debug_and_under_the_root(stripped, tmp_path):
    _, debug, _ = stripped
    directory = tmp_path / "lib"
    directory.mkdir()
    program = with_debuglink(shutil.copy(stripped[0], directory / "sleeper"), debug)
    assert file_facts(str(program)).debuglink == (
        "sleeper.debug", zlib.crc32(debug.read_bytes()))
    root = tmp_path / "root"
    under_root = root / str(directory).lstrip("/") / "sleeper.debug"
    dot_debug = directory / ".debug" / "sleeper.debug"
    beside = directory / "sleeper.debug"
    for place in (under_root, dot_debug, beside):  # each found before the last
        place.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(debug, place)
        assert DebugFiles(roots=[str(root)], download=False).find(str(program)) == str(place)
    # a debug file of another build under the right name is not believed
    other, other_debug = split(tmp_path / "other", "other", "-O1")
    for place in (under_root, dot_debug, beside):
        shutil.copy(other_debug, place)
    assert DebugFiles(roots=[str(root)], download=False).find(str(program)) is None


def test_debuglink_without_a_build_id_checks_the_crc(tmp_path):
    program, debug = split(tmp_path, "plain", "-Wl,--build-id=none")
    assert read_build_id(str(program)) is None
    with_debuglink(program, debug)
    assert DebugFiles(download=False).find(str(program)) == str(debug)
    debug.write_bytes(debug.read_bytes() + b"\0")  # no longer the file it names
    assert DebugFiles(download=False).find(str(program)) is None


def test_a_file_with_dwarf_of_its_own_needs_none(stripped, tmp_path):
    program, debug, build_id = stripped
    full = program.with_suffix(".full")
    root = tmp_path / "root"
    target = build_id_path(str(root), build_id)
    os.makedirs(os.path.dirname(target))
    shutil.copy(debug, target)
    assert DebugFiles(roots=[str(root)], download=False).find(str(full)) is None
    assert DebugFiles(roots=[str(root)], download=False).find(str(program)) == target


def test_one_search_per_build_id(stripped, tmp_path, monkeypatch):
    """Two paths of one build (two mappings of one file): the debug file
    is looked for once, its content checked once; a file with DWARF of its
    own asked first changes nothing; when nothing was found, the second
    path's own debuglink is still looked at (a place only it leads to)."""
    from sfbt.debuginfo import search
    program, debug, build_id = stripped
    read = []
    facts_of = search.file_facts
    monkeypatch.setattr(search, "file_facts", lambda path: read.append(path) or facts_of(path))
    root = tmp_path / "root"
    target = build_id_path(str(root), build_id)
    os.makedirs(os.path.dirname(target))
    shutil.copy(debug, target)
    first, second = (str(shutil.copy(program, tmp_path / name)) for name in ("one", "two"))
    found = DebugFiles(roots=[str(root)], download=False)
    assert found.find(str(program.with_suffix(".full"))) is None
    assert found.find(first) == target and found.find(second) == target
    assert found.find(None, build_id) == target
    assert read.count(target) == 1, read
    assert read == [str(program.with_suffix(".full")), first, target, second], read
    # found nowhere for the first path; beside the second, by its debuglink
    os.remove(target)
    linked = tmp_path / "linked"
    linked.mkdir()
    beside = str(with_debuglink(shutil.copy(program, linked / "sleeper"), debug))
    shutil.copy(debug, linked / debug.name)
    found = DebugFiles(roots=[str(root)], download=False)
    assert found.find(first) is None
    assert found.find(beside) == str(linked / debug.name)
    assert found.find(second) == str(linked / debug.name)


def test_a_debuglink_naming_a_directory_is_not_followed(stripped, tmp_path):
    program, debug, _ = stripped
    link = tmp_path / "link"
    name = b"../" + debug.name.encode() + b"\0"
    link.write_bytes(name + bytes(-len(name) % 4) + struct.pack(
        "<I", zlib.crc32(debug.read_bytes())))
    hostile = tmp_path / "bin" / "hostile"
    hostile.parent.mkdir()
    subprocess.run(["objcopy", "--add-section", f".gnu_debuglink={link}", str(program),
                    str(hostile)], check=True)
    shutil.copy(debug, tmp_path / debug.name)  # where ../NAME would lead
    assert file_facts(str(hostile)).debuglink is None
    assert DebugFiles(download=False).find(str(hostile)) is None


def test_every_command_finds_a_debuglink_file(stripped, tmp_path):
    """sfbt stack, fold, cbf decode and flame name a stripped program's
    frames from the debug file in .debug/ beside it."""
    _, debug, _ = stripped
    directory = tmp_path / "app"
    (directory / ".debug").mkdir(parents=True)
    program = with_debuglink(shutil.copy(stripped[0], directory / "sleeper"), debug)
    shutil.copy(debug, directory / ".debug" / debug.name)
    archive = tmp_path / "stack.sfbt"
    with Running(program) as running:
        stack = run_sfbt("stack", running.pid)
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o", archive)
    assert stack.returncode == 0 and stack.stderr == "", stack.stderr
    assert named_ours(stack.stdout), stack.stdout
    assert saved.returncode == 0, saved.stderr
    decoded = run_sfbt("cbf", "decode", archive)
    assert decoded.returncode == 0 and named_ours(decoded.stdout), decoded.stdout
    folded = run_sfbt("fold", archive)
    assert ";".join(reversed(OURS)) in folded.stdout, folded.stdout
    svg = tmp_path / "flame.svg"
    drawn = run_sfbt("flame", archive, "-o", svg)
    assert drawn.returncode == 0, drawn.stderr
    assert all(f'data-name="{name}"' in svg.read_text() for name in OURS)
    # and without the debug file, they are not named
    shutil.rmtree(directory / ".debug")
    assert not any(name in OURS for name, _ in frames(run_sfbt("cbf", "decode",
                                                               archive).stdout))


def test_fold_names_the_c_library_from_its_installed_debug_file(workers,  # noqa: F811
                                                                 tmp_path):
    """The C library keeps clone3 and start_thread out of its dynamic
    symbols: sfbt fold and cbf decode name them from libc6-dbg's file under
    /usr/lib/debug/.build-id, without --debug-dir, as sfbt stack does."""
    archive = tmp_path / "workers.sfbt"
    with Running(workers) as running:
        with open(f"/proc/{running.pid}/maps") as maps:
            (libc,) = {line.split()[-1] for line in maps if "/libc.so" in line}
        require(os.path.exists(build_id_path("/usr/lib/debug", read_build_id(libc))),
                "libc6-dbg is not installed (./install.sh --test-debuggers)")
        stack = run_sfbt("stack", running.pid)
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o", archive)
    assert saved.returncode == 0, saved.stderr
    clone3 = re.compile(r"^#\d+\s+0x[0-9a-f]+ in (__)?clone3 at \S*clone3\.S:\d+$", re.M)
    assert len(clone3.findall(stack.stdout)) == 8, stack.stdout
    decoded = run_sfbt("cbf", "decode", archive)  # each distinct stack once
    assert clone3.search(decoded.stdout) and " in ?? " not in decoded.stdout, decoded.stdout
    folded = run_sfbt("fold", archive).stdout.splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded
               if re.match(r"(__)?clone3;start_thread;worker;", line)) == 8, folded
    assert not any(re.search(r"(^|;)0x", line) for line in folded), folded


def test_exe_given_for_a_bare_cbf_is_read_with_its_debug_file(tmp_path):
    """A bare .cbf has no image map: its addresses are the --exe file's
    (a program that is not PIE), named from that file's debug file."""
    program, debug = split(tmp_path, "fixed", "-no-pie", "-fno-pie")
    with_debuglink(program, debug)
    symbols = subprocess.run(["nm", str(program.with_suffix(".full"))], check=True,
                             capture_output=True, text=True).stdout
    (middle,) = [int(line.split()[0], 16) for line in symbols.splitlines()
                 if line.endswith(" middle")]
    bare = tmp_path / "one.cbf"
    encoded = subprocess.run(
        [sys.executable, "-m", "sfbt", "cbf", "encode"], input=f"pc {middle + 4:#x}\n".encode(),
        capture_output=True, check=True, env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    bare.write_bytes(encoded.stdout)
    decoded = run_sfbt("cbf", "decode", "--exe", program, bare)
    assert decoded.returncode == 0, decoded.stderr
    assert re.search(r" in middle at \S*sleeper\.c:\d+$", decoded.stdout, re.M), decoded.stdout
    debug.unlink()
    assert " in ?? " in run_sfbt("cbf", "decode", "--exe", program, bare).stdout


# -- debuginfod ---------------------------------------------------------------

def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answer(url, timeout=2):
    """The HTTP status of a GET of url, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


@pytest.fixture(scope="module")
def loopback_only(tmp_path_factory):
    """The preload that keeps debuginfod on 127.0.0.1."""
    library = tmp_path_factory.mktemp("preload") / "loopback_only.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(library),
                    str(PROGRAMS / "loopback_only.c"), "-ldl"], check=True)
    return library


class Debuginfod:
    """Debian's debuginfod serving the ELF/DWARF files under ``folder`` on
    a free port of 127.0.0.1, stopped when the test ends."""

    def __init__(self, folder, database, preload):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEBUGINFOD_")}
        env["LD_PRELOAD"] = str(preload)
        for _ in range(5):  # a port found free may be taken before it is used
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            log = open(database.with_suffix(".log"), "w")
            self.process = subprocess.Popen(
                ["debuginfod", "-F", "-p", str(self.port), "-d", str(database),
                 "-t", "0", "-g", "0", "-c", "1", str(folder)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
            deadline = time.monotonic() + 30
            while self.process.poll() is None and time.monotonic() < deadline:
                if answer(f"{self.url}/metrics") == 200:
                    return
                time.sleep(0.1)
            self.stop()
        pytest.fail(f"debuginfod did not start: {database.with_suffix('.log').read_text()}")

    def wait_for(self, build_id):
        """Wait until the server has scanned the file of build_id."""
        deadline = time.monotonic() + 60
        url = f"{self.url}/buildid/{build_id}/debuginfo"
        while answer(url) != 200:
            assert time.monotonic() < deadline, f"debuginfod never served {build_id}"
            time.sleep(0.2)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def start_debuginfod(folder, tmp_path, preload):
    require(shutil.which("debuginfod"),
            "debuginfod is not installed (./install.sh --test-debuggers)")
    return Debuginfod(folder, tmp_path / f"{folder.name}.sqlite", preload)


@pytest.fixture
def server(stripped, loopback_only, tmp_path):
    """A debuginfod serving the stripped program's debug file."""
    _, debug, build_id = stripped
    running = start_debuginfod(debug.parent, tmp_path, loopback_only)
    try:
        running.wait_for(build_id)
        yield running
    finally:
        running.stop()


def listens_on_loopback_only(port):
    """Whether every socket listening on port is bound to 127.0.0.1."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as stream:
            for row in stream.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                address, at = local.split(":")
                if state == "0A" and int(at, 16) == port:
                    found.append(address)
    return found == ["0100007F"]


def kept(build_id):
    """(path, build id it holds) of the download kept for build_id."""
    return downloads.kept(build_id, 1 << 30)


def other_lines(stderr, program, *urls):
    """stderr's lines, less the servers' word that they have no debug info
    for another file (the C library, where no debug file of it is
    installed)."""
    return [line for line in stderr.splitlines()
            if not (any(line.startswith(f"sfbt: debuginfod {url}: no debug info for ")
                        for url in urls)
                    and str(program) not in line)]


def test_a_stripped_program_named_from_debuginfod(stripped, server, monkeypatch, tmp_path):
    program, _, build_id = stripped
    assert listens_on_loopback_only(server.port)
    with Running(program) as running:
        alone = run_sfbt("stack", running.pid)
        monkeypatch.setenv("DEBUGINFOD_URLS", server.url)
        stack = run_sfbt("stack", running.pid)
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o",
                         tmp_path / "stack.sfbt")
    assert alone.returncode == 0 and not named_ours(alone.stdout)
    assert stack.returncode == 0, stack.stderr
    assert named_ours(stack.stdout), stack.stdout
    assert other_lines(stack.stderr, program, server.url) == []
    path, found = kept(build_id)
    assert found == build_id and read_build_id(path) == build_id
    assert stat.S_IMODE(os.stat(downloads.directory()).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # later commands read the kept file: the server is gone
    server.stop()
    assert saved.returncode == 0, saved.stderr
    decoded = run_sfbt("cbf", "decode", tmp_path / "stack.sfbt")
    assert decoded.returncode == 0 and named_ours(decoded.stdout), decoded.stdout
    assert other_lines(decoded.stderr, program, server.url) == []


def test_record_never_downloads_and_the_other_commands_do(stripped, server, monkeypatch,
                                                          tmp_path):
    """sfbt record samples without asking a server (its walk names frames
    from files at hand); fold, cbf decode and flame of its archive ask."""
    program, _, build_id = stripped
    archive = tmp_path / "profile.sfbt"
    monkeypatch.setenv("DEBUGINFOD_URLS", server.url)
    with Running(program) as running:
        recorded = run_sfbt("record", "--idle", "-p", running.pid, "--hz", "20", "--duration", "0.3",
                            "-o", archive)
    assert recorded.returncode == 0, recorded.stderr
    assert kept(build_id) == (None, None)
    assert "debuginfod" not in recorded.stderr
    folded = run_sfbt("fold", archive)
    assert folded.returncode == 0 and ";".join(reversed(OURS)) in folded.stdout, \
        folded.stdout + folded.stderr
    assert other_lines(folded.stderr, program, server.url) == []
    svg = tmp_path / "flame.svg"
    drawn = run_sfbt("flame", archive, "-o", svg)
    assert drawn.returncode == 0, drawn.stderr
    assert all(f'data-name="{name}"' in svg.read_text() for name in OURS)
    shutil.rmtree(downloads.directory())  # flame alone, through the server
    drawn = run_sfbt("flame", archive, "-o", svg)
    assert drawn.returncode == 0 and other_lines(drawn.stderr, program, server.url) == []
    assert all(f'data-name="{name}"' in svg.read_text() for name in OURS)


def _archive_and_another_program(stripped, tmp_path):
    """(an archive of the stripped program's stack, another program for
    the debugger to hold)."""
    program, _, _ = stripped
    archive = tmp_path / "stack.sfbt"
    with Running(program) as running:
        saved = run_sfbt("stack", running.pid, "--format", "archive", "-o", archive)
    assert saved.returncode == 0, saved.stderr
    other, _ = split(tmp_path / "other", "other", "-O1")
    return archive, other


def test_cbf_load_in_gdb_asks_debuginfod(gdb, stripped, server, monkeypatch, tmp_path):
    """cbf-load names frames of images GDB has not loaded (here: the
    archive's program, while GDB holds another) from their files, and so
    from debuginfod too, when GDB's debuginfod is on."""
    archive, other = _archive_and_another_program(stripped, tmp_path)
    out = gdb.run([other], ["set debuginfod enabled on", f"cbf-load {archive}"],
                  environment={"DEBUGINFOD_URLS": server.url})
    assert named_ours(out), out
    assert "Traceback" not in out


@pytest.mark.parametrize("enabled", ["off", "ask"])
def test_gdb_debuginfod_not_on_nothing_is_downloaded(gdb, stripped, enabled, tmp_path):
    """`set debuginfod enabled off` (and ask, unanswered): neither
    sframe-bt (for inline chains: GDB names the frames) nor cbf-load asks
    a server (none of its requests arrive), where `on` lets them."""
    program, debug, _ = stripped
    archive, _ = _archive_and_another_program(stripped, tmp_path)
    for setting in (enabled, "on"):
        shutil.rmtree(downloads.directory(), ignore_errors=True)
        counting, url = serving(debug.read_bytes())
        try:
            with Running(program) as running:
                out = gdb.run(["-p", running.pid],
                              [f"set debuginfod enabled {setting}", "sframe-bt",
                               f"cbf-load {archive}"],
                              environment={"DEBUGINFOD_URLS": url})
        finally:
            stop_serving(counting)
        assert "Traceback" not in out and "Backtrace 1," in out, out
        # GDB itself, asked on attach in batch mode, answered no
        assert (counting.requests >= 1) == (setting == "on"), (setting, out)


def test_cbf_load_in_lldb_asks_debuginfod(lldb, stripped, server, tmp_path):
    archive, other = _archive_and_another_program(stripped, tmp_path)
    out = lldb.run([other], [f"cbf-load {archive}"],
                   environment={"DEBUGINFOD_URLS": server.url})
    assert named_ours(out), out
    assert "Traceback" not in out


@pytest.mark.parametrize("setting", ["set", "clear"])
def test_lldb_asks_the_servers_of_its_own_setting(lldb, stripped, setting, tmp_path):
    """cbf-load in LLDB asks the servers of LLDB's debuginfod symbol
    locator (here one without the file, or none), not those of
    DEBUGINFOD_URLS (which LLDB's setting started from: here one with
    the file)."""
    _, debug, build_id = stripped
    archive, other = _archive_and_another_program(stripped, tmp_path)
    having, having_url = serving(debug.read_bytes())
    missing, missing_url = serving(b"", missing=True)
    change = (f"settings set {SERVER_URLS} {missing_url}" if setting == "set"
              else f"settings clear {SERVER_URLS}")
    try:
        out = lldb.run([other], [change, f"cbf-load {archive}"],
                       environment={"DEBUGINFOD_URLS": having_url})
    finally:
        stop_serving(having)
        stop_serving(missing)
    assert "Backtrace 1," in out and "Traceback" not in out, out
    assert not named_ours(out), out
    asked = f"/buildid/{build_id}/debuginfo" in missing.paths
    assert asked == (setting == "set"), missing.paths


#: LLDB's setting of the servers its debuginfod symbol locator asks
SERVER_URLS = "plugin.symbol-locator.debuginfod.server-urls"
#: how a line names the file it was about: FILE (build id ID)
ABOUT = r"(?P<file>/\S+) \(build id (?P<id>[0-9a-f]+)\)"


def one_failure(result, pattern):
    """The command worked (sleeper's frames printed, unnamed) and said one
    line matching pattern; where the line names a file (ABOUT: the program
    or, where no debug file of it is installed, the C library, whichever
    was looked up first), that is the file's build id."""
    assert result.returncode == 0, result.stderr
    assert [name for name, _ in frames(result.stdout)].count("??") >= len(OURS), \
        result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    match = re.fullmatch(pattern, lines[0])
    assert match, lines[0]
    if "file" in match.groupdict():
        assert read_build_id(match["file"]) == match["id"], lines[0]


def test_a_port_where_nothing_listens(stripped, monkeypatch):
    program, _, build_id = stripped
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    with Running(program) as running:
        first = run_sfbt("stack", running.pid)
        again = run_sfbt("stack", running.pid)
    one_failure(first, rf"sfbt: debuginfod {url}: Connection refused; "
                r"not asked again this run")
    # the failure is remembered: the next run neither asks nor says it again
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert downloads.recent_miss(build_id, 60)


def test_a_server_without_the_file_says_404(stripped, loopback_only, monkeypatch, tmp_path):
    program, _, build_id = stripped
    empty = tmp_path / "empty"
    empty.mkdir()
    running = start_debuginfod(empty, tmp_path, loopback_only)
    try:
        assert answer(f"{running.url}/buildid/{build_id}/debuginfo") == 404
        monkeypatch.setenv("DEBUGINFOD_URLS", running.url)
        with Running(program) as target:
            result = run_sfbt("stack", target.pid)
    finally:
        running.stop()
    one_failure(result, rf"sfbt: debuginfod {running.url}: no debug info for {ABOUT}")


class _OneFile(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the bytes of the server's ``body`` (with no
    Content-Length unless ``server.length``: the end is where it closes),
    after ``server.delay`` seconds; with 404 when ``server.missing``; with
    401 unless the request's Authorization is ``server.authorization``
    (when set); one byte every ``server.trickle`` seconds when set (at
    most 30 of them: the server stops by itself).  Counts the requests
    and keeps their paths."""

    def do_GET(self):
        server = self.server
        server.requests += 1
        server.paths.append(self.path)
        time.sleep(server.delay)
        if server.authorization and self.headers.get("Authorization") != server.authorization:
            self.send_error(401)
            return
        if server.missing:
            self.send_error(404)
            return
        self.send_response(200)
        if server.length:
            self.send_header("Content-Length", str(len(server.body)))
        self.end_headers()
        if not server.trickle:
            self.wfile.write(server.body)
            return
        for byte in server.body[:30]:
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(server.trickle)

    def log_message(self, *_):
        pass


def serving(body, length=True, delay=0, missing=False, trickle=0, authorization=None):
    """A thread serving ``body`` for every GET on 127.0.0.1 (_OneFile);
    its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OneFile)
    server.daemon_threads = True
    server.body, server.length, server.delay = body, length, delay
    server.missing, server.trickle, server.authorization = missing, trickle, authorization
    server.requests, server.paths = 0, []
    # polled often: fifty servers stop in a second
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop_serving(server):
    server.shutdown()
    server.server_close()


def test_servers_are_asked_in_turn(stripped, server, loopback_only, monkeypatch, tmp_path):
    """One that cannot be reached says so; one without the file says
    nothing when a later one has it."""
    program, _, build_id = stripped
    dead = f"http://127.0.0.1:{free_port()}"
    empty = tmp_path / "empty"
    empty.mkdir()
    without = start_debuginfod(empty, tmp_path, loopback_only)
    try:
        assert answer(f"{without.url}/buildid/{build_id}/debuginfo") == 404
        monkeypatch.setenv("DEBUGINFOD_URLS", f"{dead} {without.url} {server.url}")
        with Running(program) as running:
            result = run_sfbt("stack", running.pid)
    finally:
        without.stop()
    assert result.returncode == 0 and named_ours(result.stdout), result.stdout
    assert other_lines(result.stderr, program, without.url, server.url) == [
        f"sfbt: debuginfod {dead}: Connection refused; not asked again this run"]
    assert kept(build_id)[1] == build_id


def test_a_file_of_another_build_is_not_used(stripped, monkeypatch, tmp_path):
    program, _, build_id = stripped
    _, other_debug = split(tmp_path / "other", "other", "-O1")
    other = read_build_id(str(other_debug))
    wrong, url = serving(other_debug.read_bytes())
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    try:
        with Running(program) as running:
            result = run_sfbt("stack", running.pid)
    finally:
        stop_serving(wrong)
    one_failure(result, rf"sfbt: debuginfod {url}: sent a file whose build id is {other} "
                rf"for {ABOUT}; not used")
    assert kept(build_id)[1] is None  # emptied


def test_a_server_that_never_answers_times_out(stripped, monkeypatch):
    program, _, _ = stripped
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections wait, never accepted, never answered
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setenv("DEBUGINFOD_URLS", url)
        monkeypatch.setenv("DEBUGINFOD_TIMEOUT", "1")
        with Running(program) as running:
            result = run_sfbt("stack", running.pid)
    one_failure(result, rf"sfbt: debuginfod {url}: no answer in 1 s "
                r"\(DEBUGINFOD_TIMEOUT\); not asked again this run")


def test_a_file_larger_than_allowed_is_not_kept(stripped, server, monkeypatch):
    """debuginfod refuses a file larger than the client asks for (406); a
    server that sends it anyway, with or without its length, is cut off."""
    program, debug, build_id = stripped
    monkeypatch.setenv("DEBUGINFOD_MAXSIZE", "4096")
    assert debug.stat().st_size > 4096
    regardless, url = serving(debug.read_bytes())
    unsized, unsized_url = serving(debug.read_bytes(), length=False)
    try:
        for where in (server.url, url, unsized_url):
            monkeypatch.setenv("DEBUGINFOD_URLS", where)
            with Running(program) as running:
                result = run_sfbt("stack", running.pid)
            one_failure(result, rf"sfbt: debuginfod {where}: the debug file of {ABOUT} is "
                        r"larger than 4096 bytes \(DEBUGINFOD_MAXSIZE\); not used")
            # nothing kept, not even half a file: only the miss remembered
            assert kept(build_id) == (None, None)
            assert not [name for name in os.listdir(downloads.directory())
                        if name.startswith(".")]  # no temporary file left
            assert downloads.recent_miss(build_id, 60)
            shutil.rmtree(downloads.directory())
    finally:
        stop_serving(regardless)
        stop_serving(unsized)


def test_no_usable_cache_no_download(stripped, server, monkeypatch, tmp_path):
    """Where downloads cannot be kept privately (the cache's place is a
    file; a link planted as the cache directory, which the cache warns of),
    nothing is downloaded: one line says so, and the command goes on."""
    program, _, _ = stripped
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv("DEBUGINFOD_URLS", server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    with Running(program) as running:
        result = run_sfbt("stack", running.pid)
    one_failure(result, rf"sfbt: debuginfod: cannot keep downloads in "
                rf"{re.escape(str(blocked))}/sfbt/debuginfod; not downloading")
    planted = tmp_path / "planted"
    (planted / "sfbt").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (planted / "sfbt" / "debuginfod").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_CACHE_HOME", str(planted))
    with Running(program) as running:
        result = run_sfbt("stack", running.pid)
    assert result.returncode == 0 and not named_ours(result.stdout), result.stdout
    assert result.stderr.splitlines() == [
        f"sfbt: warning: cache directory {planted}/sfbt/debuginfod is a link or not a "
        "directory: not used",
        f"sfbt: debuginfod: cannot keep downloads in {planted}/sfbt/debuginfod; "
        "not downloading"]
    assert os.listdir(elsewhere) == []


def test_urls_that_are_not_http_are_left_out(stripped, server, monkeypatch):
    program, _, _ = stripped
    monkeypatch.setenv("DEBUGINFOD_URLS", f"file:///srv/debug http:// {server.url} "
                       "http://[::1")
    monkeypatch.setenv("DEBUGINFOD_TIMEOUT", "soon")
    with Running(program) as running:
        result = run_sfbt("stack", running.pid)
    assert result.returncode == 0 and named_ours(result.stdout), result.stdout
    assert other_lines(result.stderr, program, server.url) == [
        f"sfbt: DEBUGINFOD_URLS: {url} is not an http:// or https:// URL; left out"
        for url in ("file:///srv/debug", "http://", "http://[::1")] + [
        "sfbt: DEBUGINFOD_TIMEOUT=soon is not a positive whole number; using 5"]


def test_a_cache_directory_is_made_where_there_is_none(stripped, server, monkeypatch,
                                                       tmp_path):
    program, _, build_id = stripped
    fresh = tmp_path / "fresh" / "cache"
    monkeypatch.setenv("DEBUGINFOD_URLS", server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(fresh))
    with Running(program) as running:
        result = run_sfbt("stack", running.pid)
    assert result.returncode == 0 and named_ours(result.stdout), result.stdout
    assert kept(build_id)[1] == build_id
    assert stat.S_IMODE(os.stat(fresh / "sfbt" / "debuginfod").st_mode) == 0o700


def timed_stack(program, servers):
    """(result, seconds) of sfbt stack of a running program, then the
    servers (serving()'s) stopped."""
    try:
        with Running(program) as running:
            started = time.monotonic()
            result = run_sfbt("stack", running.pid)
            return result, time.monotonic() - started
    finally:
        for server in servers:
            stop_serving(server)


def test_a_server_that_trickles_is_cut_at_the_deadline(stripped, monkeypatch):
    """One byte every 2 s keeps each read alive (DEBUGINFOD_TIMEOUT 5) but
    not the whole download past DEBUGINFOD_MAXTIME."""
    program, debug, _ = stripped
    slow, url = serving(debug.read_bytes(), trickle=2)
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    monkeypatch.setenv("DEBUGINFOD_MAXTIME", "3")
    result, took = timed_stack(program, [slow])
    one_failure(result, rf"sfbt: debuginfod {url}: no whole answer for {ABOUT} in 3 s "
                r"\(DEBUGINFOD_MAXTIME\); not asked again this run")
    assert took < 12, took


def test_servers_are_asked_at_once(stripped, monkeypatch):
    """Fifty servers that answer 404 after 2 s and one that sends the file
    after 2 s: the answer comes in about one server's delay, not 51."""
    program, debug, build_id = stripped
    servers = [serving(b"", delay=2, missing=True) for _ in range(50)]
    servers.append(serving(debug.read_bytes(), delay=2))
    monkeypatch.setenv("DEBUGINFOD_URLS", " ".join(url for _, url in servers))
    result, took = timed_stack(program, [server for server, _ in servers])
    assert result.returncode == 0 and named_ours(result.stdout), result.stdout
    assert kept(build_id)[1] == build_id
    assert took < 20, took  # asked in turn: over 100 s


def test_credentials_are_used_and_never_printed(stripped, monkeypatch):
    """user:password in a URL is sent as Basic authentication (as curl
    sends it); no line shows it, not even for a server that is down."""
    program, debug, build_id = stripped
    guarded, url = serving(debug.read_bytes(), authorization="Basic dXNlcjpzM2NyM3Q=")
    dead_port = free_port()
    with_user = url.replace("http://", "http://user:s3cr3t@")
    monkeypatch.setenv("DEBUGINFOD_URLS",
                       f"http://user:s3cr3t@127.0.0.1:{dead_port} {with_user}")
    try:
        with Running(program) as running:
            result = run_sfbt("stack", running.pid)
    finally:
        stop_serving(guarded)
    assert result.returncode == 0 and named_ours(result.stdout), result.stderr
    assert "s3cr3t" not in result.stderr and "user" not in result.stderr, result.stderr
    assert f"sfbt: debuginfod http://***@127.0.0.1:{dead_port}: Connection refused; " \
        "not asked again this run" in result.stderr.splitlines(), result.stderr
    assert kept(build_id)[1] == build_id


def test_a_download_is_read_from_the_file_checked(stripped, monkeypatch, tmp_path):
    """A download, fresh or found in the cache, is read from the file
    checked: another swapped in under the cache entry's name afterwards
    (by whoever can write there) is never read."""
    program, debug, build_id = stripped
    sent, url = serving(debug.read_bytes())
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    try:
        fresh = DebugFiles().find(None, build_id, "sleeper")
    finally:
        stop_serving(sent)
    assert sent.requests == 1
    from_cache = DebugFiles().find(None, build_id, "sleeper")
    assert from_cache == fresh
    swapped = tmp_path / "swapped"
    for name in (fresh, from_cache):
        shutil.copyfile(program, swapped)  # another file: no debug info
        os.replace(swapped, name)
        with open_regular(name) as stream:
            assert stream.read() == debug.read_bytes()
        stream, image = open_elf(name)  # as the symbolizer opens it
        with stream:
            assert image.section(".debug_info") is not None


def test_an_opened_path_is_read_through_its_descriptor(tmp_path):
    """open_regular of an OpenedPath reads the file it holds open (not
    what its name is now), each stream at its own position, within the
    limit."""
    path = tmp_path / "kept"
    path.write_bytes(bytes(range(256)) * 64)
    opened = OpenedPath(str(path), open(path, "rb"))
    os.remove(path)
    path.write_bytes(b"another file")  # another file at the name
    with open_regular(opened) as first, open_regular(opened) as second:
        first.seek(1000)
        second.seek(5)
        assert first.read(3) == bytes([232, 233, 234])
        assert second.read(2) == bytes([5, 6])
        assert first.read(1) == bytes([235])
    with pytest.raises(FileProblem, match="larger than"):
        open_regular(opened, limit=10)
