"""Rows from alternating windows: rates per switch and neighbour ratios, per placement label.

A window is compared with the mean of its two neighbours of the other switch (abwindows);
the ratio is filed under the window's placement label when both neighbours share it, and
under `mixed` otherwise, so near and far states never mix inside one figure.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sluice.bench.abwindows import Window
from sluice.bench.stats import Spread, inverse, loss_fraction, spread


@dataclass(frozen=True)
class Labelled:
    """A window with its counted frames and its placement label."""

    window: Window
    tx_packets: int
    rx_packets: int
    label: str


def ratios_by_label(ws: Sequence[Labelled]) -> dict[str, list[float]]:
    """A/B neighbour ratios, filed by placement label."""
    out: dict[str, list[float]] = defaultdict(list)
    for i in range(1, len(ws) - 1):
        before, w, after = ws[i - 1], ws[i], ws[i + 1]
        if w.window.switch in (before.window.switch, after.window.switch):
            continue
        other = (before.window.rx_pps + after.window.rx_pps) / 2
        if other <= 0 or w.window.rx_pps <= 0:
            continue
        r = w.window.rx_pps / other if w.window.switch == "A" else other / w.window.rx_pps
        same = w.label == before.label == after.label
        out[w.label if same else "mixed"].append(r)
    return out


@dataclass(frozen=True)
class SwitchFigures:
    """One switch's figures over the windows of one label."""

    rx_mean: float
    rx_median: float
    tx_pps: float
    loss: float
    windows: int
    counted_s: float
    ratio: Spread | None       # this switch over the other one


def figures(ws: Sequence[Labelled], side: str, label: str,
            ratios: dict[str, list[float]]) -> SwitchFigures | None:
    """Figures of switch SIDE (A or B) over its windows labelled LABEL (None: none)."""
    mine = [w for w in ws if w.window.switch == side and w.label == label]
    if not mine:
        return None
    counted = sum(w.window.counted_s for w in mine)
    tx = sum(w.tx_packets for w in mine)
    rx = sum(w.rx_packets for w in mine)
    r = spread(ratios[label]) if ratios.get(label) else None
    if r is not None and side == "B":
        r = inverse(r)
    return SwitchFigures(
        rx_mean=statistics.fmean(w.window.rx_pps for w in mine),
        rx_median=statistics.median(w.window.rx_pps for w in mine),
        tx_pps=tx / counted if counted else 0.0, loss=loss_fraction(tx, rx),
        windows=len(mine), counted_s=counted, ratio=r)
