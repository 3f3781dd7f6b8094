"""Folded stacks (``main;f;g COUNT``, root first), the input of
flamegraph.pl and speedscope, a line per sample, as they are read: each
under its thread's root frame (``name (tid)``) with --per-thread, and
under ``[cut]`` where its stack was cut (sfbt.outputs.roots)."""

from . import roots

#: one line per sample: not kept by thread unless asked
BY_THREAD = False


def write(samples, options):
    for sample in samples:
        trace = sample.trace
        line = options.frame_names(trace.images).folded(trace.frames, sample.weight,
                                                        trace.callers)
        heading = ";".join(roots(sample, options.per_thread))
        if heading:  # a stack of no names is " COUNT"
            line = heading + (line if line.startswith(" ") else ";" + line)
        yield (line + "\n").encode("utf-8", "surrogateescape")
