"""This machine's vDSO, the one image the kernel maps into every process,
read from sfbt's own memory (never from a file, nor from another
process, which may have rewritten its copy): the bytes ``sfbt record``
and a perf.data's samples read the vDSO's code from, and the names of
an archive's vDSO frames where the archive's vDSO is this machine's (its
build id), as ``[kernel.kallsyms]`` is named from /proc/kallsyms where
the archive's kernel is the running one (sfbt.symbols.kallsyms)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

    from .symbolizer import FileSymbolizer

#: the kernel's name of the vDSO's mapping (and perf's of its image)
VDSO = "[vdso]"
#: how the vDSO is named in frames and image maps (as ldd names it)
VDSO_NAME = "linux-vdso.so.1"
#: the most of the vDSO read (it is a few pages)
MAX_VDSO_BYTES = 1 << 20
#: the most of /proc/self/maps read looking for it
MAX_MAPS_BYTES = 1 << 22


def own_vdso() -> bytes:
    """The bytes of sfbt's own vDSO, or b"" where it has none (or one
    larger than MAX_VDSO_BYTES).  ctypes is imported here, not with the
    module: the crash handler imports the module for its names only."""
    import ctypes
    try:
        with open("/proc/self/maps", "rb") as maps:
            listed = maps.read(MAX_MAPS_BYTES)
    except OSError:
        return b""
    for line in listed.splitlines():
        if line.endswith(b" " + VDSO.encode()):
            start, end = (int(part, 16) for part in line.split(b" ", 1)[0].split(b"-"))
            if 0 < end - start <= MAX_VDSO_BYTES:
                return ctypes.string_at(start, end - start)
    return b""


_running: List[Optional[FileSymbolizer]] = []


def running_vdso() -> Optional[FileSymbolizer]:
    """The symbolizer of this machine's vDSO, read once (None where sfbt
    has none, or it is not ELF)."""
    if not _running:
        from ..elf import ElfError  # (the vDSO's readers import only own_vdso)
        from .symbolizer import FileSymbolizer
        data = own_vdso()
        try:
            _running.append(FileSymbolizer.of_image(data, VDSO_NAME) if data else None)
        except ElfError:
            _running.append(None)
    return _running[0]


def recorded_vdso(build_id: Optional[str]) -> Optional[FileSymbolizer]:
    """The symbolizer of this machine's vDSO where it is the vDSO of
    build id ``build_id`` (hex) that an archive's image names, else None."""
    vdso = running_vdso() if build_id else None
    return vdso if vdso is not None and vdso.build_id == build_id else None
