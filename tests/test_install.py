"""install.sh: its init lines, and its choice of LLDB, which never removes a
debugger the user has.  The LLDB tests source install.sh (it only defines
its functions then) with a PATH of stand-in commands."""

import os
import subprocess

from conftest import ROOT

INSTALL = ROOT / "install.sh"
TOOLS = ("bash", "sed", "grep", "head", "tr", "env", "id", "cat")


def test_uninstall_removes_only_its_lines(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gdbinit").write_text("set history save on\nsource /old/checkout/gdb/sfbt_gdb.py\n")
    (home / ".lldbinit").write_text("command script import /x/lldb/sfbt_lldb.py\n")
    result = subprocess.run(["bash", str(INSTALL), "--uninstall"],
                            env=dict(os.environ, HOME=str(home)),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (home / ".gdbinit").read_text() == "set history save on\n"
    assert "sfbt" not in (home / ".lldbinit").read_text()


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
