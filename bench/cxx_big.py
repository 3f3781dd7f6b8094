"""A generated C++ program of a real interpreter's size and inlining, for
the speed of the GDB front end on C++ (bench/gdb_cxx.py) and its tests.

jsonnet 0.22, built with `-O2 -g -Wa,--gsframe`, is about 20 MB; this
program is of that order (22 MB; about 30,000 template function
instances, 11,445 of them with code of their own, calls inlined 10 deep,
namespaces, lambdas, virtual calls, exceptions), made
from source written here deterministically, one translation unit per
namespace, so that nothing needs downloading.  Its workload runs calls
through virtual dispatch across the units, at depths that change from
one call to the next (so stacks are deep and never the same twice), and
throws now and then from a leaf to a frame some levels up.

``build(directory)`` writes the sources and builds the program once into
that directory (a cache: the sources' hash names the build), and gives
its path.  Run: python3 bench/cxx_big.py [DIRECTORY] to build it and see
its size and build time.

The program: ``cxx_big [ITERATIONS]`` (forever when none).  Each
iteration calls ``app::leaf`` (not inlined, a place to stop at) at the
bottom of every chain; ``app::checkpoint`` is called once per iteration
from main's loop.
"""

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

#: translation units (one namespace each) and the tags each one's
#: templates are instantiated over; levels of always-inlined templates
UNITS = 12
TAGS = 190
LEVELS = 7

COMMON = r"""
#pragma once
#include <stdexcept>
#include <functional>
namespace app {
struct Op {
    virtual ~Op() {}
    virtual long run(long x, int depth) = 0;
};
extern Op *ops[];
extern int op_count;
extern volatile long sink;
long leaf(long x, int depth);
long dispatch(long x, int depth);
struct Unwound : std::runtime_error {
    explicit Unwound(long v) : std::runtime_error("unwound"), value(v) {}
    long value;
};
template <typename F>
__attribute__((noinline)) long apply(F f, long x) { sink += x; return f(x) ^ (x >> 3); }
}
"""

UNIT = r"""
#include "common.h"
namespace app {{ namespace u{u} {{ namespace detail {{
template <int K> struct Tag {{ static constexpr long salt = K * 2654435761L + {u}; }};

template <int L, typename T>
struct Stage {{
    __attribute__((always_inline)) static inline long mix(long x, int depth)
    {{
        x = x * 31 + T::salt + L;
        if ((x & 0xff) == {u})
            sink += x;
        return Stage<L - 1, T>::mix(x ^ (x >> 7), depth);
    }}
}};

template <typename T>
struct Stage<0, T> {{
    __attribute__((always_inline)) static inline long mix(long x, int depth)
    {{
        return depth <= 0 ? leaf(x, depth) : dispatch(x, depth - 1);
    }}
}};

template <typename T>
struct Worker final : Op {{
    long run(long x, int depth) override
    {{
        auto step = [depth](long v) {{ return Stage<{levels}, T>::mix(v, depth); }};
        if (T::salt % 5 == 0) {{
            try {{
                return apply(step, x);
            }} catch (const Unwound &caught) {{
                return caught.value + {u};
            }}
        }}
        return apply(step, x) + 1;
    }}
}};
}}  // namespace detail

template <int... K> struct Workers {{
    static void install(Op **into)
    {{
        int i = 0;
        ((into[i++] = new detail::Worker<detail::Tag<K>>()), ...);
    }}
}};
}}  // namespace u{u}

void install_u{u}(Op **into)
{{
    u{u}::Workers<{tags}>::install(into);
}}
}}  // namespace app
"""

MAIN = r"""
#include <cstdlib>
#include "common.h"
namespace app {{
{declarations}
Op *ops[{total}];
int op_count = {total};
volatile long sink;

__attribute__((noinline)) long leaf(long x, int depth)
{{
    sink += x;
    if ((x & 0x3ff) == 0x155)
        throw Unwound(x);
    return x ^ depth;
}}

__attribute__((noinline)) long dispatch(long x, int depth)
{{
    unsigned long pick = (unsigned long)(x ^ (x >> 17)) % (unsigned long)op_count;
    return ops[pick]->run(x + depth, depth);
}}

__attribute__((noinline)) void checkpoint(long iteration)
{{
    sink += iteration;
}}
}}  // namespace app

int main(int argc, const char **argv)
{{
    using namespace app;
{installs}
    long iterations = argc > 1 ? atol(argv[1]) : -1;
    long x = 1;
    for (long i = 0; iterations < 0 || i < iterations; i++) {{
        int depth = 4 + (int)((i * 7 + (x & 15)) % 29);
        try {{
            x = dispatch(x + i, depth);
        }} catch (const Unwound &caught) {{
            x = caught.value + 1;
        }}
        checkpoint(i);
    }}
    return (int)(sink & 1);
}}
"""

FLAGS = ["-O2", "-g", "-Wa,--gsframe", "-std=c++17"]


def sources():
    """{file name: text} of the program."""
    files = {"common.h": COMMON}
    for unit in range(UNITS):
        tags = ", ".join(str(unit * TAGS + tag) for tag in range(TAGS))
        files[f"u{unit}.cc"] = UNIT.format(u=unit, tags=tags, levels=LEVELS)
    files["main.cc"] = MAIN.format(
        declarations="\n".join(f"void install_u{u}(Op **into);" for u in range(UNITS)),
        installs="\n".join(f"    install_u{u}(ops + {u * TAGS});" for u in range(UNITS)),
        total=UNITS * TAGS)
    return files


def source_hash():
    digest = hashlib.sha256(" ".join(FLAGS).encode())
    for name, text in sorted(sources().items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()[:16]


def build(directory, jobs=2):
    """The built program under ``directory`` (built there first when it is
    not yet: about 110 s of CPU time, in two compilers at a time)."""
    out = Path(directory) / f"cxx_big-{source_hash()}"
    program = out / "cxx_big"
    if program.exists():
        return program
    out.mkdir(parents=True, exist_ok=True)
    for name, text in sources().items():
        (out / name).write_text(text)
    units = [name for name in sources() if name.endswith(".cc")]
    running = []
    for name in units:  # compiled ``jobs`` at a time
        while len(running) >= jobs:
            _finish(running.pop(0))
        running.append(subprocess.Popen(
            ["g++", *FLAGS, "-c", "-o", str(out / (name[:-3] + ".o")), str(out / name)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for process in running:
        _finish(process)
    partial = out / "cxx_big.partial"
    subprocess.run(["g++", *FLAGS, "-o", str(partial),
                    *(str(out / (name[:-3] + ".o")) for name in units)],
                   check=True, capture_output=True)
    os.replace(partial, program)
    return program


def _finish(process):
    output, _ = process.communicate()
    if process.returncode:
        raise RuntimeError(f"g++ failed: {output.decode(errors='replace')[-2000:]}")


def main():
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    began = time.perf_counter()
    program = build(directory)
    print(f"{program}: {program.stat().st_size / 1e6:.1f} MB, "
          f"built in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
