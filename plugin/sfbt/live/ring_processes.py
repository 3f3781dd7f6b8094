"""The processes of `sfbt record` on perf events: their mappings made from
the rings' records (FORK copies its parent's, an exec's COMM clears them,
each MMAP2 adds one), so that a process that exits before its samples are
read is still walked, and a library loaded while recording is known from
its record.  Only a process that ran before the recording has its
mappings read from /proc, once (perf_source.SampledProcess).

A file that a record kept for later maps (perf_source's backlog) is held
open from the reading of that record (ModuleFiles.hold): when its samples
are walked, the file may have been deleted or replaced, and is read
through the descriptor held.

Their memory outside a sample's stack copy is read only from the files
their read-only mappings map (and the vDSO, the kernel's same image in
every process: sfbt's own copy).  What each file is (its load bias, build
id) is read once for the machine (ModuleFiles), as its SFrame rows and
symbols are (SFrameSources, the Describer's caches)."""

import os
from bisect import bisect_left, bisect_right
from operator import attrgetter

from ..elf import read_elf
from ..errors import TargetMemoryError
from ..symbols.vdso import own_vdso
from .images import Located, open_mapped_file
from .mappings import VDSO, Mapping, file_modules, load_bias, vdso_module

#: files kept open to read their mapped bytes at most (the least recently
#: opened closed first)
MAX_OPEN_FILES = 64
#: files held open for the records kept for later at most (the others
#: read at their paths, as they are when walked)
MAX_HELD_FILES = 256
_START = attrgetter("start")


class ModuleFiles:
    """What is read of mapped files once for every process: each file's
    ELF facts (by path, device and inode), its open descriptor for the
    bytes its read-only mappings show, and the vDSO's bytes."""

    def __init__(self):
        #: (path, device, inode) -> (its load bias mapped at 0, build id)
        self._facts = {}
        self._open = {}  # (path, device, inode) -> open file
        #: (path, device, inode) -> open file held until the recording ends
        #: (None: not an ELF file, not held), and how many are held
        self._held = {}
        self._holding = 0
        self._vdso = None

    def hold(self, mapping):
        """Hold the ELF file ``mapping`` maps open (where it still is that
        file) until ``close``: its bytes are read through the descriptor
        from then on, should it be deleted or replaced."""
        key = (mapping.path, mapping.device, mapping.inode)
        if key in self._held or self._holding >= MAX_HELD_FILES:
            return
        stream = open_mapped_file(mapping.path, mapping)  # not another file by now
        if stream is None:
            return
        try:
            held = os.pread(stream.fileno(), 4, 0) == b"\x7fELF"
        except OSError:
            held = False
        if held:
            self._holding += 1
        else:  # (a data file, not looked at again)
            stream.close()
            stream = None
        self._held[key] = stream

    def locate(self, mapping, otherwise=None):
        """Where the file ``mapping`` maps is read (images.Located): through
        the descriptor held for it (``hold``; the path names it as long as
        the recording runs, none is closed before), else by
        ``otherwise(mapping)``, else at its path."""
        stream = self._held.get((mapping.path, mapping.device, mapping.inode))
        if stream is not None:
            return Located(f"/proc/self/fd/{stream.fileno()}")
        return otherwise(mapping) if otherwise is not None else Located(mapping.path)

    def file_image(self, path, mapping):
        """(load bias, build id) of ``path`` mapped by ``mapping``, or None
        (not an ELF file)."""
        key = (path, mapping.device, mapping.inode)
        if key not in self._facts:
            self._facts[key] = read_elf(path, lambda image: (load_bias(image, 0),
                                                             image.build_id()))
        found = self._facts[key]
        return None if found is None or found[0] is None else \
            (mapping.start + found[0], found[1])

    def read(self, mapping, address, size):
        """``size`` bytes at ``address`` of the file ``mapping`` maps (a
        short read where the file ends), or None where it cannot be
        opened."""
        key = (mapping.path, mapping.device, mapping.inode)
        stream = self._held.get(key) or self._open.get(key)
        if stream is None:
            stream = open_mapped_file(mapping.path, mapping)  # not another file by now
            if stream is None:
                return None
            if len(self._open) >= MAX_OPEN_FILES:
                self._open.pop(next(iter(self._open))).close()
            self._open[key] = stream
        try:
            return os.pread(stream.fileno(), size, mapping.offset + address - mapping.start)
        except OSError:
            return None

    def vdso(self):
        """The vDSO's bytes (sfbt's own: the kernel maps one image into
        every process), or b""."""
        if self._vdso is None:
            self._vdso = own_vdso()
        return self._vdso

    def close(self):
        for stream in (*self._open.values(), *self._held.values()):
            if stream is not None:
                stream.close()
        self._open.clear()
        self._held.clear()


def _part(mapping, start, end):
    """The part of ``mapping`` from ``start`` to ``end``."""
    return Mapping(start, end, mapping.readable, mapping.writable,
                   mapping.offset + start - mapping.start, mapping.path, mapping.device,
                   mapping.inode)


class RingProcess:
    """A process whose mappings the rings tell of: started with those of
    its parent (FORK; where the rings had not told of the parent, those
    its /proc/PID/maps gave when the child's first sample or mapping was
    read: ``inherit``), with none after an exec (COMM), or with those
    /proc/PID/maps gave once (perf_source.SampledProcess, a process that
    ran before the recording); each MMAP2 record then adds one, as perf
    keeps its processes' maps.  Its threads' names come from its COMM
    records, and its samples are walked in ``session`` (made again once
    a file is mapped)."""

    #: the program it runs, where known (the session's main module)
    executable = None

    def __init__(self, pid, arch, files, mappings=(), names=None):
        self.pid = pid
        self.arch = arch
        self.files = files
        self._mappings = sorted(mappings, key=lambda m: m.start)
        self.names = dict(names or {})
        self.session = None
        self.image_map = None
        self.copy_end = 0
        self.past_copy = False

    @property
    def mappings(self):
        return self._mappings

    def inherit(self, mappings):
        """Its parent's ``mappings``, read from /proc (the rings had not
        told of the parent)."""
        self._set_mappings(list(mappings))
        self.session = None

    def _set_mappings(self, mappings):
        self._mappings = mappings

    def mapped(self, record):
        """An Mmap2 record of it: the mapping it adds, over the parts of
        those it overlaps (as a loader maps a file's whole extent, then
        its segments over it)."""
        start, end = record.start, record.start + record.length
        path = record.path if record.path.startswith(("/", "[")) else ""
        mappings = list(self.mappings)  # sorted, none overlapping another
        # those it overlaps: from the one that holds its start (if any) to
        # the last that starts before its end (found by bisection: a
        # process maps dozens of files, each a few records, at its start)
        first = bisect_right(mappings, start, key=_START)
        if first and mappings[first - 1].end > start:
            first -= 1
        last = bisect_left(mappings, end, key=_START)
        parts = []
        for old in mappings[first:last]:
            if old.start < start:
                parts.append(_part(old, old.start, start))
            if old.end > end:
                parts.append(_part(old, end, old.end))
        parts.append(Mapping(start, end, True, record.writable, record.offset, path,
                             record.device, record.inode))
        mappings[first:last] = sorted(parts, key=_START)
        self._set_mappings(mappings)
        if path.startswith("/") or path == VDSO:  # its modules may change (not its heap)
            self.session = None

    def exec(self):
        """It ran a new program: its mappings are those the program maps."""
        self._set_mappings([])
        self.session = None

    def _locate(self, mapping):
        """Where the file ``mapping`` maps is read (images.Located)."""
        return self.files.locate(mapping)

    #: what a module whose file cannot be read is described from (a
    #: Target), if anything
    _memory = None

    def modules(self):
        modules = file_modules(self.mappings, self._locate, self._memory, self.files.file_image)
        for mapping in self.mappings:
            if mapping.path == VDSO:
                vdso = vdso_module(self.files.vdso(), mapping.start)
                if vdso is not None:
                    modules.append(vdso)
        return modules

    def _mapping_at(self, address):
        mappings = self.mappings
        at = bisect_right(mappings, address, key=lambda m: m.start) - 1
        if at >= 0 and address < mappings[at].end:
            return mappings[at]
        return None

    def read(self, address, size):
        """Memory outside a sample's stack copy: only of its read-only
        mappings (what a thread running on cannot have changed)."""
        mapping = self._mapping_at(address)
        data = None
        if mapping is not None and not mapping.writable and address + size <= mapping.end:
            data = self._read_mapped(mapping, address, size)
        if data is None or len(data) != size:
            if address >= self.copy_end:
                self.past_copy = True
            raise TargetMemoryError(address, size)
        return data

    def _read_mapped(self, mapping, address, size):
        """Bytes of read-only ``mapping`` at ``address``, or None: from the
        file it maps (the vDSO from sfbt's own)."""
        if mapping.path == VDSO:
            at = address - mapping.start
            return self.files.vdso()[at:at + size]
        return self.files.read(mapping, address, size) if mapping.file_backed else None

    def thread_name(self, tid):
        """Its name, or the process's (a new thread's until it names itself)."""
        return self.names.get(tid) or self.names.get(self.pid, "")

    def close(self):
        pass
