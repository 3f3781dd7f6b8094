"""cbf-save: the current backtrace(s) in the Compact Backtrace Format."""

from __future__ import annotations

import itertools
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing and its re kept off the crash handler's imports)
    from typing import List

from ..archive import cbf
from ..archive.imagemap import Image, ImageMap, encode_image_map
from ..archive.store import Archive, save_archive
from ..errors import CommandError, SfbtError
from ..files import locked_for_update, replace_file, replace_locked, write_atomically
from ..unwind.walk import STOP_LIMIT, STOP_OUTERMOST
from .backtrace import cbf_frames, walk
from .session import Session, Thread

FORMATS = ("archive", "cbf", "json", "lws")
OPTIONS = ("--format", "--append", "--all-threads", "--label")
HELP = """\
Save the current backtrace in the Compact Backtrace Format.

Usage: cbf-save [--format archive|cbf|json|lws] [--append] [--all-threads]
                [--label TEXT] FILE
  --format archive  (default) an sfbt archive: many backtraces, each stored
                    once with a count, with the loaded images, thread, time,
                    stop reason and label (docs/archive.md)
  --format cbf      the bare CBF bytes of one backtrace
  --format json     Swift's crash form: {"architecture", "backtrace",
                    "imageMap"} with base64 CBF and image map
  --format lws      a libwebsockets ~m# line: at most 31 frames, size 0,
                    return addresses (a PC is written as PC + 1)
  --append          add to an existing archive or lws file
  --all-threads     every thread of the process, not just the selected one
Frames come from the SFrame unwinder, and from the debugger's own unwinders
where SFrame has no data.  Files are written whole through a temporary
file and a rename (a symbolic link's target is replaced, keeping its mode
and owner); --append locks the file so that concurrent saves all land."""


class SaveOptions:
    """(Plain classes here, not dataclasses: see cbf.Omitted.)"""

    def __init__(self, path: str, fmt: str = "archive", append: bool = False,
                 all_threads: bool = False, label: str = "") -> None:
        self.path = path
        self.fmt = fmt
        self.append = append
        self.all_threads = all_threads
        self.label = label


def parse_arguments(words) -> SaveOptions:
    words = list(words)
    options, path = {}, None
    while words:
        word = words.pop(0)
        if word == "--format" and words:
            options["fmt"] = words.pop(0)
            if options["fmt"] not in FORMATS:
                raise CommandError(f"cbf-save: unknown format {options['fmt']!r} "
                                   f"(one of {', '.join(FORMATS)})")
        elif word == "--append":
            options["append"] = True
        elif word == "--all-threads":
            options["all_threads"] = True
        elif word == "--label" and words:
            options["label"] = words.pop(0)
        elif word.startswith("--") or path is not None:
            raise CommandError(f"cbf-save: unexpected argument {word!r}")
        else:
            path = os.path.expanduser(word)
    if path is None:
        raise CommandError("cbf-save: no file name (usage: cbf-save [OPTIONS] FILE)")
    result = SaveOptions(path, **options)
    if result.append and result.fmt in ("cbf", "json"):
        raise CommandError("cbf-save: --append needs --format archive or lws")
    return result


def complete(words, typed: str) -> List[str]:
    """What completes ``typed`` after ``words``: the formats after
    --format, the options not given yet for a word starting with "-", none
    after --label, else file names."""
    previous = words[-1] if words else ""
    if previous == "--format":
        return [fmt for fmt in FORMATS if fmt.startswith(typed)]
    if previous == "--label":
        return []
    if typed.startswith("-"):
        return [option for option in OPTIONS
                if option.startswith(typed) and option not in words]
    return file_names(typed)


def file_names(typed: str, most: int = 1000) -> List[str]:
    """The paths that complete ``typed`` (at most ``most``, sorted),
    directories with a "/"; hidden ones only when ``typed`` names them."""
    directory, start = os.path.split(typed)
    try:
        with os.scandir(os.path.expanduser(directory) or ".") as entries:
            matches = (os.path.join(directory, entry.name) + ("/" if entry.is_dir() else "")
                       for entry in entries
                       if entry.name.startswith(start)
                       and (start.startswith(".") or not entry.name.startswith(".")))
            return sorted(itertools.islice(matches, most))
    except OSError:
        return []


class Capture:
    """One thread's backtrace, ready to save."""

    __slots__ = ("thread", "frames", "truncated")

    def __init__(self, thread: str, frames: list, truncated: bool) -> None:
        self.thread = thread
        self.frames = frames  # cbf.Frame
        self.truncated = truncated


def capture(session: Session, thread: Thread) -> Capture:
    """The thread's frames as CBF frames: SFrame's, then the debugger's own
    frames where the SFrame walk stopped early."""
    frames, stop = walk(session, thread)
    captured = cbf_frames(frames)
    if stop is not None and stop not in (STOP_LIMIT, STOP_OUTERMOST):
        try:
            theirs = session.debugger_frames(thread)
        except Exception:  # the SFrame frames are saved all the same
            theirs = []
        last = len(captured) - 1
        if last < len(theirs) and theirs[last][0] == captured[last].address:
            captured += [cbf.Frame("pc" if interrupted else "ra", pc)
                         for pc, interrupted in theirs[last + 1:]]
    return Capture(thread.label, captured, stop == STOP_LIMIT)


def image_map(session: Session) -> ImageMap:
    arch = session.arch
    images = [Image(session.image_path(m), m.image_base, m.end,
                    bytes.fromhex(m.build_id) if m.build_id else b"")
              for m in session.module_map().modules]
    return ImageMap(f"linux-{arch.name}", images, 8 * arch.pointer_size)


def save_captures(options: SaveOptions, captures: List[Capture], images: ImageMap,
                  architecture: str, word_size: int, reason: str, time_ns: int) -> str:
    """Write captures in the chosen form; returns the message to print."""
    if options.fmt in ("cbf", "json") and len(captures) > 1:
        raise CommandError(f"cbf-save: --format {options.fmt} holds one backtrace; "
                           "use --format archive with --all-threads")
    if options.fmt == "archive":
        archive = Archive()
        for one in captures:
            archive.capture(cbf.encode(one.frames, word_size, one.truncated),
                            images, time_ns=time_ns, architecture=architecture,
                            thread=one.thread, reason=reason, label=options.label)
        save_archive(options.path, archive, append=options.append)
    elif options.fmt == "cbf":
        (one,) = captures
        write_atomically(options.path, cbf.encode(one.frames, word_size, one.truncated))
    elif options.fmt == "json":
        import base64  # (here: the crash handler imports capture and image_map only)
        import json
        (one,) = captures
        data = cbf.encode(one.frames, word_size, one.truncated)
        document = {"architecture": architecture,
                    "backtrace": base64.b64encode(data).decode(),
                    "imageMap": base64.b64encode(encode_image_map(images)).decode()}
        write_atomically(options.path, (json.dumps(document) + "\n").encode())
    else:
        import shutil
        from ..archive import lws
        # lws lines hold return addresses, looked up at address - 1:
        # a PC is stored as PC + 1.
        lines = [lws.encode([f.address + (f.kind == "pc") for f in c.frames[:31]], 0) + "\n"
                 for c in captures]
        new = "".join(lines).encode()
        if options.append:
            with locked_for_update(options.path) as old:
                def write(out):
                    if old is not None:
                        shutil.copyfileobj(old, out, 1 << 20)
                    out.write(new)
                replace_file(options.path, write)
        else:
            replace_locked(options.path, lambda out: out.write(new))
    count = sum(len(c.frames) for c in captures)
    plural = "s" if len(captures) != 1 else ""
    return (f"Saved {len(captures)} backtrace{plural} ({count} frames) to "
            f"{options.path} ({options.fmt}).")


def save(session: Session, options: SaveOptions, walked=lambda: None) -> str:
    """Save the selected thread's backtrace (every thread's with
    ``options.all_threads``); returns the message to print.  ``walked()``
    is called after the walks, before the file is written (it may raise)."""
    selected = session.selected_thread()
    threads = session.threads() if options.all_threads else [selected]
    captures = [capture(session, thread) for thread in threads]
    walked()
    arch = session.arch
    return save_captures(options, captures, image_map(session), arch.name,
                         8 * arch.pointer_size, session.stop_reason(selected),
                         time.time_ns())


def cbf_save(session: Session, words) -> str:
    options = parse_arguments(words)
    if not session.has_stack():
        raise CommandError("cbf-save: No stack.")
    try:
        return save(session, options)
    except CommandError:
        raise
    except (OSError, SfbtError) as error:
        raise CommandError(f"cbf-save: {error}") from None
