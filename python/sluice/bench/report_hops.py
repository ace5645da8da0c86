"""The per-hop part of the report: for each loopback chain (switch, N, size, direction), the
frames each hop was given and passed on, summed over the chain's throughput trials, and the
hop where most were lost (hops.py builds the hops; docs/bench.md explains them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.bench.report_latency import Section, switch_key
from sluice.bench.schema import Row

THROUGHPUT = ("alternating", "interleaved")

HOPS_TEXT = (
    "Per hop of each loopback chain, the frames the hop was given ('sent', counted by the "
    "party before it) and passed on ('received', counted by the party after it), from each "
    "party's own counters: sluice-gen's ports (ethdev counters), the switch's ports (its own "
    "statistics: sluiced's stats, DPDK telemetry for testpmd and basicfwd, ovs-ofctl "
    "dump-ports, the kernel's for a Linux bridge) and the inline VNFs. Every counter covers "
    "the whole generator run (warm-up, cool-down and drain included), summed over the "
    "throughput trials; frames still in flight when the generator stopped count as lost at "
    "the hop that held them. 'switch p0 rx -> switch v1a tx' is loss inside the switch (with "
    "its drop reasons where it gives them; a port's rx_missed or rx_dropped shows on the hop "
    "into it), 'switch v1a tx -> VNF1 rx' loss on the link, "
    "'VNF1 rx -> VNF1 tx' the VNF's drops. Where a switch has no counters its hops are "
    "merged into one.")


def _trial_id(r: Row) -> tuple[Any, ...]:
    """Rows of one trial of one switch carry the same hops (one per placement label)."""
    return (switch_key(r), r.scenario, r.phy, r.vnf, r.size, r.direction, r.trial, r.method,
            r.sweep_param, r.sweep_value, r.pairs)


def chains(rows: Sequence[Row]) -> dict[tuple[str, str, int, str, str, str], list[
        Mapping[str, Any]]]:
    """Per (scenario, switch, size, direction, vnf, flags): the hops of each trial once."""
    seen: set[tuple[Any, ...]] = set()
    out: dict[tuple[str, str, int, str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if not r.hops or r.method not in THROUGHPUT or _trial_id(r) in seen:
            continue
        seen.add(_trial_id(r))
        scn = f"{r.scenario}{'/' + r.phy if r.phy else ''}"
        if r.sweep_param and r.sweep_param != "chain":
            scn += f" ({r.sweep_param} {r.sweep_value})"     # sweep points stay apart
        flags = "oversubscribed" if r.oversubscribed else ""
        out[(scn, switch_key(r), r.size, r.direction, r.vnf, flags)].append(r.hops)
    return out


def summed(trials: Sequence[Mapping[str, Any]], direction: str) -> list[dict[str, Any]] | None:
    """The hops of DIRECTION summed over TRIALS; None when the trials' hop lists differ
    (a switch whose counters answered in one trial and not in another)."""
    lists = [t[direction]["hops"] for t in trials if direction in t]
    if not lists or any([(h["from"], h["to"]) for h in hs] !=
                        [(h["from"], h["to"]) for h in lists[0]] for hs in lists):
        return None
    out = []
    for i, h in enumerate(lists[0]):
        drops: dict[str, int] = defaultdict(int)
        for hs in lists:
            for reason, n in [*(hs[i].get("switch_drops") or {}).items(),
                              *(hs[i].get("switch_missed") or {}).items()]:
                drops[reason] += int(n)
        out.append({"from": h["from"], "to": h["to"],
                    "sent": sum(int(hs[i]["sent"]) for hs in lists),
                    "received": sum(int(hs[i]["received"]) for hs in lists),
                    "lost": sum(int(hs[i]["lost"]) for hs in lists), "drops": dict(drops)})
    return out


def _pct(n: int, of: int) -> str:
    return f"{100 * n / of:.3f} %" if of else "-"


def hop_table(hops: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table lines: hop, sent, received, lost, lost as a share of the generator's sent,
    the switch's drop reasons."""
    first = int(hops[0]["sent"]) if hops else 0
    return [[f"{h['from']} -> {h['to']}", str(h["sent"]), str(h["received"]), str(h["lost"]),
             _pct(int(h["lost"]), first),
             ", ".join(f"{k} {v}" for k, v in sorted(h["drops"].items()))]
            for h in hops]


def worst_text(hops: Sequence[Mapping[str, Any]]) -> str:
    """Where most frames were lost, and what share of all the chain lost that is."""
    total = int(hops[0]["sent"]) - int(hops[-1]["received"]) if hops else 0
    lossy = [h for h in hops if int(h["lost"]) > 0]
    if not lossy:
        return "No hop lost a frame."
    w = max(lossy, key=lambda h: int(h["lost"]))
    return (f"Most loss at {w['from']} -> {w['to']}: {w['lost']} frames, "
            f"{_pct(int(w['lost']), total)} of the {total} the chain lost "
            f"({_pct(total, int(hops[0]['sent']))} of those sent).")


def sections(rows: Sequence[Row]) -> list[Section]:
    """A heading and table per chain and direction, after one section explaining them."""
    found = chains(rows)
    if not found:
        return []
    out: list[Section] = [("Per-hop counts of the chains", HOPS_TEXT, [], None)]
    for (scn, key, size, direction, vnf, flags), trials in sorted(found.items()):
        for way in ("forward", "reverse"):
            hops = summed(trials, way)
            if hops is None:
                continue
            what = f"{scn} {direction}, {key}, {size} B, VNFs {vnf}"
            if direction == "bidir":
                what += f", {way}"
            note = f" ({flags}: the scheduler's loss, not the switch's)" if flags else ""
            counters = "" if all(t.get("switch_counters") for t in trials) else (
                " The switch's counters could not be read: its hops are merged.")
            out.append((f"Hops: {what}",
                        f"{len(trials)} trial(s){note}. {worst_text(hops)}{counters}",
                        ["hop", "sent", "received", "lost", "of sent", "switch's own count"],
                        hop_table(hops)))
    return out
