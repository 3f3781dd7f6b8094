"""A walk that takes the outer frames of the thread's previous walk
(unwind.reuse, `sfbt record`): where it does, its frames and stop reason
are those a whole walk finds; where memory or registers it would rely on
differ, it walks on."""

import random

from test_unwinder import RBP, RIP, RSP, build_amd64_stack
from sfbt.unwind.reuse import ReusingUnwinder
from sfbt.unwind.walk import Unwinder

STACK = 0x7FFF0000


def stack_copy(target, start=STACK, end=STACK + 0x200):
    """(start, bytes) of the target's memory in [start, end), zeros where
    it has none."""
    return start, bytes(target.memory.get(address, 0) for address in range(start, end))


def as_found(frames, stop):
    return ([(f.level, f.pc, f.registers, f.how, f.cfa, f.interrupted, f.signal_trampoline)
             for f in frames], stop)


def frames_taken(unwinder, frames):
    """How many frames the walk took from the previous one."""
    return 0 if unwinder.went_on_at is None else len(frames) - 1 - unwinder.went_on_at


def reusing_walk(target, module_map, previous, copy=None):
    unwinder = ReusingUnwinder(target, module_map, stack=copy or stack_copy(target),
                               previous=previous)
    found = unwinder.walk()
    return found, unwinder


def test_outer_frames_taken_from_the_previous_walk():
    first = build_amd64_stack(leaf_pc=0x1210)
    module_map = first.module_map()
    (frames, stop), unwinder = reusing_walk(first, module_map, None)
    assert unwinder.went_on_at is None and [f.pc for f in frames] == [
        0x1210, 0x1120, 0x1030, 0x1305]
    second = build_amd64_stack(leaf_pc=0x1218)  # the leaf moved on, its callers did not
    found, again = reusing_walk(second, module_map, unwinder.latest)
    assert again.went_on_at == 1 and frames_taken(again, found[0]) == 2
    assert as_found(*found) == as_found(*Unwinder(second, module_map).walk())
    # the walk after a reused one goes on from it too
    third = build_amd64_stack(leaf_pc=0x1214)
    found, third_unwinder = reusing_walk(third, module_map, again.latest)
    assert third_unwinder.went_on_at == 1
    assert as_found(*found) == as_found(*Unwinder(third, module_map).walk())


def test_a_changed_saved_word_or_register_is_walked_again():
    first = build_amd64_stack()
    module_map = first.module_map()
    _, unwinder = reusing_walk(first, module_map, None)
    work_rbp = first.registers()[RBP]
    # main returns elsewhere: a word the outer steps read changed
    changed = build_amd64_stack(leaf_pc=0x1218)
    changed.write_word(work_rbp + 64 + 8, 0x1306)
    found, again = reusing_walk(changed, module_map, unwinder.latest)
    assert frames_taken(again, found[0]) == 0
    assert as_found(*found) == as_found(*Unwinder(changed, module_map).walk())
    assert found[0][-1].pc == 0x1306
    # frame #1's registers differ (another frame pointer): no frame equal
    moved = build_amd64_stack(leaf_pc=0x1218)
    moved.registers()[RBP] = work_rbp + 8
    moved.write_word(work_rbp + 8, work_rbp + 64)
    moved.write_word(work_rbp + 16, 0x1030)
    found, again = reusing_walk(moved, module_map, unwinder.latest)
    assert frames_taken(again, found[0]) == 0
    assert as_found(*found) == as_found(*Unwinder(moved, module_map).walk())


def test_outer_reads_outside_either_copy_are_walked_again():
    first = build_amd64_stack()
    module_map = first.module_map()
    # the first copy ends below main's frame: its outer words came from
    # elsewhere than the copy, and are not known to be the same
    _, short = reusing_walk(first, module_map, None, stack_copy(first, end=STACK + 0x50))
    second = build_amd64_stack(leaf_pc=0x1218)
    found, again = reusing_walk(second, module_map, short.latest)
    assert frames_taken(again, found[0]) == 0
    # a full first copy, and a second copy too short for the outer reads
    _, full = reusing_walk(first, module_map, None)
    found, again = reusing_walk(second, module_map, full.latest,
                                stack_copy(second, end=STACK + 0x50))
    assert frames_taken(again, found[0]) == 0
    assert as_found(*found) == as_found(*Unwinder(second, module_map).walk())


def test_random_stacks_walk_as_a_whole_walk_does():
    """Stack words and registers changed at random between walks: the
    reusing walk's frames and stop reason always equal a whole walk's,
    and it does take frames where nothing it relies on changed."""
    rng = random.Random(7)
    base = build_amd64_stack()
    module_map = base.module_map()
    words = sorted({address & ~7 for address in base.memory})
    previous = None
    went_on = 0
    for _ in range(300):
        target = build_amd64_stack(leaf_pc=rng.choice([0x1204, 0x1210, 0x1218]))
        for _ in range(rng.choice([0, 0, 1, 2])):
            address = rng.choice(words + [STACK + 8 * rng.randrange(64)])
            target.write_word(address, rng.choice([0, 0x1030, 0x1120, 0x1305, 0x1306,
                                                   STACK + 8 * rng.randrange(64)]))
        if rng.random() < 0.2:
            target.registers()[RSP] += 8 * rng.choice([-1, 1])
        if rng.random() < 0.1:
            target.registers()[RIP] = 0x1305
        found, unwinder = reusing_walk(target, module_map, previous)
        assert as_found(*found) == as_found(*Unwinder(target, module_map).walk())
        went_on += frames_taken(unwinder, found[0]) > 0
        previous = unwinder.latest
    assert went_on > 50
