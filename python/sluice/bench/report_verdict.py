"""The verdict that opens the report: per scenario and size, who won and by how much.

One screen a person reads in a minute (issue 17, section 6): per scenario and frame size,
each line in one placement (near first: the best label both of its switches ran in), that
placement's winner, and sluice's ratio to each peer (its mode that does the peer's job:
patch against testpmd io, flow against OVS's flows, ...) with its quartiles and the number
of windows the ratio rests on, and its cost ratio (CPU per frame from /proc, the same
measure for every switch). A ratio comes from alternating windows: directly where the two
switches alternated, else through a switch both alternated with (the baseline), else,
weakest, from the R+ of separate trials. Cells resting on fewer than WEAK_BELOW windows are
marked weak. A figure draws the ratios: a dot each, a bar from q1 to q3, a line at 1.0.
Without sluice in a cell (`compare testpmd testpmd`), each switch is set against the
baseline instead.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sluice.bench.report_latency import scenario_of, switch_key
from sluice.bench.schema import Row, best_label
from sluice.bench.stats import Spread, spread

WEAK_BELOW = 5
Section = tuple[str, str, list[str], list[list[str]] | None]
# Which sluice modes do a peer's mode's job, best first (sluice's own modes otherwise).
COUNTERPARTS = {"io": ("patch",), "fwd": ("patch",), "xconnect": ("patch",),
                "normal": ("flow-normal", "learn"), "normal-system": ("flow-normal", "learn"),
                "flows": ("flow", "patch"), "flows-system": ("flow", "patch"),
                "acl": ("flow",), "learn": ("learn", "flow-normal")}
SLUICE_ORDER = ("patch", "learn", "flow", "flow-normal")


def _mode(key: str) -> str:
    return key.split(":", 1)[1].split("#")[0] if ":" in key else ""


def _is_sluice(key: str) -> bool:
    return key.split(":")[0] == "sluice"


@dataclass(frozen=True)
class Ratio:
    """SUBJECT over PEER: median, quartiles, the windows it rests on, how it was found."""

    median: float
    q1: float
    q3: float
    windows: int
    how: str              # "windows", "via KEY" or "R+ of separate trials"

    @property
    def weak(self) -> bool:
        """Rests on fewer than WEAK_BELOW windows."""
        return self.windows < WEAK_BELOW


@dataclass(frozen=True)
class Line:
    """One line of the verdict: SUBJECT against PEER in one scenario, size, placement."""

    scenario: str
    size: int
    placement: str
    winner: str
    subject: str
    peer: str
    rate: Ratio | None
    cost: Spread | None        # /proc CPU per frame, subject over peer
    cost_how: str
    flags: str


def _window_ratio(rs: Sequence[Row], vs: str) -> Ratio | None:
    """The ratio of rows RS (one switch) to VS, pooled as the ratio table pools it: the
    median over trials of their medians and quartiles, and the window ratios summed."""
    mine = [r for r in rs if r.ratio_vs == vs and r.ratio_median is not None]
    if not mine:
        return None
    return Ratio(statistics.median(r.ratio_median for r in mine if r.ratio_median is not None),
                 statistics.median(r.ratio_q1 for r in mine if r.ratio_q1 is not None),
                 statistics.median(r.ratio_q3 for r in mine if r.ratio_q3 is not None),
                 sum(r.ratio_n for r in mine), "windows")


def rate_ratio(by_key: dict[str, list[Row]], subject: str, peer: str,
               baseline: str | None) -> Ratio | None:
    """SUBJECT over PEER from one placement's rows."""
    direct = _window_ratio(by_key[subject], peer)
    if direct:
        return direct
    back = _window_ratio(by_key[peer], subject)
    if back:
        return Ratio(1 / back.median, 1 / back.q3, 1 / back.q1, back.windows, "windows")
    bases = [b for b in ([baseline] if baseline else []) + sorted(by_key)
             if b and b in by_key and b not in (subject, peer)]
    for b in bases:
        s, p = _window_ratio(by_key[subject], b), _window_ratio(by_key[peer], b)
        if s and p:
            return Ratio(s.median / p.median, s.q1 / p.q3, s.q3 / p.q1,
                         min(s.windows, p.windows), f"via {b}")
    rs, rp = (statistics.fmean(r.rx_pps for r in by_key[k]) for k in (subject, peer))
    return Ratio(rs / rp, rs / rp, rs / rp, 0, "R+ of separate trials") if rp > 0 else None


def _cost_vs(rs: Sequence[Row], vs: str) -> Spread | None:
    vals = [v for r in rs if r.ratio_vs == vs for v in r.cost.get("proc_ratio", [])]
    return spread(vals) if vals else None


def cost_ratio(by_key: dict[str, list[Row]], subject: str, peer: str,
               baseline: str | None = None) -> tuple[Spread | None, str]:
    """SUBJECT's /proc CPU per frame over PEER's: window by window where they alternated,
    else through a switch both alternated with (the baseline first), else the quotient of
    the medians."""
    direct = _cost_vs(by_key[subject], peer)
    if direct:
        return direct, "windows"
    back = _cost_vs(by_key[peer], subject)
    if back:
        return Spread(1 / back.median, 1 / back.q3, 1 / back.q1, back.n), "windows"
    for b in [x for x in ([baseline] if baseline else []) + sorted(by_key)
              if x and x in by_key and x not in (subject, peer)]:
        s, p = _cost_vs(by_key[subject], b), _cost_vs(by_key[peer], b)
        if s and p:
            return Spread(s.median / p.median, s.q1 / p.q3, s.q3 / p.q1,
                          min(s.n, p.n)), f"via {b}"
    a = [v for r in by_key[subject] for v in r.cost.get("proc_nspp", [])]
    b_ = [v for r in by_key[peer] for v in r.cost.get("proc_nspp", [])]
    if a and b_:
        sa, sb = spread(a), spread(b_)
        return Spread(sa.median / sb.median, sa.q1 / sb.q3, sa.q3 / sb.q1,
                      min(sa.n, sb.n)), "quotient"
    return None, ""


def winner(by_key: dict[str, list[Row]], baseline: str | None) -> str:
    """The fastest switch of one placement's rows: by the median ratio to a switch every
    other alternated with (that switch 1.0), else by mean R+."""
    for b in ([baseline] if baseline in by_key else []) + sorted(by_key):
        ratios = {k: _window_ratio(rs, b) for k, rs in by_key.items() if k != b}
        if ratios and all(ratios.values()):
            score = {k: r.median for k, r in ratios.items() if r} | {b: 1.0}
            return max(sorted(score), key=lambda k: score[k])
    score = {k: statistics.fmean(r.rx_pps for r in rs) for k, rs in by_key.items()}
    return max(sorted(score), key=lambda k: score[k])


def pairs(keys: Sequence[str], baseline: str | None) -> list[tuple[str, str]]:
    """(subject, peer) to show: each peer with the sluice mode that does its job, or, in a
    cell without sluice, every switch with the baseline."""
    mine = [k for k in keys if _is_sluice(k)]
    peers = [k for k in keys if not _is_sluice(k)]
    if mine and peers:
        out = []
        for p in peers:
            want = COUNTERPARTS.get(_mode(p), ()) + SLUICE_ORDER
            pick = sorted(mine, key=lambda k: (want.index(_mode(k)) if _mode(k) in want
                                               else len(want), k))
            out.append((pick[0], p))
        return out
    base = baseline if baseline in keys else (sorted(keys)[-1] if keys else None)
    return [(k, base) for k in sorted(keys) if base and k != base]


def placement_of(rs: Sequence[Row]) -> str:
    """The placement of a cell's lines whose two switches never ran in one placement
    (pair_placement): the best label with window ratios, else the one most of its switches
    ran in (the best label among equals)."""
    with_ratios = [r.placement for r in rs if r.ratio_median is not None]
    if with_ratios:
        return best_label(with_ratios)
    keys: dict[str, set[str]] = defaultdict(set)
    for r in rs:
        keys[r.placement].add(switch_key(r))
    most = max(len(k) for k in keys.values())
    return best_label(p for p, k in keys.items() if len(k) == most)


def pair_placement(rs: Sequence[Row], subject: str, peer: str) -> str:
    """The placement a pair is read in: the best label in which both SUBJECT and PEER ran
    (in which each has window ratios, if any such label exists), else the cell's
    (placement_of). A sweep point where sluice ran only far is then read far, not near
    against nothing."""
    both: dict[str, bool] = {}
    for place in {r.placement for r in rs}:
        ran = {k: [r for r in rs if r.placement == place and switch_key(r) == k]
               for k in (subject, peer)}
        if all(ran.values()):
            both[place] = all(any(r.ratio_median is not None for r in got)
                              for got in ran.values())
    if not both:
        return placement_of(rs)
    return best_label(p for p, ratios in both.items() if ratios or not any(both.values()))


def lines(rows: Sequence[Row], baseline: str | None = None) -> list[Line]:
    """The verdict's lines: per scenario and size, every (subject, peer) pair of the cell,
    each in the best placement both ran in (pair_placement) with that placement's winner; a
    pair never measured in one placement has no ratio."""
    cells: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for r in rows:
        if not r.oversubscribed and r.method in ("alternating", "interleaved"):
            cells[(scenario_of(r), r.size)].append(r)
    out = []
    for (scn, size), rs in sorted(cells.items()):
        every = sorted({switch_key(r) for r in rs})
        base = next((k for k in every if baseline and (k == baseline or
                                                       k.split(":")[0] == baseline)), None)
        for subject, peer in pairs(every, base):
            place = pair_placement(rs, subject, peer)
            by_key: dict[str, list[Row]] = defaultdict(list)
            for r in rs:
                if r.placement == place:
                    by_key[switch_key(r)].append(r)
            top = winner(by_key, base) if len(by_key) > 1 else next(iter(by_key))
            if subject not in by_key or peer not in by_key:
                out.append(Line(scn, size, place, top, subject, peer, None, None, "",
                                f"not both measured {place}"))
                continue
            c, how = cost_ratio(by_key, subject, peer, base)
            flags = [f for f, on in (
                ("generator-bound", any(r.generator_bound for k in (subject, peer)
                                       for r in by_key[k])),
                ("kernel path", any(r.kernel_path for r in by_key[subject]))) if on]
            out.append(Line(scn, size, place, top, subject, peer,
                            rate_ratio(by_key, subject, peer, base), c, how, ", ".join(flags)))
    return out


def ratio_text(r: Ratio | None) -> str:
    """'1.023 [0.981-1.054]', with the way it was found when not direct."""
    if r is None:
        return ""
    how = "" if r.how == "windows" else f" ({r.how})"
    if r.q1 == r.q3 == r.median:
        return f"{r.median:.3f}{how}"
    return f"{r.median:.3f} [{r.q1:.3f}-{r.q3:.3f}]{how}"


def cost_text(c: Spread | None, how: str) -> str:
    """A cost ratio with its quartiles ('' when none)."""
    if c is None:
        return ""
    return (f"{c.median:.3f} [{c.q1:.3f}-{c.q3:.3f}] ({c.n})"
            + ("" if how == "windows" else f" ({how})"))


TEXT = (
    "Per scenario and frame size, each line in one vCPU placement (near when both of its "
    "switches ran near): the fastest switch there, and sluice's ratio to each peer (sluice's "
    "mode doing the peer's job), the median over trials of alternating-window ratios with "
    "their quartiles, and how many windows it rests on (ratios found through a third switch "
    "or from separate trials say so). Above 1: sluice forwards more. 'cost' is sluice's CPU "
    "per frame over the peer's (/proc, the same measure for both; below 1: sluice spends "
    "less), which compares switches where the generator sets the rate. Cells on fewer than "
    "5 windows are weak. The long tables follow.")


def section(ls: Sequence[Line], figure: str | None) -> list[Section]:
    """The verdict table, then its figure."""
    head = ["scenario", "size", "placement", "winner", "switch", "peer", "ratio [q1-q3]",
            "windows", "cost [q1-q3] (n)", "note"]
    body = [[ln.scenario, f"{ln.size} B", ln.placement, ln.winner, ln.subject, ln.peer,
             ratio_text(ln.rate), str(ln.rate.windows) if ln.rate else "",
             cost_text(ln.cost, ln.cost_how),
             ", ".join(x for x in ("WEAK" if ln.rate is None or ln.rate.weak else "",
                                   ln.flags) if x)]
            for ln in ls]
    out: list[Section] = [("Verdict", TEXT, head, body)]
    if figure:
        out.append(("Verdict: the ratios", f"![verdict](figures/{figure}.png)", [], None))
    return out


def figure(ls: Sequence[Line], dest: Path) -> str | None:
    """The ratios of LS, one line each: a dot at the median, a bar from q1 to q3, hollow
    and grey where weak, a line at 1.0. Writes DEST/verdict.png and .svg; None without
    ratios."""
    shown = [ln for ln in ls if ln.rate is not None]
    if not shown:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.32 * len(shown)))
    for y, ln in enumerate(reversed(shown)):
        r = ln.rate
        assert r is not None
        colour = "#999999" if r.weak else "#1f4e9c"
        ax.plot([r.q1, r.q3], [y, y], color=colour, linewidth=3, solid_capstyle="butt")
        ax.plot([r.median], [y], "o", color=colour,
                markerfacecolor="white" if r.weak else colour, markersize=7)
    ax.axvline(1.0, color="#c0392b", linewidth=1)
    ax.set_yticks(range(len(shown)),
                  [f"{ln.scenario} {ln.size} B: {ln.subject} / {ln.peer}"
                   + (" (weak)" if ln.rate and ln.rate.weak else "") for ln in reversed(shown)],
                  fontsize=8)
    ax.set_xlabel("rate ratio (above 1: the first switch forwards more); dot: median, "
                  "bar: q1-q3", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Verdict: ratios from alternating windows, one placement per cell", fontsize=9)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(dest / f"verdict.{ext}", dpi=100)
    plt.close(fig)
    return "verdict"
