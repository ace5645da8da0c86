/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the learning bridge's frame parser (l2parse.h) and its table
 * (fdb.h). The input is a list of operations: frames to parse and learn or look up, static
 * entries, deletions, aging sweeps and reclaims. A shadow table of the same entries, kept the
 * obvious way, must agree with the real one after every operation, and the parser must drop
 * frames to the reserved group addresses exactly when told to; the sanitizers catch
 * everything else. `make fuzz` runs it for long, `make test` for 30 seconds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdb.h"
#include "l2parse.h"

#define MAX_ENTRIES 64
#define SHADOW_MAX 4096

struct shadow_entry {
	uint64_t key;
	uint16_t port;
	bool is_static;
	uint32_t seen;
};

struct state {
	struct fdb fdb;
	struct shadow_entry sh[SHADOW_MAX];
	unsigned int n;
	uint32_t now;
	uint64_t member[4096];
	uint8_t frame[256] __attribute__((aligned(8)));
};

static void *zalloc(size_t size)
{
	return calloc(1, size);
}

static struct shadow_entry *shadow_find(struct state *s, uint64_t key)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (s->sh[i].key == key)
			return &s->sh[i];
	return NULL;
}

static void shadow_remove(struct state *s, struct shadow_entry *e)
{
	*e = s->sh[--s->n];
}

static void check(struct state *s)
{
	unsigned int i;

	if (s->fdb.n_entries != s->n)
		abort();
	for (i = 0; i < s->n; i++) {
		const struct fdb_slot *slot = fdb_lookup(&s->fdb, s->sh[i].key,
							 fdb_hash(s->sh[i].key));

		if (slot == NULL || (slot->port_flags & FDB_PORT_MASK) != s->sh[i].port ||
		    ((slot->port_flags & FDB_STATIC) != 0) != s->sh[i].is_static)
			abort();
	}
}

static void learn(struct state *s, uint64_t key, uint16_t port, bool make_static)
{
	struct shadow_entry *e = shadow_find(s, key);
	enum fdb_result r;
	uint32_t prev;

	r = make_static ? fdb_set_static(&s->fdb, key, port, s->now, &prev)
			: fdb_learn(&s->fdb, key, port, s->now, &prev);
	if (r == FDB_FULL) {
		if (e != NULL)
			abort();   /* an existing key is never refused */
		return;
	}
	if (e == NULL) {
		if (r != FDB_ADDED || prev != FDB_NONE || s->n == SHADOW_MAX)
			abort();
		e = &s->sh[s->n++];
		*e = (struct shadow_entry){ .key = key, .port = port, .is_static = make_static };
	} else if (e->is_static && !make_static) {
		if (r != (e->port == port ? FDB_REFRESHED : FDB_STATIC_KEPT))
			abort();
		return;
	} else {
		if (r != (e->port == port ? FDB_REFRESHED : FDB_MOVED))
			abort();
		e->port = port;
		e->is_static = make_static;
	}
	e->seen = s->now;
}

static bool expired(const struct fdb_slot *slot, void *arg)
{
	struct state *s = arg;

	return (slot->port_flags & FDB_STATIC) == 0 && s->now - slot->seen > 3;
}

static void age(struct state *s)
{
	unsigned int i = 0, deleted;

	s->now += 2;
	deleted = fdb_sweep(&s->fdb, expired, s);
	while (i < s->n)
		if (!s->sh[i].is_static && s->now - s->sh[i].seen > 3) {
			shadow_remove(s, &s->sh[i]);
			deleted--;
		} else {
			i++;
		}
	if (deleted != 0)
		abort();
}

/* Whether the frame's destination is 01:80:C2:00:00:00..0F, written out the obvious way. */
static bool is_reserved(const uint8_t *frame)
{
	return frame[0] == 0x01 && frame[1] == 0x80 && frame[2] == 0xc2 && frame[3] == 0 &&
	       frame[4] == 0 && frame[5] <= 0x0f;
}

/* One operation at DATA; returns the bytes it used. */
static size_t step(struct state *s, const uint8_t *data, size_t size)
{
	uint8_t op = data[0], port = size > 1 ? data[1] % 64 : 0;
	size_t len = size > 2 ? data[2] : 0;
	struct shadow_entry *e;
	struct l2_frame f;
	int drop;

	if (len > size - 3 || size < 3)
		len = size > 3 ? size - 3 : 0;
	switch (op % 8) {
	case 5:
		if (s->n > 0) {
			e = &s->sh[port % s->n];
			if (fdb_delete(&s->fdb, e->key) < 0)
				abort();
			shadow_remove(s, e);
		}
		break;
	case 6:
		age(s);
		break;
	case 7:
		fdb_reclaim(&s->fdb);
		break;
	default:
		/* Frames sit 2-byte aligned in mbufs, as struct rte_ether_hdr needs. */
		memcpy(s->frame, data + 3, len);
		drop = l2_parse(s->frame, (uint32_t)len, port, op & 0x10 ? (op >> 5) + 1 : 0,
				s->member, op & 0x08, &f);
		if (drop >= 0 && drop != STATS_DROP_MALFORMED && drop != STATS_DROP_VLAN &&
		    drop != STATS_DROP_RESERVED_MULTICAST)
			abort();
		/* Reserved group destinations are dropped exactly when not forwarded. */
		if (len >= 14 && (drop < 0 || drop == STATS_DROP_VLAN) && !(op & 0x08) &&
		    is_reserved(s->frame))
			abort();
		if (drop == STATS_DROP_RESERVED_MULTICAST && ((op & 0x08) || !is_reserved(s->frame)))
			abort();
		if (drop < 0) {
			if (fdb_key_vlan(f.src_key) != f.vlan || (f.src_key & FDB_KEY_VALID) == 0)
				abort();
			learn(s, f.src_key, port, op % 8 == 4);
			if (f.dst_key != 0)
				(void)fdb_lookup(&s->fdb, f.dst_key, fdb_hash(f.dst_key));
		}
		break;
	}
	check(s);
	return 3 + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct state s;
	size_t used;
	unsigned int v;

	free(s.fdb.buckets);
	memset(&s, 0, sizeof(s));
	if (fdb_init(&s.fdb, MAX_ENTRIES, zalloc) != 0)
		abort();
	/* VLAN membership: every port in the even VLANs, port v % 64 in the odd ones. */
	for (v = 0; v < 4096; v++)
		s.member[v] = v % 2 == 0 ? UINT64_MAX : UINT64_C(1) << (v % 64);
	while (size > 0) {
		used = step(&s, data, size);
		data += used;
		size -= used < size ? used : size;
	}
	return 0;
}
