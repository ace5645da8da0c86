"""Flow-mode rule syntax against its model, ovs-ofctl: every add-flow row of
tests/data/flow_parse_cases.tsv marked "ovs" must get the same verdict (accepted or refused)
from `ovs-ofctl -O OpenFlow13 parse-flow` as the table gives src/flow_parse.c (checked by the
C unit test, tests/unit/test_flow_parse.c). Rows where sluice is stricter or differs on
purpose carry no mark; docs and the table's comments say why. Skipped without ovs-ofctl."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CASES = Path(__file__).resolve().parents[1] / "data" / "flow_parse_cases.tsv"
OVS_OFCTL = shutil.which("ovs-ofctl")
# The test switch's port names and their OpenFlow numbers (the table's header says the same).
PORTS = {"vm1": "1", "vm2": "2", "fw1": "3"}


def ovs_rows() -> list[tuple[str, bool]]:
    rows = []
    for line in CASES.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) >= 5 and cols[4] == "ovs":
            assert cols[1] == "add", f"only add-flow rows can be checked with parse-flow: {line}"
            rows.append((cols[0], cols[2] == "ok"))
    return rows


def with_port_numbers(text: str) -> str:
    return re.sub(r"\b(vm1|vm2|fw1)\b", lambda m: PORTS[m.group(1)], text)


def test_table_has_ovs_rows() -> None:
    # The cross-check means something only if it covers a good part of the table.
    rows = ovs_rows()
    assert len(rows) > 100
    assert sum(ok for _, ok in rows) > 50 and sum(not ok for _, ok in rows) > 30


@pytest.mark.skipif(OVS_OFCTL is None, reason="ovs-ofctl is not installed")
@pytest.mark.parametrize("text,ok", ovs_rows(), ids=lambda v: v if isinstance(v, str) else "")
def test_same_verdict_as_ovs_ofctl(text: str, ok: bool) -> None:
    assert OVS_OFCTL is not None
    done = subprocess.run(
        [OVS_OFCTL, "-O", "OpenFlow13", "parse-flow", with_port_numbers(text)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    ovs_ok = done.returncode == 0
    detail = (done.stdout + done.stderr).strip()[-300:]
    assert ovs_ok == ok, f"sluice {'accepts' if ok else 'refuses'}, ovs-ofctl: {detail}"
