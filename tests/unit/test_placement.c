/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-placement's figure and label: the median of batches, near/far/unknown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "placement.h"

static void median_of_odd_and_even_counts(void **state)
{
	double odd[] = { 400, 60, 61, 59, 3000 }, even[] = { 70, 60, 80, 50 }, one[] = { 7 };

	(void)state;
	assert_true(placement_median(odd, 5) == 61);
	assert_true(placement_median(even, 4) == 65);
	assert_true(placement_median(one, 1) == 7);
}

/* One preempted batch (a huge mean) does not move the figure; the minimum would not either,
 * but the median also ignores a batch that ran while the line was briefly local. */
static void one_outlier_batch_does_not_change_the_label(void **state)
{
	double v[20];
	unsigned int i;

	(void)state;
	for (i = 0; i < 20; i++)
		v[i] = 105 + i % 3;
	v[7] = 2e6;
	assert_string_equal(placement_label(placement_median(v, 20), PLACEMENT_FAR_NS), "near");
}

static void labels_at_the_threshold(void **state)
{
	(void)state;
	assert_string_equal(placement_label(60, PLACEMENT_FAR_NS), "near");
	assert_string_equal(placement_label(199.9, PLACEMENT_FAR_NS), "near");
	assert_string_equal(placement_label(200, PLACEMENT_FAR_NS), "far");
	assert_string_equal(placement_label(400, PLACEMENT_FAR_NS), "far");
	assert_string_equal(placement_label(-1, PLACEMENT_FAR_NS), "unknown");
	assert_string_equal(placement_label(150, 100), "far");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(median_of_odd_and_even_counts),
		cmocka_unit_test(one_outlier_batch_does_not_change_the_label),
		cmocka_unit_test(labels_at_the_threshold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
