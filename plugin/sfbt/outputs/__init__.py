"""What saved stacks are written as: folded stacks (`sfbt fold`), an SVG
flame graph, speedscope's JSON, a pprof profile (`sfbt flame --format`).

Each format is one module here behind one seam: ``write(samples,
options)`` takes the saved file's Samples (each distinct trace's
captures, per thread where asked or where the format always tells threads
apart, ``BY_THREAD``) and yields its bytes, and FORMATS registers it.  A
new format is one module and one line of FORMATS.  Names are escaped
(sfbt.printable) wherever they come from: the saved file's images
(``Options.frame_names``), a thread's name, the file's label."""

import importlib
from types import ModuleType
from typing import Callable, Iterator, List, NamedTuple, Optional, Tuple

from ..archive.imagemap import PerImageMap
from ..archive.recording import Recording
from ..archive.report import FrameNames
from ..archive.saved import SavedFile, SavedTrace
from ..archive.threads import SampledThread

#: format name -> its module here
FORMATS = {"fold": "fold", "svg": "flame", "speedscope": "speedscope", "pprof": "pprof"}
#: the root frame of a stack cut short by the end of its copy (the
#: sampler's stack copy ended before the walk did)
CUT_ROOT = "[cut]"
#: the root frame of a thread's stacks where the saved file names none
UNKNOWN_THREAD = "[unknown thread]"


class Sample(NamedTuple):
    """One trace's captures by one thread (None: by every thread, or a
    form that names none), cut or not: how many."""

    trace: SavedTrace
    thread: Optional[SampledThread]
    cut: bool
    weight: int


class Samples:
    """The Samples of a saved file (sfbt.archive.saved.SavedFile), one per
    trace and, with ``per_thread``, per thread, complete and cut ones
    apart; counted as they go: ``stacks``, ``cut``, ``distinct`` traces.
    ``recording`` is the archive's summary once they are read (None for
    the forms without events)."""

    def __init__(self, saved: SavedFile, per_thread: bool):
        self.saved = saved
        self.per_thread = per_thread
        self.stacks = 0
        self.cut = 0
        self.distinct = 0

    @property
    def recording(self) -> Optional[Recording]:
        return self.saved.recording

    def __iter__(self) -> Iterator[Sample]:
        for trace in self.saved.traces():
            self.distinct += 1
            for sample in self._split(trace):
                self.stacks += sample.weight
                self.cut += sample.weight if sample.cut else 0
                yield sample

    def _split(self, trace: SavedTrace) -> List[Sample]:
        if len(trace.groups) == 1:  # the usual: one thread's
            (thread, cut, weight), = trace.groups
            return [Sample(trace, thread if self.per_thread else None, cut, weight)]
        if self.per_thread:
            return [Sample(trace, group.thread, group.cut, group.weight)
                    for group in trace.groups]
        counts = {False: 0, True: 0}
        for group in trace.groups:
            counts[group.cut] += group.weight
        return [Sample(trace, None, cut, count) for cut, count in counts.items() if count]


class Options:
    """What the command line asks of an output: samples per thread,
    a title, and ``frame_names(images)`` -> the FrameNames
    (sfbt.archive.report) that names a trace's frames in that image
    map (default: each image's symbols, names.ImageNamer)."""

    def __init__(self, per_thread: bool = False, title: str = "",
                 frame_names: Optional[Callable[[list], FrameNames]] = None):
        self.per_thread = per_thread
        self.title = title
        if frame_names is None:
            from .names import ImageNamer
            frame_names = PerImageMap(ImageNamer().frame_names)
        self.frame_names = frame_names


def roots(sample: Sample, per_thread: bool) -> List[str]:
    """The frames a sample's stack is put under, outermost first: its
    thread's (``name (tid)``) with ``per_thread``, then CUT_ROOT where it
    was cut."""
    heading = []
    if per_thread:
        heading.append(sample.thread.heading() if sample.thread is not None
                       else UNKNOWN_THREAD)
    if sample.cut:
        heading.append(CUT_ROOT)
    return heading


def stack_names(sample: Sample, options: Options) -> List[str]:
    """The names of a sample's stack, root first, under its roots."""
    trace = sample.trace
    names = options.frame_names(trace.images).names(trace.frames)
    return roots(sample, options.per_thread) + names[::-1]


def output_module(name: str) -> ModuleType:
    """The module that writes format ``name`` (of FORMATS)."""
    return importlib.import_module(f"{__name__}.{FORMATS[name]}")


def write(name: str, saved: SavedFile, options: Options) -> Tuple[Iterator[bytes], Samples]:
    """(the bytes of format ``name``, as they are made; the Samples they
    are made of, counted once the bytes are all read)."""
    module = output_module(name)
    samples = Samples(saved, options.per_thread or module.BY_THREAD)
    return module.write(samples, options), samples
