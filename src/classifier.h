/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The classifier of one flow table: a tuple-space search. Rules with the same mask share a
 * subtable, one rte_hash from the masked key to the highest-priority rule with that match; a
 * lookup tries the subtables in descending order of the highest priority they hold and stops
 * as soon as no remaining subtable can beat the best rule found (OVS's lib/classifier.c has
 * the same order; VPP's ACL plugin groups its rules by mask type the same way).
 *
 * A subtable's hash key is not the whole 96-byte flow key but only the words its mask
 * covers, gathered: a 5-tuple ACL hashes and compares 24 bytes, an in_port rule 8.
 *
 * Threads: one writer, the control thread (insert, remove, resort); any number of workers
 * look up concurrently without locks. The hashes are rte_hash in lock-free mode; the array
 * of subtables a lookup walks is published by pointer and replaced as a whole; what a worker
 * may still read (a removed rule, a key slot, a replaced array or subtable) is freed after
 * an RCU grace period through wk_defer() (worker.h).
 */
#ifndef SLUICE_CLASSIFIER_H
#define SLUICE_CLASSIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "flow.h"

struct cls_subtable;

/* A rule as the classifier sees it; embedded first in the switch's own rule. */
struct cls_rule {
	struct flow_match match;
	uint16_t priority;
	/* control thread only */
	struct cls_subtable *subtable;
	struct cls_rule *next_same;    /* lower priority, same match (the hash holds the head) */
	struct cls_rule *prev_all, *next_all;   /* every rule of the table, for iteration */
};

struct cls_table;

/* NAME_ID makes the rte_hash names unique in the process. NULL when out of memory. */
struct cls_table *cls_create(unsigned int name_id);
/* Frees the table and its subtables at once (no worker may read it any more); the rules are
 * the caller's. */
void cls_destroy(struct cls_table *t);

/* The rule with exactly MATCH and PRIORITY, or NULL. Control thread. */
struct cls_rule *cls_find_exact(const struct cls_table *t, const struct flow_match *match,
				uint16_t priority);
/* Adds R (no rule with its match and priority may be in T). -1: out of memory. */
int cls_insert(struct cls_table *t, struct cls_rule *r);
/* Takes R out; workers may read R until a grace period has passed. */
void cls_remove(struct cls_table *t, struct cls_rule *r);
unsigned int cls_count(const struct cls_table *t);
unsigned int cls_subtables(const struct cls_table *t);
/* Every rule, in no particular order; R may be removed during the walk (take next first). */
struct cls_rule *cls_first(const struct cls_table *t);
static inline struct cls_rule *cls_next(const struct cls_rule *r)
{
	return r->next_all;
}

/* Re-sorts the subtables (priority, then hits since the last call). Control thread. */
void cls_resort(struct cls_table *t);

#define CLS_NO_WORKER UINT32_MAX    /* a lookup that counts no hit (trace) */

/*
 * The highest-priority rule matching KEY, or NULL. WORKER counts the hits. WC, unless NULL,
 * gets the masks of every subtable the lookup tried ORed into it: the bits of KEY the
 * answer depends on (another key that agrees with KEY on them gets the same answer).
 */
const struct cls_rule *cls_lookup(const struct cls_table *t, const struct flow_key *key,
				  unsigned int worker, struct flow_key *wc);

#endif
