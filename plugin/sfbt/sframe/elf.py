"""Finding a .sframe section in an ELF file (pyelftools).

By name, else by section type SHT_GNU_SFRAME, else through the
PT_GNU_SFRAME program header.  In relocatable objects the section's
relocations are applied first, as objdump 2.46 does before dumping v2 and
v3 sections; objdump 2.40, the last to dump v1, shows v1 sections of
relocatable objects unrelocated, and so do we.
"""

import struct

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from . import constants as C
from .errors import SFrameError
from .reader import read_section

# e_machine -> relocation type -> (field size, PC-relative)
_RELOCATIONS = {
    "EM_X86_64": {1: (8, False), 2: (4, True), 10: (4, False), 11: (4, False),
                  24: (8, True)},
    "EM_AARCH64": {257: (8, False), 258: (4, False), 260: (8, True),
                   261: (4, True)},
    "EM_S390": {4: (4, False), 5: (4, True), 22: (8, False), 23: (8, True)},
}

# objdump's names for the file formats, for the dump's first line.
_BFD_NAMES = {
    ("EM_X86_64", False): "elf64-x86-64",
    ("EM_AARCH64", False): "elf64-littleaarch64",
    ("EM_AARCH64", True): "elf64-bigaarch64",
    ("EM_S390", True): "elf64-s390",
}


class ElfInputError(Exception):
    """A file that is not a readable ELF file or has no SFrame data."""


def _type_is(value, number, name):
    return value == number or value == name


def bfd_target_name(elffile):
    key = (elffile["e_machine"], not elffile.little_endian)
    return _BFD_NAMES.get(key, f"elf{elffile.elfclass}-unknown")


def read_elf_sframe_bytes(path):
    """(data, address, name) of the ELF file's SFrame section, or None, and
    objdump's name for the file's format."""
    try:
        with open(path, "rb") as stream:
            elffile = ELFFile(stream)
            return _find_sframe(elffile), bfd_target_name(elffile)
    except (ELFError, struct.error, ValueError) as error:
        raise ElfInputError(f"not a readable ELF file: {error}") from None


def read_elf_sframe(path):
    """The SFrame section of the ELF file at ``path`` (None if it has none)
    and objdump's name for the file's format."""
    found, fmt = read_elf_sframe_bytes(path)
    if found is None:
        return None, fmt
    data, address, name = found
    return read_section(data, address, name), fmt


def _find_sframe(elffile):
    section = elffile.get_section_by_name(".sframe")
    if section is None:
        for candidate in elffile.iter_sections():
            if _type_is(candidate["sh_type"], C.SHT_GNU_SFRAME, "SHT_GNU_SFRAME"):
                section = candidate
                break
    if section is not None:
        if section["sh_type"] == "SHT_NOBITS":
            return b"", section["sh_addr"], section.name
        data = section.data()
        if elffile["e_type"] == "ET_REL" and data[2:3] != bytes([C.VERSION_1]):
            data = _relocated(elffile, section, data)
        return data, section["sh_addr"], section.name
    for segment in elffile.iter_segments():
        if _type_is(segment["p_type"], C.PT_GNU_SFRAME, "PT_GNU_SFRAME"):
            return segment.data(), segment["p_vaddr"], ".sframe"
    return None


def _relocated(elffile, section, data):
    """Apply the section's relocations (objdump dumps .o files this way)."""
    index = elffile.get_section_index(section.name)
    data = bytearray(data)
    table = _RELOCATIONS.get(elffile["e_machine"], {})
    endian = "<" if elffile.little_endian else ">"
    for relocs in elffile.iter_sections():
        if not isinstance(relocs, RelocationSection) or relocs["sh_info"] != index:
            continue
        symtab = elffile.get_section(relocs["sh_link"])
        for reloc in relocs.iter_relocations():
            offset, kind = reloc["r_offset"], reloc["r_info_type"]
            if kind not in table:
                raise SFrameError(f"unsupported relocation type {kind}",
                                  offset, section.name)
            size, pc_relative = table[kind]
            if offset + size > len(data):
                raise SFrameError("relocation runs past the end of the section",
                                  offset, section.name)
            fmt = endian + ("q" if size == 8 else "i")
            symbol = symtab.get_symbol(reloc["r_info_sym"])
            value = symbol["st_value"]
            if isinstance(symbol["st_shndx"], int):
                value += elffile.get_section(symbol["st_shndx"])["sh_addr"]
            if reloc.is_RELA():
                value += reloc["r_addend"]
            else:
                value += struct.unpack_from(fmt, data, offset)[0]
            if pc_relative:
                value -= section["sh_addr"] + offset
            mask = (1 << (8 * size)) - 1
            value &= mask
            if value >> (8 * size - 1):
                value -= mask + 1
            struct.pack_into(fmt, data, offset, value)
    return bytes(data)
