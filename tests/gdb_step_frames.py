"""Loaded into gdb by the SFrame-only tests: `test-step-frames N [FUNCTION]`
steps up to N instructions, while FUNCTION (if given) is on the stack,
and after
each prints GDB's own frames that are on the stack, `STEP pc:function
...`, innermost first (tail-call and inline frames left out: they have no
place on the stack).  GDB's `bt` and these frames come from the same
unwinders."""

import gdb


def stack_frames():
    frames, frame = [], gdb.newest_frame()
    while frame is not None:
        if frame.type() not in (gdb.TAILCALL_FRAME, gdb.INLINE_FRAME):
            frames.append(f"{frame.pc():#x}:{frame.name() or '??'}")
        frame = frame.older()
    return frames


class StepFrames(gdb.Command):
    def __init__(self):
        super().__init__("test-step-frames", gdb.COMMAND_USER)

    def invoke(self, argument, from_tty):
        steps, *function = argument.split()
        for _ in range(int(steps)):
            gdb.execute("stepi", to_string=True)
            if not gdb.selected_inferior().pid:
                break
            try:
                frames = stack_frames()
            except gdb.error as error:
                frames = [f"error: {error}"]
            if function and not any(f.endswith(":" + function[0]) for f in frames):
                break
            gdb.write(f"STEP {' '.join(frames)}\n")


StepFrames()
