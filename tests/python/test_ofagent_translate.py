"""The agent's translation between OpenFlow 1.3 structures and flow mode's rule text, in
the cases the OpenFlow conformance suite (tests/functional/of_conformance.py) found wrong."""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3_parser as parser

from sluice.ofagent.translate import action_text, match_from_text


def test_dump_tos_byte_is_dscp_in_flow_stats() -> None:
    # flow mode dumps ip_dscp=8 as the TOS byte nw_tos=32; flow stats must say ip_dscp=8.
    m = match_from_text("ip,nw_tos=32", {})
    assert dict(m.items()) == {"eth_type": 0x0800, "ip_dscp": 8}
    m = match_from_text("ipv6,nw_tos=252,nw_ecn=3", {})
    assert dict(m.items()) == {"eth_type": 0x86dd, "ip_dscp": 63, "ip_ecn": 3}


def test_set_field_tunnel_id() -> None:
    a = parser.OFPActionSetField(tunnel_id=12345)
    assert action_text(a) == "set_field:0x3039->tun_id"


def test_vlan_pcp_keeps_its_tag_prerequisite() -> None:
    # flow mode dumps vlan_vid=0x1000/0x1000,vlan_pcp=3 as dl_vlan_pcp=3.
    m = match_from_text("dl_vlan_pcp=3", {})
    want = parser.OFPMatch(vlan_vid=(0x1000, 0x1000), vlan_pcp=3)
    assert m.to_jsondict() == want.to_jsondict()
