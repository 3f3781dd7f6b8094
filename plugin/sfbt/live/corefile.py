"""A core file: each thread's registers from its NT_PRSTATUS note, the
mapped files from NT_FILE, memory from the PT_LOAD segments (and, for
what the kernel did not dump, the mapped files themselves), the vDSO from
memory at NT_AUXV's AT_SYSINFO_EHDR.

A core without NT_FILE (qemu-user's, some dumpers' and older kernels')
names no files: the executable is placed where the auxiliary vector says
(a PIE by AT_ENTRY, checked against AT_PHDR; a fixed-address program at
its own addresses) and the shared libraries are those the dynamic
linker's link map in the core's memory lists (sfbt.live.linkmap), each
read from ``sysroot`` + its name (as GDB's `set sysroot`), else from its
name, if that file is of the core's machine.

A core is its writer's data: a file NT_FILE names is read only if the
core's owner (the file's owner and group, and NT_PRPSINFO's pr_uid and
pr_gid: both must be able to) could read it, unless it is the executable
the user named or the user trusts the core's files (``trust_files``); and
a file supplies only memory the core legitimately omits: a read-only
PT_LOAD segment the kernel did not dump, never the stack or writable
memory.  Files refused are kept in ``refused`` (path -> why).

The core and the files NT_FILE names are opened as regular files only (a
FIFO would block) and read with pread, never mapped: a core truncated
while mapped would kill the process with SIGBUS.  A read that comes back
short, or a core whose size or times differ after the walk from when it
was opened, is a core that changed while it was read: one line says so."""

import errno
import os
import struct
from bisect import bisect_right
from types import SimpleNamespace

from ..arch import Arch, with_register_sets
from ..elf import PT_LOAD, PT_NOTE, ElfError, ElfImage, notes, open_elf
from ..errors import SfbtError, TargetMemoryError, left_out
from ..files import TRUSTED, FileProblem, ReadAs, open_regular
from .core_notes import (ET_CORE, NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE, NT_ARM_PAC_MASK,
                         AT_PHDR, AT_PAGESZ, AT_ENTRY, AT_EXECFN, AT_SYSINFO_EHDR, PF_W,
                         PRPSINFO_UID, PRPSINFO_PID, PRPSINFO_FNAME, PRSTATUS_PID,
                         PRSTATUS_REGISTERS, PRSTATUS_TAIL)
from .images import CoreImages, memory_build_id
from .linkmap import LibraryNames, find_r_debug, r_debug_address, read_link_map, read_name
from .mappings import Mapping, file_modules, parse_nt_file, vdso_module
from .memory import ThreadState

ET_EXEC = 2
PT_DYNAMIC = 2
PT_PHDR = 6
#: e_entry's offset in a 64-bit ELF header
E_ENTRY = 24
_MASK64 = (1 << 64) - 1
#: The most note bytes read (a thread's notes are a few KiB).
MAX_NOTE_BYTES = 64 << 20
#: The largest vDSO image read from a core (it is a few pages).
MAX_VDSO_BYTES = 1 << 20


class CoreError(SfbtError):
    """A core file sfbt cannot read, or that does not match the executable."""


def _identity(status):
    """What of a file's status changes when it is written or replaced."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
            status.st_ctime_ns)


class Core:
    """The core file at ``path``; ``executable`` (optional) must be the
    program it is a core of; ``trust_files``: read the files the core names
    whoever wrote the core; ``sysroot``: where the libraries the core
    names (NT_FILE's, the link map's) are looked for first."""

    def __init__(self, path, executable=None, trust_files=False, sysroot=None):
        self.path = path
        self.sysroot = sysroot
        #: the files named by the core that were not read: path -> why
        self.refused = {}
        self._checked = {}  # path -> _identity of the file checked
        try:
            self._stream = open_regular(path)
        except OSError as error:
            raise CoreError(str(error)) from None
        opened = os.fstat(self._stream.fileno())
        self._size, self._identity = opened.st_size, _identity(opened)
        try:
            self._parse()
        except (ElfError, struct.error) as error:
            self.close()
            raise CoreError(f"{path}: not a readable core file: {error}") from None
        except BaseException:
            self.close()
            raise
        self._read_as = TRUSTED if trust_files else ReadAs.owner_of(
            self._stream.fileno(), "the core's owner", self._writer)
        #: the core's own bytes as a Target reads them (no mapped file's)
        self.dumped = SimpleNamespace(read_memory=self.read_dumped)
        self.images = CoreImages(self)
        self._with_executable = None
        self._user_executable = executable is not None
        self.executable = None
        #: whether the core has NT_FILE (else its files are placed here)
        self.has_file_list = bool(self.mappings)
        try:
            if self.mappings:
                self.executable = self._check_executable(executable)
            else:
                self.executable = self._place_files(executable)
        except BaseException:
            self.close()
            raise
        self._modules = None

    def _read_file(self, offset, size):
        if offset + size > self._size:
            raise ElfError(f"{size} bytes run past the end of the file", offset)
        try:
            data = os.pread(self._stream.fileno(), size, offset)
        except OSError as error:
            raise CoreError(f"{self.path}: {error.strerror or error}") from None
        if len(data) < size:
            raise self._changed()
        return data

    def _changed(self):
        return CoreError(f"{self.path}: the core file changed while it was read "
                         f"(it was {self._size} bytes)")

    def check_unchanged(self):
        """Raise CoreError if the core is not the file it was when opened
        (a short read during a walk only ends that walk), or a file it
        names is not the one whose owner and mode were checked (symbols
        and SFrame data are read from a module's file by its path)."""
        try:
            now = _identity(os.stat(self.path))
        except OSError:
            now = None
        if now != self._identity or self._identity != _identity(
                os.fstat(self._stream.fileno())):
            raise self._changed()
        for path, checked in self._checked.items():
            try:
                now = _identity(os.stat(path))
            except OSError:
                now = None
            if now != checked:
                raise CoreError(f"{path}, a file the core names, changed while it was "
                                "read; no stacks are shown")

    def _parse(self):
        image = ElfImage(self._read_file, 0, self.path)
        if image.header.type != ET_CORE:
            raise CoreError(f"{self.path}: not a core file (ELF type {image.header.type})")
        arch = image.arch
        if arch is None or not arch.regset:
            raise CoreError(f"{self.path}: {arch.name if arch else 'its machine'} "
                            f"is not supported (sfbt stack reads {with_register_sets()})")
        self.arch: Arch = arch
        endian = image.header.endian
        self._loads = sorted((s.vaddr, s.vaddr + s.filesz, s.offset)
                             for s in image.segments() if s.type == PT_LOAD and s.filesz)
        self._load_starts = [start for start, _, _ in self._loads]
        #: (start, end) of what read-only segments hold that is not dumped
        self._omitted = sorted((s.vaddr + s.filesz, s.vaddr + s.memsz)
                               for s in image.segments() if s.type == PT_LOAD
                               and s.memsz > s.filesz and not s.flags & PF_W)
        self._writer = []  # NT_PRPSINFO's (pr_uid, pr_gid)
        self.threads_raw, self.mappings, self.auxv, self.command = [], [], {}, ""
        self.pid = None
        #: NT_ARM_PAC_MASK's (data mask, instruction mask), where written
        self.pac_masks = None
        note_bytes = 0
        for segment in image.segments():
            if segment.type != PT_NOTE:
                continue
            note_bytes += segment.filesz
            if note_bytes > MAX_NOTE_BYTES:
                raise CoreError(f"{self.path}: notes of more than {MAX_NOTE_BYTES} bytes")
            for kind, name, desc in notes(self._read_file(segment.offset, segment.filesz),
                                          endian):
                if name == b"LINUX" and kind == NT_ARM_PAC_MASK and len(desc) == 16:
                    self.pac_masks = struct.unpack(endian + "QQ", desc)
                if name != b"CORE":
                    continue
                self._check_note_size(kind, desc)
                if kind == NT_PRSTATUS:
                    self.threads_raw.append(desc)
                elif kind == NT_FILE:
                    self.mappings = parse_nt_file(desc, endian)
                elif kind == NT_PRPSINFO:
                    (self.pid,) = struct.unpack_from(endian + "i", desc, PRPSINFO_PID)
                    self._writer = [struct.unpack_from(endian + "II", desc, PRPSINFO_UID)]
                    fname = desc[PRPSINFO_FNAME:PRPSINFO_FNAME + 16]
                    self.command = fname.split(b"\0")[0].decode("utf-8", "replace")
                elif kind == NT_AUXV:
                    pairs = struct.unpack_from(f"{endian}{len(desc) // 8}Q", desc)
                    self.auxv = dict(zip(pairs[::2], pairs[1::2]))
        if not self.threads_raw:
            raise CoreError(f"{self.path}: a core file without threads (no NT_PRSTATUS)")
        self._endian = endian

    def _check_note_size(self, kind, desc):
        """A note of the size the machine's kernel writes: registers of
        another machine (an AArch64 e_machine over x86-64 notes) or a
        short note is refused, not read past."""
        if kind == NT_PRSTATUS:
            wanted = PRSTATUS_REGISTERS + self.arch.regset_size + PRSTATUS_TAIL
            if len(desc) != wanted:
                raise CoreError(f"{self.path}: an NT_PRSTATUS note of {len(desc)} bytes, "
                                f"not the {wanted} of {self.arch.name} (the notes are "
                                "not of the machine the ELF header names)")
        elif kind == NT_PRPSINFO and len(desc) < PRPSINFO_FNAME + 16:
            raise CoreError(f"{self.path}: an NT_PRPSINFO note of {len(desc)} bytes, "
                            f"shorter than {PRPSINFO_FNAME + 16}")
        elif kind == NT_FILE:
            count = int.from_bytes(desc[:8], "big" if self.arch.big_endian else "little")
            if len(desc) < 16 or 16 + 24 * count > len(desc):
                raise CoreError(f"{self.path}: an NT_FILE note of {len(desc)} bytes is "
                                f"too short for its {count} mappings")

    def _main_mapping(self):
        entry = self.auxv.get(AT_ENTRY)
        for mapping in self.mappings:
            if entry is not None and mapping.start <= entry < mapping.end:
                return mapping
        return self.mappings[0] if self.mappings else None

    @property
    def virtual_address_bits(self):
        """The virtual-address size NT_ARM_PAC_MASK implies (None: no note)."""
        if not self.pac_masks:
            return None
        return self.arch.virtual_address_bits(self.pac_masks[1])

    def _check_executable(self, executable):
        """The executable's path: ``executable`` when it is the program the
        core is of (by build id, else by name), else the one NT_FILE names."""
        main = self._main_mapping()
        if main is None:
            return executable
        if executable is None:
            return main.path
        executable = os.path.abspath(executable)
        try:
            stream, image = open_elf(executable)
        except OSError as error:
            raise CoreError(f"{executable}: {error.strerror or error}") from None
        except ElfError as error:
            raise CoreError(f"{executable}: {error}") from None
        with stream:
            wanted = image.build_id()
        header = next((m for m in self.mappings if m.path == main.path and m.offset == 0), None)
        found = memory_build_id(self.dumped, header.start) if header else None
        if wanted and found and wanted != found:
            raise CoreError(f"{self.path} is a core of {main.path} (build id {found}), "
                            f"not of {executable} (build id {wanted})")
        if not (wanted and found) and os.path.basename(executable) != os.path.basename(main.path):
            raise CoreError(f"{self.path} is a core of {main.path}, not of {executable}")
        return executable

    # -- a core without NT_FILE -------------------------------------------------
    def _place_files(self, executable):
        """The executable's path (``executable``, else the one AT_EXECFN
        names) once it and the libraries the link map lists are in
        ``mappings``, placed as the core says."""
        if executable is None:
            executable = self._execfn()
            if executable is None:
                left_out(f"{self.path}: the core names no file (no NT_FILE, no "
                         "AT_EXECFN): name its program (sfbt stack --core CORE EXE)")
                return None
        else:
            executable = os.path.abspath(executable)
        self.executable = executable  # (open_named trusts the user's)
        try:
            stream = self.open_named(executable)
        except OSError as error:
            if self._user_executable:
                raise CoreError(f"{executable}: {error.strerror or error}") from None
            if error.errno != errno.EACCES:  # (refused says that one)
                left_out(f"{self.path}: its program {executable} (AT_EXECFN) not read: "
                         f"{error.strerror or error}")
            return None
        try:
            with stream:
                image = ElfImage.from_file(stream, executable)
                placed = self._placed_executable(executable, image)
                self.mappings = self._load_mappings(image, placed, executable)
                dynamic = next((s for s in image.segments() if s.type == PT_DYNAMIC), None)
        except OSError as error:
            raise CoreError(f"{executable}: {error.strerror or error}") from None
        except (ElfError, struct.error) as error:
            raise CoreError(f"{executable}: {error}") from None
        if dynamic is not None:
            libraries = self._library_mappings(placed + dynamic.vaddr, dynamic.memsz)
            self.mappings = self.mappings + libraries
            self._with_executable = None  # made while the executable's were all
        return executable

    def _execfn(self):
        """The executable's name AT_EXECFN points at in the core's memory
        (a file the core names), or None."""
        address = self.auxv.get(AT_EXECFN)
        name = read_name(self.read_dumped, address) if address else None
        return name if name and name.startswith("/") else None

    def _placed_executable(self, path, image):
        """The executable's load bias: AT_ENTRY minus its entry point (0
        for a fixed-address program), which AT_PHDR must agree with, and
        its build id must be the one the core holds, else it is not the
        core's program."""
        endian = image.header.endian
        (entry,) = struct.unpack(endian + "Q", image.read(E_ENTRY, 8))
        if image.header.machine != self.arch.elf_machine or \
                image.header.big_endian != self.arch.big_endian:
            raise CoreError(f"{path} is not a program of {self.arch.name}, the machine "
                            f"of {self.path}")
        at_entry = self.auxv.get(AT_ENTRY)
        if at_entry is None:
            raise CoreError(f"{self.path}: neither a file list (NT_FILE) nor the entry "
                            "point (AT_ENTRY in NT_AUXV): where the program was "
                            "loaded is unknown")
        bias = at_entry - entry if image.header.type != ET_EXEC else 0
        page = self.auxv.get(AT_PAGESZ) or 0x1000
        phdr = self._phdr_address(image)
        at_phdr = self.auxv.get(AT_PHDR)
        if (bias % page or at_entry != entry + bias
                or (at_phdr is not None and phdr is not None and at_phdr != phdr + bias)):
            raise CoreError(f"{self.path} is not a core of {path} (its program was entered "
                            f"at {at_entry:#x}, program headers at "
                            f"{at_phdr or 0:#x}; {path} would be at {entry + bias:#x}, "
                            f"{(phdr or 0) + bias:#x})")
        wanted = image.build_id()
        header = image.first_load_address()
        found = memory_build_id(self.dumped, header + bias) if header is not None else None
        if wanted and found and wanted != found:
            raise CoreError(f"{self.path} is a core of a program with build id {found}, "
                            f"not of {path} (build id {wanted})")
        if not (wanted and found) and self.command and \
                os.path.basename(path)[:15] != self.command[:15]:
            raise CoreError(f"{self.path} is a core of {self.command}, not of {path}")
        return bias

    @staticmethod
    def _phdr_address(image):
        """Where the program headers are in the file's addresses: PT_PHDR,
        else in the segment that maps e_phoff."""
        for segment in image.segments():
            if segment.type == PT_PHDR:
                return segment.vaddr
        phoff = image.header.phoff
        for segment in image.segments():
            if segment.type == PT_LOAD and segment.offset <= phoff < segment.offset + \
                    segment.filesz:
                return segment.vaddr + phoff - segment.offset
        return None

    def _load_mappings(self, image, bias, path):
        """A Mapping of each PT_LOAD segment of ``image`` placed at ``bias``."""
        page = self.auxv.get(AT_PAGESZ) or 0x1000
        mappings = []
        for segment in sorted((s for s in image.segments() if s.type == PT_LOAD),
                              key=lambda s: s.vaddr):
            start = (bias + segment.vaddr) & ~(page - 1) & _MASK64
            end = min((bias + segment.vaddr + segment.memsz + page - 1) & ~(page - 1),
                      _MASK64)
            mappings.append(Mapping(start, end, True, bool(segment.flags & PF_W),
                                    segment.offset & ~(page - 1), path))
        return mappings

    def _library_mappings(self, dynamic, size):
        """The mappings of the libraries the link map lists (see
        sfbt.live.linkmap), through the executable's dynamic section at
        ``dynamic``; what ends the list early is said as left out."""
        endian = self._endian
        r_debug = r_debug_address(self.read_dumped, dynamic, size, endian)
        if r_debug is None:
            return []
        # (a name may be in a file's bytes: ld.so's is the program's .interp)
        found = read_link_map(self.read_memory, r_debug, endian)
        if found.problem:
            left_out(f"{self.path}: libraries after the first {len(found.entries)} left "
                     f"out: {found.problem}")
        mappings = []
        named = set()
        for entry in found.entries:
            if not entry.name.startswith("/") or entry.name in named:
                # the vDSO ("linux-vdso.so.1"): from AT_SYSINFO_EHDR; a name
                # listed again (the dynamic linker loads a name once)
                continue
            named.add(entry.name)
            placed = self._library(entry)
            if placed is not None:
                mappings += placed
        return mappings

    def _library(self, entry):
        """The mappings of the library ``entry`` names, from the first file
        of the core's machine among sysroot + name and name; None where
        there is none, or where the first that exists is one the core's
        writer could not read (``refused`` says so)."""
        candidates = [entry.name]
        if self.sysroot:
            candidates.insert(0, os.path.join(self.sysroot, entry.name.lstrip("/")))
        for path in candidates:
            try:
                with self.open_named(path) as stream:
                    image = ElfImage.from_file(stream, path)
                    if (image.header.machine, image.header.big_endian) == \
                            (self.arch.elf_machine, self.arch.big_endian):
                        return self._load_mappings(image, entry.load_bias, path)
            except OSError as error:
                if error.errno == errno.EACCES:
                    return None  # not another file in its place
            except (ElfError, struct.error):
                pass
        return None

    # -- memory ----------------------------------------------------------------
    def read_dumped(self, address, size):
        """Bytes from the dumped segments only."""
        i = bisect_right(self._load_starts, address) - 1
        if i >= 0:
            start, end, offset = self._loads[i]
            at = offset + address - start
            if address + size <= end and at + size <= self._size:  # else not dumped
                return self._read_file(at, size)
        raise TargetMemoryError(address, size)

    def read_memory(self, address, size):
        """Bytes from the dumped segments, else (where a read-only segment
        was not dumped) from the mapped files."""
        try:
            return self.read_dumped(address, size)
        except TargetMemoryError:
            pass
        if not self._omitted_here(address, size):
            raise TargetMemoryError(address, size)
        for mapping in self._file_mappings():
            if mapping.start <= address and address + size <= mapping.end:
                path = self.images.locate(mapping).path
                if not path:
                    break
                try:
                    with self.open_named(path) as stream:
                        data = os.pread(stream.fileno(), size,
                                        mapping.offset + address - mapping.start)
                except OSError:
                    break
                if len(data) == size:
                    return data
                break
        raise TargetMemoryError(address, size)

    def _omitted_here(self, address, size):
        """Whether the core has a read-only segment at address..+size that
        the kernel did not dump (what a mapped file may supply)."""
        i = bisect_right(self._omitted, (address, float("inf"))) - 1
        return i >= 0 and address + size <= self._omitted[i][1]

    def open_named(self, path):
        """The regular file ``path`` the core names, open, if the core's
        writer could read it (or it is the user's executable); else
        FileProblem, and ``refused`` says why."""
        read_as = TRUSTED if path == self.executable and self._user_executable \
            else self._read_as
        try:
            stream = read_as.open(path)
        except FileProblem as problem:
            if problem.errno == errno.EACCES:
                self.refused.setdefault(path, problem.strerror)
            raise
        if read_as.users:  # a restricted read: the file must stay the one checked
            self._checked.setdefault(path, _identity(os.fstat(stream.fileno())))
        return stream

    def _file_mappings(self):
        """NT_FILE's mappings, the program's file being the executable."""
        if self._with_executable is None:
            main = self._main_mapping()
            if main is None or self.executable in (None, main.path):
                self._with_executable = self.mappings
            else:
                self._with_executable = [m.replace(path=self.executable)
                                         if m.path == main.path else m for m in self.mappings]
        return self._with_executable

    # -- what sfbt stack needs ---------------------------------------------------
    def modules(self):
        if self._modules is None:
            modules = file_modules(self._file_mappings(), self.images.locate, self)
            vdso = self.auxv.get(AT_SYSINFO_EHDR)
            if vdso:
                data = self._vdso_bytes(vdso)
                module = vdso_module(data, vdso) if data else None
                if module is not None:
                    modules.append(module)
            self._modules = modules
        return self._modules

    def library_names(self):
        """The LibraryNames (sfbt.live.linkmap) of the core's modules: the
        link map in its memory, read when a library's frame is first
        named, its names looked for under ``sysroot`` as GDB's."""
        return LibraryNames(self.read_memory, self._r_debug, self._endian, self.sysroot)

    def _r_debug(self):
        """Where the core's r_debug is (sfbt.live.linkmap.find_r_debug), or None."""
        return find_r_debug(self.read_memory, self.modules(), self.auxv, self._endian)

    def _vdso_bytes(self, base):
        i = bisect_right(self._load_starts, base) - 1
        if i < 0:
            return None
        start, end, offset = self._loads[i]
        if start != base or end - start > MAX_VDSO_BYTES:
            return None
        return self._read_file(offset, end - start)

    def thread_states(self):
        states = []
        for desc in self.threads_raw:
            (signal,) = struct.unpack_from(self._endian + "H", desc, 12)
            (tid,) = struct.unpack_from(self._endian + "i", desc, PRSTATUS_PID)
            registers = self.arch.decode_regset(desc[PRSTATUS_REGISTERS:])
            states.append(ThreadState(tid, "", registers, signal=signal))
        # in NT_PRSTATUS order (the thread that crashed first), as GDB numbers them
        return states

    def close(self):
        self._stream.close()
