"""SFrame (.sframe) sections: one model, read and written in v1, v2 and v3."""

from .dump import dump_text, lookup_text
from .errors import SFrameEncodeError, SFrameError
from .model import FrameRowEntry, FunctionEntry, SFrameSection
from .reader import check_section, open_section, read_section
from .rules import FrameRow, Location
from .writer import write_section

__all__ = [
    "FrameRow", "FrameRowEntry", "FunctionEntry", "Location", "SFrameEncodeError",
    "SFrameError", "SFrameSection", "check_section", "dump_text", "lookup_text",
    "open_section", "read_section", "write_section",
]
