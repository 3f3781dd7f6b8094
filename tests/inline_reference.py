"""The inlined calls of a unit read through pyelftools' entry objects and
flattened call by call: what sfbt.dwarf.inline did before it read entries
itself, kept as the reference it must agree with (tests/test_inline.py,
bench/inline_units.py); and a pyelftools line program's file names, the
reference of sfbt.dwarf.line_program's (tests/test_symbols.py)."""

import os

from sfbt.dwarf import inline

DW_TAG_INLINED = "DW_TAG_inlined_subroutine"
NESTING = ("DW_TAG_subprogram", "DW_TAG_lexical_block", "DW_TAG_namespace",
           "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_try_block",
           "DW_TAG_catch_block", "DW_TAG_union_type")
NAME_SOURCES = ("DW_AT_abstract_origin", "DW_AT_specification")


def _name(die):
    """GDB's name of a function's entry: its linkage name, of it or of the
    entries it refers to, else its DW_AT_name."""
    for keys in (("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"), ("DW_AT_name",)):
        name = _first(die, keys)
        if name is not None:
            return name
    return "??"


def _first(die, keys):
    for _ in range(inline.NAME_DEPTH):
        attributes = die.attributes
        for key in keys:
            if key in attributes:
                value = attributes[key].value
                return value.decode("utf-8", "surrogateescape") \
                    if isinstance(value, bytes) else str(value)
        origin = next((attributes[k] for k in NAME_SOURCES if k in attributes), None)
        if origin is None:
            return None
        die = die.get_DIE_from_attribute(origin.name)
    return None


def _ranges(dwarf, unit, die, base):
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


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def file_names(program, top=None):
    """The names of a pyelftools line program's files, by index (0-based:
    DWARF 5's file numbers; earlier versions' numbers less one), as GDB
    names its symtabs: joined to their directory (DWARF 5's 0, the
    compilation directory, too); the name that is the full path of the
    unit's own file (``top``, its top DIE: DW_AT_name joined to an
    absolute DW_AT_comp_dir) as its DW_AT_name; without ``top``, DWARF
    5's file 0 says which is the unit's own."""
    version = program["version"]
    directories = program["include_directory"]
    names = []
    for entry_file in program["file_entry"]:
        name = _text(entry_file.name)
        directory_index = entry_file.dir_index if version >= 5 else entry_file.dir_index - 1
        if 0 <= directory_index < len(directories) and not name.startswith("/"):
            name = os.path.join(_text(directories[directory_index]), name)
        names.append(name)
    own = None
    if top is not None and "DW_AT_name" in top.attributes:
        shown = _text(top.attributes["DW_AT_name"].value)
        directory = _text(top.attributes["DW_AT_comp_dir"].value) \
            if "DW_AT_comp_dir" in top.attributes else ""
        full = shown if shown.startswith("/") else os.path.join(directory, shown)
        own = (full, shown) if full.startswith("/") else None
    elif version >= 5 and program["file_entry"] and directories:
        first = program["file_entry"][0]
        if first.dir_index == 0 and _text(directories[0]).startswith("/") \
                and not _text(first.name).startswith("/"):
            own = (names[0], _text(first.name))
    return [own[1] if own is not None and name == own[0] else name for name in names]


def unit_calls(dwarf, offset):
    """sfbt.dwarf.inline.unit_frames' calls, through pyelftools' DIEs."""
    unit = dwarf.get_CU_at(offset)
    top = unit.get_top_DIE()
    base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
    program = dwarf.line_program_for_CU(unit)
    names = file_names(program, top) if program is not None else []
    version = program["version"] if program is not None else 5
    calls = []
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
        elif die.tag not in NESTING:
            continue
        if die.has_children:
            stack += [(child, inner) for child in reversed(list(die.iter_children()))]
    return _segments(calls)


def _segments(calls):
    bounds = sorted({b for low, high, _, _ in calls for b in (low, high)})
    if not bounds:
        return []
    at = {b: i for i, b in enumerate(bounds)}
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
