"""Ratios between two switches measured in alternating windows (PLATFORM.md, last section).

sluice-gen --alternate sends into switch A and switch B in turn, one window each, while the
other switch is stopped. A window's rate is compared with the mean of its two neighbours of
the other switch, which were measured seconds before and after in (most likely) the same
host state; the median of those ratios is the comparison, and the quartiles its spread.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    index: int
    switch: str          # "A" or "B"
    rx_pps: float
    counted_s: float


@dataclass(frozen=True)
class Comparison:
    ratio_median: float      # A / B
    ratio_q1: float
    ratio_q3: float
    n_ratios: int
    a_median_pps: float
    b_median_pps: float
    a_windows: int
    b_windows: int
    a_seconds: float
    b_seconds: float


def neighbour_ratios(windows: list[Window]) -> list[float]:
    """A/B for every window that has windows of the other switch on both sides."""
    ratios: list[float] = []
    for i in range(1, len(windows) - 1):
        w, before, after = windows[i], windows[i - 1], windows[i + 1]
        if before.switch == w.switch or after.switch == w.switch:
            continue
        other = (before.rx_pps + after.rx_pps) / 2
        if other <= 0 or w.rx_pps <= 0:
            continue
        ratios.append(w.rx_pps / other if w.switch == "A" else other / w.rx_pps)
    return ratios


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def compare(windows: list[Window], ratios: list[float] | None = None) -> Comparison:
    """Medians per switch and the A/B ratio; RATIOS when pooled from several runs."""
    if ratios is None:
        ratios = neighbour_ratios(windows)
    if not ratios:
        raise ValueError("no window has neighbours of the other switch: run longer")
    q1, med, q3 = quartiles(ratios)
    a = [w for w in windows if w.switch == "A"]
    b = [w for w in windows if w.switch == "B"]
    return Comparison(
        ratio_median=med, ratio_q1=q1, ratio_q3=q3, n_ratios=len(ratios),
        a_median_pps=statistics.median(w.rx_pps for w in a),
        b_median_pps=statistics.median(w.rx_pps for w in b),
        a_windows=len(a), b_windows=len(b),
        a_seconds=sum(w.counted_s for w in a), b_seconds=sum(w.counted_s for w in b))
