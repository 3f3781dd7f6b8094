"""DWARF call-frame information and SFrame synthesized from it.

- ``cfi``: parsing .eh_frame / .debug_frame into CIEs and FDEs;
- ``cfa``: running an FDE's CFA program into rows of rules;
- ``expressions``: the few DWARF expressions SFrame can say;
- ``convert``: one row's rules as SFrame rules and data words;
- ``synthesize``: a whole SFrame v3 section from an ELF image's CFI;
- ``store``: synthesized sections cached per file they were made from;
- ``coverage``: which addresses an object's CFI covers.
"""

from .convert import Inexpressible
from .store import SynthesisStore, file_cache_key
from .synthesize import (SynthError, SynthResult, SynthStats, synthesize_cfi,
                         synthesize_elf, synthesize_image)

__all__ = ["Inexpressible", "SynthError", "SynthResult", "SynthStats", "SynthesisStore",
           "file_cache_key", "synthesize_cfi", "synthesize_elf",
           "synthesize_image"]
