/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for learn mode's burst processing (src/fwd_learn.c) through its fwd_ops,
 * on real mbufs from a real mempool (EAL without hugepages, tests/fuzz/fuzz_eal.h). An input
 * sets up a switch (ports, each an access port or a trunk) and then runs operations: bursts
 * of frames (built from a few addresses and tags, or raw bytes; single or multi-segment, any
 * headroom, some with a tag the "NIC" stripped), learning ticks, static entries, VLAN
 * changes and storm limits. After every burst:
 *   - every frame has one decision: a port of the switch other than its input, a flood set
 *     of the switch's ports without the input, or a drop with a known reason (uniform
 *     bursts: one of those for all, and no extra copies);
 *   - each extra copy (fb->extra) belongs to a flooded frame of the burst, in order, and its
 *     set is disjoint from that frame's flood set;
 *   - every output is in the frame's VLAN, and the frame it gets is the received one with
 *     the tag that output needs (kept, popped, or pushed with the VLAN's id), byte for byte;
 *   - the frames are then freed as the worker does (worker.c: a reference on every segment
 *     per further copy, one free per output) and the pool must be back to what it held
 *     before the burst: nothing leaked, nothing freed twice.
 * Before process() sees a burst (without stripped tags: vhost_fast's frames carry theirs),
 * the one-copy path's question (fwd_ops.fast_unicast) is asked on copies of the frames'
 * first bytes, with some of the ports as fast ones: every frame it answers for must be one
 * that process() sends, unchanged, to that port, and frames with the same first bytes must
 * get the same answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "fuzz_eal.h"
#include "fwd.h"
#include "fwd_learn.h"
#include "pool.h"
#include "worker.h"

#define MAX_PORTS 8         /* ports of the fuzzed switch */
#define MAX_FRAME 2200      /* a frame, as received */
#define POOL_SIZE 4095

struct input {
	const uint8_t *data;
	size_t size;
};

struct model_port {
	uint16_t access;                       /* 0: trunk */
	uint64_t allowed[LEARN_VLANS / 64];    /* trunk: its VLANs */
};

/* A frame of the burst as the switch saw it (a stripped tag put back), for the checks. */
struct seen {
	uint8_t bytes[MAX_FRAME + RTE_VLAN_HLEN];
	uint32_t len;
	bool tagged;
	uint16_t vlan;           /* the VLAN it travels in, when it is forwarded */
};

static struct rte_mempool *pool;
static struct fwd_burst fb;
static struct rte_mbuf *pkts[FWD_MAX_BURST];
static struct seen seen[FWD_MAX_BURST];
static uint8_t scratch[MAX_FRAME + 2 * RTE_VLAN_HLEN];

static const uint8_t dst_macs[8][6] = {
	{ 2, 0, 0, 0, 0, 1 }, { 2, 0, 0, 0, 0, 2 }, { 2, 0, 0, 0, 0, 3 }, { 2, 0, 0, 0, 0, 4 },
	{ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, { 0x01, 0x00, 0x5e, 0, 0, 1 },
	{ 0x01, 0x80, 0xc2, 0, 0, 0 }, { 0x01, 0x80, 0xc2, 0, 0, 0x0e } };
static const uint8_t src_macs[8][6] = {
	{ 2, 0, 0, 0, 0, 1 }, { 2, 0, 0, 0, 0, 2 }, { 2, 0, 0, 0, 0, 3 }, { 2, 0, 0, 0, 0, 4 },
	{ 0, 0, 0, 0, 0, 0 }, { 0x01, 0x00, 0x5e, 0, 0, 1 }, { 2, 0, 0, 0, 0, 5 },
	{ 2, 0, 0, 0, 0, 6 } };
static const uint16_t vids[8] = { 0, 1, 2, 3, 4, 5, 4094, 4095 };

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct wk_config wcfg = { .burst = 32, .idle_sleep_us = 0 };

	(void)argc;
	(void)argv;
	fuzz_eal_init();
	/* The worker reserves room in sluiced's pools (pool.c): small ones fit the EAL's memory. */
	pool_init(2048);
	/* One worker set up, never started: learn mode keeps per-worker state (fb.worker 0). */
	if (wk_init(1, &wcfg) != 0)
		abort();
	/* No per-lcore cache, so the pool's in-use count is exact after every burst. */
	pool = rte_pktmbuf_pool_create("fuzz_fwd", POOL_SIZE, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       SOCKET_ID_ANY);
	if (pool == NULL)
		abort();
	return 0;
}

static uint8_t next(struct input *in)
{
	uint8_t b = 0;

	if (in->size > 0) {
		b = in->data[0];
		in->data++;
		in->size--;
	}
	return b;
}

/* ---- the switch and its model ---- */

static uint16_t port_index(unsigned int k, unsigned int n, bool high)
{
	/* The last port at index 63 (when asked): flood sets use the whole word. */
	return (uint16_t)(high && k == n - 1 ? SW_MAX_PORTS - 1 : k);
}

static bool member(const struct model_port *p, uint16_t v)
{
	return p->access != 0 ? p->access == v : (p->allowed[v / 64] >> (v % 64)) & 1;
}

/* A port's VLAN configuration from the input, applied to the switch and the model. */
static void configure_port(void *L, uint16_t index, struct model_port *mp, struct input *in)
{
	uint8_t b = next(in);
	struct learn_vlan_cfg cfg;
	unsigned int v;

	memset(&cfg, 0, sizeof(cfg));
	if (b & 0x80) {
		cfg.access_tag = (b & 0x40) ? (uint16_t)(1 + ((next(in) << 8 | next(in)) % 4094))
					    : (uint16_t)(1 + (b & 3));
	} else if (b & 0x40) {
		memset(cfg.allowed, 0xff, sizeof(cfg.allowed));   /* trunks "all" */
	} else {
		for (v = 0; v < 6; v++)
			if (b & (1u << v))
				cfg.allowed[0] |= UINT64_C(1) << v;
		if (b & 0x20)
			cfg.allowed[4094 / 64] |= UINT64_C(1) << (4094 % 64);
	}
	fwd_learn_set_vlan(L, index, &cfg);
	mp->access = cfg.access_tag;
	memcpy(mp->allowed, cfg.allowed, sizeof(mp->allowed));
}

/* ---- frames ---- */

/* A frame from the input into SCRATCH: addresses, tag and EtherType, or raw bytes. */
static uint32_t build_frame(struct input *in, bool raw)
{
	uint32_t len = 0, payload, i;
	uint8_t tag;

	if (raw) {
		len = next(in);
		for (i = 0; i < len; i++)
			scratch[i] = next(in);
		return len;
	}
	memcpy(scratch, dst_macs[next(in) % 8], 6);
	memcpy(scratch + 6, src_macs[next(in) % 8], 6);
	len = 12;
	tag = next(in);
	if (tag & 0x80) {
		uint16_t tci = (uint16_t)(vids[tag % 8] | ((tag >> 3 & 7) << 13));

		scratch[len++] = 0x81;
		scratch[len++] = 0x00;
		scratch[len++] = (uint8_t)(tci >> 8);
		scratch[len++] = (uint8_t)tci;
	}
	scratch[len++] = (tag & 0x40) ? 0x88 : 0x08;   /* 0x88a8: an outer tag, not ours */
	scratch[len++] = (tag & 0x40) ? 0xa8 : 0x00;
	payload = next(in);
	payload = payload >= 0xf0 ? (payload - 0xf0) * 128 + 256 : payload;
	for (i = 0; i < payload && len < MAX_FRAME; i++)
		scratch[len++] = (uint8_t)(i * 7 + payload);
	return len;
}

/*
 * SCRATCH[0..LEN) as a chain of NSEG segments (more if they cannot hold it), the first FIRST
 * bytes long, at HEADROOM.
 */
static struct rte_mbuf *make_chain(uint32_t len, unsigned int nseg, uint32_t first,
				   uint16_t headroom)
{
	struct rte_mbuf *head = NULL, *m;
	uint32_t off = 0, part;
	unsigned int s;

	for (s = 0; s == 0 || off < len; s++) {
		m = rte_pktmbuf_alloc(pool);
		if (m == NULL)
			abort();
		if (s == 0)
			m->data_off = headroom;
		part = s >= nseg - 1 ? len - off
		       : s == 0 ? RTE_MIN(first, len - off) : (len - off) / (nseg - s);
		part = RTE_MIN(part, (uint32_t)rte_pktmbuf_tailroom(m));
		memcpy(rte_pktmbuf_append(m, (uint16_t)part), scratch + off, part);
		off += part;
		if (head == NULL)
			head = m;
		else if (rte_pktmbuf_chain(head, m) != 0)
			abort();
	}
	return head;
}

/* Records frame I as the switch will see it, and its VLAN on input port ACCESS (0: trunk). */
static void record_seen(unsigned int i, uint32_t len, bool stripped, uint16_t tci,
			uint16_t headroom, uint16_t access)
{
	struct seen *s = &seen[i];

	s->len = len;
	memcpy(s->bytes, scratch, len);
	/* restore_stripped_tag() puts the tag back when there is headroom for it. */
	if (stripped && headroom >= RTE_VLAN_HLEN && len >= 12) {
		memmove(s->bytes + 16, s->bytes + 12, len - 12);
		s->bytes[12] = 0x81;
		s->bytes[13] = 0x00;
		s->bytes[14] = (uint8_t)(tci >> 8);
		s->bytes[15] = (uint8_t)tci;
		s->len += RTE_VLAN_HLEN;
	}
	s->tagged = s->len >= 18 && s->bytes[12] == 0x81 && s->bytes[13] == 0x00;
	s->vlan = access != 0 ? access : s->tagged ? (uint16_t)((s->bytes[14] << 8 | s->bytes[15]) & 0xfff) : 0;
}

/* One frame of a burst from the input. */
static struct rte_mbuf *make_packet(struct input *in, unsigned int i, uint16_t access)
{
	uint8_t flags = next(in), hr = (flags >> 4) & 3;
	uint16_t headroom = hr == 0 ? 0 : hr == 1 ? 2 : hr == 2 ? 4 : RTE_PKTMBUF_HEADROOM;
	unsigned int nseg = 1 + ((flags >> 2) & 3);
	bool stripped = flags & 0x40;
	uint16_t tci = stripped ? (uint16_t)(vids[next(in) % 8]) : 0;
	uint32_t len = build_frame(in, flags & 1), first = nseg > 1 ? next(in) : len;
	struct rte_mbuf *m;

	if (len == 0)
		len = 1;         /* a PMD never hands over an empty frame */
	m = make_chain(len, nseg, first == 0 ? 1 : first, headroom);
	if (stripped) {
		m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
		m->vlan_tci = tci;
	}
	record_seen(i, len, stripped, tci, headroom, access);
	return m;
}

/* ---- the checks ---- */

static bool port_is(uint64_t present, uint16_t o)
{
	return o < SW_MAX_PORTS && (present >> o & 1);
}

/* The frame output O of port model MP must get: SEEN with O's tagging in VLAN V. */
static uint32_t expected_frame(const struct seen *s, bool out_tagged, uint8_t *out)
{
	uint32_t len = s->len;

	if (out_tagged == s->tagged) {
		memcpy(out, s->bytes, len);
		return len;
	}
	memcpy(out, s->bytes, 12);
	if (out_tagged) {
		out[12] = 0x81;
		out[13] = 0x00;
		out[14] = (uint8_t)(s->vlan >> 8);
		out[15] = (uint8_t)s->vlan;
		memcpy(out + 16, s->bytes + 12, len - 12);
		return len + RTE_VLAN_HLEN;
	}
	memcpy(out + 12, s->bytes + 16, len - 16);
	return len - RTE_VLAN_HLEN;
}

/* M is frame S as every port of SET (all in S's VLAN) must receive it. */
static void check_delivery(const struct model_port *ports, const uint16_t *index_of,
			   unsigned int n, const struct seen *s, struct rte_mbuf *m, uint64_t set)
{
	static uint8_t want[MAX_FRAME + 2 * RTE_VLAN_HLEN], got[MAX_FRAME + 2 * RTE_VLAN_HLEN];
	unsigned int k;
	uint32_t len;
	int tagging = -1;

	for (k = 0; k < n; k++) {
		bool t;

		if (!(set >> index_of[k] & 1))
			continue;
		if (!member(&ports[k], s->vlan))
			abort();             /* an output outside the frame's VLAN */
		t = ports[k].access == 0 && s->vlan != 0;
		if (tagging >= 0 && tagging != t)
			abort();             /* one frame for outputs that need different tagging */
		tagging = t;
	}
	if (tagging < 0)
		return;
	len = expected_frame(s, tagging, want);
	if (rte_pktmbuf_pkt_len(m) != len ||
	    memcmp(rte_pktmbuf_read(m, 0, len, got), want, len) != 0)
		abort();                     /* the frame is not what that output must get */
}

/* The ports of ALLOWED in VLAN V, and (*CHANGE) those that need a frame tagged otherwise. */
static uint64_t vlan_outputs(const struct model_port *ports, const uint16_t *index_of,
			     unsigned int n, uint64_t allowed, const struct seen *s,
			     uint64_t *change)
{
	uint64_t set = 0, bit;
	unsigned int k;

	*change = 0;
	for (k = 0; k < n; k++) {
		bit = UINT64_C(1) << index_of[k];
		if (!(allowed & bit) || !member(&ports[k], s->vlan))
			continue;
		set |= bit;
		if ((ports[k].access == 0 && s->vlan != 0) != s->tagged)
			*change |= bit;
	}
	return set;
}

/*
 * Frame I is flooded: to every other port of its VLAN, those that need its tagging changed
 * through one extra copy (the next in fb.extra) when the others take it as it is. An empty
 * set, when the input is the VLAN's only port, is the worker's to count (hairpin).
 */
static void check_flood(const struct model_port *ports, const uint16_t *index_of,
			unsigned int n, uint64_t allowed, unsigned int i, unsigned int *e)
{
	uint64_t change, want = vlan_outputs(ports, index_of, n, allowed, &seen[i], &change);
	bool split = change != 0 && (want & ~change) != 0;

	if (fb.flood[i] != (split ? want & ~change : want))
		abort();
	check_delivery(ports, index_of, n, &seen[i], pkts[i], fb.flood[i]);
	if (!split)
		return;
	if (*e >= fb.n_extra || fb.extra[*e].set != change)
		abort();                     /* the copy for the other tagging is missing */
	check_delivery(ports, index_of, n, &seen[i], fb.extra[*e].m, change);
	(*e)++;
}

static void check_burst(const struct model_port *ports, const uint16_t *index_of,
			unsigned int n_ports, uint64_t present, uint16_t in, unsigned int n)
{
	uint64_t allowed = present & ~(UINT64_C(1) << in);
	unsigned int i, k, e = 0;

	if (fb.uniform != FWD_OUT_MIXED) {
		if (fb.n_extra != 0 || (fb.uniform == FWD_OUT_DROP ? fb.drop[0] >= STATS_DROP_COUNT
					: !port_is(allowed, fb.uniform)))
			abort();
		for (i = 0; i < n && fb.uniform != FWD_OUT_DROP; i++)
			check_delivery(ports, index_of, n_ports, &seen[i], pkts[i],
				       UINT64_C(1) << fb.uniform);
		return;
	}
	for (i = 0; i < n; i++) {
		uint16_t o = fb.out[i];

		if (o == FWD_OUT_DROP) {
			if (fb.drop[i] >= STATS_DROP_COUNT)
				abort();
		} else if (o == FWD_OUT_FLOOD) {
			check_flood(ports, index_of, n_ports, allowed, i, &e);
		} else if (port_is(allowed, o)) {
			check_delivery(ports, index_of, n_ports, &seen[i], pkts[i],
				       UINT64_C(1) << o);
		} else {
			abort();             /* no such output */
		}
	}
	if (e != fb.n_extra)
		abort();                     /* a copy that belongs to no flooded frame */
	for (k = 0; k < fb.n_extra; k++)
		for (i = 0; i < n; i++)
			if (fb.extra[k].m == pkts[i] || fb.extra[k].m == NULL)
				abort();
}

/* ---- freeing as the worker does ---- */

static void ref_segments(struct rte_mbuf *m, int16_t extra)
{
	for (; m != NULL; m = m->next)
		rte_mbuf_refcnt_update(m, extra);
}

/* Every segment of M has refcount 1 (nobody else holds it). */
static void check_refcnt(const struct rte_mbuf *m)
{
	for (; m != NULL; m = m->next)
		if (rte_mbuf_refcnt_read(m) != 1)
			abort();
}

/* Frees M once per port of SET but IN, as worker.c's stage_copies and the sends do. */
static void free_copies(struct rte_mbuf *m, uint64_t set)
{
	int copies = __builtin_popcountll(set), c;

	if (copies == 0) {
		rte_pktmbuf_free(m);    /* hairpin, or an extra copy with nowhere to go */
		return;
	}
	if (copies > 1)
		ref_segments(m, (int16_t)(copies - 1));
	for (c = 0; c < copies; c++)
		rte_pktmbuf_free(m);
}

static void free_burst(uint16_t in, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		check_refcnt(pkts[i]);
		if (fb.uniform == FWD_OUT_MIXED && fb.out[i] == FWD_OUT_FLOOD)
			free_copies(pkts[i], fb.flood[i] & ~(UINT64_C(1) << in));
		else
			rte_pktmbuf_free(pkts[i]);
	}
	for (i = 0; i < fb.n_extra; i++) {
		check_refcnt(fb.extra[i].m);
		free_copies(fb.extra[i].m, fb.extra[i].set);
	}
}

/* ---- operations ---- */

/* ---- the one-copy path's question (fwd_ops.fast_unicast) ---- */

static uint8_t fast_hdr[FWD_MAX_BURST][FWD_HDR_BYTES];
static uint16_t fast_out[FWD_MAX_BURST];

/*
 * Asks fast_unicast() about the burst, on copies of what process() will read of each
 * frame's first segment (process() may retag the frames in place). Returns false, asking
 * nothing, for a burst with a stripped tag, which the one-copy path never sees.
 */
static bool ask_fast(void *L, uint16_t input, uint64_t fast, unsigned int n)
{
	const uint8_t *hdr[FWD_MAX_BURST];
	uint16_t len[FWD_MAX_BURST], taken = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (pkts[i]->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED)
			return false;
		len[i] = (uint16_t)RTE_MIN(rte_pktmbuf_data_len(pkts[i]), FWD_HDR_BYTES);
		memcpy(fast_hdr[i], rte_pktmbuf_mtod(pkts[i], const uint8_t *), len[i]);
		hdr[i] = fast_hdr[i];
	}
	if (fwd_learn_ops.fast_unicast(L, input, fast, hdr, len, (uint16_t)n, &fb) > n)
		abort();
	for (i = 0; i < n; i++) {
		fast_out[i] = fb.out[i];
		if (fast_out[i] == FWD_OUT_MIXED)
			continue;
		taken++;
		if (fast_out[i] >= SW_MAX_PORTS || fast_out[i] == input ||
		    !(fast & (UINT64_C(1) << fast_out[i])))
			abort();             /* not a fast port, or the input */
	}
	(void)taken;
	return true;
}

/* Each frame fast_unicast() answered for goes there by process(), unchanged in length. */
static void check_fast(unsigned int n, const uint32_t *len_before)
{
	unsigned int i, j;

	for (i = 0; i < n; i++) {
		uint16_t o = fb.uniform != FWD_OUT_MIXED ? fb.uniform : fb.out[i];

		if (fast_out[i] != FWD_OUT_MIXED &&
		    (o != fast_out[i] || rte_pktmbuf_pkt_len(pkts[i]) != len_before[i]))
			abort();
		for (j = 0; j < i; j++)
			if (rte_pktmbuf_data_len(pkts[i]) >= FWD_HDR_BYTES &&
			    rte_pktmbuf_data_len(pkts[j]) >= FWD_HDR_BYTES &&
			    memcmp(fast_hdr[i], fast_hdr[j], FWD_HDR_BYTES) == 0 &&
			    fast_out[i] != fast_out[j])
				abort();     /* one destination, two answers */
	}
}

static void run_burst(void *L, const struct model_port *ports, const uint16_t *index_of,
		      unsigned int n_ports, uint64_t present, struct input *in, uint8_t op)
{
	unsigned int k = next(in) % n_ports, n = 1 + (op >> 3) % 32, i;
	uint16_t input = index_of[k];
	unsigned int base = rte_mempool_in_use_count(pool);
	/* Some bursts see every port as fast, others every other one. */
	uint64_t fast = (n & 1) ? present : present & UINT64_C(0x5555555555555555);
	uint32_t len_before[FWD_MAX_BURST];
	bool asked;

	for (i = 0; i < n; i++) {
		pkts[i] = make_packet(in, i, ports[k].access);
		len_before[i] = rte_pktmbuf_pkt_len(pkts[i]);
	}
	asked = ask_fast(L, input, fast, n);
	fb.uniform = FWD_OUT_MIXED;
	fb.n_extra = 0;
	fwd_learn_ops.process(L, input, pkts, (uint16_t)n, &fb);
	check_burst(ports, index_of, n_ports, present, input, n);
	if (asked)
		check_fast(n, len_before);
	free_burst(input, n);
	if (rte_mempool_in_use_count(pool) != base)
		abort();                     /* an mbuf leaked or was freed twice */
}

static void static_entry(void *L, const uint16_t *index_of, unsigned int n_ports,
			 struct input *in)
{
	uint8_t m = next(in), v = next(in), p = next(in);
	char err[128];

	(void)fwd_learn_fdb_add(L, src_macs[m % 8], vids[v % 8] % 4095, index_of[p % n_ports],
				err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct model_port ports[MAX_PORTS];
	uint16_t index_of[MAX_PORTS];
	uint8_t b0 = next(&in), b1 = next(&in), op;
	unsigned int n = 1 + b0 % MAX_PORTS, k;
	uint64_t present = 0;
	char err[256];
	json_t *params = json_pack("{si si}", "max_entries", 16 << (b1 & 3), "aging",
				   (b1 >> 2) & 1);
	void *L = fwd_learn_ops.create(params, err, sizeof(err));

	json_decref(params);
	if (L == NULL)
		abort();
	fwd_learn_set_forward_reserved(L, b1 & 0x80);
	for (k = 0; k < n; k++) {
		index_of[k] = port_index(k, n, b0 & 0x80);
		fwd_learn_ops.port_added(L, index_of[k]);
		present |= UINT64_C(1) << index_of[k];
		configure_port(L, index_of[k], &ports[k], &in);
	}
	while (in.size > 0) {
		op = next(&in);
		switch (op % 8) {
		case 4:
			fwd_learn_ops.tick(L);       /* learn what the bursts asked for */
			break;
		case 5:
			static_entry(L, index_of, n, &in);
			break;
		case 6:
			k = next(&in) % n;
			configure_port(L, index_of[k], &ports[k], &in);
			break;
		case 7:
			k = next(&in) % n;
			fwd_learn_set_storm(L, index_of[k], next(&in) % 4);
			break;
		default:
			run_burst(L, ports, index_of, n, present, &in, op);
			break;
		}
	}
	fwd_learn_ops.destroy(L);
	return 0;
}
