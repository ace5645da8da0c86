"""sluicectl's receive-queue verbs: set-rebalance's settings and the tables of show-rxqs and
rebalance (docs/cores.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

YES = ("yes", "true", "on", "1")
NO = ("no", "false", "off", "0")
# set-rebalance's words and their protocol names; the value's kind
SETTINGS = {"auto": ("auto", "bool"), "interval": ("interval", "int"),
            "load-threshold": ("load_threshold", "int"),
            "improvement": ("improvement", "int"), "assign": ("assign", "str"),
            "move-gap-us": ("move_gap_us", "int")}


def rebalance_settings(params: dict[str, Any]) -> dict[str, Any]:
    """set-rebalance's KEY=VALUE words as named params; ValueError on a bad word."""
    for word in params.pop("settings", None) or []:
        key, sep, value = word.partition("=")
        key = key.replace("_", "-")
        if not sep or key not in SETTINGS:
            raise ValueError(f"{word!r}: settings are KEY=VALUE with KEY one of "
                             f"{', '.join(SETTINGS)}")
        dest, kind = SETTINGS[key]
        if kind == "bool":
            if value.lower() not in YES + NO:
                raise ValueError(f"{key}: yes or no, not {value!r}")
            params[dest] = value.lower() in YES
        elif kind == "int":
            if not value.isdigit():
                raise ValueError(f"{key}: a whole number, not {value!r}")
            params[dest] = int(value)
        else:
            params[dest] = value
    return params


def _pct(v: object) -> str:
    return f"{v:.1f}%" if isinstance(v, (int, float)) else "-"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    text = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r]
                                          for r in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in text)


def format_settings(s: Mapping[str, Any]) -> str:
    st = s.get("stats") or {}
    last = st.get("since_last_s")
    return (f"re-balance: auto {'on' if s.get('auto') else 'off'}, assign {s.get('assign')}, "
            f"interval {s.get('interval')} s, load threshold {s.get('load_threshold')}%, "
            f"improvement {s.get('improvement')}%, move gap {s.get('move_gap_us')} us; "
            f"{st.get('rebalances', 0)} re-balance(s) "
            f"moved {st.get('moves', 0)} queue(s) after {st.get('dry_runs', 0)} dry run(s)"
            + (f", the last {last:.0f} s ago" if isinstance(last, (int, float)) else ""))


def format_rxqs(r: Mapping[str, Any]) -> str:
    """show-rxqs: a row per queue, then a row per worker, then the settings."""
    rows = [[q.get("port"), q.get("queue"), q.get("worker"), "yes" if q.get("pinned") else "",
             _pct(q.get("usage")), _pct(q.get("share")),
             f"{q['cycles_per_packet']:.0f}" if q.get("cycles_per_packet") else None,
             q.get("packets")] for q in r.get("rxqs") or []]
    workers = [[w.get("id"), w.get("cpu"), w.get("queues"), _pct(w.get("usage"))]
               for w in r.get("workers") or []]
    return "\n".join([
        f"receive queues (usage over the last {r.get('window_s', 0):.1f} s):",
        _table(["port", "queue", "worker", "pinned", "usage", "share", "cycles/pkt",
                "packets"], rows), "",
        _table(["worker", "cpu", "queues", "usage"], workers), "",
        format_settings(r.get("rebalance") or {})])


def format_rebalance(r: Mapping[str, Any]) -> str:
    moves = r.get("moves") or []
    head = ("moved" if r.get("applied") else "would move") + f" {len(moves)} queue(s)"
    before = ", ".join(_pct(v) for v in r.get("load_before") or [])
    after = ", ".join(_pct(v) for v in r.get("load_after") or [])
    lines = [f"{head}; worker loads {before} -> {after}; variance "
             f"{r.get('variance_before', 0):.1f} -> {r.get('variance_after', 0):.1f} "
             f"({r.get('improvement', 0):.0f}% better)"]
    lines += [f"  {m.get('port')} queue {m.get('queue')}: worker {m.get('from')} -> "
              f"{m.get('to')}" for m in moves]
    return "\n".join(lines)
