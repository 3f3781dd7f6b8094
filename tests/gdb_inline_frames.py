"""Loaded into gdb by the inline-frame tests: `test-frames` prints GDB's
frames, inline frames included, on one line `FRAMES pc:function ...`,
innermost first (tail-call frames left out: GDB makes them from DWARF
call-site data only where it also has CFI); `test-stepi-frames N` does
that after each of up to N stepi, while FUNCTION (if given) is on the
stack."""

import gdb


def frames_line():
    names, frame = [], gdb.newest_frame()
    while frame is not None:
        if frame.type() != gdb.TAILCALL_FRAME:
            names.append(f"{frame.pc():#x}:{frame.name() or '??'}")
        frame = frame.older()
    return "FRAMES " + " ".join(names)


def write_frames(function=None):
    """Print the frames; False where ``function`` is not among them."""
    try:
        line = frames_line()
    except gdb.error as error:
        line = f"FRAMES error: {error}"
    if function and f":{function} " not in line + " ":
        return False
    gdb.write(line + "\n")
    return True


class Frames(gdb.Command):
    def __init__(self):
        super().__init__("test-frames", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        write_frames()


class StepiFrames(gdb.Command):
    def __init__(self):
        super().__init__("test-stepi-frames", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        steps, *function = argument.split()
        for _ in range(int(steps)):
            gdb.execute("stepi", to_string=True)
            if not gdb.selected_inferior().pid or not write_frames(*function):
                break


Frames()
StepiFrames()
