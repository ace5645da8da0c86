/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Captures made by sluiced itself (capture.h): the workers' copies into per-producer rings,
 * and the control thread's side, which starts and stops them, hands the frames to the
 * client that reads them, and ends captures whose client went away.
 */
#include "capture.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "log.h"
#include "port.h"
#include "switch.h"
#include "vhost_fast.h"
#include "worker.h"

#define CAP_MAX 64               /* captures at once, running or still being read */
/* Records a ring holds. The capture's pool is shared by its rings: with the default one
 * worker, the receive ring and the transmit ring can each fill it half. */
#define CAP_RING 2048
#define CAP_MBUFS 4095           /* 2 KB of data each: about 9 MB a capture */
#define CAP_POOL_CACHE 64
#define CAP_CHUNK 64             /* frames copied at a time (the records sit on the stack) */
/* A capture nobody read for this long is ended and freed: a client that stopped (SIGSTOP)
 * or lost its way must not keep a port off the one-copy path for ever. A client that
 * closes its connection (or dies) ends its captures at once (cap_owner_gone). */
#define CAP_READ_TIMEOUT_MS 10000
#define CAP_READ_MAX 4096        /* frames one read hands out at most */
#define CAP_READ_STEP 32         /* taken from a lane at a time */
#define CAP_LANES (1 + WK_MAX_WORKERS)   /* lane 0: received; 1 + W: sent by worker W */

/* One copied frame in a ring. */
struct cap_rec {
	struct rte_mbuf *m;
	uint64_t tsc;                /* when it was copied (rte_rdtsc) */
	uint32_t len;                /* the frame's length before the snap length cut it */
	uint32_t dir;                /* CAP_RX or CAP_TX */
};

/* One producer's ring and counters; only that producer writes them. */
struct cap_lane {
	struct rte_ring *ring;
	uint64_t recorded;           /* atomic: frames put in the ring */
	uint64_t dropped;            /* atomic: frames the pool or the ring had no room for */
} __rte_cache_aligned;

struct cap {
	/* read by workers */
	unsigned int dirs;
	uint32_t snaplen;
	struct rte_mempool *pool;
	struct cap_lane lane[CAP_LANES];

	/* control thread */
	uint32_t id;
	uint64_t owner;
	struct port *port;           /* NULL once stopped */
	char port_name[PORT_NAME_LEN], sw_name[SW_NAME_LEN];
	enum cap_state state;
	bool leak;                   /* a stuck worker may still copy into it: never freed */
	unsigned int n_lanes;
	uint64_t last_read_ms;
	uint64_t tsc0, ns0, hz;      /* a TSC reading and the wall clock at the same time */
	uint64_t handed;             /* frames handed to the client */
};

static struct cap *caps[CAP_MAX];
static uint32_t next_id = 1;

/* ---- workers ---- */

/* Copies PKTS[0..N-1] (N <= CAP_CHUNK) into RECS; a frame the pool had no mbuf for gets
 * none (m NULL). */
static void copy_frames(struct cap *c, uint32_t dir, struct rte_mbuf *const *pkts,
			uint16_t n, struct cap_rec *recs)
{
	uint64_t tsc = rte_rdtsc();
	uint16_t i;

	for (i = 0; i < n; i++)
		recs[i] = (struct cap_rec){ .m = rte_pktmbuf_copy(pkts[i], c->pool, 0, c->snaplen),
					    .tsc = tsc, .len = pkts[i]->pkt_len, .dir = dir };
}

/* Puts the copies of RECS[0..N-1] in lane L: what finds no room, or has no copy, is the
 * capture's drop. */
static void enqueue(struct cap_lane *l, struct cap_rec *recs, uint16_t n)
{
	unsigned int k = 0, done, i;

	for (i = 0; i < n; i++)
		if (likely(recs[i].m != NULL))
			recs[k++] = recs[i];
	done = k > 0 ? rte_ring_sp_enqueue_burst_elem(l->ring, recs, sizeof(recs[0]), k, NULL)
		     : 0;
	for (i = done; i < k; i++)
		rte_pktmbuf_free(recs[i].m);
	if (done > 0)
		__atomic_store_n(&l->recorded, l->recorded + done, __ATOMIC_RELAXED);
	if (done < n)
		__atomic_store_n(&l->dropped, l->dropped + (n - done), __ATOMIC_RELAXED);
}

void cap_rx(struct cap *c, struct rte_mbuf *const *pkts, uint16_t n)
{
	struct cap_rec recs[CAP_CHUNK];
	uint16_t i, k;

	if (!(c->dirs & CAP_RX))
		return;
	for (i = 0; i < n; i = (uint16_t)(i + k)) {
		k = (uint16_t)RTE_MIN(n - i, (int)CAP_CHUNK);
		copy_frames(c, CAP_RX, &pkts[i], k, recs);
		enqueue(&c->lane[0], recs, k);
	}
}

/*
 * The copies are made before the frames are sent, since vhf_tx_burst() frees what it
 * sends; those of frames the guest did not take are freed unrecorded, so that the capture
 * holds what the guest received.
 */
uint16_t cap_vhf_tx(struct cap *c, struct vhf *v, uint16_t q, struct rte_mbuf **pkts,
		    uint16_t n)
{
	struct cap_rec recs[CAP_CHUNK];
	struct cap_lane *l = &c->lane[1 + q];
	uint16_t off = 0, k, sent, i;

	if (!(c->dirs & CAP_TX))
		return vhf_tx_burst(v, q, pkts, n);
	while (off < n) {
		k = (uint16_t)RTE_MIN(n - off, (int)CAP_CHUNK);
		copy_frames(c, CAP_TX, &pkts[off], k, recs);
		sent = vhf_tx_burst(v, q, &pkts[off], k);
		for (i = sent; i < k; i++)
			rte_pktmbuf_free(recs[i].m);    /* NULL-safe */
		enqueue(l, recs, sent);
		off = (uint16_t)(off + sent);
		if (sent < k)
			break;
	}
	return off;
}

/* ---- the control thread ---- */

static uint64_t now_ms(void)
{
	return rte_get_timer_cycles() / (rte_get_timer_hz() / 1000);
}

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* The wall-clock time of TSC reading T, from the pair read at the start. */
static uint64_t rec_ns(const struct cap *c, uint64_t t)
{
	uint64_t d = t > c->tsc0 ? t - c->tsc0 : 0;

	return c->ns0 + d / c->hz * UINT64_C(1000000000) +
	       d % c->hz * UINT64_C(1000000000) / c->hz;
}

/* Whether P's frames may take the one-copy path (port.h, vhf_direct; switch fast_ports). */
static void set_direct(struct port *p, bool on)
{
	__atomic_store_n(&p->vhf_direct, on ? p->vhf : NULL, __ATOMIC_RELAXED);
	if (p->sw != NULL)
		sw_set_fast(p->sw, p, on);
}

static void cap_free(struct cap *c)
{
	struct cap_rec r;
	unsigned int i;

	for (i = 0; i < CAP_MAX; i++)
		if (caps[i] == c)
			caps[i] = NULL;
	if (c->leak) {
		LOG(WARNING, "capture %u: left allocated (a stuck worker may still use it)", c->id);
		return;
	}
	for (i = 0; i < c->n_lanes; i++) {
		if (c->lane[i].ring == NULL)
			continue;
		while (rte_ring_sc_dequeue_elem(c->lane[i].ring, &r, sizeof(r)) == 0)
			rte_pktmbuf_free(r.m);
		rte_ring_free(c->lane[i].ring);
	}
	rte_mempool_free(c->pool);
	rte_free(c);
}

/* C's pool and rings; -1 when there is no memory for them. */
static int cap_alloc_rings(struct cap *c)
{
	char name[RTE_RING_NAMESIZE];
	unsigned int i;

	snprintf(name, sizeof(name), "cap%u", c->id);
	c->pool = rte_pktmbuf_pool_create(name, CAP_MBUFS, CAP_POOL_CACHE, 0,
					  RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (c->pool == NULL)
		return -1;
	c->n_lanes = 1 + wk_count();
	for (i = 0; i < c->n_lanes; i++) {
		snprintf(name, sizeof(name), "cap%u_%u", c->id, i);
		c->lane[i].ring = rte_ring_create_elem(name, sizeof(struct cap_rec), CAP_RING,
						       SOCKET_ID_ANY,
						       RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (c->lane[i].ring == NULL)
			return -1;
	}
	return 0;
}

uint32_t cap_start(struct port *p, unsigned int dirs, uint32_t snaplen, uint64_t owner,
		   char *err, size_t err_len)
{
	struct cap *c;
	int slot;

	if (p->vhf == NULL) {
		/* A fast memif port (memif_fast.h) has no capture of its own yet. */
		snprintf(err, err_len, "port '%s' (%s) is driven by sluiced itself, not by a DPDK "
			 "ethdev, and sluiced captures itself only fast vhost-user ports (not fast=0); "
			 "%s", p->name, portspec_kind_name(p->ps.kind),
			 p->ps.kind == PORTSPEC_MEMIF ?
			 "make the memif port without fast=1 to capture it (dpdk-dumpcap)" :
			 "capture on its kernel interface with tcpdump instead");
		return 0;
	}
	if (p->cap != NULL) {
		snprintf(err, err_len, "port '%s' is being captured already (capture %u); one "
			 "capture per port at a time", p->name, p->cap->id);
		return 0;
	}
	for (slot = 0; slot < CAP_MAX && caps[slot] != NULL; slot++)
		;
	if (slot == CAP_MAX) {
		snprintf(err, err_len, "%d captures are open already", CAP_MAX);
		return 0;
	}
	c = rte_zmalloc("capture", sizeof(*c), RTE_CACHE_LINE_SIZE);
	if (c == NULL) {
		snprintf(err, err_len, "no memory for a capture");
		return 0;
	}
	c->id = next_id++;
	caps[slot] = c;
	if (cap_alloc_rings(c) != 0) {
		snprintf(err, err_len, "no memory for a capture's pool and rings (%s)",
			 rte_strerror(rte_errno));
		cap_free(c);
		return 0;
	}
	c->dirs = dirs;
	c->snaplen = snaplen;
	c->owner = owner;
	c->port = p;
	snprintf(c->port_name, sizeof(c->port_name), "%s", p->name);
	snprintf(c->sw_name, sizeof(c->sw_name), "%s", p->sw != NULL ? p->sw->name : "");
	c->hz = rte_get_tsc_hz();
	c->tsc0 = rte_rdtsc();
	c->ns0 = wall_ns();
	c->last_read_ms = now_ms();
	/*
	 * Off the one-copy path first, and on with the copies only once no worker can still be
	 * moving P's frames guest to guest (the grace period): from the answer on, every frame
	 * of P passes through an mbuf and is seen.
	 */
	set_direct(p, false);
	if (!wk_synchronize())
		LOG(WARNING, "capture %u: a worker is stuck; it may miss frames", c->id);
	__atomic_store_n(&p->cap, c, __ATOMIC_RELEASE);
	LOG(INFO, "capture %u: port %s (%s%s), snap length %u", c->id, p->name,
	    dirs & CAP_RX ? "rx" : "", dirs & CAP_TX ? (dirs & CAP_RX ? "+tx" : "tx") : "",
	    snaplen);
	return c->id;
}

struct cap *cap_find(uint32_t id, uint64_t owner)
{
	unsigned int i;

	for (i = 0; i < CAP_MAX; i++)
		if (caps[i] != NULL && caps[i]->id == id && caps[i]->owner == owner)
			return caps[i];
	return NULL;
}

static const char *state_name(enum cap_state s)
{
	static const char *const names[] = {
		[CAP_RUNNING] = "running", [CAP_STOPPED] = "stopped",
		[CAP_CLIENT_GONE] = "client gone", [CAP_TIMED_OUT] = "not read in time",
		[CAP_PORT_GONE] = "port deleted" };

	return names[s];
}

void cap_stop(struct cap *c, enum cap_state why)
{
	struct port *p = c->port;

	if (c->state != CAP_RUNNING)
		return;
	__atomic_store_n(&p->cap, NULL, __ATOMIC_RELEASE);
	/* After the grace period no worker copies into C: its rings and pool are ours. */
	if (!wk_synchronize())
		c->leak = true;
	set_direct(p, true);
	c->port = NULL;
	c->state = why;
	LOG(INFO, "capture %u: port %s, ended (%s)", c->id, c->port_name, state_name(why));
}

static void totals(const struct cap *c, uint64_t *recorded, uint64_t *dropped)
{
	unsigned int i;

	*recorded = *dropped = 0;
	for (i = 0; i < c->n_lanes; i++) {
		*recorded += __atomic_load_n(&c->lane[i].recorded, __ATOMIC_RELAXED);
		*dropped += __atomic_load_n(&c->lane[i].dropped, __ATOMIC_RELAXED);
	}
}

void cap_describe(const struct cap *c, json_t *o)
{
	uint64_t recorded, dropped;

	totals(c, &recorded, &dropped);
	json_object_set_new(o, "id", json_integer(c->id));
	json_object_set_new(o, "switch", json_string(c->sw_name));
	json_object_set_new(o, "port", json_string(c->port_name));
	json_object_set_new(o, "state", json_string(state_name(c->state)));
	json_object_set_new(o, "captured", json_integer((json_int_t)recorded));
	json_object_set_new(o, "dropped", json_integer((json_int_t)dropped));
	json_object_set_new(o, "handed", json_integer((json_int_t)c->handed));
}

/* The records of one read, and their order by time (rec_order). */
static struct cap_rec read_recs[CAP_READ_MAX];
static uint32_t order[CAP_READ_MAX];

/*
 * By the TSC reading, then by the place taken: one burst's frames share a reading, and
 * take() keeps each lane's frames in the order they were made.
 */
static int rec_order(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (read_recs[x].tsc != read_recs[y].tsc)
		return read_recs[x].tsc < read_recs[y].tsc ? -1 : 1;
	return (x > y) - (x < y);
}

/* BASE64 of LEN bytes at SRC into DST (4 * ceil(LEN / 3) bytes); returns its length. */
static size_t base64(const uint8_t *src, size_t len, char *dst)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i, o = 0;

	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];

		dst[o++] = abc[v >> 18];
		dst[o++] = abc[(v >> 12) & 63];
		dst[o++] = abc[(v >> 6) & 63];
		dst[o++] = abc[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < len ? (uint32_t)src[i + 1] << 8 : 0);

		dst[o++] = abc[v >> 18];
		dst[o++] = abc[(v >> 12) & 63];
		dst[o++] = i + 1 < len ? abc[(v >> 6) & 63] : '=';
		dst[o++] = '=';
	}
	return o;
}

static json_t *rec_json(const struct cap *c, const struct cap_rec *r)
{
	static uint8_t bytes[CAP_SNAPLEN_MAX];
	static char text[(CAP_SNAPLEN_MAX + 2) / 3 * 4];
	const uint8_t *data = rte_pktmbuf_read(r->m, 0, r->m->pkt_len, bytes);
	size_t n = base64(data, r->m->pkt_len, text);

	return json_pack("{sI ss sI ss#}", "t", (json_int_t)rec_ns(c, r->tsc),
			 "dir", r->dir == CAP_RX ? "rx" : "tx", "len", (json_int_t)r->len,
			 "data", text, (int)n);
}

/* Takes up to MAX records (and about MAX_BYTES) from C's lanes into read_recs[]; how many. */
static unsigned int take(struct cap *c, unsigned int max, size_t max_bytes)
{
	unsigned int n = 0, i, k, got, j;
	size_t bytes = 0;
	bool more = true;

	while (more && n < max && bytes < max_bytes) {
		more = false;
		for (i = 0; i < c->n_lanes && n < max; i++) {
			k = RTE_MIN(max - n, (unsigned int)CAP_READ_STEP);
			got = rte_ring_sc_dequeue_burst_elem(c->lane[i].ring, &read_recs[n],
							     sizeof(read_recs[0]), k, NULL);
			for (j = n; j < n + got; j++)
				bytes += read_recs[j].m->pkt_len;
			n += got;
			more |= got == k;
		}
	}
	return n;
}

int cap_read(struct cap *c, unsigned int max_frames, size_t max_bytes, json_t *frames,
	     json_t *o)
{
	unsigned int n, i, left = 0;
	int rc = 0;

	c->last_read_ms = now_ms();
	n = take(c, RTE_MIN(max_frames, (unsigned int)CAP_READ_MAX), max_bytes);
	for (i = 0; i < n; i++)
		order[i] = i;
	qsort(order, n, sizeof(order[0]), rec_order);
	for (i = 0; i < n; i++) {
		const struct cap_rec *r = &read_recs[order[i]];
		json_t *f = rc == 0 ? rec_json(c, r) : NULL;

		if (f == NULL || json_array_append_new(frames, f) != 0)
			rc = -1;
		rte_pktmbuf_free(r->m);
	}
	c->handed += n;
	cap_describe(c, o);
	for (i = 0; i < c->n_lanes; i++)
		left += rte_ring_count(c->lane[i].ring);
	json_object_set_new(o, "pending", json_integer(left));
	json_object_set_new(o, "ended", json_boolean(c->state != CAP_RUNNING && left == 0));
	if (c->state != CAP_RUNNING && left == 0)
		cap_free(c);
	return rc;
}

void cap_owner_gone(uint64_t owner)
{
	unsigned int i;

	for (i = 0; i < CAP_MAX; i++)
		if (caps[i] != NULL && caps[i]->owner == owner) {
			struct cap *c = caps[i];

			cap_stop(c, CAP_CLIENT_GONE);
			cap_free(c);
		}
}

void cap_port_removed(struct port *p)
{
	if (p->cap != NULL)
		cap_stop(p->cap, CAP_PORT_GONE);
}

void cap_tick(void)
{
	uint64_t now = now_ms();
	unsigned int i;

	for (i = 0; i < CAP_MAX; i++)
		if (caps[i] != NULL && now - caps[i]->last_read_ms >= CAP_READ_TIMEOUT_MS) {
			struct cap *c = caps[i];

			LOG(NOTICE, "capture %u: nobody read it for %d s; ending it", c->id,
			    CAP_READ_TIMEOUT_MS / 1000);
			cap_stop(c, CAP_TIMED_OUT);
			cap_free(c);
		}
}

void cap_fini(void)
{
	unsigned int i;

	for (i = 0; i < CAP_MAX; i++)
		if (caps[i] != NULL) {
			struct cap *c = caps[i];

			if (c->port != NULL)
				__atomic_store_n(&c->port->cap, NULL, __ATOMIC_RELAXED);
			c->state = CAP_STOPPED;
			cap_free(c);
		}
}
