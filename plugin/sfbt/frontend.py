"""What the debugger commands share, whatever the debugger: their
arguments, the backtrace layout, saving captures and reading saved
backtraces back.  The adapters in gdb/ and lldb/ supply frames, symbols and
output."""

import base64
import json
import os
from dataclasses import dataclass

from . import cbf, lws
from .archive import Archive, is_archive, parse_archive, save_archive
from .files import write_atomically
from .imagemap import decode_image_map, encode_image_map
from .report import frame_line, frame_lines, trace_heading
from .unwinder import STOP_LIMIT


class UsageError(Exception):
    """Bad command arguments; the text is the one-line message."""


# -- sframe-bt ---------------------------------------------------------------

BACKTRACE_USAGE = "sframe-bt [N | -N] [-v] [-full]"
BACKTRACE_OPTIONS = ("-v", "-full")
BACKTRACE_HELP = """\
Print a backtrace unwound with SFrame data.

Usage: sframe-bt [N | -N] [-v] [-full]
  N      print the innermost N frames
  -N     print the outermost N frames
  -v     show how each frame was unwound (innermost, sframe, flex, synth
         (rows synthesized from DWARF CFI), signal, fp) and from which
         module's SFrame data
  -full  also print each frame's recovered SP, FP and CFA

Frames are printed as GDB's `bt` prints them with `set print
frame-arguments none`, with the address always shown:
  #3  0x00007ffff7e591f5 in start_thread at ./nptl/pthread_create.c:442
The walk ends at main (in GDB unless `set backtrace past-main on`).  Where
a module has no SFrame data, the frame-pointer chain is followed (GDB:
`set sframe fallback fp|none`)."""


def parse_backtrace_arguments(words):
    """(count or None, verbose, full)."""
    count, verbose, full = None, False, False
    for word in words:
        if word == "-v":
            verbose = True
        elif word == "-full":
            full = True
        else:
            try:
                count = int(word, 0)
            except ValueError:
                raise UsageError(f"sframe-bt: unknown argument {word!r} "
                                 f"(usage: {BACKTRACE_USAGE})") from None
    return count, verbose, full


def complete_option(options, typed):
    return [option for option in options if option.startswith(typed)]


def how_found(frame):
    if frame.level == 0:
        return "innermost"
    if frame.data_module is not None:
        return f"{frame.how}, {frame.data_module.name}"
    return frame.how


def registers_line(frame, arch):
    parts = []
    for label, number in (("sp", arch.sp), ("fp", arch.fp)):
        value = frame.registers.get(number)
        parts.append(f"{label} = {value:#x}" if value is not None else f"{label} = <unknown>")
    if frame.cfa is not None:
        parts.append(f"cfa = {frame.cfa:#x}")
    return "        " + ", ".join(parts)


def backtrace_lines(frames, stop, count, verbose, full, describe, arch):
    """sframe-bt's output.  ``describe(frame)`` gives (name, where)."""
    shown, more = frames, False
    if count is not None and count >= 0:
        shown, more = frames[:count], len(frames) > count
    elif count is not None:
        shown = frames[count:]
    lines = []
    for frame in shown:
        if frame.signal_trampoline:
            line = frame_line(frame.level, frame.pc, "<signal handler called>", "")
        else:
            line = frame_line(frame.level, frame.pc, *describe(frame))
        if verbose:
            line += f"  [{how_found(frame)}]"
        lines.append(line)
        if full:
            lines.append(registers_line(frame, arch))
    if more:
        lines.append("(More stack frames follow...)")
    elif stop is not None and not (count is not None and count < 0 and stop == STOP_LIMIT):
        lines.append(f"Backtrace stopped: {stop}")
    return lines


# -- cbf-save ----------------------------------------------------------------

SAVE_FORMATS = ("archive", "cbf", "json", "lws")
SAVE_OPTIONS = ("--format", "--append", "--all-threads", "--label")
SAVE_HELP = """\
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
file."""


@dataclass
class SaveOptions:
    path: str
    fmt: str = "archive"
    append: bool = False
    all_threads: bool = False
    label: str = ""


def parse_save_arguments(words):
    words = list(words)
    options, path = {}, None
    while words:
        word = words.pop(0)
        if word == "--format" and words:
            options["fmt"] = words.pop(0)
            if options["fmt"] not in SAVE_FORMATS:
                raise UsageError(f"cbf-save: unknown format {options['fmt']!r} "
                                 f"(one of {', '.join(SAVE_FORMATS)})")
        elif word == "--append":
            options["append"] = True
        elif word == "--all-threads":
            options["all_threads"] = True
        elif word == "--label" and words:
            options["label"] = words.pop(0)
        elif word.startswith("--") or path is not None:
            raise UsageError(f"cbf-save: unexpected argument {word!r}")
        else:
            path = os.path.expanduser(word)
    if path is None:
        raise UsageError("cbf-save: no file name (usage: cbf-save [OPTIONS] FILE)")
    result = SaveOptions(path, **options)
    if result.append and result.fmt in ("cbf", "json"):
        raise UsageError("cbf-save: --append needs --format archive or lws")
    return result


@dataclass
class Capture:
    """One thread's backtrace, ready to save."""

    thread: str
    frames: list  # cbf.Frame
    truncated: bool


def save_captures(options, captures, image_map, architecture, word_size,
                  reason, time_ns):
    """Write captures in the chosen form; returns the message to print."""
    if options.fmt in ("cbf", "json") and len(captures) > 1:
        raise UsageError(f"cbf-save: --format {options.fmt} holds one backtrace; "
                         "use --format archive with --all-threads")
    if options.fmt == "archive":
        archive = Archive()
        for capture in captures:
            archive.capture(cbf.encode(capture.frames, word_size, capture.truncated),
                            image_map, time_ns=time_ns, architecture=architecture,
                            thread=capture.thread, reason=reason, label=options.label)
        save_archive(options.path, archive, append=options.append)
    elif options.fmt == "cbf":
        (capture,) = captures
        write_atomically(options.path,
                         cbf.encode(capture.frames, word_size, capture.truncated))
    elif options.fmt == "json":
        (capture,) = captures
        data = cbf.encode(capture.frames, word_size, capture.truncated)
        document = {"architecture": architecture,
                    "backtrace": base64.b64encode(data).decode(),
                    "imageMap": base64.b64encode(encode_image_map(image_map)).decode()}
        write_atomically(options.path, (json.dumps(document) + "\n").encode())
    else:
        # lws lines hold return addresses, looked up at address - 1:
        # a PC is stored as PC + 1.
        lines = [lws.encode([f.address + (f.kind == "pc") for f in c.frames[:31]], 0) + "\n"
                 for c in captures]
        old = b""
        if options.append and os.path.exists(options.path):
            with open(options.path, "rb") as stream:
                old = stream.read()
        write_atomically(options.path, old + "".join(lines).encode())
    count = sum(len(c.frames) for c in captures)
    plural = "s" if len(captures) != 1 else ""
    return (f"Saved {len(captures)} backtrace{plural} ({count} frames) to "
            f"{options.path} ({options.fmt}).")


# -- reading saved backtraces ----------------------------------------------------

LOAD_HELP = """\
Print saved backtraces, symbolized against the program loaded now.

Usage: cbf-load FILE
FILE is an sfbt archive, a bare .cbf file, Swift's JSON form, or a file of
libwebsockets ~m# lines.  Each backtrace is printed in sframe-bt's layout;
return addresses are looked up at address - 1.  Addresses in images that
are loaded now are moved to where those images are now (images are matched
by build id, else by path); frames in images the debugger has not loaded
are symbolized from the image's file named in the image map."""


@dataclass
class SavedTrace:
    heading: str  # None for a file of one bare backtrace
    frames: list
    truncated: bool
    images: list
    weight: int


def saved_form(data):
    """Which form cbf-save wrote: "archive", "json", "lws" or (anything
    else) "cbf"."""
    if is_archive(data):
        return "archive"
    if data.lstrip().startswith(b"{"):
        return "json"
    if b"~m#" in data:
        return "lws"
    return "cbf"


def saved_traces(data, path):
    """([SavedTrace], error that ended an archive early or None) for an
    archive, Swift's JSON form, an lws log or a bare CBF file.  Raises
    ValueError (or the codecs' errors) for other malformed input."""
    form = saved_form(data)
    if form == "archive":
        archive, error = parse_archive(data, path)
        traces = []
        for number, trace in enumerate(archive.traces.values(), 1):
            if not trace.events:
                continue
            decoded = trace.decoded()
            images = archive.image_map(trace.events[0].image_map_index).images
            traces.append(SavedTrace(trace_heading(number, trace), decoded.frames,
                                     decoded.truncated, images, trace.count))
        return traces, error
    if form == "json":
        document = json.loads(data)
        decoded = cbf.decode(base64.b64decode(document["backtrace"]))
        images = (decode_image_map(base64.b64decode(document["imageMap"])).images
                  if document.get("imageMap") else [])
        return [SavedTrace(None, decoded.frames, decoded.truncated, images, 1)], None
    if form == "lws":
        traces = []
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            for blob in lws.find_blobs(line):
                addresses, size = lws.decode_blob(blob)
                frames = [cbf.Frame("ra", a) for a in addresses]
                traces.append(SavedTrace(f"Backtrace from line {number} (size {size}):",
                                         frames, False, [], 1))
        return traces, None
    decoded = cbf.decode(data)
    return [SavedTrace(None, decoded.frames, decoded.truncated, [], 1)], None


LOAD_ERRORS = (ValueError, KeyError, cbf.CBFError, lws.LwsFormatError)


def saved_trace_lines(traces, make_describer):
    """sframe-bt's layout for saved traces; ``make_describer(images)`` gives
    describe(lookup address) -> (name, where)."""
    lines = []
    for trace in traces:
        if trace.heading:
            lines.append(trace.heading)
        lines += frame_lines(trace.frames, trace.truncated, make_describer(trace.images))
    return lines


class ImageTranslator:
    """Moves saved addresses to where their images are loaded now: images
    matched by build id, else by path."""

    def __init__(self, modules):
        self._current = {}
        for module in modules:
            self._current.setdefault(module.build_id or module.path, module)
            self._current.setdefault(module.path, module)

    def translate(self, address, images):
        """(address now, its Module or None, None), or (saved address, None,
        the saved image) for an image that is not loaded now."""
        image = next((i for i in images if i.base <= address < i.end_of_text), None)
        if image is None:
            return address, None, None
        key = image.build_id.hex() if image.build_id else image.path
        module = self._current.get(key) or self._current.get(image.path)
        if module is None:
            return address, None, image
        return address - image.base + module.image_base, module, None
