/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow key extraction and composition (flow_key.h).
 *
 * flow_key_extract() runs once per packet at 20+ Mpps, so it is one straight pass: the key
 * is cleared with twelve 64-bit stores, then each header's fields are copied in as they are
 * on the wire (network order, so no swaps), with loads through memcpy (any alignment) and a
 * length check per header, never per field. A header is taken whole or not at all: a frame
 * cut short yields the fields of the headers before the cut. Lengths inside a header bound
 * what follows: an IPv4 header needs IHL >= 5 and its IHL * 4 bytes, and its total length
 * (or the IPv6 payload length) ends the packet, so L2 padding is never read as L4.
 *
 * What is taken from where (the choices OVS's flow.c makes, where it makes one):
 *   Ethernet    dl_dst, dl_src; an outer 0x8100 or 0x88a8 tag gives vlan_tci (with
 *               FLOW_VLAN_CFI) and dl_type is the type after it; an inner tag is not
 *               parsed (dl_type is then 0x8100). An 802.3 frame (type < 0x600) gives its
 *               LLC/SNAP type (OUI 0) and parsing goes on, else dl_type 0x05ff, OpenFlow's
 *               OFP_DL_TYPE_NOT_ETH_TYPE. A tag cut short leaves dl_type at the TPID.
 *   IPv4        nw_src, nw_dst, nw_proto, nw_tos, nw_ttl, nw_frag: version 4, IHL >= 5 and
 *               the IHL * 4 bytes present; then L4 unless a later fragment or the total
 *               length is below IHL * 4.
 *   IPv6        ipv6_src, ipv6_dst, ipv6_label, nw_tos (traffic class), nw_ttl; up to
 *               FLOW_IPV6_EXT_MAX hop-by-hop, routing, destination-options and fragment
 *               headers are skipped; nw_proto is the next header where the walk stopped: the
 *               L4 protocol, a later fragment's next header, or the type of an extension
 *               header that is cut short or one too many (then no L4). Any fragment header
 *               sets FLOW_FRAG_ANY; a non-zero offset FLOW_FRAG_LATER.
 *   L4          TCP (20 bytes): tp_src, tp_dst, tcp_flags; UDP (8) and SCTP (12): ports;
 *               ICMP over IPv4 and ICMPv6 over IPv6 (8): type and code in the low bytes of
 *               tp_src and tp_dst.
 *   ARP         Ethernet/IPv4 ARP only (htype 1, ptype 0x0800, 6, 4; 28 bytes): opcode in
 *               nw_proto when it is below 256, spa in nw_src, tpa in nw_dst.
 */
#include <string.h>

#include "flow_key.h"
#include "flow_mod.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BE16(x) ((uint16_t)__builtin_bswap16((uint16_t)(x)))
#define BE32(x) ((uint32_t)__builtin_bswap32((uint32_t)(x)))
#else
#define BE16(x) ((uint16_t)(x))
#define BE32(x) ((uint32_t)(x))
#endif

#define ETH_HLEN 14
#define FLOW_IPV6_EXT_MAX 8
/* Next-header values of the extension headers skipped: hop-by-hop, routing, fragment and
 * destination options. */
#define IPV6_EXT_MASK ((1ULL << 0) | (1ULL << 43) | (1ULL << 44) | (1ULL << 60))
#define DL_TYPE_NONE 0x05ff        /* OFP_DL_TYPE_NOT_ETH_TYPE */

static inline uint16_t ld16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline bool ipv6_is_ext(uint8_t nh)
{
	return nh < 64 && ((IPV6_EXT_MASK >> nh) & 1);
}

/* The L4 fields from the LEN bytes at L4 (the IP packet's rest); ICMP is the protocol
 * number of ICMP for this IP version. */
static inline void extract_l4(struct flow_key *key, uint8_t proto, uint8_t icmp,
			      const uint8_t *l4, uint32_t len)
{
	if (likely(proto == 6)) {
		if (likely(len >= 20)) {
			memcpy(&key->tp_src, l4, 4);
			key->tcp_flags = ld16(l4 + 12) & BE16(0x0fff);
		}
	} else if (likely(proto == 17)) {
		if (likely(len >= 8))
			memcpy(&key->tp_src, l4, 4);
	} else if (proto == icmp) {
		if (len >= 8) {
			key->tp_src = BE16(l4[0]);
			key->tp_dst = BE16(l4[1]);
		}
	} else if (proto == 132) {
		if (len >= 12)
			memcpy(&key->tp_src, l4, 4);
	}
}

static inline void extract_ipv4(struct flow_key *key, const uint8_t *ip, uint32_t avail)
{
	uint32_t ihl, tot;
	uint16_t frag;

	if (unlikely(avail < 20))
		return;
	ihl = (uint32_t)(ip[0] & 0x0f) * 4;
	if (unlikely((ip[0] & 0xf0) != 0x40 || ihl < 20 || ihl > avail))
		return;
	key->nw_tos = ip[1];
	key->nw_ttl = ip[8];
	key->nw_proto = ip[9];
	memcpy(&key->nw_src, ip + 12, 8);          /* nw_src and nw_dst, as on the wire */
	frag = ld16(ip + 6) & BE16(0x3fff);
	if (unlikely(frag != 0)) {
		if (frag & BE16(0x1fff)) {
			key->nw_frag = FLOW_FRAG_ANY | FLOW_FRAG_LATER;
			return;
		}
		key->nw_frag = FLOW_FRAG_ANY;
	}
	tot = BE16(ld16(ip + 2));
	if (unlikely(tot < ihl))
		return;
	if (tot > avail)
		tot = avail;
	extract_l4(key, ip[9], 1, ip + ihl, tot - ihl);
}

static inline void extract_ipv6(struct flow_key *key, const uint8_t *ip, uint32_t avail)
{
	uint32_t vtcfl, end, p = 40, i;
	uint8_t nh;

	if (unlikely(avail < 40))
		return;
	vtcfl = ld32(ip);
	if (unlikely((ip[0] & 0xf0) != 0x60))
		return;
	key->ipv6_label = vtcfl & BE32(0x000fffff);
	key->nw_tos = (uint8_t)(BE32(vtcfl) >> 20);
	key->nw_ttl = ip[7];
	memcpy(key->ipv6_src, ip + 8, 32);         /* ipv6_src and ipv6_dst */
	end = 40u + BE16(ld16(ip + 4));
	if (end > avail)
		end = avail;
	nh = ip[6];
	if (unlikely(ipv6_is_ext(nh))) {
		for (i = 0; i < FLOW_IPV6_EXT_MAX && ipv6_is_ext(nh); i++) {
			const uint8_t *x = ip + p;
			uint32_t hlen;

			if (end - p < 8)
				break;
			if (nh == 44) {
				key->nw_frag |= FLOW_FRAG_ANY;
				nh = x[0];
				if (ld16(x + 2) & BE16(0xfff8)) {
					key->nw_frag |= FLOW_FRAG_LATER;
					key->nw_proto = nh;
					return;
				}
				p += 8;
				continue;
			}
			hlen = ((uint32_t)x[1] + 1) * 8;
			if (hlen > end - p)
				break;
			nh = x[0];
			p += hlen;
		}
		if (ipv6_is_ext(nh)) {
			key->nw_proto = nh;
			return;
		}
	}
	key->nw_proto = nh;
	extract_l4(key, nh, 58, ip + p, end - p);
}

static inline void extract_arp(struct flow_key *key, const uint8_t *arp, uint32_t avail)
{
	static const uint8_t eth_ipv4[6] = { 0, 1, 0x08, 0x00, 6, 4 };

	if (unlikely(avail < 28) || memcmp(arp, eth_ipv4, 6) != 0)
		return;
	if (arp[6] == 0)
		key->nw_proto = arp[7];
	memcpy(&key->nw_src, arp + 14, 4);
	memcpy(&key->nw_dst, arp + 24, 4);
}

/* 802.3 (type < 0x600): the SNAP type and the offset after SNAP, or DL_TYPE_NONE. */
static uint16_t extract_llc(const uint8_t *data, uint32_t len, uint32_t *off)
{
	static const uint8_t snap[6] = { 0xaa, 0xaa, 0x03, 0, 0, 0 };
	uint16_t t;

	if (len - *off < 8 || memcmp(data + *off, snap, 6) != 0)
		return BE16(DL_TYPE_NONE);
	t = ld16(data + *off + 6);
	if (BE16(t) < 0x600)
		return BE16(DL_TYPE_NONE);
	*off += 8;
	return t;
}

bool flow_key_extract(const uint8_t *data, uint32_t len, uint32_t in_port,
		      struct flow_key *key)
{
	flow_key_word *w = (flow_key_word *)key;
	uint32_t off = ETH_HLEN;
	uint16_t type;

	w[0] = 0; w[1] = 0; w[2] = 0; w[3] = 0; w[4] = 0; w[5] = 0;
	w[6] = 0; w[7] = 0; w[8] = 0; w[9] = 0; w[10] = 0; w[11] = 0;
	key->in_port = in_port;
	if (unlikely(len < ETH_HLEN))
		return false;
	memcpy(key->dl_dst, data, 12);             /* dl_dst and dl_src, as on the wire */
	type = ld16(data + 12);
	if (type == BE16(0x8100) || type == BE16(0x88a8)) {
		if (likely(len >= ETH_HLEN + 4)) {
			key->vlan_tci = ld16(data + 14) | BE16(FLOW_VLAN_CFI);
			type = ld16(data + 16);
			off += 4;
		}
	}
	if (unlikely(BE16(type) < 0x600))
		type = extract_llc(data, len, &off);
	key->dl_type = type;
	if (likely(type == BE16(0x0800)))
		extract_ipv4(key, data + off, len - off);
	else if (type == BE16(0x86dd))
		extract_ipv6(key, data + off, len - off);
	else if (type == BE16(0x0806))
		extract_arp(key, data + off, len - off);
	return true;
}

/*
 * Composition. The frame is built in a local buffer of COMPOSE_MAX bytes (the largest
 * frame: 14 + 4 + 40 + 8 + 20 = 86) and copied out. Only the fields that belong to the
 * frame's kind are used (an IPv4 key's ipv6_src is ignored), and a frame extracts to KEY
 * when KEY is one extraction can give: nw_frag is FLOW_FRAG_ANY (a first fragment: MF set,
 * offset 0) or ANY | LATER (offset 1480, no L4), ICMP fields fit a byte, vlan_tci has
 * FLOW_VLAN_CFI or is 0, and dl_type is not a TPID when untagged (a cut tag).
 */
#define COMPOSE_MAX 128
#define FRAME_MIN 60

static void st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* The L4 header for PROTO into L4; returns its length. PSUM is the pseudo-header's sum
 * (without the length), for TCP, UDP and ICMPv6. */
static uint32_t compose_l4(const struct flow_key *key, uint8_t proto, bool v6, uint8_t *l4,
			   uint32_t psum)
{
	uint32_t n = 0, crc;
	uint16_t cs;

	if (proto == 6) {
		n = 20;
		memcpy(l4, &key->tp_src, 4);
		st16(l4 + 12, (uint16_t)(0x5000 | (BE16(key->tcp_flags) & 0x0fff)));
		st16(l4 + 14, 65535);
	} else if (proto == 17) {
		n = 8;
		memcpy(l4, &key->tp_src, 4);
		st16(l4 + 4, 8);
	} else if (proto == 132) {
		n = 12;
		memcpy(l4, &key->tp_src, 4);
		crc = flow_sctp_crc32c(l4, n);
		l4[8] = (uint8_t)crc;
		l4[9] = (uint8_t)(crc >> 8);
		l4[10] = (uint8_t)(crc >> 16);
		l4[11] = (uint8_t)(crc >> 24);
		return n;
	} else if (proto == (v6 ? 58 : 1)) {
		n = 8;
		l4[0] = (uint8_t)BE16(key->tp_src);
		l4[1] = (uint8_t)BE16(key->tp_dst);
		if (!v6) {
			cs = flow_csum_fold(flow_csum_partial(l4, n, 0));
			memcpy(l4 + 2, &cs, 2);
			return n;
		}
	} else {
		return 0;
	}
	cs = flow_csum_fold(flow_csum_partial(l4, n, psum + proto + n));
	if (proto == 17 && cs == 0)
		cs = 0xffff;
	memcpy(l4 + (proto == 6 ? 16 : proto == 17 ? 6 : 2), &cs, 2);
	return n;
}

uint32_t flow_key_compose(const struct flow_key *key, uint8_t *buf, uint32_t buf_len)
{
	uint8_t f[COMPOSE_MAX];
	uint32_t off = ETH_HLEN, n = 0;
	uint16_t type = BE16(key->dl_type);
	uint16_t cs;

	memset(f, 0, sizeof(f));
	memcpy(f, key->dl_dst, 12);
	if (key->vlan_tci != 0) {
		st16(f + 12, 0x8100);
		st16(f + 14, BE16(key->vlan_tci) & (uint16_t)~FLOW_VLAN_CFI);
		off += 4;
	}
	if (type < 0x600) {
		/* 802.3 without SNAP: an STP-like LLC header and a length. */
		st16(f + off - 2, 3);
		f[off] = 0x42;
		f[off + 1] = 0x42;
		f[off + 2] = 0x03;
		n = off + 3;
		goto out;
	}
	st16(f + off - 2, type);
	if (type == 0x0800) {
		uint8_t *ip = f + off, frag = key->nw_frag;
		uint32_t l4n = 0, psum;

		ip[0] = 0x45;
		ip[1] = key->nw_tos;
		st16(ip + 6, (frag & FLOW_FRAG_LATER) ? 185 : (frag & FLOW_FRAG_ANY) ? 0x2000 : 0);
		ip[8] = key->nw_ttl;
		ip[9] = key->nw_proto;
		memcpy(ip + 12, &key->nw_src, 8);
		if (!(frag & FLOW_FRAG_LATER)) {
			psum = flow_csum_partial(ip + 12, 8, 0);
			l4n = compose_l4(key, key->nw_proto, false, ip + 20, psum);
		}
		st16(ip + 2, (uint16_t)(20 + l4n));
		cs = flow_csum_fold(flow_csum_partial(ip, 20, 0));
		memcpy(ip + 10, &cs, 2);
		n = off + 20 + l4n;
	} else if (type == 0x86dd) {
		uint8_t *ip = f + off, *p = ip + 40;
		uint32_t vtcfl = 0x60000000u | (uint32_t)key->nw_tos << 20 |
				 (BE32(key->ipv6_label) & 0xfffff), l4n = 0, psum;

		st16(ip, (uint16_t)(vtcfl >> 16));
		st16(ip + 2, (uint16_t)vtcfl);
		ip[6] = key->nw_proto;
		ip[7] = key->nw_ttl;
		memcpy(ip + 8, key->ipv6_src, 32);
		if (key->nw_frag & FLOW_FRAG_ANY) {
			ip[6] = 44;
			p[0] = key->nw_proto;
			st16(p + 2, (key->nw_frag & FLOW_FRAG_LATER) ? 1480 : 1);
			p += 8;
		}
		if (!(key->nw_frag & FLOW_FRAG_LATER)) {
			psum = flow_csum_partial(ip + 8, 32, 0);
			l4n = compose_l4(key, key->nw_proto, true, p, psum);
		}
		st16(ip + 4, (uint16_t)(p - ip - 40 + l4n));
		n = (uint32_t)(p - f) + l4n;
	} else if (type == 0x0806) {
		static const uint8_t eth_ipv4[6] = { 0, 1, 0x08, 0x00, 6, 4 };
		uint8_t *arp = f + off;

		memcpy(arp, eth_ipv4, 6);
		arp[7] = key->nw_proto;
		memcpy(arp + 8, key->dl_src, 6);
		memcpy(arp + 14, &key->nw_src, 4);
		memcpy(arp + 24, &key->nw_dst, 4);
		n = off + 28;
	} else {
		n = off;
	}
out:
	if (n < FRAME_MIN)
		n = FRAME_MIN;
	if (buf_len < n)
		return 0;
	memcpy(buf, f, n);
	return n;
}
