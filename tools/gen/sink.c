/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen's sinks: what arrives on the receiving ports, counted per stream (sequence,
 * duplicates, reordering, latency), per --sink-port in a fan-out, and stray frames on
 * the sending ports.
 */
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#include "gen.h"

static bool seen_test_and_set(struct sink *k, uint64_t seq)
{
	uint64_t *w = &k->seen[(seq / 64) % (SEEN_BITS / 64)], bit = UINT64_C(1) << (seq % 64);
	bool was = (*w & bit) != 0;

	*w |= bit;
	return was;
}

static void seen_clear(struct sink *k, uint64_t seq)
{
	k->seen[(seq / 64) % (SEEN_BITS / 64)] &= ~(UINT64_C(1) << (seq % 64));
}

/* Sequence bookkeeping for one frame: loss by gaps, duplicates, reordering. */
static void track_sequence(struct sink *k, uint32_t seq32)
{
	uint64_t seq = k->expect + (uint64_t)(int64_t)(int32_t)(seq32 - (uint32_t)k->expect), s;

	if (!k->active) {
		k->active = true;
		seq = seq32;
		k->expect = seq;
	}
	if (seq >= k->expect) {
		for (s = k->expect; s < seq && s < k->expect + SEEN_BITS; s++)
			seen_clear(k, s);
		k->gap_lost += seq - k->expect;
		seen_clear(k, seq);
		seen_test_and_set(k, seq);
		k->expect = seq + 1;
	} else if (k->expect - seq > SEEN_BITS) {
		k->reordered++;                   /* too old to tell a duplicate */
	} else if (seen_test_and_set(k, seq)) {
		k->duplicated++;
	} else {
		k->reordered++;                   /* counted lost when a later frame came */
		k->gap_lost--;
	}
}

/*
 * The payload of the frame at D whose first segment holds LEN bytes, or NULL (counted as
 * foreign) when it is not one of our frames.
 */
static const struct traffic_payload *payload_at(struct gen *g, const uint8_t *d, uint32_t len)
{
	const struct traffic_payload *pl;

	if (len < TRAFFIC_HDR_LEN + sizeof(*pl)) {
		g->foreign++;
		return NULL;
	}
	pl = (const struct traffic_payload *)(d + TRAFFIC_HDR_LEN);
	if (pl->magic != TRAFFIC_MAGIC) {
		g->foreign++;
		return NULL;
	}
	return pl;
}

/* M's payload, or NULL (counted as foreign) when M is not one of our frames. */
static const struct traffic_payload *our_payload(struct gen *g, const struct rte_mbuf *m)
{
	return payload_at(g, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len);
}

/*
 * One arrival of a frame of LEN bytes without FCS (payload PL) at K: sequence, and in the
 * interval bytes and latency.
 */
static void count_arrival(struct gen *g, struct sink *k, const struct traffic_payload *pl,
			  uint32_t len, uint64_t now_tsc)
{
	k->rx_packets++;
	if (g->o.check_seq)
		track_sequence(k, pl->seq);
	if (pl->flags & TRAFFIC_MEASURED) {
		k->rx_measured++;
		k->rx_bytes_measured += len + RTE_ETHER_CRC_LEN;
		g->rx_by_size[RTE_MIN(len + RTE_ETHER_CRC_LEN, (uint32_t)TRAFFIC_MAX_FRAME)]++;
		if (g->o.check_latency && now_tsc > pl->tsc)
			hist_record(&g->latency, (uint64_t)((double)(now_tsc - pl->tsc) *
							    g->ns_per_tsc));
	}
}

/* The frame at D of LEN bytes (first segment DATA_LEN of them) arrived at NOW_TSC. */
static void sink_frame_at(struct gen *g, const uint8_t *d, uint32_t data_len, uint32_t len,
			  uint64_t now_tsc)
{
	const struct traffic_payload *pl = payload_at(g, d, data_len);

	if (pl == NULL)
		return;
	/* Latency is one-way when sender and sink share the host's TSC (same process or host). */
	count_arrival(g, &g->sinks[pl->stream], pl, len, now_tsc);
	if (g->alternating)
		alt_count(&g->alt, pl->stream, pl->tsc);
}

static void sink_frame(struct gen *g, struct rte_mbuf *m, uint64_t now_tsc)
{
	sink_frame_at(g, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, m->pkt_len, now_tsc);
}

/* --touch: every byte of every segment read into the checksum, as an application would. */
void sink_touch_frames(struct gen *g, struct rte_mbuf **m, uint16_t n)
{
	const struct rte_mbuf *seg;
	uint16_t i;

	for (i = 0; i < n; i++)
		for (seg = m[i]; seg != NULL; seg = seg->next) {
			g->touch_sum += load_touch(rte_pktmbuf_mtod(seg, const uint8_t *),
						   seg->data_len);
			g->touch_bytes += seg->data_len;
		}
	g->touch_frames += n;
}

/*
 * --check none: the burst's N frames counted for K without reading them (their buffers'
 * lengths only, in the descriptor the port just wrote): in the measured interval when they
 * arrive inside it, since they carry no flag.
 */
static void count_burst(struct gen *g, struct sink *k, struct rte_mbuf **m, uint16_t n,
			uint64_t now_tsc)
{
	uint32_t len, first = m[0]->pkt_len + RTE_ETHER_CRC_LEN;
	uint64_t bytes = 0;
	bool same = true;
	uint16_t i;

	k->rx_packets += n;
	if (!in_measurement(g, now_tsc))
		return;
	for (i = 0; i < n; i++) {
		len = m[i]->pkt_len + RTE_ETHER_CRC_LEN;
		bytes += len;
		same &= len == first;
	}
	/* One size a burst (the usual case): one add, not a chain of adds to one counter. */
	if (same)
		g->rx_by_size[RTE_MIN(first, (uint32_t)TRAFFIC_MAX_FRAME)] += n;
	for (i = 0; !same && i < n; i++)
		g->rx_by_size[RTE_MIN(m[i]->pkt_len + RTE_ETHER_CRC_LEN,
				      (uint32_t)TRAFFIC_MAX_FRAME)]++;
	k->rx_measured += n;
	k->rx_bytes_measured += bytes;
}

/*
 * A received burst back to the pool. The usual burst is of single buffers of our own pool
 * that nothing else holds: they go back in one put through the cache we hold, without
 * rte_pktmbuf_free_bulk()'s per-buffer walk and its lookup of this lcore's cache (a TLS call
 * from a shared library). The test reads only what the port just wrote (the first line of
 * each buffer) and the chain pointer. Anything else (a chain, a buffer of another pool or
 * still referenced) takes the general path.
 */
static void free_received(struct gen *g, struct rte_mbuf **m, uint16_t n)
{
	bool plain = g->rx_cache != NULL;
	uint16_t i;

	for (i = 0; i < n && plain; i++)
		plain = m[i]->pool == g->pool && m[i]->nb_segs == 1 && m[i]->next == NULL &&
			rte_mbuf_refcnt_read(m[i]) == 1 && RTE_MBUF_DIRECT(m[i]);
	if (plain)
		rte_mempool_generic_put(g->pool, (void **)m, n, g->rx_cache);
	else
		rte_pktmbuf_free_bulk(m, n);
}

/*
 * The time a burst arrived at: read afresh when latencies are recorded; else PASS_TSC, the
 * clock the loop read at the start of this pass (microseconds earlier at most), which is
 * all the measured interval's bounds need, and saves a clock read a burst.
 */
static uint64_t arrival_tsc(const struct gen *g, uint64_t pass_tsc)
{
	return g->o.check_latency ? rte_rdtsc() : pass_tsc;
}

/* The payloads of a burst, asked for together before any is read. */
static void prefetch_payloads(struct rte_mbuf **m, uint16_t n)
{
	uint16_t i;

	for (i = 0; i < n; i++)
		rte_prefetch0(rte_pktmbuf_mtod_offset(m[i], void *, TRAFFIC_HDR_LEN));
}

/*
 * --check none on a virtio-raw port: the N ready frames counted for K from their used
 * entries' lengths, without reading the frames.
 */
static void raw_count_burst(struct gen *g, struct sink *k, const struct vring_port *p,
			    uint16_t n, uint64_t now_tsc)
{
	uint32_t len, first = vring_rx_len(p, 0) + RTE_ETHER_CRC_LEN;
	uint64_t bytes = 0;
	bool same = true;
	uint16_t i;

	k->rx_packets += n;
	if (!in_measurement(g, now_tsc))
		return;
	for (i = 0; i < n; i++) {
		len = vring_rx_len(p, i) + RTE_ETHER_CRC_LEN;
		bytes += len;
		same &= len == first;
	}
	if (same)
		g->rx_by_size[RTE_MIN(first, (uint32_t)TRAFFIC_MAX_FRAME)] += n;
	for (i = 0; !same && i < n; i++)
		g->rx_by_size[RTE_MIN(vring_rx_len(p, i) + RTE_ETHER_CRC_LEN,
				      (uint32_t)TRAFFIC_MAX_FRAME)]++;
	k->rx_measured += n;
	k->rx_bytes_measured += bytes;
}

/* Marks sequence numbers FROM..FROM+N (N <= SEEN_BITS) seen, a word at a time. */
static void seen_set_run(struct sink *k, uint64_t from, uint64_t n)
{
	uint64_t bits, take;

	while (n > 0) {
		take = RTE_MIN(n, 64 - from % 64);
		bits = take == 64 ? UINT64_MAX : ((UINT64_C(1) << take) - 1) << (from % 64);
		k->seen[(from / 64) % (SEEN_BITS / 64)] |= bits;
		from += take;
		n -= take;
	}
}

/*
 * Latencies of the N stamps of PL (frames sent in bursts share one TSC: a run of equal
 * stamps is one latency, recorded once with its count). NOW_TSC: the burst's arrival.
 */
static void record_latencies(struct gen *g, const struct traffic_payload *const *pl,
			     uint16_t n, uint64_t now_tsc)
{
	uint16_t i = 0, j;
	uint64_t sent;

	while (i < n) {
		sent = pl[i]->tsc;
		for (j = (uint16_t)(i + 1); j < n && pl[j]->tsc == sent; j++)
			;
		if (now_tsc > sent)
			hist_record_n(&g->latency, (uint64_t)((double)(now_tsc - sent) *
							      g->ns_per_tsc), j - i);
		i = j;
	}
}

/*
 * The common stamped burst, counted whole: N frames of ours, one length, one stream, and
 * when sequences are checked numbered on from the number that stream (already started)
 * expects; all measured or all not, and no --alternate windows to count for. Its
 * bookkeeping is what count_arrival() would do frame by frame (the same counters, the
 * same seen bits, the same histogram), in a few steps a burst. False, having changed
 * nothing, for any other burst: the caller then takes it frame by frame.
 */
static bool raw_burst_in_order(struct gen *g, const struct vring_port *p, uint16_t n,
			       uint64_t now_tsc)
{
	const struct traffic_payload *pl[GEN_MAX_BURST];
	uint32_t len = vring_rx_len(p, 0), seq0;
	struct sink *k;
	uint16_t i;
	bool ok;

	if (g->alternating || len < TRAFFIC_HDR_LEN + sizeof(**pl))
		return false;
	for (i = 0; i < n; i++)
		pl[i] = (const struct traffic_payload *)(vring_rx_frame(p, i) + TRAFFIC_HDR_LEN);
	k = &g->sinks[pl[0]->stream];
	seq0 = pl[0]->seq;
	/* A stream's first frame sets where its numbers start: track_sequence() does that. */
	if (g->o.check_seq && (!k->active || seq0 != (uint32_t)k->expect))
		return false;
	/* No branch a frame: every test folded into one flag, looked at once. */
	ok = true;
	for (i = 0; i < n; i++)
		ok &= (pl[i]->magic == TRAFFIC_MAGIC) & (pl[i]->stream == pl[0]->stream) &
		      (pl[i]->flags == pl[0]->flags) & (vring_rx_len(p, i) == len) &
		      (!g->o.check_seq | (pl[i]->seq == seq0 + i));
	if (!ok)
		return false;
	k->rx_packets += n;
	if (g->o.check_seq) {
		seen_set_run(k, k->expect, n);
		k->expect += n;
	}
	if (pl[0]->flags & TRAFFIC_MEASURED) {
		k->rx_measured += n;
		k->rx_bytes_measured += (uint64_t)n * (len + RTE_ETHER_CRC_LEN);
		g->rx_by_size[RTE_MIN(len + RTE_ETHER_CRC_LEN, (uint32_t)TRAFFIC_MAX_FRAME)] += n;
		if (g->o.check_latency)
			record_latencies(g, pl, n, now_tsc);
	}
	return true;
}

/*
 * A virtio-raw sink port's burst: the used entries the device wrote, the frames read only
 * where a check needs their stamps, and the buffers posted again with one index store.
 */
static uint16_t sink_raw_burst(struct gen *g, unsigned int index, struct vring_port *p,
			       uint64_t pass_tsc)
{
	uint16_t n = p->rx_peeked ? p->rx_peeked : vring_rx_ready(p, g->o.rx_burst), i;
	uint64_t tsc;

	if (n == 0)
		return 0;
	tsc = arrival_tsc(g, pass_tsc);
	if (!gen_stamped(&g->o)) {
		raw_count_burst(g, &g->sinks[g->sink_stream[index]], p, n, tsc);
	} else {
		for (i = 0; !p->rx_peeked && i < n; i++)
			rte_prefetch0(vring_rx_frame(p, i) + TRAFFIC_HDR_LEN);
		if (!raw_burst_in_order(g, p, n, tsc))
			for (i = 0; i < n; i++) {
				uint32_t len = vring_rx_len(p, i);

				sink_frame_at(g, vring_rx_frame(p, i), len, len, tsc);
			}
	}
	vring_rx_done(p, n);
	return n;
}

void sink_peek_raw(struct gen *g)
{
	unsigned int i;

	for (i = 0; i < g->n_sink_ports; i++)
		if (g->sink_raw[i] != NULL)
			vring_rx_peek(g->sink_raw[i], g->o.rx_burst,
				      VRING_BUF_SKEW + VRING_HDR_LEN + TRAFFIC_HDR_LEN);
}

uint16_t sink_burst(struct gen *g, unsigned int index, uint64_t pass_tsc)
{
	struct rte_mbuf *m[GEN_MAX_BURST];
	uint16_t n, i;
	uint64_t tsc;

	if (g->sink_raw[index] != NULL)
		return sink_raw_burst(g, index, g->sink_raw[index], pass_tsc);
	n = rx_burst_all(g, g->sink_ports[index], m, g->o.rx_burst);
	if (n == 0)
		return 0;
	tsc = arrival_tsc(g, pass_tsc);
	if (g->o.touch)
		sink_touch_frames(g, m, n);
	if (!gen_stamped(&g->o)) {
		count_burst(g, &g->sinks[g->sink_stream[index]], m, n, tsc);
	} else {
		prefetch_payloads(m, n);
		for (i = 0; i < n; i++)
			sink_frame(g, m[i], tsc);
	}
	free_received(g, m, n);
	return n;
}

/*
 * A --sink-port's burst. Each sink port has its own sequence bookkeeping, since every one
 * of them receives the same frames (a flood's copies): loss, duplicates and reordering are
 * per sink. Frames of any stream but 0, the one sender, are foreign here.
 */
uint16_t sink_fanout_burst(struct gen *g, unsigned int sink, uint64_t pass_tsc)
{
	struct rte_mbuf *m[GEN_MAX_BURST];
	uint16_t n = rx_burst_all(g, g->fanout_ports[sink], m, g->o.rx_burst), i;
	const struct traffic_payload *pl;
	uint64_t tsc;

	if (n == 0)
		return 0;
	tsc = arrival_tsc(g, pass_tsc);
	if (g->o.touch)
		sink_touch_frames(g, m, n);
	if (!gen_stamped(&g->o)) {
		count_burst(g, &g->fanout[sink], m, n, tsc);
		free_received(g, m, n);
		return n;
	}
	prefetch_payloads(m, n);
	for (i = 0; i < n; i++) {
		pl = our_payload(g, m[i]);
		if (pl == NULL)
			continue;
		if (pl->stream != 0)
			g->foreign++;
		else
			count_arrival(g, &g->fanout[sink], pl, m[i]->pkt_len, tsc);
	}
	free_received(g, m, n);
	return n;
}

/*
 * Frames that come back on a sending port (a switch that floods, or a peer that talks) are
 * freed and counted as stray, so they never pile up in a ring. Polled seldom (every 64
 * passes), so a generator at full speed pays nearly nothing for it.
 */
void sink_drain_senders(struct gen *g)
{
	struct rte_mbuf *m[GEN_BURST];
	unsigned int i;
	uint16_t n;

	if (g->o.role != ROLE_TXRX || g->o.bidir ||
	    (g->o.n_ports < 2 && g->o.n_sink_specs == 0))
		return;
	for (i = 0; i < g->n_senders; i++) {
		if (g->senders[i].raw != NULL) {
			n = vring_rx_ready(g->senders[i].raw, GEN_BURST);
			vring_rx_done(g->senders[i].raw, n);
			g->stray += n;
			continue;
		}
		n = rx_burst_all(g, g->senders[i].tx, m, GEN_BURST);
		if (n > 0)
			rte_pktmbuf_free_bulk(m, n);
		g->stray += n;
	}
}

