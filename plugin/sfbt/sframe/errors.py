"""The one error type the SFrame reader raises."""


class SFrameError(Exception):
    """Corrupt or unsupported SFrame data, located by section and byte offset."""

    def __init__(self, message, offset=None, section=".sframe"):
        self.message = message
        self.offset = offset
        self.section = section
        super().__init__(str(self))

    def __str__(self):
        if self.offset is None:
            return f"{self.section}: {self.message}"
        return f"{self.section}+{self.offset:#x}: {self.message}"


class SFrameEncodeError(ValueError):
    """A model that cannot be written in the requested version or layout."""
