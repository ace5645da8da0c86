"""The report's opening verdict (report_verdict) and its cost table (report_cost)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.bench import report, report_cost, report_verdict
from sluice.bench.schema import Row, append_rows


def row(key: str, vs: str = "", ratio: float | None = None, n: int = 10, **kw: object) -> Row:
    """An alternating row of KEY against VS with window RATIO (resting on N windows)."""
    name, mode = key.split(":")
    fields: dict[str, object] = {
        "switch": name, "mode": mode.split("#")[0], "key": key, "scenario": "v2v", "phy": "",
        "vnf": "", "size": 64, "direction": "uni", "trial": 0, "placement": "near",
        "method": "alternating", "rx_pps": 10e6, "tx_pps": 10.1e6, "loss": 0.0,
        "oversubscribed": False, "generator_bound": False, "kernel_path": False,
        "samples": n, "counted_s": 0.7 * n, "ratio_vs": vs, "ratio_median": ratio,
        "ratio_q1": ratio and ratio * 0.97, "ratio_q3": ratio and ratio * 1.03,
        "ratio_n": n if ratio else 0, "gen_order": "first"}
    fields.update(kw)
    return Row(**fields)  # type: ignore[arg-type]


def test_sluice_against_each_peer_directly_and_through_the_baseline() -> None:
    rows = [row("sluice:patch", "testpmd:io", 1.10), row("testpmd:io", "sluice:patch", 1 / 1.1),
            row("ovs-dpdk:flows", "testpmd:io", 0.70, n=3),
            row("testpmd:io", "ovs-dpdk:flows", 1 / 0.7, n=3),
            row("sluice:flow", "testpmd:io", 1.05)]
    got = {(ln.subject, ln.peer): ln for ln in report_verdict.lines(rows, "testpmd")}
    assert set(got) == {("sluice:patch", "testpmd:io"), ("sluice:flow", "ovs-dpdk:flows")}
    direct = got[("sluice:patch", "testpmd:io")]
    assert direct.winner == "sluice:patch" and direct.placement == "near"
    assert direct.rate is not None and direct.rate.median == pytest.approx(1.10)
    assert direct.rate.how == "windows" and not direct.rate.weak
    via = got[("sluice:flow", "ovs-dpdk:flows")].rate
    assert via is not None and via.how == "via testpmd:io"
    assert via.median == pytest.approx(1.05 / 0.70) and via.windows == 3 and via.weak
    assert via.q1 < via.median < via.q3


def test_one_placement_per_cell_near_first() -> None:
    rows = [row("sluice:patch", "testpmd:io", 0.8, placement="far"),
            row("sluice:patch", "testpmd:io", 1.2, placement="near"),
            row("testpmd:io", "sluice:patch", 1 / 1.2, placement="near")]
    (ln,) = report_verdict.lines(rows, "testpmd")
    assert ln.placement == "near" and ln.rate and ln.rate.median == pytest.approx(1.2)


def test_without_sluice_each_switch_is_set_against_the_baseline() -> None:
    rows = [row("testpmd:io", "testpmd:io#2", 1.01), row("testpmd:io#2", "testpmd:io", 0.99)]
    (ln,) = report_verdict.lines(rows, "testpmd:io#2")
    assert (ln.subject, ln.peer) == ("testpmd:io", "testpmd:io#2")


def test_interleaved_cells_rest_on_no_windows_and_are_weak() -> None:
    rows = [row("sluice:patch", method="interleaved", rx_pps=2e6, kernel_path=True),
            row("linux-bridge:learn", method="interleaved", rx_pps=1e6, kernel_path=True)]
    (ln,) = report_verdict.lines(rows, "testpmd")
    assert (ln.subject, ln.peer) == ("sluice:patch", "linux-bridge:learn")
    assert ln.rate is not None and ln.rate.median == pytest.approx(2.0)
    assert ln.rate.weak and ln.rate.how == "R+ of separate trials"
    assert "kernel path" in ln.flags


def test_cost_ratio_window_by_window_or_by_quotient() -> None:
    s = row("sluice:patch", "testpmd:io", 1.1,
            cost={"proc_nspp": [40.0, 41.0], "proc_ratio": [0.9, 0.92, 0.94]})
    t = row("testpmd:io", "sluice:patch", 1 / 1.1, cost={"proc_nspp": [44.0, 45.0]})
    (ln,) = report_verdict.lines([s, t], "testpmd")
    assert ln.cost is not None and ln.cost.median == pytest.approx(0.92)
    assert ln.cost_how == "windows"
    s2 = row("sluice:patch", method="interleaved", cost={"proc_nspp": [40.0]})
    t2 = row("testpmd:io", method="interleaved", cost={"proc_nspp": [50.0]})
    (ln2,) = report_verdict.lines([s2, t2], "testpmd")
    assert ln2.cost is not None and ln2.cost.median == pytest.approx(0.8)
    assert ln2.cost_how == "quotient"


def test_cost_table_pools_windows_and_sets_testpmd_as_reference() -> None:
    s = row("sluice:patch", "testpmd:io", 1.1, trial=0,
            cost={"own_cpp": [100.0, 110.0], "proc_cpp": [150.0], "proc_nspp": [60.0],
                  "own_ratio": [0.9, 0.95], "proc_ratio": [0.97], "own_source": "sluiced stats: x"})
    s1 = row("sluice:patch", "testpmd:io", 1.1, trial=1,
             cost={"own_cpp": [120.0], "proc_cpp": [151.0], "proc_nspp": [61.0],
                   "own_ratio": [1.0], "proc_ratio": [0.99], "own_source": "sluiced stats: x"})
    t = row("testpmd:io", "sluice:patch", 0.9,
            cost={"own_cpp": [115.0], "proc_cpp": [155.0], "proc_nspp": [62.0],
                  "own_ratio": [1.1], "proc_ratio": [1.02], "own_source": "testpmd: y"})
    o = row("ovs-dpdk:flows", method="interleaved",
            cost={"own_cpp": [230.0], "proc_nspp": [124.0], "own_source": "OVS: z"})
    lines = {c.key: c for c in report_cost.cost_lines([s, s1, t, o], "testpmd")}
    sl = lines["sluice:patch"]
    assert sl.own is not None and sl.own.median == 110.0 and sl.own.n == 3
    assert sl.own_ratio is not None and sl.own_ratio.median == pytest.approx(0.95)
    assert sl.ratio_how == "windows" and report_cost.short_source(sl.own_source) == "sluiced stats"
    assert lines["testpmd:io"].ratio_how == "reference"
    ovs = lines["ovs-dpdk:flows"]
    assert ovs.ratio_how == "quotient" and ovs.own_ratio is not None
    assert ovs.own_ratio.median == pytest.approx(2.0)


def test_compare_testpmd_testpmd_takes_the_baseline_instance_as_reference() -> None:
    rows = [row("testpmd:io", "testpmd:io#2", 1.0, cost={"own_cpp": [80.0], "own_ratio": [1.0]}),
            row("testpmd:io#2", "testpmd:io", 1.0, cost={"own_cpp": [80.0], "own_ratio": [1.0]})]
    assert report_cost.reference(rows, "testpmd:io#2") == "testpmd:io#2"
    lines = {c.key: c for c in report_cost.cost_lines(rows, "testpmd:io#2")}
    assert lines["testpmd:io"].ratio_how == "windows"
    assert lines["testpmd:io#2"].ratio_how == "reference"


def test_report_opens_with_the_verdict_and_draws_its_figure_into_the_page(tmp_path: Path
                                                                          ) -> None:
    rows = [row("sluice:patch", "testpmd:io", 1.1, n=3,
                cost={"own_cpp": [100.0], "proc_nspp": [40.0], "proc_ratio": [0.9]}),
            row("testpmd:io", "sluice:patch", 1 / 1.1, n=3, cost={"own_cpp": [90.0]})]
    append_rows(tmp_path / "results.jsonl", rows)
    (tmp_path / "manifest.json").write_text(json.dumps({"settings": {"baseline": "testpmd"}}))
    md = report.write(tmp_path).read_text()
    heads = [line for line in md.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## Verdict", "## Verdict: the ratios", "## Method"]
    assert "WEAK" in md and "| v2v | 64 B | near | sluice:patch |" in md
    assert "## Cost per packet (ratio to testpmd:io)" in md
    html = (tmp_path / "report.html").read_text()
    assert "<h2 id='verdict'>" in html and "<figure id='verdict-the-ratios-figure'><svg" in html
    assert (tmp_path / "figures" / "verdict.png").exists()


def test_a_pair_never_in_one_placement_is_listed_without_a_ratio() -> None:
    rows = [row("sluice:patch", "testpmd:io", None, placement="far"),
            row("testpmd:io", "sluice:patch", None, placement="mixed"),
            row("ovs-dpdk:flows", "testpmd:io", None, placement="mixed")]
    got = {ln.peer: ln for ln in report_verdict.lines(rows, "testpmd")}
    ln = got["testpmd:io"]
    assert ln.placement == "mixed"
    assert (ln.subject, ln.rate) == ("sluice:patch", None)
    assert ln.flags == "not both measured mixed"


def test_each_pair_is_read_in_a_placement_both_ran_in() -> None:
    # A sweep point where sluice ran only far while the peers also ran near: the pair is
    # read far (with that placement's winner), not "not both measured near".
    rows = [row("sluice:flow", "ovs-dpdk:flows", 1.5, placement="far"),
            row("ovs-dpdk:flows", "sluice:flow", 1 / 1.5, placement="far"),
            row("testpmd:io", "ovs-dpdk:flows", 1.6, placement="near"),
            row("ovs-dpdk:flows", "testpmd:io", 1 / 1.6, placement="near"),
            row("testpmd:io", "ovs-dpdk:flows", 1.4, placement="far"),
            row("sluice:flow", placement="near")]     # near seconds, no window paired
    got = {ln.peer: ln for ln in report_verdict.lines(rows, "ovs-dpdk:flows")}
    flows = got["ovs-dpdk:flows"]
    assert (flows.subject, flows.placement, flows.winner) == ("sluice:flow", "far", "sluice:flow")
    assert flows.rate is not None and flows.rate.median == pytest.approx(1.5)
    io = got["testpmd:io"]
    assert (io.subject, io.placement, io.flags) == ("sluice:flow", "far", "")
    assert io.rate is not None and io.rate.how == "via ovs-dpdk:flows"


def test_cost_of_latency_trials_is_kept_apart_per_load() -> None:
    sat = row("sluice:patch", method="interleaved", cost={"own_cpp": [100.0]})
    half = row("sluice:patch", method="latency", latency_kind="loads", latency_load=0.5,
               cost={"own_cpp": [300.0]})
    fixed = row("sluice:patch", method="latency", latency_kind="fixed", asked_pps=1e6,
                cost={"own_cpp": [500.0]})
    got = {c.scenario: c.own.median for c in report_cost.cost_lines([sat, half, fixed])
           if c.own}
    assert got == {"v2v": 100.0, "v2v at 0.5 R+": 300.0, "v2v at 1 Mpps": 500.0}


def test_cost_ratio_through_the_baseline_both_alternated_with() -> None:
    s = row("sluice:flow", "testpmd:io", 1.2, cost={"proc_ratio": [0.8, 0.8, 0.8]})
    o = row("ovs-dpdk:flows", "testpmd:io", 0.7, cost={"proc_ratio": [1.6, 1.6]})
    t = row("testpmd:io", "sluice:flow", 1 / 1.2)
    got = {ln.peer: ln for ln in report_verdict.lines([s, o, t], "testpmd")}
    ln = got["ovs-dpdk:flows"]
    assert ln.cost is not None and ln.cost.median == pytest.approx(0.5)
    assert ln.cost_how == "via testpmd:io" and ln.cost.n == 2
