"""Hostile inputs built on purpose (tests and bench/fuzz.py): image maps
that expand a few bytes into megabytes, archives of many of them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugin"))

from sfbt.archive import cbf  # noqa: E402
from sfbt.archive.store import MAGIC, Archive, Event  # noqa: E402


def _expand(code):
    return bytes([0x80 | code]) if code < 64 else bytes([0xC0, code - 64])


def doubling_image_map(salt=0, images=500, doublings=14):
    """An image map of about 3.5 KB that decodes to 16 MB: its first path
    defines prefixes twice as long each time (``a``, ``a/a``, ``a/a/a/a``,
    ...), every other path expands the longest but one twice (32 KiB).
    ``salt`` (0-255) goes into the platform name, to make maps distinct."""
    body = bytearray([0x02, 0x01, salt & 0xFF])  # 64-bit, a 1-byte platform name
    body += bytes([0x80 | images >> 7, images & 0x7F])
    body += bytes([0x00, 0x00, 0x00, 0x00])  # base 0, size 0, no build id
    body += b"\x02a/"  # str "a/": defines "a" (code 32)
    for code in range(32, 32 + doublings):
        body += _expand(code) + b"\x01/"  # then "/": defines all so far
    body += b"\x00"
    twice = _expand(31 + doublings) * 2
    for _ in range(images - 1):
        body += bytes([0x00, 0x00, 0x00, 0x00]) + twice + b"\x00"
    return bytes(body)


def archive_of_maps(maps, traces_first=1):
    """Archive bytes: ``traces_first`` one-frame traces using a plain map,
    then the maps given (bytes, not checked), then one trace using each."""
    archive = Archive()
    plain = archive.add_image_map(bytes([0x02, 0x00, 0x00]))  # no images
    for number in range(traces_first):
        trace = archive.add_trace(cbf.encode([cbf.Frame("pc", 0x400000 + number)]))
        archive.add_event(Event(trace, plain, thread="1", reason="SIGTRAP"))
    indexes = [archive.add_image_map(data) for data in maps]
    for number, index in enumerate(indexes):
        trace = archive.add_trace(cbf.encode([cbf.Frame("pc", 0x500000 + number)]))
        archive.add_event(Event(trace, index, thread="1", reason="SIGTRAP"))
    return MAGIC + archive.pending_bytes()


def record_offsets(data):
    """The offset of each record of archive bytes (after the magic)."""
    import struct
    offsets, at = [], len(MAGIC)
    while at < len(data):
        offsets.append(at)
        at += 5 + struct.unpack_from("<I", data, at + 1)[0] + 4
    return offsets
