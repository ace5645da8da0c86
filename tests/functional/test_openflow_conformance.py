"""The public OpenFlow 1.3 conformance suite (os-ken's switch test tool, of_conformance.py)
in `make test`: its action and match tests (940, about two minutes), whose pass counts must
not fall below the figures docs/openflow.md records ("Conformance"). The meter and group
tests send for 30 s each: they are left to `make test-openflow-conformance`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from of_conformance import run_suite
from ovs_oracle import ovs_available

# docs/openflow.md, "Conformance": tests passed of each kind, and how many there are. The
# rest are documented limitations (MPLS, PBB and TTL actions, fields flow mode lacks) and
# os-ken's own wrong SCTP checksums.
RECORDED = {"action": (65, 226), "match": (339, 714)}
# Under load (the whole of `make test` on 2 vCPUs) a few tests of the recorded passes failed
# with the tool's "Receiving timeout" (the tester switch did not count the frame within its
# window), a different few each run (3, 1), and each passed alone; up to this many such
# timeouts are tolerated, any other new failure is not. Not yet explained (issue note).
TIMEOUTS_TOLERATED = 3


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, hugepages)")
@pytest.mark.skipif(ovs_available() is not None, reason=str(ovs_available()))
def test_action_and_match_tests_pass(workdir: Path) -> None:
    summary = run_suite(list(RECORDED), None, workdir / "out", timeout=900)
    failed = "\n".join(f"{t['file']} | {t['test']}: {t['detail']}" for t in summary["tests"]
                       if t["result"] != "OK")
    for kind, (passed, total) in RECORDED.items():
        got = summary["by_kind"].get(kind, {"ok": 0, "error": 0})
        assert got["ok"] + got["error"] == total, (kind, got)
        timeouts = sum(1 for t in summary["tests"] if t["result"] != "OK" and
                       t["file"].startswith(kind) and "Receiving timeout" in t["detail"])
        slack = min(timeouts, TIMEOUTS_TOLERATED)
        assert got["ok"] + slack >= passed, \
            f"{kind}: {got['ok']} passed, {passed} before\n{failed}"
