"""`sfbt stack`: every thread's backtrace from a live process or a core
(a SnapshotSession), printed as sframe-bt prints each thread or saved as
cbf-save --all-threads saves them."""

from ..commands.backtrace import sframe_bt
from ..printable import printable


def thread_heading(number, state):
    name = f' "{printable(state.name)}"' if state.name else ""
    return f"Thread {number} (LWP {state.tid}{name}):"


def stack_text(session, words=()):
    """`sfbt stack`'s text: sframe-bt of each thread (with sframe-bt's
    ``words``, -v say), under its heading."""
    lines = []
    for (number, state), thread in zip(session.numbered, session.threads()):
        if lines:
            lines.append("")
        lines.append(thread_heading(number, state))
        backtrace = sframe_bt(session, list(words), thread)  # names escaped: one line a frame
        if backtrace:
            lines += backtrace.split("\n")
    return "".join(line + "\n" for line in lines)


def save_stacks(session, path, fmt, walked=lambda: None):
    """Save every thread's backtrace as cbf-save --all-threads does;
    returns its message (``walked`` as for commands.save.save)."""
    from ..commands.save import SaveOptions, save  # the text needs none of it
    return save(session, SaveOptions(path, fmt, all_threads=True), walked)
