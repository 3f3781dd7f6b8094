"""Function names and source lines of run-time addresses in archived
images, for the outputs drawn by `sfbt flame` (its SVG, speedscope's JSON,
pprof's profile): the archive's one namer (sfbt.archive.symbolize's
Symbolizer, as `sfbt fold` and `cbf decode` name frames; the kernel's
from /proc/kallsyms), an address without a name named after its image
and offset."""

import os

from ..archive.imagemap import PerImageMap, image_finder
from ..archive.report import FrameNames
from ..archive.symbolize import Symbolizer, kernel_range
from ..printable import printable


class ImageNamer:
    """Names of run-time addresses in archived images: each image's
    symbols (those of its separate debug file when there is one:
    sfbt.debuginfo), found by build id or path; a damaged table gives no
    names."""

    def __init__(self):
        self.symbolizer = Symbolizer(strict=False)
        self._finders = PerImageMap(image_finder)

    def image_of(self, address, images):
        """The image whose text holds a run-time address, or None."""
        return self._finders(images)(address)

    def has_symbols(self, image):
        return self.symbolizer.for_image(image) is not None

    def frame_name(self, address, images):
        """The FrameName (sfbt.frame_name) of a run-time address."""
        return self.symbolizer.describer(images)(address)

    def function_names(self, address, images):
        """The functions of frame_name() (innermost first, the calls
        inlined there first), escaped (sfbt.printable), each unknown one
        named after its image and offset."""
        return [printable(name) if name else self.unnamed(address, images)
                for name in self.frame_name(address, images).functions()]

    def frame_names(self, images):
        """The FrameNames (sfbt.archive.report) of the frames of traces in
        one image map."""
        return FrameNames(self.symbolizer.describer(images),
                          lambda frame: self.unnamed(frame.lookup_address, images),
                          kernel_range(images))

    def unnamed(self, address, images):
        """The name of an address whose function is not known: its image's
        file name and its offset there, else the address."""
        image = self.image_of(address, images)
        if image is None:
            return f"{address:#x}"
        return printable(f"{os.path.basename(image.path)}+{address - image.base:#x}")
