/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen's sending streams: frames built, paced and given to the ports, in open or
 * closed loop (load.h), counted as offered and accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "gen.h"

/*
 * Writes frame SEQ of sender S into M; its size with FCS. FLOW and PORT_FLOW are SEQ's flow
 * (SEQ mod --flows) and its port share (FLOW mod TRAFFIC_PORT_FLOWS), kept as counters by
 * the caller, used when one size and many flows let the template be patched. A prebuilt
 * buffer (S->pool) holds S's frame already: only what varies is written.
 */
static uint16_t fill_frame(const struct gen *g, const struct sender *s, struct rte_mbuf *m,
			   uint64_t seq, uint64_t tsc, uint8_t flags, uint32_t flow,
			   uint32_t port_flow)
{
	const struct traffic *t = &g->o.traffic;
	bool one_size = g->fixed_headers || g->flow_template, built = s->pool != NULL;
	uint16_t size = one_size ? g->fixed_size : traffic_size(t, seq);
	uint16_t len = (uint16_t)(size - RTE_ETHER_CRC_LEN);
	uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
	struct traffic_payload *pl = (struct traffic_payload *)(d + TRAFFIC_HDR_LEN);
	bool macs_written = !built;

	if (one_size && !built)
		rte_memcpy(d, g->headers, TRAFFIC_HDR_LEN);
	if (g->flow_template) {
		/* It writes whole fields, so it turns any flow's headers into FLOW's. */
		traffic_set_flow(t, d, flow, port_flow);
		macs_written |= t->vary_mac;
	} else if (!g->fixed_headers) {
		traffic_write_headers(t, d, len, t->flows > 1 ? (uint32_t)(seq % t->flows) : 0);
		macs_written = true;
	}
	if (s->set_addrs && macs_written)
		vnf_rewrite(d, s->addrs);
	if (!built) {
		pl->magic = TRAFFIC_MAGIC;
		pl->stream = s->id;
	}
	if (gen_stamped(&g->o)) {
		pl->flags = flags;
		pl->seq = (uint32_t)seq;
		pl->tsc = tsc;
	} else if (!built) {
		pl->flags = 0;
		pl->seq = 0;
		pl->tsc = 0;
	}
	m->data_len = len;
	m->pkt_len = len;
	return size;
}

/*
 * Is a new burst due on S at TSC? Pacing is per burst of --burst frames; a loop that fell
 * more than 100 ms behind (its CPU was taken away) starts afresh rather than send a long
 * burst to catch up, and the shortfall shows in offered_pps.
 */
static bool burst_due(const struct gen *g, struct sender *s, uint64_t tsc)
{
	if (g->o.rate_pps <= 0)
		return true;
	if (tsc < s->next_tsc)
		return false;
	s->next_tsc += (uint64_t)((double)g->hz * g->o.burst / g->o.rate_pps);
	if (s->next_tsc + g->hz / 10 < tsc)
		s->next_tsc = tsc;
	return true;
}

/* --tx-frames refcnt: the one frame N times, its reference count raised once. */
static void share_burst(const struct gen *g, struct sender *s, uint16_t n)
{
	uint16_t i;

	rte_mbuf_refcnt_update(s->shared, (int16_t)n);
	for (i = 0; i < n; i++) {
		s->pending[i] = s->shared;
		s->pending_size[i] = g->fixed_size;
	}
}

/* N buffers for S's frames: its own pool of built frames, or the shared one. */
static bool get_buffers(const struct gen *g, struct sender *s, uint16_t n)
{
	if (s->pool == NULL)
		return rte_pktmbuf_alloc_bulk(g->pool, s->pending, n) == 0;
	/*
	 * Raw buffers: a frame comes back to the pool as it was sent (the transmit paths that
	 * free it reset only a chain's fields, which ours never use), so there is nothing to
	 * reset; fill_frame() sets the lengths.
	 */
	return rte_mempool_generic_get(s->pool, (void **)s->pending, n, s->cache) == 0;
}

/*
 * The lines a burst's frames are written in, asked for before the first write. A buffer that
 * went out before was read by the switch on the other CPU, so each write must first take its
 * line back; asked for together, those transfers overlap instead of stalling one store after
 * another (the stamp writes were the sender's largest cost through a switch: docs/gen.md, SPEED).
 */
static void prefetch_for_write(struct rte_mbuf *const *m, uint16_t n)
{
	uint16_t i;

	for (i = 0; i < n; i++) {
		const void *p = rte_pktmbuf_mtod_offset(m[i], void *, TRAFFIC_HDR_LEN);
#if defined(__x86_64__)
		/* DPDK builds for corei7, where __builtin_prefetch(p, 1, ...) gives a read
		 * prefetch; PREFETCHW's opcode is a no-op on the x86 CPUs that lack it. */
		__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
		__builtin_prefetch(p, 1, 3);
#endif
	}
}

/* A new burst of --burst frames in S's pending slots; false when the pool is empty. */
static bool make_burst(const struct gen *g, struct sender *s, uint64_t tsc, uint8_t flags)
{
	uint32_t flows = g->o.traffic.flows, flow = 0, port_flow = 0;
	uint16_t i, n = g->o.burst;

	if (s->shared != NULL) {
		share_burst(g, s, n);
		goto made;
	}
	if (!get_buffers(g, s, n))
		return false;
	if (s->pool != NULL && g->fixed_headers && !gen_stamped(&g->o)) {
		for (i = 0; i < n; i++)  /* constant frames: nothing to write */
			s->pending_size[i] = g->fixed_size;
		goto made;
	}
	prefetch_for_write(s->pending, n);
	if (g->flow_template) {      /* one division a burst, counters for its frames */
		flow = (uint32_t)(s->next_seq % flows);
		port_flow = flow % TRAFFIC_PORT_FLOWS;
	}
	for (i = 0; i < n; i++) {
		s->pending_size[i] = fill_frame(g, s, s->pending[i], s->next_seq + i, tsc, flags,
						flow, port_flow);
		if (++flow == flows)
			flow = port_flow = 0;
		else if (++port_flow == TRAFFIC_PORT_FLOWS)
			port_flow = 0;
	}
made:
	s->head = 0;
	s->n = n;
	return true;
}

/* Closed loop: frames offered again carry the time and measured flag of this attempt. */
static void restamp(struct sender *s, uint64_t tsc, uint8_t flags)
{
	uint16_t i;

	for (i = s->head; i < s->n; i++) {
		struct traffic_payload *pl = rte_pktmbuf_mtod_offset(s->pending[i],
			struct traffic_payload *, TRAFFIC_HDR_LEN);

		pl->tsc = tsc;
		pl->flags = flags;
	}
}

/*
 * Gives S's pending frames to the port. Open loop: what it refuses is freed, never sent
 * again, and counted as not accepted. Closed loop: it stays pending for the next pass.
 * Sequence numbers go to accepted frames only, so a refusal is never a gap at the sink.
 */
static uint16_t transmit(const struct gen *g, struct sender *s, uint8_t flags)
{
	uint16_t tried = (uint16_t)(s->n - s->head), sent, i;
	uint64_t bytes = 0;

	sent = rte_eth_tx_burst(s->tx, 0, &s->pending[s->head], tried);
	for (i = 0; i < sent; i++)
		bytes += s->pending_size[s->head + i];
	load_tally_burst(&s->all, g->o.load, tried, sent, bytes);
	if (flags)
		load_tally_burst(&s->measured, g->o.load, tried, sent, bytes);
	s->next_seq += sent;
	s->head = (uint16_t)(s->head + sent);
	if (g->o.load == LOAD_OPEN && s->head < s->n) {
		rte_pktmbuf_free_bulk(&s->pending[s->head], s->n - s->head);
		s->head = s->n;
	}
	if (s->head == s->n)
		s->head = s->n = 0;
	return sent;
}

_Static_assert(VRING_PAYLOAD_OFF == VRING_BUF_SKEW + VRING_HDR_LEN + TRAFFIC_HDR_LEN &&
	       VRING_PAYLOAD_OFF % 64 == 0, "a virtio-raw frame's stamp starts a cache line");

/*
 * A virtio-raw stream (vring.h): its frames sit built in the port's transmit buffers, so a
 * burst writes only what varies (the flow's fields, the stamp) into the buffers it posts.
 * S->head..S->n counts the frames still owed, as the mbuf path's pending slots do: a
 * closed loop offers them again on the next pass, an open loop counts them not accepted.
 */
static uint16_t raw_transmit(const struct gen *g, struct sender *s, uint64_t tsc, uint8_t flags)
{
	uint16_t tried = (uint16_t)(s->n - s->head), room = vring_tx_room(s->raw), i;
	uint16_t sent = tried < room ? tried : room;
	uint32_t flows = g->o.traffic.flows, flow = 0, port_flow = 0;
	bool stamp = gen_stamped(&g->o);
	uint64_t seq = s->next_seq;

	if (g->flow_template) {
		flow = (uint32_t)(seq % flows);
		port_flow = flow % TRAFFIC_PORT_FLOWS;
	}
	for (i = 0; (stamp || g->flow_template) && i < sent; i++) {
		uint8_t *d = vring_tx_frame(s->raw, i);
		struct traffic_payload *pl = (struct traffic_payload *)(d + TRAFFIC_HDR_LEN);

		if (g->flow_template) {
			traffic_set_flow(&g->o.traffic, d, flow, port_flow);
			if (s->set_addrs && g->o.traffic.vary_mac)
				vnf_rewrite(d, s->addrs);
			if (++flow == flows)
				flow = port_flow = 0;
			else if (++port_flow == TRAFFIC_PORT_FLOWS)
				port_flow = 0;
		}
		if (stamp) {
			/* The whole payload in one 16-byte store (it starts a line: vring.h). */
			struct traffic_payload v = { .magic = TRAFFIC_MAGIC, .stream = s->id,
				.flags = flags, .seq = (uint32_t)(seq + i), .tsc = tsc };

			memcpy(pl, &v, sizeof(v));
		}
	}
	vring_tx_post(s->raw, sent);
	load_tally_burst(&s->all, g->o.load, tried, sent, (uint64_t)sent * g->fixed_size);
	if (flags)
		load_tally_burst(&s->measured, g->o.load, tried, sent,
				 (uint64_t)sent * g->fixed_size);
	s->next_seq += sent;
	s->head = (uint16_t)(s->head + sent);
	if (g->o.load == LOAD_OPEN || s->head == s->n)
		s->head = s->n = 0;
	return sent;
}

static uint16_t raw_send_burst(struct gen *g, struct sender *s, uint64_t tsc)
{
	uint8_t flags = in_measurement(g, tsc) ? TRAFFIC_MEASURED : 0;

	if (tsc >= g->t_stop)
		return 0;
	if (s->n == s->head) {
		if (!burst_due(g, s, tsc))
			return 0;
		s->head = 0;
		s->n = g->o.burst;
	}
	return raw_transmit(g, s, tsc, flags);
}

/* One pass's sending on S: a closed loop's leftovers first, else a new burst when due. */
uint16_t tx_send_burst(struct gen *g, struct sender *s, uint64_t tsc)
{
	uint8_t flags = in_measurement(g, tsc) ? TRAFFIC_MEASURED : 0;

	if (s->raw != NULL)
		return raw_send_burst(g, s, tsc);
	/* The loop reads the clock only now and then; no frame leaves after --duration. */
	if (tsc >= g->t_stop)
		return 0;
	if (s->n > s->head) {
		if (gen_stamped(&g->o))
			restamp(s, tsc, flags);
		return transmit(g, s, flags);
	}
	if (!burst_due(g, s, tsc) || !make_burst(g, s, tsc, flags))
		return 0;
	return transmit(g, s, flags);
}

/* Frames a closed loop still held when sending stopped: never sent, so never counted. */
void tx_drop_pending(struct sender *s)
{
	if (s->n > s->head && s->raw == NULL)
		rte_pktmbuf_free_bulk(&s->pending[s->head], s->n - s->head);
	s->head = s->n = 0;
}

/* ---- set-up: --tx-frames ---- */

static const char *const tx_frames_names[] = { "auto", "copy", "prebuilt", "refcnt" };

const char *tx_frames_name(enum tx_frames f)
{
	return tx_frames_names[f];
}

int tx_parse_frames(const char *s, enum tx_frames *f)
{
	unsigned int i;

	for (i = 0; i < RTE_DIM(tx_frames_names); i++)
		if (strcmp(s, tx_frames_names[i]) == 0) {
			*f = (enum tx_frames)i;
			return 0;
		}
	return -1;
}

/*
 * Buffers enough for S's port to hold a full transmit ring (virtio-user frees sent buffers
 * lazily) twice over, the largest bursts pending, and the pool's cache.
 */
static unsigned int tx_pool_size(const struct opts *o)
{
	return 2u * o->ring + 2u * GEN_MAX_BURST + 1024;
}

/* S's frame at D: headers, MACs, payload (stamps zero); its length without FCS. */
static uint16_t write_frame(const struct gen *g, const struct sender *s, uint8_t *d)
{
	uint16_t len = (uint16_t)(g->fixed_size - RTE_ETHER_CRC_LEN);
	struct traffic_payload *pl = (struct traffic_payload *)(d + TRAFFIC_HDR_LEN);

	memset(d, 0, len);
	rte_memcpy(d, g->headers, TRAFFIC_HDR_LEN);
	if (s->set_addrs)
		vnf_rewrite(d, s->addrs);
	*pl = (struct traffic_payload){ .magic = TRAFFIC_MAGIC, .stream = s->id };
	return len;
}

/* A buffer holding S's frame: headers, MACs, payload (stamps zero), lengths. */
static void build_frame(const struct gen *g, const struct sender *s, struct rte_mbuf *m)
{
	uint16_t len = write_frame(g, s, rte_pktmbuf_mtod(m, uint8_t *));

	m->data_len = len;
	m->pkt_len = len;
}

/* A virtio-raw stream: its frame in every transmit buffer of its port. */
static int raw_frames(struct gen *g, struct sender *s, enum tx_frames f)
{
	uint8_t frame[VRING_MAX_FRAME];

	if (f != TX_FRAMES_PREBUILT) {
		fprintf(stderr, "sluice-gen: --tx-frames %s: a " VRING_KIND " port's frames are "
			"always prebuilt in its own buffers\n", tx_frames_names[f]);
		return -1;
	}
	write_frame(g, s, frame);
	vring_set_frame(s->raw, frame);
	/* Stamped: a burst's buffers kept back, their lines fetched ahead (vring.h). */
	if (gen_stamped(&g->o))
		s->raw->tx_reserve = RTE_MIN(g->o.burst, (uint16_t)(s->raw->tx.size / 4));
	return 0;
}

/*
 * S's own pool, every buffer built once: taken out all at once, built, put back. From then
 * on a buffer leaves this pool only as S's frame and comes back (freed by the port) as one.
 */
static int build_pool(struct gen *g, struct sender *s, uint16_t buf_size)
{
	unsigned int n = tx_pool_size(&g->o), i;
	struct rte_mbuf **all = malloc(n * sizeof(*all));
	char name[RTE_MEMPOOL_NAMESIZE];

	snprintf(name, sizeof(name), "gen_tx%u", s->id);
	s->pool = rte_pktmbuf_pool_create(name, n, 256, 0, buf_size, (int)rte_socket_id());
	if (s->pool == NULL || all == NULL || rte_pktmbuf_alloc_bulk(s->pool, all, n) != 0) {
		fprintf(stderr, "sluice-gen: no transmit pool for stream %u: %s\n", s->id,
			rte_strerror(rte_errno));
		free(all);
		return -1;
	}
	for (i = 0; i < n; i++)
		build_frame(g, s, all[i]);
	rte_pktmbuf_free_bulk(all, n);
	free(all);
	s->cache = rte_mempool_default_cache(s->pool, rte_lcore_id());
	return 0;
}

static int share_frame(struct gen *g, struct sender *s)
{
	s->shared = rte_pktmbuf_alloc(g->pool);
	if (s->shared == NULL) {
		fprintf(stderr, "sluice-gen: no buffer for stream %u's frame\n", s->id);
		return -1;
	}
	build_frame(g, s, s->shared);
	return 0;
}

/* Why --tx-frames F cannot be had here, or NULL. COPYING_PORTS: no port passes buffers. */
static const char *tx_frames_refused(const struct gen *g, enum tx_frames f, bool copying_ports)
{
	bool one_size = g->fixed_headers || g->flow_template;

	if (f == TX_FRAMES_COPY)
		return NULL;
	/* A ring port hands our buffer itself to a reflector or VNF of ours, which writes it. */
	if (!copying_ports)
		return "needs ports that copy frames (not ring)";
	if (f == TX_FRAMES_PREBUILT)
		return one_size ? NULL : "needs one --size";
	if (!g->fixed_headers || gen_stamped(&g->o))
		return "refcnt needs constant frames: --check none, one --size, one flow";
	return NULL;
}

int tx_setup(struct gen *g, bool copying_ports, uint16_t buf_size)
{
	enum tx_frames f = g->o.tx_frames;
	const char *why;
	unsigned int i;

	if (f == TX_FRAMES_AUTO)
		f = tx_frames_refused(g, TX_FRAMES_PREBUILT, copying_ports) ? TX_FRAMES_COPY
									  : TX_FRAMES_PREBUILT;
	why = tx_frames_refused(g, f, copying_ports);
	if (why != NULL) {
		fprintf(stderr, "sluice-gen: --tx-frames %s: %s\n", tx_frames_names[f], why);
		return -1;
	}
	g->o.tx_frames = f;
	for (i = 0; i < g->n_senders; i++)
		if (g->senders[i].raw != NULL) {
			if (raw_frames(g, &g->senders[i], f) != 0)
				return -1;
		} else if ((f == TX_FRAMES_PREBUILT && build_pool(g, &g->senders[i], buf_size) != 0) ||
		    (f == TX_FRAMES_REFCNT && share_frame(g, &g->senders[i]) != 0))
			return -1;
	return 0;
}
