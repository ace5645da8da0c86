"""The published figures behind sluice-bench, and how they sit beside our measurements.

`STUDIES` and `FIGURES` hold every figure that the five studies in ../shared/seeds/ state as
a number in their text or tables (none read off a plot): what it measures, the scenario in
our names, the switch, frame size, load, the value as the text writes it, the hardware the
study states and a locator a reviewer can follow. `published_vs_measured` puts the figures
of each published table beside our rows where a run has matching data; `winners` and
`latency_winners` say which of our switches wins each scenario; `sections` gives all of it
in report.sections' form. All are pure functions of the rows.

The studies ran on other CPUs and real 10 GbE NICs; these runs share 2 vCPUs. Absolute
figures differ by construction: compare ratios between switches and ranks, not values.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sluice.bench.schema import PLACEMENT_ORDER, Row
from sluice.bench.stats import gbps

METRICS = ("throughput", "rtt", "latency", "speedup", "ratio", "time", "cpu", "drop")
QUALIFIERS = ("=", "~", ">", "<", "<=", "range")


@dataclass(frozen=True)
class Study:
    """One study, cited with what its stored text gives ("" where the text gives nothing)."""

    id: str            # 000 .. 004, the prefix of its file in ../shared/seeds/
    seed: str          # the file in ../shared/seeds/
    authors: str
    title: str
    venue: str
    year: str
    about: str         # what it is, in our words
    short: str = ""    # a name for table titles

    def citation(self) -> str:
        """A short citation; the parts the stored text lacks are said to be missing."""
        parts = [self.authors or "authors not in the stored text",
                 f'"{self.title}"' if self.title else "title not in the stored text",
                 self.venue or "venue not in the stored text",
                 self.year or "year not in the stored text"]
        return f"{self.id}: " + ", ".join(parts) + f" ({self.about}; seeds/{self.seed})"


@dataclass(frozen=True)
class Published:
    """One figure a study states as a number.

    `text` is the number as the study writes it (`text_max` the upper end of a stated
    range); `qualifier` keeps the study's hedge: "~" about, ">" over, "<" under or failing
    to reach. `size` is the frame size as the study states it and `fcs` whether that size
    counts the 4-byte FCS (None: not said); our sizes always do. `load` is a fraction of R+,
    `rate_pps` a fixed offered rate. `table` names the published table or passage the
    figure belongs to when it can sit beside our rows; "" when it cannot (speedups over
    switches we do not run, figures without a size, component timings)."""

    study: str
    metric: str                 # one of METRICS
    unit: str                   # Mpps, kpps, Gbps, us, ns, x, %, CPUs
    text: str
    switch: str                 # lower-case id as the study names it; "n/a": not one switch
    scenario: str               # p2p, p2v, v2v, loopback-N, or "other" (see scenario_note)
    hardware: str
    locator: str
    table: str = ""
    size: int | None = None
    fcs: bool | None = True
    direction: str = ""         # uni, bidir, or "" when the study does not say
    load: float | None = None
    rate_pps: float | None = None
    layer: str = ""             # L1 or L2 for Gbps ("" when not said)
    stat: str = ""              # mean, min, ... for latency figures
    qualifier: str = "="
    text_max: str = ""
    phy: str = ""               # our --phy the scenario corresponds to, "" for any
    vnf: str = ""               # the VNF in the chain, as the study names it
    mode: str = ""              # our adapter mode that matches the study's configuration
    cpu_ghz: float | None = None
    own: bool = True            # False: the study quotes another work's figure
    scenario_note: str = ""
    note: str = ""

    @property
    def value(self) -> float:
        """The figure as a number."""
        return float(self.text)

    @property
    def value_max(self) -> float | None:
        """The upper end of a stated range, else None."""
        return float(self.text_max) if self.text_max else None

    @property
    def frame_bytes(self) -> int | None:
        """The frame size with the FCS, as our rows count it (None without a size)."""
        if self.size is None:
            return None
        return self.size + 4 if self.fcs is False else self.size

    def shown(self) -> str:
        """The figure as the study gives it, with its hedge."""
        if self.qualifier == "range":
            return f"{self.text}-{self.text_max}"
        prefix = {"=": "", "~": "~", ">": ">", "<": "<", "<=": "<="}[self.qualifier]
        return prefix + self.text


STUDIES: Mapping[str, Study] = MappingProxyType({s.id: s for s in (
    Study("000", "000_9036afc6f3ca4a4a.txt", "", "", "", "",
          "comparison of seven software switches (BESS, FastClick, OvS-DPDK, Snabb, t4p4s, "
          "VALE, VPP) in p2p, p2v, v2v and loopback NFV scenarios; software of 2019 "
          "(VPP 19.04, OvS-DPDK 2.11.90)", "seven-switch NFV comparison"),
    Study("001", "001_e7f0cd30891049b1.txt",
          "Zhixiong Niu, Hong Xu, Libin Liu, Yongqiang Tian, Peng Wang, Zhenhua Li",
          "Unveiling Performance of NFV Software Dataplanes", "", "",
          "BESS (KVM, DPDK) against ClickOS (Xen, netmap/VALE) with 10 GbE NICs",
          "Niu et al., BESS vs ClickOS"),
    Study("002", "002_b9ca84c8cb1a4cac.txt", "", "", "", "",
          "VALE, a Virtual Local Ethernet on netmap: batched learning bridge in the kernel, "
          "QEMU/KVM back-end", "VALE"),
    Study("003", "003_a557d92a2aac0004.txt", "G. Ara et al. (running header)", "", "", "",
          "a benchmark framework for virtual switches between LXC containers (linux-bridge, "
          "DPDK basicfwd, OVS-DPDK, Snabb, VPP, VALE, SR-IOV); an extension of the authors' "
          "earlier paper [4]", "Ara et al., container networking framework"),
    Study("004", "004_062a8365c8caf1b1.txt", "Intel", "Open vSwitch* Enables SDN and NFV "
          "Transformation", "White Paper", "",
          "OvS with DPDK against native (kernel) OvS; its measurements dated July 2015",
          "Intel, OvS with DPDK white paper"),
)})

# -- 000: the seven-switch comparison --------------------------------------------------------

HW000 = ("2x Intel Xeon E5-2690 v3 @ 2.60GHz (Turbo Boost off), 2x Intel 82599ES dual-port "
         "10 Gbps NICs; switch on one core, VNFs in QEMU 2.5.0 VMs of 4 cores")
V2V000 = "between two VMs on NUMA node 0, no NIC in the path"
SW000 = ("bess", "fastclick", "ovs-dpdk", "snabb", "vpp", "vale", "t4p4s")
# Our adapter mode closest to each study's set-up: 000 gave OvS-DPDK direct forwarding rules
# (appendix A.1); 003 configured every switch as a learning L2 switch (mode "learn" below).
MODE000 = MappingProxyType({"ovs-dpdk": "flows"})

# Table 3, mean RTT in us, 64 B (section 5.3: the p2p latency test uses 64 B packets and the
# loopback test the p2p settings). The text extraction lists the table column by column with
# its headers scattered; the 15 columns (p2p, then 1- to 4-VNF loopback, each at 0.1, 0.50
# and 0.99 R+) were assigned in that order, 7 values per column in the order BESS,
# FastClick, OvS-DPDK, Snabb, VPP, VALE, t4p4s, and 6 in the three 4-VNF columns, which
# lack BESS (footnote 5: BESS cannot run more than 3 VMs). Every value the text quotes
# agrees with that reading: t4p4s 174 and Snabb 22 at 0.99 R+ p2p; VALE 34, t4p4s 31 and
# Snabb 11.3 at 0.50 R+ p2p; t4p4s above its 0.50 R+ figure at 0.1 R+ p2p (32 > 31);
# FastClick 4-VNF 0.1/0.5 R+ above 9 (978/107); OvS-DPDK 4-VNF 0.99 R+ 336 against >= 514
# (514, 909, 1052) with fewer VNFs; in loopback, VALE the only switch lower at 0.1 than
# at 0.5 R+, and every switch higher at 0.99 than at 0.5 R+.
_TABLE3: dict[str, dict[str, tuple[str, ...]]] = {
    # chain: switch -> (0.1 R+, 0.50 R+, 0.99 R+)
    "p2p": {"bess": ("4.0", "4.6", "6.4"), "fastclick": ("5.3", "7.8", "8.4"),
            "ovs-dpdk": ("4.3", "5.2", "9.6"), "snabb": ("7.3", "11.3", "22"),
            "vpp": ("4.5", "5.9", "13.1"), "vale": ("32", "34", "59"),
            "t4p4s": ("32", "31", "174")},
    "loopback-1": {"bess": ("35", "15", "39"), "fastclick": ("69", "26", "37"),
                   "ovs-dpdk": ("50", "23", "514"), "snabb": ("70", "27", "74"),
                   "vpp": ("41", "20", "47"), "vale": ("32", "35", "65"),
                   "t4p4s": ("169", "65", "2259")},
    "loopback-2": {"bess": ("67", "33", "136"), "fastclick": ("164", "47", "70"),
                   "ovs-dpdk": ("124", "42", "909"), "snabb": ("123", "53", "146"),
                   "vpp": ("116", "47", "74"), "vale": ("41", "51", "90"),
                   "t4p4s": ("274", "117", "3911")},
    "loopback-3": {"bess": ("167", "55", "147"), "fastclick": ("368", "73", "129"),
                   "ovs-dpdk": ("182", "90", "1052"), "snabb": ("186", "95", "266"),
                   "vpp": ("175", "73", "98"), "vale": ("54", "74", "132"),
                   "t4p4s": ("434", "192", "5535")},
    "loopback-4": {"fastclick": ("978", "107", "149"), "ovs-dpdk": ("235", "124", "336"),
                   "snabb": ("406", "365", "1181"), "vpp": ("231", "87", "131"),
                   "vale": ("67", "100", "166"), "t4p4s": ("548", "228", "7275")},
}
LOADS = (0.1, 0.5, 0.99)

# Table 4: v2v mean RTT in us at 1 Mpps. The size is not written; 672 Mbps = 1 Mpps is
# 84 B a frame on the wire, i.e. 64 B frames plus 20 B of preamble and gap.
_TABLE4 = {"bess": "37", "fastclick": "45", "ovs-dpdk": "43", "snabb": "67", "vpp": "42",
           "vale": "21", "t4p4s": "70"}


def _table3() -> list[Published]:
    out = []
    for scn, by_switch in _TABLE3.items():
        chain = "p2p" if scn == "p2p" else f"{scn.split('-')[1]}-VNF loopback"
        for sw, texts in by_switch.items():
            for load, text in zip(LOADS, texts, strict=True):
                out.append(Published(
                    "000", "rtt", "us", text, sw, scn, HW000,
                    f"Table 3 (RTT latency, p2p and loopback with 1-4 VNFs), {chain} column, "
                    f"{load:g} R+", table="Table 3", size=64, load=load, stat="mean",
                    direction="" if scn == "p2p" else "uni", mode=MODE000.get(sw, ""),
                    vnf="" if scn == "p2p" else ("VALE instance" if sw == "vale"
                                                 else "DPDK l2fwd"),
                    note="MoonGen hardware time stamps (PTP packets) on the 82599; R+ is "
                         "the mean throughput under saturating input" +
                         ("" if scn == "p2p" else "; R+ of the unidirectional loopback")))
    return out


def _table4() -> list[Published]:
    return [Published(
        "000", "rtt", "us", text, sw, "v2v", HW000,
        "Table 4 (RTT latency for v2v); section 5.3, v2v paragraph", table="Table 4",
        size=64, rate_pps=1e6, stat="mean", mode=MODE000.get(sw, ""),
        scenario_note=V2V000 + ": VM 1 sends through the switch to VM 2, whose DPDK l2fwd "
                               "returns the packets through the switch",
        note=("average of ping between the two VMs (VALE cannot use MoonGen here)"
              if sw == "vale" else "MoonGen software time stamps in the first VM") +
             "; size from 672 Mbps = 1 Mpps (84 B on the wire)") for sw, text in _TABLE4.items()]


def _t000(sw: str, scn: str, size: int | None, direction: str, text: str, where: str,
          qualifier: str = "=", text_max: str = "", note: str = "",
          scenario_note: str = "") -> Published:
    """A throughput figure of 000's section 5.2 text, in Gbps at L1."""
    if scn == "v2v":
        scenario_note = V2V000 + (f"; {scenario_note}" if scenario_note else "")
    return Published("000", "throughput", "Gbps", text, sw, scn, HW000,
                     f"section 5.2 (Throughput), {where}",
                     table="section 5.2" if size is not None and scn != "other" else "",
                     size=size, direction=direction, layer="L1", qualifier=qualifier,
                     text_max=text_max, mode=MODE000.get(sw, ""),
                     vnf="DPDK l2fwd" if scn.startswith("loopback") and sw != "vale" else "",
                     note=note or "Gbps at L1: the study equates 10 Gbps with about 14.88 "
                                  "Mpps of 64 B frames", scenario_note=scenario_note)


def _throughput000() -> list[Published]:
    p2p, p2v, v2v = "p2p paragraph", "p2v paragraph", "v2v paragraph"
    out = [
        *(_t000(sw, "p2p", 64, "uni", "10", p2p,
                note="saturates the 10 Gbps link, about 14.88 Mpps (Gbps at L1)")
          for sw in ("bess", "fastclick", "vpp")),
        _t000("snabb", "p2p", 64, "uni", "8.9", p2p),
        _t000("ovs-dpdk", "p2p", 64, "uni", "8.05", p2p,
              note="a single flow, so the flow cache does not help (Gbps at L1)"),
        _t000("vale", "p2p", 64, "uni", "5.6", p2p, qualifier="~",
              note="the text gives VALE and t4p4s together as around 5.6 Gbps"),
        _t000("t4p4s", "p2p", 64, "uni", "5.6", p2p, qualifier="~",
              note="the text gives VALE and t4p4s together as around 5.6 Gbps"),
        _t000("vale", "p2p", 64, "uni", "5.56", p2v,
              note="VALE's p2p figure, quoted beside its p2v figure (Gbps at L1)"),
        # 'packets bigger than 256B': 1024 B for certain; 256 B itself is left out.
        *(_t000(sw, "p2p", 1024, "uni", "10", p2p,
                note="every switch saturates 10 Gbps with packets bigger than 256 B")
          for sw in SW000),
        *(_t000(sw, "p2p", size, "bidir", "20", p2p,
                note="all switches but VALE and t4p4s reach 20 Gbps (bidirectional sum)")
          for sw in ("bess", "fastclick", "ovs-dpdk", "snabb", "vpp") for size in (256, 1024)),
        _t000("bess", "p2p", 64, "bidir", "16", p2p, note="bidirectional sum, Gbps at L1"),
        *(_t000(sw, "p2p", 64, "bidir", "10", p2p, qualifier=">",
                note="exceeds 10 Gbps (bidirectional sum)") for sw in ("fastclick", "vpp")),
        *(_t000(sw, "p2v", size, "uni", "10", p2v, note="sustains 10 Gbps")
          for sw in SW000 for size in (256, 1024)),
        *(_t000(sw, "p2v", 64, "uni", "5", p2v, qualifier="range", text_max="7",
                note="FastClick, VPP, OvS-DPDK and Snabb achieve 5 to 7 Gbps")
          for sw in ("fastclick", "ovs-dpdk")),
        _t000("vpp", "p2v", 64, "uni", "6.9", p2v),
        _t000("snabb", "p2v", 64, "uni", "5.97", v2v,
              note="Snabb's p2v figure, quoted beside its v2v figure"),
        _t000("t4p4s", "p2v", 64, "uni", "4.04", p2v),
        _t000("vale", "p2v", 64, "uni", "5.77", p2v, note="ptnet, zero copy (Gbps at L1)"),
        _t000("bess", "p2v", 64, "uni", "10", p2v, note="sustains 10 Gbps"),
        *(_t000(sw, "p2v", size, "bidir", "20", p2v, note="line rate, bidirectional sum")
          for sw in ("bess", "fastclick") for size in (256, 1024)),
        *(_t000(sw, "p2v", size, "bidir", "20", p2v, qualifier="<",
                note="fails to saturate 20 Gbps (bidirectional sum)")
          for sw in ("vpp", "ovs-dpdk", "snabb", "t4p4s") for size in (256, 1024)),
        _t000("vale", "p2v", None, "bidir", "15", p2v,
              note="said of the 256 B and 1024 B tests without naming one; a lower bound "
                   "(an extra VALE hop inside the VM)"),
        _t000("bess", "p2v", 64, "bidir", "11.38", p2v),
        _t000("vpp", "p2v", 64, "bidir", "5.9", p2v),
        _t000("vpp", "other", 64, "uni", "5.59", p2v,
              scenario_note="p2v reversed: from the VM to the NIC"),
        _t000("vale", "v2v", 64, "uni", "10.50", v2v),
        *(_t000(sw, "v2v", 64, "uni", "7.4", v2v, qualifier="<",
                note="the switches other than VALE stay below 7.4 Gbps")
          for sw in ("bess", "fastclick", "ovs-dpdk", "vpp", "t4p4s")),
        _t000("snabb", "v2v", 64, "uni", "6.42", v2v),
        _t000("vale", "v2v", 1024, "bidir", "35", v2v, note="bidirectional sum"),
        *(_t000("vale", f"loopback-{n}", 1024, "uni", "10", "loopback paragraph",
                note="sustains 10 Gbps whatever the chain length (1 to 5 VNFs)")
          for n in range(1, 6)),
    ]
    # Left out: 'almost all solutions sustain line rate' in v2v at 256 B and 1024 B (which
    # switches is not said); Figure 1's 95 % load (no values in the text); MoonGen's rounding
    # of 9.88-10 Gbps (footnote 6) and the 850 B data-centre mean (cited), not switch figures.
    return out


def _other000() -> list[Published]:
    """000's ratios and the figures it quotes from other work."""
    return [
        Published("000", "ratio", "%", "64", "vale", "v2v", HW000,
                  "section 5.2, v2v paragraph", size=1024, direction="bidir",
                  scenario_note=V2V000,
                  note="VALE's bidirectional v2v rate (35 Gbps) as a share of its "
                       "unidirectional one"),
        Published("000", "ratio", "x", "9", "fastclick", "loopback-4", HW000,
                  "section 5.3, loopback paragraph", size=64, qualifier=">",
                  note="mean RTT at 0.10 R+ over mean RTT at 0.50 R+ (Table 3: 978/107)"),
        Published("000", "throughput", "Mpps", "2", "lagopus", "other",
                  "not stated (preliminary run of the authors)",
                  "section 2.1.2, footnote 1", size=64, qualifier="<",
                  scenario_note="Lagopus with the Ryu controller; set-up not described"),
        Published("000", "throughput", "Mpps", "4", "ofsoftswitch", "other",
                  "not stated (figure from the study's reference [24])",
                  "section 2.1.2, Other Software Switches", size=64, qualifier="<=",
                  own=False, scenario_note="OfSoftSwitch on the PFQ framework"),
        Published("000", "throughput", "Mpps", "2", "ovs", "other",
                  "not stated (figure from the study's reference [31])",
                  "section 2.2, Performance Comparison", size=64, qualifier="<", own=False,
                  scenario_note="standard (kernel) Open vSwitch fails to reach 2 Mpps"),
        Published("000", "speedup", "x", "2", "t4p4s", "other",
                  "not stated (figure from the study's reference [42])",
                  "section 2.1.2, Other Software Switches", own=False,
                  scenario_note="t4p4s over PISCES running baseline L2 forwarding"),
    ]


# -- 001: BESS vs ClickOS ----------------------------------------------------------------------

def _hw001(ghz: str) -> str:
    return (f"Aptlab c6220: 2x Intel Xeon E5-2650v2 (8 cores each, 2.6Ghz), clocked at "
            f"{ghz} GHz, Turbo Boost off; Intel X520 10GbE dual-port NIC")


HW001_LAT = ("own testbed: 2 servers with 1 Intel Xeon E5-2640v2 (8 cores, 2.0Ghz), "
             "Intel X520 10GbE dual-port NIC, back to back")
# Table 1: throughput in Mpps, 64 B, one VNF between the two NIC ports (loopback-1).
_TABLE1_001 = {  # GHz: (BESS L3FWD, BESS Firewall, ClickOS L3FWD, ClickOS Firewall)
    "1.2": ("4.31", "4.45", "2.10", "1.98"),
    "1.6": ("5.73", "5.92", "2.82", "2.75"),
    "2.0": ("7.19", "7.38", "3.44", "3.27"),
    "2.4": ("8.60", "8.87", "4.26", "4.24"),
    "2.6": ("9.34", "9.59", "5.34", "5.03"),
}
LOOP001 = ("the generator host sends through a NIC into the VNF's VM and gets the packets "
           "back through the other NIC")


def _study001() -> list[Published]:
    out = []
    cols = (("bess", "L3FWD"), ("bess", "firewall"), ("clickos", "L3FWD"),
            ("clickos", "firewall"))
    for ghz, texts in _TABLE1_001.items():
        for (sw, vnf), text in zip(cols, texts, strict=True):
            out.append(Published(
                "001", "throughput", "Mpps", text, sw, "loopback-1",
                _hw001("1.2 to 2.6"),
                f"Table 1 (throughput of different NFs with varying CPU speed), {ghz}GHz row; "
                "the 1.2, 2.4 and 2.6 GHz L3FWD figures also in section 4.1",
                table="Table 1", size=64, direction="uni", vnf=vnf, cpu_ghz=float(ghz),
                scenario_note=LOOP001, note="1 vCPU and 1 GB per VNF"))
    loc41 = "section 4.1 (Baseline Performance)"
    out += [
        Published("001", "throughput", "Gbps", "10", "bess", "loopback-1", _hw001("2.4"),
                  loc41, size=128, direction="uni", vnf="L3FWD", cpu_ghz=2.4,
                  scenario_note=LOOP001, note="line rate at 128 B from 2.4 GHz"),
        Published("001", "throughput", "Gbps", "10", "clickos", "loopback-1", _hw001("2.6"),
                  loc41, size=256, direction="uni", vnf="L3FWD", cpu_ghz=2.6,
                  scenario_note=LOOP001, note="line rate at 256 B at 2.6 GHz"),
        Published("001", "throughput", "Mpps", "4.25", "clickos", "loopback-1",
                  "not stated (ClickOS paper, the study's reference [12], Figure 13)", loc41,
                  size=64, vnf="L3FWD", own=False, scenario_note="ClickOS's own paper"),
        Published("001", "throughput", "Mpps", "5.40", "clickos", "loopback-1",
                  "not stated (ClickOS paper, the study's reference [12], Figure 13)", loc41,
                  size=64, vnf="firewall", own=False, scenario_note="ClickOS's own paper"),
        Published("001", "throughput", "Mpps", "8.662", "bess", "loopback-1", _hw001("2.6"),
                  loc41, direction="uni", vnf="L3FWD", scenario_note=LOOP001,
                  note="Facebook web-server packet-size mix (median about 120 B) offered at "
                       "10 Gbps; the CPU clock is not said"),
        Published("001", "drop", "Mpps", "5", "bess", "loopback-1", _hw001("2.6"),
                  "section 4.2 (Performance Bottlenecks)", size=64, qualifier="~", vnf="L3FWD",
                  scenario_note=LOOP001,
                  note="a loss rate: 64 B packets lost between pNIC0 and vNIC0"),
        Published("001", "throughput", "Mpps", "7", "bess", "loopback-1", HW001_LAT,
                  "section 5.1 (Impact of Sending Rate)", size=128, qualifier="~", vnf="L3FWD",
                  scenario_note=LOOP001, note="BESS's maximum on the slower latency testbed"),
        Published("001", "latency", "us", "34.326", "bess", "loopback-2", HW001_LAT,
                  "section 5.2 (Impact of NF Chaining); Figure 6 caption gives size and rate",
                  table="section 5.2", size=128, rate_pps=2e6, stat="mean", vnf="firewall, L3FWD",
                  scenario_note=LOOP001 + " (two VMs in a chain)",
                  note="end-to-end, generator host to generator host"),
        Published("001", "latency", "us", "45.982", "bess", "other", HW001_LAT,
                  "section 5.2 (Impact of NF Chaining)", size=128, rate_pps=2e6, stat="mean",
                  vnf="firewall; L3FWD",
                  scenario_note="sum of the single-VNF latencies of the firewall and of L3FWD"),
    ]
    # Left out: 0.87-1.73 Mpps (a demand derived from Facebook's link utilisation, not a
    # measurement); 'nearly half' and the other figure-only NUMA results.
    return out


# -- 002: VALE ---------------------------------------------------------------------------------

HW002 = ("not named for this figure; the study lists i7-2600K 3.2 GHz (FreeBSD-9), i7-870 "
         "2.93 GHz (FreeBSD-10), i5-750 2.66 GHz (Linux 3.2.12) and i7-3930K 3.2 GHz "
         "(Linux 3.2.0), DDR3-1.33 GHz")
HW002_3930 = "Intel i7-3930K (6 cores/12 threads, 3.2 GHz), Linux 3.2, DDR3-1.33 GHz"
PROC = "a sender and a receiver host process on switch ports (netmap API), no VMs"
VMS = "between QEMU/KVM guests on one host"


def _v(text: str, sw: str, scn: str, locator: str, *, metric: str = "throughput",
       unit: str = "Mpps", hw: str = HW002, **kw: Any) -> Published:
    kw.setdefault("fcs", False)
    return Published("002", metric, unit, text, sw, scn, hw, locator, **kw)


def _study002() -> list[Published]:
    s51 = "section 5.1 (Bridging performance)"
    return [
        _v("17", "vale", "v2v", "abstract", qualifier=">", scenario_note=PROC,
           note="between host processes"),
        _v("2", "vale", "v2v", "abstract", qualifier=">", scenario_note=VMS),
        _v("10", "vale", "other", "section 1 (Introduction)", metric="speedup", unit="x",
           qualifier="range", text_max="20",
           scenario_note="against software solutions of general-purpose OSes (in-kernel "
                         "bridging over TAP, sockets)"),
        _v("17", "vale", "v2v", "section 1 (Introduction)", qualifier=">",
           scenario_note=PROC, note="'short frames'; no size written here"),
        _v("6", "vale", "v2v", "section 1 (Introduction)", size=1514, qualifier=">",
           scenario_note=PROC),
        _v("70", "vale", "v2v", "section 1 (Introduction)", unit="Gbps", size=1514,
           qualifier=">", layer="L2", scenario_note=PROC,
           note="the bit rate of the 6 Mpps of 1514 B frames"),
        _v("2", "vale", "v2v", "section 1 (Introduction)", metric="speedup", unit="x",
           qualifier="range", text_max="6", scenario_note=VMS,
           note="for applications in the guest, over the hypervisor's usual back-ends"),
        _v("2.5", "vale", "v2v", "section 1 (Introduction)", qualifier=">",
           scenario_note=VMS, note="'short frames'; no size written here"),
        _v("2", "vale", "v2v", "section 1 (Introduction)", size=1514, qualifier="~",
           scenario_note=VMS),
        _v("25", "vale", "v2v", "section 1 (Introduction)", unit="Gbps", size=1514,
           layer="L2", scenario_note=VMS, note="the bit rate of the 2 Mpps of 1514 B frames"),
        _v("200", "xenloop", "v2v", "section 2.2.2 (Paravirtualization)", unit="kpps",
           qualifier="~", hw="2008 hardware, not described", own=False,
           scenario_note="between Xen guests"),
        _v("14.88", "netmap", "other", "section 3.1 (The netmap API)",
           hw="a single core at less than 900 MHz (no CPU model given)", own=False,
           scenario_note="netmap sending or receiving on one 10 Gbit/s port, stated as "
                         "background", note="the smallest packets; no size written"),
        _v("5", "vale", "v2v", "section 3.2, referring to Figure 8", hw=HW002_3930,
           qualifier="~", scenario_note=PROC,
           note="'almost 5 Mpps': one packet at a time (kernel batch of 1)"),
        _v("5", "vale", "other", "section 3.2", metric="speedup", unit="x", hw=HW002_3930,
           scenario_note="VALE with kernel batch 1 against existing in-kernel bridging"),
        _v("15", "vale", "other", "section 3.4 (Copying data)", metric="time", unit="ns",
           size=60, qualifier="<", scenario_note="copy of one frame, data in cache"),
        _v("150", "vale", "other", "section 3.4 (Copying data)", metric="time", unit="ns",
           size=1514, scenario_note="copy of one frame, data in cache"),
        _v("100", "n/a", "other", "section 4.2 (Hypervisor changes)", unit="kpps",
           qualifier="range", text_max="200",
           scenario_note="receive cap of QEMU's emulated NICs before the authors' one-line fix"),
        _v("10", "n/a", "other", "section 4.2 (Hypervisor changes)", metric="speedup",
           unit="x", qualifier="~", scenario_note="the one-line QEMU fix ('almost 10 times')"),
        _v("1", "n/a", "other", "section 4.2 (Hypervisor changes)", qualifier="range",
           text_max="2", scenario_note="receive rate after the QEMU fix, by hypervisor"),
        _v("7", "n/a", "other", "section 4.2 (Hypervisor changes)", metric="speedup", unit="x",
           qualifier="range", text_max="8",
           scenario_note="transmit gain of the partial e1000 interrupt-moderation fix"),
        _v("20", "vale", "v2v", "section 5 (Performance evaluation)", size=60, qualifier=">",
           scenario_note=PROC, note="with optimisations made after the measurements"),
        _v("0.80", "linux-bridge", "v2v", s51, size=60, qualifier="~", table="section 5.1",
           scenario_note=PROC.replace("switch ports (netmap API)", "TAP ports"),
           note="best Linux bridging option, one destination"),
        _v("17.6", "vale", "v2v", s51, size=60, table="section 5.1", scenario_note=PROC,
           note="peak, one destination, batch 1024"),
        _v("6", "vale", "v2v", s51 + "; Figure 6 caption", size=1514, qualifier=">",
           table="section 5.1", scenario_note=PROC, note="one destination"),
        _v("72", "vale", "v2v", s51, unit="Gbps", size=1514, layer="L2", scenario_note=PROC,
           note="the bit rate of its 1514 B rate"),
        _v("17", "vale", "v2v", "Figure 6 caption", size=60, qualifier=">", scenario_note=PROC,
           note="against 14.88 Mpps for NIC-based bridging"),
        _v("0.8", "linux-bridge", "v2v", "Figure 6 caption", qualifier="~",
           scenario_note=PROC.replace("switch ports (netmap API)", "TAP ports"),
           note="TAP's peak in the best case; size not said"),
        _v("50", "vale", "other", "section 5.1, on Figure 7", metric="time", unit="ns",
           size=60, qualifier="range", text_max="60",
           scenario_note="per-packet processing time, one destination, batches of 128 and up"),
        _v("15", "vale", "other", "section 5.1, on Figure 7", metric="time", unit="ns",
           qualifier="~", scenario_note="Jenkins hash of one address"),
        _v("15", "vale", "other", "section 5.1, on Figure 7", metric="time", unit="ns",
           size=60, qualifier="~", scenario_note="copy of one frame, data in cache"),
        _v("150", "vale", "other", "section 5.1, on Figure 7", metric="time", unit="ns",
           size=1514, qualifier="~", scenario_note="copy of one frame (estimate of the study)"),
        _v("100", "vale", "other", "section 5.1, footnote 6", qualifier="~",
           scenario_note="rate at which VALE drops packets ('almost 100 Mpps')"),
        _v("5", "vale", "v2v", "section 5.2 (Effectiveness of batching), on Figure 8",
           hw=HW002_3930, qualifier="~", scenario_note=PROC, note="kernel batch of 1"),
        _v("2", "vale", "v2v", "section 5.2, on Figure 10", hw=HW002_3930, qualifier="~",
           scenario_note=PROC, note="sender, kernel and receiver all at one packet a time"),
        _v(".90", "linux-bridge", "v2v", "Table 1 (communication speed between VMs), 'Raw "
           "bridge speed' row, TAP tx and rx columns", hw=HW002_3930, scenario_note=PROC,
           note="the raw bridge speed, the table's baseline; size not said"),
        _v("19.7", "vale", "v2v", "Table 1 (communication speed between VMs), 'Raw bridge "
           "speed' row, VALE tx and rx columns", hw=HW002_3930, scenario_note=PROC,
           note="the raw bridge speed, the table's baseline; size not said"),
        # Table 1's other rows are garbled in the text extraction: the values of a row do not
        # keep the TAP/VALE column order (the pkt-gen rows list VALE's figures first, judged
        # by the text), so only the raw-bridge row and the figures the text states are kept.
        *(_v("14", sw, "v2v", "section 6, on Table 1", unit="kpps", hw=HW002_3930,
             qualifier="range", text_max="24", scenario_note=VMS,
             note="netperf over e1000 in QEMU or KVM; the range spans both bridges")
          for sw in ("linux-bridge", "vale")),
        _v("56", "n/a", "other", "section 6, on Table 1", unit="kpps", hw=HW002_3930,
           scenario_note="netperf e1000 transmit in QEMU with the moderation patches; "
                         "back-end not said"),
        _v("140", "n/a", "other", "section 6, on Table 1", unit="kpps", hw=HW002_3930,
           scenario_note="netperf e1000 transmit in KVM with the moderation patches; "
                         "back-end not said"),
        _v("1.3", "n/a", "other", "section 6, on Table 1", qualifier="~", hw=HW002_3930,
           scenario_note="the same configuration on real hardware"),
        _v("50", "n/a", "other", "section 6, on Table 1", metric="time", unit="us",
           qualifier="~", hw=HW002_3930,
           scenario_note="QEMU's e1000 emulation per transmitted packet ('almost 50 us')"),
        _v("20", "linux-bridge", "v2v", "section 6, on Table 1", unit="kpps", hw=HW002_3930,
           scenario_note=VMS + ", e1000, netperf (before pkt-gen)"),
        _v("500", "linux-bridge", "v2v", "section 6, on Table 1", unit="kpps", hw=HW002_3930,
           qualifier="~", scenario_note=VMS + ", e1000, pkt-gen in the guests"),
        _v("20", "vale", "v2v", "section 6, on Table 1", unit="Gbps", hw=HW002_3930,
           size=1514, layer="L2", scenario_note=VMS + ", e1000, pkt-gen, no virtio"),
        _v("800", "vmware-vswitch", "v2v", "section 6.1 (Comparison with other solutions)",
           unit="kpps", qualifier="~", hw="not stated (vendor figures, references [22], [23])",
           own=False, scenario_note="vSphere and ESX between two VMs"),
        _v("27", "vmware-vswitch", "v2v", "section 6.1", unit="Gbps", qualifier="<=",
           hw="not stated (vendor documentation, reference [23])", own=False, size=9000,
           fcs=None, scenario_note="TCP throughput with 9000-byte jumbo frames"),
        _v("6", "vale", "other", "section 7 (Concluding remarks)", qualifier=">",
           scenario_note="ipfw and dummynet (QFQ) tested between VALE ports"),
    ]
    # Left out: PCI-e lane bandwidth, NIC line rates (theoretical), measurement variance,
    # QEMU's version-to-version decline (a property of QEMU), port and switch counts.


# -- 003: the container framework ------------------------------------------------------------

HW003 = ("Dell PowerEdge R630: 2x Intel Xeon E5-2640 v4 @ 2.40GHz, 64 GB, Intel X710 DA2 "
         "10GbE (SR-IOV and two-host tests); Turbo Boost off, no hyperthread pairs")
LOCAL = "sender and receiver in two LXC containers on one host"


def _study003() -> list[Published]:
    t2 = ("Table 2 (maximum throughput of socket-based solutions, D = throughput, L = local, "
          "S = 1vs1, V = linux-bridge, P = 64, R = 1M, B = 64)")
    out = [Published("003", "throughput", "kpps", text, "linux-bridge", "p2p", HW003,
                     f"{t2}, row '{what}'", table="Table 2", size=64, fcs=None,
                     direction="uni", phy="veth", mode="learn",
                     scenario_note=LOCAL + " over veth pairs and linux-bridge; our p2p "
                                           "--phy veth has the same topology",
                     note=f"{what}; offered 1 Mpps, bursts of 64")
           for what, text in (("UDP sockets using send/recv", "338"),
                              ("UDP sockets using sendmmsg/recvmmsg", "409"),
                              ("Raw sockets using send/recv", "360"),
                              ("Raw sockets using sendmmsg/recvmmsg", "440"))]
    out += [
        Published("003", "throughput", "Mpps", "27", "vale", "v2v",
                  "a 4 GHz CPU (the study's reference [14])",
                  "section 4.3 (Throughput Evaluations) and section 5", qualifier="<=",
                  own=False, scenario_note="between two VMs on one host"),
        Published("003", "drop", "%", "0", "vale", "other", HW003,
                  "section 4.4 (Throughput Scalability Evaluations), on Figure 4f", size=1500,
                  fcs=None, qualifier="~",
                  scenario_note=LOCAL.replace("two LXC containers", "4vs4 container pairs"),
                  note="per-packet throughput lost going from 1 to 4 sender/receiver pairs"),
        Published("003", "drop", "%", "17.8", "sr-iov", "other", HW003,
                  "section 4.4 (Throughput Scalability Evaluations), on Figure 4f", size=1500,
                  fcs=None, qualifier="~",
                  scenario_note=LOCAL.replace("two LXC containers", "4vs4 container pairs"),
                  note="per-packet throughput lost going from 1 to 4 sender/receiver pairs"),
        Published("003", "rtt", "us", "64", "snabb", "v2v", HW003,
                  "section 4.5 (Latency Performance Evaluations)", rate_pps=1000, stat="mean",
                  qualifier="~",
                  scenario_note=LOCAL + ", client and server echoing through the switch",
                  note="the lowest average RTT over packet sizes 64-1500 B and bursts "
                       "4-128; the other solutions averaged well under 40 us"),
        Published("003", "rtt", "us", "12.4", "sr-iov", "v2v", HW003,
                  "section 4.5 (Latency Performance Evaluations), on Figures 5a-5c",
                  rate_pps=1000, stat="mean", qualifier="~",
                  scenario_note=LOCAL + ", client and server echoing through the NIC's switch",
                  note="SR-IOV's best average RTT; the others reach single-digit us"),
        Published("003", "rtt", "us", "85", "vale", "other", HW003,
                  "section 4.5 (Latency Performance Evaluations), on Figures 5d-5f",
                  rate_pps=1000, stat="mean", qualifier="~",
                  scenario_note="client and server containers on two hosts joined by 10GbE",
                  note="VALE's average RTT, nearly independent of packet and burst size"),
        *(Published("003", "cpu", "CPUs", text, sw, scn, HW003,
                    "section 4.6 (Performance and Computational Requirements), on Figure 6",
                    note="CPUs fewer than the user-space switches need",
                    scenario_note=LOCAL if scn == "v2v" else "sender and receiver on two hosts")
          for sw in ("vale", "sr-iov") for scn, text in (("v2v", "1"), ("other", "2"))),
    ]
    # Left out: 'well over 2Mpps' (which framework is not said); burst sizes and test
    # lengths (method, not results).
    return out


# -- 004: OvS with DPDK ------------------------------------------------------------------------

HW004 = ("2x Intel Xeon E5-2680 v2 @ 2.80 GHz, 2x Intel 82599 10 Gigabit Ethernet, Turbo "
         "Boost off; IXIA IxNetwork; Intel internal measurements, July 2015")
P2V2P = "physical-to-virtual-to-physical: NIC, vhost-user to a VM and back, NIC"


def _study004() -> list[Published]:
    def sp(text: str, scn: str, locator: str, qualifier: str = "=", **kw: Any) -> Published:
        return Published("004", "speedup", "x", text, "ovs-dpdk", scn, HW004, locator,
                         qualifier=qualifier, mode="flows", **kw)

    p2p = {"size": 256, "direction": "bidir",
           "note": "over native (kernel) OvS; one PMD thread, zero packet loss"}
    loop = {"size": 256, "direction": "bidir", "scenario_note": P2V2P,
            "note": "over native (kernel) OvS, zero packet loss"}
    return [
        sp("12", "other", "cover headline ('>12X FASTER') and first paragraph", ">",
           scenario_note="headline, no scenario named"),
        sp("12", "p2p", "Executive Overview", "~", **p2p),
        sp("7", "loopback-1", "Executive Overview", scenario_note=P2V2P, size=256,
           direction="bidir", note="the overview says 'between virtual functions'; the body "
                                   "measures it through a VM (p2v2p)"),
        sp("12", "p2p", "section 'Open vSwitch with DPDK Performance Benchmarks'", "~", **p2p),
        sp("7", "loopback-1", "section 'Open vSwitch with DPDK Performance Benchmarks'", ">",
           **loop),
        sp("11.4", "p2p", "Figure 6 (Physical-to-Physical Performance Comparison), the label "
                          "printed over the bar", **p2p),
        sp("12", "p2p", "Figure 6 caption", "~", **p2p),
        sp("7", "loopback-1", "Figure 7 caption", **loop),
        sp("12", "p2p", "section 'Physical-to-Physical Performance'", "~", **p2p),
        sp("7", "loopback-1", "section 'Physical-To-Virtual-To-Physical Performance'", ">",
           **loop),
        sp("12", "p2p", "Conclusion", "~", **p2p),
        sp("7", "loopback-1", "Conclusion", **loop),
        sp("12", "p2v", "Table 2 (Advantages and Disadvantages), 'Maximum throughput to an "
                        "individual VM' row", ">", note="over the native vSwitch approach"),
        sp("3", "p2v", "section 'vHost Performance Improvements'", "~",
           note="throughput to the VM from the vhost changes of the OvS 2.4 time frame"),
        Published("004", "throughput", "Gbps", "40", "ovs-dpdk", "other", HW004,
                  "Executive Overview", scenario_note="aggregate; scenario and size not said",
                  note="'reach 40 Gbps and scale nearly linearly'"),
        *(Published("004", "throughput", "Mpps", "1", "ovs", scn, HW004,
                    f"Table 2 (Advantages and Disadvantages), '{row}' row, Native OvS column",
                    qualifier="<", note="native OvS with the kernel datapath")
          for scn, row in (("p2v", "Maximum throughput to an individual VM"),
                           ("v2v", "Maximum throughput from VM to VM"))),
    ]


FIGURES: tuple[Published, ...] = (
    *_table3(), *_table4(), *_throughput000(), *_other000(), *_study001(), *_study002(),
    *_study003(), *_study004())



# -- beside our rows ---------------------------------------------------------------------------

Table = tuple[str, list[str], list[list[str]]]
LATENCY_METRICS = ("rtt", "latency")
THROUGHPUT_METHODS = ("alternating", "interleaved")
SW_ORDER = MappingProxyType({sw: i for i, sw in
                             enumerate(SW000 + ("clickos", "linux-bridge", "ovs"))})


def _key(r: Row) -> str:
    return r.key or f"{r.switch}:{r.mode}"


def _is_latency_row(r: Row) -> bool:
    return r.method == "latency" and bool(r.latency_ns.get("mean"))


def _load_label(load: float | None, rate_pps: float | None) -> str:
    if load is not None:
        return f"{load:.2f} R+"
    if rate_pps is not None:
        return f"{rate_pps / 1e6:g} Mpps" if rate_pps >= 1e5 else f"{rate_pps:g} pps"
    return "saturating"


def _scenario_label(scenario: str, phy: str, direction: str) -> str:
    name = f"{scenario}{'/' + phy if phy else ''}"
    return name if direction in ("uni", "") else f"{name} {direction}"


def _scenario_order(scenario: str) -> tuple[int, int, str]:
    fam, _, n = scenario.partition("-")
    rank = {"p2p": 0, "p2v": 1, "v2v": 2, "loopback": 3}.get(fam, 4)
    return rank, int(n) if n.isdigit() else 0, scenario


def _placement_rank(p: str) -> int:
    return PLACEMENT_ORDER.index(p) if p in PLACEMENT_ORDER else len(PLACEMENT_ORDER)


def _best_placement(rs: Iterable[Row]) -> str:
    return min((r.placement for r in rs), key=lambda p: (_placement_rank(p), p))


def comparable(f: Published) -> bool:
    """Whether figure F can sit beside our rows: the study's own measurement, of a kind we
    measure (throughput in packets or in L1/L2 bits, or a mean latency at a load of R+ or a
    fixed rate), with a frame size, in one of our scenarios, in a named table or passage."""
    if not f.table or not f.own or f.frame_bytes is None or f.scenario == "other":
        return False
    if f.metric == "throughput":
        return f.unit in ("Mpps", "kpps") or (f.unit == "Gbps" and f.layer in ("L1", "L2"))
    if f.metric in LATENCY_METRICS:
        return (f.unit == "us" and f.stat == "mean"
                and (f.load is not None or f.rate_pps is not None))
    return False


def matches(r: Row, f: Published) -> bool:
    """Whether our row R measures what figure F does: scenario, phy (when F names one), size
    with FCS, direction (when F states one), and for latency the same load of R+ or the same
    fixed rate (within 2 %). Oversubscribed rows never match."""
    if r.oversubscribed or r.scenario != f.scenario or r.size != f.frame_bytes:
        return False
    if (f.phy and r.phy != f.phy) or (f.direction and r.direction != f.direction):
        return False
    if f.metric in LATENCY_METRICS:
        if not _is_latency_row(r):
            return False
        load = getattr(r, "latency_load", None)
        asked = getattr(r, "asked_pps", None)
        if f.load is not None:
            return load is not None and math.isclose(load, f.load, abs_tol=1e-6)
        return (load is None and asked is not None and f.rate_pps is not None
                and math.isclose(asked, f.rate_pps, rel_tol=0.02))
    return r.method in THROUGHPUT_METHODS


def row_value(r: Row, f: Published) -> float:
    """Our row's figure in figure F's unit (mean latency in us, or R+ in F's rate unit)."""
    if f.metric in LATENCY_METRICS:
        return r.latency_ns["mean"] / 1e3
    if f.unit == "Mpps":
        return r.rx_pps / 1e6
    if f.unit == "kpps":
        return r.rx_pps / 1e3
    return gbps(r.rx_pps, r.size, f.layer.lower())


@dataclass(frozen=True)
class Ours:
    """Our figure for one column of one line: the mean over the rows of the best placement
    label (near first), and the trials and samples it rests on."""

    switch: str
    mode: str
    value: float
    placement: str
    trials: int
    samples: int
    generator_bound: bool

    def cell(self, digits: int) -> str:
        """The figure with where it comes from."""
        gb = ", generator-bound" if self.generator_bound else ""
        return (f"{self.value:.{digits}f} ({self.placement}, {self.trials} trials, "
                f"n={self.samples}{gb})")


def our_column(r: Row, f: Published) -> str:
    """The column of our row R beside figure F: switch:mode, the phy, and the direction
    when F states none and R is not one-way."""
    label = _key(r) + (f" ({r.phy})" if r.phy else "")
    return label + (f" {r.direction}" if not f.direction and r.direction != "uni" else "")


def ours(rows: Sequence[Row], f: Published) -> dict[str, Ours]:
    """Per our column, our figure for what F measures; empty when no row matches."""
    cols: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if matches(r, f):
            cols[our_column(r, f)].append(r)
    out = {}
    for label, rs in cols.items():
        place = _best_placement(rs)
        kept = [r for r in rs if r.placement == place]
        out[label] = Ours(kept[0].switch, kept[0].mode,
                          statistics.fmean(row_value(r, f) for r in kept), place, len(kept),
                          sum(r.samples for r in kept), any(r.generator_bound for r in kept))
    return out


def _digits(f: Published) -> int:
    return {"kpps": 0, "us": 1}.get(f.unit, 2)


def _metric_words(f: Published) -> str:
    if f.metric in LATENCY_METRICS:
        return f"mean {'RTT' if f.metric == 'rtt' else 'latency'} us"
    return f"Gbps {f.layer}" if f.unit == "Gbps" else f.unit


def _our_order(label: str) -> tuple[int, str]:
    return 0 if label.startswith("sluice") else 1, label


def anchor(pub: dict[str, list[Published]],
           our: dict[str, Ours]) -> tuple[str, float, float] | None:
    """A switch that the study and we both ran in one line, as (switch, the study's figure,
    ours): the study's figure must be a plain one (not 'over' or 'under'); among our columns
    of that switch the one in the study's mode wins."""
    for col in sorted(pub, key=lambda c: (SW_ORDER.get(c.split()[0], 99), c)):
        plain = [f for f in pub[col] if f.qualifier in ("=", "~")]
        if len(plain) != 1 or plain[0].value <= 0:
            continue
        f = plain[0]
        cands = [c for c in sorted(our) if our[c].switch == f.switch]
        best = [c for c in cands if f.mode and our[c].mode == f.mode] or cands
        if best and our[best[0]].value > 0:
            return f.switch, f.value, our[best[0]].value
    return None


def published_vs_measured(rows: Sequence[Row],
                          figures: Iterable[Published] = FIGURES) -> list[Table]:
    """Per published table with matching data in ROWS: (title, headers, lines).

    A line is one condition of the table (scenario, size, direction, load or rate, CPU
    clock) that our rows measured too: the study's figures per switch as it writes them,
    then ours per switch:mode (the placement label near first, with trials and samples).
    Conditions we did not run are left out, and tables with none left. Where the study and
    we ran the same switch (ovs-dpdk, say), each figure of the line also shows in [brackets]
    its ratio to that switch's figure on the same side: those ratios, unlike the values,
    may be compared across the two machines."""
    groups: dict[tuple[str, str, str, str], list[Published]] = defaultdict(list)
    for f in figures:
        if comparable(f):
            groups[(f.study, f.table, f.metric, f.unit + f.layer)].append(f)
    out: list[Table] = []
    for (study, table, _, _), figs in sorted(groups.items()):
        got = _group_table(rows, study, table, figs)
        if got is not None:
            out.append(got)
    return out


def _group_table(rows: Sequence[Row], study: str, table: str,
                 figs: Sequence[Published]) -> Table | None:
    """One published table (its figures FIGS) beside ROWS; None without a matching line."""
    conds: dict[tuple[Any, ...], list[Published]] = defaultdict(list)
    for f in figs:
        conds[(_scenario_order(f.scenario), f.phy, f.frame_bytes, f.direction,
               -1.0 if f.load is None else f.load, f.rate_pps or -1.0,
               f.cpu_ghz or 0.0)].append(f)
    # A column per switch, or per switch and VNF where one line has several VNFs of a switch.
    several_vnfs = any(len({f.vnf for f in lf if f.switch == g.switch}) > 1
                       for lf in conds.values() for g in lf)

    def pcol(f: Published) -> str:
        return f.switch + (f" {f.vnf}" if several_vnfs and f.vnf else "")

    matched = [(lf, our) for _, lf in sorted(conds.items()) if (our := ours(rows, lf[0]))]
    if not matched:
        return None
    pub_cols = sorted({pcol(f) for f in figs},
                      key=lambda c: (SW_ORDER.get(c.split()[0], 99), c))
    our_cols = sorted({c for _, our in matched for c in our}, key=_our_order)
    words = _metric_words(figs[0])
    ghz = any(f.cpu_ghz for f in figs)
    hardware = sorted({f.hardware for f in figs})
    many_hw = len(hardware) > 1
    headers = (["scenario", "size", "load"] + (["CPU GHz"] if ghz else [])
               + (["published on"] if many_hw else [])
               + [f"{study} {table}: {c} {words}" for c in pub_cols]
               + [f"ours: {c} {words}" for c in our_cols])
    lines = []
    anchors = set()
    for lfigs, our in matched:
        f = lfigs[0]
        pub: dict[str, list[Published]] = defaultdict(list)
        for g in lfigs:
            pub[pcol(g)].append(g)
        anc = anchor(pub, our)
        if anc:
            anchors.add(anc[0])
        size = f"{f.size} B" + ("" if f.fcs is not False else f" ({f.frame_bytes} B with FCS)")
        line = [_scenario_label(f.scenario, f.phy, f.direction), size,
                _load_label(f.load, f.rate_pps)]
        line += [f"{f.cpu_ghz:g}" if f.cpu_ghz else ""] if ghz else []
        line += [f.hardware] if many_hw else []
        for c in pub_cols:
            cell = " / ".join(g.shown() for g in pub.get(c, []))
            plain = [g for g in pub.get(c, []) if g.qualifier in ("=", "~")]
            if anc and len(plain) == 1:
                cell += f" [{plain[0].value / anc[1]:.2f}]"
            line.append(cell)
        for c in our_cols:
            o = our.get(c)
            cell = o.cell(_digits(f)) if o else ""
            if o and anc:
                cell += f" [{o.value / anc[2]:.2f}]"
            line.append(cell)
        lines.append(line)
    s = STUDIES[study]
    title = (f"{study} {table} ({s.short}), {words}"
             + ("" if many_hw else f": published on {hardware[0]}")
             + "; ours on this machine (2 vCPUs, no NIC)")
    if anchors:
        title += (f"; [x] is the figure over the same line's {'/'.join(sorted(anchors))} "
                  "figure on the same side")
    return title, headers, lines



# -- which of our switches wins ------------------------------------------------------------

def _rank_text(ranked: Sequence[str], prefix: str = "sluice") -> str:
    """'sluice:patch 1 of 4' for every key of ours in RANKED (best first)."""
    mine = [f"{k} {i} of {len(ranked)}" for i, k in enumerate(ranked, 1)
            if k.split(":")[0] == prefix]
    return "; ".join(mine) if mine else "not run"


def _baseline_of(by_key: dict[str, list[Row]], baseline: str | None) -> str | None:
    """The key every other key of the group has ratios against: BASELINE (a key or an
    adapter name) when given and present, else one found in the rows; None if none."""
    keys = sorted(by_key)
    found = sorted({r.ratio_vs for rs in by_key.values() for r in rs if r.ratio_vs},
                   key=lambda k: (not k.startswith("testpmd"), k))
    named = [k for k in keys if baseline and (k == baseline or k.split(":")[0] == baseline)]
    cands = named + found
    for b in cands:
        if b in by_key and all(any(r.ratio_vs == b and r.ratio_median is not None for r in rs)
                               for k, rs in by_key.items() if k != b):
            return b
    return None


def winners(rows: Sequence[Row], baseline: str | None = None) -> tuple[list[str],
                                                                       list[list[str]]]:
    """Which switch wins each scenario: per (scenario, phy, size, direction) and placement
    label (near first), the best switch by R+, its margin over the second and sluice's rank.

    Where every switch of the line was alternated with one baseline (BASELINE, else the one
    found in the rows), switches are compared by their median ratio to it (the baseline
    counts 1.0), which cancels the host's drift; otherwise by mean R+. Oversubscribed and
    latency rows are left out."""
    groups: dict[tuple[str, str, int, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if not r.oversubscribed and r.method in THROUGHPUT_METHODS:
            groups[(r.scenario, r.phy, r.size, r.direction, r.placement)].append(r)
    headers = ["scenario", "size", "placement", "winner", "compared by", "winner's figure",
               "second", "margin", "sluice's rank", "switches", "winner R+ Mpps",
               "winner samples", "flags"]
    lines = []
    for (scn, phy, size, direction, place), rs in sorted(
            groups.items(), key=lambda kv: (_scenario_order(kv[0][0]), kv[0][1], kv[0][2],
                                            kv[0][3], _placement_rank(kv[0][4]), kv[0][4])):
        by_key: dict[str, list[Row]] = defaultdict(list)
        for r in rs:
            by_key[_key(r)].append(r)
        base = _baseline_of(by_key, baseline) if len(by_key) > 1 else None
        if base:
            score = {k: 1.0 if k == base else statistics.median(
                r.ratio_median for r in krs if r.ratio_vs == base and r.ratio_median is not None)
                for k, krs in by_key.items()}
            basis = f"ratio to {base}"
        else:
            score = {k: statistics.fmean(r.rx_pps for r in krs) for k, krs in by_key.items()}
            basis = "R+"
        ranked = sorted(score, key=lambda k: (-score[k], k))
        shown = {k: f"{v:.3f}" if base else f"{v / 1e6:.2f} Mpps" for k, v in score.items()}
        top = ranked[0]
        second = f"{ranked[1]} ({shown[ranked[1]]})" if len(ranked) > 1 else ""
        margin = (f"+{100 * (score[top] / score[ranked[1]] - 1):.1f} %"
                  if len(ranked) > 1 and score[ranked[1]] > 0 else "")
        win = by_key[top]
        flags = ",".join(f for f, on in (("generator_bound", any(r.generator_bound for r in win)),
                                         ("kernel_path", any(r.kernel_path for r in win))) if on)
        lines.append([_scenario_label(scn, phy, direction), f"{size} B", place, top, basis,
                      shown[top], second, margin, _rank_text(ranked), str(len(ranked)),
                      f"{statistics.fmean(r.rx_pps for r in win) / 1e6:.2f}",
                      str(sum(r.samples for r in win)), flags])
    return headers, lines


def _latency_label(r: Row) -> str:
    load = getattr(r, "latency_load", None)
    asked = getattr(r, "asked_pps", None)
    kind = getattr(r, "latency_kind", "") or ""
    label = _load_label(load, asked) if load is not None or asked else "unstated load"
    return f"{label} ({kind})" if kind and kind != "loads" else label


def _latency_sort(label: str) -> tuple[int, float, str]:
    head = label.split()[0]
    try:
        v = float(head)
    except ValueError:
        return 2, 0.0, label
    return (0 if "R+" in label else 1), v, label


def latency_winners(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """The lowest mean RTT per (scenario, phy, size, direction), load (fraction of R+ or
    fixed rate) and placement label (near first): winner, its margin over the second and
    sluice's rank. Only rows with method 'latency' and a mean; oversubscribed ones left
    out."""
    groups: dict[tuple[str, str, int, str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        if not r.oversubscribed and _is_latency_row(r):
            groups[(r.scenario, r.phy, r.size, r.direction, _latency_label(r),
                    r.placement)].append(r)
    headers = ["scenario", "size", "load", "placement", "winner", "mean RTT us", "p99 us",
               "second", "margin", "sluice's rank", "switches", "winner samples"]
    lines = []
    for (scn, phy, size, direction, load, place), rs in sorted(
            groups.items(), key=lambda kv: (_scenario_order(kv[0][0]), kv[0][1], kv[0][2],
                                            kv[0][3], _latency_sort(kv[0][4]),
                                            _placement_rank(kv[0][5]), kv[0][5])):
        by_key: dict[str, list[Row]] = defaultdict(list)
        for r in rs:
            by_key[_key(r)].append(r)
        mean = {k: statistics.fmean(r.latency_ns["mean"] for r in krs) / 1e3
                for k, krs in by_key.items()}
        ranked = sorted(mean, key=lambda k: (mean[k], k))
        top = ranked[0]
        p99s = [r.latency_ns["p99"] for r in by_key[top] if "p99" in r.latency_ns]
        second = f"{ranked[1]} ({mean[ranked[1]]:.1f})" if len(ranked) > 1 else ""
        margin = (f"{mean[ranked[1]] - mean[top]:.1f} us lower "
                  f"({100 * (1 - mean[top] / mean[ranked[1]]):.1f} %)"
                  if len(ranked) > 1 and mean[ranked[1]] > 0 else "")
        lines.append([_scenario_label(scn, phy, direction), f"{size} B", load, place, top,
                      f"{mean[top]:.1f}",
                      f"{statistics.fmean(p99s) / 1e3:.1f}" if p99s else "", second, margin,
                      _rank_text(ranked), str(len(ranked)),
                      str(sum(r.samples for r in by_key[top]))])
    return headers, lines


# -- for the report --------------------------------------------------------------------------

def sources() -> tuple[list[str], list[list[str]]]:
    """The studies, as the stored texts cite them."""
    return (["study", "citation", "figures kept"],
            [[s.id, s.citation().split(": ", 1)[1],
              str(sum(1 for f in FIGURES if f.study == s.id))] for s in STUDIES.values()])


def figures_table(figures: Iterable[Published] = FIGURES) -> tuple[list[str], list[list[str]]]:
    """Every published figure as a table line, for an appendix or a reviewer."""
    headers = ["study", "where", "switch", "scenario", "size", "direction", "load", "metric",
               "value", "unit", "hardware", "note"]
    lines = []
    for f in figures:
        scn = f.scenario + (f" ({f.scenario_note})" if f.scenario_note else "")
        metric = f.metric + (f" {f.stat}" if f.stat else "") + (f" {f.layer}" if f.layer else "")
        note = "; ".join(x for x in (f.note, "" if f.own else "quoted from other work",
                                     f"VNF {f.vnf}" if f.vnf else "",
                                     f"CPU at {f.cpu_ghz:g} GHz" if f.cpu_ghz else "") if x)
        lines.append([f.study, f.locator, f.switch, scn,
                      "" if f.size is None else f"{f.size} B", f.direction,
                      _load_label(f.load, f.rate_pps) if f.load or f.rate_pps else "",
                      metric, f.shown(), f.unit, f.hardware, note])
    return headers, lines


PUBLISHED_TEXT = (
    "The published figures ran on dual-socket Xeons (2.0-2.8 GHz, Turbo Boost off) with "
    "Intel 82599/X520/X710 10 GbE NICs, switches on a dedicated core and VNFs in VMs or "
    "containers; these runs share 2 vCPUs of a VM and stand in for NICs with memif or veth. "
    "Absolute figures are not comparable: read the ranks, and the ratios in [brackets] to a "
    "switch both sides ran. Only conditions we measured are shown.")


def sections(rows: Sequence[Row], baseline: str | None = None) -> list[
        tuple[str, str, list[str], list[list[str]] | None]]:
    """The report's 'Published beside measured' sections, in report.sections' form:
    (heading, paragraph, headers, lines or None)."""
    out: list[tuple[str, str, list[str], list[list[str]] | None]] = []
    for title, headers, lines in published_vs_measured(rows):
        out.append((f"Published beside measured: {title.split(' (')[0]}", title + ". " +
                    PUBLISHED_TEXT, headers, lines))
    h, lines = winners(rows, baseline)
    out.append(("Which switch wins each scenario (throughput)",
                "Per scenario, size and placement label: the best switch by R+, compared "
                "by the median ratio to the baseline where every switch alternated with it, "
                "else by mean R+; its margin over the second, and sluice's rank.", h, lines))
    h, lines = latency_winners(rows)
    if lines:
        out.append(("Which switch wins each scenario (latency)",
                    "The lowest mean RTT per scenario, size, load and placement label.",
                    h, lines))
    h, lines = sources()
    out.append(("Published sources", "The studies in ../shared/seeds/ as their stored texts "
                "cite them; published.py holds every figure they state as a number, with a "
                "locator.", h, lines))
    return out
