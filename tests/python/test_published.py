"""sluice-bench: the published figures and the tables that put them beside our rows."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sluice.bench import published as pub
from sluice.bench.published import FIGURES, STUDIES, Published
from sluice.bench.schema import Row


def row(**kw: Any) -> Row:
    """An alternating p2p/memif row of sluice against testpmd; KW changes fields (the key
    follows switch and mode unless given). The
    latency fields (latency_load, asked_pps, latency_kind) are set as attributes, so the
    helper works whether or not Row declares them yet."""
    extra = {k: kw.pop(k) for k in ("latency_load", "asked_pps", "latency_kind") if k in kw}
    fields: dict[str, Any] = {
        "switch": "sluice", "mode": "patch", "scenario": "p2p", "phy": "memif", "vnf": "",
        "size": 64, "direction": "uni", "trial": 0, "placement": "near",
        "method": "alternating", "rx_pps": 10e6, "tx_pps": 10.1e6, "loss": 0.0,
        "oversubscribed": False, "generator_bound": False, "kernel_path": False,
        "samples": 6, "ratio_vs": "testpmd:io", "ratio_median": 1.1,
        "gen_order": "first"}
    fields.update(kw)
    fields.setdefault("key", f"{fields['switch']}:{fields['mode']}")
    r = Row(**fields)
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def sw(name: str, mode: str, **kw: Any) -> Row:
    """A row of switch NAME in MODE."""
    return row(switch=name, mode=mode, key=f"{name}:{mode}", **kw)


def lat(load: float | None = None, mean_us: float = 10.0, **kw: Any) -> Row:
    """A latency row at LOAD of R+ with a mean RTT of MEAN_US."""
    kw.setdefault("latency_ns", {"mean": mean_us * 1e3, "p50": mean_us * 900,
                                 "p99": mean_us * 3e3})
    kw.setdefault("samples", 1000)
    return row(method="latency", latency_load=load, ratio_vs="", ratio_median=None, **kw)


def table(tables: list[pub.Table], prefix: str) -> pub.Table:
    """The one table whose title starts with PREFIX."""
    found = [t for t in tables if t[0].startswith(prefix)]
    assert len(found) == 1, [t[0] for t in tables]
    return found[0]


def cell(t: pub.Table, line: int, header: str) -> str:
    return t[2][line][t[1].index(header)]


# -- the published figures -----------------------------------------------------------------

SCENARIO = re.compile(r"^(p2p|p2v|v2v|loopback-[1-5]|other)$")


@pytest.mark.parametrize("f", FIGURES, ids=lambda f: f"{f.study}-{f.switch}-{f.locator[:30]}")
def test_every_figure_is_typed_located_and_positive(f: Published) -> None:
    assert f.study in STUDIES
    assert f.locator.strip() and f.hardware.strip()
    assert f.metric in pub.METRICS and f.qualifier in pub.QUALIFIERS and f.unit
    assert SCENARIO.match(f.scenario)
    assert f.scenario != "other" or f.scenario_note, "an 'other' scenario says what it is"
    assert f.switch == f.switch.lower() and " " not in f.switch
    # Positive, except a stated drop of about 0 %.
    assert f.value > 0 or (f.metric == "drop" and f.value == 0)
    assert (f.qualifier == "range") == (f.value_max is not None)
    if f.value_max is not None:
        assert f.value_max > f.value
    assert f.direction in ("", "uni", "bidir")
    assert f.load is None or f.rate_pps is None
    assert f.layer in ("", "L1", "L2") and (f.unit == "Gbps" or not f.layer)


def test_studies_cite_what_their_texts_give() -> None:
    assert set(STUDIES) == {"000", "001", "002", "003", "004"}
    assert "Unveiling Performance of NFV Software Dataplanes" in STUDIES["001"].citation()
    assert "title not in the stored text" in STUDIES["000"].citation()
    assert all(any(f.study == s for f in FIGURES) for s in STUDIES)


def test_table3_is_complete_and_bess_has_no_four_vnf_column() -> None:
    t3 = [f for f in FIGURES if f.study == "000" and f.table == "Table 3"]
    assert len(t3) == 7 * 3 * 4 + 6 * 3
    by = {(f.scenario, f.switch, f.load): f.text for f in t3}
    # The figures the study's text quotes.
    assert by[("p2p", "t4p4s", 0.99)] == "174" and by[("p2p", "snabb", 0.99)] == "22"
    assert by[("p2p", "vale", 0.5)] == "34" and by[("p2p", "snabb", 0.5)] == "11.3"
    assert by[("loopback-4", "ovs-dpdk", 0.99)] == "336"
    assert by[("loopback-4", "fastclick", 0.1)] == "978"
    assert not any(s == "loopback-4" and w == "bess" for s, w, _ in by)
    assert {f.size for f in t3} == {64} and {f.stat for f in t3} == {"mean"}


def test_table3_reading_agrees_with_what_the_text_says_of_the_loads() -> None:
    # Section 5.3: in loopback, 0.99 R+ is always above 0.50 R+, and 0.10 R+ above 0.50 R+
    # for every switch but VALE. The column-by-column reading must keep both true.
    t3 = {(f.scenario, f.switch, f.load): f.value for f in FIGURES
          if f.study == "000" and f.table == "Table 3" and f.scenario != "p2p"}
    for scn, switch, _ in t3:
        assert t3[(scn, switch, 0.99)] > t3[(scn, switch, 0.5)]
        assert (t3[(scn, switch, 0.1)] > t3[(scn, switch, 0.5)]) == (switch != "vale")


def test_table4_is_v2v_at_one_mpps() -> None:
    t4 = {f.switch: f for f in FIGURES if f.study == "000" and f.table == "Table 4"}
    assert {k: f.text for k, f in t4.items()} == {
        "bess": "37", "fastclick": "45", "ovs-dpdk": "43", "snabb": "67", "vpp": "42",
        "vale": "21", "t4p4s": "70"}
    assert all(f.rate_pps == 1e6 and f.scenario == "v2v" for f in t4.values())


def test_sizes_without_fcs_are_matched_with_it() -> None:
    vale = next(f for f in FIGURES if f.study == "002" and f.text == "17.6")
    assert vale.size == 60 and vale.frame_bytes == 64


def test_shown_keeps_the_study_hedge() -> None:
    assert [f.shown() for f in FIGURES if f.study == "000" and f.switch == "fastclick"
            and f.scenario == "p2v" and f.size == 64 and f.direction == "uni"] == ["5-7"]
    assert any(f.shown() == "<7.4" for f in FIGURES)


# -- published beside measured -------------------------------------------------------------

def test_rtt_table_has_published_and_our_columns_and_only_lines_we_ran() -> None:
    rows = [lat(0.5, 12.0), lat(0.5, 30.0, placement="far"),
            lat(0.5, 20.0, switch="ovs-dpdk", mode="flows", key="ovs-dpdk:flows")]
    t = table(pub.published_vs_measured(rows), "000 Table 3")
    title, headers, lines = t
    assert "Xeon E5-2690 v3" in title
    assert "000 Table 3: vpp mean RTT us" in headers
    assert headers.index("000 Table 3: bess mean RTT us") < headers.index(
        "ours: sluice:patch (memif) mean RTT us")
    assert len(lines) == 1 and lines[0][:3] == ["p2p", "64 B", "0.50 R+"]
    # Published figure as written, with its ratio to the study's ovs-dpdk (5.2).
    assert cell(t, 0, "000 Table 3: vpp mean RTT us") == "5.9 [1.13]"
    # Ours: near wins over far, with trials and samples, and the ratio to our ovs-dpdk.
    assert cell(t, 0, "ours: sluice:patch (memif) mean RTT us") == (
        "12.0 (near, 1 trials, n=1000) [0.60]")


def test_loopback_lines_follow_the_chain_and_the_load() -> None:
    rows = [lat(0.99, 50.0, scenario="loopback-2"), lat(0.1, 40.0, scenario="loopback-1"),
            lat(0.5, 30.0, scenario="loopback-1")]
    _, _, lines = table(pub.published_vs_measured(rows), "000 Table 3")
    assert [ln[0] + " " + ln[2] for ln in lines] == [
        "loopback-1 0.10 R+", "loopback-1 0.50 R+", "loopback-2 0.99 R+"]


def test_v2v_rtt_matches_a_fixed_rate_of_one_mpps_only() -> None:
    near = pub.published_vs_measured([lat(None, 9.0, scenario="v2v", phy="",
                                          asked_pps=1.01e6)])
    assert table(near, "000 Table 4")[2][0][-1].startswith("9.0 (near")
    assert pub.published_vs_measured([lat(None, 9.0, scenario="v2v", phy="",
                                          asked_pps=2e6)]) == []


def test_throughput_in_the_study_units() -> None:
    rows = [row(rx_pps=10e6), sw("testpmd", "io", rx_pps=12e6, ratio_vs="sluice:patch")]
    t = table(pub.published_vs_measured(rows), "000 section 5.2")
    assert t[2][0][:3] == ["p2p", "64 B", "saturating"]
    assert cell(t, 0, "000 section 5.2: ovs-dpdk Gbps L1") == "8.05"
    assert cell(t, 0, "000 section 5.2: vale Gbps L1") == "~5.6 / 5.56"
    # 10 Mpps of 64 B frames is 6.72 Gbit/s at L1.
    assert cell(t, 0, "ours: sluice:patch (memif) Gbps L1").startswith("6.72 (near")
    assert t[1][-2:] == ["ours: sluice:patch (memif) Gbps L1", "ours: testpmd:io (memif) Gbps L1"]


def test_study_sizes_and_phys_must_match() -> None:
    # 002's 60 B frames are our 64 B; 003's Table 2 is p2p over veth with linux-bridge.
    rows = [row(scenario="v2v", phy="", rx_pps=20e6),
            sw("linux-bridge", "learn", phy="veth", method="interleaved", rx_pps=500e3,
               kernel_path=True, ratio_vs="", ratio_median=None)]
    tables = pub.published_vs_measured(rows)
    v = table(tables, "002 section 5.1")
    assert v[2][0][1] == "60 B (64 B with FCS)"
    t2 = table(tables, "003 Table 2")
    assert cell(t2, 0, "ours: linux-bridge:learn (veth) kpps").startswith("500 (near")
    assert [ln[0] for ln in t2[2]] == ["p2p/veth"]


def test_missing_data_and_oversubscribed_rows_give_no_table() -> None:
    assert pub.published_vs_measured([]) == []
    assert pub.published_vs_measured([row(size=1500)]) == []
    assert pub.published_vs_measured([lat(0.5, oversubscribed=True)]) == []
    # A latency row never matches a throughput figure, nor the reverse.
    assert all("Table 3" not in t[0] for t in pub.published_vs_measured([row()]))


def test_rows_without_latency_fields_are_handled() -> None:
    r = row(method="latency", latency_ns={"mean": 5e3}, ratio_vs="")
    for name in ("latency_load", "asked_pps"):
        assert not hasattr(r, name) or getattr(r, name) is None
    assert pub.published_vs_measured([r]) == []
    headers, lines = pub.latency_winners([r])
    assert lines[0][2] == "unstated load"


def test_several_vnfs_of_one_switch_get_their_own_columns() -> None:
    t = table(pub.published_vs_measured([row(scenario="loopback-1", vnf="inline",
                                             rx_pps=3e6)]), "001 Table 1")
    assert "001 Table 1: bess L3FWD Mpps" in t[1] and "001 Table 1: clickos firewall Mpps" in t[1]
    assert [ln[3] for ln in t[2]] == ["1.2", "1.6", "2", "2.4", "2.6"]
    assert cell(t, 4, "001 Table 1: bess L3FWD Mpps") == "9.34"


# -- winners ---------------------------------------------------------------------------------

def test_winner_by_ratio_to_the_baseline_with_margin_and_rank() -> None:
    rows = [row(ratio_median=0.9, rx_pps=20e6),           # sluice: higher R+, lower ratio
            sw("ovs-dpdk", "flows", ratio_median=1.2, rx_pps=5e6),
            sw("testpmd", "io", ratio_vs="sluice:patch", ratio_median=1.1, rx_pps=8e6),
            sw("testpmd", "io", ratio_vs="ovs-dpdk:flows", ratio_median=0.8, rx_pps=8e6)]
    headers, lines = pub.winners(rows)
    assert len(lines) == 1
    got = dict(zip(headers, lines[0], strict=True))
    assert got["winner"] == "ovs-dpdk:flows" and got["compared by"] == "ratio to testpmd:io"
    assert got["second"] == "testpmd:io (1.000)" and got["margin"] == "+20.0 %"
    assert got["sluice's rank"] == "sluice:patch 3 of 3" and got["switches"] == "3"


def test_winner_by_r_plus_without_ratios_and_placements_near_first() -> None:
    common = {"method": "interleaved", "phy": "veth", "ratio_vs": "", "ratio_median": None,
              "kernel_path": True}
    rows = [row(rx_pps=1e6, placement="far", **common),
            sw("linux-bridge", "learn", rx_pps=0.5e6, placement="far", **common),
            row(rx_pps=0.8e6, **common),
            sw("linux-bridge", "learn", rx_pps=1.0e6, **common)]
    headers, lines = pub.winners(rows)
    got = [dict(zip(headers, ln, strict=True)) for ln in lines]
    assert [g["placement"] for g in got] == ["near", "far"]
    assert got[0]["winner"] == "linux-bridge:learn" and got[0]["compared by"] == "R+"
    assert got[0]["margin"] == "+25.0 %" and got[0]["sluice's rank"] == "sluice:patch 2 of 2"
    assert got[0]["flags"] == "kernel_path"
    assert got[1]["winner"] == "sluice:patch" and got[1]["sluice's rank"] == "sluice:patch 1 of 2"


def test_winners_leave_out_oversubscribed_and_latency_rows() -> None:
    rows = [row(), sw("testpmd", "io", oversubscribed=True, rx_pps=99e6), lat(0.5)]
    headers, lines = pub.winners(rows)
    assert len(lines) == 1 and lines[0][headers.index("winner")] == "sluice:patch"
    assert lines[0][headers.index("sluice's rank")] == "sluice:patch 1 of 1"


def test_a_named_baseline_is_used_when_present() -> None:
    rows = [row(ratio_vs="ovs-dpdk:flows", ratio_median=1.5),
            sw("ovs-dpdk", "flows", ratio_vs="sluice:patch", ratio_median=0.7)]
    headers, lines = pub.winners(rows, baseline="ovs-dpdk")
    assert lines[0][headers.index("compared by")] == "ratio to ovs-dpdk:flows"
    assert lines[0][headers.index("winner")] == "sluice:patch"


def test_latency_winner_is_the_lowest_mean_per_load() -> None:
    rows = [lat(0.5, 12.0), lat(0.5, 10.0, switch="testpmd", mode="io"),
            lat(0.99, 15.0), lat(0.99, 30.0, switch="testpmd", mode="io"),
            lat(0.99, 5.0, switch="testpmd", mode="io", oversubscribed=True)]
    headers, lines = pub.latency_winners(rows)
    got = [dict(zip(headers, ln, strict=True)) for ln in lines]
    assert [(g["load"], g["winner"]) for g in got] == [("0.50 R+", "testpmd:io"),
                                                        ("0.99 R+", "sluice:patch")]
    assert got[0]["sluice's rank"] == "sluice:patch 2 of 2"
    assert got[1]["margin"] == "15.0 us lower (50.0 %)" and got[1]["p99 us"] == "45.0"


def test_sections_have_the_report_shape() -> None:
    secs = pub.sections([row(), lat(0.5)])
    assert all(len(s) == 4 and isinstance(s[0], str) for s in secs)
    heads = [s[0] for s in secs]
    assert "Which switch wins each scenario (throughput)" in heads
    assert "Published sources" in heads
    assert any(h.startswith("Published beside measured: 000 Table 3") for h in heads)
    for _, _, headers, lines in secs:
        assert all(len(ln) == len(headers) for ln in lines or [])
    headers, lines = pub.figures_table()
    assert len(lines) == len(FIGURES) and all(len(ln) == len(headers) for ln in lines)
