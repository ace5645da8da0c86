/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * virtio-raw: sluice-gen's own virtio-net driver, the vhost-user frontend (the side QEMU or
 * DPDK's virtio-user plays), with no DPDK driver and no mbufs on its data path
 * (docs/gen.md, "virtio-raw ports").
 *
 * The control side (vring.c) connects to a vhost-user server socket (a switch's
 * vhost-user port), agrees on VIRTIO_F_VERSION_1 only, and hands the backend one shared
 * memory region (a memfd, huge pages where it can) holding two split virtqueues, queue 0
 * receive and queue 1 transmit, and their buffers. The data path (the inline functions
 * below) is the two rings and nothing else:
 *  - transmit: every buffer holds a built frame behind a zeroed virtio-net header and has
 *    its descriptor written once; a burst takes back what the device used, writes only what
 *    varies per frame (the caller: stamp, flow), publishes the avail entries and stores
 *    avail->idx once;
 *  - receive: every descriptor is posted once to a fixed buffer; a burst reads the used
 *    entries, the caller counts (and reads the stamps it checks), the entries go back on
 *    the avail ring and avail->idx is stored once.
 * VRING_AVAIL_F_NO_INTERRUPT is set on both queues (we poll), and the kick eventfd is
 * written at most once a burst, only when the device has not said it polls
 * (VRING_USED_F_NO_NOTIFY). One lcore drives a port: nothing here is shared between
 * threads of ours, only with the device on the other side of the rings.
 */
#ifndef SLUICE_GEN_VRING_H
#define SLUICE_GEN_VRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#define VRING_KIND "virtio-raw"
#define VRING_PATH_LEN 108            /* sizeof(sun_path) */
#define VRING_DEFAULT_SIZE 256        /* slots a queue, as virtio-user's default */
#define VRING_MIN_SIZE 64
#define VRING_MAX_SIZE 16384
#define VRING_HDR_LEN 12              /* struct virtio_net_hdr_mrg_rxbuf: VERSION_1's header */
/*
 * A buffer's first bytes are left unused so that a frame's 16-byte payload (after the 42
 * bytes of headers, behind the 12-byte virtio-net header) lies in one cache line, the
 * buffer's second: a stamp is then one line written a frame, not two.
 */
#define VRING_BUF_SKEW 10
/*
 * A receive buffer: any standard frame fits (10 + 12 + 1518 B). An odd number of lines,
 * not 2048: buffers 2 KB apart all fall in the same few cache sets, where the device's
 * writes and our reads of them would evict each other.
 */
#define VRING_RX_BUF 1600
#define VRING_MAX_FRAME 1518          /* with FCS; larger needs chained buffers */

#define VRING_DESC_F_WRITE 2
#define VRING_AVAIL_F_NO_INTERRUPT 1
#define VRING_USED_F_NO_NOTIFY 1

struct vr_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vr_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];
};

struct vr_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vr_used {
	uint16_t flags;
	uint16_t idx;
	struct vr_used_elem ring[];
};

/* One split virtqueue as the driver sees it. */
struct vr_queue {
	struct vr_desc *desc;
	struct vr_avail *avail;
	struct vr_used *used;
	uint8_t *bufs;               /* buffer K at bufs + K * stride (descriptor K's) */
	uint32_t stride;
	uint16_t size, mask;
	uint16_t avail_idx;          /* our copy of avail->idx: the next slot we publish */
	uint16_t used_idx;           /* used entries taken so far */
	/*
	 * Transmit: descriptors we may post, a FIFO free[free_head..free_head + n_free) (mod
	 * size). Posted in the order the device gave them back, so with a device that uses
	 * buffers in order (DPDK's does) avail slot K always holds descriptor K mod size, and the
	 * avail ring's entries are never written again after set-up.
	 */
	uint16_t n_free, free_head;
	uint16_t *free;
	int kickfd, callfd;
};

#define VRING_ACCEPT_TIMEOUT_S 30     /* a server's wait for its backend, by default */
#define VRING_ACCEPT_TIMEOUT_MAX 3600

struct vring_spec {
	char path[VRING_PATH_LEN];
	unsigned int queue_size;     /* 0: not given */
	bool server;                 /* server=1: we listen, the backend (a switch) connects */
	unsigned int accept_timeout; /* server: seconds to wait for the backend */
	uint8_t mac[6];
	bool mac_given;              /* mac=: else sluice-gen picks one */
};

struct vring_port {
	struct vr_queue rx, tx;      /* queue 0 and queue 1 */
	const char *spec;
	struct vring_spec cfg;
	int sock;
	int listen_fd;               /* server: listening from vring_listen() to the accept */
	bool listening;              /* listen_fd is open and the socket file ours */
	uint64_t features;
	uint8_t mac[6];
	void *mem;
	size_t mem_len;
	bool hugepages;
	bool closed;                 /* the backend closed the connection */
	uint16_t frame_len;          /* transmitted frames' length without FCS */
	/*
	 * Transmit buffers kept back from posting (0, or a burst when frames are stamped):
	 * a buffer the device gives back is posted a pass later at the earliest, and its
	 * stamp's line is asked for (PREFETCHW) when it comes back, so the line's trip from
	 * the switch's CPU overlaps the rest of the pass instead of stalling the stamp write.
	 */
	uint16_t tx_reserve;
	/*
	 * Receive frames vring_rx_peek() found ready early in the pass, their lines asked for;
	 * the sink's next burst takes exactly these (0: it looks at the ring itself).
	 */
	uint16_t rx_peeked;
	uint64_t tx_packets, rx_packets, kicks;
};

/*
 * "virtio-raw:path=SOCKET[,server=1[,accept_timeout=S]][,queue_size=N][,mac=MAC]" (role=server
 * or a bare "server" as well); 0, or -1 with a message in ERR.
 */
int vring_parse(const char *spec, struct vring_spec *out, char *err, size_t len);
/* Whether SPEC names a virtio-raw port (its kind, before the colon). */
bool vring_is_spec(const char *spec);
/*
 * A server port (P->cfg.server): creates its socket (a stale socket file nobody answers on
 * is removed first; any other file, or a socket in use, is refused) and listens, so a
 * backend can connect before vring_open() accepts. 0, or -1 with a message naming OPT.
 */
int vring_listen(struct vring_port *p, const char *opt);
/* A server that has not accepted yet: stops listening and removes its socket file. */
void vring_unlisten(struct vring_port *p);
/*
 * Connects P (P->spec, P->cfg: QUEUE_SIZE slots when the spec gives none), or for a server
 * accepts the backend's connection on the socket vring_listen() made (waiting up to
 * accept_timeout seconds; the socket file is removed once a backend is connected), agrees
 * on the features and hands the backend the rings. FRAME (FRAME_LEN bytes, no FCS) is
 * built into every transmit buffer. 0, or -1 with a message on stderr naming OPT and the
 * spec.
 */
int vring_open(struct vring_port *p, const char *opt, unsigned int queue_size,
	       const uint8_t *frame, uint16_t frame_len);
/* Whether the backend is still connected (a non-blocking look at the socket). */
bool vring_alive(struct vring_port *p);
/*
 * Sends N (up to 8) copies of FRAME (LEN <= the port's frame length; padded with zeros)
 * outside the run, waits up to 100 ms for the device to take them, and puts the buffers'
 * own frame back. The number sent.
 */
unsigned int vring_send_aside(struct vring_port *p, const uint8_t *frame, uint16_t len,
			      unsigned int n);
/* Rewrites every transmit buffer's frame (FRAME_LEN as at open). */
void vring_set_frame(struct vring_port *p, const uint8_t *frame);
void vring_kick(struct vring_port *p, struct vr_queue *q);

/* ---- the data path ---- */

static inline uint16_t vr_load_used_idx(const struct vr_queue *q)
{
	return __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE);
}

/*
 * Publishes everything up to our avail_idx with one store, then kicks if the device asks
 * for kicks. The virtio spec puts a full fence between the store and the read of
 * used->flags, so that a device turning notifications back on just then is never missed;
 * here that fence waited for the burst's stamp stores to drain (6 % of the loop's samples).
 * Without it such a kick can be missed, so vring_alive() (every 50 ms) kicks every queue
 * of a device that wants kicks: a missed one costs at most that long, and polling backends
 * (DPDK's) never turn notifications back on.
 */
static inline void vr_publish(struct vring_port *p, struct vr_queue *q)
{
	__atomic_store_n(&q->avail->idx, q->avail_idx, __ATOMIC_RELEASE);
	if (!(__atomic_load_n(&q->used->flags, __ATOMIC_RELAXED) & VRING_USED_F_NO_NOTIFY))
		vring_kick(p, q);
}

/* Writes an avail entry only when it changes: an unchanged line stays shared, not moved. */
static inline void vr_set_avail(struct vr_queue *q, uint16_t slot, uint16_t id)
{
	if (q->avail->ring[slot] != id)
		q->avail->ring[slot] = id;
}

static inline void vr_prefetch_for_write(const void *p)
{
#if defined(__x86_64__)
	/* DPDK builds for corei7, where __builtin_prefetch(p, 1, ...) is a read prefetch. */
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* The offset in a buffer of a frame's payload (the stamp): the start of its second line. */
#define VRING_PAYLOAD_OFF (VRING_BUF_SKEW + VRING_HDR_LEN + 42)

/* Transmit: takes back what the device used; the descriptors free to post now. */
static inline uint16_t vring_tx_room(struct vring_port *p)
{
	struct vr_queue *q = &p->tx;
	uint16_t u = vr_load_used_idx(q), id;

	/* The bound on n_free keeps a device that reports more than we posted out of free[]. */
	for (; q->used_idx != u && q->n_free < q->size; q->used_idx++) {
		id = (uint16_t)(q->used->ring[q->used_idx & q->mask].id & q->mask);
		q->free[(uint16_t)(q->free_head + q->n_free++) & q->mask] = id;
		if (p->tx_reserve)
			vr_prefetch_for_write(q->bufs + (size_t)id * q->stride +
					      VRING_PAYLOAD_OFF);
	}
	return q->n_free > p->tx_reserve ? (uint16_t)(q->n_free - p->tx_reserve) : 0;
}

/* The frame (after the virtio-net header) of the K-th buffer the next post will send. */
static inline uint8_t *vring_tx_frame(const struct vring_port *p, uint16_t k)
{
	const struct vr_queue *q = &p->tx;

	return q->bufs + (size_t)q->free[(uint16_t)(q->free_head + k) & q->mask] * q->stride +
	       VRING_BUF_SKEW + VRING_HDR_LEN;
}

/* Sends the next N buffers (N <= vring_tx_room()). */
static inline void vring_tx_post(struct vring_port *p, uint16_t n)
{
	struct vr_queue *q = &p->tx;
	uint16_t i;

	if (n == 0)
		return;
	for (i = 0; i < n; i++)
		vr_set_avail(q, (uint16_t)((q->avail_idx + i) & q->mask),
			     q->free[(uint16_t)(q->free_head + i) & q->mask]);
	q->free_head = (uint16_t)(q->free_head + n);
	q->n_free = (uint16_t)(q->n_free - n);
	q->avail_idx = (uint16_t)(q->avail_idx + n);
	vr_publish(p, q);
	p->tx_packets += n;
}

/* Receive: frames the device has written and we have not yet taken, at most MAX. */
static inline uint16_t vring_rx_ready(const struct vring_port *p, uint16_t max)
{
	uint16_t n = (uint16_t)(vr_load_used_idx(&p->rx) - p->rx.used_idx);

	if (n > p->rx.size)          /* a broken device: never more than it was given */
		n = p->rx.size;
	return n < max ? n : max;
}

/*
 * Early in a loop pass, before the sending: asks for the used index lines of both queues
 * (the device on the other CPU wrote them; asked for together, their transfers overlap),
 * then takes note of up to MAX frames ready to receive and asks for each one's used entry
 * and the line at OFF in its buffer (the stamp), so that those transfers overlap the pass's
 * sending instead of stalling the sink. A device that uses receive buffers in order (DPDK's
 * does) gives back buffer K mod size as the K-th used entry, so the buffer is asked for by
 * that guess, without waiting for its entry: a wrong guess costs a useless fetch, nothing
 * else (the sink reads the entries' own ids). Only frames the device has published are
 * fetched: a line fetched before the device writes it would have to be taken back.
 */
static inline void vring_rx_peek(struct vring_port *p, uint16_t max, uint32_t off)
{
	struct vr_queue *q = &p->rx;
	uint16_t i, slot;

	__builtin_prefetch(&p->tx.used->idx, 0, 3);
	p->rx_peeked = vring_rx_ready(p, max);
	for (i = 0; i < p->rx_peeked; i++) {
		slot = (uint16_t)(q->used_idx + i) & q->mask;
		if (i == 0 || slot % 8 == 0)       /* 8 entries a line */
			__builtin_prefetch(&q->used->ring[slot], 0, 3);
		__builtin_prefetch(q->bufs + (size_t)slot * q->stride + off, 0, 3);
	}
}

/* The K-th ready frame's length without the virtio-net header (and without FCS). */
static inline uint32_t vring_rx_len(const struct vring_port *p, uint16_t k)
{
	const struct vr_queue *q = &p->rx;
	uint32_t len = q->used->ring[(uint16_t)(q->used_idx + k) & q->mask].len;

	return len > VRING_HDR_LEN ? len - VRING_HDR_LEN : 0;
}

/* The K-th ready frame (after the virtio-net header). */
static inline const uint8_t *vring_rx_frame(const struct vring_port *p, uint16_t k)
{
	const struct vr_queue *q = &p->rx;
	uint32_t id = q->used->ring[(uint16_t)(q->used_idx + k) & q->mask].id;

	return q->bufs + (size_t)(id & q->mask) * q->stride + VRING_BUF_SKEW + VRING_HDR_LEN;
}

/* Gives the N frames taken back to the device, their buffers posted again. */
static inline void vring_rx_done(struct vring_port *p, uint16_t n)
{
	struct vr_queue *q = &p->rx;
	uint16_t i;

	if (n == 0)
		return;
	for (i = 0; i < n; i++)
		vr_set_avail(q, (uint16_t)((q->avail_idx + i) & q->mask),
			     (uint16_t)(q->used->ring[(uint16_t)(q->used_idx + i) & q->mask].id &
					q->mask));
	q->used_idx = (uint16_t)(q->used_idx + n);
	q->avail_idx = (uint16_t)(q->avail_idx + n);
	vr_publish(p, q);
	p->rx_packets += n;
	p->rx_peeked = 0;
}

#endif
