"""Compact ImageMap Format: the Swift document's examples, hand-checked
vectors, errors with offsets, and random round trips."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfbt.archive.imagemap import (Image, ImageMap, ImageMapError, decode_image_map,
                           encode_image_map)

WORD_SIZES = (16, 32, 64)


def _one_image(build_id=b""):
    """info (64-bit), empty platform, one image at 0 with no path."""
    return ImageMap("", [Image("", 0, 0, build_id)])


# The document's table of counts, checked on a build id's length.
@pytest.mark.parametrize("count, hex_bytes", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "81 00"), (129, "81 01"),
    (700, "85 3c"), (1234, "89 52"), (16384, "81 80 00"), (65535, "83 ff 7f"),
    (2097152, "81 80 80 00"),
])
def test_count_encoding(count, hex_bytes):
    build_id = bytes(range(256)) * (count // 256) + bytes(range(count % 256))
    data = encode_image_map(_one_image(build_id))
    assert data == (bytes.fromhex("02 00 01 00 00 00") + bytes.fromhex(hex_bytes)
                    + build_id + b"\x00")
    assert decode_image_map(data) == _one_image(build_id)


def test_image_count_and_swifts_redundant_count_byte():
    images = [Image("", 16 * i, 16 * i) for i in range(128)]
    data = encode_image_map(ImageMap("", images))
    assert data[:4] == bytes.fromhex("02 00 81 00")
    assert decode_image_map(data).images == tuple(images)
    # Swift's encoder writes 127 as 80 7f: the same number
    assert decode_image_map(bytes.fromhex("02 00 80 00")) == ImageMap("", [])


LINUX = ImageMap("linux", [
    Image("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7F1234560000, 0x7F12345E1000,
          bytes.fromhex("0011223344")),
    Image("/usr/lib/x86_64-linux-gnu/libm.so.6", 0x7F1234600000, 0x7F1234680000),
    Image("", 0x400000, 0x3FF000, b"\xaa"),
])
LINUX_BYTES = (
    "02 05" + b"linux".hex() + "03"
    # absolute base in 6 bytes, end of text 0x81000 on in 3
    "2a 7f 12 34 56 00 00 08 10 00 05 00 11 22 33 44"
    # /usr/lib, then text that defines /x86_64-linux-gnu as code 32
    "81 1b" + b"/x86_64-linux-gnu/libc.so.6".hex() + "00"
    # the base as a 3-byte delta; /usr/lib, code 32, /lib, then text
    "92 0a 00 00 08 00 00 00 81 a0 80 06" + b"m.so.6".hex() + "00"
    # absolute again; the end of text 0x1000 below the base; no path
    "11 40 00 00 f0 00 01 aa 00"
)


def test_hand_checked_image_map():
    data = bytes.fromhex(LINUX_BYTES)
    assert encode_image_map(LINUX) == data
    assert decode_image_map(data) == LINUX


@pytest.mark.parametrize("image_map, hex_bytes", [
    # 0xfffff000 is -0x1000: two bytes; the end of text wraps past zero
    (ImageMap("x", [Image("/a", 0xFFFFF000, 0x1000)], 32),
     "01 01 78 01 09 f0 00 20 00 00 02 2f 61 00"),
    (ImageMap("", [Image("C:\\Windows\\System32\\ntdll.dll", 0x8000, 0x8100),
                   Image("C:\\Windows\\System32\\kernel32.dll", 0x8010, 0xFFFF)], 16),
     # the second base is a 1-byte delta (absolute needs 2)
     "00 00 02 09 80 00 01 00 00 8a 0a" + b"\\ntdll.dll".hex() + "00"
     "81 10 7f ef 00 8a 0d" + b"\\kernel32.dll".hex() + "00"),
])
def test_small_word_vectors(image_map, hex_bytes):
    data = bytes.fromhex(hex_bytes)
    assert encode_image_map(image_map) == data
    assert decode_image_map(data) == image_map


# The document's example paths.
DOC_PATHS = [
    "/System/Library/Frameworks/AppKit.framework/Versions/C/AppKit",
    "/System/Library/Frameworks/Photos.framework/Versions/A/Photos",
    "/usr/lib/libobjc.A.dylib",
    "/usr/lib/libz.1.dylib",
    "/usr/lib/swift/libswiftCore.dylib",
    "/usr/lib/libSystem.B.dylib",
    "/usr/lib/libc++.1.dylib",
]


def _with_paths(path_codes):
    """An image map whose images (all at 0) have these encoded paths."""
    out = bytes.fromhex("02 05") + b"macOS" + bytes([len(path_codes)])
    for code in path_codes:
        out += bytes.fromhex("00 00 00 00") + code
    return out


def _path(text):
    return bytes([len(text)]) + text.encode() + b"\x00"


def test_document_example_decodes():
    # As the document writes them, less the stray <00> it shows after each
    # framewk (framewk ends a path; Swift's decoder reads no end byte).
    codes = [
        b"\x84\x45CAppKit", b"\x84\x45APhotos",
        b"\x81" + _path("/libobjc.A.dylib"), b"\x81" + _path("/libz.1.dylib"),
        b"\x81" + _path("/swift/libswiftCore.dylib"),
        b"\x81" + _path("/libSystem.B.dylib"), b"\x81" + _path("/libc++.1.dylib"),
        b"\x81\xa0" + _path("/b.dylib"),  # code 32 is /swift
    ]
    image_map = decode_image_map(_with_paths(codes))
    assert [image.path for image in image_map.images] == DOC_PATHS + [
        "/usr/lib/swift/b.dylib"]


def test_document_example_encodes_as_swift_does():
    # Swift's encoder matches the longest known prefix again after each
    # expand, so /usr/lib/libobjc... becomes /usr/lib, /lib, "objc...".
    image_map = ImageMap("macOS", [Image(p, 0, 0) for p in DOC_PATHS + [
        "/usr/lib/swift/libswift_Concurrency.dylib"]])
    assert encode_image_map(image_map) == _with_paths([
        b"\x84\x45CAppKit", b"\x84\x45APhotos",
        b"\x81\x80" + _path("objc.A.dylib"), b"\x81\x80" + _path("z.1.dylib"),
        b"\x81" + _path("/swift/libswiftCore.dylib"),
        b"\x81\x80" + _path("System.B.dylib"), b"\x81\x80" + _path("c++.1.dylib"),
        b"\x81\xa0\x80" + _path("swift_Concurrency.dylib"),
    ])


def test_long_text_and_external_codes():
    # 70 directories: str chunks of 63 bytes, codes 64 and up in the
    # expand-with-bytes form.
    deep = "".join(f"/d{i:02}" for i in range(70)) + "/lib.so"
    other = "".join(f"/d{i:02}" for i in range(69)) + "/other.so"
    image_map = ImageMap("", [Image(deep, 0, 0), Image(other, 0, 0)])
    data = encode_image_map(image_map)
    assert bytes([0x3F]) + deep[:63].encode() in data
    # /d00.../d68 is the 69th prefix defined: code 32 + 68 = 100 = 64 + 36
    assert bytes.fromhex("c0 24") + _path("/other.so") in data
    assert decode_image_map(data) == image_map


def test_framework_form_needs_a_name_of_64_bytes_or_less():
    for length in (1, 64, 65):
        name = "N" * length
        path = f"/Library/Frameworks/{name}.framework/Versions/A/{name}"
        data = encode_image_map(ImageMap("", [Image(path, 0, 0)]))
        framework = bytes([0x40 | (length - 1)]) + b"A" + name.encode()
        assert (framework in data) == (length <= 64)
        assert decode_image_map(data).images[0].path == path


# Errors


def _valid():
    return bytes.fromhex(LINUX_BYTES)


@pytest.mark.parametrize("data, offset, message", [
    (b"", 0, "data ends inside the info byte (0 of 1 bytes)"),
    (b"\x03\x00\x00", 0, "info byte 0x03 has the reserved word size 3"),
    (b"\x06\x00\x00", 0, "unsupported image map version 1"),
    (b"\x02\x05linu", 2, "data ends inside the platform name (4 of 5 bytes)"),
    (b"\x02\x00", 2, "data ends inside the image count (0 of 1 bytes)"),
    (b"\x02\x00\x02\x00\x00\x00\x00\x00", 8, "data ends inside image 1 of 2 (0 of 1 bytes)"),
    (b"\x02\x00\x01\x40\x00\x00\x00\x00", 3, "image 0 header 0x40 has reserved bit 6 set"),
    (b"\x00\x00\x01\x10\x00\x00\x00\x00\x00\x00", 3,
     "image 0's base of 3 bytes is wider than a 16-bit word"),
    (b"\x02\x00\x01\x00\x00\x00\x05\x00\x00", 7,
     "data ends inside image 0's build id (2 of 5 bytes)"),
    (b"\x02\x00\x01\x00\x00\x00\x00\x8c\x00", 7,
     "image 0's path expands unknown prefix code 12"),
    (b"\x02\x00\x01\x00\x00\x00\x00\xa0\x00", 7,
     "image 0's path expands unknown prefix code 32"),
    (b"\x02\x00\x01\x00\x00\x00\x00\xc1\x00\x00\x00", 7,
     "image 0's path expands unknown prefix code 64"),
    (b"\x02\x00\x01\x00\x00\x00\x00\x03/ab", 11, "data ends inside image 0's path (0 of 1 bytes)"),
    (b"\x02\x00\x01\x00\x00\x00\x00\x00\x00", 8, "1 bytes after the last image"),
])
def test_errors_name_the_offset(data, offset, message):
    with pytest.raises(ImageMapError) as caught:
        decode_image_map(data)
    assert caught.value.offset == offset
    assert str(caught.value) == f"CIF+{offset:#x}: {message}"


def test_every_cut_is_an_error():
    data = _valid()
    for cut in range(len(data)):
        with pytest.raises(ImageMapError):
            decode_image_map(data[:cut])


def test_expanding_paths_are_bounded():
    # a 63-byte prefix expanded over and over
    text = b"\x3f" + b"/" + b"x" * 61 + b"/"
    data = bytes.fromhex("02 00 01 00 00 00 00") + text + b"\xa0" * 600 + b"\x00"
    with pytest.raises(ImageMapError, match="longer than 32768 bytes"):
        decode_image_map(data)


def test_encoder_refuses_what_the_format_cannot_hold():
    with pytest.raises(ValueError, match="longer than 255"):
        encode_image_map(ImageMap("p" * 256, []))
    with pytest.raises(ValueError, match="base 0x10000 does not fit a 16-bit word"):
        encode_image_map(ImageMap("", [Image("/a", 0x10000, 0x10000)], 16))
    with pytest.raises(ValueError, match="end of text"):
        encode_image_map(ImageMap("", [Image("/a", 0, 1 << 32)], 32))
    with pytest.raises(ValueError, match="word size 8"):
        encode_image_map(ImageMap("", [], 8))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_random_bytes_raise_only_image_map_error(data):
    try:
        image_map = decode_image_map(b"\x02\x00" + data)
    except ImageMapError:
        return
    assert decode_image_map(encode_image_map(image_map)) == image_map


# Round trips

SEGMENTS = ["/usr/lib", "/lib", "/usr/local/lib", "/swift", "/x86_64-linux-gnu",
            "/System/Library/Frameworks", "C:\\Windows\\System32", "C:\\Program Files",
            "\\", "/", "lib", "libc.so.6", "é", "\u65e5\u672c", "a" * 70]
names = st.text(st.sampled_from("ABCxyz_."), min_size=1, max_size=70)


@st.composite
def paths(draw):
    if draw(st.integers(0, 4)) == 0:
        name = draw(names)
        version = draw(st.sampled_from("ABC/é"))
        head = draw(st.sampled_from(["", "/System/Library/Frameworks", "/x"]))
        return f"{head}/{name}.framework/Versions/{version}/{name}"
    return "".join(draw(st.lists(st.one_of(st.sampled_from(SEGMENTS), st.text(
        st.sampled_from("/\\abé.-"), max_size=8)), max_size=6)))


@st.composite
def image_maps(draw):
    bits = draw(st.sampled_from(WORD_SIZES))
    mask = (1 << bits) - 1
    images = []
    base = draw(st.integers(0, mask))
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            base = draw(st.integers(0, mask))
        else:
            base = (base + draw(st.integers(0, 1 << draw(st.integers(0, bits))))) & mask
        end = draw(st.one_of(st.integers(0, mask), st.integers(base, base + 0xFFFF).map(
            lambda value: value & mask)))
        images.append(Image(draw(paths()), base, end, draw(st.binary(max_size=40))))
    platform = draw(st.text(st.characters(exclude_categories=("Cs",)), max_size=20))
    return ImageMap(platform, images, bits)


@settings(max_examples=150, deadline=None)
@given(image_maps())
def test_round_trip(image_map):
    data = encode_image_map(image_map)
    assert decode_image_map(data) == image_map
    assert encode_image_map(decode_image_map(data)) == data
