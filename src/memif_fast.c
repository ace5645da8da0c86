/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif ports of sluice's own (memif_fast.h). The wire format below follows the memif
 * protocol, version 2.0, as DPDK's net_memif and libmemif speak it: 128-byte messages on a
 * SOCK_SEQPACKET Unix socket, file descriptors (shared memory, interrupt eventfds) passed with
 * SCM_RIGHTS; rings of 16-byte descriptors behind a two-cache-line header.
 *
 * Who owns what in a connection: the client makes all the memory (regions) and the rings
 * in it. On a client-to-server (C2S) ring the client produces at `head` and the server
 * consumes, publishing its position in `tail`; on a server-to-client (S2C) ring the client
 * posts empty buffers by advancing `head` (each descriptor's length is the buffer's size)
 * and the server fills them, publishing `tail`. The server writes nothing else but the
 * descriptors' length and flags of the buffers it fills. Every descriptor is copied out of
 * the shared memory before use and checked against the region it names, so a client that
 * writes nonsense costs its own frames (rx_missed, tx_full), never sluiced's memory.
 */
#include "memif_fast.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_branch_prediction.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>
#include <rte_version.h>

#include "log.h"
#include "port.h"
#include "worker.h"

/* ---- the protocol (memif 2.0) ---- */

#define MFF_VERSION 0x0200            /* major 2, minor 0 */
#define MFF_COOKIE 0x3E31F20u
#define MFF_NAME_LEN 32

enum mff_msg_type {
	MFF_MSG_ACK = 1, MFF_MSG_HELLO, MFF_MSG_INIT, MFF_MSG_ADD_REGION, MFF_MSG_ADD_RING,
	MFF_MSG_CONNECT, MFF_MSG_CONNECTED, MFF_MSG_DISCONNECT,
};

#define MFF_ADD_RING_C2S 1            /* add_ring.flags: the ring runs client to server */
#define MFF_DESC_NEXT 1               /* desc.flags: the frame goes on in the next slot */
#define MFF_RING_MASK_INT 1           /* ring.flags: the reader wants no interrupts */

struct __attribute__((packed)) mff_msg {
	uint16_t type;
	union __attribute__((packed)) {
		struct __attribute__((packed)) {
			uint8_t name[MFF_NAME_LEN];
			uint16_t min_version, max_version;
			uint16_t max_region, max_s2c_ring, max_c2s_ring;
			uint8_t max_log2_ring_size;
		} hello;
		struct __attribute__((packed)) {
			uint16_t version;
			uint32_t id;
			uint8_t mode;                 /* 0: ethernet */
			uint8_t secret[24];
			uint8_t name[MFF_NAME_LEN];
		} init;
		struct __attribute__((packed)) {
			uint16_t index;
			uint64_t size;
		} add_region;
		struct __attribute__((packed)) {
			uint16_t flags, index, region;
			uint32_t offset;
			uint8_t log2_ring_size;
			uint16_t private_hdr_size;
		} add_ring;
		struct __attribute__((packed)) {
			uint8_t if_name[MFF_NAME_LEN];
		} connect;                            /* and connected */
		struct __attribute__((packed)) {
			uint32_t code;
			uint8_t string[96];
		} disconnect;
		uint8_t raw[126];
	};
};
_Static_assert(sizeof(struct mff_msg) == 128, "a memif message is 128 bytes");

struct mff_desc {
	uint16_t flags;
	uint16_t region;
	uint32_t length;
	uint32_t offset;
	uint32_t metadata;
};
_Static_assert(sizeof(struct mff_desc) == 16, "a memif descriptor is 16 bytes");

struct mff_ring_hdr {
	uint32_t cookie;
	uint16_t flags;
	uint16_t head;
	uint8_t pad0[56];
	uint16_t tail;
	uint8_t pad1[62];
	struct mff_desc desc[];
};
_Static_assert(offsetof(struct mff_ring_hdr, tail) == 64, "tail on the second cache line");
_Static_assert(offsetof(struct mff_ring_hdr, desc) == 128, "descriptors on the third");

/* ---- a connection ---- */

#define MFF_MAX_REGIONS 64            /* a zero-copy DPDK client sends one per memseg list */
#define MFF_MAX_RINGS 16              /* per direction: one S2C ring per worker */
#define MFF_MAX_LOG2_RING 14          /* portspec's ring_size is at most 16384 */
#define MFF_MAX_SEGS FWD_FRAME_SEGS   /* buffers one frame may span */
#define MFF_MAX_FRAME (64 * 1024 + 64)  /* longer: malformed (no port's MTU comes near) */
#define MFF_POLL_MS 100               /* the control thread looks at its stop flag this often */

struct mff_region {
	uint8_t *addr;
	uint64_t size;
};

struct mff_ring {
	struct mff_ring_hdr *r;
	uint16_t mask;
	int intr_fd;                  /* the client's eventfd for this ring */
	/* set-up only */
	uint16_t region;
	uint32_t offset;
	uint8_t log2;
	bool added;
};

/* What the workers read of a connected client (atomic pointer in struct mff; RCU). */
struct mff_conn {
	uint16_t n_regions, n_c2s, n_s2c;
	struct mff_region regions[MFF_MAX_REGIONS];
	struct mff_ring c2s[MFF_MAX_RINGS], s2c[MFF_MAX_RINGS];
	int region_fd[MFF_MAX_REGIONS];
	bool init_done;
};

struct mff {
	struct mff_conn *conn;        /* atomic; NULL while no client is connected */
	struct port *port;
	struct rte_mempool *pool;
	struct rte_ether_addr mac;
	uint64_t rx_missed;           /* written by the polling worker only */
	uint64_t one_copy;            /* the same */
	uint64_t connects, disconnects;   /* the control thread; atomic reads */
	/* control thread only */
	char path[108];
	uint32_t id;
	int listen_fd, cc_fd;
	struct mff_conn *pending;     /* being set up, not yet published */
	pthread_t thread;
	bool stop;                    /* atomic */
};

static inline struct mff_conn *conn_of(const struct mff *m)
{
	return __atomic_load_n(&m->conn, __ATOMIC_ACQUIRE);
}

/* The buffer descriptor D names, LEN bytes of it, or NULL when it lies outside its region. */
static inline uint8_t *buf_of(const struct mff_conn *c, const struct mff_desc *d, uint32_t len)
{
	const struct mff_region *rg;

	if (unlikely(d->region >= c->n_regions))
		return NULL;
	rg = &c->regions[d->region];
	if (unlikely((uint64_t)d->offset + len > rg->size))
		return NULL;
	return rg->addr + d->offset;
}

/* ---- the data path ---- */

/*
 * Reads the frame starting at slot CUR of C2S ring R, whose producer is at LAST: its pieces
 * into SEGS, its length into *LEN (0: malformed, to be dropped). Returns the slots it
 * spans, or 0 when its chain goes on past LAST (not published whole yet: left for later).
 */
static inline uint16_t read_frame(const struct mff_conn *c, const struct mff_ring *r,
				  uint16_t cur, uint16_t last, struct fwd_seg *segs,
				  unsigned int *n_segs, uint32_t *len)
{
	uint16_t k = 0;
	bool bad = false;
	uint32_t total = 0;
	struct mff_desc d;

	*n_segs = 0;
	*len = 0;
	do {
		if ((uint16_t)(cur + k) == last)
			return 0;
		d = r->r->desc[(uint16_t)(cur + k) & r->mask];
		k++;
		if (!bad) {
			uint8_t *p = buf_of(c, &d, d.length);

			if (p == NULL || *n_segs == MFF_MAX_SEGS || d.length > MFF_MAX_FRAME) {
				bad = true;
			} else if (d.length > 0) {
				segs[*n_segs].p = p;
				segs[*n_segs].len = d.length;
				(*n_segs)++;
				total += d.length;
			}
		}
		if (unlikely(k > r->mask))   /* a chain as long as the ring: nonsense */
			return k;
	} while (d.flags & MFF_DESC_NEXT);
	*len = bad || total < RTE_ETHER_HDR_LEN || total > MFF_MAX_FRAME ? 0 : total;
	return k;
}

/* Whether a frame of LEN bytes passes MAX_FRAME; a VLAN tag does not count (worker.c). */
static inline bool frame_too_long(const struct fwd_seg *seg, uint32_t len, uint32_t max_frame)
{
	const struct rte_ether_hdr *eh = (const struct rte_ether_hdr *)seg->p;

	if (likely(len <= max_frame))
		return false;
	if (seg->len >= RTE_ETHER_HDR_LEN &&
	    (eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) ||
	     eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ)))
		len -= RTE_VLAN_HLEN;
	return len > max_frame;
}

/*
 * Where a frame of LEN bytes goes in S2C ring R from slot SLOT, N_FREE slots posted: the
 * buffers into DST (their usable lengths in DST[i].len) and their descriptors' slots from
 * SLOT on; the slots it needs, or 0 when it does not fit (nothing written).
 */
static inline uint16_t place_frame(const struct mff_conn *c, const struct mff_ring *r,
				   uint16_t slot, uint16_t n_free, uint32_t len,
				   struct fwd_seg *dst)
{
	uint32_t room = 0;
	uint16_t k = 0;

	while (room < len) {
		struct mff_desc d;
		uint8_t *p;

		if (k == n_free || k == MFF_MAX_SEGS)
			return 0;
		d = r->r->desc[(uint16_t)(slot + k) & r->mask];
		p = d.length > 0 ? buf_of(c, &d, d.length) : NULL;
		if (unlikely(p == NULL))
			return 0;       /* a buffer we cannot use: taken as no room */
		dst[k].p = p;
		dst[k].len = RTE_MIN(d.length, len - room);
		room += dst[k].len;
		k++;
	}
	return k;
}

/* Copies SRC (N_SRC pieces) into DST (K buffers filled to their len). */
static inline void copy_pieces(const struct fwd_seg *src, unsigned int n_src,
			       const struct fwd_seg *dst, uint16_t k)
{
	uint32_t so = 0, dof = 0;
	unsigned int s = 0;
	uint16_t d = 0;

	if (likely(n_src == 1 && k == 1)) {
		rte_memcpy(dst[0].p, src[0].p, dst[0].len);
		return;
	}
	while (s < n_src && d < k) {
		uint32_t n = RTE_MIN(src[s].len - so, dst[d].len - dof);

		rte_memcpy(dst[d].p + dof, src[s].p + so, n);
		so += n;
		dof += n;
		if (so == src[s].len) {
			s++;
			so = 0;
		}
		if (dof == dst[d].len) {
			d++;
			dof = 0;
		}
	}
}

/* Writes the lengths and chain flags of the K descriptors from SLOT that DST filled. */
static inline void mark_placed(const struct mff_ring *r, uint16_t slot,
			       const struct fwd_seg *dst, uint16_t k)
{
	uint16_t i;

	for (i = 0; i < k; i++) {
		struct mff_desc *d = &r->r->desc[(uint16_t)(slot + i) & r->mask];

		d->length = dst[i].len;
		d->flags = i + 1 < k ? MFF_DESC_NEXT : 0;
	}
}

/*
 * Places a frame of LEN bytes (pieces SRC, N_SRC of them) in ring TX from *SLOT, among
 * *N_FREE free descriptors, copies it there and marks it, advancing both; DST is scratch
 * for the descriptors it takes. False, with nothing changed, when it does not fit.
 */
static inline bool put_pieces(const struct mff_conn *c, const struct mff_ring *tx,
			      uint16_t *slot, uint16_t *n_free, const struct fwd_seg *src,
			      unsigned int n_src, uint32_t len, struct fwd_seg *dst)
{
	uint16_t k = place_frame(c, tx, *slot, *n_free, len, dst);

	if (k == 0)
		return false;
	copy_pieces(src, n_src, dst, k);
	mark_placed(tx, *slot, dst, k);
	*slot = (uint16_t)(*slot + k);
	*n_free = (uint16_t)(*n_free - k);
	return true;
}

/* Posted buffers of S2C ring R from its tail; a client's nonsense counts as none. */
static inline uint16_t s2c_free(const struct mff_ring *r, uint16_t *slot)
{
	uint16_t n;

	*slot = __atomic_load_n(&r->r->tail, __ATOMIC_RELAXED);
	n = (uint16_t)(__atomic_load_n(&r->r->head, __ATOMIC_ACQUIRE) - *slot);
	return n > r->mask + 1 ? 0 : n;
}

/* Publishes S2C ring R's new tail and wakes the client if it asked to be woken. */
static inline void s2c_publish(const struct mff_ring *r, uint16_t slot)
{
	__atomic_store_n(&r->r->tail, slot, __ATOMIC_RELEASE);
	if (unlikely((__atomic_load_n(&r->r->flags, __ATOMIC_RELAXED) & MFF_RING_MASK_INT) == 0) &&
	    r->intr_fd >= 0) {
		uint64_t one = 1;

		if (write(r->intr_fd, &one, sizeof(one)) < 0) {
			/* an eventfd refuses only at its maximum count: the client is awake */
		}
	}
}

/* Frames published on C2S ring R from our tail on, and that tail. */
static inline uint16_t c2s_avail(const struct mff_ring *r, uint16_t *cur, uint16_t *last)
{
	uint16_t n;

	*cur = __atomic_load_n(&r->r->tail, __ATOMIC_RELAXED);
	*last = __atomic_load_n(&r->r->head, __ATOMIC_ACQUIRE);
	n = (uint16_t)(*last - *cur);
	if (unlikely(n > r->mask + 1)) {
		*last = *cur;   /* nonsense from the client: nothing to read */
		return 0;
	}
	return n;
}

static void count_in(struct mff *in, uint16_t malformed, uint16_t one_copy)
{
	if (malformed > 0)
		__atomic_store_n(&in->rx_missed, in->rx_missed + malformed, __ATOMIC_RELAXED);
	if (one_copy > 0)
		__atomic_store_n(&in->one_copy, in->one_copy + one_copy, __ATOMIC_RELAXED);
}

int mff_forward(struct mff *in, struct mff *out, uint16_t q, uint16_t max, uint32_t max_frame,
		struct fwd_direct_result *res)
{
	const struct mff_conn *ci = conn_of(in), *co = conn_of(out);
	struct fwd_seg src[MFF_MAX_SEGS], dst[MFF_MAX_SEGS];
	uint16_t cur, last, slot, n_free, start;
	const struct mff_ring *rx, *tx;

	if (ci == NULL || co == NULL || ci->n_c2s == 0 || q >= co->n_s2c)
		return -1;
	memset(res, 0, sizeof(*res));
	rx = &ci->c2s[0];
	tx = &co->s2c[q];
	if (c2s_avail(rx, &cur, &last) == 0)
		return 0;
	n_free = s2c_free(tx, &slot);
	start = slot;
	while (cur != last && res->rx + res->malformed < max) {
		unsigned int n_src;
		uint32_t len;
		uint16_t k = read_frame(ci, rx, cur, last, src, &n_src, &len);

		if (k == 0)
			break;
		cur = (uint16_t)(cur + k);
		if (cur != last) {      /* the next frame's first bytes, while this one copies */
			struct mff_desc nd = rx->r->desc[cur & rx->mask];
			const uint8_t *np = buf_of(ci, &nd, nd.length);

			if (np != NULL)
				rte_prefetch0(np);
		}
		if (unlikely(len == 0)) {
			res->malformed++;
			continue;
		}
		res->rx++;
		res->rx_bytes += len;
		if (unlikely(frame_too_long(&src[0], len, max_frame))) {
			res->too_long++;
			continue;
		}
		if (unlikely(!put_pieces(co, tx, &slot, &n_free, src, n_src, len, dst))) {
			res->full++;
			continue;
		}
		res->sent++;
		res->sent_bytes += len;
	}
	/* Ours to read no more: the client may reuse the buffers. */
	__atomic_store_n(&rx->r->tail, cur, __ATOMIC_RELEASE);
	if (slot != start)
		s2c_publish(tx, slot);
	count_in(in, res->malformed, res->sent);
	return 0;
}

int mff_take(struct mff *in, uint16_t max, struct fwd_frames *b)
{
	const struct mff_conn *c = conn_of(in);
	const struct mff_ring *rx;
	uint16_t cur, last, used = 0;

	if (c == NULL || c->n_c2s == 0)
		return -1;
	rx = &c->c2s[0];
	b->src = c;
	b->n = 0;
	c2s_avail(rx, &cur, &last);
	max = RTE_MIN(max, (uint16_t)FWD_MAX_BURST);
	/* A frame may need MFF_MAX_SEGS pieces: one that might not fit waits for the next. */
	while (cur != last && b->n < max && FWD_BURST_SEGS - used >= MFF_MAX_SEGS) {
		struct fwd_frame *f = &b->f[b->n];
		unsigned int n_src;
		uint32_t len;
		uint16_t k = read_frame(c, rx, cur, last, &b->segs[used], &n_src, &len);

		if (k == 0)
			break;
		cur = (uint16_t)(cur + k);
		f->seg = used;
		if (unlikely(len == 0)) {
			f->n_segs = 0;
			f->len = -1;
		} else {
			f->n_segs = (uint16_t)n_src;
			f->len = (int32_t)len;
			rte_prefetch0(b->segs[used].p);
			used = (uint16_t)(used + n_src);
		}
		b->n++;
	}
	b->end = cur;
	return 0;
}

void mff_release(struct mff *in, const struct fwd_frames *b, uint16_t sent)
{
	/* The connection the burst was read from: withdrawing it waits for this burst's end. */
	const struct mff_conn *c = b->src;
	uint16_t i, malformed = 0;

	if (b->n == 0)
		return;
	for (i = 0; i < b->n; i++)
		malformed += b->f[i].len < 0;
	/* Ours to read no more: the client may reuse the buffers. */
	__atomic_store_n(&c->c2s[0].r->tail, b->end, __ATOMIC_RELEASE);
	count_in(in, malformed, sent);
}

void mff_put_frames(struct mff *out, uint16_t q, const struct fwd_seg *segs,
		    const struct fwd_frame *frames, uint16_t n, uint32_t max_frame,
		    struct fwd_direct_result *res)
{
	const struct mff_conn *co = conn_of(out);
	const struct mff_ring *tx = NULL;
	struct fwd_seg dst[MFF_MAX_SEGS];
	uint16_t slot = 0, start = 0, n_free = 0, i;

	memset(res, 0, sizeof(*res));
	if (n == 0)
		return;
	if (co != NULL && q < co->n_s2c) {
		tx = &co->s2c[q];
		n_free = s2c_free(tx, &slot);
		start = slot;
	}
	for (i = 0; i < n; i++) {
		const struct fwd_frame *f = &frames[i];
		const struct fwd_seg *src = &segs[f->seg];

		if (unlikely(f->len < 0)) {
			res->malformed++;
			continue;
		}
		res->rx++;
		res->rx_bytes += (uint32_t)f->len;
		if (unlikely(frame_too_long(src, (uint32_t)f->len, max_frame))) {
			res->too_long++;
			continue;
		}
		/* No client (or no ring Q): full, as mff_tx_burst() takes nothing then. */
		if (unlikely(tx == NULL || !put_pieces(co, tx, &slot, &n_free, src, f->n_segs,
						       (uint32_t)f->len, dst))) {
			res->full++;
			continue;
		}
		res->sent++;
		res->sent_bytes += (uint32_t)f->len;
	}
	if (slot != start)
		s2c_publish(tx, slot);
}

void mff_put(struct mff *out, uint16_t q, const struct fwd_frames *b, uint32_t max_frame,
	     struct fwd_direct_result *res)
{
	mff_put_frames(out, q, b->segs, b->f, b->n, max_frame, res);
}

/* An mbuf chain of POOL holding the LEN bytes of SRC; NULL when the pool is short. */
static struct rte_mbuf *frame_to_mbuf(struct rte_mempool *pool, const struct fwd_seg *src,
				      unsigned int n_src, uint32_t len)
{
	struct rte_mbuf *head = NULL, *last = NULL, *m = NULL;
	uint32_t so = 0, room = 0;
	unsigned int s = 0;

	while (s < n_src) {
		uint32_t n;

		if (room == 0) {
			m = rte_pktmbuf_alloc(pool);
			if (m == NULL) {
				rte_pktmbuf_free(head);
				return NULL;
			}
			room = rte_pktmbuf_tailroom(m);
			if (head == NULL) {
				head = m;
			} else {
				last->next = m;
				head->nb_segs++;
			}
			last = m;
		}
		n = RTE_MIN(src[s].len - so, room);
		rte_memcpy(rte_pktmbuf_mtod_offset(m, uint8_t *, m->data_len), src[s].p + so, n);
		m->data_len = (uint16_t)(m->data_len + n);
		room -= n;
		so += n;
		if (so == src[s].len) {
			s++;
			so = 0;
		}
	}
	head->pkt_len = len;
	return head;
}

uint16_t mff_rx_burst(struct mff *m, struct rte_mbuf **pkts, uint16_t n)
{
	const struct mff_conn *c = conn_of(m);
	struct fwd_seg src[MFF_MAX_SEGS];
	uint16_t cur, last, got = 0, bad = 0;
	const struct mff_ring *rx;

	if (c == NULL || c->n_c2s == 0)
		return 0;
	rx = &c->c2s[0];
	if (c2s_avail(rx, &cur, &last) == 0)
		return 0;
	while (cur != last && got < n) {
		unsigned int n_src;
		uint32_t len;
		uint16_t k = read_frame(c, rx, cur, last, src, &n_src, &len);
		struct rte_mbuf *mb;

		if (k == 0)
			break;
		if (unlikely(len == 0)) {
			bad++;
			cur = (uint16_t)(cur + k);
			continue;
		}
		mb = frame_to_mbuf(m->pool, src, n_src, len);
		if (unlikely(mb == NULL))
			break;  /* left in the ring for the next poll: the pool is short a moment */
		pkts[got++] = mb;
		cur = (uint16_t)(cur + k);
	}
	__atomic_store_n(&rx->r->tail, cur, __ATOMIC_RELEASE);
	count_in(m, bad, 0);
	return got;
}

uint16_t mff_tx_burst(struct mff *m, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	const struct mff_conn *c = conn_of(m);
	struct fwd_seg src[MFF_MAX_SEGS], dst[MFF_MAX_SEGS];
	uint16_t slot, start, n_free, sent = 0;
	const struct mff_ring *tx;

	if (c == NULL || q >= c->n_s2c)
		return 0;
	tx = &c->s2c[q];
	n_free = s2c_free(tx, &slot);
	start = slot;
	while (sent < n && n_free > 0) {
		struct rte_mbuf *mb = pkts[sent], *seg;
		unsigned int n_src = 0;

		for (seg = mb; seg != NULL && n_src < MFF_MAX_SEGS; seg = seg->next) {
			src[n_src].p = rte_pktmbuf_mtod(seg, uint8_t *);
			src[n_src++].len = seg->data_len;
		}
		if (unlikely(seg != NULL))
			break;          /* more pieces than a frame may have: left unsent */
		if (!put_pieces(c, tx, &slot, &n_free, src, n_src, mb->pkt_len, dst))
			break;
		sent++;
	}
	if (slot != start)
		s2c_publish(tx, slot);
	if (sent > 0)
		rte_pktmbuf_free_bulk(pkts, sent);
	return sent;
}

/* ---- the control side: one thread per port ---- */

static int send_msg(int fd, const struct mff_msg *msg)
{
	ssize_t n = send(fd, msg, sizeof(*msg), MSG_NOSIGNAL);

	return n == (ssize_t)sizeof(*msg) ? 0 : -1;
}

static void send_disconnect(int fd, const char *why)
{
	struct mff_msg msg = { .type = MFF_MSG_DISCONNECT };

	snprintf((char *)msg.disconnect.string, sizeof(msg.disconnect.string), "%s", why);
	(void)send_msg(fd, &msg);
}

static void conn_free(struct mff_conn *c)
{
	uint16_t i;

	if (c == NULL)
		return;
	for (i = 0; i < MFF_MAX_REGIONS; i++) {
		if (c->regions[i].addr != NULL)
			munmap(c->regions[i].addr, c->regions[i].size);
		if (c->region_fd[i] >= 0)
			close(c->region_fd[i]);
	}
	for (i = 0; i < MFF_MAX_RINGS; i++) {
		if (c->c2s[i].intr_fd >= 0)
			close(c->c2s[i].intr_fd);
		if (c->s2c[i].intr_fd >= 0)
			close(c->s2c[i].intr_fd);
	}
	free(c);
}

static struct mff_conn *conn_new(void)
{
	struct mff_conn *c = calloc(1, sizeof(*c));
	unsigned int i;

	if (c == NULL)
		return NULL;
	for (i = 0; i < MFF_MAX_REGIONS; i++)
		c->region_fd[i] = -1;
	for (i = 0; i < MFF_MAX_RINGS; i++)
		c->c2s[i].intr_fd = c->s2c[i].intr_fd = -1;
	return c;
}

/*
 * A client that leaves (testpmd's port close, a crash) has usually queued its last frames
 * a moment before: the worker is given up to MFF_DRAIN_MS to take them, so that they are
 * forwarded or counted rather than left in a ring nobody reads again. Its memory stays
 * mapped meanwhile, so reading it is safe even after the client is gone. The wait ends as
 * soon as the ring is empty, so the bound matters only for a worker that does not run: on
 * a loaded machine a worker can be off its CPU for tens of milliseconds, and a bound of
 * 50 ms left a whole ring unread. This is the port's own control thread, so the control
 * socket does not wait meanwhile.
 */
#define MFF_DRAIN_MS 1000

static void wait_drained(const struct mff_conn *c)
{
	const struct mff_ring_hdr *r = c->c2s[0].r;
	unsigned int i;
	uint16_t target;

	if (c->n_c2s == 0 || r == NULL)
		return;
	/* What is queued now, not what a client still sending adds meanwhile. */
	target = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	for (i = 0; i < MFF_DRAIN_MS * 10; i++) {
		uint16_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);

		if ((uint16_t)(target - tail) > c->c2s[0].mask + 1u || tail == target)
			return;     /* drained, or positions that make no sense */
		usleep(100);
	}
}

/*
 * Ends the connection: the workers let go of the client's memory (a grace period) before
 * it is unmapped. A worker stuck past the grace period's bound may still read it: the
 * mapping is then left in place (leaked) rather than pulled from under it.
 */
static void drop_connection(struct mff *m, const char *why)
{
	struct mff_conn *c = conn_of(m);

	if (c != NULL) {
		wait_drained(c);
		__atomic_store_n(&m->conn, NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&m->port->link_up, false, __ATOMIC_RELAXED);
		__atomic_store_n(&m->disconnects, m->disconnects + 1, __ATOMIC_RELAXED);
		if (wk_quiesce())
			conn_free(c);
		else
			LOG(ERR, "memif %s: a worker is stuck; the client's memory stays mapped",
			    m->path);
		LOG(INFO, "memif %s: client gone (%s)", m->path, why);
	}
	conn_free(m->pending);
	m->pending = NULL;
	if (m->cc_fd >= 0) {
		close(m->cc_fd);
		m->cc_fd = -1;
	}
}

/*
 * Makes sure the client can never shrink the file behind region FD: a worker touching a
 * page past the file's new end would take SIGBUS and the whole daemon with it. A memfd
 * already sealed (F_SEAL_SHRINK) passes; one made with MFD_ALLOW_SEALING but not sealed is
 * sealed here (DPDK's memif client passes one way or the other). Anything else (a memfd
 * without sealing, a hugetlbfs or tmpfs file) can be truncated at any time: refused.
 */
static bool seal_against_shrinking(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals >= 0 && (seals & F_SEAL_SHRINK) != 0)
		return true;
	return seals >= 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0;
}

/* Maps the regions and checks the rings; the connection is then whole. ERR: why not. */
static int map_connection(struct mff_conn *c, const char **err)
{
	uint16_t i;

	if (c->n_regions == 0 || c->n_c2s == 0 || c->n_s2c == 0) {
		*err = "no region or no rings";
		return -1;
	}
	for (i = 0; i < c->n_regions; i++) {
		struct stat st;
		void *a;

		if (!seal_against_shrinking(c->region_fd[i])) {
			*err = "a region that can shrink (not a memfd sealed with F_SEAL_SHRINK)";
			return -1;
		}
		/* Mapped beyond the file's end, a page would fault (SIGBUS) when touched. */
		if (fstat(c->region_fd[i], &st) != 0 || (uint64_t)st.st_size < c->regions[i].size) {
			*err = "a region larger than its file";
			return -1;
		}
		a = mmap(NULL, c->regions[i].size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 c->region_fd[i], 0);
		if (a == MAP_FAILED) {
			*err = "cannot map a region";
			return -1;
		}
		c->regions[i].addr = a;
	}
	for (i = 0; i < c->n_c2s + c->n_s2c; i++) {
		struct mff_ring *r = i < c->n_c2s ? &c->c2s[i] : &c->s2c[i - c->n_c2s];
		uint64_t bytes = sizeof(struct mff_ring_hdr) +
				 (sizeof(struct mff_desc) << r->log2);

		if (!r->added || r->region >= c->n_regions ||
		    (uint64_t)r->offset + bytes > c->regions[r->region].size) {
			*err = "a ring missing or outside its region";
			return -1;
		}
		r->r = (struct mff_ring_hdr *)(c->regions[r->region].addr + r->offset);
		r->mask = (uint16_t)((1u << r->log2) - 1);
		if (r->r->cookie != MFF_COOKIE) {
			*err = "wrong ring cookie";
			return -1;
		}
		__atomic_store_n(&r->r->head, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&r->r->tail, 0, __ATOMIC_RELAXED);
		/* We poll: the client need not wake us when it sends. */
		if (i < c->n_c2s)
			r->r->flags = MFF_RING_MASK_INT;
	}
	return 0;
}

static int on_add_ring(struct mff_conn *c, const struct mff_msg *msg, int fd, const char **err)
{
	bool c2s = msg->add_ring.flags & MFF_ADD_RING_C2S;
	uint16_t i = msg->add_ring.index;
	struct mff_ring *r;

	if (fd < 0 || i >= MFF_MAX_RINGS || msg->add_ring.log2_ring_size > MFF_MAX_LOG2_RING ||
	    msg->add_ring.private_hdr_size != 0) {
		*err = fd < 0 ? "missing interrupt fd" : "ring not supported";
		return -1;
	}
	r = c2s ? &c->c2s[i] : &c->s2c[i];
	if (r->added) {
		*err = "ring added twice";
		return -1;
	}
	r->added = true;
	r->intr_fd = fd;
	r->region = msg->add_ring.region;
	r->offset = msg->add_ring.offset;
	r->log2 = msg->add_ring.log2_ring_size;
	if (c2s)
		c->n_c2s = (uint16_t)RTE_MAX(c->n_c2s, i + 1);
	else
		c->n_s2c = (uint16_t)RTE_MAX(c->n_s2c, i + 1);
	return 0;
}

/*
 * Handles one message of the client's; a reply where the protocol asks for one. -1 (with
 * ERR, told to the client) ends the connection. FD: a descriptor that came with it, which
 * this takes over.
 */
static int on_message(struct mff *m, const struct mff_msg *msg, int fd, const char **err)
{
	struct mff_conn *c = m->pending;
	struct mff_msg reply = { .type = MFF_MSG_ACK };

	if (msg->type == MFF_MSG_DISCONNECT) {
		*err = "the client said goodbye";
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (c == NULL) {
		*err = "unexpected message";
		goto fail;
	}
	if (!c->init_done && msg->type != MFF_MSG_INIT) {
		*err = "unexpected message";
		goto fail;
	}
	switch (msg->type) {
	case MFF_MSG_INIT:
		if (c->init_done || msg->init.version != MFF_VERSION) {
			*err = c->init_done ? "unexpected message" : "incompatible memif version";
			goto fail;
		}
		if (msg->init.id != m->id) {
			*err = "ID not found";
			goto fail;
		}
		if (msg->init.mode != 0) {
			*err = "only ethernet mode supported";
			goto fail;
		}
		c->init_done = true;
		break;
	case MFF_MSG_ADD_REGION:
		if (fd < 0 || msg->add_region.index != c->n_regions ||
		    c->n_regions == MFF_MAX_REGIONS || msg->add_region.size == 0) {
			*err = fd < 0 ? "missing region fd" : "invalid region index";
			goto fail;
		}
		c->region_fd[c->n_regions] = fd;
		c->regions[c->n_regions++].size = msg->add_region.size;
		fd = -1;
		break;
	case MFF_MSG_ADD_RING:
		if (on_add_ring(c, msg, fd, err) != 0)
			goto fail;
		fd = -1;
		break;
	case MFF_MSG_CONNECT:
		if (map_connection(c, err) != 0)
			goto fail;
		reply.type = MFF_MSG_CONNECTED;
		snprintf((char *)reply.connect.if_name, sizeof(reply.connect.if_name), "%s",
			 m->port->name);
		m->pending = NULL;
		__atomic_store_n(&m->conn, c, __ATOMIC_RELEASE);
		__atomic_store_n(&m->port->link_up, true, __ATOMIC_RELAXED);
		__atomic_store_n(&m->connects, m->connects + 1, __ATOMIC_RELAXED);
		LOG(INFO, "memif %s: client '%.32s' connected: %u+%u rings of %u slots, "
		    "%u regions", m->path, (const char *)msg->connect.if_name, c->n_c2s,
		    c->n_s2c, c->c2s[0].mask + 1u, c->n_regions);
		break;
	default:
		*err = "unknown message type";
		goto fail;
	}
	if (fd >= 0)
		close(fd);
	return send_msg(m->cc_fd, &reply) == 0 ? 0 : ((*err = "cannot answer"), -1);
fail:
	if (fd >= 0)
		close(fd);
	send_disconnect(m->cc_fd, *err);
	return -1;
}

/* Ends a client's connection for ERR; one refused in its handshake is logged here (no
 * connection was made, so drop_connection() has nothing to say). */
static void refuse_or_drop(struct mff *m, const char *err)
{
	if (conn_of(m) == NULL)
		LOG(WARNING, "memif %s: client refused: %s", m->path, err);
	drop_connection(m, err);
}

/* Reads one message (and a descriptor that came with it) from the client. */
static int read_message(int cc, struct mff_msg *msg, int *fd)
{
	char ctl[CMSG_SPACE(sizeof(int))] __attribute__((aligned(8)));
	struct iovec iov = { .iov_base = msg, .iov_len = sizeof(*msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm;
	ssize_t n;

	*fd = -1;
	n = recvmsg(cc, &mh, MSG_CMSG_CLOEXEC);
	for (cm = CMSG_FIRSTHDR(&mh); n > 0 && cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(*msg)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

static void accept_client(struct mff *m)
{
	struct mff_msg hello = { .type = MFF_MSG_HELLO };
	int fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (m->cc_fd >= 0) {
		send_disconnect(fd, "already connected");
		close(fd);
		return;
	}
	m->pending = conn_new();
	if (m->pending == NULL) {
		send_disconnect(fd, "no memory");
		close(fd);
		return;
	}
	m->cc_fd = fd;
	snprintf((char *)hello.hello.name, sizeof(hello.hello.name), "sluiced");
	hello.hello.min_version = hello.hello.max_version = MFF_VERSION;
	hello.hello.max_region = MFF_MAX_REGIONS - 1;
	hello.hello.max_c2s_ring = 0;           /* one receive ring: queue 0 */
	hello.hello.max_s2c_ring = MFF_MAX_RINGS - 1;
	hello.hello.max_log2_ring_size = MFF_MAX_LOG2_RING;
	if (send_msg(fd, &hello) != 0)
		drop_connection(m, "cannot say hello");
}

static void *control_loop(void *arg)
{
	struct mff *m = arg;

	while (!__atomic_load_n(&m->stop, __ATOMIC_RELAXED)) {
		struct pollfd pfd[2] = { { .fd = m->listen_fd, .events = POLLIN },
					 { .fd = m->cc_fd, .events = POLLIN } };
		struct mff_msg msg;
		const char *err = NULL;
		int fd;

		if (poll(pfd, m->cc_fd >= 0 ? 2 : 1, MFF_POLL_MS) <= 0)
			continue;
		if (m->cc_fd >= 0 && pfd[1].revents != 0) {
			if (read_message(m->cc_fd, &msg, &fd) != 0)
				drop_connection(m, "socket closed");
			else if (on_message(m, &msg, fd, &err) != 0)
				refuse_or_drop(m, err);
		}
		if (pfd[0].revents & POLLIN)
			accept_client(m);
	}
	if (m->cc_fd >= 0)
		send_disconnect(m->cc_fd, "port removed");
	drop_connection(m, "port removed");
	return NULL;
}

static int listen_on(const char *path, char *err, size_t err_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, err_len, "memif: socket path too long");
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1) != 0) {
		snprintf(err, err_len, "memif: cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

struct mff *mff_open(struct port *p, const char *path, uint32_t id,
		     const struct rte_ether_addr *mac, struct rte_mempool *pool, char *err,
		     size_t err_len)
{
	struct mff *m = rte_zmalloc("mff", sizeof(*m), RTE_CACHE_LINE_SIZE);
	char name[16];
	int rc;

	if (m == NULL) {
		snprintf(err, err_len, "memif: no memory");
		return NULL;
	}
	m->port = p;
	m->pool = pool;
	m->id = id;
	m->cc_fd = -1;
	snprintf(m->path, sizeof(m->path), "%s", path);
	if (mac != NULL)
		m->mac = *mac;
	else
		rte_eth_random_addr(m->mac.addr_bytes);
	m->listen_fd = listen_on(path, err, err_len);
	if (m->listen_fd < 0) {
		rte_free(m);
		return NULL;
	}
	snprintf(name, sizeof(name), "sl-mff%u", p->id);
	rc = rte_ctrl_thread_create(&m->thread, name, NULL, control_loop, m);
	if (rc != 0) {
		snprintf(err, err_len, "memif: cannot start its control thread: %s",
			 strerror(-rc));
		close(m->listen_fd);
		unlink(path);
		rte_free(m);
		return NULL;
	}
	return m;
}

void mff_close(struct mff *m)
{
	if (m == NULL)
		return;
	__atomic_store_n(&m->stop, true, __ATOMIC_RELAXED);
	pthread_join(m->thread, NULL);
	close(m->listen_fd);
	unlink(m->path);
	rte_free(m);
}

bool mff_link_up(const struct mff *m)
{
	return conn_of(m) != NULL;
}

void mff_mac(const struct mff *m, struct rte_ether_addr *mac)
{
	*mac = m->mac;
}

uint64_t mff_rx_missed(const struct mff *m)
{
	return __atomic_load_n(&m->rx_missed, __ATOMIC_RELAXED);
}

uint64_t mff_one_copy(const struct mff *m)
{
	return __atomic_load_n(&m->one_copy, __ATOMIC_RELAXED);
}

uint64_t mff_connects(const struct mff *m)
{
	return __atomic_load_n(&m->connects, __ATOMIC_RELAXED);
}

uint64_t mff_disconnects(const struct mff *m)
{
	return __atomic_load_n(&m->disconnects, __ATOMIC_RELAXED);
}
