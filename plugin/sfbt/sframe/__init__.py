"""SFrame (.sframe) sections: one model, read and written in v1, v2 and v3.

The names below are imported from their modules when first asked for, so
that a walk, which reads sections, does not import the dumper or the
writer.
"""

from ..lazy import lazy_exports

_MODULE_OF = {
    "dump_text": "dump", "lookup_text": "dump",
    "SFrameEncodeError": "errors", "SFrameError": "errors",
    "FrameRowEntry": "model", "FunctionEntry": "model", "SFrameSection": "model",
    "check_section": "reader", "open_section": "reader", "read_section": "reader",
    "FrameRow": "rules", "Location": "rules",
    "write_section": "writer",
}

__all__ = sorted(_MODULE_OF)

__getattr__ = lazy_exports(__name__, _MODULE_OF)
