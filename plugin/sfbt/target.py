"""The narrow interface between the core and a debugger.

An adapter (gdb/, lldb/) or a test implements Target; the unwinder needs
nothing else from the debugger.
"""

from dataclasses import dataclass


class TargetMemoryError(Exception):
    """Memory the target cannot read."""

    def __init__(self, address, size=1):
        self.address = address
        self.size = size
        super().__init__(f"Cannot access memory at address {address:#x}")


@dataclass(frozen=True)
class Module:
    """A loaded object: where its file is and where it was loaded.

    ``load_bias`` is added to the file's addresses to get run-time ones;
    [start, end) is the run-time range of its loaded segments; ``base`` is
    where its first loadable segment (the ELF header) is mapped, the "base"
    of an image map.
    """

    path: str
    load_bias: int
    start: int
    end: int
    build_id: str = None
    base: int = None

    @property
    def image_base(self):
        return self.start if self.base is None else self.base

    @property
    def name(self):
        return self.path.rsplit("/", 1)[-1]


class Target:
    """What the unwinder asks of a debugger."""

    #: an Arch from sfbt.arch
    arch = None

    def read_memory(self, address, size):
        """``size`` bytes at ``address``; raise TargetMemoryError if unreadable."""
        raise NotImplementedError

    def registers(self):
        """The innermost frame's registers: {DWARF register number: value}."""
        raise NotImplementedError

    def modules(self):
        """The loaded objects, as Module."""
        raise NotImplementedError
