"""sluice-bench idle: the +idle variant of the sluice switch, CPU time from /proc stat
fields, and the report's 'Idle CPU and idle-sleep latency' section."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sluice.bench import cli
from sluice.bench.switches import Context
from sluice.bench.switches.sluice import Sluice


def ctx(tmp_path: Path) -> Context:
    return Context(work=tmp_path, tag="t", switch_cpu=1, ctl_cpu=0, repo=tmp_path)


def test_idle_variant_runs_only_when_named() -> None:
    assert cli.switch_keys("sluice") == ("sluice:patch", "sluice:learn")
    assert cli.switch_keys("sluice:patch+idle,sluice:patch") == ("sluice:patch+idle",
                                                                 "sluice:patch")
    with pytest.raises(argparse.ArgumentTypeError):
        cli.switch_keys("testpmd:io+idle")


def test_idle_variant_keeps_the_default_sleep_and_the_forwarding_mode(tmp_path: Path) -> None:
    busy, idle = Sluice(ctx(tmp_path), "patch"), Sluice(ctx(tmp_path), "patch+idle")
    assert (busy.fwd_mode, busy.idle_sleep) == ("patch", False)
    assert (idle.fwd_mode, idle.idle_sleep) == ("patch", True)
    assert "busy-polls" in busy.steering() and "sleeps when idle" in idle.steering()
    learn = Sluice(ctx(tmp_path), "learn+idle")
    assert learn.learns and learn.fwd_mode == "learn"
