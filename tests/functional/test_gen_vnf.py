"""sluice-gen's inline VNFs (DPDK l2fwd's behaviour in the generator's own loop): every frame
forwarded with l2fwd's MAC rewrite, both ways, per-VNF counters that add up, over memif links
in one process and through the real daemon's vhost-user ports; bad options named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gen_helpers import GEN, run_gen, vhost_patch
from scapy.all import IP, UDP, Ether, Raw, rdpcap, wrpcap  # type: ignore

from conftest import Daemon, RpcError


def vnf_adds_up(v: dict) -> None:
    """Every frame a VNF received was sent or dropped, in each direction and in total."""
    for d in ("in_to_out", "out_to_in"):
        assert v[d]["rx"] == v[d]["tx"] + v[d]["dropped"], v
    assert v["rx"] == v["in_to_out"]["rx"] + v["out_to_in"]["rx"], v
    assert v["tx"] == v["in_to_out"]["tx"] + v["out_to_in"]["tx"], v
    assert v["dropped"] == v["in_to_out"]["dropped"] + v["out_to_in"]["dropped"], v


def memif(workdir: Path, name: str, role: str) -> str:
    return f"memif:role={role},socket={workdir / name}.sock"


def test_vnf_between_two_memif_links(workdir: Path) -> None:
    """generator (server) -> VNF in (client); VNF out (server) -> sink (client): the servers
    of both links live in this one process, on either side of the VNF."""
    res, _ = run_gen(workdir, ["--port", memif(workdir, "a", "server"),
                               "--port", memif(workdir, "b", "client"),
                               "--vnf-in", memif(workdir, "a", "client"),
                               "--vnf-out", memif(workdir, "b", "server"),
                               "--rate", "500k", "--duration", "2"])
    assert res["tx_packets"] > 900_000
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0, res
    assert res["reordered"] == res["duplicated"] == 0
    [v] = res["vnfs"]
    vnf_adds_up(v)
    # No warm-up: every frame sent is measured, and every one passed the VNF.
    assert v["in_to_out"]["rx"] == res["tx_packets"]
    assert v["in_to_out"]["tx"] == res["rx_packets"] and v["dropped"] == 0
    assert v["out_to_in"]["rx"] == 0
    assert v["in_to_out"]["dst_mac"] == "02:00:00:00:00:01"
    assert v["out_to_in"]["dst_mac"] == "02:00:00:00:00:00"
    assert 0.5 < res["idle_fraction"] < 1 and res["passes"] > 0
    assert res["options"]["vnfs"][0]["dst_mac"] == "l2fwd"


def test_two_vnfs_bidirectional_with_next_hop_macs(workdir: Path) -> None:
    """A chain of two VNFs, both ways at once; the clients are given first on the command
    line, yet each link's server is opened before its client."""
    res, _ = run_gen(workdir, ["--port", memif(workdir, "a", "client"),
                               "--port", memif(workdir, "c", "server"),
                               "--vnf-in", memif(workdir, "a", "server"),
                               "--vnf-out", memif(workdir, "b", "client"),
                               "--vnf-in", memif(workdir, "b", "server"),
                               "--vnf-out", memif(workdir, "c", "client"),
                               "--vnf-dst-mac", "02:00:00:00:02:00,02:00:00:00:00:aa",
                               "--bidir", "--rate", "200k", "--duration", "2"])
    assert res["tx_packets"] > 2 * 350_000
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0, res
    forth, back = res["streams"]          # stream 0: port 0 -> 1; stream 1 (--bidir): back
    first, second = res["vnfs"]
    for v in (first, second):
        vnf_adds_up(v)
        assert v["in_to_out"]["rx"] == forth["tx_packets"] > 0
        assert v["out_to_in"]["rx"] == back["tx_packets"] > 0
        assert v["dropped"] == 0
    assert first["in_to_out"]["dst_mac"] == "02:00:00:00:02:00"
    assert first["out_to_in"]["dst_mac"] == "02:00:00:00:00:aa"
    assert second["in_to_out"]["dst_mac"] == "02:00:00:00:00:01"   # no --vnf-dst-mac: l2fwd


def frames(n: int, src: str, pad: bytes) -> list:
    return [Ether(src=src, dst="ff:ff:ff:ff:ff:ff") / IP(dst="10.0.0.9") / UDP(sport=i) /
            Raw(pad) for i in range(n)]


def test_l2fwd_rewrite_on_the_wire_both_ways(workdir: Path) -> None:
    """A VNF on two pcap ports: frames read on one side are written on the other with
    l2fwd's addresses (destination 02:00:00:00:00:<output port>, source the output port's
    MAC) and nothing else changed; then again with a given next-hop MAC."""
    into_in, into_out = frames(100, "00:11:22:33:44:55", b"i" * 30), \
        frames(60, "00:11:22:33:44:66", b"o" * 300)
    wrpcap(str(workdir / "in.pcap"), into_in)
    wrpcap(str(workdir / "out.pcap"), into_out)
    for dst, name in ((None, "l2fwd"), ("02:00:00:00:07:00", "hop")):
        spec_in = f"pcap:rx={workdir}/in.pcap,tx={workdir}/{name}_in_tx.pcap"
        spec_out = f"pcap:rx={workdir}/out.pcap,tx={workdir}/{name}_out_tx.pcap"
        args = ["--vnf-in", spec_in, "--vnf-out", spec_out, "--duration", "0.5"]
        res, _ = run_gen(workdir, args + (["--vnf-dst-mac", dst] if dst else []), name=name)
        [v] = res["vnfs"]
        vnf_adds_up(v)
        assert v["in_to_out"]["rx"] == v["in_to_out"]["tx"] == 100
        assert v["out_to_in"]["rx"] == v["out_to_in"]["tx"] == 60
        left_out = rdpcap(str(workdir / f"{name}_out_tx.pcap"))
        left_in = rdpcap(str(workdir / f"{name}_in_tx.pcap"))
        assert len(left_out) == 100 and len(left_in) == 60
        for sent, got, port_mac, want_dst in (
                (into_in, left_out, v["out_mac"], dst or "02:00:00:00:00:01"),
                (into_out, left_in, v["in_mac"], "02:00:00:00:00:00")):
            for a, b in zip(sent, got, strict=True):
                assert b[Ether].dst == want_dst and b[Ether].src == port_mac
                assert bytes(b)[12:] == bytes(a)[12:]
        assert v["in_mac"] != v["out_mac"]


@pytest.mark.parametrize("switch_role", ["server", "client"])
def test_loopback_through_the_daemon(daemon: Daemon, workdir: Path, switch_role: str) -> None:
    """loopback-1 through sluiced: generator -> switch -> VNF -> switch -> sink, all four
    virtio-user ports in one sluice-gen loop; the switch's vhost-user ports are the servers,
    or the clients of sluice-gen's virtio-user servers (opened last: their probe waits)."""
    daemon.call("add-switch", name="br0")
    names = ("gen", "v0", "v1", "sink")
    for p in names:
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:{switch_role},path={workdir}/{p}.sock")
    daemon.call("patch", switch="br0", port1="gen", port2="v0")
    daemon.call("patch", switch="br0", port1="v1", port2="sink")
    mine = ",server=1" if switch_role == "client" else ""
    vu = {p: f"virtio-user:path={workdir}/{p}.sock{mine}" for p in names}
    res, _ = run_gen(workdir, ["--port", vu["gen"], "--port", vu["sink"], "--vnf-in", vu["v0"],
                               "--vnf-out", vu["v1"], "--rate", "50k", "--size", "128",
                               "--duration", "2"])
    brief = {k: res[k] for k in ("tx_packets", "rx_packets", "not_accepted", "vnfs")}
    assert res["tx_packets"] > 90_000, brief
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0, brief
    [v] = res["vnfs"]
    vnf_adds_up(v)
    assert v["in_to_out"]["rx"] == v["in_to_out"]["tx"] == res["tx_packets"]
    stats = daemon.port_stats("br0")
    assert stats["v0"]["tx_packets"] == stats["v1"]["rx_packets"] == res["tx_packets"]
    assert stats["sink"]["tx_packets"] == res["rx_packets"]


LEARN_CHAIN_MACS = {"gen": "02:00:00:00:00:f0", "sink": "02:00:00:00:00:f1",
                    "v0": "02:00:00:00:0a:00", "v1": "02:00:00:00:0a:01"}


def learn_chain(daemon: Daemon, workdir: Path, *extra: str) -> dict:
    """loopback-1 through a learn-mode br0: ports gen, sink, v0 and v1, the generator's ends
    with the MACs of LEARN_CHAIN_MACS, the generator addressing v0 and the VNF the sink;
    sluice-gen's summary (EXTRA: more options). Skipped where sluiced has no learn mode."""
    try:
        daemon.call("add-switch", name="br0", mode="learn")
    except RpcError as e:
        pytest.skip(f"no learn mode in this sluiced: {e}")
    mac = LEARN_CHAIN_MACS
    for p in mac:
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:server,path={workdir}/{p}.sock")
    if "--announce" not in extra:
        daemon.call("fdb-add", switch="br0", mac=mac["v0"], port="v0")
        daemon.call("fdb-add", switch="br0", mac=mac["sink"], port="sink")
    vu = {p: f"virtio-user:path={workdir}/{p}.sock,mac={m}" for p, m in mac.items()}
    res, _ = run_gen(workdir, ["--port", vu["gen"], "--port", vu["sink"], "--vnf-in", vu["v0"],
                               "--vnf-out", vu["v1"], "--dst-mac", mac["v0"],
                               "--vnf-dst-mac", mac["sink"], *extra, "--rate", "50k",
                               "--duration", "2"])
    return res


def test_chain_steered_by_mac_learning(daemon: Daemon, workdir: Path) -> None:
    """loopback-1 through a learning switch: the generator addresses the VNF's in port
    (--dst-mac), the VNF the sink (--vnf-dst-mac); with static entries for those two, every
    frame is unicast and nothing floods. Skipped where sluiced has no learn mode yet."""
    mac = LEARN_CHAIN_MACS
    res = learn_chain(daemon, workdir)
    assert res["tx_packets"] > 90_000
    assert res["rx_packets"] == res["tx_packets"] and res["lost"] == 0, res
    [v] = res["vnfs"]
    assert v["in_mac"] == mac["v0"] and v["out_mac"] == mac["v1"]
    assert v["in_to_out"]["rx"] == v["in_to_out"]["tx"] == res["tx_packets"]
    stats = daemon.port_stats("br0")
    assert stats["gen"]["tx_packets"] == stats["v1"]["tx_packets"] == 0      # no flooding
    assert stats["sink"]["tx_packets"] == res["rx_packets"]
    learnt = {e["mac"].lower(): e["port"] for e in
              daemon.call("fdb-show", switch="br0")["entries"]}
    assert learnt[mac["gen"]] == "gen" and learnt[mac["v1"]] == "v1"      # the sources


def test_chain_learnt_from_announcements(daemon: Daemon, workdir: Path) -> None:
    """As above with no static entries: --announce has every port of the generator (its VNF
    ports too) send from its MAC to its MAC before the clock starts; the switch learns them
    (its first look-up of each floods them, and they come back as echoes), and the run's
    frames are all unicast."""
    mac = LEARN_CHAIN_MACS
    res = learn_chain(daemon, workdir, "--announce")
    # sluiced looks a burst up before it learns from it, so each port's announcements (one
    # burst, to a MAC not yet learnt) flood to the 3 other ports, and come back as echoes.
    assert res["announced"] == 4 * 3 and res["announce_echoes"] == 4 * 3 * 3, res
    assert res["rx_packets"] == res["tx_packets"] > 90_000 and res["lost"] == 0, res
    stats = daemon.port_stats("br0")
    # Nothing of the run floods: what the switch sent to these two was announcements.
    assert stats["gen"]["tx_packets"] == stats["v1"]["tx_packets"] == 3 * 3, stats
    learnt = {e["mac"].lower(): e["port"] for e in
              daemon.call("fdb-show", switch="br0")["entries"]}
    assert all(learnt[m] == p for p, m in mac.items()), learnt


def test_announcements_through_a_patch_come_back_counted_apart(daemon: Daemon,
                                                               workdir: Path) -> None:
    """A switch that does not learn forwards the announcements to the peer port: they come
    back as announce_echoes, not as the run's frames."""
    vhost_patch(daemon, workdir, ("a", "b"))
    res, _ = run_gen(workdir, ["--port", f"virtio-user:path={workdir}/a.sock,mac=02:00:00:00:0b:0a",
                               "--port", f"virtio-user:path={workdir}/b.sock,mac=02:00:00:00:0b:0b",
                               "--announce", "--rate", "50k", "--duration", "1",
                               "--json"])
    assert res["announced"] == 6 and res["announce_echoes"] == 6, res
    assert res["rx_packets"] == res["tx_packets"] > 40_000 and res["foreign"] == 0, res


def test_announced_stream_goes_to_its_receiving_port(daemon: Daemon, workdir: Path) -> None:
    """With --announce and no --dst-mac a stream is addressed to the port that receives it:
    a learning switch with a third port (no client: its copies would be dropped and counted)
    floods nothing."""
    try:
        daemon.call("add-switch", name="br0", mode="learn")
    except RpcError as e:
        pytest.skip(f"no learn mode in this sluiced: {e}")
    for p in ("a", "b", "c"):
        daemon.call("add-port", switch="br0", name=p,
                    spec=f"vhost-user:server,path={workdir}/{p}.sock")
    res, _ = run_gen(workdir, ["--port", f"virtio-user:path={workdir}/a.sock",
                               "--port", f"virtio-user:path={workdir}/b.sock",
                               "--announce", "--rate", "50k", "--duration", "1"])
    assert res["rx_packets"] == res["tx_packets"] > 40_000, res
    stats = daemon.port_stats("br0")
    # Only the announcements of a and b reached c (flooded before they were learnt).
    assert stats["c"]["flood_tx_dropped"] == 2 * 3 and stats["c"]["tx_packets"] == 0, stats
    assert stats["b"]["tx_packets"] == res["rx_packets"] + 3, stats


def bad(args: list[str]) -> str:
    r = subprocess.run([str(GEN), *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    return r.stderr


def test_help_and_bad_vnf_options() -> None:
    r = subprocess.run([str(GEN), "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert all(o in r.stdout for o in ("--vnf-in", "--vnf-out", "--vnf-dst-mac"))
    assert "--vnf-out" in bad(["--vnf-in", "null"])
    assert "--vnf-in" in bad(["--vnf-out", "null"])
    assert "--vnf-dst-mac" in bad(["--vnf-in", "null", "--vnf-out", "null",
                                   "--vnf-dst-mac", "02:00:00:00:00"])
    assert "--vnf-dst-mac" in bad(["--vnf-in", "null", "--vnf-out", "null",
                                   "--vnf-dst-mac", "l2fwd", "--vnf-dst-mac", "l2fwd"])
    err = bad(["--vnf-in", "bogus:x=1", "--vnf-out", "null"])
    assert "--vnf-in bogus:x=1" in err and "unknown port kind" in err
    assert "--vnf-out" in bad(["--vnf-in", "null", "--vnf-out", "memif:socket=/tmp/x"])
    many = [a for i in range(9) for a in ("--vnf-in", "null", "--vnf-out", "null")]
    assert "at most 8" in bad(many)


def test_dst_mac_addresses_a_stream_from_its_port(workdir: Path) -> None:
    """--dst-mac (for a first hop behind a learning switch): the stream's frames go to that
    MAC, from the sending port's own MAC; a stream without one keeps the defaults."""
    for name, extra in (("plain", []), ("hop", ["--dst-mac", "02:00:00:00:0a:00"])):
        run_gen(workdir, ["--role", "tx", "--port", f"pcap:tx={workdir}/{name}.pcap",
                          "--rate", "2k", "--duration", "0.3", *extra], name=f"{name}.json")
    plain, hop = rdpcap(str(workdir / "plain.pcap")), rdpcap(str(workdir / "hop.pcap"))
    assert plain[0][Ether].dst == "02:00:02:00:00:00"
    assert plain[0][Ether].src == "02:00:01:00:00:00"
    assert {f[Ether].dst for f in hop} == {"02:00:00:00:0a:00"}
    srcs = {f[Ether].src for f in hop}
    assert len(srcs) == 1 and srcs != {"02:00:01:00:00:00"}
    assert bytes(hop[0])[12:34] == bytes(plain[0])[12:34]       # IP header unchanged
    assert "--dst-mac" in bad(["--port", "null", "--dst-mac", "02:00:00:00:0a"])
    assert "--dst-mac" in bad(["--port", "null", "--port", "null", "--dst-mac", "default",
                               "--dst-mac", "02:00:00:00:0a:00"])
