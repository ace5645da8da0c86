/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for flow mode's text parser and formatter (src/flow_parse.c). The input is
 * the text itself, read as a rule in each of the four modes, as a group and as a meter (the
 * seeds in tests/fuzz/corpus/flow_parse/ are texts people write). Checked besides what the
 * sanitizers catch:
 *   - a refusal returns -1 with a NUL-terminated, non-empty message; a small error buffer is
 *     never overrun;
 *   - an accepted rule's match is pre-masked (key & mask == key), its counts fit its arrays;
 *   - what is accepted formats to text that parses back, in the same mode, to the same spec
 *     byte for byte, and formats again to the same text (the round trip);
 *   - the formatters return snprintf's length and cut a short buffer cleanly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"

#define FILL 0xa5

static const char *const port_names[] = { "vm1", "vm2", "fw1", "uplink" };

/* Ports vm1, vm2, fw1, uplink (0..3) and OpenFlow numbers 1..16 (0..15). */
static int lookup(void *ctx, const char *name)
{
	unsigned long n;
	char *end;
	int i;

	(void)ctx;
	for (i = 0; i < 4; i++)
		if (strcmp(name, port_names[i]) == 0)
			return i;
	if (name[0] < '1' || name[0] > '9')
		return -1;
	n = strtoul(name, &end, 10);
	return *end == '\0' && n >= 1 && n <= 16 ? (int)n - 1 : -1;
}

static const char *port_name(void *ctx, uint32_t index)
{
	(void)ctx;
	return index < 4 ? port_names[index] : NULL;
}

static void check_error(int rc, const char *err, size_t len)
{
	if (rc != -1 || memchr(err, '\0', len) == NULL || err[0] == '\0')
		abort();
}

/* A formatter's result: its length as returned, NUL-terminated, and the same cut short. */
static void check_formatted(int n, const char *buf, size_t len)
{
	if (n < 0 || (size_t)n >= len || strlen(buf) != (size_t)n)
		abort();
}

static void check_rule(const struct flow_rule_spec *s, enum flow_parse_mode mode)
{
	static struct flow_rule_spec again;
	static char text[FLOW_TEXT_MAX * 2], text2[FLOW_TEXT_MAX * 2];
	struct flow_key masked;
	char err[256], small[12];
	int n;

	flow_key_and(&masked, &s->match.key, &s->match.mask);
	/* A mod or del filter without table= selects every table (FLOW_TABLE_ALL). */
	bool all_tables = (mode == FLOW_PARSE_MODIFY || mode == FLOW_PARSE_DELETE) &&
			  s->table == FLOW_TABLE_ALL;

	if (!flow_key_equal(&masked, &s->match.key) || s->n_apply > FLOW_MAX_ACTIONS ||
	    s->n_write > FLOW_MAX_ACTIONS || (s->table >= FLOW_TABLES && !all_tables) ||
	    (s->goto_table != FLOW_NO_GOTO && !all_tables && s->goto_table <= s->table))
		abort();
	n = flow_format_rule(s, mode, port_name, NULL, text, sizeof(text));
	check_formatted(n, text, sizeof(text));
	memset(small, FILL, sizeof(small));
	if (flow_format_rule(s, mode, port_name, NULL, small, sizeof(small)) != n ||
	    memchr(small, '\0', sizeof(small)) == NULL || strncmp(small, text, strlen(small)) != 0)
		abort();
	if ((size_t)n >= FLOW_TEXT_MAX)
		return;   /* longer than the parser takes: nothing to read back */
	if (flow_parse_rule(text, mode, lookup, NULL, &again, err, sizeof(err)) != 0) {
		fprintf(stderr, "formatted rule refused: '%s': %s\n", text, err);
		abort();
	}
	if (memcmp(s, &again, sizeof(again)) != 0) {
		fprintf(stderr, "rule '%s' reads back to another spec\n", text);
		abort();
	}
	flow_format_rule(&again, mode, port_name, NULL, text2, sizeof(text2));
	if (strcmp(text, text2) != 0)
		abort();
	n = flow_format_match(&s->match, port_name, NULL, text2, sizeof(text2));
	check_formatted(n, text2, sizeof(text2));
	n = flow_format_actions(s, port_name, NULL, text2, sizeof(text2));
	check_formatted(n, text2, sizeof(text2));
}

static void check_group(const struct flow_group_spec *g)
{
	static struct flow_group_spec again;
	static char text[FLOW_TEXT_MAX * 4];
	char err[256];
	int n = flow_format_group(g, port_name, NULL, text, sizeof(text));

	check_formatted(n, text, sizeof(text));
	if (g->n_buckets > FLOW_MAX_BUCKETS || (size_t)n >= FLOW_TEXT_MAX)
		return;
	if (flow_parse_group(text, lookup, NULL, &again, err, sizeof(err)) != 0) {
		fprintf(stderr, "formatted group refused: '%s': %s\n", text, err);
		abort();
	}
	if (memcmp(g, &again, sizeof(again)) != 0) {
		fprintf(stderr, "group '%s' reads back to another spec\n", text);
		abort();
	}
}

static void check_meter(const struct flow_meter_spec *m)
{
	struct flow_meter_spec again;
	char text[256], err[256];
	int n = flow_format_meter(m, text, sizeof(text));

	check_formatted(n, text, sizeof(text));
	if (flow_parse_meter(text, &again, err, sizeof(err)) != 0 ||
	    memcmp(m, &again, sizeof(again)) != 0) {
		fprintf(stderr, "meter '%s' does not read back: %s\n", text, err);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct flow_rule_spec rule;
	static struct flow_group_spec group;
	static char text[FLOW_TEXT_MAX + 64];
	struct flow_meter_spec meter;
	char err[256], small_err[8];
	size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
	int mode, rc;

	memcpy(text, data, n);
	text[n] = '\0';
	for (mode = FLOW_PARSE_ADD; mode <= FLOW_PARSE_TRACE; mode++) {
		memset(err, FILL, sizeof(err));
		rc = flow_parse_rule(text, (enum flow_parse_mode)mode, lookup, NULL, &rule, err,
				     sizeof(err));
		if (rc != 0)
			check_error(rc, err, sizeof(err));
		else
			check_rule(&rule, (enum flow_parse_mode)mode);
		memset(small_err, FILL, sizeof(small_err));
		if (flow_parse_rule(text, (enum flow_parse_mode)mode, lookup, NULL, &rule,
				    small_err, sizeof(small_err)) != rc ||
		    (rc != 0 && memchr(small_err, '\0', sizeof(small_err)) == NULL))
			abort();
	}
	memset(err, FILL, sizeof(err));
	rc = flow_parse_group(text, lookup, NULL, &group, err, sizeof(err));
	if (rc != 0)
		check_error(rc, err, sizeof(err));
	else
		check_group(&group);
	memset(err, FILL, sizeof(err));
	rc = flow_parse_meter(text, &meter, err, sizeof(err));
	if (rc != 0)
		check_error(rc, err, sizeof(err));
	else
		check_meter(&meter);
	return 0;
}
