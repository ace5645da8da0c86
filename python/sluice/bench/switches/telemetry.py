"""DPDK's telemetry socket: a running DPDK process's port counters without disturbing it.

Every DPDK 22.11 process started without --no-telemetry (and without --in-memory) listens
on `/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2` (SOCK_SEQPACKET, one JSON answer per
request) from a control thread that sleeps in accept() and read(): asking for
`/ethdev/stats,N` costs the forwarding lcore nothing. testpmd and basicfwd are read so.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

RUN_DIR = Path("/var/run/dpdk")


def socket_path(prefix: str) -> Path:
    """Where a process with file prefix PREFIX listens (as root)."""
    return RUN_DIR / prefix / "dpdk_telemetry.v2"


def _ask(sock: socket.socket, command: str) -> Any:
    sock.send(command.encode())
    return json.loads(sock.recv(1 << 16).decode())


def ethdev_stats(prefix: str, ports: int, timeout: float = 5.0
                 ) -> list[dict[str, int]] | None:
    """Counters of ethdev ports 0..PORTS-1 of the process with file prefix PREFIX, as
    `rx`, `tx`, `rx_missed`, `rx_errors`, `tx_errors`; None when it does not answer."""
    path = socket_path(prefix)
    out = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.recv(1 << 16)                    # the greeting: version, pid, max length
            for port in range(ports):
                st = _ask(sock, f"/ethdev/stats,{port}").get("/ethdev/stats")
                if not isinstance(st, dict):
                    return None
                out.append({"rx": int(st["ipackets"]), "tx": int(st["opackets"]),
                            "rx_missed": int(st.get("imissed", 0)),
                            "rx_errors": int(st.get("ierrors", 0)),
                            "tx_errors": int(st.get("oerrors", 0))})
    except (OSError, ValueError, KeyError):
        return None
    return out
