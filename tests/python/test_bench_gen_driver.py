"""sluice-bench --gen-driver: the generator's end of a vhost-user link is sluice-gen's own
virtio-raw driver where the switch's port is a server, virtio-user where it is a client."""

from __future__ import annotations

from pathlib import Path

from sluice.bench import cli
from sluice.bench.scenarios import parse, topology
from sluice.bench.switches import ADAPTERS, Context


def options(*extra: str) -> dict[str, str]:
    args = cli.make_parser().parse_args(["run", "--switch", "testpmd", *extra])
    return cli.settings(args, args.switch, args.baseline).switch_options


def test_default_keeps_virtio_user() -> None:
    assert options() == {}
    assert options("--gen-driver", "virtio-user") == {}


def test_virtio_raw_for_vhost_servers_only(tmp_path: Path) -> None:
    opts = options("--gen-driver", "virtio-raw")
    assert opts == {"gen_vhost": "virtio-raw"}
    topo = topology(parse("v2v", "memif", "uni"), tmp_path, "t")
    ctx = Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path, extra=opts)
    link = topo.links[0]
    assert link.kind == "vhost"
    assert ADAPTERS["testpmd"](ctx, "io").gen_spec(link) == f"virtio-raw:path={link.path}"
    assert ADAPTERS["sluice"](ctx, "patch").gen_spec(link) == f"virtio-raw:path={link.path}"
    # OVS-DPDK's vhost-user ports are clients: the generator's end must be the server.
    assert ADAPTERS["ovs-dpdk"](ctx, "normal").gen_spec(link) == \
        f"virtio-user:path={link.path},server=1"
