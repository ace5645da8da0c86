/* SPDX-License-Identifier: BSD-3-Clause */
/* Storm control's token bucket (src/storm.h) against a made-up clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "storm.h"

#define HZ 1000000000ULL                 /* a 1 GHz clock */
#define WINDOW (HZ / 10)

/* Frames of N offered at once at time NOW that pass. */
static unsigned int offer(struct storm_bucket *b, uint64_t cost, uint64_t now, unsigned int n)
{
	unsigned int passed = 0;

	while (n-- > 0)
		passed += storm_allow(b, cost, WINDOW, now);
	return passed;
}

static void starts_full_then_holds_the_rate(void **state)
{
	struct storm_bucket b = { 0 };
	uint64_t cost = storm_cost(HZ, 1000), t = 5 * HZ;
	unsigned int passed = 0, i;

	(void)state;
	/* After a quiet spell: a tenth of a second's worth at once. */
	assert_int_equal(offer(&b, cost, t, 1000), 100);
	assert_int_equal(offer(&b, cost, t, 10), 0);
	/* Then 1000 a second however they are offered: 10 every 10 ms for one second. */
	for (i = 1; i <= 100; i++)
		passed += offer(&b, cost, t + i * (HZ / 100), 50);
	assert_int_equal(passed, 1000);
}

static void low_rates_and_off(void **state)
{
	struct storm_bucket b = { 0 };
	uint64_t cost = storm_cost(HZ, 2), t = 10 * HZ;

	(void)state;
	assert_int_equal(storm_cost(HZ, 0), 0);
	/* Below ten a second the bucket is one frame deep, not less. */
	assert_int_equal(offer(&b, cost, t, 5), 1);
	assert_int_equal(offer(&b, cost, t + HZ / 4, 5), 0);
	assert_int_equal(offer(&b, cost, t + HZ / 2, 5), 1);
	/* A long silence fills the bucket to its depth, no more. */
	assert_int_equal(offer(&b, cost, t + 1000 * HZ, 5), 1);
}

static void clock_start_and_huge_rates(void **state)
{
	struct storm_bucket b = { 0 };

	(void)state;
	/* A rate above the clock costs one cycle a frame. */
	assert_int_equal(storm_cost(1000, 100000), 1);
	/* A fresh bucket is full because the TSC has counted for longer than the bucket's
	 * depth since boot; at a reading of 1 it would hold one cycle, and pass nothing. */
	assert_int_equal(offer(&b, storm_cost(HZ, 10), 1, 3), 0);
	b = (struct storm_bucket){ 0 };
	assert_int_equal(offer(&b, storm_cost(HZ, 10), HZ, 3), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(starts_full_then_holds_the_rate),
		cmocka_unit_test(low_rates_and_off),
		cmocka_unit_test(clock_start_and_huge_rates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
