"""A frame's line in GDB's `bt` layout, shared by sframe-bt, `sfbt stack`
and cbf-load (without the archive's codecs that sfbt.archive.report needs)."""


def frame_line(level, pc, name, where):
    """One frame in GDB's layout.  ``name`` and ``where`` are printable
    text: whoever names the frame escapes them (sfbt.printable), where its
    answers are remembered, so that a hostile symbol or path cannot forge
    a line and a large archive escapes each name once."""
    return f"#{level:<2} {pc:#018x} in {name}{where}"


def inline_frame_line(level, name, where):
    """A frame of a call inlined into the frame below it: GDB's layout
    without an address (the frame has none of its own)."""
    return f"#{level:<2} {name}{where}"


def frames_of(named):
    """[(name, where)], innermost first, of what a describe function
    gives: one (name, where), or a list of them where the calls inlined
    at the address come first (they are frames of their own)."""
    return named if isinstance(named, list) else [named]
