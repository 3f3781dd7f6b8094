"""Paired, interleaved measurement: the machines are shared and noisy, so
both sides are measured in turn, alternating which goes first, and the
figure is the median of the per-round ratios (never a best-of-N of
separate runs)."""

import statistics


def paired_ratios(rounds, ours, anchor):
    """Per-round ratios ours() / anchor(); each returns seconds.  The side
    that runs first alternates between rounds."""
    ratios, ours_times, anchor_times = [], [], []
    for index in range(rounds):
        if index % 2:
            theirs = anchor()
            mine = ours()
        else:
            mine = ours()
            theirs = anchor()
        ours_times.append(mine)
        anchor_times.append(theirs)
        ratios.append(mine / theirs)
    return Paired(ratios, ours_times, anchor_times)


class Paired:
    def __init__(self, ratios, ours, anchor):
        self.ratios = ratios
        self.ours = ours
        self.anchor = anchor

    @property
    def ratio(self):
        return statistics.median(self.ratios)

    def line(self, what, goal=None, unit=1e3, unit_name="ms"):
        low, high = min(self.ratios), max(self.ratios)
        text = (f"{what}: ratio {self.ratio:.2f} (median of {len(self.ratios)} paired rounds, "
                f"range {low:.2f}-{high:.2f}; ours {statistics.median(self.ours) * unit:.1f} "
                f"{unit_name}, anchor {statistics.median(self.anchor) * unit:.1f} {unit_name})")
        if goal is not None:
            text += f"  goal <= {goal}: {'met' if self.ratio <= goal else 'NOT met'}"
        return text
