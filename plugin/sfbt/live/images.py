"""Which file holds each mapped image, and reads from it.

A process maps a file by name, but the name may since have been given to
another file (an upgrade replaced it) or to none (it was deleted).  The
file on disk is the mapped one when its device and inode are the
mapping's (/proc/PID/maps); else the mapped file is reached through
/proc/PID/map_files/START-END (root may follow those links); else a file
at the path whose build id is the one in the process's copy of the
image's first page is as good; and else only the process's memory holds
the image.  For a core, a file is the
mapped one unless its build id differs from the one the core holds in
the mapping's first page."""

from __future__ import annotations

import errno
import os
import stat
import struct
from types import SimpleNamespace

from ..elf import (PT_LOAD, PT_NOTE, ElfError, ElfImage, gnu_build_id, memory_image,
                   read_build_id, read_elf_stream)
from ..errors import TargetMemoryError
from ..files import open_regular

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from ..values import NamedTuple

#: where the path of an image whose file cannot be read points: no file
#: can be there (/dev/null is no directory), so its rows and names come
#: from memory or nowhere, never from another file of the same name
NO_FILE = "/dev/null"


class Located(NamedTuple):
    """Where a mapping's file is read (``path``; "" when it cannot be), and
    why that is not the name it was mapped by (``note``)."""

    path: str
    note: str = ""


def no_file_path(path):
    """The path of a module whose file cannot be read (see NO_FILE)."""
    return NO_FILE + path


def memory_build_id(memory, base):
    """The GNU build id of the image whose ELF header ``memory`` (a
    Target) holds at ``base``; None where it cannot be read."""
    try:
        image = memory_image(memory, base)
        if image is None:
            return None
        bias = base - min(s.vaddr - s.offset for s in image.segments() if s.type == PT_LOAD)
        for segment in image.segments():
            if segment.type != PT_NOTE:
                continue
            data = memory.read_memory(bias + segment.vaddr, min(segment.filesz, 4096))
            found = gnu_build_id(data, image.header.endian)
            if found is not None:
                return found
    except (TargetMemoryError, ElfError, ValueError, struct.error):
        return None
    return None


def _whole(data, address, size):
    if len(data) != size:
        raise TargetMemoryError(address, size)
    return data


def is_mapped_file(path, mapping):
    """Whether ``path`` names the very file ``mapping`` maps."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(status.st_mode) and _same_file(status, mapping)


def open_mapped_file(path, mapping):
    """The regular file at ``path`` opened (a binary stream) where it is
    still the very file ``mapping`` maps, else None (gone, or replaced
    since: checked on the opened descriptor)."""
    try:
        stream = open_regular(path)
    except OSError:
        return None
    if not _same_file(os.fstat(stream.fileno()), mapping):
        stream.close()
        return None
    return stream


def _same_file(status, mapping):
    major, _, minor = mapping.device.partition(":")
    try:
        device = (int(major, 16), int(minor, 16))
    except ValueError:
        return False
    return (status.st_ino == mapping.inode
            and (os.major(status.st_dev), os.minor(status.st_dev)) == device)


class ProcessImages:
    """The files behind the mappings of live process ``pid``, and reads of
    their pages (``read``) instead of the process's memory where a mapping
    is its file's bytes: read-only, unchanged since it was mapped (no
    anonymous pages), and its file found.  ``read_process(address, size)``
    reads the process's memory (bytes, possibly short)."""

    def __init__(self, pid, read_process):
        self.pid = pid
        self._process = SimpleNamespace(read_memory=lambda address, size: _whole(
            read_process(address, size), address, size))
        #: the process's mappings (Process sets them when it reads them)
        self.mappings = []
        self._located = {}  # (path, device, inode) -> Located
        self._files = {}  # path -> open stream

    def locate(self, mapping):
        key = (mapping.path, mapping.device, mapping.inode)
        found = self._located.get(key)
        if found is None:
            found = self._located[key] = self._locate(mapping)
        return found

    def _locate(self, mapping):
        if is_mapped_file(mapping.path, mapping):
            return Located(mapping.path)
        link = f"/proc/{self.pid}/map_files/{mapping.start:x}-{mapping.end:x}"
        if is_mapped_file(link, mapping):
            return Located(link)
        # Not root: a file of the same build at the path is as good (a copy,
        # or a file system that reports other device numbers, as overlayfs).
        header = next((m for m in self.mappings if m.offset == 0 and m.path == mapping.path
                       and (m.device, m.inode) == (mapping.device, mapping.inode)), None)
        in_memory = memory_build_id(self._process, header.start) if header else None
        if in_memory is not None and read_build_id(mapping.path) == in_memory:
            return Located(mapping.path)
        # (maps says "(deleted)" either way: the mapped file has no name)
        what = "replaced" if os.path.lexists(mapping.path) else "deleted"
        return Located("", f"{what} since it was mapped; its file cannot be read")

    def read(self, mapping, address, size):
        """Bytes of ``mapping`` at ``address`` from its file; None where
        they must come from the process."""
        if (mapping.writable or mapping.changed != 0 or not mapping.file_backed
                or address + size > mapping.end):
            return None
        path = self.locate(mapping).path
        if not path:
            return None
        stream = self._files.get(path)
        if stream is None:
            # False: not the mapped file (looked at once)
            stream = self._files[path] = open_mapped_file(path, mapping) or False
        if not stream:
            return None
        try:
            data = os.pread(stream.fileno(), size, mapping.offset + address - mapping.start)
        except OSError:
            return None
        return data if len(data) == size else None

    def close(self):
        for stream in self._files.values():
            if stream:
                stream.close()
        self._files.clear()


class CoreImages:
    """The files behind a core's mappings (NT_FILE): a file the core's
    writer could not read (Core.open_named), or whose build id differs
    from the one the core holds for it, is not read.  With the core's
    ``sysroot``, a library NT_FILE names is looked for there first (as
    GDB's `set sysroot`), then at its own path."""

    def __init__(self, core):
        self._core = core
        self._located = {}  # path -> Located

    def locate(self, mapping):
        found = self._located.get(mapping.path)
        if found is None:
            found = self._located[mapping.path] = self._locate(mapping)
        return found

    def _locate(self, mapping):
        header = next((m for m in self._core.mappings
                       if m.path == mapping.path and m.offset == 0), None)
        path = mapping.path
        sysroot = self._core.sysroot if self._core.has_file_list else None
        if sysroot and path.startswith("/") and path != self._core.executable:
            in_sysroot = os.path.join(sysroot, path.lstrip("/"))
            if os.path.lexists(in_sysroot):
                path = in_sysroot
        try:
            stream = self._core.open_named(path)
        except OSError as error:
            return Located("", "not found" if error.errno == errno.ENOENT
                           else error.strerror or str(error))
        in_core = memory_build_id(self._core.dumped, header.start) if header else None
        if in_core is None:
            stream.close()
            return Located(path)
        with stream:
            on_disk = read_elf_stream(stream, path, ElfImage.build_id)
        if on_disk != in_core:
            return Located("", f"build id {on_disk or 'none'} on disk, not the "
                           f"core's {in_core}")
        return Located(path)
