"""Why OVS-DPDK forwarded nothing over memif, and what makes it forward (issue 17, part 5).

A minimal reproduction outside the harness: a private OVS-DPDK 3.1 (ovsdb-server and
ovs-vswitchd-dpdk, every file under the test's directory) with two memif server ports
(`type=dpdk`, `dpdk-devargs=net_memif...`) and in_port->output rules, and sluice-gen as the
two memif clients. OVS gives each port one transmit queue per sending thread: queue 0 is
the main thread's, queue 1 the PMD's, which sends every frame it forwards. DPDK 22.11's
memif lets the client decide how many server-to-client rings exist (one per receive queue
it opens), and a server's transmit on a queue without a ring sends nothing. So a one-queue
client receives nothing while OVS counts each frame as a transmit drop, and a client with
`rx_queues=2` receives them all. docs/bench.md, "OVS-DPDK over memif", tells the story.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gen_helpers import GEN, run_gen

from conftest import remove_hugepage_files
from sluice.bench.switches import ovsdb
from sluice.bench.switches.ovs_dpdk import MEMIF_TX_QUEUES, VSWITCHD

pytestmark = pytest.mark.skipif(bool(ovsdb.missing(VSWITCHD)) or not GEN.exists(),
                                reason="needs OVS-DPDK (openvswitch-switch-dpdk) and "
                                       "a built sluice-gen")

RATE = "200kpps"     # low enough for a PMD that shares its CPU with others' tests
# Slots of each memif ring (sluice-gen's --ring). Frames still in a ring when the sender
# stops are never received: on a loaded machine that can be one ring's worth a direction.
RING = 16384


@pytest.fixture
def ovs(tmp_path: Path) -> Iterator[tuple[ovsdb.PrivateOvs, list[Path]]]:
    """OVS-DPDK with memif server ports p0 and p1, rules p0 <-> p1; their sockets."""
    tag = f"tom{tmp_path.name[-6:]}"
    prefix = f"{tag}ov"
    work = tmp_path / "ovs"
    private = ovsdb.PrivateOvs(work, tag)
    socks = [tmp_path / f"p{i}.memif" for i in range(2)]
    try:
        private.start_db(0, ["dpdk-init=true", "pmd-cpu-mask=0x2", "dpdk-socket-mem=512",
                             f"dpdk-extra=--file-prefix={prefix} --single-file-segments "
                             "--no-pci --log-level=*:warning"])
        private.start_vswitchd(VSWITCHD, "0", None)
        private.add_bridge()
        for i, sock in enumerate(socks):
            private.add_port(f"p{i}", i + 1, [
                "type=dpdk", f"options:dpdk-devargs=net_memif{i},role=server,socket={sock},"
                "socket-abstract=no"])
        private.pair_flows([(0, 1)])
        yield private, socks
    finally:
        private.stop()
        remove_hugepage_files(prefix)


def tx_dropped(private: ovsdb.PrivateOvs, ofport: int) -> int:
    c = ovsdb.parse_dump_ports(private.ofctl("dump-ports"))[str(ofport)]
    return c["tx_dropped"] or 0


def send(tmp_path: Path, socks: list[Path], extra: str, name: str) -> dict:
    """Two seconds of p0 -> p1 at RATE through OVS; sluice-gen's summary."""
    ports = [a for s in socks for a in ("--port", f"memif:client,socket={s}{extra}")]
    got, _ = run_gen(tmp_path, [*ports, "--duration", "2", "--rate", RATE, "--ring", str(RING)],
                     name=name, timeout=180)
    return got


def test_ovs_sends_on_its_pmd_queue_which_a_one_queue_memif_client_never_opened(
        ovs: tuple[ovsdb.PrivateOvs, list[Path]], tmp_path: Path) -> None:
    private, socks = ovs
    shown = private.appctl("dpctl/show")
    queues = re.findall(r"p\d \(dpdk:[^)]*configured_tx_queues=(\d+)", shown)
    assert queues == [str(MEMIF_TX_QUEUES)] * 2, shown

    before = tx_dropped(private, 2)
    one = send(tmp_path, socks, "", "one-queue.json")
    dropped = tx_dropped(private, 2) - before
    assert one["tx_packets"] > 100_000
    assert one["rx_packets"] == 0, one
    # Every frame OVS took from p0 matched its rule and was dropped on p1's transmit.
    assert dropped >= one["tx_packets"] - RING, (dropped, one["tx_packets"])

    both = send(tmp_path, socks, f",rx_queues={MEMIF_TX_QUEUES}", "two-queues.json")
    assert both["tx_packets"] > 100_000
    assert both["rx_packets"] >= both["tx_packets"] - 2 * RING, both
    assert both["foreign"] == 0 and both["duplicated"] == 0


def test_rx_queues_is_refused_where_nothing_would_poll_them(tmp_path: Path) -> None:
    """A server takes the rings its client opens; an inline VNF polls one queue a port."""
    server = gen_refusal("--port", f"memif:server,socket={tmp_path}/x.memif,rx_queues=2")
    assert "'rx_queues' is the client's to choose" in server
    vnf = gen_refusal("--port", f"memif:server,socket={tmp_path}/y.memif",
                      "--vnf-in", f"memif:client,socket={tmp_path}/a.memif,rx_queues=2",
                      "--vnf-out", f"memif:client,socket={tmp_path}/b.memif")
    assert "a VNF port receives on one queue" in vnf


def gen_refusal(*args: str) -> str:
    """sluice-gen's complaint about ARGS (it must refuse them before opening a port)."""
    r = subprocess.run([str(GEN), *args, "--duration", "1"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0, r.stdout
    return r.stderr
