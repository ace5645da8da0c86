/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rules, groups and meters of a flow switch (flow_switch.h): their objects' lifetimes,
 * adding, changing and removing them (the control thread only), timeouts and the control
 * side's housekeeping, dumps. Workers read what is published here without locks; what
 * leaves is freed after an RCU grace period.
 */
#include "flow_switch.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_meter.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "flow_mod.h"
#include "log.h"
#include "port.h"

/*
 * Publishes index *PI with OBJ under ID, in place of what had that id (OBJ NULL: ID taken
 * out). What leaves, and the old array, are freed after a grace period, OBJs with FREE_OBJ.
 * -1, changing nothing, when no memory is left.
 */
static int index_publish(struct flow *F, struct flow_index **pi, uint32_t id, void *obj,
			 void (*free_obj)(void *))
{
	struct flow_index *old = *pi;
	struct flow_index *x = malloc(sizeof(*x) + (old->n + 1) * sizeof(x->e[0]));
	bool placed = obj == NULL;
	unsigned int i;

	if (x == NULL)
		return -1;
	x->n = 0;
	for (i = 0; i < old->n; i++) {
		if (!placed && id <= old->e[i].id) {
			x->e[x->n++] = (struct flow_index_entry){ id, obj };
			placed = true;
		}
		if (old->e[i].id == id)
			wk_defer(free_obj, old->e[i].obj);
		else
			x->e[x->n++] = old->e[i];
	}
	if (!placed)
		x->e[x->n++] = (struct flow_index_entry){ id, obj };
	__atomic_store_n(pi, x, __ATOMIC_RELEASE);
	wk_defer(free, old);
	bump_gen(F);
	return 0;
}
/* ---- objects' lifetimes ---- */

static size_t rule_size(const struct flow *F)
{
	return sizeof(struct flow_rule) + F->n_workers * sizeof(struct flow_counts);
}

static struct flow_insns *insns_from_spec(const struct flow_rule_spec *s)
{
	struct flow_insns *in = malloc(sizeof(*in) + (size_t)(s->n_apply + s->n_write) *
				       sizeof(struct flow_action));

	if (in == NULL)
		return NULL;
	in->meter = s->meter;
	in->goto_table = s->goto_table;
	in->clear_actions = s->clear_actions;
	in->has_write_metadata = s->has_write_metadata;
	in->write_metadata = s->write_metadata;
	in->write_metadata_mask = s->write_metadata_mask;
	in->n_apply = s->n_apply;
	in->n_write = s->n_write;
	memcpy(in->acts, s->apply, s->n_apply * sizeof(s->apply[0]));
	memcpy(in->acts + s->n_apply, s->write, s->n_write * sizeof(s->write[0]));
	return in;
}

static struct flow_rule *rule_new(const struct flow *F, const struct flow_rule_spec *s)
{
	struct flow_rule *r = calloc(1, rule_size(F));

	if (r == NULL)
		return NULL;
	r->insns = insns_from_spec(s);
	if (r->insns == NULL) {
		free(r);
		return NULL;
	}
	r->cls.match = s->match;
	flow_key_and(&r->cls.match.key, &s->match.key, &s->match.mask);
	r->cls.priority = s->priority;
	r->table = s->table;
	r->idle_timeout = s->idle_timeout;
	r->hard_timeout = s->hard_timeout;
	r->flags = s->flags;
	r->cookie = s->cookie;
	r->created_tsc = rte_rdtsc();
	return r;
}

static void rule_free(void *arg)
{
	struct flow_rule *r = arg;

	free(r->insns);
	free(r);
}

static void spec_of_rule(const struct flow_rule *r, struct flow_rule_spec *s)
{
	const struct flow_insns *in = r->insns;

	memset(s, 0, sizeof(*s));
	s->table = r->table;
	s->priority = r->cls.priority;
	s->idle_timeout = r->idle_timeout;
	s->hard_timeout = r->hard_timeout;
	s->flags = r->flags;
	s->cookie = r->cookie;
	s->out_port = s->out_group = FLOW_PORT_ANY;
	s->match = r->cls.match;
	s->meter = in->meter;
	s->goto_table = in->goto_table;
	s->clear_actions = in->clear_actions;
	s->has_write_metadata = in->has_write_metadata;
	s->write_metadata = in->write_metadata;
	s->write_metadata_mask = in->write_metadata_mask;
	s->n_apply = in->n_apply;
	s->n_write = in->n_write;
	memcpy(s->apply, in->acts, in->n_apply * sizeof(in->acts[0]));
	memcpy(s->write, in->acts + in->n_apply, in->n_write * sizeof(in->acts[0]));
}

/*
 * Ticks from THEN to NOW, 0 when THEN is later: a worker stamps a rule's last use with its
 * own clock read, which can be later than a NOW the control thread read before (a frame
 * that hit the rule meanwhile, or another CPU's clock a little ahead). Unsigned, the
 * difference would wrap to an age of centuries, and a rule in constant use would expire
 * as idle.
 */
static inline uint64_t tsc_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

static struct flow_counts rule_totals(const struct flow *F, const struct flow_rule *r)
{
	struct flow_counts t = r->base;
	unsigned int i;

	t.used_tsc = r->created_tsc;
	for (i = 0; i < F->n_workers; i++) {
		uint64_t used = __atomic_load_n(&r->counts[i].used_tsc, __ATOMIC_RELAXED);

		t.packets += stats_read(&r->counts[i].packets);
		t.bytes += stats_read(&r->counts[i].bytes);
		t.used_tsc = RTE_MAX(t.used_tsc, used);
	}
	return t;
}

struct flow_tables *tables_new(struct flow *F)
{
	struct flow_tables *t = calloc(1, sizeof(*t));
	unsigned int i;

	if (t == NULL)
		return NULL;
	for (i = 0; i < FLOW_TABLES; i++) {
		t->t[i] = cls_create(F->name_id * 1000 + F->table_seq++);
		if (t->t[i] == NULL)
			goto fail;
	}
	return t;
fail:
	while (i-- > 0)
		cls_destroy(t->t[i]);
	free(t);
	return NULL;
}

/* Frees a set of tables and every rule in it: no worker reads them any more. */
void tables_free(void *arg)
{
	struct flow_tables *t = arg;
	unsigned int i;

	for (i = 0; i < FLOW_TABLES; i++) {
		struct cls_rule *c = cls_first(t->t[i]), *next;

		for (; c != NULL; c = next) {
			next = cls_next(c);
			rule_free(c);
		}
		cls_destroy(t->t[i]);
	}
	free(t);
}
/* ---- housekeeping ---- */

static void keep_pin(struct flow *F, const struct pin_elem *pe)
{
	struct pin_record *r;
	uint32_t len = RTE_MIN(pe->m->pkt_len, (uint32_t)RTE_MIN(pe->max_len, FLOW_PIN_BYTES));

	if (pe->max_len == 0 || pe->max_len == UINT16_MAX)
		len = RTE_MIN(pe->m->pkt_len, (uint32_t)FLOW_PIN_BYTES);
	if (F->pin_count == FLOW_PIN_KEEP) {    /* the oldest goes */
		F->pin_head = (F->pin_head + 1) % FLOW_PIN_KEEP;
		F->pin_count--;
		F->pins_lost++;
	}
	r = &F->pins[(F->pin_head + F->pin_count++) % FLOW_PIN_KEEP];
	r->cookie = pe->cookie;
	r->in_port = pe->in_port;
	r->reason = pe->reason;
	r->table = pe->table;
	r->total_len = (uint16_t)RTE_MIN(pe->m->pkt_len, (uint32_t)UINT16_MAX);
	r->len = (uint16_t)len;
	const void *d = rte_pktmbuf_read(pe->m, 0, len, r->data);

	if (d != NULL && d != r->data)
		memcpy(r->data, d, len);
}

void drain_pins(struct flow *F)
{
	unsigned int i;

	for (i = 0; i < F->n_workers; i++) {
		struct pin_elem pe;

		while (rte_ring_sc_dequeue_elem(F->w[i].pins, &pe, sizeof(pe)) == 0) {
			keep_pin(F, &pe);
			rte_pktmbuf_free(pe.m);
		}
	}
}

static void note_removed(struct flow *F, const struct flow_rule *r, const char *reason)
{
	struct flow_counts t = rule_totals(F, r);
	struct removed_record *rec;
	char match[512];

	if (F->removed_count == FLOW_REMOVED_KEEP) {
		free(F->removed[F->removed_head].text);
		F->removed_head = (F->removed_head + 1) % FLOW_REMOVED_KEEP;
		F->removed_count--;
	}
	rec = &F->removed[(F->removed_head + F->removed_count++) % FLOW_REMOVED_KEEP];
	flow_format_match(&r->cls.match, NULL, NULL, match, sizeof(match));
	rec->text = malloc(strlen(match) + 64);
	if (rec->text != NULL)
		sprintf(rec->text, "table=%u,priority=%u%s%s", r->table, r->cls.priority,
			match[0] ? "," : "", match);
	rec->reason = reason;
	rec->packets = t.packets;
	rec->bytes = t.bytes;
	rec->duration = (double)(rte_rdtsc() - r->created_tsc) / (double)F->hz;
	rec->cookie = r->cookie;
	rec->idle_timeout = r->idle_timeout;
	rec->hard_timeout = r->hard_timeout;
	rec->send_flow_rem = (r->flags & FLOW_FLAG_SEND_FLOW_REM) != 0;
}

static void remove_rule(struct flow *F, struct flow_rule *r)
{
	const struct flow_tables *tables = F->tables;

	if (r->idle_timeout != 0 || r->hard_timeout != 0)
		F->n_timed--;
	cls_remove(tables->t[r->table], &r->cls);
	wk_defer(rule_free, r);
}

/* Idle and hard timeouts, once a second. */
static void expire_rules(struct flow *F, uint64_t now)
{
	unsigned int i, n = 0;

	for (i = 0; i < FLOW_TABLES && F->n_timed > 0; i++) {
		struct cls_rule *c = cls_first(F->tables->t[i]), *next;

		for (; c != NULL; c = next) {
			struct flow_rule *r = (struct flow_rule *)c;
			const char *why = NULL;

			next = cls_next(c);
			if (r->hard_timeout != 0 && now - r->created_tsc >= r->hard_timeout * F->hz)
				why = "hard_timeout";
			else if (r->idle_timeout != 0 &&
				 tsc_since(now, rule_totals(F, r).used_tsc) >=
				 r->idle_timeout * F->hz)
				why = "idle_timeout";
			if (why == NULL)
				continue;
			note_removed(F, r, why);
			remove_rule(F, r);
			n++;
		}
	}
	if (n > 0)
		bump_gen(F);
}

static void store_mask(uint64_t *mask, uint64_t value, bool *changed)
{
	if (*mask != value) {
		__atomic_store_n(mask, value, __ATOMIC_RELAXED);
		*changed = true;
	}
}

/* Fast-failover groups follow the links, and translation the ports' OpenFlow config: a
 * change of either makes programs stale. A port that is down (PORT_DOWN) is not live. */
void flow_check_ports(struct flow *F)
{
	uint64_t live = 0, present = F->present, m[5] = { 0 };
	bool changed = false;
	unsigned int i;

	if (F->ports == NULL)
		return;
	for (i = 0; i < SW_MAX_PORTS; i++) {
		const struct port *p = __atomic_load_n(&F->ports[i], __ATOMIC_ACQUIRE);
		uint32_t c;

		if (!(present & bit(i)) || p == NULL)
			continue;
		c = __atomic_load_n(&p->of_config, __ATOMIC_RELAXED);
		if (port_link_is_up(p) && !(c & PORT_OF_DOWN))
			live |= bit(i);
		if (c & (PORT_OF_NO_RECV | PORT_OF_DOWN))
			m[0] |= bit(i);
		if (c & (PORT_OF_NO_FWD | PORT_OF_DOWN))
			m[1] |= bit(i);
		if (c & PORT_OF_NO_FLOOD)
			m[2] |= bit(i);
		if (c & PORT_OF_NO_PACKET_IN)
			m[3] |= bit(i);
		if (c & PORT_OF_DOWN)
			m[4] |= bit(i);
	}
	store_mask(&F->live, live, &changed);
	store_mask(&F->no_recv, m[0], &changed);
	store_mask(&F->no_fwd, m[1], &changed);
	store_mask(&F->no_flood, m[2], &changed);
	store_mask(&F->no_pin, m[3], &changed);
	store_mask(&F->down, m[4], &changed);
	if (changed)
		bump_gen(F);
}

void fwd_flow_ports_changed(void *state)
{
	flow_check_ports(state);
}

bool flow_tick(void *state)
{
	struct flow *F = state;
	uint64_t now = rte_rdtsc();
	bool reclaim = fwd_learn_ops.tick(F->learn);

	drain_pins(F);
	flow_check_ports(F);
	/* Meters are shared out among the workers anew ten times a second. */
	if (now - F->last_balance_tsc >= F->hz / 10) {
		F->last_balance_tsc = now;
		flow_meters_balance(F);
	}
	if (now - F->last_second_tsc >= F->hz) {
		unsigned int i;

		F->last_second_tsc = now;
		if (F->n_timed > 0)
			expire_rules(F, now);
		for (i = 0; i < FLOW_TABLES; i++)
			if (cls_subtables(F->tables->t[i]) > 1)
				cls_resort(F->tables->t[i]);
	}
	return reclaim;
}

void flow_reclaim(void *state)
{
	struct flow *F = state;

	fwd_learn_ops.reclaim(F->learn);
}
/* ---- rules ---- */

static int check_refs(const struct flow *F, const struct flow_rule_spec *s, bool table,
		      char *err, size_t err_len)
{
	unsigned int i;

	if (s->meter != FLOW_NO_METER && meter_find(F, s->meter) == NULL) {
		snprintf(err, err_len, "meter %u does not exist (add-meter first)", s->meter);
		return -1;
	}
	for (i = 0; i < (unsigned int)s->n_apply + s->n_write; i++) {
		const struct flow_action *a = i < s->n_apply ? &s->apply[i] :
					      &s->write[i - s->n_apply];

		if (a->type == FLOW_ACT_GROUP && group_find(F, a->arg) == NULL) {
			snprintf(err, err_len, "group %u does not exist (add-group first)", a->arg);
			return -1;
		}
	}
	if (table && s->table >= FLOW_TABLES) {
		snprintf(err, err_len, "table %u is out of range (0..%d)", s->table,
			 FLOW_TABLES - 1);
		return -1;
	}
	return 0;
}

static bool overlaps(const struct flow_match *a, const struct flow_match *b)
{
	const flow_key_word *ka = (const flow_key_word *)&a->key;
	const flow_key_word *ma = (const flow_key_word *)&a->mask;
	const flow_key_word *kb = (const flow_key_word *)&b->key;
	const flow_key_word *mb = (const flow_key_word *)&b->mask;
	unsigned int i;

	for (i = 0; i < FLOW_KEY_WORDS; i++)
		if ((ka[i] ^ kb[i]) & ma[i] & mb[i])
			return false;
	return true;
}

static bool has_overlap(const struct flow *F, const struct flow_rule_spec *s)
{
	const struct cls_rule *c;

	for (c = cls_first(F->tables->t[s->table]); c != NULL; c = cls_next(c))
		if (c->priority == s->priority && overlaps(&c->match, &s->match))
			return true;
	return false;
}

static void set_insns(struct flow_rule *r, struct flow_insns *in)
{
	struct flow_insns *old = r->insns;

	__atomic_store_n(&r->insns, in, __ATOMIC_RELEASE);
	wk_defer(free, old);
}

static void reset_counts(struct flow *F, struct flow_rule *r)
{
	struct flow_counts t = rule_totals(F, r);

	r->base.packets -= t.packets;
	r->base.bytes -= t.bytes;
}

/* Replaces an existing rule's instructions and settings by S's (add over a rule). */
static int readd_rule(struct flow *F, struct flow_rule *r, const struct flow_rule_spec *s)
{
	struct flow_insns *in = insns_from_spec(s);

	if (in == NULL)
		return -1;
	if ((r->idle_timeout || r->hard_timeout) && !(s->idle_timeout || s->hard_timeout))
		F->n_timed--;
	else if (!(r->idle_timeout || r->hard_timeout) && (s->idle_timeout || s->hard_timeout))
		F->n_timed++;
	set_insns(r, in);
	r->idle_timeout = s->idle_timeout;
	r->hard_timeout = s->hard_timeout;
	r->flags = s->flags;
	r->cookie = s->cookie;
	r->created_tsc = rte_rdtsc();
	if (s->flags & FLOW_FLAG_RESET_COUNTS)
		reset_counts(F, r);
	return 0;
}

static int insert_rule(struct flow *F, struct flow_tables *tables,
		       const struct flow_rule_spec *s, char *err, size_t err_len)
{
	struct flow_match m = s->match;
	struct cls_rule *old;
	struct flow_rule *r;

	flow_key_and(&m.key, &s->match.key, &s->match.mask);
	old = cls_find_exact(tables->t[s->table], &m, s->priority);
	if (old != NULL) {
		if (readd_rule(F, (struct flow_rule *)old, s) == 0)
			return 0;
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	r = rule_new(F, s);
	if (r == NULL || cls_insert(tables->t[s->table], &r->cls) != 0) {
		if (r != NULL)
			rule_free(r);
		snprintf(err, err_len, "out of memory for the rule");
		return -1;
	}
	if (s->idle_timeout != 0 || s->hard_timeout != 0)
		F->n_timed++;
	return 0;
}

int fwd_flow_check(void *state, const struct flow_rule_spec *s, char *err, size_t err_len)
{
	if (check_refs(state, s, true, err, err_len) != 0)
		return -1;
	if ((s->flags & FLOW_FLAG_CHECK_OVERLAP) && has_overlap(state, s)) {
		snprintf(err, err_len, "the rule overlaps one of the same priority in table %u "
			 "(check_overlap)", s->table);
		return -1;
	}
	return 0;
}

int fwd_flow_add(void *state, const struct flow_rule_spec *s, char *err, size_t err_len)
{
	struct flow *F = state;

	if (check_refs(F, s, true, err, err_len) != 0)
		return -1;
	if ((s->flags & FLOW_FLAG_CHECK_OVERLAP) && has_overlap(F, s)) {
		snprintf(err, err_len, "the rule overlaps one of the same priority in table %u "
			 "(check_overlap)", s->table);
		return -1;
	}
	if (insert_rule(F, F->tables, s, err, err_len) != 0)
		return -1;
	bump_gen(F);
	return 0;
}

static bool acts_use(const struct flow_action *a, uint16_t n, bool group, uint32_t x)
{
	uint16_t i;

	for (i = 0; i < n; i++)
		if (group ? a[i].type == FLOW_ACT_GROUP && a[i].arg == x :
		    a[i].type == FLOW_ACT_OUTPUT && a[i].port == x)
			return true;
	return false;
}

/* Whether rule R is one FILTER selects (OpenFlow's non-strict and strict matching). */
static bool selected(const struct flow_rule *r, const struct flow_rule_spec *f, bool strict)
{
	const struct flow_insns *in = r->insns;
	const flow_key_word *rm = (const flow_key_word *)&r->cls.match.mask;
	const flow_key_word *rk = (const flow_key_word *)&r->cls.match.key;
	const flow_key_word *fm = (const flow_key_word *)&f->match.mask;
	const flow_key_word *fk = (const flow_key_word *)&f->match.key;
	unsigned int i;

	if (f->table != FLOW_TABLE_ALL && f->table != r->table)
		return false;
	if ((r->cookie & f->cookie_mask) != (f->cookie & f->cookie_mask))
		return false;
	if (strict && r->cls.priority != f->priority)
		return false;
	for (i = 0; i < FLOW_KEY_WORDS; i++) {
		if (strict && (rm[i] != fm[i] || rk[i] != (fk[i] & fm[i])))
			return false;
		/* non-strict: the rule is at least as specific as the filter, and agrees */
		if (!strict && ((fm[i] & ~rm[i]) != 0 || ((rk[i] ^ fk[i]) & fm[i]) != 0))
			return false;
	}
	if (f->out_port != FLOW_PORT_ANY &&
	    !acts_use(in->acts, (uint16_t)(in->n_apply + in->n_write), false, f->out_port))
		return false;
	if (f->out_group != FLOW_PORT_ANY &&
	    !acts_use(in->acts, (uint16_t)(in->n_apply + in->n_write), true, f->out_group))
		return false;
	return true;
}

int fwd_flow_modify(void *state, const struct flow_rule_spec *f, bool strict,
		    unsigned int *n_changed, char *err, size_t err_len)
{
	struct flow *F = state;
	unsigned int i, n = 0;

	*n_changed = 0;
	if (check_refs(F, f, false, err, err_len) != 0)
		return -1;
	for (i = 0; i < FLOW_TABLES; i++) {
		struct cls_rule *c;

		for (c = cls_first(F->tables->t[i]); c != NULL; c = cls_next(c)) {
			struct flow_rule *r = (struct flow_rule *)c;
			struct flow_insns *in;

			if (!selected(r, f, strict))
				continue;
			in = insns_from_spec(f);
			if (in == NULL) {
				snprintf(err, err_len, "out of memory after %u rules", n);
				bump_gen(F);
				return -1;
			}
			set_insns(r, in);
			if (f->flags & FLOW_FLAG_RESET_COUNTS)
				reset_counts(F, r);
			n++;
		}
	}
	if (n > 0)
		bump_gen(F);
	*n_changed = n;
	return 0;
}

/*
 * Deletes every rule at once: an empty set of tables replaces the old, which is freed after a
 * grace period, rules and all (taking 100,000 rules out one by one would rebuild the views
 * and defer each rule). -1 when no memory is left for the new tables.
 */
static int delete_all(struct flow *F, unsigned int *n)
{
	struct flow_tables *fresh = tables_new(F), *old = F->tables;
	unsigned int i;

	*n = 0;
	if (fresh == NULL)
		return -1;
	for (i = 0; i < FLOW_TABLES; i++)
		for (struct cls_rule *c = cls_first(old->t[i]); c != NULL; c = cls_next(c)) {
			if (((struct flow_rule *)c)->flags & FLOW_FLAG_SEND_FLOW_REM)
				note_removed(F, (struct flow_rule *)c, "delete");
			(*n)++;
		}
	__atomic_store_n(&F->tables, fresh, __ATOMIC_RELEASE);
	F->n_timed = 0;
	bump_gen(F);
	wk_defer(tables_free, old);
	return 0;
}

unsigned int fwd_flow_delete(void *state, const struct flow_rule_spec *f, bool strict)
{
	struct flow *F = state;
	unsigned int i, n = 0;

	if (f == NULL && delete_all(F, &n) == 0)
		return n;
	for (i = 0; i < FLOW_TABLES; i++) {
		struct cls_rule *c, *next;

		for (c = cls_first(F->tables->t[i]); c != NULL; c = next) {
			struct flow_rule *r = (struct flow_rule *)c;

			next = cls_next(c);
			if (f != NULL && !selected(r, f, strict))
				continue;
			if (r->flags & FLOW_FLAG_SEND_FLOW_REM)
				note_removed(F, r, "delete");
			remove_rule(F, r);
			n++;
		}
	}
	if (n > 0)
		bump_gen(F);
	return n;
}

/* A rule set being built for replace-flows: published as a whole by the commit. */
struct flow_bundle {
	struct flow_tables *tables;
	unsigned int n_timed;
};

void *fwd_flow_bundle_open(void *state)
{
	struct flow *F = state;
	struct flow_bundle *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	b->tables = tables_new(F);
	if (b->tables == NULL) {
		free(b);
		return NULL;
	}
	return b;
}

int fwd_flow_bundle_add(void *state, void *bundle, const struct flow_rule_spec *s, char *err,
			size_t err_len)
{
	struct flow *F = state;
	struct flow_bundle *b = bundle;
	unsigned int saved = F->n_timed;
	int rc;

	if (check_refs(F, s, true, err, err_len) != 0)
		return -1;
	/* insert_rule() counts timed rules in F; the bundle's count is its own until it is in. */
	F->n_timed = b->n_timed;
	rc = insert_rule(F, b->tables, s, err, err_len);
	b->n_timed = F->n_timed;
	F->n_timed = saved;
	return rc;
}

void fwd_flow_bundle_abort(void *state, void *bundle)
{
	struct flow_bundle *b = bundle;

	(void)state;
	tables_free(b->tables);
	free(b);
}

void fwd_flow_bundle_commit(void *state, void *bundle)
{
	struct flow *F = state;
	struct flow_bundle *b = bundle;
	struct flow_tables *old = F->tables;

	__atomic_store_n(&F->tables, b->tables, __ATOMIC_RELEASE);
	F->n_timed = b->n_timed;
	bump_gen(F);
	wk_defer(tables_free, old);
	free(b);
}

static json_t *rule_json(const struct flow *F, const struct flow_rule *r,
			 const struct flow_namer *nm, uint64_t now)
{
	struct flow_counts t = rule_totals(F, r);
	struct flow_rule_spec *s = malloc(sizeof(*s));
	char match[1024], acts[2048], cookie[24];
	json_t *o;

	if (s == NULL)
		return json_null();
	spec_of_rule(r, s);
	flow_format_match(&r->cls.match, nm ? nm->name : NULL, nm ? nm->ctx : NULL, match,
			  sizeof(match));
	flow_format_actions(s, nm ? nm->name : NULL, nm ? nm->ctx : NULL, acts, sizeof(acts));
	free(s);
	snprintf(cookie, sizeof(cookie), "0x%" PRIx64, r->cookie);
	o = json_pack("{s:i, s:i, s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:i, s:i}",
		      "table", r->table, "priority", r->cls.priority, "cookie", cookie,
		      "match", match, "actions", acts,
		      "packets", (json_int_t)t.packets, "bytes", (json_int_t)t.bytes,
		      "duration", (double)(now - r->created_tsc) / (double)F->hz,
		      "idle_age", (double)tsc_since(now, t.used_tsc) / (double)F->hz,
		      "idle_timeout", r->idle_timeout, "hard_timeout", r->hard_timeout);
	if (o != NULL && (r->flags & FLOW_FLAG_SEND_FLOW_REM))
		json_object_set_new(o, "send_flow_rem", json_true());
	return o;
}

static int cmp_rules(const void *a, const void *b)
{
	const struct flow_rule *x = *(const struct flow_rule *const *)a;
	const struct flow_rule *y = *(const struct flow_rule *const *)b;

	if (x->table != y->table)
		return x->table < y->table ? -1 : 1;
	if (x->cls.priority != y->cls.priority)
		return x->cls.priority > y->cls.priority ? -1 : 1;
	return memcmp(&x->cls.match, &y->cls.match, sizeof(x->cls.match));
}

json_t *fwd_flow_dump(void *state, const struct flow_rule_spec *f, bool strict,
		      const struct flow_namer *nm)
{
	struct flow *F = state;
	uint64_t now = rte_rdtsc();
	unsigned int i, n = 0, total = 0;
	struct flow_rule **all;
	json_t *a = json_array();

	for (i = 0; i < FLOW_TABLES; i++)
		total += cls_count(F->tables->t[i]);
	all = malloc((total + 1) * sizeof(*all));
	if (all == NULL || a == NULL) {
		free(all);
		json_decref(a);
		return NULL;
	}
	for (i = 0; i < FLOW_TABLES; i++)
		for (struct cls_rule *c = cls_first(F->tables->t[i]); c != NULL; c = cls_next(c))
			if (f == NULL || selected((struct flow_rule *)c, f, strict))
				all[n++] = (struct flow_rule *)c;
	qsort(all, n, sizeof(*all), cmp_rules);
	for (i = 0; i < n; i++)
		json_array_append_new(a, rule_json(F, all[i], nm, now));
	free(all);
	return a;
}
/* ---- groups ---- */

void group_free(void *arg)
{
	struct flow_group *g = arg;

	free(g->spec);
	free(g);
}


int fwd_flow_group_set(void *state, const struct flow_group_spec *s, bool modify, char *err,
		       size_t err_len)
{
	struct flow *F = state;
	struct flow_group *g;
	unsigned int i;
	bool exists = group_find(F, s->id) != NULL;

	if (exists && !modify) {
		snprintf(err, err_len, "group %u exists (mod-group changes it)", s->id);
		return -1;
	}
	if (!exists && modify) {
		snprintf(err, err_len, "group %u does not exist", s->id);
		return -1;
	}
	for (i = 0; i < s->n_buckets; i++)
		for (unsigned int j = 0; j < s->buckets[i].n_actions; j++)
			if (s->buckets[i].actions[j].type == FLOW_ACT_GROUP &&
			    s->buckets[i].actions[j].arg != s->id &&
			    group_find(F, s->buckets[i].actions[j].arg) == NULL) {
				snprintf(err, err_len, "group %u does not exist",
					 s->buckets[i].actions[j].arg);
				return -1;
			}
	g = calloc(1, sizeof(*g) + F->n_workers * sizeof(struct flow_counts));
	if (g == NULL || (g->spec = malloc(sizeof(*s))) == NULL) {
		free(g);
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	*g->spec = *s;
	for (i = 0; i < s->n_buckets; i++)
		g->total_weight += s->type == FLOW_GROUP_SELECT ? s->buckets[i].weight : 0;
	if (index_publish(F, &F->groups, g->spec->id, g, group_free) != 0) {
		group_free(g);
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	return 0;
}

bool fwd_flow_group_del(void *state, uint32_t id)
{
	struct flow *F = state;
	struct flow_rule_spec *f;
	bool any = false;

	while (F->groups->n > 0) {
		uint32_t gid = id == FLOW_PORT_ANY ? F->groups->e[0].id : id;

		if (group_find(F, gid) == NULL)
			break;
		/* OpenFlow: deleting a group deletes the rules that send to it. */
		f = calloc(1, sizeof(*f));
		if (f != NULL) {
			f->table = FLOW_TABLE_ALL;
			f->out_port = FLOW_PORT_ANY;
			f->out_group = gid;
			fwd_flow_delete(F, f, false);
			free(f);
		}
		index_publish(F, &F->groups, gid, NULL, group_free);
		any = true;
		if (id != FLOW_PORT_ANY)
			break;
	}
	return any;
}

json_t *fwd_flow_group_dump(void *state, const struct flow_namer *nm)
{
	struct flow *F = state;
	const struct flow_index *gi = F->groups;
	json_t *a = json_array();
	unsigned int i, k;

	for (i = 0; i < gi->n; i++) {
		const struct flow_group *g = gi->e[i].obj;
		uint64_t packets = 0, bytes = 0;
		char text[4096];

		for (k = 0; k < F->n_workers; k++) {
			packets += stats_read(&g->counts[k].packets);
			bytes += stats_read(&g->counts[k].bytes);
		}
		flow_format_group(g->spec, nm ? nm->name : NULL, nm ? nm->ctx : NULL, text,
				  sizeof(text));
		json_array_append_new(a, json_pack("{s:I, s:s, s:I, s:I}", "group_id",
						   (json_int_t)g->spec->id, "text", text,
						   "packets", (json_int_t)packets,
						   "bytes", (json_int_t)bytes));
	}
	return a;
}
/* ---- meters ---- */

/* The profile of NUM/DEN of meter S's rate and burst; -1 when it cannot be metered. */
static int meter_share_profile(const struct flow_meter_spec *s, uint64_t num, uint64_t den,
			       struct rte_meter_srtcm_profile *p)
{
	/* A packets-per-second meter counts each packet as one byte (meter_pass). */
	bool pps = s->flags & FLOW_METER_PKTPS;
	uint64_t cir = pps ? s->rate : (uint64_t)s->rate * 1000 / 8;
	uint64_t burst = s->burst != 0 ? s->burst : RTE_MAX(s->rate / 10, 1u);
	/* In 128 bits: a byte rate times a share's bytes overflows 64 at high rates. */
	struct rte_meter_srtcm_params params = {
		.cir = RTE_MAX((uint64_t)((unsigned __int128)cir * num / den), UINT64_C(1)),
		.cbs = RTE_MAX((uint64_t)((unsigned __int128)(pps ? burst : burst * 1000 / 8) *
					  num / den), UINT64_C(1)),
		.ebs = 0,
	};

	if (s->rate == 0 || cir == 0 || rte_meter_srtcm_profile_config(p, &params) != 0)
		return -1;
	return 0;
}

/* Publishes PROFILE as worker W's share of M (meter_share reads it). */
static void set_share(struct flow_meter_worker *w, const struct rte_meter_srtcm_profile *p)
{
	uint32_t seq = w->seq;

	__atomic_store_n(&w->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&w->share.cbs, p->cbs, __ATOMIC_RELAXED);
	__atomic_store_n(&w->share.ebs, p->ebs, __ATOMIC_RELAXED);
	__atomic_store_n(&w->share.cir_period, p->cir_period, __ATOMIC_RELAXED);
	__atomic_store_n(&w->share.cir_bytes_per_period, p->cir_bytes_per_period,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&w->seq, seq + 2, __ATOMIC_RELEASE);
}

/*
 * Each worker's share of each meter: what it saw since the last balance, plus 1/32 of
 * an even share (so that a worker whose traffic just starts is not starved), over the sum.
 * One worker keeps the whole rate.
 */
void flow_meters_balance(struct flow *F)
{
	const struct flow_index *x = F->meters;
	unsigned int i, k, n = F->n_workers;

	if (n < 2)
		return;
	for (i = 0; i < x->n; i++) {
		struct flow_meter *m = x->e[i].obj;
		bool pps = m->spec.flags & FLOW_METER_PKTPS;
		uint64_t demand[WK_MAX_WORKERS], total = 0, floor, sum = 0;

		for (k = 0; k < n; k++) {
			uint64_t now = stats_read(pps ? &m->w[k].packets : &m->w[k].bytes);

			demand[k] = now - m->w[k].seen;
			m->w[k].seen = now;
			total += demand[k];
		}
		floor = total / (32 * n) + 1;
		for (k = 0; k < n; k++)
			sum += demand[k] + floor;
		for (k = 0; k < n; k++) {
			struct rte_meter_srtcm_profile p;

			if (meter_share_profile(&m->spec, demand[k] + floor, sum, &p) == 0)
				set_share(&m->w[k], &p);
		}
	}
}

static int meter_profile(const struct flow_meter_spec *s, struct rte_meter_srtcm_profile *p,
			 char *err, size_t err_len)
{
	uint64_t burst = s->burst != 0 ? s->burst : RTE_MAX(s->rate / 10, 1u);

	if (meter_share_profile(s, 1, 1, p) != 0) {
		snprintf(err, err_len, "meter %u: a rate of %u with a burst of %" PRIu64
			 " cannot be metered", s->id, s->rate, burst);
		return -1;
	}
	return 0;
}

int fwd_flow_meter_set(void *state, const struct flow_meter_spec *s, bool modify, char *err,
		       size_t err_len)
{
	struct flow *F = state;
	bool exists = meter_find(F, s->id) != NULL;
	struct flow_meter *m;
	unsigned int i;

	if (exists && !modify) {
		snprintf(err, err_len, "meter %u exists (mod-meter changes it)", s->id);
		return -1;
	}
	if (!exists && modify) {
		snprintf(err, err_len, "meter %u does not exist", s->id);
		return -1;
	}
	m = rte_zmalloc("flow_meter", sizeof(*m) + F->n_workers * sizeof(m->w[0]),
			RTE_CACHE_LINE_SIZE);
	if (m == NULL) {
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	m->spec = *s;
	if (meter_profile(s, &m->profile, err, err_len) != 0) {
		rte_free(m);
		return -1;
	}
	/* An even share each until the first balance. */
	for (i = 0; i < F->n_workers; i++) {
		struct rte_meter_srtcm_profile share = m->profile;

		if (F->n_workers > 1)
			meter_share_profile(s, 1, F->n_workers, &share);
		m->w[i].share = share;
		rte_meter_srtcm_config(&m->w[i].rt, &share);
	}
	if (index_publish(F, &F->meters, m->spec.id, m, rte_free) != 0) {
		rte_free(m);
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	return 0;
}

bool fwd_flow_meter_del(void *state, uint32_t id)
{
	struct flow *F = state;
	bool any = false;

	while (F->meters->n > 0) {
		uint32_t mid = id == FLOW_PORT_ANY ? F->meters->e[0].id : id;
		unsigned int t;

		if (meter_find(F, mid) == NULL)
			break;
		/* OpenFlow: deleting a meter deletes the rules that use it. */
		for (t = 0; t < FLOW_TABLES; t++) {
			struct cls_rule *c, *next;

			for (c = cls_first(F->tables->t[t]); c != NULL; c = next) {
				next = cls_next(c);
				if (((struct flow_rule *)c)->insns->meter == mid)
					remove_rule(F, (struct flow_rule *)c);
			}
		}
		index_publish(F, &F->meters, mid, NULL, rte_free);
		any = true;
		if (id != FLOW_PORT_ANY)
			break;
	}
	return any;
}

json_t *fwd_flow_meter_dump(void *state)
{
	struct flow *F = state;
	const struct flow_index *mi = F->meters;
	json_t *a = json_array();
	unsigned int i, k;

	for (i = 0; i < mi->n; i++) {
		const struct flow_meter *m = mi->e[i].obj;
		uint64_t p = 0, b = 0, dp = 0, db = 0;
		char text[256];

		for (k = 0; k < F->n_workers; k++) {
			p += stats_read(&m->w[k].packets);
			b += stats_read(&m->w[k].bytes);
			dp += stats_read(&m->w[k].dropped_packets);
			db += stats_read(&m->w[k].dropped_bytes);
		}
		flow_format_meter(&m->spec, text, sizeof(text));
		json_array_append_new(a, json_pack("{s:I, s:s, s:I, s:I, s:I, s:I}", "meter_id",
						   (json_int_t)m->spec.id, "text", text,
						   "packets", (json_int_t)p, "bytes", (json_int_t)b,
						   "dropped_packets", (json_int_t)dp,
						   "dropped_bytes", (json_int_t)db));
	}
	return a;
}

