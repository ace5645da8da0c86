"""The mixed chain (chain-mixed: an L3 VNF, then an L2 VNF) without processes: the scenario's
words, links and VNF kinds, sluice-gen's --vnf-kind in its command, process VNFs in chain
order, the plan and the switches' steering (loopback-2's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bench import cli, gen, vnfs
from sluice.bench.arrange import Poller
from sluice.bench.plan import TrialSpec, choose_method, has_load_latency, trials_for
from sluice.bench.runner import Runner, Settings
from sluice.bench.scenarios import Scenario, parse, topology
from sluice.bench.switches import ADAPTERS, Context
from sluice.bench.switches.basicfwd import Basicfwd

REPO = Path(__file__).resolve().parents[2]


def mixed(vnf: str = "inline", direction: str = "uni") -> Scenario:
    return parse("chain-mixed", "memif", direction, vnf=vnf)


def test_chain_mixed_is_a_chain_of_two_steered_as_loopback_2() -> None:
    scn = mixed()
    assert (scn.name, scn.family, scn.chain, scn.phy) == ("chain-mixed", "chain", 2, "memif")
    assert scn.steer_as == "loopback-2"
    assert parse("loopback-3", "memif", "uni").steer_as == "loopback-3"
    assert parse("v2v", "memif", "uni").steer_as == "v2v"
    assert scn.label() == "chain-mixed/memif uni"
    assert not scn.kernel_path and parse("chain-mixed", "veth", "uni").kernel_path


def test_rows_name_the_vnf_kinds_in_chain_order() -> None:
    inline, procs = mixed(), mixed("l3fwd,l2fwd")
    assert inline.vnf == "inline:l3,l2" and not inline.process_vnfs
    assert inline.inline_kinds == ("l3", "l2") and inline.process_kinds == ()
    assert procs.vnf == "l3fwd,l2fwd" and procs.process_vnfs
    assert procs.process_kinds == ("l3fwd", "l2fwd")
    lb = parse("loopback-2", "memif", "uni", vnf="l2fwd")
    assert lb.inline_kinds == ("l2", "l2") and lb.process_kinds == ("l2fwd", "l2fwd")
    assert parse("loopback-2", "memif", "uni").vnf == "inline"     # unchanged for loopback


def test_chain_mixed_refuses_other_vnf_kinds_and_pairs() -> None:
    for vnf in ("l2fwd", "l3fwd", "testpmd-mac", "l2fwd,l3fwd"):
        with pytest.raises(ValueError, match="an L3 VNF then an L2 VNF"):
            mixed(vnf)
    with pytest.raises(ValueError, match="for chain-mixed only"):
        parse("loopback-2", "memif", "uni", vnf="l3fwd,l2fwd")
    with pytest.raises(ValueError, match="1 for chains"):
        parse("chain-mixed", "memif", "uni", pairs=2)
    with pytest.raises(ValueError, match="chain-mixed"):
        parse("chain-fancy", "memif", "uni")
    assert parse("v2v", "memif", "uni", vnf="l3fwd,l2fwd").vnf == ""   # no VNFs: ignored


def test_chain_mixed_has_the_links_of_loopback_2(tmp_path: Path) -> None:
    a = topology(mixed(), tmp_path, "t")
    b = topology(parse("loopback-2", "memif", "uni"), tmp_path, "t")
    assert (a.links, a.pairs) == (b.links, b.pairs)
    # ... and a firewall stage (rules.py) on the L3 VNF's output, which loopback-2 lacks
    assert a.links[a.firewall].name == "v1b" and b.firewall is None
    assert [link.role for link in a.links] == ["phy", "vnf", "vnf", "vnf", "vnf", "phy"]
    assert a.pairs == ((0, 1), (2, 3), (4, 5))


def ctx(tmp_path: Path) -> Context:
    return Context(work=tmp_path, tag="sbt1a", switch_cpu=1, ctl_cpu=0, repo=REPO)


def test_generator_gets_a_vnf_kind_per_vnf_in_chain_order(tmp_path: Path) -> None:
    sw = Basicfwd(ctx(tmp_path), "fwd")
    sw.topology = topology(mixed(), tmp_path, "t")
    args = gen.port_args(sw, mixed().inline_kinds).args
    assert args.count("--vnf-in") == 2 and args.count("--port") == 2
    kinds = [args[i + 1] for i, a in enumerate(args) if a == "--vnf-kind"]
    assert kinds == ["l3", "l2"]
    # The k-th --vnf-in belongs to the first VNF's links (v1a), the second to v2a.
    ins = [args[i + 1] for i, a in enumerate(args) if a == "--vnf-in"]
    assert "v1a" in ins[0] and "v2a" in ins[1]
    # All-l2 chains keep the command they had (sluice-gen without --vnf-kind runs them).
    assert "--vnf-kind" not in gen.port_args(sw).args + gen.port_args(sw, ("l2", "l2")).args
    assert "--vnf-in" not in gen.port_args(sw, ()).args
    with pytest.raises(ValueError, match="3 VNF kinds for 2 VNFs"):
        gen.port_args(sw, ("l3", "l2", "l2"))


def settings(tmp_path: Path, units: tuple[tuple[Scenario, tuple[int, ...]], ...],
             **kw: object) -> Settings:
    base: dict[str, object] = {
        "units": units, "switches": ("sluice:patch", "testpmd:io"), "trials": 1,
        "duration": 4.0, "window": 1.0, "settle": 0.3, "warmup": 1.0, "cooldown": 0.0,
        "switch_cpu": 1, "gen_cpu": 0, "allow_shared_cpu": False, "baseline": "testpmd",
        "out": tmp_path / "out", "repo": REPO, "gen": tmp_path / "sluice-gen"}
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    r = Runner(settings(tmp_path, ((mixed(), (64,)),)), lambda *_: None, lambda _m: None)
    yield r
    r.cleanup_work()


def test_the_trial_command_carries_the_kinds(runner: Runner, tmp_path: Path) -> None:
    sw = Basicfwd(ctx(tmp_path), "fwd")
    sw.topology = topology(mixed(), tmp_path, "t")
    spec = TrialSpec(mixed(), 64, 0, "interleaved", ("basicfwd:fwd",))
    cmd = runner.gen_cmd(spec, [sw], tmp_path / "o.json", None)
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--vnf-kind"] == ["l3", "l2"]
    procs = TrialSpec(mixed("l3fwd,l2fwd"), 64, 0, "interleaved", ("basicfwd:fwd",))
    cmd = runner.gen_cmd(procs, [sw], tmp_path / "o.json", None)
    assert "--vnf-in" not in cmd and "--vnf-kind" not in cmd and cmd.count("--port") == 2


def test_a_sluice_gen_without_vnf_kind_skips_the_inline_mixed_chain(tmp_path: Path) -> None:
    old = tmp_path / "old-gen"
    old.write_text("#!/bin/sh\necho '  --vnf-in SPEC'\n")
    old.chmod(0o755)
    r = Runner(settings(tmp_path, ((mixed(), (64,)), (parse("loopback-2", "memif", "uni"),
                                                      (64,))), gen=old),
               lambda *_: None, lambda _m: None)
    try:
        planned = [scn.name for scn, _, _ in r.plan()]
    finally:
        r.cleanup_work()
    assert "chain-mixed" not in planned
    assert [s["reason"] for s in r.skipped if s["scenario"].startswith("chain-mixed")] == [
        "this sluice-gen has no --vnf-kind (the inline L3 VNF comes with the mixed branch)"]


def test_switches_steer_it_as_loopback_2(runner: Runner, tmp_path: Path) -> None:
    """Adapters are asked about loopback-2: patch and testpmd take it, and so do learning
    modes over memif (the chain is steered by MAC, the L3 VNF writing the next hop's MAC
    too); over veth learning modes decline it with loopback's reason."""
    def probe(key: str, phy: str = "memif") -> str | None:
        name, mode = key.split(":")
        return ADAPTERS[name](ctx(tmp_path), mode).unsupported(mixed().steer_as, phy)
    assert probe("sluice:patch") is None and probe("testpmd:io") is None
    for key in ("sluice:learn", "vpp:learn"):
        assert probe(key) is None, key
        assert "--phy memif" in (probe(key, "veth") or ""), key
    sw = ADAPTERS["sluice"](ctx(tmp_path), "learn")
    sw.topology = topology(mixed(), tmp_path, "t")
    args = gen.port_args(sw, mixed().inline_kinds).args
    dst = [args[i + 1] for i, a in enumerate(args) if a == "--vnf-dst-mac"]
    assert dst == [f"{gen.link_mac(3)},{gen.link_mac(0)}", f"{gen.link_mac(5)},{gen.link_mac(2)}"]


def test_plan_alternates_inline_and_interleaves_processes() -> None:
    keys = ["sluice:patch", "testpmd:io"]
    assert choose_method(mixed(), keys, set()) == "alternating"
    assert choose_method(mixed("l3fwd,l2fwd"), keys, set()) == "interleaved"
    specs = trials_for(mixed(), (64,), keys, set(), 2, "testpmd")
    assert [s.switches for s in specs] == [("sluice:patch", "testpmd:io")] * 2
    assert not has_load_latency(mixed())                 # not in the published RTT table
    assert has_load_latency(parse("loopback-2", "memif", "uni"))


def test_process_kinds_along_the_chain() -> None:
    assert vnfs.kinds_along("l3fwd,l2fwd", 2) == ["l3fwd", "l2fwd"]
    assert vnfs.kinds_along("l2fwd", 3) == ["l2fwd"] * 3
    assert vnfs.is_process("l3fwd,l2fwd") and not vnfs.is_process("inline:l3,l2")
    assert vnfs.planned_pollers("l3fwd,l2fwd", 2, (0,), "sluice:patch") == [
        Poller("l3fwd VNF 1 of sluice:patch", 0), Poller("l2fwd VNF 2 of sluice:patch", 0)]
    assert vnfs.unsupported("l3fwd,l2fwd", mixed("l3fwd,l2fwd", "bidir")) is not None
    assert vnfs.unsupported("l3fwd,l2fwd", mixed("l3fwd,l2fwd")) is None
    missing = vnfs.available("l3fwd,l2fwd", Path("/nonexistent"))
    assert missing is not None and "l3fwd" in missing


def test_process_variant_starts_l3fwd_then_l2fwd(tmp_path: Path) -> None:
    from sluice.bench.switches.base import Link
    links = (Link("v1a", "vhost", path="/x/a.sock", role="vnf"),
             Link("v1b", "vhost", path="/x/b.sock", role="vnf"))
    kinds = vnfs.kinds_along(mixed("l3fwd,l2fwd").vnf_kind, 2)
    cmds = [vnfs.Vnf(k, i, links, 0, True, REPO, tmp_path, f"p{i}").command()
            for i, k in enumerate(kinds)]
    assert cmds[0][0].endswith("/l3fwd") and "--parse-ptype" in cmds[0]
    assert cmds[1][0].endswith("/l2fwd")


def test_cli_takes_chain_mixed_and_its_vnf_words() -> None:
    ap = cli.make_parser()
    a = ap.parse_args(["run", "--scenario", "chain-mixed,loopback-2", "--switch",
                       "sluice:patch,testpmd"])
    assert [scn.name for scn, _ in cli.units(a)] == ["chain-mixed", "loopback-2"]
    a = ap.parse_args(["run", "--scenario", "chain-mixed", "--vnf", "l3fwd,l2fwd",
                       "--allow-shared-cpu"])
    (scn, _), = cli.units(a)
    assert scn.vnf == "l3fwd,l2fwd"
    with pytest.raises(SystemExit):
        ap.parse_args(["run", "--vnf", "l3fwd,bogus"])
    a = ap.parse_args(["run", "--scenario", "chain-mixed", "--vnf", "l2fwd"])
    with pytest.raises(ValueError, match="an L3 VNF then an L2 VNF"):
        cli.units(a)
