/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen's sending streams: frames built, paced and given to the ports, in open or
 * closed loop (load.h), counted as offered and accepted.
 */
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "gen.h"

/*
 * Writes frame SEQ of sender S into M; its size with FCS. FLOW and PORT_FLOW are SEQ's flow
 * (SEQ mod --flows) and its port share (FLOW mod TRAFFIC_PORT_FLOWS), kept as counters by
 * the caller, used when one size and many flows let the template be patched.
 */
static uint16_t fill_frame(const struct gen *g, const struct sender *s, struct rte_mbuf *m,
			   uint64_t seq, uint64_t tsc, uint8_t flags, uint32_t flow,
			   uint32_t port_flow)
{
	const struct traffic *t = &g->o.traffic;
	bool one_size = g->fixed_headers || g->flow_template;
	uint16_t size = one_size ? g->fixed_size : traffic_size(t, seq);
	uint16_t len = (uint16_t)(size - RTE_ETHER_CRC_LEN);
	uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
	struct traffic_payload *pl = (struct traffic_payload *)(d + TRAFFIC_HDR_LEN);

	if (one_size)
		rte_memcpy(d, g->headers, TRAFFIC_HDR_LEN);
	if (g->flow_template)
		traffic_set_flow(t, d, flow, port_flow);
	else if (!g->fixed_headers)
		traffic_write_headers(t, d, len, t->flows > 1 ? (uint32_t)(seq % t->flows) : 0);
	if (s->set_addrs)
		vnf_rewrite(d, s->addrs);
	pl->magic = TRAFFIC_MAGIC;
	pl->stream = s->id;
	pl->flags = flags;
	pl->seq = (uint32_t)seq;
	pl->tsc = tsc;
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

/* A new burst of --burst frames in S's pending slots; false when the pool is empty. */
static bool make_burst(const struct gen *g, struct sender *s, uint64_t tsc, uint8_t flags)
{
	uint32_t flows = g->o.traffic.flows, flow = 0, port_flow = 0;
	uint16_t i, n = g->o.burst;

	if (rte_pktmbuf_alloc_bulk(g->pool, s->pending, n) != 0)
		return false;
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

/* One pass's sending on S: a closed loop's leftovers first, else a new burst when due. */
uint16_t tx_send_burst(struct gen *g, struct sender *s, uint64_t tsc)
{
	uint8_t flags = in_measurement(g, tsc) ? TRAFFIC_MEASURED : 0;

	/* The loop reads the clock only now and then; no frame leaves after --duration. */
	if (tsc >= g->t_stop)
		return 0;
	if (s->n > s->head) {
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
	if (s->n > s->head)
		rte_pktmbuf_free_bulk(&s->pending[s->head], s->n - s->head);
	s->head = s->n = 0;
}
