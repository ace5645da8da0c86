/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The forwarding database of a learning switch: (MAC, VLAN) -> port, with an age and a
 * static flag. Built for one writer and any number of lock-free readers.
 *
 * Layout. A power-of-two array of buckets, each one cache line of four 16-byte slots holding
 * the key itself, so a lookup reads one line (two when the key's first bucket was full and it
 * went to its second: two-choice hashing). At most half the slots are ever used, which keeps
 * a full first bucket rare.
 *
 * Keys. Bits 0-47 hold the MAC in wire order, 48-59 the VLAN, bit 63 is set in every key a
 * lookup can match. An empty slot holds 0; a deleted one FDB_TOMBSTONE, which no key equals
 * and no insert may take.
 *
 * Memory ordering. The writer fills a slot's port and age, then stores its key with release;
 * a reader loads the key with acquire and then reads the port, so it sees the entry's
 * values. In-place changes are single relaxed 32-bit stores: the writer alone changes the
 * port (a station move), readers (workers) refresh the age, so neither can undo the other's
 * word. Deleting stores FDB_TOMBSTONE; the slot becomes reusable only when the owner calls
 * fdb_reclaim() after an RCU grace period, so a reader that matched a key never reads the
 * port of another key put in the same slot.
 */
#ifndef SLUICE_FDB_H
#define SLUICE_FDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rte_common.h>
#include <rte_hash_crc.h>

#define FDB_SLOTS 4
#define FDB_KEY_VALID (UINT64_C(1) << 63)
#define FDB_TOMBSTONE UINT64_C(1)
#define FDB_PORT_MASK 0xffffu
#define FDB_STATIC (1u << 16)
#define FDB_MIN_ENTRIES 16
#define FDB_MAX_ENTRIES (1u << 24)

struct fdb_slot {
	uint64_t key;
	uint32_t port_flags;          /* port index | FDB_STATIC; writer only */
	uint32_t seen;                /* seconds on the owner's clock; readers refresh it */
};

struct fdb_bucket {
	struct fdb_slot slot[FDB_SLOTS];
} __rte_aligned(64);

struct fdb {
	struct fdb_bucket *buckets;
	uint32_t mask;                /* number of buckets - 1 */
	uint32_t max_entries;
	/* writer only */
	uint32_t n_entries;
	uint32_t n_tombstones;
};

/* Results of fdb_learn and fdb_set. */
enum fdb_result {
	FDB_ADDED,                    /* a new entry */
	FDB_MOVED,                    /* the key was on another port; it is now on PORT */
	FDB_REFRESHED,                /* the key was on PORT already */
	FDB_STATIC_KEPT,              /* a static entry names another port; left alone */
	FDB_FULL,                     /* max_entries reached, or both buckets full */
};

static inline uint64_t fdb_key(const uint8_t mac[6], uint16_t vlan)
{
	uint64_t k = 0;

	memcpy(&k, mac, 6);           /* little-endian hosts: bits 0-47 */
	return k | ((uint64_t)(vlan & 0xfff) << 48) | FDB_KEY_VALID;
}

/*
 * The same key from a MAC followed by two more readable bytes (the addresses in a frame's
 * header): one 8-byte load and a mask, where six bytes copied into a word would be two
 * stores and a load that cannot forward from them (a stall of some 12 cycles).
 */
static inline uint64_t fdb_key_in_header(const uint8_t *mac_and_2, uint16_t vlan)
{
	uint64_t k;

	memcpy(&k, mac_and_2, sizeof(k));
	return (k & UINT64_C(0xffffffffffff)) | ((uint64_t)(vlan & 0xfff) << 48) | FDB_KEY_VALID;
}

static inline void fdb_key_mac(uint64_t key, uint8_t mac[6])
{
	memcpy(mac, &key, 6);
}

static inline uint16_t fdb_key_vlan(uint64_t key)
{
	return (uint16_t)((key >> 48) & 0xfff);
}

static inline uint32_t fdb_hash(uint64_t key)
{
	return rte_hash_crc_8byte(key, 0x5bd1e995);
}

/* The second bucket of a key: a hash of the first hash, so it is different most times. */
static inline uint32_t fdb_alt_hash(uint32_t hash)
{
	return rte_hash_crc_4byte(hash, 0x27d4eb2f);
}

static inline const struct fdb_bucket *fdb_bucket_of(const struct fdb *f, uint32_t hash)
{
	return &f->buckets[hash & f->mask];
}

static inline struct fdb_slot *fdb_find_in(const struct fdb_bucket *b, uint64_t key)
{
	unsigned int i;

	for (i = 0; i < FDB_SLOTS; i++)
		if (__atomic_load_n(&b->slot[i].key, __ATOMIC_ACQUIRE) == key)
			return (struct fdb_slot *)(uintptr_t)&b->slot[i];  /* readers may refresh its age */
	return NULL;
}

/* Reader side: the slot of KEY (whose fdb_hash is HASH), or NULL. */
static inline struct fdb_slot *fdb_lookup(const struct fdb *f, uint64_t key, uint32_t hash)
{
	struct fdb_slot *s = fdb_find_in(fdb_bucket_of(f, hash), key);

	return s != NULL ? s : fdb_find_in(fdb_bucket_of(f, fdb_alt_hash(hash)), key);
}

static inline uint32_t fdb_slot_port_flags(const struct fdb_slot *s)
{
	return __atomic_load_n(&s->port_flags, __ATOMIC_RELAXED);
}

/* Reader side: marks S seen at NOW, writing only when the second changed. */
static inline void fdb_touch(struct fdb_slot *s, uint32_t now)
{
	if (__atomic_load_n(&s->seen, __ATOMIC_RELAXED) != now)
		__atomic_store_n(&s->seen, now, __ATOMIC_RELAXED);
}

/*
 * Makes a table for MAX_ENTRIES (FDB_MIN_ENTRIES..FDB_MAX_ENTRIES) with ALLOC, a calloc-like
 * function (rte_zmalloc on the daemon, calloc in tests). Returns 0 or -1.
 */
int fdb_init(struct fdb *f, uint32_t max_entries, void *(*alloc)(size_t size));
/* Bytes of bucket memory for MAX_ENTRIES. */
size_t fdb_memory(uint32_t max_entries);

/*
 * Writer side. fdb_learn puts KEY on PORT as a dynamic entry unless a static entry holds it;
 * fdb_set_static makes it static on PORT. *PREV gets the entry's port_flags before the call,
 * FDB_NONE when there was no entry (so the caller can keep per-port counts).
 */
#define FDB_NONE UINT32_MAX
enum fdb_result fdb_learn(struct fdb *f, uint64_t key, uint16_t port, uint32_t now,
			  uint32_t *prev);
enum fdb_result fdb_set_static(struct fdb *f, uint64_t key, uint16_t port, uint32_t now,
			       uint32_t *prev);
/* Deletes KEY; returns its port_flags, or -1 when there was no such entry. */
int64_t fdb_delete(struct fdb *f, uint64_t key);

/*
 * Calls VISIT for every live entry; the entry is deleted when VISIT returns true. Returns
 * the number deleted.
 */
unsigned int fdb_sweep(struct fdb *f, bool (*visit)(const struct fdb_slot *s, void *arg),
		       void *arg);

/* Turns every tombstone back into a free slot: call only after an RCU grace period. */
void fdb_reclaim(struct fdb *f);

#endif
