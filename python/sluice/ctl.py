"""sluicectl: the control CLI of sluiced (docs/cli.md).

Each verb is the JSON-RPC method of the same name (docs/protocol.md) and each of its
arguments a named parameter. sluicectl sends one request, prints the answer for people (or the
daemon's `result` as JSON with --json) and exits 0 when done, 1 when the daemon refused, 2 on
a usage error and 3 when no answer could be had from the daemon.

The parts are pure where they can be: `make_parser` and `build_request` turn argv into a
request, the `format_*` functions turn a result into text, `execute` maps errors to exit
statuses around any callable that performs the request; only `main` touches the socket.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TextIO

from sluice import __version__, ctl_flow, ctl_rxq
from sluice.rpc import (
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT,
    SOCKET_ENV,
    ConnectError,
    RpcClient,
    RpcError,
)

PROG = "sluicectl"


class Exit(IntEnum):
    """sluicectl's exit statuses."""

    OK = 0
    ERROR = 1         # the daemon answered with an error
    USAGE = 2         # bad command line
    UNREACHABLE = 3   # no answer: not running, wrong socket, connection lost, timeout


Json = Any
Transport = Callable[[str, Mapping[str, Any]], Json]
# A verb sluicectl carries out itself with the daemon's help (capture, metrics): it gets the
# params, a transport, stdout and stderr, and returns the exit status.
Local = Callable[[dict[str, Any], Transport, TextIO, TextIO], int]


# ---- verbs ----

@dataclass(frozen=True)
class Arg:
    """One argument of a verb; DEST is also the name of its JSON-RPC parameter."""

    dest: str
    help: str
    optional: bool = False       # a positional that may be left out
    option: str | None = None    # an option (--mode) rather than a positional
    default: str | None = None   # sent when the option is not given
    metavar: str | None = None
    type: Callable[[str], Any] | None = None   # converts the text (int for counts)
    nargs: str | None = None     # "*" for trailing words such as `vlan 10` or key=value
    flag: bool = False           # an option without a value (--strict): sent as true


@dataclass(frozen=True)
class Verb:
    """One sluicectl verb: the JSON-RPC method of the same name."""

    name: str
    summary: str
    description: str
    examples: tuple[str, ...]
    args: tuple[Arg, ...] = ()
    aliases: tuple[str, ...] = ()
    # Turns the parsed arguments into the request's params; ValueError is a usage error.
    convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Set for verbs that are not a JSON-RPC method but work done here (capture, metrics).
    local: Local | None = None


SWITCH = Arg("switch", "the switch's name", metavar="SWITCH")
VLAN_WORDS = Arg("vlan_words", "the VLAN, as the two words 'vlan N' (default 0: untagged)",
                 nargs="*", metavar="vlan N")


def _count(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


YES = ("yes", "true", "on", "1")
NO = ("no", "false", "off", "0")


def _yes_no(text: str) -> bool:
    if text.lower() in YES:
        return True
    if text.lower() in NO:
        return False
    raise argparse.ArgumentTypeError(f"not yes or no: {text!r}")


def vlan_words(params: dict[str, Any]) -> dict[str, Any]:
    """`vlan N` after fdb-add's and fdb-del's other arguments becomes the 'vlan' param."""
    words = params.pop("vlan_words", None) or []
    if not words:
        return params
    if len(words) != 2 or words[0] != "vlan":
        raise ValueError(f"expected 'vlan N' after the other arguments, not {' '.join(words)!r}")
    try:
        params["vlan"] = _count(words[1])
    except argparse.ArgumentTypeError as e:
        raise ValueError(f"vlan: {e}") from None
    return params


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
    return value


def capture_args(params: dict[str, Any]) -> dict[str, Any]:
    """capture needs -w FILE, and its --direction must be rx, tx or both."""
    if not params.get("file"):
        raise ValueError("-w FILE is required: the pcapng file to write")
    if params.get("direction") not in ("rx", "tx", "both"):
        raise ValueError(f"--direction must be rx, tx or both, not {params.get('direction')!r}")
    return params


def run_capture(params: dict[str, Any], transport: Transport, stdout: TextIO,
                stderr: TextIO) -> int:
    """`sluicectl capture`: dpdk-dumpcap on one port (sluice.capture)."""
    from sluice import capture

    try:
        r = capture.capture(lambda method, **p: transport(method, p), params, stdout,
                            getattr(transport, "connect", None))
    except capture.CaptureError as e:
        print(f"{PROG} capture: error: {e}", file=stderr)
        return Exit.ERROR
    except capture.Interrupted:
        print(f"{PROG} capture: interrupted before the capture began; nothing captured",
              file=stderr)
        return 130
    print(f"{r.packets} packets captured in {r.path} ({r.seconds:.1f} s; {r.dropped_by} "
          f"dropped {r.dropped})", file=stdout)
    return Exit.OK


def run_metrics(params: dict[str, Any], transport: Transport, stdout: TextIO,
                stderr: TextIO) -> int:
    """`sluicectl metrics`: the Prometheus exporter (sluice.metrics)."""
    from sluice import metrics

    try:
        return metrics.run(params.get("listen"), transport, stdout)
    except ValueError as e:
        print(f"{PROG} metrics: error: {e}", file=stderr)
        return Exit.USAGE
    except OSError as e:
        print(f"{PROG} metrics: error: cannot listen on {params.get('listen')}: {e}",
              file=stderr)
        return Exit.ERROR


SET_PORT_KEYS = {"vlan-mode": ("vlan_mode", str), "tag": ("tag", _count),
                 "trunks": ("trunks", str), "learn-limit": ("learn_limit", _count),
                 "storm-pps": ("storm_pps", _count), "mtu": ("mtu", _count),
                 "of-config": ("of_config", str)}


def port_settings(params: dict[str, Any]) -> dict[str, Any]:
    """set-port's KEY=VALUE words (vlan-mode=access tag=10) become named params; a KEY may
    be spelt with '_' as in the protocol (storm_pps=100)."""
    for word in params.pop("settings", None) or []:
        key, sep, value = word.partition("=")
        key = key.replace("_", "-")
        if not sep or key not in SET_PORT_KEYS:
            raise ValueError(f"{word!r}: settings are KEY=VALUE with KEY one of "
                             f"{', '.join(SET_PORT_KEYS)}")
        dest, convert = SET_PORT_KEYS[key]
        try:
            params[dest] = convert(value)
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"{key}: {e}") from None
    return params


VERBS: tuple[Verb, ...] = (
    Verb("version", "versions of sluiced, DPDK and the control protocol",
         "Print the versions of sluiced, of the DPDK it runs on and of the control protocol.",
         ("version",)),
    Verb("add-switch", "create a switch",
         "Create a switch named NAME with forwarding function MODE: 'patch' (port pairs), "
         "'learn' (an Ethernet learning bridge with VLANs) or 'flow' (OpenFlow 1.3 tables "
         "of match/action rules: add-flow; docs/flow.md). --aging and --max-entries apply "
         "to learn switches and to the bridge of a flow switch's 'normal' action.",
         ("add-switch br0", "add-switch br0 --mode patch",
          "add-switch br1 --mode learn --aging 60 --max-entries 262144",
          "add-switch br2 --mode flow"),
         (Arg("name", "the new switch's name: 1 to 31 of A-Z a-z 0-9 _ - ., starting with "
                      "a letter or digit", metavar="NAME"),
          Arg("mode", "forwarding function: patch (default), learn or flow",
              option="--mode", default="patch", metavar="MODE"),
          Arg("aging", "learn: seconds a learned address lives unseen, 0 for ever (default "
                       "300)", option="--aging", metavar="S", type=_count),
          Arg("max_entries", "learn: size of the address table (default 131072)",
              option="--max-entries", metavar="N", type=_count))),
    Verb("set-switch", "change a learn switch's aging or reserved-multicast filter",
         "Change how long SWITCH keeps a learned address it no longer sees (seconds; 0 "
         "keeps them for ever); entries already learned age by the new time. "
         "--forward-reserved yes relays frames to 01:80:C2:00:00:00-0F (STP, LACP, LLDP, "
         "802.1X), which a bridge drops by default (counted as reserved_multicast).",
         ("set-switch br0 --aging 30", "set-switch br0 --forward-reserved yes"),
         (SWITCH, Arg("aging", "seconds", option="--aging", metavar="S", type=_count),
          Arg("forward_reserved", "yes or no: relay 01:80:C2:00:00:0X frames (default no)",
              option="--forward-reserved", metavar="YES|NO", type=_yes_no))),
    Verb("set-port", "a port's MTU; a learn switch port's VLAN mode, learn and storm limits; "
         "a flow switch port's OpenFlow config",
         "Set KEY=VALUE settings of port NAME of SWITCH: mtu=N (any switch: the largest "
         "IP packet the port sends, 68 to 9600; set on the device too where it has an "
         "MTU; longer frames are dropped as 'mtu_exceeded'), and on learn switches "
         "vlan-mode=access with "
         "tag=N (untagged frames, VLAN N inside the switch), vlan-mode=trunk with "
         "trunks=all or a list such as 0,10,100-200 (802.1Q-tagged frames of those VLANs; 0 "
         "means untagged frames), learn-limit=N (addresses the port may learn; 0: no "
         "limit), storm-pps=N (frames a second the port may flood: broadcast, multicast "
         "and unknown unicast; the rest are dropped as 'storm'; 0: no limit). A VLAN "
         "change forgets what the port had learned. On flow switches of-config=LIST sets "
         "the port's OpenFlow config (what an OpenFlow port-mod sets): none, or a comma "
         "list of down, no_recv, no_fwd, no_flood, no_packet_in (docs/openflow.md).",
         ("set-port br0 vm1 mtu=9000", "set-port br0 vm1 vlan-mode=access tag=10",
          "set-port br0 uplink vlan-mode=trunk trunks=10,20",
          "set-port br0 vm2 learn-limit=100", "set-port br0 vm2 storm-pps=1000",
          "set-port br0 p1 of-config=no_fwd,no_flood", "set-port br0 p1 of-config=none"),
         (SWITCH, Arg("name", "the port's name", metavar="NAME"),
          Arg("settings", "KEY=VALUE: mtu, vlan-mode, tag, trunks, learn-limit, storm-pps, "
                          "of-config",
              nargs="+",
              metavar="KEY=VALUE")),
         convert=port_settings),
    Verb("fdb-show", "a learn switch's address table",
         "List the address table of SWITCH: MAC, VLAN (0: untagged), port, seconds since "
         "the address was last seen, and whether the entry is static or learned (dynamic).",
         ("fdb-show br0", "fdb-show br0 --json"), (SWITCH,)),
    Verb("fdb-add", "add a static address",
         "Put MAC on PORT of SWITCH as a static entry, in VLAN N (default 0: untagged). "
         "Static entries do not age and are not moved by what arrives on other ports.",
         ("fdb-add br0 02:00:00:00:00:01 vm1", "fdb-add br0 02:00:00:00:00:01 vm1 vlan 10"),
         (SWITCH, Arg("mac", "the station's unicast address", metavar="MAC"),
          Arg("port", "the port it is behind", metavar="PORT"), VLAN_WORDS),
         convert=vlan_words),
    Verb("fdb-del", "delete an address, static or learned",
         "Delete the entry for MAC in VLAN N (default 0) from SWITCH's table.",
         ("fdb-del br0 02:00:00:00:00:01", "fdb-del br0 02:00:00:00:00:01 vlan 10"),
         (SWITCH, Arg("mac", "the address", metavar="MAC"), VLAN_WORDS),
         convert=vlan_words),
    Verb("fdb-flush", "forget learned addresses",
         "Delete the learned (dynamic) entries of SWITCH, or only those on PORT. Static "
         "entries stay; fdb-del removes them.",
         ("fdb-flush br0", "fdb-flush br0 vm1"),
         (SWITCH, Arg("port", "only this port's entries", optional=True, metavar="PORT"))),
    Verb("del-switch", "delete a switch and every port on it",
         "Delete switch NAME. Its ports are stopped and removed with it.",
         ("del-switch br0",),
         (Arg("name", "the switch's name", metavar="NAME"),)),
    Verb("list-switches", "list switches, their modes and ports",
         "List every switch with its forwarding mode and the names of its ports.",
         ("list-switches", "list-switches --json")),
    Verb("add-port", "create a port from a spec and add it to a switch",
         "Create the DPDK device described by SPEC, start it and add it to SWITCH as port "
         "NAME. SPEC is KIND:key=value,... and is passed to the daemon as it is (see "
         "docs/ports.md). Port names are unique in the daemon, not only in their switch. "
         "The port's OpenFlow number (1..64, `show`) is the one it had before in this "
         "switch if it is free, else the lowest never used, else the one freed longest "
         "ago; --ofport asks for a number.",
         ("add-port br0 vm1 vhost-user:server,path=/run/sluice/vm1.sock",
          "add-port br0 vm2 vhost-user:client,path=/var/lib/vms/vm2.sock",
          "add-port br0 nic0 pci:0000:03:00.0 --ofport 10"),
         (SWITCH,
          Arg("name", "the new port's name (same rules as switch names)", metavar="NAME"),
          Arg("spec", "KIND:key=value,... e.g. tap:name=sl0, memif:server,socket=/tmp/m.sock",
              metavar="SPEC"),
          Arg("ofport", "the OpenFlow port number it must have (1..64, free)", option="--ofport",
              metavar="N", type=int))),
    Verb("del-port", "stop and remove a port",
         "Remove port NAME from SWITCH (its link goes too), stop and remove its device.",
         ("del-port br0 vm1",),
         (SWITCH, Arg("name", "the port's name", metavar="NAME"))),
    Verb("patch", "link two ports of a patch switch, both directions",
         "Link PORT1 and PORT2 of a patch switch: what one receives the other sends, in both "
         "directions. A port has at most one peer.",
         ("patch br0 vm1 vm2",),
         (SWITCH, Arg("port1", "one port", metavar="PORT1"),
          Arg("port2", "the other port", metavar="PORT2"))),
    Verb("unpatch", "remove a port's link",
         "Remove the link of PORT, in both directions. What PORT and its former peer receive "
         "is then dropped as 'unpatched'.",
         ("unpatch br0 vm1",),
         (SWITCH, Arg("port", "the port whose link goes", metavar="PORT"))),
    Verb("list-ports", "list ports, of one switch or of all",
         "List the ports of SWITCH, or of every switch: number, kind, link state, peer, the "
         "worker that polls it, MAC address and spec.",
         ("list-ports", "list-ports br0 --json"),
         (Arg("switch", "only this switch's ports", optional=True, metavar="SWITCH"),)),
    Verb("show", "switches, ports, links and workers at once",
         "Show everything: the daemon's version, each switch with its mode, its ports (kind, "
         "link, peer, worker, spec) and its links, then the workers and how busy they are.",
         ("show", "show --json")),
    Verb("stats", "counters per port, drops by reason, and the accounting check",
         "Print one table per switch, one row per port: received packets and bytes, sent "
         "packets and bytes, forwarded, dropped, packets the device missed, and every drop "
         "reason that is not zero; then the switch's total and the check that every packet "
         "received was forwarded or dropped (rx = forwarded + dropped). While traffic flows "
         "the check may be off by the packets in flight.",
         ("stats", "stats br0", "stats br0 --port vm1", "stats --json"),
         (Arg("switch", "only this switch", optional=True, metavar="SWITCH"),
          Arg("port", "only this port", option="--port", metavar="NAME")),
         aliases=("get-stats",)),
    Verb("capture", "capture a port's packets to a pcapng file (dpdk-dumpcap, or sluiced)",
         "Capture what PORT of SWITCH receives (rx), sends (tx) or both into FILE, in pcapng, "
         "by running DPDK's dpdk-dumpcap against the daemon. Stops after --count packets "
         "(default 1000; 0: no limit), after --duration seconds, or on Ctrl-C, whichever "
         "comes first, then says how many packets FILE holds. Needs root and the DPDK "
         "sluiced is built on; costs the daemon nothing while no capture runs (see "
         "docs/operations.md). A fast vhost-user port (the default; not fast=0) has no "
         "ethdev: sluiced "
         "captures it itself (no dpdk-dumpcap, no root needed), taking it off the "
         "one-copy path while the capture runs.",
         ("capture br0 vm1 -w /tmp/vm1.pcapng",
          "capture br0 vm1 -w /tmp/vm1-rx.pcapng --direction rx --count 100",
          "capture br0 uplink -w /tmp/up.pcapng --count 0 --duration 10"),
         (SWITCH, Arg("port", "the port's name", metavar="PORT"),
          Arg("file", "the pcapng file to write", option="-w", metavar="FILE"),
          Arg("count", "stop after N packets, 0 for no limit", option="--count",
              default="1000", metavar="N", type=_count),
          Arg("duration", "stop after S seconds", option="--duration", metavar="S",
              type=_seconds),
          Arg("direction", "rx, tx or both", option="--direction", default="both",
              metavar="DIR")),
         convert=capture_args, local=run_capture),
    Verb("metrics", "Prometheus metrics of the daemon: print once, or serve them",
         "Without --listen, print the daemon's counters once in Prometheus' text format. "
         "With --listen ADDR:PORT, serve them over HTTP (any path, e.g. /metrics) until "
         "Ctrl-C; each scrape asks the daemon afresh, and a daemon that is down gives "
         "sluice_up 0. Metric names: docs/operations.md.",
         ("metrics", "metrics --listen 127.0.0.1:9410",
          "--socket /run/sluice/b.sock metrics --listen :9411"),
         (Arg("listen", "serve on ADDR:PORT (ADDR may be empty: every address)",
              option="--listen", metavar="ADDR:PORT"),),
         local=run_metrics),
    Verb("add-flow", "add a rule to a flow switch (ovs-ofctl syntax)",
         "Add RULE to flow switch SWITCH, written as for ovs-ofctl add-flow: "
         "table=N,priority=N,cookie=N,idle_timeout=S,hard_timeout=S, match fields and "
         "actions=... (docs/flow.md lists every field and action). Ports are named by their "
         "sluice names or OpenFlow numbers (show). A rule with the same table, match and "
         "priority is replaced, its counters kept.",
         ("add-flow br0 'priority=100,in_port=vm1,tcp,nw_dst=10.0.0.0/24,tp_dst=80,"
          "actions=output:fw1'",
          "add-flow br0 'table=0,priority=0,actions=normal'"),
         (SWITCH, Arg("flow", "the rule", metavar="RULE"))),
    Verb("add-flows", "add the rules of a file, one a line",
         "Add every rule of FILE ('-': standard input), one a line as add-flow takes it; "
         "blank lines and lines starting with '#' are skipped. Every line is checked "
         "before any rule is added: one bad line adds nothing.",
         ("add-flows br0 rules.txt", "add-flows br0 - < rules.txt"),
         (SWITCH, Arg("file", "the rule file, '-' for standard input", metavar="FILE")),
         convert=ctl_flow.read_rule_file),
    Verb("replace-flows", "replace every rule by a file's, atomically",
         "Replace the whole rule set of SWITCH by the rules of FILE, at once: every packet "
         "is classified by the old rules or by the new ones, never by a mix.",
         ("replace-flows br0 rules.txt",),
         (SWITCH, Arg("file", "the rule file, '-' for standard input", metavar="FILE")),
         convert=ctl_flow.read_rule_file),
    Verb("mod-flows", "change the actions of the rules a match selects",
         "Give the rules of SWITCH that RULE's match selects RULE's actions (and meter, "
         "goto_table, ...), keeping their counters. With --strict only the rule with "
         "exactly that match and priority. cookie=V/M selects by cookie.",
         ("mod-flows br0 'in_port=vm1,actions=output:vm3'",
          "mod-flows br0 --strict 'priority=100,in_port=vm1,actions=drop'"),
         (SWITCH, Arg("flow", "match and actions", metavar="RULE"),
          Arg("strict", "only the rule with exactly this match and priority",
              option="--strict", flag=True))),
    Verb("del-flows", "delete rules (all, or those a match selects)",
         "Delete the rules of SWITCH that RULE selects (a match; out_port=P and "
         "out_group=G keep only rules that output there; cookie=V/M by cookie), or every "
         "rule. With --strict only the rule with exactly that match and priority.",
         ("del-flows br0", "del-flows br0 in_port=vm1", "del-flows br0 table=1",
          "del-flows br0 --strict priority=100,tcp,tp_dst=80"),
         (SWITCH, Arg("flow", "the match", optional=True, metavar="RULE"),
          Arg("strict", "only the rule with exactly this match and priority",
              option="--strict", flag=True))),
    Verb("dump-flows", "the rules with their counters",
         "Print the rules of SWITCH (or those RULE selects) as ovs-ofctl dump-flows does: "
         "cookie, duration, table, packets, bytes, timeouts, priority, match, actions.",
         ("dump-flows br0", "dump-flows br0 table=0", "dump-flows br0 --json"),
         (SWITCH, Arg("flow", "only the rules this match selects", optional=True,
                      metavar="RULE"),
          Arg("strict", "only the rule with exactly this match and priority",
              option="--strict", flag=True))),
    Verb("add-group", "add a group (all, select, indirect, fast_failover)",
         "Add a group to SWITCH, as ovs-ofctl add-group: group_id=N,type=all|select|"
         "indirect|ff,bucket=...,bucket=... A select group sends each flow to one bucket, "
         "chosen by a hash of its addresses and ports and weighted by weight:W.",
         ("add-group br0 'group_id=1,type=select,bucket=weight:1,output:vnf1,"
          "bucket=weight:1,output:vnf2'",
          "add-group br0 'group_id=2,type=ff,bucket=watch_port:up1,output:up1,"
          "bucket=watch_port:up2,output:up2'"),
         (SWITCH, Arg("group", "the group", metavar="GROUP"))),
    Verb("mod-group", "change a group's type and buckets",
         "Replace group group_id=N of SWITCH by GROUP.",
         ("mod-group br0 'group_id=1,type=all,bucket=output:vm1,bucket=output:vm2'",),
         (SWITCH, Arg("group", "the group", metavar="GROUP"))),
    Verb("del-groups", "delete a group (and the rules that use it), or all",
         "Delete group group_id=N of SWITCH, or every group; the rules that send to a "
         "deleted group are deleted with it, as OpenFlow says.",
         ("del-groups br0 group_id=1", "del-groups br0"),
         (SWITCH, Arg("group", "group_id=N", optional=True, metavar="GROUP"))),
    Verb("dump-groups", "the groups with their counters",
         "Print the groups of SWITCH with their buckets and counters.",
         ("dump-groups br0",), (SWITCH,)),
    Verb("add-meter", "add a meter (a rate with a drop band)",
         "Add a meter to SWITCH, as ovs-ofctl add-meter: meter=N,kbps|pktps[,burst],"
         "bands=type=drop,rate=R[,burst_size=B]. A rule uses it with actions=meter:N,...; "
         "what exceeds the rate is dropped and counted as 'meter'.",
         ("add-meter br0 'meter=1,pktps,bands=type=drop,rate=1000'",
          "add-meter br0 'meter=2,kbps,burst,bands=type=drop,rate=10000,burst_size=1000'"),
         (SWITCH, Arg("meter", "the meter", metavar="METER"))),
    Verb("mod-meter", "change a meter's rate",
         "Replace meter N of SWITCH by METER.",
         ("mod-meter br0 'meter=1,pktps,bands=type=drop,rate=5000'",),
         (SWITCH, Arg("meter", "the meter", metavar="METER"))),
    Verb("del-meters", "delete a meter (and the rules that use it), or all",
         "Delete meter N of SWITCH, or every meter, with the rules that use it.",
         ("del-meters br0 meter=1", "del-meters br0"),
         (SWITCH, Arg("meter", "meter=N", optional=True, metavar="METER"))),
    Verb("dump-meters", "the meters with their counters",
         "Print the meters of SWITCH: rate, burst, packets and bytes seen and dropped.",
         ("dump-meters br0",), (SWITCH,)),
    Verb("trace", "walk a described packet through a switch",
         "Describe a packet as match fields (in_port is required; others default to 0) "
         "and see what SWITCH would do with it: in flow mode each table's matching rule, "
         "its actions and the final decision, as ovs-appctl ofproto/trace; in learn and "
         "patch mode the bridge's or the link's decision. Nothing is counted or changed: "
         "tracing a live switch does not disturb its traffic.",
         ("trace br0 in_port=vm1,tcp,nw_dst=10.0.0.5,tp_dst=80",
          "trace br0 in_port=vm1,dl_dst=02:00:00:00:00:02"),
         (SWITCH, Arg("packet", "the packet, as match fields", metavar="PACKET"))),
    Verb("packet-ins", "take the packets queued for a controller",
         "Take (and print) the packets the 'controller' action queued on SWITCH, oldest "
         "first, with reason, table, cookie, input port and their first bytes.",
         ("packet-ins br0", "packet-ins br0 --max 10 --json"),
         (SWITCH, Arg("max", "take at most N", option="--max", metavar="N", type=_count))),
    Verb("flows-removed", "take the records of rules that timed out",
         "Take (and print) the records of rules removed by an idle or hard timeout, or "
         "deleted while they had send_flow_rem: match, reason and final counters.",
         ("flows-removed br0",),
         (SWITCH, Arg("max", "take at most N", option="--max", metavar="N", type=_count))),
    Verb("show-rxqs", "receive queues: their workers and the load they put on them",
         "List every receive queue (or PORT's) with the worker that polls it, whether it is "
         "pinned, its usage (% of a core over the last seconds, shown as the window), its "
         "share of its worker's queue cycles, cycles per packet, and its total packets; "
         "then each worker's summed usage and the re-balance settings (docs/cores.md).",
         ("show-rxqs", "show-rxqs vm1", "show-rxqs --json"),
         (Arg("port", "only this port's queues", optional=True, metavar="PORT"),)),
    Verb("set-rxq", "move a receive queue to a worker",
         "Move receive queue Q of PORT to worker WORKER. The old worker stops polling it "
         "before the new one starts: no frame is lost or reordered by the move. --pin keeps "
         "it there when the automatic re-balance runs.",
         ("set-rxq vm1 0 1", "set-rxq vm1 1 0 --pin"),
         (Arg("port", "the port", metavar="PORT"),
          Arg("queue", "its receive queue, from 0", metavar="Q", type=_count),
          Arg("worker", "the worker, from 0 (show-rxqs lists them)", metavar="WORKER",
              type=_count),
          Arg("pin", "the re-balance leaves it on WORKER", option="--pin", flag=True))),
    Verb("rebalance", "place receive queues by measured load, now",
         "Work out where the receive queues would go by their measured load (busiest "
         "first, each to the least loaded worker; pinned queues stay) and move them; "
         "--dry-run only shows the moves and the workers' loads before and after.",
         ("rebalance --dry-run", "rebalance"),
         (Arg("dry_run", "show, do not move", option="--dry-run", flag=True),)),
    Verb("set-rebalance", "the automatic re-balance and the placement of new queues",
         "Change KEY=VALUE settings: auto=yes|no (move queues when one worker's load is at "
         "or above load-threshold and another's below it, and the dry run lowers the "
         "variance of the loads by at least improvement per cent; off by default), "
         "interval=S (at least S seconds between two re-balances, default 60), "
         "load-threshold=P (per cent of a core, default 95), improvement=P (default 25), "
         "move-gap-us=N (pause between a moved queue's old and new worker, default 1000), "
         "assign=roundrobin|cycles (where new queues go).",
         ("set-rebalance auto=yes", "set-rebalance auto=yes interval=10 load-threshold=80",
          "set-rebalance assign=cycles"),
         (Arg("settings",
              "KEY=VALUE: auto, interval, load-threshold, improvement, assign, move-gap-us",
              nargs="+", metavar="KEY=VALUE"),),
         convert=ctl_rxq.rebalance_settings),
    Verb("set-controller", "connect a flow switch to OpenFlow controllers",
         "Name the OpenFlow 1.3 controllers of flow switch SWITCH: tcp:IP[:PORT] or "
         "ssl:IP[:PORT] (port default 6653; IPv6 in brackets), several at once. The agent "
         "(sluice-ofagent, docs/openflow.md) connects to each and reconnects with back-off. "
         "ssl: targets need --ssl-key, --ssl-cert and --ssl-ca. No target: none.",
         ("set-controller br0 tcp:127.0.0.1:6653",
          "set-controller br0 tcp:10.0.0.1 tcp:10.0.0.2:6654",
          "set-controller br0 ssl:10.0.0.1:6653 --ssl-key k.pem --ssl-cert c.pem "
          "--ssl-ca ca.pem"),
         (SWITCH, Arg("targets", "controller targets", nargs="*", metavar="TARGET"),
          Arg("ssl_key", "the switch's private key (PEM)", option="--ssl-key", metavar="FILE"),
          Arg("ssl_cert", "the switch's certificate (PEM)", option="--ssl-cert",
              metavar="FILE"),
          Arg("ssl_ca", "the controllers' CA certificate (PEM)", option="--ssl-ca",
              metavar="FILE"))),
    Verb("del-controller", "disconnect a flow switch from its controllers",
         "Forget the controllers of SWITCH; the agent closes its connections.",
         ("del-controller br0",), (SWITCH,)),
    Verb("get-controller", "a flow switch's OpenFlow settings and connection state",
         "Print the controllers of SWITCH, its datapath id, fail mode and the state of "
         "each connection as the agent reports it.",
         ("get-controller br0", "get-controller br0 --json"), (SWITCH,)),
    Verb("set-datapath-id", "set a flow switch's OpenFlow datapath id",
         "Set the datapath id SWITCH gives its controllers: 1 to 16 hex digits (0x "
         "optional), not zero. The default is derived from the switch's name.",
         ("set-datapath-id br0 0x1", "set-datapath-id br0 00000000000000a1"),
         (SWITCH, Arg("datapath_id", "hex digits", metavar="DPID"))),
    Verb("set-fail-mode", "what a flow switch does while no controller is connected",
         "secure (default): keep the rules as they are; standalone: forward as a learning "
         "bridge (the normal action) while no controller is connected, as OVS does.",
         ("set-fail-mode br0 standalone",),
         (SWITCH, Arg("mode", "secure or standalone", metavar="MODE"))),
    Verb("clear-stats", "zero the counters",
         "Zero the counters of every port of SWITCH, or of every port.",
         ("clear-stats", "clear-stats br0"),
         (Arg("switch", "only this switch's ports", optional=True, metavar="SWITCH"),)),
)


def find_verb(name: str) -> Verb:
    """The verb called NAME or one of its aliases; KeyError if there is none."""
    for verb in VERBS:
        if name == verb.name or name in verb.aliases:
            return verb
    raise KeyError(name)


# ---- command line ----

# add-port answers when the port is up, and a port may wait for its peer for up to sluiced's
# --port-setup-timeout (default 30 s): wait longer, so the daemon's own error comes first.
ADD_PORT_TIMEOUT = 120.0

def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 (wait for ever) or more: {text!r}")
    return value


def _add_verb(sub: argparse._SubParsersAction[argparse.ArgumentParser],
              verb: Verb) -> None:
    examples = "\n".join(f"  {PROG} {e}" for e in verb.examples)
    p = sub.add_parser(verb.name, aliases=list(verb.aliases), help=verb.summary,
                       description=textwrap.fill(verb.description, 79), allow_abbrev=False,
                       epilog=f"examples:\n{examples}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    for a in verb.args:
        if a.flag and a.option is not None:
            p.add_argument(a.option, dest=a.dest, action="store_const", const=True,
                           default=None, help=a.help)
        elif a.option is not None:
            default_note = f" (default {a.default})" if a.default is not None else ""
            p.add_argument(a.option, dest=a.dest, default=a.default, metavar=a.metavar,
                           type=a.type, help=a.help + default_note)
        else:
            p.add_argument(a.dest, nargs=a.nargs or ("?" if a.optional else None),
                           metavar=a.metavar, type=a.type, help=a.help)
    # --json after the verb too; SUPPRESS keeps a --json given before the verb.
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print the daemon's result as JSON")
    p.set_defaults(verb=verb.name)


def make_parser() -> argparse.ArgumentParser:
    """sluicectl's argument parser: global options, then one subcommand per verb."""
    ap = argparse.ArgumentParser(
        prog=PROG, allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Control a running sluiced: switches, ports, links and counters.\n"
                    "Each VERB is one request to the daemon; 'sluicectl VERB --help' "
                    "describes it.",
        epilog="examples:\n"
               f"  {PROG} add-switch br0\n"
               f"  {PROG} add-port br0 vm1 vhost-user:server,path=/run/sluice/vm1.sock\n"
               f"  {PROG} add-port br0 vm2 vhost-user:server,path=/run/sluice/vm2.sock\n"
               f"  {PROG} patch br0 vm1 vm2\n"
               f"  {PROG} show\n"
               f"  {PROG} stats br0\n"
               f"  {PROG} --socket /tmp/second.sock --json list-ports\n"
               "\n"
               "exit status: 0 done, 1 the daemon refused (its message and code on stderr),\n"
               "2 usage error, 3 no answer from the daemon (not running, wrong socket,\n"
               "connection lost, timeout). Reference: docs/cli.md.")
    ap.add_argument("--socket", metavar="PATH", default=None,
                    help=f"sluiced's control socket (default ${SOCKET_ENV}, else "
                         f"{DEFAULT_SOCKET})")
    ap.add_argument("--json", action="store_true", default=False,
                    help="print the daemon's result as JSON (also accepted after the verb)")
    ap.add_argument("--timeout", metavar="S", type=_timeout, default=None,
                    help=f"seconds to wait for the daemon, 0 for ever (default "
                         f"{DEFAULT_TIMEOUT:g}; {ADD_PORT_TIMEOUT:g} for add-port)")
    ap.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = ap.add_subparsers(title="verbs", metavar="VERB", required=True)
    for verb in VERBS:
        _add_verb(sub, verb)
    return ap


def build_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The JSON-RPC method and named params for parsed ARGS. Arguments left out are not
    sent; options with a default (add-switch --mode) always are."""
    verb = find_verb(args.verb)
    params = {a.dest: getattr(args, a.dest) for a in verb.args
              if getattr(args, a.dest, None) is not None}
    return verb.name, verb.convert(params) if verb.convert else params


def resolve_socket(option: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The socket to use and where it came from: --socket, then $SLUICE_SOCKET (if not
    empty), then the default."""
    if option:
        return option, "given by --socket"
    if environ.get(SOCKET_ENV):
        return environ[SOCKET_ENV], f"from ${SOCKET_ENV}"
    return DEFAULT_SOCKET, "the default socket"


# ---- output ----

def cell(value: object) -> str:
    """VALUE as a table cell: None is '-'."""
    return "-" if value is None else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Collection[int] = (),
          indent: str = "") -> str:
    """A plain text table, columns two spaces apart; columns in RIGHT (numbers) are
    right-aligned, header included. Trailing blanks are cut."""
    text_rows = [[cell(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in text_rows) for i in range(len(headers))]
    lines = []
    for row in text_rows:
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)


def format_version(r: Mapping[str, Any]) -> str:
    return (f"sluiced {r.get('version', '?')} ({r.get('dpdk', 'DPDK ?')}, "
            f"protocol {r.get('protocol', '?')})")


def format_switches(switches: Sequence[Mapping[str, Any]]) -> str:
    if not switches:
        return "no switches"
    rows = [[s.get("name"), s.get("mode"), ",".join(s.get("ports") or []) or None]
            for s in switches]
    return table(["switch", "mode", "ports"], rows)


def format_ports(ports: Sequence[Mapping[str, Any]]) -> str:
    if not ports:
        return "no ports"
    rows = [[p.get("name"), p.get("switch"), p.get("id"), p.get("kind"), p.get("link"),
             p.get("peer"), p.get("worker"), p.get("mac"), p.get("spec")] for p in ports]
    return table(["port", "switch", "id", "kind", "link", "peer", "worker", "mac", "spec"],
                 rows, right={2, 6})


def busy_percent(worker: Mapping[str, Any]) -> str:
    """The share of a worker's cycles spent on packets, e.g. '12.5%'; '-' before any."""
    busy, idle = worker.get("busy_cycles"), worker.get("idle_cycles")
    if not isinstance(busy, int) or not isinstance(idle, int) or busy + idle <= 0:
        return "-"
    return f"{100.0 * busy / (busy + idle):.1f}%"


def format_workers(workers: Sequence[Mapping[str, Any]], indent: str = "") -> str:
    """One row per worker; `stalls` counts grace periods it held up past the bound, and
    `stuck` says it has not moved since the last one."""
    rows = [[w.get("id"), w.get("lcore"), w.get("packets"), w.get("loops"), busy_percent(w),
             w.get("stalls", 0), "STUCK" if w.get("stuck") else "-"]
            for w in workers]
    return table(["worker", "lcore", "packets", "loops", "busy", "stalls", "stuck"], rows,
                 right={0, 1, 2, 3, 4, 5}, indent=indent)


def format_fdb(r: Mapping[str, Any]) -> str:
    """fdb-show: one row per address, by port, VLAN and MAC."""
    entries = sorted(r.get("entries") or [],
                     key=lambda e: (str(e.get("port")), e.get("vlan", 0), str(e.get("mac"))))
    if not entries:
        return f"switch {r.get('switch')}: no addresses"
    rows = [[e.get("port"), e.get("vlan"), e.get("mac"),
             e.get("age") if e.get("type") == "dynamic" else None, e.get("type")]
            for e in entries]
    return table(["port", "vlan", "mac", "age", "type"], rows, right={1, 3})


def format_learn_settings(s: Mapping[str, Any]) -> list[str]:
    """A learn switch's aging, table and per-port VLAN settings, for `show`."""
    reserved = "forwarded" if s.get("forward_reserved") else "dropped"
    out = [f"    aging {s.get('aging')} s, {s.get('entries')} of {s.get('max_entries')} "
           f"addresses, reserved multicast {reserved}"]
    rows = []
    for name, p in (s.get("port_settings") or {}).items():
        vlans = (f"access {p.get('tag')}" if p.get("vlan_mode") == "access" else
                 "trunk " + (p["trunks"] if isinstance(p.get("trunks"), str) else
                             ",".join(str(v) for v in p.get("trunks") or []) or "none"))
        rows.append([name, vlans, p.get("learn_limit") or None, p.get("storm_pps") or None,
                     p.get("entries")])
    if rows:
        out.append(table(["port", "vlans", "learn limit", "storm pps", "learned"], rows,
                         right={2, 3, 4}, indent="    "))
    return out



def counted(n: object, noun: str) -> str:
    """N NOUN, in the plural unless N is 1 ("1 group", "3 groups")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

def format_show(r: Mapping[str, Any]) -> str:
    """Like `ovs-vsctl show`: the daemon, each switch with its ports and links, the workers."""
    version = r.get("version")
    out = [format_version(version) if isinstance(version, Mapping) else "sluiced"]
    switches = r.get("switches") or []
    if not switches:
        out.append("no switches")
    for s in switches:
        ports = s.get("ports") or []
        count = f"{len(ports)} port{'' if len(ports) == 1 else 's'}" if ports else "no ports"
        out.append(f"switch {s.get('name')}: mode {s.get('mode')}, {count}")
        if ports and s.get("mode") == "flow":     # rules may name ports by number
            rows = [[p.get("name"), p.get("id"), p.get("ofport"), p.get("kind"), p.get("link"),
                     p.get("of_config") or "-", p.get("mtu"), p.get("worker"), p.get("spec")]
                    for p in ports]
            out.append(table(["port", "id", "ofport", "kind", "link", "of_config", "mtu",
                              "worker", "spec"], rows, right={1, 2, 6, 7}, indent="    "))
        elif ports:
            rows = [[p.get("name"), p.get("id"), p.get("kind"), p.get("link"), p.get("mtu"),
                     p.get("peer"), p.get("worker"), p.get("spec")] for p in ports]
            out.append(table(["port", "id", "kind", "link", "mtu", "peer", "worker", "spec"],
                             rows, right={1, 4, 6}, indent="    "))
        out.extend(format_tunnel(p) for p in ports if p.get("tunnel"))
        if ports and "links" in s:
            links = ", ".join(" <-> ".join(str(x) for x in link) for link in s["links"])
            out.append(f"    links: {links or 'none'}")
        if s.get("mode") == "learn":
            out.extend(format_learn_settings(s))
        if s.get("mode") == "flow":
            cache, queue = s.get("cache") or {}, s.get("controller_queue") or {}
            mf = s.get("megaflows") or {}
            out.append(f"    {counted(s.get('rules'), 'rule')} in "
                       f"{counted(s.get('subtables'), 'subtable')}, "
                       f"{counted(s.get('groups'), 'group')}, "
                       f"{counted(s.get('meters'), 'meter')}; cache "
                       f"{cache.get('hits')} hits, {cache.get('misses')} misses; "
                       f"megaflows {mf.get('hits')} hits, {mf.get('misses')} misses, "
                       f"{counted(mf.get('masks'), 'mask')}; "
                       f"controller queue {queue.get('queued')} queued, "
                       f"{queue.get('full')} lost when full")
            if s.get("openflow"):
                out.append("    " + format_openflow(s["openflow"]))
    workers = r.get("workers") or []
    out.append(format_workers(workers) if workers else "no workers")
    if r.get("pools"):
        out.append(format_pools(r["pools"]))
    return "\n".join(out)


def format_openflow(of: Mapping[str, Any]) -> str:
    """A flow switch's OpenFlow settings and connections, on one line."""
    status = of.get("status") or {}
    conns = {c.get("target"): c for c in status.get("connections") or []}
    targets = []
    for t in of.get("targets") or []:
        c = conns.get(t)
        state = ("no agent" if c is None else
                 f"connected, {c.get('role')}" if c.get("connected") else
                 "connecting" + (f" ({c['error']})" if c.get("error") else ""))
        targets.append(f"{t} ({state})")
    return (f"openflow: datapath {of.get('datapath_id')}, fail mode {of.get('fail_mode')}, "
            f"controllers: {', '.join(targets) or 'none'}")


def format_tunnel(p: Mapping[str, Any]) -> str:
    """A vxlan port's tunnel (docs/ports.md, VXLAN): its underlay, VNI and next hop."""
    t = p["tunnel"]
    hop = (f"next hop {t.get('remote_mac')} ({t.get('remote_mac_from')})"
           if t.get("remote_mac") else "next hop unknown (asking by ARP: link down)")
    return f"    tunnel {p.get('name')}: over {t.get('underlay')}, VNI {t.get('vni')}, {hop}"


def format_pools(pools: Sequence[Mapping[str, Any]]) -> str:
    """The mbuf pools: size, buffers in use (ports' rings hold some at all times), what the
    ports reserved, and allocations that failed (the pool was empty)."""
    rows = [[p.get("name"), p.get("socket"), p.get("size"), p.get("in_use"),
             p.get("reserved"), p.get("alloc_failures")] for p in pools]
    return table(["pool", "socket", "size", "in use", "reserved", "alloc failures"], rows,
                 right={1, 2, 3, 4, 5})


STATS_COLUMNS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "forwarded", "dropped",
                 "rx_missed", "flood_tx_dropped", "flood_to_removed")
STATS_HEADERS = ("rx pkts", "rx bytes", "tx pkts", "tx bytes", "forwarded", "dropped",
                 "rx missed", "flood lost", "flood to gone")


def nonzero_drops(drops: Mapping[str, int], order: Sequence[str] = ()) -> str:
    """The drop reasons that are not zero, 'tx_full=12 link_down=3', in ORDER (the
    protocol's drop_reasons) and then any other; '-' when there are none."""
    names = [n for n in order if n in drops] + [n for n in drops if n not in order]
    return " ".join(f"{n}={drops[n]}" for n in names if drops[n]) or "-"


def accounting_check(switch: str, ports: Sequence[Mapping[str, Any]]) -> str:
    """The line that says whether rx = forwarded + dropped holds for the switch's ports,
    and if not by how much and on which ports; also flags a port whose drop reasons do
    not add up to its dropped count."""
    rx, fwd, dropped = (sum(int(p.get(k) or 0) for p in ports)
                        for k in ("rx_packets", "forwarded", "dropped"))
    diff = rx - fwd - dropped
    line = f"accounting {switch}: rx {rx} "
    if diff == 0:
        line += f"= forwarded {fwd} + dropped {dropped}: OK"
    else:
        off = [f"{p.get('name')} {d:+d}" for p in ports
               if (d := int(p.get("rx_packets") or 0) - int(p.get("forwarded") or 0)
                   - int(p.get("dropped") or 0))]
        line += (f"!= forwarded {fwd} + dropped {dropped}: differs by {diff:+d} "
                 f"({', '.join(off)}); expected only while traffic flows")
    odd = [str(p.get("name")) for p in ports
           if isinstance(p.get("drops"), Mapping)
           and sum(p["drops"].values()) != int(p.get("dropped") or 0)]
    if odd:
        line += f"; drop reasons do not add up to dropped on {', '.join(odd)}"
    return line


def format_stats(r: Mapping[str, Any]) -> str:
    """One table per switch (a row per port and a total row), then its accounting check."""
    order = r.get("drop_reasons") or ()
    out: list[str] = []
    for s in r.get("switches") or []:
        name, ports = s.get("name"), s.get("ports") or []
        out.append(f"switch {name} (mode {s.get('mode')})")
        if not ports:
            out.append("no ports")
            continue
        rows = [[p.get("name"), *(p.get(k) for k in STATS_COLUMNS),
                 nonzero_drops(p.get("drops") or {}, order)] for p in ports]
        total_drops: dict[str, int] = {}
        for p in ports:
            for reason, n in (p.get("drops") or {}).items():
                total_drops[reason] = total_drops.get(reason, 0) + n
        rows.append(["(total)", *(sum(int(p.get(k) or 0) for p in ports)
                                  for k in STATS_COLUMNS),
                     nonzero_drops(total_drops, order)])
        out.append(table(["port", *STATS_HEADERS, "drops"], rows,
                         right=range(1, len(STATS_COLUMNS) + 1)))
        out.append(accounting_check(str(name), ports))
        learn = s.get("learn")
        if isinstance(learn, Mapping):
            counts = " ".join(f"{k}={v}" for k, v in learn.items())
            out.append(f"learning: {s.get('entries')} addresses; {counts}")
        out.append("")
    return "\n".join(out).rstrip() or "no switches"


def format_result(verb: str, result: Json) -> str:
    """RESULT of VERB as text for people; '' for verbs that have nothing to say on success
    (del-switch, del-port, patch, unpatch, clear-stats)."""
    match find_verb(verb).name:
        case "version":
            return format_version(result)
        case "list-switches":
            return format_switches(result)
        case "list-ports":
            return format_ports(result)
        case "show":
            return format_show(result)
        case "stats":
            return format_stats(result)
        case "add-switch":
            return f"switch {result.get('name')}: created, mode {result.get('mode')}"
        case "fdb-show":
            return format_fdb(result)
        case "fdb-flush":
            return f"{result.get('flushed')} learned entries deleted"
        case "dump-flows":
            return ctl_flow.format_flows(result)
        case "dump-groups":
            return ctl_flow.format_groups(result)
        case "dump-meters":
            return ctl_flow.format_meters(result)
        case "trace":
            return ctl_flow.format_trace(result)
        case "packet-ins":
            return ctl_flow.format_packet_ins(result)
        case "flows-removed":
            return ctl_flow.format_removed(result)
        case "show-rxqs" | "set-rebalance":
            return ctl_rxq.format_rxqs(result) if "rxqs" in result else \
                ctl_rxq.format_settings(result)
        case "set-rxq":
            return (f"port {result.get('port')} queue {result.get('queue')}: worker "
                    f"{result.get('worker')}{' (pinned)' if result.get('pinned') else ''}")
        case "rebalance":
            return ctl_rxq.format_rebalance(result)
        case "get-controller":
            return format_openflow(result)
        case "add-flows" | "add-flow":
            return f"{result.get('added')} rule(s) added"
        case "replace-flows":
            return f"rule set replaced: {result.get('rules')} rule(s)"
        case "del-flows":
            return f"{result.get('deleted')} rule(s) deleted"
        case "mod-flows":
            return f"{result.get('modified')} rule(s) modified"
        case "add-port":
            return (f"port {result.get('name')}: created on {result.get('switch')}, number "
                    f"{result.get('id')}, {result.get('kind')}, link {result.get('link')}")
        case _:
            return ""


# ---- running ----

def unreachable_hint(e: ConnectError, origin: str, verb: str = "") -> str:
    """What to check when no answer came: depends on where it failed (E.stage). ORIGIN says
    where the socket's path came from; VERB is the request's."""
    match e.stage:
        case "answer":
            return f"is that sluiced's socket ({origin})?"
        case "timeout" if verb == "add-port":
            return ("the port may still be setting up (a virtio-user or vhost-user port can "
                    "wait for its peer, up to sluiced's --port-setup-timeout); see "
                    "'sluicectl list-ports' and sluiced's log, or wait longer with "
                    "--timeout S.")
        case "timeout":
            return "is sluiced stuck? See its log, or wait longer with --timeout S."
        case "lost":
            return "did sluiced stop or crash? See its log."
        case _:
            return (f"is sluiced running, and on that socket ({origin})? Name another with "
                    f"--socket PATH or ${SOCKET_ENV}.")


def execute(args: argparse.Namespace, transport: Transport, origin: str,
            stdout: TextIO, stderr: TextIO) -> int:
    """Sends the request ARGS describe through TRANSPORT, prints the answer, returns the
    exit status. ORIGIN says where the socket's path came from, for messages."""
    try:
        method, params = build_request(args)
    except ValueError as e:
        print(f"usage: {PROG} {args.verb} ... ('{PROG} {args.verb} --help' has the "
              f"arguments)\n{PROG} {args.verb}: error: {e}", file=stderr)
        return Exit.USAGE
    local = find_verb(method).local
    try:
        if local is not None:
            return local(params, transport, stdout, stderr)
        result = transport(method, params)
    except RpcError as e:
        print(f"{PROG}: error: {e.message} (code {e.code})", file=stderr)
        return Exit.ERROR
    except ConnectError as e:
        print(f"{PROG}: {e}; {unreachable_hint(e, origin, args.verb)}", file=stderr)
        return Exit.UNREACHABLE
    if args.json:
        text = json.dumps(result, indent=2)
    else:
        try:
            text = format_result(method, result)
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            print(f"{PROG}: warning: the answer to '{method}' is not shaped as "
                  f"docs/protocol.md says ({type(e).__name__}: {e}); here it is as JSON",
                  file=stderr)
            text = json.dumps(result, indent=2)
    if text:
        print(text, file=stdout)
    return Exit.OK


def parse_argv(argv: Sequence[str] | None) -> argparse.Namespace:
    """ARGV parsed. argparse (3.11) gives an optional positional nothing when an option
    stands between it and the positionals before it, so `del-flows br0 --strict RULE` would
    leave RULE over: what is left over fills such positionals, in order."""
    parser = make_parser()
    args, extra = parser.parse_known_args(argv)
    verb = next((v for v in VERBS if v.name == getattr(args, "verb", None)), None)
    for a in verb.args if verb is not None else ():
        if (extra and a.optional and a.option is None and a.nargs is None
                and getattr(args, a.dest, None) is None and not extra[0].startswith("-")):
            word = extra.pop(0)
            try:
                setattr(args, a.dest, a.type(word) if a.type is not None else word)
            except (TypeError, ValueError):
                parser.error(f"argument {a.metavar or a.dest}: invalid value: {word!r}")
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """sluicectl: parse ARGV (default sys.argv[1:]), run one request, return the exit
    status."""
    try:
        args = parse_argv(argv)
    except SystemExit as e:        # --help, --version (0) or a usage error (2)
        return Exit.OK if e.code in (0, None) else Exit.USAGE
    path, origin = resolve_socket(args.socket, os.environ)
    timeout: float | None = args.timeout
    if timeout is None:
        timeout = ADD_PORT_TIMEOUT if args.verb == "add-port" else DEFAULT_TIMEOUT
    timeout = timeout or None

    class SocketTransport:
        """One request a connection; connect() opens one to keep (sluiced's own
        captures)."""

        def __call__(self, method: str, params: Mapping[str, Any]) -> Json:
            with RpcClient(path, timeout) as rpc:
                return rpc.request(method, params)

        def connect(self) -> RpcClient:
            return RpcClient(path, timeout)

    transport = SocketTransport()

    try:
        return execute(args, transport, origin, sys.stdout, sys.stderr)
    except BrokenPipeError:        # e.g. `sluicectl show | head -1`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return Exit.OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
