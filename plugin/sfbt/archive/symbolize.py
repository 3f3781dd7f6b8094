"""Archived backtraces symbolized: the ELF file of each archived image,
found by build id among the files given (--exe, --debug-dir) or at the
image's path, and its separate debug file; names and lines come from that
file's FileSymbolizer (sfbt.symbols), the kernel's (``[kernel.kallsyms]``)
from /proc/kallsyms where the running kernel is the one recorded, the
vDSO's (``linux-vdso.so.1``, ``[vdso]``: no file) from this machine's
vDSO where it is the recorded one (its build id); each
frame's as one FrameName (sfbt.frame_name), printed in the layout of the
debugger asked for (GDB's by default: sfbt's own commands print GDB's
layout).

An archive is its writer's data: an image's file it names is read only if
the archive's owner could read it (``read_images_as``), unless the user
named it with --exe or trusts the archive's files (``trust_files``)."""

import errno
import os

from ..debuginfo import DebugFiles
from ..elf import ElfError
from ..files import TRUSTED, FileProblem
from ..frame_name import UNKNOWN, FrameName
from ..symbols.kallsyms import KERNEL_IMAGE, recorded_kernel
from ..symbols.vdso import VDSO, VDSO_NAME, recorded_vdso
from ..symbols.symbolizer import FileSymbolizer, with_debug_file
from .imagemap import PerImageMap, image_finder


class Symbolizer:
    """Finds the ELF file for each archived image (by build id among the
    files given with --exe and in --debug-dir, else the image's own path),
    and its separate debug file (``debug_files``), and symbolizes run-time
    addresses against them as ``debugger``'s bt would (a Session.debugger:
    which line of several at an address).  ``strict``: a damaged table
    of a file raises ElfError naming it (`cbf decode` says so), else it
    gives no names (sfbt.symbols.symbolizer.FileSymbolizer)."""

    def __init__(self, executables=(), debug_dirs=(), debug_files=None, debugger="gdb",
                 trust_files=False, strict=True):
        self._debugger = debugger
        self._strict = strict
        self._trust_files = trust_files
        self._read_as = TRUSTED
        #: the image files named by the archive that were not read: path -> why
        self.refused = {}
        self._candidates = list(executables)
        for directory in debug_dirs:
            for root, _, names in os.walk(directory):
                self._candidates += [os.path.join(root, n) for n in sorted(names)]
        self._debug_files = debug_files or DebugFiles()
        self._by_path = {}  # (path, ReadAs) -> FileSymbolizer or None
        self._by_build_id = None
        self._for_image = {}  # (path, build id) -> FileSymbolizer or None
        self._describers = PerImageMap(self._describer)

    def read_images_as(self, read_as):
        """Read the image files an archive names only as ``read_as`` (a
        files.ReadAs: the archive's owner) could, unless trust_files."""
        if not self._trust_files:
            self._read_as = read_as

    def _open(self, path, read_as=TRUSTED):
        key = (path, read_as)
        if key not in self._by_path:
            try:
                self._by_path[key] = FileSymbolizer(read_as.open(path), path, self._strict,
                                                    debugger=self._debugger)
            except FileProblem as problem:
                if problem.errno == errno.EACCES:
                    self.refused.setdefault(path, problem.strerror)
                self._by_path[key] = None
            except (OSError, ElfError):
                self._by_path[key] = None
        return self._by_path[key]

    def _index_build_ids(self):
        if self._by_build_id is None:
            self._by_build_id = {}
            for path in self._candidates:
                symbolizer = self._open(path)
                if symbolizer is not None and symbolizer.build_id:
                    self._by_build_id.setdefault(symbolizer.build_id, symbolizer)
        return self._by_build_id

    def for_image(self, image):
        key = (image.path, image.build_id)
        if key not in self._for_image:
            self._for_image[key] = self._find_for_image(image)
        return self._for_image[key]

    def _find_for_image(self, image):
        build_id = image.build_id.hex() if image.build_id else None
        if image.path == KERNEL_IMAGE:  # named only on the kernel it was recorded on
            return recorded_kernel(build_id)
        if image.path in (VDSO_NAME, VDSO):  # named only from this machine's own
            return recorded_vdso(build_id)
        return self._with_debug_file(self._find_file(image, build_id), build_id, image.path)

    def _find_file(self, image, build_id):
        if build_id:
            found = self._index_build_ids().get(build_id)
            if found is not None:
                return found
        read_as = TRUSTED if image.path in self._candidates else self._read_as  # --exe
        own = self._open(image.path, read_as) \
            if image.path and not _is_pseudo_path(image.path) and os.path.exists(image.path) \
            else None
        if own is not None and (not build_id or own.build_id in (None, build_id)):
            return own
        if not build_id and len(self._candidates) == 1:
            return self._open(self._candidates[0])
        return None

    def _with_debug_file(self, found, build_id, what):
        """The symbolizer of the separate debug file of ``found`` (a
        FileSymbolizer or None: only the build id is known), else found."""
        return with_debug_file(found, found.path if found else None, build_id,
                               self._debug_files, lambda path: self._open(path, self._read_as),
                               what)

    def describe_file_address(self, address):
        """The FrameName (sfbt.frame_name) of an address of the --exe file
        itself (a non-PIE program's run-time addresses are its file's)."""
        if not self._candidates:
            return UNKNOWN
        symbolizer = self._open(self._candidates[0])
        symbolizer = self._with_debug_file(symbolizer, None, self._candidates[0]) \
            if symbolizer is not None else None
        if symbolizer is None:
            return UNKNOWN
        location = symbolizer.line(address)
        file, line = location if location is not None else (None, 0)
        return FrameName(symbolizer.function(address), file, line)

    def describer(self, images):
        """describe(address) -> FrameName for the images of one image map,
        remembering its answers (an archive's traces share most of their
        addresses)."""
        return self._describers(images)

    def _describer(self, images):
        find = image_finder(images)
        answers = {}

        def describe(address):
            answer = answers.get(address)
            if answer is None:
                answer = self._describe_in(address, find(address))
                if len(answers) >= 1 << 20:
                    answers.clear()
                answers[address] = answer
            return answer
        return describe

    def describe(self, address, images):
        """The FrameName (sfbt.frame_name) of a run-time address in one of
        ``images``, the calls inlined there included."""
        image = next((i for i in images if i.base <= address < i.end_of_text), None)
        return self._describe_in(address, image)

    def _describe_in(self, address, image):
        if image is None:
            return UNKNOWN
        symbolizer = self.for_image(image)
        if symbolizer is None:
            return FrameName(None, module=image.path)
        return symbolizer.frame_name(address - image.base + symbolizer.base_address, image.path)


def kernel_range(images):
    """(start, end) of the kernel's addresses in an image map, its
    ``[kernel.kallsyms]`` image (sfbt.symbols.kallsyms), or None: where a
    trace's kernel frames end (cbf.kernel_entries)."""
    for image in images:
        if image.path == KERNEL_IMAGE:
            return image.base, image.end_of_text
    return None


def _is_pseudo_path(path):
    """Whether an image's path names no file: the kernel's name of a
    mapping with no file (``[vdso]``) or any relative name (the loader's
    ``linux-vdso.so.1``): never a file that may stand in the current
    directory, which whoever wrote the archive does not choose."""
    return not path.startswith("/") or (path.startswith("[") and path.endswith("]"))
