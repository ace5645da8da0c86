/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The classifier's wildcards (classifier.h): the bits cls_lookup() says its answer
 * depended on must be enough, since the megaflow cache serves every key that agrees on them
 * (flow_cache.h). For random rule sets over several masks and random keys, a key that
 * agrees with another on its wildcards, and is random elsewhere, must get the same rule;
 * after removals and a resort (which rebuilds the presence bitmaps) as well. The test also
 * checks that the wildcards are often narrower than all the masks together: their point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_eal.h>
#include <rte_log.h>

#include "classifier.h"

int sluice_logtype;   /* the daemon's (main.c); RTE_LOGTYPE_USER1's value here */

/* The test is single-threaded: nothing else reads what the classifier frees. */
int wk_defer(void (*fn)(void *arg), void *arg)
{
	fn(arg);
	return 0;
}

#define N_RULES 400
#define N_KEYS 20000

struct rng {
	uint64_t s;
};

static uint32_t next(struct rng *r)
{
	r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(r->s >> 33);
}

static uint32_t prefix_mask(unsigned int len)
{
	return len == 0 ? 0 : UINT32_MAX << (32 - len);
}

/*
 * A key in small ranges, so that rules often match or nearly match; rules draw their values
 * from ranges WIDE times as large, so that a key's value in a field is often none of a
 * subtable's rules' (the case a narrow witness serves).
 */
static void random_key(struct rng *r, struct flow_key *k, unsigned int wide)
{
	memset(k, 0, sizeof(*k));
	k->in_port = next(r) % (4 * wide);
	k->dl_type = rte_cpu_to_be_16(0x0800);
	k->nw_proto = next(r) % 2 ? 6 : 17;
	k->nw_src = rte_cpu_to_be_32(0x0a000000 | (next(r) % (4 * wide)) << 8 |
				     (next(r) % (4 * wide)));
	k->nw_dst = rte_cpu_to_be_32(0x0a000000 | (next(r) % (4 * wide)) << 16 |
				     (next(r) % (4 * wide)));
	k->tp_src = rte_cpu_to_be_16((uint16_t)(1000 + next(r) % (8 * wide)));
	k->tp_dst = rte_cpu_to_be_16((uint16_t)(80 + next(r) % (8 * wide)));
}

/* One of eight masks, I, with the values of a random key under it. */
static void random_match(struct rng *r, unsigned int i, struct flow_match *m)
{
	static const struct { bool port, proto; uint8_t src, dst; uint16_t sp, dp; } shapes[] = {
		{ true, false, 0, 0, 0, 0 },
		{ false, true, 32, 0, 0, 0xffff },
		{ false, true, 24, 16, 0, 0 },
		{ false, true, 0, 32, 0xfff8, 0xffff },
		{ true, true, 30, 0, 0, 0xfffc },
		{ false, true, 0, 0, 0xffff, 0 },
		{ false, false, 31, 31, 0, 0 },
		{ false, true, 32, 32, 0xffff, 0xffff },
	};
	const typeof(shapes[0]) *s = &shapes[i % RTE_DIM(shapes)];
	struct flow_key k;

	random_key(r, &k, 16);
	memset(m, 0, sizeof(*m));
	m->mask.dl_type = UINT16_MAX;
	if (s->port)
		m->mask.in_port = UINT32_MAX;
	if (s->proto)
		m->mask.nw_proto = UINT8_MAX;
	m->mask.nw_src = rte_cpu_to_be_32(prefix_mask(s->src));
	m->mask.nw_dst = rte_cpu_to_be_32(prefix_mask(s->dst));
	m->mask.tp_src = rte_cpu_to_be_16(s->sp);
	m->mask.tp_dst = rte_cpu_to_be_16(s->dp);
	flow_key_and(&m->key, &k, &m->mask);
}

/* KEY with every bit outside WC replaced by a random one. */
static void vary_outside(struct rng *r, const struct flow_key *key, const struct flow_key *wc,
			 struct flow_key *out)
{
	const flow_key_word *k = (const flow_key_word *)key, *w = (const flow_key_word *)wc;
	flow_key_word *o = (flow_key_word *)out;
	struct flow_key noise;
	const flow_key_word *n = (const flow_key_word *)&noise;
	unsigned int i;

	random_key(r, &noise, 1);
	for (i = 0; i < FLOW_KEY_WORDS; i++)
		o[i] = (k[i] & w[i]) | (n[i] & ~w[i]);
}

/* Checks N_KEYS random keys against T; how many had wildcards narrower than ALL_MASKS. */
static unsigned int check_keys(struct rng *r, const struct cls_table *t,
			       const struct flow_key *all_masks)
{
	unsigned int i, narrower = 0;

	for (i = 0; i < N_KEYS; i++) {
		struct flow_key k, k2, wc = { 0 };
		const struct cls_rule *a, *b;

		random_key(r, &k, 1);
		a = cls_lookup(t, &k, 0, &wc);
		vary_outside(r, &k, &wc, &k2);
		b = cls_lookup(t, &k2, CLS_NO_WORKER, NULL);
		assert_ptr_equal(a, b);
		narrower += !flow_key_equal(&wc, all_masks);   /* wc is within them */
	}
	return narrower;
}

static void test_wildcards_decide_the_answer(void **state)
{
	static struct cls_rule rules[N_RULES];
	struct cls_table *t = cls_create(1);
	struct flow_key all_masks = { 0 };
	struct rng r = { 14 };
	unsigned int i, n = 0, narrower;

	(void)state;
	assert_non_null(t);
	for (i = 0; i < N_RULES; i++) {
		memset(&rules[n], 0, sizeof(rules[n]));
		random_match(&r, i, &rules[n].match);
		rules[n].priority = (uint16_t)(next(&r) % 50);
		if (cls_find_exact(t, &rules[n].match, rules[n].priority) != NULL)
			continue;
		assert_int_equal(cls_insert(t, &rules[n]), 0);
		flow_key_or(&all_masks, &rules[n].match.mask);
		n++;
	}
	narrower = check_keys(&r, t, &all_masks);
	assert_true(narrower > N_KEYS / 10);
	/* Most rules leave: their values stay marked until the resort rebuilds the bitmaps. */
	for (i = 0; i < n; i++)
		if (i % 4 != 0)
			cls_remove(t, &rules[i]);
	check_keys(&r, t, &all_masks);
	cls_resort(t);
	check_keys(&r, t, &all_masks);
	cls_destroy(t);
}

int main(void)
{
	char prefix[64];
	char *argv[] = { "test_classifier", "--no-huge", "-m", "64", "--no-pci",
			 "--no-shconf", "--log-level=*:error", "-l", "0", prefix, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wildcards_decide_the_answer),
	};

	snprintf(prefix, sizeof(prefix), "--file-prefix=sltcls%d", (int)getpid());
	if (rte_eal_init((int)RTE_DIM(argv) - 1, argv) < 0)
		return 1;
	sluice_logtype = RTE_LOGTYPE_USER1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
