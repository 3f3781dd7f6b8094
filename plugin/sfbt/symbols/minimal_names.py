"""The name GDB prints for a minimal symbol (an ELF symbol, not a DWARF
function).

GDB gives a minimal symbol's name to each language's demangler in turn,
Ada's last (gdb/symtab.c, symbol_find_demangled_name), and Ada's decoding
(gdb/ada-lang.c, ada_decode) takes many a C name: a name it changes, and
does not refuse, is printed decoded.  So GCC's clones lose their number
and a compiler's suffix is put in brackets (``foo.constprop.0`` is
printed ``foo.constprop``, ``foo.part.0`` ``foo.part``, ``foo.cold``
``foo[cold]``), and ``__`` inside a name is printed ``.``.  C++'s
demangler comes first: a mangled name (``_ZNSt6thread4joinEv``) is
printed demangled, with its parameters (``std::thread::join()``:
sfbt.names); another name that starts with ``_`` (the C
library's ``__GI_...``, one the demangler refuses) is left as it is.

Characters are classified as C's ctype does in the C locale (ASCII only),
and a wide character GNAT encodes (``U61``) is decoded only when it is
ASCII (beyond, GDB decodes it when the host's charset can show it)."""

from __future__ import annotations

import string

from ..names import demangled, is_mangled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

_ALPHA = frozenset(string.ascii_letters)
_DIGITS = frozenset(string.digits)
_ALNUM = _ALPHA | _DIGITS
_LOWER_ALNUM = frozenset(string.ascii_lowercase) | _DIGITS
_UPPER = frozenset(string.ascii_uppercase)
_HEX = frozenset(string.hexdigits)
#: GNAT's names of Ada's operators, as ada_opname_table lists them
_OPERATORS = (("Oadd", '"+"'), ("Osubtract", '"-"'), ("Omultiply", '"*"'),
              ("Odivide", '"/"'), ("Omod", '"mod"'), ("Orem", '"rem"'),
              ("Oexpon", '"**"'), ("Olt", '"<"'), ("Ole", '"<="'), ("Ogt", '">"'),
              ("Oge", '">="'), ("Oeq", '"="'), ("One", '"/="'), ("Oand", '"and"'),
              ("Oor", '"or"'), ("Oxor", '"xor"'), ("Oconcat", '"&"'), ("Oabs", '"abs"'),
              ("Onot", '"not"'))
#: the hex digits of GNAT's wide characters: U and 2, W and 4, WW and 8
_WIDE = (("WW", 8), ("W", 4), ("U", 2))


def printed_name(name: str) -> str:
    """The name GDB prints for a minimal symbol named ``name``."""
    if is_mangled(name):
        return demangled(name)
    decoded = ada_decoded(name)
    if decoded is None or decoded == name:
        return name
    return decoded.split("\0", 1)[0]  # GDB keeps the decoded name as a C string


def ada_decoded(name: str) -> Optional[str]:
    """GDB's ada_decode of a name (in which a NUL past the end of the name
    may be copied, as GDB copies it), None where it refuses it."""
    encoded = name[1:] if name.startswith(".") else name
    for prefix in ("_ada_", "___ghost_"):
        if encoded.startswith(prefix):
            encoded = encoded[len(prefix):]
    if encoded[:1] in ("_", "<"):
        return None

    def at(i: int) -> str:  # a C string's character: NUL past its end
        return encoded[i] if 0 <= i < len(encoded) else "\0"

    length = len(encoded)
    suffix = -1
    i = length - 1  # a compiler's suffix of letters after a "."
    while i > 0 and at(i) in _ALPHA:
        i -= 1
    if i > 0 and at(i) == ".":
        length, suffix = i, i + 1
    length = _without_trailing_digits(encoded, length)
    if length > 1 and at(length - 1) == "N" and (at(length - 2) in _LOWER_ALNUM):
        length -= 1  # a protected object's subprogram
    triple = encoded.find("___")
    if 0 <= triple < length - 3:
        if at(triple + 3) != "X":
            return None
        length = triple
    for body in ("TKB", "TB", "B"):
        if length > len(body) and encoded.startswith(body, length - len(body)):
            length -= len(body)
    if length > 1 and at(length - 1) in _DIGITS:  # __{digit}+ or ${digit}+
        i = length - 2
        while (i >= 0 and at(i) in _DIGITS) or (i >= 1 and at(i) == "_" and at(i - 1) in _DIGITS):
            i -= 1
        if i > 1 and at(i) == "_" and at(i - 1) == "_":
            length = i - 1
        elif i >= 0 and at(i) == "$":
            length = i
    decoded: List[str] = []
    i = 0
    while i < length and at(i) not in _ALPHA:
        decoded.append(at(i))
        i += 1
    at_start = True
    while i < length:
        if at_start and at(i) == "O":
            operator = next(((encoded_name, shown) for encoded_name, shown in _OPERATORS
                             if encoded[i + 1:i + len(encoded_name)] == encoded_name[1:]
                             and at(i + len(encoded_name)) not in _ALNUM), None)
            if operator is not None:
                decoded.append(operator[1])
                at_start = False
                i += len(operator[0])
                continue
        at_start = False
        i = _past_internal_parts(encoded, i, length, at)
        wide = next(((marker, digits) for marker, digits in _WIDE
                      if encoded.startswith(marker, i) and at(i + len(marker)) in _HEX), None)
        if wide is not None:
            marker, digits = wide
            text = encoded[i + len(marker):i + len(marker) + digits]
            if len(text) == digits and all(c in _HEX for c in text) \
                    and int(text, 16) < 0x80:  # beyond ASCII: as the host charset says
                decoded.append(chr(int(text, 16)))
                i += len(marker) + digits
                continue
        if at(i) == "X" and i != 0 and at(i - 1) in _ALNUM:
            i += 1  # X, Xb, Xn...: only at the end
            while i < length and at(i) in ("b", "n"):
                i += 1
            if i < length:
                return None
        elif i < length - 2 and at(i) == "_" and at(i + 1) == "_":
            decoded.append(".")
            at_start = True
            i += 2
        else:
            decoded.append(at(i))
            i += 1
    text = "".join(decoded)
    if any(c in _UPPER or c == " " for c in text):
        return None
    return text + f"[{encoded[suffix:]}]" if suffix >= 0 else text


def _without_trailing_digits(encoded: str, length: int) -> int:
    """The length without a final .{digit}+, ${digit}+, ___{digit}+ or
    __{digit}+ (ada_remove_trailing_digits)."""
    if length > 1 and encoded[length - 1] in _DIGITS:
        i = length - 2
        while i > 0 and encoded[i] in _DIGITS:
            i -= 1
        if i >= 0 and encoded[i] in (".", "$"):
            return i
        if i >= 2 and encoded.startswith("___", i - 2):
            return i - 2
        if i >= 1 and encoded.startswith("__", i - 1):
            return i - 1
    return length


def _past_internal_parts(encoded: str, i: int, length: int, at) -> int:
    """``i`` past what GNAT puts inside a name and GDB leaves out there:
    TK before __, __B_{digit}+ before __, _E{digit}+b or s, N before __."""
    if i < length - 4 and encoded.startswith("TK__", i):
        i += 2
    if length - i > 5 and encoded.startswith("__B_", i) and at(i + 4) in _DIGITS:
        k = i + 5
        while k < length and at(k) in _DIGITS:
            k += 1
        if length - k > 2 and at(k) == "_" and at(k + 1) == "_":
            i = k
    if length - i > 3 and at(i) == "_" and at(i + 1) == "E" and at(i + 2) in _DIGITS:
        k = i + 3
        while k < length and at(k) in _DIGITS:
            k += 1
        if k < length and at(k) in ("b", "s"):
            k += 1
            if k == length or at(k) == "_":
                i = k
    if at(i) == "N" and at(i + 1) == "_" and at(i + 2) == "_":
        back = i - 1
        while back >= 0 and at(back) in _LOWER_ALNUM:
            back -= 1
        if back < 0 or (back > 0 and at(back) == "_" and at(back - 1) == "_"):
            i += 1
    return i
