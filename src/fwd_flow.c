/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow: OpenFlow 1.3 tables of match/action rules, behind caches (the design OVS's
 * lib/dpif-netdev.c and lib/classifier.c describe; this code is our own).
 *
 * A burst is handled in three passes, as the rest of the data path:
 *   1. every frame is parsed once into a flow key (flow_key.c) and hashed;
 *   2. each key is looked up in the worker's exact-match cache, which holds, per key, the
 *      result of the whole pipeline: a "program" (the rules hit, for their counters; the
 *      meters; and the egresses: which ports get the frame, after which header changes).
 *      A miss runs the pipeline (translate()): table 0's classifier, the rule's
 *      instructions, goto_table, ... the action set, and stores the program;
 *   3. each program is run on its frame: meters, header changes, outputs as the worker's
 *      out/flood/extra decisions (fwd.h). A program that is one output to one port, the
 *      common case, costs a store.
 * Consecutive frames with the same first 64 bytes reuse the previous frame's key, hash and
 * program without parsing (most bursts are runs of one flow).
 *
 * A program depends only on the key and on the switch's configuration, never on the
 * packet's payload or on time, so it can be cached: meters are applied when a program runs,
 * and `normal` (learn mode's bridge, embedded) decides when it runs, from its table. Every
 * change of configuration (a rule, group or meter, a port joining, leaving, or changing its
 * link, for fast-failover groups) bumps the switch's generation, and a cache entry of an
 * older generation is a miss. A worker reads the generation before it looks anything up,
 * so an entry never claims a newer generation than what it was computed from.
 *
 * Rules, groups and meters are plain heap objects the control thread owns. Workers read
 * them without locks; what the control thread removes is freed after an RCU grace period
 * (wk_defer), so a cached program's pointers stay valid as long as a worker can use it.
 * replace-flows builds a new set of tables and publishes it with one pointer store: a
 * packet is classified by the old set or the new one, never a mix.
 *
 * Counting (stats.h): a frame that leaves by at least one output, or reaches the control
 * side's queue, is forwarded; one that leaves by none is dropped with the reason that
 * stopped it: no_match (a table miss), action_drop (the rule said so, or said nothing),
 * meter, ttl_expired, group_no_live_bucket, controller_queue_full.
 */
#include "fwd_flow.h"

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

#include "classifier.h"
#include "flow_cache.h"
#include "flow_mod.h"
#include "fwd.h"
#include "log.h"
#include "port.h"
#include "worker.h"

#define FLOW_EMC_ENTRIES 8192          /* per worker; two ways per set */
#define FLOW_EMC_WAYS 2
#define FLOW_EMC_INSERT_EVERY 16               /* a power of two (emc_should_insert) */
#define FLOW_MF_ENTRIES 16384          /* per worker: the megaflow cache (flow_cache.h) */
#define PROG_MAX_RULES 16
#define PROG_MAX_EGRESS 8
#define PROG_MAX_MODS 24
#define PROG_MAX_METERS 4
#define PROG_MAX_GROUPS 8
#define FLOW_GROUP_DEPTH 8             /* groups calling groups */
#define FLOW_PIN_RING 1024             /* packet-ins a worker may queue between two ticks */
#define FLOW_PIN_KEEP 256              /* packet-ins kept for the control side to take */
#define FLOW_PIN_BYTES 128             /* bytes of each kept (OpenFlow's default max_len) */
#define FLOW_REMOVED_KEEP 1024         /* flow-removed records kept */
#define FLOW_SAME_BYTES 128            /* frames this alike share a key */
#define PROG_NOT_SIMPLE 0xffff

/* ---- objects ---- */

/* One worker's counters of a rule, group or meter: written by that worker only. */
struct flow_counts {
	uint64_t packets, bytes;
	uint64_t used_tsc;                 /* rules: the last packet's time */
};

/* A rule's instructions: replaced as a whole (mod-flows), never changed in place. */
struct flow_insns {
	uint32_t meter;
	uint8_t goto_table;
	bool clear_actions, has_write_metadata;
	uint64_t write_metadata, write_metadata_mask;
	uint16_t n_apply, n_write;
	struct flow_action acts[];         /* apply, then write */
};

struct flow_rule {
	struct cls_rule cls;               /* first: the classifier hands back this */
	struct flow_insns *insns;          /* atomic */
	uint8_t table;
	/* control thread only */
	uint16_t idle_timeout, hard_timeout;
	uint32_t flags;
	uint64_t cookie;
	uint64_t created_tsc;
	struct flow_counts base;           /* counters carried over (add over a rule) */
	struct flow_counts counts[];       /* per worker */
};

struct flow_group {
	struct flow_group_spec *spec;      /* immutable */
	uint32_t total_weight;
	struct flow_counts counts[];
};

struct flow_meter {
	struct flow_meter_spec spec;
	struct rte_meter_srtcm_profile profile;
	struct {
		struct rte_meter_srtcm rt;
		uint64_t packets, bytes, dropped_packets, dropped_bytes;
	} __rte_cache_aligned w[];
};

/* Groups or meters by id: sorted, replaced as a whole, binary-searched by workers. */
struct flow_index {
	unsigned int n;
	struct flow_index_entry {
		uint32_t id;
		void *obj;
	} e[];
};

struct flow_tables {
	struct cls_table *t[FLOW_TABLES];
};

/* ---- programs ---- */

enum egress_kind { EG_PORTS, EG_NORMAL, EG_CONTROLLER };

struct flow_modop {
	uint8_t type;                      /* FLOW_ACT_SET_FIELD, PUSH_VLAN, POP_VLAN, DEC_TTL */
	uint8_t field;
	uint16_t tpid;
	uint8_t value[16];
};

struct flow_egress {
	uint8_t kind;                      /* enum egress_kind */
	uint8_t mod_start, n_mods;         /* the header changes, in prog->mods */
	uint8_t reason;                    /* controller: 0 table miss, 1 action */
	uint8_t table;                     /* controller: the table it was sent from */
	uint16_t max_len;                  /* controller */
	uint64_t ports;                    /* EG_PORTS; the input's bit: an in_port output */
	uint64_t cookie;                   /* controller */
};

struct flow_prog {
	uint16_t simple;                   /* one unchanged output to this port; or NOT_SIMPLE */
	uint8_t n_rules, n_egress, n_mods, n_meters, n_groups;
	uint8_t drop;                      /* the reason, when n_egress is 0 */
	bool cacheable;
	/* Depends on no header field, only on the input port (rules on in_port alone): every
	 * frame of a burst has it, so the burst is decided by its first frame. */
	bool header_free;
	struct flow_rule *rules[PROG_MAX_RULES];
	struct flow_meter *meters[PROG_MAX_METERS];
	struct flow_group *groups[PROG_MAX_GROUPS];
	struct flow_egress eg[PROG_MAX_EGRESS];
	struct flow_modop mods[PROG_MAX_MODS];
};

struct emc_entry {
	uint32_t hash;
	uint32_t gen;
	struct flow_key key;
};

struct pin_elem {
	struct rte_mbuf *m;
	uint64_t cookie;
	uint16_t in_port;
	uint8_t reason, table;
	uint16_t max_len;
	uint16_t pad;
};

/* One worker's part: written by that worker only. */
struct flow_worker {
	struct rte_ring *pins;
	uint64_t pin_full, copy_failed, uncacheable, emc_hits, emc_misses;
	uint32_t insert_tick;
	uint64_t tsc;                      /* the burst's time */
	uint16_t extra_max;                /* extra frames the burst may hand over (add_extra) */
	struct emc_entry *emc;
	struct flow_prog *emc_prog;
	struct mf_cache *mf;
	struct flow_prog scratch;          /* a program that may not be cached */

	/* scratch for one burst */
	struct flow_key key[FWD_MAX_BURST];
	uint32_t last_hl;                  /* same_headers(): how many bytes last_hdr holds */
	uint8_t last_hdr[FLOW_SAME_BYTES];
	/* frames for the embedded learning bridge (`normal`) */
	uint16_t n_normal;
	struct rte_mbuf *normal_pkts[FWD_MAX_BURST];
	uint16_t normal_idx[FWD_MAX_BURST];
	bool normal_carrier[FWD_MAX_BURST];
	struct fwd_burst nfb;
} __rte_cache_aligned;

struct pin_record {
	uint64_t cookie;
	uint16_t in_port, len, total_len;
	uint8_t reason, table;
	uint8_t data[FLOW_PIN_BYTES];
};

struct removed_record {
	char *text;
	const char *reason;
	uint64_t packets, bytes;
	double duration;
};

struct flow {
	struct flow_tables *tables;        /* atomic */
	struct flow_index *groups;         /* atomic: struct flow_group */
	struct flow_index *meters;         /* atomic: struct flow_meter */
	uint32_t gen;                      /* atomic: bumped on every change */
	uint64_t present;                  /* atomic: ports attached */
	uint64_t live;                     /* atomic: attached ports whose link is up */
	void *learn;                       /* the `normal` action's bridge */
	struct port **ports;               /* the switch's ports (bind) */

	/* control thread only */
	unsigned int n_workers, name_id, table_seq;
	uint64_t hz, last_second_tsc;
	unsigned int n_timed;              /* rules with a timeout */
	struct pin_record pins[FLOW_PIN_KEEP];
	unsigned int pin_head, pin_count;
	uint64_t pins_taken, pins_lost;
	struct removed_record removed[FLOW_REMOVED_KEEP];
	unsigned int removed_head, removed_count;
	uint64_t lookups_at_resort;

	struct flow_worker w[];
};

static unsigned int flow_ids;

static uint64_t bit(unsigned int i)
{
	return UINT64_C(1) << i;
}

static void bump_gen(struct flow *F)
{
	__atomic_store_n(&F->gen, F->gen + 1, __ATOMIC_RELEASE);
}

static void *index_find(struct flow_index *const *pi, uint32_t id)
{
	const struct flow_index *x = __atomic_load_n(pi, __ATOMIC_ACQUIRE);
	unsigned int lo = 0, hi = x->n;

	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (x->e[mid].id == id)
			return x->e[mid].obj;
		if (x->e[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct flow_group *group_find(const struct flow *F, uint32_t id)
{
	return index_find(&F->groups, id);
}

static struct flow_meter *meter_find(const struct flow *F, uint32_t id)
{
	return index_find(&F->meters, id);
}

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

/* ---- translation: running the pipeline for a key ---- */

/* Where a translation writes its explanation (trace), or nothing. */
struct xlate_trace {
	char *buf;
	size_t len, used;
	const struct flow_namer *namer;
	int indent;
};

struct xlate {
	const struct flow *F;
	uint16_t in;
	struct flow_key k;                 /* the key as the actions so far changed it */
	struct flow_prog *p;
	uint8_t cur_start, cur_n;          /* the header changes so far, in p->mods */
	uint16_t n_set;                    /* the action set */
	struct flow_action set[FLOW_MAX_ACTIONS];
	struct flow_rule *rule;            /* the rule whose actions run */
	uint8_t table;
	bool expired;                      /* a dec_ttl found the TTL spent: stop */
	/* What the result depends on: the masks of the subtables looked in, and whether an
	 * action read a header field (a TTL, a tag, a select group's hash). */
	struct flow_key wc;
	bool reads_headers;
	bool no_live_bucket;
	unsigned int depth;
	struct xlate_trace *tr;
};

static void tr_printf(struct xlate *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tr_printf(struct xlate *x, const char *fmt, ...)
{
	struct xlate_trace *t = x->tr;
	va_list ap;
	int n;

	if (t == NULL || t->used + 1 >= t->len)
		return;
	n = snprintf(t->buf + t->used, t->len - t->used, "%*s", t->indent * 4, "");
	if (n > 0)
		t->used = RTE_MIN(t->len - 1, t->used + (size_t)n);
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->used = RTE_MIN(t->len - 1, t->used + (size_t)n);
	if (t->used + 1 < t->len) {
		t->buf[t->used++] = '\n';
		t->buf[t->used] = '\0';
	}
}

static const char *tr_port(struct xlate *x, uint32_t port, char *buf, size_t len)
{
	const char *name = NULL;

	if (x->tr != NULL && x->tr->namer != NULL && port < SW_MAX_PORTS)
		name = x->tr->namer->name(x->tr->namer->ctx, port);
	if (name != NULL)
		return name;
	snprintf(buf, len, "%u", FLOW_OFPORT(port));
	return buf;
}

/* An egress for the header changes so far, merged with one that has the same changes. */
static struct flow_egress *egress(struct xlate *x, uint8_t kind)
{
	struct flow_prog *p = x->p;
	struct flow_egress *e;
	unsigned int i;

	if (kind == EG_PORTS)
		for (i = 0; i < p->n_egress; i++) {
			e = &p->eg[i];
			if (e->kind == EG_PORTS && e->mod_start == x->cur_start &&
			    e->n_mods == x->cur_n)
				return e;
		}
	if (p->n_egress == PROG_MAX_EGRESS) {
		tr_printf(x, "too many different outputs (%d): this one is left out",
			  PROG_MAX_EGRESS);
		return NULL;
	}
	e = &p->eg[p->n_egress++];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->mod_start = x->cur_start;
	e->n_mods = x->cur_n;
	return e;
}

static void output_ports(struct xlate *x, uint64_t ports)
{
	struct flow_egress *e;

	if (ports == 0)
		return;
	e = egress(x, EG_PORTS);
	if (e != NULL)
		e->ports |= ports;
}

static void output_controller(struct xlate *x, uint8_t reason, uint16_t max_len)
{
	struct flow_egress *e = egress(x, EG_CONTROLLER);

	if (e == NULL)
		return;
	e->reason = reason;
	e->table = x->table;
	e->max_len = max_len;
	e->cookie = x->rule != NULL ? x->rule->cookie : 0;
}

static void do_output(struct xlate *x, const struct flow_action *a)
{
	uint64_t present = __atomic_load_n(&x->F->present, __ATOMIC_RELAXED);
	char nb[16];

	switch (a->port) {
	case FLOW_PORT_IN_PORT:
		tr_printf(x, "output to the input port %s", tr_port(x, x->in, nb, sizeof(nb)));
		output_ports(x, bit(x->in));
		return;
	case FLOW_PORT_FLOOD:
	case FLOW_PORT_ALL:
		tr_printf(x, "%s: every port but the input", a->port == FLOW_PORT_ALL ? "all" :
			  "flood");
		output_ports(x, present & ~bit(x->in));
		return;
	case FLOW_PORT_NORMAL:
		tr_printf(x, "normal: the learning bridge decides when the packet runs");
		if (egress(x, EG_NORMAL) == NULL)
			return;
		return;
	case FLOW_PORT_CONTROLLER:
		tr_printf(x, "controller: queued for the control side (max_len %u)", a->arg);
		output_controller(x, 1, (uint16_t)RTE_MIN(a->arg, (uint32_t)UINT16_MAX));
		return;
	case FLOW_PORT_LOCAL:
		tr_printf(x, "output to LOCAL: this switch has no local port, nothing sent");
		return;
	default:
		break;
	}
	if (a->port >= SW_MAX_PORTS || !(present & bit(a->port))) {
		tr_printf(x, "output to port %u: no such port, nothing sent", FLOW_OFPORT(a->port));
		return;
	}
	if (a->port == x->in) {
		/* OpenFlow: only the in_port action sends a packet back where it came from. */
		tr_printf(x, "output to %s: the input port, skipped (use in_port)",
			  tr_port(x, a->port, nb, sizeof(nb)));
		return;
	}
	tr_printf(x, "output to %s", tr_port(x, a->port, nb, sizeof(nb)));
	output_ports(x, bit(a->port));
}

/* Appends a header change; the changes so far are moved to the end first if a group
 * bucket left them elsewhere. False when the program has no room left. */
static bool add_mod(struct xlate *x, const struct flow_modop *op)
{
	struct flow_prog *p = x->p;

	if (x->cur_start + x->cur_n != p->n_mods) {
		if (p->n_mods + x->cur_n + 1 > PROG_MAX_MODS)
			goto full;
		memcpy(&p->mods[p->n_mods], &p->mods[x->cur_start], x->cur_n * sizeof(*op));
		x->cur_start = p->n_mods;
		p->n_mods = (uint8_t)(p->n_mods + x->cur_n);
	}
	if (p->n_mods == PROG_MAX_MODS)
		goto full;
	p->mods[p->n_mods++] = *op;
	x->cur_n++;
	return true;
full:
	tr_printf(x, "too many header changes (%d): the packet is dropped", PROG_MAX_MODS);
	x->expired = true;      /* stop: sending it half-changed would be wrong */
	return false;
}

/* What a set_field does to the key, so that later tables match the changed packet. */
static void set_key_field(struct flow_key *k, const struct flow_action *a)
{
	uint16_t v16;

	switch (a->field) {
	case FLOW_FIELD_DL_SRC: memcpy(k->dl_src, a->value, 6); break;
	case FLOW_FIELD_DL_DST: memcpy(k->dl_dst, a->value, 6); break;
	case FLOW_FIELD_VLAN_VID:
		memcpy(&v16, a->value, 2);
		k->vlan_tci = rte_cpu_to_be_16((rte_be_to_cpu_16(k->vlan_tci) & 0xe000) |
					       FLOW_VLAN_CFI | (rte_be_to_cpu_16(v16) & 0xfff));
		break;
	case FLOW_FIELD_VLAN_PCP:
		k->vlan_tci = rte_cpu_to_be_16((rte_be_to_cpu_16(k->vlan_tci) & 0x1fff) |
					       (uint16_t)((a->value[0] & 7) << 13));
		break;
	case FLOW_FIELD_NW_SRC: memcpy(&k->nw_src, a->value, 4); break;
	case FLOW_FIELD_NW_DST: memcpy(&k->nw_dst, a->value, 4); break;
	case FLOW_FIELD_IP_DSCP:
		k->nw_tos = (uint8_t)((k->nw_tos & 3) | (a->value[0] << 2));
		break;
	case FLOW_FIELD_IP_ECN: k->nw_tos = (uint8_t)((k->nw_tos & 0xfc) | (a->value[0] & 3)); break;
	case FLOW_FIELD_NW_TTL: k->nw_ttl = a->value[0]; break;
	case FLOW_FIELD_TP_SRC: memcpy(&k->tp_src, a->value, 2); break;
	case FLOW_FIELD_TP_DST: memcpy(&k->tp_dst, a->value, 2); break;
	case FLOW_FIELD_IPV6_SRC: memcpy(k->ipv6_src, a->value, 16); break;
	case FLOW_FIELD_IPV6_DST: memcpy(k->ipv6_dst, a->value, 16); break;
	case FLOW_FIELD_IPV6_LABEL: memcpy(&k->ipv6_label, a->value, 4); break;
	case FLOW_FIELD_TUN_ID: memcpy(&k->tun_id, a->value, 8); break;
	default: break;
	}
}

static bool key_is_ip(const struct flow_key *k)
{
	return k->dl_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	       k->dl_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
}

static void do_set_field(struct xlate *x, const struct flow_action *a)
{
	struct flow_modop op = { .type = FLOW_ACT_SET_FIELD, .field = a->field };

	if (a->field == FLOW_FIELD_VLAN_VID || a->field == FLOW_FIELD_VLAN_PCP)
		x->reads_headers = true;        /* whether the frame has a tag */
	/* As OVS's mod_vlan_vid and mod_vlan_pcp: setting the VID or the PCP of an untagged
	 * frame pushes a tag (VID 0, PCP 0) first. */
	if ((a->field == FLOW_FIELD_VLAN_VID || a->field == FLOW_FIELD_VLAN_PCP) &&
	    x->k.vlan_tci == 0) {
		struct flow_modop push = { .type = FLOW_ACT_PUSH_VLAN, .tpid = RTE_ETHER_TYPE_VLAN };

		tr_printf(x, "push_vlan:0x8100 (the frame had no tag)");
		if (!add_mod(x, &push))
			return;
		x->k.vlan_tci = rte_cpu_to_be_16(FLOW_VLAN_CFI);
	}
	memcpy(op.value, a->value, sizeof(op.value));
	tr_printf(x, "set_field %s", flow_field_name((enum flow_field)a->field));
	if (add_mod(x, &op))
		set_key_field(&x->k, a);
}

static void do_dec_ttl(struct xlate *x)
{
	struct flow_modop op = { .type = FLOW_ACT_DEC_TTL };

	x->reads_headers = true;
	if (!key_is_ip(&x->k)) {
		tr_printf(x, "dec_ttl: not an IP packet, nothing changed");
		return;
	}
	if (x->k.nw_ttl <= 1) {
		tr_printf(x, "dec_ttl: TTL %u is spent: the packet goes no further", x->k.nw_ttl);
		x->expired = true;
		return;
	}
	tr_printf(x, "dec_ttl: TTL %u -> %u", x->k.nw_ttl, x->k.nw_ttl - 1);
	if (add_mod(x, &op))
		x->k.nw_ttl--;
}

static void do_actions(struct xlate *x, const struct flow_action *acts, uint16_t n);

static bool port_live(const struct flow *F, uint32_t port)
{
	return port < SW_MAX_PORTS &&
	       (__atomic_load_n(&F->live, __ATOMIC_RELAXED) & bit(port)) != 0;
}

/* Fast failover: the first bucket whose watch is live; -1 when none is. */
static int live_bucket(const struct flow *F, const struct flow_group *g, unsigned int depth)
{
	unsigned int i;

	for (i = 0; i < g->spec->n_buckets; i++) {
		const struct flow_bucket *b = &g->spec->buckets[i];
		const struct flow_group *w;

		if (b->watch_port != FLOW_PORT_ANY && port_live(F, b->watch_port))
			return (int)i;
		if (b->watch_group != FLOW_PORT_ANY && depth < FLOW_GROUP_DEPTH &&
		    (w = group_find(F, b->watch_group)) != NULL &&
		    (w->spec->type != FLOW_GROUP_FF || live_bucket(F, w, depth + 1) >= 0))
			return (int)i;
	}
	return -1;
}

/* Select: the bucket a hash of the flow's addresses and ports picks, by weight. Only
 * those: TTL and TOS (ECN marks) change on the way while the flow stays the same. */
static int select_bucket(const struct xlate *x, const struct flow_group *g)
{
	const struct flow_key *k = &x->k;
	uint32_t h = 0, pick;
	unsigned int i;

	_Static_assert(offsetof(struct flow_key, dl_src) == offsetof(struct flow_key, dl_dst) + 6,
		       "dl_dst and dl_src are hashed as one block");
	if (g->total_weight == 0)
		return -1;
	h = rte_hash_crc(k->dl_dst, 12, h);      /* both addresses, 8-byte aligned */
	h = rte_hash_crc_1byte(k->nw_proto, h);
	h = rte_hash_crc_4byte((uint32_t)k->tp_src << 16 | k->tp_dst, h);
	h = rte_hash_crc_4byte(k->nw_src, h);
	h = rte_hash_crc_4byte(k->nw_dst, h);
	h = rte_hash_crc(k->ipv6_src, 32, h);
	pick = h % g->total_weight;
	for (i = 0; i < g->spec->n_buckets; i++) {
		if (pick < g->spec->buckets[i].weight)
			return (int)i;
		pick -= g->spec->buckets[i].weight;
	}
	return -1;
}

static void write_action_set(struct xlate *x, const struct flow_action *acts, uint16_t n);
static void run_action_set(struct xlate *x);

/*
 * Runs bucket B on a clone of the packet: changes made in it stay in it. A bucket's actions
 * are an action set, not a list (OpenFlow 1.3, 5.6.1: "the actions in a bucket are always
 * applied as an action set"; OVS does the same): they run in the action set's order, one
 * output (the last written) unless there is a group, whatever order they were written in.
 * The pipeline's own action set is kept aside meanwhile.
 */
static void run_bucket(struct xlate *x, const struct flow_bucket *b, unsigned int i)
{
	struct flow_key saved = x->k;
	uint8_t start = x->cur_start, n = x->cur_n;
	struct flow_action pipeline_set[FLOW_MAX_ACTIONS];
	uint16_t pipeline_n = x->n_set;

	memcpy(pipeline_set, x->set, pipeline_n * sizeof(x->set[0]));
	x->n_set = 0;
	tr_printf(x, "bucket %u:", i);
	if (x->tr != NULL)
		x->tr->indent++;
	x->depth++;
	write_action_set(x, b->actions, b->n_actions);
	run_action_set(x);
	x->depth--;
	if (x->tr != NULL)
		x->tr->indent--;
	memcpy(x->set, pipeline_set, pipeline_n * sizeof(x->set[0]));
	x->n_set = pipeline_n;
	x->k = saved;
	x->cur_start = start;
	x->cur_n = n;
	x->expired = false;     /* a bucket's spent TTL ends that bucket only */
}

static void do_group(struct xlate *x, uint32_t id)
{
	struct flow_group *g = group_find(x->F, id);
	struct flow_prog *p = x->p;
	unsigned int i;
	int b;

	if (g == NULL) {
		tr_printf(x, "group:%u: no such group, nothing sent", id);
		return;
	}
	if (x->depth >= FLOW_GROUP_DEPTH) {
		tr_printf(x, "group:%u: groups nest deeper than %d, nothing sent", id,
			  FLOW_GROUP_DEPTH);
		return;
	}
	if (p->n_groups < PROG_MAX_GROUPS)
		p->groups[p->n_groups++] = g;
	else
		p->cacheable = false;   /* its counters would be lost */
	switch (g->spec->type) {
	case FLOW_GROUP_ALL:
		tr_printf(x, "group:%u (all): %u buckets", id, g->spec->n_buckets);
		for (i = 0; i < g->spec->n_buckets; i++)
			run_bucket(x, &g->spec->buckets[i], i);
		return;
	case FLOW_GROUP_SELECT:
		x->reads_headers = true;
		b = select_bucket(x, g);
		break;
	case FLOW_GROUP_INDIRECT:
		b = g->spec->n_buckets > 0 ? 0 : -1;
		break;
	default:
		b = live_bucket(x->F, g, x->depth);
		break;
	}
	if (b < 0) {
		tr_printf(x, "group:%u: no live bucket, nothing sent", id);
		x->no_live_bucket = true;
		return;
	}
	tr_printf(x, "group:%u (%s): bucket %d", id,
		  g->spec->type == FLOW_GROUP_SELECT ? "select" :
		  g->spec->type == FLOW_GROUP_INDIRECT ? "indirect" : "fast_failover", b);
	run_bucket(x, &g->spec->buckets[b], (unsigned int)b);
}

static void do_action(struct xlate *x, const struct flow_action *a)
{
	struct flow_modop op = { .type = a->type };

	switch (a->type) {
	case FLOW_ACT_OUTPUT:
		do_output(x, a);
		break;
	case FLOW_ACT_GROUP:
		do_group(x, a->arg);
		break;
	case FLOW_ACT_SET_FIELD:
		do_set_field(x, a);
		break;
	case FLOW_ACT_PUSH_VLAN:
		x->reads_headers = true;
		op.tpid = (uint16_t)a->arg;
		tr_printf(x, "push_vlan:0x%04x", a->arg);
		if (add_mod(x, &op))
			x->k.vlan_tci = rte_cpu_to_be_16(FLOW_VLAN_CFI |
							 (rte_be_to_cpu_16(x->k.vlan_tci) & 0xefff));
		break;
	case FLOW_ACT_POP_VLAN:
		x->reads_headers = true;
		if (x->k.vlan_tci == 0) {
			tr_printf(x, "pop_vlan: no tag, nothing changed");
			break;
		}
		tr_printf(x, "pop_vlan");
		if (add_mod(x, &op))
			x->k.vlan_tci = 0;
		break;
	case FLOW_ACT_DEC_TTL:
		do_dec_ttl(x);
		break;
	case FLOW_ACT_SET_QUEUE:
		tr_printf(x, "set_queue:%u (one queue per port: no effect)", a->arg);
		break;
	default:
		break;
	}
}

static void do_actions(struct xlate *x, const struct flow_action *acts, uint16_t n)
{
	uint16_t i;

	for (i = 0; i < n && !x->expired; i++)
		do_action(x, &acts[i]);
}

/* write_actions: an action replaces the set's action of its kind (a set_field, of its field). */
static void write_action_set(struct xlate *x, const struct flow_action *acts, uint16_t n)
{
	uint16_t i, j;

	for (i = 0; i < n; i++) {
		for (j = 0; j < x->n_set; j++)
			if (x->set[j].type == acts[i].type &&
			    (acts[i].type != FLOW_ACT_SET_FIELD || x->set[j].field == acts[i].field))
				break;
		if (j == x->n_set) {
			if (x->n_set == FLOW_MAX_ACTIONS)
				continue;
			x->n_set++;
		}
		x->set[j] = acts[i];
	}
}

/* The action set runs in OpenFlow 1.3's order (5.10): pop, push, dec_ttl, set_field,
 * set_queue, then group, or else output. */
static void run_action_set(struct xlate *x)
{
	static const uint8_t order[] = { FLOW_ACT_POP_VLAN, FLOW_ACT_PUSH_VLAN, FLOW_ACT_DEC_TTL,
					 FLOW_ACT_SET_FIELD, FLOW_ACT_SET_QUEUE };
	bool has_group = false;
	unsigned int o;
	uint16_t i;

	if (x->n_set == 0)
		return;
	tr_printf(x, "the action set:");
	for (o = 0; o < RTE_DIM(order); o++)
		for (i = 0; i < x->n_set && !x->expired; i++)
			if (x->set[i].type == order[o])
				do_action(x, &x->set[i]);
	for (i = 0; i < x->n_set && !x->expired; i++)
		if (x->set[i].type == FLOW_ACT_GROUP) {
			has_group = true;
			do_action(x, &x->set[i]);
		}
	for (i = 0; i < x->n_set && !x->expired && !has_group; i++)
		if (x->set[i].type == FLOW_ACT_OUTPUT)
			do_action(x, &x->set[i]);
}

static void note_rule(struct xlate *x, struct flow_rule *r)
{
	struct flow_prog *p = x->p;

	if (p->n_rules < PROG_MAX_RULES)
		p->rules[p->n_rules++] = r;
	else
		p->cacheable = false;
}

static void note_meter(struct xlate *x, uint32_t id)
{
	struct flow_meter *m = meter_find(x->F, id);
	struct flow_prog *p = x->p;

	if (m == NULL) {
		tr_printf(x, "meter:%u: no such meter, not metered", id);
		return;
	}
	tr_printf(x, "meter:%u (%u %s)", id, m->spec.rate,
		  m->spec.flags & FLOW_METER_PKTPS ? "pktps" : "kbps");
	if (p->n_meters < PROG_MAX_METERS)
		p->meters[p->n_meters++] = m;
}

static void trace_rule(struct xlate *x, const struct flow_rule *r)
{
	char match[512], acts[1024];
	struct flow_rule_spec spec;
	const struct flow_insns *in = r->insns;
	const struct flow_namer *nm;

	if (x->tr == NULL)
		return;
	nm = x->tr->namer;
	memset(&spec, 0, sizeof(spec));
	spec.goto_table = in->goto_table;
	spec.meter = in->meter;
	spec.clear_actions = in->clear_actions;
	spec.has_write_metadata = in->has_write_metadata;
	spec.write_metadata = in->write_metadata;
	spec.write_metadata_mask = in->write_metadata_mask;
	spec.n_apply = in->n_apply;
	spec.n_write = in->n_write;
	memcpy(spec.apply, in->acts, in->n_apply * sizeof(in->acts[0]));
	memcpy(spec.write, in->acts + in->n_apply, in->n_write * sizeof(in->acts[0]));
	flow_format_match(&r->cls.match, nm ? nm->name : NULL, nm ? nm->ctx : NULL, match,
			  sizeof(match));
	flow_format_actions(&spec, nm ? nm->name : NULL, nm ? nm->ctx : NULL, acts,
			    sizeof(acts));
	tr_printf(x, "table %u: priority=%u%s%s, cookie=0x%" PRIx64 " actions=%s", r->table,
		  r->cls.priority, match[0] ? "," : "", match, r->cookie, acts);
}

/* Whether mask WC covers nothing of a frame's headers: only in_port and metadata (which
 * write_metadata sets, not the frame). tun_id is a header: a tunnel port fills it. */
static bool port_only(const struct flow_key *wc)
{
	struct flow_key rest = *wc;

	rest.in_port = 0;
	rest.metadata = 0;
	return flow_key_equal(&rest, &(struct flow_key){ 0 });
}

/*
 * The mask of the megaflow the translation X stands for: the bits its lookups depended on,
 * and in_port always (an output to the input port is decided by it). A program whose
 * actions read a header (a TTL, a tag, a select group's hash) stands for its exact key.
 */
static void megaflow_mask(const struct xlate *x, struct flow_key *wc)
{
	if (x->reads_headers) {
		memset(wc, 0xff, sizeof(*wc));
		return;
	}
	*wc = x->wc;
	wc->in_port = UINT32_MAX;
}

/*
 * Runs the pipeline for the packet with key K, received on IN, into P. Only configuration
 * is read: nothing is counted or changed, so trace uses it as the data path does.
 */
static void translate(const struct flow *F, uint16_t in, const struct flow_key *k,
		      unsigned int worker, struct flow_prog *p, struct xlate_trace *tr,
		      struct flow_key *wc)
{
	const struct flow_tables *tables = __atomic_load_n(&F->tables, __ATOMIC_ACQUIRE);
	struct xlate x;

	/* Field by field: the action set (a kilobyte) need not be zeroed, only emptied. */
	x.F = F;
	x.in = in;
	x.k = *k;
	x.p = p;
	x.cur_start = x.cur_n = 0;
	x.n_set = 0;
	x.rule = NULL;
	x.table = 0;
	x.expired = x.no_live_bucket = x.reads_headers = false;
	x.depth = 0;
	x.tr = tr;
	memset(&x.wc, 0, sizeof(x.wc));
	unsigned int table = 0;

	p->n_rules = p->n_egress = p->n_mods = p->n_meters = p->n_groups = 0;
	p->cacheable = true;
	p->drop = STATS_DROP_ACTION_DROP;
	for (;;) {
		const struct cls_rule *c = cls_lookup(tables->t[table], &x.k, worker, &x.wc);
		struct flow_rule *r = (struct flow_rule *)(uintptr_t)c;
		const struct flow_insns *ins;

		x.table = (uint8_t)table;
		if (r == NULL) {
			tr_printf(&x, "table %u: no rule matches: table miss, the packet is dropped",
				  table);
			if (p->n_egress == 0)
				p->drop = STATS_DROP_NO_MATCH;
			break;
		}
		x.rule = r;
		note_rule(&x, r);
		trace_rule(&x, r);
		if (x.tr != NULL)
			x.tr->indent++;
		ins = __atomic_load_n(&r->insns, __ATOMIC_ACQUIRE);
		if (ins->meter != FLOW_NO_METER)
			note_meter(&x, ins->meter);
		do_actions(&x, ins->acts, ins->n_apply);
		if (ins->clear_actions)
			x.n_set = 0;
		write_action_set(&x, ins->acts + ins->n_apply, ins->n_write);
		if (ins->has_write_metadata)
			x.k.metadata = (x.k.metadata & ~ins->write_metadata_mask) |
				       (ins->write_metadata & ins->write_metadata_mask);
		if (x.tr != NULL)
			x.tr->indent--;
		if (x.expired || ins->goto_table == FLOW_NO_GOTO ||
		    ins->goto_table <= table || ins->goto_table >= FLOW_TABLES)
			break;
		table = ins->goto_table;
		tr_printf(&x, "goto_table:%u", table);
	}
	if (!x.expired)
		run_action_set(&x);
	if (p->n_egress == 0)
		p->drop = x.expired ? STATS_DROP_TTL_EXPIRED :
			  x.no_live_bucket ? STATS_DROP_GROUP_NO_LIVE_BUCKET : p->drop;
	p->header_free = !x.reads_headers && port_only(&x.wc);
	if (wc != NULL)
		megaflow_mask(&x, wc);
	p->simple = PROG_NOT_SIMPLE;
	if (p->n_meters == 0 && p->n_egress == 1 && p->eg[0].kind == EG_PORTS &&
	    p->eg[0].n_mods == 0 && __builtin_popcountll(p->eg[0].ports) == 1)
		p->simple = (uint16_t)__builtin_ctzll(p->eg[0].ports);
}

/* ---- running programs ---- */

static bool meter_pass(struct flow_meter *m, struct flow_worker *w, unsigned int wid,
		       const struct rte_mbuf *pkt)
{
	uint32_t len = m->spec.flags & FLOW_METER_PKTPS ? 1 : pkt->pkt_len;
	enum rte_color c = rte_meter_srtcm_color_blind_check(&m->w[wid].rt, &m->profile, w->tsc,
							      len);

	stats_add(&m->w[wid].packets, 1);
	stats_add(&m->w[wid].bytes, pkt->pkt_len);
	if (c == RTE_COLOR_GREEN)
		return true;
	stats_add(&m->w[wid].dropped_packets, 1);
	stats_add(&m->w[wid].dropped_bytes, pkt->pkt_len);
	return false;
}

/* Applies the header changes of E to M, which nobody else references. */
static void apply_mods(const struct flow_prog *p, const struct flow_egress *e,
		       struct rte_mbuf *m)
{
	unsigned int i;

	for (i = 0; i < e->n_mods; i++) {
		const struct flow_modop *op = &p->mods[e->mod_start + i];
		uint8_t *data = rte_pktmbuf_mtod(m, uint8_t *);
		uint32_t len = rte_pktmbuf_data_len(m);

		switch (op->type) {
		case FLOW_ACT_SET_FIELD:
			flow_mod_set_field(data, len, (enum flow_field)op->field, op->value);
			break;
		case FLOW_ACT_DEC_TTL:
			flow_mod_dec_ttl(data, len);
			break;
		case FLOW_ACT_PUSH_VLAN:
			if (rte_pktmbuf_headroom(m) >= 4 &&
			    flow_mod_push_vlan(&data, &len, op->tpid) == 0) {
				m->data_off = (uint16_t)(m->data_off - 4);
				m->data_len = (uint16_t)(m->data_len + 4);
				m->pkt_len += 4;
			}
			break;
		case FLOW_ACT_POP_VLAN:
			if (flow_mod_pop_vlan(&data, &len) == 0) {
				m->data_off = (uint16_t)(m->data_off + 4);
				m->data_len = (uint16_t)(m->data_len - 4);
				m->pkt_len -= 4;
			}
			break;
		default:
			break;
		}
	}
}

/*
 * Hands the worker another frame M for the ports of SET (fwd.h, extra[]). The worker stages
 * at most FWD_MAX_BURST frames per output, its received ones included, so a burst of N may
 * have FWD_MAX_BURST - N extra frames (w->extra_max): one more is freed and counted as a
 * copy that failed, where it would have overrun the worker's arrays. Several differently
 * changed outputs per frame in a large burst (--burst) reach the bound.
 */
static void add_extra(struct flow_worker *w, struct fwd_burst *fb, struct rte_mbuf *m,
		      uint64_t set)
{
	if (unlikely(fb->n_extra >= w->extra_max)) {
		rte_pktmbuf_free(m);
		stats_add(&w->copy_failed, 1);
		return;
	}
	fb->extra[fb->n_extra].m = m;
	fb->extra[fb->n_extra++].set = set;
}

/* Adds a reference to every segment of M (a frame sent more than once, unchanged). */
static struct rte_mbuf *share(struct rte_mbuf *m)
{
	struct rte_mbuf *s;

	for (s = m; s != NULL; s = s->next)
		rte_mbuf_refcnt_update(s, 1);
	return m;
}

/* Queues M for the control side; false when the queue is full (M is then still the
 * caller's: a carrier is freed by the worker as a drop, a copy by send_copy). */
static bool queue_pin(struct flow_worker *w, const struct flow_egress *e, uint16_t in,
		      struct rte_mbuf *m)
{
	struct pin_elem pe = { .m = m, .cookie = e->cookie, .in_port = in, .reason = e->reason,
			       .table = e->table, .max_len = e->max_len };

	if (rte_ring_sp_enqueue_elem(w->pins, &pe, sizeof(pe)) == 0)
		return true;
	stats_add(&w->pin_full, 1);
	return false;
}

/* The carrier (the received mbuf itself) leaves by E: its decision in FB. */
static void carry(struct flow_worker *w, const struct flow_egress *e, uint16_t in,
		  struct rte_mbuf *m, uint16_t i, struct fwd_burst *fb)
{
	uint64_t set = e->ports;

	switch (e->kind) {
	case EG_PORTS:
		if (__builtin_popcountll(set) == 1) {
			fb->out[i] = (uint16_t)__builtin_ctzll(set);
			return;
		}
		if (set & bit(in))      /* an in_port output among others: stage_flood skips it */
			add_extra(w, fb, share(m), bit(in));
		fb->out[i] = FWD_OUT_FLOOD;
		fb->flood[i] = set & ~bit(in);
		return;
	case EG_CONTROLLER:
		if (queue_pin(w, e, in, m)) {
			fb->out[i] = FWD_OUT_CONSUMED;
		} else {
			fb->out[i] = FWD_OUT_DROP;
			fb->drop[i] = STATS_DROP_CONTROLLER_QUEUE_FULL;
		}
		return;
	default:
		w->normal_pkts[w->n_normal] = m;
		w->normal_idx[w->n_normal] = i;
		w->normal_carrier[w->n_normal++] = true;
		fb->out[i] = FWD_OUT_DROP;      /* until the bridge decides */
		fb->drop[i] = STATS_DROP_ACTION_DROP;
		return;
	}
}

/* A copy (or shared reference) C of the frame leaves by E. */
static void send_copy(struct flow_worker *w, const struct flow_egress *e, uint16_t in,
		      struct rte_mbuf *c, uint16_t i, struct fwd_burst *fb)
{
	switch (e->kind) {
	case EG_PORTS:
		add_extra(w, fb, c, e->ports);
		return;
	case EG_CONTROLLER:
		if (!queue_pin(w, e, in, c))
			rte_pktmbuf_free(c);
		return;
	default:
		w->normal_pkts[w->n_normal] = c;
		w->normal_idx[w->n_normal] = i;
		w->normal_carrier[w->n_normal++] = false;
		return;
	}
}

/* The egress that gets the received mbuf itself: one to ports without changes if there
 * is one, else one to the controller without changes, else the last. */
static unsigned int pick_carrier(const struct flow_prog *p)
{
	unsigned int j, fallback = p->n_egress - 1;

	for (j = 0; j < p->n_egress; j++) {
		if (p->eg[j].n_mods != 0)
			continue;
		if (p->eg[j].kind == EG_PORTS)
			return j;
		if (p->eg[j].kind == EG_CONTROLLER && p->eg[fallback].kind != EG_CONTROLLER)
			fallback = j;
	}
	return fallback;
}

/*
 * The general case: several egresses, header changes, the controller or the bridge. The
 * received mbuf goes to one egress (pick_carrier); every other egress gets a shared
 * reference when neither it nor the carrier changes the frame, else a copy made before
 * anything is changed. The bridge (`normal`) may retag a frame in place, so it counts as
 * changing it.
 */
static void run_general(struct flow_worker *w, const struct flow_prog *p, uint16_t in,
			struct rte_mbuf *m, uint16_t i, struct fwd_burst *fb)
{
	struct rte_mbuf *c[PROG_MAX_EGRESS];
	unsigned int j, carrier = pick_carrier(p);
	bool carrier_changes = p->eg[carrier].n_mods != 0 || p->eg[carrier].kind == EG_NORMAL;

	for (j = 0; j < p->n_egress; j++) {
		if (j == carrier)
			continue;
		if (p->eg[j].n_mods == 0 && p->eg[j].kind != EG_NORMAL && !carrier_changes) {
			c[j] = share(m);
			continue;
		}
		c[j] = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);
		if (c[j] == NULL)
			stats_add(&w->copy_failed, 1);
		else
			apply_mods(p, &p->eg[j], c[j]);
	}
	apply_mods(p, &p->eg[carrier], m);
	for (j = 0; j < p->n_egress; j++)
		if (j != carrier && c[j] != NULL)
			send_copy(w, &p->eg[j], in, c[j], i, fb);
	carry(w, &p->eg[carrier], in, m, i, fb);
}

static void count_prog(const struct flow_prog *p, unsigned int wid, uint64_t packets,
		       uint64_t bytes, uint64_t tsc)
{
	unsigned int j;

	for (j = 0; j < p->n_rules; j++) {
		struct flow_counts *c = &p->rules[j]->counts[wid];

		stats_add(&c->packets, packets);
		stats_add(&c->bytes, bytes);
		__atomic_store_n(&c->used_tsc, tsc, __ATOMIC_RELAXED);
	}
	for (j = 0; j < p->n_groups; j++) {
		stats_add(&p->groups[j]->counts[wid].packets, packets);
		stats_add(&p->groups[j]->counts[wid].bytes, bytes);
	}
}

/* Hands the frames `normal` took to the embedded bridge, and its decisions back to FB. */
static void run_normal(struct flow *F, struct flow_worker *w, uint16_t in,
		       struct fwd_burst *fb)
{
	struct fwd_burst *nfb = &w->nfb;
	uint16_t j;

	nfb->uniform = FWD_OUT_MIXED;
	nfb->n_extra = 0;
	fwd_learn_ops.process(F->learn, in, w->normal_pkts, w->n_normal, nfb);
	for (j = 0; j < w->n_normal; j++) {
		uint16_t o = nfb->uniform != FWD_OUT_MIXED ? nfb->uniform : nfb->out[j];
		uint16_t i = w->normal_idx[j];
		struct rte_mbuf *m = w->normal_pkts[j];
		uint64_t set = o < SW_MAX_PORTS ? bit(o) :
			       o == FWD_OUT_FLOOD ? nfb->flood[j] & ~bit(in) : 0;

		if (w->normal_carrier[j]) {
			fb->out[i] = o;
			fb->flood[i] = nfb->flood[j];
			fb->drop[i] = nfb->uniform != FWD_OUT_MIXED ? nfb->drop[0] : nfb->drop[j];
		} else if (set != 0) {
			add_extra(w, fb, m, set);
		} else {
			rte_pktmbuf_free(m);
		}
	}
	for (j = 0; j < nfb->n_extra; j++)
		add_extra(w, fb, nfb->extra[j].m, nfb->extra[j].set);
	w->n_normal = 0;
}

/* ---- the hot path ---- */

static inline struct emc_entry *emc_set(struct flow_worker *w, uint32_t hash)
{
	return &w->emc[(hash & (FLOW_EMC_ENTRIES / FLOW_EMC_WAYS - 1)) * FLOW_EMC_WAYS];
}

/* The cached program for KEY, or NULL. */
static inline const struct flow_prog *emc_lookup(struct flow_worker *w, uint32_t gen,
						 const struct flow_key *key, uint32_t hash)
{
	struct emc_entry *e = emc_set(w, hash);
	unsigned int k;

	for (k = 0; k < FLOW_EMC_WAYS; k++)
		if (e[k].hash == hash && e[k].gen == gen && flow_key_equal(&e[k].key, key))
			return &w->emc_prog[e - w->emc + k];
	return NULL;
}

/*
 * Whether a miss goes into the cache: always while its set has a free way; into a full set
 * one miss in FLOW_EMC_INSERT_EVERY, so that traffic of more flows than the cache holds
 * (every packet a miss) does not spend its time evicting entries that would be evicted
 * again before their next packet, while a flow that lasts still gets in (OVS inserts one
 * in a hundred for the same reason).
 */
static inline bool emc_should_insert(struct flow_worker *w, uint32_t gen, uint32_t hash)
{
	const struct emc_entry *e = emc_set(w, hash);
	unsigned int k;

	for (k = 0; k < FLOW_EMC_WAYS; k++)
		if (e[k].gen != gen)
			return true;
	return (++w->insert_tick & (FLOW_EMC_INSERT_EVERY - 1)) == 0;
}

/* The bytes of P that hold something: the arrays' used parts are what a copy needs. */
static inline size_t prog_size(const struct flow_prog *p)
{
	return offsetof(struct flow_prog, mods) + p->n_mods * sizeof(p->mods[0]);
}

/* A slot for KEY: an invalid way first, else the way the hash picks. */
static inline struct flow_prog *emc_claim(struct flow_worker *w, uint32_t gen,
					  const struct flow_key *key, uint32_t hash)
{
	struct emc_entry *e = emc_set(w, hash);
	unsigned int k = (hash >> 16) % FLOW_EMC_WAYS, j;

	for (j = 0; j < FLOW_EMC_WAYS; j++)
		if (e[j].gen != gen) {
			k = j;
			break;
		}
	e[k].hash = hash;
	e[k].gen = gen;
	e[k].key = *key;
	return &w->emc_prog[e - w->emc + k];
}

/*
 * How many of a frame's first bytes its key depends on, from the key extracted from it: the
 * Ethernet header and tag, the IP header with its options, and the L4 header's first bytes
 * (ports, TCP flags, ICMP type and code). A later frame whose first that many bytes are the
 * same has the same key. 0 when the frame is not one this reasoning covers (802.3 frames,
 * IPv6 with extension headers): it is always parsed.
 */
static uint32_t key_header_len(const struct flow_key *k, const uint8_t *data, uint32_t len)
{
	uint32_t l2 = k->vlan_tci != 0 ? 18u : 14u, l3, hl;
	uint16_t type;

	if (len < l2)
		return 0;
	memcpy(&type, data + l2 - 2, 2);
	if (type != k->dl_type)                 /* 802.3 with SNAP, or more tags */
		return 0;
	if (k->dl_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
		return l2 + 28;
	if (k->dl_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
		if (len < l2 + 20)
			return 0;
		l3 = RTE_MAX((uint32_t)(data[l2] & 0xf) * 4, 20u);
	} else if (k->dl_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6)) {
		if (len < l2 + 40 || data[l2 + 6] != k->nw_proto ||
		    (k->nw_proto != IPPROTO_TCP && k->nw_proto != IPPROTO_UDP &&
		     k->nw_proto != IPPROTO_SCTP && k->nw_proto != IPPROTO_ICMPV6))
			return 0;                       /* extension headers */
		l3 = 40;
	} else {
		return l2;
	}
	hl = l2 + l3;
	if (!(k->nw_frag & FLOW_FRAG_LATER))     /* a later fragment has no L4 header */
		hl += (k->nw_proto == IPPROTO_TCP ? 20u : k->nw_proto == IPPROTO_UDP ? 8u :
				k->nw_proto == IPPROTO_SCTP ? 12u :
				k->nw_proto == IPPROTO_ICMP || k->nw_proto == IPPROTO_ICMPV6 ? 4u : 0u);
	return hl <= FLOW_SAME_BYTES && hl <= len ? hl : 0;
}

/* Keeps the first bytes of the frame whose key was just extracted (as it came in: a
 * program may change the frame itself), for same_headers(). */
static inline void remember_headers(struct flow_worker *w, const struct flow_key *k,
				    const struct rte_mbuf *m)
{
	const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);

	w->last_hl = key_header_len(k, data, rte_pktmbuf_data_len(m));
	memcpy(w->last_hdr, data, w->last_hl);
}

/*
 * Whether the N bytes at A and B are equal, N from 8 to FLOW_SAME_BYTES: eight bytes at a
 * time, the last eight overlapping, with no branch per word (a call to memcmp costs as much
 * as the rest of a cached frame's work).
 */
static inline bool same_bytes(const uint8_t *a, const uint8_t *b, uint32_t n)
{
	uint64_t x, y, diff;
	uint32_t i;

	memcpy(&x, a + n - 8, 8);
	memcpy(&y, b + n - 8, 8);
	diff = x ^ y;
	for (i = 0; i + 8 < n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		diff |= x ^ y;
	}
	return diff == 0;
}

/* Whether M has the key of the frame remember_headers() kept. */
static inline bool same_headers(const struct flow_worker *w, const struct rte_mbuf *m)
{
	return w->last_hl != 0 && rte_pktmbuf_data_len(m) >= w->last_hl &&
	       same_bytes(rte_pktmbuf_mtod(m, const uint8_t *), w->last_hdr, w->last_hl);
}

/* Adds a run of packets of one program to its rules' and groups' counters. */
struct prog_run {
	const struct flow_prog *p;
	uint64_t packets, bytes;
};

static void flush_run(struct prog_run *run, unsigned int wid, uint64_t tsc)
{
	if (run->p != NULL)
		count_prog(run->p, wid, run->packets, run->bytes, tsc);
	run->p = NULL;
	run->packets = run->bytes = 0;
}

/*
 * The program for frame I (its key in w->key[I]): from the exact-match cache, else from
 * the megaflow cache, else made (and put in both). A program that may not be cached goes
 * to the worker's scratch. RUN is counted first: the slot (or the scratch) being written
 * may be the one it points to.
 */
static const struct flow_prog *find_program(struct flow *F, struct flow_worker *w,
					    unsigned int wid, uint16_t in, uint32_t gen,
					    uint16_t i, struct prog_run *run)
{
	uint32_t hash = rte_hash_crc(&w->key[i], sizeof(w->key[i]), 0);
	const struct flow_prog *cached = emc_lookup(w, gen, &w->key[i], hash), *made;
	struct flow_prog *p;

	if (likely(cached != NULL)) {
		stats_add(&w->emc_hits, 1);
		return cached;
	}
	stats_add(&w->emc_misses, 1);
	flush_run(run, wid, w->tsc);
	made = mf_lookup(w->mf, gen, &w->key[i]);
	if (made == NULL) {
		struct flow_key wc;

		translate(F, in, &w->key[i], wid, &w->scratch, NULL, &wc);
		if (!w->scratch.cacheable) {
			stats_add(&w->uncacheable, 1);
			return &w->scratch;
		}
		p = mf_insert(w->mf, gen, &w->key[i], &wc);
		if (p != NULL)
			memcpy(p, &w->scratch, prog_size(&w->scratch));
		made = &w->scratch;
	}
	if (!emc_should_insert(w, gen, hash))
		return made;
	p = emc_claim(w, gen, &w->key[i], hash);
	memcpy(p, made, prog_size(made));
	return p;
}

/* Pass 3 for one frame: what its program says, as the worker's decision in FB. */
static inline void run_program(struct flow_worker *w, unsigned int wid,
			       const struct flow_prog *p, uint16_t in, struct rte_mbuf *m,
			       uint16_t i, struct fwd_burst *fb)
{
	unsigned int j;

	if (likely(p->simple != PROG_NOT_SIMPLE)) {     /* a simple program has no meter */
		fb->out[i] = p->simple;
		return;
	}
	for (j = 0; j < p->n_meters; j++)
		if (!meter_pass(p->meters[j], w, wid, m)) {
			fb->out[i] = FWD_OUT_DROP;
			fb->drop[i] = STATS_DROP_METER;
			return;
		}
	if (p->n_egress == 0) {
		fb->out[i] = FWD_OUT_DROP;
		fb->drop[i] = p->drop;
	} else {
		run_general(w, p, in, m, i, fb);
	}
}

/*
 * A burst whose first frame's program depends on the input port alone (header_free: rules
 * on in_port only, as a VNF chain's steering is) has that program for every frame: the
 * other frames are not looked at. True when the burst was decided so.
 */
static bool decide_by_port(struct flow *F, struct flow_worker *w, unsigned int wid,
			   uint16_t in, uint32_t gen, struct rte_mbuf **pkts, uint16_t n,
			   struct fwd_burst *fb)
{
	struct prog_run run = { 0 };
	const struct flow_prog *p;
	uint64_t bytes = 0;
	uint16_t i;

	flow_key_extract(rte_pktmbuf_mtod(pkts[0], const uint8_t *),
			 rte_pktmbuf_data_len(pkts[0]), in, &w->key[0]);
	remember_headers(w, &w->key[0], pkts[0]);
	p = find_program(F, w, wid, in, gen, 0, &run);
	if (!p->header_free || p->simple == PROG_NOT_SIMPLE)
		return false;   /* the frame-by-frame loop finds it again in the cache */
	for (i = 0; i < n; i++)
		bytes += pkts[i]->pkt_len;
	count_prog(p, wid, n, bytes, w->tsc);
	fb->uniform = p->simple;
	return true;
}

/*
 * The passes run frame by frame here rather than pass by pass over the burst: a program
 * lives in a cache slot that a later frame's miss may take over, so each frame's program is
 * run before the next frame can evict it.
 */
static void flow_process(void *state, uint16_t in, struct rte_mbuf **pkts, uint16_t n,
			 struct fwd_burst *fb)
{
	struct flow *F = state;
	unsigned int wid = fb->worker;
	struct flow_worker *w = &F->w[wid];
	/* Read before any lookup (see the top of the file). */
	uint32_t gen = __atomic_load_n(&F->gen, __ATOMIC_ACQUIRE);
	struct prog_run run = { 0 };
	const struct flow_prog *p = NULL;
	uint16_t i, uniform;

	w->tsc = rte_rdtsc();
	w->extra_max = (uint16_t)(FWD_MAX_BURST - n);
	if (n > 0 && decide_by_port(F, w, wid, in, gen, pkts, n, fb))
		return;
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		/* A frame queues at most PROG_MAX_EGRESS frames for the bridge: room first. */
		if (unlikely(w->n_normal > FWD_MAX_BURST - PROG_MAX_EGRESS))
			run_normal(F, w, in, fb);

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		/* A frame with the headers of the one before it has its key and program. */
		if (i == 0 || !same_headers(w, m)) {
			flow_key_extract(rte_pktmbuf_mtod(m, const uint8_t *),
					 rte_pktmbuf_data_len(m), in, &w->key[i]);
			remember_headers(w, &w->key[i], m);
			p = find_program(F, w, wid, in, gen, i, &run);
		}
		if (p != run.p) {
			flush_run(&run, wid, w->tsc);
			run.p = p;
		}
		run.packets++;
		run.bytes += m->pkt_len;
		run_program(w, wid, p, in, m, i, fb);
	}
	flush_run(&run, wid, w->tsc);
	if (w->n_normal > 0)
		run_normal(F, w, in, fb);
	if (fb->n_extra > 0)
		return;
	uniform = fb->out[0];
	for (i = 1; i < n && fb->out[i] == uniform; i++)
		;
	if (i == n && uniform < SW_MAX_PORTS)
		fb->uniform = uniform;
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

static struct flow_tables *tables_new(struct flow *F)
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
static void tables_free(void *arg)
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

/* ---- the forwarding function's life ---- */

static void flow_destroy(void *state);

static void group_free(void *arg)
{
	struct flow_group *g = arg;

	free(g->spec);
	free(g);
}

static void *flow_create(const json_t *params, char *err, size_t err_len)
{
	unsigned int n = wk_count() > 0 ? wk_count() : 1, i;
	struct flow *F = rte_zmalloc("flow", sizeof(*F) + n * sizeof(struct flow_worker),
				     RTE_CACHE_LINE_SIZE);

	if (F == NULL) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	F->n_workers = n;
	F->name_id = __atomic_add_fetch(&flow_ids, 1, __ATOMIC_RELAXED);
	F->hz = rte_get_tsc_hz();
	F->last_second_tsc = rte_rdtsc();
	F->groups = calloc(1, sizeof(struct flow_index));
	F->meters = calloc(1, sizeof(struct flow_index));
	F->tables = tables_new(F);
	F->learn = fwd_learn_ops.create(params, err, err_len);
	if (F->groups == NULL || F->meters == NULL || F->tables == NULL || F->learn == NULL)
		goto fail;
	for (i = 0; i < n; i++) {
		struct flow_worker *w = &F->w[i];
		char name[RTE_RING_NAMESIZE];

		snprintf(name, sizeof(name), "flowpin%u_%u", F->name_id, i);
		w->pins = rte_ring_create_elem(name, sizeof(struct pin_elem), FLOW_PIN_RING,
					       SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		w->emc = rte_zmalloc("flow_emc", FLOW_EMC_ENTRIES * sizeof(*w->emc),
				     RTE_CACHE_LINE_SIZE);
		w->emc_prog = calloc(FLOW_EMC_ENTRIES, sizeof(*w->emc_prog));
		w->mf = mf_create(FLOW_MF_ENTRIES, sizeof(struct flow_prog));
		w->nfb.worker = (uint16_t)i;
		if (w->pins == NULL || w->emc == NULL || w->emc_prog == NULL || w->mf == NULL)
			goto fail;
		/* Generation 0 is the first: mark every entry as of another one. */
		for (unsigned int k = 0; k < FLOW_EMC_ENTRIES; k++)
			w->emc[k].gen = UINT32_MAX;
	}
	return F;
fail:
	if (err[0] == '\0')
		snprintf(err, err_len, "out of memory");
	flow_destroy(F);
	return NULL;
}

static void drain_pins(struct flow *F);

static void flow_destroy(void *state)
{
	struct flow *F = state;
	unsigned int i;

	if (F == NULL)
		return;
	for (i = 0; i < F->n_workers; i++) {
		struct flow_worker *w = &F->w[i];
		struct pin_elem pe;

		while (w->pins != NULL && rte_ring_sc_dequeue_elem(w->pins, &pe, sizeof(pe)) == 0)
			rte_pktmbuf_free(pe.m);
		rte_ring_free(w->pins);
		rte_free(w->emc);
		free(w->emc_prog);
		mf_destroy(w->mf);
	}
	if (F->tables != NULL)
		tables_free(F->tables);
	if (F->groups != NULL) {
		for (i = 0; i < F->groups->n; i++)
			group_free(F->groups->e[i].obj);
		free(F->groups);
	}
	if (F->meters != NULL) {
		for (i = 0; i < F->meters->n; i++)
			rte_free(F->meters->e[i].obj);
		free(F->meters);
	}
	for (i = 0; i < F->removed_count; i++)
		free(F->removed[(F->removed_head + i) % FLOW_REMOVED_KEEP].text);
	if (F->learn != NULL)
		fwd_learn_ops.destroy(F->learn);
	rte_free(F);
}

static void flow_port_added(void *state, uint16_t index)
{
	struct flow *F = state;

	fwd_learn_ops.port_added(F->learn, index);
	__atomic_store_n(&F->present, F->present | bit(index), __ATOMIC_RELAXED);
	bump_gen(F);
}

static void flow_port_removed(void *state, uint16_t index)
{
	struct flow *F = state;

	fwd_learn_ops.port_removed(F->learn, index);
	__atomic_store_n(&F->present, F->present & ~bit(index), __ATOMIC_RELAXED);
	__atomic_store_n(&F->live, F->live & ~bit(index), __ATOMIC_RELAXED);
	bump_gen(F);
}

static void flow_bind(void *state, struct port **ports)
{
	struct flow *F = state;

	F->ports = ports;
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

static void drain_pins(struct flow *F)
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
				 now - rule_totals(F, r).used_tsc >= r->idle_timeout * F->hz)
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

/* Fast-failover groups follow the links: a change of any makes programs stale. */
static void check_links(struct flow *F)
{
	uint64_t live = 0, present = F->present;
	unsigned int i;

	if (F->ports == NULL)
		return;
	for (i = 0; i < SW_MAX_PORTS; i++) {
		const struct port *p = __atomic_load_n(&F->ports[i], __ATOMIC_ACQUIRE);

		if ((present & bit(i)) && p != NULL && port_link_is_up(p))
			live |= bit(i);
	}
	if (live != F->live) {
		__atomic_store_n(&F->live, live, __ATOMIC_RELAXED);
		bump_gen(F);
	}
}

static bool flow_tick(void *state)
{
	struct flow *F = state;
	uint64_t now = rte_rdtsc();
	bool reclaim = fwd_learn_ops.tick(F->learn);

	drain_pins(F);
	check_links(F);
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

static void flow_reclaim(void *state)
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
		      "idle_age", (double)(now - t.used_tsc) / (double)F->hz,
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

static int meter_profile(const struct flow_meter_spec *s, struct rte_meter_srtcm_profile *p,
			 char *err, size_t err_len)
{
	/* A packets-per-second meter counts each packet as one byte (meter_pass). */
	bool pps = s->flags & FLOW_METER_PKTPS;
	uint64_t cir = pps ? s->rate : (uint64_t)s->rate * 1000 / 8;
	uint64_t burst = s->burst != 0 ? s->burst : RTE_MAX(s->rate / 10, 1u);
	struct rte_meter_srtcm_params params = {
		.cir = cir,
		.cbs = pps ? burst : burst * 1000 / 8,
		.ebs = 0,
	};

	if (s->rate == 0 || params.cbs == 0 || rte_meter_srtcm_profile_config(p, &params) != 0) {
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
	for (i = 0; i < F->n_workers; i++)
		rte_meter_srtcm_config(&m->w[i].rt, &m->profile);
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

/* ---- trace, packet-ins, describe ---- */

static const char *drop_name(uint8_t reason)
{
	return stats_drop_name((enum stats_drop)reason);
}

/*
 * The frame egress E would carry, as hex into HEX: the described packet built
 * (flow_key_compose) and E's header changes applied to it with the data path's functions,
 * so that trace shows the headers each output gets (what OVS's "Datapath actions" tell).
 */
static void trace_packet(const struct flow_prog *p, const struct flow_egress *e,
			 const struct flow_key *key, char *hex, size_t hex_len)
{
	uint8_t buf[64 + 192], *data = buf + 64;
	uint32_t len = flow_key_compose(key, data, sizeof(buf) - 64), i;

	for (i = 0; i < e->n_mods && len > 0; i++) {
		const struct flow_modop *op = &p->mods[e->mod_start + i];

		switch (op->type) {
		case FLOW_ACT_SET_FIELD:
			flow_mod_set_field(data, len, (enum flow_field)op->field, op->value);
			break;
		case FLOW_ACT_DEC_TTL:
			flow_mod_dec_ttl(data, len);
			break;
		case FLOW_ACT_PUSH_VLAN:
			if (data - buf >= 4)
				flow_mod_push_vlan(&data, &len, op->tpid);
			break;
		case FLOW_ACT_POP_VLAN:
			flow_mod_pop_vlan(&data, &len);
			break;
		default:
			break;
		}
	}
	hex[0] = '\0';
	for (i = 0; i < len && 2 * i + 2 < hex_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", data[i]);
}

json_t *fwd_flow_trace(void *state, const struct flow_key *key, const struct flow_namer *nm)
{
	struct flow *F = state;
	struct flow_prog *p = calloc(1, sizeof(*p));
	size_t len = 16384;
	char *buf = calloc(1, len);
	struct xlate_trace tr = { .buf = buf, .len = len, .namer = nm };
	json_t *outputs = json_array(), *egresses = json_array(), *o;
	unsigned int i;

	if (p == NULL || buf == NULL) {
		free(p);
		free(buf);
		json_decref(outputs);
		json_decref(egresses);
		return NULL;
	}
	translate(F, (uint16_t)key->in_port, key, CLS_NO_WORKER, p, &tr, NULL);
	for (i = 0; i < p->n_egress; i++) {
		const struct flow_egress *e = &p->eg[i];
		json_t *these = json_array();
		uint64_t set = e->ports;
		char hex[2 * 192 + 1];

		if (e->kind == EG_NORMAL)
			json_array_append_new(these, json_string("normal"));
		else if (e->kind == EG_CONTROLLER)
			json_array_append_new(these, json_string("controller"));
		while (e->kind == EG_PORTS && set != 0) {
			unsigned int port = (unsigned int)__builtin_ctzll(set);
			const char *name = nm ? nm->name(nm->ctx, port) : NULL;
			char num[16];

			set &= set - 1;
			snprintf(num, sizeof(num), "%u", FLOW_OFPORT(port));
			json_array_append_new(these, json_string(name ? name : num));
		}
		json_array_extend(outputs, these);
		trace_packet(p, e, key, hex, sizeof(hex));
		json_array_append_new(egresses, json_pack("{s:o, s:s}", "outputs", these,
							  "packet", hex));
	}
	if (p->n_egress == 0)
		tr_printf(&(struct xlate){ .tr = &tr }, "final: drop (%s)", drop_name(p->drop));
	else
		tr_printf(&(struct xlate){ .tr = &tr }, "final: %u output(s)%s", p->n_egress,
			  p->n_meters ? ", if the meter lets it through" : "");
	o = json_pack("{s:s, s:o, s:o, s:s?}", "text", buf, "outputs", outputs, "egress",
		      egresses, "drop", p->n_egress == 0 ? drop_name(p->drop) : NULL);
	free(buf);
	free(p);
	return o;
}

json_t *fwd_flow_packet_ins(void *state, unsigned int max)
{
	struct flow *F = state;
	json_t *a = json_array();

	drain_pins(F);
	while (F->pin_count > 0 && max-- > 0) {
		const struct pin_record *r = &F->pins[F->pin_head];
		char hex[FLOW_PIN_BYTES * 2 + 1], cookie[24];
		unsigned int i;

		for (i = 0; i < r->len; i++)
			sprintf(hex + 2 * i, "%02x", r->data[i]);
		hex[2 * r->len] = '\0';
		snprintf(cookie, sizeof(cookie), "0x%" PRIx64, r->cookie);
		json_array_append_new(a, json_pack("{s:i, s:s, s:i, s:s, s:i, s:s}", "in_port",
						   FLOW_OFPORT(r->in_port), "reason",
						   r->reason ? "action" : "no_match", "table",
						   r->table, "cookie", cookie, "total_len",
						   r->total_len, "data", hex));
		F->pin_head = (F->pin_head + 1) % FLOW_PIN_KEEP;
		F->pin_count--;
		F->pins_taken++;
	}
	return a;
}

json_t *fwd_flow_removed(void *state, unsigned int max)
{
	struct flow *F = state;
	json_t *a = json_array();

	while (F->removed_count > 0 && max-- > 0) {
		struct removed_record *r = &F->removed[F->removed_head];

		json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I, s:f}", "flow",
						   r->text != NULL ? r->text : "?", "reason",
						   r->reason, "packets", (json_int_t)r->packets,
						   "bytes", (json_int_t)r->bytes, "duration",
						   r->duration));
		free(r->text);
		r->text = NULL;
		F->removed_head = (F->removed_head + 1) % FLOW_REMOVED_KEEP;
		F->removed_count--;
	}
	return a;
}

static json_t *flow_describe(void *state, const char *const *port_names)
{
	struct flow *F = state;
	uint64_t pin_full = 0, copy_failed = 0, hits = 0, misses = 0, uncacheable = 0;
	struct mf_stats mf = { 0 };
	unsigned int i, rules = 0, subtables = 0;
	json_t *tables = json_array(), *o, *learn;

	for (i = 0; i < F->n_workers; i++) {
		struct mf_stats one;

		mf_read_stats(F->w[i].mf, &one);
		mf.hits += one.hits;
		mf.misses += one.misses;
		mf.inserts += one.inserts;
		mf.masks_full += one.masks_full;
		mf.masks = RTE_MAX(mf.masks, one.masks);
		pin_full += stats_read(&F->w[i].pin_full);
		copy_failed += stats_read(&F->w[i].copy_failed);
		hits += stats_read(&F->w[i].emc_hits);
		misses += stats_read(&F->w[i].emc_misses);
		uncacheable += stats_read(&F->w[i].uncacheable);
	}
	for (i = 0; i < FLOW_TABLES; i++) {
		unsigned int n = cls_count(F->tables->t[i]);

		rules += n;
		subtables += cls_subtables(F->tables->t[i]);
		if (n > 0)
			json_array_append_new(tables, json_pack("{s:i, s:i, s:i}", "table", i,
								"rules", n, "subtables",
								cls_subtables(F->tables->t[i])));
	}
	o = json_pack("{s:i, s:i, s:i, s:i, s:o, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}}",
		      "rules", rules, "subtables", subtables, "groups", F->groups->n, "meters",
		      F->meters->n, "tables", tables,
		      "cache", "hits", (json_int_t)hits, "misses", (json_int_t)misses,
		      "uncacheable", (json_int_t)uncacheable,
		      "controller_queue", "queued", (json_int_t)F->pin_count,
		      "taken", (json_int_t)F->pins_taken, "lost", (json_int_t)F->pins_lost,
		      "full", (json_int_t)pin_full);
	if (o != NULL) {
		json_object_set_new(o, "copy_failed", json_integer((json_int_t)copy_failed));
		json_object_set_new(o, "megaflows", json_pack(
			"{s:I, s:I, s:I, s:I, s:i}", "hits", (json_int_t)mf.hits,
			"misses", (json_int_t)mf.misses, "inserts", (json_int_t)mf.inserts,
			"masks_full", (json_int_t)mf.masks_full, "masks", (int)mf.masks));
	}
	learn = fwd_learn_ops.describe != NULL ? fwd_learn_ops.describe(F->learn, port_names) :
		NULL;
	if (o != NULL && learn != NULL)
		json_object_set_new(o, "normal", learn);
	return o;
}

void *fwd_flow_learn(void *state)
{
	return ((struct flow *)state)->learn;
}

/* The trace variant of the interface: the packet's key, walked. */
static void flow_trace(void *state, uint16_t in, struct rte_mbuf *pkt, struct fwd_trace *t)
{
	struct flow_key key;
	json_t *o;

	flow_key_extract(rte_pktmbuf_mtod(pkt, const uint8_t *), rte_pktmbuf_data_len(pkt), in,
			 &key);
	o = fwd_flow_trace(state, &key, NULL);
	snprintf(t->text, sizeof(t->text), "%s",
		 o != NULL ? json_string_value(json_object_get(o, "text")) : "out of memory");
	json_decref(o);
}

const struct fwd_ops fwd_flow_ops = {
	.mode = "flow",
	.create = flow_create,
	.destroy = flow_destroy,
	.port_added = flow_port_added,
	.port_removed = flow_port_removed,
	.bind = flow_bind,
	.process = flow_process,
	.trace = flow_trace,
	.describe = flow_describe,
	.tick = flow_tick,
	.reclaim = flow_reclaim,
};
