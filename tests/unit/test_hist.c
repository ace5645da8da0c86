/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-gen's latency histogram: bucket bounds, precision, percentiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hist.h"

static void buckets_are_contiguous_and_within_one_percent(void **state)
{
	uint64_t v;

	(void)state;
	for (v = 0; v < 1000000000ULL; v = v < 1000 ? v + 1 : v + v / 997) {
		unsigned int i = hist_index(v);

		assert_true(i < HIST_BUCKETS);
		assert_true(hist_bucket_low(i) <= v);
		assert_true(v < hist_bucket_low(i + 1));
		if (v >= 100)
			assert_true((double)(hist_bucket_low(i + 1) - hist_bucket_low(i)) <=
				    0.01 * (double)v);
	}
}

static void percentiles_of_a_uniform_spread(void **state)
{
	static struct hist h;
	uint64_t v;

	(void)state;
	hist_init(&h);
	for (v = 1; v <= 100000; v++)
		hist_record(&h, v * 10);           /* 10 ns .. 1 ms */
	assert_int_equal(h.count, 100000);
	assert_int_equal(h.min, 10);
	assert_int_equal(h.max, 1000000);
	assert_true(llabs((long long)hist_percentile(&h, 0.5) - 500000) < 5000);
	assert_true(llabs((long long)hist_percentile(&h, 0.99) - 990000) < 9900);
	assert_true(hist_percentile(&h, 0.0) >= h.min);
	assert_true(hist_percentile(&h, 1.0) <= h.max);
	assert_true(hist_mean(&h) > 500000 && hist_mean(&h) < 500010);
	assert_true(hist_stdev(&h) > 288000 && hist_stdev(&h) < 289000);
}

static void empty_and_overflow(void **state)
{
	static struct hist h;

	(void)state;
	hist_init(&h);
	assert_int_equal(hist_percentile(&h, 0.5), 0);
	hist_record(&h, UINT64_C(1) << 40);
	assert_int_equal(h.overflow, 1);
	assert_int_equal(hist_percentile(&h, 0.5), UINT64_C(1) << 40);
}

/* A value recorded N times at once is what N single records make: counts exact, sums equal. */
static void record_n_is_n_records(void **state)
{
	static struct hist a, b;
	static const uint64_t v[] = { 0, 7, 255, 256, 1000, 123456, UINT64_C(1) << 40 };
	unsigned int i, k;

	(void)state;
	hist_init(&a);
	hist_init(&b);
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		hist_record_n(&a, v[i], i + 1);
		for (k = 0; k <= i; k++)
			hist_record(&b, v[i]);
	}
	hist_record_n(&a, 5, 0);                 /* nothing: min stays */
	assert_int_equal(a.count, b.count);
	assert_int_equal(a.overflow, b.overflow);
	assert_int_equal(a.min, b.min);
	assert_int_equal(a.max, b.max);
	assert_memory_equal(a.buckets, b.buckets, sizeof(a.buckets));
	assert_true(a.sum == b.sum);
	assert_true(a.sum_sq > b.sum_sq * (1 - 1e-12) && a.sum_sq < b.sum_sq * (1 + 1e-12));
}

/* The JSON dump: the summary figures, and buckets whose counts add up to the count. */
static void json_dump_adds_up(void **state)
{
	static struct hist h;
	char buf[4096], *p;
	unsigned long long lo, hi, c, total = 0, last_lo = 0;
	FILE *f = tmpfile();
	size_t n;
	int rows = 0;

	(void)state;
	assert_non_null(f);
	hist_init(&h);
	hist_record(&h, 150);
	hist_record(&h, 150);
	hist_record(&h, 1000);
	hist_record(&h, 123456);
	hist_write_json(&h, f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	assert_non_null(strstr(buf, "\"count\": 4,"));
	assert_non_null(strstr(buf, "\"min\": 150,"));
	assert_non_null(strstr(buf, "\"max\": 123456,"));
	for (p = strstr(buf, "\n  ["); p != NULL; p = strstr(p + 1, "\n  [")) {
		assert_int_equal(sscanf(p, "\n  [%llu, %llu, %llu]", &lo, &hi, &c), 3);
		assert_true(lo <= hi && (rows == 0 || lo > last_lo));
		last_lo = lo;
		total += c;
		rows++;
	}
	assert_int_equal(rows, 3);
	assert_int_equal(total, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(buckets_are_contiguous_and_within_one_percent),
		cmocka_unit_test(percentiles_of_a_uniform_spread),
		cmocka_unit_test(empty_and_overflow),
		cmocka_unit_test(json_dump_adds_up),
		cmocka_unit_test(record_n_is_n_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
