#!/usr/bin/env bash
# Set up sfbt on Debian 12: system packages, the Python dependencies of the
# debuggers' own Python and of python3 on PATH, the `sfbt` command, and one
# line each in ~/.gdbinit and ~/.lldbinit that loads the plugin.
#
#   ./install.sh                   set up (idempotent)
#   ./install.sh --test-debuggers  also set up the test suite's debugger
#                                  matrix: GDB 18.1 and LLDB 23.1 from PyPI
#                                  in venvs under $XDG_CACHE_HOME/sfbt/debuggers,
#                                  and the packages only tests use
#   ./install.sh --uninstall       remove the init lines again
#
# It never removes a debugger: an LLDB the user has (19 or newer, with
# working Python bindings) is used as it is.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GDB_ENTRY="$ROOT/gdb/sfbt_gdb.py"
LLDB_ENTRY="$ROOT/lldb/sfbt_lldb.py"
GDB_LINE="source $GDB_ENTRY"
LLDB_LINE="command script import $LLDB_ENTRY"
GDB_PYPI="gdb-for-pwndbg==18.1.0.post1"
LLDB_PYPI="lldb-for-pwndbg==23.1.0.post2"
LLDB=lldb

APT_PACKAGES=(
  gcc make binutils gdb
  python3 python3-pip python3-venv python3-pyelftools python3-pytest
  python3-pexpect python3-hypothesis
  qemu-user gdb-multiarch gdbserver libc6-arm64-cross libc6-s390x-cross
  elfutils  # eu-stack: the C figure bench/stack.py prints beside sfbt stack's
)

# Packages only the test suite uses (--test-debuggers).
TEST_APT_PACKAGES=(
  golang-go  # go tool pprof reads sfbt flame --format pprof: tests/test_flame.py
  nodejs  # runs the flame graph's script: tests/test_flame.py
)

say() { printf 'install.sh: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# install_packages PACKAGE...: install those that are missing.
install_packages() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
      || missing+=("$package")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# The debuggers embed the system Python (/usr/bin/python3): its packages come
# from apt above.  python3 on PATH may be another interpreter: give it the
# dependencies and the `sfbt` command through pip.
install_python() {
  local python
  python=$(command -v python3)
  if [ "$(readlink -f "$python")" = "$(readlink -f /usr/bin/python3)" ]; then
    as_root python3 -m pip install -q --no-deps --no-build-isolation \
      --break-system-packages -e "$ROOT" 2>/dev/null \
      || as_root python3 -m pip install -q --no-deps -e "$ROOT"
  else
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$ROOT/requirements.txt"
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e "$ROOT"
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  fi
}

# lldb_works COMMAND: COMMAND is LLDB 19 or newer and runs Python.
lldb_works() {
  local version
  version=$("$1" --version 2>/dev/null | sed -n 's/.*lldb version \([0-9]*\).*/\1/p' | head -1)
  [ "${version:-0}" -ge 19 ] || return 1
  "$1" --no-lldbinit -b -o "script print('PYTHON-' + 'OK')" 2>/dev/null | grep -q PYTHON-OK
}

# The LLDB to use: the first of lldb, lldb-23 ... lldb-19 on PATH that works.
find_lldb() {
  local candidate
  for candidate in lldb lldb-23 lldb-22 lldb-21 lldb-20 lldb-19; do
    if command -v "$candidate" >/dev/null 2>&1 && lldb_works "$candidate"; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

# An LLDB 19 or newer with its Python bindings, reachable as `lldb`: the
# user's own, else Debian's lldb-22, installed only when apt would remove
# nothing for it (Debian's python3-lldb-NN packages conflict).
install_lldb() {
  local found
  if ! found=$(find_lldb); then
    local removals
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    removals=$(as_root apt-get install -s --no-install-recommends lldb-22 python3-lldb-22 \
               | sed -n 's/^Remv \([^ ]*\).*/\1/p' | tr '\n' ' ')
    if [ -n "$removals" ]; then
      say "installing lldb-22 would remove ${removals% }; not installing it."
      say "install an LLDB 19 or newer with Python bindings yourself (see README.md)"
      exit 1
    fi
    say "installing lldb-22 python3-lldb-22"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends lldb-22 python3-lldb-22 >/dev/null
    found=/usr/bin/lldb-22
  fi
  if ! command -v lldb >/dev/null 2>&1; then
    as_root ln -s "$found" /usr/local/bin/lldb
  fi
  LLDB=$found
}

# The test suite's debugger matrix beside Debian's gdb and LLDB: GDB and
# LLDB from PyPI, each in a venv of its own with pyelftools.
install_test_debuggers() {
  local home="${XDG_CACHE_HOME:-$HOME/.cache}/sfbt/debuggers" name package
  for name in gdb lldb; do
    package=$([ "$name" = gdb ] && echo "$GDB_PYPI" || echo "$LLDB_PYPI")
    if [ ! -x "$home/$name/bin/python3" ]; then
      say "setting up $package in $home/$name"
      python3 -m venv "$home/$name"
    fi
    "$home/$name/bin/python3" -m pip install -q --disable-pip-version-check \
      --root-user-action=ignore \
      "$package" "pyelftools>=0.29"
  done
}

# add_line FILE LINE: append LINE to FILE unless it is there already.
add_line() {
  touch "$1"
  grep -qxF "$2" "$1" || printf '%s\n' "$2" >>"$1"
}

# remove_lines FILE PATTERN: drop the lines sfbt added, from any checkout.
remove_lines() {
  [ -f "$1" ] || return 0
  local kept
  kept=$(grep -vE "$2" "$1" || true)
  printf '%s\n' "$kept" | sed '/./,$!d' >"$1.sfbt-tmp" && mv "$1.sfbt-tmp" "$1"
}

install_init_lines() {
  # Only entry files that exist in this checkout get a line.
  remove_lines "$HOME/.gdbinit" '^source .*/gdb/sfbt_gdb\.py$'
  remove_lines "$HOME/.lldbinit" '^command script import .*/lldb/sfbt_lldb\.py$'
  if [ -f "$GDB_ENTRY" ]; then add_line "$HOME/.gdbinit" "$GDB_LINE"; fi
  if [ -f "$LLDB_ENTRY" ]; then add_line "$HOME/.lldbinit" "$LLDB_LINE"; fi
}

check() {
  /usr/bin/python3 -c 'import elftools' \
    || { say "the system Python cannot import pyelftools"; exit 1; }
  python3 -m sfbt --version >/dev/null \
    || { say "python3 -m sfbt does not run"; exit 1; }
  "$LLDB" --no-lldbinit -b -o "command script import $LLDB_ENTRY" 2>&1 | grep -q 'error:' \
    && { say "$LLDB cannot load the plugin (its Python bindings or pyelftools)"; exit 1; }
  return 0
}

main() {
  case "${1:-}" in
  --uninstall)
    remove_lines "$HOME/.gdbinit" '^source .*/gdb/sfbt_gdb\.py$'
    remove_lines "$HOME/.lldbinit" '^command script import .*/lldb/sfbt_lldb\.py$'
    say "removed the sfbt lines from ~/.gdbinit and ~/.lldbinit"
    ;;
  ""|--test-debuggers)
    install_packages "${APT_PACKAGES[@]}"
    if [ "${1:-}" = --test-debuggers ]; then install_packages "${TEST_APT_PACKAGES[@]}"; fi
    install_lldb
    install_python
    install_init_lines
    if [ "${1:-}" = --test-debuggers ]; then install_test_debuggers; fi
    check
    say "ready: $(command -v sfbt || echo 'python3 -m sfbt')"
    ;;
  *)
    echo "usage: ./install.sh [--test-debuggers | --uninstall]" >&2
    exit 2
    ;;
  esac
}

# Sourced (by the tests) it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
