"""A core read as the kernel streams it into a pipe (core_pattern "|..."):
once, in file order, never held.

The kernel writes the ELF header, the program headers, the notes (each
thread's NT_PRSTATUS, NT_SIGINFO, NT_AUXV, NT_FILE, NT_PRPSINFO), then
each PT_LOAD segment's memory in address order.  What is kept: the
notes the walk needs, each thread's stack from a little below its stack
pointer up (at most ``stack_limit`` bytes a thread, and all threads
together at most ``total_limit``), the vDSO, and the first page of each
mapped file (its build id): read from the process's memory while the
kernel holds it (core_pipe_limit > 0: the same bytes, its threads
stopped), else from the stream.  What is passed over is spliced to
/dev/null; ``drain`` reads the rest (for a chained handler or a kept
core: the handler otherwise lets go of the pipe unread, which ends the
kernel's dump).

Modules are read through /proc/PID/map_files/START-END, the very files the
process mapped (root may open those links, and the kernel keeps /proc/PID
while the handler runs when core_pipe_limit > 0), never through the paths
NT_FILE names: in a container those are the container's, and a path
there may lead anywhere on the host."""

import errno
import os
import struct
from bisect import bisect_right
from operator import itemgetter

from ..elf import PN_XNUM, PT_LOAD, PT_NOTE, ElfError, ElfImage
from ..errors import SfbtError, TargetMemoryError
from ..files import open_regular
from ..live.core_notes import (ET_CORE, PHDR_FORMAT, NT_PRSTATUS, NT_PRPSINFO,
                               NT_AUXV, NT_SIGINFO, NT_FILE, AT_ENTRY, AT_SYSINFO_EHDR, PF_W,
                               PRPSINFO_UID, PRPSINFO_FNAME, PRSTATUS_SIGNAL, PRSTATUS_PID,
                               PRSTATUS_REGISTERS, PRSTATUS_TAIL)
from ..live.images import Located
from ..live.mappings import file_modules, parse_maps, parse_nt_file, vdso_module
from ..live.memory import RED_ZONE, ThreadState

ELF_HEADER = 64
PHDR = struct.Struct(PHDR_FORMAT)
#: program headers read at most (74,897 of 56 bytes: more than Linux's
#: default vm.max_map_count of 65,530)
MAX_HEADER_BYTES = 4 << 20
#: the largest note kept (NT_FILE of a process with many mappings); any
#: other note is passed over whatever its size
MAX_NOTE_BYTES = 16 << 20
#: the most threads whose registers are kept and walked (the crashing
#: thread's notes come first); the rest are counted
MAX_THREADS = 4096
#: the most of a thread's stack kept, from its stack pointer up
STACK_LIMIT = 512 << 10
#: the most of all threads' stacks kept together: with many threads each
#: keeps less
TOTAL_STACK_LIMIT = 16 << 20
#: the least kept of a thread's stack, however many threads
MIN_STACK = 4096
MAX_VDSO_BYTES = 1 << 20
PAGE = 4096
#: bytes read from the pipe at a time
CHUNK = 1 << 20


class StreamError(SfbtError):
    """A core on standard input that is not one sfbt can read."""


class _Pipe:
    """Exact reads and skips of a stream read once (a pipe).  Small reads
    are served from a chunk read ahead (a core of 10,000 threads has
    40,000 notes: a read of the pipe each would be most of the time)."""

    def __init__(self, descriptor, copies=()):
        self.descriptor = descriptor
        self.at = 0
        self.ended = False
        #: each called with every chunk of the stream (a chained handler,
        #: a kept core): then the stream is read whole, never spliced
        self.copies = list(copies)
        self._ahead = b""  # read from the pipe, not yet given out from ``_used``
        self._used = 0

    def _from_pipe(self, size):
        data = os.read(self.descriptor, size)
        for copy in self.copies:
            copy(data)
        return data

    def read(self, size):
        """``size`` bytes, or StreamError where the core ends before."""
        end = self._used + size
        if end <= len(self._ahead):  # the common case: a note's fields
            data = self._ahead[self._used:end]
            self._used = end
            self.at += size
            return data
        parts, left = [], size
        while left:
            if self._used < len(self._ahead):
                data = self._ahead[self._used:self._used + left]
                self._used += len(data)
            elif left >= CHUNK:  # a large read: straight from the pipe
                data = self._from_pipe(CHUNK)
            else:
                self._ahead, self._used = self._from_pipe(CHUNK), 0
                data = b""
                if self._ahead:
                    continue
            if not data:
                self.ended = True
                raise StreamError(f"the core ends at byte {self.at + size - left}, "
                                  f"inside {size} bytes wanted")
            parts.append(data)
            left -= len(data)
        self.at += size
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def skip_to(self, offset):
        size = offset - self.at
        if size < 0:
            raise StreamError(f"data at byte {offset} comes before byte {self.at}, "
                              "already read (not a core the kernel streamed)")
        if self._used + size <= len(self._ahead):  # within what is read ahead
            self._used += size
            self.at = offset
        else:
            self._discard(size)

    def drain(self):
        """Read the rest of the stream (until its writer closes it)."""
        if not self.ended:
            self._discard(None)

    def _discard(self, size):
        """Discard ``size`` bytes (None: all that comes), spliced to
        /dev/null where the system can (no copy through this process)."""
        ahead = len(self._ahead) - self._used
        if size is not None and size <= ahead:
            self._used += size
            self.at += size
            return
        self.at += ahead
        self._ahead, self._used = b"", 0
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            left = None if size is None else size - ahead
            while left is None or left > 0:
                want = CHUNK if left is None else min(left, CHUNK << 4)
                moved = None
                if not self.copies:
                    try:
                        moved = os.splice(self.descriptor, null, want)
                    except OSError as error:  # not a pipe: read it
                        if error.errno not in (errno.EINVAL, errno.ESPIPE):
                            raise
                if moved is None:
                    moved = len(self._from_pipe(min(want, CHUNK)))
                if not moved:
                    self.ended = True
                    if left is not None:
                        raise StreamError(f"the core ends at byte {self.at}, before "
                                          f"byte {self.at + left}")
                    return
                self.at += moved
                if left is not None:
                    left -= moved
        finally:
            os.close(null)


_START = itemgetter(0)


def _holds(ranges, address, size):
    """Whether one of ``ranges`` ([start, end) pairs, sorted, none
    overlapping another) holds the ``size`` bytes at ``address``."""
    i = bisect_right(ranges, address, key=_START) - 1
    return i >= 0 and address + size <= ranges[i][1]


def _merged(ranges):
    out = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


class StreamedCore:
    """The core read from ``descriptor`` (a pipe) of process ``pid``
    (its PID in /proc, the kernel's %P); ``module_files``: read modules
    through /proc/PID/map_files (only while the kernel holds the process:
    core_pipe_limit > 0); ``copies``: called with each chunk of the whole
    core as it is read (_Pipe)."""

    def __init__(self, descriptor, pid, module_files=True, stack_limit=STACK_LIMIT,
                 total_limit=TOTAL_STACK_LIMIT, copies=()):
        self.pid = pid
        self._module_files = module_files
        self._pipe = _Pipe(descriptor, copies)
        self.threads = []  # ThreadState, NT_PRSTATUS order (the crashing thread first)
        self.threads_left_out = 0
        self.siginfo = None  # (signal, errno, code, fault address) of NT_SIGINFO
        self.auxv = {}
        self.mappings = []
        self.command = ""
        self.writer = None  # NT_PRPSINFO's (uid, gid)
        #: where the kept memory was read: "core" (the stream), "process"
        #: (the held process's /proc/PID/mem), or "process and core"
        self.memory_from = "core"
        self._pieces = []  # (start, bytes) kept, sorted
        self._starts = []
        self._readonly = []  # (start, end) of PT_LOADs not writable
        self._loads = []  # (start, end) of the memory the core holds, sorted
        #: the address of the last read that found nothing kept
        self.missed = None
        self._read_links = {}  # map_files link -> open stream or None
        #: /proc/PID/mem of the held process, while stacks are read from it
        self._held_memory = None
        self._reach = []  # (start, end) of what may be read of it, sorted
        self._modules = None
        self._read_headers()
        self._read_notes()
        if module_files:
            self._read_thread_names()
            if not self.mappings:
                self._read_process_mappings()
        try:
            self._read_memory(stack_limit, total_limit)
        except BaseException:
            self.close()  # the held process's memory
            raise

    # -- the stream ------------------------------------------------------------
    def _read_headers(self):
        header = self._pipe.read(ELF_HEADER)
        if header[:4] != b"\x7fELF" or header[4] != 2:
            raise StreamError("not a 64-bit ELF core on standard input")
        endian = "<" if header[5] == 1 else ">"
        phoff, = struct.unpack_from(endian + "Q", header, 32)
        phentsize, phnum = struct.unpack_from(endian + "HH", header, 54)
        if phentsize != PHDR.size or phoff < ELF_HEADER or phoff > MAX_HEADER_BYTES:
            raise StreamError(f"program headers at {phoff} of {phentsize} bytes: not "
                              "where the kernel writes them")
        self._pipe.skip_to(phoff)
        data = self._pipe.read(PHDR.size) if phnum else b""
        if phnum == PN_XNUM:
            # 65,535 mappings or more: the count is in a section header at
            # the core's end, but the kernel writes the notes' header first
            # and the notes right after the last header: their offset says
            # how many there are
            p_type, _, notes_at = struct.unpack_from(endian + "IIQ", data)
            phnum = (notes_at - phoff) // PHDR.size
            if p_type != PT_NOTE or notes_at < phoff + PN_XNUM * PHDR.size:
                raise StreamError(f"{PN_XNUM} program headers (PN_XNUM), the first not "
                                  "the notes' the kernel writes first")
        if phoff + PHDR.size * phnum > MAX_HEADER_BYTES:
            raise StreamError(f"a core of {phnum} mappings, more than the "
                              f"{(MAX_HEADER_BYTES - ELF_HEADER) // PHDR.size} read")
        if phnum > 1:
            data += self._pipe.read(PHDR.size * (phnum - 1))

        def read(offset, size):
            if offset + size > len(header):
                raise ElfError(f"{size} bytes past the header", offset)
            return header[offset:offset + size]
        try:
            image = ElfImage(read, 0, "<core>")
            if image.header.type != ET_CORE:
                raise StreamError(f"not a core (ELF type {image.header.type})")
            self.arch = image.arch
        except ElfError as error:
            raise StreamError(f"not a readable core: {error}") from None
        if self.arch is None or not self.arch.regset:
            raise StreamError("a core of a machine sfbt does not read")
        self._endian = endian
        # one pass, no object a header: a core may have 70,000 of them
        dumped, readonly = [], []
        for p_type, flags, offset, vaddr, _, filesz, memsz, _ in struct.iter_unpack(
                endian + PHDR.format, data):
            if p_type == PT_LOAD:
                if filesz:
                    dumped.append((offset, p_type, vaddr, filesz))
                if not flags & PF_W:
                    readonly.append((vaddr, vaddr + memsz))
            elif p_type == PT_NOTE and filesz:
                dumped.append((offset, p_type, vaddr, filesz))
        #: (offset, type, address, size) of the notes and the memory the
        #: core holds, in file order
        self._segments = sorted(dumped)
        self._readonly = sorted(readonly)
        self._loads = sorted((vaddr, vaddr + size) for _, kind, vaddr, size in dumped
                             if kind == PT_LOAD)
        #: the process's mappings (PT_LOADs), however many are read
        self.mappings_count = phnum - (len(dumped) - len(self._loads))

    def _read_notes(self):
        for offset, segment_type, _, left in self._segments:
            if segment_type != PT_NOTE:
                continue
            self._pipe.skip_to(offset)
            while left >= 12:
                namesz, descsz, kind = struct.unpack(self._endian + "III",
                                                     self._pipe.read(12))
                name_size, desc_size = (namesz + 3) & ~3, (descsz + 3) & ~3
                if 12 + name_size + desc_size > left:
                    raise StreamError(f"a note of {descsz} bytes runs past its segment")
                name = self._pipe.read(name_size)[:namesz].rstrip(b"\0")
                wanted = name == b"CORE" and kind in (NT_PRSTATUS, NT_SIGINFO, NT_AUXV,
                                                      NT_FILE, NT_PRPSINFO)
                if wanted and descsz <= MAX_NOTE_BYTES:
                    self._note(kind, self._pipe.read(desc_size)[:descsz])
                else:
                    self._pipe.skip_to(self._pipe.at + desc_size)
                left -= 12 + name_size + desc_size
        if not self.threads:
            raise StreamError("a core without threads (no NT_PRSTATUS)")

    def _note(self, kind, desc):
        endian = self._endian
        if kind == NT_PRSTATUS:
            wanted = PRSTATUS_REGISTERS + self.arch.regset_size + PRSTATUS_TAIL
            if len(desc) != wanted:
                raise StreamError(f"an NT_PRSTATUS note of {len(desc)} bytes, not "
                                  f"{wanted}")
            if len(self.threads) >= MAX_THREADS:
                self.threads_left_out += 1
                return
            (signal,) = struct.unpack_from(endian + "H", desc, PRSTATUS_SIGNAL)
            (tid,) = struct.unpack_from(endian + "i", desc, PRSTATUS_PID)
            registers = self.arch.decode_regset(desc[PRSTATUS_REGISTERS:])
            self.threads.append(ThreadState(tid, "", registers, signal=signal))
        elif kind == NT_SIGINFO and self.siginfo is None and len(desc) >= 24:
            signal, code_errno, code = struct.unpack_from(endian + "iii", desc, 0)
            (address,) = struct.unpack_from(endian + "Q", desc, 16)
            self.siginfo = (signal, code_errno, code, address)
        elif kind == NT_AUXV:
            pairs = struct.unpack_from(f"{endian}{len(desc) // 8}Q", desc)
            self.auxv = dict(zip(pairs[::2], pairs[1::2]))
        elif kind == NT_FILE and len(desc) >= 16:
            count = struct.unpack_from(endian + "Q", desc)[0]
            if 16 + 24 * count <= len(desc):
                self.mappings = parse_nt_file(desc, endian)
        elif kind == NT_PRPSINFO and len(desc) >= PRPSINFO_FNAME + 16:
            self.writer = struct.unpack_from(endian + "II", desc, PRPSINFO_UID)
            fname = desc[PRPSINFO_FNAME:PRPSINFO_FNAME + 16]
            self.command = fname.split(b"\0")[0].decode("utf-8", "surrogateescape")

    def _read_process_mappings(self):
        """The mapped files from the held process's /proc/PID/maps, for a
        core without NT_FILE: Linux leaves it out when it would be 64 bytes
        a mapping or more than kernel.core_file_note_size_limit (4 MiB by
        default: 65,536 mappings).  At most MAX_NOTE_BYTES of it."""
        try:
            descriptor = os.open(f"/proc/{self.pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        parts, left = [], MAX_NOTE_BYTES
        try:
            while left > 0:
                data = os.read(descriptor, min(left, CHUNK))
                if not data:
                    break
                parts.append(data)
                left -= len(data)
        except OSError:
            return
        finally:
            os.close(descriptor)
        text = b"".join(parts).decode("utf-8", "surrogateescape")
        if left <= 0:  # cut: the last line may be
            text = text[:text.rfind("\n") + 1]
        files = "\n".join(line for line in text.split("\n") if "/" in line)  # the few
        self.mappings = [m for m in parse_maps(files) if m.file_backed]

    def _read_thread_names(self):
        """Each kept thread's name (its comm, 15 bytes at most, any bytes)
        from the held process: a core holds only the process's."""
        for state in self.threads:
            try:
                descriptor = os.open(f"/proc/{self.pid}/task/{state.tid}/comm",
                                     os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                name = os.read(descriptor, 64)
            except OSError:
                continue
            finally:
                os.close(descriptor)
            if name.endswith(b"\n"):
                name = name[:-1]
            state.name = name.decode("utf-8", "surrogateescape")

    def _wanted(self, stack_limit, total_limit, own_mappings):
        """[(start, end)] of memory to keep, merged: each thread's stack from
        its red zone up (at most a thread's share of the limits), the vDSO,
        the first page of each mapped file; ``own_mappings``: each stack and
        the vDSO cut to its own mapping (_own_mapping)."""
        per_thread = max(MIN_STACK, min(stack_limit,
                                        total_limit // max(1, len(self.threads))))

        def kept(address, start, end):
            return self._own_mapping(address, start, end) if own_mappings else (start, end)
        ranges = []
        for state in self.threads:
            sp = state.registers.get(self.arch.sp)
            if sp is not None:
                start = (sp - RED_ZONE) & -16  # not a page's start: the limits hold
                ranges.append(kept(sp, start, sp + per_thread))
        vdso = self.auxv.get(AT_SYSINFO_EHDR)
        if vdso:
            ranges.append(kept(vdso, vdso, vdso + MAX_VDSO_BYTES))
        ranges += [(m.start, m.start + PAGE) for m in self.mappings if m.offset == 0]
        return _merged(ranges)

    def _own_mapping(self, address, start, end):
        """[start, end) cut to the one PT_LOAD (mapping) holding ``address``
        or, where none holds it (a stack pointer in a stack's guard gap, in
        a stack overflow), the first above it.  Above a thread's stack is
        another thread's stack, or heap: untouched pages, most of them,
        which a walk does not read (a walk that does, from a stack pointer
        past a guard page: _read_held)."""
        i = bisect_right(self._loads, (address, float("inf"))) - 1
        if i < 0 or self._loads[i][1] <= address:
            i += 1
        if i == len(self._loads):
            return start, start
        low, high = self._loads[i]
        return max(start, low), min(end, high)

    def _read_memory(self, stack_limit, total_limit):
        """Keep the wanted memory the core holds: from the process's memory
        while the kernel holds the process (its threads are stopped: the
        same bytes the core is being written from), for the kernel writes
        memory in address order and a thread's stack may come after
        gigabytes of heap; else (or where a read fails) from the stream.
        From the process, each stack is read to its own mapping's end, and
        the rest of what is kept of it (``_reach``, the same bounds) only
        where a walk reads it (_read_held): for 10 threads' stacks, 73 KB
        read instead of 5 MB."""
        reach = self._wanted(stack_limit, total_limit, False)
        if self._module_files and not self._pipe.copies:
            try:
                self._held_memory = os.open(f"/proc/{self.pid}/mem",
                                            os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                pass
        if self._held_memory is None:
            pieces = self._core_pieces(reach)
        else:
            self._reach = reach
            pieces = self._core_pieces(self._wanted(stack_limit, total_limit, True))
            wanted_count = len(pieces)
            pieces = self._read_process(pieces)
            if len(pieces) < wanted_count:
                self.memory_from = "process and core" if pieces else "process"
        for offset, address, size in sorted(pieces):
            self._pipe.skip_to(offset)
            self._pieces.append((address, self._pipe.read(size)))
        self._pieces.sort(key=lambda piece: piece[0])
        self._starts = [start for start, _ in self._pieces]
        for state in self.threads:
            found = self._piece_at(state.registers.get(self.arch.sp, 0))
            if found is not None:
                state.stack_start, state.stack = found

    def _core_pieces(self, wanted):
        """[(offset in the core, address, size)] of the ``wanted`` ranges
        the core holds."""
        starts = [start for start, _ in wanted]
        pieces = []
        for offset, segment_type, start, size in self._segments:
            if segment_type != PT_LOAD:
                continue
            end = start + size
            i = max(0, bisect_right(starts, start) - 1)
            while i < len(wanted) and wanted[i][0] < end:
                low, high = max(start, wanted[i][0]), min(end, wanted[i][1])
                if low < high:
                    pieces.append((offset + low - start, low, high - low))
                i += 1
        return pieces

    def _read_process(self, pieces):
        """Keep ``pieces`` read from the held process's memory; those that
        could not be read are returned."""
        left = []
        for piece in pieces:
            _, address, size = piece
            try:
                data = os.pread(self._held_memory, size, address)
            except OSError:
                data = b""
            if len(data) == size:
                self._pieces.append((address, data))
            else:
                left.append(piece)
        return left

    def _read_held(self, address, size):
        """``size`` bytes at ``address`` of the held process where they are
        within what is kept of it (``_reach``), read when a walk asks for
        them (not kept: the same bounds hold), in one mapping the core
        holds; else None."""
        if self._held_memory is None or not _holds(self._reach, address, size) \
                or not _holds(self._loads, address, size):
            return None
        try:
            data = os.pread(self._held_memory, size, address)
        except OSError:
            return None
        return data if len(data) == size else None

    def drain(self):
        """Read the rest of the core (the kernel waits for it)."""
        self._pipe.drain()

    # -- memory ----------------------------------------------------------------
    def _piece_at(self, address):
        i = bisect_right(self._starts, address) - 1
        if i >= 0 and address < self._pieces[i][0] + len(self._pieces[i][1]):
            return self._pieces[i]
        return None

    def read_memory(self, address, size):
        """Bytes kept of the core; else, in a read-only segment, from the
        mapped file through map_files."""
        found = self._piece_at(address)
        if found is not None:
            start, data = found
            if address + size <= start + len(data):
                return data[address - start:address - start + size]
        data = self._read_held(address, size)
        if data is not None:
            return data
        if _holds(self._readonly, address, size):
            for mapping in self.mappings:
                if mapping.start <= address and address + size <= mapping.end:
                    data = self._read_mapped(mapping, mapping.offset + address - mapping.start,
                                             size)
                    if data is not None and len(data) == size:
                        return data
                    break
        self.missed = address
        raise TargetMemoryError(address, size)

    def stack_cut_at(self, state, address):
        """Where ``state``'s kept stack ends, if ``address`` (a read that
        found nothing) is past it in the same mapping: the stack was cut
        there, by the limits of what is kept; else None."""
        if address is None or not state.stack:
            return None
        end = state.stack_start + len(state.stack)
        i = bisect_right(self._loads, (end - 1, float("inf"))) - 1
        if i >= 0 and end <= address < self._loads[i][1]:
            return end
        return None

    def _read_mapped(self, mapping, offset, size):
        link = self._link(mapping)
        if link is None:
            return None
        if link not in self._read_links:
            try:
                self._read_links[link] = open_regular(link)
            except OSError:
                self._read_links[link] = None
        stream = self._read_links[link]
        return os.pread(stream.fileno(), size, offset) if stream else None

    def _link(self, mapping):
        """The map_files link of ``mapping`` (None without module files)."""
        if not self._module_files:
            return None
        return f"/proc/{self.pid}/map_files/{mapping.start:x}-{mapping.end:x}"

    # -- what a SnapshotSession needs --------------------------------------------
    def _locate(self, mapping):
        link = self._link(mapping)
        if link is None:
            return Located("", "the process was not kept (core_pipe_limit 0)")
        try:
            open_regular(link).close()
        except OSError as error:
            return Located("", error.strerror or str(error))
        return Located(link)

    def modules(self):
        if self._modules is None:
            modules = file_modules(self.mappings, self._locate, self)
            vdso = self.auxv.get(AT_SYSINFO_EHDR)
            found = self._piece_at(vdso) if vdso else None
            if found is not None and found[0] == vdso:
                module = vdso_module(found[1][:MAX_VDSO_BYTES], vdso)
                if module is not None:
                    modules.append(module)
            self._modules = modules
        return self._modules

    def executable(self):
        """The path NT_FILE gives the program's file (as the process named it)."""
        entry = self.auxv.get(AT_ENTRY)
        for mapping in self.mappings:
            if entry is not None and mapping.start <= entry < mapping.end:
                return mapping.path
        return self.mappings[0].path if self.mappings else ""

    def close(self):
        for stream in self._read_links.values():
            if stream:
                stream.close()
        self._read_links.clear()
        if self._held_memory is not None:
            os.close(self._held_memory)
            self._held_memory = None
