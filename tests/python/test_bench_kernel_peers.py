"""sluice-bench's kernel-path peers without running them: sluice-sockets output, the
sockets command line, v2v's split into vhost-user and veth units, ovs-netdev's refusals."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sluice.bench import cli
from sluice.bench.runner import v2v_split
from sluice.bench.scenarios import Scenario, parse, topology
from sluice.bench.sockets import describe_api, parse_output, split_mode
from sluice.bench.switches import ADAPTERS, Context

OUTPUT = """\
{"t": 1, "monotonic_s": 100.5, "tx_pps": 250000.0, "rx_pps": 249000.0}
sluice-sockets: a warning
{"t": 2, "monotonic_s": 101.5, "tx_pps": 260000.0, "rx_pps": 259000.0}
{"tool": "sluice-sockets", "version": "0.1.0", "api": "raw", "calls": "sendmmsg/recvmmsg", \
"batch": 32, "role": "both", "size": 64, "tx_packets": 510000, "rx_packets": 508000}
"""


def test_tool_output_gives_seconds_and_summary() -> None:
    samples, summary = parse_output(OUTPUT)
    assert [s.t for s in samples] == [1.0, 2.0]
    assert samples[1].monotonic_s == 101.5 and samples[0].rx_pps == 249000.0
    assert summary["rx_packets"] == 508000
    assert describe_api(summary) == "raw sendmmsg/recvmmsg, batch 32"
    assert describe_api({"api": "udp", "calls": "send/recv", "batch": 1}) == "udp send/recv"


def test_modes_name_api_and_batch() -> None:
    assert split_mode("udp-b1") == ("udp", 1)
    assert split_mode("raw-b32") == ("raw", 32)
    for bad in ("tcp-b1", "udp", "udp-b0", "udp-bx", "raw-b2000"):
        with pytest.raises(ValueError):
            split_mode(bad)


def test_sockets_command_line() -> None:
    args = cli.make_parser().parse_args(["sockets", "--api", "raw", "--batch", "1,64",
                                         "--sizes", "64", "--duration", "5"])
    assert args.api == ("raw",) and args.batch == (1, 64) and args.sizes == (64,)
    assert args.tx_cpu == 0 and args.rx_cpu == 1
    for bad in ("0", "1025", "a"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.batches(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        cli.apis("udp,tcp")


def test_v2v_runs_kernel_facing_switches_over_veths_apart() -> None:
    v2v = parse("v2v", "memif", "uni")
    units = v2v_split(v2v, ["sluice:patch", "linux-bridge:learn", "ovs-netdev:flows"])
    assert units == [(v2v, ["sluice:patch"]),
                     (Scenario("v2v", "veth", "uni"), ["linux-bridge:learn",
                                                        "ovs-netdev:flows"])]
    assert v2v_split(v2v, ["linux-bridge:learn"])[0][0].kernel_path
    p2p = parse("p2p", "veth", "uni")
    assert v2v_split(p2p, ["sluice:patch", "linux-bridge:learn"]) == [
        (p2p, ["sluice:patch", "linux-bridge:learn"])]


def test_v2v_over_veth_gives_veth_links_in_the_switch_namespace(tmp_path: Path) -> None:
    topo = topology(Scenario("v2v", "veth"), tmp_path, "t1", "t1-sw")
    assert [link.kind for link in topo.links] == ["veth", "veth"]
    assert topo.netns == "t1-sw" and topo.pairs == ((0, 1),)
    assert Scenario("v2v", "veth").label() == "v2v/veth uni"


def test_ovs_netdev_declines_vhost_and_normal_loopback_and_polls_only_with_afxdp(
        tmp_path: Path) -> None:
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path)
    cls = ADAPTERS["ovs-netdev"]
    afxdp, system = cls(ctx, "flows"), cls(ctx, "normal-system")
    assert afxdp.unsupported("p2p", "veth") is None
    assert afxdp.unsupported("v2v", "veth") is None
    assert "vhost-user" in (afxdp.unsupported("v2v", "") or "")
    assert "memif" in (afxdp.unsupported("p2p", "memif") or "")
    assert afxdp.unsupported("loopback-1", "veth") is None
    assert system.unsupported("loopback-1", "veth") is not None      # NORMAL
    assert afxdp.unsupported("loopback-1", "memif") is not None
    assert [p.cpu for p in afxdp.pollers()] == [1]
    assert system.pollers() == []
    lb = ADAPTERS["linux-bridge"](ctx, "learn")
    assert lb.unsupported("v2v", "veth") is None and lb.unsupported("v2v", "") is not None


def test_loopback_gives_veth_vnf_ports_to_switches_without_vhost_user(tmp_path: Path) -> None:
    scn = Scenario("loopback-2", "veth")
    kernel = topology(scn, tmp_path, "t1", "t1-sw", veth_vnfs=True)
    assert [link.name for link in kernel.links] == ["p0", "v1a", "v1b", "v2a", "v2b", "p1"]
    assert {link.kind for link in kernel.links} == {"veth"}
    assert all(len(link.iface) <= 15 and len(link.peer) <= 15 for link in kernel.links)
    assert kernel.pairs == ((0, 1), (2, 3), (4, 5))
    user = topology(scn, tmp_path, "t1", "t1-sw")
    assert [link.kind for link in user.links] == ["veth", "vhost", "vhost", "vhost", "vhost",
                                                  "veth"]
