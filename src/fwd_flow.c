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
 *      A miss looks in the worker's megaflow cache (flow_cache.h: masked keys, one entry
 *      for many flows), and a miss there runs the pipeline (flow_translate()), which also
 *      says which key bits the result depends on: the new megaflow's mask. The pipeline:
 *      table 0's classifier, the rule's instructions, goto_table, ... the action set. The
 *      program goes into both caches;
 *   3. each program is run on its frame: meters, header changes, outputs as the worker's
 *      out/flood/extra decisions (fwd.h). A program that is one output to one port, the
 *      common case, costs a store.
 * Consecutive frames with the same headers (up to the L4 ports) reuse the previous frame's
 * program without parsing, across bursts too (most bursts are runs of one flow).
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
 * The parts: this file is the forwarding function (the hot path, the caches' use, the
 * switch's life, trace); flow_xlate.c translates (runs the pipeline for a key into a
 * program); flow_rules.c keeps rules, groups and meters (changes, timeouts, dumps);
 * flow_cache.c is the megaflow cache; classifier.c each table's tuple-space search; their
 * shared objects are in flow_switch.h.
 *
 * Counting (stats.h): a frame that leaves by at least one output, or reaches the control
 * side's queue, is forwarded; one that leaves by none is dropped with the reason that
 * stopped it: no_match (a table miss), action_drop (the rule said so, or said nothing),
 * meter, ttl_expired, group_no_live_bucket, controller_queue_full.
 */
#include "flow_switch.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

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

static unsigned int flow_ids;

/* ---- running programs ---- */

/* This worker's share of a meter's rate (flow_switch.h), read without a lock. */
static inline void meter_share(const struct flow_meter_worker *mw,
			       struct rte_meter_srtcm_profile *out)
{
	uint32_t seq;

	do {
		seq = __atomic_load_n(&mw->seq, __ATOMIC_ACQUIRE);
		out->cbs = __atomic_load_n(&mw->share.cbs, __ATOMIC_RELAXED);
		out->ebs = __atomic_load_n(&mw->share.ebs, __ATOMIC_RELAXED);
		out->cir_period = __atomic_load_n(&mw->share.cir_period, __ATOMIC_RELAXED);
		out->cir_bytes_per_period = __atomic_load_n(&mw->share.cir_bytes_per_period,
							    __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1) != 0 || seq != __atomic_load_n(&mw->seq, __ATOMIC_RELAXED));
}

static bool meter_pass(struct flow_meter *m, struct flow_worker *w, unsigned int wid,
		       const struct rte_mbuf *pkt)
{
	uint32_t len = m->spec.flags & FLOW_METER_PKTPS ? 1 : pkt->pkt_len;
	struct rte_meter_srtcm_profile share;
	enum rte_color c;

	meter_share(&m->w[wid], &share);
	c = rte_meter_srtcm_color_blind_check(&m->w[wid].rt, &share, w->tsc, len);
	stats_add(&m->w[wid].packets, 1);
	stats_add(&m->w[wid].bytes, pkt->pkt_len);
	if (c == RTE_COLOR_GREEN)
		return true;
	stats_add(&m->w[wid].dropped_packets, 1);
	stats_add(&m->w[wid].dropped_bytes, pkt->pkt_len);
	return false;
}

/* set_field:ID->tun_id: not in the frame's bytes, but in its mbuf, for a vni=flow port
 * (port_vxlan.h). VALUE is the key's tun_id, host order. */
static void set_tun_id(struct rte_mbuf *m, const uint8_t *value)
{
	uint64_t id;

	memcpy(&id, value, sizeof(id));
	vxl_set_tun_id(m, id);
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
			if (unlikely(op->field == FLOW_FIELD_TUN_ID))
				set_tun_id(m, op->value);
			else
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

/* The control thread's wake-up for packet-ins (fwd_flow_wake_fd); -1 until it is made. */
static int pin_wake_fd = -1;

int fwd_flow_wake_fd(void)
{
	if (pin_wake_fd < 0)
		__atomic_store_n(&pin_wake_fd, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC),
				 __ATOMIC_RELAXED);
	return pin_wake_fd;
}

/*
 * Tells the control thread that W queued packet-ins (once a burst, at its end), unless it
 * was told since it last took them: one write() per take at most. The fence orders the
 * enqueue before the flag's load, as fwd_flow_packet_ins orders its clearing of the flag
 * before its dequeue: of a packet-in queued as the flag is cleared, either the worker sees
 * the flag clear (and writes) or the control thread sees the packet-in (and takes it).
 */
static void pin_wake(struct flow_worker *w)
{
	static const uint64_t one = 1;
	ssize_t wrote;
	int fd;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->pin_told, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&w->pin_told, true, __ATOMIC_RELAXED);
	fd = __atomic_load_n(&pin_wake_fd, __ATOMIC_RELAXED);
	if (fd < 0)
		return;
	/* A failed write (a counter at its limit, which cannot be while the control thread
	 * reads it) would leave the packet-in to the housekeeping tick: late, never lost. */
	wrote = write(fd, &one, sizeof(one));
	(void)wrote;
}

/* Queues M for the control side; false when the queue is full (M is then still the
 * caller's: a carrier is freed by the worker as a drop, a copy by send_copy). */
static bool queue_pin(struct flow_worker *w, const struct flow_egress *e, uint16_t in,
		      struct rte_mbuf *m)
{
	struct pin_elem pe = { .m = m, .cookie = e->cookie, .in_port = in, .reason = e->reason,
			       .table = e->table, .max_len = e->max_len };

	if (rte_ring_sp_enqueue_elem(w->pins, &pe, sizeof(pe)) == 0) {
		w->pin_queued = true;
		return true;
	}
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
static unsigned int pick_carrier(const struct flow_prog *p, unsigned int n_eg)
{
	unsigned int j, fallback = n_eg - 1;

	for (j = 0; j < n_eg; j++) {
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
static void run_general(struct flow_worker *w, const struct flow_prog *p, unsigned int n_eg,
			uint16_t in, struct rte_mbuf *m, uint16_t i, struct fwd_burst *fb)
{
	struct rte_mbuf *c[PROG_MAX_EGRESS];
	unsigned int j, carrier = pick_carrier(p, n_eg);
	bool carrier_changes = p->eg[carrier].n_mods != 0 || p->eg[carrier].kind == EG_NORMAL;

	for (j = 0; j < n_eg; j++) {
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
	for (j = 0; j < n_eg; j++)
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
	if (unlikely(p->miss != NULL))          /* F->table_miss[wid][table] */
		stats_add(p->miss + (size_t)wid * FLOW_TABLES, packets);
}

/* Hands the frames `normal` took to the embedded bridge, and its decisions back to FB. */
static void run_normal(struct flow *F, struct flow_worker *w, uint16_t in,
		       struct fwd_burst *fb)
{
	struct fwd_burst *nfb = &w->nfb;
	uint16_t j;

	nfb->uniform = FWD_OUT_MIXED;
	nfb->n_extra = 0;
	nfb->tsc = w->tsc;
	nfb->bytes = 0;
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

/* Hashes key I of the burst and asks for the exact-match set it falls in, for a lookup a
 * few frames later. */
static inline void hash_and_prefetch(struct flow_worker *w, uint16_t i)
{
	const uint8_t *set;
	size_t off;

	w->hash[i] = rte_hash_crc(&w->key[i], sizeof(w->key[i]), 0);
	set = (const uint8_t *)emc_set(w, w->hash[i]);
	for (off = 0; off < FLOW_EMC_WAYS * sizeof(struct emc_entry); off += RTE_CACHE_LINE_SIZE)
		rte_prefetch0(set + off);
}

/* The cached program for KEY, or NULL. */
static inline const struct flow_prog *emc_lookup(struct flow_worker *w, uint32_t gen,
						 const struct flow_key *key, uint32_t hash)
{
	struct emc_entry *e = emc_set(w, hash);
	unsigned int k;

	for (k = 0; k < FLOW_EMC_WAYS; k++)
		if (e[k].hash == hash && e[k].gen == gen && flow_key_equal(&e[k].key, key))
			return e[k].prog->version == e[k].version ? e[k].prog : NULL;
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

/*
 * Whether to look in the exact-match cache for this frame. Its 1 MB does not fit in a
 * core's L2 cache (512 KB per core here), so a lookup costs a fetch from L3 or memory, hit
 * or miss; a megaflow lookup with one mask (in_port steering, a default-allow ACL ruled
 * out on one field) hashes two or three key words in a set the CPU keeps cached, which is
 * cheaper than the exact-match cache's whole-key hash even on a hit. So the exact-match
 * cache is looked in only while the megaflows have more than one mask, and only while it
 * pays: when fewer than half of the last FLOW_EMC_WINDOW lookups hit (traffic of many more
 * flows than it holds; at 100,000 flows it hit 6 % of the time, and its probes cost more
 * than all megaflow lookups), only one frame in FLOW_EMC_SKIPPED_LOOKS looks (and may
 * insert), which is how the cache notices when the flows become few again.
 */
#define FLOW_EMC_WINDOW 1024
#define FLOW_EMC_SKIPPED_LOOKS 64      /* a power of two */

static inline bool emc_worth_it(struct flow_worker *w, uint32_t gen)
{
	if (mf_mask_count(w->mf, gen) <= 1)
		return false;
	return !w->emc_skipped || (++w->emc_skip_tick & (FLOW_EMC_SKIPPED_LOOKS - 1)) == 0;
}

static inline void emc_note(struct flow_worker *w, bool hit)
{
	w->emc_window_hits += hit;
	if (++w->emc_window < FLOW_EMC_WINDOW)
		return;
	w->emc_skipped = w->emc_window_hits < FLOW_EMC_WINDOW / 2;
	w->emc_window = w->emc_window_hits = 0;
}

/* The bytes of P that hold something: the arrays' used parts are what a copy needs. */
static inline size_t prog_size(const struct flow_prog *p)
{
	return offsetof(struct flow_prog, mods) + p->n_mods * sizeof(p->mods[0]);
}

/* Copies program P into SLOT, with a version no program written before had. */
static inline void write_prog(struct flow_worker *w, struct flow_prog *slot,
			      const struct flow_prog *p)
{
	memcpy(slot, p, prog_size(p));
	slot->version = ++w->prog_version;
}

/*
 * An entry for KEY (an invalid way first, else the way the hash picks) pointing at P, which
 * is a megaflow's program, or the worker's scratch: then it is copied into the entry's own
 * slot. Returns the program the entry points at.
 */
static inline const struct flow_prog *emc_claim(struct flow_worker *w, uint32_t gen,
						const struct flow_key *key, uint32_t hash,
						const struct flow_prog *p)
{
	struct emc_entry *e = emc_set(w, hash);
	unsigned int k = (hash >> 16) % FLOW_EMC_WAYS, j;

	for (j = 0; j < FLOW_EMC_WAYS; j++)
		if (e[j].gen != gen) {
			k = j;
			break;
		}
	if (p == &w->scratch) {
		struct flow_prog *own = &w->emc_prog[e - w->emc + k];

		write_prog(w, own, p);
		p = own;
	}
	e[k].hash = hash;
	e[k].gen = gen;
	e[k].version = p->version;
	e[k].prog = p;
	e[k].key = *key;
	return p;
}

/* The first bytes of an L4 header the key takes, by IP protocol: one load in place of a
 * chain of comparisons, which showed in the keyed one-copy path's profile. */
static const uint8_t l4_key_bytes[256] = {
	[IPPROTO_TCP] = 20, [IPPROTO_UDP] = 8, [IPPROTO_SCTP] = 12, [IPPROTO_ICMP] = 4,
	[IPPROTO_ICMPV6] = 4,
};

/*
 * How many of a frame's first bytes its key depends on, from the key extracted from it: the
 * Ethernet header and tag, the IP header with its options, and the L4 header's first bytes
 * (ports, TCP flags, ICMP type and code). A later frame whose first that many bytes are the
 * same has the same key. 0 when the frame is not one this reasoning covers (802.3 frames,
 * IPv6 with extension headers): it is always parsed.
 */
static inline uint32_t key_header_len(const struct flow_key *k, const uint8_t *data, uint32_t len)
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
		hl += l4_key_bytes[k->nw_proto];
	return hl <= FLOW_SAME_BYTES && hl <= len ? hl : 0;
}

/* Keeps the first bytes of the frame whose key was just extracted (as it came in: a
 * program may change the frame itself), for same_headers(). */
static inline void remember_bytes(struct flow_worker *w, const struct flow_key *k,
				  const uint8_t *data, uint32_t len)
{
	w->last_hl = key_header_len(k, data, len);
	memcpy(w->last_hdr, data, w->last_hl);
}

static inline void remember_headers(struct flow_worker *w, const struct flow_key *k,
				    const struct rte_mbuf *m)
{
	remember_bytes(w, k, rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m));
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

/*
 * Traffic of many flows interleaved (a frame's flow differs from the one before it) gains
 * nothing from comparing each frame with the one before and keeping its headers, which cost
 * about a twentieth of the worker's cycles at 100,000 flows: after a burst of at least
 * FLOW_ALIKE_MIN frames where no frame was like the one before, the next FLOW_ALIKE_SKIP
 * bursts skip both, then it is tried again. COMPARE: whether this burst compared; ALIKE:
 * how many of its N frames had the headers of the one before.
 */
#define FLOW_ALIKE_MIN 8
#define FLOW_ALIKE_SKIP 64

static inline void note_alike(struct flow_worker *w, bool compare, uint16_t n, uint16_t alike)
{
	if (!compare)
		w->alike_skip--;
	else if (alike == 0 && n >= FLOW_ALIKE_MIN)
		w->alike_skip = FLOW_ALIKE_SKIP;
}

/* Whether the LEN bytes at DATA start with those of the frame remember_bytes() kept. */
static inline bool same_as_kept(const struct flow_worker *w, const uint8_t *data, uint32_t len)
{
	return w->last_hl != 0 && len >= w->last_hl && same_bytes(data, w->last_hdr, w->last_hl);
}

/* Whether M has the key of the frame remember_headers() kept. */
static inline bool same_headers(const struct flow_worker *w, const struct rte_mbuf *m)
{
	return same_as_kept(w, rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m));
}

/* Notes that the frame remember_headers() kept last, received on IN with tunnel id TUN,
 * has program P under generation GEN (the worker's scratch is never reused). */
static inline void remember_program(struct flow_worker *w, const struct flow_prog *p,
				    uint16_t in, uint32_t gen, uint64_t tun)
{
	w->last_prog = p == &w->scratch ? NULL : p;
	w->last_prog_version = p->version;
	w->last_gen = gen;
	w->last_in = in;
	w->last_tun = tun;
}

/*
 * The program of the frame remember_headers() kept, when M (received on IN) has its key:
 * most bursts continue the flow the burst before ended with, and then the first frame is
 * neither parsed nor looked up. NULL when anything differs: the generation (rules
 * changed), the input port, the tunnel id, the headers, or the program's slot, which a
 * cache may have given to another key since (its version then changed).
 */
static inline const struct flow_prog *prev_program(const struct flow_worker *w, uint16_t in,
						   uint32_t gen, const struct rte_mbuf *m)
{
	const struct flow_prog *p = w->last_prog;

	if (p == NULL || w->last_gen != gen || w->last_in != in ||
	    p->version != w->last_prog_version || vxl_tun_id(m) != w->last_tun ||
	    !same_headers(w, m))
		return NULL;
	return p;
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
					    uint16_t i, bool hashed, struct prog_run *run)
{
	bool use_emc = emc_worth_it(w, gen);
	uint32_t hash = 0;
	const struct flow_prog *made;
	struct flow_prog *p;

	if (likely(use_emc)) {
		const struct flow_prog *cached;

		hash = hashed ? w->hash[i] : rte_hash_crc(&w->key[i], sizeof(w->key[i]), 0);
		cached = emc_lookup(w, gen, &w->key[i], hash);
		emc_note(w, cached != NULL);
		if (likely(cached != NULL)) {
			stats_add(&w->emc_hits, 1);
			return cached;
		}
	}
	stats_add(&w->emc_misses, 1);
	made = mf_lookup(w->mf, gen, &w->key[i]);
	if (made == NULL) {
		struct flow_key wc;

		/* Programs are written only from here on (a megaflow slot, an exact-match
		 * entry's own slot, the scratch): RUN's may be one of them. */
		flush_run(run, wid, w->tsc);
		flow_translate(F, in, &w->key[i], wid, &w->scratch, NULL, &wc);
		if (!w->scratch.cacheable) {
			stats_add(&w->uncacheable, 1);
			return &w->scratch;
		}
		p = mf_insert(w->mf, gen, &w->key[i], &wc);
		if (p != NULL)
			write_prog(w, p, &w->scratch);
		made = p != NULL ? p : &w->scratch;
	}
	if (!use_emc || !emc_should_insert(w, gen, hash))
		return made;
	return emc_claim(w, gen, &w->key[i], hash, made);
}

/* Pass 3 for one frame: what its program says, as the worker's decision in FB. */
static inline void run_program(struct flow_worker *w, unsigned int wid,
			       const struct flow_prog *p, uint16_t in, struct rte_mbuf *m,
			       uint16_t i, struct fwd_burst *fb)
{
	unsigned int j, n_eg = p->n_egress;

	if (likely(p->simple != PROG_NOT_SIMPLE)) {     /* a simple program has no meter */
		fb->out[i] = p->simple;
		return;
	}
	if (unlikely(p->lost_egress != 0))
		stats_add(&w->copy_failed, p->lost_egress);
	/* The first meter that drops the frame stops what came after it; the egresses made
	 * before it (in earlier tables) are a prefix of the program's. */
	for (j = 0; j < p->n_meters; j++)
		if (!meter_pass(p->meters[j], w, wid, m)) {
			while (n_eg > 0 && p->eg[n_eg - 1].meters_before > j)
				n_eg--;
			if (n_eg == 0) {
				fb->out[i] = FWD_OUT_DROP;
				fb->drop[i] = STATS_DROP_METER;
				return;
			}
			break;
		}
	if (n_eg == 0) {
		fb->out[i] = FWD_OUT_DROP;
		fb->drop[i] = p->drop;
	} else {
		run_general(w, p, n_eg, in, m, i, fb);
	}
}

/*
 * The program of every frame from IN when the pipeline looks at the input port alone
 * (header_free: rules on in_port only, as a VNF chain's steering is), made once per rule
 * generation and worker for a key that holds only IN: it is header_free only if no rule
 * consulted looked at more than the input port, so then it is every frame's program.
 */
static const struct flow_prog *port_program(struct flow *F, struct flow_worker *w,
					    unsigned int wid, uint16_t in, uint32_t gen)
{
	struct flow_prog *p = &w->port_prog[in];

	if (unlikely(w->port_prog_gen[in] != gen)) {
		struct flow_key k;

		memset(&k, 0, sizeof(k));
		k.in_port = in;
		flow_translate(F, in, &k, wid, p, NULL, NULL);
		w->port_prog_gen[in] = gen;
	}
	return p;
}

/*
 * The burst's bytes, for its rules' counters: the worker summed them already (it counts
 * them for the input); on small frames a second pass over the mbufs costs as much as the
 * rest of the decision.
 */
static inline uint64_t burst_bytes(const struct fwd_burst *fb, struct rte_mbuf **pkts,
				   uint16_t n)
{
	uint64_t bytes = fb->bytes;
	uint16_t i;

	if (bytes == 0)
		for (i = 0; i < n; i++)
			bytes += pkts[i]->pkt_len;
	return bytes;
}

/*
 * A burst from an input whose program depends on the input port alone and sends each
 * frame unchanged to one port is decided without reading a frame (port_program). Else, a
 * burst whose first frame's program is header_free has that program for every frame: the
 * other frames are not looked at. NULL when the burst was decided so; else the first
 * frame's program (its key is in w->key[0]), which the frame-by-frame loop starts with.
 */
static const struct flow_prog *decide_by_port(struct flow *F, struct flow_worker *w,
					      unsigned int wid, uint16_t in, uint32_t gen,
					      struct rte_mbuf **pkts, uint16_t n,
					      struct fwd_burst *fb)
{
	struct prog_run run = { 0 };
	const struct flow_prog *p = port_program(F, w, wid, in, gen);

	if (p->header_free && p->cacheable && p->simple != PROG_NOT_SIMPLE)
		goto uniform;
	p = w->alike_skip == 0 ? prev_program(w, in, gen, pkts[0]) : NULL;
	if (p == NULL) {
		flow_key_extract(rte_pktmbuf_mtod(pkts[0], const uint8_t *),
				 rte_pktmbuf_data_len(pkts[0]), in, &w->key[0]);
		w->key[0].tun_id = vxl_tun_id(pkts[0]);
		remember_headers(w, &w->key[0], pkts[0]);
		p = find_program(F, w, wid, in, gen, 0, false, &run);
		remember_program(w, p, in, gen, w->key[0].tun_id);
	}
	if (!p->header_free || p->simple == PROG_NOT_SIMPLE)
		return p;
uniform:
	count_prog(p, wid, n, burst_bytes(fb, pkts, n), w->tsc);
	fb->uniform = p->simple;
	return NULL;
}

/*
 * Whether frames 1..N-1 of the burst all have the headers and tunnel id of frame 0, which
 * remember_headers() kept (one flow's burst, as most of a VNF chain's are). Stops at the
 * first frame that differs.
 */
static bool burst_alike(const struct flow_worker *w, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t i;

	for (i = 1; i < n; i++)
		if (vxl_tun_id(pkts[i]) != w->last_tun || !same_headers(w, pkts[i]))
			return false;
	return true;
}

/*
 * Keys frames 1..N-1 ahead of the frame-by-frame loop, when it would key each of them
 * anyway (their headers are not compared: interleaved flows) and look each up in the
 * exact-match cache: every key extracted and hashed, and every set asked for at once. The
 * cache is far bigger than L1 (and than L2 on some CPUs), so a set is a fetch from further
 * out; issued together, a burst's fetches overlap instead of each frame waiting for its
 * own. Reading keys and sets changes nothing, so the loop's order of lookups and inserts
 * is kept.
 */
static void key_ahead(struct flow_worker *w, uint16_t in, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t i;

	for (i = 1; i < n; i++) {
		flow_key_extract(rte_pktmbuf_mtod(pkts[i], const uint8_t *),
				 rte_pktmbuf_data_len(pkts[i]), in, &w->key[i]);
		w->key[i].tun_id = vxl_tun_id(pkts[i]);
	}
	/* Hashed in a second pass: read back at once, a key's eight-byte words would wait
	 * for the narrower stores that wrote them (no store forwarding across them). */
	for (i = 1; i < n; i++)
		hash_and_prefetch(w, i);
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
	uint64_t last_tun = 0;
	uint16_t i, uniform, alike = 0;
	bool compare = w->alike_skip == 0, keyed = false;

	w->tsc = fb->tsc != 0 ? fb->tsc : rte_rdtsc();
	w->extra_max = (uint16_t)(FWD_MAX_BURST - n);
	if (n == 0 || (p = decide_by_port(F, w, wid, in, gen, pkts, n, fb)) == NULL)
		return;
	/* A burst of one flow whose program sends it unchanged to one port: counted once and
	 * sent whole, with no per-frame decision (w->last_hdr holds frame 0's headers now). */
	if (compare && p->simple != PROG_NOT_SIMPLE && burst_alike(w, pkts, n)) {
		count_prog(p, wid, n, burst_bytes(fb, pkts, n), w->tsc);
		note_alike(w, compare, n, (uint16_t)(n - 1));
		fb->uniform = p->simple;
		return;
	}
	last_tun = w->last_tun;
	if (!compare && n > 2 && !w->emc_skipped && mf_mask_count(w->mf, gen) > 1) {
		key_ahead(w, in, pkts, n);
		keyed = true;
	}
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		/* A frame queues at most PROG_MAX_EGRESS frames for the bridge: room first. */
		if (unlikely(w->n_normal > FWD_MAX_BURST - PROG_MAX_EGRESS))
			run_normal(F, w, in, fb);

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		/* The first frame's program is decide_by_port()'s; a frame with the headers
		 * (and tunnel id, from a vni=flow port) of the one before it has its key and
		 * program. */
		if (i > 0 && compare && vxl_tun_id(m) == last_tun && same_headers(w, m)) {
			alike++;
		} else if (i > 0) {
			if (!keyed)
				flow_key_extract(rte_pktmbuf_mtod(m, const uint8_t *),
						 rte_pktmbuf_data_len(m), in, &w->key[i]);
			w->key[i].tun_id = last_tun = vxl_tun_id(m);
			if (compare)
				remember_headers(w, &w->key[i], m);
			p = find_program(F, w, wid, in, gen, i, keyed, &run);
			if (compare)
				remember_program(w, p, in, gen, last_tun);
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
	note_alike(w, compare, n, alike);
	if (w->n_normal > 0)
		run_normal(F, w, in, fb);
	if (unlikely(w->pin_queued)) {
		w->pin_queued = false;
		pin_wake(w);
	}
	if (fb->n_extra > 0)
		return;
	uniform = fb->out[0];
	for (i = 1; i < n && fb->out[i] == uniform; i++)
		;
	if (i == n && uniform < SW_MAX_PORTS)
		fb->uniform = uniform;
}

/* ---- the one-copy path's question (fwd.h, fast_unicast) ---- */

/*
 * The program for the frame whose first LEN bytes are at DATA (in the sender's guest
 * memory), received on IN: NULL when the key's headers are not all inside those bytes (the
 * frame's first buffer holds less; 802.3 frames; IPv6 extension headers), or when the
 * program may not be cached. The frame becomes the one later frames are compared with.
 */
static const struct flow_prog *view_program(struct flow *F, struct flow_worker *w,
					    unsigned int wid, uint16_t in, uint32_t gen,
					    const uint8_t *data, uint32_t len, struct prog_run *run)
{
	const struct flow_prog *p;

	flow_key_extract(data, len, in, &w->key[0]);
	w->key[0].tun_id = 0;           /* a port with tunnels never takes this path */
	remember_bytes(w, &w->key[0], data, len);
	if (w->last_hl == 0)
		return NULL;
	p = find_program(F, w, wid, in, gen, 0, false, run);
	remember_program(w, p, in, gen, 0);
	return p == &w->scratch ? NULL : p;
}

/* The one-copy answer for frame I from IN whose program is P (NULL: none): its output,
 * with P noted for flow_fast_count, when P sends it unchanged to one other port of FAST. */
static inline bool fast_take(struct flow_worker *w, const struct flow_prog *p, uint16_t in,
			     uint64_t fast, uint16_t i, struct fwd_burst *fb)
{
	if (p != NULL && p->simple < SW_MAX_PORTS && p->simple != in &&
	    (fast & (UINT64_C(1) << p->simple)) != 0) {
		fb->out[i] = p->simple;
		w->fast_prog[i] = p;
		w->fast_version[i] = p->version;
		return true;
	}
	fb->out[i] = FWD_OUT_MIXED;
	return false;
}

/*
 * The programs of a keyed burst (fast_unicast_keyed) while the megaflows have at most one
 * mask, when find_program() would not look in the exact-match cache (emc_worth_it): the
 * megaflow cache is asked for the whole burst in one call, and only its misses go through
 * find_program(), in order, after the hits are decided (a miss's insert may take a hit's
 * slot: flow_fast_count notices by the version). Each frame counts one exact-match miss,
 * as find_program() counts it.
 */
static uint16_t fast_keyed_megaflows(struct flow *F, struct flow_worker *w, unsigned int wid,
				     uint16_t in, uint32_t gen, uint64_t fast, uint16_t n,
				     struct fwd_burst *fb)
{
	struct prog_run run = { 0 };    /* stays empty: nothing is counted here */
	unsigned int hits = mf_lookup_burst(w->mf, gen, w->key, w->viewable, n, w->mf_value);
	uint16_t i, taken = 0, missed = 0;

	stats_add(&w->emc_misses, hits);
	for (i = 0; i < n; i++) {
		if (w->mf_value[i] != NULL || !w->viewable[i])
			taken += fast_take(w, w->mf_value[i], in, fast, i, fb);
		else
			missed++;
	}
	for (i = 0; missed > 0 && i < n; i++) {
		const struct flow_prog *p;

		if (w->mf_value[i] != NULL || !w->viewable[i])
			continue;
		p = find_program(F, w, wid, in, gen, i, false, &run);
		taken += fast_take(w, p == &w->scratch ? NULL : p, in, fast, i, fb);
		missed--;
	}
	return taken;
}

/*
 * fast_unicast for a burst of interleaved flows (note_alike found no frame like the one
 * before lately): nothing is compared or kept, and the burst goes in passes, as flow_process
 * does with key_ahead(): every key is extracted, then either the megaflow cache is asked
 * for the whole burst (one mask: fast_keyed_megaflows) or every key is hashed and its
 * exact-match set asked for before each frame is looked up. A key is then read back long
 * after the narrow stores that wrote it (no store-forwarding stall), and the sets' fetches
 * overlap. Looking a frame up changes nothing another frame's key depends on, so the
 * answers are those frame-by-frame viewing gives.
 */
static uint16_t fast_unicast_keyed(struct flow *F, struct flow_worker *w, unsigned int wid,
				   uint16_t in, uint32_t gen, uint64_t fast,
				   const uint8_t *const *hdr, const uint16_t *hdr_len, uint16_t n,
				   struct fwd_burst *fb)
{
	struct prog_run run = { 0 };    /* stays empty: nothing is counted here */
	unsigned int masks = mf_mask_count(w->mf, gen);
	bool hashed = !w->emc_skipped && masks > 1;
	uint16_t i, taken = 0;

	for (i = 0; i < n; i++) {
		flow_key_extract(hdr[i], hdr_len[i], in, &w->key[i]);
		w->key[i].tun_id = 0;   /* a port with tunnels never takes this path */
		w->viewable[i] = key_header_len(&w->key[i], hdr[i], hdr_len[i]) != 0;
	}
	note_alike(w, false, n, 0);
	if (masks <= 1)
		return fast_keyed_megaflows(F, w, wid, in, gen, fast, n, fb);
	for (i = 0; hashed && i < n; i++)
		hash_and_prefetch(w, i);
	for (i = 0; i < n; i++) {
		const struct flow_prog *p = NULL;

		if (w->viewable[i]) {
			p = find_program(F, w, wid, in, gen, i, hashed, &run);
			if (p == &w->scratch)
				p = NULL;
		}
		taken += fast_take(w, p, in, fast, i, fb);
	}
	return taken;
}

/*
 * fwd.h, fast_unicast: the frames whose program sends them, unchanged, to one other port
 * of FAST (a simple program: no header change, no meter, one output). Frames of one key
 * get one answer, so no flow is split between the two paths. Nothing is counted here:
 * flow_fast_count counts the frames the worker really took. A frame with the headers of
 * the one before it has its program; a burst with no such frame makes the next bursts
 * skip the comparison (note_alike), as flow_process does.
 */
static uint16_t flow_fast_unicast(void *state, uint16_t in, uint64_t fast,
				  const uint8_t *const *hdr, const uint16_t *hdr_len, uint16_t n,
				  struct fwd_burst *fb)
{
	struct flow *F = state;
	unsigned int wid = fb->worker;
	struct flow_worker *w = &F->w[wid];
	uint32_t gen = __atomic_load_n(&F->gen, __ATOMIC_ACQUIRE);
	struct prog_run run = { 0 };    /* stays empty: nothing is counted here */
	const struct flow_prog *p = NULL;
	uint16_t i, taken = 0, alike = 0;

	w->tsc = fb->tsc != 0 ? fb->tsc : rte_rdtsc();
	w->fast_gen = gen;
	if (w->alike_skip != 0)
		return fast_unicast_keyed(F, w, wid, in, gen, fast, hdr, hdr_len, n, fb);
	for (i = 0; i < n; i++) {
		if (p != NULL && same_as_kept(w, hdr[i], hdr_len[i]))
			alike++;
		else
			p = view_program(F, w, wid, in, gen, hdr[i], hdr_len[i], &run);
		taken += fast_take(w, p, in, fast, i, fb);
	}
	if (w->alike_skip == 0)
		note_alike(w, true, n, alike);
	return taken;
}

/*
 * fwd.h, fast_count: the rules of the frames sent on the one-copy path. A frame's program
 * sits in a cache slot that a later frame's miss may have rewritten (its version tells):
 * then it is looked up again, from the same bytes, under the same generation.
 */
static void flow_fast_count(void *state, uint16_t in, const uint8_t *const *hdr,
			    const uint16_t *hdr_len, const uint32_t *len, uint16_t n,
			    struct fwd_burst *fb)
{
	struct flow *F = state;
	unsigned int wid = fb->worker;
	struct flow_worker *w = &F->w[wid];
	/* The run in locals, not a struct prog_run whose address escapes: the compiler then
	 * keeps it in registers, where a run in memory made each frame wait on the store of
	 * the frame before. */
	const struct flow_prog *rp = NULL;
	uint64_t packets = 0, bytes = 0;
	uint16_t i;

	for (i = 0; i < n; i++) {
		const struct flow_prog *p;

		if (fb->out[i] >= SW_MAX_PORTS)
			continue;
		p = w->fast_prog[i];
		if (unlikely(p->version != w->fast_version[i])) {
			struct prog_run none = { 0 };

			/* Counted before view_program() may write a program (RP's slot too). */
			if (rp != NULL)
				count_prog(rp, wid, packets, bytes, w->tsc);
			rp = NULL;
			p = view_program(F, w, wid, in, w->fast_gen, hdr[i], hdr_len[i], &none);
			if (p == NULL)          /* made again as uncacheable: the scratch */
				p = &w->scratch;
		}
		if (p != rp) {
			if (rp != NULL)
				count_prog(rp, wid, packets, bytes, w->tsc);
			rp = p;
			packets = bytes = 0;
		}
		packets++;
		bytes += len[i];
	}
	if (rp != NULL)
		count_prog(rp, wid, packets, bytes, w->tsc);
}

/*
 * The output of every frame from IN when the pipeline looks at the input port alone and
 * sends each frame, unchanged, to one other port, as a VNF chain's steering rules do
 * (`in_port=vm1,actions=output:vm2`): then a port path without mbufs (vhost_fast.h) may
 * move the burst without showing it to flow_process, and flow_fixed_count counts it on the
 * rules (port_program).
 */
static uint16_t flow_fixed_output(void *state, uint16_t in, uint16_t worker)
{
	struct flow *F = state;
	struct flow_worker *w = &F->w[worker];
	uint32_t gen = __atomic_load_n(&F->gen, __ATOMIC_ACQUIRE);
	const struct flow_prog *p = port_program(F, w, worker, in, gen);

	if (p->header_free && p->cacheable && p->simple != PROG_NOT_SIMPLE && p->simple != in)
		return p->simple;
	return FWD_OUT_MIXED;
}

/* What flow_fixed_output's answer moved, on the rules (and their idle timeouts). */
static void flow_fixed_count(void *state, uint16_t in, uint16_t worker, uint64_t packets,
			     uint64_t bytes, uint64_t tsc)
{
	struct flow *F = state;

	count_prog(&F->w[worker].port_prog[in], worker, packets, bytes, tsc);
}

/* ---- the forwarding function's life ---- */

static void flow_destroy(void *state);

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
		w->port_prog = calloc(SW_MAX_PORTS, sizeof(*w->port_prog));
		w->nfb.worker = (uint16_t)i;
		if (w->pins == NULL || w->emc == NULL || w->emc_prog == NULL || w->mf == NULL ||
		    w->port_prog == NULL)
			goto fail;
		for (unsigned int k = 0; k < SW_MAX_PORTS; k++)
			w->port_prog_gen[k] = UINT32_MAX;
		/* Generation 0 is the first: mark every entry as of another one. */
		for (unsigned int k = 0; k < FLOW_EMC_ENTRIES; k++) {
			w->emc[k].gen = UINT32_MAX;
			w->emc[k].prog = &w->emc_prog[k];   /* never NULL; its version differs */
			w->emc[k].version = UINT32_MAX;
		}
	}
	return F;
fail:
	if (err[0] == '\0')
		snprintf(err, err_len, "out of memory");
	flow_destroy(F);
	return NULL;
}


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
		free(w->port_prog);
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
	flow_check_ports(F);            /* the new port's config, none of an old one's */
	bump_gen(F);
}

static void flow_port_removed(void *state, uint16_t index)
{
	struct flow *F = state;

	fwd_learn_ops.port_removed(F->learn, index);
	__atomic_store_n(&F->present, F->present & ~bit(index), __ATOMIC_RELAXED);
	__atomic_store_n(&F->live, F->live & ~bit(index), __ATOMIC_RELAXED);
	flow_check_ports(F);
	bump_gen(F);
}

static void flow_bind(void *state, struct port **ports)
{
	struct flow *F = state;

	F->ports = ports;
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
	flow_translate(F, (uint16_t)key->in_port, key, CLS_NO_WORKER, p, &tr, NULL);
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
		flow_trace_printf(&tr, "final: drop (%s)", drop_name(p->drop));
	else
		flow_trace_printf(&tr, "final: %u output(s)%s", p->n_egress,
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
	unsigned int w;

	/* Workers may wake the control thread again (pin_wake), for what this take leaves:
	 * the flags are cleared before the queues are read, the fence keeps that order. */
	for (w = 0; w < F->n_workers; w++)
		__atomic_store_n(&F->w[w].pin_told, false, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
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

		char cookie[24];

		snprintf(cookie, sizeof(cookie), "0x%" PRIx64, r->cookie);
		json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I, s:f, s:s, s:i, s:i, s:b}",
						   "flow", r->text != NULL ? r->text : "?",
						   "reason", r->reason, "packets",
						   (json_int_t)r->packets, "bytes",
						   (json_int_t)r->bytes, "duration", r->duration,
						   "cookie", cookie, "idle_timeout",
						   r->idle_timeout, "hard_timeout",
						   r->hard_timeout, "send_flow_rem",
						   r->send_flow_rem));
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
		unsigned int n = cls_count(F->tables->t[i]), k;
		uint64_t missed = 0;

		for (k = 0; k < F->n_workers; k++)
			missed += stats_read(&F->table_miss[k][i]);
		rules += n;
		subtables += cls_subtables(F->tables->t[i]);
		if (n > 0 || missed > 0)
			json_array_append_new(tables, json_pack("{s:i, s:i, s:i, s:I}", "table", i,
								"rules", n, "subtables",
								cls_subtables(F->tables->t[i]),
								"missed", (json_int_t)missed));
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
	.fixed_output = flow_fixed_output,
	.fixed_count = flow_fixed_count,
	.fast_unicast = flow_fast_unicast,
	.fast_count = flow_fast_count,
	.trace = flow_trace,
	.describe = flow_describe,
	.tick = flow_tick,
	.reclaim = flow_reclaim,
};

