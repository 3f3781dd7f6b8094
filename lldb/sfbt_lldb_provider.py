"""The SFrame frame provider (LLDB's scripted frame providers, LLDB 22 and
newer): LLDB's own `bt`, `frame select`, `up`/`down` and `finish` use the
frames SFrame data gives.

Where LLDB's own unwinder found the same frame (same PC and stack pointer),
the provider hands LLDB that frame itself (its index among the provider's
input frames): registers, frame base, variables, stepping and line lookup
at PC-1 are LLDB's own.  Only where the two disagree does it give a frame
of its own ({"idx", "pc"}: LLDB shows it with `[synthetic]` and has no
registers for it).  LLDB names such a frame and finds its line at the "pc"
it is given, so a caller's frame gets its lookup PC (the return address
less one, inside the call, as LLDB and GDB look their own callers up):
the call's line and function, not the next line's, or an inlined
function that only starts after the call.

Everything runs on the input frames: asking the thread for its frames
while LLDB builds them aborts LLDB ("Resource deadlock avoided")."""

from sfbt.commands.backtrace import walk

from sfbt_lldb_session import LldbSession, LldbTarget, arch_of, frame_registers, state

try:
    from lldb.plugins.scripted_frame_provider import ScriptedFrameProvider
except ImportError:  # LLDB older than 22
    ScriptedFrameProvider = object


class _ProviderSession(LldbSession):
    """The session of a provider: the innermost registers are those of the
    provider's first input frame; the walk goes on past main, as LLDB's own
    frames do."""

    def __init__(self, target, registers):
        super().__init__(target.GetDebugger(), target=target)
        self._registers = registers

    def target(self, thread):
        return LldbTarget(self.arch, self.process, modules=self.module_map().modules,
                          registers=self._registers)

    def past_main(self):
        return True


def _stack_frames(input_frames):
    """LLDB's input frames grouped by stack frame, lazily: (first index,
    indices).  LLDB lists each function inlined into another as a frame
    of its own with the same CFA; the innermost of them has the real PC."""
    index = 0
    frame = input_frames.GetFrameAtIndex(0)
    while frame.IsValid():
        first = index
        indices = [index]
        while True:
            index += 1
            following = input_frames.GetFrameAtIndex(index)
            if not (frame.IsInlined() and following.IsValid()
                    and following.GetCFA() == frame.GetCFA()):
                break
            indices.append(index)
            frame = following
        yield first, indices
        frame = following


def frame_plan(input_frames, frames, sp_register):
    """What the provider answers for each index: an input frame's index
    where LLDB's frame and the SFrame frame agree, a {"idx", "pc"} frame
    of our own from the first disagreement on.  When the walk ends while
    the two still agree, LLDB's further frames follow (a walk that stops
    early never shows less than LLDB)."""
    plan = []
    groups = _stack_frames(input_frames)
    agree = True
    last_input = -1
    for frame in frames:
        if agree:
            group = next(groups, None)
            agree = group is not None
            if agree:
                first = input_frames.GetFrameAtIndex(group[0])
                agree = (first.GetPC() == frame.pc
                         and (frame.level == 0
                              or first.GetSP() == frame.registers.get(sp_register)))
            if agree:
                plan += group[1]
                last_input = group[1][-1]
                continue
        plan.append({"idx": len(plan), "pc": frame.lookup_pc})
    if agree:
        index = last_input + 1
        while input_frames.GetFrameAtIndex(index).IsValid():
            plan.append(index)
            index += 1
    return plan


def plan_summary(frames, plan):
    """`sframe-provider`'s account of a thread's plan: how many frames
    the walk found, how many of the plan's frames are LLDB's own and how
    many are the provider's."""
    own = sum(isinstance(entry, dict) for entry in plan)
    return (f"{len(frames)} frames from SFrame data; {len(plan) - own} of LLDB's "
            f"own frames, {own} synthetic")


class SFrameFrameProvider(ScriptedFrameProvider):
    """Frames for LLDB's own bt, walked with SFrame data when LLDB asks for
    frame 0 (the first frame of each new frame list).

    The whole plan is made then: once LLDB holds frame 0 in the list it
    builds, any call on an input SBFrame (even IsValid) aborts LLDB 22
    ("Resource deadlock avoided") and hangs LLDB 23."""

    @staticmethod
    def get_description():
        return "sfbt: frames unwound with SFrame data"

    def __init__(self, input_frames, args):
        # Not the base class's __init__: LLDB may create a provider on its
        # event thread while `bt all` holds a lock there, and the SBThread
        # calls that __init__ makes then hang LLDB (22.1 and 23.1).
        self.input_frames = input_frames
        self._plan = []
        self._stop = None  # the process's stop ID the plan is for

    def _build_plan(self, thread):
        frame0 = self.input_frames.GetFrameAtIndex(0)
        if not frame0.IsValid():
            return []
        try:
            target = thread.GetProcess().GetTarget()
            session = _ProviderSession(target, frame_registers(arch_of(target), frame0))
            frames, _ = walk(session, session._thread(thread))
            plan = frame_plan(self.input_frames, frames, session.arch.sp)
            state.provider_plans[thread.GetIndexID()] = plan_summary(frames, plan)
            return plan
        except Exception as error:  # LLDB's own frames then
            state.errors.append(f"provider: {type(error).__name__}: {error}")
            return list(range(self.input_frames.GetSize()))

    def get_frame_at_index(self, index):
        if index == 0:
            thread = self.input_frames.GetThread()
            stop = thread.GetProcess().GetStopID()
            if stop != self._stop:
                self._plan, self._stop = self._build_plan(thread), stop
        return self._plan[index] if index < len(self._plan) else None
