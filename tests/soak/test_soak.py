"""make soak: mixed traffic for SOAK_SECONDS (default an hour) with port hot-plug and VNF
restarts, against one sluiced (issue 15). Not part of make test.

- sluice-gen, over memif, sends 1 Mpps both ways through a learn switch (10,000 flows with
  varied MACs, so learning and aging work all along);
- a testpmd VNF pair over vhost-user sends through a patch switch; the receiving VNF is
  killed and started again every 30 s;
- a tap port joins the learn switch and leaves it again every 5 s (floods reach it).

Every 10 s: rx = forwarded + dropped by reason on every port, and the daemon's memory
(VmRSS) and mbuf pool use are sampled. At the end, with traffic stopped and the extra ports
gone: exact accounting, pool use back to its baseline (no mbuf leaked), and memory stable
(VmRSS after the first minute grows by less than 8 MiB). The figures go to
build/soak/summary.json and are printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "functional"))

from gen_helpers import GEN  # noqa: E402

from conftest import (  # noqa: E402
    REPO,
    TESTPMD,
    Daemon,
    assert_accounting,
    remove_hugepage_files,
    stop_process,
    wait_for,
)

SECONDS = float(os.environ.get("SOAK_SECONDS", "3600"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pools_in_use(d: Daemon) -> int:
    return sum(p["in_use"] for p in d.call("show")["pools"])


def all_ports(d: Daemon) -> dict[str, Any]:
    out = {}
    for s in d.call("stats")["switches"]:
        out.update({f"{s['name']}/{p['name']}": p for p in s["ports"]})
    return out


class Vnf:
    """A testpmd over virtio-user on CPU 0, restartable."""

    def __init__(self, workdir: Path, name: str, mode: str) -> None:
        self.workdir, self.name, self.mode = workdir, name, mode
        self.proc: subprocess.Popen[bytes] | None = None
        self.prefix = f"slsoak{os.getpid()}{name}"
        self.starts = 0

    def start(self) -> None:
        with open(self.workdir / f"{self.name}.log", "ab") as log:
            self.proc = subprocess.Popen(
                [TESTPMD, "--lcores", "0@0,1@0", "--no-pci", "--file-prefix", self.prefix,
                 "--single-file-segments", "--in-memory", "-m", "256", "--vdev",
                 f"net_virtio_user0,path={self.workdir}/{self.name}.sock",
                 "--log-level=*:warning", "--", f"--forward-mode={self.mode}",
                 "--stats-period", "5", "--nb-cores", "1", "--txd", "512", "--rxd", "512"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            remove_hugepage_files(self.prefix)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig=2)
            remove_hugepage_files(self.prefix)


def test_soak(tmp_path: Path) -> None:
    workdir = Path(f"/tmp/sluice-soak-{os.getpid()}")
    workdir.mkdir(exist_ok=True)
    out_dir = REPO / "build" / "soak"
    out_dir.mkdir(parents=True, exist_ok=True)
    d = Daemon(workdir, "soak").start()
    tap = f"slsoak{os.getpid() % 100000}"
    vnfs = [Vnf(workdir, "vm2", "rxonly"), Vnf(workdir, "vm1", "txonly")]
    gen: subprocess.Popen[bytes] | None = None
    samples: list[dict[str, Any]] = []
    try:
        d.call("add-switch", name="br0", mode="learn", aging=10)
        for m in ("m1", "m2"):
            d.call("add-port", switch="br0", name=m,
                   spec=f"memif:role=server,socket={workdir}/{m}.sock")
        d.call("add-switch", name="p0", mode="patch")
        for vm in ("vm1", "vm2"):
            d.call("add-port", switch="p0", name=vm,
                   spec=f"vhost-user:server,path={workdir}/{vm}.sock")
        d.call("patch", switch="p0", port1="vm1", port2="vm2")
        time.sleep(1)
        baseline = pools_in_use(d)
        for v in vnfs:
            v.start()
        gen = subprocess.Popen(
            [str(GEN), "--cpu", "0", "--bidir",
             "--port", f"memif:role=client,socket={workdir}/m1.sock",
             "--port", f"memif:role=client,socket={workdir}/m2.sock",
             "--flows", "10000", "--vary", "mac", "--rate", "1Mpps", "--load", "open",
             "--duration", str(int(SECONDS)), "--out", str(workdir / "gen.json")],
            stdout=open(workdir / "gen.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        t0 = time.monotonic()
        next_sample = next_tap = next_vnf = t0
        tap_in, hotplugs = False, 0
        while time.monotonic() - t0 < SECONDS:
            now = time.monotonic()
            if now >= next_tap:
                if tap_in:
                    d.call("del-port", switch="br0", name="tap")
                else:
                    d.call("add-port", switch="br0", name="tap", spec=f"tap:name={tap}")
                    subprocess.run(["ip", "link", "set", tap, "up"], check=False)
                tap_in, hotplugs, next_tap = not tap_in, hotplugs + 1, now + 5
            if now >= next_vnf and now > t0 + 1:
                vnfs[0].kill()
                vnfs[0].start()
                next_vnf = now + 30
            if now >= next_sample:
                ports = all_ports(d)
                for name, p in ports.items():
                    assert p["rx_packets"] == p["forwarded"] + p["dropped"], (name, p)
                samples.append({"t": round(now - t0, 1), "rss_kib": rss_kib(d.proc.pid),
                                "pools_in_use": pools_in_use(d),
                                "rx": sum(p["rx_packets"] for p in ports.values())})
                next_sample = now + 10
            time.sleep(0.2)
        if tap_in:
            d.call("del-port", switch="br0", name="tap")
        stop_process(gen, sig=2)
        for v in vnfs:
            v.stop()
        wait_for(lambda: pools_in_use(d) == baseline, 10)
        ports = all_ports(d)
        assert_accounting(ports)
        warm = [s["rss_kib"] for s in samples if s["t"] >= 60] or [samples[-1]["rss_kib"]]
        summary = {
            "seconds": SECONDS, "samples": len(samples), "hotplugs": hotplugs,
            "vnf_starts": vnfs[0].starts,
            "packets": sum(p["rx_packets"] for p in ports.values()),
            "dropped_by_reason": {r: sum(p["drops"][r] for p in ports.values())
                                  for r in next(iter(ports.values()))["drops"]},
            "pool_baseline": baseline, "pool_end": pools_in_use(d),
            "rss_kib_first_after_60s": warm[0], "rss_kib_max_after_60s": max(warm),
            "rss_kib_end": rss_kib(d.proc.pid),
        }
        (out_dir / "summary.json").write_text(json.dumps({**summary, "series": samples},
                                                         indent=1))
        print("\nsoak:", json.dumps(summary))
        assert max(warm) - warm[0] < 8 * 1024, summary
    finally:
        if gen is not None:
            stop_process(gen)
        for v in vnfs:
            v.stop()
        assert d.stop() == 0, d.log.read_text()[-3000:]
        for f in sorted(workdir.rglob("*"), reverse=True):
            f.unlink() if not f.is_dir() else f.rmdir()
        workdir.rmdir()
