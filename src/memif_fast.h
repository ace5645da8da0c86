/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif ports of sluice's own (spec key fast=1, server role): sluiced speaks the memif
 * control protocol on the port's Unix socket itself (a thread per port answers the client's
 * hello, init, regions, rings and connect), maps the shared memory the client offers, and
 * the workers read and write the rings directly. Between two such ports a frame is copied
 * once, from the sender's buffer in its client's memory straight into a buffer the
 * receiver's client posted: mff_forward() does that for a whole burst whose output is
 * known before it is read (patch, flow steering by input port). Everything else goes
 * through mbufs with mff_rx_burst() and mff_tx_burst(), as the net_memif PMD's ports do
 * (docs/ports.md, "One copy between memif peers").
 *
 * The client decides the rings: frames are received from client-to-server ring 0 (the
 * hello offers one), and worker W transmits into server-to-client ring W. Ring positions
 * are published once per ring and burst, and the client's interrupt eventfd written once
 * per burst only when it asked for interrupts (the ring's MASK_INT flag clear).
 *
 * Threads: the worker polling the port calls mff_rx_burst() and mff_forward() with the port
 * as input; any worker W calls mff_tx_burst() and mff_forward() with the port as output on
 * ring W. The port's control thread publishes a connected client's mapping and withdraws
 * it behind an RCU grace period (worker.h, wk_quiesce) before it unmaps anything, so a
 * client that disconnects or dies mid-burst never leaves a worker reading unmapped memory.
 */
#ifndef SLUICE_MEMIF_FAST_H
#define SLUICE_MEMIF_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "fwd.h"

struct mff;
struct port;

/*
 * Binds the memif socket PATH as a server for interface ID (the client's id=) of port P,
 * receiving into POOL, and starts its control thread. MAC: the port's address, or NULL for
 * a random one. NULL and ERR on failure.
 */
struct mff *mff_open(struct port *p, const char *path, uint32_t id,
		     const struct rte_ether_addr *mac, struct rte_mempool *pool, char *err,
		     size_t err_len);
/* Stops the control thread, withdraws a connected client and removes the socket. */
void mff_close(struct mff *m);

bool mff_link_up(const struct mff *m);
void mff_mac(const struct mff *m, struct rte_ether_addr *mac);
/* Frames that never entered the switch: bad descriptors from the client. */
uint64_t mff_rx_missed(const struct mff *m);
/* Frames from this port's client copied straight into another client's buffers. */
uint64_t mff_one_copy(const struct mff *m);
/* Clients that connected, and connections that ended (goodbye, crash or protocol error). */
uint64_t mff_connects(const struct mff *m);
uint64_t mff_disconnects(const struct mff *m);

uint16_t mff_rx_burst(struct mff *m, struct rte_mbuf **pkts, uint16_t n);
/* Copies what fits into server-to-client ring Q and frees it; returns how many (the rest
 * stay the caller's, as with rte_eth_tx_burst). */
uint16_t mff_tx_burst(struct mff *m, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

/*
 * Moves up to MAX frames from IN's client to OUT's (ring Q), one copy each, frames longer
 * than MAX_FRAME (a VLAN tag aside) dropped. -1 when either client is not connected or OUT
 * has no ring Q: nothing was touched, and the caller takes the mbuf path, which counts what
 * happens then. Else 0, with R filled.
 */
int mff_forward(struct mff *in, struct mff *out, uint16_t q, uint16_t max, uint32_t max_frame,
		struct fwd_direct_result *r);

/*
 * The one copy to and from other fast port kinds (fwd.h, struct fwd_frames; vhost_fast.h's
 * vhf_take/vhf_put/vhf_release, which these mirror): mff_take() reads up to MAX frames
 * IN's client sends, as pieces of its regions; -1 when no client is connected (nothing
 * read). mff_release() gives their buffers back to the client, once every copy is made,
 * and counts SENT as copied once and the malformed as rx_missed. mff_put() copies the
 * frames of B into OUT's client (ring Q), in order, frames longer than MAX_FRAME (a VLAN
 * tag aside) dropped, and fills R (all of it), no client counting as full.
 */
int mff_take(struct mff *in, uint16_t max, struct fwd_frames *b);
void mff_release(struct mff *in, const struct fwd_frames *b, uint16_t sent);
void mff_put(struct mff *out, uint16_t q, const struct fwd_frames *b, uint32_t max_frame,
	     struct fwd_direct_result *r);
/* mff_put() for frames FRAMES[0..N-1] whose pieces are in SEGS (vhost_fast.h's
 * vhf_burst_frames: a learn switch's unicast from a guest to a memif client). */
void mff_put_frames(struct mff *out, uint16_t q, const struct fwd_seg *segs,
		    const struct fwd_frame *frames, uint16_t n, uint32_t max_frame,
		    struct fwd_direct_result *r);

#endif
