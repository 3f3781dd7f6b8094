"""The errors of the SFrame reader and writer."""

from ..errors import EncodeError, LocatedError


class SFrameError(LocatedError):
    """Corrupt or unsupported SFrame data, located by section and byte
    offset: ``.sframe+0x58: FDE 3 FRE offset 0x9000 beyond ...``."""

    default_where = ".sframe"

    def __init__(self, message, offset=None, section=".sframe"):
        super().__init__(message, offset, section)


class SFrameEncodeError(EncodeError):
    """A model that cannot be written in the requested version or layout."""
