/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost-user ports of sluice's own (the default; spec key fast=0 for the PMD): DPDK's vhost
 * library speaks the protocol (socket, memory table, vrings, feature negotiation), and this
 * module is the virtqueue data path. Between two such ports a frame is copied once, from the
 * sender's descriptors straight into the receiver's buffers, as netmap's VALE copies between
 * guests: vhf_forward() does that for a whole burst whose output is known before it is read
 * (patch, flow steering by input port), and vhf_burst_*() frame by frame for a switch whose
 * frames decide (learn: known unicast to another such port). Everything else (floods, flow
 * rules that read headers, other port kinds, a port not connected) goes through mbufs with
 * vhf_rx_burst() and vhf_tx_burst(), as the net_vhost PMD's ports do (docs/design.md, "One copy
 * between VMs").
 *
 * Split rings only: the packed-ring feature is not offered, nor are indirect descriptors,
 * event index, in-order, checksum and segmentation offloads or dirty-page logging. Mergeable
 * receive buffers and the 12-byte virtio-net header are. Used-ring updates are published
 * and the guest notified (unless it asked for no interrupts) once per ring and burst.
 *
 * Threads: the worker polling the port calls vhf_rx_burst(), vhf_forward() and vhf_burst_take()
 * with the port as input; worker W transmits into guest receive queue W (vring 2W), as with the
 * PMD's per-worker transmit queues. The vhost library's thread publishes a connected guest's
 * rings and memory table, and withdraws them behind an RCU grace period (worker.h) before the
 * library unmaps anything.
 */
#ifndef SLUICE_VHOST_FAST_H
#define SLUICE_VHOST_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "fwd.h"

struct vhf;
struct port;

/*
 * Registers and starts the vhost-user socket PATH (server, or client when CLIENT) for port
 * P, receiving into POOL. NULL and ERR on failure.
 */
struct vhf *vhf_open(struct port *p, const char *path, bool client, struct rte_mempool *pool,
		     char *err, size_t err_len);
/* Unregisters the socket; a connected guest is withdrawn first. Control thread. */
void vhf_close(struct vhf *v);

bool vhf_link_up(const struct vhf *v);
void vhf_mac(const struct vhf *v, struct rte_ether_addr *mac);
/* Frames that never entered the switch: no mbufs, or bad descriptors on the mbuf path. */
uint64_t vhf_rx_missed(const struct vhf *v);
/* Frames from this port's guest copied straight into another guest's buffers. */
uint64_t vhf_one_copy(const struct vhf *v);

uint16_t vhf_rx_burst(struct vhf *v, struct rte_mbuf **pkts, uint16_t n);
/* Copies what fits into worker Q's receive queue of the guest, frees it; returns how many. */
uint16_t vhf_tx_burst(struct vhf *v, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

/*
 * Moves up to MAX frames from IN's guest to OUT's (worker Q's receive queue), one copy
 * each, frames longer than MAX_FRAME (a VLAN tag aside) dropped. -1 when either guest is
 * not connected or its queue not enabled: nothing was touched, and the caller takes the
 * mbuf path, which counts what happens then. Else 0, with R filled.
 */
int vhf_forward(struct vhf *in, struct vhf *out, uint16_t q, uint16_t max, uint32_t max_frame,
		struct fwd_direct_result *r);

/*
 * The one copy to and from other fast port kinds (fwd.h, struct fwd_frames; memif_fast.h's
 * mff_take/mff_put/mff_release the same for memif): vhf_take() reads up to MAX frames that
 * IN's guest sends, as pieces of its memory, and takes them off its ring; -1 when it is not
 * connected (nothing read). vhf_release() gives the burst's chains back to the guest, once
 * every copy is made, and counts SENT frames as copied once and the malformed as
 * rx_missed. vhf_put() copies the frames of B into OUT's guest (worker Q's receive queue),
 * in order, frames longer than MAX_FRAME (a VLAN tag aside) dropped, and fills R (all of
 * it: rx, malformed, sent, full, too_long), a guest not connected counting as full, as
 * vhf_tx_burst() takes nothing then.
 */
int vhf_take(struct vhf *in, uint16_t max, struct fwd_frames *b);
void vhf_release(struct vhf *in, const struct fwd_frames *b, uint16_t sent);
void vhf_put(struct vhf *out, uint16_t q, const struct fwd_frames *b, uint32_t max_frame,
	     struct fwd_direct_result *r);

/*
 * A burst for a switch whose frames decide where they go (learn): vhf_burst_take() reads the
 * sender's chains and shows each frame's first bytes; the worker asks the forwarding
 * function (fwd_ops.fast_unicast), copies the frames it answered for straight into other
 * guests (vhf_burst_copy, one call per output, frames in the order sent), makes mbufs of the
 * rest (vhf_burst_mbuf) and, once every copy is made, returns the chains to the sender
 * (vhf_burst_end), before serving the mbufs as any received burst. Frames are numbered
 * 0..n-1 in the order sent; malformed chains are not among them (vhf_burst_end counts them
 * in rx_missed). A worker's scratch, one per worker; no allocation after create.
 */
struct vhf_burst;

struct vhf_view {
	uint16_t n;                           /* frames */
	const uint8_t *hdr[FWD_MAX_BURST];    /* frame i's first hdr_len[i] bytes: at least
					       * FWD_HDR_BYTES, or the whole frame */
	uint16_t hdr_len[FWD_MAX_BURST];
	uint32_t len[FWD_MAX_BURST];          /* frame i's length */
};

struct vhf_burst *vhf_burst_create(int socket);
void vhf_burst_free(struct vhf_burst *b);
/* Takes up to MAX frames from IN's guest; NULL when it is not connected (nothing read). */
const struct vhf_view *vhf_burst_take(struct vhf *in, uint16_t max, struct vhf_burst *b);
/* Frame K (an mbuf of IN's pool), or NULL when the pool is empty. */
struct rte_mbuf *vhf_burst_mbuf(struct vhf_burst *b, uint16_t k);
/* Gives frames K.. back to the sender's ring unread (no mbuf for K): view.n becomes K. */
void vhf_burst_cut(struct vhf_burst *b, uint16_t k);
/*
 * Copies frames IDX[0..N-1] into OUT's guest (worker Q's receive queue), one copy each, in
 * that order; fills R's sent, full (no room, or the guest not connected), too_long and
 * sent_bytes.
 */
void vhf_burst_copy(struct vhf_burst *b, const uint16_t *idx, uint16_t n, struct vhf *out,
		    uint16_t q, uint32_t max_frame, struct fwd_direct_result *r);
/*
 * For another kind's port (memif_fast.h, mff_put_frames): frames IDX[0..N-1] as entries
 * into F, in that order; returns the pieces they point into. vhf_burst_copied() then
 * counts the N frames such a port took in IN's one_copy.
 */
const struct fwd_seg *vhf_burst_frames(const struct vhf_burst *b, const uint16_t *idx,
				       uint16_t n, struct fwd_frame *f);
void vhf_burst_copied(struct vhf_burst *b, uint16_t n);
/* Returns the burst's chains (up to the cut) to the sender. */
void vhf_burst_end(struct vhf_burst *b);

#endif
