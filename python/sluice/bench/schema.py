"""The results schema: one row per trial and placement label in results.jsonl.

A row says what was measured (switch, mode, scenario, phy, vnf, size, direction, trial),
under which conditions (placement label, method, arrangement flags) and what came out
(received and sent rates, loss, the ratio to the baseline switch where windows alternated).
`validate` checks a row read back from a file, so a report never rests on a malformed one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
METHODS = ("alternating", "interleaved", "latency", "search")
LATENCY_KINDS = ("", "loads", "fixed", "echo")
PLACEMENTS = ("near", "far", "mixed", "unlabelled")
# The order in which reports prefer placement labels: near first, far last.
PLACEMENT_ORDER = ("near", "unlabelled", "mixed", "far")


def best_label(labels: Iterable[str]) -> str:
    """The label of LABELS that reports compare by (PLACEMENT_ORDER; 'unlabelled' if none)."""
    have = set(labels)
    return next((p for p in PLACEMENT_ORDER if p in have), "unlabelled")
DIRECTIONS = ("uni", "bidir")


@dataclass
class Row:
    """One trial of one switch, restricted to the seconds (or windows) of one placement."""

    switch: str
    mode: str
    scenario: str                  # v2v, p2p, loopback-N, chain-mixed
    phy: str                       # memif, veth, or "" where no physical stand-in is used
    vnf: str                       # inline, l2fwd, l3fwd, testpmd-mac, inline:l3,l2 or
    #                                l3fwd,l2fwd (chain-mixed); "" without VNFs
    size: int                      # frame bytes including the 4-byte FCS
    direction: str                 # uni or bidir
    trial: int
    placement: str                 # near, far, mixed or unlabelled (no monitor)
    method: str                    # alternating (windows) or interleaved (separate trials)
    rx_pps: float                  # R+: mean received rate over the counted time
    tx_pps: float                  # accepted by the switch's input ports, same time
    loss: float                    # fraction of the counted sent frames not received
    oversubscribed: bool
    generator_bound: bool
    kernel_path: bool
    key: str = ""                  # switch:mode, with #2 for a second instance of one switch
    rx_pps_median: float = 0.0     # median of the windows or seconds
    samples: int = 0               # windows or one-second samples the figures rest on
    counted_s: float = 0.0
    gen_idle_fraction: float = 0.0
    ratio_vs: str = ""             # the other switch of the alternation
    ratio_median: float | None = None   # this switch / ratio_vs, median of neighbour ratios
    ratio_q1: float | None = None
    ratio_q3: float | None = None
    ratio_n: int = 0
    gen_order: str = ""            # first or second pair of the generator's loop
    port_kind: str = ""            # the switch's port driver (vhost-user, memif, af_xdp, ...)
    steering: str = ""             # how the switch steers the scenario's frames
    switch_cpu_s: float | None = None   # CPU seconds of the switch's processes in the trial
    wall_s: float | None = None    # the trial's length, switch continued to stopped again
    gen_cpu_s: float | None = None
    cpu_busy_s: dict[str, float] = field(default_factory=dict)  # per CPU, from /proc/stat
    switch_cycles_per_packet: float | None = None  # busy TSC cycles per packet, the switch's
                                                   # own counters: the median of cost's own_cpp
    # Cost per packet (cost.py), per window (alternating) or second (interleaved) of this
    # row: own_cpp (the switch's own busy cycles per packet, one per reading), own_source,
    # proc_nspp and proc_cpp (its forwarding threads' CPU ns and TSC cycles per frame the
    # sink received, from /proc), proc_threads, tsc_hz, and own_ratio / proc_ratio (this
    # switch's cost over ratio_vs's, window by window).
    cost: dict[str, Any] = field(default_factory=dict)
    latency_ns: dict[str, float] = field(default_factory=dict)   # sluice-gen's histogram
    pairs: int = 1                 # NvsN: sender/receiver pairs at once
    size_label: str = ""           # "imix" when size is the mean of sluice-gen's IMIX
    sweep_param: str = ""          # sluice-bench sweep: the parameter and this row's value
    sweep_value: str = ""
    search_goal: str = ""          # sluice-bench ndr (method "search"): ndr or pdr; rx_pps
    search_lower_pps: float | None = None   # is the conditional throughput, these its
    search_upper_pps: float | None = None   # relevant bounds (all senders together)
    search_trials: int = 0         # trials the search kept (one placement) ...
    search_repeated: int = 0       # ... and repeated because the placement had changed
    gen_ring: int | None = None    # sluice-gen's --ring (NDR/PDR trials), None: its defaults
    # Latency trials (method "latency"): at a fraction of R+ ("loads") or a fixed rate.
    latency_kind: str = ""         # loads, fixed, or "" (throughput: saturated latency)
    latency_load: float | None = None   # fraction of R+ (loads)
    asked_pps: float | None = None      # the rate asked of all senders together
    rplus_pps: float | None = None      # the R+ the load is a fraction of
    rplus_placement: str = ""      # the placement of the rows that R+ came from (or "any")
    hist: str = ""                 # the histogram file, relative to the results directory
    burst: int | None = None       # echo: frames per burst of the ping client
    fanout: int = 0                # fanout rows: destinations each frame is flooded to;
                                   # rx_pps then counts copies, tx_pps frames
    delivered_fraction: float | None = None   # fanout: copies received / (fanout x sent)
    sink_rx_pps: list[float] = field(default_factory=list)   # fanout: each sink's rate
    rules: int = 0                 # ACL rules the switch had loaded above its steering
    #                                (rule-programmable switches: rules.py; 0 for others)
    rule_masks: int = 0            # ... and their distinct masks
    flows: int = 1                 # sluice-gen's distinct flows (5-tuples), --flows
    api: str = ""                  # `sluice-bench sockets` rows: the endpoints' socket API
                                   # ("raw sendmmsg/recvmmsg, batch 32"); "" for sluice-gen
    # loopback-N: per-hop counts over the whole trial (the same in every placement row of
    # it), from the generator's, the switch's and the VNFs' own counters (hops.py).
    hops: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """One line of results.jsonl."""
        return json.dumps(asdict(self), sort_keys=True)


REQUIRED = frozenset(f.name for f in fields(Row)
                     if f.default is MISSING and f.default_factory is MISSING)


def validate(obj: dict[str, Any]) -> Row:
    """A Row from a decoded JSON object; ValueError naming the first problem found."""
    missing = sorted(REQUIRED - obj.keys())
    if missing:
        raise ValueError(f"row lacks {', '.join(missing)}")
    unknown = sorted(obj.keys() - {f.name for f in fields(Row)})
    if unknown:
        raise ValueError(f"row has unknown fields {', '.join(unknown)}")
    row = Row(**obj)
    checks = [
        (row.method in METHODS, f"method {row.method!r} not one of {METHODS}"),
        (row.placement in PLACEMENTS, f"placement {row.placement!r} not one of {PLACEMENTS}"),
        (row.direction in DIRECTIONS, f"direction {row.direction!r} not one of {DIRECTIONS}"),
        (row.latency_kind in LATENCY_KINDS,
         f"latency_kind {row.latency_kind!r} not one of {LATENCY_KINDS}"),
        ((row.method == "latency") == bool(row.latency_kind),
         "latency rows (and only they) have a latency_kind"),
        (64 <= row.size <= 9018, f"size {row.size} out of range"),
        (row.rx_pps >= 0 and row.tx_pps >= 0, "negative rate"),
        (0.0 <= row.loss <= 1.0, f"loss {row.loss} not a fraction"),
    ]
    for ok, why in checks:
        if not ok:
            raise ValueError(why)
    return row


def append_rows(path: Path, rows: list[Row]) -> None:
    """Appends ROWS to results.jsonl at PATH (written as each trial ends)."""
    with path.open("a") as f:
        for r in rows:
            f.write(r.to_json() + "\n")


def load_rows(path: Path) -> list[Row]:
    """Every row of results.jsonl at PATH, validated."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(validate(json.loads(line)))
            except (ValueError, TypeError) as e:
                raise ValueError(f"{path}:{n}: {e}") from e
    return rows
