"""A thread's memory as the unwinder reads it: its stack as copied while
it was stopped, and the rest of the address space (a live process's, read
on demand, or a core's)."""

from bisect import bisect_right

from ..errors import TargetMemoryError
from ..unwind.target import Target
from ..values import Value

#: the most of a stack copied per thread (from the stack pointer up)
STACK_COPY_LIMIT = 1 << 20
#: below the stack pointer: x86-64's red zone, where a leaf keeps data
RED_ZONE = 128
#: the copy starts at a multiple of this: the walk reads memory a block of
#: this size at a time (unwind.walk), and the block that holds the red
#: zone is then read from the copy whole, never from the thread as it
#: runs on
COPY_ALIGN = 0x1000


class ThreadState(Value):
    """One thread as captured: registers, and its stack from a little below
    the stack pointer up."""

    __slots__ = _fields = ("tid", "name", "registers", "stack_start", "stack", "signal",
                           "extra")
    __hash__ = None  # its name may be set later (a core's command)

    def __init__(self, tid, name, registers, stack_start=0, stack=b"", signal=0, extra=None):
        self.tid = tid
        self.name = name
        self.registers = registers
        self.stack_start = stack_start
        self.stack = stack
        #: the signal it was stopped by, in a core (0: none known)
        self.signal = signal
        self.extra = {} if extra is None else extra


def stack_range(sp, mapping):
    """[start, end) of the stack to copy for a stack pointer in ``mapping``
    (None: in none, nothing to copy): from the COPY_ALIGN block of its red
    zone up to the end of the mapping, at most STACK_COPY_LIMIT above it."""
    if mapping is None:
        return sp, sp
    start = max(mapping.start, (sp - RED_ZONE) & -COPY_ALIGN)
    return start, min(mapping.end, sp + STACK_COPY_LIMIT)


class ThreadTarget(Target):
    """The unwinder's Target for one captured thread: its registers, its
    stack copy, and ``read`` for every other address."""

    #: what AArch64 return addresses keep (None: 48 bits; unwind.walk)
    virtual_address_bits: "int | None" = None

    def __init__(self, arch, state, read, modules):
        self.arch = arch
        self.state = state
        self._read = read
        self._modules = modules
        self._stack_end = state.stack_start + len(state.stack)

    def read_memory(self, address, size):
        """Bytes of the stack copy where the request overlaps it (never the
        thread's stack as it is now: the thread ran on), ``read`` for the
        rest."""
        start, end, stack = self.state.stack_start, self._stack_end, self.state.stack
        stop = address + size
        if stop <= start or end <= address or size <= 0:
            return self._read(address, size)
        if start <= address and stop <= end:
            return stack[address - start:stop - start]
        below = self._read(address, start - address) if address < start else b""
        above = self._read(end, stop - end) if end < stop else b""
        return below + stack[max(address, start) - start:min(stop, end) - start] + above

    def registers(self):
        return self.state.registers

    def modules(self):
        return self._modules


class CachedReads:
    """Reads through ``read_raw(address, size)`` (bytes, possibly short),
    keeping whole pages of memory that does not change (mappings that are
    not writable)."""

    PAGE = 4096

    def __init__(self, read_raw, mappings):
        self._read_raw = read_raw
        constant = sorted((m.start, m.end) for m in mappings if not m.writable)
        self._constant_starts = [start for start, _ in constant]
        self._constant_ends = [end for _, end in constant]
        self._pages = {}

    def _is_constant(self, address, end):
        i = bisect_right(self._constant_starts, address) - 1
        return i >= 0 and end <= self._constant_ends[i]

    def __call__(self, address, size):
        if size <= 0:
            return b""
        if address < 0 or address + size > 1 << 64:
            raise TargetMemoryError(address, size)
        end = address + size
        if not self._is_constant(address, end):
            data = self._read_raw(address, size)
            if len(data) != size:
                raise TargetMemoryError(address, size)
            return data
        first = address - address % self.PAGE
        chunks = []
        for page in range(first, end, self.PAGE):
            data = self._pages.get(page)
            if data is None:
                data = self._pages[page] = self._read_raw(page, self.PAGE)
            if len(data) != self.PAGE:
                raise TargetMemoryError(address, size)
            chunks.append(data)
        joined = b"".join(chunks) if len(chunks) > 1 else chunks[0]
        return joined[address - first:address - first + size]
