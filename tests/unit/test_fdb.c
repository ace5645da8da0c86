/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the learning bridge's table (src/fdb.h) and frame parser (src/l2parse.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fdb.h"
#include "l2parse.h"

static const uint8_t mac_a[6] = { 2, 0, 0, 0, 0, 0xa };
static const uint8_t mac_b[6] = { 2, 0, 0, 0, 0, 0xb };

static void *zalloc(size_t size)
{
	return calloc(1, size);
}

static uint16_t port_of(const struct fdb *f, uint64_t key)
{
	const struct fdb_slot *s = fdb_lookup(f, key, fdb_hash(key));

	return s == NULL ? 0xffff : s->port_flags & FDB_PORT_MASK;
}

static void test_key_layout(void **state)
{
	uint64_t k = fdb_key(mac_a, 4094);
	uint8_t back[6];

	(void)state;
	fdb_key_mac(k, back);
	assert_memory_equal(back, mac_a, 6);
	assert_int_equal(fdb_key_vlan(k), 4094);
	assert_true(k & FDB_KEY_VALID);
	assert_int_not_equal(fdb_key(mac_a, 1), fdb_key(mac_a, 2));
	{
		const uint8_t hdr[8] = { 2, 0, 0, 0, 0, 0xa, 0xff, 0xff };

		assert_int_equal(fdb_key_in_header(hdr, 4094), k);
	}
}

static void test_learn_move_static_delete(void **state)
{
	struct fdb f;
	uint64_t a = fdb_key(mac_a, 0), b = fdb_key(mac_b, 0);
	uint32_t prev;

	(void)state;
	assert_int_equal(fdb_init(&f, 1024, zalloc), 0);
	assert_int_equal(fdb_learn(&f, a, 3, 1, &prev), FDB_ADDED);
	assert_int_equal(prev, FDB_NONE);
	assert_int_equal(fdb_learn(&f, a, 3, 2, &prev), FDB_REFRESHED);
	assert_int_equal(fdb_learn(&f, a, 5, 3, &prev), FDB_MOVED);
	assert_int_equal(prev, 3);
	assert_int_equal(port_of(&f, a), 5);
	assert_int_equal(fdb_set_static(&f, b, 7, 3, &prev), FDB_ADDED);
	assert_int_equal(fdb_learn(&f, b, 1, 4, &prev), FDB_STATIC_KEPT);
	assert_int_equal(port_of(&f, b), 7);
	assert_int_equal(f.n_entries, 2);
	assert_true(fdb_delete(&f, a) >= 0);
	assert_int_equal(port_of(&f, a), 0xffff);
	assert_true(fdb_delete(&f, a) < 0);
	assert_int_equal(f.n_entries, 1);
	assert_int_equal(f.n_tombstones, 1);
	fdb_reclaim(&f);
	assert_int_equal(f.n_tombstones, 0);
	free(f.buckets);
}

/* More keys than the table holds: never more than max_entries, a refused key is absent,
 * and a deleted entry's room is taken again once reclaimed. */
static void test_full_and_reclaim(void **state)
{
	struct fdb f;
	uint64_t keys[64];
	unsigned int n = 0, added = 0, i;
	uint8_t mac[6] = { 2, 0, 0, 0, 0, 0 };
	uint32_t prev;

	(void)state;
	assert_int_equal(fdb_init(&f, FDB_MIN_ENTRIES, zalloc), 0);
	for (i = 0; i < 100000 && n < 64; i++) {
		mac[3] = (uint8_t)(i >> 16);
		mac[4] = (uint8_t)(i >> 8);
		mac[5] = (uint8_t)i;
		keys[n++] = fdb_key(mac, 0);
	}
	for (i = 0; i < n; i++)
		if (fdb_learn(&f, keys[i], 1, 0, &prev) == FDB_ADDED)
			added++;
	assert_true(added <= FDB_MIN_ENTRIES);
	assert_int_equal(f.n_entries, added);
	assert_int_equal(fdb_learn(&f, keys[n - 1], 1, 0, &prev) == FDB_FULL,
			 port_of(&f, keys[n - 1]) == 0xffff);
	for (i = 0; i < n && port_of(&f, keys[i]) == 0xffff; i++)
		;
	assert_true(fdb_delete(&f, keys[i]) >= 0);
	fdb_reclaim(&f);
	assert_int_equal(fdb_learn(&f, keys[i], 2, 0, &prev), FDB_ADDED);
	assert_int_equal(f.n_entries, added);
	free(f.buckets);
}

static bool older_than_10(const struct fdb_slot *s, void *arg)
{
	(void)arg;
	return (s->port_flags & FDB_STATIC) == 0 && s->seen < 10;
}

static void test_sweep(void **state)
{
	struct fdb f;
	uint32_t prev;

	(void)state;
	assert_int_equal(fdb_init(&f, 64, zalloc), 0);
	fdb_learn(&f, fdb_key(mac_a, 0), 1, 5, &prev);
	fdb_learn(&f, fdb_key(mac_b, 0), 1, 20, &prev);
	fdb_set_static(&f, fdb_key(mac_a, 9), 2, 0, &prev);
	assert_int_equal(fdb_sweep(&f, older_than_10, NULL), 1);
	assert_int_equal(port_of(&f, fdb_key(mac_a, 0)), 0xffff);
	assert_int_equal(port_of(&f, fdb_key(mac_b, 0)), 1);
	assert_int_equal(port_of(&f, fdb_key(mac_a, 9)), 2);
	free(f.buckets);
}

static void test_parse(void **state)
{
	static uint64_t member[4096];
	uint8_t frame[64] __attribute__((aligned(8))) = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 0xa, 0x81, 0x00, 0x00, 0x0a,
		0x08, 0x00 };
	struct l2_frame f;

	(void)state;
	member[10] = 1u << 3;
	assert_int_equal(l2_parse(frame, 60, 3, 0, member, false, &f), -1);
	assert_true(f.tagged);
	assert_int_equal(f.vlan, 10);
	assert_int_equal(f.dst_key, 0);                  /* broadcast */
	assert_int_equal(f.src_key, fdb_key(mac_a, 10));
	assert_int_equal(l2_parse(frame, 60, 4, 0, member, false, &f), STATS_DROP_VLAN);
	assert_int_equal(l2_parse(frame, 60, 3, 10, member, false, &f), STATS_DROP_VLAN);
	assert_int_equal(l2_parse(frame, 17, 3, 0, member, false, &f), STATS_DROP_MALFORMED);
	assert_int_equal(l2_parse(frame, 13, 3, 0, member, false, &f), STATS_DROP_MALFORMED);
	frame[12] = 0x08;                                /* untagged, on an access port */
	frame[13] = 0x00;
	assert_int_equal(l2_parse(frame, 60, 3, 20, member, false, &f), -1);
	assert_false(f.tagged);
	assert_int_equal(f.vlan, 20);
	frame[6] = 1;                                    /* group source */
	assert_int_equal(l2_parse(frame, 60, 3, 20, member, false, &f), STATS_DROP_MALFORMED);
}

/* 01:80:C2:00:00:00..0F are dropped unless forwarded; ..10 and other groups are not. */
static void test_parse_reserved(void **state)
{
	static uint64_t member[4096];
	uint8_t frame[64] __attribute__((aligned(8))) = {
		0x01, 0x80, 0xc2, 0x00, 0x00, 0x00, 2, 0, 0, 0, 0, 0xa, 0x88, 0xcc };
	struct l2_frame f;
	unsigned int last;

	(void)state;
	member[0] = 1u << 3;
	for (last = 0; last <= 0x0f; last++) {
		frame[5] = (uint8_t)last;
		assert_int_equal(l2_parse(frame, 60, 3, 0, member, false, &f),
				 STATS_DROP_RESERVED_MULTICAST);
		/* Before the VLAN check: counted as reserved on any port. */
		assert_int_equal(l2_parse(frame, 60, 4, 0, member, false, &f),
				 STATS_DROP_RESERVED_MULTICAST);
		assert_int_equal(l2_parse(frame, 60, 3, 0, member, true, &f), -1);
		assert_int_equal(f.dst_key, 0);
	}
	frame[5] = 0x10;
	assert_int_equal(l2_parse(frame, 60, 3, 0, member, false, &f), -1);
	frame[5] = 0x0e;
	frame[3] = 0x01;                                 /* 01:80:C2:01:00:0E */
	assert_int_equal(l2_parse(frame, 60, 3, 0, member, false, &f), -1);
	frame[0] = 0x03;                                 /* another group address */
	frame[3] = 0x00;
	assert_int_equal(l2_parse(frame, 60, 3, 0, member, false, &f), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_layout),
		cmocka_unit_test(test_learn_move_static_delete),
		cmocka_unit_test(test_full_and_reclaim),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_reserved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
