"""sluice-bench: the results schema and the report built from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.bench import report
from sluice.bench.schema import REQUIRED, Row, append_rows, load_rows, validate


def row(**kw: object) -> Row:
    """A plausible alternating row of sluice against testpmd; KW changes fields."""
    fields = {"switch": "sluice", "mode": "patch", "scenario": "v2v", "phy": "", "vnf": "",
              "size": 64, "direction": "uni", "trial": 0, "placement": "near",
              "method": "alternating", "rx_pps": 10e6, "tx_pps": 10.1e6, "loss": 0.01,
              "oversubscribed": False, "generator_bound": False, "kernel_path": False,
              "key": "sluice:patch", "samples": 6, "counted_s": 4.2, "ratio_vs": "testpmd:io",
              "ratio_median": 0.9, "ratio_q1": 0.85, "ratio_q3": 0.95, "ratio_n": 5,
              "gen_order": "first"}
    fields.update(kw)
    return Row(**fields)  # type: ignore[arg-type]


def test_issue_fields_are_required() -> None:
    for f in ("switch", "mode", "scenario", "phy", "vnf", "size", "direction", "trial",
              "placement", "rx_pps", "tx_pps", "loss", "oversubscribed", "generator_bound",
              "kernel_path"):
        assert f in REQUIRED


def test_rows_round_trip_through_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    append_rows(path, [row(), row(trial=1, placement="far")])
    rows = load_rows(path)
    assert [r.trial for r in rows] == [0, 1] and rows[1].placement == "far"


@pytest.mark.parametrize("change, message", [
    ({"placement": "close"}, "placement"),
    ({"method": "guess"}, "method"),
    ({"loss": 1.5}, "loss"),
    ({"size": 12}, "size"),
    ({"direction": "both"}, "direction"),
])
def test_bad_rows_are_refused(change: dict[str, object], message: str) -> None:
    obj = json.loads(row().to_json())
    obj.update(change)
    with pytest.raises(ValueError, match=message):
        validate(obj)


def test_missing_and_unknown_fields_are_named() -> None:
    obj = json.loads(row().to_json())
    del obj["rx_pps"]
    with pytest.raises(ValueError, match="rx_pps"):
        validate(obj)
    obj = json.loads(row().to_json())
    obj["colour"] = "blue"
    with pytest.raises(ValueError, match="colour"):
        validate(obj)


def test_report_tables_keep_oversubscribed_rows_out(tmp_path: Path) -> None:
    rows = [row(), row(trial=1, rx_pps=12e6, ratio_median=1.1),
            row(switch="testpmd", mode="io", key="testpmd:io", rx_pps=11e6,
                ratio_vs="sluice:patch", ratio_median=1.0 / 0.9, gen_order="second"),
            row(rx_pps=1e3, oversubscribed=True, trial=2)]
    t = report.throughput_table(rows)
    sl = next(x for x in t if x["switch"] == "sluice:patch")
    assert sl["trials"] == 2 and sl["rx_mpps"] == pytest.approx(11.0)
    r = report.ratio_table(rows)
    assert {x["switch"] for x in r} == {"sluice:patch", "testpmd:io"}
    append_rows(tmp_path / "results.jsonl", rows)
    (tmp_path / "manifest.json").write_text(json.dumps({"settings": {"baseline": "testpmd"}}))
    md = report.write(tmp_path).read_text()
    assert "| v2v | 64 B | sluice:patch | testpmd:io | near | 1.000 |" in md
    assert (tmp_path / "figures" / "tput-v2v.svg").exists()
    assert "<table>" in (tmp_path / "report.html").read_text()
