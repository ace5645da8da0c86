/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's megaflow cache: one per worker, behind the exact-match cache. An entry is a
 * masked key and a value (the pipeline's program): it serves every frame whose key agrees
 * with the entry's on the mask's bits, so one entry can stand for many flows, where the
 * exact-match cache needs one per flow. The mask is what the pipeline looked at when it
 * made the program (the classifier's wildcards, classifier.h), the idea of OVS's datapath
 * flows (lib/dpif-netdev.c's dpcls); this code is our own.
 *
 * Entries are grouped by mask (a lookup tries each mask, the most used first) and kept in
 * a set-associative table. Each entry carries the switch generation it was made in: a
 * rule change makes every entry a miss at once, with no walk over the table, and the list
 * of masks starts again empty.
 *
 * Threads: its worker only; no locks, no allocation after mf_create().
 */
#ifndef SLUICE_FLOW_CACHE_H
#define SLUICE_FLOW_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow_key.h"

#define MF_MAX_MASKS 16

struct mf_cache;

/* A cache of ENTRIES (a power of two, at least 8) entries of VALUE_SIZE bytes each; NULL
 * when out of memory. */
struct mf_cache *mf_create(uint32_t entries, size_t value_size);
void mf_destroy(struct mf_cache *c);

/* The value of the entry of generation GEN that KEY falls in, or NULL. */
const void *mf_lookup(struct mf_cache *c, uint32_t gen, const struct flow_key *key);

/*
 * mf_lookup() of each key I of the N at KEYS for which WANT[I] holds, in order, its value
 * (or NULL: a miss, or not wanted) into VALUES[I]; one call a burst, the hits counted
 * once. Misses are not counted: the caller looks each up again (mf_lookup), after the
 * inserts of the misses before it, and that lookup counts. Returns the hits.
 */
unsigned int mf_lookup_burst(struct mf_cache *c, uint32_t gen, const struct flow_key *keys,
			     const bool *want, unsigned int n, const void **values);

/* How many masks a lookup of generation GEN tries at most: 0 when it is not C's. */
unsigned int mf_mask_count(const struct mf_cache *c, uint32_t gen);

/*
 * Room for the value of a new entry of generation GEN: the frames whose keys agree with KEY
 * on MASK. The caller writes the value (up to the size given at creation) before the next
 * call. NULL when the cache holds MF_MAX_MASKS other masks already.
 */
void *mf_insert(struct mf_cache *c, uint32_t gen, const struct flow_key *key,
		const struct flow_key *mask);

struct mf_stats {
	uint64_t hits, misses, inserts, masks_full;
	uint32_t masks;                 /* in use in the current generation */
};

void mf_read_stats(const struct mf_cache *c, struct mf_stats *s);

#endif
