"""Function names and source lines of run-time addresses in archived
images, for the outputs drawn by `sfbt flame` (its SVG, speedscope's JSON,
pprof's profile): each image's symbols (those of its separate debug file
when there is one: sfbt.debuginfo), found by build id or path, as `sfbt
stack` names frames; the kernel's from /proc/kallsyms (sfbt.symbols.kallsyms)."""

import os

from ..archive.imagemap import PerImageMap, image_finder
from ..debuginfo import DebugFiles
from ..dwarf.chains import expanded
from ..elf import ElfError, open_elf
from ..live.mappings import VDSO_NAME
from ..live.symbols import module_symbols
from ..printable import printable
from ..symbols.kallsyms import KERNEL_IMAGE, recorded_kernel
from ..unwind.target import Module


class ImageNamer:
    """Function names of run-time addresses in archived images."""

    def __init__(self):
        self._symbols = {}
        self._debug_files = DebugFiles()
        self._finders = PerImageMap(image_finder)

    def _module(self, image):
        key = (image.path, image.base, image.build_id)
        if key not in self._symbols:
            build_id = image.build_id.hex() if image.build_id else None
            if image.path == KERNEL_IMAGE:  # named only on the kernel it was recorded on
                kernel = recorded_kernel(build_id)
                self._symbols[key] = (image.base - kernel.base_address, kernel) \
                    if kernel is not None else None
                return self._symbols[key]
            path = image.path if image.path != VDSO_NAME else None
            first = _first_load_address(path, build_id) if path else None
            if first is None:  # no file of this build here: a debug file by build id
                path = self._debug_files.find(None, build_id, image.path)
                first = _first_load_address(path, build_id) if path else None
            module = None
            if first is not None:
                module = Module(path, image.base - first, image.base, image.end_of_text,
                                build_id, image.base)
            symbols = module_symbols(module, self._debug_files) if module else None
            self._symbols[key] = (module.load_bias, symbols) if symbols else None
        return self._symbols[key]

    def image_of(self, address, images):
        """The image whose text holds a run-time address, or None."""
        return self._finders(images)(address)

    def has_symbols(self, image):
        return self._module(image) is not None

    def frames(self, address, images):
        """[(name, (file, line) or None)] of the frames at a run-time
        address, innermost first: the calls inlined there
        (sfbt.dwarf.inline), then the function's own; names escaped
        (sfbt.printable), an address without a name named after its
        image and offset."""
        image = self.image_of(address, images)
        if image is None:
            return [(f"{address:#x}", None)]
        found = self._module(image)
        if found is None:
            return [(self._unnamed(address, image), None)]
        load_bias, symbols = found
        at = address - load_bias
        function = symbols.function(at)
        return [(printable(name) if name else self._unnamed(address, image), line)
                for name, line in expanded(symbols.inlined(at), function, symbols.line(at))]

    def names(self, address, images):
        """The names of frames(), innermost first."""
        return [name for name, _ in self.frames(address, images)]

    @staticmethod
    def _unnamed(address, image):
        return printable(f"{os.path.basename(image.path)}+{address - image.base:#x}")


def _first_load_address(path, build_id):
    """The first PT_LOAD address of the ELF file at path, or None when it
    is missing, not ELF or another build (its symbols would lie)."""
    try:
        stream, elf = open_elf(path)
        with stream:
            if build_id and elf.build_id() not in (None, build_id):
                return None
            return elf.first_load_address() or 0
    except (OSError, ElfError, ValueError):  # ValueError: a NUL in an archive's path
        return None
