/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The poll loop. For each receive queue in its plan a worker runs three passes over a burst,
 * as VALE and VPP do:
 *   1. receive the burst and count it;
 *   2. ask the switch's forwarding function for every packet's destination at once;
 *   3. append each packet to its output's staging array, then send each array with one
 *      rte_eth_tx_burst() and free and count what the output did not take.
 * Nothing here locks, allocates or makes a system call, except the idle sleep below, which
 * happens only when every queue came back empty many times in a row.
 *
 * Configuration reaches the loop through RCU (rte_rcu_qsbr): the loop reports a quiescent
 * state after each pass over its plan, and goes offline while it sleeps so that it never
 * holds up the control thread.
 */
#include "worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

#include "log.h"
#include "pool.h"
#include "switch.h"

/*
 * A worker keeps polling this long after its last packet before it first sleeps. A sleep
 * costs its wake-up delay (tens of microseconds in a VM) to the first packet that arrives
 * during it, so the spin must outlast the gaps of any steady traffic worth polling for:
 * 200 us is a 32-packet burst at 160 kpps. Below that, or after a real pause, the worker
 * naps and saves the CPU.
 */
#define WK_SPIN_US 200
/*
 * After this long without a packet the worker is idle, not between bursts, and its naps may
 * grow to WK_DEEP_SLEEP_US. Each wake-up costs about 10 us of CPU in a VM (measured: 50 us
 * naps kept an idle worker at 19 % of a core, 20,000 wake-ups a second); 1 ms naps bring
 * that to about 1 %. Only the first frame after such a silence waits up to the nap; steady
 * traffic of more than 10 packets a second never lets the worker reach it.
 */
#define WK_DEEP_AFTER_MS 100
#define WK_DEEP_SLEEP_US 1000
#define WK_FIRST_SLEEP_NS 1000
/*
 * The longest the control thread waits for every worker to pass a quiescent state. A worker
 * that takes longer is stuck (spinning on a lock another thread holds, say): it is logged
 * and counted, and what it may still read is left allocated rather than waited for.
 */
#define WK_GRACE_MS 2000
/* A 64 KB super-frame cut at the smallest MSS worth sending whole (1 KB) */
#define WK_MAX_SEGS 64
#define WK_INJECT_RING 256       /* frames the control thread may hand a worker at once */
#define WK_INJECT_BURST 8

struct wk_rxq {
	struct port *port;
	uint16_t queue;
};

/* What a worker polls; replaced as a whole, never changed in place. */
struct wk_plan {
	unsigned int n;
	struct wk_rxq q[WK_MAX_RXQS];
};

/* Packets staged for one output port of the switch being served. */
struct wk_out {
	uint16_t n;
	uint16_t copies;              /* how many of pkts[] are flood copies */
	uint32_t max_len;             /* the longest of pkts[] (the MTU check) */
	uint64_t bytes;
	struct rte_mbuf *pkts[FWD_MAX_BURST];
	uint8_t is_copy[FWD_MAX_BURST];
};

struct worker {
	unsigned int id, lcore;
	struct wk_plan *plan;         /* atomic; published by the control thread */
	/* The plan not in use: the next one is written here, so that changing a plan never
	 * allocates and removing a port cannot fail for want of memory. */
	struct wk_plan *spare;
	bool stop;                    /* atomic */
	/*
	 * Odd while the worker serves a burst: the control thread reads this worker's counters
	 * between bursts (wk_counters_begin), so that rx = forwarded + dropped holds in every
	 * reading and clear-stats baseline, not only once traffic stops.
	 */
	uint32_t burst_seq;

	/* counters, written by the worker only */
	uint64_t loops, busy_cycles, idle_cycles, packets, sleeps;
	bool asleep;                  /* in its idle sleep (offline for RCU) */
	/* written by the control thread: grace periods this worker held up past the bound */
	uint64_t stalls;
	bool stuck;                   /* held up the last one, at loop count stuck_loops */
	uint64_t stuck_loops;

	/* scratch for one burst, kept here rather than on the stack */
	struct fwd_burst fb;
	struct rte_mbuf *rx[FWD_MAX_BURST];
	struct rte_mbuf *dropped[FWD_MAX_BURST];
	/* the segments of one TCP super-frame for an output that cannot take it whole */
	struct rte_mbuf *segs[WK_MAX_SEGS];
	struct rte_mempool *pool;     /* where those segments come from */
	/* The burst being served came from a port whose frames may leave checksums or TCP
	 * segmentation to do (port_afpacket.h): only then do outputs check for it. */
	bool offloads_in;
	uint16_t used[SW_MAX_PORTS];
	uint16_t n_used;
	struct wk_out out[SW_MAX_PORTS];

	/*
	 * Frames the control thread hands over (packet-out, wk_inject): it alone enqueues and
	 * counts them in inject_sent; the worker alone dequeues and counts them in inject_done
	 * once it no longer holds their ports (wk_inject_wait).
	 */
	struct rte_ring *inject;
	uint64_t inject_sent;         /* control thread */
	uint64_t inject_done;         /* atomic; the worker */
	uint64_t inject_dropped;      /* the worker: direct outputs the port did not take */
	struct vxl_split split;       /* frames an underlay's burst holds for its tunnels */
	/* a burst on the one-copy path of a switch that decides per frame (serve_vhost_frames) */
	struct vhf_burst *vb;
	uint16_t vcount[SW_MAX_PORTS], vstart[SW_MAX_PORTS];
	uint16_t vidx[FWD_MAX_BURST];
	/* a burst copied once between two fast ports of different kinds (serve_cross); its
	 * frame entries also hold a group of VB's frames for a memif output (copy_group) */
	struct fwd_frames ff;
} __rte_cache_aligned;

/* One frame handed to a worker: sent out of OUT, or (OUT NULL) served as received on IN. */
struct wk_injected {
	struct rte_mbuf *m;
	struct port *in, *out;
};

static struct worker *workers[WK_MAX_WORKERS];
static unsigned int n_workers;
static struct rte_rcu_qsbr *qsbr;
/* Set while workers poll; read by wk_quiesce() from any thread. */
static bool polling;
/* True in a worker's own thread, which must never wait for itself. */
static __thread bool in_worker;
static struct wk_config config;

unsigned int wk_count(void)
{
	return n_workers;
}

int wk_lcore_cpu(unsigned int lcore)
{
	rte_cpuset_t set = rte_lcore_cpuset(lcore);
	int cpu;

	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set))
			return cpu;
	return -1;
}

static void stage(struct worker *w, uint16_t o, struct rte_mbuf *m, uint8_t is_copy)
{
	struct wk_out *out = &w->out[o];

	if (out->n == 0)
		w->used[w->n_used++] = o;
	out->is_copy[out->n] = is_copy;
	out->pkts[out->n++] = m;
	out->copies += is_copy;
	out->bytes += m->pkt_len;
	out->max_len = RTE_MAX(out->max_len, m->pkt_len);
}

/*
 * Whether frame M is longer than output P sends (docs/ports.md, MTU): past MAX_FRAME (the
 * MTU and the Ethernet header), a VLAN tag aside; a TCP super-frame is judged by the
 * segments it will be cut into.
 */
static inline bool too_long(const struct rte_mbuf *m, uint32_t max_frame)
{
	const struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	uint32_t len = m->pkt_len;

	if (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG)
		len = (uint32_t)(m->l2_len + m->l3_len + m->l4_len) + m->tso_segsz;
	if (len > max_frame && m->data_len >= RTE_ETHER_HDR_LEN &&
	    (eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) ||
	     eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ)))
		len -= RTE_VLAN_HLEN;
	return len > max_frame;
}

/*
 * Takes the frames longer than output P's MTU out of OUT and frees them, never cutting or
 * fragmenting one: a unicast frame is a drop of the input (mtu_exceeded), a flood copy a
 * copy the output did not take (flood_tx_dropped), as with any output that refuses a frame.
 */
static void drop_too_long(struct worker *w, struct port *p, struct port_counters *ic,
			  struct wk_out *out)
{
	uint32_t max_frame = __atomic_load_n(&p->max_frame, __ATOMIC_RELAXED);
	uint16_t i, k = 0, unicast = 0, copies = 0;

	if (likely(out->max_len <= max_frame))
		return;
	for (i = 0; i < out->n; i++) {
		struct rte_mbuf *m = out->pkts[i];

		if (!too_long(m, max_frame)) {
			out->pkts[k] = m;
			out->is_copy[k++] = out->is_copy[i];
			continue;
		}
		out->bytes -= m->pkt_len;
		if (out->is_copy[i])
			copies++;
		else
			unicast++;
		rte_pktmbuf_free(m);
	}
	out->n = k;
	out->copies -= copies;
	if (unicast > 0)
		stats_add(&ic->drops[STATS_DROP_MTU_EXCEEDED], unicast);
	if (copies > 0)
		stats_add(&p->counters[w->id].flood_tx_dropped, copies);
}

/*
 * Adds EXTRA references to every segment of chain M. Freeing an mbuf drops one reference
 * from each of its segments (rte_pktmbuf_free walks the chain), so a chain shared by N
 * outputs needs N references on every segment, not only on the first: otherwise the first
 * output to free its copy returns the later segments to the pool while the others still
 * send them (vhost receives frames over 2 KB as chains). Referencing is cheaper than the
 * alternatives: a single-segment frame pays one test, a chain one store per segment, where
 * linearising would copy the frame and vhost's linear buffers would allocate one per frame
 * (and fix vhost only).
 */
static void ref_segments(struct rte_mbuf *m, int16_t extra)
{
	for (; m != NULL; m = m->next)
		rte_mbuf_refcnt_update(m, extra);
}

/*
 * Stages M on every port of SET (not empty), one reference each, so no bytes are copied.
 * Every one is a flood copy: the input packet counts as forwarded once, when it is flooded,
 * and a copy an output does not take counts on that output (stats.h).
 */
static void stage_copies(struct worker *w, struct rte_mbuf *m, uint64_t set)
{
	uint16_t copies = (uint16_t)__builtin_popcountll(set), o;

	if (copies > 1)
		ref_segments(m, (int16_t)(copies - 1));
	while (set != 0) {
		o = (uint16_t)__builtin_ctzll(set);
		set &= set - 1;
		stage(w, o, m, 1);
	}
}

/*
 * A flooded packet goes to every port of SET but its input. A forwarding function that must
 * change a copy's headers (VLAN) makes its own copy first (fwd.h). Returns false, staging
 * nothing, when the input is the only member.
 */
static bool stage_flood(struct worker *w, uint16_t in, struct rte_mbuf *m, uint64_t set)
{
	set &= ~(UINT64_C(1) << in);
	if (set == 0)
		return false;
	stage_copies(w, m, set);
	return true;
}

/* Stages a copy a forwarding function made (fwd.h, extra[]) on every port of SET. */
static void stage_extra(struct worker *w, struct rte_mbuf *m, uint64_t set)
{
	if (set == 0)
		rte_pktmbuf_free(m);
	else
		stage_copies(w, m, set);
}

/*
 * Why output P (NULL: removed) did not take packets handed to it; asked only for a burst
 * that was not all sent. The link state is the control thread's last reading (every 500 ms
 * for ports without link interrupts, memif among them), so it only names the reason:
 * sending is always tried, or a peer that has just connected would lose up to half a second
 * of traffic.
 */
static int unsent_reason(const struct port *p)
{
	if (p == NULL)
		return STATS_DROP_PORT_REMOVED;
	return port_link_is_up(p) ? STATS_DROP_TX_FULL : STATS_DROP_LINK_DOWN;
}

/* Whether any of PKTS leaves a checksum or a segmentation to do (port_afpacket.h). */
static inline bool needs_completion(struct rte_mbuf *const *pkts, uint16_t n)
{
	uint64_t flags = 0;
	uint16_t i;

	for (i = 0; i < n; i++)
		flags |= pkts[i]->ol_flags;
	return (flags & AFP_OFFLOAD_FLAGS) != 0;
}

/*
 * Does for output P, which cannot take them, the checksums and TCP segmentation that frames
 * from kernel ports leave to do. A checksum is completed in place (the bytes are right for
 * every output, so a flood copy may share them). A super-frame is cut into segments, sent at
 * once and taken out of OUT; it counts as forwarded (unicast) when all its segments were
 * sent, else as a drop of the input (tx_full or link_down) or a lost flood copy. Its
 * segments go before the frames that preceded it in OUT: frames of one TCP connection in
 * one burst are data after data, where such a swap cannot happen.
 */
static void complete_offloads(struct worker *w, struct port *p, struct port_counters *ic,
			      struct wk_out *out)
{
	struct port_counters *oc = &p->counters[w->id];
	uint16_t i, k = 0;

	if (!needs_completion(out->pkts, out->n))
		return;
	for (i = 0; i < out->n; i++) {
		struct rte_mbuf *m = out->pkts[i];
		uint16_t n_segs, sent, failed = 0, j;
		uint64_t bytes = 0;

		if (!(m->ol_flags & RTE_MBUF_F_TX_TCP_SEG)) {
			if (m->ol_flags & AFP_OFFLOAD_FLAGS)
				afp_complete_offloads(&m, 1, &m, 1, w->pool, &failed);
			out->pkts[k] = m;
			out->is_copy[k++] = out->is_copy[i];
			continue;
		}
		out->bytes -= m->pkt_len;
		n_segs = afp_complete_offloads(&m, 1, w->segs, WK_MAX_SEGS, w->pool, &failed);
		sent = failed ? 0 : port_tx_burst(p, (uint16_t)w->id, w->segs, n_segs);
		for (j = 0; j < sent; j++)
			bytes += w->segs[j]->pkt_len;
		if (sent > 0) {
			stats_add(&oc->tx_packets, sent);
			stats_add(&oc->tx_bytes, bytes);
		}
		if (sent < n_segs)
			rte_pktmbuf_free_bulk(&w->segs[sent], n_segs - sent);
		if (out->is_copy[i]) {
			out->copies--;
			if (sent < n_segs || failed)
				stats_add(&oc->flood_tx_dropped, 1);
		} else if (sent == n_segs && !failed) {
			stats_add(&ic->forwarded, 1);
		} else {
			stats_add(&ic->drops[unsent_reason(p)], 1);
		}
	}
	out->n = k;
}

/*
 * Sends one output's staged packets. Unicast packets the output does not take are drops of
 * the input port; flood copies it does not take are counted on the output (fwd.h).
 */
static uint64_t flush_output(struct worker *w, struct sw *s, uint16_t o,
			     struct port_counters *ic)
{
	struct wk_out *out = &w->out[o];
	struct port *p = sw_port(s, o);
	uint16_t sent = 0, i, unsent_unicast = 0, unicast_sent = 0;
	uint64_t unsent_bytes = 0;

	if (p != NULL)
		drop_too_long(w, p, ic, out);
	if (w->offloads_in && p != NULL && !p->tx_offloads)
		complete_offloads(w, p, ic, out);
	if (p != NULL)
		sent = port_tx_burst(p, (uint16_t)w->id, out->pkts, out->n);
	else if (out->copies > 0)
		/* The output left the switch during this burst: its copies count on the input. */
		stats_add(&ic->flood_to_removed, out->copies);
	for (i = sent; i < out->n; i++) {
		unsent_bytes += out->pkts[i]->pkt_len;
		unsent_unicast += !out->is_copy[i];
	}
	if (out->copies == 0)
		unicast_sent = sent;
	else
		for (i = 0; i < sent; i++)
			unicast_sent += !out->is_copy[i];
	if (sent > 0) {
		struct port_counters *oc = &p->counters[w->id];

		stats_add(&oc->tx_packets, sent);
		stats_add(&oc->tx_bytes, out->bytes - unsent_bytes);
	}
	if (sent < out->n) {
		stats_add(&ic->drops[unsent_reason(p)], unsent_unicast);
		if (p != NULL && out->n - sent > unsent_unicast)
			stats_add(&p->counters[w->id].flood_tx_dropped,
				  (uint64_t)(out->n - sent - unsent_unicast));
		rte_pktmbuf_free_bulk(&out->pkts[sent], out->n - sent);
	}
	out->n = 0;
	out->copies = 0;
	out->bytes = 0;
	out->max_len = 0;
	return unicast_sent;
}

/*
 * The whole burst goes to one output (or is dropped for one reason): send the received array
 * as it is. BYTES is the burst's byte count.
 */
static void serve_uniform(struct worker *w, struct sw *s, struct port_counters *ic,
			  struct rte_mbuf **pkts, uint16_t n, uint64_t bytes, uint32_t max_len,
			  uint16_t o, uint8_t reason)
{
	struct port *p = o < SW_MAX_PORTS ? sw_port(s, o) : NULL;
	uint64_t unsent_bytes = 0;
	uint16_t sent = 0, i;

	if (p != NULL && ((w->offloads_in && !p->tx_offloads && needs_completion(pkts, n)) ||
			  max_len > __atomic_load_n(&p->max_frame, __ATOMIC_RELAXED))) {
		/* Rare (a kernel port's frames to another kind, a frame over the output's MTU):
		 * the general path does it. */
		for (i = 0; i < n; i++)
			stage(w, o, pkts[i], 0);
		stats_add(&ic->forwarded, flush_output(w, s, o, ic));
		w->n_used = 0;
		return;
	}
	if (p != NULL)
		sent = port_tx_burst(p, (uint16_t)w->id, pkts, n);
	if (sent > 0) {
		for (i = sent; i < n; i++)
			unsent_bytes += pkts[i]->pkt_len;
		stats_add(&p->counters[w->id].tx_packets, sent);
		stats_add(&p->counters[w->id].tx_bytes, bytes - unsent_bytes);
		stats_add(&ic->forwarded, sent);
	}
	if (sent < n) {
		int why = o < SW_MAX_PORTS ? unsent_reason(p) : reason;

		stats_add(&ic->drops[why], (uint64_t)(n - sent));
		rte_pktmbuf_free_bulk(&pkts[sent], n - sent);
	}
}

static void serve_burst(struct worker *w, struct port *in, struct rte_mbuf **pkts, uint16_t n)
{
	struct port_counters *ic = &in->counters[w->id];
	struct fwd_burst *fb = &w->fb;
	struct sw *s = in->sw;
	uint32_t drops[STATS_DROP_COUNT] = { 0 };
	uint64_t bytes = 0, forwarded = 0, flooded = 0;
	uint32_t max_len = 0;
	uint16_t i, n_dropped = 0;

	w->offloads_in = in->afp != NULL;
	for (i = 0; i < n; i++) {
		bytes += pkts[i]->pkt_len;
		max_len = RTE_MAX(max_len, pkts[i]->pkt_len);
	}
	stats_add(&ic->rx_packets, n);
	stats_add(&ic->rx_bytes, bytes);

	fb->uniform = FWD_OUT_MIXED;
	fb->n_extra = 0;
	fb->bytes = bytes;
	s->ops->process(s->fwd, in->sw_index, pkts, n, fb);
	if (fb->uniform != FWD_OUT_MIXED) {
		serve_uniform(w, s, ic, pkts, n, bytes, max_len, fb->uniform, fb->drop[0]);
		return;
	}

	for (i = 0; i < n; i++) {
		uint16_t o = fb->out[i];

		if (likely(o < SW_MAX_PORTS)) {
			stage(w, o, pkts[i], 0);
		} else if (o == FWD_OUT_CONSUMED) {
			forwarded++;
		} else if (o == FWD_OUT_FLOOD && stage_flood(w, in->sw_index, pkts[i],
							      fb->flood[i])) {
			flooded++;
		} else if (o == FWD_OUT_FLOOD) {
			/* Nobody to flood to but the input port itself. */
			drops[STATS_DROP_HAIRPIN]++;
			w->dropped[n_dropped++] = pkts[i];
		} else {
			drops[fb->drop[i] < STATS_DROP_COUNT ? fb->drop[i] : STATS_DROP_MALFORMED]++;
			w->dropped[n_dropped++] = pkts[i];
		}
	}
	for (i = 0; i < fb->n_extra; i++)
		stage_extra(w, fb->extra[i].m, fb->extra[i].set);
	for (i = 0; i < w->n_used; i++)
		forwarded += flush_output(w, s, w->used[i], ic);
	w->n_used = 0;

	if (n_dropped > 0) {
		rte_pktmbuf_free_bulk(w->dropped, n_dropped);
		for (i = 0; i < STATS_DROP_COUNT; i++)
			if (drops[i] != 0)
				stats_add(&ic->drops[i], drops[i]);
	}
	stats_add(&ic->forwarded, forwarded + flooded);
}

/* A frame of the control thread's for one port's transmit queue (wk_inject): counted as
 * sent there, or freed and counted in inject_dropped. */
static void send_injected(struct worker *w, struct port *out, struct rte_mbuf *m)
{
	uint32_t len = m->pkt_len;

	if (port_tx_burst(out, (uint16_t)w->id, &m, 1) == 1) {
		stats_add(&out->counters[w->id].tx_packets, 1);
		stats_add(&out->counters[w->id].tx_bytes, len);
		return;
	}
	rte_pktmbuf_free(m);
	__atomic_store_n(&w->inject_dropped, w->inject_dropped + 1, __ATOMIC_RELAXED);
}

static inline void burst_seq_step(struct worker *w);

/* Serves the frames the control thread handed over; returns how many. */
static unsigned int serve_injected(struct worker *w)
{
	struct wk_injected it[WK_INJECT_BURST];
	unsigned int n, i;

	n = rte_ring_sc_dequeue_burst_elem(w->inject, it, sizeof(it[0]), WK_INJECT_BURST, NULL);
	for (i = 0; i < n; i++) {
		burst_seq_step(w);
		if (it[i].out != NULL)
			send_injected(w, it[i].out, it[i].m);
		else
			serve_burst(w, it[i].in, &it[i].m, 1);
		burst_seq_step(w);
	}
	__atomic_store_n(&w->inject_done, w->inject_done + n, __ATOMIC_RELEASE);
	return n;
}

/*
 * A burst from a port that carries vxlan ports (port_vxlan.h): their frames, decapsulated,
 * are served as bursts received on the vxlan ports, one tunnel's run at a time; the rest
 * (returned) goes to the underlay's own switch.
 */
static uint16_t serve_tunnels(struct worker *w, struct port *ul, struct rte_mbuf **pkts,
			      uint16_t n)
{
	struct vxl_split *sp = &w->split;
	uint16_t keep = vxl_rx_split(ul, (uint16_t)w->id, pkts, n, sp), i = 0, j;

	while (i < sp->n) {
		for (j = (uint16_t)(i + 1); j < sp->n && sp->port[j] == sp->port[i]; j++)
			;
		serve_burst(w, sp->port[i], &sp->pkts[i], (uint16_t)(j - i));
		i = j;
	}
	return keep;
}

/*
 * Marks the start or the end of a burst (worker.h, wk_counters_begin). The release fence
 * orders the odd store before the counter stores that follow it, and the counter stores
 * before the even one; the reader pairs it with an acquire fence (a seqlock).
 */
static inline void burst_seq_step(struct worker *w)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&w->burst_seq, w->burst_seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/*
 * Counts what a copy straight from IN to OUT did (R), as serve_burst would count the same
 * frames: the forwarding function's own counters through fixed_count, then the ports'.
 */
static void count_direct(struct worker *w, struct sw *s, struct port *in, struct port *out,
			 const struct fwd_direct_result *r)
{
	struct port_counters *ic, *oc;

	if (r->rx + r->malformed == 0)
		return;
	if (s->ops->fixed_count != NULL && r->rx > 0)
		s->ops->fixed_count(s->fwd, in->sw_index, (uint16_t)w->id, r->rx, r->rx_bytes,
				    w->fb.tsc);
	ic = &in->counters[w->id];
	oc = &out->counters[w->id];
	stats_add(&ic->rx_packets, r->rx);
	stats_add(&ic->rx_bytes, r->rx_bytes);
	stats_add(&ic->forwarded, r->sent);
	stats_add(&oc->tx_packets, r->sent);
	stats_add(&oc->tx_bytes, r->sent_bytes);
	if (r->full > 0)
		stats_add(&ic->drops[port_link_is_up(out) ? STATS_DROP_TX_FULL :
				     STATS_DROP_LINK_DOWN], r->full);
	if (r->too_long > 0)
		stats_add(&ic->drops[STATS_DROP_MTU_EXCEEDED], r->too_long);
}

/*
 * The one other port every frame from IN goes to, unchanged, as IN's switch says
 * (fixed_output: patch; flow with rules on the input port alone), or NULL when the burst
 * must take the mbuf path: no such port, or IN a VXLAN underlay, whose frames are sorted by
 * tunnel first (port_vxlan.h).
 */
static inline struct port *fixed_output_port(const struct worker *w, const struct port *in)
{
	struct sw *s = in->sw;
	uint16_t o;

	if (s->ops->fixed_output == NULL ||
	    __atomic_load_n(&in->tunnels, __ATOMIC_RELAXED) != NULL)
		return NULL;
	o = s->ops->fixed_output(s->fwd, in->sw_index, (uint16_t)w->id);
	return o < SW_MAX_PORTS ? sw_port(s, o) : NULL;
}

/*
 * A burst between a fast vhost-user port and a fast memif port, either way, whose output
 * is fixed (serve_vhost_direct, serve_memif_direct): the frames are taken from IN's ring as
 * pieces of its peer's memory (fwd.h, fwd_frames), copied once into OUT's peer's buffers,
 * and only then given back to IN's peer; counted as serve_burst would count them. False,
 * having done nothing, when IN's peer is not connected (the mbuf path then finds nothing).
 */
static bool serve_cross(struct worker *w, struct sw *s, struct port *in, struct port *out,
			uint64_t *got)
{
	uint32_t max_frame = __atomic_load_n(&out->max_frame, __ATOMIC_RELAXED);
	uint16_t q = (uint16_t)w->id, burst = (uint16_t)config.burst;
	struct fwd_frames *b = &w->ff;
	struct fwd_direct_result r;

	if ((in->mff != NULL ? mff_take(in->mff, burst, b) : vhf_take(in->vhf, burst, b)) != 0)
		return false;
	if (out->mff != NULL)
		mff_put(out->mff, q, b, max_frame, &r);
	else
		vhf_put(out->vhf, q, b, max_frame, &r);
	if (in->mff != NULL)
		mff_release(in->mff, b, r.sent);
	else
		vhf_release(in->vhf, b, r.sent);
	count_direct(w, s, in, out, &r);
	*got += r.rx;
	return true;
}

/*
 * A burst from a vhost-user port of sluice's own whose switch sends everything from it to
 * one other such port, unchanged (patch; flow with rules on the input port alone):
 * vhost_fast.h copies each frame from guest to guest, no mbuf in between, and the counters
 * move as serve_burst would move them (the forwarding function's own through fixed_count).
 * To a fast memif port, serve_cross() does the same. Returns false, having done nothing,
 * when the burst must take the mbuf path (another output, a guest not connected), which
 * then counts whatever happens.
 */
static bool serve_vhost_direct(struct worker *w, struct port *in, uint64_t *got)
{
	struct sw *s = in->sw;
	struct fwd_direct_result r;
	struct port *out = fixed_output_port(w, in);

	if (out == NULL)
		return false;
	if (out->mff != NULL)
		return serve_cross(w, s, in, out, got);
	if (__atomic_load_n(&out->vhf_direct, __ATOMIC_RELAXED) == NULL)
		return false;
	if (vhf_forward(in->vhf, out->vhf, (uint16_t)w->id, (uint16_t)config.burst,
			__atomic_load_n(&out->max_frame, __ATOMIC_RELAXED), &r) != 0)
		return false;
	count_direct(w, s, in, out, &r);
	*got += r.rx;
	return true;
}

/*
 * Sends group IDX[0..N-1] of the burst in VB, frames answered for output O, straight into
 * O's guest (or O's memif client), and counts as flush_output() would have counted the
 * same frames as mbufs: sent ones as forwarded and as O's tx, the rest as drops of the
 * input with the reason the output gives (tx_full, link_down, port_removed, mtu_exceeded).
 */
static void copy_group(struct worker *w, struct sw *s, struct port_counters *ic, uint16_t o,
		       const uint16_t *idx, uint16_t n)
{
	struct port *p = sw_port(s, o);
	struct vhf *vo = p != NULL ? p->vhf : NULL;
	struct fwd_direct_result r = { .full = n };

	if (vo != NULL) {
		vhf_burst_copy(w->vb, idx, n, vo, (uint16_t)w->id,
			       __atomic_load_n(&p->max_frame, __ATOMIC_RELAXED), &r);
	} else if (p != NULL && p->mff != NULL) {
		/* A fast memif port: the same frames as pieces, into its client's ring. */
		const struct fwd_seg *segs = vhf_burst_frames(w->vb, idx, n, w->ff.f);

		mff_put_frames(p->mff, (uint16_t)w->id, segs, w->ff.f, n,
			       __atomic_load_n(&p->max_frame, __ATOMIC_RELAXED), &r);
		vhf_burst_copied(w->vb, r.sent);
	}
	if (r.sent > 0) {
		struct port_counters *oc = &p->counters[w->id];

		stats_add(&ic->forwarded, r.sent);
		stats_add(&oc->tx_packets, r.sent);
		stats_add(&oc->tx_bytes, r.sent_bytes);
	}
	if (r.full > 0)
		stats_add(&ic->drops[unsent_reason(p)], r.full);
	if (r.too_long > 0)
		stats_add(&ic->drops[STATS_DROP_MTU_EXCEEDED], r.too_long);
}

/*
 * Groups the frames of VIEW (the first N) that FB sends to a port by that port, keeping
 * their order, and copies each group with one call (VALE's per-destination lists: a
 * counting sort over the outputs the burst uses).
 */
static void copy_direct(struct worker *w, struct sw *s, struct port_counters *ic,
			const struct fwd_burst *fb, uint16_t n)
{
	uint16_t outs[SW_MAX_PORTS], n_outs = 0, pos = 0, i, k;

	for (i = 0; i < n; i++) {
		uint16_t o = fb->out[i];

		if (o >= SW_MAX_PORTS)
			continue;
		if (w->vcount[o]++ == 0)
			outs[n_outs++] = o;
	}
	for (k = 0; k < n_outs; k++) {
		w->vstart[outs[k]] = pos;
		pos = (uint16_t)(pos + w->vcount[outs[k]]);
		w->vcount[outs[k]] = 0;
	}
	for (i = 0; i < n; i++) {
		uint16_t o = fb->out[i];

		if (o < SW_MAX_PORTS)
			w->vidx[w->vstart[o] + w->vcount[o]++] = i;
	}
	for (k = 0; k < n_outs; k++) {
		uint16_t o = outs[k];

		copy_group(w, s, ic, o, &w->vidx[w->vstart[o]], w->vcount[o]);
		w->vcount[o] = 0;
	}
}

/*
 * A burst from a vhost-user port of sluice's own whose switch decides frame by frame (learn;
 * flow when its rules look at headers): the forwarding function answers, from the frames' first
 * bytes, which go as unicast, unchanged, to another such port (fwd_ops.fast_unicast); those are
 * copied guest to guest, per output, and counted here. Every other frame (flood, unknown
 * destination, hairpin, another port kind, a tag to change, a drop) becomes an mbuf and goes
 * through serve_burst() afterwards, which decides and counts it as for any port, so that
 * nothing is lost or counted twice between the two paths. Returns false, having done nothing,
 * when the whole burst must take the mbuf path (no other fast port, the guest not connected).
 */
static bool serve_vhost_frames(struct worker *w, struct port *in, uint64_t *got)
{
	struct sw *s = in->sw;
	struct fwd_burst *fb = &w->fb;
	const struct vhf_view *v;
	uint16_t i, n, n_mbuf = 0, taken;
	uint64_t fast, bytes = 0;

	if (s->ops->fast_unicast == NULL ||
	    __atomic_load_n(&in->tunnels, __ATOMIC_RELAXED) != NULL)
		return false;
	fast = __atomic_load_n(&s->fast_ports, __ATOMIC_RELAXED) & ~(UINT64_C(1) << in->sw_index);
	if (fast == 0)
		return false;
	v = vhf_burst_take(in->vhf, (uint16_t)config.burst, w->vb);
	if (v == NULL)
		return false;
	n = v->n;
	taken = n > 0 ? s->ops->fast_unicast(s->fwd, in->sw_index, fast, v->hdr, v->hdr_len, n,
					     fb) : 0;
	for (i = 0; i < n && n_mbuf < n - taken; i++) {
		struct rte_mbuf *m;

		if (fb->out[i] < SW_MAX_PORTS)
			continue;
		m = vhf_burst_mbuf(w->vb, i);
		if (unlikely(m == NULL)) {
			/* The pool is short for a moment: I and the frames after it stay in the
			 * guest's ring for the next poll, as vhf_rx_burst() leaves them. */
			vhf_burst_cut(w->vb, i);
			n = i;
			break;
		}
		w->rx[n_mbuf++] = m;
	}
	if (taken > 0 && s->ops->fast_count != NULL)
		s->ops->fast_count(s->fwd, in->sw_index, v->hdr, v->hdr_len, v->len, n, fb);
	if (n_mbuf < n) {
		struct port_counters *ic = &in->counters[w->id];

		for (i = 0; i < n; i++)
			bytes += fb->out[i] < SW_MAX_PORTS ? v->len[i] : 0;
		stats_add(&ic->rx_packets, (uint64_t)(n - n_mbuf));
		stats_add(&ic->rx_bytes, bytes);
		copy_direct(w, s, ic, fb, n);
	}
	vhf_burst_end(w->vb);
	if (n_mbuf > 0)
		serve_burst(w, in, w->rx, n_mbuf);
	*got += n;
	return true;
}

/*
 * A burst from a memif port of sluice's own (memif_fast.h) whose switch sends everything
 * from it to one other such port, unchanged (patch; flow with rules on the input port
 * alone): each frame is copied once, client buffer to client buffer (or, to a fast
 * vhost-user port, into its guest's buffers: serve_cross), and the counters move as
 * serve_burst would move them. Returns false, having done nothing, when the burst must
 * take the mbuf path (another output, a client not connected), which then counts it.
 */
static bool serve_memif_direct(struct worker *w, struct port *in, uint64_t *got)
{
	struct sw *s = in->sw;
	struct fwd_direct_result r;
	struct port *out = fixed_output_port(w, in);

	if (out == NULL)
		return false;
	/* vhf_direct: a fast vhost-user port not being captured (capture.h) */
	if (__atomic_load_n(&out->vhf_direct, __ATOMIC_RELAXED) != NULL)
		return serve_cross(w, s, in, out, got);
	if (out->mff == NULL)
		return false;
	if (mff_forward(in->mff, out->mff, (uint16_t)w->id, (uint16_t)config.burst,
			__atomic_load_n(&out->max_frame, __ATOMIC_RELAXED), &r) != 0)
		return false;
	count_direct(w, s, in, out, &r);
	*got += r.rx;
	return true;
}

/* Adds a burst's cycles since T0 and its N frames to queue RQ's counters (only this
 * worker writes them; the control thread reads); returns the time it read, the burst's end. */
static inline uint64_t rxq_account(struct port_rxq *rq, uint64_t t0, uint64_t n)
{
	uint64_t t1 = rte_rdtsc();

	__atomic_store_n(&rq->cycles, rq->cycles + (t1 - t0), __ATOMIC_RELAXED);
	__atomic_store_n(&rq->packets, rq->packets + n, __ATOMIC_RELAXED);
	return t1;
}

/*
 * Receives and serves one burst from receive queue Q of its port; the frames it took. The
 * cycles from the worker's last clock read (*CLOCK: the end of the burst before, or of the
 * idle pass before) to the end of the burst's sending are the queue's (port_rxq), for the
 * assignment of queues by measured load (rxq.c); *CLOCK becomes that end. One TSC read a
 * burst and none for an empty poll: a read costs tens of cycles in a VM, as much as a
 * frame's forwarding, so an empty poll's few cycles go to the next burst's queue instead.
 * Idle time is not counted, so a worker that shares its CPU is charged for being
 * descheduled only in proportion to the time it spends serving.
 * A fast vhost-user port has queue 0 only (portspec refuses queues>1 there), so its
 * guest-to-guest path needs no queue number.
 */
static inline uint64_t poll_port(struct worker *w, const struct wk_rxq *q, uint64_t *clock)
{
	struct port *p = q->port;
	struct port_rxq *rq = &p->rxq[q->queue];
	uint64_t t0 = *clock;
	uint64_t got = 0;
	uint16_t n;

	w->fb.tsc = t0;         /* the forwarding function's time too (meters, rule use) */

	/* vhf_direct: the port is a fast one, and not being captured (capture.h) */
	if (__atomic_load_n(&p->vhf_direct, __ATOMIC_RELAXED) != NULL) {
		bool done;

		burst_seq_step(w);
		done = serve_vhost_direct(w, p, &got) || serve_vhost_frames(w, p, &got);
		burst_seq_step(w);
		if (done) {
			if (got > 0)
				*clock = rxq_account(rq, t0, got);
			return got;
		}
	}
	if (p->mff != NULL) {
		bool done;

		burst_seq_step(w);
		done = serve_memif_direct(w, p, &got);
		burst_seq_step(w);
		if (done) {
			if (got > 0)
				*clock = rxq_account(rq, t0, got);
			return got;
		}
	}
	n = port_rx_burst_queue(p, q->queue, w->rx, (uint16_t)config.burst);
	if (n > 0) {
		uint16_t rest = n;

		burst_seq_step(w);
		if (unlikely(__atomic_load_n(&p->tunnels, __ATOMIC_RELAXED) != NULL))
			rest = serve_tunnels(w, p, w->rx, n);
		if (rest > 0)
			serve_burst(w, p, w->rx, rest);
		burst_seq_step(w);
		*clock = rxq_account(rq, t0, n);
	}
	return n;
}

/*
 * Sleeps once SPIN_TSC has passed since the last packet (LAST_BUSY), longer each time up
 * to the configured maximum, or to WK_DEEP_SLEEP_US once the worker has been idle for
 * DEEP_TSC.
 */
static bool idle_backoff(struct worker *w, uint64_t now, uint64_t last_busy,
			 uint64_t spin_tsc, uint64_t deep_tsc, uint64_t *sleep_ns)
{
	uint64_t cap_ns = config.idle_sleep_us * UINT64_C(1000);
	struct timespec ts;

	if (config.idle_sleep_us == 0 || now - last_busy < spin_tsc)
		return false;
	if (now - last_busy >= deep_tsc)
		cap_ns = RTE_MAX(cap_ns, WK_DEEP_SLEEP_US * UINT64_C(1000));
	ts.tv_sec = 0;
	ts.tv_nsec = (long)*sleep_ns;
	rte_rcu_qsbr_thread_offline(qsbr, w->id);
	__atomic_store_n(&w->asleep, true, __ATOMIC_RELAXED);
	nanosleep(&ts, NULL);
	__atomic_store_n(&w->asleep, false, __ATOMIC_RELAXED);
	rte_rcu_qsbr_thread_online(qsbr, w->id);
	w->sleeps++;
	if (*sleep_ns < cap_ns)
		*sleep_ns = RTE_MIN(*sleep_ns * 2, cap_ns);
	return true;
}

static int wk_main(void *arg)
{
	struct worker *w = arg;
	uint64_t last = rte_rdtsc(), clock = last, last_busy = last, now;
	uint64_t sleep_ns = WK_FIRST_SLEEP_NS;
	const uint64_t spin_tsc = rte_get_tsc_hz() / 1000000 * WK_SPIN_US;
	const uint64_t deep_tsc = rte_get_tsc_hz() / 1000 * WK_DEEP_AFTER_MS;
	unsigned int i;

	/* The kernel's default 50 us timer slack would stretch every short idle sleep. */
	prctl(PR_SET_TIMERSLACK, 1000UL);
	in_worker = true;
	rte_rcu_qsbr_thread_register(qsbr, w->id);
	rte_rcu_qsbr_thread_online(qsbr, w->id);
	while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
		const struct wk_plan *plan = __atomic_load_n(&w->plan, __ATOMIC_ACQUIRE);
		uint64_t got = 0;

		for (i = 0; i < plan->n; i++)
			got += poll_port(w, &plan->q[i], &clock);
		if (unlikely(rte_ring_count(w->inject) > 0))
			got += serve_injected(w);
		rte_rcu_qsbr_quiescent(qsbr, w->id);
		if (got > 0) {
			/* The last burst's end (its queue's clock read), unless only injected
			 * frames were served. */
			now = clock != last ? clock : rte_rdtsc();
			w->busy_cycles += now - last;
			w->packets += got;
			last_busy = now;
			sleep_ns = WK_FIRST_SLEEP_NS;
		} else {
			now = rte_rdtsc();
			if (idle_backoff(w, now, last_busy, spin_tsc, deep_tsc, &sleep_ns))
				now = rte_rdtsc();
			w->idle_cycles += now - last;
		}
		last = clock = now;
		w->loops++;
	}
	rte_rcu_qsbr_thread_offline(qsbr, w->id);
	rte_rcu_qsbr_thread_unregister(qsbr, w->id);
	return 0;
}

int wk_init(unsigned int n, const struct wk_config *cfg)
{
	char name[RTE_RING_NAMESIZE];
	unsigned int lcore, i = 0;
	size_t sz;

	if (n == 0 || n > WK_MAX_WORKERS || n > rte_lcore_count() - 1) {
		LOG(ERR, "need %u worker lcores, the EAL has %u besides the main one", n,
		    rte_lcore_count() - 1);
		return -1;
	}
	config = *cfg;
	sz = rte_rcu_qsbr_get_memsize(n);
	qsbr = rte_zmalloc("wk_qsbr", sz, RTE_CACHE_LINE_SIZE);
	if (qsbr == NULL || rte_rcu_qsbr_init(qsbr, n) != 0)
		return -1;
	RTE_LCORE_FOREACH_WORKER(lcore) {
		struct worker *w;

		if (i == n)
			break;
		w = rte_zmalloc_socket("worker", sizeof(*w), RTE_CACHE_LINE_SIZE,
				       (int)rte_lcore_to_socket_id(lcore));
		if (w == NULL)
			return -1;
		w->plan = rte_zmalloc("wk_plan", sizeof(struct wk_plan), 0);
		w->spare = rte_zmalloc("wk_plan", sizeof(struct wk_plan), 0);
		w->vb = vhf_burst_create((int)rte_lcore_to_socket_id(lcore));
		if (w->plan == NULL || w->spare == NULL || w->vb == NULL)
			return -1;
		/* room for one super-frame's segments (complete_offloads) */
		w->pool = pool_reserve((int)rte_lcore_to_socket_id(lcore), WK_MAX_SEGS);
		if (w->pool == NULL)
			return -1;
		snprintf(name, sizeof(name), "wk_inject%u", i);
		w->inject = rte_ring_create_elem(name, sizeof(struct wk_injected), WK_INJECT_RING,
						 (int)rte_lcore_to_socket_id(lcore),
						 RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (w->inject == NULL)
			return -1;
		w->id = i;
		w->fb.worker = (uint16_t)i;
		w->lcore = lcore;
		workers[i++] = w;
	}
	n_workers = n;
	return 0;
}

int wk_start(void)
{
	unsigned int i;
	int rc;

	for (i = 0; i < n_workers; i++) {
		rc = rte_eal_remote_launch(wk_main, workers[i], workers[i]->lcore);
		if (rc != 0) {
			LOG(ERR, "cannot start worker %u on lcore %u: %s", i, workers[i]->lcore,
			    rte_strerror(-rc));
			return -1;
		}
		LOG(INFO, "worker %u polling on lcore %u (cpu %d)", i, workers[i]->lcore,
		    wk_lcore_cpu(workers[i]->lcore));
	}
	__atomic_store_n(&polling, true, __ATOMIC_RELEASE);
	return 0;
}

void wk_stop(void)
{
	unsigned int i;

	for (i = 0; i < n_workers; i++)
		__atomic_store_n(&workers[i]->stop, true, __ATOMIC_RELAXED);
	for (i = 0; i < n_workers; i++)
		rte_eal_wait_lcore(workers[i]->lcore);
	__atomic_store_n(&polling, false, __ATOMIC_RELEASE);
}

void wk_fini(void)
{
	unsigned int i;

	for (i = 0; i < n_workers; i++) {
		struct wk_injected it;

		while (rte_ring_sc_dequeue_elem(workers[i]->inject, &it, sizeof(it)) == 0)
			rte_pktmbuf_free(it.m);
		rte_ring_free(workers[i]->inject);
		rte_free(workers[i]->plan);
		rte_free(workers[i]->spare);
		vhf_burst_free(workers[i]->vb);
		rte_free(workers[i]);
		workers[i] = NULL;
	}
	rte_free(qsbr);
	qsbr = NULL;
	n_workers = 0;
	wk_defer_reclaim();     /* the workers have stopped: every deferred free is due */
}

static uint64_t loops_of(const struct worker *w)
{
	return __atomic_load_n(&w->loops, __ATOMIC_RELAXED);
}

/* True while a worker found stuck by an earlier wait has not moved since. */
static bool known_stuck(void)
{
	bool any = false;
	unsigned int i;

	for (i = 0; i < n_workers; i++) {
		struct worker *w = workers[i];

		if (w->stuck && loops_of(w) == w->stuck_loops)
			any = true;
		else if (w->stuck) {
			w->stuck = false;
			LOG(NOTICE, "worker %u moves again", w->id);
		}
	}
	return any;
}

/* Names and counts the workers that neither slept nor looped since LOOPS were read. */
static void mark_stuck(const uint64_t *loops)
{
	unsigned int i;

	for (i = 0; i < n_workers; i++) {
		struct worker *w = workers[i];

		if (__atomic_load_n(&w->asleep, __ATOMIC_RELAXED) || loops_of(w) != loops[i])
			continue;
		w->stuck = true;
		w->stuck_loops = loops[i];
		__atomic_store_n(&w->stalls, w->stalls + 1, __ATOMIC_RELAXED);
		LOG(ERR, "worker %u (lcore %u) passed no quiescent state in %u ms: stuck", w->id,
		    w->lcore, WK_GRACE_MS);
	}
}

/* Polls TOKEN until every worker has passed it or DEADLINE (TSC) passes: spins first, then
 * naps, so a wait that lasts sleeps rather than burns the control CPU. */
static bool wait_token(uint64_t token, uint64_t deadline)
{
	uint64_t spin_until = rte_rdtsc() + rte_get_tsc_hz() / 1000;

	while (rte_rcu_qsbr_check(qsbr, token, false) == 0) {
		if (rte_rdtsc() > deadline)
			return false;
		if (rte_rdtsc() < spin_until)
			rte_pause();
		else
			rte_delay_us_sleep(100);
	}
	return true;
}

int wk_inject(struct port *in, struct port *out, struct rte_mbuf *m)
{
	const struct port *via = out != NULL ? out : in;
	struct worker *w;
	struct wk_injected it = { .m = m, .in = in, .out = out };

	if (n_workers == 0 || via == NULL)
		return -1;
	w = workers[via->worker >= 0 && (unsigned int)via->worker < n_workers ? via->worker : 0];
	if (rte_ring_sp_enqueue_elem(w->inject, &it, sizeof(it)) != 0)
		return -1;
	w->inject_sent++;
	return 0;
}

/*
 * Waits until every worker has served the frames handed to it, up to DEADLINE (TSC). A
 * worker asleep is RCU-offline, so a grace period alone would not mean it is done with
 * the ports its queued frames name; this does. False when one is still not done.
 */
static bool wk_inject_wait(uint64_t deadline)
{
	unsigned int i;

	if (in_worker || !__atomic_load_n(&polling, __ATOMIC_ACQUIRE))
		return true;
	for (i = 0; i < n_workers; i++)
		while (__atomic_load_n(&workers[i]->inject_done, __ATOMIC_ACQUIRE) !=
		       workers[i]->inject_sent) {
			if (rte_rdtsc() > deadline)
				return false;
			rte_pause();
		}
	return true;
}

bool wk_synchronize(void)
{
	uint64_t loops[WK_MAX_WORKERS], token;
	unsigned int i;

	if (qsbr == NULL)
		return true;
	if (!wk_inject_wait(rte_rdtsc() + rte_get_tsc_hz() / 1000 * WK_GRACE_MS))
		LOG(WARNING, "a worker has not served the frames handed to it (packet-out)");
	token = rte_rcu_qsbr_start(qsbr);
	if (rte_rcu_qsbr_check(qsbr, token, false) != 0)
		return true;
	/* A worker known stuck is not waited for again: the control thread stays responsive. */
	if (known_stuck())
		return false;
	for (i = 0; i < n_workers; i++)
		loops[i] = loops_of(workers[i]);
	if (wait_token(token, rte_rdtsc() + rte_get_tsc_hz() / 1000 * WK_GRACE_MS))
		return true;
	mark_stuck(loops);
	return false;
}

bool wk_quiesce(void)
{
	if (!in_worker && __atomic_load_n(&polling, __ATOMIC_ACQUIRE))
		return wk_synchronize();
	return true;
}

/* A free waiting for the grace period that began when it was asked for. */
struct wk_deferred {
	struct wk_deferred *next;
	uint64_t token;
	void (*fn)(void *arg);
	void *arg;
};

/* Oldest first: tokens only grow, so the reclaim stops at the first one not yet passed. */
static struct wk_deferred *defer_head, **defer_tail = &defer_head;
static unsigned int defer_count;

int wk_defer(void (*fn)(void *arg), void *arg)
{
	struct wk_deferred *d;

	if (qsbr == NULL) {     /* no workers (unit tests, start-up): nobody can read it */
		fn(arg);
		return 0;
	}
	d = malloc(sizeof(*d));
	if (d == NULL) {
		LOG(ERR, "no memory to defer a free: %p is leaked", arg);
		return -1;
	}
	d->next = NULL;
	d->token = rte_rcu_qsbr_start(qsbr);
	d->fn = fn;
	d->arg = arg;
	*defer_tail = d;
	defer_tail = &d->next;
	defer_count++;
	return 0;
}

void wk_defer_reclaim(void)
{
	while (defer_head != NULL && (qsbr == NULL ||
				      rte_rcu_qsbr_check(qsbr, defer_head->token, false) != 0)) {
		struct wk_deferred *d = defer_head;

		defer_head = d->next;
		if (defer_head == NULL)
			defer_tail = &defer_head;
		defer_count--;
		d->fn(d->arg);
		free(d);
	}
}

unsigned int wk_defer_pending(void)
{
	return defer_count;
}

/* What replace_plan() changes: a queue to add (PORT NULL: none), and a port's queue to
 * remove (QUEUE WK_ALL_QUEUES: every queue of it). */
#define WK_ALL_QUEUES UINT16_MAX
struct wk_change {
	struct port *add;
	uint16_t add_queue;
	struct port *remove;
	uint16_t remove_queue;
};

static bool removes(const struct wk_change *c, const struct wk_rxq *q)
{
	return q->port == c->remove &&
	       (c->remove_queue == WK_ALL_QUEUES || q->queue == c->remove_queue);
}

/*
 * Publishes W's plan changed by C, written into the spare plan; the old plan becomes the
 * spare once no worker can be reading it. Returns 0 when a grace period has passed since
 * the publication (no worker polls what was removed any more), 1 when a stuck worker kept
 * it from passing, -ENOMEM when an earlier change left no spare (a stuck worker) and no
 * memory is left for one, or -ENOSPC when the plan is full.
 */
static int replace_plan(struct worker *w, const struct wk_change *c)
{
	struct wk_plan *old = w->plan, *plan = w->spare;
	unsigned int i;

	if (c->add != NULL && old->n >= WK_MAX_RXQS)
		return -ENOSPC;
	if (plan == NULL && (plan = rte_zmalloc("wk_plan", sizeof(*plan), 0)) == NULL)
		return -ENOMEM;
	w->spare = NULL;
	plan->n = 0;
	for (i = 0; i < old->n; i++)
		if (!removes(c, &old->q[i]))
			plan->q[plan->n++] = old->q[i];
	if (c->add != NULL)
		plan->q[plan->n++] = (struct wk_rxq){ .port = c->add, .queue = c->add_queue };
	__atomic_store_n(&w->plan, plan, __ATOMIC_RELEASE);
	if (wk_synchronize()) {
		w->spare = old;
		return 0;
	}
	/* a stuck worker may still read it: left allocated for ever */
	LOG(WARNING, "worker %u: its old receive plan is left allocated", w->id);
	return 1;
}

static unsigned int fewest_queues(void)
{
	unsigned int i, best = 0;

	for (i = 1; i < n_workers; i++)
		if (workers[i]->plan->n < workers[best]->plan->n)
			best = i;
	return best;
}

static wk_place_fn place_fn;

void wk_set_placement(wk_place_fn fn)
{
	place_fn = fn;
}

unsigned int wk_rxq_count(unsigned int id)
{
	return id < n_workers ? workers[id]->plan->n : 0;
}

int wk_add_port(struct port *p)
{
	struct wk_change c = { .add = p };
	unsigned int q, to;

	for (q = 0; q < p->n_rxq; q++) {
		to = place_fn != NULL ? place_fn(p, q) : fewest_queues();
		if (to >= n_workers)
			to = fewest_queues();
		c.add_queue = (uint16_t)q;
		if (replace_plan(workers[to], &c) < 0) {
			wk_remove_port(p);
			return -1;
		}
		p->rxq_worker[q] = (int)to;
	}
	p->worker = p->rxq_worker[0];
	return 0;
}

int wk_remove_port(struct port *p)
{
	struct wk_change c = { .remove = p, .remove_queue = WK_ALL_QUEUES };
	bool on[WK_MAX_WORKERS] = { false };
	unsigned int q, i;

	for (q = 0; q < p->n_rxq; q++)
		if (p->rxq_worker[q] >= 0)
			on[p->rxq_worker[q]] = true;
	for (i = 0; i < n_workers; i++)
		if (on[i] && replace_plan(workers[i], &c) < 0)
			return -1;
	for (q = 0; q < PORT_MAX_RXQ; q++)
		p->rxq_worker[q] = -1;
	p->worker = -1;
	return 0;
}

/*
 * Why a move neither loses nor reorders the frames of a flow (a flow's frames arrive on
 * one queue, the peer's choice). Inside sluiced: the queue leaves the old worker's plan
 * first, and replace_plan() waits for a grace period, which is the old worker's
 * acknowledgement. A worker passes a quiescent state only between passes over its plan,
 * after every burst it took has been handed to its outputs' transmit queues (or counted
 * dropped: sluiced holds no frame back between bursts), and it goes offline only to sleep,
 * also between passes; so once the grace period is over the old worker holds no frame of
 * the queue and will never poll it again. Only then does the queue enter the new worker's
 * plan: frames that arrive in between wait in the queue's ring, none is dropped by the
 * move, and the single-writer rule of port_rxq holds.
 *
 * Outside: the new worker sends on its own transmit queue of each output, and a receiver
 * that reads several queues of one port (a memif client with queues=, a multi-queue guest)
 * reads them in an order of its own: it could read the new queue before the old one's last
 * frames. No port kind here tells when its peer has read a transmit ring (memif, vhost-user
 * and virtio-user have no descriptor status), so the control thread sleeps GAP_US more
 * before the new worker starts: time for such a receiver to read the old queue, whichever
 * of the two it reads first. How long it needs is the receiver's business (a poller reads
 * within microseconds unless it is descheduled; a guest's interrupt path takes longer), so
 * the gap is a setting (set-rebalance move_gap_us, --rxq-move-gap-us). The default, 1 ms,
 * is five times the 200 us this began with, with which one six-move run saw 1,184 frames
 * out of order at a sluice-gen sharing the control thread's CPU (test_rxq.py moves both
 * ways and checks order). The moved queue's ring holds what arrives meanwhile (1024
 * descriptors: 1 ms is 1 Mpps); faster queues and receivers want a shorter gap. If the
 * grace period cannot end (a stuck worker) the queue goes back where it was.
 */
int wk_move_rxq(struct port *p, unsigned int q, unsigned int to, unsigned int gap_us)
{
	struct wk_change c = { .remove = p, .remove_queue = (uint16_t)q };
	int from, rc;

	if (q >= p->n_rxq || to >= n_workers)
		return -EINVAL;
	from = p->rxq_worker[q];
	if (from == (int)to)
		return 0;
	if (from >= 0) {
		rc = replace_plan(workers[from], &c);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			c = (struct wk_change){ .add = p, .add_queue = (uint16_t)q };
			replace_plan(workers[from], &c);
			return -EBUSY;
		}
		p->rxq_worker[q] = -1;
		if (gap_us > 0)
			rte_delay_us_sleep(gap_us);
	}
	c = (struct wk_change){ .add = p, .add_queue = (uint16_t)q };
	rc = replace_plan(workers[to], &c);
	if (rc < 0 && from >= 0 && replace_plan(workers[from], &c) >= 0)
		p->rxq_worker[q] = from;        /* back where it was */
	if (rc < 0)
		return rc;
	p->rxq_worker[q] = (int)to;
	if (q == 0)
		p->worker = (int)to;
	return 0;
}

void wk_read_stats(unsigned int id, struct wk_stats *st)
{
	const struct worker *w = workers[id];

	memset(st, 0, sizeof(*st));
	st->id = id;
	st->lcore = w->lcore;
	st->loops = __atomic_load_n(&w->loops, __ATOMIC_RELAXED);
	st->busy_cycles = __atomic_load_n(&w->busy_cycles, __ATOMIC_RELAXED);
	st->idle_cycles = __atomic_load_n(&w->idle_cycles, __ATOMIC_RELAXED);
	st->packets = __atomic_load_n(&w->packets, __ATOMIC_RELAXED);
	st->sleeps = __atomic_load_n(&w->sleeps, __ATOMIC_RELAXED);
	st->injected = __atomic_load_n(&w->inject_done, __ATOMIC_RELAXED);
	st->inject_dropped = __atomic_load_n(&w->inject_dropped, __ATOMIC_RELAXED);
	st->stalls = __atomic_load_n(&w->stalls, __ATOMIC_RELAXED);
	st->stuck = w->stuck;
	st->rx_queues = w->plan->n;
}

uint32_t wk_counters_begin(unsigned int id, uint64_t give_up)
{
	const struct worker *w = workers[id];
	uint64_t now = rte_get_timer_cycles(), spin_until = now + rte_get_timer_hz() / 10000;
	uint32_t seq;

	while (((seq = __atomic_load_n(&w->burst_seq, __ATOMIC_RELAXED)) & 1) != 0 &&
	       (now = rte_get_timer_cycles()) < give_up) {
		if (now < spin_until)
			rte_pause();
		else
			rte_delay_us_sleep(50);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return seq & ~1u;
}

bool wk_counters_changed(unsigned int id, uint32_t seq)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&workers[id]->burst_seq, __ATOMIC_RELAXED) != seq;
}
