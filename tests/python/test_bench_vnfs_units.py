"""sluice-bench without processes: the basicfwd adapter, process VNFs' command lines and
pollers, the VNF kind of loopback rows, the generator's ports with process VNFs, the CLI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sluice.bench import arrange, cli, examples, gen, vnfs
from sluice.bench.arrange import Poller
from sluice.bench.plan import TrialSpec, choose_method
from sluice.bench.runner import Runner
from sluice.bench.scenarios import parse, topology
from sluice.bench.switches import ADAPTERS, Context, Link, Topology
from sluice.bench.switches.basicfwd import Basicfwd

REPO = Path(__file__).resolve().parents[2]


def ctx(tmp_path: Path, repo: Path = REPO) -> Context:
    return Context(work=tmp_path, tag="sbt1a", switch_cpu=1, ctl_cpu=0, repo=repo)


# -- basicfwd --------------------------------------------------------------------------------

def test_basicfwd_is_listed_with_one_mode() -> None:
    assert ADAPTERS["basicfwd"] is Basicfwd
    assert Basicfwd.modes == ("fwd",) and not Basicfwd.kernel


def test_basicfwd_runs_its_one_lcore_on_the_switch_cpu(tmp_path: Path) -> None:
    sw = Basicfwd(ctx(tmp_path), "fwd")
    cmd = sw.command(["--vdev", "net_vhost0,iface=/x.sock,queues=1"])
    assert cmd[0] == str(examples.path(REPO, "basicfwd"))
    assert cmd[cmd.index("--lcores") + 1] == "0@1"           # main = forwarding lcore
    assert "--single-file-segments" in cmd and "--" not in cmd   # no application options
    assert cmd[cmd.index("--file-prefix") + 1] == "sbt1abf"  # its own, not testpmd's
    assert sw.pollers() == [Poller("basicfwd lcore", 1)]
    assert "0<->1" in sw.steering()


def test_basicfwd_takes_every_scenario_and_refuses_unpaired_topologies(tmp_path: Path) -> None:
    sw = Basicfwd(ctx(tmp_path), "fwd")
    for scn in ("v2v", "p2p", "loopback-3"):
        for phy in ("memif", "veth"):
            assert sw.unsupported(scn, phy) is None
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    with pytest.raises(ValueError, match="basicfwd pairs ports"):
        sw._check_pairs(Topology(topo.links, ((0, 0),)))
    sw._check_pairs(topo)


def test_basicfwd_missing_says_how_to_build_it(tmp_path: Path) -> None:
    why = Basicfwd.available(tmp_path)            # a "repository" with nothing built
    assert why is not None and "basicfwd" in why
    assert "dpdk-examples.sh" in why or "setup.sh --peers" in why


def test_basicfwd_stop_removes_its_sockets(tmp_path: Path) -> None:
    sw = Basicfwd(ctx(tmp_path), "fwd")
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    for link in topo.links:
        Path(link.path).touch()
    sw.topology = topo
    sw.stop()
    assert not any(Path(link.path).exists() for link in topo.links)


# -- process VNFs ----------------------------------------------------------------------------

def vnf(tmp_path: Path, kind: str, vhost_server: bool = True, index: int = 0) -> vnfs.Vnf:
    topo = topology(parse("loopback-2", "memif", "uni", vnf=kind), tmp_path, "t")
    links = [link for link in topo.links if link.role == "vnf"]
    return vnfs.Vnf(kind, index, (links[2 * index], links[2 * index + 1]), 0, vhost_server,
                    REPO, tmp_path, "sbt1av1")


def test_vnf_ports_are_virtio_user_with_fixed_macs(tmp_path: Path) -> None:
    v = vnf(tmp_path, "l2fwd", index=1)
    vdevs = v.vdevs()
    assert vdevs[1].startswith("net_virtio_user0,path=") and "t-v2a.sock" in vdevs[1]
    assert "mac=02:5e:00:00:01:00" in vdevs[1] and "mac=02:5e:00:00:01:01" in vdevs[3]
    assert "server=1" not in vdevs[1]
    # A switch that is the vhost-user client (OVS) needs virtio-user as the server.
    assert "server=1" in vnf(tmp_path, "l2fwd", vhost_server=False).vdevs()[1]


def test_vnf_command_lines(tmp_path: Path) -> None:
    l2 = vnf(tmp_path, "l2fwd").command()
    assert l2[0] == str(examples.path(REPO, "l2fwd"))
    assert l2[l2.index("--lcores") + 1] == "0@0"
    assert "--single-file-segments" in l2 and "--in-memory" in l2
    assert l2[l2.index("--"):] == ["--", "-p", "0x3", "-q", "2", "-T", "10"]
    assert "--no-mac-updating" not in l2                      # l2fwd rewrites MACs
    l3 = vnf(tmp_path, "l3fwd").command()
    assert "--config=(0,0,0),(1,0,0)" in l3 and "--parse-ptype" in l3
    rules = next(a for a in l3 if a.startswith("--rule_ipv4=")).split("=", 1)[1]
    assert "R10.128.0.0/9 1" in Path(rules).read_text()        # generator's flows: out port 1
    tp = vnf(tmp_path, "testpmd-mac").command()
    assert tp[0] == "dpdk-testpmd" and "--forward-mode=mac" in tp
    assert tp[tp.index("--lcores") + 1] == "0@0,1@0"          # idle main lcore beside it
    with pytest.raises(ValueError):
        vnf(tmp_path, "inline").command()


def test_vnf_kinds_pollers_and_limits() -> None:
    assert vnfs.KINDS[0] == "inline" and not vnfs.is_process("inline")
    assert all(vnfs.is_process(k) for k in ("l2fwd", "l3fwd", "testpmd-mac"))
    assert vnfs.cpus_for(3, (0, 1)) == [0, 1, 0]
    assert vnfs.planned_pollers("inline", 3, (0,)) == []
    assert vnfs.planned_pollers("l2fwd", 2, (0,), "testpmd:io") == [
        Poller("l2fwd VNF 1 of testpmd:io", 0), Poller("l2fwd VNF 2 of testpmd:io", 0)]
    bidir, uni = parse("loopback-1", "memif", "bidir"), parse("loopback-1", "memif", "uni")
    assert vnfs.unsupported("l3fwd", bidir) and vnfs.unsupported("l3fwd", uni) is None
    assert vnfs.unsupported("l2fwd", bidir) is None


def test_process_vnfs_on_two_cpus_are_refused_unless_allowed() -> None:
    phase = [Poller("sluice-gen", 0), Poller("switch", 1),
             *vnfs.planned_pollers("l2fwd", 1, (0,))]
    with pytest.raises(arrange.SharedCpuError, match="l2fwd VNF 1"):
        arrange.check([phase], allow_shared_cpu=False)
    assert arrange.check([phase], allow_shared_cpu=True) is True


def test_loopback_rows_carry_the_vnf_kind() -> None:
    assert parse("loopback-2", "memif", "uni").vnf == "inline"
    assert parse("loopback-2", "memif", "uni", vnf="l2fwd").vnf == "l2fwd"
    assert parse("v2v", "memif", "uni", vnf="l2fwd").vnf == ""
    assert parse("p2p", "memif", "uni", vnf="l3fwd").vnf == ""


def test_generator_drives_phy_ports_only_when_vnfs_are_processes(tmp_path: Path) -> None:
    sw = Basicfwd(ctx(tmp_path), "fwd")
    sw.topology = topology(parse("loopback-2", "memif", "uni"), tmp_path, "t")
    inline = gen.port_args(sw).args
    assert inline.count("--port") == 2 and inline.count("--vnf-in") == 2
    procs = gen.port_args(sw, ()).args
    assert procs.count("--port") == 2 and "--vnf-in" not in procs and "--vnf-out" not in procs


def test_cli_vnf_options() -> None:
    ap = cli.make_parser()
    a = ap.parse_args(["run", "--scenario", "loopback-1", "--vnf", "testpmd-mac",
                       "--vnf-cpus", "0,1", "--allow-shared-cpu"])
    assert a.vnf == "testpmd-mac" and a.vnf_cpus == (0, 1)
    (scn, _), = cli.units(a)
    assert scn.vnf == "testpmd-mac"
    s = cli.settings(a, ("testpmd:io",), "testpmd")
    assert s.vnf_cpu_list == (0, 1)
    assert cli.settings(ap.parse_args(["run"]), ("testpmd:io",), "testpmd").vnf_cpu_list == (0,)
    with pytest.raises(SystemExit):
        ap.parse_args(["run", "--vnf", "vpp"])
    assert cli.switch_keys("basicfwd") == ("basicfwd:fwd",)


def test_examples_say_where_they_are_and_how_to_get_them(tmp_path: Path) -> None:
    assert examples.path(tmp_path, "l3fwd") == (
        tmp_path / "build" / "dpdk-examples" / "l3fwd" / "build" / "l3fwd")
    why = examples.missing(tmp_path, "l2fwd")
    assert why is not None and "build/dpdk-examples/" in why


def test_switches_with_vnf_processes_run_interleaved() -> None:
    keys = ["sluice:patch", "testpmd:io"]
    assert choose_method(parse("loopback-1", "memif", "uni"), keys, set()) == "alternating"
    assert choose_method(parse("loopback-1", "memif", "uni", vnf="l2fwd"), keys,
                         set()) == "interleaved"


def test_process_vnfs_refuse_veth_vnf_ports(tmp_path: Path) -> None:
    """Kernel-facing switches give loopback's VNFs veth pairs: nothing to attach to."""
    sw = Basicfwd(ctx(tmp_path), "fwd")
    sw.topology = Topology((Link("p0", "memif", path="/x"),
                            Link("v1a", "veth", iface="a", peer="b", role="vnf"),
                            Link("v1b", "veth", iface="c", peer="d", role="vnf"),
                            Link("p1", "memif", path="/y")), ((0, 1), (2, 3)))
    vs = vnfs.VnfSet("l2fwd", "basicfwd:fwd", (0,))
    with pytest.raises(ValueError, match="use --vnf inline"):
        vs.start(sw)
    assert vs.pids() == []


def _args(cmd: list[str], opt: str) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == opt]


def test_learning_chain_is_steered_by_mac(tmp_path: Path) -> None:
    """loopback-2 through a learning switch: the generator's ends get MACs of ours, the first
    port sends to VNF 1's in port, each VNF to the next hop (and back to the previous one),
    the last to the second port; a switch that does not learn keeps l2fwd's addresses."""
    sw = ADAPTERS["sluice"](ctx(tmp_path), "learn")
    sw.topology = topology(parse("loopback-2", "memif", "uni"), tmp_path, "t")
    p = gen.port_args(sw)
    # links: 0 p0, 1 v1a, 2 v1b, 3 v2a, 4 v2b, 5 p1
    assert [s.rsplit(",mac=", 1)[1] for s in _args(p.args, "--port")] == [
        gen.link_mac(0), gen.link_mac(5)]
    assert _args(p.args, "--vnf-dst-mac") == [f"{gen.link_mac(3)},{gen.link_mac(0)}",
                                              f"{gen.link_mac(5)},{gen.link_mac(2)}"]
    assert p.forward_dst == [gen.link_mac(1)] and p.reverse_dst == [gen.link_mac(4)]
    patch = ADAPTERS["sluice"](ctx(tmp_path), "patch")
    patch.topology = sw.topology
    q = gen.port_args(patch)
    assert _args(q.args, "--vnf-dst-mac") == ["l2fwd", "l2fwd"]
    assert not any(",mac=" in a for a in q.args)
    assert q.forward_dst == ["default"]


def test_dst_macs_follow_the_generators_stream_order(tmp_path: Path) -> None:
    """Alternating a learning switch (A) with testpmd (B), both ways: sluice-gen's streams are
    A forward, B forward, A reverse, B reverse; --announce since one of them learns."""
    scn = parse("loopback-1", "memif", "bidir")
    a = ADAPTERS["sluice"](ctx(tmp_path), "learn")
    b = ADAPTERS["testpmd"](ctx(tmp_path), "io")
    for sw, tag in ((a, "a"), (b, "b")):
        sw.topology = topology(scn, tmp_path, tag)
    spec = TrialSpec(scn, 64, 0, "alternating", ("sluice:learn", "testpmd:io"))
    cmd = Runner.ports_of(spec, [a, b])
    assert _args(cmd, "--dst-mac") == [gen.link_mac(1), "default", gen.link_mac(2), "default"]
    assert "--announce" in cmd
    # Each VNF's destination goes with it, whichever switch comes first.
    assert _args(cmd, "--vnf-dst-mac") == [f"{gen.link_mac(3)},{gen.link_mac(0)}", "l2fwd"]
    swapped = Runner.ports_of(dataclasses.replace(spec, switches=spec.switches[::-1]), [b, a])
    assert _args(swapped, "--vnf-dst-mac") == ["l2fwd", f"{gen.link_mac(3)},{gen.link_mac(0)}"]
    spec_b = TrialSpec(scn, 64, 0, "interleaved", ("testpmd:io",))
    assert "--announce" not in Runner.ports_of(spec_b, [b])
    assert "--dst-mac" not in Runner.ports_of(spec_b, [b])
