/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters. Every packet a port receives is counted once in rx_packets and then either as
 * forwarded or in exactly one drop reason (docs/protocol.md lists the reasons). Each worker
 * has its own copy of a port's counters, on its own cache lines, written only by that worker;
 * the control thread sums the copies. Relaxed atomic loads and stores keep the reads well
 * defined without a locked instruction on the hot path.
 */
#ifndef SLUICE_STATS_H
#define SLUICE_STATS_H

#include <stdint.h>

#include <rte_common.h>

/* The fixed list of drop reasons, in the order the docs and `stats` show them. */
#define STATS_FOREACH_DROP(X)   \
	X(TX_FULL, "tx_full")           \
	X(LINK_DOWN, "link_down")       \
	X(UNPATCHED, "unpatched")       \
	X(PORT_REMOVED, "port_removed") \
	X(MALFORMED, "malformed")       \
	X(HAIRPIN, "hairpin")           \
	X(VLAN, "vlan")                 \
	X(NO_MATCH, "no_match")         \
	X(ACTION_DROP, "action_drop")   \
	X(RESERVED_MULTICAST, "reserved_multicast") \
	X(STORM, "storm")               \
	X(METER, "meter")               \
	X(TTL_EXPIRED, "ttl_expired")   \
	X(CONTROLLER_QUEUE_FULL, "controller_queue_full") \
	X(GROUP_NO_LIVE_BUCKET, "group_no_live_bucket") \
	X(MTU_EXCEEDED, "mtu_exceeded")  \
	X(VXLAN_NO_TUNNEL, "vxlan_no_tunnel") \
	X(PORT_DOWN, "port_down")       \
	X(PORT_NO_RECV, "port_no_recv") \
	X(PORT_NO_FWD, "port_no_fwd")   \
	X(PORT_NO_PACKET_IN, "port_no_packet_in")

enum stats_drop {
#define STATS_DROP_ENUM(sym, name) STATS_DROP_##sym,
	STATS_FOREACH_DROP(STATS_DROP_ENUM)
#undef STATS_DROP_ENUM
	STATS_DROP_COUNT
};

/* One worker's counters for one port. */
struct port_counters {
	uint64_t rx_packets;
	uint64_t rx_bytes;
	uint64_t tx_packets;
	uint64_t tx_bytes;
	uint64_t forwarded;
	uint64_t drops[STATS_DROP_COUNT];
	/* Flood copies this port could not send. Not drops: the input packet counts as
	 * forwarded once it is flooded, whatever becomes of each copy. */
	uint64_t flood_tx_dropped;
	/* Flood copies of packets received on this port whose output left the switch while
	 * the burst was being served (counted on the input: the output is gone). */
	uint64_t flood_to_removed;
} __rte_cache_aligned;

/* The same fields summed over workers, for reporting. */
struct port_totals {
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes, forwarded, dropped;
	uint64_t flood_tx_dropped, flood_to_removed;
	uint64_t drops[STATS_DROP_COUNT];
};

const char *stats_drop_name(enum stats_drop reason);

/* Adds N to a counter only its owning worker writes (no read-modify-write atomics needed). */
static inline void stats_add(uint64_t *counter, uint64_t n)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline uint64_t stats_read(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* Adds one worker's counters C into T. */
void stats_accumulate(struct port_totals *t, const struct port_counters *c);

/* Adds totals T into SUM. */
void stats_merge(struct port_totals *sum, const struct port_totals *t);

/* T minus BASE, field by field: how clear-stats zeroes without writing workers' counters. */
void stats_subtract(struct port_totals *t, const struct port_totals *base);

#endif
