/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The learning bridge's frame parser: from the first bytes of a frame to its VLAN and the
 * table keys of its source and destination, or the reason it must be dropped. Pure (no
 * mbuf, no EAL), so the fuzz target and the data path run the same code.
 */
#ifndef SLUICE_L2PARSE_H
#define SLUICE_L2PARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>

#include "fdb.h"
#include "stats.h"

struct l2_frame {
	uint64_t src_key, dst_key;     /* dst_key is 0 for a group destination */
	uint16_t vlan;
	bool tagged;                   /* the frame carries an 802.1Q tag */
};

/*
 * Whether ADDR is one of 01:80:C2:00:00:00..0F, the group addresses IEEE 802.1Q (8.6.3,
 * table 8-1) reserves for protocols of one link (STP, LACP, 802.1X, LLDP, ...): a bridge
 * that does not run the protocol must not relay them, or two links' peers would see each
 * other as one.
 */
static inline bool l2_is_reserved_group(const struct rte_ether_addr *addr)
{
	static const uint8_t prefix[5] = { 0x01, 0x80, 0xc2, 0x00, 0x00 };

	return memcmp(addr->addr_bytes, prefix, sizeof(prefix)) == 0 &&
	       (addr->addr_bytes[5] & 0xf0) == 0;
}

/*
 * Parses LEN bytes at DATA (2-byte aligned, as in any mbuf) received on port IN. ACCESS is
 * the port's access VLAN (0: it is a trunk); MEMBER[v] the ports in VLAN v. FORWARD_RESERVED
 * lets frames to the reserved group addresses through. Returns -1 when the frame goes on,
 * with F filled in, or the drop reason (enum stats_drop).
 */
static inline int l2_parse(const uint8_t *data, uint32_t len, uint16_t in, uint16_t access,
			   const uint64_t *member, bool forward_reserved, struct l2_frame *f)
{
	const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)data;
	uint16_t v = 0, tci;

	if (unlikely(len < RTE_ETHER_HDR_LEN))
		return STATS_DROP_MALFORMED;
	f->tagged = eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
	if (f->tagged) {
		if (unlikely(len < RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN))
			return STATS_DROP_MALFORMED;
		memcpy(&tci, data + RTE_ETHER_HDR_LEN, sizeof(tci));
		v = rte_be_to_cpu_16(tci) & 0xfff;
	}
	/* A bridge neither learns nor forwards a group or all-zero source (IEEE 802.1Q 8.7). */
	if (unlikely(rte_is_multicast_ether_addr(&eth->src_addr) ||
		     rte_is_zero_ether_addr(&eth->src_addr)))
		return STATS_DROP_MALFORMED;
	/* Whatever its VLAN: the reserved addresses are filtered on every port (8.6.3). */
	if (unlikely(rte_is_multicast_ether_addr(&eth->dst_addr) && !forward_reserved &&
		     l2_is_reserved_group(&eth->dst_addr)))
		return STATS_DROP_RESERVED_MULTICAST;
	if (access != 0) {
		if (f->tagged)
			return STATS_DROP_VLAN;
		v = access;
	} else if (((__atomic_load_n(&member[v], __ATOMIC_RELAXED) >> in) & 1) == 0) {
		return STATS_DROP_VLAN;
	}
	f->vlan = v;
	/* Both addresses are followed by two bytes of the header (len >= 14 was checked). */
	f->src_key = fdb_key_in_header(eth->src_addr.addr_bytes, v);
	f->dst_key = rte_is_multicast_ether_addr(&eth->dst_addr) ? 0 :
		     fdb_key_in_header(eth->dst_addr.addr_bytes, v);
	return -1;
}

#endif
