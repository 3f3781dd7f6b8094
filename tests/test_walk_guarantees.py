"""The walk's guarantees over synthetic memory: it never raises (a return
address of 0, an address beyond 64 bits, a debugger error, a bug in a step),
loops of signal frames end it, a limit bounds the walking itself, the
sigreturn trampoline is recognised at any PC inside it, a CFI hole is
crossed only by a checked return address, and stack memory is read a page
at a time."""

from sframe_samples import SP
from synthetic import SyntheticTarget
from test_unwinder import RBP, RIP, RSP, amd64_program, build_amd64_stack
from sfbt.arch import X86_64
from sfbt.sframe import FrameRowEntry, FunctionEntry
from sfbt.unwind.walk import (RETURN_ADDRESS, SIGNAL, STOP_LIMIT, STOP_LOOP,
                              Unwinder)

CODE = X86_64.signal_frame.code
GREGS = 40  # the ucontext's registers, from the trampoline frame's SP
SLOT_RSP, SLOT_RIP = 15, 16


def test_return_address_zero_ends_the_stack_with_the_frames_kept():
    target = build_amd64_stack()
    work_rbp = target._registers[RBP]
    target.write_word(work_rbp + 8, 0)  # work's return address
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert [f.pc for f in frames] == [0x1210, 0x1120, 0]
    assert stop is None
    assert frames[2].lookup_pc == 0  # never a negative address


def test_an_address_beyond_64_bits_is_unreadable_memory():
    target = build_amd64_stack()
    unwinder = Unwinder(target, target.module_map())
    for address in (-8, (1 << 64) - 4):
        try:
            unwinder.read_word(address)
        except Exception as error:  # noqa: BLE001 - the kind is what is tested
            assert str(error).startswith("Cannot access memory at address 0x")
        else:
            raise AssertionError(f"read at {address:#x} succeeded")


class _FailingMap:
    """A module map whose row lookup at main's return address fails with
    an error the walk does not know: a debugger's own exception, or a bug."""

    def __init__(self, module_map, error):
        self._map, self.error = module_map, error

    def step_for(self, pc):
        if pc == 0x102F:
            raise self.error
        return self._map.step_for(pc)

    def __getattr__(self, name):
        return getattr(self._map, name)


def test_any_error_of_a_step_ends_the_walk_with_its_reason():
    for error, reason in ((OverflowError("can't convert negative int to unsigned"),
                           "internal error: OverflowError: can't convert negative "
                           "int to unsigned"),
                          (ValueError("bad"), "internal error: ValueError: bad")):
        target = build_amd64_stack()
        module_map = _FailingMap(target.module_map(), error)
        frames, stop = Unwinder(target, module_map).walk()
        assert [f.pc for f in frames] == [0x1210, 0x1120, 0x1030]
        assert stop == reason


def _signal_loop():
    """Two trampoline frames whose saved SPs lead to each other: the frame
    the first interrupted "is" the second trampoline, and back."""
    trampoline = 0x5000
    first, second = 0x7FFF0000, 0x7FFF8000
    target = SyntheticTarget(X86_64, {RSP: first, RBP: 0, RIP: trampoline},
                             [("prog", 0x1000, 0x2000, amd64_program())])
    target.write_bytes(trampoline, CODE)
    for sp, saved_sp in ((first, second), (second, first)):
        target.write_bytes(sp + GREGS, bytes(17 * 8))
        target.write_word(sp + GREGS + 8 * SLOT_RSP, saved_sp)
        target.write_word(sp + GREGS + 8 * SLOT_RIP, trampoline)
    return target


def test_signal_frames_that_lead_to_each_other_end_the_walk():
    target = _signal_loop()
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert [f.how for f in frames[1:]] == [SIGNAL]
    assert len(frames) == 2 and stop == STOP_LOOP


def test_a_limit_bounds_the_walking():
    target = build_amd64_stack()
    frames, stop = Unwinder(target, target.module_map()).walk(limit=2)
    assert len(frames) == 2 and stop == STOP_LIMIT
    target = _signal_loop()
    frames, stop = Unwinder(target, target.module_map()).walk(limit=1)
    assert len(frames) == 1 and stop == STOP_LIMIT


def test_sigreturn_trampoline_at_any_pc_inside_it():
    trampoline = 0x5000
    interrupted_sp, sp = 0x7FFF1000, 0x7FFF0000
    for pc in range(trampoline, trampoline + len(CODE) + 1):
        target = SyntheticTarget(X86_64, {RSP: sp, RBP: 0, RIP: pc},
                                 [("prog", 0x1000, 0x2000, amd64_program())])
        target.write_bytes(trampoline - 16, bytes(16) + CODE + bytes(16))
        target.write_bytes(sp + GREGS, bytes(17 * 8))
        target.write_word(sp + GREGS + 8 * SLOT_RSP, interrupted_sp)
        target.write_word(sp + GREGS + 8 * SLOT_RIP, 0x1204)
        target.write_word(interrupted_sp + 40, 0x1120)
        frames, _ = Unwinder(target, target.module_map()).walk(limit=3)
        assert frames[0].signal_trampoline, hex(pc)
        assert [f.pc for f in frames] == [pc, 0x1204, 0x1120]
    # a return address is the trampoline only at its first byte
    unwinder = Unwinder(target, target.module_map())
    assert unwinder.is_signal_trampoline(trampoline)
    assert not unwinder.is_signal_trampoline(trampoline + len(CODE))


def _hole(word_at_sp, code_before):
    """Frame 0 in a hole of a module's rows (0x1800, no function covers
    it); the word at SP is ``word_at_sp``, after ``code_before``."""
    section = amd64_program()
    section.functions.append(FunctionEntry(0x1700, 0x40, [FrameRowEntry(0, SP, (8,))]))
    sp = 0x7FFF0000
    target = SyntheticTarget(X86_64, {RSP: sp, RBP: 0, RIP: 0x1800},
                             [("prog", 0x1000, 0x2000, section)])
    target.write_word(sp, word_at_sp)
    target.write_bytes(word_at_sp - len(code_before), code_before)
    target.write_word(sp + 8, 0x1305)  # 0x1710's return address
    return target


def test_cfi_hole_crossed_by_a_return_address_after_a_call():
    for call in (bytes.fromhex("e8 10 20 30 40"), bytes.fromhex("ff d2"),
                 bytes.fromhex("ff 15 00 10 00 00"), bytes.fromhex("41 ff d3")):
        target = _hole(0x1710, bytes(8) + call)
        frames, stop = Unwinder(target, target.module_map(), fallback="none").walk()
        assert [f.pc for f in frames] == [0x1800, 0x1710, 0x1305], call.hex()
        assert frames[1].how == RETURN_ADDRESS and frames[1].sp(X86_64) == 0x7FFF0008


def test_cfi_hole_without_a_checked_return_address_stops_with_a_reason():
    # not after a call; and after a call but outside every function's rows
    for word, code in ((0x1710, bytes(8) + bytes.fromhex("48 89 c7 90 90")),
                       (0x1900, bytes(8) + bytes.fromhex("e8 00 00 00 00"))):
        target = _hole(word, code)
        frames, stop = Unwinder(target, target.module_map(), fallback="none").walk()
        assert len(frames) == 1 and stop == "no unwind data for PC 0x1800"


class _Counting(SyntheticTarget):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = 0

    def read_memory(self, address, size):
        self.reads += 1
        return super().read_memory(address, size)


def test_stack_memory_is_read_a_page_at_a_time():
    """A 2,000-frame recursion (16-byte frames: 8 pages) costs a read per
    page, not one per frame."""
    recurse = FunctionEntry(0x1100, 0x40, [FrameRowEntry(0, SP, (16,))])
    section = amd64_program()
    section.functions[1] = recurse
    sp = 0x7FFF0000
    target = _Counting(X86_64, {RSP: sp, RBP: 0, RIP: 0x1110},
                       [("prog", 0x1000, 0x2000, section)])
    for page in range(sp, sp + 2000 * 16 + 0x1000, 0x1000):
        target.write_bytes(page, bytes(0x1000))
    for level in range(2000):
        target.write_word(sp + 16 * level + 8, 0x1120 if level < 1999 else 0x1305)
    target.write_bytes(0x1100, bytes(0x300))
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert len(frames) == 2001 and stop == "outermost frame"
    assert target.reads <= 16, target.reads  # 9 stack pages, the code pages


def _loaded(path, bias):
    """A SyntheticTarget holding the PT_LOAD segments of the ELF file at
    ``path`` at ``bias`` (the file itself is then out of reach, as the
    vDSO's or a deleted library's is)."""
    import struct

    data = path.read_bytes()
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    target = SyntheticTarget(X86_64, {})
    end = 0
    for index in range(phnum):
        p_type, _, offset, vaddr, _, filesz, memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + index * phentsize)
        if p_type == 1:
            target.write_bytes(bias + vaddr, data[offset:offset + filesz])
            end = max(end, vaddr + memsz)
    return target, end


def test_rows_synthesized_from_the_eh_frame_in_memory(tmp_path):
    """A module without a readable file: its rows come from the .eh_frame
    that PT_GNU_EH_FRAME names in memory, the same rows as from the file,
    and so do the DWARF register rules a walk carries."""
    import subprocess

    from sfbt.dwarf import SynthesisStore, synthesize_elf
    from sfbt.dwarf.cfa import OFFSET
    from sfbt.unwind.modules import ModuleMap, SFrameSources
    from sfbt.unwind.target import Module

    source_file = tmp_path / "saves.c"
    # keeps values in callee-saved registers across calls: the CFI says
    # where they are saved
    source_file.write_text(
        "long other(long, long);\n"
        "long work(long *a, long n) { long s = 0, t = 1;\n"
        "  for (long i = 0; i < n; i++) { s += a[i] * t; t = other(s, t); }\n"
        "  return s + t; }\n")
    path = tmp_path / "libsaves.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(path), str(source_file)],
                   check=True)
    bias = 0x7F0000000000
    target, end = _loaded(path, bias)
    module = Module("system-supplied DSO at 0x7f0000000000", bias, bias, bias + end,
                    build_id="in-memory-1")
    sources = SFrameSources(SynthesisStore(use_disk=False))
    module_map = ModuleMap([module], target, sources)
    source = module_map.source_for(module)
    assert source.origin == "synth", source.describe()
    from_file = synthesize_elf(path).section
    assert len(source.section.functions) == len(from_file.functions) > 0
    saved = 0
    for function in from_file.functions:
        for pc in range(function.start, function.end):
            found = module_map.row_for(bias + pc)[1]
            theirs = from_file.find_row(pc)
            assert (found.cfa, found.ra, found.fp) == (theirs.cfa, theirs.ra, theirs.fp)
            rules = module_map.register_rules(module, bias + pc)
            saved += any(rule is not None and rule.kind == OFFSET
                         for rule in rules.values())
    assert saved > 0  # rbx, r12...: saved on the stack at some PCs
