"""Per-hop counts of a real loopback-2 through sluiced (patch): every hop's counters come from
sluice-gen's ports, sluiced's ports and the inline VNFs, and they must agree with each other
and with the generator's totals."""

from __future__ import annotations

import glob
import json
from pathlib import Path

from test_bench import bench

HOP_NAMES = [
    "gen p0 tx -> switch p0 rx", "switch p0 rx -> switch v1a tx", "switch v1a tx -> VNF1 rx",
    "VNF1 rx -> VNF1 tx", "VNF1 tx -> switch v1b rx", "switch v1b rx -> switch v2a tx",
    "switch v2a tx -> VNF2 rx", "VNF2 rx -> VNF2 tx", "VNF2 tx -> switch v2b rx",
    "switch v2b rx -> switch p1 tx", "switch p1 tx -> gen p1 rx"]


def gen_summary(out: Path) -> dict:
    """sluice-gen's summary, the last JSON line of its stdout in the trial's log."""
    log = next(Path(p) for p in glob.glob(str(out / "logs" / "gen-loopback-2-*.log")))
    lines = [x for x in log.read_text().splitlines()
             if x.startswith("{") and '"port_stats"' in x]
    assert lines, f"no summary in {log}"
    return json.loads(lines[-1])


def test_loopback_2_sluice_patch_hops_are_consistent(tmp_path: Path) -> None:
    out = tmp_path / "hops"
    r = bench("run", "--scenario", "loopback-2", "--switch", "sluice:patch", "--sizes", "64",
              "--duration", "3", "--trials", "1", "--warmup", "0.5", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows
    h = rows[0]["hops"]
    assert h["switch_counters"] is True and "reverse" not in h
    fwd = h["forward"]["hops"]
    assert [f"{x['from']} -> {x['to']}" for x in fwd] == HOP_NAMES
    assert fwd[0]["sent"] > 100_000
    for prev, x in zip(fwd, fwd[1:], strict=False):
        assert x["sent"] == prev["received"], (prev, x)          # one counter, two hops
    for x in fwd:
        assert 0 <= x["received"] <= x["sent"], x
        assert x["lost"] == x["sent"] - x["received"]
        # Inside the switch a lost frame is a counted drop, with its reason.
        if x["from"].startswith("switch") and x["to"].startswith("switch"):
            assert sum((x.get("switch_drops") or {}).values()) == x["lost"], x
    # The ends are the generator's own port counters (whole run); its measured frames, a
    # part of the run, are a part of them.
    summary = gen_summary(out)
    ports = summary["port_stats"]
    assert h["forward"]["sent"] == fwd[0]["sent"] == ports[0]["tx"]
    assert h["forward"]["received"] == fwd[-1]["received"] == ports[1]["rx"]
    assert sum(x["lost"] for x in fwd) == h["forward"]["sent"] - h["forward"]["received"]
    assert summary["tx_packets"] <= ports[0]["tx"] and summary["rx_packets"] <= ports[1]["rx"]
    v1, v2 = (v["in_to_out"] for v in summary["vnfs"])
    assert (fwd[3]["sent"], fwd[3]["received"]) == (v1["rx"], v1["tx"])
    assert (fwd[7]["sent"], fwd[7]["received"]) == (v2["rx"], v2["tx"])
    report = (out / "report.md").read_text()
    assert "## Hops: loopback-2/memif uni, sluice:patch, 64 B, VNFs inline" in report
