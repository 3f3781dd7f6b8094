"""The thread and process of an archived sample (sfbt.archive.store.Event):
from the event's tail where its writer knew them (`sfbt record`), else
from its thread string (``"N (TID name)"``, as `sfbt record`, `sfbt stack`
and the debuggers' cbf-save write it)."""

import re
from typing import TYPE_CHECKING, NamedTuple, Optional

from ..printable import printable

if TYPE_CHECKING:
    from .store import Event

#: ``N (TID)`` or ``N (TID name)``: the debugger's number, the system's id
_THREAD_STRING = re.compile(r"(\d+) \((\d+)(?: (.*))?\)", re.S)


class SampledThread(NamedTuple):
    """One thread as its samples name it: process id (0 where not known),
    thread id (0 where not known), name, and the event's thread string."""

    pid: int
    tid: int
    name: str
    label: str

    def heading(self) -> str:
        """The thread as folded stacks and flame graphs head its samples,
        ``name (tid)`` as perf and py-spy show it, escaped
        (sfbt.printable); its thread string where no id is known."""
        if not self.tid:
            return printable(self.label) if self.label else "[unknown thread]"
        return f"{printable(self.name) or '?'} ({self.tid})"


def sampled_thread(event: "Event") -> Optional[SampledThread]:
    """The SampledThread of an event, or None where it names none."""
    pid, tid, name = event.pid, event.tid, event.thread_name
    if not tid:
        match = _THREAD_STRING.fullmatch(event.thread)
        if match is not None:
            tid, name = int(match[2]), match[3] or ""
    if not (tid or event.thread):
        return None
    return SampledThread(pid, tid, name, event.thread)


#: the thread of the samples of threads past recording.MAX_THREADS in one archive
MORE_THREADS = SampledThread(0, 0, "", "[more threads]")


class SampleGroup(NamedTuple):
    """The captures of one trace by one thread (None: the events name
    none), cut or not, and how many."""

    thread: Optional[SampledThread]
    cut: bool
    weight: int
