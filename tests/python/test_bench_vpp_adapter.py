"""The vpp adapter without VPP: its startup.conf, the vppctl commands of each scenario and
mode, the checks of VPP's answers, and what it says when VPP is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.bench import cli
from sluice.bench.arrange import Poller
from sluice.bench.scenarios import parse, round_trip, topology
from sluice.bench.switches import ADAPTERS, Context
from sluice.bench.switches.vpp import (
    NOT_INSTALLED,
    Vpp,
    acl_counts,
    acl_shortfall,
    commands,
    expected_modes,
    find,
    interface_names,
    missing_modes,
    quiet_answer,
    startup_conf,
)

REPO = Path(__file__).resolve().parents[2]


def ctx(tmp_path: Path, **extra: str) -> Context:
    return Context(work=tmp_path, tag="sbt1a", switch_cpu=1, ctl_cpu=0, repo=REPO,
                   extra=dict(extra))


def fake_install(root: Path, plugins: tuple[str, ...] = ("vhost_plugin.so", "memif_plugin.so",
                                                          "af_packet_plugin.so")) -> Path:
    """A directory shaped like a VPP install, with programs that do nothing."""
    (root / "bin").mkdir(parents=True)
    for prog in ("vpp", "vppctl"):
        p = root / "bin" / prog
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o755)
    plugdir = root / "lib" / "x86_64-linux-gnu" / "vpp_plugins"
    plugdir.mkdir(parents=True)
    for p in plugins:
        (plugdir / p).touch()
    return root


# -- registration and modes -------------------------------------------------------------------

def test_vpp_is_listed_with_learn_and_xconnect() -> None:
    assert ADAPTERS["vpp"] is Vpp
    assert Vpp.modes == ("learn", "xconnect") and not Vpp.kernel and Vpp.vhost_server
    assert cli.switch_keys("vpp") == ("vpp:learn", "vpp:xconnect")
    assert cli.switch_keys("vpp:learn,testpmd") == ("vpp:learn", "testpmd:io")


def test_vpp_learn_chains_over_memif_only_and_xconnect_everywhere(tmp_path: Path) -> None:
    learn, xc = Vpp(ctx(tmp_path), "learn"), Vpp(ctx(tmp_path), "xconnect")
    assert learn.learns and not xc.learns
    assert learn.unsupported("loopback-1", "memif") is None      # steered by MAC
    assert "--phy memif" in (learn.unsupported("loopback-2", "veth") or "")
    for scn in ("v2v", "p2p", "p2v", "v2p", "loopback-3"):
        assert xc.unsupported(scn, "memif") is None
        assert xc.unsupported(scn, "veth") is None
    assert learn.unsupported("v2v", "") is None and learn.unsupported("p2p", "veth") is None


# -- absence ---------------------------------------------------------------------------------

def test_absent_vpp_says_so_and_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))          # no vpp anywhere
    why = Vpp.available(REPO)
    assert why == NOT_INSTALLED
    assert "not installed" in why and "--vpp-prefix" in why and "docs/bench.md" in why
    assert Vpp.available_with(REPO, {}) == NOT_INSTALLED


def test_a_wrong_prefix_names_the_missing_programs(tmp_path: Path) -> None:
    why = Vpp.available_with(REPO, {"vpp_prefix": str(tmp_path / "none")})
    assert why is not None and str(tmp_path / "none" / "bin" / "vpp") in why
    assert "bin/vppctl" in why


def test_a_prefix_without_the_vhost_plugin_is_refused(tmp_path: Path) -> None:
    root = fake_install(tmp_path / "vpp", ("memif_plugin.so", "af_packet_plugin.so"))
    why = Vpp.available_with(REPO, {"vpp_prefix": str(root)})
    assert why is not None and "vhost_plugin.so" in why


def test_a_prefix_install_is_found_with_its_libraries(tmp_path: Path) -> None:
    root = fake_install(tmp_path / "vpp")
    assert Vpp.available_with(REPO, {"vpp_prefix": str(root)}) is None
    found, why = find({"vpp_prefix": str(root)})
    assert why is None and found is not None
    assert found.vpp == str(root / "bin" / "vpp") and found.vppctl == str(root / "bin/vppctl")
    env = found.env()
    assert env is not None
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(root / "lib" / "x86_64-linux-gnu")


def test_vpp_on_path_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_install(tmp_path / "vpp")
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}/usr/bin")
    found, why = find({})
    assert why is None and found is not None and found.env() is None


def test_the_cli_passes_the_prefix_to_the_adapters(tmp_path: Path) -> None:
    args = cli.make_parser().parse_args(["run", "--switch", "vpp", "--vpp-prefix",
                                         str(tmp_path), "--gen-driver", "virtio-user"])
    s = cli.settings(args, args.switch, args.baseline)
    assert s.switch_options == {"vpp_prefix": str(tmp_path.resolve())}
    args = cli.make_parser().parse_args(["run", "--switch", "vpp", "--gen-driver",
                                         "virtio-user"])
    assert cli.settings(args, args.switch, args.baseline).switch_options == {}


# -- startup.conf -----------------------------------------------------------------------------

def test_startup_conf_keeps_everything_private_and_the_main_thread_asleep(tmp_path: Path
                                                                           ) -> None:
    run = tmp_path / "vpp"
    conf = startup_conf(run, "sbt1avpp", main_cpu=0, worker_cpu=1)
    lines = [" ".join(line.split()) for line in conf.splitlines()]
    assert f"cli-listen {run}/cli.sock" in lines
    assert f"runtime-dir {run}" in lines
    assert f"socket-name {run}/api.sock" in lines          # socksvr
    assert f"socket-name {run}/stats.sock" in lines        # statseg
    assert "prefix sbt1avpp" in lines                      # api-segment: /dev/shm/sbt1avpp-*
    assert "main-core 0" in lines and "corelist-workers 1" in lines
    assert "poll-sleep-usec 10000" in lines                 # main thread naps, never spins
    assert "nodaemon" in lines and "nosyslog" in lines
    assert "plugin default { disable }" in lines
    assert "plugin dpdk_plugin.so { disable }" in lines
    for p in ("vhost_plugin.so", "memif_plugin.so", "af_packet_plugin.so"):
        assert f"plugin {p} {{ enable }}" in lines
    assert "/run/vpp" not in conf and "/var/log" not in conf
    assert conf.count("{") == conf.count("}")


def test_startup_conf_follows_the_cpus_asked(tmp_path: Path) -> None:
    conf = startup_conf(tmp_path, "t", main_cpu=1, worker_cpu=0)
    assert "main-core 1" in conf and "corelist-workers 0" in conf


# -- the vppctl commands ----------------------------------------------------------------------

def test_v2v_learn_builds_one_bridge_domain(tmp_path: Path) -> None:
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    names = interface_names(topo)
    assert names == ["VirtualEthernet0/0/0", "VirtualEthernet0/0/1"]
    assert commands(topo, "learn") == [
        f"create vhost-user socket {tmp_path}/t-p0.sock server",
        f"create vhost-user socket {tmp_path}/t-p1.sock server",
        "create bridge-domain 1 learn 1 forward 1 uu-flood 1 flood 1 arp-term 0",
        "set interface l2 bridge VirtualEthernet0/0/0 1",
        "set interface l2 bridge VirtualEthernet0/0/1 1",
        "set interface rx-mode VirtualEthernet0/0/0 polling",
        "set interface state VirtualEthernet0/0/0 up",
        "set interface rx-mode VirtualEthernet0/0/1 polling",
        "set interface state VirtualEthernet0/0/1 up",
    ]


def test_v2v_xconnect_joins_the_pair_both_ways(tmp_path: Path) -> None:
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    cmds = commands(topo, "xconnect")
    assert "set interface l2 xconnect VirtualEthernet0/0/0 VirtualEthernet0/0/1" in cmds
    assert "set interface l2 xconnect VirtualEthernet0/0/1 VirtualEthernet0/0/0" in cmds
    assert not any("bridge" in c for c in cmds)


def test_p2p_memif_makes_one_master_socket_per_link(tmp_path: Path) -> None:
    topo = topology(parse("p2p", "memif", "uni"), tmp_path, "t")
    cmds = commands(topo, "learn")
    assert cmds[:4] == [
        f"create memif socket id 1 filename {tmp_path}/t-p0.memif",
        "create interface memif id 0 socket-id 1 master",
        f"create memif socket id 2 filename {tmp_path}/t-p1.memif",
        "create interface memif id 0 socket-id 2 master",
    ]
    assert interface_names(topo) == ["memif1/0", "memif2/0"]
    assert "set interface l2 bridge memif2/0 1" in cmds


def test_p2p_veth_uses_af_packet_host_interfaces(tmp_path: Path) -> None:
    topo = topology(parse("p2p", "veth", "uni"), tmp_path, "t", netns="t-sw")
    cmds = commands(topo, "xconnect")
    assert cmds[:2] == ["create host-interface name ts0", "create host-interface name ts1"]
    assert "set interface l2 xconnect host-ts0 host-ts1" in cmds


def test_p2v_mixes_memif_and_vhost_names(tmp_path: Path) -> None:
    topo = topology(parse("p2v", "memif", "uni"), tmp_path, "t")
    assert interface_names(topo) == ["memif1/0", "VirtualEthernet0/0/0"]


def test_loopback_xconnect_steers_the_chain_pair_by_pair(tmp_path: Path) -> None:
    topo = topology(parse("loopback-2", "memif", "uni"), tmp_path, "t")
    names = interface_names(topo)
    # phy p0, VNF1 a/b, VNF2 a/b, phy p1: vhost-user interfaces numbered in order.
    assert names == ["memif1/0", "VirtualEthernet0/0/0", "VirtualEthernet0/0/1",
                     "VirtualEthernet0/0/2", "VirtualEthernet0/0/3", "memif6/0"]
    xc = [c for c in commands(topo, "xconnect") if c.startswith("set interface l2 xconnect")]
    assert xc == [f"set interface l2 xconnect {names[a]} {names[b]}"
                  for x, y in topo.pairs for a, b in ((x, y), (y, x))]
    assert len(xc) == 2 * len(topo.pairs) == 6


def test_round_trip_has_four_vhost_ports_in_two_xconnects(tmp_path: Path) -> None:
    topo = topology(round_trip(), tmp_path, "t")
    assert len(interface_names(topo)) == 4
    xc = [c for c in commands(topo, "xconnect") if c.startswith("set interface l2 xconnect")]
    assert len(xc) == 4


def test_pairs_put_every_port_in_the_one_bridge(tmp_path: Path) -> None:
    topo = topology(parse("v2v", "memif", "uni", pairs=2), tmp_path, "t")
    bridged = [c for c in commands(topo, "learn") if c.startswith("set interface l2 bridge")]
    assert len(bridged) == 4


def test_every_port_is_up_and_polled(tmp_path: Path) -> None:
    topo = topology(parse("p2p", "memif", "uni"), tmp_path, "t")
    cmds = commands(topo, "xconnect")
    for n in interface_names(topo):
        assert f"set interface state {n} up" in cmds
        assert f"set interface rx-mode {n} polling" in cmds


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    with pytest.raises(ValueError, match="unknown mode"):
        commands(topo, "patch")


# -- checking VPP's answers -------------------------------------------------------------------

def test_quiet_answers_and_errors() -> None:
    names = ["VirtualEthernet0/0/0", "memif1/0"]
    assert quiet_answer("", names)
    assert quiet_answer("VirtualEthernet0/0/0", names)
    assert quiet_answer("bridge-domain 1", names)
    assert not quiet_answer("create vhost-user: vhost_user_create_if returned -1", names)
    assert not quiet_answer("set interface l2 bridge: unknown input `foo'", names)


def test_acls_are_counted_against_what_was_sent() -> None:
    # As `show acl-plugin acl` prints them (acl.c, acl_print_acl_x).
    shown = ("acl-index 0 count 200 tag {cli}\n"
             "          0: ipv4 deny src 10.0.0.0/8 dst 0.0.0.0/0 proto 17 sport 0-65535 "
             "dport 0-1023\n"
             "acl-index 1 count 1 tag {cli}\n"
             "          0: ipv4 permit src 0.0.0.0/0 dst 0.0.0.0/0 proto 0 sport 0-65535 "
             "dport 0-65535\n")
    assert acl_counts(shown) == {0: 200, 1: 1}
    assert acl_shortfall(shown, 201) == []
    # A word the CLI did not know ends the ACL early, silently: caught here.
    assert acl_shortfall(shown.replace("count 200", "count 37"), 201) == [
        "ACL 0: 37 of 200 rules"]
    assert acl_shortfall(shown, 401) == ["ACL 1: 1 of 200 rules", "ACL 2: none of 1 rules"]


def test_show_mode_is_checked_against_the_topology(tmp_path: Path) -> None:
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    learn = expected_modes(topo, "learn")
    assert learn == ["l2 bridge VirtualEthernet0/0/0 bd_id 1",
                     "l2 bridge VirtualEthernet0/0/1 bd_id 1"]
    # As VPP v26.10 prints it: the split-horizon group trails each bridge line.
    shown = ("l3 local0  \nl2 bridge VirtualEthernet0/0/0 bd_id 1 shg 0\n"
             "l2 bridge  VirtualEthernet0/0/1 bd_id 1 shg 0\n")
    assert missing_modes(shown, learn) == []
    shown = "l2 bridge VirtualEthernet0/0/0 bd_id 12 shg 0\nl2 bridge VirtualEthernet0/0/1\n"
    assert missing_modes(shown, learn) == learn           # bd_id 12 is not bd_id 1
    xc = expected_modes(topo, "xconnect")
    shown = ("l2 xconnect VirtualEthernet0/0/0 VirtualEthernet0/0/1\n"
             "l2 xconnect VirtualEthernet0/0/1 VirtualEthernet0/0/0\n")
    assert missing_modes(shown, xc) == []


# -- the rest of the interface ----------------------------------------------------------------

def test_pollers_pids_steering_and_version_before_start(tmp_path: Path) -> None:
    sw = Vpp(ctx(tmp_path), "learn")
    assert sw.pollers() == [Poller("vpp worker (vpp_wk_0)", 1)]   # the main thread naps
    assert sw.pids() == []
    assert "bridge domain" in sw.steering() and "learning" in sw.steering()
    assert "sleeping 10 ms" in sw.steering()
    assert "xconnect" in Vpp(ctx(tmp_path), "xconnect").steering()
    assert sw.version().startswith("VPP ")
    sw._version = "vpp v26.10-rc0~374-gb575ec2c56d built by root on host at 2026-11-22"
    assert sw.version().startswith("VPP v26.10-rc0~374-gb575ec2c56d ")
    assert "acl" not in sw.version()
    acl = Vpp(ctx(tmp_path), "acl")
    acl._version = sw._version
    assert "af_packet, acl; no DPDK plugin" in acl.version()


def test_generator_ends_are_the_other_roles(tmp_path: Path) -> None:
    sw = Vpp(ctx(tmp_path), "xconnect")
    topo = topology(parse("p2v", "memif", "uni"), tmp_path, "t")
    assert sw.gen_spec(topo.links[0]) == f"memif:role=client,socket={tmp_path}/t-p0.memif"
    assert sw.gen_spec(topo.links[1]) == f"virtio-user:path={tmp_path}/t-p1.sock"


def test_generator_veth_ends_keep_the_harness_driver(tmp_path: Path) -> None:
    topo = topology(parse("p2p", "veth", "uni"), tmp_path, "t", netns="t-sw")
    sw = Vpp(ctx(tmp_path, gen_veth_driver="af_xdp"), "learn")
    sw.topology = topo.__class__(topo.links, topo.pairs, topo.netns, "af_packet")
    assert sw.gen_spec(topo.links[0]) == "af_xdp:iface=tg0"
    assert sw.port_kind() == "af_packet"


def test_stop_without_start_removes_its_files_only(tmp_path: Path) -> None:
    sw = Vpp(ctx(tmp_path), "learn")
    topo = topology(parse("p2v", "memif", "uni"), tmp_path, "t")
    for link in topo.links:
        Path(link.path).touch()
    sw.run_dir.mkdir()
    (sw.run_dir / "cli.sock").touch()
    other = tmp_path / "other.sock"
    other.touch()
    sw.topology = topo
    sw.stop()
    sw.stop()                                              # idempotent
    assert not any(Path(link.path).exists() for link in topo.links)
    assert not (sw.run_dir / "cli.sock").exists() and other.exists()


def test_start_without_vpp_fails_with_the_reason(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    sw = Vpp(ctx(tmp_path), "learn")
    with pytest.raises(RuntimeError, match="VPP is not installed"):
        sw.start(topology(parse("v2v", "memif", "uni"), tmp_path, "t"))
    sw.stop()
