/* SPDX-License-Identifier: BSD-3-Clause */
/* The forwarding database's writer side and its sizing; fdb.h explains the design. */
#include "fdb.h"

size_t fdb_memory(uint32_t max_entries)
{
	/* Twice the slots the entries need, in whole buckets, a power of two of them. */
	uint64_t buckets = rte_align64pow2(((uint64_t)max_entries * 2 + FDB_SLOTS - 1) /
					   FDB_SLOTS);

	return (size_t)buckets * sizeof(struct fdb_bucket);
}

int fdb_init(struct fdb *f, uint32_t max_entries, void *(*alloc)(size_t size))
{
	size_t bytes;

	if (max_entries < FDB_MIN_ENTRIES || max_entries > FDB_MAX_ENTRIES)
		return -1;
	bytes = fdb_memory(max_entries);
	f->buckets = alloc(bytes);
	if (f->buckets == NULL)
		return -1;
	f->mask = (uint32_t)(bytes / sizeof(struct fdb_bucket)) - 1;
	f->max_entries = max_entries;
	f->n_entries = 0;
	f->n_tombstones = 0;
	return 0;
}

static struct fdb_slot *free_slot(struct fdb *f, uint32_t hash)
{
	struct fdb_bucket *b = &f->buckets[hash & f->mask];
	unsigned int i, pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < FDB_SLOTS; i++)
			if (b->slot[i].key == 0)
				return &b->slot[i];
		b = &f->buckets[fdb_alt_hash(hash) & f->mask];
	}
	return NULL;
}

/* Publishes a new entry: its values first, then the key with release (fdb.h). */
static enum fdb_result insert(struct fdb *f, uint64_t key, uint32_t port_flags, uint32_t now)
{
	struct fdb_slot *s;

	if (f->n_entries >= f->max_entries)
		return FDB_FULL;
	s = free_slot(f, fdb_hash(key));
	if (s == NULL)
		return FDB_FULL;
	__atomic_store_n(&s->port_flags, port_flags, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seen, now, __ATOMIC_RELAXED);
	__atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
	f->n_entries++;
	return FDB_ADDED;
}

static enum fdb_result update(struct fdb_slot *s, uint32_t port_flags, uint32_t now)
{
	uint32_t old = s->port_flags;

	fdb_touch(s, now);
	if (old == port_flags)
		return FDB_REFRESHED;
	__atomic_store_n(&s->port_flags, port_flags, __ATOMIC_RELAXED);
	return (old & FDB_PORT_MASK) == (port_flags & FDB_PORT_MASK) ? FDB_REFRESHED : FDB_MOVED;
}

enum fdb_result fdb_learn(struct fdb *f, uint64_t key, uint16_t port, uint32_t now,
			  uint32_t *prev)
{
	struct fdb_slot *s = fdb_lookup(f, key, fdb_hash(key));

	*prev = s != NULL ? s->port_flags : FDB_NONE;
	if (s == NULL)
		return insert(f, key, port, now);
	if ((s->port_flags & FDB_STATIC) != 0)
		return (s->port_flags & FDB_PORT_MASK) == port ? FDB_REFRESHED : FDB_STATIC_KEPT;
	return update(s, port, now);
}

enum fdb_result fdb_set_static(struct fdb *f, uint64_t key, uint16_t port, uint32_t now,
			       uint32_t *prev)
{
	struct fdb_slot *s = fdb_lookup(f, key, fdb_hash(key));

	*prev = s != NULL ? s->port_flags : FDB_NONE;
	if (s == NULL)
		return insert(f, key, port | FDB_STATIC, now);
	return update(s, port | FDB_STATIC, now);
}

static void kill_slot(struct fdb *f, struct fdb_slot *s)
{
	__atomic_store_n(&s->key, FDB_TOMBSTONE, __ATOMIC_RELEASE);
	f->n_entries--;
	f->n_tombstones++;
}

int64_t fdb_delete(struct fdb *f, uint64_t key)
{
	struct fdb_slot *s = fdb_lookup(f, key, fdb_hash(key));

	if (s == NULL)
		return -1;
	kill_slot(f, s);
	return s->port_flags;
}

unsigned int fdb_sweep(struct fdb *f, bool (*visit)(const struct fdb_slot *s, void *arg),
		       void *arg)
{
	unsigned int deleted = 0, i;
	uint32_t b;

	for (b = 0; b <= f->mask; b++)
		for (i = 0; i < FDB_SLOTS; i++) {
			struct fdb_slot *s = &f->buckets[b].slot[i];

			if ((s->key & FDB_KEY_VALID) != 0 && visit(s, arg)) {
				kill_slot(f, s);
				deleted++;
			}
		}
	return deleted;
}

void fdb_reclaim(struct fdb *f)
{
	unsigned int i;
	uint32_t b;

	if (f->n_tombstones == 0)
		return;
	for (b = 0; b <= f->mask; b++)
		for (i = 0; i < FDB_SLOTS; i++)
			if (f->buckets[b].slot[i].key == FDB_TOMBSTONE)
				__atomic_store_n(&f->buckets[b].slot[i].key, 0, __ATOMIC_RELAXED);
	f->n_tombstones = 0;
}
