/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tuple-space search (classifier.h). The one subtle part is the order in which a lookup
 * walks the subtables, because it stops early: it must never skip a subtable that holds a
 * rule of higher priority than the best one found. So the walk does not read a subtable's
 * live maximum priority but the one recorded in the published array (the "view") next to
 * it, and the writer keeps that recorded maximum at or above the real one at every moment:
 * when a rule raises a subtable's maximum, the new view is published before the rule enters
 * the hash; when the last rule of the maximum leaves, it leaves the hash before the view
 * with the lower maximum is published. A stale view is then only slower, never wrong.
 */
#include "classifier.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>

#include "log.h"
#include "port.h"
#include "worker.h"

#define CLS_MIN_CAPACITY 64

/*
 * How many rules of a subtable have each priority, so that the maximum is found again in
 * constant time when its last rule goes (deleting rules in descending priority would
 * otherwise rescan the table each time). 256 blocks of 256 counters, a block made when a
 * priority in it is first used: an ACL of distinct priorities costs a kilobyte per 256.
 */
#define CLS_PRIO_BLOCKS 256

struct cls_prio_hist {
	uint32_t total[CLS_PRIO_BLOCKS];
	uint32_t *block[CLS_PRIO_BLOCKS];
};

static int hist_add(struct cls_prio_hist *h, uint16_t p)
{
	uint32_t **b = &h->block[p >> 8];

	if (*b == NULL && (*b = calloc(256, sizeof(**b))) == NULL)
		return -1;
	(*b)[p & 255]++;
	h->total[p >> 8]++;
	return 0;
}

static void hist_remove(struct cls_prio_hist *h, uint16_t p)
{
	h->block[p >> 8][p & 255]--;
	h->total[p >> 8]--;
}

static uint32_t hist_count(const struct cls_prio_hist *h, uint16_t p)
{
	return h->block[p >> 8] != NULL ? h->block[p >> 8][p & 255] : 0;
}

/* The highest priority with a rule; 0 when there is none. */
static uint16_t hist_max(const struct cls_prio_hist *h)
{
	int b, i;

	for (b = CLS_PRIO_BLOCKS - 1; b >= 0; b--)
		if (h->total[b] != 0)
			for (i = 255; i >= 0; i--)
				if (h->block[b][i] != 0)
					return (uint16_t)(b << 8 | i);
	return 0;
}

static void hist_free(struct cls_prio_hist *h)
{
	unsigned int b;

	for (b = 0; b < CLS_PRIO_BLOCKS; b++)
		free(h->block[b]);
}

/*
 * Which values each matched field of a subtable's rules has, as a bitmap of hashes: when a
 * lookup misses a subtable, one field whose (masked) value no rule there has is enough to
 * prove the miss, and only that field's bits need to go into the lookup's wildcards, not the
 * whole mask. That keeps the megaflows the flow switch caches wide: a default-allow ACL
 * whose rules all rule out the traffic's destination port costs one megaflow on tp_dst, not
 * one per 5-tuple. A clear bit proves that no rule has the value; a set bit proves nothing
 * (another value may share it), so a false positive only costs a wider mask. Bits are set
 * before a rule enters the hash and are not cleared when it leaves (a stale bit is only
 * imprecise); cls_resort() rebuilds a bitmap that many removals have made stale.
 */
#define CLS_PRESENCE_BITS 4096

/*
 * The fields a witness may be, in the order they are preferred: fields that many flows
 * share (ports, protocol, destination) before the ones that tell flows apart (source
 * addresses and ports), so that the masks of different lookups agree and their megaflows
 * stay few.
 */
static const struct cls_field {
	uint8_t off, len;
} cls_fields[] = {
	{ offsetof(struct flow_key, in_port), 4 },
	{ offsetof(struct flow_key, metadata), 8 },
	{ offsetof(struct flow_key, tun_id), 8 },
	{ offsetof(struct flow_key, dl_type), 2 },
	{ offsetof(struct flow_key, vlan_tci), 2 },
	{ offsetof(struct flow_key, nw_proto), 1 },
	{ offsetof(struct flow_key, nw_frag), 1 },
	{ offsetof(struct flow_key, tp_dst), 2 },
	{ offsetof(struct flow_key, nw_dst), 4 },
	{ offsetof(struct flow_key, ipv6_dst), 16 },
	{ offsetof(struct flow_key, dl_dst), 6 },
	{ offsetof(struct flow_key, nw_tos), 1 },
	{ offsetof(struct flow_key, nw_ttl), 1 },
	{ offsetof(struct flow_key, tcp_flags), 2 },
	{ offsetof(struct flow_key, ipv6_label), 4 },
	{ offsetof(struct flow_key, tp_src), 2 },
	{ offsetof(struct flow_key, nw_src), 4 },
	{ offsetof(struct flow_key, ipv6_src), 16 },
	{ offsetof(struct flow_key, dl_src), 6 },
};
#define CLS_FIELDS RTE_DIM(cls_fields)

struct cls_presence {
	uint8_t n;                        /* fields the subtable's mask covers */
	uint8_t field[CLS_FIELDS];        /* indexes into cls_fields, in its order */
	uint64_t bits[][CLS_PRESENCE_BITS / 64];   /* one bitmap per field */
};

struct cls_subtable {
	struct flow_key mask;
	uint8_t n_words;                  /* words of the key the mask covers */
	uint8_t words[FLOW_KEY_WORDS];
	struct rte_hash *hash;            /* gathered masked words -> head struct cls_rule */
	struct cls_presence *presence;    /* atomic; NULL: no witness, the whole mask */
	uint64_t hits[WK_MAX_WORKERS];    /* each written by its worker only */

	/* control thread only */
	uint32_t capacity, n_keys, n_rules;
	uint16_t max_priority;            /* the real maximum */
	struct cls_prio_hist hist;        /* how many rules have each priority */
	uint64_t hits_seen;               /* the hits at the last resort */
	uint64_t recent_hits;             /* the hits between the last two resorts */
	uint32_t keys_removed;            /* since the presence bitmaps were built */
	struct cls_subtable *next;
};

struct cls_view_entry {
	uint16_t max_priority;            /* at or above the subtable's real maximum */
	struct cls_subtable *st;
};

/* What a lookup walks: replaced as a whole, never changed once published. */
struct cls_view {
	unsigned int n;
	struct cls_view_entry e[];
};

struct cls_table {
	struct cls_view *view;            /* atomic */
	struct cls_subtable *subtables;   /* control thread: every subtable */
	unsigned int n_subtables, n_rules;
	struct cls_rule *all;
	unsigned int name_id, hash_seq;
};

/* A key slot freed after a grace period (rte_hash in lock-free mode keeps it until then). */
struct cls_slot_free {
	struct rte_hash *hash;
	int32_t position;
};

/* ---- presence bitmaps (witnesses of a miss) ---- */

/* The bit of field F's value in KEY under MASK (both whole flow keys). */
static inline uint32_t presence_bit(unsigned int f, const struct flow_key *key,
				    const struct flow_key *mask)
{
	const uint8_t *k = (const uint8_t *)key + cls_fields[f].off;
	const uint8_t *m = (const uint8_t *)mask + cls_fields[f].off;
	uint8_t v[16] = { 0 };
	unsigned int i;

	for (i = 0; i < cls_fields[f].len; i++)
		v[i] = k[i] & m[i];
	return rte_hash_crc(v, sizeof(v), f) & (CLS_PRESENCE_BITS - 1);
}

static bool field_masked(unsigned int f, const struct flow_key *mask)
{
	const uint8_t *m = (const uint8_t *)mask + cls_fields[f].off;
	unsigned int i;

	for (i = 0; i < cls_fields[f].len; i++)
		if (m[i] != 0)
			return true;
	return false;
}

/* Empty bitmaps for the fields MASK covers; NULL when out of memory. */
static struct cls_presence *presence_new(const struct flow_key *mask)
{
	uint8_t fields[CLS_FIELDS];
	unsigned int f, n = 0;
	struct cls_presence *p;

	for (f = 0; f < CLS_FIELDS; f++)
		if (field_masked(f, mask))
			fields[n++] = (uint8_t)f;
	p = calloc(1, sizeof(*p) + n * sizeof(p->bits[0]));
	if (p == NULL)
		return NULL;
	p->n = (uint8_t)n;
	memcpy(p->field, fields, n);
	return p;
}

/* Marks the values of the rule key KEY (already masked by MASK). */
static void presence_add(struct cls_presence *p, const struct flow_key *key,
			 const struct flow_key *mask)
{
	unsigned int i;

	for (i = 0; i < p->n; i++) {
		uint32_t b = presence_bit(p->field[i], key, mask);

		__atomic_fetch_or(&p->bits[i][b / 64], UINT64_C(1) << (b % 64), __ATOMIC_RELEASE);
	}
}

/*
 * Adds to WC what proves that no rule of ST matches KEY: the bits of ST's mask in the first
 * field whose value no rule has, or, when every value is some rule's, the whole mask.
 */
static void witness_miss(const struct cls_subtable *st, const struct flow_key *key,
			 struct flow_key *wc)
{
	const struct cls_presence *p = __atomic_load_n(&st->presence, __ATOMIC_ACQUIRE);
	unsigned int i, j;

	for (i = 0; p != NULL && i < p->n; i++) {
		unsigned int f = p->field[i];
		uint32_t b = presence_bit(f, key, &st->mask);

		if (__atomic_load_n(&p->bits[i][b / 64], __ATOMIC_ACQUIRE) &
		    (UINT64_C(1) << (b % 64)))
			continue;
		for (j = 0; j < cls_fields[f].len; j++)
			((uint8_t *)wc)[cls_fields[f].off + j] |=
				((const uint8_t *)&st->mask)[cls_fields[f].off + j];
		return;
	}
	flow_key_or(wc, &st->mask);
}

/* ---- the hot path ---- */

static inline uint32_t cls_gather(const struct cls_subtable *st, const struct flow_key *key,
				  uint64_t *buf)
{
	const flow_key_word *k = (const flow_key_word *)key;
	const flow_key_word *m = (const flow_key_word *)&st->mask;
	unsigned int i;

	for (i = 0; i < st->n_words; i++)
		buf[i] = k[st->words[i]] & m[st->words[i]];
	return st->n_words * 8;
}

const struct cls_rule *cls_lookup(const struct cls_table *t, const struct flow_key *key,
				  unsigned int worker, struct flow_key *wc)
{
	const struct cls_view *v = __atomic_load_n(&t->view, __ATOMIC_ACQUIRE);
	const struct cls_rule *best = NULL;
	int best_priority = -1;
	uint64_t buf[FLOW_KEY_WORDS];
	unsigned int i;

	for (i = 0; i < v->n; i++) {
		struct cls_subtable *st = v->e[i].st;
		uint32_t len;
		void *data;

		if ((int)v->e[i].max_priority <= best_priority)
			break;      /* sorted: nothing further can win */
		len = cls_gather(st, key, buf);
		if (rte_hash_lookup_with_hash_data(st->hash, buf, rte_hash_crc(buf, len, 0),
						   &data) < 0) {
			if (wc != NULL)
				witness_miss(st, key, wc);
			continue;
		}
		const struct cls_rule *r = data;

		if (wc != NULL)
			flow_key_or(wc, &st->mask);

		if ((int)r->priority > best_priority) {
			best = r;
			best_priority = r->priority;
		}
		if (worker < WK_MAX_WORKERS)
			stats_add(&st->hits[worker], 1);
	}
	return best;
}

/* ---- views ---- */

static int cmp_entries(const void *a, const void *b)
{
	const struct cls_view_entry *x = a, *y = b;

	if (x->max_priority != y->max_priority)
		return x->max_priority > y->max_priority ? -1 : 1;
	if (x->st->recent_hits != y->st->recent_hits)
		return x->st->recent_hits > y->st->recent_hits ? -1 : 1;
	return 0;
}

static void free_view(void *v)
{
	free(v);
}

/*
 * Publishes a view of every subtable but SKIP, recording for each its real maximum, or
 * RAISED for subtable RAISE (NULL: none). -1 when out of memory (the old view stays).
 */
static int publish_view(struct cls_table *t, const struct cls_subtable *skip,
			const struct cls_subtable *raise, uint16_t raised)
{
	struct cls_view *v = malloc(sizeof(*v) + t->n_subtables * sizeof(v->e[0])), *old;
	struct cls_subtable *st;

	if (v == NULL)
		return -1;
	v->n = 0;
	for (st = t->subtables; st != NULL; st = st->next) {
		if (st == skip)
			continue;
		v->e[v->n].st = st;
		v->e[v->n++].max_priority = st == raise ? RTE_MAX(raised, st->max_priority) :
							  st->max_priority;
	}
	qsort(v->e, v->n, sizeof(v->e[0]), cmp_entries);
	old = t->view;
	__atomic_store_n(&t->view, v, __ATOMIC_RELEASE);
	if (old != NULL)
		wk_defer(free_view, old);
	return 0;
}

/* ---- subtables ---- */

static struct rte_hash *make_hash(struct cls_table *t, uint32_t capacity, uint32_t key_len)
{
	char name[RTE_HASH_NAMESIZE];
	struct rte_hash_parameters p = {
		.name = name,
		.entries = capacity,
		.key_len = key_len,
		.hash_func = rte_hash_crc,
		.socket_id = SOCKET_ID_ANY,
		.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF |
			      RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	struct rte_hash *h;

	snprintf(name, sizeof(name), "cls%u_%u", t->name_id, t->hash_seq++);
	h = rte_hash_create(&p);
	if (h == NULL)
		LOG(ERR, "classifier: cannot make a hash of %u entries: %s", capacity,
		    rte_strerror(rte_errno));
	return h;
}

/* Frees a subtable's hash and itself; its priority counts go with free_subtable(). */
static void free_subtable_hash(void *arg)
{
	struct cls_subtable *st = arg;

	rte_hash_free(st->hash);
	free(st);
}

static void free_subtable(void *arg)
{
	struct cls_subtable *st = arg;

	hist_free(&st->hist);
	free(st->presence);
	free_subtable_hash(st);
}

static struct cls_subtable *find_subtable(const struct cls_table *t,
					  const struct flow_key *mask)
{
	struct cls_subtable *st;

	for (st = t->subtables; st != NULL; st = st->next)
		if (flow_key_equal(&st->mask, mask))
			return st;
	return NULL;
}

static struct cls_subtable *new_subtable(struct cls_table *t, const struct flow_key *mask)
{
	const flow_key_word *m = (const flow_key_word *)mask;
	struct cls_subtable *st = calloc(1, sizeof(*st));
	unsigned int i;

	if (st == NULL)
		return NULL;
	st->mask = *mask;
	for (i = 0; i < FLOW_KEY_WORDS; i++)
		if (m[i] != 0)
			st->words[st->n_words++] = (uint8_t)i;
	if (st->n_words == 0)   /* matches everything: one key, a zero word */
		st->words[st->n_words++] = 0;
	st->capacity = CLS_MIN_CAPACITY;
	st->presence = presence_new(mask);     /* none: misses cost the whole mask */
	st->hash = make_hash(t, st->capacity, st->n_words * 8u);
	if (st->hash == NULL) {
		free(st->presence);
		free(st);
		return NULL;
	}
	return st;
}

static void free_slot(void *arg)
{
	struct cls_slot_free *f = arg;

	rte_hash_free_key_with_position(f->hash, f->position);
	free(f);
}

static void delete_key(struct cls_subtable *st, const uint64_t *buf, uint32_t len)
{
	int32_t pos = rte_hash_del_key_with_hash(st->hash, buf, rte_hash_crc(buf, len, 0));
	struct cls_slot_free *f;

	if (pos < 0)
		return;
	st->n_keys--;
	st->keys_removed++;
	f = malloc(sizeof(*f));
	if (f == NULL)
		return;     /* the slot stays used: the hash grows a little sooner */
	f->hash = st->hash;
	f->position = pos;
	wk_defer(free_slot, f);
}

/*
 * Replaces ST's hash with one of twice the capacity holding the same keys: the old one is
 * full (or its freed slots still wait for a grace period). Workers see the old hash or the
 * new one, both complete.
 */
static int grow_subtable(struct cls_table *t, struct cls_subtable *st)
{
	struct cls_subtable *copy = malloc(sizeof(*copy));
	const void *key;
	void *data;
	uint32_t iter = 0;

	if (copy == NULL)
		return -1;
	/* The old hash goes with the copy, freed after a grace period; the priority counts
	 * stay with ST (free_subtable_hash leaves them). */
	*copy = *st;
	st->hash = make_hash(t, st->capacity * 2, st->n_words * 8u);
	if (st->hash == NULL) {
		st->hash = copy->hash;
		free(copy);
		return -1;
	}
	while (rte_hash_iterate(copy->hash, &key, &data, &iter) >= 0)
		if (rte_hash_add_key_data(st->hash, key, data) != 0) {
			rte_hash_free(st->hash);
			st->hash = copy->hash;
			free(copy);
			return -1;
		}
	st->capacity *= 2;
	/*
	 * The subtable object stays, so its pointer in the view and in every rule stays right;
	 * a worker that loaded the old hash pointer reads a complete hash until it is freed.
	 */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	wk_defer(free_subtable_hash, copy);
	return 0;
}

/* Sets the head (highest-priority rule) of ST's key BUF to HEAD, adding the key if new. */
static int set_head(struct cls_table *t, struct cls_subtable *st, const uint64_t *buf,
		    uint32_t len, struct cls_rule *head, bool is_new)
{
	int rc;

	if (is_new && st->n_keys >= st->capacity && grow_subtable(t, st) != 0)
		return -1;
	rc = rte_hash_add_key_with_hash_data(st->hash, buf, rte_hash_crc(buf, len, 0), head);
	if (rc == -ENOSPC && grow_subtable(t, st) == 0)
		rc = rte_hash_add_key_with_hash_data(st->hash, buf, rte_hash_crc(buf, len, 0),
						     head);
	if (rc != 0)
		return -1;
	st->n_keys += is_new;
	return 0;
}

static struct cls_rule *head_of(const struct cls_subtable *st, const uint64_t *buf,
				uint32_t len)
{
	void *data;

	if (rte_hash_lookup_with_hash_data(st->hash, buf, rte_hash_crc(buf, len, 0), &data) < 0)
		return NULL;
	return data;
}

/* ---- the table ---- */

struct cls_table *cls_create(unsigned int name_id)
{
	struct cls_table *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->name_id = name_id;
	t->view = calloc(1, sizeof(struct cls_view));
	if (t->view == NULL) {
		free(t);
		return NULL;
	}
	return t;
}

void cls_destroy(struct cls_table *t)
{
	struct cls_subtable *st, *next;

	if (t == NULL)
		return;
	for (st = t->subtables; st != NULL; st = next) {
		next = st->next;
		free_subtable(st);
	}
	free(t->view);
	free(t);
}

struct cls_rule *cls_find_exact(const struct cls_table *t, const struct flow_match *match,
				uint16_t priority)
{
	struct cls_subtable *st = find_subtable(t, &match->mask);
	uint64_t buf[FLOW_KEY_WORDS];
	struct cls_rule *r;
	uint32_t len;

	if (st == NULL)
		return NULL;
	len = cls_gather(st, &match->key, buf);
	for (r = head_of(st, buf, len); r != NULL; r = r->next_same)
		if (r->priority == priority)
			return r;
	return NULL;
}

static void link_all(struct cls_table *t, struct cls_rule *r)
{
	r->prev_all = NULL;
	r->next_all = t->all;
	if (t->all != NULL)
		t->all->prev_all = r;
	t->all = r;
	t->n_rules++;
}

static void unlink_all(struct cls_table *t, struct cls_rule *r)
{
	if (r->prev_all != NULL)
		r->prev_all->next_all = r->next_all;
	else
		t->all = r->next_all;
	if (r->next_all != NULL)
		r->next_all->prev_all = r->prev_all;
	t->n_rules--;
}

/* Puts R into ST's chain for its key, in descending priority; the hash gets a new head. */
static int chain_insert(struct cls_table *t, struct cls_subtable *st, struct cls_rule *r)
{
	uint64_t buf[FLOW_KEY_WORDS];
	uint32_t len = cls_gather(st, &r->match.key, buf);
	struct cls_rule *head = head_of(st, buf, len), **pp = &head;

	while (*pp != NULL && (*pp)->priority > r->priority)
		pp = &(*pp)->next_same;
	r->next_same = *pp;
	if (pp != &head) {      /* not the new head: workers never read the chain */
		*pp = r;
		return 0;
	}
	return set_head(t, st, buf, len, r, r->next_same == NULL);
}

int cls_insert(struct cls_table *t, struct cls_rule *r)
{
	struct cls_subtable *st = find_subtable(t, &r->match.mask);
	bool fresh = st == NULL, raises;

	if (fresh) {
		st = new_subtable(t, &r->match.mask);
		if (st == NULL)
			return -1;
		st->max_priority = r->priority;
	}
	if (hist_add(&st->hist, r->priority) != 0) {
		if (fresh)
			free_subtable(st);
		return -1;
	}
	raises = !fresh && r->priority > st->max_priority;
	/* Its values are marked before the rule can be found (see presence_add). */
	if (st->presence != NULL)
		presence_add(st->presence, &r->match.key, &st->mask);
	/* The view's maximum rises before the rule can be found (see the top of the file). */
	if ((raises && publish_view(t, NULL, st, r->priority) != 0) ||
	    chain_insert(t, st, r) != 0) {
		hist_remove(&st->hist, r->priority);
		if (fresh)
			free_subtable(st);
		return -1;
	}
	r->subtable = st;
	if (fresh) {
		st->next = t->subtables;
		t->subtables = st;
		t->n_subtables++;
		if (publish_view(t, NULL, NULL, 0) != 0)
			LOG(ERR, "classifier: no memory for a view: a new subtable waits");
	} else if (raises) {
		st->max_priority = r->priority;
	}
	st->n_rules++;
	link_all(t, r);
	return 0;
}

static void drop_subtable(struct cls_table *t, struct cls_subtable *st)
{
	struct cls_subtable **pp = &t->subtables;

	if (publish_view(t, st, NULL, 0) != 0)
		LOG(ERR, "classifier: no memory for a view: an empty subtable stays");
	while (*pp != st)
		pp = &(*pp)->next;
	*pp = st->next;
	t->n_subtables--;
	wk_defer(free_subtable, st);
}

void cls_remove(struct cls_table *t, struct cls_rule *r)
{
	struct cls_subtable *st = r->subtable;
	uint64_t buf[FLOW_KEY_WORDS];
	uint32_t len = cls_gather(st, &r->match.key, buf);
	struct cls_rule *head = head_of(st, buf, len), **pp = &head;

	while (*pp != NULL && *pp != r)
		pp = &(*pp)->next_same;
	if (*pp == NULL)
		return;     /* not in this table */
	if (pp != &head)
		*pp = r->next_same;
	else if (r->next_same != NULL)
		set_head(t, st, buf, len, r->next_same, false);
	else
		delete_key(st, buf, len);
	unlink_all(t, r);
	r->subtable = NULL;
	hist_remove(&st->hist, r->priority);
	if (--st->n_rules == 0) {
		drop_subtable(t, st);
		return;
	}
	/* The rule has left the hash; only now may the view's maximum fall. */
	if (r->priority == st->max_priority && hist_count(&st->hist, r->priority) == 0) {
		st->max_priority = hist_max(&st->hist);
		if (publish_view(t, NULL, NULL, 0) != 0)
			LOG(ERR, "classifier: no memory for a view: lookups stay slower");
	}
}

unsigned int cls_count(const struct cls_table *t)
{
	return t->n_rules;
}

unsigned int cls_subtables(const struct cls_table *t)
{
	return t->n_subtables;
}

struct cls_rule *cls_first(const struct cls_table *t)
{
	return t->all;
}

static void free_presence(void *p)
{
	free(p);
}

/*
 * Builds ST's presence bitmaps anew from the rules it holds, once more keys have left it
 * than it holds (their bits, left set, make misses prove less), and publishes them whole.
 */
static void refresh_presence(struct cls_subtable *st)
{
	struct cls_presence *p, *old = st->presence;
	const void *key;
	void *data;
	uint32_t iter = 0;

	if (st->keys_removed <= st->n_keys + 16)
		return;
	p = presence_new(&st->mask);
	if (p == NULL)
		return;
	while (rte_hash_iterate(st->hash, &key, &data, &iter) >= 0) {
		const struct cls_rule *r = data;

		presence_add(p, &r->match.key, &st->mask);
	}
	st->keys_removed = 0;
	__atomic_store_n(&st->presence, p, __ATOMIC_RELEASE);
	if (old != NULL)
		wk_defer(free_presence, old);
}

void cls_resort(struct cls_table *t)
{
	const struct cls_view *v = t->view;
	struct cls_subtable *st;
	unsigned int i;

	for (st = t->subtables; st != NULL; st = st->next) {
		uint64_t hits = 0;
		unsigned int w;

		for (w = 0; w < WK_MAX_WORKERS; w++)
			hits += stats_read(&st->hits[w]);
		st->recent_hits = hits - st->hits_seen;
		st->hits_seen = hits;
		refresh_presence(st);
	}
	/* A new view only when the order changes: most ticks leave it as it is. */
	for (i = 1; i < v->n; i++)
		if (cmp_entries(&v->e[i - 1], &v->e[i]) > 0) {
			publish_view(t, NULL, NULL, 0);
			return;
		}
}
