"""The unwinding core over synthetic memory images."""

import struct

from sframe_samples import FP, SP
from synthetic import SyntheticTarget, _GivenSections
from sfbt.arch import AARCH64, S390X, X86_64
from sfbt.unwind.modules import ModuleMap, SFrameSource, SFrameSources
from sfbt.sframe import (FrameRowEntry, FunctionEntry, Location, SFrameSection,
                         write_section)
from sfbt.sframe import constants as C
from sfbt.unwind.plan import RowPlan
from sfbt.unwind.target import Module
from sfbt.unwind.walk import (FLEX, FRAME_POINTER, SFRAME, SIGNAL, Unwinder,
                              registers_read)

RSP, RBP, RIP = 7, 6, 16

# An AMD64 frame-pointer prologue: push %rbp; mov %rsp,%rbp; ...; leave; ret
PROLOGUE = [FrameRowEntry(0, SP, (8,)), FrameRowEntry(1, SP, (16, -16)),
            FrameRowEntry(4, FP, (16, -16)), FrameRowEntry(0x3e, SP, (8, -16))]


def amd64_program():
    """main (0x1000) -> work (0x1100) -> leaf (0x1200, no frame pointer)."""
    functions = [
        FunctionEntry(0x1000, 0x40, PROLOGUE),
        FunctionEntry(0x1100, 0x40, PROLOGUE),
        FunctionEntry(0x1200, 0x20, [FrameRowEntry(0, SP, (8,)),
                                     FrameRowEntry(4, SP, (48,))]),
        # _start: the outermost frame
        FunctionEntry(0x1300, 0x10, [FrameRowEntry(0, SP, ())]),
    ]
    return SFrameSection(3, C.ABI_AMD64_LE, functions)


def build_amd64_stack(leaf_pc=0x1210):
    stack = 0x7FFF0000
    section = amd64_program()
    # leaf: CFA = rsp + 48; RA at CFA - 8 -> work+0x20
    leaf_sp = stack
    leaf_cfa = leaf_sp + 48
    work_rbp = leaf_cfa + 16
    main_rbp = work_rbp + 64
    target = SyntheticTarget(X86_64, {RSP: leaf_sp, RBP: work_rbp, RIP: leaf_pc},
                             [("prog", 0x1000, 0x2000, section)])
    target.write_word(leaf_cfa - 8, 0x1120)  # return into work
    # work's frame: CFA = rbp + 16, saved rbp at CFA - 16, RA at CFA - 8
    target.write_word(work_rbp, main_rbp)
    target.write_word(work_rbp + 8, 0x1030)  # return into main
    target.write_word(main_rbp, 0)
    target.write_word(main_rbp + 8, 0x1305)  # return into _start
    return target


def test_amd64_walk_to_the_outermost_frame():
    target = build_amd64_stack()
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert [f.pc for f in frames] == [0x1210, 0x1120, 0x1030, 0x1305]
    assert [f.how for f in frames[1:]] == [SFRAME, SFRAME, SFRAME]
    assert stop == "outermost frame"
    assert frames[1].lookup_pc == 0x111f and frames[0].lookup_pc == 0x1210


def test_step_by_the_row_at_pc_or_before_it():
    """The one frame step of the walk and of GDB's frame unwinder: a frame
    where execution stopped is unwound by the row at its PC; a frame whose
    PC is a return address (is_caller) by the row one byte back, inside
    the call.  At 0x1204 leaf's row changes from CFA = rsp + 8 to rsp + 48."""
    sp = 0x7FFF0000
    target = SyntheticTarget(X86_64, {}, [("prog", 0x1000, 0x2000, amd64_program())])
    target.write_word(sp, 0x1030)  # the return address if CFA = rsp + 8
    target.write_word(sp + 40, 0x1120)  # the return address if CFA = rsp + 48
    unwinder = Unwinder(target, target.module_map())
    registers = {RSP: sp, RBP: 0x5000, RIP: 0x1204}
    stopped = unwinder.step(0x1204, False, registers)
    assert (stopped.pc, stopped.cfa, stopped.registers[RSP]) == (0x1120, sp + 48, sp + 48)
    assert (stopped.level, stopped.how, stopped.interrupted) == (1, SFRAME, False)
    called = unwinder.step(0x1204, True, registers, level=3)
    assert (called.pc, called.cfa, called.registers[RSP], called.level) == (
        0x1030, sp + 8, sp + 8, 4)
    assert called.registers[RBP] == 0x5000  # no FP rule: the caller's FP is this one's
    # no row: None, for the walk's fallbacks or GDB's own unwinders
    assert unwinder.step(0x1800, False, registers) is None
    # the walk takes the same step
    target = SyntheticTarget(X86_64, registers, [("prog", 0x1000, 0x2000, amd64_program())],
                             target.memory)
    frames, _ = Unwinder(target, target.module_map()).walk(limit=2)
    assert [f.pc for f in frames] == [0x1204, 0x1120]


def test_step_plans_are_kept_per_row_and_checked_against_it():
    """The step reads a row through its RowPlan, made once per row and kept
    on the module map for every walk of it (and in the walk's memo of each
    address); a plan found under a row's identity but made from another
    row is not used."""
    target = build_amd64_stack()
    module_map = target.module_map()
    frames, _ = Unwinder(target, module_map).walk()
    plans = module_map.plans(X86_64.name)
    _, row = module_map.row_for(0x111f)
    assert plans[id(row)].row is row
    made = dict(plans)
    again, _ = Unwinder(target, module_map).walk()
    assert [f.pc for f in again] == [f.pc for f in frames] and plans == made
    # a plan of main's frame-pointer row under the leaf's row: remade
    _, leaf_row = module_map.row_for(0x1210)
    _, other = module_map.row_for(0x102f)
    assert other is not leaf_row
    plans[id(leaf_row)] = RowPlan(other, True)
    # the walk's memo per address holds the plan it took: cleared, the
    # next walk asks the plans again
    step_plans = module_map.step_plans(X86_64.name)
    assert step_plans[0x1210][1].row is leaf_row
    step_plans.clear()
    frames, stop = Unwinder(target, module_map).walk()
    assert [f.pc for f in frames] == [0x1210, 0x1120, 0x1030, 0x1305]
    assert stop == "outermost frame" and plans[id(leaf_row)].row is leaf_row


def test_step_reads_registers_when_asked_and_takes_given_rows():
    """GDB's frame unwinder hands the step a pending frame's registers,
    read only when the row needs them, and its own choice of rows."""
    sp = 0x7FFF0000
    section = amd64_program()
    target = SyntheticTarget(X86_64, {}, [("prog", 0x1000, 0x2000, section)])
    target.write_word(sp + 40, 0x1120)
    unwinder = Unwinder(target, target.module_map())
    asked = []

    class Pending:
        def get(self, number):
            asked.append(number)
            return {RSP: sp, RBP: 0x5000}.get(number)

    caller = unwinder.step(0x1210, True, Pending(), 0)
    assert caller.pc == 0x1120 and RIP not in asked and set(asked) <= {RSP, RBP}
    # what the step asked for is what registers_read says the row needs
    _, row = target.module_map().row_for(0x120f)
    assert registers_read(X86_64, row) == (RSP, RBP) and set(asked) == {RSP, RBP}
    given = {number: {RSP: sp, RBP: 0x5000}[number] for number in registers_read(X86_64, row)}
    assert unwinder.step(0x1210, True, given, 0).pc == 0x1120
    # a frame-pointer row reads FP for the CFA; an outermost row reads nothing
    _, row = target.module_map().row_for(0x1104)
    assert registers_read(X86_64, row) == (RSP, RBP)
    _, row = target.module_map().row_for(0x1300)
    assert row.outermost and registers_read(X86_64, row) == ()
    # AArch64 before the return address is saved: it is still in x30
    assert registers_read(AARCH64, row._replace(outermost=False, cfa=Location(31, 0, False),
                                                ra=None, fp=None)) == (31, 29, 30)
    module_map = target.module_map()
    looked_up = []

    def rows(address):
        looked_up.append(address)
        module, row = module_map.row_for(address)
        return (module, row, SFRAME) if address != 0x120f else (module, None, None)

    assert unwinder.step(0x1210, False, Pending(), 0, rows).pc == 0x1120
    assert unwinder.step(0x1210, True, Pending(), 0, rows) is None
    assert looked_up == [0x1210, 0x120f]


def test_frame_limit_and_is_last():
    target = build_amd64_stack()
    unwinder = Unwinder(target, target.module_map())
    frames, stop = unwinder.walk(limit=2)
    assert len(frames) == 2 and stop == "frame limit reached"
    frames, stop = unwinder.walk(is_last=lambda f: f.pc == 0x1030)
    assert [f.pc for f in frames] == [0x1210, 0x1120, 0x1030] and stop is None


def test_unreadable_stack_stops_with_the_address():
    target = build_amd64_stack()
    del target.memory[0x7FFF0000 + 48 - 8]
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert len(frames) == 1
    assert stop == f"Cannot access memory at address {0x7FFF0000 + 40:#x}"


def test_no_data_then_frame_pointer_fallback():
    target = build_amd64_stack()
    # a pc outside every module: only the frame pointer can help
    target._registers[RIP] = 0x9000
    target._registers[RSP] = 0x7FFF0000
    rbp = target._registers[RBP]
    frames, stop = Unwinder(target, target.module_map(), fallback="fp").walk()
    assert frames[1].how == FRAME_POINTER and frames[1].pc == 0x1030
    assert frames[1].registers[RBP] == rbp + 64
    frames, stop = Unwinder(target, target.module_map(), fallback="none").walk()
    assert len(frames) == 1 and stop == "no unwind data for PC 0x9000"


def test_frame_that_does_not_move_up_is_a_loop():
    target = build_amd64_stack()
    work_rbp = target._registers[RBP]
    target.write_word(work_rbp, work_rbp - 0x100)  # main's rbp below work's
    target.write_word(work_rbp - 0x100 + 8, 0x1030)
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert stop == "frame did not move up the stack (corrupt stack?)"


def test_signal_trampoline_restores_the_interrupted_registers():
    section = amd64_program()
    handler = FunctionEntry(0x1400, 0x20, [FrameRowEntry(0, SP, (8,))])
    section.functions.append(handler)
    stack = 0x7FFF0000
    target = SyntheticTarget(X86_64, {RSP: stack, RBP: 0, RIP: 0x1400},
                             [("prog", 0x1000, 0x2000, section)])
    trampoline = 0x5000
    target.write_bytes(trampoline, X86_64.signal_frame.code)
    target.write_word(stack, trampoline)  # the handler returns into it
    ucontext = stack + 8
    gregs = ucontext + 40
    target.write_bytes(gregs, bytes(17 * 8))
    interrupted_sp = 0x7FFF1000
    target.write_word(gregs + 15 * 8, interrupted_sp)  # RSP
    target.write_word(gregs + 16 * 8, 0x1204)  # RIP: leaf, exact
    target.write_word(gregs + 10 * 8, 0x7FFF2000)  # RBP
    target.write_word(interrupted_sp + 40, 0x1120)  # leaf's return address
    frames, stop = Unwinder(target, target.module_map()).walk(limit=4)
    assert [f.pc for f in frames] == [0x1400, trampoline, 0x1204, 0x1120]
    assert frames[1].signal_trampoline and frames[2].how == SIGNAL
    assert frames[2].interrupted and frames[2].lookup_pc == 0x1204
    assert frames[2].registers[RBP] == 0x7FFF2000


def test_flexible_drap_frame():
    control = lambda reg, deref: (reg << 3) | (int(deref) << 1) | 1  # noqa: E731
    # CFA = *(r10 - 8); RA at CFA - 8; FP = *(rbp + 0)
    row = FrameRowEntry(0, SP, (control(10, True), -8, 2, -8, control(6, True), 0))
    section = SFrameSection(3, C.ABI_AMD64_LE, [
        FunctionEntry(0x1000, 0x40, [row], fde_type=C.FDE_TYPE_FLEX),
        FunctionEntry(0x1100, 0x40, [FrameRowEntry(0, SP, ())])])
    target = SyntheticTarget(X86_64, {RSP: 0x7000, RBP: 0x7100, 10: 0x7200,
                                      RIP: 0x1010},
                             [("prog", 0x1000, 0x2000, section)])
    target.write_word(0x7200 - 8, 0x7300)  # the CFA
    target.write_word(0x7300 - 8, 0x1104)
    target.write_word(0x7100, 0x7400)
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert [f.pc for f in frames] == [0x1010, 0x1104]
    assert frames[1].how == FLEX
    assert frames[1].registers == {RSP: 0x7300, RIP: 0x1104, RBP: 0x7400}


def test_aarch64_link_register_and_pointer_authentication():
    section = SFrameSection(3, C.ABI_AARCH64_LE, [
        # leaf: RA still in x30
        FunctionEntry(0x1000, 0x20, [FrameRowEntry(0, SP, (0,))]),
        # caller: stp x29, x30, [sp, -32]!; RA signed (paciasp)
        FunctionEntry(0x1100, 0x40, [FrameRowEntry(0, SP, (0,)),
                                     FrameRowEntry(8, SP, (32, -24, -32),
                                                   mangled_ra=True)]),
        FunctionEntry(0x1200, 0x40, [FrameRowEntry(0, SP, ())]),
    ])
    sp = 0x7000
    target = SyntheticTarget(AARCH64, {31: sp, 29: 0x7100, 30: 0x1110, 32: 0x1004},
                             [("prog", 0x1000, 0x2000, section)])
    # the caller's frame record at its CFA - 32: x29 then the signed x30
    target.write_word(sp + 32 - 32, 0x7500)
    target.write_word(sp + 32 - 24, 0x1234 | (0x5A << 56))
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert [f.pc for f in frames] == [0x1004, 0x1110, 0x1234]
    assert frames[2].registers[29] == 0x7500
    assert stop == "outermost frame"


def test_s390x_stack_pointer_is_cfa_minus_160():
    section = SFrameSection(3, C.ABI_S390X_BE, [
        # CFA = r15 + 160 + 8 * 4; RA (r14) saved at CFA - 48
        FunctionEntry(0x1000, 0x40, [FrameRowEntry(0, SP, (4, -48))]),
        FunctionEntry(0x1100, 0x40, [FrameRowEntry(0, SP, ())]),
    ])
    target = SyntheticTarget(S390X, {15: 0x8000, 11: 0, 14: 0, 64: 0x1008},
                             [("prog", 0x1000, 0x2000, section)])
    cfa = 0x8000 + 160 + 32
    target.write_word(cfa - 48, 0x1110)
    frames, stop = Unwinder(target, target.module_map()).walk()
    assert [f.pc for f in frames] == [0x1008, 0x1110]
    assert frames[1].registers[15] == cfa - 160


def test_sframe_read_from_memory_when_the_file_is_gone():
    """A module whose file moved (a core from another machine): its SFrame
    data is found through PT_GNU_SFRAME in the target's memory."""
    bias = 0x7F0000000000
    section = amd64_program()
    section.address = 0x2000
    data = write_section(section)
    target = SyntheticTarget(X86_64, {RSP: 0x7FFF0000, RBP: 0, RIP: 0})
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 32, 64)  # e_phoff
    struct.pack_into("<HH", header, 54, 56, 1)  # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 0x6474E554, 4, 0x2000, 0x2000, 0x2000,
                       len(data), len(data), 8)
    target.write_bytes(bias, bytes(header) + phdr)
    target.write_bytes(bias + 0x2000, data)
    module = Module("/moved/away/libgone.so", bias, bias, bias + 0x3000,
                    build_id="gone-1")
    module_map = ModuleMap([module], target)
    source = module_map.source_for(module)
    assert source.origin == "memory"
    assert source.describe() == "SFrame v3, 4 FDEs, from memory"
    found, row = module_map.row_for(bias + 0x1104)
    assert found is module and row.cfa == Location(6, 16, False)


class _SharedSections:
    """Sources that give each module's section as read from a file
    (``made_from``: what it was read from, by path) and share the frame
    step's plans of each file through one SFrameSources, as `sfbt record`'s
    one SFrameSources does between its processes."""

    synthesize = False

    def __init__(self, sections, made_from, shared):
        self._sections = sections
        self._made_from = made_from
        self.shared = shared

    def for_module(self, module, target=None):
        return SFrameSource(self._sections[module.path], "file",
                            made_from=self._made_from[module.path])

    own = for_module

    def step_plans(self, module, source, arch_name):
        return self.shared.step_plans(module, source, arch_name)


def _amd64_process(load_bias, section, sources=None):
    """build_amd64_stack's program and stack, the program loaded at
    ``load_bias``: (target, its module map over ``sources``, None: a
    module map that shares nothing)."""
    stack = 0x7FFF0000
    leaf_cfa = stack + 48
    work_rbp = leaf_cfa + 16
    main_rbp = work_rbp + 64
    target = SyntheticTarget(X86_64, {RSP: stack, RBP: work_rbp, RIP: load_bias + 0x1210}, [])
    module = Module("prog", load_bias, load_bias + 0x1000, load_bias + 0x2000,
                    build_id="prog")
    target._modules = [module]
    target.write_word(leaf_cfa - 8, load_bias + 0x1120)
    target.write_word(work_rbp, main_rbp)
    target.write_word(work_rbp + 8, load_bias + 0x1030)
    target.write_word(main_rbp, 0)
    target.write_word(main_rbp + 8, load_bias + 0x1305)
    if sources is None:
        return target, ModuleMap([module], target, _GivenSections({"prog": section}))
    return target, ModuleMap([module], target, sources)


def test_step_plans_are_shared_per_file_and_checked_against_it():
    """A second process that maps the same file (elsewhere) takes the step's
    plans of its addresses from the first's (one SFrameSources for both,
    as under `sfbt record -a`), and walks to the frames a walk that shares
    nothing finds; a file read from elsewhere (another inode, or the file
    changed: its rows differ) is planned anew, by its own rows."""
    section = amd64_program()
    file_key = ("file", 1, 100, 4096, 1)
    shared = SFrameSources()
    sources = _SharedSections({"prog": section}, {"prog": file_key}, shared)
    target, first = _amd64_process(0, section, sources)
    frames, stop = Unwinder(target, first).walk()
    assert [f.pc for f in frames] == [0x1210, 0x1120, 0x1030, 0x1305]
    plans = shared.step_plans(first.modules[0], sources.for_module(first.modules[0]),
                              X86_64.name)
    assert set(plans.steps) == {0x1210, 0x111f, 0x102f, 0x1304}  # relative to the file
    assert first.steps()  # planned from its rows
    bias = 0x5550000
    target, second = _amd64_process(bias, section, sources)
    again, again_stop = Unwinder(target, second).walk()
    alone, alone_stop = Unwinder(*_amd64_process(bias, section)).walk()
    assert [(f.pc, f.cfa, f.how, f.registers) for f in again] == \
        [(f.pc, f.cfa, f.how, f.registers) for f in alone]
    assert [f.pc for f in again] == [bias + pc for pc in (0x1210, 0x1120, 0x1030, 0x1305)]
    assert again_stop == alone_stop == stop == "outermost frame"
    assert not second.steps()  # every plan taken from the first process's
    assert again[1].data_module is second.modules[0]
    # the same path and load address, another file: leaf's frame now 16
    # bytes larger (CFA = rsp + 64), so its caller's RA is read elsewhere
    changed = SFrameSection(3, C.ABI_AMD64_LE, [
        section.functions[0], section.functions[1],
        FunctionEntry(0x1200, 0x20, [FrameRowEntry(0, SP, (8,)), FrameRowEntry(4, SP, (64,))]),
        section.functions[3]])
    other = _SharedSections({"prog": changed}, {"prog": ("file", 1, 101, 4096, 2)}, shared)
    target, third = _amd64_process(0, changed, other)
    target.write_word(0x7FFF0000 + 56, 0x1130)  # the RA where the changed row puts it
    walked, _ = Unwinder(target, third).walk()
    assert [f.pc for f in walked][:2] == [0x1210, 0x1130]
    assert third.steps()  # planned from its own rows, not the first file's
    _, plan, *_ = third.step_plans(X86_64.name)[0x1210]
    assert plan.cfa_offset == 64
