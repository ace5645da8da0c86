"""sluice-bench sweep --param fanout: the scenario, its topology, which switches decline,
sluice-gen's command line, the rows and the report's curves."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bench import cli, gen, report_sweep, sweep
from sluice.bench.plan import TrialSpec, choose_method, trials_for
from sluice.bench.runner import Runner, Settings, fanout_fields
from sluice.bench.scenarios import FANOUT_DST_MAC, MAX_FANOUT, fanout, parse, topology
from sluice.bench.schema import Row, validate
from sluice.bench.stats import Sample
from sluice.bench.switches import ADAPTERS, Context, Switch


def settings(tmp_path: Path, **kw: object) -> Settings:
    base: dict[str, object] = {
        "units": ((parse("v2v", "memif", "uni"), (64, 1500)),),
        "switches": ("sluice:learn", "ovs-dpdk:normal"), "trials": 1, "duration": 4.0,
        "window": 1.0, "settle": 0.3, "warmup": 1.0, "cooldown": 0.0, "switch_cpu": 1,
        "gen_cpu": 0, "allow_shared_cpu": False, "baseline": "testpmd", "out": tmp_path,
        "repo": tmp_path, "gen": tmp_path / "sluice-gen"}
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


def adapter(tmp_path: Path, key: str) -> Switch:
    name, mode = key.split(":")
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path)
    return ADAPTERS[name](ctx, mode)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    """A Runner that starts nothing (its work directory removed)."""
    r = Runner(settings(tmp_path), lambda *_: None, lambda _m: None)
    yield r
    r.cleanup_work()


def test_fanout_topology_is_one_sender_and_n_sink_ports(tmp_path: Path) -> None:
    scn = fanout(3)
    topo = topology(scn, tmp_path, "t")
    assert [(lk.name, lk.kind, lk.role) for lk in topo.links] == [
        ("p0", "vhost", "phy"), ("s0", "vhost", "sink"), ("s1", "vhost", "sink"),
        ("s2", "vhost", "sink")]
    assert topo.pairs == () and topo.netns is None
    assert len({lk.path for lk in topo.links}) == 4
    assert scn.family == "fanout" and scn.name == "fanout-3"
    assert scn.label() == "fanout-3 (1 sender, 3 sinks)"
    assert scn.gen_ports == 4 and scn.chain == 0 and not scn.kernel_path
    for bad in (0, MAX_FANOUT + 1):
        with pytest.raises(ValueError):
            fanout(bad)


def test_sweep_values_become_fanout_scenarios_with_the_runs_sizes(tmp_path: Path) -> None:
    base = settings(tmp_path)
    runs = sweep.plans(base, "fanout", ["1", "4"], cli.rate, cli.sizes)
    assert [r.units for r in runs] == [((fanout(1), (64, 1500)),), ((fanout(4), (64, 1500)),)]
    assert runs[1].tags == {"sweep_param": "fanout", "sweep_value": "4"}
    sweep.check_values("fanout", ["1", "16"])
    for bad in ("0", "17", "x", "2.0"):
        with pytest.raises(ValueError):
            sweep.check_values("fanout", [bad])


def test_only_flooding_modes_fan_out_the_others_say_why(tmp_path: Path) -> None:
    for key in ("sluice:learn", "ovs-dpdk:normal", "vpp:learn"):
        assert adapter(tmp_path, key).unsupported("fanout-2", "") is None, key
    assert adapter(tmp_path, "linux-bridge:learn").unsupported("fanout-2", "veth") is None
    reasons = {key: adapter(tmp_path, key).unsupported("fanout-2", "")
               for key in ("sluice:patch", "ovs-dpdk:flows", "vpp:xconnect", "testpmd:io",
                           "basicfwd:fwd", "ovs-netdev:normal")}
    assert all(reasons.values()), reasons
    assert "does not flood" in str(reasons["sluice:patch"])
    assert "learn" in str(reasons["sluice:patch"])
    assert "normal" in str(reasons["ovs-dpdk:flows"])
    assert "cannot fan out" in str(reasons["testpmd:io"])
    assert "its pair only" in str(reasons["basicfwd:fwd"])
    assert "not tried" in str(reasons["ovs-netdev:normal"])
    # Other scenarios are unaffected.
    assert adapter(tmp_path, "testpmd:io").unsupported("v2v", "") is None


def test_generator_gets_one_port_and_a_sink_port_per_destination(tmp_path: Path) -> None:
    sw = adapter(tmp_path, "sluice:learn")
    sw.topology = topology(fanout(2), tmp_path, "t")
    assert gen.port_args(sw).args == [
        "--port", f"virtio-user:path={tmp_path}/t-p0.sock",
        "--sink-port", f"virtio-user:path={tmp_path}/t-s0.sock",
        "--sink-port", f"virtio-user:path={tmp_path}/t-s1.sock"]
    ovs = adapter(tmp_path, "ovs-dpdk:normal")     # OVS is the vhost-user client
    ovs.topology = topology(fanout(1), tmp_path, "t")
    assert gen.port_args(ovs).args[-1] == f"virtio-user:path={tmp_path}/t-s0.sock,server=1"


def test_fanout_trials_are_interleaved_and_send_broadcasts(runner: Runner,
                                                           tmp_path: Path) -> None:
    scn = fanout(4)
    keys = ["sluice:learn", "ovs-dpdk:normal"]
    assert choose_method(scn, keys, set()) == "interleaved"
    assert choose_method(parse("v2v", "memif", "uni"), keys, set()) == "alternating"
    specs = trials_for(scn, [64], keys, set(), 1, "testpmd")
    assert [s.switches for s in specs] == [("sluice:learn",), ("ovs-dpdk:normal",)]
    sw = adapter(tmp_path, "sluice:learn")
    sw.topology = topology(scn, tmp_path, "t")
    cmd = runner.gen_cmd(specs[0], [sw], tmp_path / "o.json", None)
    assert cmd[cmd.index("--dst-mac") + 1] == FANOUT_DST_MAC == "ff:ff:ff:ff:ff:ff"
    assert cmd.count("--sink-port") == 4 and cmd.count("--port") == 1
    assert "--alternate" not in cmd and "--bidir" not in cmd
    assert cmd[cmd.index("--role") + 1] == "txrx"
    # A v2v trial gets no --dst-mac of ours.
    v2v = TrialSpec(parse("v2v", "memif", "uni"), 64, 0, "interleaved", ("sluice:learn",))
    sw.topology = topology(v2v.scenario, tmp_path, "t")
    assert "--dst-mac" not in runner.gen_cmd(v2v, [sw], tmp_path / "o.json", None)


def test_plan_skips_fanout_when_sluice_gen_has_no_sink_ports(tmp_path: Path) -> None:
    fake = tmp_path / "old-gen"
    fake.write_text("#!/bin/sh\necho 'usage: sluice-gen --port SPEC'\n")
    fake.chmod(0o755)
    said: list[str] = []
    r = Runner(settings(tmp_path, gen=fake, units=((fanout(2), (64,)),)),
               lambda *_: None, said.append)
    try:
        assert r.plan() == []
        assert r.skipped[0]["switch"] == "*" and "--sink-port" in r.skipped[0]["reason"]
    finally:
        r.cleanup_work()


def test_per_second_records_give_each_sinks_rate() -> None:
    lines = [{"monotonic_s": 10.0, "t": 1.0, "tx_pps": 100.0, "rx_pps": 200.0,
              "sink_rx_packets": [100, 100]},
             {"monotonic_s": 12.0, "t": 3.0, "tx_pps": 100.0, "rx_pps": 190.0,
              "sink_rx_packets": [300, 280]},
             {"monotonic_s": 13.0, "t": 4.0, "tx_pps": 100.0, "rx_pps": 200.0}]
    samples, _, _ = gen.parse_lines("\n".join(json.dumps(x) for x in lines))
    assert [s.sink_rx_pps for s in samples] == [(100.0, 100.0), (100.0, 90.0), ()]


def test_fanout_rows_count_copies_and_the_share_delivered() -> None:
    scn = fanout(2)
    samples = [Sample(2.0, 2.0, 1e6, 2e6, (1e6, 1e6)), Sample(3.0, 3.0, 1e6, 1.5e6,
                                                              (1e6, 0.5e6))]
    f = fanout_fields(scn, samples)
    assert f == {"fanout": 2, "delivered_fraction": 3.5e6 / 4e6,
                 "sink_rx_pps": [1e6, 0.75e6]}
    assert fanout_fields(parse("v2v", "memif", "uni"), samples) == {}
    assert fanout_fields(scn, [Sample(1.0, 1.0, 0.0, 0.0)])["delivered_fraction"] == 0.0


def test_interleaved_fanout_row_loss_is_of_n_times_the_frames_sent(runner: Runner,
                                                                   tmp_path: Path) -> None:
    scn = fanout(4)
    spec = TrialSpec(scn, 64, 0, "interleaved", ("sluice:learn",))
    sw = adapter(tmp_path, "sluice:learn")
    sw.topology = topology(scn, tmp_path, "t")
    samples = [Sample(float(t), float(t), 1e6, 3.6e6, (0.9e6,) * 4) for t in range(2, 5)]
    res = gen.GenResult({"idle_fraction": 0.2}, samples, [], 0.0, 1.0, tmp_path / "g.log")
    common = {"res": res, "over": False, "cpu": {"sluice:learn": 1.0}, "busy": {},
              "wall": 4.0}
    rows = runner.interleaved_rows(spec, sw, "sluice:learn", common)
    assert len(rows) == 1
    row = rows[0]
    assert row.scenario == "fanout-4" and row.fanout == 4
    assert row.rx_pps == pytest.approx(3.6e6) and row.tx_pps == pytest.approx(1e6)
    assert row.loss == pytest.approx(0.1) and row.delivered_fraction == pytest.approx(0.9)
    assert row.sink_rx_pps == [0.9e6] * 4
    assert validate(json.loads(row.to_json())) == row


def fan_row(key: str, n: str, tx: float, delivered: float) -> Row:
    name, mode = key.split(":")
    return Row(switch=name, mode=mode, key=key, scenario=f"fanout-{n}", phy="", vnf="", size=64,
               direction="uni", trial=0, placement="near", method="interleaved",
               rx_pps=tx * int(n) * delivered, tx_pps=tx, loss=1 - delivered,
               oversubscribed=False, generator_bound=False, kernel_path=False,
               sweep_param="fanout", sweep_value=n, fanout=int(n),
               delivered_fraction=delivered)


def test_report_draws_copies_and_frames_against_n(tmp_path: Path) -> None:
    rows = [fan_row("sluice:learn", "1", 10e6, 1.0), fan_row("sluice:learn", "4", 4e6, 0.5),
            fan_row("ovs-dpdk:normal", "1", 8e6, 1.0),
            fan_row("ovs-dpdk:normal", "4", 2e6, 1.0)]
    pts = report_sweep.points(rows)
    by = {(p["switch"], p["value"]): p for p in pts}
    assert {p["scenario"] for p in pts} == {"fanout"}     # one curve per switch over N
    assert by[("sluice:learn", "4")]["rx_mpps"] == pytest.approx(8.0)
    assert by[("sluice:learn", "4")]["tx_mpps"] == pytest.approx(4.0)
    assert by[("sluice:learn", "4")]["delivered"] == pytest.approx(0.5)
    title, _, header, lines = report_sweep.sections(rows)[0]
    assert title == "Sweep: fanout"
    assert header[:4] == ["switch", "N", "copies Mpps", "frames Mpps"]
    assert ["sluice:learn", "4", "8.000", "4.000", "0.5000", "near", "1"] in lines
    assert report_sweep.figure(rows, tmp_path) == "sweep"
    assert report_sweep._panels("fanout", ["throughput"]) == [
        ("throughput", "rx_mpps", "copies received (Mpps)"),
        ("throughput", "tx_mpps", "frames sent (Mpps)")]


def test_switches_without_vhost_user_fan_out_over_veth_pairs(tmp_path: Path) -> None:
    from sluice.bench.runner import v2v_split
    scn = fanout(3)
    units = v2v_split(scn, ["sluice:learn", "linux-bridge:learn"])
    assert units == [(scn, ["sluice:learn"]),
                     (dataclasses.replace(scn, phy="veth"), ["linux-bridge:learn"])]
    veth = units[1][0]
    assert veth.kernel_path and veth.label() == "fanout-3/veth (1 sender, 3 sinks)"
    topo = topology(veth, tmp_path, "sb12345a", "sb12345a-sw")
    assert [(lk.name, lk.kind, lk.role) for lk in topo.links] == [
        ("p0", "veth", "phy"), ("k0", "veth", "sink"), ("k1", "veth", "sink"),
        ("k2", "veth", "sink")]
    assert all(len(lk.iface) <= 15 and len(lk.peer) <= 15 for lk in topo.links)
    assert topo.netns == "sb12345a-sw" and topo.pairs == ()


def test_linux_bridge_puts_every_fanout_port_in_one_bridge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sluice.bench.switches import linux_bridge
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(linux_bridge, "ip", lambda ns, *a: calls.append((ns, *a)))
    lb = adapter(tmp_path, "linux-bridge:learn")
    scn = dataclasses.replace(fanout(2), phy="veth")
    topo = topology(scn, tmp_path, "t", "t-sw")
    lb.start(topo)
    masters = [c for c in calls if "master" in c]
    assert [c[3] for c in masters] == ["tsp0", "tsk0", "tsk1"]
    assert {c[5] for c in masters} == {"tbr0"} and lb.bridges == ["tbr0"]
    assert "one bridge with every port" in lb.steering()
    lb.bridges.clear()      # nothing was made: stop() must not run ip for real
    lb.stop()
    assert gen.port_args(lb).args == ["--port", "af_packet:iface=tgp0",
                                 "--sink-port", "af_packet:iface=tgk0",
                                 "--sink-port", "af_packet:iface=tgk1"]


def test_fanout_sweep_has_default_values_the_others_need_them() -> None:
    assert sweep.default_values("fanout") == ["1", "2", "4", "8"]
    with pytest.raises(ValueError, match="needs --values"):
        sweep.default_values("chain")
    assert cli.main(["sweep", "--param", "chain", "--dry-run"]) == 2
