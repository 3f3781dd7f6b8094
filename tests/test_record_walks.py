"""`sfbt record`'s walk of perf events' stack copies, on real samples of
busy.c (deep stacks through qsort and snprintf, no frame pointers): the
walk that goes on from the thread's previous walk (unwind.reuse), the
step that reads a frame's saved words at once (Unwinder._window) and the
step that reads them a word at a time find the same frames, and a walk
goes on from the previous one only where the bytes it relies on are the
same."""

import pytest

from conftest import require
from gdb_support import compile_program
from live_harness import record_taking
from test_perf_record import _perf_events_refused
from test_stack import Running


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(busy running, its SampledProcess, [perf_events.Sample]): one
    second of samples at 999 Hz, 2 busy threads."""
    from sfbt.live import perf_source
    refused = _perf_events_refused()
    require(refused is None, f"{refused} (a container's seccomp filter?)")
    directory = tmp_path_factory.mktemp("walks")
    busy = compile_program(directory, "busy", "O2", True, ["busy.c"])
    with Running(busy, 2) as running:
        recorder = perf_source.PerfRecorder(running.pid, hz=999)
        samples = []

        def keep(sample):
            if sample.pid == running.pid and sample.registers:
                samples.append(sample)

        record_taking(recorder, 1.0, keep)
        sampled = recorder.with_session(perf_source.SampledProcess(running.pid,
                                                                   recorder._files))
        try:
            yield running, sampled, samples
        finally:
            sampled.close()


def _state(sampled, sample, stack=None):
    """The ThreadState that perf_source.walk_sample walks for ``sample``."""
    from sfbt.live.memory import COPY_ALIGN, ThreadState
    sp = sample.registers[sampled.session.arch.sp]
    start = sp & -COPY_ALIGN
    return ThreadState(sample.tid, "", sample.registers, start,
                       bytes(sp - start) + (sample.stack if stack is None else stack))


def _as_found(frames, stop):
    return ([(f.level, f.pc, f.registers, f.how, f.cfa, f.interrupted, f.signal_trampoline,
              f.data_module) for f in frames], stop)


def _walk(sampled, state, unwinder_class, **options):
    from sfbt.commands.session import Thread
    from sfbt.commands.backtrace import walk
    made = []

    def unwinder(target, module_map, fallback):
        made.append(unwinder_class(target, module_map, fallback, **options))
        return made[0]

    return walk(sampled.session, Thread("", state), unwinder=unwinder), made[0]


def _word_at_a_time():
    """An Unwinder whose step reads each saved word by itself (the path
    GDB's frame unwinder takes with its own rows)."""
    from sfbt.unwind.walk import Unwinder

    class WordAtATime(Unwinder):
        def caller_registers(self, pc, is_caller, known, level=0, rows=None):
            return Unwinder.caller_registers(self, pc, is_caller, known, level,
                                             rows or self.module_map.step_for)

    return WordAtATime


def test_reusing_and_whole_walks_of_real_samples_are_the_same(recorded):
    from sfbt.unwind.reuse import ReusingUnwinder
    from sfbt.unwind.walk import Unwinder
    _, sampled, samples = recorded
    assert len(samples) >= 200
    word_at_a_time = _word_at_a_time()
    previous = {}
    went_on = deep = 0
    for sample in samples:
        state = _state(sampled, sample)
        found, reusing = _walk(sampled, state, ReusingUnwinder,
                               stack=(state.stack_start, state.stack),
                               previous=previous.get(sample.tid))
        previous[sample.tid] = reusing.latest
        whole, _ = _walk(sampled, state, Unwinder)
        assert _as_found(*found) == _as_found(*whole)
        assert _as_found(*found) == _as_found(*_walk(sampled, state, word_at_a_time)[0])
        deep += len(found[0]) >= 20
        went_on += reusing.went_on_at is not None
    # busy's stacks run deep, and its threads' outer frames stay between samples
    assert deep >= len(samples) // 2
    assert went_on >= len(samples) // 20, went_on


def test_a_walk_goes_on_from_the_previous_only_where_its_bytes_are_the_same(recorded):
    """Where a walk took the previous walk's outer frames, the same sample
    with a word those frames' steps read changed (a return address) is
    walked anew, to the frames a whole walk finds over the changed copy."""
    from sfbt.unwind.reuse import ReusingUnwinder
    from sfbt.unwind.walk import Unwinder
    _, sampled, samples = recorded
    previous, checked = {}, 0
    for sample in samples:
        kept = previous.get(sample.tid)
        state = _state(sampled, sample)
        found, reusing = _walk(sampled, state, ReusingUnwinder,
                               stack=(state.stack_start, state.stack), previous=kept)
        previous[sample.tid] = reusing.latest
        level = reusing.went_on_at
        if level is None or level + 1 >= len(found[0]):
            continue
        # the return address of the frame after the one it went on from,
        # where the step from that one read it (CFA + the row's offset)
        arch = sampled.session.arch
        taken = found[0][level + 1]
        step = sampled.session.module_map().step_plans(arch.name).get(
            found[0][level].lookup_pc)  # none for a signal trampoline's frame
        if step is None or step[1] is None or step[1].ra_saved_at is None:
            continue
        plan = step[1]
        at = taken.cfa + plan.ra_saved_at - sample.registers[arch.sp]
        if not 0 <= at <= len(sample.stack) - 8:
            continue
        changed = bytearray(sample.stack)
        changed[at:at + 8] = (taken.pc ^ 0x10).to_bytes(8, "big" if arch.big_endian
                                                        else "little")
        state = _state(sampled, sample, bytes(changed))
        again, redone = _walk(sampled, state, ReusingUnwinder,
                              stack=(state.stack_start, state.stack), previous=kept)
        assert redone.went_on_at is None or redone.went_on_at > level
        assert _as_found(*again) == _as_found(*_walk(sampled, state, Unwinder)[0])
        assert again[0][level + 1].pc != taken.pc
        checked += 1
    assert checked >= 5, checked
