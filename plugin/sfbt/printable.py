"""Names that cannot act on a terminal or a parser: thread names, symbols,
paths and labels come from processes, ELF files and archives sfbt does
not trust.  Before any of them is printed, each character that is not
printable is written as GDB writes it in a string: ``\\n``, ``\\t`` and the
other C escapes, else each of its UTF-8 bytes in octal (``\\033``; a byte
that is not UTF-8, carried as a surrogate escape, as itself: ``\\377``).
Printable text, backslashes included, is left as it is."""

import functools

_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
              "\t": "\\t", "\v": "\\v"}


def _escaped(character):
    named = _C_ESCAPES.get(character)
    if named is not None:
        return named
    try:
        data = character.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        data = character.encode("utf-8", "surrogatepass")
    return "".join(f"\\{byte:03o}" for byte in data)


def _escaped_text(text):
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


#: Names of at most this many characters are remembered, and at most
#: MEMO_NAMES of them: a hostile archive of distinct long names (an event
#: string may be 64 KiB) must not make the memo grow without bound.
MEMO_LENGTH = 1024
MEMO_NAMES = 4096

_remembered = functools.lru_cache(maxsize=MEMO_NAMES)(_escaped_text)


def printable(text):
    """``text`` with every character that is not printable escaped; one
    line whatever it holds.  Remembered per distinct text: an archive
    repeats a few names millions of times."""
    if len(text) > MEMO_LENGTH:
        return _escaped_text(text)
    return _remembered(text)
