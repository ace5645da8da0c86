"""basicfwd: DPDK's skeleton example, the no-logic baseline of the container benchmark
framework (seed 003): one lcore reads a burst from each port and sends it out of the port's
pair (0<->1, 2<->3, ...), with no lookup, no statistics and no buffering.

Built from dpdk-doc's sources by scripts/dpdk-examples.sh (build/dpdk-examples/). It has a
single lcore, its main one, which is pinned to the switch CPU (`--lcores 0@SWITCH`); DPDK's
control threads (vhost-user's socket handling among them) then sleep on the other CPUs. It
has no signal handler: SIGTERM ends it, and its hugepage files are removed by prefix.
Ports, pairing and the af_xdp-then-af_packet fallback on veths are testpmd's (the adapter
it follows).
"""

from __future__ import annotations

import signal
from pathlib import Path

from sluice.bench import examples
from sluice.bench.arrange import Poller
from sluice.bench.switches.base import Context
from sluice.bench.switches.testpmd import Testpmd

READY = "forwarding packets"   # "Core 0 forwarding packets. [Ctrl+C to quit]"


class Basicfwd(Testpmd):
    """DPDK's skeleton/basicfwd between paired ports."""

    name = "basicfwd"
    modes = ("fwd",)
    ready = READY
    stop_signal = signal.SIGTERM
    # No prompt and no cycle counters: its cost is the /proc cross-check alone.
    interactive = False

    def __init__(self, ctx: Context, mode: str) -> None:
        super().__init__(ctx, mode)
        self.prefix = f"{ctx.tag}bf"
        self.log = ctx.work / "basicfwd.log"

    @classmethod
    def available(cls, repo: Path) -> str | None:
        return examples.missing(repo, "basicfwd")

    def command(self, vdevs: list[str]) -> list[str]:
        return [str(examples.path(self.ctx.repo, "basicfwd")),
                "--lcores", f"0@{self.ctx.switch_cpu}", "--no-pci", "--file-prefix",
                self.prefix, "--single-file-segments", "--log-level=*:warning", *vdevs]

    def version(self) -> str:
        return f"basicfwd ({examples.version()})"

    def pollers(self) -> list[Poller]:
        return [Poller("basicfwd lcore", self.ctx.switch_cpu)]

    def steering(self) -> str:
        return "basicfwd: port 0<->1, 2<->3, ... (port id xor 1, no lookup)"

    def stop(self) -> None:
        super().stop()
        # basicfwd dies on SIGTERM without closing its ports: no one removes the sockets.
        if self.topology is not None:
            for link in self.topology.links:
                if link.kind in ("vhost", "memif") and link.path:
                    Path(link.path).unlink(missing_ok=True)

