"""install.sh: its init lines, the `sfbt` command's own venv, the packages
only the tests need, its choice of LLDB, which never removes a debugger
the user has, and the tests' LLDB 19, unpacked beside it.  Most tests
source install.sh (it only defines its functions then), the LLDB ones
with a PATH of stand-in commands; every one points HOME, XDG_DATA_HOME
and SFBT_BIN_DIR into its own folder."""

import os
import subprocess

from conftest import ROOT

INSTALL = ROOT / "install.sh"
TOOLS = ("bash", "sed", "grep", "head", "tr", "env", "id", "cat")
CROSS_PACKAGES = {"qemu-user", "gdb-multiarch", "libc6-arm64-cross", "libc6-s390x-cross"}


def private_environment(tmp_path, **more):
    """os.environ with HOME, the data directory and the link's directory
    in ``tmp_path``: install.sh touches nothing of the user's."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(tmp_path / "data"),
                SFBT_BIN_DIR=str(tmp_path / "bin"), **more)


def test_uninstall_removes_only_its_lines(tmp_path):
    env = private_environment(tmp_path)
    home = tmp_path / "home"
    (home / ".gdbinit").write_text("set history save on\nsource /old/checkout/gdb/sfbt_gdb.py\n")
    (home / ".lldbinit").write_text("command script import /x/lldb/sfbt_lldb.py\n")
    result = subprocess.run(["bash", str(INSTALL), "--uninstall"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (home / ".gdbinit").read_text() == "set history save on\n"
    assert "sfbt" not in (home / ".lldbinit").read_text()


def python_packages():
    return subprocess.run(["python3", "-m", "pip", "freeze", "--all"],
                          capture_output=True, text=True, check=True).stdout


def test_the_command_gets_a_venv_and_a_link_of_its_own(tmp_path):
    """As pipx does: a venv under the data directory, a link from the bin
    directory; python3 on PATH is left as it was, a file at the link's place
    that is not our link is left alone, and --uninstall removes both."""
    bin_dir, venv = tmp_path / "bin", tmp_path / "data" / "sfbt" / "venv"
    env = private_environment(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}")
    bin_dir.mkdir()
    theirs = "#!/bin/sh\necho theirs\n"
    (bin_dir / "sfbt").write_text(theirs)
    before = python_packages()

    def install_command():
        return subprocess.run(["bash", "-c", f'source "{INSTALL}"; install_command'],
                              env=env, capture_output=True, text=True, timeout=600)

    refused = install_command()
    assert refused.returncode == 0, refused.stdout + refused.stderr
    assert (f"not replacing {bin_dir}/sfbt (not a link to {venv}/bin/sfbt)"
            in refused.stdout)
    assert (bin_dir / "sfbt").read_text() == theirs
    (bin_dir / "sfbt").unlink()
    linked = install_command()
    assert linked.returncode == 0, linked.stdout + linked.stderr
    assert os.readlink(bin_dir / "sfbt") == f"{venv}/bin/sfbt"
    found = subprocess.run(["bash", "-c", "command -v sfbt; sfbt --version; "
                            f"{venv}/bin/python3 -c 'import sfbt; print(sfbt.__file__)'"],
                           env=env, capture_output=True, text=True)
    assert found.stdout.splitlines() == [
        f"{bin_dir}/sfbt", "sfbt 0.1.0", str(ROOT / "plugin" / "sfbt" / "__init__.py")]
    assert python_packages() == before

    removed = subprocess.run(["bash", str(INSTALL), "--uninstall"], env=env,
                             capture_output=True, text=True)
    assert removed.returncode == 0, removed.stderr
    assert not os.path.lexists(bin_dir / "sfbt") and not venv.exists()
    assert f"removed {bin_dir}/sfbt" in removed.stdout


def test_cross_architecture_packages_only_for_the_tests(tmp_path):
    """apt installs qemu-user, gdb-multiarch and the cross C libraries with
    --test-debuggers only; the test suite's Python packages too."""
    log = tmp_path / "apt.log"
    directory = fake_bin(tmp_path, {
        "dpkg-query": "exit 1\n",  # nothing installed yet
        "apt-get": f'echo "$*" >> {log}\n',
        "sudo": '"$@"\n'})
    installed = {}
    for mode in ("", "--test-debuggers"):
        log.write_text("")
        result = run_function(directory, f"install_packages $(wanted_packages {mode})")
        assert result.returncode == 0, result.stderr
        (install,) = [line for line in log.read_text().splitlines() if " install " in f" {line} "]
        installed[mode] = set(install.split())
    assert {"gdb", "python3-venv", "python3-pyelftools"} <= installed[""]
    assert not (CROSS_PACKAGES | {"python3-pytest"}) & installed[""]
    assert CROSS_PACKAGES | {"python3-pytest", "python3-pexpect", "python3-hypothesis",
                             "python3-mypy"} <= installed["--test-debuggers"]


def fake_bin(tmp_path, scripts):
    """A directory holding the basic tools and the given shell scripts."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for tool in TOOLS:
        os.symlink(subprocess.check_output(["bash", "-c", f"command -v {tool}"],
                                           text=True).strip(), directory / tool)
    for name, body in scripts.items():
        (directory / name).write_text("#!/bin/bash\n" + body)
        (directory / name).chmod(0o755)
    return directory


def fake_lldb(version, python_works=True):
    python = "PYTHON-OK" if python_works else "error: no module named lldb"
    return (f'case "$*" in --version) echo "lldb version {version}";; '
            f'*) echo "{python}";; esac\n')


def run_function(directory, function):
    return subprocess.run(
        ["bash", "-c", f'source "{INSTALL}"; {function}'],
        env={"PATH": str(directory), "HOME": str(directory)},
        capture_output=True, text=True)


def test_a_users_lldb_19_is_used(tmp_path):
    directory = fake_bin(tmp_path, {"lldb-19": fake_lldb("19.1.7"),
                                    "lldb-18": fake_lldb("18.1.8")})
    result = run_function(directory, "find_lldb")
    assert result.returncode == 0
    assert result.stdout.strip() == str(directory / "lldb-19")


def test_an_lldb_without_python_or_too_old_is_not_used(tmp_path):
    directory = fake_bin(tmp_path, {"lldb": fake_lldb("22.1.8", python_works=False),
                                    "lldb-18": fake_lldb("18.1.8")})
    assert run_function(directory, "find_lldb").returncode == 1


def test_lldb_22_is_not_installed_over_another_lldb(tmp_path):
    """apt would remove the user's python3-lldb-19: install.sh refuses with
    a message and never runs the real install."""
    log = tmp_path / "apt.log"
    apt = (f'echo "$*" >> {log}\n'
           'case "$*" in *" -s "*|*"install -s"*) '
           'echo "Remv python3-lldb-19 [1:19.1.7-3~deb12u1]"; '
           'echo "Remv lldb-19 [1:19.1.7-3~deb12u1]";; esac\n')
    directory = fake_bin(tmp_path, {"lldb-19": fake_lldb("19.1.7", python_works=False),
                                    "apt-get": apt})
    result = run_function(directory, "install_lldb")
    assert result.returncode == 1
    assert "would remove python3-lldb-19 lldb-19; not installing it" in result.stdout
    calls = log.read_text().splitlines()
    assert all(" -s " in f" {call} " for call in calls if "install" in call), calls


def fake_lldb19_deb(tmp_path):
    """A real .deb holding usr/lib/llvm-19/bin/lldb: a stand-in LLDB 19
    that runs Python (the wrapper's environment decides) and prints the
    LD_LIBRARY_PATH and PYTHONPATH it got."""
    tree = tmp_path / "deb"
    lldb = tree / "usr" / "lib" / "llvm-19" / "bin" / "lldb"
    lldb.parent.mkdir(parents=True)
    lldb.write_text('#!/bin/bash\ncase "$*" in --version) echo "lldb version 19.1.7";; '
                    '*) echo "LIBS=$LD_LIBRARY_PATH"; echo "PYTHON=$PYTHONPATH"; '
                    'echo PYTHON-OK;; esac\n')
    lldb.chmod(0o755)
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN" / "control").write_text(
        "Package: lldb-19\nVersion: 1:19.1.7\nArchitecture: amd64\n"
        "Maintainer: test <test@example.invalid>\nDescription: stand-in\n")
    deb = tmp_path / "lldb-19.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(tree), str(deb)],
                   check=True, capture_output=True)
    return deb


def test_lldb_19_is_unpacked_beside_not_installed(tmp_path):
    """install_lldb19 downloads Debian's LLDB 19 packages and unpacks them
    into its own folder, with a wrapper that finds their libraries and
    Python module; apt installs nothing, and a second run downloads
    nothing."""
    deb = fake_lldb19_deb(tmp_path)
    log = tmp_path / "apt.log"
    apt = f'echo "$*" >> {log}\ncase "$1" in download) cp {deb} .;; esac\n'
    directory = fake_bin(tmp_path, {"apt-get": apt,
                                    "dpkg-architecture": "echo x86_64-linux-gnu\n"})
    for tool in ("dpkg", "dpkg-deb", "tar", "mktemp", "rm", "mkdir", "chmod", "dirname",
                 "cp", "xz", "zstd", "gzip"):
        os.symlink(subprocess.check_output(["bash", "-c", f"command -v {tool}"],
                                           text=True).strip(), directory / tool)
    target = tmp_path / "cache" / "lldb-19"
    for _ in range(2):
        result = run_function(directory, f'install_lldb19 "{target}"')
        assert result.returncode == 0, result.stdout + result.stderr
    (call,) = log.read_text().splitlines()
    assert call.split()[:2] == ["download", "-qq"] and "python3-lldb-19" in call.split()
    out = subprocess.run([str(target / "bin" / "lldb"), "-b"], capture_output=True,
                         text=True, env={"PATH": str(directory)}).stdout
    assert f"LIBS={target}/usr/lib/llvm-19/lib:{target}/usr/lib/x86_64-linux-gnu\n" in out
    assert f"PYTHON={target}/usr/lib/llvm-19/lib/python3.11/site-packages\n" in out
