"""A core or an archive is its writer's data: a file it names is read
only if its owner could read it (or the user trusts it), and a core's
mapped files supply only what it legitimately omits.  Run as root on
files owned by ``nobody``."""

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import require, run_sfbt
from crafted import PAGE, STACK, stack_core

NOBODY = 65534
SECRET_BYTES = b"root:$y$" * (PAGE // 8)
SECRET_WORD = struct.unpack("<Q", b"root:$y$")[0]
SECRET_NAME = "secret_name_Qz7"
SECRET_PROGRAM = f"""
void {SECRET_NAME}(void) {{ for (;;) ; }}
void _start(void) {{ {SECRET_NAME}(); }}
"""


@pytest.fixture
def as_root():
    require(os.geteuid() == 0, "files owned by another user need root")


@pytest.fixture
def shared(as_root):
    """A directory nobody may search (tmp_path's parents are root's 0700)."""
    directory = tempfile.mkdtemp(prefix="sfbt-core-trust-")
    os.chmod(directory, 0o755)
    yield Path(directory)
    shutil.rmtree(directory, ignore_errors=True)


def secret_file(path, data):
    """A file only root may read."""
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def secret_elf(as_root, tmp_path):
    """A 0600 root ELF file with SECRET_NAME at 0x401000 (its first PT_LOAD
    at 0x400000)."""
    source = tmp_path / "secret.c"
    source.write_text(SECRET_PROGRAM)
    program = tmp_path / "secret"
    subprocess.run(["gcc", "-O0", "-nostdlib", "-static", "-no-pie", "-Wl,--build-id",
                    "-o", program, source], check=True)
    os.chmod(program, 0o600)
    return program


def owned(path, uid):
    os.chown(path, uid, uid)
    return path


def core_naming(path, named, owner):
    """A core at path, of ``owner``, mapping ``named`` at 0x400000 with the
    thread stopped at 0x401000."""
    path.write_bytes(stack_core([(0x400000, 0x403000, 0, str(named))]))
    return owned(path, owner)


def open_copy(secret_elf, path):
    """A copy of the secret ELF at path that anyone may read."""
    shutil.copy(secret_elf, path)
    os.chmod(path, 0o644)
    return path


def test_a_core_of_another_user_does_not_read_a_root_file_as_its_stack(as_root, tmp_path):
    secret = secret_file(tmp_path / "shadow", SECRET_BYTES)
    core = tmp_path / "core"
    core.write_bytes(stack_core([(STACK, STACK + PAGE, 0, str(secret))], dump_stack=False))
    for uid in (NOBODY, 0):  # not even root's core: a file is never its stack
        owned(core, uid)
        result = run_sfbt("stack", "--core", core)
        output = result.stdout + result.stderr
        assert "Traceback" not in output
        assert f"{SECRET_WORD:#x}" not in output and "root:$y$" not in output, output


def test_a_core_of_another_user_names_no_frame_from_a_root_file(secret_elf, tmp_path):
    core = core_naming(tmp_path / "core", secret_elf, NOBODY)
    result = run_sfbt("stack", "--core", core)
    assert result.returncode == 0, result.stderr
    assert SECRET_NAME not in result.stdout + result.stderr
    assert "#0  0x0000000000401000 in ??" in result.stdout, result.stdout
    refusal = [line for line in result.stderr.splitlines() if str(secret_elf) in line]
    assert len(refusal) == 1 and "the core's owner (user 65534" in refusal[0], result.stderr
    trusted = run_sfbt("stack", "--core", core, "--trust-files")
    assert f"in {SECRET_NAME} ()" in trusted.stdout, trusted.stdout + trusted.stderr
    named = run_sfbt("stack", "--core", core, secret_elf)  # the user's own EXE
    assert f"in {SECRET_NAME} ()" in named.stdout, named.stdout + named.stderr


def test_roots_own_core_still_names_its_frames(secret_elf, tmp_path):
    core = core_naming(tmp_path / "core", secret_elf, 0)
    result = run_sfbt("stack", "--core", core)
    assert f"in {SECRET_NAME} ()" in result.stdout, result.stdout + result.stderr
    assert str(secret_elf) not in result.stderr


def archive_naming(path, image_path):
    """An archive of one trace: one frame at 0x401000 in the image of
    ``image_path`` mapped at 0x400000."""
    from sfbt.archive import cbf
    from sfbt.archive.imagemap import Image, ImageMap
    from sfbt.archive.store import MAGIC, Archive
    archive = Archive()
    archive.capture(cbf.encode([cbf.Frame("pc", 0x401000)]),
                    ImageMap("linux-x86_64", [Image(str(image_path), 0x400000, 0x500000)]),
                    thread="1", reason="SIGTRAP")
    path.write_bytes(MAGIC + archive.pending_bytes())
    return path


@pytest.mark.parametrize("command", [("cbf", "decode"), ("fold",)])
def test_an_archive_of_another_user_names_no_symbol_of_a_root_file(secret_elf, tmp_path,
                                                                    command):
    archive = owned(archive_naming(tmp_path / "a.sfbt", secret_elf), NOBODY)
    result = run_sfbt(*command, archive)
    assert result.returncode == 0, result.stderr
    assert SECRET_NAME not in result.stdout + result.stderr
    for trusting in (("--trust-files",), ("--exe", str(secret_elf))):
        trusted = run_sfbt(*command, archive, *trusting)
        assert SECRET_NAME in trusted.stdout, trusted.stdout + trusted.stderr
    owned(archive, 0)
    assert SECRET_NAME in run_sfbt(*command, archive).stdout


def test_cbf_load_in_gdb_reads_as_the_archives_owner(gdb, secret_elf, tmp_path):
    from gdb_support import run_gdb
    archive = owned(archive_naming(tmp_path / "a.sfbt", secret_elf), NOBODY)
    out = run_gdb(gdb, [], ["echo ==NOBODY==\\n", f"cbf-load {archive}",
                            "echo ==TRUSTED==\\n", f"cbf-load --trust-files {archive}"])
    nobody, trusted = out.split("==NOBODY==")[1].split("==TRUSTED==")
    assert SECRET_NAME not in nobody and "the archive's owner (user 65534" in nobody, out
    assert SECRET_NAME in trusted, out


def test_cbf_load_in_lldb_reads_as_the_archives_owner(lldb, secret_elf, tmp_path):
    from lldb_support import mark, run_lldb
    archive = owned(archive_naming(tmp_path / "a.sfbt", secret_elf), NOBODY)
    out = run_lldb(lldb, None, [mark("NOBODY"), f"cbf-load {archive}",
                                mark("TRUSTED"), f"cbf-load --trust-files {archive}"])
    nobody, trusted = out.split("==NOBODY==")[-1].split("==TRUSTED==")
    assert SECRET_NAME not in nobody and "the archive's owner (user 65534" in nobody, out
    assert SECRET_NAME in trusted, out


def test_a_named_file_swapped_after_its_check_shows_no_stacks(secret_elf, shared):
    """Symbols are read from a module's file by its path: a file the core's
    owner could read, replaced by a root-only one after it was checked,
    ends the command (the check after the walks) with no stacks shown."""
    from sfbt.live.corefile import Core, CoreError
    library = open_copy(secret_elf, shared / "lib")
    core = Core(str(core_naming(shared / "core", library, NOBODY)))
    try:
        assert [m.path for m in core.modules()] == [str(library)]
        core.check_unchanged()  # not swapped: no error
        swapped = shared / "swapped"
        shutil.copy(secret_elf, swapped)
        os.replace(swapped, library)
        with pytest.raises(CoreError, match="a file the core names, changed"):
            core.check_unchanged()
    finally:
        core.close()


def test_a_file_in_a_directory_the_owner_may_not_search_is_not_read(secret_elf, shared):
    """A file open to all in root's 0700 directory is root's."""
    private = shared / "private"
    private.mkdir(mode=0o700)
    library = open_copy(secret_elf, private / "lib")
    core = core_naming(shared / "core", library, NOBODY)
    result = run_sfbt("stack", "--core", core)
    assert SECRET_NAME not in result.stdout, result.stdout
    assert f"may not search {private}" in result.stderr, result.stderr
    os.chmod(private, 0o711)  # searchable: the file's own bits decide
    assert f"in {SECRET_NAME} ()" in run_sfbt("stack", "--core", core).stdout


def test_a_download_sfbt_made_itself_is_read_whoever_wrote_the_archive(as_root, tmp_path):
    """A debuginfod download (files.OpenedPath, in root's private cache) is
    no file the archive named: another user's archive still gets its names."""
    from sfbt.files import FileProblem, OpenedPath, ReadAs
    kept = secret_file(tmp_path / "download", b"\x7fELF debug file")
    nobody = ReadAs([(65534, 65534)], "the archive's owner")
    with pytest.raises(FileProblem):
        nobody.open(str(kept))
    with open(kept, "rb") as stream:
        assert nobody.open(OpenedPath(str(kept), stream)).read() == b"\x7fELF debug file"
