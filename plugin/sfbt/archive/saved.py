"""Reading back every form cbf-save writes: an sfbt archive, Swift's JSON
crash form, a file of libwebsockets ``~m#`` lines, or bare CBF bytes."""

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Optional

from ..errors import SfbtError
from . import cbf, lws
from .imagemap import decode_image_map
from .report import frame_lines, trace_heading
from .store import is_archive, parse_archive


class SavedFormError(SfbtError):
    """A saved file whose form (JSON, lws) is malformed."""


@dataclass
class SavedTrace:
    heading: Optional[str]  # None for a file of one bare backtrace
    frames: list
    truncated: bool
    images: list
    weight: int


def saved_form(data: bytes) -> str:
    """Which form cbf-save wrote: "archive", "json", "lws" or (anything
    else) "cbf"."""
    if is_archive(data):
        return "archive"
    if data.lstrip().startswith(b"{"):
        return "json"
    if b"~m#" in data:
        return "lws"
    return "cbf"


def saved_traces(data: bytes, path: str):
    """([SavedTrace], the ArchiveError that ended an archive early (naming
    ``path``) or None).  Other malformed input raises an SfbtError that
    names the place in the data, not the file."""
    form = saved_form(data)
    if form == "archive":
        archive, error = parse_archive(data, path)
        traces = []
        for number, trace in enumerate(archive.traces.values(), 1):
            if not trace.events:
                continue
            decoded = trace.decoded()
            images = archive.image_map(trace.events[0].image_map_index).images
            traces.append(SavedTrace(trace_heading(number, trace), decoded.frames,
                                     decoded.truncated, images, trace.count))
        return traces, error
    if form == "json":
        return [_json_trace(data)], None
    if form == "lws":
        return _lws_traces(data), None
    decoded = cbf.decode(data)
    return [SavedTrace(None, decoded.frames, decoded.truncated, [], 1)], None


def _json_trace(data):
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise SavedFormError(f"not a JSON document: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("backtrace"), str):
        raise SavedFormError('not a saved backtrace: no "backtrace" string in the '
                             "JSON object")
    image_map = document.get("imageMap")
    if image_map is not None and not isinstance(image_map, str):
        raise SavedFormError('"imageMap" is not a base64 string')
    try:
        backtrace = base64.b64decode(document["backtrace"], validate=True)
        images = decode_image_map(base64.b64decode(image_map, validate=True)).images \
            if image_map else []
    except binascii.Error as error:
        raise SavedFormError(f"bad base64: {error}") from None
    decoded = cbf.decode(backtrace)
    return SavedTrace(None, decoded.frames, decoded.truncated, images, 1)


def _lws_traces(data):
    traces = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        for blob in lws.find_blobs(line):
            try:
                addresses, size = lws.decode_blob(blob)
            except lws.LwsFormatError as error:
                raise lws.LwsFormatError(f"line {number}: {error}") from None
            frames = [cbf.Frame("ra", a) for a in addresses]
            traces.append(SavedTrace(f"Backtrace from line {number} (size {size}):",
                                     frames, False, [], 1))
    return traces


def saved_trace_lines(traces, make_describer):
    """sframe-bt's layout for saved traces; ``make_describer(images)`` gives
    describe(lookup address) -> (name, where)."""
    lines = []
    for trace in traces:
        if trace.heading:
            lines.append(trace.heading)
        lines += frame_lines(trace.frames, trace.truncated, make_describer(trace.images))
    return lines
