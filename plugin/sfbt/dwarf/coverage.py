"""Which addresses of an ELF file its DWARF call-frame information covers:
where GDB's DWARF unwinder has an FDE, so the SFrame frame unwinder's
`auto` mode leaves the frame to it.  The FDEs are found as
sfbt.dwarf.fdes finds them (``.eh_frame_hdr``'s table when there is one),
which answers as GDB does."""

from ..elf import open_elf
from .fdes import FdeIndex


class CfiCoverage:
    """The FDE address ranges of one ELF file (file addresses)."""

    def __init__(self, index):
        self.index = index

    @property
    def has_cfi(self):
        return self.index.has_cfi

    def covers(self, address):
        """Whether an FDE of the file covers ``address``; CFIError where
        the FDE the table points at cannot be read."""
        return self.index.find(address) is not None

    @classmethod
    def of_file(cls, path):
        """The coverage of the ELF file at ``path``.  Raises OSError or
        ElfError."""
        stream, image = open_elf(path)
        with stream:
            return cls(FdeIndex.of_image(image))
