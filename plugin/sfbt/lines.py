"""Text read a line at a time within limits: a line without an end
(/dev/zero on standard input) or an input without one costs bounded
memory and ends in one line saying which limit was passed."""

from .errors import SfbtError

#: The longest line read; a longer one is not text sfbt reads.
MAX_LINE_BYTES = 1 << 20


class TextLimitError(SfbtError):
    """A line, or a whole input, longer than sfbt reads."""


def bounded_lines(stream, errors="replace", max_bytes=None):
    """The lines of a binary stream as text (decoded from UTF-8 with
    ``errors``), one at a time.  A line of more than MAX_LINE_BYTES, or
    more than ``max_bytes`` in all, raises TextLimitError naming the line."""
    number = total = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise TextLimitError(f"line {number} is longer than {MAX_LINE_BYTES} bytes")
        total += len(line)
        if max_bytes is not None and total > max_bytes:
            raise TextLimitError(f"line {number}: more than {max_bytes} bytes in all")
        yield line.decode("utf-8", errors)
