/* SPDX-License-Identifier: BSD-3-Clause */
/* Counter arithmetic: summing per-worker copies, and clear-stats as a baseline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stats.h"

static void sums_workers_and_drops(void **state)
{
	struct port_counters c[2];
	struct port_totals t = { 0 };

	(void)state;
	memset(c, 0, sizeof(c));
	stats_add(&c[0].rx_packets, 10);
	stats_add(&c[1].rx_packets, 5);
	stats_add(&c[0].forwarded, 8);
	stats_add(&c[0].drops[STATS_DROP_TX_FULL], 2);
	stats_add(&c[1].drops[STATS_DROP_LINK_DOWN], 5);
	stats_accumulate(&t, &c[0]);
	stats_accumulate(&t, &c[1]);
	assert_int_equal(t.rx_packets, 15);
	assert_int_equal(t.forwarded, 8);
	assert_int_equal(t.dropped, 7);
	assert_int_equal(t.drops[STATS_DROP_TX_FULL], 2);
	assert_int_equal(t.rx_packets, t.forwarded + t.dropped);
}

static void baseline_subtracts(void **state)
{
	struct port_counters c;
	struct port_totals base = { 0 }, t = { 0 };

	(void)state;
	memset(&c, 0, sizeof(c));
	stats_add(&c.rx_packets, 100);
	stats_add(&c.drops[STATS_DROP_UNPATCHED], 100);
	stats_accumulate(&base, &c);
	stats_add(&c.rx_packets, 3);
	stats_add(&c.forwarded, 3);
	stats_accumulate(&t, &c);
	stats_subtract(&t, &base);
	assert_int_equal(t.rx_packets, 3);
	assert_int_equal(t.forwarded, 3);
	assert_int_equal(t.dropped, 0);
	assert_int_equal(t.drops[STATS_DROP_UNPATCHED], 0);
}

static void drop_names_are_fixed(void **state)
{
	(void)state;
	assert_string_equal(stats_drop_name(STATS_DROP_TX_FULL), "tx_full");
	assert_string_equal(stats_drop_name(STATS_DROP_UNPATCHED), "unpatched");
	assert_string_equal(stats_drop_name(STATS_DROP_ACTION_DROP), "action_drop");
	assert_string_equal(stats_drop_name(STATS_DROP_RESERVED_MULTICAST), "reserved_multicast");
	assert_string_equal(stats_drop_name(STATS_DROP_STORM), "storm");
	assert_string_equal(stats_drop_name(STATS_DROP_COUNT), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sums_workers_and_drops),
		cmocka_unit_test(baseline_subtracts),
		cmocka_unit_test(drop_names_are_fixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
