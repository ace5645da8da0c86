"""sluice-bench sweep: one parameter through a list of values, the same rows per value.

Each value is a run of its own (switches started afresh, so a switch option such as the
burst takes effect), appended to one results.jsonl with `sweep_param` and `sweep_value`;
the report draws a curve per switch against the value.

- rate: latency trials at these fractions of R+ (<= 1, with a '.') or at these rates
  (1Mpps), in every scenario of the run: throughput and latency curves (the seven-switch
  comparison's loads);
- size: the frame size, 64..1518 or imix (every study's size axis);
- burst: sluice-gen's packets per transmit burst, --burst (the container study);
- switch-burst: the switch's receive burst, sluiced --burst and testpmd --burst (VALE's
  batching curve); other switches run with their own;
- flows: distinct flows, sluice-gen --flows varying IPs and ports (flow caches);
- ring: the slots of the generator's rings, sluice-gen --ring, which sizes the virtqueues
  of its virtio-user ports (a container's or VM's ring: 256 by default, as QEMU's; 1024 is
  the size OVS's docs advise for vhost-user guests) and its memif rings;
- rules: the ACL above the steering rules of the rule-programmable switches (sluice:flow,
  ovs-dpdk:flows, vpp:acl, ...), N generated 5-tuple rules (rules.py; --rule-masks,
  --rule-seed); with --param flows and --rules N, the classifier sweep of issue 14;
- pairs: NvsN sender/receiver pairs (the container study's 1vs1..4vs4);
- chain: loopback-N for N in the values (the seven-switch comparison's chains);
- fanout: one sender's broadcast flooded to N sinks, for N in the values (VALE's forwarding
  rate against the number of destinations); it replaces the run's scenarios, and switches
  whose mode cannot flood decline it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sluice.bench import scenarios
from sluice.bench.runner import Settings
from sluice.bench.schema import Row

PARAMS = ("rate", "size", "burst", "switch-burst", "flows", "ring", "rules", "pairs",
          "chain", "fanout")
# The values a sweep takes without --values: a few minutes a run (fanout: 4 values, one
# switch start and one trial per switch each).
DEFAULT_VALUES: dict[str, tuple[str, ...]] = {
    "fanout": ("1", "2", "4", "8"),
    # The classifier sweep (issue 14): N rules, M distinct 5-tuples.
    "rules": ("1", "100", "1000", "10000"),
    "flows": ("1", "1000", "100000", "1000000"),
}


def default_values(param: str) -> list[str]:
    """PARAM's values when --values is not given; ValueError for parameters without."""
    if param not in DEFAULT_VALUES:
        raise ValueError(f"--param {param} needs --values (defaults exist for "
                         f"{', '.join(sorted(DEFAULT_VALUES))})")
    return list(DEFAULT_VALUES[param])


def check_values(param: str, values: Sequence[str]) -> None:
    """ValueError naming the first value PARAM cannot take."""
    if param not in PARAMS:
        raise ValueError(f"unknown sweep parameter {param!r}: one of {', '.join(PARAMS)}")
    if not values:
        raise ValueError("--values is empty")
    limits = {"burst": (1, 512), "switch-burst": (1, 256), "flows": (1, 1_000_000),
              "ring": (64, 16384), "rules": (0, 100_000),
              "pairs": (1, scenarios.MAX_PAIRS), "chain": (1, scenarios.MAX_CHAIN),
              "fanout": (1, scenarios.MAX_FANOUT)}
    if param in limits:
        lo, hi = limits[param]
        for v in values:
            if not v.isdigit() or not lo <= int(v) <= hi:
                raise ValueError(f"--param {param}: {v!r} is not an integer in {lo}..{hi}")
            if param == "ring" and int(v) & (int(v) - 1):
                raise ValueError(f"--param ring: {v!r} is not a power of two")


def _units(s: Settings, make: Callable[[scenarios.Scenario], scenarios.Scenario]) -> tuple[
        tuple[scenarios.Scenario, tuple[int, ...]], ...]:
    return tuple((make(scn), sizes) for scn, sizes in s.units)


def settings_for(base: Settings, param: str, value: str, rate: Callable[[str], float],
                 size: Callable[[str], tuple[int, ...]]) -> Settings:
    """BASE with PARAM set to VALUE (RATE and SIZE parse the command line's words)."""
    tag = {"sweep_param": param, "sweep_value": value}
    s = dataclasses.replace(base, tags=tag)
    if param == "size":
        return dataclasses.replace(s, units=tuple((scn, size(value)) for scn, _ in s.units),
                                   latency_sizes=size(value))
    if param == "rate":
        if "." in value and float(value) <= 1.0:
            return dataclasses.replace(s, latency=("loads",), loads=(float(value),),
                                       latency_scenarios=("*",))
        return dataclasses.replace(s, latency=(f"fixed:{rate(value):.0f}",),
                                   fixed_any_scenario=True)
    if param == "burst":
        return dataclasses.replace(s, gen_extra=(*s.gen_extra, "--burst", value))
    if param == "switch-burst":
        return dataclasses.replace(s, switch_burst=int(value))
    if param == "flows":
        return dataclasses.replace(s, gen_extra=(*s.gen_extra, "--flows", value))
    if param == "ring":
        return dataclasses.replace(s, gen_extra=(*s.gen_extra, "--ring", value))
    if param == "rules":
        return dataclasses.replace(s, switch_options={**s.switch_options, "rules": value})
    if param == "pairs":
        return dataclasses.replace(s, units=_units(s, lambda scn: dataclasses.replace(
            scn, pairs=int(value))))
    if param == "fanout":
        sizes = s.units[0][1] if s.units else (64,)
        return dataclasses.replace(s, units=((scenarios.fanout(int(value)), sizes),))
    assert param == "chain"
    phys = sorted({scn.phy or "memif" for scn, _ in s.units}) or ["memif"]
    sizes = s.units[0][1] if s.units else (64,)
    return dataclasses.replace(s, units=tuple(
        (scenarios.parse(f"loopback-{value}", phy, "uni", vnf=s.vnf), sizes) for phy in phys))


def plans(base: Settings, param: str, values: Sequence[str], rate: Callable[[str], float],
          size: Callable[[str], tuple[int, ...]]) -> list[Settings]:
    """The runs of a sweep: one per value, except rates, which share one run (R+ measured
    once, then a latency trial per rate; each row's sweep_value is its own rate)."""
    if param != "rate":
        return [settings_for(base, param, v, rate, size) for v in values]
    fractions = [float(v) for v in values if "." in v and float(v) <= 1.0]
    fixed = [f"fixed:{rate(v):.0f}" for v in values if not ("." in v and float(v) <= 1.0)]
    s = dataclasses.replace(base, tags={"sweep_param": "rate"}, loads=tuple(fractions),
                            latency=(("loads",) if fractions else ()) + tuple(fixed),
                            latency_scenarios=("*",), fixed_any_scenario=True)
    return [s]


def run(base: Settings, param: str, values: Sequence[str],
        run_one: Callable[[Settings], list[Row]], rate: Callable[[str], float],
        size: Callable[[str], tuple[int, ...]]) -> list[Row]:
    """Runs BASE once per value (RUN_ONE runs a Settings); the manifest gets the sweep and
    every value's skipped list."""
    rows: list[Row] = []
    skipped: list[dict[str, Any]] = []
    for s in plans(base, param, values, rate, size):
        rows += run_one(s)
        skipped += _manifest(base.out).get("skipped", [])
    m = _manifest(base.out)
    m["sweep"] = {"param": param, "values": list(values)}
    m["skipped"] = skipped
    (base.out / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))
    return rows


def _manifest(out: Path) -> dict[str, Any]:
    path = out / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}
