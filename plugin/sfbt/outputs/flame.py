"""Flame graphs of saved stacks: an interactive SVG (tooltips, zoom,
search, a width that follows the window: its script, flame.js, is inside
the file); with --per-thread a root frame per thread (``name (tid)``),
and stacks cut short under ``[cut]`` (sfbt.outputs.roots).

Names come from Options.frame_names (each archived image's symbols,
names.ImageNamer), the kernel's signal trampoline
`<signal handler called>` (sfbt.archive.report.trace_names)."""

import html
from collections import deque
import os
import zlib

from ..errors import left_out
from ..printable import printable
from . import stack_names

BY_THREAD = False

WIDTH = 1200
ROW = 16
FONT = 12
MARGIN = 10
TOP = 64  # title, what was sampled, and the buttons above the graph
BOTTOM = 24  # the status line below it
#: frames narrower than this many pixels (of WIDTH) are left out, as
#: flamegraph.pl's --minwidth does: a graph of 100,000 distinct stacks
#: stays one a browser opens
MIN_WIDTH = 0.1
#: frames drawn at most (the root's level first, then the next); the rest
#: are left out
MAX_FRAMES = 30000


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


def _script():
    """flame.js, the script inside every SVG."""
    with open(os.path.join(os.path.dirname(__file__), "flame.js"), encoding="utf-8") as stream:
        return stream.read()


def _fitted(name, width):
    """The name cut to what fits ``width`` pixels (as the script does)."""
    room = int((width - 6) // 7)
    if room < 3:
        return ""
    return name if len(name) <= room else name[:room - 2] + ".."


def flame_svg(stacks, title="Flame graph", details=""):
    """An SVG flame graph: the root at the bottom, callers below callees;
    ``details`` is the line under the title (what was sampled).  Frames
    are placed in percentages of the graph's width: the script makes the
    width follow the window, and the file is drawn right without it.
    Names come from folded_stacks, escaped (sfbt.printable), and the title
    and details are escaped here: XML allows no control characters, not
    even as character references."""
    title, details = printable(title), printable(details)
    root = _tree(stacks)
    total = root.value or 1
    inner = WIDTH - 2 * MARGIN
    drawn, omitted = _drawn(root, total * MIN_WIDTH / inner)
    if omitted:
        left_out(f"flame: {omitted:,} frames narrower than {MIN_WIDTH} px or beyond the "
                 f"first {MAX_FRAMES:,} left out")
    graph = (max(level for _, _, level in drawn) + 1) * ROW
    height = TOP + graph + BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" '
        f'height="{height}" data-total="{root.value}" data-margin="{MARGIN}" '
        f'font-family="Verdana, sans-serif" font-size="{FONT}">',
        f"<title>{html.escape(title)}</title>",
        '<style>g.f:hover rect { stroke: #000; stroke-width: 0.5 } '
        "g.f, .button { cursor: pointer } .button { fill: #136 }</style>",
        '<rect x="0" y="0" width="100%" height="100%" fill="#fff8ee"/>',
        f'<text x="50%" y="20" text-anchor="middle" font-size="16">{html.escape(title)}</text>',
        f'<text id="details" x="50%" y="38" text-anchor="middle" font-size="11" '
        f'fill="#444">{html.escape(details)}</text>',
        f'<svg class="band" x="{MARGIN}" y="44" width="{inner}" height="{ROW}">'
        '<text id="unzoom" class="button" x="0" y="12" style="display: none">Reset zoom</text>'
        '<text id="search" class="button" x="100%" y="12" text-anchor="end">Search</text></svg>',
        f'<svg id="frames" class="band" x="{MARGIN}" y="{TOP}" width="{inner}" '
        f'height="{graph}">',
    ]
    for node, first, level in drawn:
        x, width = 100.0 * first / total, 100.0 * node.value / total
        y = graph - (level + 1) * ROW
        samples = "sample" if node.value == 1 else "samples"
        label = html.escape(node.name, quote=True)
        parts.append(
            f'<g class="f" data-name="{label}" data-s="{first}" data-v="{node.value}" '
            f'data-d="{level}"><title>{label} ({node.value} {samples}, {width:.2f}%)'
            f'</title><rect x="{x:.4f}%" y="{y}" width="{width:.4f}%" '
            f'height="{ROW - 1}" rx="2" fill="{_color(node.name)}"/>'
            f'<text x="{x:.4f}%" dx="3" y="{y + ROW - 4}">'
            f'{html.escape(_fitted(node.name, width * inner / 100))}</text></g>')
    parts += [
        "</svg>",
        f'<svg class="band" x="{MARGIN}" y="{height - BOTTOM + 4}" width="{inner}" '
        f'height="{ROW}" font-size="10">'
        '<text id="status" x="0" y="12" fill="#555">click a frame to zoom, Ctrl-F to '
        "search, Escape to reset; hover for counts</text>"
        '<text id="matched" x="100%" y="12" text-anchor="end" fill="#555"></text></svg>',
        f"<script><![CDATA[\n{_script()}]]></script></svg>\n",
    ]
    return "\n".join(parts)


def _drawn(root, narrowest):
    """([(node, first sample, level)] of the frames to draw, each before
    its children: those of at least ``narrowest`` samples, at most
    MAX_FRAMES of them, chosen a level at a time from the root's; and how
    many were left out."""
    kept, omitted = set(), 0
    todo = deque([root])
    while todo:
        node = todo.popleft()
        if node.value < narrowest or len(kept) >= MAX_FRAMES:
            omitted += _size(node)
            continue
        kept.add(id(node))
        todo += node.children.values()
    drawn, stack = [], [(root, 0, 0)]
    while stack:
        node, first, level = stack.pop()
        drawn.append((node, first, level))
        child_first = first
        for child in sorted(node.children.values(), key=lambda n: n.name):
            if id(child) in kept:
                stack.append((child, child_first, level + 1))
            child_first += child.value
    return drawn, omitted


def _size(root):
    """The number of frames of a subtree."""
    count, todo = 0, [root]
    while todo:
        node = todo.pop()
        count += 1
        todo += node.children.values()
    return count


def write(samples, options):
    stacks = [(stack_names(sample, options), sample.weight) for sample in samples]
    recording = samples.recording
    total = samples.stacks
    details = recording.describe() if recording else \
        f"{total} stack{'s' if total != 1 else ''}"
    yield flame_svg(stacks, options.title or "Flame graph", details).encode()
