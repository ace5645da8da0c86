"""sluicectl: the control CLI of sluiced (docs/cli.md).

Each verb is one JSON-RPC method of the same name (docs/protocol.md). Output is a table for
people by default, the daemon's JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from sluice.rpc import ConnectError, RpcClient, RpcError, default_socket

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

Formatter = Callable[[Any], str]


def _verb(sub: argparse._SubParsersAction, name: str, help_text: str, example: str,
          aliases: Sequence[str] = ()) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text, aliases=list(aliases),
                       epilog=f"example: sluicectl {example}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print the daemon's JSON answer")
    p.set_defaults(verb=name)
    return p


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="sluicectl",
        description="Control a running sluiced: switches, ports, links and counters.",
        epilog="Every verb takes --help. The socket is --socket, else $SLUICE_SOCKET, else "
               "/run/sluice/sluiced.sock. Exit status: 0 ok, 1 the daemon refused, "
               "2 usage, 3 daemon unreachable.")
    ap.add_argument("--socket", default=None, help="sluiced's control socket")
    ap.add_argument("--json", action="store_true", help="print the daemon's JSON answer")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (30)")
    sub = ap.add_subparsers(title="verbs", metavar="VERB")
    sub.required = True

    _verb(sub, "version", "versions of sluiced, DPDK and the protocol", "version")
    p = _verb(sub, "add-switch", "create a switch", "add-switch br0 --mode patch")
    p.add_argument("name")
    p.add_argument("--mode", default="patch", help="forwarding function (patch)")
    p = _verb(sub, "del-switch", "delete a switch and all its ports", "del-switch br0")
    p.add_argument("name")
    _verb(sub, "list-switches", "list switches", "list-switches")
    p = _verb(sub, "add-port", "create a port from a spec (docs/ports.md) on a switch",
              "add-port br0 vm1 vhost-user:server,path=/run/sluice/vm1.sock")
    p.add_argument("switch")
    p.add_argument("name")
    p.add_argument("spec", help="KIND:key=value,... e.g. tap:name=sl0")
    p = _verb(sub, "del-port", "delete a port", "del-port br0 vm1")
    p.add_argument("switch")
    p.add_argument("name")
    p = _verb(sub, "patch", "link two ports of a patch switch, both directions",
              "patch br0 vm1 vm2")
    p.add_argument("switch")
    p.add_argument("port1")
    p.add_argument("port2")
    p = _verb(sub, "unpatch", "remove a port's link", "unpatch br0 vm1")
    p.add_argument("switch")
    p.add_argument("port")
    p = _verb(sub, "list-ports", "list ports, of one switch or all", "list-ports br0")
    p.add_argument("switch", nargs="?")
    _verb(sub, "show", "switches, ports, links and workers", "show")
    p = _verb(sub, "stats", "counters and drops by reason, per port", "stats br0 --port vm1",
              aliases=("get-stats",))
    p.add_argument("switch", nargs="?")
    p.add_argument("--port", help="only this port")
    p = _verb(sub, "clear-stats", "zero the counters", "clear-stats br0")
    p.add_argument("switch", nargs="?")
    return ap


def build_request(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The JSON-RPC method and named params for parsed ARGS."""
    verb: str = args.verb
    keys = {
        "version": [], "list-switches": [], "show": [],
        "add-switch": ["name", "mode"], "del-switch": ["name"],
        "add-port": ["switch", "name", "spec"], "del-port": ["switch", "name"],
        "patch": ["switch", "port1", "port2"], "unpatch": ["switch", "port"],
        "list-ports": ["switch"], "stats": ["switch", "port"], "clear-stats": ["switch"],
    }[verb]
    params = {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}
    return verb, params


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A plain text table; columns in RIGHT are right-aligned (numbers)."""
    right = right or set()
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = []
    for row in [headers, *rows]:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_ports(ports: list[dict[str, Any]]) -> str:
    if not ports:
        return "no ports"
    rows = [[p["name"], p["switch"], str(p["id"]), p["kind"], p["link"], p["peer"] or "-",
             str(p["worker"]), p["spec"]] for p in ports]
    return table(["port", "switch", "id", "kind", "link", "peer", "worker", "spec"], rows,
                 {2, 6})


def format_show(r: dict[str, Any]) -> str:
    v = r["version"]
    out = [f"sluiced {v['version']} ({v['dpdk']}, protocol {v['protocol']})"]
    if not r["switches"]:
        out.append("no switches")
    for s in r["switches"]:
        out.append(f"switch {s['name']} (mode {s['mode']}, {len(s['ports'])} ports)")
        for p in s["ports"]:
            peer = f", peer {p['peer']}" if p.get("peer") else ""
            out.append(f"    port {p['name']}: {p['kind']}, link {p['link']}{peer}, "
                       f"mac {p['mac']}, worker {p['worker']}")
            out.append(f"        {p['spec']}")
        for a, b in s.get("links", []):
            out.append(f"    link {a} <-> {b}")
    for w in r["workers"]:
        total = w["busy_cycles"] + w["idle_cycles"]
        busy = 100.0 * w["busy_cycles"] / total if total else 0.0
        out.append(f"worker {w['id']}: cpu {w['cpu']}, {w['rx_queues']} rx queues, "
                   f"{w['packets']} packets, busy {busy:.1f}%")
    return "\n".join(out)


def _drops(p: dict[str, Any]) -> str:
    d = [f"{k}={v}" for k, v in p["drops"].items() if v]
    return " ".join(d) or "-"


def format_stats(r: dict[str, Any]) -> str:
    out = []
    for s in r["switches"]:
        rows = [[p["name"], str(p["rx_packets"]), str(p["rx_bytes"]), str(p["tx_packets"]),
                 str(p["tx_bytes"]), str(p["forwarded"]), str(p["dropped"]),
                 str(p["rx_missed"]), _drops(p)] for p in s["ports"]]
        rows.append(["(total)", str(s["rx_packets"]), "", str(s["tx_packets"]), "",
                     str(s["forwarded"]), str(s["dropped"]), "", _drops(s)])
        out.append(f"switch {s['name']} (mode {s['mode']})")
        out.append(table(["port", "rx pkts", "rx bytes", "tx pkts", "tx bytes", "forwarded",
                          "dropped", "rx missed", "drops"], rows, set(range(1, 8))))
        diff = s["rx_packets"] - s["forwarded"] - s["dropped"]
        out.append("accounting: rx = forwarded + dropped: "
                   + ("OK" if diff == 0 else f"differs by {diff} (traffic still flowing?)"))
        out.append("")
    return "\n".join(out).rstrip() or "no switches"


def format_result(verb: str, result: Any) -> str:
    formatters: dict[str, Formatter] = {
        "version": lambda r: f"sluiced {r['version']} ({r['dpdk']}, protocol {r['protocol']})",
        "list-switches": lambda r: table(
            ["switch", "mode", "ports"],
            [[s["name"], s["mode"], ",".join(s["ports"]) or "-"] for s in r])
        if r else "no switches",
        "list-ports": format_ports,
        "show": format_show,
        "stats": format_stats,
        "add-switch": lambda r: f"switch {r['name']} created (mode {r['mode']})",
        "add-port": lambda r: f"port {r['name']} created: number {r['id']}, {r['kind']}, "
                              f"link {r['link']}",
    }
    fmt = formatters.get(verb)
    return fmt(result) if fmt else ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    method, params = build_request(args)
    try:
        with RpcClient(args.socket or default_socket(), args.timeout) as rpc:
            result = rpc.call(method, **params)
    except ConnectError as e:
        print(f"sluicectl: {e}; is sluiced running (or is --socket right)?", file=sys.stderr)
        return EXIT_UNREACHABLE
    except RpcError as e:
        print(f"sluicectl: error: {e.message} (code {e.code})", file=sys.stderr)
        return EXIT_ERROR
    text = json.dumps(result, indent=2) if args.json else format_result(args.verb, result)
    if text:
        print(text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
