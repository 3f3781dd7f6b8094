"""Files sfbt reads and writes: regular files only, whole-file replaces
that keep the target's mode and owner, appends that never lose a record
to a concurrent one, and nothing left behind on failure."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import PLUGIN, run_sfbt
from sfbt.archive import cbf
from sfbt.archive.imagemap import Image, ImageMap
from sfbt.archive.store import read_archive
from sfbt.commands.save import Capture, SaveOptions, save_captures
from sfbt.files import (FileProblem, locked_for_update, open_regular, read_regular,
                        write_atomically)

IMAGES = ImageMap("linux-x86_64", [Image("/usr/bin/prog", 0x400000, 0x401000, b"\xaa")])


def save(path, fmt="archive", append=False, address=0x400100, label=""):
    capture = Capture("1", [cbf.Frame("pc", address), cbf.Frame("ra", 0x400200)], False)
    return save_captures(SaveOptions(str(path), fmt, append, label=label), [capture],
                         IMAGES, "x86_64", 64, "SIGTRAP", 1)


def leftovers(directory):
    return [name for name in os.listdir(directory) if ".sfbt-" in name]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_reading_refuses_what_is_not_a_regular_file(tmp_path, fifo):
    for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device"),
                       (tmp_path, "a directory")):
        with pytest.raises(FileProblem) as caught:
            open_regular(path)
        assert str(caught.value) == f"{path}: not a regular file ({kind})"
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(FileProblem, match="larger than the 10 bytes"):
        read_regular(big, 10)
    assert read_regular(big, 100) == b"x" * 100


@pytest.mark.parametrize("command", [
    ["cbf", "decode"], ["fold"], ["heapmap"], ["sframe", "dump"],
    ["sframe", "dump", "--raw"], ["sframe", "synth", "-o", "/dev/null"]])
def test_commands_refuse_a_fifo_or_device_in_one_line(fifo, command):
    for path in (fifo, "/dev/zero"):
        result = subprocess.run(
            [sys.executable, "-m", "sfbt", *command[:2], str(path), *command[2:]],
            capture_output=True, text=True, timeout=30, env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
        assert result.returncode == 1
        assert result.stderr.splitlines() == [f"sfbt: {path}: not a regular file "
                                              f"({'a FIFO' if path == fifo else 'a character device'})"]


def test_debug_dir_and_exe_skip_fifos(tmp_path, fifo):
    data = cbf.encode([cbf.Frame("pc", 0x401000)])
    trace = tmp_path / "t.cbf"
    trace.write_bytes(data)
    result = run_sfbt("cbf", "decode", trace, "--debug-dir", tmp_path, "--exe", fifo)
    assert result.returncode == 0, result.stderr
    assert "#0  0x0000000000401000 in ??" in result.stdout


def test_writes_keep_mode_and_owner_and_go_through_symlinks(tmp_path):
    target = tmp_path / "t.sfbt"
    save(target)
    os.chmod(target, 0o640)
    if os.geteuid() == 0:
        os.chown(target, 1234, 1235)
    link = tmp_path / "link.sfbt"
    link.symlink_to(target)
    save(link, append=True)
    assert link.is_symlink()
    status = os.stat(target)
    assert stat.S_IMODE(status.st_mode) == 0o640
    if os.geteuid() == 0:
        assert (status.st_uid, status.st_gid) == (1234, 1235)
    archive, error = read_archive(target)
    assert error is None and len(archive.events) == 2
    assert leftovers(tmp_path) == []


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new", b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o640


def test_writes_refuse_devices_fifos_and_directories(tmp_path, fifo):
    for path, kind in ((fifo, "a FIFO"), ("/dev/null", "a character device"),
                       (tmp_path, "a directory")):
        for fmt in ("archive", "cbf", "json", "lws"):
            with pytest.raises(FileProblem) as caught:
                save(path, fmt)
            assert str(caught.value) == f"{path}: not a regular file ({kind})"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_errors_name_the_target(tmp_path):
    target = tmp_path / "missing" / "t.sfbt"
    for fmt, append in (("archive", False), ("archive", True), ("lws", True), ("json", False)):
        with pytest.raises(FileProblem) as caught:
            save(target, fmt, append)
        assert str(caught.value) == f"{target}: No such file or directory"


FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from sfbt.files import replace_file
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    def write(stream):
        for _ in range(100):
            stream.write(b"y" * 1000)
    try:
        replace_file(sys.argv[1], write)
    except OSError as error:
        print(error)
""")


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    """A write that runs out of room (RLIMIT_FSIZE stands in for a full
    disk) leaves the old file whole, no temporary file, and names the target."""
    target = tmp_path / "out"
    target.write_bytes(b"old")
    result = subprocess.run([sys.executable, "-c", FULL_DISK, str(target)],
                            capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    assert result.stdout == f"{target}: File too large\n", result.stderr
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out"]


def test_synth_output_is_written_atomically(tmp_path):
    from conftest import FIXTURES
    output = tmp_path / "out.sframe"
    output.symlink_to(tmp_path / "real.sframe")
    result = run_sfbt("sframe", "synth", FIXTURES / "v3" / "x86_64" / "callchain-O2",
                      "-o", output, "--no-cache")
    assert result.returncode == 0, result.stderr
    assert output.is_symlink() and (tmp_path / "real.sframe").stat().st_size > 0
    assert leftovers(tmp_path) == []


def test_a_lock_file_is_not_left_when_the_update_fails(tmp_path):
    target = tmp_path / "new.sfbt"
    with pytest.raises(RuntimeError):
        with locked_for_update(target) as old:
            assert old is None
            raise RuntimeError("stop")
    assert not target.exists()


CONCURRENT = textwrap.dedent("""
    import sys
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.commands.save import Capture, SaveOptions, save_captures
    path, fmt, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
    images = ImageMap("linux-x86_64", [Image("/p", 0x400000, 0x500000, b"\\xaa")])
    for number in range(100):
        frames = [cbf.Frame("pc", 0x400000 + worker * 0x1000 + number)]
        save_captures(SaveOptions(path, fmt, True, label=f"{worker}-{number}"),
                      [Capture(str(worker), frames, False)], images, "x86_64",
                      64, "SIGTRAP", number)
""")


@pytest.mark.parametrize("fmt", ["archive", "lws"])
def test_concurrent_appends_keep_every_record(tmp_path, fmt):
    """Two processes appending 100 backtraces each to one file at once:
    all 200 are kept."""
    path = tmp_path / f"shared.{fmt}"
    env = dict(os.environ, PYTHONPATH=str(PLUGIN))
    workers = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(path), fmt,
                                 str(worker)], env=env) for worker in (1, 2)]
    assert [worker.wait(timeout=300) for worker in workers] == [0, 0]
    if fmt == "archive":
        archive, error = read_archive(path)
        assert error is None
        labels = sorted(event.label for event in archive.events)
        assert labels == sorted(f"{w}-{n}" for w in (1, 2) for n in range(100))
        assert len(archive.traces) == 200
    else:
        lines = path.read_text().splitlines()
        assert len(lines) == 200 and all(line.startswith("~m#") for line in lines)
    assert leftovers(tmp_path) == []


KILLED = textwrap.dedent("""
    import sys, time
    from sfbt.files import replace_file
    def write(stream):
        stream.write(b"x" * (4 << 20))
        stream.flush()
        print("writing", flush=True)
        time.sleep(60)
    replace_file(sys.argv[1], write)
""")


def test_a_killed_writer_leaves_the_old_file_and_nothing_else(tmp_path):
    target = tmp_path / "t.sfbt"
    target.write_bytes(b"old")
    writer = subprocess.Popen([sys.executable, "-c", KILLED, str(target)],
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(PLUGIN)))
    assert writer.stdout.readline() == "writing\n"
    writer.kill()
    writer.wait(timeout=30)
    writer.stdout.close()
    assert os.listdir(tmp_path) == ["t.sfbt"] and target.read_bytes() == b"old"
