#!/usr/bin/env bash
# Set up sfbt on Debian 12: system packages, the `sfbt` command in a venv of
# its own (as pipx does), and one line each in ~/.gdbinit and ~/.lldbinit
# that loads the plugin.
#
#   ./install.sh                   set up (idempotent)
#   ./install.sh --test-debuggers  also set up what the test suite needs:
#                                  its Python packages in python3 on PATH,
#                                  qemu-user, gdb-multiarch and the cross C
#                                  libraries, the other tools its tests run
#                                  (TEST_APT_PACKAGES), GDB 18.1 and
#                                  LLDB 23.1 from PyPI in venvs under
#                                  $XDG_CACHE_HOME/sfbt/debuggers, and
#                                  Debian's LLDB 19 unpacked beside them
#   ./install.sh --uninstall       remove the init lines, the `sfbt` link
#                                  and its venv again
#
# The `sfbt` command: a venv under $XDG_DATA_HOME/sfbt/venv (default
# ~/.local/share) with this checkout installed in editable mode, linked from
# $SFBT_BIN_DIR (default ~/.local/bin, or /usr/local/bin for root).  No other
# Python is changed for it.
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
# Debian 12's own LLDB, for the test matrix: unpacked, not installed, since
# python3-lldb-19 and python3-lldb-22 conflict.  The libraries they link to
# are installed (TEST_APT_PACKAGES).
LLDB19_PACKAGES=(lldb-19 liblldb-19 python3-lldb-19 libllvm19 libclang-cpp19)

# The plugin and `sfbt` import only Python's standard library; pyelftools
# is the reference reader the tests and bench/ check sfbt's readers against.
APT_PACKAGES=(
  gcc make binutils gdb
  python3 python3-pip python3-venv python3-pyelftools
  libstdc++6  # its __cxa_demangle names C++ frames as GDB does: plugin/sfbt/names.py
)
# Only for the test suite (--test-debuggers): its Python packages for the
# system Python, and the AArch64 / s390x programs' qemu-user, gdb-multiarch
# and C runtimes.
TEST_APT_PACKAGES=(
  python3-pytest python3-pexpect python3-hypothesis
  python3-mypy  # checks the typed seams: tests/test_types.py
  g++  # builds the C++ test programs: tests/test_cxx_names.py, tests/test_partly_sframe.py
  qemu-user gdb-multiarch gdbserver libc6-arm64-cross libc6-s390x-cross
  elfutils  # eu-stack: the C figure bench/stack.py prints beside sfbt stack's
  zstd  # systemd-coredump's compression, the anchor of bench/crashes.py's record sizes
  time  # /usr/bin/time: eu-stack's peak memory in bench/crashes.py
  linux-perf  # perf: the reference of sfbt record on perf events (tests, bench)
  golang-go  # go tool pprof reads sfbt flame --format pprof: tests/test_flame.py
  nodejs  # runs the flame graph's script: tests/test_flame.py
  debuginfod  # a real debuginfod server: tests/test_debuginfo.py
  libc6-dbg  # the C library's debug file under /usr/lib/debug: the same
  clang  # DWARF 5 as LLVM writes it (strx, addrx, rnglistx): tests/test_inline.py
  llvm  # llvm-symbolizer, the reference for clang's inline chains: the same
  # the libraries LLDB 19, unpacked beside (LLDB19_PACKAGES), links to
  libedit2 libxml2 libcurl4 libipt2 libpython3.11 libz3-4 libffi8 libzstd1
)

VENV="${XDG_DATA_HOME:-$HOME/.local/share}/sfbt/venv"
if [ "$(id -u)" -eq 0 ]; then BIN_DIR="${SFBT_BIN_DIR:-/usr/local/bin}"
else BIN_DIR="${SFBT_BIN_DIR:-$HOME/.local/bin}"; fi
LINK="$BIN_DIR/sfbt"

say() { printf 'install.sh: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# wanted_packages [--test-debuggers]: the apt packages to install.
wanted_packages() {
  printf '%s\n' "${APT_PACKAGES[@]}"
  if [ "${1:-}" = --test-debuggers ]; then printf '%s\n' "${TEST_APT_PACKAGES[@]}"; fi
}

# install_packages PACKAGE...: install those not installed yet.
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

# The `sfbt` command: this checkout, editable, in a venv of the system
# Python's, linked from BIN_DIR.  A file there that is not our link is left
# alone, with a message.
install_command() {
  if [ ! -x "$VENV/bin/python3" ]; then
    say "making the sfbt command's venv in $VENV"
    /usr/bin/python3 -m venv "$VENV"
  fi
  "$VENV/bin/python3" -m pip install -q --disable-pip-version-check -e "$ROOT"
  mkdir -p "$BIN_DIR"
  if { [ -e "$LINK" ] || [ -L "$LINK" ]; } && ! is_our_link "$LINK"; then
    say "not replacing $LINK (not a link to $VENV/bin/sfbt); run $VENV/bin/sfbt"
    return 0
  fi
  ln -sfn "$VENV/bin/sfbt" "$LINK"
  local first
  first=$(command -v sfbt || true)
  case ":$PATH:" in
  *":$BIN_DIR:"*)
    if [ "$first" != "$LINK" ]; then say "$first comes before $LINK on PATH"; fi ;;
  *) say "$BIN_DIR is not on PATH: add it, or run $LINK" ;;
  esac
}

# is_our_link PATH: PATH is a symbolic link to the sfbt venv's command.
is_our_link() {
  [ -L "$1" ] && [ "$(readlink "$1")" = "$VENV/bin/sfbt" ]
}

uninstall_command() {
  if is_our_link "$LINK"; then rm -f "$LINK" && say "removed $LINK"; fi
  if [ -f "$VENV/pyvenv.cfg" ]; then rm -rf "$VENV" && say "removed $VENV"; fi
  rmdir "$(dirname "$VENV")" 2>/dev/null || true
}

# The tests run under python3 on PATH: the system Python has their packages
# from apt (TEST_APT_PACKAGES); another one (pyenv's, a venv) gets them from
# pip.
install_test_python() {
  if [ "$(python3 -c 'import sys; print(sys.prefix)')" != /usr ]; then
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
      -r "$ROOT/requirements.txt"
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
# LLDB from PyPI, each in a venv of its own (with pyelftools, which the
# plugin does not import).
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
  install_lldb19 "$home/lldb-19"
}

# install_lldb19 DIR: Debian's LLDB 19 packages unpacked into DIR (apt-get
# download, dpkg -x; nothing installed, no LLDB removed) and DIR/bin/lldb,
# a wrapper that finds its libraries and Python module there.
install_lldb19() {
  local dir=$1 work deb
  if [ -x "$dir/bin/lldb" ] && lldb_works "$dir/bin/lldb"; then return 0; fi
  say "unpacking ${LLDB19_PACKAGES[*]} into $dir"
  work=$(mktemp -d)
  (cd "$work" && apt-get download -qq "${LLDB19_PACKAGES[@]}" 2>/dev/null) \
    || { rm -rf "$work"; say "apt-get download ${LLDB19_PACKAGES[*]} failed"; exit 1; }
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$dir"; done
  rm -rf "$work"
  local multiarch
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
  cat >"$dir/bin/lldb" <<WRAPPER
#!/bin/sh
# Debian's LLDB 19, unpacked by sfbt's install.sh --test-debuggers.
root=\$(cd "\$(dirname "\$0")/.." && pwd)
export LD_LIBRARY_PATH="\$root/usr/lib/llvm-19/lib:\$root/usr/lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONPATH="\$root/usr/lib/llvm-19/lib/python3.11/site-packages\${PYTHONPATH:+:\$PYTHONPATH}"
exec "\$root/usr/lib/llvm-19/bin/lldb" "\$@"
WRAPPER
  chmod +x "$dir/bin/lldb"
  lldb_works "$dir/bin/lldb" || { say "$dir/bin/lldb does not run Python"; exit 1; }
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
  "$VENV/bin/sfbt" --version >/dev/null \
    || { say "$VENV/bin/sfbt does not run"; exit 1; }
  if [ "${1:-}" = --test-debuggers ]; then
    python3 -c 'import elftools, hypothesis, mypy, pexpect, pytest' \
      || { say "python3 on PATH cannot import the tests' packages"; exit 1; }
  fi
  "$LLDB" --no-lldbinit -b -o "command script import $LLDB_ENTRY" 2>&1 | grep -q 'error:' \
    && { say "$LLDB cannot load the plugin (its Python bindings)"; exit 1; }
  return 0
}

main() {
  case "${1:-}" in
  --uninstall)
    remove_lines "$HOME/.gdbinit" '^source .*/gdb/sfbt_gdb\.py$'
    remove_lines "$HOME/.lldbinit" '^command script import .*/lldb/sfbt_lldb\.py$'
    say "removed the sfbt lines from ~/.gdbinit and ~/.lldbinit"
    uninstall_command
    ;;
  ""|--test-debuggers)
    local packages
    mapfile -t packages < <(wanted_packages "${1:-}")
    install_packages "${packages[@]}"
    install_lldb
    install_command
    install_init_lines
    if [ "${1:-}" = --test-debuggers ]; then
      install_test_python
      install_test_debuggers
    fi
    check "${1:-}"
    if is_our_link "$LINK"; then say "ready: $LINK"; else say "ready: $VENV/bin/sfbt"; fi
    ;;
  *)
    echo "usage: ./install.sh [--test-debuggers | --uninstall]" >&2
    exit 2
    ;;
  esac
}

# Sourced (by the tests) it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
