"""A core file: each thread's registers from its NT_PRSTATUS note, the
mapped files from NT_FILE, memory from the PT_LOAD segments (and, for
what the kernel did not dump, the mapped files themselves), the vDSO from
memory at NT_AUXV's AT_SYSINFO_EHDR."""

import mmap
import os
import struct
from bisect import bisect_right
from dataclasses import replace
from types import SimpleNamespace

from ..elf import PT_LOAD, PT_NOTE, ElfError, ElfImage, open_elf
from ..errors import SfbtError
from ..files import open_regular
from ..unwind.target import TargetMemoryError
from . import regsets
from .images import CoreImages, memory_build_id, notes
from .mappings import file_modules, parse_nt_file, vdso_module
from .memory import ThreadState

ET_CORE = 4
NT_PRSTATUS = 1
NT_PRPSINFO = 3
NT_AUXV = 6
NT_FILE = 0x46494C45
AT_ENTRY = 9
AT_SYSINFO_EHDR = 33
PRPSINFO_PID = 24
PRPSINFO_FNAME = 40


class CoreError(SfbtError):
    """A core file sfbt cannot read, or that does not match the executable."""


class Core:
    """The core file at ``path``; ``executable`` (optional) must be the
    program it is a core of."""

    def __init__(self, path, executable=None):
        self.path = path
        try:
            self._stream = open(path, "rb")
        except OSError as error:
            raise CoreError(f"{path}: {error.strerror or error}") from None
        try:
            self._data = mmap.mmap(self._stream.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as error:
            self._stream.close()
            raise CoreError(f"{path}: not a core file: {error}") from None
        try:
            self._parse()
        except (ElfError, struct.error) as error:
            raise CoreError(f"{path}: not a readable core file: {error}") from None
        #: the core's own bytes as a Target reads them (no mapped file's)
        self.dumped = SimpleNamespace(read_memory=self.read_dumped)
        self.images = CoreImages(self)
        self._with_executable = None
        self.executable = self._check_executable(executable)
        self._modules = None

    def _read_file(self, offset, size):
        if offset + size > len(self._data):
            raise ElfError(f"{size} bytes run past the end of the file", offset)
        return self._data[offset:offset + size]

    def _parse(self):
        image = ElfImage(self._read_file, 0, self.path)
        if image.header.type != ET_CORE:
            raise CoreError(f"{self.path}: not a core file (ELF type {image.header.type})")
        self.arch = image.arch
        if not regsets.supported(self.arch):
            raise CoreError(f"{self.path}: {self.arch.name if self.arch else 'its machine'} "
                            "is not supported (sfbt stack reads x86-64 and AArch64)")
        endian = image.header.endian
        self._loads = sorted((s.vaddr, s.vaddr + s.filesz, s.offset)
                             for s in image.segments() if s.type == PT_LOAD and s.filesz)
        self._load_starts = [start for start, _, _ in self._loads]
        self.threads_raw, self.mappings, self.auxv, self.command = [], [], {}, ""
        self.pid = None
        for segment in image.segments():
            if segment.type != PT_NOTE:
                continue
            for kind, name, desc in notes(self._read_file(segment.offset, segment.filesz),
                                           endian):
                if name != b"CORE":
                    continue
                if kind == NT_PRSTATUS:
                    self.threads_raw.append(desc)
                elif kind == NT_FILE:
                    self.mappings = parse_nt_file(desc, endian)
                elif kind == NT_PRPSINFO:
                    (self.pid,) = struct.unpack_from(endian + "i", desc, PRPSINFO_PID)
                    fname = desc[PRPSINFO_FNAME:PRPSINFO_FNAME + 16]
                    self.command = fname.split(b"\0")[0].decode("utf-8", "replace")
                elif kind == NT_AUXV:
                    pairs = struct.unpack_from(f"{endian}{len(desc) // 8}Q", desc)
                    self.auxv = dict(zip(pairs[::2], pairs[1::2]))
        if not self.threads_raw:
            raise CoreError(f"{self.path}: a core file without threads (no NT_PRSTATUS)")
        self._endian = endian

    def _main_mapping(self):
        entry = self.auxv.get(AT_ENTRY)
        for mapping in self.mappings:
            if entry is not None and mapping.start <= entry < mapping.end:
                return mapping
        return self.mappings[0] if self.mappings else None

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

    # -- memory ----------------------------------------------------------------
    def read_dumped(self, address, size):
        """Bytes from the dumped segments only."""
        i = bisect_right(self._load_starts, address) - 1
        if i >= 0:
            start, end, offset = self._loads[i]
            if address + size <= end:
                return self._data[offset + address - start:offset + address - start + size]
        raise TargetMemoryError(address, size)

    def read_memory(self, address, size):
        """Bytes from the dumped segments, else from the mapped files."""
        try:
            return self.read_dumped(address, size)
        except TargetMemoryError:
            pass
        for mapping in self._file_mappings():
            if mapping.start <= address and address + size <= mapping.end:
                path = self.images.locate(mapping).path
                if not path:
                    break
                try:
                    with open_regular(path) as stream:
                        data = os.pread(stream.fileno(), size,
                                        mapping.offset + address - mapping.start)
                except OSError:
                    break
                if len(data) == size:
                    return data
                break
        raise TargetMemoryError(address, size)

    def _file_mappings(self):
        """NT_FILE's mappings, the program's file being the executable."""
        if self._with_executable is None:
            main = self._main_mapping()
            if main is None or self.executable in (None, main.path):
                self._with_executable = self.mappings
            else:
                self._with_executable = [replace(m, path=self.executable)
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

    def _vdso_bytes(self, base):
        i = bisect_right(self._load_starts, base) - 1
        if i < 0:
            return None
        start, end, offset = self._loads[i]
        if start != base:
            return None
        return self._data[offset:offset + end - start]

    def thread_states(self):
        states = []
        for desc in self.threads_raw:
            (signal,) = struct.unpack_from(self._endian + "H", desc, 12)
            (tid,) = struct.unpack_from(self._endian + "i", desc, regsets.PRSTATUS_PID)
            registers = regsets.decode(self.arch, desc[regsets.PRSTATUS_REGISTERS:])
            states.append(ThreadState(tid, "", registers, signal=signal))
        # in NT_PRSTATUS order (the thread that crashed first), as GDB numbers them
        return states

    def close(self):
        self._data.close()
        self._stream.close()
