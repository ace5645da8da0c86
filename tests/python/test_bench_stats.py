"""sluice-bench: R+ and trimming, quartiles, ratios, bit rates, window figures."""

from __future__ import annotations

import pytest

from sluice.bench.abwindows import Window
from sluice.bench.stats import Sample, gbps, inverse, loss_fraction, r_plus, spread, trim
from sluice.bench.windows import Labelled, figures, ratios_by_label


def samples(rates: list[float]) -> list[Sample]:
    """One sample a second, at t = 1, 2, ..."""
    return [Sample(t=i + 1.0, monotonic_s=100.0 + i + 1, tx_pps=r, rx_pps=r)
            for i, r in enumerate(rates)]


def test_trim_drops_every_second_touching_warmup_or_cooldown() -> None:
    s = samples([1, 2, 3, 4, 5, 6, 7, 8])
    kept = trim(s, warmup_s=2.0, cooldown_s=1.0, duration_s=8.0)
    assert [k.t for k in kept] == [3.0, 4.0, 5.0, 6.0, 7.0]
    # A half-second warm-up still costs the whole first second.
    assert [k.t for k in trim(s, 0.5, 0.0, 8.0)][0] == 2.0


def test_r_plus_is_the_mean_of_the_kept_seconds() -> None:
    s = samples([0, 10e6, 12e6, 14e6, 1e6])
    kept = trim(s, warmup_s=1.0, cooldown_s=1.0, duration_s=5.0)
    assert r_plus(kept) == pytest.approx(12e6)
    assert r_plus([]) == 0.0


def test_loss_is_a_fraction_never_negative() -> None:
    assert loss_fraction(1000, 990) == pytest.approx(0.01)
    assert loss_fraction(1000, 1002) == 0.0      # late frames of the previous window
    assert loss_fraction(0, 0) == 0.0


def test_spread_matches_inclusive_quartiles() -> None:
    sp = spread([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (sp.median, sp.q1, sp.q3, sp.n) == (3.0, 2.0, 4.0, 5)
    assert sp.iqr == 2.0
    assert spread([7.0]).q1 == 7.0
    with pytest.raises(ValueError):
        spread([])


def test_inverse_swaps_quartiles() -> None:
    inv = inverse(spread([0.5, 1.0, 2.0]))
    assert inv.median == pytest.approx(1.0)
    assert inv.q1 == pytest.approx(1 / 1.5) and inv.q3 == pytest.approx(1 / 0.75)


def test_gbps_counts_l1_with_20_bytes_of_overhead() -> None:
    # 14.88 Mpps of 64 B frames is 10 Gbit/s on the wire (672 bit each).
    assert gbps(14_880_952, 64, "l1") == pytest.approx(10.0, rel=1e-6)
    assert gbps(1e6, 1500, "l2") == pytest.approx(12.0)


def alternating(rates: list[float], labels: list[str] | None = None) -> list[Labelled]:
    """Windows A, B, A, B ... with RATES, 0.7 s counted, 1 % loss."""
    labels = labels or ["near"] * len(rates)
    return [Labelled(Window(i, "AB"[i % 2], r, 0.7), int(r * 7e5), int(r * 7e5 * 0.99), lab)
            for i, (r, lab) in enumerate(zip(rates, labels, strict=True))]


def test_neighbour_ratios_by_label() -> None:
    ws = alternating([10, 20, 10, 20, 10])
    r = ratios_by_label(ws)
    assert sorted(r) == ["near"] and r["near"] == pytest.approx([0.5, 0.5, 0.5])


def test_a_window_between_other_labels_counts_as_mixed() -> None:
    ws = alternating([10, 20, 10, 20, 10], ["near", "near", "far", "far", "far"])
    r = ratios_by_label(ws)
    assert len(r["mixed"]) == 2 and len(r["far"]) == 1


def test_figures_per_side_invert_the_ratio_for_b() -> None:
    ws = alternating([10, 20, 10, 20, 10])
    r = ratios_by_label(ws)
    a = figures(ws, "A", "near", r)
    b = figures(ws, "B", "near", r)
    assert a is not None and b is not None
    assert a.rx_mean == 10 and b.rx_mean == 20 and a.windows == 3 and b.windows == 2
    assert a.ratio is not None and b.ratio is not None
    assert a.ratio.median == pytest.approx(0.5) and b.ratio.median == pytest.approx(2.0)
    assert a.loss == pytest.approx(0.01, abs=1e-3)
    assert figures(ws, "A", "far", r) is None
