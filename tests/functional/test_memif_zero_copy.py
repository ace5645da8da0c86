"""memif zero_copy=yes (DPDK memif's zero-copy=yes, issue 17): refused, each time with its
reason, and nothing is made. A server has no buffers of its own to share; a frame must fit
one buffer; and on a client DPDK 22.11 closes the EAL's hugepage descriptor after the first
zero-copy connection, so sluiced does not offer it yet (docs/ports.md, "memif zero-copy")."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Daemon, RpcError


def test_zero_copy_refused_with_reasons(daemon: Daemon, workdir: Path) -> None:
    daemon.call("add-switch", name="br0", mode="patch")
    for spec, reason in (
            (f"memif:role=server,socket={workdir}/s.sock,zero_copy=yes", "client only"),
            (f"memif:role=client,socket={workdir}/c.sock,zero_copy=yes,mtu=9000",
             "mtu up to 2026"),
            (f"memif:role=client,socket={workdir}/c.sock,zero_copy=yes",
             "not yet .*closes the EAL's hugepage descriptor")):
        with pytest.raises(RpcError, match=reason):
            daemon.call("add-port", switch="br0", name="z", spec=spec)
    assert daemon.call("list-ports") == []
    assert not (workdir / "s.sock").exists()
    # zero_copy=no is the default, and the daemon goes on making ports.
    daemon.call("add-port", switch="br0", name="m",
                spec=f"memif:role=server,socket={workdir}/m.sock,zero_copy=no")
    assert [p["name"] for p in daemon.call("list-ports")] == ["m"]
