"""Loaded into lldb by the tests: `test-lldb-pcs` prints the PCs of LLDB's
own frames on one line, one per stack frame: LLDB lists a function inlined
into another as a frame of its own with the same CFA, and gives the outer
function the address of the inlined call; the innermost of them has the
real PC.  `test-lldb-inlined` prints, for each of LLDB's frames, 1 where
it is a function inlined into the next one, else 0.
`test-provider-plans` prints the frame provider's plans for made-up frame
lists."""



def lldb_pcs(debugger, command, exe_ctx, result, internal_dict):
    thread = exe_ctx.GetThread()
    pcs, previous = [], None
    for frame in thread.frames:
        if (previous is not None and previous.IsInlined()
                and frame.GetCFA() == previous.GetCFA()):
            continue  # the stack frame the previous, inlined entry is in
        pcs.append(frame.GetPC())
        previous = frame
    result.AppendMessage("LLDB-PCS " + " ".join(f"{pc:#x}" for pc in pcs))


def lldb_inlined(debugger, command, exe_ctx, result, internal_dict):
    thread = exe_ctx.GetThread()
    result.AppendMessage("LLDB-INLINED " + " ".join(
        str(int(frame.IsInlined())) for frame in thread.frames))


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand(f"command script add -o -f {__name__}.lldb_pcs test-lldb-pcs")
    debugger.HandleCommand(
        f"command script add -o -f {__name__}.lldb_inlined test-lldb-inlined")
    debugger.HandleCommand(
        f"command script add -o -f {__name__}.provider_plans test-provider-plans")


class _InputFrame:
    """Stands for an SBFrame of a provider's input frames."""

    def __init__(self, pc, sp, inlined=False):
        self.pc, self.sp, self.inlined = pc, sp, inlined

    def IsValid(self):
        return self.pc is not None

    def IsInlined(self):
        return self.inlined

    def GetPC(self):
        return self.pc

    def GetSP(self):
        return self.sp

    def GetCFA(self):
        return self.sp


class _InputFrames:
    def __init__(self, frames):
        self.frames = frames

    def GetFrameAtIndex(self, index):
        return self.frames[index] if index < len(self.frames) else _InputFrame(None, None)


def provider_plans(debugger, command, exe_ctx, result, internal_dict):
    """`test-provider-plans`: the provider's plan for LLDB frames and SFrame
    frames that agree (LLDB lists an inlined function, and goes on after
    the walk ends) and that part after two frames."""
    from sfbt.unwind.walk import Frame
    from sfbt_lldb_provider import frame_plan

    walked = [Frame(level, 0x1000 * (level + 1), {7: 0x100 * (level + 1)},
                    interrupted=level == 0) for level in range(4)]
    lldb_frames = [_InputFrame(0x1000, 0x100), _InputFrame(0x2000, 0x200, inlined=True),
                   _InputFrame(0x2004, 0x200), _InputFrame(0x3000, 0x300),
                   _InputFrame(0x4000, 0x400), _InputFrame(0x5000, 0x500)]
    agreeing = frame_plan(_InputFrames(lldb_frames), walked, 7)
    lldb_frames[3] = _InputFrame(0x3000, 0x308)  # another stack pointer
    parting = frame_plan(_InputFrames(lldb_frames), walked, 7)
    result.AppendMessage(f"PLAN-AGREEING {agreeing!r}")
    result.AppendMessage(f"PLAN-PARTING {parting!r}")
