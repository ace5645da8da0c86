"""MTU and jumbo frames (docs/ports.md, "MTU and jumbo frames"): two namespaces on veths
with MTU 9000 through a learn switch of af_packet ports; `mtu=` in the spec sets the
switch-side interfaces; `ping -M do -s 8972` crosses whole; with the egress port set to
1500 at run time (`set-port`), a 2000 B packet is dropped and counted as mtu_exceeded,
never cut; iperf3 at MTU 9000 against 1500 on the same run; the MTU in `show`, in the
state file, and refused where a device cannot take it. And 9018 B frames (a 9000 B MTU)
from sluice-gen through a patch switch of vhost-user ports and back into sluice-gen's
virtio-user ports, with counters that match on both ends; at MTU 1500 they are mtu_exceeded.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_kernel_tcp import IPERF, Hosts, iperf, run

from conftest import REPO, Daemon, RpcError, assert_accounting
from sluice.ctl import format_show, format_stats


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    """Two namespaces (test_kernel_tcp.Hosts), removed afterwards."""
    h = Hosts()
    yield h
    h.delete()


def ping(h: Hosts, size: int, count: int = 3) -> subprocess.CompletedProcess[str]:
    """ping -M do (never fragment) with SIZE bytes of ICMP payload from namespace 0."""
    return subprocess.run(["ip", "netns", "exec", h.ns[0], "ping", "-c", str(count), "-i",
                           "0.2", "-W", "1", "-M", "do", "-s", str(size), h.addr[1]],
                          capture_output=True, text=True, timeout=30)


def set_ns_mtu(h: Hosts, mtu: int) -> None:
    for i in (0, 1):
        run("ip", "-n", h.ns[i], "link", "set", "dev", "eth0", "mtu", str(mtu))


def kernel_mtu(iface: str) -> int:
    return int(Path(f"/sys/class/net/{iface}/mtu").read_text())


def jumbo_switch(daemon: Daemon, h: Hosts) -> None:
    daemon.call("add-switch", name="br0", mode="learn")
    for i in (0, 1):
        h.veth(i)
        daemon.call("add-port", switch="br0", name=f"p{i}",
                    spec=f"af_packet:iface={h.switch_side[i]},mtu=9000")
        assert kernel_mtu(h.switch_side[i]) == 9000      # mtu= reached the interface
    set_ns_mtu(h, 9000)


def test_jumbo_ping_and_mtu_exceeded(daemon: Daemon, hosts: Hosts) -> None:
    jumbo_switch(daemon, hosts)
    r = ping(hosts, 8972)                 # 9000 B IP packets, 9014 B frames
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0% packet loss" in r.stdout
    stats = daemon.port_stats("br0")
    assert stats["p0"]["drops"]["mtu_exceeded"] == 0
    assert stats["p1"]["tx_bytes"] >= 3 * 9014

    ports = {p["name"]: p for p in daemon.call("list-ports", switch="br0")}
    assert ports["p1"]["mtu"] == 9000 and ports["p1"]["mtu_set"] is False

    # The egress port down to 1500 at run time: the switch side's interface follows.
    daemon.call("set-port", switch="br0", name="p1", mtu=1500)
    assert kernel_mtu(hosts.switch_side[1]) == 1500
    before = daemon.port_stats("br0")["p0"]["drops"]["mtu_exceeded"]
    r = ping(hosts, 1972, count=4)        # 2000 B IP packets: no reply
    assert r.returncode != 0 and " 100% packet loss" in r.stdout, r.stdout
    stats = daemon.port_stats("br0")
    assert stats["p0"]["drops"]["mtu_exceeded"] - before == 4, stats["p0"]
    assert_accounting(stats)
    r = ping(hosts, 1472)                 # 1500 B still passes
    assert r.returncode == 0, r.stdout

    show = daemon.call("show")
    p1 = next(p for p in show["switches"][0]["ports"] if p["name"] == "p1")
    assert p1["mtu"] == 1500 and p1["mtu_set"] is True
    text = format_show(show)
    assert "mtu" in text.splitlines()[2].split()
    table = daemon.call("stats", switch="br0")
    assert "mtu_exceeded=4" in format_stats(table)


def test_set_port_mtu_errors_and_state(workdir: Path) -> None:
    """set-port mtu works on any switch's ports, is range-checked, and the state keeps it."""
    state = workdir / "s.state"
    d = Daemon(workdir, "st", ["--state", str(state)]).start()
    try:
        d.call("add-switch", name="pb", mode="patch")
        d.call("add-port", switch="pb", name="n0", spec="null:mtu=9000")
        d.call("add-port", switch="pb", name="n1", spec="null:")
        ports = {p["name"]: p for p in d.call("list-ports")}
        assert ports["n0"]["mtu"] == 9000 and ports["n1"]["mtu"] == 1500
        d.call("set-port", switch="pb", name="n1", mtu=4000)
        with pytest.raises(RpcError) as e:
            d.call("set-port", switch="pb", name="n1", mtu=67)
        assert e.value.code == -32602 and "68 to 9600" in e.value.message
        with pytest.raises(RpcError) as e:
            d.call("set-port", switch="pb", name="n1", vlan_mode="access", tag=3)
        assert e.value.code == -32005          # VLANs are learn switches' only
        with pytest.raises(RpcError) as e:
            d.call("add-port", switch="pb", name="n2", spec="null:mtu=99999")
        assert e.value.code == -32002 and "'mtu' must be an integer from 68 to 9600" \
            in e.value.message
        assert '"mtu": 4000' in state.read_text().replace('"mtu":4000', '"mtu": 4000')
    finally:
        assert d.stop() == 0
    d = Daemon(workdir, "st", ["--state", str(state)]).start()
    try:
        ports = {p["name"]: p for p in d.call("list-ports")}
        assert ports["n1"]["mtu"] == 4000 and ports["n1"]["mtu_set"] is True
        assert ports["n0"]["mtu"] == 9000 and ports["n0"]["mtu_set"] is False
    finally:
        assert d.stop() == 0


@pytest.mark.skipif(IPERF is None, reason="iperf3 not installed")
def test_iperf3_mtu_9000_against_1500(daemon: Daemon, hosts: Hosts) -> None:
    """TCP throughput through the switch at MTU 9000 and at 1500, one run after the other
    (printed; docs/ports.md keeps a measurement). Both must move data."""
    jumbo_switch(daemon, hosts)
    results = {}
    for mtu in (9000, 1500):
        set_ns_mtu(hosts, mtu)
        for i in (0, 1):
            daemon.call("set-port", switch="br0", name=f"p{i}", mtu=mtu)
        r = ping(hosts, mtu - 28, count=1)
        assert r.returncode == 0, r.stdout
        end = iperf(hosts)
        results[mtu] = end["sum_received"]["bits_per_second"] / 1e9
        assert end["sum_received"]["bytes"] > 10_000_000
    assert_accounting(daemon.port_stats("br0"))
    print(f"iperf3 through a learn switch of af_packet ports: MTU 9000 "
          f"{results[9000]:.2f} Gbit/s, MTU 1500 {results[1500]:.2f} Gbit/s")


def test_mtu_on_other_kinds(daemon: Daemon, workdir: Path) -> None:
    """Where DPDK's driver has an MTU it is set (tap: the kernel interface follows); where
    it cannot take the value the port is refused with the device's range (DPDK 22.11's tap
    receives at most 1522 B frames); vhost-user and memif take jumbo MTUs (they chain
    buffers); the MTU shows in list-ports."""
    daemon.call("add-switch", name="br0", mode="patch")
    tap = f"slmtu{daemon.proc.pid % 100000}"
    daemon.call("add-port", switch="br0", name="t0", spec=f"tap:name={tap},mtu=1400")
    assert kernel_mtu(tap) == 1400
    daemon.call("set-port", switch="br0", name="t0", mtu=1280)
    assert kernel_mtu(tap) == 1280
    with pytest.raises(RpcError) as e:
        daemon.call("add-port", switch="br0", name="t1", spec=f"tap:name={tap}x,mtu=9000")
    assert e.value.code == -32003 and "mtu 9000: the device takes" in e.value.message
    with pytest.raises(RpcError) as e:
        daemon.call("set-port", switch="br0", name="t0", mtu=9000)
    assert e.value.code == -32003 and "refuses MTU 9000" in e.value.message
    assert kernel_mtu(tap) == 1280
    daemon.call("add-port", switch="br0", name="v0",
                spec=f"vhost-user:server,path={workdir}/v0.sock,mtu=9000")
    daemon.call("add-port", switch="br0", name="m0",
                spec=f"memif:server,socket={workdir}/m0.sock,mtu=9000")
    ports = {p["name"]: p["mtu"] for p in daemon.call("list-ports")}
    assert ports == {"t0": 1280, "v0": 9000, "m0": 9000}


GEN = REPO / "build" / "tools" / "gen" / "sluice-gen"


def gen_jumbo(workdir: Path, tx: str, rx: str, rate: str) -> dict:
    """sluice-gen: 9018 B frames from TX to RX at RATE for a counted second."""
    out = workdir / "jumbo.json"
    r = subprocess.run([str(GEN), "--cpu", "0", "--port", tx, "--port", rx, "--size", "9018",
                        "--rate", rate, "--duration", "1.5", "--warmup", "0.5",
                        "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())


def test_jumbo_frames_between_vhost_user_ports(daemon: Daemon, workdir: Path) -> None:
    """9018 B frames (9000 B IP packets) from a virtio-user port of sluice-gen through a
    patch switch of two vhost-user ports with mtu=9000 into its other virtio-user port:
    sent = switch rx = switch tx = received, nothing dropped. With the egress port at
    mtu=1500 every frame is dropped and counted as mtu_exceeded on the input port."""
    daemon.call("add-switch", name="br0", mode="patch")
    for p in ("in", "out"):
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:server,path={workdir}/j{p}.sock,mtu=9000")
    daemon.call("patch", switch="br0", port1="in", port2="out")
    tx, rx = (f"virtio-user:path={workdir}/j{p}.sock" for p in ("in", "out"))

    # Paced far below what the switch forwards: nothing may be lost anywhere.
    res = gen_jumbo(workdir, tx, rx, "50k")
    stats = daemon.port_stats("br0")
    sent = res["port_stats"][0]["tx"]                 # the whole run, warm-up included
    assert res["port_stats"][1]["rx"] == sent > 20_000, (stats, res["port_stats"])
    assert stats["in"]["rx_packets"] == stats["in"]["forwarded"] == sent, stats["in"]
    assert stats["out"]["tx_packets"] == sent, stats["out"]
    assert stats["in"]["dropped"] == stats["out"]["dropped"] == 0
    assert stats["out"]["tx_bytes"] == sent * 9014          # frames without FCS
    assert res["lost"] == 0 and res["rx_sizes"] == {"9018": res["rx_packets"]}
    assert_accounting(stats)

    # As fast as it goes (printed; docs/ports.md keeps a figure): what the switch could
    # not hand to the receiving side is tx_full, and every other frame arrived.
    before = stats
    res = gen_jumbo(workdir, tx, rx, "max")
    stats = daemon.port_stats("br0")
    sent = res["port_stats"][0]["tx"]                 # a new sluice-gen: its own counts
    fwd = stats["out"]["tx_packets"] - before["out"]["tx_packets"]
    assert stats["in"]["rx_packets"] - before["in"]["rx_packets"] == sent
    assert res["port_stats"][1]["rx"] == fwd
    assert stats["in"]["dropped"] == stats["in"]["drops"]["tx_full"] == sent - fwd
    assert stats["in"]["drops"]["mtu_exceeded"] == 0
    assert_accounting(stats)
    print(f"9018 B frames through sluiced (patch, vhost-user, mtu=9000): "
          f"{res['rx_pps'] / 1e6:.3f} Mpps received, {res['rx_gbps_l2']:.1f} Gbit/s L2, "
          f"{stats['in']['dropped']} of {sent} tx_full")

    daemon.call("set-port", switch="br0", name="out", mtu=1500)
    before = daemon.port_stats("br0")
    res = gen_jumbo(workdir, tx, rx, "20k")
    stats = daemon.port_stats("br0")
    sent = res["port_stats"][0]["tx"]
    assert sent > 5_000 and res["port_stats"][1]["rx"] == 0 and res["rx_packets"] == 0
    dropped = stats["in"]["drops"]["mtu_exceeded"] - before["in"]["drops"]["mtu_exceeded"]
    assert dropped == sent == stats["in"]["rx_packets"] - before["in"]["rx_packets"]
    assert stats["out"]["tx_packets"] == before["out"]["tx_packets"]
    assert_accounting(stats)


def test_jumbo_frames_over_memif_keep_whole(daemon: Daemon, workdir: Path) -> None:
    """9018 B frames over memif at full rate: with mtu=9000 the client's buffers hold a
    whole frame (bsize, src/portspec.c), so no frame is split over memif descriptors, which
    DPDK 22.11's memif mixed up at full rate. Every frame that arrives is 9018 B, and what
    the switch could not send is counted."""
    daemon.call("add-switch", name="br0", mode="patch")
    for p in ("in", "out"):
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"memif:server,socket={workdir}/m{p}.sock,mtu=9000")
    daemon.call("patch", switch="br0", port1="in", port2="out")
    tx, rx = (f"memif:client,socket={workdir}/m{p}.sock,mtu=9000" for p in ("in", "out"))
    res = gen_jumbo(workdir, tx, rx, "max")
    stats = daemon.port_stats("br0")
    sent = res["port_stats"][0]["tx"]
    assert res["rx_packets"] > 10_000, res
    assert res["rx_sizes"] == {"9018": res["rx_packets"]}, res["rx_sizes"]
    assert stats["in"]["rx_packets"] == sent, (stats["in"], sent)
    assert res["port_stats"][1]["rx"] == stats["out"]["tx_packets"], (res, stats["out"])
    assert stats["in"]["drops"]["mtu_exceeded"] == 0 and stats["in"]["drops"]["malformed"] == 0
    assert_accounting(stats)
    print(f"9018 B frames through sluiced over memif (mtu=9000): "
          f"{res['rx_pps'] / 1e6:.3f} Mpps received, {stats['in']['dropped']} of {sent} "
          f"dropped ({stats['in']['drops']})")
