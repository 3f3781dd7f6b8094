"""The SFrame section of an ELF file or image (read with sfbt.elf).

Found by name, else by section type SHT_GNU_SFRAME, else through the
PT_GNU_SFRAME program header.  In relocatable objects the section's
relocations are applied first, as objdump 2.46 does before dumping v2 and
v3 sections; objdump 2.40, the last to dump v1, shows v1 sections of
relocatable objects unrelocated, and so do we.
"""

from ..elf import PT_GNU_SFRAME, SHT_GNU_SFRAME, ElfImage, open_elf
from . import constants as C
from .reader import open_section


def bfd_target_name(image: ElfImage) -> str:
    """objdump's name for the file's format, for the dump's first line."""
    arch = image.arch
    return arch.bfd_name if arch is not None else "elf64-unknown"


def find_sframe(image: ElfImage, load_bias: int = 0):
    """(data, address, name) of the image's SFrame section, or None."""
    section = image.section(".sframe", SHT_GNU_SFRAME)
    if section is not None:
        data = image.section_data(section)
        if image.relocatable and data[2:3] != bytes([C.VERSION_1]):
            data = image.relocated_data(section)
        return data, section.addr, section.name
    for segment in image.segments():
        if segment.type == PT_GNU_SFRAME:
            return image.segment_data(segment, load_bias), segment.vaddr, ".sframe"
    return None


def read_elf_sframe_bytes(path: str):
    """((data, address, name) or None, objdump's format name) of the ELF
    file at path.  Raises OSError or sfbt.elf.ElfError."""
    stream, image = open_elf(path)
    with stream:
        return find_sframe(image), bfd_target_name(image)


def read_elf_sframe(path: str):
    """The SFrame section of the ELF file at ``path`` (None if it has none),
    opened lazily (reader.open_section), and objdump's name for the file's
    format."""
    found, fmt = read_elf_sframe_bytes(path)
    if found is None:
        return None, fmt
    data, address, name = found
    return open_section(data, address, name), fmt
