"""A compilation unit's call sites (DW_TAG_call_site, DW_TAG_GNU_call_site)
as GDB reads them to rebuild the frames of functions that left with a
tail call (sfbt.symbols.tail_calls).

GDB keeps, per unit, each call site by the address it returns to
(DW_AT_call_return_pc, DW_AT_low_pc of GCC's DWARF 4 extension), with the
function it calls: an address (DW_AT_call_origin naming a function
defined with an address), a linkage name (naming a declaration), or
nothing it can use without the caller's registers (DW_AT_call_target, an
expression: an indirect call).  A function whose entry says it lists
all its (tail) calls (DW_AT_call_all_calls, DW_AT_call_all_tail_calls or
their GNU forms) also keeps the list of its tail calls, the only ones a
chain may pass through.  Read from the unit's entries as sfbt.dwarf.inline
reads them: bounded by the unit's attribute reads and MAX_CALL_SITES."""

from __future__ import annotations

from bisect import bisect_right

from . import entries
from .entries import Unit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from array import array
    from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

    from .line_program import DwarfBytes

    #: what a call site calls: addresses, a linkage name, or None (unknown)
    Target = Union[Tuple[int, ...], str, None]
else:
    from ..values import NamedTuple

DW_TAG_SUBPROGRAM = 0x2E
DW_TAG_INLINED = 0x1D
DW_TAG_CALL_SITE = 0x48
DW_TAG_GNU_CALL_SITE = 0x4109
#: entries whose children may hold call sites: subprogram, inlined
#: subroutine, lexical block, namespace, class, structure, union, try and
#: catch blocks
NESTING = {0x2E, 0x1D, 0x0B, 0x39, 0x02, 0x13, 0x17, 0x32, 0x25}

DW_AT_DECLARATION = 0x3C
DW_AT_CALL_ALL_CALLS = 0x7A
DW_AT_CALL_ALL_TAIL_CALLS = 0x7C
DW_AT_CALL_RETURN_PC = 0x7D
DW_AT_CALL_ORIGIN = 0x7F
DW_AT_CALL_TAIL_CALL = 0x82
DW_AT_CALL_TARGET = 0x83
DW_AT_GNU_CALL_SITE_TARGET = 0x2113
DW_AT_GNU_TAIL_CALL = 0x2115
DW_AT_GNU_ALL_TAIL_CALL_SITES = 0x2116
DW_AT_GNU_ALL_CALL_SITES = 0x2117

#: a function with one of these lists all its tail calls
ALL_TAIL_CALLS = (DW_AT_CALL_ALL_CALLS, DW_AT_CALL_ALL_TAIL_CALLS, DW_AT_GNU_ALL_CALL_SITES,
                  DW_AT_GNU_ALL_TAIL_CALL_SITES)
FUNCTION_ATTRIBUTES = frozenset(ALL_TAIL_CALLS + (
    entries.DW_AT_LOW_PC, entries.DW_AT_HIGH_PC, entries.DW_AT_RANGES))
#: GDB's order: the first of these the call site has says what it calls
TARGETS = (DW_AT_CALL_TARGET, DW_AT_GNU_CALL_SITE_TARGET, DW_AT_CALL_ORIGIN,
           entries.DW_AT_ABSTRACT_ORIGIN)
SITE_ATTRIBUTES = frozenset(TARGETS + (DW_AT_CALL_RETURN_PC, entries.DW_AT_LOW_PC,
                                       DW_AT_CALL_TAIL_CALL, DW_AT_GNU_TAIL_CALL))
CALLEE_ATTRIBUTES = frozenset((
    DW_AT_DECLARATION, entries.DW_AT_SPECIFICATION, entries.DW_AT_LOW_PC,
    entries.DW_AT_HIGH_PC, entries.DW_AT_RANGES, entries.DW_AT_LINKAGE_NAME,
    entries.DW_AT_MIPS_LINKAGE_NAME, entries.DW_AT_NAME))
#: call sites a unit may hold (GCC's largest C++ units: tens of thousands)
MAX_CALL_SITES = 1 << 20
#: functions that start before an address looked through for one holding
#: it (a function nested in another, the parts of a split one)
MAX_NESTED = 64
#: bytes of a callee's name kept (a longer one cannot be a symbol's)
MAX_NAME = 1 << 16


class CallSite(NamedTuple):
    """One call: the address it returns to (file address), what it calls
    (Target), whether it is a tail call (a jump) and whether its entry is
    nested in a block or an inlined call of its function rather than a
    child of the function's own entry (LLDB reads only those)."""

    pc: int
    target: Target
    tail: bool
    nested: bool = False


class UnitCallSites:
    """A unit's call sites by return address, the tail calls of each of
    its functions that lists them all (by the function's entry address,
    in GDB's order: the last entry first), and its functions' ranges, to
    find the function that holds an address."""

    def __init__(self, sites: Dict[int, CallSite], tail_calls: Dict[int, List[CallSite]],
                 functions: List[Tuple[int, int, int]]):
        self.sites = sites
        self.tail_calls = tail_calls
        self._functions = sorted(functions)
        self._lows = [low for low, _, _ in self._functions]

    def function_entry(self, address: int) -> Optional[int]:
        """The entry address of the unit's function (not an inlined one)
        whose code holds the file address, the one that starts last of
        several, or None."""
        i = bisect_right(self._lows, address) - 1
        for i in range(i, max(-1, i - MAX_NESTED), -1):
            low, high, entry = self._functions[i]
            if low <= address < high:
                return entry
        return None


EMPTY = UnitCallSites({}, {}, [])


class _Callees:
    """What the entries call sites refer to say they are (Target), each
    read once, in this unit or another."""

    def __init__(self, unit: Unit):
        self.units = {unit.offset: unit}
        self.sections = unit.sections
        self.starts: Optional["array[int]"] = None
        self.found: Dict[int, Target] = {}

    def target(self, unit: Unit, attributes: Dict[int, Any]) -> Target:
        for attribute in TARGETS:
            value = attributes.get(attribute)
            if value is None:
                continue
            if attribute in (DW_AT_CALL_TARGET, DW_AT_GNU_CALL_SITE_TARGET):
                return None  # an expression over the caller's registers
            offset = unit.reference(value)
            if offset is None:
                return None
            if offset not in self.found:
                self.found[offset] = self._read(offset)
            return self.found[offset]
        return None

    def _read(self, offset: int) -> Target:
        """GDB's target of an entry a call site names: a declaration's
        linkage name (else its name), a definition's entry addresses
        (the starts of its ranges), or None."""
        unit = self._unit_of(offset)
        attributes = unit.attributes(offset, CALLEE_ATTRIBUTES)[0]
        if DW_AT_DECLARATION in attributes and entries.DW_AT_SPECIFICATION not in attributes:
            for key in (entries.DW_AT_LINKAGE_NAME, entries.DW_AT_MIPS_LINKAGE_NAME,
                        entries.DW_AT_NAME):
                if key in attributes:
                    name = unit.string(attributes[key])
                    if name is None or len(name) > MAX_NAME:
                        return None
                    return name.decode("utf-8", "surrogateescape")
            return None
        if entries.DW_AT_LOW_PC in attributes:
            extent = unit.extent(attributes)
            return (min(low for low, _ in extent),) if extent else None
        if entries.DW_AT_RANGES in attributes:
            return tuple(low for low, _ in unit.extent(attributes)) or None
        return None

    def _unit_of(self, offset: int) -> Unit:
        for unit in self.units.values():  # the unit's own, mostly
            if unit.offset <= offset < unit.end:
                return unit
        starts = self.starts
        if starts is None:
            starts = self.starts = entries.unit_starts(self.sections)
        i = bisect_right(starts, offset) - 1
        if i < 0:
            raise entries.DwarfFormatError(f"no unit holds .debug_info offset {offset:#x}")
        found = self.units.get(starts[i])
        if found is None:
            found = self.units[starts[i]] = Unit(self.sections, starts[i])
        unit = found
        if offset >= unit.end:
            raise entries.DwarfFormatError(f"no unit holds .debug_info offset {offset:#x}")
        return unit


def unit_call_sites(dwarf: "DwarfBytes", offset: int) -> UnitCallSites:
    """The UnitCallSites of the compilation unit at ``offset`` in
    .debug_info (of sfbt.dwarf.line_program.DwarfBytes ``dwarf``).
    Raises DwarfFormatError (and what a damaged unit's reads raise)."""
    unit = Unit(dwarf.entry_sections(), offset)
    sites: Dict[int, CallSite] = {}
    tail_calls: Dict[int, List[CallSite]] = {}
    functions: List[Tuple[int, int, int]] = []
    callees = _Callees(unit)
    abbreviation, at = unit.entry(unit.first)
    if abbreviation is None or not abbreviation.children:
        return EMPTY
    at = unit.skip(abbreviation, at)
    # for each entry open around ``at``: the entry address of the function
    # whose tail calls its call sites add to (None: none, or not all
    # listed), or False for an entry whose children are passed over
    enclosing: List[Union[int, None, bool]] = [None]
    # for each entry open around ``at``: whether it is a function's own
    in_function = [False]
    count = 0
    while enclosing:
        if at >= unit.end:
            raise entries.DwarfFormatError(f"unit at {unit.offset:#x}: entries run past its end")
        abbreviation, at = unit.entry(at)
        if abbreviation is None:
            enclosing.pop()
            in_function.pop()
            continue
        tag, function = abbreviation.tag, enclosing[-1]
        if function is not False and tag == DW_TAG_SUBPROGRAM:
            attributes, at = unit.attributes(at, FUNCTION_ATTRIBUTES, abbreviation)
            extent = unit.extent(attributes)
            function = None
            if extent:
                entry = min(low for low, _ in extent)
                functions += [(low, high, entry) for low, high in extent]
                if any(key in attributes for key in ALL_TAIL_CALLS):
                    function = entry
        elif function is not False and tag in (DW_TAG_CALL_SITE, DW_TAG_GNU_CALL_SITE):
            attributes, at = unit.attributes(at, SITE_ATTRIBUTES, abbreviation)
            pc_value = attributes.get(DW_AT_CALL_RETURN_PC) or attributes.get(
                entries.DW_AT_LOW_PC)
            if pc_value is not None:
                count += 1
                if count > MAX_CALL_SITES:
                    raise entries.DwarfFormatError(
                        f"unit at {unit.offset:#x}: more than {MAX_CALL_SITES} call sites")
                tail = DW_AT_CALL_TAIL_CALL in attributes or DW_AT_GNU_TAIL_CALL in attributes
                site = CallSite(unit.address(pc_value), callees.target(unit, attributes), tail,
                                not in_function[-1])
                if site.pc not in sites:  # GDB keeps the first of one address
                    sites[site.pc] = site
                    if tail and function is not None:
                        tail_calls.setdefault(function, []).append(site)
        elif function is not False and tag in NESTING:
            at = unit.skip(abbreviation, at)
        elif abbreviation.children:
            at, skipped = unit.past_children(abbreviation, at)
            if skipped:
                continue
            function = False
        else:
            at = unit.skip(abbreviation, at)
            continue
        if abbreviation.children:
            enclosing.append(function)
            in_function.append(tag == DW_TAG_SUBPROGRAM)
    for listed in tail_calls.values():
        listed.reverse()  # GDB puts each on the front of its function's list
    return UnitCallSites(sites, tail_calls, functions)
