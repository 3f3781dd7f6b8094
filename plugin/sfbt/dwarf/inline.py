"""Inlined calls: for a PC, the chain of calls the compiler inlined around
it, from one compilation unit's DW_TAG_inlined_subroutine entries.

A unit's entries are read once (pyelftools, on the first address asked
for in that unit, as the line tables are) and flattened into sorted,
non-overlapping segments, each with the chain that holds over it, so
that a look-up is one bisection."""

from bisect import bisect_right
from typing import NamedTuple

from .lines import file_names

DW_TAG_SUBPROGRAM = "DW_TAG_subprogram"
DW_TAG_INLINED = "DW_TAG_inlined_subroutine"
#: attributes whose DIE may carry a function's name instead of this one
NAME_SOURCES = ("DW_AT_abstract_origin", "DW_AT_specification")
#: links followed at most to find a name (a loop in damaged DWARF ends)
NAME_DEPTH = 8


class InlinedCall(NamedTuple):
    """One inlined call: ``name`` is the inlined function; ``file`` and
    ``line`` are where it was called from, the place the next outer frame
    shows (file None when the unit does not say)."""

    name: str
    file: object
    line: int


def _name(die):
    """A function DIE's name, following abstract origins and
    specifications; "??" when none is found."""
    for _ in range(NAME_DEPTH):
        attributes = die.attributes
        for key in ("DW_AT_name", "DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
            if key in attributes:
                value = attributes[key].value
                return value.decode("utf-8", "surrogateescape") \
                    if isinstance(value, bytes) else str(value)
        origin = next((attributes[k] for k in NAME_SOURCES if k in attributes), None)
        if origin is None:
            return "??"
        die = die.get_DIE_from_attribute(origin.name)
    return "??"


def _ranges(dwarf, unit, die, base):
    """[(low, high)] of a DIE: low/high pc, or its range list."""
    attributes = die.attributes
    if "DW_AT_low_pc" in attributes and "DW_AT_high_pc" in attributes:
        low = attributes["DW_AT_low_pc"].value
        high = attributes["DW_AT_high_pc"]
        end = high.value if high.form == "DW_FORM_addr" else low + high.value
        return [(low, end)] if end > low else []
    if "DW_AT_ranges" not in attributes:
        return []
    lists = dwarf.range_lists()
    if lists is None:
        return []
    found = []
    for entry in lists.get_range_list_at_offset(attributes["DW_AT_ranges"].value, cu=unit):
        if hasattr(entry, "base_address"):
            base = entry.base_address
        elif entry.end_offset > entry.begin_offset:
            shift = 0 if entry.is_absolute else base
            found.append((entry.begin_offset + shift, entry.end_offset + shift))
    return found


def unit_calls(dwarf, offset):
    """The inlined calls of the compilation unit at ``offset`` in
    .debug_info (pyelftools' DWARFInfo ``dwarf``), as sorted segments
    [(start, end, chain)], chain a list of [name, file, line], innermost
    first (JSON-ready, to be kept in a cache)."""
    unit = dwarf.get_CU_at(offset)
    top = unit.get_top_DIE()
    base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
    program = dwarf.line_program_for_CU(unit)
    names = file_names(program) if program is not None else []
    version = program["version"] if program is not None else 5
    calls = []  # (low, high, depth, [name, file, line])
    # DIEs walked with an explicit stack of (die, inline depth)
    stack = [(child, 0) for child in reversed(list(top.iter_children()))]
    while stack:
        die, depth = stack.pop()
        inner = depth
        if die.tag == DW_TAG_INLINED:
            attributes = die.attributes
            index = attributes["DW_AT_call_file"].value \
                if "DW_AT_call_file" in attributes else None
            if index is not None and version < 5:
                index -= 1
            file = names[index] if index is not None and 0 <= index < len(names) else None
            line = attributes["DW_AT_call_line"].value if "DW_AT_call_line" in attributes else 0
            call = [_name(die), file, line]
            for low, high in _ranges(dwarf, unit, die, base):
                calls.append((low, high, depth, call))
            inner = depth + 1
        elif die.tag not in (DW_TAG_SUBPROGRAM, "DW_TAG_lexical_block", "DW_TAG_namespace",
                             "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_try_block",
                             "DW_TAG_catch_block", "DW_TAG_union_type"):
            continue
        if die.has_children:
            stack += [(child, inner) for child in reversed(list(die.iter_children()))]
    return _segments(calls)


def _segments(calls):
    """Sorted non-overlapping [(start, end, chain)] of [(low, high, depth,
    call)]: over each segment, the calls whose ranges hold it, deepest
    first."""
    bounds = sorted({b for low, high, _, _ in calls for b in (low, high)})
    if not bounds:
        return []
    at = {b: i for i, b in enumerate(bounds)}
    # each call marks the elementary intervals it covers
    covering = [[] for _ in bounds]
    for low, high, depth, call in calls:
        for i in range(at[low], at[high]):
            covering[i].append((depth, call))
    segments = []
    for i, held in enumerate(covering[:-1]):
        if not held:
            continue
        chain = [call for _, call in sorted(held, key=lambda d: -d[0])]
        if segments and segments[-1][1] == bounds[i] and segments[-1][2] == chain:
            segments[-1][1] = bounds[i + 1]
        else:
            segments.append([bounds[i], bounds[i + 1], chain])
    return segments


def _well_formed(segment):
    return (isinstance(segment, list) and len(segment) == 3
            and all(isinstance(b, int) for b in segment[:2])
            and isinstance(segment[2], list)
            and all(isinstance(c, list) and len(c) == 3 and isinstance(c[0], str)
                    and isinstance(c[1], (str, type(None))) and isinstance(c[2], int)
                    for c in segment[2]))


class UnitCalls:
    """Look-ups in one unit's segments (unit_calls)."""

    def __init__(self, segments):
        # segments may come from a cache file: malformed ones are dropped
        self.segments = [s for s in segments if _well_formed(s)]
        self.starts = [segment[0] for segment in segments]

    def chain(self, address):
        """[InlinedCall] around the address, innermost first."""
        i = bisect_right(self.starts, address) - 1
        if i < 0 or address >= self.segments[i][1]:
            return []
        return [InlinedCall(*call) for call in self.segments[i][2]]


def expanded(calls, function, line):
    """[(name, (file, line) or None)] of the frames at one address,
    innermost first: each inlined call's function (``calls``, innermost
    first) at the place inside it (the line table's ``line`` for the
    innermost), then ``function`` at the outermost call's site."""
    frames = []
    for call in calls:
        frames.append((call.name, line))
        line = (call.file, call.line) if call.file is not None else None
    frames.append((function, line))
    return frames
