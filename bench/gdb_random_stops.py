"""Loaded into gdb by bench/gdb_sframe_only.py after tests/gdb_inline_frames.py
(its `test-frames`):
`test-random-stops SEED COUNT FILE` breaks at functions drawn (seeded) from
FILE, one name a line, and at each of up to COUNT stops prints GDB's frames
(`FRAMES ...`), then steps a drawn number of instructions and prints them
again.  A breakpoint is disabled after three hits, so that the stops spread
over the program.  The draws depend only on SEED and the stops, so two gdbs
on the same deterministic program stop at the same places."""

import random

import gdb

BREAKPOINTS = 40
HITS = 3


class RandomStops(gdb.Command):
    def __init__(self):
        super().__init__("test-random-stops", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        seed, count, path = argument.split()
        draw = random.Random(int(seed))
        with open(path) as names:
            functions = sorted(line.strip() for line in names if line.strip())
        points = [gdb.Breakpoint(name, internal=True)
                  for name in draw.sample(functions, min(BREAKPOINTS, len(functions)))]
        for _ in range(int(count)):
            for command in ("continue", f"stepi {draw.randrange(1, 60)}"):
                gdb.execute(command, to_string=True)
                if not gdb.selected_inferior().pid:
                    return
                gdb.execute("test-frames")
            for point in points:
                if point.enabled and point.hit_count >= HITS:
                    point.enabled = False


RandomStops()
