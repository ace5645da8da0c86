"""report DIR: report.md and report.html (with matplotlib figures) from results.jsonl.

The report opens with the verdict (report_verdict: who won each scenario and size, sluice's
ratio to each peer, a figure of those ratios), then the long tables: R+, ratios, cost per
packet (report_cost), latency, sweeps, per-hop counts, published figures.
Figures compare switches only within one placement label and one method; rows marked
`oversubscribed` are listed but kept out of every comparison, and `kernel_path` rows (p2p
over veth) are shown apart, since the kernel's veth path bounds every switch on them.
"""

from __future__ import annotations

import html
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sluice.bench import (
    published,
    report_cost,
    report_hops,
    report_idle,
    report_latency,
    report_sweep,
    report_verdict,
)
from sluice.bench.report_latency import scenario_of
from sluice.bench.report_latency import switch_key as key_of
from sluice.bench.schema import Row, best_label, load_rows
from sluice.bench.stats import gbps, spread


def comparable(rows: Iterable[Row]) -> list[Row]:
    """The throughput rows that may be compared: not oversubscribed, not latency trials
    (those ran below saturation)."""
    return [r for r in rows if not r.oversubscribed and r.method != "latency"]


def best_placement(rows: Sequence[Row]) -> str:
    """The placement label to compare by: near first, then unlabelled, mixed, far."""
    return best_label(r.placement for r in rows)


def throughput_table(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per scenario, size and switch: R+ (mean over trials' rows), its spread, samples."""
    groups: dict[tuple[str, int, str, str], list[Row]] = defaultdict(list)
    for r in comparable(rows):
        groups[(scenario_of(r), r.size, key_of(r), r.placement)].append(r)
    out = []
    for (scn, size, key, place), rs in sorted(groups.items()):
        rates = [r.rx_pps for r in rs]
        sp = spread(rates)
        out.append({"scenario": scn, "size": size, "switch": key, "placement": place,
                    "method": rs[0].method, "rx_mpps": statistics.fmean(rates) / 1e6,
                    "size_label": rs[0].size_label,
                    "q1_mpps": sp.q1 / 1e6, "q3_mpps": sp.q3 / 1e6, "trials": len(rs),
                    "samples": sum(r.samples for r in rs),
                    "loss": statistics.fmean(r.loss for r in rs),
                    "gbps_l1": gbps(statistics.fmean(rates), size, "l1"),
                    "gbps_l2": gbps(statistics.fmean(rates), size, "l2"),
                    "generator_bound": any(r.generator_bound for r in rs),
                    "kernel_path": rs[0].kernel_path,
                    "cpu_s_per_mpps": _cpu_per_mpps(rs),
                    "cycles_pp": _mean_or_none([r.switch_cycles_per_packet for r in rs])})
    return out


def _mean_or_none(vals: Sequence[float | None]) -> float | None:
    got = [v for v in vals if v is not None]
    return statistics.fmean(got) if got else None


def _cpu_per_mpps(rs: Sequence[Row]) -> float | None:
    """The switch's CPU seconds per second it ran, per Mpps forwarded. In an alternating
    trial each switch runs in every other window, so for half of the trial's wall time."""
    vals = [r.switch_cpu_s / (r.wall_s * (0.5 if r.method == "alternating" else 1.0))
            / (r.rx_pps / 1e6) for r in rs if r.switch_cpu_s and r.wall_s and r.rx_pps]
    return statistics.fmean(vals) if vals else None


def ratio_table(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per scenario, size and pair: the median of all neighbour-ratio medians, pooled over
    trials (both generator orders), with the quartiles of the trial medians and counts."""
    groups: dict[tuple[str, int, str, str, str], list[Row]] = defaultdict(list)
    for r in comparable(rows):
        if r.method == "alternating" and r.ratio_median is not None and r.gen_order:
            groups[(scenario_of(r), r.size, key_of(r), r.ratio_vs, r.placement)].append(r)
    out = []
    for (scn, size, key, vs, place), rs in sorted(groups.items()):
        meds = [r.ratio_median for r in rs if r.ratio_median is not None]
        q1s = [r.ratio_q1 for r in rs if r.ratio_q1 is not None]
        q3s = [r.ratio_q3 for r in rs if r.ratio_q3 is not None]
        out.append({"scenario": scn, "size": size, "switch": key, "vs": vs, "placement": place,
                    "ratio": statistics.median(meds), "q1": statistics.median(q1s),
                    "q3": statistics.median(q3s), "ratios": sum(r.ratio_n for r in rs),
                    "windows": sum(r.samples for r in rs), "trials": len(rs)})
    return out


def size_text(size: int, label: str = "") -> str:
    """'64 B', or 'IMIX (354 B mean)'."""
    return f"IMIX ({size} B mean)" if label == "imix" else f"{size} B"


def md_table(headers: Sequence[str], lines: Iterable[Sequence[Any]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def _fmt(v: float | None, digits: int = 3) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def bar_figure(table: Sequence[dict[str, Any]], scenario: str, dest: Path) -> str:
    """Grouped bars of R+ by frame size and switch for SCENARIO: Mpps and Gbit/s (L1).

    Writes DEST/<name>.png and .svg; returns the base name."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [t for t in table if t["scenario"] == scenario]
    place = best_placement_t(rows)
    rows = [t for t in rows if t["placement"] == place]
    sizes = sorted({t["size"] for t in rows})
    switches = sorted({t["switch"] for t in rows})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / max(1, len(switches))
    for i, sw in enumerate(switches):
        by = {t["size"]: t for t in rows if t["switch"] == sw}
        xs = [j + i * width for j in range(len(sizes))]
        axes[0].bar(xs, [by[z]["rx_mpps"] if z in by else 0 for z in sizes], width, label=sw)
        axes[1].bar(xs, [by[z]["gbps_l1"] if z in by else 0 for z in sizes], width, label=sw)
    for ax, unit in zip(axes, ("R+ Mpps (all directions)", "Gbit/s, L1 (frame + 20 B)"),
                        strict=True):
        ax.set_xticks([j + width * (len(switches) - 1) / 2 for j in range(len(sizes))],
                      [f"{z} B" for z in sizes])
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=8)
    fig.suptitle(f"{scenario}: R+ by frame size (placement: {place})")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    name = "tput-" + scenario.replace("/", "-").replace(" ", "-")
    for ext in ("png", "svg"):
        fig.savefig(dest / f"{name}.{ext}", dpi=100)
    plt.close(fig)
    return name


def is_baseline(key: str, baseline: str) -> bool:
    """Whether KEY (name:mode) is the run's BASELINE (a key or an adapter name)."""
    return key == baseline or key.split(":")[0] == baseline


def best_placement_t(rows: Sequence[dict[str, Any]]) -> str:
    """best_placement for table lines."""
    return best_label(t["placement"] for t in rows)


def chain_figure(table: Sequence[dict[str, Any]], dest: Path) -> str | None:
    """R+ against the loopback chain length, a line per switch and size; None without
    loopback rows."""
    rows = [t for t in table if t["scenario"].startswith("loopback")]
    if not rows:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8))
    lines: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for t in rows:
        n = int(t["scenario"].split("/")[0].split("-")[1])
        lines[(t["switch"], t["size"])][n] = t["rx_mpps"]
    for (sw, size), pts in sorted(lines.items()):
        ns = sorted(pts)
        ax.plot(ns, [pts[n] for n in ns], marker="o", label=f"{sw} {size} B")
    ax.set_xlabel("VNFs in the chain (inline in sluice-gen's loop)")
    ax.set_ylabel("R+ Mpps")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("loopback: throughput vs chain length")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(dest / f"chain.{ext}", dpi=100)
    plt.close(fig)
    return "chain"


def sections(rows: Sequence[Row], manifest: dict[str, Any], figs: dict[str, str],
             idle: Sequence[tuple[str, str, list[str], list[list[str]] | None]] = ()
             ) -> list[tuple[str, str, list[str], list[list[str]] | None]]:
    """The report as (heading, paragraph, table headers, table lines or None) sections,
    rendered to Markdown and HTML alike; IDLE: the idle sections (report_idle), after the
    latency ones."""
    tput = throughput_table(rows)
    ratios = ratio_table(rows)
    baseline = str((manifest.get("settings") or {}).get("baseline", "testpmd"))
    over = [r for r in rows if r.oversubscribed]
    out: list[tuple[str, str, list[str], list[list[str]] | None]] = []
    out.append(("Method", METHOD_TEXT, [], None))
    out.append(("Summary: R+ per scenario, size and switch",
                "R+ is the mean received frame rate (sum of all directions) over the counted "
                "time; Mpps and Gbit/s at L1 (frame + 20 B preamble and gap) and L2 (frame "
                "incl. FCS). 'samples' counts the windows (alternating) or one-second samples "
                "(interleaved) the figure rests on. Absolute rates move 1.4-2.6x with the vCPU "
                "placement here; compare within one placement label, and prefer the ratios.",
                ["scenario", "size", "switch", "placement", "method", "R+ Mpps", "q1-q3 Mpps",
                 "Gbit/s L1", "Gbit/s L2", "loss", "trials", "samples",
                 "switch CPU s/s per Mpps", "cycles/pkt",
                 "flags"],
                [[t["scenario"], size_text(t["size"], t["size_label"]), t["switch"],
                  t["placement"], t["method"],
                  f"{t['rx_mpps']:.2f}", f"{t['q1_mpps']:.2f}-{t['q3_mpps']:.2f}",
                  f"{t['gbps_l1']:.2f}", f"{t['gbps_l2']:.2f}", f"{100 * t['loss']:.3f} %",
                  str(t["trials"]), str(t["samples"]), _fmt(t["cpu_s_per_mpps"], 2),
                  _fmt(t["cycles_pp"], 0),
                  ",".join(f for f in ("generator_bound", "kernel_path") if t[f])]
                 for t in tput]))
    out.append(("Ratios from alternating windows",
                "Each window of one switch is divided by the mean of its two neighbours of the "
                "other; a trial's figure is the median of those ratios with its quartiles. "
                "Trials alternate which switch is the generator's first pair; the table shows "
                "the median over trials of the medians and quartiles, and how many window "
                "ratios and windows they rest on.",
                ["scenario", "size", "switch", "vs", "placement", "ratio (median)", "q1", "q3",
                 "IQR", "ratios", "windows", "trials"],
                [[t["scenario"], f"{t['size']} B", t["switch"], t["vs"], t["placement"],
                  f"{t['ratio']:.3f}", f"{t['q1']:.3f}", f"{t['q3']:.3f}",
                  f"{t['q3'] - t['q1']:.3f}", str(t["ratios"]), str(t["windows"]),
                  str(t["trials"])] for t in ratios if is_baseline(t["vs"], baseline)]))
    out += report_cost.sections(rows, baseline)
    near = manifest.get("near_trials") or []
    if near:
        out.append(("Trials with near placement",
                    "With --min-near the harness adds throughput trials until each switch "
                    "and size has that many trials with near-placement figures, or its time "
                    "budget runs out; this says which.",
                    ["scenario", "switch", "size", "near trials", "wanted", "trials",
                     "outcome"],
                    [[n["scenario"], n["switch"], f"{n['size']} B", str(n["near_trials"]),
                      str(n["wanted"]), str(n["trials"]), n["outcome"]] for n in near]))
    out += report_latency.sections(rows)
    out += report_latency.search_sections(rows)
    out += report_latency.echo_sections(rows)
    out += idle
    out += report_sweep.sections(rows)
    out += report_hops.sections(rows)
    out += published.sections(rows, baseline)
    for scn, name in figs.items():
        out.append((f"Figure: {scn}", f"![{scn}](figures/{name}.png)", [], None))
    steer = sorted({(key_of(r), r.steering) for r in rows if r.steering})
    out.append(("How each switch steers the frames", "", ["switch", "steering"],
                [[k, s] for k, s in steer]))
    if over:
        out.append(("Oversubscribed rows (not compared)",
                    f"{len(over)} rows ran with two busy pollers on one CPU "
                    "(--allow-shared-cpu); they measure the scheduler.", [], None))
    out.append(("Skipped", "Switches or scenarios that did not run, and why.",
                ["switch", "scenario", "reason"],
                [[s["switch"], s["scenario"], s["reason"]] for s in manifest.get("skipped", [])]))
    if manifest.get("restarts"):
        out.append(("Restarted switches",
                    "Switches whose process ended between trials and were started again "
                    "before their next one, or ended after their last trial in a scenario "
                    "(not restarted). DPDK 22.11's memif server can fault when the "
                    "generator disconnects at the end of a trial (a forwarding thread reads "
                    "a ring the interrupt thread has just unmapped); sluiced guards against "
                    "it, testpmd does not. The trial before the exit had completed.",
                    ["switch", "scenario", "before trial", "how it ended", "log"],
                    [[r["switch"], r["scenario"], restart_trial(r), r["how"], r["log"]]
                     for r in manifest["restarts"]]))
    out.append(("Environment", "", ["item", "value"], env_lines(manifest)))
    out.append(("Not measured by this harness yet", MISSING_TEXT, [], None))
    return out


def restart_trial(r: dict[str, Any]) -> str:
    """The 'before trial' cell of a restart record (None: after the scenario's last)."""
    t = r.get("before_trial")
    return "none (after the last; not restarted)" if t is None else str(t)


def gen_vhost_driver(m: dict[str, Any]) -> str:
    """Which driver sluice-gen's ends of vhost-user links had (bench.md, --gen-driver)."""
    options = (m.get("settings") or {}).get("switch_options") or {}
    raw = options.get("gen_vhost") == "virtio-raw"
    return ("virtio-raw (sluice-gen's own, for the ports it sends and receives on)" if raw
            else "virtio-user (DPDK's)")


def env_lines(m: dict[str, Any]) -> list[list[str]]:
    """The manifest's environment as table lines."""
    git = m.get("git") or {}
    lines = [["CPU", f"{m.get('cpu_model')} ({m.get('cpus')} CPUs)"],
             ["kernel", str(m.get("kernel"))], ["DPDK (pkg-config)", str(m.get("dpdk"))],
             ["governor", json.dumps(m.get("governor"))],
             ["hugepages", json.dumps(m.get("hugepages"))],
             ["pinning", json.dumps(m.get("pinning"))],
             ["git", f"{git.get('commit')}{' (dirty tree)' if git.get('dirty') else ''}"],
             ["placement monitor", str((m.get("settings") or {}).get("placement_monitor"))],
             ["generator's vhost-user driver", gen_vhost_driver(m)]]
    lines += [[f"version: {k}", v] for k, v in sorted((m.get("versions") or {}).items())]
    return lines


METHOD_TEXT = (
    "One sluice-gen process on the generator CPU is the generator, the sink and every inline "
    "VNF, in one poll loop; each switch's forwarding thread runs alone on the switch CPU, its "
    "control threads sleep on the generator CPU. Userspace switches are compared in "
    "alternating windows (sluice-gen --alternate): both switches run at once, the one not "
    "being measured is SIGSTOPped, each window's first part is not counted. Kernel switches "
    "(and every switch on the veth stand-in, rows marked kernel_path) run in interleaved "
    "trials in round-robin order with warm-up and cool-down seconds left out. Every figure "
    "carries the vCPU-placement label of its samples (near/far/mixed from bin/sluice-placement; "
    "unlabelled when the monitor is not installed). Rows whose generator loop was never idle "
    "are generator_bound: the generator, not the switch, set the rate.")

MISSING_TEXT = (
    "Process VNFs as measurements (--vnf l2fwd/l3fwd/testpmd-mac are functional checks on "
    "2 CPUs, their rows oversubscribed); the ovs-netdev (afxdp) peer; "
    "IMIX in the default matrix. The latency_ns of throughput rows is sluice-gen's at "
    "saturation, which measures queueing; the latency tables come from trials at set rates.")


def render_md(secs: Sequence[tuple[str, str, list[str], list[list[str]] | None]],
              title: str) -> str:
    """The sections as Markdown."""
    out = [f"# {title}", ""]
    for head, para, headers, lines in secs:
        out += [f"## {head}", ""]
        if para:
            out += [para, ""]
        if lines is not None:
            out += [md_table(headers, lines) if lines else "(none)", ""]
    return "\n".join(out)


def anchor(head: str) -> str:
    """The id of a section's heading: its words in lower case, joined by dashes."""
    return re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-")


def render_html(secs: Sequence[tuple[str, str, list[str], list[list[str]] | None]],
                title: str, inline: dict[str, str] | None = None) -> str:
    """The sections as one HTML page (figures as SVG files beside it; those named in
    INLINE, src -> SVG text, are drawn into the page itself)."""
    e = html.escape
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
           "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
           "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #bbb;"
           "padding:3px 6px}th{background:#eee}img,svg{max-width:100%;height:auto}"
           "</style></head><body>",
           f"<h1>{e(title)}</h1>"]
    for head, para, headers, lines in secs:
        out.append(f"<h2 id='{anchor(head)}'>{e(head)}</h2>")
        if para.startswith("!["):
            src = para[para.index("(") + 1:-1].replace(".png", ".svg")
            svg = (inline or {}).get(src)
            if svg is not None:
                out.append(f"<figure id='{anchor(head)}-figure'>{svg}</figure>")
            else:
                out.append(f"<p><img src='{e(src)}' alt='{e(head)}'></p>")
        elif para:
            out.append(f"<p>{e(para)}</p>")
        if lines is not None:
            if not lines:
                out.append("<p>(none)</p>")
                continue
            out.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in line) + "</tr>"
                    for line in lines]
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def write(d: Path) -> Path:
    """Writes D/report.md, D/report.html and D/figures/; returns the Markdown path."""
    rows = load_rows(d / "results.jsonl") if (d / "results.jsonl").exists() else []
    m_path = d / "manifest.json"
    manifest = json.loads(m_path.read_text()) if m_path.exists() else {}
    figdir = d / "figures"
    figdir.mkdir(exist_ok=True)
    tput = throughput_table(rows)
    figs = {scn: bar_figure(tput, scn, figdir)
            for scn in sorted({t["scenario"] for t in tput if not
                               t["scenario"].startswith("loopback")})}
    chain = chain_figure(tput, figdir)
    if chain:
        figs["loopback chain length"] = chain
    sweep = report_sweep.figure(rows, figdir)
    if sweep:
        figs["sweep"] = sweep
    lat = report_latency.cdf_figure(rows, d, figdir)
    if lat:
        figs["latency CDF"] = lat
    title = f"sluice-bench report: {d.name}"
    idle = report_idle.sections(d)
    inline: dict[str, str] = {}
    if idle and not rows:
        # `sluice-bench idle` alone: its sections and the environment of its manifest.
        secs = [*idle, ("Environment", "", ["item", "value"],
                        env_lines(manifest or report_idle.manifest(d)))]
    else:
        baseline = str((manifest.get("settings") or {}).get("baseline", "testpmd"))
        verdict = report_verdict.lines(rows, baseline)
        vfig = report_verdict.figure(verdict, figdir)
        if vfig:
            inline[f"figures/{vfig}.svg"] = svg_element(figdir / f"{vfig}.svg")
        secs = report_verdict.section(verdict, vfig) + sections(rows, manifest, figs, idle)
    (d / "report.md").write_text(render_md(secs, title))
    (d / "report.html").write_text(render_html(secs, title, inline))
    return d / "report.md"


def svg_element(path: Path) -> str:
    """The <svg> element of an SVG file (without its XML prolog), to draw inside a page."""
    text = path.read_text()
    return text[text.index("<svg"):]
