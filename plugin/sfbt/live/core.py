"""A core file: each thread's registers from its NT_PRSTATUS note, the
mapped files from NT_FILE, memory from the PT_LOAD segments (and, for
what the kernel did not dump, the mapped files themselves), the vDSO from
memory at NT_AUXV's AT_SYSINFO_EHDR."""

import mmap
import os
import struct
from bisect import bisect_right
from dataclasses import replace

from ..elf import PT_LOAD, PT_NOTE, ElfError, ElfImage, memory_image, open_elf
from ..errors import SfbtError
from ..unwind.target import TargetMemoryError
from . import regsets
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


def _notes(data, endian):
    at = 0
    while at + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from(endian + "III", data, at)
        name_at = at + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        if desc_at + descsz > len(data):
            return
        yield kind, data[name_at:name_at + namesz].rstrip(b"\0"), data[desc_at:desc_at + descsz]
        at = desc_at + ((descsz + 3) & ~3)


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
            for kind, name, desc in _notes(self._read_file(segment.offset, segment.filesz),
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
        try:
            stream, image = open_elf(executable)
        except OSError as error:
            raise CoreError(f"{executable}: {error.strerror or error}") from None
        except ElfError as error:
            raise CoreError(f"{executable}: {error}") from None
        with stream:
            wanted = image.build_id()
        header = next((m for m in self.mappings if m.path == main.path and m.offset == 0), None)
        found = self._build_id_in_memory(header.start) if header else None
        if wanted and found and wanted != found:
            raise CoreError(f"{self.path} is a core of {main.path} (build id {found}), "
                            f"not of {executable} (build id {wanted})")
        if not (wanted and found) and os.path.basename(executable) != os.path.basename(main.path):
            raise CoreError(f"{self.path} is a core of {main.path}, not of {executable}")
        return executable

    def _build_id_in_memory(self, base):
        """The GNU build id of the image whose ELF header the core holds at
        ``base`` (the kernel and gcore dump that first page)."""
        try:
            image = memory_image(self, base)
            if image is None:
                return None
            bias = base - min(s.vaddr - s.offset for s in image.segments() if s.type == PT_LOAD)
            for segment in image.segments():
                if segment.type != PT_NOTE:
                    continue
                data = self.read_memory(bias + segment.vaddr, segment.filesz)
                for kind, name, desc in _notes(data, self._endian):
                    if kind == 3 and name == b"GNU":
                        return desc.hex()
        except (TargetMemoryError, ElfError, ValueError):
            return None
        return None

    # -- memory ----------------------------------------------------------------
    def read_memory(self, address, size):
        """Bytes from the dumped segments, else from the mapped files."""
        i = bisect_right(self._load_starts, address) - 1
        if i >= 0:
            start, end, offset = self._loads[i]
            if address + size <= end:
                return self._data[offset + address - start:offset + address - start + size]
        for mapping in self.mappings:
            if mapping.start <= address and address + size <= mapping.end:
                try:
                    with open(mapping.path, "rb") as stream:
                        stream.seek(mapping.offset + address - mapping.start)
                        data = stream.read(size)
                except OSError:
                    break
                if len(data) == size:
                    return data
                break
        raise TargetMemoryError(address, size)

    # -- what sfbt stack needs ---------------------------------------------------
    def modules(self):
        if self._modules is None:
            mappings = self.mappings
            main = self._main_mapping()
            if main is not None and self.executable != main.path:
                mappings = [replace(m, path=self.executable) if m.path == main.path else m
                            for m in mappings]
            modules = file_modules(mappings)
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
        return sorted(states, key=lambda state: state.tid)

    def close(self):
        self._data.close()
        self._stream.close()
