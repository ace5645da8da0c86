/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Translation (flow_switch.h): the pipeline run for one key, table by table, into a
 * program, with the bits of the key the answer depended on. Reads configuration only:
 * the data path and trace run the same code.
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

/* ---- translation: running the pipeline for a key ---- */

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
	/* An output the ports' OpenFlow config left out (port_no_fwd, port_down,
	 * port_no_packet_in): the drop reason if nothing else is sent. */
	uint8_t config_drop;
	unsigned int depth;
	struct xlate_trace *tr;
};

void flow_trace_printf(struct xlate_trace *t, const char *fmt, ...)
{
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

/* A line of X's explanation, when it is being traced. */
#define tr_printf(x, ...) flow_trace_printf((x)->tr, __VA_ARGS__)

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
			    e->n_mods == x->cur_n && e->meters_before == p->n_meters)
				return e;
		}
	if (p->n_egress == PROG_MAX_EGRESS) {
		tr_printf(x, "too many different outputs (%d): this one is left out (copy_failed)",
			  PROG_MAX_EGRESS);
		if (p->lost_egress < UINT8_MAX)
			p->lost_egress++;
		return NULL;
	}
	e = &p->eg[p->n_egress++];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->mod_start = x->cur_start;
	e->n_mods = x->cur_n;
	e->meters_before = p->n_meters;
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

/* PORTS less those whose OpenFlow config forbids sending (NO_FWD, PORT_DOWN; NO_FLOOD
 * too for a flood), noted as the drop reason should nothing be sent. */
static uint64_t config_allows(struct xlate *x, uint64_t ports, bool flood)
{
	uint64_t no_fwd = __atomic_load_n(&x->F->no_fwd, __ATOMIC_RELAXED);
	uint64_t down = __atomic_load_n(&x->F->down, __ATOMIC_RELAXED);
	uint64_t blocked = no_fwd | (flood ? __atomic_load_n(&x->F->no_flood, __ATOMIC_RELAXED) :
				     0);

	if (!(ports & blocked))
		return ports;
	tr_printf(x, "    %u port(s) left out: OpenFlow port config %s",
		  (unsigned int)__builtin_popcountll(ports & blocked),
		  flood ? "no_fwd, no_flood or down" : "no_fwd or down");
	x->config_drop = (ports & blocked & ~down) ? STATS_DROP_PORT_NO_FWD :
			 STATS_DROP_PORT_DOWN;
	return ports & ~blocked;
}

/* A table's table-miss entry (OpenFlow 1.3, 5.4): priority 0 and an empty match. Its
 * packet-ins have reason OFPR_NO_MATCH (0), every other rule's OFPR_ACTION (1). */
static bool is_table_miss(const struct flow_rule *r)
{
	static const struct flow_key none;

	return r != NULL && r->cls.priority == 0 && flow_key_equal(&r->cls.match.mask, &none);
}

static void do_output(struct xlate *x, const struct flow_action *a)
{
	uint64_t present = __atomic_load_n(&x->F->present, __ATOMIC_RELAXED);
	char nb[16];

	switch (a->port) {
	case FLOW_PORT_IN_PORT:
		tr_printf(x, "output to the input port %s", tr_port(x, x->in, nb, sizeof(nb)));
		output_ports(x, config_allows(x, bit(x->in), false));
		return;
	case FLOW_PORT_FLOOD:
	case FLOW_PORT_ALL:
		tr_printf(x, "%s: every port but the input", a->port == FLOW_PORT_ALL ? "all" :
			  "flood");
		output_ports(x, config_allows(x, present & ~bit(x->in),
					      a->port == FLOW_PORT_FLOOD));
		return;
	case FLOW_PORT_NORMAL:
		tr_printf(x, "normal: the learning bridge decides when the packet runs");
		if (egress(x, EG_NORMAL) == NULL)
			return;
		return;
	case FLOW_PORT_CONTROLLER:
		if (__atomic_load_n(&x->F->no_pin, __ATOMIC_RELAXED) & bit(x->in)) {
			tr_printf(x, "controller: the input port is no_packet_in, nothing sent");
			x->config_drop = STATS_DROP_PORT_NO_PACKET_IN;
			return;
		}
		tr_printf(x, "controller: queued for the control side (max_len %u)", a->arg);
		output_controller(x, is_table_miss(x->rule) ? 0 : 1,
				  (uint16_t)RTE_MIN(a->arg, (uint32_t)UINT16_MAX));
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
	output_ports(x, config_allows(x, bit(a->port), false));
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
void flow_translate(const struct flow *F, uint16_t in, const struct flow_key *k,
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
	x.config_drop = 0;
	x.depth = 0;
	x.tr = tr;
	memset(&x.wc, 0, sizeof(x.wc));
	unsigned int table = 0;

	p->n_rules = p->n_egress = p->n_mods = p->n_meters = p->n_groups = p->lost_egress = 0;
	p->cacheable = true;
	p->miss = NULL;
	p->drop = STATS_DROP_ACTION_DROP;
	if (__atomic_load_n(&F->no_recv, __ATOMIC_RELAXED) & bit(in)) {
		/* The port's OpenFlow config: what it receives goes nowhere (per input port,
		 * so the caches hold it and the data path pays nothing for it). */
		bool down = __atomic_load_n(&F->down, __ATOMIC_RELAXED) & bit(in);

		tr_printf(&x, "the input port is %s (OpenFlow port config): dropped",
			  down ? "down" : "no_recv");
		p->drop = down ? STATS_DROP_PORT_DOWN : STATS_DROP_PORT_NO_RECV;
		p->header_free = true;
		if (wc != NULL)
			megaflow_mask(&x, wc);
		p->simple = PROG_NOT_SIMPLE;
		return;
	}
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
			p->miss = (uint64_t *)&F->table_miss[0][table];
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
			  x.no_live_bucket ? STATS_DROP_GROUP_NO_LIVE_BUCKET :
			  x.config_drop != 0 ? x.config_drop : p->drop;
	p->header_free = !x.reads_headers && port_only(&x.wc);
	if (wc != NULL)
		megaflow_mask(&x, wc);
	p->simple = PROG_NOT_SIMPLE;
	if (p->n_meters == 0 && p->lost_egress == 0 && p->n_egress == 1 &&
	    p->eg[0].kind == EG_PORTS && p->eg[0].n_mods == 0 && __builtin_popcountll(p->eg[0].ports) == 1)
		p->simple = (uint16_t)__builtin_ctzll(p->eg[0].ports);
}

