"""The SFrame frame provider (LLDB 22's scripted frame providers): LLDB's
own `bt` and `frame select` show the frames SFrame data gives."""

from sfbt.commands.backtrace import walk

from sfbt_lldb_session import LldbSession, LldbTarget, state

try:
    from lldb.plugins.scripted_frame_provider import ScriptedFrameProvider
except ImportError:  # LLDB older than 22
    ScriptedFrameProvider = object


class _ProviderSession(LldbSession):
    """The session of a provider: registers come from the provider's input
    frames (asking the thread for its frames while LLDB builds them aborts
    LLDB with "Resource deadlock avoided")."""

    def __init__(self, debugger, frame0):
        super().__init__(debugger)
        self._frame0 = frame0

    def target(self, thread):
        module_map = self.module_map()
        return LldbTarget(self.arch, self.process, self._frame0, module_map.modules)


class SFrameFrameProvider(ScriptedFrameProvider):
    """Frames for LLDB's own bt, walked with SFrame data on first use."""

    @staticmethod
    def get_description():
        return "sfbt: frames unwound with SFrame data"

    def __init__(self, input_frames, args):
        super().__init__(input_frames, args)
        self._frames = None

    def _walk(self):
        try:
            session = _ProviderSession(self.target.GetDebugger(),
                                       self.input_frames.GetFrameAtIndex(0))
            frames, _ = walk(session, session._thread(self.thread))
        except Exception as error:  # LLDB's own frames then
            state.errors.append(f"provider: {type(error).__name__}: {error}")
            frames = []
        return frames

    def get_frame_at_index(self, index):
        if self._frames is None:
            self._frames = self._walk()
        if not self._frames:
            return index if index < self.input_frames.GetSize() else None
        if index < len(self._frames):
            return {"idx": index, "pc": self._frames[index].pc}
        return None
