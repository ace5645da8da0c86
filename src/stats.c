/* SPDX-License-Identifier: BSD-3-Clause */
#include "stats.h"

static const char *const drop_names[STATS_DROP_COUNT] = {
#define STATS_DROP_NAME(sym, name) [STATS_DROP_##sym] = name,
	STATS_FOREACH_DROP(STATS_DROP_NAME)
#undef STATS_DROP_NAME
};

const char *stats_drop_name(enum stats_drop reason)
{
	return (unsigned int)reason < STATS_DROP_COUNT ? drop_names[reason] : "?";
}

void stats_accumulate(struct port_totals *t, const struct port_counters *c)
{
	unsigned int i;

	t->rx_packets += stats_read(&c->rx_packets);
	t->rx_bytes += stats_read(&c->rx_bytes);
	t->tx_packets += stats_read(&c->tx_packets);
	t->tx_bytes += stats_read(&c->tx_bytes);
	t->forwarded += stats_read(&c->forwarded);
	t->flood_tx_dropped += stats_read(&c->flood_tx_dropped);
	t->flood_to_removed += stats_read(&c->flood_to_removed);
	for (i = 0; i < STATS_DROP_COUNT; i++) {
		uint64_t d = stats_read(&c->drops[i]);

		t->drops[i] += d;
		t->dropped += d;
	}
}

void stats_subtract(struct port_totals *t, const struct port_totals *base)
{
	unsigned int i;

	t->rx_packets -= base->rx_packets;
	t->rx_bytes -= base->rx_bytes;
	t->tx_packets -= base->tx_packets;
	t->tx_bytes -= base->tx_bytes;
	t->forwarded -= base->forwarded;
	t->flood_tx_dropped -= base->flood_tx_dropped;
	t->flood_to_removed -= base->flood_to_removed;
	t->dropped -= base->dropped;
	for (i = 0; i < STATS_DROP_COUNT; i++)
		t->drops[i] -= base->drops[i];
}

void stats_merge(struct port_totals *sum, const struct port_totals *t)
{
	unsigned int i;

	sum->rx_packets += t->rx_packets;
	sum->rx_bytes += t->rx_bytes;
	sum->tx_packets += t->tx_packets;
	sum->tx_bytes += t->tx_bytes;
	sum->forwarded += t->forwarded;
	sum->dropped += t->dropped;
	sum->flood_tx_dropped += t->flood_tx_dropped;
	sum->flood_to_removed += t->flood_to_removed;
	for (i = 0; i < STATS_DROP_COUNT; i++)
		sum->drops[i] += t->drops[i];
}
