"""Per-hop counts of loopback chains: the hop order, loss located, missing counters spanned,
both directions, counter differences, and OVS's dump-ports read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.bench import hops, report_hops
from sluice.bench.gen import GenResult
from sluice.bench.plan import TrialSpec
from sluice.bench.scenarios import parse
from sluice.bench.schema import Row
from sluice.bench.switches.ovsdb import parse_dump_ports


def vnf(rx: int, tx: int, back: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    return {"rx": rx + back[0], "tx": tx + back[1],
            "in_to_out": {"rx": rx, "tx": tx, "dropped": rx - tx},
            "out_to_in": {"rx": back[0], "tx": back[1], "dropped": back[0] - back[1]}}


def port(rx: int, tx: int, **more: Any) -> dict[str, Any]:
    return {"rx": rx, "tx": tx, **more}


def test_loopback2_hop_order_and_worst_hop() -> None:
    gen = [{"tx": 1000, "rx": 0}, {"tx": 0, "rx": 880}]
    sw = {"p0": port(1000, 0, drops={"tx_full": 50}), "v1a": port(0, 950),
          "v1b": port(940, 0), "v2a": port(0, 940), "v2b": port(900, 0), "p1": port(0, 880)}
    pts = hops.chain_points(2, gen, [vnf(950, 940), vnf(940, 900)], sw)
    assert [p.label for p in pts] == [
        "gen p0 tx", "switch p0 rx", "switch v1a tx", "VNF1 rx", "VNF1 tx", "switch v1b rx",
        "switch v2a tx", "VNF2 rx", "VNF2 tx", "switch v2b rx", "switch p1 tx", "gen p1 rx"]
    h = hops.chain_hops(2, gen, [vnf(950, 940), vnf(940, 900)], sw, bidir=False)
    fwd = h["forward"]
    assert [x["lost"] for x in fwd["hops"]] == [0, 50, 0, 10, 0, 0, 0, 40, 0, 20, 0]
    assert fwd["hops"][1]["switch_drops"] == {"tx_full": 50}
    assert fwd["worst"] == "switch p0 rx -> switch v1a tx"
    assert (fwd["sent"], fwd["received"]) == (1000, 880)
    assert sum(x["lost"] for x in fwd["hops"]) == fwd["sent"] - fwd["received"]
    assert "reverse" not in h and h["switch_counters"] is True


def test_an_input_port_s_missed_frames_show_on_the_hop_into_it() -> None:
    gen = [{"tx": 100}, {"rx": 90}]
    sw = {"p0": port(90, 0, rx_dropped=10, rx_missed=0), "v1a": port(0, 90),
          "v1b": port(90, 0), "p1": port(0, 90)}
    fwd = hops.chain_hops(1, gen, [vnf(90, 90)], sw, bidir=False)["forward"]["hops"]
    assert fwd[0]["switch_missed"] == {"rx_dropped": 10} and fwd[0]["lost"] == 10
    assert all("switch_missed" not in h for h in fwd[1:])


def test_without_switch_counters_hops_span_the_switch() -> None:
    gen = [{"tx": 500}, {"rx": 470}]
    h = hops.chain_hops(1, gen, [vnf(490, 480)], None, bidir=False)
    names = [hops.hop_name(x) for x in h["forward"]["hops"]]
    assert names == ["gen p0 tx -> VNF1 rx", "VNF1 rx -> VNF1 tx", "VNF1 tx -> gen p1 rx"]
    assert [x["lost"] for x in h["forward"]["hops"]] == [10, 10, 10]
    assert h["forward"]["worst"] == "gen p0 tx -> VNF1 rx"     # the first of equals
    assert h["switch_counters"] is False


def test_bidir_reverse_runs_from_p1_through_the_vnfs_backwards() -> None:
    gen = [{"tx": 100, "rx": 77}, {"tx": 80, "rx": 100}]
    sw = {"p0": port(100, 77), "v1a": port(78, 100), "v1b": port(100, 79),
          "v2a": port(79, 100), "v2b": port(100, 80), "p1": port(80, 100)}
    v = [vnf(100, 100, back=(78, 78)), vnf(100, 100, back=(80, 79))]
    h = hops.chain_hops(2, gen, v, sw, bidir=True)
    rev = [p.label for p in hops.chain_points(2, gen, v, sw, reverse=True)]
    assert rev[:5] == ["gen p1 tx", "switch p1 rx", "switch v2b tx", "VNF2 rx", "VNF2 tx"]
    assert rev[-3:] == ["switch v1a rx", "switch p0 tx", "gen p0 rx"]
    assert h["forward"]["worst"] is None
    assert (h["reverse"]["sent"], h["reverse"]["received"]) == (80, 77)
    assert h["reverse"]["worst"] == "VNF2 rx -> VNF2 tx"
    assert [x["lost"] for x in h["reverse"]["hops"]] == [0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0]


def test_chain_length_must_match() -> None:
    with pytest.raises(ValueError, match="loopback-2"):
        hops.chain_points(2, [{}, {}], [vnf(1, 1)], None)


def test_counter_delta() -> None:
    before = {"p0": {"rx": 10, "tx": 5, "drops": {"tx_full": 1, "no_route": 0}}}
    after = {"p0": {"rx": 30, "tx": 5, "drops": {"tx_full": 4, "no_route": 0}}}
    assert hops.counter_delta(after, before) == {"p0": {"rx": 20, "tx": 0,
                                                        "drops": {"tx_full": 3}}}
    assert hops.counter_delta(after, None) is None
    # A port only one reading has (an OVS vhost-user port not connected at the first) is
    # unknown, and its hops merge with the next.
    assert hops.counter_delta({**after, "v1a": {"rx": 5, "tx": 5}}, before) == \
        hops.counter_delta(after, before)
    assert hops.counter_delta(before, after) is None        # went backwards: restarted


def test_parse_dump_ports() -> None:
    text = """OFPST_PORT reply (xid=0x2): 3 ports
  port LOCAL: rx pkts=0, bytes=0, drop=?, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
  port  1: rx pkts=1200, bytes=72000, drop=3, errs=0, frame=?, over=?, crc=?
           tx pkts=7, bytes=420, drop=0, errs=?, coll=?
           duration=12.5s
  port  2: rx pkts=7, bytes=420, drop=0, errs=0, frame=?, over=?, crc=?
           tx pkts=1197, bytes=71820, drop=0, errs=?, coll=?
"""
    got = parse_dump_ports(text)
    assert got["1"] == {"rx": 1200, "rx_dropped": 3, "rx_errors": 0, "tx": 7,
                        "tx_dropped": 0, "tx_errors": None}
    assert got["2"]["tx"] == 1197 and got["LOCAL"]["rx_dropped"] is None


# -- the report's per-hop tables -----------------------------------------------------------

def _row(trial: int, placement: str, trial_hops: dict[str, Any], method: str = "interleaved"
         ) -> Row:
    return Row(switch="sluice", mode="patch", key="sluice:patch", scenario="loopback-1",
               phy="memif", vnf="inline", size=64, direction="uni", trial=trial,
               placement=placement, method=method, rx_pps=1.0, tx_pps=1.0, loss=0.0,
               oversubscribed=False, generator_bound=False, kernel_path=False,
               hops=trial_hops)


def test_report_sums_trials_once_per_trial_and_names_the_worst_hop() -> None:
    sw = {"p0": port(100, 0), "v1a": port(0, 90), "v1b": port(90, 0), "p1": port(0, 89)}
    h = hops.chain_hops(1, [{"tx": 100}, {"rx": 89}], [vnf(90, 90)], sw, bidir=False)
    rows = [_row(0, "near", h), _row(0, "far", h), _row(1, "near", h),
            _row(2, "near", h, method="latency")]
    secs = report_hops.sections(rows)
    assert [s[0] for s in secs] == ["Per-hop counts of the chains",
                                    "Hops: loopback-1/memif uni, sluice:patch, 64 B, VNFs inline"]
    title, text, headers, lines = secs[1]
    assert text.startswith("2 trial(s).")          # two placements of trial 0 count once
    assert "Most loss at switch p0 rx -> switch v1a tx: 20 frames, 90.909 %" in text
    assert lines is not None and lines[1][:4] == ["switch p0 rx -> switch v1a tx", "200",
                                                  "180", "20"]


def test_report_skips_directions_whose_hop_lists_differ() -> None:
    with_sw = hops.chain_hops(1, [{"tx": 10}, {"rx": 10}], [vnf(10, 10)],
                              {"p0": port(10, 0), "v1a": port(0, 10), "v1b": port(10, 0),
                               "p1": port(0, 10)}, bidir=False)
    without = hops.chain_hops(1, [{"tx": 10}, {"rx": 10}], [vnf(10, 10)], None, bidir=False)
    assert report_hops.summed([with_sw, without], "forward") is None
    assert report_hops.worst_text(report_hops.summed([with_sw], "forward") or []) == \
        "No hop lost a frame."


def test_runner_splits_one_generator_between_two_alternating_switches() -> None:
    """sluice-gen lists the ports and VNFs of the generator's first switch (B in an odd
    trial), then the second's; each switch gets its own."""
    spec = TrialSpec(parse("loopback-1", "memif", "uni"), 64, 1, "alternating", ("a", "b"))
    summary = {"port_stats": [{"tx": 100, "rx": 0}, {"tx": 0, "rx": 97},
                              {"tx": 50, "rx": 0}, {"tx": 0, "rx": 49}],
               "vnfs": [vnf(98, 97), vnf(50, 49)]}
    res = GenResult(summary, [], [], 0.0, 0.0, Path("/dev/null"))
    zero = {n: port(0, 0) for n in ("p0", "v1a", "v1b", "p1")}
    after_b = {"p0": port(100, 0), "v1a": port(0, 98), "v1b": port(97, 0), "p1": port(0, 97)}
    got = hops.trial_hops(spec, spec.gen_order, res.summary, {"a": zero, "b": zero},
                            {"a": None, "b": after_b})
    assert spec.gen_order == ("b", "a")
    assert (got["b"]["forward"]["sent"], got["b"]["forward"]["received"]) == (100, 97)
    assert got["b"]["forward"]["worst"] == "switch p0 rx -> switch v1a tx"
    assert got["a"]["switch_counters"] is False
    assert [h["lost"] for h in got["a"]["forward"]["hops"]] == [0, 1, 0]


def test_runner_without_generator_port_counters_starts_at_the_switch() -> None:
    spec = TrialSpec(parse("loopback-1", "memif", "uni"), 64, 0, "interleaved", ("a",))
    res = GenResult({"vnfs": [vnf(9, 9)]}, [], [], 0.0, 0.0, Path("/dev/null"))
    sw = {"p0": port(10, 0), "v1a": port(0, 9), "v1b": port(9, 0), "p1": port(0, 9)}
    got = hops.trial_hops(spec, ("a",), res.summary, {"a": {n: port(0, 0) for n in sw}}, {"a": sw})
    assert got["a"]["forward"]["hops"][0]["from"] == "switch p0 rx"
    assert got["a"]["forward"]["hops"][-1]["to"] == "switch p1 tx"
