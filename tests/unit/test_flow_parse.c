/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs every row of tests/data/flow_parse_cases.tsv through flow_parse.c: one cmocka test per
 * row. An accepted text must format to the expected text, and that text must parse back to
 * the same spec, byte for byte (the round trip); a refused text must say the expected words.
 * A few checks besides the table pin down the key layout other modules rely on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow.h"

#define MAX_CASES 1024
#define TEXT_LEN 1024

enum kind { K_ADD, K_MOD, K_DEL, K_TRACE, K_GROUP, K_METER };

static const char *const kind_names[] = { "add", "mod", "del", "trace", "group", "meter" };

struct fp_case {
	char text[TEXT_LEN];
	enum kind kind;
	int ok;
	char want[TEXT_LEN];      /* the formatted text, or a piece of the error */
	char name[TEXT_LEN + 32];
};

/* The test switch: vm1, vm2, fw1 are ports 0..2 (OpenFlow 1..3); numbers 1..8 are ports
 * 0..7, of which only the first three have names. */
static const char *const port_names[] = { "vm1", "vm2", "fw1" };

static int lookup(void *ctx, const char *name)
{
	unsigned int i;

	(void)ctx;
	for (i = 0; i < 3; i++)
		if (strcmp(name, port_names[i]) == 0)
			return (int)i;
	if (name[0] >= '1' && name[0] <= '8' && name[1] == '\0')
		return name[0] - '1';
	return -1;
}

static const char *port_name(void *ctx, uint32_t index)
{
	(void)ctx;
	return index < 3 ? port_names[index] : NULL;
}

static enum flow_parse_mode mode_of(enum kind k)
{
	return k == K_MOD ? FLOW_PARSE_MODIFY : k == K_DEL ? FLOW_PARSE_DELETE :
	       k == K_TRACE ? FLOW_PARSE_TRACE : FLOW_PARSE_ADD;
}

/* Parses TEXT as C's kind into SPEC (a rule, group or meter spec); formats it into OUT. */
static int parse_and_format(const struct fp_case *c, const char *text, void *spec, char *out,
			    size_t len, char *err, size_t err_len)
{
	int rc;

	if (c->kind == K_GROUP) {
		rc = flow_parse_group(text, lookup, NULL, spec, err, err_len);
		if (rc == 0)
			flow_format_group(spec, port_name, NULL, out, len);
	} else if (c->kind == K_METER) {
		rc = flow_parse_meter(text, spec, err, err_len);
		if (rc == 0)
			flow_format_meter(spec, out, len);
	} else {
		rc = flow_parse_rule(text, mode_of(c->kind), lookup, NULL, spec, err, err_len);
		if (rc == 0)
			flow_format_rule(spec, mode_of(c->kind), port_name, NULL, out, len);
	}
	return rc;
}

static size_t spec_size(enum kind k)
{
	return k == K_GROUP ? sizeof(struct flow_group_spec) :
	       k == K_METER ? sizeof(struct flow_meter_spec) : sizeof(struct flow_rule_spec);
}

static void check_case(void **state)
{
	static struct flow_group_spec a, b;   /* the largest spec; rules and meters fit */
	const struct fp_case *c = *state;
	char err[256] = "", out[FLOW_TEXT_MAX], again[FLOW_TEXT_MAX];
	int rc = parse_and_format(c, c->text, &a, out, sizeof(out), err, sizeof(err));

	_Static_assert(sizeof(a) >= sizeof(struct flow_rule_spec), "spec buffer size");
	if (!c->ok) {
		if (rc == 0)
			fail_msg("'%s' accepted as '%s', expected an error with '%s'", c->text, out,
				 c->want);
		if (strstr(err, c->want) == NULL)
			fail_msg("'%s': error '%s' lacks '%s'", c->text, err, c->want);
		return;
	}
	if (rc != 0)
		fail_msg("'%s' refused: %s", c->text, err);
	if (strcmp(out, c->want) != 0)
		fail_msg("'%s' formats as '%s', expected '%s'", c->text, out, c->want);
	if (parse_and_format(c, out, &b, again, sizeof(again), err, sizeof(err)) != 0)
		fail_msg("'%s' (from '%s') does not parse back: %s", out, c->text, err);
	if (memcmp(&a, &b, spec_size(c->kind)) != 0)
		fail_msg("'%s' parses back to another spec than '%s'", out, c->text);
	assert_string_equal(out, again);
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

static int parse_kind(const char *s)
{
	unsigned int i;

	for (i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (strcmp(s, kind_names[i]) == 0)
			return (int)i;
	return -1;
}

static int load_cases(const char *file, struct fp_case *cases)
{
	char buf[4 * TEXT_LEN], kind[16], verdict[16], *p;
	FILE *f = fopen(file, "r");
	int n = 0, k;

	if (f == NULL) {
		perror(file);
		return -1;
	}
	while (n < MAX_CASES && fgets(buf, sizeof(buf), f) != NULL) {
		struct fp_case *c = &cases[n];

		if (buf[0] == '#' || buf[0] == '\n')
			continue;
		p = buf;
		next_field(&p, c->text, sizeof(c->text));
		next_field(&p, kind, sizeof(kind));
		next_field(&p, verdict, sizeof(verdict));
		next_field(&p, c->want, sizeof(c->want));
		k = parse_kind(kind);
		if (k < 0 || (strcmp(verdict, "ok") != 0 && strcmp(verdict, "error") != 0)) {
			fprintf(stderr, "%s: bad row '%s'\n", file, c->text);
			fclose(f);
			return -1;
		}
		c->kind = (enum kind)k;
		c->ok = strcmp(verdict, "ok") == 0;
		snprintf(c->name, sizeof(c->name), "%.8s '%.1000s'", kind, c->text);
		n++;
	}
	fclose(f);
	return n;
}

static uint16_t be16(uint16_t v)
{
	const uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	uint16_t r;

	memcpy(&r, b, 2);
	return r;
}

/* The key layout flow_key.h promises, seen from the parser's side. */
static void check_key_layout(void **state)
{
	static struct flow_rule_spec s;
	const struct flow_key *k = &s.match.key, *m = &s.match.mask;
	char err[128];

	(void)state;
	assert_int_equal(flow_parse_rule("tcp,in_port=vm2,dl_vlan=5,dl_vlan_pcp=3,"
					 "nw_src=10.1.2.0/24,tp_dst=80,tcp_flags=+syn-ack,"
					 "metadata=0x10/0xf0,actions=drop", FLOW_PARSE_ADD,
					 lookup, NULL, &s, err, sizeof(err)), 0);
	assert_int_equal(k->in_port, 1);
	assert_int_equal(m->in_port, UINT32_MAX);
	assert_int_equal(k->dl_type, be16(0x0800));
	assert_int_equal(k->nw_proto, 6);
	assert_int_equal(k->vlan_tci, be16(0x7005));   /* pcp 3, CFI, vid 5 */
	assert_int_equal(m->vlan_tci, be16(0xffff));
	assert_memory_equal(&k->nw_src, "\x0a\x01\x02\x00", 4);
	assert_memory_equal(&m->nw_src, "\xff\xff\xff\x00", 4);
	assert_int_equal(k->tp_dst, be16(80));
	assert_int_equal(k->tcp_flags, be16(0x002));
	assert_int_equal(m->tcp_flags, be16(0x012));
	assert_true(k->metadata == 0x10 && m->metadata == 0xf0);
	assert_int_equal(flow_parse_rule("icmp,icmp_type=8,icmp_code=1", FLOW_PARSE_TRACE, lookup,
					 NULL, &s, err, sizeof(err)), 0);
	assert_int_equal(k->tp_src, be16(8));
	assert_int_equal(k->tp_dst, be16(1));
	assert_int_equal(flow_parse_rule("arp,arp_op=2,arp_tpa=1.2.3.4", FLOW_PARSE_TRACE, lookup,
					 NULL, &s, err, sizeof(err)), 0);
	assert_int_equal(k->nw_proto, 2);
	assert_memory_equal(&k->nw_dst, "\x01\x02\x03\x04", 4);
	assert_int_equal(flow_parse_rule("dl_vlan=0xffff,actions=drop", FLOW_PARSE_ADD, lookup,
					 NULL, &s, err, sizeof(err)), 0);
	assert_true(k->vlan_tci == 0 && m->vlan_tci == 0xffff);
}

static void check_actions_layout(void **state)
{
	static struct flow_rule_spec s;
	char err[128], buf[256];
	int rc;

	(void)state;
	assert_int_equal(flow_parse_rule("ip,actions=meter:3,mod_nw_tos:40,set_field:1.2.3.4->"
					 "ip_dst,push_vlan:0x88a8,output:fw1,controller:128,"
					 "write_actions(group:7),goto_table:2", FLOW_PARSE_ADD,
					 lookup, NULL, &s, err, sizeof(err)), 0);
	assert_int_equal(s.meter, 3);
	assert_int_equal(s.n_apply, 5);
	assert_int_equal(s.apply[0].type, FLOW_ACT_SET_FIELD);
	assert_int_equal(s.apply[0].field, FLOW_FIELD_IP_DSCP);
	assert_int_equal(s.apply[0].value[0], 10);
	assert_memory_equal(s.apply[1].value, "\x01\x02\x03\x04", 4);
	assert_int_equal(s.apply[2].arg, 0x88a8);
	assert_int_equal(s.apply[3].port, 2);
	assert_int_equal(s.apply[4].port, FLOW_PORT_CONTROLLER);
	assert_int_equal(s.apply[4].arg, 128);
	assert_int_equal(s.n_write, 1);
	assert_int_equal(s.write[0].arg, 7);
	assert_int_equal(s.goto_table, 2);
	rc = flow_format_actions(&s, port_name, NULL, buf, sizeof(buf));
	assert_int_equal(rc, (int)strlen(buf));
	assert_string_equal(buf, "meter:3,mod_nw_tos:40,mod_nw_dst:1.2.3.4,push_vlan:0x88a8,"
			    "output:fw1,CONTROLLER:128,write_actions(group:7),goto_table:2");
	/* A short buffer: cut and terminated, the full length returned. */
	assert_int_equal(flow_format_actions(&s, port_name, NULL, buf, 8), (int)strlen(
		"meter:3,mod_nw_tos:40,mod_nw_dst:1.2.3.4,push_vlan:0x88a8,output:fw1,"
		"CONTROLLER:128,write_actions(group:7),goto_table:2"));
	assert_string_equal(buf, "meter:3");
	assert_int_equal(flow_format_action_list(s.apply, 0, port_name, NULL, buf, sizeof(buf)),
			 4);
	assert_string_equal(buf, "drop");
	assert_string_equal(flow_field_name(FLOW_FIELD_DL_DST), "eth_dst");
	assert_int_equal(flow_field_width(FLOW_FIELD_IPV6_SRC), 16);
	assert_int_equal(flow_field_width(FLOW_FIELD_TUN_ID), 8);
	assert_null(flow_field_name(FLOW_FIELD_COUNT));
}

static void check_errors_bounded(void **state)
{
	static struct flow_rule_spec s;
	static char big[FLOW_TEXT_MAX + 10];
	char err[8];

	(void)state;
	/* A small error buffer is never overrun, and a failed parse leaves a default spec. */
	assert_int_equal(flow_parse_rule("tp_dst=80,actions=drop", FLOW_PARSE_ADD, lookup, NULL,
					 &s, err, sizeof(err)), -1);
	assert_int_equal(strlen(err), sizeof(err) - 1);
	assert_int_equal(s.priority, 32768);
	assert_int_equal(flow_parse_rule("tp_dst=80", FLOW_PARSE_ADD, lookup, NULL, &s, NULL, 0),
			 -1);
	memset(big, 'x', sizeof(big) - 1);
	assert_int_equal(flow_parse_rule(big, FLOW_PARSE_ADD, lookup, NULL, &s, err, sizeof(err)),
			 -1);
}

int main(int argc, char **argv)
{
	static struct fp_case cases[MAX_CASES];
	static struct CMUnitTest tests[MAX_CASES + 3];
	int n, i;

	if (argc < 2) {
		fprintf(stderr, "usage: %s flow_parse_cases.tsv\n", argv[0]);
		return 2;
	}
	n = load_cases(argv[1], cases);
	if (n <= 0)
		return 2;
	for (i = 0; i < n; i++)
		tests[i] = (struct CMUnitTest){ .name = cases[i].name, .test_func = check_case,
						.initial_state = &cases[i] };
	tests[n] = (struct CMUnitTest){ .name = "key layout", .test_func = check_key_layout };
	tests[n + 1] = (struct CMUnitTest){ .name = "action layout",
					    .test_func = check_actions_layout };
	tests[n + 2] = (struct CMUnitTest){ .name = "errors bounded",
					    .test_func = check_errors_bounded };
	return _cmocka_run_group_tests("flow_parse", tests, (size_t)n + 3, NULL, NULL);
}
