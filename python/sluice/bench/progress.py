"""The run with a rich progress bar (ETA from the plan's expected seconds) and a summary."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from sluice.bench.runner import Runner, Settings
from sluice.bench.schema import Row


def run_with_progress(runner_cls: type[Runner], s: Settings) -> list[Row]:
    """Runs S with a progress bar; prints a summary table at the end."""
    # Into a file (make bench | tee, nohup) rich would assume 80 columns and wrap every cell.
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=console, transient=False) as bar:
        task = bar.add_task("planning", total=None)

        def advance(seconds: float, what: str) -> None:
            bar.update(task, advance=seconds, description=what[:70])

        def grow(seconds: float) -> None:
            bar.update(task, total=(bar.tasks[0].total or 0) + seconds)

        runner = runner_cls(s, advance, lambda msg: bar.console.print(f"[yellow]{msg}"))
        runner.grow = grow
        bar.update(task, total=runner.total_seconds(runner.plan_cache), description="running")
        rows = runner.run()
        bar.update(task, completed=bar.tasks[0].total, description="done")
    console.print(summary_table(rows))
    return rows


def summary_table(rows: Sequence[Row]) -> Table:
    """One line per row: what, where, R+ and the ratio to the other switch."""
    t = Table(title="sluice-bench summary (R+ = mean received rate; ratios from alternating "
                    "windows)")
    for col in ("scenario", "size", "switch", "trial", "placement", "method", "R+ Mpps",
                "loss", "ratio [q1, q3] (n) / latency", "flags"):
        t.add_column(col)
    for r in rows:
        ratio = (f"{r.ratio_median:.3f} [{r.ratio_q1:.3f}, {r.ratio_q3:.3f}] ({r.ratio_n}) "
                 f"vs {r.ratio_vs}" if r.ratio_median is not None else "")
        if r.method == "latency":
            at = (f"{r.latency_load:g} R+" if r.latency_load is not None
                  else f"{(r.asked_pps or 0) / 1e6:g} Mpps")
            ratio = (f"RTT at {at}: mean {r.latency_ns.get('mean', 0) / 1e3:.1f} us, "
                     f"p99 {r.latency_ns.get('p99', 0) / 1e3:.1f} us")
        flags = ",".join(f for f, on in (("oversubscribed", r.oversubscribed),
                                         ("generator_bound", r.generator_bound),
                                         ("kernel_path", r.kernel_path)) if on)
        t.add_row(f"{r.scenario}{'/' + r.phy if r.phy else ''} {r.direction}", str(r.size),
                  r.key or f"{r.switch}:{r.mode}", str(r.trial), r.placement, r.method,
                  f"{r.rx_pps / 1e6:.3f}", f"{100 * r.loss:.2f} %", ratio, flags)
    return t
