"""Inlined calls and functions: for a PC, the chain of calls the compiler
inlined around it, from one compilation unit's DW_TAG_inlined_subroutine
entries, and the function whose code holds it, from its DW_TAG_subprogram
entries (of several, the one GDB finds: the last to start).

A unit's entries are read once (sfbt.dwarf.entries, on the first address
asked for in that unit, as the line tables are) and flattened into
sorted, non-overlapping segments, each with the chain (the function) that
holds over it, so that a look-up is one bisection (sfbt.dwarf.chains,
which sfbt's cache of them needs alone).

A function, and the function of an inlined call, is named as GDB's `bt`
names the symbol it makes of its entry: in C, by its linkage name
(DW_AT_linkage_name, of the entry or of one it refers to:
``__GI___clock_nanosleep``, the C library's name of ``__clock_nanosleep``
inside it), else by its DW_AT_name (eu-stack and llvm-symbolizer
--functions=short take the DW_AT_name).  In C++ (GDB's dwarf2_full_name,
without parameters), by its DW_AT_name qualified by the namespaces and
classes around the entry that gives it (``app::Worker<double>::run``,
``app::(anonymous namespace)::spin``); a function's children and unnamed
classes qualify nothing (a lambda's ``operator()``, ``Local::go`` of a
class inside a function).  An entry given from another unit, whose
scopes are not read, is named by its demangled linkage name without
parameters."""

from bisect import bisect_right

from ..names import (UNPARSED, canonical_types, demangled, is_unparsed, without_parameters,
                     without_return_type)
from . import entries
from .chains import UnitFrames
from .entries import Unit
from .line_program import unit_files

DW_TAG_INLINED = 0x1D
DW_TAG_SUBPROGRAM = 0x2E
#: tags whose children may hold inlined calls: subprogram, lexical_block,
#: namespace, class_type, structure_type, try_block, catch_block, union_type
NESTING = {0x2E, 0x0B, 0x39, 0x02, 0x13, 0x32, 0x25, 0x17}
LINKAGE_NAMES = (entries.DW_AT_LINKAGE_NAME, entries.DW_AT_MIPS_LINKAGE_NAME)
SHORT_NAMES = (entries.DW_AT_NAME,)
NAMES = LINKAGE_NAMES + SHORT_NAMES
#: attributes whose entry may carry a function's name instead of this one
NAME_SOURCES = (entries.DW_AT_ABSTRACT_ORIGIN, entries.DW_AT_SPECIFICATION)
#: links followed at most to find a name (a loop in damaged DWARF ends)
NAME_DEPTH = 8
CALL_ATTRIBUTES = frozenset(NAMES + NAME_SOURCES + (
    entries.DW_AT_LOW_PC, entries.DW_AT_HIGH_PC, entries.DW_AT_RANGES,
    entries.DW_AT_CALL_FILE, entries.DW_AT_CALL_LINE))
NAME_ATTRIBUTES = frozenset(NAMES + NAME_SOURCES)
SCOPE_ATTRIBUTES = frozenset(SHORT_NAMES)
DW_TAG_NAMESPACE = 0x39
#: tags of the classes whose names qualify their members' in C++
CLASSES = {0x02, 0x13, 0x17}
#: DW_AT_language's C++: C++98, C++03, C++11, C++14, C++17, C++20
CPLUS_LANGUAGES = {0x04, 0x19, 0x1A, 0x21, 0x2A, 0x2B}
#: a function's parameters: formal_parameter, unspecified_parameters (...)
PARAMETERS = {0x05, 0x18}
PARAMETERS_FORMAL = 0x05
DW_AT_ARTIFICIAL = 0x34
ARTIFICIAL = frozenset((DW_AT_ARTIFICIAL,))
#: (call, elementary interval) pairs a unit may hold: damaged ranges that
#: overlap without end are refused (the C library's largest unit: 1439)
MAX_MARKS = 1_000_000
#: bytes the segments' chains may take as JSON, each mark repeating its
#: call's name and file (sfbt's cache keeps each once: chains.UnitLookup)
MAX_CHAIN_BYTES = 32 << 20
#: inlined calls nested deeper are left out (and said so): GCC's deepest
#: chains in the C library are a few dozen
MAX_INLINE_DEPTH = 256
#: characters of a function's name kept; a longer one is cut, ending in
#: CUT (C++'s longest mangled names are some kB)
MAX_NAME = 1 << 16
CUT = "...[cut]"
#: characters of the names one unit's entries may give in all
MAX_NAMES_TOTAL = 32 << 20


class _Names:
    """Function names of one unit's entries, following abstract origins
    and specifications (into other units too), each entry's found once;
    in C++, qualified by the scopes ``scopes`` (the .debug_info offset of
    each function entry read: the namespaces and classes around it) once
    the unit's entries are all read (``qualified``)."""

    def __init__(self, unit):
        self.units = {unit.offset: unit}
        self.units_first = unit.offset
        self.sections = unit.sections
        language = unit.top.get(entries.DW_AT_LANGUAGE)
        self.cplus = language is not None and language[1] in CPLUS_LANGUAGES
        self.scopes = {}
        #: the function entries with a parameter that is not ``this``
        self.with_parameters = set()
        self.found = {}
        self.total = 0  # characters of the names given (MAX_NAMES_TOTAL)
        self.cut = False  # whether a name was cut (MAX_NAME)
        self.starts = None  # of every unit, read on the first reference out of this one

    def name(self, unit, attributes, entry):
        """A function's name as GDB gives it, of the entry at ``entry``:
        in C, the first linkage name its entry's attributes, or those of
        the entries they refer to, give, else the first DW_AT_name; None
        when none is found.  In C++, a _Pending name (``qualified``)."""
        if self.cplus:
            short, named = self._first(unit, attributes, entry, SHORT_NAMES)
            return _Pending(short, named, (unit, attributes, entry))
        return self._first(unit, attributes, entry, LINKAGE_NAMES)[0] \
            or self._first(unit, attributes, entry, SHORT_NAMES)[0]

    def qualified(self, name, inlined):
        """The name GDB's `bt` prints for a name ``name`` gave: a _Pending
        one qualified by the scope of the entry that gives its DW_AT_name,
        else its linkage name demangled without return type and
        parameters.  A name GDB cannot parse (names.is_unparsed) is its
        print name whole (GDB cannot take its parameters off): with a
        linkage name, that name demangled without return type (GDB's
        physname: ``f<int>()::{lambda(long)#1}::operator()(long) const``,
        where DW_AT_name qualifies a lambda's ``operator()`` by nothing, so
        that one is asked wherever the scope is local); without one, of a
        function's own (not ``inlined``) entry, its qualified DW_AT_name
        with ``(void)`` when it has no parameters (GCC gives no linkage
        name to the members of a class a lambda's type is an argument of:
        a std::thread's ``_M_run``), else none (DWARF's types are not
        printed)."""
        if not isinstance(name, _Pending):
            return name
        scope = self.scopes.get(name.entry) if name.short is not None else None
        text = None
        if scope is not None:
            text = canonical_types(f"{scope}::{name.short}" if scope else name.short)
        if text is None or isinstance(scope, _Local) or UNPARSED in text:
            linkage = self._first(*name.linkage_from, LINKAGE_NAMES)[0]
            physname = without_return_type(demangled(linkage)) if linkage else None
            if physname is not None and (text is None or is_unparsed(physname)
                                         or UNPARSED in text):
                return self._counted(without_parameters(physname))
            if text is None:
                text = name.short
                if text is None:
                    return None
        if not inlined and UNPARSED in text and name.entry not in self.with_parameters:
            text += "(void)"
        return self._counted(text)

    def _first(self, unit, attributes, entry, keys):
        """(the first name of ``keys`` along the entries an entry refers
        to, the .debug_info offset of the entry that gives it), or (None,
        None)."""
        passed = []  # the entries followed to it
        found = (None, None)
        for _ in range(NAME_DEPTH):
            own = _own_name(unit, attributes, keys)
            if own is not None:
                found = (self._counted(own), entry)
                break
            source = attributes.get(NAME_SOURCES[0]) or attributes.get(NAME_SOURCES[1])
            target = unit.reference(source) if source is not None else None
            if target is None:
                break
            if (keys, target) in self.found:
                found = self.found[keys, target]
                break
            passed.append(target)
            unit = self._unit_of(target)
            attributes = unit.attributes(target, NAME_ATTRIBUTES)[0]
            entry = target
        for target in passed:
            self.found[keys, target] = found
        return found

    def _counted(self, name):
        """The name, cut to MAX_NAME, counted to MAX_NAMES_TOTAL."""
        if len(name) > MAX_NAME:
            name, self.cut = name[:MAX_NAME] + CUT, True
        self.total += len(name)
        if self.total > MAX_NAMES_TOTAL:
            raise entries.DwarfFormatError(f"unit at {self.units_first:#x}: names of more "
                                           f"than {MAX_NAMES_TOTAL} characters")
        return name

    def _unit_of(self, offset):
        """The unit holding the .debug_info offset, read once."""
        if self.starts is None:
            self.starts = entries.unit_starts(self.sections)
        i = bisect_right(self.starts, offset) - 1
        unit = self.units.get(self.starts[i]) if i >= 0 else None
        if unit is None and i >= 0:
            unit = self.units[self.starts[i]] = Unit(self.sections, self.starts[i])
        if unit is None or offset >= unit.end:
            raise entries.DwarfFormatError(f"no unit holds .debug_info offset {offset:#x}")
        return unit


class _Pending:
    """A C++ function's name before its scope is known: its DW_AT_name
    ``short`` given by the entry at ``entry``, and (unit, attributes,
    offset) of the entry it was asked of, to find its linkage name from
    where it is needed."""

    __slots__ = ("short", "entry", "linkage_from")

    def __init__(self, short, entry, linkage_from):
        self.short, self.entry, self.linkage_from = short, entry, linkage_from


class _Local(str):
    """A scope inside a function or an unnamed class (a lambda's): GDB's
    determine_prefix names it by nothing, where a linkage name may name
    it (``f<int>()::{lambda(long)#1}``)."""

    __slots__ = ()


def _scope_of_children(unit, tag, attributes, scope):
    """The C++ scope (``app::Worker<double>``) the children of an entry of
    ``tag`` are in, the entry being in ``scope``: a namespace's or a
    named class's name joins it, a function and an unnamed class start
    none (GDB's determine_prefix: a _Local one), other entries keep it."""
    if tag == DW_TAG_NAMESPACE or tag in CLASSES:
        own = _own_name(unit, attributes, SHORT_NAMES)
        if own is None:
            own = "(anonymous namespace)" if tag == DW_TAG_NAMESPACE else None
        if own is None:
            return _Local()
        joined = f"{scope}::{own}" if scope else own
        joined = joined if len(joined) <= MAX_NAME else joined[:MAX_NAME] + CUT
        return _Local(joined) if isinstance(scope, _Local) else joined
    if tag in (DW_TAG_SUBPROGRAM, DW_TAG_INLINED):
        return _Local()
    return scope


def _own_name(unit, attributes, keys):
    """The name the first of ``keys`` of an entry's own attributes gives,
    or None."""
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            text = unit.string(value)
            return text.decode("utf-8", "surrogateescape") if text is not None \
                else str(value[1])
    return None


def unit_frames(dwarf, offset):
    """The UnitFrames of the compilation unit at ``offset`` in .debug_info
    (of sfbt.dwarf.line_program.DwarfBytes ``dwarf``).

    A compressed section is inflated only as far as the unit's reading
    needs (sfbt.dwarf.entries.Sections): .debug_info to the unit's end,
    or to a later unit's where a name is found there."""
    calls, functions = _calls(Unit(dwarf.entry_sections(), offset), dwarf.left_out)
    if calls:  # a unit without inlined calls needs no file names
        _name_files(calls, *unit_files(dwarf, offset))
    return UnitFrames(_segments(calls), [[start, end, names[0]] for start, end, names
                                         in _segments(_preferred_first(functions))])


def _calls(unit, left_out):
    """([(low, high, depth, [name, file number, line])] of the unit's
    inlined calls, depth their nesting, [(low, high, start, name)] of its
    functions' ranges, start a function's lowest address), in the order
    of its entries.  What a limit leaves out (calls nested deeper than
    MAX_INLINE_DEPTH, names cut) is said through ``left_out(what)``."""
    deeper = False
    calls = []
    functions = []
    names = _Names(unit)
    abbreviation, at = unit.entry(unit.first)
    if abbreviation is None or not abbreviation.children:
        return calls, functions
    at = unit.skip(abbreviation, at)
    # the inline depth of the children of each entry open around ``at``,
    # None for an entry whose children are passed over; and (C++) the
    # scope they are in
    depths = [0]
    scopes = [""]
    owners = [None]  # (C++) the function entry whose children they are
    while depths:
        if at >= unit.end:
            raise entries.DwarfFormatError(f"unit at {unit.offset:#x}: entries run past its end")
        entry = at
        abbreviation, at = unit.entry(at)
        if abbreviation is None:
            depths.pop()
            scopes.pop()
            owners.pop()
            continue
        depth, tag, scope = depths[-1], abbreviation.tag, scopes[-1]
        if depth is not None and tag == DW_TAG_INLINED and depth >= MAX_INLINE_DEPTH:
            deeper = True
            depth = None  # the call and what it holds passed over, as below
        if depth is not None and tag == DW_TAG_INLINED:
            attributes, at = unit.attributes(at, CALL_ATTRIBUTES, abbreviation)
            call = [names.name(unit, attributes, entry) or "??",
                    attributes[entries.DW_AT_CALL_FILE][1]
                    if entries.DW_AT_CALL_FILE in attributes else None,
                    attributes[entries.DW_AT_CALL_LINE][1]
                    if entries.DW_AT_CALL_LINE in attributes else 0]
            calls += [(low, high, depth, call) for low, high in unit.extent(attributes)]
            depth += 1
        elif depth is not None and tag == DW_TAG_SUBPROGRAM:
            attributes, at = unit.attributes(at, CALL_ATTRIBUTES, abbreviation)
            if names.cplus:
                names.scopes[entry] = scope
            ranges = unit.extent(attributes)
            # a definition (not a declaration) with a name (GDB makes no
            # function of one without)
            name = names.name(unit, attributes, entry) if ranges else None
            if name is not None:
                start = min(low for low, _ in ranges)
                functions += [(low, high, start, name) for low, high in ranges]
        elif tag in PARAMETERS and owners[-1] is not None:
            attributes, at = unit.attributes(at, ARTIFICIAL, abbreviation)
            artificial = attributes.get(DW_AT_ARTIFICIAL)
            if tag != PARAMETERS_FORMAL or artificial is None or not artificial[1]:
                names.with_parameters.add(owners[-1])
        elif depth is not None and tag in NESTING:
            if names.cplus and (tag == DW_TAG_NAMESPACE or tag in CLASSES):
                attributes, at = unit.attributes(at, SCOPE_ATTRIBUTES, abbreviation)
            else:
                attributes, at = None, unit.skip(abbreviation, at)
        elif abbreviation.children:
            at, skipped = unit.past_children(abbreviation, at)
            if skipped:
                continue
            depth = None
        else:
            at = unit.skip(abbreviation, at)
            continue
        if abbreviation.children:
            depths.append(depth)
            scopes.append(_scope_of_children(unit, tag, attributes, scope)
                          if names.cplus and depth is not None else scope)
            # (the parameters of a function whose name GDB cannot parse)
            owners.append(entry if names.cplus and tag == DW_TAG_SUBPROGRAM
                          and depth is not None and (UNPARSED in scope or UNPARSED in (
                              _own_name(unit, attributes, SHORT_NAMES) or "")) else None)
    if names.cplus:
        for call in {id(call): call for _, _, _, call in calls}.values():
            call[0] = names.qualified(call[0], True) or "??"
        functions = [(low, high, start, names.qualified(name, False))
                     for low, high, start, name in functions]
        functions = [function for function in functions if function[3] is not None]
    if deeper:
        left_out(f".debug_info+{unit.offset:#x}: inlined calls nested deeper than "
                 f"{MAX_INLINE_DEPTH}")
    if names.cut:
        left_out(f".debug_info+{unit.offset:#x}: names longer than {MAX_NAME} characters cut")
    return calls, functions


def _preferred_first(functions):
    """[(low, high, 0, name)] of the functions' ranges, those of the
    function GDB finds first first: GDB's blocks are sorted by their
    start, the entries of one start in their order, and it takes the
    last that holds an address (a function nested in another, the last of
    the aliases the assembler describes at one address)."""
    return [(low, high, 0, name) for _, _, low, high, name in sorted(
        (-start, -order, low, high, name)
        for order, (low, high, start, name) in enumerate(functions))]


def _name_files(calls, files, first):
    """Replace each call's file number by its name in ``files``, the
    unit's line program's file names from number ``first`` on (None when
    it has none of that number)."""
    for call in {id(call): call for _, _, _, call in calls}.values():
        index = call[1] - first if call[1] is not None else None
        call[1] = files[index] if index is not None and 0 <= index < len(files) else None


def _json_size(call):
    """About the bytes of a call (or function) in a segment's JSON."""
    if isinstance(call, str):
        return len(call) + 4
    file = call[1]  # a name, or still a number or None
    return len(call[0]) + (len(file) if isinstance(file, str) else 0) + 32


def _segments(calls):
    """Sorted non-overlapping [(start, end, chain)] of [(low, high, depth,
    call)]: over each segment, the calls (or functions) whose ranges hold
    it, deepest first."""
    bounds = sorted({b for low, high, _, _ in calls for b in (low, high)})
    if not bounds:
        return []
    at = {b: i for i, b in enumerate(bounds)}
    if sum(at[high] - at[low] for low, high, _, _ in calls) > MAX_MARKS:
        raise entries.DwarfFormatError(f"inlined calls overlap more than {MAX_MARKS} times")
    if sum((at[high] - at[low]) * _json_size(call) for low, high, _, call in calls) \
            > MAX_CHAIN_BYTES:
        raise entries.DwarfFormatError(f"inlined calls' chains take more than "
                                       f"{MAX_CHAIN_BYTES} bytes")
    # each call marks the elementary intervals it covers, deepest calls
    # first (in the order of the entries among calls as deep)
    covering = [[] for _ in bounds]
    for low, high, _, call in sorted(calls, key=lambda c: -c[2]):
        for i in range(at[low], at[high]):
            covering[i].append(call)
    segments = []
    for i, chain in enumerate(covering[:-1]):
        if not chain:
            continue
        if segments and segments[-1][1] == bounds[i] and segments[-1][2] == chain:
            segments[-1][1] = bounds[i + 1]
        else:
            segments.append([bounds[i], bounds[i + 1], chain])
    return segments
