/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-gen's open/closed-loop accounting, loss split, L1/L2 rates and --touch checksum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "load.h"

static void open_loop_counts_refusals_as_not_accepted(void **state)
{
	struct load_tally t = { 0 };

	(void)state;
	load_tally_burst(&t, LOAD_OPEN, 32, 32, 32 * 64);
	load_tally_burst(&t, LOAD_OPEN, 32, 10, 10 * 64);
	load_tally_burst(&t, LOAD_OPEN, 32, 0, 0);
	assert_int_equal(t.offered, 96);
	assert_int_equal(t.accepted, 42);
	assert_int_equal(t.not_accepted, 54);
	assert_int_equal(t.retried, 0);
	assert_int_equal(t.bytes, 42 * 64);
}

static void closed_loop_offers_what_is_accepted(void **state)
{
	struct load_tally t = { 0 };

	(void)state;
	/* A burst of 32: 10 taken, the 22 left tried again: 0, then 22 taken. */
	load_tally_burst(&t, LOAD_CLOSED, 32, 10, 640);
	load_tally_burst(&t, LOAD_CLOSED, 22, 0, 0);
	load_tally_burst(&t, LOAD_CLOSED, 22, 22, 22 * 64);
	assert_int_equal(t.offered, 32);
	assert_int_equal(t.accepted, 32);
	assert_int_equal(t.not_accepted, 0);
	assert_int_equal(t.retried, 22 + 22);
}

static void figures_split_loss(void **state)
{
	struct load_counts c = { .offered = 1000, .accepted = 800, .received = 700,
				 .lost_in_flight = 100, .tx_bytes = 800 * 64,
				 .rx_bytes = 700 * 64, .seconds = 2 };
	struct load_figures f;

	(void)state;
	load_figures(&c, &f);
	assert_float_equal(f.offered_pps, 500, 1e-9);
	assert_float_equal(f.accepted_pps, 400, 1e-9);
	assert_float_equal(f.rx_pps, 350, 1e-9);
	assert_int_equal(f.not_accepted, 200);
	assert_int_equal(f.lost_in_flight, 100);
	assert_float_equal(f.not_accepted_fraction, 0.2, 1e-12);
	assert_float_equal(f.lost_in_flight_fraction, 0.1, 1e-12);
	assert_float_equal(f.loss_fraction, 0.3, 1e-12);
	/* 64 B frames: 512 bit at L2, 672 bit at L1. */
	assert_float_equal(f.rx_gbps_l2, 350 * 512 / 1e9, 1e-15);
	assert_float_equal(f.rx_gbps_l1, 350 * 672 / 1e9, 1e-15);
	assert_float_equal(f.tx_gbps_l1, 400 * 672 / 1e9, 1e-15);
}

static void figures_of_nothing(void **state)
{
	struct load_counts c = { 0 };
	struct load_figures f;

	(void)state;
	load_figures(&c, &f);
	assert_float_equal(f.loss_fraction, 0, 0);
	assert_float_equal(f.rx_pps, 0, 0);
	assert_float_equal(load_bps(10, 640, 0, true), 0, 0);
}

static void line_rate_of_ten_gigabit(void **state)
{
	(void)state;
	/* 14.88 Mpps of 64 B frames is 10 Gbit/s at L1, 7.62 at L2. */
	assert_float_equal(load_bps(14880952, 14880952ULL * 64, 1, true) / 1e9, 10, 1e-5);
	assert_float_equal(load_bps(14880952, 14880952ULL * 64, 1, false) / 1e9, 7.619, 1e-3);
}

static void touch_reads_every_byte(void **state)
{
	uint8_t buf[61];
	unsigned int i;

	(void)state;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(load_touch(buf, sizeof(buf)), 0);
	buf[60] = 1;      /* the tail past the last whole word counts: byte 4 of a word */
	assert_int_equal(load_touch(buf, sizeof(buf)), UINT64_C(1) << 32);
	buf[0] = 2;
	assert_int_equal(load_touch(buf, sizeof(buf)), (UINT64_C(1) << 32) + 2);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	assert_int_not_equal(load_touch(buf, 60), load_touch(buf, 61));
	assert_int_equal(load_touch(buf, 0), 0);
	assert_string_equal(load_name(LOAD_OPEN), "open");
	assert_string_equal(load_name(LOAD_CLOSED), "closed");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(open_loop_counts_refusals_as_not_accepted),
		cmocka_unit_test(closed_loop_offers_what_is_accepted),
		cmocka_unit_test(figures_split_loss),
		cmocka_unit_test(figures_of_nothing),
		cmocka_unit_test(line_rate_of_ten_gigabit),
		cmocka_unit_test(touch_reads_every_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
