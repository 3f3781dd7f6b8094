"""Helpers for the tests of SFrame rows synthesized from DWARF CFI: the
system's libc, and the per-address comparison with gas's own .sframe."""

import collections
from pathlib import Path

from elftools.elf.elffile import ELFFile

from conftest import FIXTURES
from sfbt.sframe import constants as C
from sfbt.sframe import SFrameSection, read_section
from sfbt.elf import open_elf
from sfbt.sframe.in_elf import read_elf_sframe
from sfbt.sframe.rules import Location


def system_libc():
    """The C library this Python runs with (from /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if Path(path).name.startswith("libc.so"):
                    return Path(path)
    except OSError:
        pass
    return None


def fixture_files():
    """Every ELF file of tests/fixtures/v1 and v3 (they all carry .sframe)."""
    return sorted(p for p in FIXTURES.glob("v[13]/*/*")
                  if p.is_file() and p.read_bytes()[:4] == b"\x7fELF")


def gas_section(path):
    """The fixture's own .sframe as a linker or debugger would see it.
    Relocatable objects: v3 sections come relocated (objdump 2.46 does
    so); v1 ones are read unrelocated (objdump 2.40), so they are relocated
    here, and their PC-relative start fields (gas 2.40 writes R_*_PC32
    against them without SFRAME_F_FDE_FUNC_START_PCREL) made absolute."""
    section, _ = read_elf_sframe(path)
    stream, image = open_elf(str(path))
    with stream:
        if not image.relocatable or section.version != C.VERSION_1:
            return section
        data = image.relocated_data(image.section(".sframe"))
    section = read_section(data, 0)
    table = C.HEADER_SIZE + len(section.aux_header)
    for index, function in enumerate(section.functions):
        function.start = (function.start + table + 17 * index) & 0xFFFFFFFFFFFFFFFF
    return SFrameSection(section.version, section.abi, section.functions,
                         flags=section.flags, address=section.address,
                         cfa_fixed_fp_offset=section.cfa_fixed_fp_offset,
                         cfa_fixed_ra_offset=section.cfa_fixed_ra_offset)


class ElfFacts:
    """Function symbols and section names of an ELF file, by address."""

    PLT_SECTIONS = (".plt", ".plt.got", ".plt.sec", ".iplt")

    def __init__(self, path):
        with open(path, "rb") as stream:
            elffile = ELFFile(stream)
            self.sections = [(s["sh_addr"], s["sh_addr"] + s["sh_size"], s.name)
                             for s in elffile.iter_sections()
                             if s["sh_flags"] & 0x4]  # SHF_EXECINSTR
            self.functions = []
            symtab = elffile.get_section_by_name(".symtab")
            for symbol in (symtab.iter_symbols() if symtab else ()):
                if symbol["st_info"]["type"] == "STT_FUNC":
                    self.functions.append((symbol["st_value"], symbol["st_size"],
                                           symbol.name))
        self.functions.sort()

    def section_name(self, address):
        names = [name for start, end, name in self.sections if start <= address < end]
        return names[0] if len(names) == 1 else None

    def function_name(self, address):
        """The function whose symbol covers the address, else the nearest
        one before it (crt code has symbols of size 0)."""
        best = None
        for value, size, name in self.functions:
            if value <= address < value + size:
                return name
            if value <= address:
                best = name
        return best or "?"


def semantic(section, row):
    """What a FrameRow means, comparable across versions and FDE types.
    AMD64: an RA rule of "not saved" (gas's flexible-FDE RA padding, "U")
    is the ABI's fixed RA at CFA - 8, the only place it can be."""
    if row is None:
        return None
    if row.outermost:
        return ("RA undefined", row.signal)
    ra = row.ra
    if ra is None and section.cfa_fixed_ra_offset:
        ra = Location(None, section.cfa_fixed_ra_offset, True)
    return (row.cfa, ra, row.fp, row.mangled_ra, row.signal,
            row.pauth_key if row.mangled_ra else 0)


# Functions of the C runtime's start files (crt1.o, crti.o, crtbegin.o...),
# assembled without --gsframe: they have .eh_frame but no SFrame FDE.
CRT_FUNCTIONS = {"_start", "_init", "_fini", "deregister_tm_clones",
                 "register_tm_clones", "__do_global_dtors_aux", "frame_dummy",
                 "call_weak_fn"}

# Functions of the fixture sources whose CFI gas cannot put in SFrame (it
# warns and emits no FDE; gas 2.40 also silently drops every function with
# .cfi_register, .cfi_escape and the like, and all of DRAP code).
GAS_NO_FDE = {
    1: {"ra_in_reg", "fp_in_reg", "cfa_expr", "cfa_expr_unsupported", "escape_nop",
        "aligned_local", "vla"},
    3: {"cfa_expr_unsupported", "ra_in_reg", "fp_in_reg", "cfa_expr"},
}


def classify(version, facts, gas, gas_row, synth_row, address):
    """Why gas's row and the synthesized one differ at ``address``; None
    when no known reason explains it."""
    gas_function = gas.find_function(address)
    section_name = facts.section_name(address)
    name = facts.function_name(address)
    if gas_function is None:
        if synth_row is None:
            return None
        if section_name in ElfFacts.PLT_SECTIONS:
            return f"PLT: ld made no SFrame FDE for {section_name}"
        if name in CRT_FUNCTIONS:
            return "start-up code from crt*.o, assembled without --gsframe"
        if name in GAS_NO_FDE[version]:
            return (f"gas {'2.40' if version == 1 else '2.46'} emitted no FDE "
                    f"for {name} (CFI it cannot represent)")
        return None
    if gas_row is None or synth_row is None:
        return None
    if gas_function.is_mask:
        if version == C.VERSION_1:
            return ("v1 PLT rows match PLT entries by the low 8 address bits "
                    "(binutils 2.40): right for the first entry only")
        if section_name == ".plt.got":
            return ("ld gives .plt.got entries CFA sp+16; they are bare jumps, "
                    "so the CFA is sp+8 as .eh_frame says")
        return None
    if version == C.VERSION_1:
        if (gas.abi == C.ABI_AMD64_LE and len(gas_row) == len(synth_row) == 6
                and gas_row[0] == synth_row[0] and gas_row[2:] == synth_row[2:]):
            return ("v1 AMD64 rows have only the fixed RA offset (CFA-8): gas 2.40 "
                    "ignores .cfi_offset of the RA elsewhere")
        if (len(gas_row) == len(synth_row) == 6 and gas_row[4] != synth_row[4]
                and gas_row[:4] == synth_row[:4]):
            return "v1 has no signal-frame FDEs"
        if synth_row[0] == "RA undefined":
            return "v1 has no RA-undefined (outermost frame) rows"
    return None


def _breakpoints(section, functions, points):
    for function in section.functions:
        points.add(function.start)
        points.add(function.end)
        functions.append(function)
        if function.is_mask:
            points.update(range(function.start, function.end))
        else:
            points.update(function.start + row.start_offset for row in function.rows)


def compare_with_gas(path, synthesized):
    """(agreeing addresses, all addresses, {reason: count},
    [(address, span, gas row, synthesized row)] unexplained, agreeing
    addresses where gas's AMD64 RA padding was read as CFA-8) over every address of
    every function either section has.  Both sides' rows, function names and
    sections are constant between consecutive row, function, symbol and
    section boundaries (PLT functions: every address), so one address
    stands for each such span."""
    gas = gas_section(path)
    mine = synthesized.section
    facts = ElfFacts(path)
    functions, points = [], set()
    _breakpoints(gas, functions, points)
    _breakpoints(mine, functions, points)
    for value, size, _ in facts.functions:
        points.update((value, value + size))
    for start, end, _ in facts.sections:
        points.update((start, end))
    covered = sorted((f.start, f.end) for f in functions)
    version = gas.version
    agree = total = padded = 0
    reasons = collections.Counter()
    unexplained = []
    ordered = sorted(points)
    index = 0
    for address, following in zip(ordered, ordered[1:]):
        while index < len(covered) and covered[index][1] <= address:
            index += 1
        if not any(start <= address < end for start, end in covered[index:index + 64]
                   if start <= address):
            continue
        span = following - address
        total += span
        theirs = semantic(gas, gas.find_row(address))
        ours = semantic(mine, mine.find_row(address))
        if theirs == ours:
            agree += span
            row = gas.find_row(address)
            if (row is not None and not row.outermost and row.ra is None
                    and gas.cfa_fixed_ra_offset):
                padded += span
            continue
        reason = classify(version, facts, gas, theirs, ours, address)
        if reason is None:
            unexplained.append((address, span, theirs, ours))
        else:
            reasons[reason] += span
    return agree, total, reasons, unexplained, padded
