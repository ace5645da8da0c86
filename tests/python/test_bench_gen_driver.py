"""sluice-bench --gen-driver: the generator's end of a vhost-user link is sluice-gen's own
virtio-raw driver with --gen-driver virtio-raw, DPDK's virtio-user by default; where the
switch's port is a vhost-user client (OVS-DPDK), the generator's end is the server."""

from __future__ import annotations

from pathlib import Path

from sluice.bench import cli, gen
from sluice.bench.scenarios import parse, topology
from sluice.bench.switches import ADAPTERS, Context


def options(*extra: str) -> dict[str, str]:
    args = cli.make_parser().parse_args(["run", "--switch", "testpmd", *extra])
    return cli.settings(args, args.switch, args.baseline).switch_options


def test_default_keeps_virtio_user() -> None:
    assert options() == {}
    assert options("--gen-driver", "virtio-user") == {}


def test_virtio_raw_for_every_vhost_switch(tmp_path: Path) -> None:
    opts = options("--gen-driver", "virtio-raw")
    assert opts == {"gen_vhost": "virtio-raw"}
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path, extra=opts)
    link = topo.links[0]
    assert link.kind == "vhost"
    assert ADAPTERS["testpmd"](ctx, "io").gen_spec(link) == f"virtio-raw:path={link.path}"
    assert ADAPTERS["sluice"](ctx, "patch").gen_spec(link) == f"virtio-raw:path={link.path}"
    # OVS-DPDK's vhost-user ports are clients: the generator's end is the server.
    for mode in ("normal", "flows"):
        assert ADAPTERS["ovs-dpdk"](ctx, mode).gen_spec(link) == \
            f"virtio-raw:path={link.path},server=1"


def test_default_driver_per_role(tmp_path: Path) -> None:
    """Without --gen-driver: virtio-user, the server where the switch is the client."""
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path, extra={})
    link = topo.links[0]
    assert ADAPTERS["sluice"](ctx, "patch").gen_spec(link) == f"virtio-user:path={link.path}"
    assert ADAPTERS["ovs-dpdk"](ctx, "flows").gen_spec(link) == \
        f"virtio-user:path={link.path},server=1"


def test_virtio_raw_in_an_alternation_with_ovs(tmp_path: Path) -> None:
    """sluice:flow against ovs-dpdk:flows: one generator, sluice's ends virtio-raw clients,
    OVS's virtio-raw servers, all as --port."""
    opts = options("--gen-driver", "virtio-raw")
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path, extra=opts)
    specs = []
    for name, mode in (("sluice", "flow"), ("ovs-dpdk", "flows")):
        sw = ADAPTERS[name](ctx, mode)
        sw.topology = topo
        args = gen.port_args(sw).args
        assert args[::2] == ["--port"] * (len(args) // 2)
        specs += args[1::2]
    assert all(s.startswith("virtio-raw:path=") for s in specs)
    assert [s.endswith(",server=1") for s in specs] == [False, False, True, True]


def test_virtio_raw_only_for_generator_and_sink_ports(tmp_path: Path) -> None:
    """Inline VNFs and the echo test's ping and reflect ports are roles virtio-raw does not
    serve: with --gen-driver virtio-raw they stay virtio-user, the phy ports go raw."""
    opts = options("--gen-driver", "virtio-raw")
    topo = topology(parse("loopback-1", "memif", "uni"), tmp_path, "t")
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path, extra=opts)
    sw = ADAPTERS["sluice"](ctx, "patch")
    sw.topology = topo
    args = gen.port_args(sw).args
    vnf = [args[i + 1] for i in range(0, len(args) - 1) if args[i] in ("--vnf-in", "--vnf-out")]
    assert vnf and all(p.startswith("virtio-user:") for p in vnf), vnf
    # A vhost-user generator port goes raw, unless its role is one raw does not serve.
    link = topology(parse("v2v", "memif", "uni"), tmp_path, "v").links[0]
    assert sw.gen_spec(link) == f"virtio-raw:path={link.path}"
    assert sw.gen_spec(link, raw=False) == f"virtio-user:path={link.path}"
