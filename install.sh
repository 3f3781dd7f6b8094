#!/usr/bin/env bash
# Set up sfbt on Debian 12: system packages, the Python dependencies of the
# debuggers' own Python and of python3 on PATH, the `sfbt` command, and one
# line each in ~/.gdbinit and ~/.lldbinit that loads the plugin.
#
#   ./install.sh              set up (idempotent)
#   ./install.sh --uninstall  remove the init lines again
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GDB_ENTRY="$ROOT/gdb/sfbt_gdb.py"
LLDB_ENTRY="$ROOT/lldb/sfbt_lldb.py"
GDB_LINE="source $GDB_ENTRY"
LLDB_LINE="command script import $LLDB_ENTRY"

APT_PACKAGES=(
  gcc make binutils gdb
  python3 python3-pip python3-pyelftools python3-pytest python3-pexpect
  python3-hypothesis
  qemu-user gdb-multiarch gdbserver libc6-arm64-cross libc6-s390x-cross
)

say() { printf 'install.sh: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_packages() {
  local missing=() package
  for package in "${APT_PACKAGES[@]}"; do
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
    python3 -m pip install -q --disable-pip-version-check -r "$ROOT/requirements.txt"
    python3 -m pip install -q --disable-pip-version-check -e "$ROOT"
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  fi
}

# LLDB 19 or newer with its Python bindings, reachable as `lldb`; Debian's
# lldb-22 when there is none.
install_lldb() {
  local version=0
  if command -v lldb >/dev/null 2>&1; then
    version=$(lldb --version 2>/dev/null | sed -n 's/.*lldb version \([0-9]*\).*/\1/p' | head -1)
  fi
  if [ "${version:-0}" -ge 19 ] && lldb -b -o 'script import lldb' >/dev/null 2>&1; then
    return 0
  fi
  if ! dpkg-query -W -f='${Status}' lldb-22 2>/dev/null | grep -q 'install ok installed' \
     || ! dpkg-query -W -f='${Status}' python3-lldb-22 2>/dev/null | grep -q 'install ok installed'; then
    say "installing lldb-22 python3-lldb-22"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends lldb-22 python3-lldb-22 >/dev/null
  fi
  as_root ln -sf /usr/bin/lldb-22 /usr/local/bin/lldb
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
  lldb --no-lldbinit -b -o "command script import $LLDB_ENTRY" 2>&1 | grep -q 'error:' \
    && { say "lldb cannot load the plugin (its Python bindings or pyelftools)"; exit 1; }
  return 0
}

case "${1:-}" in
  --uninstall)
    remove_lines "$HOME/.gdbinit" '^source .*/gdb/sfbt_gdb\.py$'
    remove_lines "$HOME/.lldbinit" '^command script import .*/lldb/sfbt_lldb\.py$'
    say "removed the sfbt lines from ~/.gdbinit and ~/.lldbinit"
    ;;
  "")
    install_packages
    install_lldb
    install_python
    install_init_lines
    check
    say "ready: $(command -v sfbt || echo 'python3 -m sfbt')"
    ;;
  *)
    echo "usage: ./install.sh [--uninstall]" >&2
    exit 2
    ;;
esac
