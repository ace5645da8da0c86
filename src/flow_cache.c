/* SPDX-License-Identifier: BSD-3-Clause */
/* The megaflow cache (flow_cache.h). */
#include "flow_cache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_hash_crc.h>

#include "stats.h"

#define MF_WAYS 4

struct mf_entry {
	uint32_t hash;
	uint32_t gen;
	uint8_t mask;                   /* index into masks */
	struct flow_key key;            /* masked */
};

/* A mask, and the key words it keeps (the others are zero in its entries' keys): a lookup
 * hashes and compares those only, as OVS's miniflows do, which for the usual mask of two
 * or three words is a quarter of the work of the whole key. */
struct mf_mask {
	struct flow_key mask;
	uint64_t hits;
	uint8_t n_words;
	uint8_t words[FLOW_KEY_WORDS];
};

struct mf_cache {
	uint32_t n_sets;
	size_t value_size;
	uint32_t gen;                   /* the generation the masks belong to */
	uint32_t n_masks;               /* atomic: read by the control thread's stats */
	/* Mask indexes in the order lookups try them: an entry's mask index never changes,
	 * the order does (a mask that serves more frames moves forward). */
	uint8_t order[MF_MAX_MASKS];
	struct mf_mask masks[MF_MAX_MASKS];
	uint64_t hits, misses, inserts, masks_full;
	/* The entry the last hit or insert found, tried before any hashing while there is
	 * one mask: interleaved flows that one megaflow covers (a default-allow ACL ruled out
	 * on one field, where one entry serves every flow) then cost one masked comparison a
	 * frame. NULL: none. */
	const struct mf_entry *last;
	struct mf_entry *entries;
	uint8_t *values;
};

struct mf_cache *mf_create(uint32_t entries, size_t value_size)
{
	struct mf_cache *c;
	uint32_t i;

	if (entries < MF_WAYS * 2 || !rte_is_power_of_2(entries))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->n_sets = entries / MF_WAYS;
	c->value_size = value_size;
	c->gen = UINT32_MAX;
	c->entries = calloc(entries, sizeof(*c->entries));
	c->values = calloc(entries, value_size);
	if (c->entries == NULL || c->values == NULL) {
		mf_destroy(c);
		return NULL;
	}
	/* Generation 0 is a switch's first: mark every entry as of another one. */
	for (i = 0; i < entries; i++)
		c->entries[i].gen = UINT32_MAX;
	return c;
}

void mf_destroy(struct mf_cache *c)
{
	if (c == NULL)
		return;
	free(c->entries);
	free(c->values);
	free(c);
}

/* Starts generation GEN: no entry of an older one counts, and their masks go. */
static inline void start_generation(struct mf_cache *c, uint32_t gen)
{
	if (likely(c->gen == gen))
		return;
	c->gen = gen;
	__atomic_store_n(&c->n_masks, 0, __ATOMIC_RELAXED);
}

/* The hash of KEY under mask M (index INDEX): of the words M keeps. */
static inline uint32_t masked_hash(const struct flow_key *key, const struct mf_mask *m,
				   unsigned int index)
{
	const flow_key_word *k = (const flow_key_word *)key;
	const flow_key_word *mw = (const flow_key_word *)&m->mask;
	uint32_t hash = index;
	unsigned int j;

	for (j = 0; j < m->n_words; j++) {
		unsigned int w = m->words[j];

		hash = rte_hash_crc_8byte(k[w] & mw[w], hash);
	}
	return hash;
}

/* Whether KEY under mask M is the entry key MASKED (zero outside M's words). */
static inline bool masked_equal(const struct flow_key *key, const struct mf_mask *m,
				const struct flow_key *masked)
{
	const flow_key_word *k = (const flow_key_word *)key;
	const flow_key_word *mw = (const flow_key_word *)&m->mask;
	const flow_key_word *e = (const flow_key_word *)masked;
	unsigned int j;

	for (j = 0; j < m->n_words; j++) {
		unsigned int w = m->words[j];

		if ((k[w] & mw[w]) != e[w])
			return false;
	}
	return true;
}

static inline struct mf_entry *set_of(const struct mf_cache *c, uint32_t hash)
{
	return &c->entries[(size_t)(hash & (c->n_sets - 1)) * MF_WAYS];
}

/* Moves the mask at position I of the order one step forward once it serves more. */
static inline void promote(struct mf_cache *c, unsigned int i)
{
	uint8_t here = c->order[i], ahead;

	if (i == 0)
		return;
	ahead = c->order[i - 1];
	if (c->masks[here].hits > c->masks[ahead].hits) {
		c->order[i - 1] = here;
		c->order[i] = ahead;
	}
}

static inline const void *value_of(const struct mf_cache *c, const struct mf_entry *e)
{
	return c->values + (size_t)(e - c->entries) * c->value_size;
}

/*
 * Whether the last entry found holds KEY, while the generation has one mask: then the
 * entry that holds a key is the one the hash would find (a duplicate of it holds the same
 * value), so trying it first changes no answer. With several masks it is not tried: it
 * would be right only as long as no two megaflows of different masks hold one key with
 * different programs. A debug build that compared every such pair found none in Faucet's
 * pipeline (test_openflow_faucet), and an earlier failure of that test blamed on trying
 * it had other causes (af_packet's transmit ring, idle timeouts), but the one-mask case is
 * what the benchmark needs, so the weaker assumption is not taken on.
 */
static inline bool last_holds(struct mf_cache *c, uint32_t gen, const struct flow_key *key)
{
	const struct mf_entry *e = c->last;

	/* All twelve words, masked, without a branch or the mask's word list: cheaper than
	 * the word-by-word walk for the two or three words a usual mask keeps. */
	if (e == NULL || c->n_masks != 1 || e->gen != gen ||
	    !flow_key_matches(key, &c->masks[e->mask].mask, &e->key))
		return false;
	c->masks[e->mask].hits++;
	return true;
}

/* The value for KEY in generation GEN (started), or NULL; the hit and miss counters are the
 * caller's to move. */
static inline const void *find(struct mf_cache *c, uint32_t gen, const struct flow_key *key)
{
	unsigned int i, k;

	if (last_holds(c, gen, key))
		return value_of(c, c->last);
	for (i = 0; i < c->n_masks; i++) {
		unsigned int m = c->order[i];
		uint32_t hash = masked_hash(key, &c->masks[m], m);
		struct mf_entry *e = set_of(c, hash);

		for (k = 0; k < MF_WAYS; k++)
			if (e[k].hash == hash && e[k].gen == gen && e[k].mask == m &&
			    masked_equal(key, &c->masks[m], &e[k].key)) {
				c->masks[m].hits++;
				promote(c, i);
				c->last = e + k;
				return value_of(c, e + k);
			}
	}
	return NULL;
}

const void *mf_lookup(struct mf_cache *c, uint32_t gen, const struct flow_key *key)
{
	const void *v;

	start_generation(c, gen);
	v = find(c, gen, key);
	stats_add(v != NULL ? &c->hits : &c->misses, 1);
	return v;
}

unsigned int mf_lookup_burst(struct mf_cache *c, uint32_t gen, const struct flow_key *keys,
			     const bool *want, unsigned int n, const void **values)
{
	unsigned int i, hits = 0;

	start_generation(c, gen);
	for (i = 0; i < n; i++) {
		values[i] = want[i] ? find(c, gen, &keys[i]) : NULL;
		hits += values[i] != NULL;
	}
	stats_add(&c->hits, hits);
	return hits;
}

unsigned int mf_mask_count(const struct mf_cache *c, uint32_t gen)
{
	return c->gen == gen ? c->n_masks : 0;
}

/* The index of MASK among the generation's masks, added if new; -1 when there is no room. */
static int mask_index(struct mf_cache *c, const struct flow_key *mask)
{
	unsigned int i, n = c->n_masks;

	for (i = 0; i < n; i++)
		if (flow_key_equal(&c->masks[i].mask, mask))
			return (int)i;
	if (n == MF_MAX_MASKS)
		return -1;
	c->masks[n].mask = *mask;
	c->masks[n].hits = 0;
	c->masks[n].n_words = 0;
	for (i = 0; i < FLOW_KEY_WORDS; i++)
		if (((const flow_key_word *)mask)[i] != 0)
			c->masks[n].words[c->masks[n].n_words++] = (uint8_t)i;
	c->order[n] = (uint8_t)n;
	__atomic_store_n(&c->n_masks, n + 1, __ATOMIC_RELAXED);
	return (int)n;
}

void *mf_insert(struct mf_cache *c, uint32_t gen, const struct flow_key *key,
		const struct flow_key *mask)
{
	struct flow_key masked;
	struct mf_entry *e;
	uint32_t hash;
	unsigned int k, way;
	int m;

	start_generation(c, gen);
	m = mask_index(c, mask);
	if (m < 0) {
		stats_add(&c->masks_full, 1);
		return NULL;
	}
	hash = masked_hash(key, &c->masks[m], (unsigned int)m);
	flow_key_and(&masked, key, mask);
	e = set_of(c, hash);
	way = (hash >> 24) % MF_WAYS;   /* the way to evict when all are of this generation */
	for (k = 0; k < MF_WAYS; k++)
		if (e[k].gen != gen) {
			way = k;
			break;
		}
	e[way].hash = hash;
	e[way].gen = gen;
	e[way].mask = (uint8_t)m;
	e[way].key = masked;
	stats_add(&c->inserts, 1);
	c->last = e + way;
	return c->values + (size_t)(e + way - c->entries) * c->value_size;
}

void mf_read_stats(const struct mf_cache *c, struct mf_stats *s)
{
	s->hits = stats_read(&c->hits);
	s->misses = stats_read(&c->misses);
	s->inserts = stats_read(&c->inserts);
	s->masks_full = stats_read(&c->masks_full);
	s->masks = __atomic_load_n(&c->n_masks, __ATOMIC_RELAXED);
}
