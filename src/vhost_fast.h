/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vhost-user ports of sluice's own (spec key fast=1): DPDK's vhost library speaks the
 * protocol (socket, memory table, vrings, feature negotiation), and this module is the
 * virtqueue data path. Between two such ports a frame is copied once, from the sender's
 * descriptors straight into the receiver's buffers, as netmap's VALE copies between guests:
 * vhf_forward() does that for a whole burst. Everything else (learn, flow and floods, other
 * port kinds, a port not connected) goes through mbufs with vhf_rx_burst() and
 * vhf_tx_burst(), as the net_vhost PMD's ports do (docs/design.md, "One copy between VMs").
 *
 * Split rings only: the packed-ring feature is not offered, nor are indirect descriptors,
 * event index, in-order, checksum and segmentation offloads or dirty-page logging. Mergeable
 * receive buffers and the 12-byte virtio-net header are. Used-ring updates are published
 * and the guest notified (unless it asked for no interrupts) once per ring and burst.
 *
 * Threads: the worker polling the port calls vhf_rx_burst() and vhf_forward() with the port
 * as input; worker W transmits into guest receive queue W (vring 2W), as with the PMD's
 * per-worker transmit queues. The vhost library's thread publishes a connected guest's rings
 * and memory table, and withdraws them behind an RCU grace period (worker.h) before the
 * library unmaps anything.
 */
#ifndef SLUICE_VHOST_FAST_H
#define SLUICE_VHOST_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

struct vhf;
struct port;

/* What one vhf_forward() call did, for the worker's counters. */
struct vhf_result {
	uint16_t rx;                  /* frames taken from the sender */
	uint16_t sent;                /* frames copied into the receiver */
	uint16_t full;                /* no room in the receiver: tx_full */
	uint16_t too_long;            /* longer than MAX_FRAME: mtu_exceeded */
	uint16_t malformed;           /* bad chains from the sender, never received: the
				       * port's rx_missed counts them */
	uint64_t rx_bytes, sent_bytes;
};

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
		struct vhf_result *r);

#endif
