"""SFrame rows synthesized from DWARF call-frame information (sfbt.cfi,
sfbt.synth): the CFA-program interpreter against pyelftools, lookups against
gas's own .sframe at every address of every fixture, the row classes, rows
left out, the on-disk cache and the command line."""

import os
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from conftest import FIXTURES, ROOT, require, run_sfbt
from synth_support import compare_with_gas, fixture_files, system_libc
from sfbt import dwarf
from sfbt.cache import Cache
from sfbt.arch import S390X, X86_64
from sfbt.dwarf import cfa, cfi, convert
from sfbt.dwarf.cfa import Cfa, Rule, RowState
from sfbt.dwarf.expressions import LazyPltCfa
from sfbt.elf import read_build_id
from sfbt.unwind.modules import ModuleMap, SFrameSources
from sfbt.sframe import read_section, write_section
from sfbt.sframe.rules import Location
from sfbt.unwind.target import Module

PROGRAMS = ROOT / "tests" / "programs"


@pytest.fixture(autouse=True)
def store(tmp_path_factory, monkeypatch):
    """Each test caches in its own directory, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    return dwarf.SynthesisStore()


@pytest.fixture(scope="module")
def libc():
    path = system_libc()
    require(path is not None, "no libc found in /proc/self/maps")
    return path


def _fid(path):
    return str(path.relative_to(FIXTURES))


# -- the interpreter against pyelftools' decoded tables -----------------------------

_PYELF_RULES = {"UNDEFINED": cfa.UNDEFINED, "SAME_VALUE": cfa.SAME_VALUE,
                "OFFSET": cfa.OFFSET, "VAL_OFFSET": cfa.VAL_OFFSET,
                "REGISTER": cfa.REGISTER, "EXPRESSION": cfa.EXPRESSION,
                "VAL_EXPRESSION": cfa.VAL_EXPRESSION}


def _pyelftools_state(line, sp, fp, ra):
    rule = line["cfa"]
    if rule.expr is not None:
        cfa_rule = ("expression", bytes(rule.expr))
    else:
        cfa_rule = ("register", rule.reg, rule.offset)

    def register_rule(number):
        found = line.get(number)
        if found is None:
            return None
        kind = _PYELF_RULES[found.type]
        if found.arg is None:
            return Rule(kind)
        expression = kind in (cfa.EXPRESSION, cfa.VAL_EXPRESSION)
        return Rule(kind, bytes(found.arg) if expression else found.arg)
    return cfa_rule, register_rule(sp), register_rule(fp), register_rule(ra)


def _ours(state):
    """A RowState in the shape of _pyelftools_state's (which knows no
    register and offset under a CFA expression, nor the RA-state bit)."""
    if state.cfa.expression is not None:
        cfa_rule = ("expression", state.cfa.expression)
    else:
        cfa_rule = ("register", state.cfa.register, state.cfa.offset)
    return cfa_rule, state.sp, state.fp, state.ra


def _check_against_pyelftools(path):
    """Every row pyelftools decodes equals our state at that address, and
    every row of ours equals pyelftools' state there (FDEs matched by offset;
    AArch64's RA-state bit left out: pyelftools ignores it)."""
    from bisect import bisect_right

    with open(path, "rb") as stream:
        elffile = ELFFile(stream)
        machine = elffile["e_machine"]
        sp, fp = {"EM_X86_64": (7, 6), "EM_AARCH64": (31, 29), "EM_S390": (15, 11)}[machine]
        dwarf = elffile.get_dwarf_info()
        section = elffile.get_section_by_name(".eh_frame")
        theirs = {entry.offset: entry for entry in dwarf.EH_CFI_entries()
                  if type(entry).__name__ == "FDE"}
        fdes, errors = cfi.parse_cfi(section.data(), section["sh_addr"],
                                     big_endian=not elffile.little_endian)
    assert errors == 0
    assert sorted(f.offset for f in fdes) == sorted(theirs)
    compared = skipped = 0
    for fde in fdes:
        entry = theirs[fde.offset]
        try:
            table = entry.get_decoded().table
        except Exception:  # opcodes pyelftools does not know (GNU_args_size)
            skipped += 1
            continue
        base = entry["initial_location"]
        ra = fde.cie.ra_column
        program = cfa.run_fde(fde, sp, fp)
        assert program.error is None, (fde, program.error)
        ours = [(address - fde.start, _ours(state)) for address, state in program.rows]
        their_rows = {}
        for line in table:
            their_rows[line["pc"] - base] = _pyelftools_state(line, sp, fp, ra)
        their_starts = sorted(their_rows)
        our_starts = [offset for offset, _ in ours]
        for offset, state in their_rows.items():
            if offset >= fde.size:
                continue
            mine = ours[bisect_right(our_starts, offset) - 1][1]
            assert mine == state, (path, fde, hex(offset))
        for offset, state in ours:
            theirs_there = their_rows[their_starts[bisect_right(their_starts, offset) - 1]]
            assert theirs_there == state, (path, fde, hex(offset))
        compared += 1
    return compared, skipped


@pytest.mark.parametrize("path", [p for p in fixture_files() if p.suffix != ".o"], ids=_fid)
def test_interpreter_agrees_with_pyelftools(path):
    compared, _ = _check_against_pyelftools(path)
    assert compared > 0


def test_interpreter_agrees_with_pyelftools_on_libc(libc):
    compared, skipped = _check_against_pyelftools(libc)
    print(f"{libc}: {compared} FDEs agree with pyelftools ({skipped} it cannot decode)")
    assert compared > 1000 and skipped < 10


# -- lookups against gas --------------------------------------------------------------------

def test_lookup_synth_equals_gas_at_every_address():
    """For every fixture made with --gsframe (v1 and v3), the synthesized
    rows and gas's rows mean the same at every address of every function
    either has (compared as FrameRow rules: CFA, RA and FP locations, RA
    undefined, mangled RA, signal; the text columns differ between v1 and
    v3).  Every disagreement must have a known reason; all are printed."""
    totals, reasons, unexplained, padded = [0, 0], {}, [], 0
    lines = []
    for path in fixture_files():
        result = dwarf.synthesize_elf(path)
        agree, total, why, odd, pads = compare_with_gas(path, result)
        totals[0] += agree
        totals[1] += total
        padded += pads
        lines.append(f"  {_fid(path)}: {agree}/{total} addresses agree")
        for reason, count in sorted(why.items()):
            lines.append(f"      {count:6d}  {reason}")
            key = reason.split(" for ")[0] if "emitted no FDE" in reason else reason
            reasons[key] = reasons.get(key, 0) + count
        for address, span, theirs, ours in odd:
            lines.append(f"      UNEXPLAINED {address:#x} (+{span}): gas {theirs} synth {ours}")
            unexplained.append((path, address))
    print(f"\nlookup --synth against lookup: {totals[0]}/{totals[1]} addresses agree "
          f"({padded} of them where gas's AMD64 RA padding 'U' reads as CFA-8)")
    print("\n".join(lines))
    print("exceptions by class:")
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"  {count:6d}  {reason}")
    assert not unexplained, unexplained
    assert totals[0] > 0.98 * totals[1]


def test_lookup_commands_agree_on_a_v3_fixture():
    """The command line, both ways: where gas has a row, `lookup --synth`
    prints the same columns as `lookup` (same version, same text form)."""
    path = FIXTURES / "v3" / "x86_64" / "callchain-O2-fp"
    section = read_section(*_sframe_bytes(path))
    addresses = [hex(f.start + offset) for f in section.functions if not f.is_mask
                 for offset in range(0, f.size, 3)]
    plain = run_sfbt("sframe", "lookup", path, *addresses)
    synthesized = run_sfbt("sframe", "lookup", "--synth", "--no-cache", path, *addresses)
    assert plain.returncode == synthesized.returncode == 0
    assert plain.stdout == synthesized.stdout
    assert len(plain.stdout.splitlines()) == len(addresses) > 50


def _sframe_bytes(path):
    with open(path, "rb") as stream:
        section = ELFFile(stream).get_section_by_name(".sframe")
        return section.data(), section["sh_addr"]


# -- row classes -------------------------------------------------------------------------

def test_classes_of_rows():
    """Default, flexible and signal FDEs and RA-undefined rows from the
    hand-written CFI of v3/x86_64/cfi.o, as gas 2.46 makes them."""
    result = dwarf.synthesize_elf(FIXTURES / "v3" / "x86_64" / "cfi.o")
    functions = {f.start: f for f in result.section.functions}
    assert functions[0x0].signal and not functions[0x0].is_flex      # sig_frame
    assert result.section.find_row(0x7).outermost                    # ra_undefined
    assert functions[0x13].is_flex                                   # ra_in_reg
    assert result.section.find_row(0x15).ra == Location(11, 0, False)
    assert result.section.find_row(0x1c).fp == Location(12, 0, False)  # fp_in_reg
    assert result.section.find_row(0x34).ra == Location(None, -16, True)  # ra_off_stack
    row = result.section.find_row(0x4d)                              # DRAP
    assert row.cfa == Location(6, -8, True) and row.fp == Location(6, 0, True)
    assert row.ra == Location(None, -8, True)  # written out, not as padding
    assert result.section.find_row(0x5a).cfa == Location(7, 16, True)
    assert result.stats.functions == {"default": 1, "flex": 5, "signal": 1}
    assert not result.left_out


def test_states_to_rules():
    def state(cfa_rule, sp=None, fp=None, ra=None, mangled=False):
        return RowState(cfa_rule, sp, fp, ra, mangled)

    def convert_state(row_state, arch=X86_64):
        return convert.convert_state(row_state, arch)

    offset = lambda value: Rule(cfa.OFFSET, value)  # noqa: E731
    register = lambda number: Rule(cfa.REGISTER, number)  # noqa: E731
    expression = lambda data: Rule(cfa.EXPRESSION, data)  # noqa: E731
    # the CIE's state: CFA rsp+8, RA at CFA-8
    assert convert_state(state(Cfa(7, 8), ra=offset(-8))) == (
        Location(7, 8, False), Location(None, -8, True), None, False)
    # longjmp: CFA rdi+0, but the caller's SP is in r8: SFrame's CFA is r8
    rules = convert_state(state(Cfa(5, 0), register(8), register(9), register(1)))
    assert rules == (Location(8, 0, False), Location(1, 0, False),
                     Location(9, 0, False), False)
    # __restore_rt: everything from the ucontext
    breg7 = lambda offset: bytes([0x77]) + bytes([offset]) if offset < 64 else (  # noqa: E731
        bytes([0x77, 0x80 | (offset & 0x7F), offset >> 7]))
    rules = convert_state(state(Cfa(7, 8, breg7(160) + b"\x06"), expression(breg7(160)),
                                expression(breg7(120)), expression(breg7(168))))
    assert rules[:3] == (Location(7, 160, True), Location(7, 168, True),
                         Location(7, 120, True))
    # the x86-64 lazy PLT expression
    plt = bytes.fromhex("770880003f1a3b2a332422")
    rules = convert_state(state(Cfa(7, 8, plt), ra=offset(-8)))
    assert rules.cfa == LazyPltCfa(8, 15, 11)
    with pytest.raises(dwarf.Inexpressible):
        convert_state(state(Cfa(7, 8, b"\x77\x00\x06\x23\x10"), ra=offset(-8)))
    assert convert_state(state(Cfa(7, 8), ra=Rule(cfa.UNDEFINED))) == convert.OUTERMOST
    # s390x: SP rules say nothing SFrame needs (CFA = caller's SP + 160)
    assert convert_state(state(Cfa(15, 160), register(16)), S390X) == (
        Location(15, 160, False), None, None, False)
    # s390x stores CFA offsets in units of 8: anything else is left out
    row = convert.classify(state(Cfa(15, 164)), S390X)
    assert row.reason == "s390x CFA offset 164 is not a multiple of 8"


def test_libc_is_covered(libc, store):
    """The system's libc: every FDE converted, __restore_rt a signal FDE,
    the lazy PLT a PLT-style function, DRAP-like and register rows flexible."""
    result = store.synthesize(str(libc))
    stats = result.stats
    print(f"\n{libc}: {stats.summary()}")
    section = result.section
    assert stats.functions["signal"] >= 1 and stats.functions["flex"] >= 1
    assert stats.rows["left out"] <= stats.dwarf_fdes // 100
    trampoline = _find_bytes(libc, X86_64.signal_frame.code)
    row = section.find_row(trampoline)
    assert row.signal and row.cfa == Location(7, 160, True)
    assert any(f.is_mask and f.rep_size == 16 for f in section.functions)


def _find_bytes(path, code):
    with open(path, "rb") as stream:
        text = ELFFile(stream).get_section_by_name(".text")
        at = text.data().index(code)
        return text["sh_addr"] + at


# -- rows left out ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def leftout_object(tmp_path_factory):
    out = tmp_path_factory.mktemp("leftout") / "cfi_leftout.o"
    subprocess.run(["gcc", "-c", "-o", str(out), str(PROGRAMS / "cfi_leftout.s")],
                   check=True, capture_output=True)
    return out


def test_rows_sframe_cannot_say_are_left_out(leftout_object):
    result = dwarf.synthesize_elf(leftout_object)
    assert result.left_out == [(0x4, 0x5, "CFA is a DWARF expression"),
                               (0xB, 0xC, "RA saved at a DWARF expression")]
    assert dict(result.stats.left_out) == {"CFA is a DWARF expression": 1,
                                           "RA saved at a DWARF expression": 1}
    section = result.section
    assert section.find_row(0x4) is None and section.find_row(0xB) is None
    assert section.find_row(0x5).cfa == Location(7, 16, False)
    assert section.find_row(0xC).cfa == Location(7, 16, False)
    lookup = run_sfbt("sframe", "lookup", "--synth", "--no-cache", leftout_object,
                      "0x3", "0x4", "0x5", "0xb", "0x20")
    assert lookup.stdout.splitlines() == [
        "0x3: sp+8 u f", "0x4: none (left out: CFA is a DWARF expression)",
        "0x5: sp+16 u f", "0xb: none (left out: RA saved at a DWARF expression)",
        "0x20: none"]


# -- .debug_frame -------------------------------------------------------------------------------

def test_debug_frame_only(tmp_path):
    """Code built with -fno-asynchronous-unwind-tables -g has its CFI in
    .debug_frame only; the rows are the same as gas's .sframe."""
    program = tmp_path / "callchain"
    subprocess.run(["gcc", "-g", "-O2", "-fno-asynchronous-unwind-tables",
                    "-Wa,--gsframe", "-o", str(program),
                    str(FIXTURES / "src" / "callchain.c")], check=True, capture_output=True)
    result = dwarf.synthesize_elf(program)
    assert ".debug_frame" in result.stats.sources
    agree, total, reasons, unexplained, _ = compare_with_gas(program, result)
    assert not unexplained and agree > 0
    assert set(reasons) <= {"start-up code from crt*.o, assembled without --gsframe",
                            "PLT: ld made no SFrame FDE for .plt.got"}


# -- the cache ---------------------------------------------------------------------------------

def _cache_entry(path):
    cache = Cache("synth")
    return os.path.join(cache.path, cache.entry_name(dwarf.file_cache_key(path)))


@pytest.mark.parametrize("damage", ["flip", "truncate", "head", "missing", "empty"])
def test_cache_is_read_back_and_a_corrupt_entry_rebuilt(damage, store):
    path = FIXTURES / "v3" / "x86_64" / "manyfuncs"
    first = store.synthesize(str(path))
    assert first.origin == "built"
    entry = _cache_entry(path)
    assert entry.startswith(os.environ["XDG_CACHE_HOME"])
    with open(entry, "rb") as stream:
        data = stream.read()
    section = data.split(b"\n", 4)[4]  # after the head, the key, the digest and the stats
    assert read_section(section, 0) == first.section  # a real SFrame v3 section
    store.clear()
    second = store.synthesize(str(path))
    assert second.origin == "cache" and second.section == first.section
    assert second.stats.to_json() == first.stats.to_json()
    if damage == "flip":
        damaged = bytearray(data)
        damaged[len(damaged) // 2] ^= 0xFF
        _write(entry, bytes(damaged))
    elif damage == "truncate":
        _write(entry, data[:100])
    elif damage == "head":
        _write(entry, data.replace(b"sfbt-cache 1", b"sfbt-cache 2", 1))
    elif damage == "missing":
        os.unlink(entry)
    else:
        _write(entry, b"")
    store.clear()
    third = store.synthesize(str(path))
    assert third.origin == "built" and third.section == first.section
    with open(entry, "rb") as stream:
        assert stream.read() == data  # repaired
    store.clear()
    assert store.synthesize(str(path)).origin == "cache"


def _write(path, data):
    with open(path, "wb") as stream:
        stream.write(data)


def test_cache_keys(tmp_path):
    """By build id and what the file is: device, inode, size, change time."""
    program = tmp_path / "with-id"
    subprocess.run(["gcc", "-Wl,--build-id", "-o", str(program),
                    str(FIXTURES / "src" / "callchain.c")], check=True, capture_output=True)
    output = subprocess.run(["readelf", "-n", str(program)], capture_output=True,
                            text=True).stdout
    build_id = output.split("Build ID: ")[1].split()[0]
    assert read_build_id(str(program)) == build_id
    status = os.stat(program)
    assert dwarf.file_cache_key(program)[2:] == (build_id, status.st_dev, status.st_ino,
                                                 status.st_size, status.st_ctime_ns)
    assert dwarf.file_cache_key(FIXTURES / "v3" / "x86_64" / "drap")[2] == ""


def test_an_unwritable_cache_only_costs_time(tmp_path, monkeypatch, store):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    result = store.synthesize(str(FIXTURES / "v3" / "x86_64" / "drap"))
    assert result.origin == "built" and result.section.functions


# -- modules: own .sframe first, synthesized next ---------------------------------------------

def test_module_map_prefers_own_sframe(leftout_object):
    own = FIXTURES / "v3" / "x86_64" / "drap"
    modules = [Module(str(own), 0, 0x0, 0x1000, build_id=None),
               Module(str(leftout_object), 0x10000, 0x10000, 0x10100, build_id=None)]
    sources = SFrameSources()
    module_map = ModuleMap(modules, sources=sources)
    assert module_map.source_for(modules[0]).origin == "file"
    source = module_map.source_for(modules[1])
    assert source.origin == "synth" and module_map.row_source(0x10005)[2] is source
    assert source.describe() == "synthesized from .eh_frame, 2 FDEs"
    assert module_map.row_for(0x10005)[1].cfa == Location(7, 16, False)
    assert module_map.row_for(0x10004)[1] is None  # left out: CFA is a DWARF expression
    assert module_map.row_for(0x10005, synthesized=False)[1] is None
    sources.synthesize = False
    assert sources.for_module(modules[1]).section is None
    assert module_map.source_for(modules[1]).section is None


# -- the command line --------------------------------------------------------------------------

def test_synth_command_writes_a_section(tmp_path):
    path = FIXTURES / "v3" / "x86_64" / "cfi.o"
    out = tmp_path / "cfi.sframe"
    result = run_sfbt("sframe", "synth", path, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{out}: SFrame v3, {out.stat().st_size} bytes, 7 FDEs")
    assert "1 default, 5 flex, 1 signal" in result.stdout
    raw = run_sfbt("sframe", "lookup", "--raw", out, "0x4d", "0x7")
    synthesized = run_sfbt("sframe", "lookup", "--synth", path, "0x4d", "0x7")
    assert raw.stdout == synthesized.stdout == "0x4d: (fp-8) (fp+0) c-8\n0x7: RA undefined\n"
    dump = run_sfbt("sframe", "dump", "--synth", path)
    assert dump.returncode == 0
    assert 'func idx [5]: pc = 0x3a, size = 28 bytes, attr = "F"' in dump.stdout
    assert dump.stdout.startswith(f"\n{path}:     file format elf64-x86-64\n\n"
                                  "Contents of the SFrame section .sframe:")
    assert write_section(read_section(out.read_bytes(), 0)) == out.read_bytes()


def test_synth_command_errors(tmp_path):
    text = tmp_path / "text"
    text.write_text("not ELF\n")
    for args in (["synth", text, "-o", tmp_path / "out"], ["lookup", "--synth", text, "0"],
                 ["dump", "--synth", "--raw", text]):
        result = run_sfbt("sframe", *args)
        assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr


def test_functions_with_more_rows_than_a_v3_fde_holds_are_split(monkeypatch):
    path = FIXTURES / "v3" / "x86_64" / "cfi.o"
    whole = dwarf.synthesize_elf(path).section
    monkeypatch.setattr(dwarf.synthesize, "_MAX_ROWS", 2)
    pieces = dwarf.synthesize_elf(path).section
    assert len(pieces.functions) > len(whole.functions)
    assert all(len(f.rows) <= 2 for f in pieces.functions)
    for address in range(0x60):
        theirs, ours = whole.find_row(address), pieces.find_row(address)
        assert (theirs is None) == (ours is None)
        if theirs is not None:
            assert (theirs.cfa, theirs.ra, theirs.fp, theirs.outermost, theirs.signal) == \
                (ours.cfa, ours.ra, ours.fp, ours.outermost, ours.signal)
