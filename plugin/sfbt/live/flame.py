"""Flame graphs of saved stacks: an interactive SVG (tooltips, click to
zoom, Escape to reset: its script is inside the file) and speedscope's
JSON (https://www.speedscope.app/file-format-schema.json).

Names come from each archived image's symbols (its separate debug file
under /usr/lib/debug/.build-id when there is one), found by build id or
path, as `sfbt stack` names frames."""

import html
import json
import os
import zlib

from ..archive.report import trace_names
from ..elf import ElfError, open_elf
from ..printable import printable
from ..unwind.target import Module
from .mappings import VDSO_NAME
from .symbols import ModuleSymbols

WIDTH = 1200
ROW = 16
FONT = 12
MARGIN = 10
TOP = 34  # title and hint above the graph


class ImageNamer:
    """Function names of run-time addresses in archived images."""

    def __init__(self):
        self._symbols = {}

    def _module(self, image):
        key = (image.path, image.base, image.build_id)
        if key not in self._symbols:
            module = None
            build_id = image.build_id.hex() if image.build_id else None
            path = image.path if image.path != VDSO_NAME else None
            first = None
            if path and os.path.exists(path):
                try:
                    stream, elf = open_elf(path)
                    with stream:
                        first = elf.first_load_address() or 0
                        if build_id and elf.build_id() not in (None, build_id):
                            first = None  # another build: its symbols would lie
                except (OSError, ElfError):
                    first = None
            if first is not None:
                module = Module(path, image.base - first, image.base, image.end_of_text,
                                build_id, image.base)
            self._symbols[key] = ModuleSymbols(module) if module else None
        return self._symbols[key]

    def name(self, address, images):
        """The name, escaped (sfbt.printable)."""
        image = next((i for i in images if i.base <= address < i.end_of_text), None)
        if image is None:
            return f"{address:#x}"
        symbols = self._module(image)
        name = symbols.function(address - symbols.module.load_bias) if symbols else None
        return printable(name or f"{os.path.basename(image.path)}+{address - image.base:#x}")


def folded_stacks(traces):
    """[(names root first, weight)] of saved traces (sfbt.archive.saved);
    the names are escaped (ImageNamer)."""
    namer = ImageNamer()
    stacks = []
    for trace in traces:
        names = trace_names(trace.frames, lambda lookup: namer.name(lookup, trace.images))
        stacks.append((names[::-1], trace.weight))
    return stacks


class _Node:
    __slots__ = ("name", "value", "children")

    def __init__(self, name):
        self.name = name
        self.value = 0
        self.children = {}


def _tree(stacks):
    root = _Node("all")
    for names, weight in stacks:
        node = root
        node.value += weight
        for name in names:
            node = node.children.setdefault(name, _Node(name))
            node.value += weight
    return root


def _color(name):
    """A warm colour that stays the same for the same name."""
    value = zlib.crc32(name.encode())
    return (f"rgb({205 + value % 50},{80 + (value >> 8) % 120},"
            f"{(value >> 16) % 55})")


_SCRIPT = """
var svg = document.documentElement, frames = svg.querySelectorAll("g.f");
var full = %(width)d, margin = %(margin)d;
function fit(g, x, w) {
  var r = g.querySelector("rect"), t = g.querySelector("text");
  r.setAttribute("x", x); r.setAttribute("width", Math.max(w, 0));
  t.setAttribute("x", x + 3);
  var name = g.getAttribute("data-name"), room = Math.floor((w - 6) / 7);
  t.textContent = room < 3 ? "" : (name.length <= room ? name
                                   : name.substring(0, room - 2) + "..");
  g.style.display = w < 0.5 ? "none" : "";
}
function zoom(target) {
  var x0 = +target.getAttribute("data-x"), w0 = +target.getAttribute("data-w");
  var d0 = +target.getAttribute("data-d"), scale = (full - 2 * margin) / w0;
  frames.forEach(function (g) {
    var x = +g.getAttribute("data-x"), w = +g.getAttribute("data-w");
    var d = +g.getAttribute("data-d");
    var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9;
    var below = d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
    if (inside && d >= d0) fit(g, margin + (x - x0) * scale, w * scale);
    else if (below) fit(g, margin, full - 2 * margin);
    else g.style.display = "none";
    g.style.opacity = below ? 0.6 : 1;
  });
}
frames.forEach(function (g) {
  g.addEventListener("click", function () { zoom(g); });
});
document.addEventListener("keydown", function (e) {
  if (e.key === "Escape") zoom(frames[0]);
});
zoom(frames[0]);
"""


def _fitted(name, width):
    """The name cut to what fits ``width`` pixels (as the script does)."""
    room = int((width - 6) // 7)
    if room < 3:
        return ""
    return name if len(name) <= room else name[:room - 2] + ".."


def flame_svg(stacks, title="Flame graph"):
    """An SVG flame graph: the root at the bottom, callers below callees.
    Names come from folded_stacks, escaped (sfbt.printable), and the title
    is escaped here: XML allows no control characters, not even as
    character references."""
    title = printable(title)
    root = _tree(stacks)
    total = root.value or 1
    unit = (WIDTH - 2 * MARGIN) / total
    depth = _depth(root)
    height = TOP + (depth + 1) * ROW + MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'font-family="Verdana, sans-serif" font-size="{FONT}">',
        f"<title>{html.escape(title)}</title>",
        '<style>g.f:hover rect { stroke: #000; stroke-width: 0.5 } '
        "g.f { cursor: pointer }</style>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fff8ee"/>',
        f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="16">'
        f"{html.escape(title)}</text>",
        f'<text x="{MARGIN}" y="30" font-size="10" fill="#555">click a frame to zoom, '
        "Escape to reset; hover for counts</text>",
    ]
    todo = [(root, 0.0, 0)]
    while todo:
        node, x, level = todo.pop()
        width = node.value * unit
        y = height - MARGIN - (level + 1) * ROW
        share = 100.0 * node.value / total
        samples = "sample" if node.value == 1 else "samples"
        label = html.escape(node.name, quote=True)
        parts.append(
            f'<g class="f" data-name="{label}" data-x="{x:.3f}" data-w="{width:.3f}" '
            f'data-d="{level}"><title>{label} ({node.value} {samples}, {share:.2f}%)'
            f'</title><rect x="{MARGIN + x:.2f}" y="{y}" width="{width:.2f}" '
            f'height="{ROW - 1}" rx="2" fill="{_color(node.name)}"/>'
            f'<text x="{MARGIN + x + 3:.2f}" y="{y + ROW - 4}">'
            f'{html.escape(_fitted(node.name, width))}</text></g>')
        child_x = x
        for child in sorted(node.children.values(), key=lambda n: n.name):
            todo.append((child, child_x, level + 1))
            child_x += child.value * unit
    parts.append(f"<script><![CDATA[{_SCRIPT % {'width': WIDTH, 'margin': MARGIN}}]]>"
                 "</script></svg>\n")
    return "\n".join(parts)


def _depth(root):
    deepest, todo = 0, [(root, 0)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        todo += [(child, level + 1) for child in node.children.values()]
    return deepest


def speedscope(stacks, name="sfbt"):
    """speedscope's file format: one sampled profile, weights in samples."""
    from .. import __version__
    name = printable(name)
    frames, index = [], {}
    samples, weights = [], []
    for names, weight in stacks:
        stack = []
        for frame in names:
            if frame not in index:
                index[frame] = len(frames)
                frames.append({"name": frame})
            stack.append(index[frame])
        samples.append(stack)
        weights.append(weight)
    total = sum(weights)
    document = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": frames},
        "profiles": [{"type": "sampled", "name": name, "unit": "none",
                      "startValue": 0, "endValue": total,
                      "samples": samples, "weights": weights}],
        "name": name, "activeProfileIndex": 0,
        "exporter": f"sfbt {__version__}",
    }
    return json.dumps(document) + "\n"
