"""Rule sets for the rule-programmable switches: one list, written once, loaded into each.

sluice's flow mode and OVS read the same lines (ovs-ofctl syntax, ports by OpenFlow number:
a topology's link I is port I + 1 in both, the order the adapters add ports), so
`ovs-dpdk:flows` and `sluice:flow` always run the very same rules; VPP's ACL plugin gets
them translated (`vpp_acl_rules`).

A rule set is
- steering, at priority 1 (the lowest used): `in_port=A,actions=output:B` for each pair
  both ways (`pair_rules`, as `ovs-dpdk:flows` always had), or one `actions=normal`
  (`normal_rules`: learning-bridge forwarding, as `ovs-dpdk:normal`);
- optionally an ACL (`acl_rules`): N ACL-like 5-tuple rules (protocol, source and
  destination prefix, source and destination port under a prefix mask) over K distinct
  masks, generated from a seed, at priorities 2..N+1 above the steering (past 65,534 rules
  priorities repeat). They are deny
  rules that sluice-gen's traffic never matches (it sends UDP to port 1024, and every
  rule's destination-port match excludes 1024), so all traffic passes to the steering rule
  below them, and a classifier has to rule out every one of them: the default-allow
  firewall case, the costly one for a tuple-space search. Their addresses overlap the
  traffic's (10.0.0.0/8), so prefix tries cannot skip them on addresses alone.

`firewall_rules` restricts an ACL to one input port: chain-mixed's firewall stage between
its L3 and L2 VNFs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

STEER_PRIORITY = 1
ACL_BASE_PRIORITY = 2
MAX_RULES = 100_000          # one ACL's rules (control-plane bench: larger lists of its own)
DEFAULT_MASKS = 16
DEFAULT_SEED = 1
FIREWALL_RULES = 100         # chain-mixed's firewall when --rules is not given
GEN_DST_PORT = 1024          # sluice-gen's UDP destination port (tools/gen/traffic.c)

# Prefix lengths a mask may take per field (0: the field is wildcarded).
_SRC_LENS = (0, 8, 12, 16, 20, 24, 28, 32)
_DST_LENS = (0, 8, 12, 16, 20, 24, 28, 32)
_SPORT_BITS = (0, 4, 8, 12, 16)
_DPORT_BITS = (1, 4, 6, 8, 12, 16)     # never 0: the destination port keeps traffic out


@dataclass(frozen=True)
class Mask:
    """Which bits of the 5-tuple a rule matches: prefix lengths of the addresses, prefix
    bits of the ports (the protocol is always matched exactly)."""

    src_len: int
    dst_len: int
    sport_bits: int
    dport_bits: int


@dataclass(frozen=True)
class AclRule:
    """One ACL rule: a priority, a protocol, two prefixes, two ports under prefix masks."""

    priority: int
    proto: str                 # udp or tcp
    src: int                   # address (host order), already masked
    src_len: int
    dst: int
    dst_len: int
    sport: int
    sport_bits: int
    dport: int
    dport_bits: int

    def match(self) -> str:
        """The rule's match in ovs-ofctl syntax (no priority, no in_port)."""
        parts = [self.proto]
        if self.src_len:
            parts.append(f"nw_src={_ip(self.src)}/{self.src_len}")
        if self.dst_len:
            parts.append(f"nw_dst={_ip(self.dst)}/{self.dst_len}")
        if self.sport_bits:
            parts.append(f"tp_src={_port_match(self.sport, self.sport_bits)}")
        parts.append(f"tp_dst={_port_match(self.dport, self.dport_bits)}")
        return ",".join(parts)

    def line(self, in_port: int | None = None, action: str = "drop") -> str:
        """The rule as one ovs-ofctl / sluicectl line."""
        port = f"in_port={in_port}," if in_port is not None else ""
        return f"priority={self.priority},{port}{self.match()},actions={action}"

    def matches(self, proto: str, src: int, dst: int, sport: int, dport: int) -> bool:
        """Whether a packet of this 5-tuple matches (for tests and checks)."""
        return (proto == self.proto and _pre(src, self.src_len, 32) == self.src
                and _pre(dst, self.dst_len, 32) == self.dst
                and _pre(sport, self.sport_bits, 16) == self.sport
                and _pre(dport, self.dport_bits, 16) == self.dport)


def _pre(value: int, bits: int, width: int) -> int:
    return value & (((1 << bits) - 1) << (width - bits)) if bits else 0


def _ip(v: int) -> str:
    return ".".join(str(v >> s & 0xff) for s in (24, 16, 8, 0))


def _port_match(value: int, bits: int) -> str:
    if bits == 16:
        return str(value)
    return f"0x{value:04x}/0x{((1 << bits) - 1) << (16 - bits):04x}"


def capacity(m: Mask) -> int:
    """How many distinct rules mask M can hold (two protocols, addresses inside 10/8, a
    destination port other than sluice-gen's)."""
    return (2 << max(0, m.src_len - 8) << max(0, m.dst_len - 8) << m.sport_bits) * (
        (1 << m.dport_bits) - 1)


def masks(k: int, rng: random.Random, per_mask: int = 1) -> list[Mask]:
    """K distinct masks drawn with RNG, each with room for 4 x PER_MASK distinct rules (so
    that drawing them at random stays quick)."""
    space = [Mask(s, d, sp, dp) for s in _SRC_LENS for d in _DST_LENS
             for sp in _SPORT_BITS for dp in _DPORT_BITS]
    return rng.sample([m for m in space if capacity(m) >= 4 * per_mask], k)


def acl(n: int, n_masks: int = DEFAULT_MASKS, seed: int = DEFAULT_SEED) -> list[AclRule]:
    """N ACL rules over min(N, N_MASKS) distinct masks, the same for the same arguments;
    none matches sluice-gen's traffic (UDP to port GEN_DST_PORT)."""
    if not 0 <= n <= MAX_RULES:
        raise ValueError(f"rules: {n} not in 0..{MAX_RULES}")
    if n == 0:
        return []
    if not 1 <= n_masks <= 64:
        raise ValueError(f"rule masks: {n_masks} not in 1..64")
    rng = random.Random(seed)
    k = min(n, n_masks)
    ms = masks(k, rng, -(-n // k))
    out: list[AclRule] = []
    seen: set[tuple[object, ...]] = set()
    while len(out) < n:
        m = ms[len(out) % len(ms)]
        proto = "udp" if rng.random() < 0.7 else "tcp"
        src = _pre(0x0a000000 | rng.getrandbits(24), m.src_len, 32)
        dst = _pre(0x0a000000 | rng.getrandbits(24), m.dst_len, 32)
        sport = _pre(rng.getrandbits(16), m.sport_bits, 16)
        dport = _pre(rng.getrandbits(16), m.dport_bits, 16)
        if dport == _pre(GEN_DST_PORT, m.dport_bits, 16):
            dport ^= 1 << (16 - m.dport_bits)      # flip the mask's last bit: 1024 is out
        key = (m, proto, src, dst, sport, dport)
        if key in seen:
            continue
        seen.add(key)
        # Priorities 2..65535; past 65534 rules they repeat (on different matches).
        prio = ACL_BASE_PRIORITY + len(out) % (65536 - ACL_BASE_PRIORITY)
        out.append(AclRule(prio, proto, src, m.src_len, dst,
                           m.dst_len, sport, m.sport_bits, dport, m.dport_bits))
    return out


def distinct_masks(rules: Sequence[AclRule]) -> int:
    """How many distinct masks RULES use."""
    return len({(r.src_len, r.dst_len, r.sport_bits, r.dport_bits) for r in rules})


def pair_rules(pairs: Sequence[tuple[int, int]]) -> list[str]:
    """in_port->output rules for link index PAIRS, both ways (OpenFlow port = index + 1)."""
    out = []
    for a, b in pairs:
        out += [f"priority={STEER_PRIORITY},in_port={a + 1},actions=output:{b + 1}",
                f"priority={STEER_PRIORITY},in_port={b + 1},actions=output:{a + 1}"]
    return out


def normal_rules() -> list[str]:
    """One rule that hands every packet to the learning bridge (OVS's NORMAL)."""
    return [f"priority={STEER_PRIORITY},actions=normal"]


def acl_lines(rules: Sequence[AclRule], in_port: int | None = None) -> list[str]:
    """RULES as lines (deny), restricted to IN_PORT (an OpenFlow number) when given."""
    return [r.line(in_port) for r in rules]


def rule_set(steering: Sequence[str], n_acl: int, n_masks: int = DEFAULT_MASKS,
             seed: int = DEFAULT_SEED, acl_in_port: int | None = None) -> list[str]:
    """The whole list a switch loads: the ACL (highest priorities first), then STEERING."""
    return [*acl_lines(sorted(acl(n_acl, n_masks, seed), key=lambda r: -r.priority),
                       acl_in_port), *steering]


@dataclass(frozen=True)
class AclOptions:
    """The ACL a rule-programmable switch loads in a scenario (from Context.extra and the
    topology): N rules over MASKS masks from SEED, at input port IN_PORT (None: any)."""

    n: int
    masks: int = DEFAULT_MASKS
    seed: int = DEFAULT_SEED
    in_port: int | None = None


def options(extra: dict[str, str], firewall: int | None) -> AclOptions:
    """The ACL of a switch: --rules N (Context.extra 'rules') everywhere, and in chain-mixed
    (FIREWALL: the link index of the L3 VNF's output) the firewall stage, N rules or
    FIREWALL_RULES, at that port only."""
    n = int(extra["rules"]) if "rules" in extra else None
    k = int(extra.get("rule_masks", DEFAULT_MASKS))
    seed = int(extra.get("rule_seed", DEFAULT_SEED))
    if firewall is not None:
        return AclOptions(FIREWALL_RULES if n is None else n, k, seed, firewall + 1)
    return AclOptions(n or 0, k, seed)


def lines_for(steering: Sequence[str], opts: AclOptions) -> list[str]:
    """STEERING under the ACL OPTS asks for."""
    return rule_set(steering, opts.n, opts.masks, opts.seed, opts.in_port)


# -- VPP's ACL plugin ---------------------------------------------------------------------

def _port_range(value: int, bits: int) -> str:
    lo = value
    hi = value | ((1 << (16 - bits)) - 1) if bits < 16 else value
    return f"{lo}-{hi}"


def vpp_acl_rule(r: AclRule) -> str:
    """One rule of `set acl-plugin acl`: deny, the prefixes, the protocol, port ranges."""
    src = f"{_ip(r.src)}/{r.src_len}"
    dst = f"{_ip(r.dst)}/{r.dst_len}"
    proto = 17 if r.proto == "udp" else 6
    sport = _port_range(r.sport, r.sport_bits) if r.sport_bits else "0-65535"
    return (f"deny src {src} dst {dst} proto {proto} sport {sport} "
            f"dport {_port_range(r.dport, r.dport_bits)}")


def vpp_acl_rules(rules: Sequence[AclRule]) -> list[str]:
    """RULES for VPP's ACL plugin in first-match order (highest priority first), then the
    permit-all that stands for the steering rule below them."""
    return ([vpp_acl_rule(r) for r in sorted(rules, key=lambda r: -r.priority)]
            + ["permit src 0.0.0.0/0 dst 0.0.0.0/0"])


def for_switch(steering: Sequence[str], extra: dict[str, str], firewall: int | None
               ) -> tuple[list[str], int, int]:
    """What a rule-programmable switch loads in a scenario: the lines, its ACL's rule count
    and distinct masks (Context.extra's rules, rule_masks, rule_seed; FIREWALL from the
    topology)."""
    opts = options(extra, firewall)
    acl_set = acl(opts.n, opts.masks, opts.seed)
    return lines_for(steering, opts), len(acl_set), distinct_masks(acl_set)
