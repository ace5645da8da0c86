"""sluicectl's flow-mode verbs: reading rule files and showing rules, groups, meters and
traces as ovs-ofctl and ovs-appctl ofproto/trace do (docs/flow.md)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO


def read_rule_file(params: dict[str, Any], stdin: TextIO | None = None) -> dict[str, Any]:
    """add-flows' and replace-flows' FILE ('-': standard input) becomes the 'flows' param,
    one rule a line; blank lines and '#' comments are sent too, so that the daemon's line
    numbers in errors are the file's."""
    path = params.pop("file")
    try:
        if path == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    params["flows"] = text.splitlines()
    return params


def format_flow(f: Mapping[str, Any]) -> str:
    """One rule as `ovs-ofctl dump-flows` prints it."""
    parts = [f"cookie={f.get('cookie')}", f"duration={float(f.get('duration', 0)):.3f}s",
             f"table={f.get('table')}", f"n_packets={f.get('packets')}",
             f"n_bytes={f.get('bytes')}"]
    if f.get("idle_timeout"):
        parts.append(f"idle_timeout={f['idle_timeout']}")
    if f.get("hard_timeout"):
        parts.append(f"hard_timeout={f['hard_timeout']}")
    if f.get("send_flow_rem"):
        parts.append("send_flow_rem")
    parts.append(f"idle_age={int(float(f.get('idle_age', 0)))}")
    match = f.get("match") or ""
    prio = f"priority={f.get('priority')}" + (f",{match}" if match else "")
    return " " + ", ".join(parts) + f", {prio} actions={f.get('actions')}"


def format_flows(r: Mapping[str, Any]) -> str:
    flows: Sequence[Mapping[str, Any]] = r.get("flows") or []
    if not flows:
        return f"switch {r.get('switch')}: no rules"
    return "\n".join(format_flow(f) for f in flows)


def format_groups(r: Mapping[str, Any]) -> str:
    groups: Sequence[Mapping[str, Any]] = r.get("groups") or []
    if not groups:
        return f"switch {r.get('switch')}: no groups"
    return "\n".join(f" {g.get('text')} (n_packets={g.get('packets')}, "
                     f"n_bytes={g.get('bytes')})" for g in groups)


def format_meters(r: Mapping[str, Any]) -> str:
    meters: Sequence[Mapping[str, Any]] = r.get("meters") or []
    if not meters:
        return f"switch {r.get('switch')}: no meters"
    return "\n".join(f" {m.get('text')} (n_packets={m.get('packets')}, "
                     f"n_bytes={m.get('bytes')}, dropped={m.get('dropped_packets')})"
                     for m in meters)


def format_trace(r: Mapping[str, Any]) -> str:
    text = str(r.get("text") or "").rstrip()
    outputs = r.get("outputs")
    if outputs is None:
        return text
    final = (f"Datapath actions: drop ({r.get('drop')})" if not outputs else
             "Datapath actions: " + ",".join(str(o) for o in outputs))
    return f"{text}\n{final}"


def format_packet_ins(r: Mapping[str, Any]) -> str:
    pins: Sequence[Mapping[str, Any]] = r.get("packet_ins") or []
    if not pins:
        return f"switch {r.get('switch')}: no packet-ins queued"
    return "\n".join(f"packet-in in_port={p.get('in_port')} reason={p.get('reason')} "
                     f"table={p.get('table')} cookie={p.get('cookie')} "
                     f"total_len={p.get('total_len')} data={p.get('data')}" for p in pins)


def format_removed(r: Mapping[str, Any]) -> str:
    removed: Sequence[Mapping[str, Any]] = r.get("removed") or []
    if not removed:
        return f"switch {r.get('switch')}: no removed rules recorded"
    return "\n".join(f"removed ({f.get('reason')}) {f.get('flow')}: n_packets={f.get('packets')}, "
                     f"n_bytes={f.get('bytes')}, duration={float(f.get('duration', 0)):.3f}s"
                     for f in removed)
