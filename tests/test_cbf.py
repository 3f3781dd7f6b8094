"""Compact Backtrace Format: byte vectors, errors, round trips, and the
encoder's size against an exhaustive search over legal encodings."""

import copy
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfbt.archive.cbf import (DEFAULT_LIMIT, Backtrace, CBFError, Frame, FrameTextError, Omitted,
                              SignalTrampoline, TraceDecoder, decode, encode, format_frames,
                              enters_kernel_at_callers, kernel_entries, parse_frames,
                              signal_trampolines)

WORD_SIZES = (16, 32, 64)
INFO = {16: 0x00, 32: 0x01, 64: 0x02}


def pc(address):
    return Frame("pc", address)


def ra(address):
    return Frame("ra", address)


def resume(address):
    return Frame("async", address)


# Hand-written vectors: (word size, frames, truncated, bytes)
VECTORS = [
    (64, [], False, "02 00"),
    (64, [], True, "02 01"),
    # pc absolute in 3 bytes; ra as a 2-byte delta (absolute needs 3); three
    # repeats; omit 5 inline; async 0x133 back; omit 1000 in 2 count bytes
    (64, [pc(0x401000), ra(0x401123), ra(0x401123), ra(0x401123),
          ra(0x401123), Omitted(5), resume(0x400FF0), Omitted(1000)], False,
     "02 1a 40 10 00 21 01 23 82 44 31 fe cd 61 03 e8 00"),
    # the spec's example: one address byte 0xff on a 32-bit trace is 0xffffffff
    (32, [pc(0xFFFFFFFF)], False, "01 18 ff 00"),
    # a delta of -1 in one byte
    (32, [ra(0x10), ra(0x0F)], True, "01 28 10 20 ff 01"),
    # 0x8000 needs two bytes: one byte 0x80 would sign-extend to 0xff80
    (16, [pc(0x8000), pc(0xFF80)], False, "00 19 80 00 18 80 00"),
    # -16 is one absolute byte; on a tie with the delta, the delta (as Swift)
    (64, [pc(0xFFFFFFFFFFFFFFF0), ra(0x10)], False, "02 18 f0 20 20 00"),
    (64, [pc(1 << 63)], False, "02 1f 80 00 00 00 00 00 00 00 00"),
    # a delta across the top of the address space wraps
    (16, [ra(0xFFFF), ra(0x0001)], False, "00 28 ff 20 02 00"),
    # omit: 32 is the largest inline count, 33 takes a count byte
    (64, [Omitted(32), Omitted(33)], False, "02 5f 60 21 00"),
    (16, [Omitted(0xFFFF)], False, "00 61 ff ff 00"),
    # rep: 8 copies inline, 9 and 300 with count bytes; rep repeats omits too
    (64, [pc(1)] * 9, False, "02 18 01 87 00"),
    (64, [pc(1)] * 10, False, "02 18 01 88 09 00"),
    (64, [pc(1)] * 301, False, "02 18 01 89 01 2c 00"),
    (64, [Omitted(1000)] * 2, False, "02 61 03 e8 80 00"),
    # after a run the next delta counts from the run's address
    (64, [ra(0x1000)] * 3 + [ra(0x1008)], False, "02 29 10 00 81 20 08 00"),
]


@pytest.mark.parametrize("bits, frames, truncated, hex_bytes", VECTORS)
def test_vectors(bits, frames, truncated, hex_bytes):
    data = bytes.fromhex(hex_bytes)
    assert encode(frames, bits, truncated) == data
    assert decode(data) == Backtrace(frames, truncated, bits)


def test_run_longer_than_a_16_bit_count():
    frames = [ra(0x1234)] * 70001
    data = encode(frames, 16)
    # 70000 copies: a full 0xffff, then 4465 (0x1171)
    assert data == bytes.fromhex("00 29 12 34 89 ff ff 89 11 71 00")
    assert decode(data).frames == frames


def test_swift_style_relative_first_frame_is_accepted():
    # Swift's encoder writes the first address as a delta from 0
    data = bytes.fromhex("02 12 40 10 00 21 01 23 00")
    for strict in (True, False):
        result = decode(data, strict=strict)
        assert result.frames == [pc(0x401000), ra(0x401123)]
        assert not result.truncated
    assert encode(result.frames) == bytes.fromhex("02 1a 40 10 00 21 01 23 00")


def test_word_size_from_the_info_byte():
    for bits in WORD_SIZES:
        assert decode(bytes([INFO[bits], 0])).word_size == bits


# Malformed data: (bytes, offset, message, what lenient mode returns)
ERRORS = [
    ("", 0, "no data, not even the info byte", []),
    ("03 00", 0, "info byte 0x03 has the reserved word size 3", []),
    ("06 00", 0, "unsupported CBF version 1", []),
    ("02 1a 40 10", 1, "data ends inside the pc address (2 of 3 bytes)", []),
    ("02 18 01 02 00", 3, "reserved opcode 0x02", [pc(1)]),
    ("02 18 01 0f 00", 3, "reserved opcode 0x0f", [pc(1)]),
    ("02 18 01 90 00", 3, "reserved opcode 0x90", [pc(1)]),
    ("02 18 01 28 02 ff", 5, "reserved opcode 0xff", [pc(1), ra(2)]),
    ("02 80 00", 1, "rep with no previous frame", []),
    ("02 18 01", 3, "data ends without end or trunc", [pc(1)]),
    ("02 18 01 81", 4, "data ends without end or trunc", [pc(1)] * 3),
    ("02 18 01 89 01", 3, "data ends inside the rep count (1 of 2 bytes)", [pc(1)]),
    ("02 18 01 61 00", 3, "data ends inside the omit count (1 of 2 bytes)", [pc(1)]),
    ("02 18 01 88 00 00", 3, "the rep count is zero", [pc(1)]),
    ("02 60 00 00", 1, "the omit count is zero", []),
    ("00 1a 00 00 01 00", 1, "the pc address of 3 bytes is wider than a 16-bit word", []),
    ("01 64 00 00 00 00 01 00", 1, "the omit count of 5 bytes is wider than a 32-bit word", []),
    ("02 18 01 8f ff ff ff ff ff ff ff ff 00", 3, "more than 1048576 frames", [pc(1)]),
    ("02 00 00", 2, "1 bytes after the end of the trace", None),
]


@pytest.mark.parametrize("hex_bytes, offset, message, lenient", ERRORS)
def test_strict_errors_name_the_offset(hex_bytes, offset, message, lenient):
    with pytest.raises(CBFError) as caught:
        decode(bytes.fromhex(hex_bytes))
    assert caught.value.offset == offset
    assert str(caught.value) == f"CBF+{offset:#x}: {message}"


@pytest.mark.parametrize("hex_bytes, offset, message, lenient", ERRORS)
def test_lenient_returns_the_frames_so_far(hex_bytes, offset, message, lenient):
    result = decode(bytes.fromhex(hex_bytes), strict=False)
    if lenient is None:  # trailing bytes: Swift stops reading at end
        assert result == Backtrace([], False, 64)
    else:
        assert result.frames == lenient
        assert result.truncated


def test_limit():
    data = encode([pc(1)] * 10)
    assert len(decode(data, limit=10).frames) == 10
    with pytest.raises(CBFError, match="more than 9 frames"):
        decode(data, limit=9)


def test_encoder_refuses_what_the_format_cannot_hold():
    with pytest.raises(ValueError, match="does not fit a 16-bit word"):
        encode([pc(0x10000)], 16)
    with pytest.raises(ValueError, match="does not fit a 32-bit word"):
        encode([Omitted(1 << 32)], 32)
    with pytest.raises(ValueError, match="word size 8"):
        encode([], 8)
    with pytest.raises(TypeError):
        encode([0x401000])
    with pytest.raises(ValueError, match="unknown frame kind"):
        Frame("lr", 1)
    with pytest.raises(ValueError, match="not positive"):
        Omitted(0)


# Text form


def test_text_form():
    trace = Backtrace([pc(0x401000), ra(0x401123), ra(0x401123), resume(0x10),
                       Omitted(5)], truncated=True)
    text = format_frames(trace)
    assert text == ("pc 0x401000\nra 0x401123\nra 0x401123\nasync 0x10\n"
                    "omit 5\ntruncated\n")
    assert parse_frames(text) == (trace.frames, True)
    assert parse_frames("\n  pc 4198400 \n\n") == ([pc(0x401000)], False)
    assert format_frames(Backtrace()) == ""


@pytest.mark.parametrize("text, message", [
    ("pc 0x10\nlr 0x20\n", "line 2: expected 'pc|ra|async ADDRESS', 'omit COUNT' "
                           "or 'truncated', not 'lr 0x20'"),
    ("pc 0x10 0x20", "line 1: expected"),
    ("\nomit", "line 2: expected"),
    ("pc 0x10\nra zz", "line 2: invalid literal"),
    ("omit 0", "line 1: omitted frame count 0 is not positive"),
    ("ra -5", "line 1: negative address"),
    ("truncated\n\npc 0x10", "line 3: 'pc 0x10' after 'truncated'"),
])
def test_text_errors_name_the_line(text, message):
    with pytest.raises(FrameTextError) as caught:
        parse_frames(text)
    assert str(caught.value).startswith(message)


# Exhaustive search over legal encodings.
#
# After the decoder has produced the first i entries, its state (last
# address, previous entry, whether an address was seen) depends only on
# those entries, so the shortest encoding is a shortest path over positions
# 0..n in which every instruction form the spec defines is an edge: pc/ra/
# async absolute or (after the first address) relative with every argument
# length, omit inline and with every count length, rep inline with every
# count and with every count length and value.  Edges are written from the
# spec's table, not from the encoder, and the winning path is decoded.


def _fits_signed(value, length, bits):
    signed = value - (1 << bits) if value >> (bits - 1) else value
    return -(1 << (8 * length - 1)) <= signed < 1 << (8 * length - 1)


def _edges(frames, position, bits):
    """(instruction bytes, entries produced) for every legal instruction."""
    width = bits // 8
    mask = (1 << bits) - 1
    target = frames[position]
    addresses = [f.address for f in frames[:position] if isinstance(f, Frame)]
    if isinstance(target, Frame):
        opcode = {"pc": 0x10, "ra": 0x20, "async": 0x30}[target.kind]
        choices = [(0x08, target.address)]
        if addresses:
            choices.append((0x00, (target.address - addresses[-1]) & mask))
        for flag, value in choices:
            for length in range(1, width + 1):
                if _fits_signed(value, length, bits):
                    raw = (value & ((1 << 8 * length) - 1)).to_bytes(length, "big")
                    yield bytes([opcode | flag | (length - 1)]) + raw, 1
    else:
        if target.count <= 32:
            yield bytes([0x40 | (target.count - 1)]), 1
        for length in range(1, width + 1):
            if target.count < 1 << 8 * length:
                yield bytes([0x60 | (length - 1)]) + target.count.to_bytes(length, "big"), 1
    if position:
        run = 0
        while (position + run < len(frames)
               and frames[position + run] == frames[position - 1]):
            run += 1
        for count in range(1, min(run, 8) + 1):
            yield bytes([0x80 | (count - 1)]), count
        for length in range(1, width + 1):
            for count in range(1, min(run, (1 << 8 * length) - 1) + 1):
                yield bytes([0x88 | (length - 1)]) + count.to_bytes(length, "big"), count


def shortest_encoding(frames, bits, truncated=False):
    best = [None] * (len(frames) + 1)
    best[0] = bytes([INFO[bits]])
    for position in range(len(frames)):
        for instruction, produced in _edges(frames, position, bits):
            candidate = best[position] + instruction
            end = position + produced
            if best[end] is None or len(candidate) < len(best[end]):
                best[end] = candidate
    return best[-1] + (b"\x01" if truncated else b"\x00")


def check_smallest(frames, bits, truncated=False):
    data = encode(frames, bits, truncated)
    assert decode(data) == Backtrace(frames, truncated, bits)
    smallest = shortest_encoding(frames, bits, truncated)
    assert decode(smallest) == Backtrace(frames, truncated, bits)
    assert len(data) == len(smallest), (data.hex(" "), smallest.hex(" "))


ALPHABETS = {
    16: [0x7FF0, 0x7FFC, 0x8004, 0xFF80],
    32: [0x401000, 0x401004, 0x7FFFFFF8, 0x80000004, 0xFFFFFFF0],
    64: [0x401000, 0x401004, 0x7FFFF7A3C120, 0x8000000000000010,
         0xFFFFFFFFFFFFFFF0],
}


def _symbols(bits):
    a = ALPHABETS[bits]
    return [pc(a[0]), ra(a[1]), ra(a[2]), resume(a[3]), ra(a[-1]),
            resume(a[0]), Omitted(1), Omitted(33), Omitted(300)]


@pytest.mark.parametrize("bits", WORD_SIZES)
def test_smallest_for_every_short_trace(bits):
    symbols = _symbols(bits)
    for length in range(5):
        for frames in itertools.product(symbols, repeat=length):
            check_smallest(list(frames), bits, truncated=length % 2 == 1)


@pytest.mark.parametrize("bits", WORD_SIZES)
def test_smallest_for_every_delta_length(bits):
    mask = (1 << bits) - 1
    for length in range(1, bits // 8 + 1):
        edge = 1 << (8 * length - 1)
        for delta in (edge - 1, edge, -edge, -edge - 1):
            for base in (0, 0x1234 & mask, 1 << (bits - 1), mask):
                check_smallest([pc(base), ra((base + delta) & mask)], bits)
                check_smallest([pc(base), Omitted(3), ra((base + delta) & mask)], bits)


@pytest.mark.parametrize("bits", WORD_SIZES)
def test_smallest_for_every_omit_count(bits):
    limit = 1 << bits
    for count in list(range(1, 41)) + [255, 256, 65535, 65536, 1 << 24, 1 << 40]:
        if count < limit:
            check_smallest([Omitted(count)], bits)
            check_smallest([pc(0x10), Omitted(count), Omitted(count)], bits)


@pytest.mark.parametrize("bits", WORD_SIZES)
def test_smallest_for_runs(bits):
    for count in range(1, 41):
        check_smallest([ra(0x4010)] * count + [ra(0x4018)], bits)
        check_smallest([pc(0x10)] + [Omitted(300)] * count, bits)


# Random traces


@st.composite
def traces(draw, bits, longest_run=300):
    mask = (1 << bits) - 1
    frames = []
    address = draw(st.integers(0, mask))
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 4)) == 0:
            entry = Omitted(draw(st.one_of(st.integers(1, 40), st.integers(1, mask))))
        else:
            if draw(st.booleans()):
                address = draw(st.integers(0, mask))
            else:
                scale = draw(st.integers(0, bits))
                address = (address + draw(st.integers(-(1 << scale), 1 << scale))) & mask
            entry = Frame(draw(st.sampled_from(["pc", "ra", "async"])), address)
        run = draw(st.one_of(st.just(1), st.integers(1, 12), st.integers(1, longest_run)))
        frames += [entry] * run
    return frames, draw(st.booleans())


def _trace_and_bits(longest_run=300):
    return st.sampled_from(WORD_SIZES).flatmap(
        lambda bits: st.tuples(st.just(bits), traces(bits, longest_run)))


@settings(max_examples=300, deadline=None)
@given(_trace_and_bits())
def test_round_trip(case):
    bits, (frames, truncated) = case
    data = encode(frames, bits, truncated)
    expected = Backtrace(frames, truncated, bits)
    assert decode(data) == expected
    assert decode(data, strict=False) == expected
    assert parse_frames(format_frames(expected)) == (frames, truncated)


@settings(max_examples=150, deadline=None)
@given(_trace_and_bits(longest_run=20))
def test_smallest_for_random_traces(case):
    bits, (frames, truncated) = case
    check_smallest(frames, bits, truncated)


@settings(max_examples=100, deadline=None)
@given(_trace_and_bits(longest_run=20), st.data())
def test_every_cut_is_a_truncated_prefix(case, data):
    bits, (frames, truncated) = case
    encoded = encode(frames, bits, truncated)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    result = decode(encoded[:cut], strict=False)
    assert result.truncated
    assert result.frames == frames[:len(result.frames)]
    with pytest.raises(CBFError):
        decode(encoded[:cut])


@st.composite
def instruction_streams(draw):
    """Random bytes that are mostly well-formed instructions."""
    out = [draw(st.sampled_from([0x00, 0x01, 0x02, 0x03, 0x06]))]
    for _ in range(draw(st.integers(0, 10))):
        opcode = draw(st.one_of(st.integers(0x10, 0x3F), st.integers(0x40, 0x7F),
                                st.integers(0x80, 0x8F), st.integers(0, 255)))
        out.append(opcode)
        out += draw(st.binary(max_size=9))
    out.append(draw(st.sampled_from([0x00, 0x01, 0x00, 0x01, 0x80])))
    return bytes(out)


@settings(max_examples=400, deadline=None)
@given(st.one_of(instruction_streams(), st.binary(max_size=40)))
def test_any_bytes(data):
    """Only CBFError escapes; lenient never raises; and no valid input is
    shorter than the encoder's output for what it decodes to."""
    lenient = decode(data, strict=False)
    try:
        strict = decode(data)
    except CBFError:
        return
    assert strict == lenient
    assert len(encode(strict.frames, strict.word_size, strict.truncated)) <= len(data)


# Frames are (kind, address) tuples


def test_a_frame_is_its_kind_and_address():
    frame = Frame("ra", 0x401000)
    assert (frame.kind, frame.address) == ("ra", 0x401000)
    assert frame == Frame(kind="ra", address=0x401000) and frame != Frame("pc", 0x401000)
    assert hash(frame) == hash(Frame("ra", 0x401000))
    assert frame != Omitted(1) and Omitted(1) != frame
    assert repr(frame) == "Frame(kind='ra', address=4198400)"
    assert copy.deepcopy(frame) == frame and type(copy.copy(frame)) is Frame
    with pytest.raises(ValueError, match="negative address"):
        Frame("pc", -1)


def test_only_a_return_address_is_looked_up_inside_the_call():
    """A PC (where execution stopped, or a signal interrupted it) and an
    async resume point (a function's entry) name their own instruction;
    a return address the call before it, one byte back (a zero one, of a
    smashed stack, as it is)."""
    assert Frame("pc", 0x401000).lookup_address == 0x401000
    assert Frame("async", 0x401000).lookup_address == 0x401000
    assert Frame("ra", 0x401000).lookup_address == 0x400fff
    assert Frame("ra", 0).lookup_address == 0


def test_the_frame_before_a_pc_frame_is_the_signal_trampoline():
    """A `pc` frame after frame #0 is one a signal interrupted: the frame
    directly before it is the kernel's trampoline, looked up at its own
    address; an `omit` before it leaves none to mark."""
    pc, ra, interrupted, caller = (Frame("pc", 0x10), Frame("ra", 0x7f00),
                                   Frame("pc", 0x30), Frame("ra", 0x40))
    assert signal_trampolines([pc, ra, interrupted, caller]) == [
        pc, SignalTrampoline(0x7f00), interrupted, caller]
    # stopped in the trampoline: frame #0 is it
    assert signal_trampolines([Frame("pc", 0x7f09), interrupted]) == [
        SignalTrampoline(0x7f09), interrupted]
    # the frame after the entries (the first of the callers traces share)
    assert signal_trampolines((pc, ra), interrupted) == [pc, SignalTrampoline(0x7f00)]
    for entries in ([pc, ra, Omitted(2), interrupted], [pc, ra, caller], [pc], []):
        assert signal_trampolines(entries) is entries
    trampoline = SignalTrampoline(0x7f00)
    assert trampoline.lookup_address == trampoline.address == 0x7f00
    assert trampoline != ra and len({trampoline: 1, ra: 2}) == 2


def test_the_user_frame_below_kernel_frames_is_looked_up_at_itself():
    """Where a sample was taken in the kernel, the user PC below its
    frames (written as a return address: a `pc` frame there would make
    the kernel's frame a signal trampoline) is looked up at itself, as
    perf does: an interrupted instruction may be its function's first."""
    kernel = (0xffff0000, 0xffffffff)
    inside, top, user, caller = (Frame("pc", 0xffff0010), Frame("ra", 0xffff0020),
                                 Frame("ra", 0x4000), Frame("ra", 0x5000))
    assert kernel_entries([inside, top, user, caller], kernel) == [
        inside, top, Frame("pc", 0x4000), caller]
    assert kernel_entries([inside, user], kernel)[1].lookup_address == 0x4000
    for entries in ([user, caller], [inside, top], [inside, Omitted(1), user], []):
        assert kernel_entries(entries, kernel) is entries
    assert kernel_entries([inside, user], None) == [inside, user]
    # where the kernel's frames end just where the callers traces share begin
    assert enters_kernel_at_callers([inside, user, caller], (user, caller), kernel)
    assert not enters_kernel_at_callers([inside, top, user], (top, user), kernel)
    assert not enters_kernel_at_callers([user, caller], (caller,), kernel)
    assert not enters_kernel_at_callers([inside, user], (user,), None)


# An archive's decoder: the callers traces share decoded once


def _as_decoded(result):
    return result.frames, result.truncated, result.word_size, result.over_limit


@st.composite
def archive_traces(draw):
    """CBF traces as an archive holds them: two frames (the second often
    the same) before callers drawn from a few, some of them damaged."""
    bits = draw(st.sampled_from(WORD_SIZES))
    mask = (1 << bits) - 1
    addresses = st.one_of(st.sampled_from([0x10, 0x7FF0, mask]), st.integers(0, mask))
    heads = st.lists(st.builds(Frame, st.sampled_from(["pc", "ra", "async"]), addresses),
                     min_size=0, max_size=2)
    callers = draw(st.lists(traces(bits, longest_run=20), min_size=1, max_size=3))
    seconds = draw(st.lists(st.builds(Frame, st.just("ra"), addresses), min_size=1,
                            max_size=2))
    out = []
    for _ in range(draw(st.integers(1, 8))):
        head = draw(heads)
        if len(head) == 2 and draw(st.booleans()):
            head[1] = draw(st.sampled_from(seconds))
        frames, truncated = draw(st.sampled_from(callers))
        data = encode(head + frames, bits, truncated)
        damage = draw(st.sampled_from(["none", "none", "cut", "flip", "append"]))
        if damage == "cut":
            data = data[:draw(st.integers(0, len(data) - 1))]
        elif damage == "flip":
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
        elif damage == "append":
            data += draw(st.binary(min_size=1, max_size=4))
        out.append(data)
    return out


@settings(max_examples=300, deadline=None)
@given(archive_traces())
def test_the_archive_decoder_is_lenient_decode(datas):
    """For any traces, in any order and with any limit (those just under
    and at a trace's frames too), TraceDecoder gives what
    decode(strict=False) gives; the callers it hands out are the frames'
    last entries."""
    decoder = TraceDecoder()
    for data in datas + datas:
        count = len(decode(data, strict=False).frames)
        for limit in (DEFAULT_LIMIT, count, count - 1, 3):
            result = decoder.decode(data, limit)
            assert _as_decoded(result) == _as_decoded(decode(data, strict=False, limit=limit))
            if result.callers:
                assert tuple(result.frames[-len(result.callers):]) == result.callers
                assert len(result.frames) == len(result.callers) + 1


def test_the_archive_decoder_shares_callers_of_the_same_second_frame():
    callers = [ra(0x7F0000001000), ra(0x7F0000002000), Omitted(3), ra(0x401000)]
    decoder = TraceDecoder()
    first = decoder.decode(encode([pc(0x7F0000000010), ra(0x7F0000000800)] + callers))
    second = decoder.decode(encode([pc(0x7F0000000020), ra(0x7F0000000800)] + callers))
    other = decoder.decode(encode([pc(0x7F0000000020), ra(0x7F0000000900)] + callers))
    assert first.callers == (ra(0x7F0000000800), *callers)
    assert second.callers is first.callers
    assert other.callers[1:] == first.callers[1:]
    assert second.frames == [pc(0x7F0000000020), ra(0x7F0000000800)] + callers
    # more frames than the limit: what decode() says, not the callers kept
    data = encode([pc(0x7F0000000030), ra(0x7F0000000800)] + callers)
    assert _as_decoded(decoder.decode(data, 5)) == _as_decoded(decode(data, False, 5))
    assert decoder.decode(data, 5).over_limit and not decoder.decode(data, 5).callers


def test_the_archive_decoder_keeps_a_bounded_number_of_callers(monkeypatch):
    monkeypatch.setattr(TraceDecoder, "MAX_KEPT", 4)
    decoder = TraceDecoder()
    long = decoder.decode(encode([pc(1), ra(2)] + [ra(a) for a in range(3, 7)]))
    assert not long.callers  # five callers are more than are kept
    for second in range(10, 20):
        assert decoder.decode(encode([pc(1), ra(second), ra(3), ra(4)])).callers
        assert decoder._kept <= 4


@settings(max_examples=150, deadline=None)
@given(_trace_and_bits())
def test_frames_given_as_kind_and_address_pairs_encode_alike(case):
    """`sfbt record` hands encode() (kind, address) pairs, not Frames."""
    bits, (frames, truncated) = case
    pairs = [tuple(entry) if isinstance(entry, Frame) else entry for entry in frames]
    assert all(type(entry) is not Frame for entry in pairs)
    assert encode(pairs, bits, truncated) == encode(frames, bits, truncated)
