/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Captures made by sluiced itself, for ports that have no DPDK ethdev for dpdk-dumpcap to
 * attach to: the vhost-user ports of sluice's own data path (fast, the default). docs/design.md,
 * "Capture on ports without an ethdev", says why it is built so.
 *
 * While a capture runs on a port, the one-copy path leaves the port out (port.h,
 * vhf_direct; the switch's fast_ports), so each of its frames passes through an mbuf, and
 * the port's receive and transmit (port_rx_burst, port_tx_burst) hand a copy of each frame
 * of the captured directions, cut to the snap length, to a small mempool of the capture's
 * own and into a ring: one ring for what the port receives (a port's queue is polled by
 * one worker at a time) and one per worker for what it sends, so every ring has a single
 * producer and a worker never waits for another. A copy that finds the pool empty or its
 * ring full is not made and counts as the capture's drop. The control thread empties the
 * rings when the capture's client reads (capture-read), oldest first.
 *
 * With no capture running the worker pays nothing on the one-copy path, and one
 * predictable branch per burst on the mbuf path of a fast port (the load of port.cap).
 *
 * Threads: cap_rx() and cap_tx() in workers; everything else on the control thread.
 */
#ifndef SLUICE_CAPTURE_H
#define SLUICE_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <jansson.h>
#include <rte_mbuf.h>

struct cap;
struct port;
struct vhf;

#define CAP_RX 1u
#define CAP_TX 2u
#define CAP_SNAPLEN_MAX 65535u

/* Worker: copies frames PKTS[0..N-1], just received on the captured port. */
void cap_rx(struct cap *c, struct rte_mbuf *const *pkts, uint16_t n);

/*
 * Worker Q: sends PKTS[0..N-1] into guest V as vhf_tx_burst() does, and records a copy of
 * each frame the guest took. Returns how many it took.
 */
uint16_t cap_vhf_tx(struct cap *c, struct vhf *v, uint16_t q, struct rte_mbuf **pkts,
		    uint16_t n);

/* ---- the control thread ---- */

/* Why a capture ended, or CAP_RUNNING. */
enum cap_state { CAP_RUNNING, CAP_STOPPED, CAP_CLIENT_GONE, CAP_TIMED_OUT, CAP_PORT_GONE };

/*
 * Starts capturing directions DIRS (CAP_RX | CAP_TX) of P, each frame cut to SNAPLEN bytes,
 * for control connection OWNER. Returns the capture's id (> 0), or 0 with a message in ERR
 * (P already captured, not a fast vhost-user port, no memory).
 */
uint32_t cap_start(struct port *p, unsigned int dirs, uint32_t snaplen, uint64_t owner,
		   char *err, size_t err_len);

/*
 * Capture ID as OWNER sees it: NULL when there is none, or it is another connection's.
 */
struct cap *cap_find(uint32_t id, uint64_t owner);

/* Stops C's copies (the port goes back to the one-copy path); what it holds stays
 * readable. */
void cap_stop(struct cap *c, enum cap_state why);

/*
 * Moves up to MAX_FRAMES frames (and about MAX_BYTES of frame bytes) out of C, oldest
 * first, into FRAMES (a JSON array) as {"t": ns since the epoch, "dir": "rx"|"tx", "len":
 * the frame's length, "data": its first bytes in base64}, and fills a read's totals into
 * O. Frees C when it is stopped and empty after this ("ended": true); C must not be used
 * then. -1 when no memory was left for the answer.
 */
int cap_read(struct cap *c, unsigned int max_frames, size_t max_bytes, json_t *frames,
	     json_t *o);

/* Adds C's totals to O: captured, dropped, state. */
void cap_describe(const struct cap *c, json_t *o);

/* Frees every capture of connection OWNER, which closed. */
void cap_owner_gone(uint64_t owner);
/* Ends P's running capture before P is deleted (what it holds stays readable). */
void cap_port_removed(struct port *p);
/* Ends captures nobody has read for CAP_READ_TIMEOUT_S; call every ~500 ms. */
void cap_tick(void);
/* Frees every capture (shutdown, after the workers stopped). */
void cap_fini(void);

#endif
