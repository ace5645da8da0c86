"""sluice-bench --gen-driver: the generator's end of a vhost-user link is sluice-gen's own
virtio-raw driver with --gen-driver virtio-raw, DPDK's virtio-user with virtio-user, and by
default (auto) virtio-raw where it serves: run, compare and sweep with fixed sizes up to
1518 B; where the switch's port is a vhost-user client (OVS-DPDK), the generator's end is
the server."""

from __future__ import annotations

from pathlib import Path

from sluice.bench import cli, gen
from sluice.bench.scenarios import parse, topology
from sluice.bench.switches import ADAPTERS, Context


def options(*extra: str, command: str = "run") -> dict[str, str]:
    which = ["sluice:patch", "testpmd:io"] if command == "compare" else ["--switch", "testpmd"]
    args = cli.make_parser().parse_args([command, *which, *extra])
    keys, baseline = cli.compare_keys(args) if command == "compare" else (args.switch,
                                                                          args.baseline)
    return cli.settings(args, keys, baseline).switch_options


RAW = {"gen_vhost": "virtio-raw", "gen_vhost_auto": "1"}


def test_auto_takes_virtio_raw_where_it_serves() -> None:
    assert options() == RAW                        # run's default sizes, 64 and 1500
    assert options("--sizes", "64,1518") == RAW
    assert options("--matrix", "default") == RAW
    assert options("--param", "flows", "--values", "1,1000", command="sweep") == RAW
    assert options("--sizes", "64", command="compare") == RAW


def test_auto_keeps_virtio_user_where_raw_does_not_serve() -> None:
    assert options("--gen-driver", "virtio-user") == {}
    assert options("--sizes", "64,imix") == {}              # IMIX: several sizes a trial
    assert options("--sizes", "64,9018") == {}              # jumbo frames
    assert options("--param", "size", "--values", "64,1500", command="sweep") == {}
    assert options("--param", "ring", "--values", "256", command="sweep") == {}
    assert options(command="ndr") == {}                     # deep rings


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


def test_auto_keeps_virtio_user_for_vpp_unless_named(tmp_path: Path) -> None:
    """VPP has not met virtio-raw here: auto leaves its links on virtio-user, a named
    --gen-driver virtio-raw does not."""
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    link = topo.links[0]
    for extra, want in (((), "virtio-user"), (("--gen-driver", "virtio-raw"), "virtio-raw")):
        opts = options(*extra)
        ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path,
                      extra=opts)
        assert ADAPTERS["vpp"](ctx, "xconnect").gen_spec(link) == f"{want}:path={link.path}"
        assert ADAPTERS["testpmd"](ctx, "io").gen_spec(link) == f"virtio-raw:path={link.path}"
