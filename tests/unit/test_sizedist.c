/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-gen's --size csv:FILE parser and the interleaved cycle it makes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sizedist.h"

static struct sizedist d;
static uint16_t cycle[SIZEDIST_MAX_CYCLE];
static char err[300];

/* Parses TEXT as a CSV file named "t.csv"; the parser's return code. */
static int parse(const char *text)
{
	FILE *f = fmemopen((void *)(uintptr_t)text, strlen(text), "r");
	int rc;

	assert_non_null(f);
	err[0] = '\0';
	rc = sizedist_read(f, "t.csv", 64, 1518, &d, err, sizeof(err));
	fclose(f);
	return rc;
}

static unsigned int count_of(const uint16_t *c, unsigned int n, uint16_t size)
{
	unsigned int i, k = 0;

	for (i = 0; i < n; i++)
		k += c[i] == size;
	return k;
}

static void integer_weights_are_exact(void **state)
{
	unsigned int n;

	(void)state;
	assert_int_equal(parse("# imix\nsize,weight\n64,7\n 570 , 4 # middle\n\n1518,1\n"), 0);
	assert_int_equal(d.n, 3);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 12);
	assert_int_equal(count_of(cycle, n, 64), 7);
	assert_int_equal(count_of(cycle, n, 570), 4);
	assert_int_equal(count_of(cycle, n, 1518), 1);
}

static void cycle_is_interleaved(void **state)
{
	unsigned int n, i, run = 0, longest = 0;

	(void)state;
	assert_int_equal(parse("64,1\n1518,1\n"), 0);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_int_not_equal(cycle[0], cycle[1]);
	/* 7:4:1: no size runs longer than its share demands. */
	assert_int_equal(parse("64,7\n570,4\n1518,1\n"), 0);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), 0);
	for (i = 0; i < n; i++) {
		run = i > 0 && cycle[i] == cycle[i - 1] ? run + 1 : 1;
		longest = run > longest ? run : longest;
	}
	assert_true(longest <= 2);
}

static void fractional_weights_are_rounded(void **state)
{
	unsigned int n, k64, k512;

	(void)state;
	assert_int_equal(parse("64,0.5833\n512,0.3333\n1500,0.0834\n"), 0);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), 0);
	assert_int_equal(n, SIZEDIST_MAX_CYCLE);
	k64 = count_of(cycle, n, 64);
	k512 = count_of(cycle, n, 512);
	assert_true(abs((int)k64 - (int)(0.5833 * n)) <= 1);
	assert_true(abs((int)k512 - (int)(0.3333 * n)) <= 1);
	assert_int_equal(k64 + k512 + count_of(cycle, n, 1500), n);
	/* Whole weights too many for an exact cycle are rounded as well. */
	assert_int_equal(parse("64,3000\n128,3000\n"), 0);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), 0);
	assert_int_equal(n, SIZEDIST_MAX_CYCLE);
	assert_int_equal(count_of(cycle, n, 64), SIZEDIST_MAX_CYCLE / 2);
}

static void zero_weights_are_skipped(void **state)
{
	unsigned int n;

	(void)state;
	assert_int_equal(parse("64,0\n128,2\n"), 0);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_int_equal(count_of(cycle, n, 64), 0);
}

/* TEXT must be refused with a message that contains WHAT. */
static void refused(const char *text, const char *what)
{
	assert_int_equal(parse(text), -1);
	if (strstr(err, what) == NULL)
		fail_msg("'%s': message '%s' lacks '%s'", text, err, what);
}

static void bad_files_name_the_line(void **state)
{
	(void)state;
	refused("64,1\n65\n", "t.csv:2: expected 'size,weight'");
	refused("64,1,2\n", "t.csv:1: expected");
	refused("63,1\n", "t.csv:1: size '63'");
	refused("1519,1\n", "size '1519'");
	refused("abc,1\n", "size 'abc'");
	refused("64,-1\n", "weight '-1'");
	refused("64,x\n", "weight 'x'");
	refused("64,\n", "weight ''");
	refused("64,nan\n", "weight 'nan'");
	refused("# nothing\n\n", "no size with a weight above 0");
	refused("64,0\n", "no size with a weight above 0");
	refused("64,1\nsize,weight\n", "t.csv:2: size 'size'");
}

static void tiny_weight_is_refused(void **state)
{
	unsigned int n;

	(void)state;
	assert_int_equal(parse("64,1000000.5\n1518,1\n"), 0);
	assert_int_equal(sizedist_cycle(&d, cycle, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "size 1518"));
}

static void missing_file(void **state)
{
	(void)state;
	assert_int_equal(sizedist_load("/nonexistent/sizes.csv", 64, 1518, &d, err,
				       sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/sizes.csv"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(integer_weights_are_exact),
		cmocka_unit_test(cycle_is_interleaved),
		cmocka_unit_test(fractional_weights_are_rounded),
		cmocka_unit_test(zero_weights_are_skipped),
		cmocka_unit_test(bad_files_name_the_line),
		cmocka_unit_test(tiny_weight_is_refused),
		cmocka_unit_test(missing_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
