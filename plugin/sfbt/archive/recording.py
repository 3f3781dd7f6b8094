"""What an archive's events say about how its stacks were sampled: how
many, of how many threads, over how long and at what rate, under which
label, how many of its stacks were cut (store.Event.cut).  Read as the
events go by, in constant memory (threads counted up to MAX_THREADS, by a
hash of their names and ids)."""

import re

MAX_THREADS = 100_000
#: the stop reason of a sample of every thread on the wall clock
SAMPLE = "sample"
_CPU_SAMPLE = re.compile(r"sample on CPU at ([0-9]+(?:\.[0-9]+)?) Hz")


def cpu_sample(hz):
    """The stop reason of a sample taken every 1/``hz`` s of a thread's
    processor time (perf events' cpu-clock)."""
    return f"sample on CPU at {hz:g} Hz"

#: the most of a label that describe() shows
MAX_LABEL = 200


class Recording:
    """A summary of an archive's events (sfbt.archive.store.Event)."""

    def __init__(self):
        self.stacks = 0
        self.cut = 0  # stacks whose copy ended before the walk did
        self.samples = 0  # distinct capture times: `sfbt record` gives a tick's stacks one time
        self.first_ns = None
        self.last_ns = None
        self.labels = set()  # up to two: one label, or "several"
        self.reasons = set()  # the same of the events' stop reasons
        self._threads = set()
        self._time = None

    def add(self, event):
        self.stacks += 1
        self.cut += event.cut
        if event.time_ns != self._time:
            self.samples += 1
            self._time = event.time_ns
        if event.time_ns:
            self.first_ns = min(self.first_ns or event.time_ns, event.time_ns)
            self.last_ns = max(self.last_ns or 0, event.time_ns)
        if len(self._threads) < MAX_THREADS:
            self._threads.add(hash((event.thread, event.pid, event.tid)))
        if len(self.labels) < 2:
            self.labels.add(event.label)
        if len(self.reasons) < 2:
            self.reasons.add(event.reason)

    @property
    def threads(self):
        return len(self._threads)

    @property
    def rate(self):
        """Samples a second, from the first sample to the last; None for
        fewer than two samples."""
        span = (self.last_ns or 0) - (self.first_ns or 0)
        return (self.samples - 1) * 1e9 / span if self.samples > 1 and span > 0 else None

    @property
    def duration_ns(self):
        """From the first sample to one period after the last, or 0."""
        rate = self.rate
        return int(self.samples * 1e9 / rate) if rate else 0

    @property
    def cpu_period_ns(self):
        """The processor time each sample stands for, where every event is
        a sample on CPU at one rate (cpu_sample), else None."""
        if len(self.reasons) != 1:
            return None
        match = _CPU_SAMPLE.fullmatch(next(iter(self.reasons)))
        hz = float(match.group(1)) if match else 0.0
        return round(1e9 / hz) if hz > 0 else None

    @property
    def label(self):
        """The events' one label, or "" (none, or several)."""
        return next(iter(self.labels)) if len(self.labels) == 1 else ""

    def describe(self):
        """One line: ``LABEL: N samples over S s (R Hz), M stacks of T
        threads``, ``M stacks (K complete, C cut)`` where some were cut."""
        stacks = f"{self.stacks} stack{'s' if self.stacks != 1 else ''}"
        if self.cut:
            stacks += f" ({self.stacks - self.cut} complete, {self.cut} cut)"
        stacks += f" of {self.threads} thread{'s' if self.threads != 1 else ''}"
        if self.rate:
            stacks = (f"{self.samples} samples over {self.duration_ns / 1e9:.1f} s "
                      f"({self.rate:.1f} Hz), {stacks}")
        label = self.label if len(self.label) <= MAX_LABEL else self.label[:MAX_LABEL] + "..."
        return f"{label}: {stacks}" if label else stacks
