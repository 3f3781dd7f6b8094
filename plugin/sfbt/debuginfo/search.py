"""Where a file's separate debug file is, looked for as GDB looks by
default: by build id under the debug root, then by the name and CRC its
``.gnu_debuglink`` section gives, beside the file, in ``.debug/`` beside
it and under the debug root in the file's own directory, then (when
``DEBUGINFOD_URLS`` names servers and downloads are allowed) from
debuginfod.  As GDB, only for a file without DWARF of its own."""

import os
import re
import struct
import zlib

from ..elf import SHT_NOBITS, read_elf
from ..files import OpenedPath, open_regular
from ..values import Value

#: GDB's default debug-file-directory
DEFAULT_ROOTS = ("/usr/lib/debug",)
#: the longest .gnu_debuglink name followed (NAME_MAX)
MAX_LINK_NAME = 255
_HEX = re.compile(r"[0-9a-f]{4,}")


class FileFacts(Value):
    """What the search needs to know of a file."""

    __slots__ = _fields = ("build_id", "has_dwarf", "debuglink")
    __hash__ = None  # as a dataclass's that may change

    def __init__(self, build_id, has_dwarf, debuglink):
        self.build_id = build_id  # or None
        self.has_dwarf = has_dwarf
        self.debuglink = debuglink  # (name, CRC32), or None


def file_facts(path):
    """The FileFacts of the ELF file at path, or None when it cannot be read."""
    return read_elf(path, _facts)


def _facts(image):
    sections = image.sections()
    has_dwarf = any(s.name in (".debug_info", ".zdebug_info") and s.size
                    and s.type != SHT_NOBITS for s in sections)
    link = image.section(".gnu_debuglink")
    return FileFacts(image.build_id(), has_dwarf,
                     _debuglink(image.section_data(link), image.header.endian)
                     if link is not None else None)


def _debuglink(data, endian):
    """(name, CRC32) of a .gnu_debuglink section's bytes: a file name (no
    directory), NUL, padding to 4 bytes, the CRC; None when it is not one."""
    end = data.find(b"\0", 0, MAX_LINK_NAME + 1)
    if end <= 0:
        return None
    name = data[:end]
    crc_at = (end + 4) & ~3
    if b"/" in name or name in (b".", b"..") or crc_at + 4 > len(data):
        return None
    (crc,) = struct.unpack_from(endian + "I", data, crc_at)
    return os.fsdecode(name), crc


def build_id_path(root, build_id):
    """``ROOT/.build-id/xx/yyyy.debug``, as GDB and elfutils name it."""
    return os.path.join(root, ".build-id", build_id[:2], build_id[2:] + ".debug")


def _crc32(path):
    crc = 0
    with open_regular(path) as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc


def _another_file(candidate, original):
    """Whether ``candidate`` is not the original file itself (None: no
    file at hand)."""
    try:
        if original is None:
            return True
        # an OpenedPath's name may now be another file: its descriptor's
        status = os.fstat(candidate.stream.fileno()) if isinstance(candidate, OpenedPath) \
            else os.stat(candidate)
        return not os.path.samestat(status, os.stat(original))
    except OSError:
        return False


def _is_debug_file(candidate, original, build_id, crc=None):
    """Whether ``candidate`` is a debug file of the original: another file,
    ELF, with the build id asked for, or (when neither has one) the CRC the
    debuglink gives."""
    if not _another_file(candidate, original):
        return False
    facts = file_facts(candidate)
    if facts is None:
        return False
    if build_id is not None:
        return facts.build_id == build_id
    try:
        return facts.build_id is None and crc is not None and _crc32(candidate) == crc
    except OSError:
        return False


def _link_candidates(path, name, roots):
    """Where GDB looks for a debuglink ``name`` of the file at path: beside
    it, in .debug/ beside it, and under each root in its directory (as
    named and with links resolved)."""
    directories = [os.path.dirname(os.path.abspath(path))]
    real = os.path.dirname(os.path.realpath(path))
    if real not in directories:
        directories.append(real)
    yield os.path.join(directories[0], name)
    yield os.path.join(directories[0], ".debug", name)
    for root in roots:
        for directory in directories:
            yield os.path.join(root, directory.lstrip("/"), name)


def _by_build_id(path, build_id, roots):
    """The debug file under a root named by the build id, or None."""
    if build_id is not None:
        for root in roots:
            candidate = build_id_path(root, build_id)
            if os.path.isfile(candidate) and _is_debug_file(candidate, path, build_id):
                return candidate
    return None


def _by_debuglink(path, build_id, roots, facts):
    """The debug file the .gnu_debuglink of the file at ``path`` (whose
    FileFacts are ``facts``; None: no file at hand) names, where GDB looks
    for it, or None."""
    if facts is None or facts.debuglink is None:
        return None
    name, crc = facts.debuglink
    for candidate in _link_candidates(path, name, roots):
        if os.path.isfile(candidate) and _is_debug_file(candidate, path, build_id, crc):
            return candidate
    return None


class DebugFiles:
    """The separate debug file of each file asked about, looked for once
    per build id (two mappings of one file at two paths are one search):
    on this machine, then (``download``) from debuginfod.  One per
    command; sfbt record's sampling loop uses one with download=False."""

    def __init__(self, roots=DEFAULT_ROOTS, download=True, servers=None):
        self.roots = tuple(roots)
        self.download = download
        #: the servers to ask, as DEBUGINFOD_URLS names them (None: those it names)
        self.servers = servers
        self._debuginfod = False  # read from the environment on first use
        self._found = {}  # (path, build id) asked about: the answer
        self._by_build_id = {}  # build id searched for: what was found, or None

    def find(self, path, build_id=None, what=None):
        """The path of the separate debug file for the ELF file at ``path``
        (None or a missing file: only the build id is known) whose build id
        is ``build_id`` (hex; None: the file's own), or None when the file
        has DWARF of its own or none is found.  ``what`` names the file in
        messages (default: path)."""
        if path is not None and "\0" in path:  # no file has that name (a hostile archive's)
            path = None
        key = (path, build_id)
        if key not in self._found:
            self._found[key] = self._search(path, build_id, what or path or "an image")
        return self._found[key]

    def _search(self, path, build_id, what):
        facts = file_facts(path) if path else None
        if facts is not None:
            if build_id is None:
                build_id = facts.build_id
            elif facts.build_id not in (None, build_id):
                facts = None  # another build of the file: nothing of it applies
        if facts is not None and facts.has_dwarf:
            return None
        if build_id is not None and not _HEX.fullmatch(build_id):
            build_id = None
        path = path if facts else None
        if build_id is None:
            return _by_debuglink(path, None, self.roots, facts)
        if build_id in self._by_build_id:
            return self._searched_before(path, build_id, facts)
        found = _by_build_id(path, build_id, self.roots) \
            or _by_debuglink(path, build_id, self.roots, facts)
        if found is None and self._servers() is not None:
            found = self._debuginfod.debug_file(build_id, what)
        self._by_build_id[build_id] = found
        return found

    def _searched_before(self, path, build_id, facts):
        """The debug file of a build id searched for from another path:
        what was found (unless it is this very file), else what only this
        path can lead to, its own debuglink."""
        found = self._by_build_id[build_id]
        if found is not None:
            return found if _another_file(found, path) else None
        found = _by_debuglink(path, build_id, self.roots, facts)
        if found is not None:
            self._by_build_id[build_id] = found
        return found

    def _servers(self):
        if self._debuginfod is False:
            self._debuginfod = None
            environ = os.environ if self.servers is None \
                else dict(os.environ, DEBUGINFOD_URLS=self.servers)
            if self.download and environ.get("DEBUGINFOD_URLS", "").strip():
                from .debuginfod import Debuginfod  # urllib: only when needed
                self._debuginfod = Debuginfod.from_environment(environ)
        return self._debuginfod
