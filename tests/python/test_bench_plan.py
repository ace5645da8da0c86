"""sluice-bench: round-robin order, the choice of method, the CPU-arrangement rule,
placement labels, the command line."""

from __future__ import annotations

import argparse

import pytest

from sluice.bench import arrange, cli, placement
from sluice.bench.arrange import Poller
from sluice.bench.gen import parse_lines
from sluice.bench.plan import choose_method, pick_baseline, round_robin, trials_for
from sluice.bench.scenarios import parse, topology


def test_round_robin_visits_everyone_each_trial_starting_one_later() -> None:
    order = round_robin(["a", "b", "c"], 3)
    assert order == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"),
                     (2, "c"), (2, "a"), (2, "b")]
    firsts = [order[i][1] for i in range(0, 9, 3)]
    assert sorted(firsts) == ["a", "b", "c"]


def test_method_alternating_only_for_userspace_switches_off_the_kernel_path() -> None:
    v2v, veth = parse("v2v", "memif", "uni"), parse("p2p", "veth", "uni")
    assert choose_method(v2v, ["sluice:patch", "testpmd:io"], set()) == "alternating"
    assert choose_method(v2v, ["sluice:patch"], set()) == "interleaved"
    assert choose_method(veth, ["sluice:patch", "testpmd:io"], set()) == "interleaved"
    assert choose_method(v2v, ["a", "b", "k"], {"k"}) == "interleaved"


def test_alternating_trials_pair_each_switch_with_the_baseline_both_orders() -> None:
    specs = trials_for(parse("v2v", "memif", "uni"), [64], ["sluice:patch", "testpmd:io",
                       "ovs-dpdk:normal"], set(), 2, "testpmd")
    assert [s.switches for s in specs] == [("sluice:patch", "testpmd:io"),
                                           ("ovs-dpdk:normal", "testpmd:io"),
                                           ("ovs-dpdk:normal", "testpmd:io"),
                                           ("sluice:patch", "testpmd:io")]
    assert specs[0].gen_order == ("sluice:patch", "testpmd:io")
    assert specs[2].gen_order == ("testpmd:io", "ovs-dpdk:normal")
    assert pick_baseline(["a:x", "b:y"], "c") == "a:x"


def test_two_pollers_on_one_cpu_are_refused_unless_allowed() -> None:
    gen, sw = Poller("sluice-gen", 0), Poller("switch", 1)
    assert arrange.check([[gen, sw]], allow_shared_cpu=False) is False
    # Alternating: two switches on one CPU, but never running at once.
    assert arrange.check([[gen, sw], [gen, Poller("other", 1)]], False) is False
    with pytest.raises(arrange.SharedCpuError, match="CPU 1"):
        arrange.check([[gen, sw, Poller("other", 1)]], allow_shared_cpu=False)
    assert arrange.check([[Poller("sluice-gen", 1), sw]], allow_shared_cpu=True) is True


def test_placement_labels_of_an_interval() -> None:
    probes = placement.parse('{"t_mono": 1.0, "rtt_ns": 60, "label": "near"}\nnoise\n'
                             '{"t_mono": 2.0, "rtt_ns": 380, "label": "far"}\n')
    assert len(probes) == 2
    assert placement.label(probes, 0.5, 1.5) == "near"
    assert placement.label(probes, 0.5, 2.5) == "mixed"
    assert placement.label(probes, 3.0, 4.0) == "unlabelled"
    late = placement.parse('{"t_mono": 5.0, "rtt_ns": 0, "label": "unknown"}')
    assert placement.label([*probes, *late], 1.5, 5.5) == "far"     # unknown left out


def test_loopback_topology_chains_vnfs_pair_by_pair(tmp_path) -> None:  # type: ignore[no-untyped-def]
    topo = topology(parse("loopback-2", "memif", "uni"), tmp_path, "t")
    assert [link.name for link in topo.links] == ["p0", "v1a", "v1b", "v2a", "v2b", "p1"]
    assert topo.pairs == ((0, 1), (2, 3), (4, 5))
    assert [link.role for link in topo.links].count("vnf") == 4
    with pytest.raises(ValueError):
        parse("loopback-6", "memif", "uni")


def test_cli_switch_keys_sizes_and_matrix() -> None:
    assert cli.switch_keys("sluice:patch,ovs-dpdk") == ("sluice:patch", "ovs-dpdk:normal",
                                                        "ovs-dpdk:flows")
    with pytest.raises(argparse.ArgumentTypeError):
        cli.switch_keys("bess")
    with pytest.raises(argparse.ArgumentTypeError):
        cli.sizes("32")
    args = cli.make_parser().parse_args(["run", "--matrix", "default"])
    units = cli.units(args)
    assert [(u[0].name, u[0].phy, u[1]) for u in units] == [
        ("v2v", "", (64, 1500)), ("p2p", "memif", (64, 1500)), ("p2p", "veth", (64, 1500)),
        ("loopback-1", "memif", (64,)), ("loopback-3", "memif", (64,))]


def test_gen_output_is_split_into_samples_windows_and_summary() -> None:
    text = ('{"window": 0, "switch": "A", "rx_pps": 5}\n'
            '{"monotonic_s": 10.5, "t": 1.0, "tx_pps": 7, "rx_pps": 6}\n'
            'a human line\n'
            '{"tx_packets": 7, "rx_packets": 6, "streams": []}\n')
    s, w, summary = parse_lines(text)
    assert len(s) == 1 and s[0].rx_pps == 6 and len(w) == 1 and summary["rx_packets"] == 6


def test_settings_refuse_runs_with_nothing_to_count() -> None:
    parse = cli.make_parser().parse_args
    s = cli.settings(parse(["run", "--duration", "2"]), ("testpmd:io",), "testpmd")
    assert s.warmup == 0.0 and s.alt_duration == 4.0       # 4 windows at least
    assert cli.settings(parse(["run"]), ("testpmd:io",), "testpmd").warmup == 1.0
    with pytest.raises(ValueError, match="counted second"):
        cli.settings(parse(["run", "--duration", "2", "--warmup", "1.5"]), ("t:io",), "t")
