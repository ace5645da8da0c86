/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs every row of tests/data/portspec_cases.tsv through portspec_parse(): one cmocka test
 * per row, named by its spec, so a failure says which spec broke.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "portspec.h"

#define MAX_CASES 256

struct spec_case {
	char spec[PORTSPEC_MAX_LEN + 1];
	int ok;
	char want1[PORTSPEC_ARGS_LEN];  /* devname, or a piece of the error */
	char want2[PORTSPEC_ARGS_LEN];  /* devargs */
	char name[PORTSPEC_MAX_LEN + 16];
};

static void check_case(void **state)
{
	const struct spec_case *c = *state;
	char err[PORTSPEC_ERR_LEN] = "";
	struct portspec ps;
	int rc = portspec_parse(c->spec, "p7", 1, &ps, err, sizeof(err));

	if (c->ok) {
		if (rc != 0)
			fail_msg("'%s' refused: %s", c->spec, err);
		assert_string_equal(ps.devname, c->want1);
		assert_string_equal(ps.devargs, c->want2);
	} else {
		if (rc == 0)
			fail_msg("'%s' accepted, expected an error with '%s'", c->spec, c->want1);
		if (strstr(err, c->want1) == NULL)
			fail_msg("'%s': error '%s' lacks '%s'", c->spec, err, c->want1);
	}
}

/* Copies the next tab-separated field of *LINE into OUT and moves *LINE past it. */
static void next_field(char **line, char *out, size_t len)
{
	size_t n = strcspn(*line, "\t\n");

	snprintf(out, len, "%.*s", (int)n, *line);
	*line += n;
	if (**line == '\t')
		(*line)++;
}

static int load_cases(const char *file, struct spec_case *cases)
{
	char buf[2048], kind[16], *p;
	FILE *f = fopen(file, "r");
	int n = 0;

	if (f == NULL) {
		perror(file);
		return -1;
	}
	while (n < MAX_CASES && fgets(buf, sizeof(buf), f) != NULL) {
		struct spec_case *c = &cases[n];

		if (buf[0] == '#' || buf[0] == '\n')
			continue;
		p = buf;
		next_field(&p, c->spec, sizeof(c->spec));
		next_field(&p, kind, sizeof(kind));
		next_field(&p, c->want1, sizeof(c->want1));
		next_field(&p, c->want2, sizeof(c->want2));
		c->ok = strcmp(kind, "ok") == 0;
		snprintf(c->name, sizeof(c->name), "portspec '%s'", c->spec);
		n++;
	}
	fclose(f);
	return n;
}

static void check_probe_string(void **state)
{
	char err[PORTSPEC_ERR_LEN], buf[1024];
	struct portspec ps;

	(void)state;
	assert_int_equal(portspec_parse("tap:name=t0", "p1", 1, &ps, err, sizeof(err)), 0);
	assert_int_equal(portspec_probe_string(&ps, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "net_tap_p1,iface=t0");
	assert_int_equal(portspec_parse("pci:0000:01:00.0", "p1", 1, &ps, err, sizeof(err)), 0);
	assert_int_equal(portspec_probe_string(&ps, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0000:01:00.0");
	/* Queue counts reach the kinds that take them. */
	assert_int_equal(portspec_parse("vhost-user:path=/x", "p1", 4, &ps, err, sizeof(err)), 0);
	assert_string_equal(ps.devargs, "iface=/x,client=0,queues=4");
	assert_int_equal(portspec_parse("tap:name=t0", "p1", 0, &ps, err, sizeof(err)), -1);
	/* mtu= is sluice's own: kept in the spec, never passed to the driver. */
	assert_int_equal(portspec_parse("tap:name=t0,mtu=9000", "p1", 1, &ps, err, sizeof(err)),
			 0);
	assert_int_equal(ps.mtu, 9000);
	assert_string_equal(ps.devargs, "iface=t0");
	assert_int_equal(portspec_parse("tap:name=t0", "p1", 1, &ps, err, sizeof(err)), 0);
	assert_int_equal(ps.mtu, 0);
	/* So is memif's rx_queues=: the client's receive queues, set up by the caller. */
	assert_int_equal(portspec_parse("memif:client,socket=/m,rx_queues=2", "p1", 1, &ps, err,
					sizeof(err)), 0);
	assert_int_equal(ps.rx_queues, 2);
	assert_int_equal(portspec_parse("memif:client,socket=/m", "p1", 1, &ps, err, sizeof(err)),
			 0);
	assert_int_equal(ps.rx_queues, 0);
}

/* vhost-user ports take sluiced's one-copy path unless fast=0 or several queues say not. */
static void check_vhost_fast_default(void **state)
{
	static const struct { const char *spec; bool fast; } rows[] = {
		{ "vhost-user:path=/x", true },
		{ "vhost-user:client,path=/x", true },
		{ "vhost-user:path=/x,fast=1", true },
		{ "vhost-user:path=/x,fast=yes,queues=1", true },
		{ "vhost-user:path=/x,fast=0", false },
		{ "vhost-user:path=/x,fast=no", false },
		{ "vhost-user:path=/x,queues=2", false },
		{ "vhost-user:path=/x,queues=2,fast=0", false },
	};
	char err[PORTSPEC_ERR_LEN];
	struct portspec ps;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(portspec_parse(rows[i].spec, "p1", 1, &ps, err, sizeof(err)), 0);
		if (ps.vhost_fast != rows[i].fast)
			fail_msg("%s: vhost_fast %d, expected %d", rows[i].spec, ps.vhost_fast,
				 rows[i].fast);
	}
	/* A worker count above 1 does not turn it off: the PMD's queues follow the workers. */
	assert_int_equal(portspec_parse("vhost-user:path=/x", "p1", 4, &ps, err, sizeof(err)), 0);
	assert_true(ps.vhost_fast);
	assert_int_equal(portspec_parse("tap:name=t0", "p1", 1, &ps, err, sizeof(err)), 0);
	assert_false(ps.vhost_fast);
}

int main(int argc, char **argv)
{
	static struct spec_case cases[MAX_CASES];
	static struct CMUnitTest tests[MAX_CASES + 2];
	int n, i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s portspec_cases.tsv\n", argv[0]);
		return 2;
	}
	n = load_cases(argv[1], cases);
	if (n <= 0)
		return 2;
	for (i = 0; i < n; i++)
		tests[i] = (struct CMUnitTest){ .name = cases[i].name, .test_func = check_case,
						.initial_state = &cases[i] };
	tests[n] = (struct CMUnitTest){ .name = "probe string", .test_func = check_probe_string };
	tests[n + 1] = (struct CMUnitTest){ .name = "vhost-user fast by default",
					    .test_func = check_vhost_fast_default };
	return _cmocka_run_group_tests("portspec", tests, (size_t)n + 2, NULL, NULL);
}
