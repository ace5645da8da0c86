"""sluice-bench: scenarios p2v/v2p/NvsN and the v2v round trip, latency trials and their
report tables, the top-up to --min-near."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.bench import cli, report, report_latency
from sluice.bench.plan import TrialSpec, has_load_latency, latency_for
from sluice.bench.runner import Runner, Settings, instance_name
from sluice.bench.scenarios import parse, round_trip, topology
from sluice.bench.schema import Row, append_rows, validate


def lat_row(**kw: object) -> Row:
    """A latency row of sluice at 0.5 R+ in p2p; KW changes fields."""
    fields: dict[str, object] = {
        "switch": "sluice", "mode": "patch", "key": "sluice:patch", "scenario": "p2p",
        "phy": "memif", "vnf": "", "size": 64, "direction": "uni", "trial": 0,
        "placement": "near", "method": "latency", "rx_pps": 5e6, "tx_pps": 5e6, "loss": 0.0,
        "oversubscribed": False, "generator_bound": False, "kernel_path": False,
        "latency_kind": "loads", "latency_load": 0.5, "asked_pps": 5e6, "rplus_pps": 10e6,
        "latency_ns": {"mean": 8000.0, "p50": 7000.0, "p99": 20000.0, "p999": 40000.0,
                       "max": 90000.0, "stdev": 3000.0, "count": 1000.0}}
    fields.update(kw)
    return Row(**fields)  # type: ignore[arg-type]


def test_p2v_and_v2p_put_the_vnf_port_on_the_receiving_and_sending_side(
        tmp_path: Path) -> None:
    p2v = topology(parse("p2v", "memif", "uni"), tmp_path, "t")
    assert [lk.kind for lk in p2v.links] == ["memif", "vhost"]
    v2p = topology(parse("v2p", "veth", "uni"), tmp_path, "t", "ns")
    assert [lk.kind for lk in v2p.links] == ["vhost", "veth"] and v2p.netns == "ns"
    assert topology(parse("v2v", "memif", "uni"), tmp_path, "t", "ns").netns is None


def test_pairs_give_each_pair_its_own_two_ports(tmp_path: Path) -> None:
    scn = parse("v2v", "memif", "uni", pairs=3)
    topo = topology(scn, tmp_path, "t")
    assert [lk.name for lk in topo.links] == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert topo.pairs == ((0, 1), (2, 3), (4, 5)) and "3vs3" in scn.label()
    with pytest.raises(ValueError):
        parse("loopback-1", "memif", "uni", pairs=2)
    with pytest.raises(ValueError):
        parse("v2v", "memif", "uni", pairs=5)


def test_round_trip_is_four_vhost_ports_with_one_inline_vnf(tmp_path: Path) -> None:
    topo = topology(round_trip(), tmp_path, "t")
    assert [(lk.name, lk.kind, lk.role) for lk in topo.links] == [
        ("p0", "vhost", "phy"), ("v1a", "vhost", "vnf"), ("v1b", "vhost", "vnf"),
        ("p1", "vhost", "phy")]
    assert topo.pairs == ((0, 1), (2, 3)) and round_trip().vnf == "inline"


def test_latency_at_loads_only_where_the_study_measured_it() -> None:
    assert has_load_latency(parse("p2p", "memif", "uni"))
    assert has_load_latency(parse("loopback-4", "memif", "uni"))
    assert not has_load_latency(parse("loopback-5", "memif", "uni"))
    assert not has_load_latency(parse("v2v", "memif", "uni"))
    assert not has_load_latency(round_trip())
    specs = latency_for(parse("p2p", "memif", "uni"), [64], ["a", "b"], (0.1, 0.99))
    assert [(s.switches, s.load, s.latency_kind) for s in specs] == [
        (("a",), 0.1, "loads"), (("a",), 0.99, "loads"), (("b",), 0.1, "loads"),
        (("b",), 0.99, "loads")]
    fixed = latency_for(round_trip(), [64], ["a"], (), 1e6)
    assert [(s.rate_pps, s.latency_kind, s.method) for s in fixed] == [(1e6, "fixed",
                                                                       "latency")]


def test_cli_latency_modes_rates_and_loads() -> None:
    assert cli.latency_modes("loads,fixed:1Mpps") == ("loads", "fixed:1000000")
    assert cli.rate("500kpps") == 500e3 and cli.rate("250000") == 250e3
    for bad in ("fixed:fast", "echo2"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.latency_modes(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        cli.loads("0.5,1.5")
    args = cli.make_parser().parse_args(["run", "--matrix", "default"])
    s = cli.settings(args, ("testpmd:io",), "testpmd")
    assert s.latency == ("loads", "fixed:1000000") and s.fixed_rates == [1e6]
    assert s.latency_scenarios == ("p2p",)


def test_latency_rows_validate_and_throughput_rows_have_no_latency_kind() -> None:
    validate(json.loads(lat_row().to_json()))
    with pytest.raises(ValueError, match="latency_kind"):
        validate(json.loads(lat_row(latency_kind="").to_json()))
    with pytest.raises(ValueError, match="latency_kind"):
        validate(json.loads(lat_row(method="interleaved").to_json()))


def test_loads_table_prefers_near_per_load_and_labels_the_rest() -> None:
    rows = [lat_row(), lat_row(latency_load=0.1, latency_ns={"mean": 4000.0, "p99": 6000.0,
                                                              "count": 10.0}),
            lat_row(latency_load=0.99, placement="far", rplus_placement="near",
                    latency_ns={"mean": 50000.0, "p99": 90000.0, "count": 10.0}),
            lat_row(latency_load=0.5, placement="far",
                    latency_ns={"mean": 1e6, "p99": 1e6, "count": 10.0}),
            lat_row(oversubscribed=True, key="x:y")]
    headers, lines = report_latency.loads_table(rows)
    assert headers[3:6] == ["0.1 R+: mean (p99) us", "0.5 R+: mean (p99) us",
                            "0.99 R+: mean (p99) us"]
    assert lines == [["p2p/memif", "64 B", "sluice:patch", "4.0 (6.0)", "8.0 (20.0)",
                      "50.0 (90.0) far, R+ of near", "1"]]


def test_fixed_table_and_cdf_figure(tmp_path: Path) -> None:
    hist = tmp_path / "hist" / "h.json"
    hist.parent.mkdir()
    hist.write_text(json.dumps({"unit": "ns", "count": 3, "buckets": [[4000, 4031, 1],
                                                                      [9000, 9063, 2]]}))
    r = lat_row(scenario="v2v", phy="", latency_kind="fixed", latency_load=None,
                asked_pps=1e6, rx_pps=0.99e6, hist="hist/h.json")
    headers, lines = report_latency.fixed_table([r])
    assert lines[0][:5] == ["v2v round trip", "1 Mpps", "64 B", "sluice:patch", "8.0"]
    assert report_latency.cdf(report_latency.read_hist(hist) or []) == (
        [4.031, 9.063], [1 / 3, 1.0])
    figs = tmp_path / "figures"
    figs.mkdir()
    assert report_latency.cdf_figure([r], tmp_path, figs) == "latency-cdf"
    assert (figs / "latency-cdf.svg").exists()


def test_report_keeps_latency_rows_out_of_throughput_and_shows_their_tables(
        tmp_path: Path) -> None:
    append_rows(tmp_path / "results.jsonl", [lat_row()])
    md = report.write(tmp_path).read_text()
    assert "Latency at 0.10, 0.50 and 0.99 of R+" in md
    assert report.throughput_table([lat_row()]) == []


def settings(tmp_path: Path, **kw: object) -> Settings:
    base: dict[str, object] = {
        "units": (), "switches": ("a:x", "b:x"), "trials": 1, "duration": 4.0,
        "window": 1.0, "settle": 0.3, "warmup": 1.0, "cooldown": 0.0, "switch_cpu": 1,
        "gen_cpu": 0, "allow_shared_cpu": False, "baseline": "b", "out": tmp_path,
        "repo": tmp_path, "min_near": 2}
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    """A Runner of two fake switches that starts nothing (its work directory removed)."""
    r = Runner(settings(tmp_path), lambda *_: None, lambda _m: None)
    yield r
    r.cleanup_work()


def test_top_up_asks_for_the_switch_and_size_furthest_below_min_near(runner: Runner) -> None:
    scn = parse("v2v", "memif", "uni")
    specs = [TrialSpec(scn, 64, 0, "alternating", ("a:x", "b:x"))]
    near = lat_row(method="alternating", latency_kind="", latency_load=None, key="a:x",
                   samples=4)
    assert runner.near_trials([near], "a:x", 64) == 1
    nxt = runner.wanting([near, lat_row(method="alternating", latency_kind="", key="b:x",
                                        latency_load=None, samples=4)], ["a:x", "b:x"], specs)
    assert nxt is not None and nxt[0].switches == ("a:x", "b:x") and nxt[0].trial == 1
    assert nxt[1] == "a:x"
    enough = [lat_row(method="alternating", latency_kind="", latency_load=None, key=k,
                      trial=t, samples=4) for k in ("a:x", "b:x") for t in (0, 1)]
    assert runner.wanting(enough, ["a:x", "b:x"], specs) is None
    one_sample = [lat_row(method="alternating", latency_kind="", latency_load=None,
                          key="a:x", trial=t, samples=1) for t in (0, 1)]
    assert runner.near_trials(one_sample, "a:x", 64) == 0


def test_rplus_prefers_rows_of_the_same_placement(runner: Runner) -> None:
    scn = parse("p2p", "memif", "uni")
    runner.rplus_seen[("a:x", scn, 64)] += [(20e6, 4, "near"), (10e6, 2, "far"),
                                            (12e6, 2, "far")]
    assert runner.rplus("a:x", scn, 64, "far") == (11e6, "far")
    found = runner.rplus("a:x", scn, 64, "mixed")
    assert found is not None and found[1] == "any" and abs(found[0] - 15.5e6) < 1
    assert runner.rplus("b:x", scn, 64, "near") is None


def test_a_load_trial_waits_for_the_placement_of_its_rplus(
        runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """0.99 of a near R+ is no load of 0.99 in far placement: the trial waits for near
    (and starts in whatever comes after LOAD_PLACEMENT_WAIT_S); without R+ in near or far,
    or already in its placement, it does not wait."""
    from sluice.bench import runner as runner_mod
    scn = parse("p2p", "memif", "uni")
    runner.rplus_seen[("a:x", scn, 64)] += [(20e6, 4, "near")]
    spec = TrialSpec(scn, 64, 1, "latency", ("a:x",), load=0.99)
    seen = iter(["far", "far", "near"])
    monkeypatch.setattr(runner, "current_label", lambda wait_s=1.0: next(seen))
    assert runner.label_for_load(spec) == "near"
    monkeypatch.setattr(runner_mod, "LOAD_PLACEMENT_WAIT_S", 0.0)
    monkeypatch.setattr(runner, "current_label", lambda wait_s=1.0: "far")
    assert runner.label_for_load(spec) == "far"
    fixed = TrialSpec(scn, 64, 1, "latency", ("a:x",), rate_pps=1e6)
    assert runner.label_for_load(fixed) == "far"


def test_imix_is_planned_as_a_size_and_recorded_as_its_mean() -> None:
    from sluice.bench.stats import IMIX, IMIX_MEAN, gen_size, row_size
    assert cli.sizes("64,imix") == (64, IMIX)
    assert gen_size(IMIX) == "imix" and gen_size(64) == "64"
    assert row_size(IMIX) == IMIX_MEAN == 354 and row_size(1500) == 1500
    assert report.size_text(354, "imix") == "IMIX (354 B mean)"


def test_sweep_settings_per_parameter(tmp_path: Path) -> None:
    from sluice.bench import sweep
    base = settings(tmp_path, units=((parse("v2v", "memif", "uni"), (64,)),))
    def one(param: str, value: str) -> Settings:
        return sweep.settings_for(base, param, value, cli.rate, cli.sizes)
    assert one("size", "1500").units[0][1] == (1500,)
    assert one("burst", "8").gen_extra == ("--burst", "8")
    assert one("flows", "1000").gen_extra == ("--flows", "1000")
    assert one("switch-burst", "4").switch_burst == 4
    assert one("ring", "1024").gen_extra == ("--ring", "1024")
    assert one("pairs", "2").units[0][0].pairs == 2
    assert [u[0].name for u in one("chain", "3").units] == ["loopback-3"]
    assert one("chain", "3").tags == {"sweep_param": "chain", "sweep_value": "3"}
    rates = sweep.plans(base, "rate", ["0.1", "0.5", "1Mpps"], cli.rate, cli.sizes)
    assert len(rates) == 1 and rates[0].loads == (0.1, 0.5)
    assert rates[0].latency == ("loads", "fixed:1000000") and rates[0].fixed_any_scenario
    for param, bad in (("burst", "0"), ("pairs", "5"), ("chain", "x"), ("color", "1"),
                       ("ring", "1000"), ("ring", "32")):
        with pytest.raises(ValueError):
            sweep.check_values(param, [bad])


def test_sweep_report_draws_a_curve_per_switch(tmp_path: Path) -> None:
    from sluice.bench import report_sweep
    rows = [lat_row(method="alternating", latency_kind="", latency_load=None, key=k,
                    sweep_param="switch-burst", sweep_value=v, rx_pps=rx)
            for k, v, rx in (("a:x", "1", 2e6), ("a:x", "32", 9e6), ("b:x", "1", 3e6),
                             ("b:x", "32", 8e6))]
    pts = report_sweep.points(rows)
    assert [(p["switch"], p["value"], p["rx_mpps"]) for p in pts] == [
        ("a:x", "1", 2.0), ("a:x", "32", 9.0), ("b:x", "1", 3.0), ("b:x", "32", 8.0)]
    assert report_sweep.figure(rows, tmp_path) == "sweep"
    assert report_sweep.sections(rows)[0][0] == "Sweep: switch-burst"


def test_ndr_pdr_search_finds_a_synthetic_links_capacity() -> None:
    """MLRsearch through our measurer against a link that carries 7 Mpps exactly."""
    pytest.importorskip("MLRsearch")
    from sluice.bench.ndr import TrialOutcome, search
    cap = 7e6

    def link(duration: float, load: float) -> TrialOutcome:
        offered = int(load * duration)
        return TrialOutcome(offered, min(offered, int(cap * duration)), "near", duration)

    bounds, log = search(link, 20e6, trial_s=0.5, duration_sum=1.0, budget_s=60)
    by = {b.goal: b for b in bounds}
    assert by["ndr"].throughput_pps is not None and by["pdr"].throughput_pps is not None
    assert 0.95 * cap <= by["ndr"].throughput_pps <= cap
    assert by["ndr"].throughput_pps <= by["pdr"].throughput_pps <= cap / (1 - 0.005)
    assert log.placement == "near" and log.kept and not log.repeated


def test_ndr_counts_what_the_generator_could_not_offer() -> None:
    """A generator that tops out at 4 Mpps in front of a 7 Mpps link: the search finds 4,
    not the link's 7 or the asked maximum, and says the bound is the generator's."""
    pytest.importorskip("MLRsearch")
    from sluice.bench.ndr import TrialOutcome, generator_bound, search

    def capped(duration: float, load: float) -> TrialOutcome:
        asked = int(load * duration)
        tried = min(int(0.998 * asked), int(4e6 * duration))    # pacing's grain: 0.2 % short
        return TrialOutcome.of(asked, tried, min(tried, int(7e6 * duration)), "near",
                               duration)

    bounds, log = search(capped, 20e6, trial_s=0.5, duration_sum=1.0, budget_s=60)
    ndr = next(b for b in bounds if b.goal == "ndr")
    assert ndr.throughput_pps is not None and 3.8e6 <= ndr.throughput_pps <= 4e6
    assert generator_bound(log, ndr)


def test_ndr_search_keeps_to_one_placement() -> None:
    """A trial in another placement is repeated; a search whose placement does not come
    back starts again in the one of the moment."""
    pytest.importorskip("MLRsearch")
    from sluice.bench.ndr import TrialOutcome, search
    labels = iter(["near", "far", "near"] + ["near"] * 200)

    def flips_once(duration: float, load: float) -> TrialOutcome:
        off = int(load * duration)
        return TrialOutcome(off, min(off, int(5e6 * duration)), next(labels), duration)

    _, log = search(flips_once, 10e6, trial_s=0.5, duration_sum=1.0, budget_s=60)
    assert len(log.repeated) == 1 and log.placement == "near" and log.starts == 1
    far = iter(["near"] + ["far"] * 50)

    def goes_far(duration: float, load: float) -> TrialOutcome:
        off = int(load * duration)
        return TrialOutcome(off, min(off, int(5e6 * duration)), next(far), duration)

    bounds, log = search(goes_far, 10e6, trial_s=0.5, duration_sum=1.0, budget_s=60,
                         retries=2)
    assert log.placement == "far" and log.starts == 2 and len(log.repeated) == 3
    assert all(out.placement == "far" for _, _, out in log.kept)


def test_ndr_search_replays_a_placements_trials_when_it_comes_back() -> None:
    """near, then far for a while, then near again: the second near search replays the
    first's trials instead of running them, and ends where a search in near alone ends."""
    pytest.importorskip("MLRsearch")
    from sluice.bench.ndr import TrialOutcome, search
    cap = {"near": 6e6, "far": 3e6}
    state = {"now": "near", "trials": 0}
    near_runs = []

    def path(duration: float, load: float) -> TrialOutcome:
        state["trials"] += 1
        if state["trials"] == 4:
            state["now"] = "far"             # the host moves the vCPUs ...
        elif state["trials"] == 7:
            state["now"] = "near"            # ... and back
        off = int(load * duration)
        here = str(state["now"])
        if here == "near":
            near_runs.append(load)
        return TrialOutcome(off, min(off, int(cap[here] * duration)), here, duration)

    def await_placement(want: str) -> tuple[float, bool]:
        return 0.0, state["now"] == want

    bounds, log = search(path, 10e6, trial_s=0.5, duration_sum=1.0, budget_s=60,
                         await_placement=await_placement,
                         current_placement=lambda: str(state["now"]))
    assert log.placement == "near" and log.starts == 3
    # The first search's three near trials were replayed, not run again.
    assert log.ran == state["trials"]
    assert [ld for _, ld, _ in log.kept][:3] == near_runs[:3]
    assert all(out.placement == "near" for _, _, out in log.kept)

    def near_alone(d: float, load: float) -> TrialOutcome:
        off = int(load * d)
        return TrialOutcome(off, min(off, int(cap["near"] * d)), "near", d)

    alone, _ = search(near_alone, 10e6, trial_s=0.5, duration_sum=1.0, budget_s=60)
    assert [b.throughput_pps for b in bounds] == [b.throughput_pps for b in alone]


def test_ndr_search_waits_for_its_placement_and_keeps_its_log() -> None:
    """Before every trial after the first the search waits for its placement; a search that
    gives up still leaves its trials in the log it was given."""
    pytest.importorskip("MLRsearch")
    from sluice.bench.ndr import PlacementUnstable, SearchLog, TrialOutcome, search
    waits: list[str] = []

    def await_placement(want: str) -> tuple[float, bool]:
        waits.append(want)
        return 0.25, True

    def link(duration: float, load: float) -> TrialOutcome:
        off = int(load * duration)
        return TrialOutcome(off, min(off, int(5e6 * duration)), "far", duration)

    _, log = search(link, 10e6, trial_s=0.5, duration_sum=1.0, budget_s=60,
                    await_placement=await_placement)
    assert waits == ["far"] * (len(log.kept) - 1)
    assert log.waited_s == pytest.approx(0.25 * len(waits))
    labels = iter(["near", "near"] + ["far"] * 50)

    def drifts(duration: float, load: float) -> TrialOutcome:
        off = int(load * duration)
        return TrialOutcome(off, min(off, int(5e6 * duration)), next(labels), duration)

    kept = SearchLog()
    with pytest.raises(PlacementUnstable):
        search(drifts, 10e6, trial_s=0.5, duration_sum=1.0, budget_s=0, retries=1, log=kept)
    assert len(kept.kept) == 2 and len(kept.repeated) == 2 and kept.placement == "near"


def test_search_rows_make_the_ndr_table() -> None:
    rows = [lat_row(method="search", latency_kind="", latency_load=None, search_goal=g,
                    loss=ratio, rx_pps=rx, search_lower_pps=rx, search_upper_pps=rx * 1.02,
                    search_trials=9) for g, ratio, rx in (("ndr", 0.0, 6e6),
                                                          ("pdr", 0.005, 7e6))]
    (title, _, headers, lines), = report_latency.search_sections(rows)
    assert title == "NDR and PDR (MLRsearch)" and headers[3] == "goal"
    assert [ln[3] for ln in lines or []] == ["PDR", "NDR"]
    assert (lines or [])[0][5] == "7.000"


def test_echo_trials_and_table() -> None:
    from sluice.bench.plan import echo_for
    specs = echo_for(parse("v2v", "memif", "uni"), [64], ["a:x"], (4, 32))
    assert [(s.burst, s.latency_kind) for s in specs] == [(4, "echo"), (32, "echo")]
    assert cli.latency_modes("echo,loads") == ("echo", "loads")
    rows = [lat_row(scenario="v2v", phy="", latency_kind="echo", latency_load=None,
                    asked_pps=1000.0, burst=b, latency_ns={"mean": m, "p99": 2 * m,
                                                           "count": 100.0})
            for b, m in ((4, 10000.0), (32, 30000.0))]
    headers, lines = report_latency.echo_table(rows)
    assert headers[3:] == ["burst 4: mean (p99) us", "burst 32: mean (p99) us"]
    assert lines == [["v2v", "64 B", "sluice:patch", "10.0 (20.0)", "30.0 (60.0)"]]


def test_top_up_gives_up_a_switch_whose_extra_trial_failed(runner: Runner) -> None:
    scn = parse("v2v", "memif", "uni")
    specs = [TrialSpec(scn, 64, 0, "alternating", ("a:x", "b:x"))]
    assert runner.wanting([], ["a:x", "b:x"], specs) is not None
    assert runner.wanting([], ["a:x", "b:x"], specs,
                          frozenset({("a:x", 64), ("b:x", 64)})) is None
    base_only = runner.wanting([], ["a:x", "b:x"], specs, frozenset({("a:x", 64)}))
    assert base_only is not None and base_only[1] == "b:x"   # the baseline's own top-up


def test_switch_instances_get_unique_short_names() -> None:
    """A long run starts more than 26 switch instances (restarts, many scenarios): their
    names go on past z, stay unique, and fit the two letters interface names leave."""
    names = [instance_name(n) for n in range(26 * 26)]
    assert names[:3] == ["a", "b", "c"] and names[25] == "z" and names[26] == "ba"
    assert len(set(names)) == len(names) and max(map(len, names)) == 2
    with pytest.raises(ValueError):
        instance_name(26 * 26)
