"""speedscope's file format
(https://www.speedscope.app/file-format-schema.json): one sampled profile,
weights in samples; with --per-thread one profile per thread, named as
its root frame would be (``name (tid)``)."""

import json

from ..printable import printable
from . import stack_names

BY_THREAD = False


def write(samples, options):
    from .. import __version__
    name = printable(options.title or "sfbt")
    frames, index = [], {}
    profiles = {}  # profile name -> (stacks, weights)
    for sample in samples:
        names = stack_names(sample, options)
        if options.per_thread:  # the thread's root is the profile
            profile, names = names[0], names[1:]
        else:
            profile = name
        stack = []
        for frame in names:
            if frame not in index:
                index[frame] = len(frames)
                frames.append({"name": frame})
            stack.append(index[frame])
        stacks, weights = profiles.setdefault(profile, ([], []))
        stacks.append(stack)
        weights.append(sample.weight)
    profiles = profiles or {name: ([], [])}
    document = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": frames},
        "profiles": [{"type": "sampled", "name": profile, "unit": "none",
                      "startValue": 0, "endValue": sum(weights),
                      "samples": stacks, "weights": weights}
                     for profile, (stacks, weights) in profiles.items()],
        "name": name, "activeProfileIndex": 0,
        "exporter": f"sfbt {__version__}",
    }
    yield (json.dumps(document) + "\n").encode()
