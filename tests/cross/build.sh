#!/usr/bin/env bash
# Rebuild the AArch64 and s390x test programs of the qemu tests (see
# README.md in this directory).  Needs the Debian cross compilers and the
# binutils 2.46 cross builds that tests/fixtures/regen.sh makes (it is run
# with --toolchains-only first).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$HERE/src
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/sfbt-toolchain
BU_VER=2.46

log() { printf '== %s\n' "$*" >&2; }

# the directory with the unprefixed as and ld of the 2.46 cross build
tooldir() { echo "$CACHE/binutils-$BU_VER-$1/$1/bin"; }

# The cross compilers, and the 2.46 cross builds: regen.sh installs the one
# and builds the other (only what is missing; quick when all is there).
ensure_toolchains() {
    "$HERE/../fixtures/regen.sh" --toolchains-only
}

# use TARGET VERSION: set CC (an array) for SFrame v1 (the system's cross
# gas 2.40) or v3 (gas and ld 2.46, through gcc -B)
use() {
    local target=$1 version=$2
    CC=("$target-gcc")
    if [[ $version == v3 ]]; then
        local dir p
        dir=$(tooldir "$target")
        CC+=(-B "$dir/")
        for p in as ld; do
            [[ $("${CC[@]}" -print-prog-name=$p) == "$dir/$p" ]] \
                || { echo "${CC[*]} does not use $dir/$p" >&2; exit 1; }
        done
    fi
    OBJCOPY=$target-objcopy
    # Debug info for our own objects only (glibc's archive has none);
    # no build paths, no build id, no compiler version strings.
    CFLAGS=(-g -Wa,--gsframe -fno-ident -ffile-prefix-map="$SRC"=. -ffile-prefix-map="$WORK"=.)
    LDFLAGS=(-Wl,--build-id=none -Wl,-z,max-page-size=4096)
}

# variant_flags NAME: compiler flags of one call-chain variant
variant_flags() {
    case $1 in
        O0) echo -O0 ;;
        O2) echo -O2 -fomit-frame-pointer ;;
        O2fp) echo -O2 -fno-omit-frame-pointer ;;
        pac) echo -O2 -fomit-frame-pointer -mbranch-protection=pac-ret ;;
        pacb) echo -O0 -mbranch-protection=pac-ret+b-key ;;
        *) echo "unknown variant $1" >&2; exit 1 ;;
    esac
}

# chain_objects PIC-FLAGS EXTRA-DEFINES VARIANT...: one object per variant
chain_objects() {
    local pic=$1 defines=$2 v flags
    shift 2
    OBJECTS=()
    for v; do
        read -ra flags <<<"$(variant_flags "$v")"
        (cd "$SRC" && "${CC[@]}" "${CFLAGS[@]}" $pic $defines "${flags[@]}" -DSUFFIX=_"$v" \
            -c chain.c -o "$WORK/chain-$v.o")
        OBJECTS+=("$WORK/chain-$v.o")
    done
    local list=
    for v; do list+="X($v) "; done
    (cd "$SRC" && "${CC[@]}" "${CFLAGS[@]}" $pic -O2 -DVARIANTS="$list" \
        -c main.c -o "$WORK/main.o")
    OBJECTS+=("$WORK/main.o")
}

finish() {
    "$OBJCOPY" --remove-section=.comment "$1"
    printf '  %-28s %7s bytes\n' "${1#"$HERE"/}" "$(stat -c %s "$1")" >&2
}

# static ARCH VERSION VARIANT...: a static executable holding the variants
static() {
    local arch=$1 version=$2 out=$HERE/$1/chain-$2
    shift 2
    use "$arch-linux-gnu" "$version"
    chain_objects "-fno-pie" "" "$@"
    # ld 2.40 drops .sframe with --gc-sections; 2.46 keeps it
    local gc=()
    [[ $version == v1 ]] || gc=(-Wl,--gc-sections)
    "${CC[@]}" -static "${LDFLAGS[@]}" "${gc[@]}" "${OBJECTS[@]}" -o "$out"
    finish "$out"
}

# dynamic ARCH VARIANT...: a PIE calling back through libapply.so
dynamic() {
    local arch=$1 dir=$HERE/$1
    shift
    use "$arch-linux-gnu" v3
    (cd "$SRC" && "${CC[@]}" "${CFLAGS[@]}" -O2 -fPIC -shared -Wl,-soname,libapply.so \
        "${LDFLAGS[@]}" libapply.c -o "$dir/libapply.so")
    finish "$dir/libapply.so"
    chain_objects "-fPIE" "-DVIA_LIBRARY" "$@"
    "${CC[@]}" -pie "${LDFLAGS[@]}" "${OBJECTS[@]}" -L"$dir" -lapply \
        -Wl,-rpath,'$ORIGIN' -o "$dir/dynamic-v3"
    finish "$dir/dynamic-v3"
}

main() {
    ensure_toolchains
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    rm -rf "$HERE/aarch64" "$HERE/s390x"
    mkdir -p "$HERE/aarch64" "$HERE/s390x"
    static aarch64 v1 O0 O2 pac pacb
    static aarch64 v3 O0 O2 pac pacb
    static s390x v3 O0 O2 O2fp
    dynamic aarch64 O0 O2
    dynamic s390x O0 O2
    log "done: $(du -cb "$HERE"/aarch64/* "$HERE"/s390x/* | tail -1 | cut -f1) bytes"
}

main "$@"
