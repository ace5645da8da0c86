"""The classifier benchmark's parts without processes: the rule list (rules.py) both flow
switches load, its chunking under sluiced's request limit, VPP's translation, the sweep and
the report's ratios."""

from __future__ import annotations

import json
from pathlib import Path

from sluice.bench import flowctl, report_sweep, rules, scenarios, sweep
from sluice.bench.schema import Row
from sluice.bench.switches.vpp import acl_commands


def traffic(m: int) -> list[tuple[str, int, int, int, int]]:
    """sluice-gen's flow k (tools/gen/traffic.c): UDP 10.0.0.1+k -> 10.128.0.1+k, source
    port 1024 + k % 64000, destination port 1024."""
    return [("udp", 0x0a000001 + k, 0x0a800001 + k, 1024 + k % 64000, 1024)
            for k in range(0, m, max(1, m // 400))]


def test_acl_is_seeded_sized_and_over_the_masks_asked() -> None:
    a, b = rules.acl(1000, 16, 3), rules.acl(1000, 16, 3)
    assert a == b and a != rules.acl(1000, 16, 4)
    assert len(a) == 1000 and rules.distinct_masks(a) == 16
    assert rules.distinct_masks(rules.acl(100, 4)) == 4
    assert rules.distinct_masks(rules.acl(1)) == 1
    assert len({r.match() for r in a}) == 1000          # no two rules alike
    big = rules.acl(100_000)
    assert len(big) == 100_000 and max(r.priority for r in big) <= 65535
    assert min(r.priority for r in big) > rules.STEER_PRIORITY


def test_no_acl_rule_matches_the_generators_traffic() -> None:
    acl = rules.acl(10_000, 16)
    for t in traffic(1_000_000):
        assert not any(r.matches(*t) for r in acl), t
    # ... though their addresses overlap it: some rule matches the traffic's addresses
    assert any(r.matches("udp", 0x0a000001, r.dst or 0x0a800001, r.sport, r.dport)
               for r in acl if r.proto == "udp" and r.src_len <= 8)


def test_rule_set_puts_the_acl_above_the_steering() -> None:
    lines = rules.rule_set(rules.pair_rules([(0, 1)]), 3)
    assert lines[-2:] == ["priority=1,in_port=1,actions=output:2",
                          "priority=1,in_port=2,actions=output:1"]
    assert all(ln.startswith("priority=") and ln.endswith("actions=drop") for ln in lines[:3])
    assert rules.normal_rules() == ["priority=1,actions=normal"]
    fw = rules.lines_for(rules.pair_rules([(0, 1), (2, 3)]),
                         rules.options({}, firewall=2))
    assert len(fw) == rules.FIREWALL_RULES + 4
    assert all(",in_port=3," in ln for ln in fw[:rules.FIREWALL_RULES])
    assert rules.options({"rules": "7"}, None).n == 7 and rules.options({}, None).n == 0


def test_chain_mixed_names_its_firewall_port(tmp_path: Path) -> None:
    topo = scenarios.topology(scenarios.parse("chain-mixed", "memif", "uni"), tmp_path, "t")
    assert topo.links[topo.firewall].name == "v1b"
    assert scenarios.topology(scenarios.parse("loopback-2", "memif", "uni"), tmp_path,
                              "t").firewall is None


def test_requests_stay_under_sluiceds_line_limit() -> None:
    lines = rules.acl_lines(rules.acl(20_000))
    assert len(flowctl.chunks("add-flows", "bench", lines)) == 1     # 64 MiB lines
    reqs = flowctl.chunks("add-flows", "bench", lines, limit=64 * 1024)
    assert len(reqs) > 1 and all(len(r) < 64 * 1024 for r in reqs)
    back = [ln for r in reqs for ln in json.loads(r)["params"]["flows"]]
    assert back == lines
    assert [json.loads(r)["id"] for r in reqs] == list(range(1, len(reqs) + 1))


def test_vpp_acl_translation() -> None:
    r = rules.AclRule(5, "udp", 0x0a010000, 16, 0, 0, 0, 0, 0x8000, 4)
    assert rules.vpp_acl_rule(r) == ("deny src 10.1.0.0/16 dst 0.0.0.0/0 proto 17 "
                                     "sport 0-65535 dport 32768-36863")
    out = rules.vpp_acl_rules(rules.acl(1200))
    assert out[-1].startswith("permit") and len(out) == 1201
    topo = scenarios.topology(scenarios.parse("v2v", "memif", "uni"), Path("/x"), "t")
    cmds = acl_commands(topo, out, None)
    assert sum(c.startswith("set acl-plugin acl ") for c in cmds) == 7
    assert cmds[-1] == "set acl-plugin interface VirtualEthernet0/0/1 input acl 6"


def test_sweep_takes_rules_and_defaults() -> None:
    sweep.check_values("rules", ["1", "100", "1000", "10000"])
    assert sweep.default_values("rules") == ["1", "100", "1000", "10000"]
    assert sweep.default_values("flows") == ["1", "1000", "100000", "1000000"]


def row(key: str, value: str, rx: float, vs: str = "", ratio: float | None = None,
        rules_n: int = 0) -> Row:
    sw, mode = key.split(":")
    return Row(switch=sw, mode=mode, key=key, scenario="v2v", phy="", vnf="", size=64,
               direction="uni", trial=0, placement="near", method="alternating", rx_pps=rx,
               tx_pps=rx, loss=0.0, oversubscribed=False, generator_bound=False,
               kernel_path=False, sweep_param="rules", sweep_value=value, ratio_vs=vs,
               ratio_median=ratio, rules=rules_n, rule_masks=16 if rules_n else 0)


def test_sweep_report_gives_ratios_to_ovs_flows_and_patch() -> None:
    rs = [row("sluice:flow", "100", 6e6, "ovs-dpdk:flows", 1.5, 100),
          row("ovs-dpdk:flows", "100", 4e6, "sluice:flow", 0.66, 100),
          row("sluice:patch", "100", 8e6, "ovs-dpdk:flows", 2.0),
          row("ovs-dpdk:flows", "100", 4e6, "sluice:patch", 0.5, 100)]
    g = report_sweep._groups(rs)
    assert report_sweep.ratio_to(g, "v2v", "100", "sluice:flow", "ovs-dpdk:flows") == "1.50 (w)"
    assert (report_sweep.ratio_to(g, "v2v", "100", "sluice:flow", "sluice:patch")
            == "0.75 (via ovs-dpdk:flows)")
    (title, _, head, lines), = report_sweep.sections(rs)
    assert "/ ovs-dpdk:flows" in head and "/ sluice:patch" in head
    flow = next(ln for ln in lines if ln[2] == "sluice:flow")
    assert flow[4] == "100 (16 masks)/1"


def test_sweep_report_says_whether_the_goals_were_met() -> None:
    rs = [row("sluice:flow", "100", 6e6, "ovs-dpdk:flows", 1.5, 100),
          row("ovs-dpdk:flows", "100", 4e6, "sluice:flow", 0.66, 100),
          row("sluice:patch", "100", 8e6, "ovs-dpdk:flows", 2.0)]
    g = report_sweep._groups(rs)
    assert report_sweep.goal(g, "v2v", "100", 1) == "met >= 1.3x OVS; met >= 0.5x patch"
    assert report_sweep.goal(g, "v2v", "100", 100_000).startswith("NOT met >= 2x OVS")
    (_, _, head, lines), = report_sweep.sections(rs)
    assert head[-1] == "issue 14 goal"
    assert next(ln for ln in lines if ln[2] == "sluice:flow")[-1].startswith("met")


def test_report_keeps_sweep_points_apart() -> None:
    """The report's tables (R+, ratios, verdict) give one line per sweep point, not one per
    switch pooled over the points (1 flow and 100,000 flows are different loads)."""
    from sluice.bench import report, report_verdict
    rs = [row("sluice:flow", "1", 9e6, "ovs-dpdk:flows", 1.9, 1000),
          row("ovs-dpdk:flows", "1", 4.7e6, "sluice:flow", 0.52, 1000),
          row("sluice:flow", "100000", 6e6, "ovs-dpdk:flows", 20.0, 1000),
          row("ovs-dpdk:flows", "100000", 0.3e6, "sluice:flow", 0.05, 1000)]
    for r in rs:
        r.gen_order, r.ratio_q1, r.ratio_q3, r.ratio_n = "ab", r.ratio_median, r.ratio_median, 6
    tput = report.throughput_table(rs)
    assert sorted((t["scenario"], t["switch"]) for t in tput) == [
        ("v2v rules=1", "ovs-dpdk:flows"), ("v2v rules=1", "sluice:flow"),
        ("v2v rules=100000", "ovs-dpdk:flows"), ("v2v rules=100000", "sluice:flow")]
    ratios = {(t["scenario"], t["switch"]): t["ratio"] for t in report.ratio_table(rs)}
    assert ratios[("v2v rules=1", "sluice:flow")] == 1.9
    assert ratios[("v2v rules=100000", "sluice:flow")] == 20.0
    verdict = report_verdict.lines(rs, "ovs-dpdk:flows")
    assert {v.scenario for v in verdict} == {"v2v rules=1", "v2v rules=100000"}
