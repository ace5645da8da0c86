/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Learn: an Ethernet learning bridge with VLANs (IEEE 802.1Q), after VALE's batched
 * forwarding (netmap_vale.c) and VPP's l2-fwd/l2-learn nodes.
 *
 * A burst is handled in two passes. The first parses every frame, finds its VLAN, builds the
 * (MAC, VLAN) keys of source and destination and prefetches their table buckets; the second
 * looks them up, refreshes or requests learning of the source and decides the output: one
 * port, a flood over the VLAN's members, or a drop with its reason. Consecutive frames of the
 * same source or destination reuse the previous answer (the one-entry cache in front of the
 * table), so a burst of one flow costs one lookup of each. The worker then sends each output
 * its packets with one call (worker.c).
 *
 * Learning off the hot path. The table (fdb.h) has a single writer, the control thread.
 * Workers only read it and refresh ages in place; a new source, or a known one seen on
 * another port, becomes a request in the worker's own single-producer ring, which the
 * control thread drains every few milliseconds (learn_tick). Until then the frames of that
 * station are flooded, as for any unknown destination, so nothing waits and nothing locks.
 * Aging, static entries, limits and VLAN changes happen on the control thread too.
 *
 * VLANs. Each port is a trunk (the default: every VLAN, frames kept as they come, untagged
 * frames in VLAN 0) or an access port of one VLAN. member[v] is the set of ports in VLAN v
 * and tagged[v] those that send its frames tagged; a frame needs its tag pushed or popped
 * on an output exactly when the output's tagging differs from the frame's. A flood whose
 * outputs differ gets one copy of the frame for the outputs that need the change: a frame
 * shared by reference count is never changed.
 *
 * Filtering and storms. Frames to the reserved group addresses 01:80:C2:00:00:0x (STP, LACP,
 * LLDP, 802.1X: one link's protocols) are dropped as reserved_multicast unless the switch is
 * told to forward them (set-switch forward_reserved). A port with a storm limit (set-port
 * storm_pps) may flood that many frames a second, broadcast, multicast and unknown unicast
 * alike: the check sits on the flood branch only, so unicast to a known port never pays for
 * it, and the excess is dropped as storm (storm.h has the bucket).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "fdb.h"
#include "fwd.h"
#include "fwd_learn.h"
#include "l2parse.h"
#include "port.h"
#include "storm.h"
#include "worker.h"

#define LEARN_RING_SIZE 4096           /* learn requests per worker between two ticks */
#define LEARN_PREFETCH 4               /* packets ahead the first pass prefetches */
#define LEARN_STORM_WINDOW_DIV 10      /* storm bucket depth: a tenth of a second */
/* Destinations one burst of the one-copy path remembers its answer for (learn_fast_unicast) */
#define LEARN_FAST_KEYS 8

/* What the first pass found out about a frame. */
enum frame_class { FRAME_UNICAST, FRAME_GROUP, FRAME_DROP };

struct learn_req {
	uint64_t key;
	uint16_t port;
	uint16_t pad[3];
};

/* One worker's part of a switch: written by that worker only. */
struct learn_worker {
	struct rte_ring *ring;
	uint64_t queue_full;           /* learn requests the ring could not take */
	uint64_t copy_failed;          /* flood copies that could not be made (no mbuf) */
	uint64_t static_kept;          /* sources seen on another port than their static entry's */
	struct storm_bucket storm[SW_MAX_PORTS];  /* per input port: storm control */

	/* for one burst */
	bool forward_reserved;         /* the switch's setting, read once per burst */
	uint64_t tsc;                  /* the burst's time for storm control; 0: not read yet */

	/* scratch for one burst */
	uint64_t src_key[FWD_MAX_BURST], dst_key[FWD_MAX_BURST];
	uint32_t src_hash[FWD_MAX_BURST], dst_hash[FWD_MAX_BURST];
	uint16_t vlan[FWD_MAX_BURST];
	uint8_t class[FWD_MAX_BURST];  /* enum frame_class */
	uint8_t tagged[FWD_MAX_BURST]; /* the frame carries an 802.1Q tag */
	struct learn_req req[FWD_MAX_BURST];
	/* learn_fast_unicast(): the answer given to each destination in this burst */
	uint64_t fast_key[LEARN_FAST_KEYS];
	uint16_t fast_out[LEARN_FAST_KEYS];
	uint8_t fast_tagged[LEARN_FAST_KEYS];
} __rte_cache_aligned;

struct learn {
	struct fdb fdb;
	uint32_t now;                  /* seconds since creation; written by the control thread */
	uint32_t aging;                /* seconds; 0: never */
	uint16_t access_tag[SW_MAX_PORTS];   /* 0: trunk */
	uint64_t member[LEARN_VLANS];  /* ports in each VLAN */
	uint64_t tagged[LEARN_VLANS];  /* members that send the VLAN's frames tagged */
	bool forward_reserved;         /* relay 01:80:C2:00:00:0x frames (set-switch) */
	uint64_t storm_cost[SW_MAX_PORTS];   /* TSC cycles per flooded frame; 0: no limit */
	uint64_t storm_window;         /* the storm buckets' depth in cycles */

	/* control thread only */
	uint64_t present;              /* ports attached */
	uint32_t learn_limit[SW_MAX_PORTS];  /* dynamic entries a port may have; 0: no limit */
	uint32_t port_entries[SW_MAX_PORTS]; /* dynamic entries per port */
	uint32_t storm_pps[SW_MAX_PORTS];    /* as set; storm_cost is what workers read */
	uint64_t start_tsc;
	uint32_t last_sweep;
	unsigned int n_workers;
	struct {
		uint64_t learned, moved, aged, port_limit, table_full, static_kept;
	} counters;

	struct learn_worker lw[];
};

static uint64_t bit(uint16_t port)
{
	return UINT64_C(1) << port;
}

/* ---- the hot path ---- */

/* Frames the PMD handed over with their tag taken out get it back, so parsing sees it. */
static inline void restore_stripped_tag(struct rte_mbuf *m)
{
	if (unlikely((m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0)) {
		m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_VLAN);
		rte_vlan_insert(&m);
	}
}

/*
 * First pass for one frame: class, VLAN and keys (l2parse.h), or a drop reason in FB; the
 * table buckets the second pass will read are prefetched. ACCESS is the input port's access
 * VLAN (0: trunk).
 */
static inline void classify_bytes(const struct learn *L, struct learn_worker *w, uint16_t in,
				  uint16_t access, const uint8_t *data, uint32_t len, uint16_t i,
				  struct fwd_burst *fb)
{
	struct l2_frame f;
	int drop = l2_parse(data, len, in, access, L->member, w->forward_reserved, &f);

	if (unlikely(drop >= 0)) {
		w->class[i] = FRAME_DROP;
		fb->drop[i] = (uint8_t)drop;
		return;
	}
	w->vlan[i] = f.vlan;
	w->tagged[i] = f.tagged;
	w->src_key[i] = f.src_key;
	w->src_hash[i] = fdb_hash(f.src_key);
	rte_prefetch0(fdb_bucket_of(&L->fdb, w->src_hash[i]));
	if (f.dst_key == 0) {
		w->class[i] = FRAME_GROUP;
		return;
	}
	w->class[i] = FRAME_UNICAST;
	w->dst_key[i] = f.dst_key;
	w->dst_hash[i] = fdb_hash(f.dst_key);
	rte_prefetch0(fdb_bucket_of(&L->fdb, w->dst_hash[i]));
}

static inline void classify(const struct learn *L, struct learn_worker *w, uint16_t in,
			    uint16_t access, struct rte_mbuf *m, uint16_t i,
			    struct fwd_burst *fb)
{
	classify_bytes(L, w, in, access, rte_pktmbuf_mtod(m, const uint8_t *),
		       rte_pktmbuf_data_len(m), i, fb);
}

/*
 * Whether A and B start with the same 16 bytes: addresses, EtherType and any VLAN tag, all
 * that classify() reads. Frames of one flow come in runs, so most of a burst is classified
 * by copying the frame before, without parsing or hashing (VPP keeps the same kind of
 * one-entry cache in front of its tables).
 */
static inline bool same_header(const struct rte_mbuf *a, const struct rte_mbuf *b)
{
	uint64_t ha[2], hb[2];

	if (rte_pktmbuf_data_len(a) < RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN ||
	    rte_pktmbuf_data_len(b) < RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN)
		return false;
	memcpy(ha, rte_pktmbuf_mtod(a, const void *), sizeof(ha));
	memcpy(hb, rte_pktmbuf_mtod(b, const void *), sizeof(hb));
	return ((ha[0] ^ hb[0]) | (ha[1] ^ hb[1])) == 0;
}

/* Frame I is classified as frame I - 1 was. */
static inline void copy_class(struct learn_worker *w, uint16_t i, struct fwd_burst *fb)
{
	w->class[i] = w->class[i - 1];
	fb->drop[i] = fb->drop[i - 1];
	w->vlan[i] = w->vlan[i - 1];
	w->tagged[i] = w->tagged[i - 1];
	w->src_key[i] = w->src_key[i - 1];
	w->src_hash[i] = w->src_hash[i - 1];
	w->dst_key[i] = w->dst_key[i - 1];
	w->dst_hash[i] = w->dst_hash[i - 1];
}

/* Refreshes a known source; asks the learner to learn a new or moved one. */
static inline void learn_source(struct learn_worker *w, uint32_t now, uint16_t in, uint16_t i,
				const struct fdb *fdb, uint16_t *n_req)
{
	struct fdb_slot *s = fdb_lookup(fdb, w->src_key[i], w->src_hash[i]);
	uint32_t pf;

	if (likely(s != NULL)) {
		pf = fdb_slot_port_flags(s);
		if (likely((pf & FDB_PORT_MASK) == in)) {
			fdb_touch(s, now);
			return;
		}
		if ((pf & FDB_STATIC) != 0) {
			/* A static entry wins over what the wire says. */
			stats_add(&w->static_kept, 1);
			return;
		}
	}
	w->req[*n_req].key = w->src_key[i];
	w->req[*n_req].port = in;
	(*n_req)++;
}

/* Removes the 802.1Q tag of M in place. */
static inline int vlan_pop(struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);

	memmove((uint8_t *)eth + RTE_VLAN_HLEN, eth, 2 * RTE_ETHER_ADDR_LEN);
	return rte_pktmbuf_adj(m, RTE_VLAN_HLEN) == NULL ? -1 : 0;
}

/*
 * Puts an 802.1Q tag for VLAN V in M in place (priority 0): the addresses move 4 bytes to
 * the front, and the frame's own EtherType, which stays where it was, follows the tag.
 */
static inline int vlan_push(struct rte_mbuf *m, uint16_t v)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)rte_pktmbuf_prepend(m, RTE_VLAN_HLEN);

	if (eth == NULL)
		return -1;
	memmove(eth, (uint8_t *)eth + RTE_VLAN_HLEN, 2 * RTE_ETHER_ADDR_LEN);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
	((struct rte_vlan_hdr *)(eth + 1))->vlan_tci = rte_cpu_to_be_16(v);
	return 0;
}

/* Gives M the tagging the outputs of a different tagging need: pop if tagged, else push. */
static inline int retag(struct rte_mbuf *m, bool tagged, uint16_t v)
{
	return tagged ? vlan_pop(m) : vlan_push(m, v);
}

/*
 * Floods frame I of the burst over SET. Outputs whose tagging differs from the frame's get
 * a changed copy (or the frame itself, changed in place, when no output wants it as it is).
 */
static inline void flood(const struct learn *L, struct learn_worker *w, struct rte_mbuf *m,
			 uint16_t i, uint64_t set, struct fwd_burst *fb)
{
	uint16_t v = w->vlan[i];
	uint64_t tagged_set = __atomic_load_n(&L->tagged[v], __ATOMIC_RELAXED);
	uint64_t change = set & (w->tagged[i] ? ~tagged_set : tagged_set);
	struct rte_mbuf *copy;

	fb->out[i] = FWD_OUT_FLOOD;
	fb->flood[i] = set & ~change;
	if (likely(change == 0))
		return;
	if (fb->flood[i] == 0) {
		if (retag(m, w->tagged[i], v) == 0) {
			fb->flood[i] = change;
		} else {
			fb->out[i] = FWD_OUT_DROP;
			fb->drop[i] = STATS_DROP_VLAN;
		}
		return;
	}
	copy = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);
	if (copy == NULL || retag(copy, w->tagged[i], v) != 0) {
		rte_pktmbuf_free(copy);
		stats_add(&w->copy_failed, (uint64_t)__builtin_popcountll(change));
		return;
	}
	fb->extra[fb->n_extra].m = copy;
	fb->extra[fb->n_extra].set = change;
	fb->n_extra++;
}

/* Sends frame I to the learned port OUT, changing its tag when OUT's tagging differs. */
static inline void unicast(const struct learn *L, struct learn_worker *w, struct rte_mbuf *m,
			   uint16_t i, uint16_t out, struct fwd_burst *fb)
{
	uint16_t v = w->vlan[i];
	bool out_tagged = (__atomic_load_n(&L->tagged[v], __ATOMIC_RELAXED) & bit(out)) != 0;

	fb->out[i] = out;
	if (unlikely(out_tagged != (bool)w->tagged[i]) && retag(m, w->tagged[i], v) != 0) {
		fb->out[i] = FWD_OUT_DROP;
		fb->drop[i] = STATS_DROP_VLAN;
	}
}

/* Storm control: whether port IN may flood one more frame now (set-port storm_pps). */
static inline bool storm_passes(const struct learn *L, struct learn_worker *w, uint16_t in)
{
	uint64_t cost = __atomic_load_n(&L->storm_cost[in], __ATOMIC_RELAXED);

	if (likely(cost == 0))
		return true;
	/* One clock reading a burst: its frames arrived together. */
	if (w->tsc == 0)
		w->tsc = rte_rdtsc();
	return storm_allow(&w->storm[in], cost, L->storm_window, w->tsc);
}

/* Second pass for frame I: its output. *LAST_KEY and *LAST_PORT are the one-entry cache. */
static inline void decide(const struct learn *L, struct learn_worker *w, uint16_t in,
			  struct rte_mbuf *m, uint16_t i, uint64_t *last_key, uint32_t *last_port,
			  struct fwd_burst *fb)
{
	uint64_t members = __atomic_load_n(&L->member[w->vlan[i]], __ATOMIC_RELAXED);
	uint32_t out = FDB_NONE;

	if (w->class[i] == FRAME_UNICAST) {
		if (w->dst_key[i] != *last_key) {
			const struct fdb_slot *s = fdb_lookup(&L->fdb, w->dst_key[i],
							      w->dst_hash[i]);

			*last_key = w->dst_key[i];
			*last_port = s != NULL ? fdb_slot_port_flags(s) & FDB_PORT_MASK : FDB_NONE;
		}
		out = *last_port;
	}
	if (out == in) {
		fb->out[i] = FWD_OUT_DROP;
		fb->drop[i] = STATS_DROP_HAIRPIN;
	} else if (out != FDB_NONE && (members & bit((uint16_t)out)) != 0) {
		unicast(L, w, m, i, (uint16_t)out, fb);
	} else if (likely(storm_passes(L, w, in))) {
		/* Unknown, group, or learned before the port left the VLAN: flood. */
		flood(L, w, m, i, members & ~bit(in), fb);
	} else {
		fb->out[i] = FWD_OUT_DROP;
		fb->drop[i] = STATS_DROP_STORM;
	}
}

/* Whether every frame of the burst has the header of the first (restoring stripped tags). */
static inline bool one_flow(struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t i;

	for (i = 0; i < n; i++)
		restore_stripped_tag(pkts[i]);
	for (i = 1; i < n; i++)
		if (!same_header(pkts[i], pkts[0]))
			return false;
	return true;
}

/*
 * A burst of one flow (a v2v or p2p stream): frame 0 is classified and its source learned
 * here, and when it goes unchanged to one learned port the whole burst does, decided once
 * (fb->uniform). Returns false, having decided nothing, when the general path must run;
 * *LAST_SRC then says frame 0's source was already handled.
 */
static inline bool one_flow_unicast(struct learn *L, struct learn_worker *w, uint16_t in,
				    uint16_t access, uint32_t now, struct rte_mbuf **pkts,
				    struct fwd_burst *fb, uint16_t *n_req, uint64_t *last_src)
{
	const struct fdb_slot *s;
	uint32_t out;

	classify(L, w, in, access, pkts[0], 0, fb);
	if (w->class[0] != FRAME_UNICAST)
		return false;
	learn_source(w, now, in, 0, &L->fdb, n_req);
	*last_src = w->src_key[0];
	s = fdb_lookup(&L->fdb, w->dst_key[0], w->dst_hash[0]);
	if (s == NULL)
		return false;
	out = fdb_slot_port_flags(s) & FDB_PORT_MASK;
	if (out == in || out >= SW_MAX_PORTS ||
	    (__atomic_load_n(&L->member[w->vlan[0]], __ATOMIC_RELAXED) & bit((uint16_t)out)) == 0 ||
	    ((__atomic_load_n(&L->tagged[w->vlan[0]], __ATOMIC_RELAXED) & bit((uint16_t)out)) != 0)
	    != (bool)w->tagged[0])
		return false;
	fb->uniform = (uint16_t)out;
	return true;
}

static void learn_process(void *state, uint16_t in, struct rte_mbuf **pkts, uint16_t n,
			  struct fwd_burst *fb)
{
	struct learn *L = state;
	struct learn_worker *w = &L->lw[fb->worker];
	uint16_t access = __atomic_load_n(&L->access_tag[in], __ATOMIC_RELAXED);
	uint32_t now = __atomic_load_n(&L->now, __ATOMIC_RELAXED), last_port = FDB_NONE;
	uint64_t last_src = 0, last_dst = 0;
	uint16_t i, n_req = 0, uniform;
	unsigned int queued;

	w->forward_reserved = __atomic_load_n(&L->forward_reserved, __ATOMIC_RELAXED);
	w->tsc = fb->tsc;       /* 0 when the caller has none: read when storm control asks */
	if (one_flow(pkts, n) && one_flow_unicast(L, w, in, access, now, pkts, fb, &n_req,
						  &last_src))
		goto learn;
	for (i = 0; i < n && i < LEARN_PREFETCH; i++)
		rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
	for (i = 0; i < n; i++) {
		if (i + LEARN_PREFETCH < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + LEARN_PREFETCH], void *));
		if (i == 0 || !same_header(pkts[i], pkts[i - 1]))
			classify(L, w, in, access, pkts[i], i, fb);
		else
			copy_class(w, i, fb);
	}
	for (i = 0; i < n; i++) {
		if (w->class[i] == FRAME_DROP) {
			fb->out[i] = FWD_OUT_DROP;
			continue;
		}
		if (w->src_key[i] != last_src) {
			learn_source(w, now, in, i, &L->fdb, &n_req);
			last_src = w->src_key[i];
		}
		decide(L, w, in, pkts[i], i, &last_dst, &last_port, fb);
	}
	/* Everything to one port, as in a v2v or p2p flow: the worker sends the burst as is. */
	uniform = fb->out[0];
	for (i = 1; i < n && fb->out[i] == uniform; i++)
		;
	if (i == n && uniform < SW_MAX_PORTS && fb->n_extra == 0)
		fb->uniform = uniform;
learn:
	if (n_req > 0) {
		queued = rte_ring_enqueue_burst_elem(w->ring, w->req, sizeof(w->req[0]), n_req,
						     NULL);
		stats_add(&w->queue_full, n_req - queued);
	}
}

/* ---- the one-copy path's question (fwd.h, fast_unicast) ---- */

/* Whether two frame starts (LEN bytes valid) hold the same 16 bytes, as same_header(). */
static inline bool same_bytes(const uint8_t *a, uint16_t a_len, const uint8_t *b,
			      uint16_t b_len)
{
	uint64_t ha[2], hb[2];

	if (a_len < RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN || b_len < RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN)
		return false;
	memcpy(ha, a, sizeof(ha));
	memcpy(hb, b, sizeof(hb));
	return ((ha[0] ^ hb[0]) | (ha[1] ^ hb[1])) == 0;
}

/*
 * Where unicast frame I goes when decide() would send it, unchanged, to a learned port of
 * FAST: that port; else FWD_OUT_MIXED (unknown, the input itself, not in the VLAN, a tag to
 * push or pop, or a port the one-copy path cannot reach), and process() decides.
 */
static inline uint16_t fast_output(const struct learn *L, const struct learn_worker *w,
				   uint16_t in, uint64_t fast, uint16_t i)
{
	const struct fdb_slot *s = fdb_lookup(&L->fdb, w->dst_key[i], w->dst_hash[i]);
	uint16_t v = w->vlan[i];
	uint32_t out;

	if (s == NULL)
		return FWD_OUT_MIXED;
	out = fdb_slot_port_flags(s) & FDB_PORT_MASK;
	if (out == in || out >= SW_MAX_PORTS || (fast & bit((uint16_t)out)) == 0 ||
	    (__atomic_load_n(&L->member[v], __ATOMIC_RELAXED) & bit((uint16_t)out)) == 0 ||
	    ((__atomic_load_n(&L->tagged[v], __ATOMIC_RELAXED) & bit((uint16_t)out)) != 0) !=
	    (bool)w->tagged[i])
		return FWD_OUT_MIXED;
	return (uint16_t)out;
}

/*
 * The answer for unicast frame I, the same for every frame of the burst with its
 * destination and tagging: the table may change between two lookups (the control thread
 * learns meanwhile), and a flow split between the one-copy path (sent at once) and the mbuf
 * path (sent after the burst) would arrive out of order. *N_KEYS answers are remembered;
 * past LEARN_FAST_KEYS destinations, a new one is left to process().
 */
static inline uint16_t fast_answer(const struct learn *L, struct learn_worker *w, uint16_t in,
				   uint64_t fast, uint16_t i, uint16_t *n_keys)
{
	uint16_t k;

	for (k = 0; k < *n_keys; k++)
		if (w->fast_key[k] == w->dst_key[i] && w->fast_tagged[k] == w->tagged[i])
			return w->fast_out[k];
	if (*n_keys == LEARN_FAST_KEYS)
		return FWD_OUT_MIXED;
	w->fast_key[k] = w->dst_key[i];
	w->fast_tagged[k] = w->tagged[i];
	w->fast_out[k] = fast_output(L, w, in, fast, i);
	(*n_keys)++;
	return w->fast_out[k];
}

/*
 * fwd.h, fast_unicast: the frames of a burst that decide() would send, unchanged, to one
 * learned port of FAST. Their sources are learned as learn_process() learns them (refresh
 * in place, or a request to the learner); the other frames are left alone, for
 * learn_process() to classify, learn from, flood or drop when the worker hands them over
 * as mbufs. Nothing is counted here that learn_process() would not count for the same
 * frames: unicast to a learned port costs the function no counter of its own.
 */
static uint16_t learn_fast_unicast(void *state, uint16_t in, uint64_t fast,
				   const uint8_t *const *hdr, const uint16_t *hdr_len,
				   uint16_t n, struct fwd_burst *fb)
{
	struct learn *L = state;
	struct learn_worker *w = &L->lw[fb->worker];
	uint16_t access = __atomic_load_n(&L->access_tag[in], __ATOMIC_RELAXED);
	uint32_t now = __atomic_load_n(&L->now, __ATOMIC_RELAXED);
	uint16_t i, n_req = 0, n_keys = 0, taken = 0;
	uint64_t last_src = 0;
	unsigned int queued;

	w->forward_reserved = __atomic_load_n(&L->forward_reserved, __ATOMIC_RELAXED);
	for (i = 0; i < n; i++) {
		if (i > 0 && same_bytes(hdr[i], hdr_len[i], hdr[i - 1], hdr_len[i - 1]))
			copy_class(w, i, fb);
		else
			classify_bytes(L, w, in, access, hdr[i], hdr_len[i], i, fb);
	}
	for (i = 0; i < n; i++) {
		uint16_t o = FWD_OUT_MIXED;

		if (w->class[i] == FRAME_UNICAST)
			o = fast_answer(L, w, in, fast, i, &n_keys);
		fb->out[i] = o;
		if (o == FWD_OUT_MIXED)
			continue;
		taken++;
		if (w->src_key[i] != last_src) {
			learn_source(w, now, in, i, &L->fdb, &n_req);
			last_src = w->src_key[i];
		}
	}
	if (n_req > 0) {
		queued = rte_ring_enqueue_burst_elem(w->ring, w->req, sizeof(w->req[0]), n_req,
						     NULL);
		stats_add(&w->queue_full, n_req - queued);
	}
	return taken;
}

/* ---- the control side ---- */

static uint32_t clock_seconds(const struct learn *L)
{
	return (uint32_t)((rte_get_tsc_cycles() - L->start_tsc) / rte_get_tsc_hz());
}

/* Learns one request from a worker, within the port's and the table's limits. */
static void learn_one(struct learn *L, const struct learn_req *r)
{
	uint32_t prev, limit = L->learn_limit[r->port];
	const struct fdb_slot *s;
	enum fdb_result res;

	if ((L->present & bit(r->port)) == 0)
		return;                /* the port left after the frame came in */
	s = fdb_lookup(&L->fdb, r->key, fdb_hash(r->key));
	if (s != NULL && (s->port_flags & FDB_PORT_MASK) == r->port)
		return;                /* learned from an earlier request */
	if (limit != 0 && L->port_entries[r->port] >= limit && (s == NULL ||
	    (s->port_flags & FDB_STATIC) == 0)) {
		/* A station that moves to a port at its limit is forgotten, so it floods. */
		if (s != NULL && fdb_delete(&L->fdb, r->key) >= 0)
			L->port_entries[s->port_flags & FDB_PORT_MASK]--;
		L->counters.port_limit++;
		return;
	}
	res = fdb_learn(&L->fdb, r->key, r->port, L->now, &prev);
	switch (res) {
	case FDB_ADDED:
		L->counters.learned++;
		L->port_entries[r->port]++;
		break;
	case FDB_MOVED:
		L->counters.moved++;
		L->port_entries[prev & FDB_PORT_MASK]--;
		L->port_entries[r->port]++;
		break;
	case FDB_FULL:
		L->counters.table_full++;
		break;
	case FDB_STATIC_KEPT:
		L->counters.static_kept++;
		break;
	case FDB_REFRESHED:
		break;
	}
}

static void drain_requests(struct learn *L)
{
	struct learn_req reqs[64];
	unsigned int i, k, got;

	for (k = 0; k < L->n_workers; k++)
		do {
			got = rte_ring_dequeue_burst_elem(L->lw[k].ring, reqs, sizeof(reqs[0]),
							  RTE_DIM(reqs), NULL);
			for (i = 0; i < got; i++)
				learn_one(L, &reqs[i]);
		} while (got == RTE_DIM(reqs));
}

struct sweep_arg {
	struct learn *L;
	int port;                      /* -1: any */
	bool expired_only, dynamic_only;
};

/* Whether a sweep deletes S; keeps the per-port counts right when it does. */
static bool sweep_visit(const struct fdb_slot *s, void *arg)
{
	struct sweep_arg *a = arg;
	struct learn *L = a->L;
	uint32_t pf = s->port_flags, age;
	uint16_t port = pf & FDB_PORT_MASK;
	bool is_static = (pf & FDB_STATIC) != 0;

	if ((a->port >= 0 && port != a->port) || (is_static && a->dynamic_only))
		return false;
	if (a->expired_only) {
		age = L->now - __atomic_load_n(&s->seen, __ATOMIC_RELAXED);
		if (L->aging == 0 || age < L->aging)
			return false;
		L->counters.aged++;
	}
	if (!is_static)
		L->port_entries[port]--;
	return true;
}

static unsigned int sweep(struct learn *L, int port, bool expired_only, bool dynamic_only)
{
	struct sweep_arg a = { L, port, expired_only, dynamic_only };

	return fdb_sweep(&L->fdb, sweep_visit, &a);
}

static bool learn_tick(void *state)
{
	struct learn *L = state;
	uint32_t now = clock_seconds(L);

	__atomic_store_n(&L->now, now, __ATOMIC_RELAXED);
	drain_requests(L);
	if (now != L->last_sweep) {
		L->last_sweep = now;
		sweep(L, -1, true, true);
	}
	return L->fdb.n_tombstones > 0;
}

static void learn_reclaim(void *state)
{
	struct learn *L = state;

	fdb_reclaim(&L->fdb);
}

/* An integer parameter of add-switch, or DEF when absent. */
static int uint_param(const json_t *params, const char *key, json_int_t min, json_int_t max,
		      json_int_t def, uint32_t *value, char *err, size_t err_len)
{
	const json_t *v = json_object_get(params, key);

	if (v == NULL) {
		*value = (uint32_t)def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		snprintf(err, err_len, "'%s' must be an integer from %lld to %lld", key,
			 (long long)min, (long long)max);
		return -1;
	}
	*value = (uint32_t)json_integer_value(v);
	return 0;
}

static void *rte_calloc_fdb(size_t size)
{
	return rte_zmalloc("fdb", size, RTE_CACHE_LINE_SIZE);
}

static struct learn *learn_alloc(unsigned int n_workers)
{
	return rte_zmalloc("learn", sizeof(struct learn) +
			   n_workers * sizeof(struct learn_worker), RTE_CACHE_LINE_SIZE);
}

static void learn_destroy(void *state)
{
	struct learn *L = state;
	unsigned int k;

	for (k = 0; k < L->n_workers; k++)
		rte_ring_free(L->lw[k].ring);
	rte_free(L->fdb.buckets);
	rte_free(L);
}

static int make_rings(struct learn *L, char *err, size_t err_len)
{
	static unsigned int serial;
	char name[RTE_RING_NAMESIZE];
	unsigned int k;

	for (k = 0; k < L->n_workers; k++) {
		snprintf(name, sizeof(name), "learn%u_%u", serial++, k);
		L->lw[k].ring = rte_ring_create_elem(name, sizeof(struct learn_req),
						     LEARN_RING_SIZE, SOCKET_ID_ANY,
						     RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (L->lw[k].ring == NULL) {
			snprintf(err, err_len, "cannot make a learn queue: %s",
				 rte_strerror(rte_errno));
			return -1;
		}
	}
	return 0;
}

static void *learn_create(const json_t *params, char *err, size_t err_len)
{
	unsigned int n_workers = wk_count();
	uint32_t aging, max_entries;
	struct learn *L;

	if (uint_param(params, "aging", 0, LEARN_MAX_AGING, LEARN_DEFAULT_AGING, &aging, err,
		       err_len) != 0 ||
	    uint_param(params, "max_entries", FDB_MIN_ENTRIES, FDB_MAX_ENTRIES,
		       LEARN_DEFAULT_MAX_ENTRIES, &max_entries, err, err_len) != 0)
		return NULL;
	L = learn_alloc(n_workers);
	if (L == NULL) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	L->n_workers = n_workers;
	L->aging = aging;
	L->start_tsc = rte_get_tsc_cycles();
	L->storm_window = rte_get_tsc_hz() / LEARN_STORM_WINDOW_DIV;
	if (fdb_init(&L->fdb, max_entries, rte_calloc_fdb) != 0) {
		snprintf(err, err_len, "out of memory for a table of %u entries (%zu MiB)",
			 max_entries, fdb_memory(max_entries) >> 20);
		learn_destroy(L);
		return NULL;
	}
	if (make_rings(L, err, err_len) != 0) {
		learn_destroy(L);
		return NULL;
	}
	return L;
}

/* Puts PORT in the VLANs CFG names, and nowhere else. */
static void apply_vlans(struct learn *L, uint16_t port, const struct learn_vlan_cfg *cfg)
{
	uint64_t b = bit(port);
	unsigned int v;
	bool in, tag;

	__atomic_store_n(&L->access_tag[port], cfg->access_tag, __ATOMIC_RELAXED);
	for (v = 0; v < LEARN_VLANS; v++) {
		if (cfg->access_tag != 0) {
			in = v == cfg->access_tag;
			tag = false;
		} else {
			in = (cfg->allowed[v / 64] >> (v % 64)) & 1;
			tag = in && v != 0;
		}
		__atomic_store_n(&L->member[v], in ? L->member[v] | b : L->member[v] & ~b,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&L->tagged[v], tag ? L->tagged[v] | b : L->tagged[v] & ~b,
				 __ATOMIC_RELAXED);
	}
}

static void learn_port_added(void *state, uint16_t index)
{
	struct learn *L = state;
	struct learn_vlan_cfg all = { .access_tag = 0 };

	memset(all.allowed, 0xff, sizeof(all.allowed));
	L->learn_limit[index] = 0;
	L->port_entries[index] = 0;
	fwd_learn_set_storm(L, index, 0);
	apply_vlans(L, index, &all);
	L->present |= bit(index);
}

static void learn_port_removed(void *state, uint16_t index)
{
	struct learn *L = state;
	struct learn_vlan_cfg none = { .access_tag = 0 };

	L->present &= ~bit(index);
	apply_vlans(L, index, &none);
	sweep(L, index, false, false);
	L->port_entries[index] = 0;
}

int fwd_learn_set_aging(void *state, uint32_t seconds, char *err, size_t err_len)
{
	struct learn *L = state;

	if (seconds > LEARN_MAX_AGING) {
		snprintf(err, err_len, "aging must be 0 (never) to %d seconds", LEARN_MAX_AGING);
		return -1;
	}
	L->aging = seconds;
	return 0;
}

int fwd_learn_set_vlan(void *state, uint16_t port, const struct learn_vlan_cfg *cfg)
{
	struct learn *L = state;

	apply_vlans(L, port, cfg);
	/* What the port learned belongs to VLANs it may have left. */
	sweep(L, port, false, true);
	return 0;
}

void fwd_learn_set_limit(void *state, uint16_t port, uint32_t limit)
{
	struct learn *L = state;

	L->learn_limit[port] = limit;
}

void fwd_learn_set_storm(void *state, uint16_t port, uint32_t pps)
{
	struct learn *L = state;

	L->storm_pps[port] = pps;
	/* The workers' buckets keep their state: a new limit applies from their next flood. */
	__atomic_store_n(&L->storm_cost[port], storm_cost(rte_get_tsc_hz(), pps),
			 __ATOMIC_RELAXED);
}

void fwd_learn_set_forward_reserved(void *state, bool forward)
{
	struct learn *L = state;

	__atomic_store_n(&L->forward_reserved, forward, __ATOMIC_RELAXED);
}

int fwd_learn_fdb_add(void *state, const uint8_t mac[6], uint16_t vlan, uint16_t port,
		      char *err, size_t err_len)
{
	struct learn *L = state;
	uint32_t prev;

	switch (fdb_set_static(&L->fdb, fdb_key(mac, vlan), port, L->now, &prev)) {
	case FDB_FULL:
		snprintf(err, err_len, "the table is full (%u entries)", L->fdb.n_entries);
		return -1;
	default:
		break;
	}
	if (prev != FDB_NONE && (prev & FDB_STATIC) == 0)
		L->port_entries[prev & FDB_PORT_MASK]--;
	return 0;
}

bool fwd_learn_fdb_del(void *state, const uint8_t mac[6], uint16_t vlan)
{
	struct learn *L = state;
	int64_t pf = fdb_delete(&L->fdb, fdb_key(mac, vlan));

	if (pf < 0)
		return false;
	if ((pf & FDB_STATIC) == 0)
		L->port_entries[pf & FDB_PORT_MASK]--;
	return true;
}

unsigned int fwd_learn_fdb_flush(void *state, int port)
{
	return sweep(state, port, false, true);
}

static void format_mac(uint64_t key, char *buf, size_t len)
{
	struct rte_ether_addr a;

	fdb_key_mac(key, a.addr_bytes);
	rte_ether_format_addr(buf, (uint16_t)len, &a);
}

json_t *fwd_learn_fdb_json(void *state, const char *const *port_names)
{
	struct learn *L = state;
	json_t *a = json_array();
	char mac[RTE_ETHER_ADDR_FMT_SIZE];
	unsigned int i;
	uint32_t b;

	for (b = 0; b <= L->fdb.mask; b++)
		for (i = 0; i < FDB_SLOTS; i++) {
			const struct fdb_slot *s = &L->fdb.buckets[b].slot[i];
			uint16_t port = s->port_flags & FDB_PORT_MASK;
			bool is_static = (s->port_flags & FDB_STATIC) != 0;

			if ((s->key & FDB_KEY_VALID) == 0)
				continue;
			format_mac(s->key, mac, sizeof(mac));
			json_array_append_new(a, json_pack("{ss si ss si ss}", "mac", mac,
				"vlan", fdb_key_vlan(s->key), "port",
				port_names[port] ? port_names[port] : "?", "age",
				is_static ? 0 : (json_int_t)(L->now - __atomic_load_n(&s->seen,
							__ATOMIC_RELAXED)), "type",
				is_static ? "static" : "dynamic"));
		}
	return a;
}

/* A port's VLAN configuration as `show` prints it. */
static json_t *vlan_json(const struct learn *L, uint16_t port)
{
	unsigned int v, n = 0;
	json_t *trunks;

	if (L->access_tag[port] != 0)
		return json_pack("{ss si}", "vlan_mode", "access", "tag", L->access_tag[port]);
	/* Made only here: an access port's answer has no list (it leaked one per `show`). */
	trunks = json_array();
	for (v = 0; v < LEARN_VLANS; v++)
		if (L->member[v] & bit(port)) {
			json_array_append_new(trunks, json_integer(v));
			n++;
		}
	if (n == LEARN_VLANS) {
		json_decref(trunks);
		return json_pack("{ss ss}", "vlan_mode", "trunk", "trunks", "all");
	}
	return json_pack("{ss so}", "vlan_mode", "trunk", "trunks", trunks);
}

static json_t *learn_describe(void *state, const char *const *port_names)
{
	struct learn *L = state;
	uint64_t queue_full = 0, copy_failed = 0, static_kept = L->counters.static_kept;
	json_t *ports = json_object(), *p;
	unsigned int k;
	uint16_t i;

	for (k = 0; k < L->n_workers; k++) {
		queue_full += __atomic_load_n(&L->lw[k].queue_full, __ATOMIC_RELAXED);
		copy_failed += __atomic_load_n(&L->lw[k].copy_failed, __ATOMIC_RELAXED);
		static_kept += __atomic_load_n(&L->lw[k].static_kept, __ATOMIC_RELAXED);
	}
	for (i = 0; i < SW_MAX_PORTS; i++) {
		if ((L->present & bit(i)) == 0 || port_names[i] == NULL)
			continue;
		p = vlan_json(L, i);
		json_object_set_new(p, "learn_limit", json_integer(L->learn_limit[i]));
		json_object_set_new(p, "entries", json_integer(L->port_entries[i]));
		json_object_set_new(p, "storm_pps", json_integer(L->storm_pps[i]));
		json_object_set_new(ports, port_names[i], p);
	}
	return json_pack("{si si si sb s{sI sI sI sI sI sI sI sI} so}", "aging", L->aging,
			 "max_entries", L->fdb.max_entries, "entries", L->fdb.n_entries,
			 "forward_reserved", L->forward_reserved,
			 "learn", "learned", (json_int_t)L->counters.learned,
			 "moved", (json_int_t)L->counters.moved,
			 "aged", (json_int_t)L->counters.aged,
			 "port_limit", (json_int_t)L->counters.port_limit,
			 "table_full", (json_int_t)L->counters.table_full,
			 "static_kept", (json_int_t)static_kept,
			 "queue_full", (json_int_t)queue_full,
			 "flood_copy_failed", (json_int_t)copy_failed,
			 "port_settings", ports);
}

/* Appends the OpenFlow numbers (index + 1, as `show` gives them) of the ports in SET. */
static int format_ports(char *buf, size_t len, uint64_t set)
{
	int n = 0;

	buf[0] = '\0';
	while (set != 0 && (size_t)n < len) {
		unsigned int p = (unsigned int)__builtin_ctzll(set);

		set &= set - 1;
		n += snprintf(buf + n, len - (size_t)n, "%s%u", n > 0 ? "," : "", p + 1);
	}
	return n;
}

/*
 * The decision for one described packet, as learn_process() would take it, without
 * learning its source or touching an entry's age or the storm buckets: a trace never
 * changes what the switch does. Ports are given by their OpenFlow numbers.
 */
static void learn_trace(void *state, uint16_t in, struct rte_mbuf *pkt,
			struct fwd_trace *t)
{
	static const uint8_t zero[RTE_ETHER_ADDR_LEN];
	const struct learn *L = state;
	uint16_t access = __atomic_load_n(&L->access_tag[in], __ATOMIC_RELAXED);
	uint8_t data[128] __rte_aligned(2);
	uint32_t len = RTE_MIN(rte_pktmbuf_data_len(pkt), (uint32_t)sizeof(data));
	const struct fdb_slot *s = NULL;
	bool no_source = false;
	struct l2_frame f;
	uint64_t members;
	uint32_t out = FDB_NONE;
	char ports[256];
	int drop, n;

	/* A described packet often names no source (trace in_port=...,dl_dst=...): it is
	 * traced as if it had one, not dropped as malformed. */
	memcpy(data, rte_pktmbuf_mtod(pkt, const uint8_t *), len);
	if (len >= RTE_ETHER_HDR_LEN && memcmp(data + RTE_ETHER_ADDR_LEN, zero,
						sizeof(zero)) == 0) {
		data[RTE_ETHER_ADDR_LEN] = 0x02;
		no_source = true;
	}
	drop = l2_parse(data, len, in, access, L->member,
			__atomic_load_n(&L->forward_reserved, __ATOMIC_RELAXED), &f);
	if (drop >= 0) {
		snprintf(t->text, sizeof(t->text), "learn: drop (%s)",
			 stats_drop_name((enum stats_drop)drop));
		return;
	}
	members = __atomic_load_n(&L->member[f.vlan], __ATOMIC_RELAXED);
	n = snprintf(t->text, sizeof(t->text), "learn: %sVLAN %u (%s), ",
		     no_source ? "(no source address given) " : "", f.vlan,
		     access != 0 ? "the input's access VLAN" : f.tagged ? "tagged" : "untagged");
	if (f.dst_key != 0) {
		s = fdb_lookup(&L->fdb, f.dst_key, fdb_hash(f.dst_key));
		out = s != NULL ? fdb_slot_port_flags(s) & FDB_PORT_MASK : FDB_NONE;
	}
	if (f.dst_key == 0)
		n += snprintf(t->text + n, sizeof(t->text) - (size_t)n, "a group destination: ");
	else if (out == FDB_NONE)
		n += snprintf(t->text + n, sizeof(t->text) - (size_t)n,
			      "destination not learned: ");
	else
		n += snprintf(t->text + n, sizeof(t->text) - (size_t)n,
			      "destination %s on port %u: ",
			      fdb_slot_port_flags(s) & FDB_STATIC ? "static" : "learned", out + 1);
	if (out == in) {
		snprintf(t->text + n, sizeof(t->text) - (size_t)n,
			 "the input port: drop (hairpin)");
	} else if (out != FDB_NONE && (members & bit((uint16_t)out)) != 0) {
		snprintf(t->text + n, sizeof(t->text) - (size_t)n, "output to port %u", out + 1);
	} else {
		format_ports(ports, sizeof(ports), members & ~bit(in));
		snprintf(t->text + n, sizeof(t->text) - (size_t)n, "flood to ports %s%s", ports,
			 ports[0] ? "" : "(none)");
	}
}

const struct fwd_ops fwd_learn_ops = {
	.mode = "learn",
	.create = learn_create,
	.destroy = learn_destroy,
	.port_added = learn_port_added,
	.port_removed = learn_port_removed,
	.process = learn_process,
	.fast_unicast = learn_fast_unicast,
	.trace = learn_trace,
	.describe = learn_describe,
	.tick = learn_tick,
	.reclaim = learn_reclaim,
};
