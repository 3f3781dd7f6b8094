"""The running kernel's functions, from /proc/kallsyms, as the image
``[kernel.kallsyms]`` (perf's name for it): its text from ``_stext`` on,
its build id from /sys/kernel/notes.  Kernel frames of perf events'
samples are stored in that image, at their run-time addresses, and named
from it when an archive is read on the same kernel (its build id; the
addresses are taken relative to ``_stext``, so a boot that placed the
kernel elsewhere names them too).

Where the kernel hides its addresses (kernel.kptr_restrict: every address
0) or the file cannot be read, there is no kernel image: no kernel frames
are recorded, nothing is named, and nothing is said."""

import sys
from bisect import bisect_right

from ..elf import gnu_build_id
from ..frame_name import FrameName

#: perf's name of the kernel's image
KERNEL_IMAGE = "[kernel.kallsyms]"
KALLSYMS = "/proc/kallsyms"
NOTES = "/sys/kernel/notes"
#: the most of /proc/kallsyms read (a kernel with every module loaded
#: lists some 300k symbols in about 15 MB)
MAX_BYTES = 64 << 20
MAX_NOTES = 1 << 16
#: the text symbol types (t: local, w: weak)
_TEXT = frozenset(b"tTwW")
#: the types perf reads: text, data and bss (symbol_type__filter)
_PERF_KINDS = _TEXT | frozenset(b"dDbB")
#: past the last function (its size is not listed)
LAST_FUNCTION_SIZE = 1 << 16


class Kallsyms:
    """The kernel's text symbols: ``function(address)`` names the one
    holding a run-time address; ``base_address`` (``_stext``), ``end``
    (past the last function) and ``build_id`` (hex or None) describe the
    image, as a FileSymbolizer does a file's."""

    path = KERNEL_IMAGE

    def __init__(self, addresses, names, base_address, build_id):
        self._addresses = addresses
        self._names = names
        self.base_address = base_address
        self.end = addresses[-1] + LAST_FUNCTION_SIZE
        self.build_id = build_id

    def function(self, address):
        at = bisect_right(self._addresses, address) - 1
        if at < 0 or address >= self.end:
            return None
        return self._names[at].decode("utf-8", "backslashreplace")

    @staticmethod
    def line(address):
        return None  # no line table: /proc/kallsyms has names only

    @staticmethod
    def inlined(address):
        return []

    def frame_name(self, address, module=None):
        """The FrameName of a run-time address: its function, said to be
        from ``module`` (no line, no inlined calls)."""
        return FrameName(self.function(address), module=module)


def _read_bounded(path, limit):
    with open(path, "rb") as stream:
        return stream.read(limit)


def parse_kallsyms(data, build_id=None):
    """A Kallsyms of the text of /proc/kallsyms (bytes), or None where it
    lists no text address (hidden: all 0).  Its names are kept as bytes
    and decoded when looked up (some 120,000 lines, a few of them named).

    Of the names of one address (``__ia32_sys_getppid``,
    ``__x64_sys_getppid``) the last listed is kept, as perf keeps it: perf
    reads the text, data and bss symbols of kallsyms (``$`` names left
    out) in the file's order, gives each the size up to the next one's
    address (symbols__fixup_end), then keeps one of each address by
    choose_best_symbol, whose first rule (a symbol with a size over one
    without) only the last of an address passes."""
    symbols = {}
    stext = None
    for line in data.split(b"\n"):
        fields = line.split(b" ", 2)  # address, type, name (tab [module])
        if len(fields) < 3 or len(fields[1]) != 1 or fields[1][0] not in _PERF_KINDS \
                or fields[2].startswith(b"$"):
            continue
        try:
            address = int(fields[0], 16)
        except ValueError:
            continue
        if not address:
            continue
        name = fields[2].split(b"\t", 1)[0]
        if fields[1][0] in _TEXT:
            symbols[address] = name
            if name == b"_stext":
                stext = address
        elif address in symbols:  # a data symbol listed after a function
            symbols[address] = name
    if not symbols:
        return None
    addresses = sorted(symbols)
    names = [symbols[a] for a in addresses]
    return Kallsyms(addresses, names, stext if stext is not None else addresses[0], build_id)


def running_kernel_build_id():
    """The running kernel's GNU build id (hex), or None."""
    try:
        return gnu_build_id(_read_bounded(NOTES, MAX_NOTES),
                            "<" if sys.byteorder == "little" else ">")
    except OSError:
        return None


def kernel_text_start():
    """The run-time address of the running kernel's ``_stext``, read from
    the top of /proc/kallsyms (where it is listed among the first lines),
    or None where it is hidden or cannot be read."""
    return _first_text_symbol(b"_stext")


def kernel_image_start():
    """The run-time address of the running kernel's ``_text`` (where perf
    says its kernel map starts), as kernel_text_start, or None."""
    return _first_text_symbol(b"_text")


def _first_text_symbol(name):
    marker = b" T " + name + b"\n"
    try:
        with open(KALLSYMS, "rb") as stream:
            data = b""
            while len(data) < MAX_BYTES:
                chunk = stream.read(1 << 16)
                if not chunk:
                    return None
                data = data[data.rfind(b"\n") + 1:] + chunk
                at = data.find(marker)
                if at >= 0:
                    address = int(data[data.rfind(b"\n", 0, at) + 1:at], 16)
                    return address or None
    except (OSError, ValueError):
        return None
    return None


_cached = []


def running_kernel():
    """The running kernel's Kallsyms, read once (None where its addresses
    cannot be read)."""
    if not _cached:
        try:
            data = _read_bounded(KALLSYMS, MAX_BYTES)
        except OSError:
            data = b""
        _cached.append(parse_kallsyms(data, running_kernel_build_id()) if data else None)
    return _cached[0]


def recorded_kernel(build_id):
    """The running kernel's Kallsyms where it is the kernel of build id
    ``build_id`` (hex) that an archive's image names, else None."""
    kernel = running_kernel() if build_id else None
    return kernel if kernel is not None and kernel.build_id == build_id else None
