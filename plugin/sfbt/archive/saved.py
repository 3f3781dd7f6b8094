"""Reading back every form cbf-save writes: an sfbt archive, Swift's JSON
crash form, a file of libwebsockets ``~m#`` lines, or bare CBF bytes."""

import base64
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

from ..errors import SfbtError
from ..files import ReadAs, open_regular
from ..lines import bounded_lines
from . import cbf, lws
from .imagemap import decode_image_map
from .report import frame_lines, trace_heading
from .store import (MAGIC, ArchiveError, ArchiveReader, is_archive,
                    iter_records, record_bytes)
from .threads import SampleGroup


class SavedFormError(SfbtError):
    """A saved file whose form (JSON, lws) is malformed."""


@dataclass
class SavedTrace:
    heading: Optional[str]  # None for a file of one bare backtrace
    frames: list
    truncated: bool
    images: list
    weight: int
    callers: tuple = ()  # cbf.Backtrace.callers
    #: who captured it, how often (threads.SampleGroup: thread, cut, weight);
    #: one group of no thread for the forms that hold no events
    groups: List[SampleGroup] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = [SampleGroup(None, False, self.weight)]


#: The most bytes read whole: a bare CBF trace (a million frames fit) or
#: a JSON document.  Larger files are archives or logs, read piecewise.
MAX_WHOLE_BYTES = 16 << 20


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


def input_name(path):
    """How errors name the input: ``path``, or <stdin> for "-"."""
    return "<stdin>" if path == "-" else path


class SavedFile:
    """A file in any form cbf-save writes, read a backtrace at a time:
    ``traces()`` yields SavedTraces; afterwards ``error`` is the
    ArchiveError that ended an archive early (naming the file), or None,
    and ``recording`` an archive's sfbt.archive.recording.Recording (None
    for the other forms).
    Other malformed input raises an SfbtError that names the place in the
    data, not the file.  ``path`` "-" is standard input."""

    def __init__(self, path):
        self.path = path
        self.error = None
        self.recording = None
        self._copy_error = None  # what ended an archive copied from standard input
        self.size = None
        if path == "-":
            import sys
            self.path = input_name(path)
            head = sys.stdin.buffer.read(MAX_WHOLE_BYTES + 1)
            self.stream = io.BufferedReader(_Prefixed(head, sys.stdin.buffer))
            self._given = sys.stdin.buffer
        else:
            self.stream = self._given = open_regular(path)
        try:
            if path != "-":
                head = self.stream.read(MAX_WHOLE_BYTES + 1)
                self.stream.seek(0)
            self.form = saved_form(head)
            if self.form == "archive":
                if path == "-":
                    self.stream, self._copy_error = _copied_archive(self.stream,
                                                                    self.path)
                self.size = os.fstat(self.stream.fileno()).st_size
            if len(head) > MAX_WHOLE_BYTES and self.form != "archive":
                if self.form == "json":
                    raise SavedFormError(f"a JSON document of more than "
                                         f"{MAX_WHOLE_BYTES} bytes")
                self.form = "lws"  # too long for one trace: a log
            self.data = head if self.form in ("json", "cbf") else None
        except BaseException:
            self.stream.close()
            raise

    @classmethod
    def made_from(cls, path, archive, read_as, refused, other_builds):
        """A SavedFile of the archive open as ``archive`` (a temporary file),
        made from the file at ``path`` (a perf.data): errors name ``path``,
        files are read as ``read_as`` (the ReadAs of the file it was made
        from); ``refused``: the files it names that were not read, and why;
        ``other_builds``: those not read as they are not the build it names."""
        saved = cls.__new__(cls)
        saved.refused, saved.other_builds = refused, other_builds
        saved.path, saved.error, saved.recording, saved._copy_error = path, None, None, None
        saved.stream = saved._given = archive
        saved.size = os.fstat(archive.fileno()).st_size
        saved.form, saved.data, saved._read_as = "archive", None, read_as
        return saved

    _read_as = None
    #: the files the file it was made from names that were not read
    #: (path -> why), as its owner could not read them
    refused: dict = {}
    other_builds: dict = {}

    def read_as(self):
        """The files.ReadAs of the file's owner (standard input's: a pipe
        is the invoking user's), as whom the files it names are read."""
        if self._read_as is not None:
            return self._read_as
        return ReadAs.owner_of(self._given.fileno(), "the archive's owner")

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.stream.close()

    def traces(self):
        if self.form == "archive":
            yield from self._archive_traces()
        elif self.form == "json":
            yield _json_trace(self.data)
        elif self.form == "lws":
            yield from _lws_traces(self.stream)
        else:
            decoded = cbf.decode(self.data)
            yield SavedTrace(None, decoded.frames, decoded.truncated, [], 1)

    def _archive_traces(self):
        reader = ArchiveReader(self.stream, self.path, self.size)
        try:
            for number, event, groups, decoded in reader.traces():
                images = reader.image_map(event.image_map_index).images
                yield SavedTrace(trace_heading(number, event, groups),
                                 decoded.frames, decoded.truncated, images,
                                 groups[0].weight if len(groups) == 1 else
                                 sum(group.weight for group in groups), decoded.callers,
                                 groups)
        finally:
            self.error = reader.error or self._copy_error
            self.recording = reader.recording


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes (head) were read already: head, then
    the rest of the stream."""

    def __init__(self, head, rest):
        self._head = io.BytesIO(head)
        self._rest = rest

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._head.readinto(buffer) or self._rest.readinto(buffer)


def _copied_archive(stream, where):
    """(temporary file, ArchiveError or None): an archive read from a
    stream that cannot seek (standard input) copied a whole record at a
    time, up to its first damage, into an unnamed temporary file, so that
    memory stays bounded and garbage is never copied."""
    copy = tempfile.TemporaryFile()
    try:
        copy.write(stream.read(len(MAGIC)))
        try:
            for _, kind, payload in iter_records(stream, where):
                copy.write(record_bytes(kind, payload))
            error = None
        except ArchiveError as damage:
            error = damage
        copy.flush()
        copy.seek(0)
        return copy, error
    except BaseException:
        copy.close()
        raise


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
    except ValueError as error:  # binascii.Error, or text that is not ASCII
        raise SavedFormError(f"bad base64: {error}") from None
    decoded = cbf.decode(backtrace)
    return SavedTrace(None, decoded.frames, decoded.truncated, images, 1)


def _lws_traces(stream):
    for number, line in enumerate(bounded_lines(stream), 1):
        for blob in lws.find_blobs(line):
            try:
                addresses, size = lws.decode_blob(blob)
            except lws.LwsFormatError as error:
                raise lws.LwsFormatError(f"line {number}: {error}") from None
            frames = [cbf.Frame("ra", a) for a in addresses]
            yield SavedTrace(f"Backtrace from line {number} (size {size}):",
                             frames, False, [], 1)


def saved_trace_lines(trace, make_describer, layout):
    """A saved trace's lines in ``layout`` (sframe-bt's, sfbt.archive.layout);
    ``make_describer(images)`` gives describe(lookup address) -> FrameName
    (frame_lines)."""
    lines = [trace.heading] if trace.heading else []
    return lines + frame_lines(trace.frames, trace.truncated, make_describer(trace.images),
                               layout)


def saved_trace_text(trace, make_frame_texts):
    """The lines of saved_trace_lines joined by newlines, from
    ``make_frame_texts(images)`` -> a FrameTexts (kept across traces)."""
    text = make_frame_texts(trace.images).text(trace.frames, trace.truncated, trace.callers)
    if not trace.heading:
        return text
    return f"{trace.heading}\n{text}" if text else trace.heading
