"""Folded stacks (``main;f;g COUNT``, root first), the input of
flamegraph.pl and speedscope, a line per sample, as they are read: each
under its thread's root frame (``name (tid)``) with --per-thread, and
under ``[cut]`` where its stack was cut (sfbt.outputs.roots)."""

from . import roots

#: one line per sample: not kept by thread unless asked
BY_THREAD = False


#: lines handed on at a time
BATCH = 1024


def write(samples, options):
    lines = []
    for sample in samples:
        trace = sample.trace
        line = options.frame_names(trace.images).folded(trace.frames, sample.weight,
                                                        trace.callers)
        if sample.cut or options.per_thread:
            heading = ";".join(roots(sample, options.per_thread))
            line = heading + (line if line.startswith(" ") else ";" + line)  # " COUNT": no names
        lines.append(line)
        if len(lines) >= BATCH:
            yield _encoded(lines)
            lines = []
    if lines:
        yield _encoded(lines)


def _encoded(lines):
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
