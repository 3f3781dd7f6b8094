"""Function names as GDB prints them: the one place sfbt demangles C++
names, and the one rule of which is main.

GDB demangles with libiberty's demangler, which libstdc++ exports as
``abi::__cxa_demangle``; sfbt calls that one through ctypes (no parser
of its own), and spells the four standard substitutions it abbreviates
(``std::string``...) as GDB does, in full.  A name longer than
MAX_MANGLED, one the demangler refuses and any name where libstdc++
cannot be loaded (said once, as a note of what was left out) stay as
they are.  ``without_parameters`` is GDB's
cp_remove_params for the names of its frames: GDB's `bt` prints a DWARF
function's name without its parameter list (``app::pool``), a minimal
symbol's with it (``std::thread::join()``)."""

from __future__ import annotations

from functools import lru_cache

from .errors import left_out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional, Tuple

#: characters of a mangled name given to the demangler at most (C++'s
#: longest real ones are some kB; the demangler's work grows with them)
MAX_MANGLED = 1 << 14
#: characters of a demangled name kept at most: a longer one is left mangled
MAX_DEMANGLED = 1 << 16
#: the libraries that may hold __cxa_demangle, in the order tried
LIBRARIES = ("libstdc++.so.6", "libc++abi.so.1", "libc++.so.1")
#: [(__cxa_demangle, ctypes, the C library's free), or None where none
#: loads], once: ctypes imported on the first mangled name only (`sfbt
#: stack` of a C program never needs it)
_demangler: List[Any] = []


def _loaded() -> Optional[Any]:
    """(libstdc++'s __cxa_demangle with its C types, ctypes, free), or None."""
    if _demangler:
        return _demangler[0]
    import ctypes
    loaded = None
    for name in LIBRARIES:
        try:
            function = ctypes.CDLL(name).__cxa_demangle
            free = ctypes.CDLL(None).free
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_void_p  # freed by us: not a Python bytes
        function.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                             ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
        free.argtypes = [ctypes.c_void_p]
        free.restype = None
        loaded = (function, ctypes, free)
        break
    _demangler.append(loaded)
    return loaded


def is_mangled(name: str) -> bool:
    """Whether a name is a C++ (Itanium ABI) mangled one."""
    return name.startswith("_Z")


@lru_cache(maxsize=1 << 16)
def demangled(name: str) -> str:
    """The name as GDB prints a mangled C++ name (with its parameters:
    ``std::thread::join()``); any other name, one too long, one the
    demangler refuses, as it is."""
    if not is_mangled(name) or len(name) > MAX_MANGLED or "\0" in name:
        return name
    loaded = _loaded()
    if loaded is None:
        left_out("C++ names left mangled: no libstdc++ to demangle them with")
        return name
    demangle, ctypes, free = loaded
    try:
        encoded = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name
    status = ctypes.c_int(-1)
    text = demangle(encoded, None, None, ctypes.byref(status))
    if not text:
        return name
    try:
        if status.value != 0:
            return name
        result = ctypes.string_at(text)
    finally:
        free(text)
    if len(result) > MAX_DEMANGLED:
        return name
    return _verbose(name, result.decode("utf-8", "surrogateescape"))


#: the standard substitutions libiberty spells two ways: (mangled, as
#: __cxa_demangle prints it, as GDB prints it: libiberty's DMGL_VERBOSE
#: spelling, c++filt's too: ``std::basic_string<char, ...>::append(...)``
#: where __cxa_demangle says ``std::string::append(...)``)
_STANDARD_SUBSTITUTIONS = (
    ("Ss", "std::string",
     "std::basic_string<char, std::char_traits<char>, std::allocator<char> >"),
    ("Si", "std::istream", "std::basic_istream<char, std::char_traits<char> >"),
    ("So", "std::ostream", "std::basic_ostream<char, std::char_traits<char> >"),
    ("Sd", "std::iostream", "std::basic_iostream<char, std::char_traits<char> >"))


@lru_cache(maxsize=None)
def _spelled_short(short: str):
    """The pattern of a standard substitution's short spelling, compiled
    when first needed (re kept off the crash handler's imports)."""
    import re
    return re.compile(r"(?<![\w:])" + re.escape(short) + r"(?!\w)")


def _verbose(mangled: str, text: str) -> str:
    """__cxa_demangle's ``text`` of ``mangled`` with the standard
    substitutions spelled out as GDB spells them (only those the mangled
    name may hold: a name no substitution gave is never written so)."""
    for substitution, short, full in _STANDARD_SUBSTITUTIONS:
        if substitution in mangled:
            text = _spelled_short(short).sub(full, text)
    return text


#: what may follow a C++ function's parameter list in a printed name
_QUALIFIERS = (" const", " volatile", " &&", " &")


def without_parameters(name: str) -> str:
    """A C++ function's name without its parameter list and qualifiers, as
    GDB's `bt` prints a DWARF function (``app::pool(int)`` as
    ``app::pool``, ``X::operator()(int) const`` as ``X::operator()``),
    its types spelt as GDB reprints them (``twice<long int>(long)`` as
    ``twice<long>``); a name without one (``operator()``, ``main``), or
    one GDB's C++ name parser refuses (is_unparsed), as it is."""
    head = split_parameters(name)[0]
    return canonical_types(head) if head != name and not is_unparsed(name) else name


#: what makes a name one GDB cannot parse as C++: GCC's names of closures
#: and unnamed types in DWARF (``f()::<lambda()>``) as a part of it
UNPARSED = "::<"
#: the same in names the demangler gives (``f()::{lambda(long)#1}``,
#: ``{unnamed type#1}``)
UNPARSED_DEMANGLED = ("{lambda(", "{unnamed type#")


def is_unparsed(name: str) -> bool:
    """Whether GDB's C++ name parser refuses ``name`` (GDB's `bt` then
    prints it whole, its parameters too: ``f()::{lambda(long)#1}::operator()(long)
    const``): it has a closure's or an unnamed type's name in it, as GCC's
    DWARF or the demangler spell them."""
    return UNPARSED in name or any(part in name for part in UNPARSED_DEMANGLED)


def split_parameters(name: str) -> Tuple[str, str]:
    """(the name before its parameter list, the list with the qualifiers
    after it: `` (int) const``); (name, "") for a name without one."""
    end = len(name)
    trimmed = True
    while trimmed:
        trimmed = False
        for qualifier in _QUALIFIERS:
            if name.endswith(qualifier, 0, end):
                end -= len(qualifier)
                trimmed = True
    if end == 0 or name[end - 1] != ")":
        return name, ""
    depth = 0
    for at in range(end - 1, -1, -1):
        if name[at] == ")":
            depth += 1
        elif name[at] == "(":
            depth -= 1
            if depth == 0:
                head = name[:at]
                # ``operator()`` itself: its parentheses are its name
                if not head or head.endswith("operator"):
                    return name, ""
                return head, name[at:]
    return name, ""


_OPENING, _CLOSING = "(<[{", ")>]}"


def without_return_type(name: str) -> str:
    """A demangled function name without the return type the demangler
    puts before a template function's name (``long n::tf<int>(int)`` as
    ``n::tf<int>(int)``), as GDB's demangling of a DWARF function's
    linkage name drops it (DMGL_RET_DROP, which __cxa_demangle lacks): the
    name after its last space outside brackets, before its parameters.  A
    name with an operator in it (whose ``<`` or ``new`` would be taken for
    brackets or a type) as it is."""
    head = split_parameters(name)[0]
    if "operator" in head:
        return name
    depth, cut = 0, None
    for at, character in enumerate(head):
        if character in _OPENING:
            depth += 1
        elif character in _CLOSING:
            depth -= 1
        elif character == " " and depth == 0:
            cut = at + 1
    return name[cut:] if cut is not None else name


#: GCC's spellings of integer types in DWARF names (``P<long unsigned int>``)
#: and the ones GDB's canonical C++ names use (``P<unsigned long>``)
_GCC_TYPES = {"long long unsigned int": "unsigned long long", "long long int": "long long",
              "long unsigned int": "unsigned long", "long int": "long",
              "short unsigned int": "unsigned short", "short int": "short",
              "__int128 unsigned": "unsigned __int128"}


@lru_cache(maxsize=1)
def _gcc_type():
    """The pattern of _GCC_TYPES' names, compiled when first needed (re
    kept off the crash handler's imports)."""
    import re
    return re.compile(r"\b(?:" + "|".join(_GCC_TYPES) + r")\b")


def canonical_types(name: str) -> str:
    """A C++ name from DWARF with its template arguments' integer types
    spelt as GDB's canonical names spell them (GDB's
    cp_canonicalize_string: ``twice<long int>`` as ``twice<long>``)."""
    return _gcc_type().sub(lambda found: _GCC_TYPES[found.group()], name) if "<" in name \
        else name


def is_main(name: Optional[str]) -> bool:
    """Whether a frame's function name is the program's ``main``, where a
    walk stops as GDB's does: C's ``main``, C++'s as GDB names it with or
    without its parameters (``main(int, char**)``, ``main()``).  No other
    function of the global namespace may be called main."""
    return name is not None and name.split("(", 1)[0] == "main"
