"""The narrow interface between the core and a debugger.

An adapter (gdb/, lldb/), a process or core reader, or a test implements
Target; the unwinder needs nothing else.
"""

from __future__ import annotations

from ..arch import Arch
from ..values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional


class Module(Value):
    """A loaded object: where its file is and where it was loaded.

    ``load_bias`` is added to the file's addresses to get run-time ones;
    [start, end) is the run-time range of its loaded segments; ``base`` is
    where its first loadable segment (the ELF header) is mapped, the "base"
    of an image map.  ``image``: the bytes of an object that has no file
    (the vDSO, read from memory), its ``path`` then only a name to show,
    left out of comparisons and the repr.  A Module is not changed once
    made (it is hashed).
    """

    __slots__ = _fields = ("path", "load_bias", "start", "end", "build_id", "base", "image")
    _uncompared = _unshown = ("image",)

    def __init__(self, path: str, load_bias: int, start: int, end: int,
                 build_id: Optional[str] = None, base: Optional[int] = None,
                 image: Optional[bytes] = None):
        self.path = path
        self.load_bias = load_bias
        self.start = start
        self.end = end
        self.build_id = build_id
        self.base = base
        self.image = image

    @property
    def image_base(self) -> int:
        return self.start if self.base is None else self.base

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class Target:
    """What the unwinder asks of a debugger."""

    #: the target's architecture, None where it is not known
    arch: Optional[Arch] = None

    def read_memory(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address``; raise TargetMemoryError if unreadable."""
        raise NotImplementedError

    def registers(self) -> Dict[int, int]:
        """The innermost frame's registers: {DWARF register number: value}."""
        raise NotImplementedError

    def modules(self) -> List[Module]:
        """The loaded objects, as Module."""
        raise NotImplementedError
