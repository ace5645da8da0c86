/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's packet modifications (flow_mod.h). Each function first finds the headers the
 * way flow_key_extract() does (same tags, same validity checks, same bounds), then changes
 * bytes in place and patches each checksum that covers them with RFC 1624's equation 3,
 * HC' = ~(~HC + ~m + m'), one 16-bit word at a time: no checksum is recomputed from
 * scratch but SCTP's CRC32c, which has no cheap incremental form.
 */
#include <string.h>

#include "flow_mod.h"

#define ETH_HLEN 14
#define TAG_HLEN 4

#define ET_IPV4 0x0800
#define ET_ARP 0x0806
#define ET_VLAN 0x8100
#define ET_QINQ 0x88a8
#define ET_IPV6 0x86dd

#define PROTO_ICMP 1
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ICMPV6 58
#define PROTO_SCTP 132

/* IPv6 extension headers skipped on the way to L4, and how many at most (flow_key.c too). */
#define IPV6_EXT_MAX 8
#define IPV6_EXT_MASK ((1ULL << 0) | (1ULL << 43) | (1ULL << 44) | (1ULL << 60))

static inline uint16_t ld_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void st_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Where a frame's headers are; an offset of 0 means "not there". */
struct fm_hdrs {
	uint32_t l3;               /* IPv4 or IPv6 header (a whole valid one) */
	uint32_t l4;               /* L4 header of a first (or no) fragment */
	uint32_t end;              /* end of the IP packet within the frame */
	uint8_t ipv6;
	uint8_t proto;             /* L4 protocol at L4 */
	uint8_t whole;             /* the whole IP packet (by its length) is in the frame */
	uint8_t rh_dst;            /* IPv6: a routing header with segments left: the L4
				    * pseudo-header's destination is not the header's */
	uint8_t deep;              /* IPv6: L4 behind more than IPV6_EXT_MAX extension headers,
				    * which extraction does not reach: its checksum is kept
				    * right, its ports are not set */
};

/*
 * The L3 offset of a frame and its EtherType (after up to two tags and 802.3 SNAP), or 0.
 * flow_key_extract() reads one tag; the second is for frames the switch itself pushed a tag
 * onto: a push_vlan on a tagged packet followed by a change of its IP or L4 header (the
 * action set's order puts push before dec_ttl and set_field) must still find that header.
 * A received double-tagged frame is never asked for such a change: its key is not IP.
 */
static uint32_t fm_l3(const uint8_t *data, uint32_t len, uint16_t *type)
{
	uint32_t off = ETH_HLEN;
	unsigned int tags;
	uint16_t t;

	if (len < ETH_HLEN)
		return 0;
	t = ld_be16(data + 12);
	for (tags = 0; tags < 2 && (t == ET_VLAN || t == ET_QINQ) &&
	     len >= off + TAG_HLEN; tags++) {
		t = ld_be16(data + off + 2);
		off += TAG_HLEN;
	}
	if (t < 0x600) {
		/* 802.3: only LLC/SNAP with OUI 0 carries an EtherType (as flow_key.c). */
		static const uint8_t snap[6] = { 0xaa, 0xaa, 0x03, 0, 0, 0 };

		if (len - off < 8 || memcmp(data + off, snap, 6) != 0 ||
		    ld_be16(data + off + 6) < 0x600)
			return 0;
		t = ld_be16(data + off + 6);
		off += 8;
	}
	*type = t;
	return off;
}

/* Finds the IP and L4 headers (struct fm_hdrs); returns false for a frame without a valid
 * IP header. */
static bool fm_find(const uint8_t *data, uint32_t len, struct fm_hdrs *h)
{
	uint16_t type = 0;
	uint32_t l3 = fm_l3(data, len, &type), avail, plen;
	const uint8_t *ip;

	memset(h, 0, sizeof(*h));
	if (l3 == 0)
		return false;
	ip = data + l3;
	avail = len - l3;
	if (type == ET_IPV4) {
		uint32_t ihl, tot;

		if (avail < 20 || (ip[0] & 0xf0) != 0x40)
			return false;
		ihl = (ip[0] & 0x0fu) * 4;
		if (ihl < 20 || ihl > avail)
			return false;
		h->l3 = l3;
		tot = ld_be16(ip + 2);
		h->whole = tot <= avail;
		if (tot < ihl)
			return true;
		h->end = l3 + (tot < avail ? tot : avail);
		if (ld_be16(ip + 6) & 0x1fff)
			return true;
		h->l4 = l3 + ihl;
		h->proto = ip[9];
		return true;
	}
	if (type == ET_IPV6) {
		uint32_t p = 40, end, i;
		uint8_t nh;

		if (avail < 40 || (ip[0] & 0xf0) != 0x60)
			return false;
		h->l3 = l3;
		h->ipv6 = 1;
		plen = 40u + ld_be16(ip + 4);
		h->whole = plen <= avail;
		end = plen < avail ? plen : avail;
		h->end = l3 + end;
		nh = ip[6];
		/* Bounded by the packet's length (8 bytes a header at least), not by a count. */
		for (i = 0;; i++) {
			if (nh >= 64 || !((IPV6_EXT_MASK >> nh) & 1))
				break;
			if (end - p < 8)
				return true;
			if (nh == 44) {
				if (ld_be16(ip + p + 2) & 0xfff8)
					return true;
				nh = ip[p];
				p += 8;
				continue;
			}
			if (nh == 43 && ip[p + 3] != 0)
				h->rh_dst = 1;
			if (((uint32_t)ip[p + 1] + 1) * 8 > end - p)
				return true;
			nh = ip[p];
			p += ((uint32_t)ip[p + 1] + 1) * 8;
		}
		h->deep = i > IPV6_EXT_MAX;
		h->l4 = l3 + p;
		h->proto = nh;
		return true;
	}
	return false;
}

/* Replaces the N (even) bytes OLD with NEW in the sum of checksum field CS (RFC 1624). */
static void csum_replace(uint8_t *cs, const uint8_t *old, const uint8_t *new, uint32_t n)
{
	uint32_t sum = (uint16_t)~ld_be16(cs), i;

	for (i = 0; i < n; i += 2)
		sum += (uint16_t)~ld_be16(old + i) + (uint32_t)ld_be16(new + i);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	st_be16(cs, (uint16_t)~sum);
}

/* The L4 checksum field covering the pseudo-header, or NULL (none, not in the frame, or a
 * UDP checksum of 0). */
static uint8_t *l4_pseudo_csum(uint8_t *data, const struct fm_hdrs *h, bool *udp)
{
	uint32_t room = h->end - h->l4, at;

	*udp = false;
	if (h->l4 == 0)
		return NULL;
	switch (h->proto) {
	case PROTO_TCP:
		at = 16;
		break;
	case PROTO_UDP:
		at = 6;
		*udp = true;
		break;
	case PROTO_ICMPV6:
		if (!h->ipv6)
			return NULL;
		at = 2;
		break;
	default:
		return NULL;
	}
	if (room < at + 2)
		return NULL;
	if (*udp && ld_be16(data + h->l4 + at) == 0)
		return NULL;
	return data + h->l4 + at;
}

/* Writes N bytes NEW over the field at FIELD, which a pseudo-header and IPV4_CS (or NULL)
 * cover, fixing both checksums. */
static void replace_addr(uint8_t *data, const struct fm_hdrs *h, uint8_t *field,
			 const uint8_t *new, uint32_t n, uint8_t *ipv4_cs, bool pseudo)
{
	uint8_t old[16];
	uint8_t *cs;
	bool udp;

	memcpy(old, field, n);
	memcpy(field, new, n);
	if (ipv4_cs != NULL)
		csum_replace(ipv4_cs, old, new, n);
	cs = pseudo ? l4_pseudo_csum(data, h, &udp) : NULL;
	if (cs != NULL) {
		csum_replace(cs, old, new, n);
		if (udp && ld_be16(cs) == 0)
			st_be16(cs, 0xffff);
	}
}

/* Recomputes an SCTP packet's CRC32c, when all of it is in the frame. */
static void sctp_fix(uint8_t *data, const struct fm_hdrs *h)
{
	uint8_t *s = data + h->l4;
	uint32_t crc;

	if (!h->whole)
		return;
	memset(s + 8, 0, 4);
	crc = flow_sctp_crc32c(s, h->end - h->l4);
	s[8] = (uint8_t)crc;
	s[9] = (uint8_t)(crc >> 8);
	s[10] = (uint8_t)(crc >> 16);
	s[11] = (uint8_t)(crc >> 24);
}

/* TP_SRC (AT 0) or TP_DST (AT 2) of a TCP, UDP or SCTP header found whole. */
static int set_port(uint8_t *data, uint32_t len, uint32_t at, const uint8_t *value)
{
	struct fm_hdrs h;
	uint32_t need, room;
	uint8_t *l4;

	if (!fm_find(data, len, &h) || h.l4 == 0 || h.deep)
		return -1;
	room = h.end - h.l4;
	l4 = data + h.l4;
	switch (h.proto) {
	case PROTO_TCP:
		need = 20;
		break;
	case PROTO_UDP:
		need = 8;
		break;
	case PROTO_SCTP:
		need = 12;
		break;
	default:
		return -1;
	}
	if (room < need)
		return -1;
	if (h.proto == PROTO_SCTP) {
		memcpy(l4 + at, value, 2);
		sctp_fix(data, &h);
	} else {
		uint8_t *cs = l4 + (h.proto == PROTO_TCP ? 16 : 6);
		bool zero = h.proto == PROTO_UDP && ld_be16(cs) == 0;
		uint8_t old[2];

		memcpy(old, l4 + at, 2);
		memcpy(l4 + at, value, 2);
		if (!zero) {
			csum_replace(cs, old, value, 2);
			if (h.proto == PROTO_UDP && ld_be16(cs) == 0)
				st_be16(cs, 0xffff);
		}
	}
	return 0;
}

/* Sets the TOS / traffic class byte to (TOS & KEEP) | SET. */
static int set_tos(uint8_t *data, uint32_t len, uint8_t keep, uint8_t set)
{
	struct fm_hdrs h;
	uint8_t *ip;

	if (!fm_find(data, len, &h))
		return -1;
	ip = data + h.l3;
	if (!h.ipv6) {
		uint8_t old[2] = { ip[0], ip[1] };

		ip[1] = (uint8_t)((ip[1] & keep) | set);
		csum_replace(ip + 10, old, ip, 2);
	} else {
		/* Traffic class: the low nibble of byte 0, the high nibble of byte 1. */
		uint8_t tc = (uint8_t)((ip[0] << 4) | (ip[1] >> 4));

		tc = (uint8_t)((tc & keep) | set);
		ip[0] = (uint8_t)((ip[0] & 0xf0) | (tc >> 4));
		ip[1] = (uint8_t)((ip[1] & 0x0f) | (uint8_t)(tc << 4));
	}
	return 0;
}

int flow_mod_set_field(uint8_t *data, uint32_t len, enum flow_field f, const uint8_t *value)
{
	struct fm_hdrs h;
	uint8_t *ip;

	switch (f) {
	case FLOW_FIELD_DL_DST:
	case FLOW_FIELD_DL_SRC:
		if (len < ETH_HLEN)
			return -1;
		memcpy(data + (f == FLOW_FIELD_DL_DST ? 0 : 6), value, 6);
		return 0;
	case FLOW_FIELD_VLAN_VID:
	case FLOW_FIELD_VLAN_PCP: {
		uint16_t t, tci;

		if (len < ETH_HLEN + TAG_HLEN)
			return -1;
		t = ld_be16(data + 12);
		if (t != ET_VLAN && t != ET_QINQ)
			return -1;
		tci = ld_be16(data + 14);
		if (f == FLOW_FIELD_VLAN_VID)
			tci = (uint16_t)((tci & 0xf000) | (ld_be16(value) & 0x0fff));
		else
			tci = (uint16_t)((tci & 0x1fff) | (value[0] & 7) << 13);
		st_be16(data + 14, tci);
		return 0;
	}
	case FLOW_FIELD_NW_SRC:
	case FLOW_FIELD_NW_DST:
		if (!fm_find(data, len, &h) || h.ipv6)
			return -1;
		ip = data + h.l3;
		replace_addr(data, &h, ip + (f == FLOW_FIELD_NW_SRC ? 12 : 16), value, 4, ip + 10,
			     true);
		return 0;
	case FLOW_FIELD_IPV6_SRC:
	case FLOW_FIELD_IPV6_DST:
		if (!fm_find(data, len, &h) || !h.ipv6)
			return -1;
		ip = data + h.l3;
		/* With segments left in a routing header, the pseudo-header's destination is
		 * the routing header's last address, which does not change (RFC 8200, 8.1). */
		replace_addr(data, &h, ip + (f == FLOW_FIELD_IPV6_SRC ? 8 : 24), value, 16, NULL,
			     f == FLOW_FIELD_IPV6_SRC || !h.rh_dst);
		return 0;
	case FLOW_FIELD_IPV6_LABEL:
		if (!fm_find(data, len, &h) || !h.ipv6)
			return -1;
		ip = data + h.l3;
		ip[1] = (uint8_t)((ip[1] & 0xf0) | (value[1] & 0x0f));
		ip[2] = value[2];
		ip[3] = value[3];
		return 0;
	case FLOW_FIELD_IP_DSCP:
		return set_tos(data, len, 0x03, (uint8_t)((value[0] & 0x3f) << 2));
	case FLOW_FIELD_IP_ECN:
		return set_tos(data, len, 0xfc, value[0] & 3);
	case FLOW_FIELD_NW_TTL:
		if (!fm_find(data, len, &h))
			return -1;
		ip = data + h.l3;
		if (h.ipv6) {
			ip[7] = value[0];
		} else {
			uint8_t old[2] = { ip[8], ip[9] };

			ip[8] = value[0];
			csum_replace(ip + 10, old, ip + 8, 2);
		}
		return 0;
	case FLOW_FIELD_TP_SRC:
		return set_port(data, len, 0, value);
	case FLOW_FIELD_TP_DST:
		return set_port(data, len, 2, value);
	case FLOW_FIELD_TUN_ID:
	case FLOW_FIELD_COUNT:
		break;
	}
	return -1;
}

int flow_mod_push_vlan(uint8_t **data, uint32_t *len, uint16_t tpid)
{
	uint8_t *d = *data;
	uint16_t t, tci = 0;

	if (*len < ETH_HLEN)
		return -1;
	t = ld_be16(d + 12);
	/* VID and PCP of the outer tag; its DEI is not copied (OVS clears it too). */
	if ((t == ET_VLAN || t == ET_QINQ) && *len >= ETH_HLEN + TAG_HLEN)
		tci = ld_be16(d + 14) & 0xefff;
	memmove(d - TAG_HLEN, d, 12);
	d -= TAG_HLEN;
	st_be16(d + 12, tpid);
	st_be16(d + 14, tci);
	*data = d;
	*len += TAG_HLEN;
	return 0;
}

int flow_mod_pop_vlan(uint8_t **data, uint32_t *len)
{
	uint8_t *d = *data;
	uint16_t t;

	if (*len < ETH_HLEN + TAG_HLEN)
		return -1;
	t = ld_be16(d + 12);
	if (t != ET_VLAN && t != ET_QINQ)
		return -1;
	memmove(d + TAG_HLEN, d, 12);
	*data = d + TAG_HLEN;
	*len -= TAG_HLEN;
	return 0;
}

int flow_mod_dec_ttl(uint8_t *data, uint32_t len)
{
	struct fm_hdrs h;
	uint8_t *ip;

	if (!fm_find(data, len, &h))
		return -1;
	ip = data + h.l3;
	if (h.ipv6) {
		if (ip[7] <= 1)
			return 1;
		ip[7]--;
	} else {
		uint8_t old[2] = { ip[8], ip[9] };

		if (ip[8] <= 1)
			return 1;
		ip[8]--;
		csum_replace(ip + 10, old, ip + 8, 2);
	}
	return 0;
}

uint32_t flow_csum_partial(const uint8_t *p, uint32_t len, uint32_t sum)
{
	uint64_t s = sum;
	uint32_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += ld_be16(p + i);
	if (len & 1)
		s += (uint32_t)p[len - 1] << 8;
	while (s >> 32)
		s = (s & 0xffffffff) + (s >> 32);
	return (uint32_t)s;
}

uint16_t flow_csum_fold(uint32_t sum)
{
	uint8_t b[2];
	uint16_t v;

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	st_be16(b, (uint16_t)~sum);
	memcpy(&v, b, 2);
	return v;
}

static const uint32_t crc32c_table[256] = {
	0x00000000u, 0xf26b8303u, 0xe13b70f7u, 0x1350f3f4u, 0xc79a971fu, 0x35f1141cu,
	0x26a1e7e8u, 0xd4ca64ebu, 0x8ad958cfu, 0x78b2dbccu, 0x6be22838u, 0x9989ab3bu,
	0x4d43cfd0u, 0xbf284cd3u, 0xac78bf27u, 0x5e133c24u, 0x105ec76fu, 0xe235446cu,
	0xf165b798u, 0x030e349bu, 0xd7c45070u, 0x25afd373u, 0x36ff2087u, 0xc494a384u,
	0x9a879fa0u, 0x68ec1ca3u, 0x7bbcef57u, 0x89d76c54u, 0x5d1d08bfu, 0xaf768bbcu,
	0xbc267848u, 0x4e4dfb4bu, 0x20bd8edeu, 0xd2d60dddu, 0xc186fe29u, 0x33ed7d2au,
	0xe72719c1u, 0x154c9ac2u, 0x061c6936u, 0xf477ea35u, 0xaa64d611u, 0x580f5512u,
	0x4b5fa6e6u, 0xb93425e5u, 0x6dfe410eu, 0x9f95c20du, 0x8cc531f9u, 0x7eaeb2fau,
	0x30e349b1u, 0xc288cab2u, 0xd1d83946u, 0x23b3ba45u, 0xf779deaeu, 0x05125dadu,
	0x1642ae59u, 0xe4292d5au, 0xba3a117eu, 0x4851927du, 0x5b016189u, 0xa96ae28au,
	0x7da08661u, 0x8fcb0562u, 0x9c9bf696u, 0x6ef07595u, 0x417b1dbcu, 0xb3109ebfu,
	0xa0406d4bu, 0x522bee48u, 0x86e18aa3u, 0x748a09a0u, 0x67dafa54u, 0x95b17957u,
	0xcba24573u, 0x39c9c670u, 0x2a993584u, 0xd8f2b687u, 0x0c38d26cu, 0xfe53516fu,
	0xed03a29bu, 0x1f682198u, 0x5125dad3u, 0xa34e59d0u, 0xb01eaa24u, 0x42752927u,
	0x96bf4dccu, 0x64d4cecfu, 0x77843d3bu, 0x85efbe38u, 0xdbfc821cu, 0x2997011fu,
	0x3ac7f2ebu, 0xc8ac71e8u, 0x1c661503u, 0xee0d9600u, 0xfd5d65f4u, 0x0f36e6f7u,
	0x61c69362u, 0x93ad1061u, 0x80fde395u, 0x72966096u, 0xa65c047du, 0x5437877eu,
	0x4767748au, 0xb50cf789u, 0xeb1fcbadu, 0x197448aeu, 0x0a24bb5au, 0xf84f3859u,
	0x2c855cb2u, 0xdeeedfb1u, 0xcdbe2c45u, 0x3fd5af46u, 0x7198540du, 0x83f3d70eu,
	0x90a324fau, 0x62c8a7f9u, 0xb602c312u, 0x44694011u, 0x5739b3e5u, 0xa55230e6u,
	0xfb410cc2u, 0x092a8fc1u, 0x1a7a7c35u, 0xe811ff36u, 0x3cdb9bddu, 0xceb018deu,
	0xdde0eb2au, 0x2f8b6829u, 0x82f63b78u, 0x709db87bu, 0x63cd4b8fu, 0x91a6c88cu,
	0x456cac67u, 0xb7072f64u, 0xa457dc90u, 0x563c5f93u, 0x082f63b7u, 0xfa44e0b4u,
	0xe9141340u, 0x1b7f9043u, 0xcfb5f4a8u, 0x3dde77abu, 0x2e8e845fu, 0xdce5075cu,
	0x92a8fc17u, 0x60c37f14u, 0x73938ce0u, 0x81f80fe3u, 0x55326b08u, 0xa759e80bu,
	0xb4091bffu, 0x466298fcu, 0x1871a4d8u, 0xea1a27dbu, 0xf94ad42fu, 0x0b21572cu,
	0xdfeb33c7u, 0x2d80b0c4u, 0x3ed04330u, 0xccbbc033u, 0xa24bb5a6u, 0x502036a5u,
	0x4370c551u, 0xb11b4652u, 0x65d122b9u, 0x97baa1bau, 0x84ea524eu, 0x7681d14du,
	0x2892ed69u, 0xdaf96e6au, 0xc9a99d9eu, 0x3bc21e9du, 0xef087a76u, 0x1d63f975u,
	0x0e330a81u, 0xfc588982u, 0xb21572c9u, 0x407ef1cau, 0x532e023eu, 0xa145813du,
	0x758fe5d6u, 0x87e466d5u, 0x94b49521u, 0x66df1622u, 0x38cc2a06u, 0xcaa7a905u,
	0xd9f75af1u, 0x2b9cd9f2u, 0xff56bd19u, 0x0d3d3e1au, 0x1e6dcdeeu, 0xec064eedu,
	0xc38d26c4u, 0x31e6a5c7u, 0x22b65633u, 0xd0ddd530u, 0x0417b1dbu, 0xf67c32d8u,
	0xe52cc12cu, 0x1747422fu, 0x49547e0bu, 0xbb3ffd08u, 0xa86f0efcu, 0x5a048dffu,
	0x8ecee914u, 0x7ca56a17u, 0x6ff599e3u, 0x9d9e1ae0u, 0xd3d3e1abu, 0x21b862a8u,
	0x32e8915cu, 0xc083125fu, 0x144976b4u, 0xe622f5b7u, 0xf5720643u, 0x07198540u,
	0x590ab964u, 0xab613a67u, 0xb831c993u, 0x4a5a4a90u, 0x9e902e7bu, 0x6cfbad78u,
	0x7fab5e8cu, 0x8dc0dd8fu, 0xe330a81au, 0x115b2b19u, 0x020bd8edu, 0xf0605beeu,
	0x24aa3f05u, 0xd6c1bc06u, 0xc5914ff2u, 0x37faccf1u, 0x69e9f0d5u, 0x9b8273d6u,
	0x88d28022u, 0x7ab90321u, 0xae7367cau, 0x5c18e4c9u, 0x4f48173du, 0xbd23943eu,
	0xf36e6f75u, 0x0105ec76u, 0x12551f82u, 0xe03e9c81u, 0x34f4f86au, 0xc69f7b69u,
	0xd5cf889du, 0x27a40b9eu, 0x79b737bau, 0x8bdcb4b9u, 0x988c474du, 0x6ae7c44eu,
	0xbe2da0a5u, 0x4c4623a6u, 0x5f16d052u, 0xad7d5351u,
};

uint32_t flow_sctp_crc32c(const uint8_t *p, uint32_t len)
{
	uint32_t crc = 0xffffffffu, i;

	for (i = 0; i < len; i++)
		crc = crc32c_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}
