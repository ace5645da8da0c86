"""Statistics of the harness: R+ from per-second samples, quartiles, ratios, bit rates.

R+ (the maximum forwarding rate of the published comparison) is the mean received rate under
saturating input with the warm-up and cool-down seconds left out. Frame sizes include the
4-byte FCS; L1 adds the 20 bytes of preamble, start delimiter and inter-frame gap on the wire.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

L1_OVERHEAD_BYTES = 20
# sluice-gen's IMIX (size:weight, FCS included): the classic 7:4:1 mix. Plans carry it as
# size IMIX; rows as its mean frame size with size_label "imix".
IMIX = 0
IMIX_MIX = ((64, 7), (570, 4), (1518, 1))
IMIX_MEAN = round(sum(s * w for s, w in IMIX_MIX) / sum(w for _, w in IMIX_MIX))
# Frames longer than a 1500 B MTU's 1518 are jumbo frames: sluice-gen takes up to 9018 (a
# 9000 B MTU), and only switches whose adapter sets them up run them (Switch.jumbo_links).
STD_MAX_FRAME = 1518
MAX_FRAME = 9018
JUMBO_MTU = 9000


def is_jumbo(size: int) -> bool:
    """Whether a plan's SIZE is a jumbo frame (longer than 1518 B, FCS included)."""
    return size > STD_MAX_FRAME


def row_size(size: int) -> int:
    """The frame size a row records for a plan's SIZE (IMIX: its mean)."""
    return IMIX_MEAN if size == IMIX else size


def gen_size(size: int) -> str:
    """sluice-gen's --size for a plan's SIZE."""
    return "imix" if size == IMIX else str(size)


@dataclass(frozen=True)
class Sample:
    """One per-second record of sluice-gen: when it ended (seconds since the start and on
    CLOCK_MONOTONIC) and the rates over that second."""

    t: float
    monotonic_s: float
    tx_pps: float
    rx_pps: float
    sink_rx_pps: tuple[float, ...] = ()   # fanout: each sink port's rate (rx_pps: their sum)


@dataclass(frozen=True)
class Spread:
    """Median and quartiles of a set of values, and how many values they rest on."""

    median: float
    q1: float
    q3: float
    n: int

    @property
    def iqr(self) -> float:
        """The interquartile range q3 - q1."""
        return self.q3 - self.q1


def trim(samples: Sequence[Sample], warmup_s: float, cooldown_s: float,
         duration_s: float) -> list[Sample]:
    """The samples whose whole second lies after WARMUP_S and before DURATION_S - COOLDOWN_S.

    A sample at time t covers (t - 1, t]; one that overlaps the warm-up or cool-down is
    dropped, so neither a switch still filling its rings nor a generator winding down counts.
    """
    lo, hi = warmup_s, duration_s - cooldown_s
    return [s for s in samples if s.t - 1.0 >= lo - 1e-6 and s.t <= hi + 1e-6]


def r_plus(samples: Sequence[Sample]) -> float:
    """R+: the mean received rate of already trimmed SAMPLES (0 when there are none)."""
    return statistics.fmean(s.rx_pps for s in samples) if samples else 0.0


def loss_fraction(tx_packets: float, rx_packets: float) -> float:
    """Frames sent but not received, as a fraction of those sent (0 when nothing was sent).

    Never negative: late frames of a previous window may make rx exceed tx a little."""
    if tx_packets <= 0:
        return 0.0
    return max(0.0, (tx_packets - rx_packets) / tx_packets)


def spread(values: Sequence[float]) -> Spread:
    """Median and inclusive quartiles (as sluice-gen and Python's statistics compute them)."""
    if not values:
        raise ValueError("no values")
    if len(values) == 1:
        return Spread(values[0], values[0], values[0], 1)
    q = statistics.quantiles(values, n=4, method="inclusive")
    return Spread(statistics.median(values), q[0], q[2], len(values))


def inverse(s: Spread) -> Spread:
    """The spread of 1/x for the spread S of x (quartiles swap places)."""
    return Spread(1 / s.median, 1 / s.q3, 1 / s.q1, s.n)


def gbps(pps: float, size: int, layer: str = "l1") -> float:
    """Gbit/s of PPS frames of SIZE bytes (FCS included), at L1 (wire) or L2 (frame)."""
    extra = L1_OVERHEAD_BYTES if layer == "l1" else 0
    return pps * (size + extra) * 8 / 1e9
