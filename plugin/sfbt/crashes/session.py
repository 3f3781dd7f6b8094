"""The session a crash's threads are walked in."""

from ..live.session import SnapshotSession


class CrashSession(SnapshotSession):
    """A SnapshotSession that walks past main to the outermost frame: no
    symbol is read at crash time (`sfbt crashes show` ends each thread at
    main when it names the frames, as GDB does)."""

    def past_main(self) -> bool:
        return True
