"""The frame lines of a backtrace as GDB's `bt`, `sframe-bt` and `sfbt
stack` print them, parsed alike (tests/gdb_frame_lines.py in gdb,
tests/test_cxx_differential.py outside it)."""

import re

#: a frame line: level, pc, name, GDB's argument list (`set print
#: frame-arguments none` prints ``(x=..., y=...)``), where
LINE = re.compile(r"^#(\d+)\s+(?:0x([0-9a-f]+) in )?(.+?)(?: \([^()]*\))?"
                  r"( at \S+:\d+| from \S+)?$")


def parsed(text):
    """[[level, pc or None, name, where, tag or None]] of a backtrace's
    frame lines (sframe-bt -v's tag cut off: ``tailcall``, ``inline``,
    ``sframe``...; ``where`` `` at FILE:LINE``, `` from LIB`` or "")."""
    lines = []
    for line in text.splitlines():
        tag = None
        if line.endswith("]") and "  [" in line:
            line, tag = line.rsplit("  [", 1)
            tag = tag[:-1].split(",")[0]
        match = LINE.match(line)
        if match:
            lines.append([int(match[1]), int(match[2], 16) if match[2] else None, match[3],
                          match[4] or "", tag])
    return lines


def with_kinds(lines):
    """sframe-bt -v's lines with the pc of the line before on an inline
    line (GDB's layout prints it on a stack frame's innermost line only)
    and, for the tag, the kind of GDB's frame: inline, tailcall or frame."""
    pc = None
    for line in lines:
        pc = line[1] = line[1] if line[1] is not None else pc
        line[4] = line[4] if line[4] in ("inline", "tailcall") else "frame"
    return lines


def to_main(lines):
    """The lines up to the first frame of ``main`` (where bt stops)."""
    names = [line[2] for line in lines]
    return lines[:names.index("main") + 1] if "main" in names else lines
