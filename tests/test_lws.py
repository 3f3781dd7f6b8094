"""libwebsockets compressed backtraces: decode, both encoders, the filters,
heapmap grouping."""

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfbt.archive.lws import (LwsFormatError, decode_blob, encode, filter_decode,
                      filter_encode, find_blobs, format_decoded,
                      group_allocations)

README_CONSISTENT = "~m#IF0BmUQugNCkgCnkhdAYpQa6wAAV"
README_OTHER = "~m#IF0BmagugNDWgCnkhdAYpQa6wAAV"
README_FRAMES = [0x406651, 0x406852, 0x406c1b, 0x406294]
B = 0x400000  # a 23-bit "address": deltas of up to 17 bits are worth it

LITERAL, DELTA = 0, 1


def blob(*fields):
    """The ~m# text for (value, width) fields, each written MSB-first plus a
    0 pad bit, zero filled, then the u16 total length: built independently
    of the module's writer."""
    bits = "".join(format(value, f"0{width}b") + "0" if width else "0"
                   for value, width in fields)
    bits += "0" * (-len(bits) % 8)
    body = int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""
    whole = body + (len(body) + 2).to_bytes(2, "big")
    return "~m#" + base64.b64encode(whole).decode()


def literal(value):
    width = max(value.bit_length(), 1)
    return [(LITERAL, 1), (width, 6), (value, width)]


def delta(back, subtract, amount):
    width = max(amount.bit_length(), 1)
    return [(DELTA, 1), (back, 3), (int(subtract), 1), (width, 6),
            (amount, width)]


def size_field(size):
    width = max(size.bit_length(), 1)
    return [(width, 6), (size, width)]


def expected(frames_fields, size):
    fields = [(len(frames_fields), 5)]
    for frame in frames_fields:
        fields += frame
    return blob(*fields, *size_field(size))


# The README examples

def test_readme_consistent_example_decodes_to_its_b_line():
    frames, size = decode_blob(README_CONSISTENT)
    assert (frames, size) == (README_FRAMES, 7520)
    assert format_decoded(frames, size) == \
        "~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294 "


def test_readme_examples_were_made_by_the_2022_encoder():
    # frames 1 and 3 are nearest frame 0, which only the 2022 release refuses
    assert encode(README_FRAMES, 7520, legacy=True) == README_CONSISTENT
    assert encode(*decode_blob(README_OTHER), legacy=True) == README_OTHER


def test_readme_consistent_example_with_the_current_encoder():
    want = expected([literal(0x406651), delta(0, False, 0x201),
                     delta(0, False, 0x3c9), delta(2, True, 0x3bd)], 7520)
    assert encode(README_FRAMES, 7520) == want == \
        "~m#IF0BmUUAUgFAFPJSRTvRrrAAABQ="
    assert decode_blob(want) == (README_FRAMES, 7520)


def test_readme_other_string_decodes_to_different_frames():
    assert decode_blob(README_OTHER) == (
        [0x40666a, 0x40686b, 0x406c34, 0x406294], 7520)


# Round trips

def backtraces(limit):
    """Frame lists mixing values close to a base (deltas) and far ones."""
    value = st.integers(0, limit - 1)
    near = st.tuples(value, st.lists(st.integers(-5000, 5000), max_size=31))
    close = near.map(lambda pair: [min(max(pair[0] + offset, 0), limit - 1)
                                   for offset in pair[1]])
    mixed = st.lists(st.one_of(value, st.integers(0, 255)), max_size=31)
    return st.one_of(close, mixed, close.flatmap(
        lambda frames: st.permutations(frames + [0, limit - 1])
        if len(frames) <= 29 else st.just(frames)))


@settings(max_examples=300, deadline=None)
@given(backtraces(1 << 63), st.integers(0, (1 << 63) - 1))
def test_current_encoder_round_trips(frames, size):
    text = encode(frames, size)
    assert decode_blob(text) == (frames, size)
    assert list(find_blobs(f"x {text} y")) == [text]


@settings(max_examples=300, deadline=None)
@given(backtraces(1 << 31), st.integers(0, (1 << 31) - 1))
def test_legacy_encoder_round_trips_below_2_to_31(frames, size):
    assert decode_blob(encode(frames, size, legacy=True)) == (frames, size)


@settings(max_examples=100, deadline=None)
@given(backtraces(1 << 63), st.integers(0, (1 << 63) - 1))
def test_decoded_line_round_trips_through_the_filters(frames, size):
    line = f"alloc {encode(frames, size)} in main\n"
    decoded = next(filter_decode([line]))
    assert decoded == f"alloc {format_decoded(frames, size)} in main\n"
    assert next(filter_encode([decoded])) == line


# The encoder's choices, bit for bit

def test_first_frame_is_a_literal_and_size_zero_is_one_bit():
    assert encode([B], 0) == expected([literal(B)], 0)
    assert encode([], 0) == blob((0, 5), (1, 6), (0, 1))


def test_delta_against_nearest_previous_frame():
    frames = [B, B + 0x5000, B + 0x10]
    assert encode(frames, 1) == expected(
        [literal(B), delta(0, False, 0x5000), delta(1, False, 0x10)], 1)


def test_tie_keeps_the_farthest_back():
    frames = [B, B + 0x200, B + 0x100]
    assert encode(frames, 1) == expected(
        [literal(B), delta(0, False, 0x200), delta(1, False, 0x100)], 1)


def test_sign_is_set_when_the_frame_is_smaller_or_equal():
    frames = [B + 0x100, B, B]
    assert encode(frames, 1) == expected(
        [literal(B + 0x100), delta(0, True, 0x100), delta(0, True, 0)], 1)


def test_delta_only_when_bits_delta_plus_11_below_bits_value_plus_7():
    # B has 23 bits: an 18-bit delta costs 18 + 11 = 29 < 30, a 19-bit
    # one 30, not below 30
    assert encode([B, B + 0x20000], 1) == expected(
        [literal(B), delta(0, False, 0x20000)], 1)
    assert encode([B, B + 0x40000], 1) == expected(
        [literal(B), literal(B + 0x40000)], 1)
    # a 1-bit delta costs 12: not below 5 + 7, below 6 + 7
    assert encode([0x10, 0x11], 1) == expected(
        [literal(0x10), literal(0x11)], 1)
    assert encode([0x20, 0x21], 1) == expected(
        [literal(0x20), delta(0, False, 1)], 1)


def test_delta_looks_back_at_most_8_frames():
    far = [0x7000000 + 0x1000000 * i for i in range(8)]
    frames = [B] + far + [B + 1]
    fields = [literal(B)] + [literal(value) for value in far]
    assert encode(frames, 1) == expected(fields + [literal(B + 1)], 1)
    frames = [B] + far[:7] + [B + 1]
    fields = [literal(B)] + [literal(value) for value in far[:7]]
    assert encode(frames, 1) == expected(
        fields + [delta(7, False, 1)], 1)


def test_legacy_never_deltas_against_frame_0():
    assert encode([B, B + 1], 1, legacy=True) == expected(
        [literal(B), literal(B + 1)], 1)
    # it picks frame 0 on the tie and then refuses it, not the runner-up
    assert encode([B, B + 0x200, B + 0x100], 1, legacy=True) == expected(
        [literal(B), literal(B + 0x200), literal(B + 0x100)], 1)
    assert encode([B, B + 0x200, B + 0x201], 1, legacy=True) == expected(
        [literal(B), literal(B + 0x200), delta(0, False, 1)], 1)


def test_legacy_mangles_values_from_2_to_31():
    # bits 32 and up are read as bit n-32; bit 31 and the pad bit as
    # "any of bits 31..63 set"
    assert decode_blob(encode([0x80000000], 1, legacy=True))[0] == \
        [0x80000000]
    assert decode_blob(encode([0x100000000], 1, legacy=True))[0] == \
        [0x80000000]
    assert decode_blob(encode([0x100000001], 1, legacy=True))[0] == \
        [0x180000001]
    assert decode_blob(encode([], 0x100000000, legacy=True))[1] == 0x80000000


def test_legacy_bytes_match_a_gcc_build_of_the_2022_bit_writer():
    # bytes from the 2022 bit-test expression compiled by gcc 12 -O2 for
    # x86-64, width passed at run time
    frames = [0x7f0012345678, 0x7f0012345abc, 0x100000001]
    raw = bytes.fromhex("18bd59e248d159e25eb5792468b5792160000000"
                        "702000000020001c")
    assert encode(frames, 0x80000000, legacy=True) == \
        "~m#" + base64.b64encode(raw).decode()


# Input forms

def test_url_safe_and_unpadded_base64():
    standard = encode([0x4010ff, 0x4012ef, 0x7f001234], 48)
    assert "+" in standard and "/" in standard and standard.endswith("=")
    url_safe = standard.replace("+", "-").replace("/", "_")
    want = ([0x4010ff, 0x4012ef, 0x7f001234], 48)
    assert decode_blob(url_safe) == want
    assert decode_blob(url_safe.rstrip("=")) == want
    assert decode_blob(standard.rstrip("=")) == want


def test_lead_in_optional_and_bytes_accepted():
    assert decode_blob(README_CONSISTENT[3:]) == (README_FRAMES, 7520)
    assert decode_blob(README_CONSISTENT.encode() + b"\n") == \
        (README_FRAMES, 7520)


def test_find_blobs_in_log_lines():
    line = (f"[2024/01/01 12:00:00:1234] N: alloc {README_CONSISTENT} "
            f"trailing text")
    assert list(find_blobs(line)) == [README_CONSISTENT]
    two = f"a={README_CONSISTENT}, b={README_OTHER}."
    assert list(find_blobs(two)) == [README_CONSISTENT, README_OTHER]
    assert list(find_blobs("no blobs ~b#size: 1, here")) == []


# The filters

def test_filter_decode_replaces_blobs_and_passes_other_lines():
    lines = ["plain line\n",
             f"[2024/01/01 12:00:00:1234] N: alloc {README_CONSISTENT} x\n",
             f"{README_CONSISTENT} {README_OTHER}\n",
             "abcd\n",
             ""]
    assert list(filter_decode(lines)) == [
        "plain line\n",
        "[2024/01/01 12:00:00:1234] N: alloc "
        "~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294  x\n",
        "~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294  "
        "~b#size: 7520, 0x40666a 0x40686b 0x406c34 0x406294 \n",
        "abcd\n",  # base64 characters, but not a blob: its length field disagrees
        ""]


def test_filter_decode_takes_a_bare_blob_as_lws_does():
    """lws-api-test-backtrace decodes a blob with or without the ~m# lead-in."""
    assert list(filter_decode([README_CONSISTENT[3:] + "\n",
                               "  " + README_OTHER[3:] + "\n"])) == [
        "~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294 \n",
        "  ~b#size: 7520, 0x40666a 0x40686b 0x406c34 0x406294 \n"]


def test_filter_encode_both_generations():
    lines = ["~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294 \n",
             "nothing here\n",
             "kept ~b#size: 7520, 0x406651 0x406852 0x406c1b 0x406294\n"]
    assert list(filter_encode(lines, legacy=True)) == [
        README_CONSISTENT + "\n", "nothing here\n",
        f"kept {README_CONSISTENT}\n"]
    assert list(filter_encode(lines))[0] == encode(README_FRAMES, 7520) + "\n"
    assert list(filter_encode(["~b#size: 0, \n"])) == [encode([], 0) + "\n"]


def test_filters_name_the_line_of_a_bad_blob():
    with pytest.raises(LwsFormatError, match=r"^line 2: .*length field"):
        list(filter_decode(["ok\n", README_CONSISTENT[:-4] + "\n"]))
    too_deep = "~b#size: 1, " + "0x1 " * 32 + "\n"
    with pytest.raises(LwsFormatError, match=r"^line 3: depth 32"):
        list(filter_encode(["\n", "x\n", too_deep]))


# Errors

def test_depth_32_is_refused():
    with pytest.raises(LwsFormatError, match="depth 32 .* at most 31"):
        encode([B] * 32, 1)
    assert decode_blob(encode([B] * 31, 1))[0] == [B] * 31


def test_values_over_63_bits_are_refused():
    with pytest.raises(LwsFormatError,
                       match="frame 1 value 0x8000000000000000"):
        encode([1, 1 << 63], 1)
    with pytest.raises(LwsFormatError, match="size value 0x8000000000000000"):
        encode([1], 1 << 63)
    with pytest.raises(LwsFormatError, match="frame 0 value -0x1"):
        encode([-1], 1)
    assert decode_blob(encode([(1 << 63) - 1], 1)) == ([(1 << 63) - 1], 1)


def test_truncated_blob():
    # a consistent length field, but the bits run out in frame 1's value
    text = blob((2, 5), *literal(B), (LITERAL, 1), (23, 6))
    with pytest.raises(LwsFormatError,
                       match=r"truncated blob: frame 1 needs 24 bits at bit "
                             r"offset 48, only 0 left"):
        decode_blob(text)
    with pytest.raises(LwsFormatError, match="truncated blob: 1 bytes"):
        decode_blob("~m#AA")


def test_bad_base64():
    with pytest.raises(LwsFormatError, match=r"bad base64 character '!' "
                                             r"at character offset 7"):
        decode_blob("~m#IF0B!UQugNCkgCnkhdAYpQa6wAAV")
    with pytest.raises(LwsFormatError, match="bad base64: 5 characters"):
        decode_blob("~m#IF0Bm")
    with pytest.raises(LwsFormatError, match="bad base64 character '='"):
        decode_blob("IF0=mUQu")


def test_length_field_mismatch():
    raw = bytearray(base64.b64decode(README_CONSISTENT[3:]))
    raw[-1] += 1
    with pytest.raises(LwsFormatError,
                       match=r"length field at byte offset 19 says 22 bytes, "
                             r"the blob has 21"):
        decode_blob(base64.b64encode(bytes(raw)))


def test_delta_before_frame_0():
    text = blob((1, 5), *delta(0, False, 1), *size_field(1))
    with pytest.raises(LwsFormatError,
                       match=r"frame 0 at bit offset 6 is a delta against "
                             r"frame -1"):
        decode_blob(text)


# heapmap

def test_group_allocations_by_call_site():
    site_a = [0x401000, 0x401100, 0x402000]
    site_b = [0x401000, 0x403000]
    log = [
        "heap dump\n",
        f"[0] N: {encode(site_a, 100)}\n",
        f"{encode(site_b, 4000)}\n",
        f"[2] N: {encode(site_a, 300)} and {encode(site_a, 50)}\n",
        f"{encode(site_b, 1, legacy=True)}\n",
        f"{encode([], 7)}\n",
        "# end\n",
    ]
    assert group_allocations(log) == [
        (tuple(site_b), 2, 4001),
        (tuple(site_a), 3, 450),
        ((), 1, 7),
    ]
    with pytest.raises(LwsFormatError, match="^line 2: "):
        group_allocations(["x\n", "~m#AAAA\n"])
