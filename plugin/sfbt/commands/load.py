"""cbf-load: saved backtraces, symbolized against the program loaded now."""

import os
from typing import Optional

from ..archive.imagemap import PerImageMap, image_finder
from ..archive.layout import layout_of
from ..archive.saved import SavedFile, saved_trace_lines
from ..archive.symbolize import Symbolizer
from ..errors import CommandError, SfbtError
from ..files import FileProblem
from ..frame_name import UNKNOWN
from ..printable import printable
from .session import Session

HELP = """\
Print saved backtraces, symbolized against the program loaded now.

Usage: cbf-load [--trust-files] FILE
FILE is an sfbt archive, a bare .cbf file, Swift's JSON form, or a file of
libwebsockets ~m# lines.  Each backtrace is printed in sframe-bt's layout;
return addresses are looked up at address - 1, but the kernel's signal
trampoline (the frame before one a signal interrupted), shown as
sframe-bt shows it, <signal handler called>.  Addresses in images that
are loaded now are moved to where those images are now (images are matched
by build id, else by path); frames in images the debugger has not loaded
are symbolized from the image's file named in the image map.  With no
program loaded, every frame is symbolized from its image's file.  Calls
inlined at an address are listed as frames of their own, as bt lists
them."""

#: Addresses a debugger takes (an image moved past this one is no place).
ADDRESS_END = 1 << 64


class ImageTranslator:
    """Moves saved addresses to where their images are loaded now: images
    matched by build id, else by path."""

    def __init__(self, modules):
        self._finders = PerImageMap(image_finder)
        self._current = {}
        for module in modules:
            self._current.setdefault(module.build_id or module.path, module)
            self._current.setdefault(module.path, module)

    def translate(self, address, images):
        """(address now, its Module or None, None), or (saved address, None,
        the saved image) for an image that is not loaded now."""
        image = self._finders(images)(address)
        if image is None:
            return address, None, None
        key = image.build_id.hex() if image.build_id else image.path
        module = self._current.get(key) or self._current.get(image.path)
        if module is None:
            return address, None, image
        return address - image.base + module.image_base, module, None


def modules_now(session: Optional[Session]):
    """The modules the debugger has loaded; none without a session (LLDB
    with no target) or without a program, when the debugger's architecture
    is its default (GDB's i386) rather than the archive's: the archive's
    own images then say where each frame is."""
    if session is None:
        return []
    try:
        return session.module_map().modules
    except CommandError:
        return []


def cbf_load(session: Optional[Session], words, debugger: str = "gdb"):
    """(text, error or None): the backtraces read, in sframe-bt's layout
    of the session's debugger (of ``debugger``, a Session.debugger, when
    there is no session), and what ended a damaged archive early.  An
    image file the archive names is read only if the archive's owner could
    read it (``--trust-files``: any), one line saying so for each not read."""
    trust_files = words[:1] == ["--trust-files"]
    words = words[1:] if trust_files else words
    if len(words) != 1:
        raise CommandError("cbf-load: usage: cbf-load [--trust-files] FILE")
    path = os.path.expanduser(words[0])
    debugger = session.debugger if session is not None else debugger
    layout = layout_of(debugger)
    modules = modules_now(session)
    translator = ImageTranslator(modules)
    # a frame's line as that debugger's bt shows it
    offline = Symbolizer(debugger=debugger, trust_files=trust_files,
                         debug_files=session.debug_files() if session is not None else None)

    def describer(images):
        def describe(address):
            now, module, unloaded = translator.translate(address, images)
            if unloaded is not None:
                return offline.describe(now, [unloaded])
            if not modules or now >= ADDRESS_END:
                return UNKNOWN
            return session.frame_name(now, module)
        return describe

    lines = []
    try:
        with SavedFile(path) as saved:
            offline.read_images_as(saved.read_as())
            for trace in saved.traces():
                lines += saved_trace_lines(trace, describer, layout)
            error = saved.error
    except FileProblem as failure:
        raise CommandError(f"cbf-load: {failure}") from None
    except (OSError, SfbtError) as failure:
        raise CommandError(f"cbf-load: {path}: {failure}") from None
    lines += [f"cbf-load: warning: {printable(image)}: {printable(why)}; its frames are "
              "unknown (cbf-load --trust-files reads it)"
              for image, why in offline.refused.items()]
    return "\n".join(lines), (f"cbf-load: {error}" if error is not None else None)
