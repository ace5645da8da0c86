/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one-copy vhost-user path (vhost_fast.h). A guest's transmit queue holds descriptor
 * chains of [virtio-net header | frame]; its receive queue holds empty buffers into which
 * the device writes [header | frame], over several buffers when mergeable receive buffers
 * were negotiated (the header's num_buffers says how many). Forwarding between two guests
 * is then: read the sender's chain, translate each buffer's guest address to ours, copy the
 * bytes into the receiver's buffers, and return both chains on the used rings. The used
 * indexes are stored once per burst and each guest is interrupted at most once per burst,
 * only when it has not set VRING_AVAIL_F_NO_INTERRUPT (poll-mode guests do).
 *
 * Nothing here trusts the guest: descriptor indexes, chain lengths and addresses are
 * checked, and a chain that fails is returned unread and counted (malformed).
 *
 * The published state (struct vhf_dev) is a snapshot taken when the vhost library says a
 * guest is ready (new_device). The library calls destroy_device before it invalidates the
 * rings or unmaps guest memory (disconnect, GET_VRING_BASE on a stop, unregister): the
 * snapshot is withdrawn there, a grace period waited for (a worker's burst that began
 * before has ended), and our ring positions handed back with rte_vhost_set_vring_base so
 * that a reconnecting guest resumes where we stopped.
 */
#include "vhost_fast.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>
#include <rte_vhost.h>

#include "fwd.h"
#include "log.h"
#include "port.h"
#include "worker.h"

#define VHF_MAX_VRINGS 32             /* 16 queue pairs: workers are at most WK_MAX_WORKERS */
#define VHF_MAX_REGIONS 64
#define VHF_MAX_SEGS FWD_FRAME_SEGS   /* buffers in one frame's chain */
#define VHF_MAX_FRAME (64 * 1024 + 64)
#define VHF_TXQ 1                     /* the guest's transmit queue of pair 0: our input */
#define VHF_MAX_PORTS PORT_MAX
#define VHF_SHADOW 512                /* used entries kept back per ring and burst */

/*
 * Features this data path does not implement, taken out of the library's offer. In-order
 * use of buffers stays offered: buffers are taken and returned in the order the guest
 * made them available, on both rings, and a DPDK guest's in-order paths are cheaper.
 */
#define VHF_REFUSED_FEATURES \
	((1ULL << VIRTIO_F_RING_PACKED) | (1ULL << VIRTIO_RING_F_INDIRECT_DESC) | \
	 (1ULL << VIRTIO_RING_F_EVENT_IDX) | \
	 (1ULL << VIRTIO_NET_F_CSUM) | (1ULL << VIRTIO_NET_F_GUEST_CSUM) | \
	 (1ULL << VIRTIO_NET_F_GUEST_TSO4) | (1ULL << VIRTIO_NET_F_GUEST_TSO6) | \
	 (1ULL << VIRTIO_NET_F_GUEST_ECN) | (1ULL << VIRTIO_NET_F_GUEST_UFO) | \
	 (1ULL << VIRTIO_NET_F_HOST_TSO4) | (1ULL << VIRTIO_NET_F_HOST_TSO6) | \
	 (1ULL << VIRTIO_NET_F_HOST_ECN) | (1ULL << VIRTIO_NET_F_HOST_UFO) | \
	 (1ULL << VHOST_F_LOG_ALL))

struct vhf_region {
	uint64_t gpa, end;            /* guest physical [gpa, end) */
	uint64_t offset;              /* host address - guest address */
};

/* One split virtqueue, as the one thread that serves it sees it. */
struct vhf_ring {
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t size, mask;
	uint16_t last_avail;          /* the next avail entry to take */
	uint16_t last_used;           /* the next used entry to fill; published at burst end */
	int callfd;
	/*
	 * Used entries of the burst, written into the ring all at once when it is published:
	 * the ring's first line also holds the index the guest polls, and storing entries one
	 * by one between the copies would pull that line away from the guest again and again.
	 */
	uint16_t n_shadow;
	struct vring_used_elem shadow[VHF_SHADOW];
} __rte_cache_aligned;

/* A guest's memory table; replaced as a whole when the guest's memory changes. */
struct vhf_mem {
	uint32_t n_regions;
	struct vhf_region regions[VHF_MAX_REGIONS];
};

/* A connected guest: published by new_device, withdrawn by destroy_device. */
struct vhf_dev {
	int vid;
	uint16_t hdr_len;             /* 12 (VERSION_1 or mergeable buffers) or 10 */
	bool mergeable;
	uint16_t n_vrings;
	struct vhf_mem *mem;          /* atomic; the old one is freed after a grace period */
	struct vhf_ring rings[VHF_MAX_VRINGS];
};

struct vhf {
	struct vhf_dev *dev;          /* atomic; NULL while no guest is ready */
	bool enabled[VHF_MAX_VRINGS]; /* atomic: the guest enabled the vring */
	struct port *port;
	struct rte_mempool *pool;
	struct rte_ether_addr mac;
	uint64_t rx_missed;           /* written by the polling worker only */
	uint64_t one_copy;            /* the same */
	char path[PORTSPEC_PATH_LEN];
	bool registered;
};

/* A guest's memory table as one burst uses it: the region of the last hit is tried first. */
struct vhf_xlate {
	const struct vhf_mem *mem;
	const struct vhf_region *hint;
};

/* Socket path -> port, for the library's callbacks, which name a device by its vid. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vhf *table[VHF_MAX_PORTS];

static struct vhf *vhf_by_vid(int vid)
{
	char path[PORTSPEC_PATH_LEN];
	unsigned int i;

	if (rte_vhost_get_ifname(vid, path, sizeof(path)) != 0)
		return NULL;
	for (i = 0; i < VHF_MAX_PORTS; i++)
		if (table[i] != NULL && strcmp(table[i]->path, path) == 0)
			return table[i];
	return NULL;
}

/* ---- the data path ---- */

/*
 * Our address of guest buffer [GPA, GPA+LEN) in X's memory, or NULL when no one region holds
 * it. X remembers the region that held the last buffer looked up: a guest's buffers come
 * from one or two regions, so it is nearly always the one, and the walk is skipped.
 */
static inline uint8_t *gpa_to_va(struct vhf_xlate *x, uint64_t gpa, uint32_t len)
{
	const struct vhf_region *r = x->hint;
	uint32_t i;

	if (gpa + len < gpa)
		return NULL;
	if (likely(r != NULL) && gpa >= r->gpa && gpa + len <= r->end)
		return (uint8_t *)(uintptr_t)(gpa + r->offset);
	for (i = 0; i < x->mem->n_regions; i++) {
		r = &x->mem->regions[i];
		if (gpa >= r->gpa && gpa + len <= r->end) {
			x->hint = r;
			return (uint8_t *)(uintptr_t)(gpa + r->offset);
		}
	}
	return NULL;
}

/*
 * Asks for the cache line at P in the state a store needs (x86 PREFETCHW): the receiver's
 * buffers and both used rings were last written or read by the guests' CPU, and a store
 * that finds its line elsewhere waits in the store buffer; a few dozen of those fill it
 * and stall the copies. Issued for the whole burst ahead, their misses overlap.
 */
static inline void prefetch_for_store(const void *p)
{
#if defined(RTE_ARCH_X86)
	asm volatile("prefetchw %0" : : "m"(*(const volatile uint8_t *)p));
#else
	rte_prefetch0_write(p);
#endif
}

static inline uint16_t avail_idx(const struct vhf_ring *r)
{
	return __atomic_load_n(&r->avail->idx, __ATOMIC_ACQUIRE);
}

/* Writes R's kept-back used entries into the ring, not yet visible to the guest. */
static void used_flush_entries(struct vhf_ring *r)
{
	uint16_t start = (uint16_t)(r->last_used - r->n_shadow), i;

	for (i = 0; i < r->n_shadow; i++)
		r->used->ring[(uint16_t)(start + i) & r->mask] = r->shadow[i];
	r->n_shadow = 0;
}

static inline void used_put(struct vhf_ring *r, uint16_t id, uint32_t len)
{
	if (unlikely(r->n_shadow == VHF_SHADOW))
		used_flush_entries(r);
	r->shadow[r->n_shadow].id = id;
	r->shadow[r->n_shadow++].len = len;
	r->last_used++;
}

/*
 * Publishes the used entries written since the last call and interrupts the guest unless
 * it asked not to be. The fence orders the index store before the flags load, so that a
 * guest that clears the flag after our load has seen the new index (virtio's protocol).
 */
static void used_publish(struct vhf_ring *r)
{
	if (r->n_shadow == 0 && r->last_used == r->used->idx)
		return;
	used_flush_entries(r);
	__atomic_store_n(&r->used->idx, r->last_used, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (r->callfd >= 0 &&
	    !(__atomic_load_n(&r->avail->flags, __ATOMIC_RELAXED) & VRING_AVAIL_F_NO_INTERRUPT))
		eventfd_write(r->callfd, 1);
}

/*
 * Reads chain HEAD of the guest's transmit ring R (a frame it sends): its buffers, the
 * virtio-net header skipped, into SEGS (room for MAX_SEGS). Returns the frame's length, or
 * -1 for a chain that is not a readable, translatable, loop-free frame.
 */
static int take_frame(const struct vhf_dev *d, struct vhf_xlate *x,
		      const struct vhf_ring *r, uint16_t head, struct fwd_seg *segs,
		      unsigned int max_segs, unsigned int *n_segs)
{
	uint32_t skip = d->hdr_len, total = 0;
	uint16_t idx = head, hops = 0;
	unsigned int n = 0;

	for (;;) {
		const struct vring_desc *desc;
		uint32_t len;
		uint8_t *p;

		if (idx >= r->size || ++hops > r->size)
			return -1;
		desc = &r->desc[idx];
		len = desc->len;
		if ((desc->flags & (VRING_DESC_F_WRITE | VRING_DESC_F_INDIRECT)) != 0)
			return -1;
		p = gpa_to_va(x, desc->addr, len);
		if (p == NULL && len != 0)
			return -1;
		if (skip >= len) {
			skip -= len;
		} else {
			if (n == max_segs)
				return -1;
			segs[n].p = p + skip;
			segs[n].len = len - skip;
			total += len - skip;
			skip = 0;
			n++;
		}
		if (total > VHF_MAX_FRAME)
			return -1;
		if (!(desc->flags & VRING_DESC_F_NEXT))
			break;
		idx = desc->next;
	}
	*n_segs = n;
	return skip == 0 && total > 0 ? (int)total : -1;
}

/* Takes the head of R's next avail entry. */
static inline uint16_t next_head(struct vhf_ring *r)
{
	return r->avail->ring[r->last_avail++ & r->mask];
}

enum vhf_put { VHF_PUT_OK, VHF_PUT_FULL, VHF_PUT_BAD };

/* Where the copy into a guest stands: the source segments still to copy. */
struct vhf_src {
	const struct fwd_seg *segs;
	unsigned int n, i;
	uint32_t off;
	uint32_t left;                /* bytes still to copy */
};

/* Copies from S into [DST, DST+ROOM); returns the bytes copied. */
static inline uint32_t src_copy(struct vhf_src *s, uint8_t *dst, uint32_t room)
{
	uint32_t done = 0;

	while (room > 0 && s->left > 0) {
		const struct fwd_seg *g = &s->segs[s->i];
		uint32_t k = RTE_MIN(room, g->len - s->off);

		rte_memcpy(dst + done, g->p + s->off, k);
		done += k;
		room -= k;
		s->left -= k;
		s->off += k;
		if (s->off == g->len) {
			s->i++;
			s->off = 0;
		}
	}
	return done;
}

/* Zeroes a virtio-net header of LEN bytes (12 or 10) with fixed-size stores, no call. */
static inline void hdr_clear(uint8_t *p, uint16_t len)
{
	static const struct virtio_net_hdr_mrg_rxbuf zero;

	if (likely(len == sizeof(zero)))
		memcpy(p, &zero, sizeof(zero));
	else
		memcpy(p, &zero, sizeof(struct virtio_net_hdr));
}

/*
 * Fills the buffer chain HEAD of receive ring R (writable descriptors) from S: the header
 * first when *HDR is NULL (it is then set). Returns the bytes written, or -1 for a chain
 * that is not writable and translatable.
 */
static int64_t fill_chain(const struct vhf_dev *d, struct vhf_xlate *x,
			  const struct vhf_ring *r, uint16_t head, struct vhf_src *s,
			  struct virtio_net_hdr_mrg_rxbuf **hdr)
{
	uint16_t idx = head, hops = 0;
	int64_t written = 0;

	for (;;) {
		const struct vring_desc *desc;
		uint32_t len;
		uint8_t *p;

		if (idx >= r->size || ++hops > r->size)
			return -1;
		desc = &r->desc[idx];
		len = desc->len;
		if ((desc->flags & (VRING_DESC_F_WRITE | VRING_DESC_F_INDIRECT)) !=
		    VRING_DESC_F_WRITE)
			return -1;
		p = gpa_to_va(x, desc->addr, len);
		if (p == NULL)
			return -1;
		if (*hdr == NULL) {
			if (len < d->hdr_len)
				return -1;
			*hdr = (struct virtio_net_hdr_mrg_rxbuf *)p;
			hdr_clear(p, d->hdr_len);
			p += d->hdr_len;
			len -= d->hdr_len;
			written += d->hdr_len;
		}
		written += src_copy(s, p, len);
		if (s->left == 0 || !(desc->flags & VRING_DESC_F_NEXT))
			return written;
		idx = desc->next;
	}
}

/*
 * Copies a frame (S) into receive ring R, whose avail index the caller read as AVAIL: one
 * chain, or as many as it takes with mergeable buffers. The used entries are written, not
 * published. FULL or BAD leave R as it was (the frame is the caller's to drop).
 */
static enum vhf_put put_frame(const struct vhf_dev *d, struct vhf_xlate *x,
			      struct vhf_ring *r, uint16_t avail, struct vhf_src *s)
{
	uint16_t saved_avail, saved_used, n_bufs = 0;
	struct virtio_net_hdr_mrg_rxbuf *hdr = NULL;
	enum vhf_put why = VHF_PUT_FULL;

	/* Room for a whole frame's entries, so that undoing one never meets a flush. */
	if (r->n_shadow > VHF_SHADOW - VHF_MAX_SEGS)
		used_flush_entries(r);
	saved_avail = r->last_avail;
	saved_used = r->last_used;
	do {
		uint16_t head;
		int64_t written;

		if (r->last_avail == avail)
			goto undo;
		if (n_bufs == VHF_MAX_SEGS) {   /* buffers this small are a broken guest */
			why = VHF_PUT_BAD;
			goto undo;
		}
		head = next_head(r);
		written = fill_chain(d, x, r, head, s, &hdr);
		if (written < 0) {
			why = VHF_PUT_BAD;
			goto undo;
		}
		used_put(r, head, (uint32_t)written);
		n_bufs++;
		/* Without mergeable buffers one chain must hold it all: a guest that posts
		 * smaller ones cannot take the frame. */
		if (!d->mergeable && s->left > 0)
			goto undo;
	} while (s->left > 0);
	if (d->hdr_len == sizeof(*hdr))
		hdr->num_buffers = n_bufs;
	return VHF_PUT_OK;
undo:
	r->n_shadow = (uint16_t)(r->n_shadow - (uint16_t)(r->last_used - saved_used));
	r->last_avail = saved_avail;
	r->last_used = saved_used;
	return why;
}

/* Whether a frame of LEN bytes starting with SEG passes MAX_FRAME (worker.c's too_long). */
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

static inline struct vhf_dev *dev_of(const struct vhf *v)
{
	return __atomic_load_n(&v->dev, __ATOMIC_ACQUIRE);
}

static inline const struct vhf_mem *mem_of(const struct vhf_dev *d)
{
	return __atomic_load_n(&d->mem, __ATOMIC_ACQUIRE);
}

static inline bool vring_usable(const struct vhf *v, const struct vhf_dev *d, unsigned int i)
{
	return i < d->n_vrings && __atomic_load_n(&v->enabled[i], __ATOMIC_ACQUIRE) &&
	       d->rings[i].desc != NULL;
}

/*
 * The burst's frames as read from the sender's ring, and room for their pieces: a burst of
 * small frames has one piece each; a frame that does not fit in what is left ends the
 * burst early (the rest waits in the ring for the next one).
 */
#define VHF_BURST_SEGS FWD_BURST_SEGS

/* Copies frame F (its pieces in SEGS) into ring R's buffers, counting it in RES as sent,
 * too long for MAX_FRAME, or refused (no room). */
static inline void copy_frame(const struct vhf_dev *d, struct vhf_xlate *x, struct vhf_ring *r,
			      uint16_t avail, const struct fwd_seg *segs,
			      const struct fwd_frame *f, uint32_t max_frame,
			      struct fwd_direct_result *res)
{
	struct vhf_src s;

	if (frame_too_long(&segs[f->seg], (uint32_t)f->len, max_frame)) {
		res->too_long++;
		return;
	}
	s = (struct vhf_src){ .segs = &segs[f->seg], .n = f->n_segs, .left = (uint32_t)f->len };
	if (put_frame(d, x, r, avail, &s) == VHF_PUT_OK) {
		res->sent++;
		res->sent_bytes += (uint32_t)f->len;
	} else {
		res->full++;
	}
}

/*
 * Reads the burst's chains HEADS from the sender, whose descriptors the caller prefetched:
 * each frame's pieces, and its first bytes prefetched. Returns the frames read.
 */
static uint16_t read_burst(const struct vhf_dev *d, struct vhf_xlate *x, struct vhf_ring *r,
			   const uint16_t *heads, uint16_t n, struct fwd_frame *f,
			   struct fwd_seg *segs)
{
	unsigned int used = 0, k;
	uint16_t i;

	for (i = 0; i < n; i++) {
		unsigned int room = RTE_MIN(VHF_BURST_SEGS - used, (unsigned int)VHF_MAX_SEGS);

		if (room < VHF_MAX_SEGS && i > 0)
			break;
		f[i].head = heads[i];
		f[i].seg = (uint16_t)used;
		f[i].len = take_frame(d, x, r, f[i].head, &segs[used], room, &k);
		f[i].n_segs = f[i].len < 0 ? 0 : (uint16_t)k;
		if (f[i].len > 0)
			rte_prefetch0(segs[used].p);
		used += f[i].n_segs;
	}
	r->last_avail = (uint16_t)(r->last_avail + i);
	return i;
}

/* Takes the heads of R's next N avail entries into HEADS and prefetches their descriptors. */
static inline void read_heads(const struct vhf_ring *r, uint16_t n, uint16_t *heads)
{
	uint16_t i;

	for (i = 0; i < n; i++) {
		heads[i] = r->avail->ring[(uint16_t)(r->last_avail + i) & r->mask];
		rte_prefetch0(&r->desc[heads[i] & r->mask]);
	}
}

/*
 * Prefetches for storing the lines of R's used ring that the next N entries fill, except the
 * ring's first line: it holds the index the guest polls, and taking it early would only make
 * the guest take it back before our store.
 */
static inline void prefetch_used_line(const struct vhf_ring *r, uint16_t i)
{
	const uint8_t *line0 = RTE_PTR_ALIGN_FLOOR((const uint8_t *)&r->used->idx,
						   RTE_CACHE_LINE_SIZE);
	const uint8_t *p = RTE_PTR_ALIGN_FLOOR(
		(const uint8_t *)&r->used->ring[(uint16_t)(r->last_used + i) & r->mask],
		RTE_CACHE_LINE_SIZE);

	if (p != line0)
		prefetch_for_store(p);
}

static inline void prefetch_used(const struct vhf_ring *r, uint16_t n)
{
	const uint16_t per_line = RTE_CACHE_LINE_SIZE / sizeof(struct vring_used_elem);
	uint16_t i;

	/* An entry in each line the N entries cover: every per_line-th, and the last. */
	for (i = 0; i < n; i = (uint16_t)(i + per_line))
		prefetch_used_line(r, i);
	if (n > 0)
		prefetch_used_line(r, (uint16_t)(n - 1));
}

/*
 * Prefetches for storing the receiver's buffers that frames F will most likely fill: the
 * first buffer of each of the next N avail entries (HEADS, their descriptors read in this
 * burst already), as many lines as the header and frame I take. A guess only (a frame over
 * several buffers shifts the rest): nothing is written or kept.
 */
static void prefetch_receiver(const struct vhf_ring *r, struct vhf_xlate *x,
			      const uint16_t *heads, uint16_t n, const struct fwd_frame *f,
			      uint16_t hdr_len)
{
	uint16_t j;

	for (j = 0; j < n; j++) {
		const struct vring_desc *desc = &r->desc[heads[j] & r->mask];
		uint32_t len = desc->len, want;
		const uint8_t *p, *q;

		p = gpa_to_va(x, desc->addr, len);
		if (p == NULL || len == 0)
			continue;
		want = RTE_MIN(len, hdr_len + (uint32_t)RTE_MAX(f[j].len, 0));
		want = RTE_MIN(want, 4u * RTE_CACHE_LINE_SIZE);  /* longer copies stream */
		for (q = RTE_PTR_ALIGN_FLOOR(p, RTE_CACHE_LINE_SIZE); q < p + want;
		     q += RTE_CACHE_LINE_SIZE)
			prefetch_for_store(q);
	}
}

int vhf_forward(struct vhf *in, struct vhf *out, uint16_t q, uint16_t max, uint32_t max_frame,
		struct fwd_direct_result *res)
{
	struct vhf_dev *di = dev_of(in), *dout = dev_of(out);
	struct fwd_frame frames[FWD_MAX_BURST];
	uint16_t in_heads[FWD_MAX_BURST], out_heads[FWD_MAX_BURST];
	struct fwd_seg segs[VHF_BURST_SEGS];
	struct vhf_xlate xi, xo;
	struct vhf_ring *rin, *rout;
	uint16_t n, i, out_avail, n_out;

	if (di == NULL || dout == NULL || !vring_usable(in, di, VHF_TXQ) ||
	    !vring_usable(out, dout, 2u * q))
		return -1;
	memset(res, 0, sizeof(*res));
	rin = &di->rings[VHF_TXQ];
	rout = &dout->rings[2u * q];
	n = (uint16_t)(avail_idx(rin) - rin->last_avail);
	if (n == 0)
		return 0;
	out_avail = avail_idx(rout);
	n = RTE_MIN(n, RTE_MIN(max, (uint16_t)FWD_MAX_BURST));
	n_out = RTE_MIN(n, (uint16_t)(out_avail - rout->last_avail));
	xi = (struct vhf_xlate){ .mem = mem_of(di) };
	xo = (struct vhf_xlate){ .mem = mem_of(dout) };
	/*
	 * With the guests on the other CPU nearly every load and store below misses: the
	 * passes issue each kind for the whole burst before any is waited for. Avail entries
	 * and their descriptors of both rings; the used lines to be written; the sender's
	 * chains and frames; the receiver's buffers; then the copies.
	 */
	read_heads(rin, n, in_heads);
	read_heads(rout, n_out, out_heads);
	prefetch_used(rin, n);
	prefetch_used(rout, n_out);
	n = read_burst(di, &xi, rin, in_heads, n, frames, segs);
	prefetch_receiver(rout, &xo, out_heads, RTE_MIN(n, n_out), frames, dout->hdr_len);
	for (i = 0; i < n; i++) {
		const struct fwd_frame *f = &frames[i];

		used_put(rin, f->head, 0);
		if (f->len < 0) {
			res->malformed++;
			continue;
		}
		res->rx++;
		res->rx_bytes += (uint32_t)f->len;
		copy_frame(dout, &xo, rout, out_avail, segs, f, max_frame, res);
	}
	used_publish(rout);
	used_publish(rin);
	if (res->malformed > 0)
		__atomic_store_n(&in->rx_missed, in->rx_missed + res->malformed,
				 __ATOMIC_RELAXED);
	__atomic_store_n(&in->one_copy, in->one_copy + res->sent, __ATOMIC_RELAXED);
	return 0;
}

int vhf_take(struct vhf *in, uint16_t max, struct fwd_frames *b)
{
	struct vhf_dev *d = dev_of(in);
	uint16_t heads[FWD_MAX_BURST], n;
	struct vhf_xlate x;
	struct vhf_ring *r;

	if (d == NULL || !vring_usable(in, d, VHF_TXQ))
		return -1;
	r = &d->rings[VHF_TXQ];
	b->src = d;
	n = (uint16_t)(avail_idx(r) - r->last_avail);
	n = RTE_MIN(n, RTE_MIN(max, (uint16_t)FWD_MAX_BURST));
	b->n = 0;
	if (n == 0)
		return 0;
	x = (struct vhf_xlate){ .mem = mem_of(d) };
	read_heads(r, n, heads);
	prefetch_used(r, n);
	b->n = read_burst(d, &x, r, heads, n, b->f, b->segs);
	return 0;
}

void vhf_release(struct vhf *in, const struct fwd_frames *b, uint16_t sent)
{
	/* The guest the burst was read from: withdrawing it waits for this burst's end. */
	struct vhf_dev *d = (struct vhf_dev *)(uintptr_t)b->src;
	struct vhf_ring *r = &d->rings[VHF_TXQ];
	uint16_t i, malformed = 0;

	if (b->n == 0)
		return;
	for (i = 0; i < b->n; i++) {
		used_put(r, b->f[i].head, 0);
		malformed += b->f[i].len < 0;
	}
	used_publish(r);
	if (malformed > 0)
		__atomic_store_n(&in->rx_missed, in->rx_missed + malformed, __ATOMIC_RELAXED);
	__atomic_store_n(&in->one_copy, in->one_copy + sent, __ATOMIC_RELAXED);
}

void vhf_put(struct vhf *out, uint16_t q, const struct fwd_frames *b, uint32_t max_frame,
	     struct fwd_direct_result *res)
{
	struct vhf_dev *d = dev_of(out);
	uint16_t heads[FWD_MAX_BURST], avail = 0, n_out, i;
	struct vhf_ring *r = NULL;
	struct vhf_xlate x = { 0 };

	memset(res, 0, sizeof(*res));
	if (b->n == 0)
		return;
	if (d != NULL && vring_usable(out, d, 2u * q)) {
		r = &d->rings[2u * q];
		x = (struct vhf_xlate){ .mem = mem_of(d) };
		avail = avail_idx(r);
		/* As in vhf_forward(): the receiver's ring and buffers asked for ahead. */
		n_out = RTE_MIN(b->n, (uint16_t)(avail - r->last_avail));
		read_heads(r, n_out, heads);
		prefetch_used(r, n_out);
		prefetch_receiver(r, &x, heads, n_out, b->f, d->hdr_len);
	}
	for (i = 0; i < b->n; i++) {
		const struct fwd_frame *f = &b->f[i];

		if (f->len < 0) {
			res->malformed++;
			continue;
		}
		res->rx++;
		res->rx_bytes += (uint32_t)f->len;
		if (likely(r != NULL))
			copy_frame(d, &x, r, avail, b->segs, f, max_frame, res);
		else if (frame_too_long(&b->segs[f->seg], (uint32_t)f->len, max_frame))
			res->too_long++;
		else
			res->full++;    /* no guest: as vhf_tx_burst() takes nothing then */
	}
	if (r != NULL)
		used_publish(r);
}

/* Copies a frame of LEN bytes from SEGS into mbufs from POOL; NULL when none are left. */
static struct rte_mbuf *frame_to_mbuf(struct rte_mempool *pool, const struct fwd_seg *segs,
				      unsigned int n_segs, uint32_t len)
{
	struct vhf_src s = { .segs = segs, .n = n_segs, .left = len };
	struct rte_mbuf *head = NULL, *last = NULL, *m;

	do {
		uint32_t k;

		m = rte_pktmbuf_alloc(pool);
		if (m == NULL) {
			rte_pktmbuf_free(head);
			return NULL;
		}
		k = src_copy(&s, rte_pktmbuf_mtod(m, uint8_t *), rte_pktmbuf_tailroom(m));
		m->data_len = (uint16_t)k;
		if (head == NULL) {
			head = m;
		} else {
			last->next = m;
			head->nb_segs++;
		}
		last = m;
	} while (s.left > 0);
	head->pkt_len = len;
	return head;
}

uint16_t vhf_rx_burst(struct vhf *v, struct rte_mbuf **pkts, uint16_t n)
{
	struct vhf_dev *d = dev_of(v);
	struct fwd_seg segs[VHF_MAX_SEGS];
	uint16_t avail, i, got = 0;
	struct vhf_xlate x;
	struct vhf_ring *r;

	if (d == NULL || !vring_usable(v, d, VHF_TXQ))
		return 0;
	r = &d->rings[VHF_TXQ];
	x = (struct vhf_xlate){ .mem = mem_of(d) };
	avail = (uint16_t)(avail_idx(r) - r->last_avail);
	n = RTE_MIN(n, avail);
	for (i = 0; i < n; i++) {
		unsigned int n_segs = 0;
		struct rte_mbuf *m;
		uint16_t head;
		int len;

		head = next_head(r);
		len = take_frame(d, &x, r, head, segs, VHF_MAX_SEGS, &n_segs);
		if (len <= 0) {
			used_put(r, head, 0);
			__atomic_store_n(&v->rx_missed, v->rx_missed + 1, __ATOMIC_RELAXED);
			continue;
		}
		m = frame_to_mbuf(v->pool, segs, n_segs, (uint32_t)len);
		if (m == NULL) {
			/* Left in the ring for the next poll: the pool is short for a moment. */
			r->last_avail--;
			break;
		}
		used_put(r, head, 0);
		pkts[got++] = m;
	}
	used_publish(r);
	return got;
}

/* ---- bursts a forwarding function decides frame by frame (vhost_fast.h, vhf_burst) ---- */

struct vhf_burst {
	struct vhf_view view;         /* first: what the worker reads */
	struct vhf *in;
	struct vhf_dev *dev;          /* IN's guest, for the burst */
	struct vhf_xlate x;
	uint16_t first;               /* the sender ring's next avail entry before the burst */
	uint16_t n_chains;            /* chains read: frames and malformed ones */
	uint16_t cut;                 /* chains returned at the end; the rest stay in the ring */
	uint16_t chain[FWD_MAX_BURST];        /* view frame -> frames[] */
	uint16_t heads[FWD_MAX_BURST];
	uint16_t out_heads[FWD_MAX_BURST];
	struct fwd_frame frames[FWD_MAX_BURST];
	struct fwd_frame out_frames[FWD_MAX_BURST];  /* one output's frames, for prefetching */
	struct fwd_seg segs[VHF_BURST_SEGS];
	uint8_t hdr_copy[FWD_MAX_BURST][FWD_HDR_BYTES];
};

struct vhf_burst *vhf_burst_create(int socket)
{
	return rte_zmalloc_socket("vhf_burst", sizeof(struct vhf_burst), RTE_CACHE_LINE_SIZE,
				  socket);
}

void vhf_burst_free(struct vhf_burst *b)
{
	rte_free(b);
}

/*
 * Points view frame K at frame F's first bytes: in the guest's buffer when its first piece
 * holds them (nearly always), else gathered into the burst's own copy.
 */
static void view_frame(struct vhf_burst *b, uint16_t k, const struct fwd_frame *f)
{
	const struct fwd_seg *g = &b->segs[f->seg];
	uint32_t want = RTE_MIN((uint32_t)f->len, (uint32_t)FWD_HDR_BYTES);

	b->view.len[k] = (uint32_t)f->len;
	if (likely(g->len >= want)) {
		b->view.hdr[k] = g->p;
		b->view.hdr_len[k] = (uint16_t)RTE_MIN(g->len, (uint32_t)UINT16_MAX);
	} else {
		struct vhf_src s = { .segs = g, .n = f->n_segs, .left = want };

		b->view.hdr_len[k] = (uint16_t)src_copy(&s, b->hdr_copy[k], want);
		b->view.hdr[k] = b->hdr_copy[k];
	}
}

const struct vhf_view *vhf_burst_take(struct vhf *in, uint16_t max, struct vhf_burst *b)
{
	struct vhf_dev *d = dev_of(in);
	struct vhf_ring *r;
	uint16_t n, i, k = 0;

	if (d == NULL || !vring_usable(in, d, VHF_TXQ))
		return NULL;
	r = &d->rings[VHF_TXQ];
	b->in = in;
	b->dev = d;
	b->x = (struct vhf_xlate){ .mem = mem_of(d) };
	b->first = r->last_avail;
	n = (uint16_t)(avail_idx(r) - r->last_avail);
	n = RTE_MIN(n, RTE_MIN(max, (uint16_t)FWD_MAX_BURST));
	if (n > 0) {
		read_heads(r, n, b->heads);
		prefetch_used(r, n);
		n = read_burst(d, &b->x, r, b->heads, n, b->frames, b->segs);
	}
	for (i = 0; i < n; i++) {
		if (b->frames[i].len < 0)
			continue;
		b->chain[k] = i;
		view_frame(b, k++, &b->frames[i]);
	}
	b->n_chains = n;
	b->cut = n;
	b->view.n = k;
	return &b->view;
}

void vhf_burst_cut(struct vhf_burst *b, uint16_t k)
{
	if (k < b->view.n) {
		b->cut = b->chain[k];
		b->view.n = k;
	}
}

struct rte_mbuf *vhf_burst_mbuf(struct vhf_burst *b, uint16_t k)
{
	const struct fwd_frame *f = &b->frames[b->chain[k]];

	return frame_to_mbuf(b->in->pool, &b->segs[f->seg], f->n_segs, (uint32_t)f->len);
}

void vhf_burst_copy(struct vhf_burst *b, const uint16_t *idx, uint16_t n, struct vhf *out,
		    uint16_t q, uint32_t max_frame, struct fwd_direct_result *res)
{
	struct vhf_dev *d = dev_of(out);
	struct vhf_xlate x;
	struct vhf_ring *r;
	uint16_t avail, n_out, j;

	memset(res, 0, sizeof(*res));
	if (d == NULL || !vring_usable(out, d, 2u * q)) {
		res->full = n;        /* as vhf_tx_burst() takes nothing then */
		return;
	}
	r = &d->rings[2u * q];
	x = (struct vhf_xlate){ .mem = mem_of(d) };
	avail = avail_idx(r);
	n_out = RTE_MIN(n, (uint16_t)(avail - r->last_avail));
	/* As in vhf_forward(): the receiver's ring and buffers asked for ahead, all at once. */
	read_heads(r, n_out, b->out_heads);
	prefetch_used(r, n_out);
	for (j = 0; j < n_out; j++)
		b->out_frames[j] = b->frames[b->chain[idx[j]]];
	prefetch_receiver(r, &x, b->out_heads, n_out, b->out_frames, d->hdr_len);
	for (j = 0; j < n; j++) {
		const struct fwd_frame *f = &b->frames[b->chain[idx[j]]];

		copy_frame(d, &x, r, avail, b->segs, f, max_frame, res);
	}
	used_publish(r);
	__atomic_store_n(&b->in->one_copy, b->in->one_copy + res->sent, __ATOMIC_RELAXED);
}

const struct fwd_seg *vhf_burst_frames(const struct vhf_burst *b, const uint16_t *idx,
				       uint16_t n, struct fwd_frame *f)
{
	uint16_t j;

	for (j = 0; j < n; j++)
		f[j] = b->frames[b->chain[idx[j]]];
	return b->segs;
}

void vhf_burst_copied(struct vhf_burst *b, uint16_t n)
{
	__atomic_store_n(&b->in->one_copy, b->in->one_copy + n, __ATOMIC_RELAXED);
}

void vhf_burst_end(struct vhf_burst *b)
{
	struct vhf_ring *r = &b->dev->rings[VHF_TXQ];
	uint16_t i, malformed = 0;

	for (i = 0; i < b->cut; i++) {
		used_put(r, b->frames[i].head, 0);
		malformed += b->frames[i].len < 0;
	}
	/* The chains after the cut were not consumed: the next burst reads them again. */
	r->last_avail = (uint16_t)(b->first + b->cut);
	used_publish(r);
	if (malformed > 0)
		__atomic_store_n(&b->in->rx_missed, b->in->rx_missed + malformed,
				 __ATOMIC_RELAXED);
}

/* Points SEGS at M's segments; their count, or 0 for a chain longer than VHF_MAX_SEGS. */
static unsigned int mbuf_segs(const struct rte_mbuf *m, struct fwd_seg *segs)
{
	unsigned int n = 0;

	for (; m != NULL; m = m->next) {
		if (n == VHF_MAX_SEGS)
			return 0;
		segs[n].p = rte_pktmbuf_mtod(m, uint8_t *);
		segs[n++].len = m->data_len;
	}
	return n;
}

/*
 * Asks for the lines the next N frames PKTS will most likely touch in ring R, all before
 * any is waited for, as vhf_forward() does: the avail entries and their descriptors, the
 * used lines, the first buffers. With the guest on the other CPU each is a miss, and taken
 * one frame at a time they were waited for one after another.
 */
static void prefetch_tx(const struct vhf_dev *d, struct vhf_xlate *x, const struct vhf_ring *r,
			uint16_t avail, struct rte_mbuf **pkts, uint16_t n)
{
	struct fwd_frame frames[FWD_MAX_BURST];
	uint16_t heads[FWD_MAX_BURST], i;

	n = RTE_MIN(n, RTE_MIN((uint16_t)(avail - r->last_avail), (uint16_t)FWD_MAX_BURST));
	read_heads(r, n, heads);
	prefetch_used(r, n);
	for (i = 0; i < n; i++)
		frames[i].len = (int32_t)pkts[i]->pkt_len;
	prefetch_receiver(r, x, heads, n, frames, d->hdr_len);
}

uint16_t vhf_tx_burst(struct vhf *v, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	struct vhf_dev *d = dev_of(v);
	struct fwd_seg segs[VHF_MAX_SEGS];
	uint16_t avail, sent = 0;
	struct vhf_xlate x;
	struct vhf_ring *r;

	if (d == NULL || !vring_usable(v, d, 2u * q))
		return 0;
	r = &d->rings[2u * q];
	x = (struct vhf_xlate){ .mem = mem_of(d) };
	avail = avail_idx(r);
	prefetch_tx(d, &x, r, avail, pkts, n);
	for (sent = 0; sent < n; sent++) {
		struct vhf_src s = { .segs = segs, .left = pkts[sent]->pkt_len };

		s.n = mbuf_segs(pkts[sent], segs);
		if (s.n == 0 || put_frame(d, &x, r, avail, &s) != VHF_PUT_OK)
			break;
	}
	used_publish(r);
	if (sent > 0)
		rte_pktmbuf_free_bulk(pkts, sent);
	return sent;
}

/* ---- the control side: the vhost library's callbacks ---- */

/*
 * Reads the guest's memory table; when it differs from the one published, publishes the
 * new one and frees the old after a grace period. Guests add memory while they run (a DPDK
 * guest's heap grows in hugepage segments): the library then tells us around the change
 * (RTE_VHOST_USER_ASYNC_COPY, vhf_open), with every vring disabled.
 */
static int refresh_memory(struct vhf_dev *d)
{
	struct rte_vhost_memory *table = NULL;
	struct vhf_mem *m, *old = d->mem;
	uint32_t i;

	if (rte_vhost_get_mem_table(d->vid, &table) != 0)
		return -1;
	m = rte_zmalloc("vhf_mem", sizeof(*m), RTE_CACHE_LINE_SIZE);
	if (m == NULL || table->nregions > VHF_MAX_REGIONS) {
		free(table);
		rte_free(m);
		return -1;
	}
	for (i = 0; i < table->nregions; i++) {
		const struct rte_vhost_mem_region *g = &table->regions[i];

		m->regions[i] = (struct vhf_region){ .gpa = g->guest_phys_addr,
			.end = g->guest_phys_addr + g->size,
			.offset = g->host_user_addr - g->guest_phys_addr };
	}
	m->n_regions = table->nregions;
	free(table);
	if (old != NULL && memcmp(old, m, sizeof(*m)) == 0) {
		rte_free(m);
		return 0;
	}
	__atomic_store_n(&d->mem, m, __ATOMIC_RELEASE);
	if (old != NULL && wk_quiesce())
		rte_free(old);
	return 0;
}

/* Reads vring I's addresses and positions from the library; false when it has none. */
static bool snapshot_vring(struct vhf_dev *d, uint16_t i)
{
	struct vhf_ring *r = &d->rings[i];
	struct rte_vhost_vring vr;
	uint16_t last_avail, last_used;

	memset(r, 0, sizeof(*r));
	r->callfd = -1;
	if (rte_vhost_get_vhost_vring(d->vid, i, &vr) != 0 || vr.desc == NULL ||
	    vr.avail == NULL || vr.used == NULL || vr.size == 0 ||
	    (vr.size & (vr.size - 1)) != 0 ||
	    rte_vhost_get_vring_base(d->vid, i, &last_avail, &last_used) != 0)
		return false;
	r->desc = vr.desc;
	r->avail = vr.avail;
	r->used = vr.used;
	r->size = vr.size;
	r->mask = (uint16_t)(vr.size - 1);
	r->last_avail = last_avail;
	r->last_used = last_used;
	r->callfd = vr.callfd;
	/*
	 * A poller needs no kicks, on either ring: a guest that posts receive buffers would
	 * otherwise make a system call (an eventfd write) for every refill. Written here
	 * rather than through rte_vhost_enable_guest_notification(), which takes the vring's
	 * lock, held by the library while it calls vring_state_changed; as nobody calls it,
	 * the library leaves the flag alone.
	 */
	__atomic_store_n(&r->used->flags, VRING_USED_F_NO_NOTIFY, __ATOMIC_RELAXED);
	return true;
}

static void snapshot_vrings(struct vhf_dev *d)
{
	uint16_t i;

	d->n_vrings = RTE_MIN(rte_vhost_get_vring_num(d->vid), VHF_MAX_VRINGS);
	for (i = 0; i < d->n_vrings; i++)
		snapshot_vring(d, i);
}

/* Hands our position in vring I back to the library: what GET_VRING_BASE answers. */
static void hand_back_vring(const struct vhf_dev *d, uint16_t i)
{
	const struct vhf_ring *r = &d->rings[i];

	if (r->desc != NULL)
		rte_vhost_set_vring_base(d->vid, i, r->last_avail, r->last_used);
}

static int vhf_new_device(int vid)
{
	struct vhf_dev *d;
	uint64_t features;
	struct vhf *v;
	int rc = -1;

	pthread_mutex_lock(&table_lock);
	v = vhf_by_vid(vid);
	d = rte_zmalloc("vhf_dev", sizeof(*d), RTE_CACHE_LINE_SIZE);
	if (v == NULL || d == NULL || rte_vhost_get_negotiated_features(vid, &features) != 0)
		goto out;
	if (features & (1ULL << VIRTIO_F_RING_PACKED)) {
		LOG(ERR, "vhost %s: packed rings were negotiated; not served", v->path);
		goto out;
	}
	d->vid = vid;
	d->mergeable = (features & (1ULL << VIRTIO_NET_F_MRG_RXBUF)) != 0;
	d->hdr_len = (d->mergeable || (features & (1ULL << VIRTIO_F_VERSION_1))) ?
		sizeof(struct virtio_net_hdr_mrg_rxbuf) : sizeof(struct virtio_net_hdr);
	if (refresh_memory(d) != 0) {
		LOG(ERR, "vhost %s: cannot read the guest's memory table", v->path);
		goto out;
	}
	snapshot_vrings(d);
	__atomic_store_n(&v->dev, d, __ATOMIC_RELEASE);
	d = NULL;
	__atomic_store_n(&v->port->link_up, true, __ATOMIC_RELAXED);
	LOG(INFO, "vhost %s: guest connected (vid %d, %u vrings, %s buffers)", v->path, vid,
	    dev_of(v)->n_vrings, dev_of(v)->mergeable ? "mergeable" : "single");
	rc = 0;
out:
	pthread_mutex_unlock(&table_lock);
	if (d != NULL)
		rte_free(d->mem);
	rte_free(d);
	return rc;
}

/*
 * A guest that stops (testpmd's port stop, a VM's driver unbinding) has usually queued its
 * last frames a moment before: the worker is given up to VHF_DRAIN_MS to take them, so that
 * they are forwarded or counted rather than left in a ring nobody reads again.
 */
#define VHF_DRAIN_MS 50

static void wait_drained(const struct vhf *v, const struct vhf_dev *d)
{
	const struct vhf_ring *r = &d->rings[VHF_TXQ];
	unsigned int i;
	uint16_t target;

	if (VHF_TXQ >= d->n_vrings || r->desc == NULL ||
	    !__atomic_load_n(&v->enabled[VHF_TXQ], __ATOMIC_RELAXED))
		return;
	/* What is queued now, not what a guest still sending adds meanwhile. */
	target = avail_idx(r);
	for (i = 0; i < VHF_DRAIN_MS * 10; i++) {
		if ((int16_t)(__atomic_load_n(&r->last_avail, __ATOMIC_RELAXED) - target) >= 0)
			return;
		rte_delay_us_sleep(100);
	}
}

/* Withdraws V's guest: after the grace period no worker touches its rings or memory. */
static void withdraw(struct vhf *v)
{
	struct vhf_dev *d = dev_of(v);
	uint16_t i;

	if (d == NULL)
		return;
	wait_drained(v, d);
	__atomic_store_n(&v->dev, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&v->port->link_up, false, __ATOMIC_RELAXED);
	if (!wk_quiesce())
		/* A stuck worker may still read it: leaked rather than freed under it. */
		LOG(ERR, "vhost %s: a worker is stuck; its guest state is left allocated", v->path);
	for (i = 0; i < d->n_vrings; i++)
		hand_back_vring(d, i);
	LOG(INFO, "vhost %s: guest gone (vid %d)", v->path, d->vid);
	if (wk_quiesce()) {
		rte_free(d->mem);
		rte_free(d);
	}
}

static void vhf_destroy_device(int vid)
{
	struct vhf *v;

	pthread_mutex_lock(&table_lock);
	v = vhf_by_vid(vid);
	if (v != NULL)
		withdraw(v);
	pthread_mutex_unlock(&table_lock);
}

/*
 * A guest disables and re-enables a vring when it restarts its queues (testpmd's port
 * start), possibly with new ring addresses and positions, without the device stopping: a
 * disabled vring is left alone by the workers (after a grace period) and handed back to the
 * library; an enabled one is read again before the workers may use it.
 */
static void change_vring_state(struct vhf *v, uint16_t i, bool enable)
{
	struct vhf_dev *d = dev_of(v);

	if (!enable) {
		if (d != NULL && i == VHF_TXQ)
			wait_drained(v, d);
		__atomic_store_n(&v->enabled[i], false, __ATOMIC_RELEASE);
		if (d != NULL && i < d->n_vrings && wk_quiesce())
			hand_back_vring(d, i);
		return;
	}
	if (d != NULL && refresh_memory(d) != 0)
		LOG(ERR, "vhost %s: cannot read the guest's new memory table", v->path);
	if (d != NULL && i < d->n_vrings && !__atomic_load_n(&v->enabled[i], __ATOMIC_RELAXED))
		snapshot_vring(d, i);
	__atomic_store_n(&v->enabled[i], true, __ATOMIC_RELEASE);
}

static int vhf_vring_state_changed(int vid, uint16_t vring, int enable)
{
	struct vhf *v;

	pthread_mutex_lock(&table_lock);
	v = vhf_by_vid(vid);
	if (v != NULL && vring < VHF_MAX_VRINGS)
		change_vring_state(v, vring, enable != 0);
	LOG(DEBUG, "vhost vid %d: vring %u %s%s", vid, vring, enable ? "enabled" : "disabled",
	    v == NULL ? " (unknown device)" : "");
	pthread_mutex_unlock(&table_lock);
	return 0;
}

static const struct rte_vhost_device_ops vhf_ops = {
	.new_device = vhf_new_device,
	.destroy_device = vhf_destroy_device,
	.vring_state_changed = vhf_vring_state_changed,
};

static int table_add(struct vhf *v)
{
	unsigned int i;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < VHF_MAX_PORTS && table[i] != NULL; i++)
		;
	if (i < VHF_MAX_PORTS)
		table[i] = v;
	pthread_mutex_unlock(&table_lock);
	return i < VHF_MAX_PORTS ? 0 : -1;
}

static void table_remove(struct vhf *v)
{
	unsigned int i;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < VHF_MAX_PORTS; i++)
		if (table[i] == v)
			table[i] = NULL;
	pthread_mutex_unlock(&table_lock);
}

struct vhf *vhf_open(struct port *p, const char *path, bool client, struct rte_mempool *pool,
		     char *err, size_t err_len)
{
	struct vhf *v = rte_zmalloc("vhf", sizeof(*v), RTE_CACHE_LINE_SIZE);
	int rc;

	if (v == NULL) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	v->port = p;
	v->pool = pool;
	snprintf(v->path, sizeof(v->path), "%s", path);
	rte_eth_random_addr(v->mac.addr_bytes);
	if (table_add(v) != 0) {
		snprintf(err, err_len, "too many vhost-user ports");
		rte_free(v);
		return NULL;
	}
	/*
	 * ASYNC_COPY is the library's way of telling an application that copies outside it
	 * to stop (vring_state_changed, disabled) before it unmaps guest memory on a new
	 * memory table, and to go on after: exactly this module's case.
	 */
	rc = rte_vhost_driver_register(path, RTE_VHOST_USER_ASYNC_COPY |
				       (client ? RTE_VHOST_USER_CLIENT : 0));
	if (rc != 0) {
		snprintf(err, err_len, "vhost: cannot register socket '%s'", path);
		goto fail;
	}
	v->registered = true;
	if (rte_vhost_driver_disable_features(path, VHF_REFUSED_FEATURES) != 0 ||
	    rte_vhost_driver_callback_register(path, &vhf_ops) != 0 ||
	    rte_vhost_driver_start(path) != 0) {
		snprintf(err, err_len, "vhost: cannot start socket '%s' (the daemon's log has "
			 "the library's reason)", path);
		goto fail;
	}
	return v;
fail:
	vhf_close(v);
	return NULL;
}

void vhf_close(struct vhf *v)
{
	if (v == NULL)
		return;
	/* Unregistering destroys a connected device through destroy_device (withdraw). */
	if (v->registered && rte_vhost_driver_unregister(v->path) != 0)
		LOG(WARNING, "vhost %s: unregister failed", v->path);
	pthread_mutex_lock(&table_lock);
	withdraw(v);
	pthread_mutex_unlock(&table_lock);
	table_remove(v);
	rte_free(v);
}

bool vhf_link_up(const struct vhf *v)
{
	return dev_of(v) != NULL;
}

void vhf_mac(const struct vhf *v, struct rte_ether_addr *mac)
{
	*mac = v->mac;
}

uint64_t vhf_rx_missed(const struct vhf *v)
{
	return __atomic_load_n(&v->rx_missed, __ATOMIC_RELAXED);
}

uint64_t vhf_one_copy(const struct vhf *v)
{
	return __atomic_load_n(&v->one_copy, __ATOMIC_RELAXED);
}
