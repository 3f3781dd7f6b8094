"""DWARF call-frame information and SFrame synthesized from it.

- ``cfi``: parsing .eh_frame / .debug_frame into CIEs and FDEs;
- ``fdes``: finding the FDE that covers an address (.eh_frame_hdr's table);
- ``cfa``: running an FDE's CFA program into rows of rules;
- ``expressions``: the few DWARF expressions SFrame can say;
- ``convert``: one row's rules as SFrame rules and data words;
- ``synthesize``: a whole SFrame v3 section from an ELF image's CFI;
- ``ondemand``: the rows of one function at a time, as walks reach them;
- ``synth_cache``: whole synthesized sections cached per file they were made from;
- ``coverage``: which addresses an object's CFI covers;
- ``units``: the unit that holds an address (.debug_aranges, units' top entries);
- ``compressed``: compressed debug sections (SHF_COMPRESSED, .zdebug_*) inflated;
- ``line_program``: one unit's line rows, read with struct;
- ``inline``: the calls inlined around an address.

The names below are imported from their modules when first asked for: a
walk does not import the synthesis cache.
"""

from ..lazy import lazy_exports

_MODULE_OF = {
    "Inexpressible": "convert",
    "SynthesisStore": "synth_cache", "file_cache_key": "synth_cache",
    "SynthError": "synthesize", "SynthResult": "synthesize", "SynthStats": "synthesize",
    "synthesize_cfi": "synthesize", "synthesize_elf": "synthesize",
    "synthesize_image": "synthesize",
}

__all__ = sorted(_MODULE_OF)

__getattr__ = lazy_exports(__name__, _MODULE_OF)
