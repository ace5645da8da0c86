"""sluice-bench's flow-mode pieces end to end, each once with short runs (issue 14's
benchmarks): sluice:flow and sluice:flow-normal with an ACL beside ovs-dpdk:flows holding
the same rules, the classifier sweep's report, the control-plane bench and chain-mixed's
firewall stage. Figures from seconds-long runs on a shared machine mean nothing; the tests
check that rows are well formed and traffic passed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_bench import BENCH, bench, rows

OVS = Path("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk")
needs_ovs = pytest.mark.skipif(not OVS.exists() or shutil.which("ovs-ofctl") is None,
                               reason="OVS-DPDK is not installed")


@needs_ovs
def test_flow_modes_and_ovs_flows_hold_the_same_acl(tmp_path: Path) -> None:
    out = tmp_path / "flow"
    r = bench("run", "--scenario", "v2v", "--switch",
              "sluice:flow,sluice:flow-normal,ovs-dpdk:flows", "--baseline", "ovs-dpdk:flows",
              "--rules", "300", "--rule-masks", "8", "--flows", "1000", "--sizes", "64",
              "--duration", "2", "--trials", "1", "--warmup", "0", "--no-report",
              "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {x["key"] for x in got} == {"sluice:flow", "sluice:flow-normal", "ovs-dpdk:flows"}
    for x in got:
        assert (x["rules"], x["rule_masks"], x["flows"]) == (300, 8, 1000), x
        assert x["rx_pps"] > 0 and x["method"] == "alternating", x
        assert "300 ACL rules over 8 masks" in x["steering"], x
    normal = next(x for x in got if x["key"] == "sluice:flow-normal")
    assert "actions=normal" in normal["steering"]
    # (test_bench.assert_cleaned_up looks at every sb* file on the machine, which other
    # users' runs of the harness make too; the switches' logs show they stopped)
    assert json.loads((out / "manifest.json").read_text())["restarts"] == []


@needs_ovs
def test_rules_sweep_reports_ratios_to_ovs_flows_and_patch(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    r = bench("sweep", "--param", "rules", "--values", "1,100", "--switch",
              "sluice:flow,sluice:patch,ovs-dpdk:flows", "--baseline", "ovs-dpdk:flows",
              "--flows", "100", "--scenario", "v2v", "--sizes", "64", "--duration", "2",
              "--trials", "1", "--warmup", "0", "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {(x["key"], x["sweep_value"]) for x in got} >= {
        (k, v) for k in ("sluice:flow", "sluice:patch", "ovs-dpdk:flows") for v in ("1", "100")}
    assert all(x["rules"] == (0 if x["key"] == "sluice:patch" else int(x["sweep_value"]))
               for x in got)
    md = (out / "report.md").read_text()
    assert "## Sweep: rules" in md and "/ ovs-dpdk:flows" in md and "/ sluice:patch" in md
    assert json.loads((out / "manifest.json").read_text())["sweep"]["param"] == "rules"


@needs_ovs
def test_flow_ctl_times_add_and_replace(tmp_path: Path) -> None:
    out = tmp_path / "ctl"
    r = bench("flow-ctl", "--add-rules", "3000", "--replace-rules", "300",
              "--rplus-seconds", "1", "--traffic-seconds", "3", "--replace-at", "1.5",
              "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    got = [json.loads(ln) for ln in (out / "flow-ctl.jsonl").read_text().splitlines()]
    assert [x["switch"] for x in got] == ["sluice:flow", "ovs-dpdk:flows"]
    for x in got:
        assert not x["note"] and not x["add_error"] and not x["replace_error"], x
        assert x["add_s"] > 0 and x["add_requests"] >= 1 and x["add_rules"] == 3000, x
        assert x["rss_after_kib"] >= x["rss_before_kib"] > 0, x
        assert x["rplus_pps"] > 0 and x["offered_pps"] < x["rplus_pps"], x
        assert x["replace_s"] > 0 and x["tx_packets"] > 0, x
        assert isinstance(x["zero_loss"], bool) and isinstance(x["control_lost"], int), x
    assert got[0]["add_requests"] == 1         # 3000 rules are one request (64 MiB lines)
    assert "zero loss" in r.stdout


def test_chain_mixed_runs_its_firewall_in_flow_mode(tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    r = bench("run", "--scenario", "chain-mixed", "--switch", "sluice:flow,sluice:patch",
              "--sizes", "64", "--duration", "2", "--trials", "1", "--warmup", "0",
              "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert {x["key"] for x in got} == {"sluice:flow", "sluice:patch"}
    for x in got:
        assert x["rx_pps"] > 0, x
        assert x["rules"] == (100 if x["key"] == "sluice:flow" else 0), x
    flow = next(x for x in got if x["key"] == "sluice:flow")
    assert "firewall" in flow["steering"]
    assert "firewall stage" not in (out / "report.md").read_text()
    assert BENCH.exists()
