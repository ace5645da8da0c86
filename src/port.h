/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ports: DPDK ethdevs hot-plugged from a port spec, and the daemon's table of them.
 *
 * A port has a stable sluice number (its slot in the table, from 1) and a generation that
 * grows each time the slot is reused, because DPDK reuses ethdev port ids and a number alone
 * could name two different ports over time. Ports are created, changed and destroyed only
 * by the control thread; workers read the fields marked "worker" concurrently.
 */
#ifndef SLUICE_PORT_H
#define SLUICE_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mempool.h>

#include <rte_ethdev.h>

#include "capture.h"
#include "memif_fast.h"
#include "port_afpacket.h"
#include "port_vxlan.h"
#include "portspec.h"
#include "stats.h"
#include "vhost_fast.h"

#define PORT_MAX 256            /* ports in the daemon */
#define PORT_NAME_LEN 32
#define WK_MAX_WORKERS 16
#define PORT_NO_ETHDEV UINT16_MAX
#define PORT_MAX_RXQ PORTSPEC_MAX_QUEUES   /* receive queues of one port (queues=) */

struct sw;

/*
 * One receive queue's share of the work (docs/cores.md): written only by the worker that
 * polls the queue, a different one after a move (rxq.c), never two at once (worker.c,
 * wk_move_rxq). A cache line each, so that two workers polling two queues of one port do
 * not share one.
 */
struct port_rxq {
	uint64_t cycles;              /* TSC cycles spent receiving and serving its bursts */
	uint64_t packets;
} __rte_cache_aligned;

struct port {
	/* read by workers */
	uint16_t ethdev;              /* PORT_NO_ETHDEV for the kinds sluice drives itself */
	uint16_t sw_index;            /* index in its switch */
	struct afp *afp;              /* af_packet: sluice's own driver (port_afpacket.h) */
	struct vhf *vhf;              /* vhost-user, fast (the default): sluice's own (vhost_fast.h) */
	/* vhf, or NULL while sluiced captures the port (capture.h): the one-copy path leaves
	 * it out then, as input and as output. Atomic. */
	struct vhf *vhf_direct;
	struct mff *mff;              /* memif with fast=1: sluice's own (memif_fast.h) */
	/* The capture sluiced makes of this port (capture.h); NULL: none. Atomic. */
	struct cap *cap;
	struct vxl_tunnel *vxl;       /* vxlan: its tunnel (port_vxlan.h) */
	/* The vxlan ports carried over this one (atomic; NULL: none): the worker polling it
	 * hands their frames to them (port_vxlan.h). */
	struct vxl_demux *tunnels;
	/* Takes frames whose checksum or TCP segmentation is left to do (port_afpacket.h);
	 * other outputs have it done in software by the worker. */
	bool tx_offloads;
	/* The longest frame it sends: the MTU plus the Ethernet header (a VLAN tag may come
	 * on top); longer ones are dropped as mtu_exceeded. Atomic: set-port changes it. */
	uint32_t max_frame;
	struct sw *sw;
	bool link_up;                 /* atomic access */
	/* A flow switch port's OpenFlow config (PORT_OF_*; port-mod, set-port of_config):
	 * written by the control thread, read (atomic) when the switch translates. */
	uint32_t of_config;
	struct port_counters counters[WK_MAX_WORKERS];
	struct port_rxq rxq[PORT_MAX_RXQ];

	/* control thread only */
	uint16_t id;                  /* slot number, 1..PORT_MAX */
	uint32_t generation;
	char name[PORT_NAME_LEN];
	char spec[PORTSPEC_MAX_LEN + 1];
	struct portspec ps;
	struct rte_ether_addr mac;
	unsigned int mtu;             /* the port's MTU (docs/ports.md) */
	bool mtu_set;                 /* changed by set-port (the state file keeps it) */
	int worker;                   /* worker polling its receive queue 0; -1 if none */
	uint16_t n_rxq;               /* receive queues (queues=, default 1) */
	int rxq_worker[PORT_MAX_RXQ]; /* worker polling each; -1 if none */
	bool rxq_pinned[PORT_MAX_RXQ];/* set-rxq --pin: the automatic re-balance leaves it */
	bool lsc_callback;            /* a link-state callback is registered */
	struct port_totals baseline;  /* subtracted from the counters: clear-stats */
	uint64_t baseline_missed;     /* the same for the device's own miss counter */
	uint64_t baseline_one_copy;   /* and for vhost_fast's frames copied guest to guest */
	struct rte_mempool *pool;     /* its receive queue's pool (pool.c) */
	unsigned int pool_need;       /* mbufs it reserved there */
};

/* Error classes of port set-up, for the control protocol's codes. */
/* OpenFlow 1.3's ofp_port_config bits (NO_FLOOD is 1.0's, which OVS keeps in 1.3). */
#define PORT_OF_DOWN        (1u << 0)
#define PORT_OF_NO_RECV     (1u << 2)
#define PORT_OF_NO_FLOOD    (1u << 4)
#define PORT_OF_NO_FWD      (1u << 5)
#define PORT_OF_NO_PACKET_IN (1u << 6)
#define PORT_OF_ALL (PORT_OF_DOWN | PORT_OF_NO_RECV | PORT_OF_NO_FLOOD | PORT_OF_NO_FWD | \
		     PORT_OF_NO_PACKET_IN)

enum port_error { PORT_ERR_SPEC = 1, PORT_ERR_DEVICE, PORT_ERR_LIMIT, PORT_ERR_EXISTS,
		  PORT_ERR_BUSY };

struct port_config {
	unsigned int n_workers;       /* transmit queues per port */
	unsigned int rx_desc, tx_desc;
	unsigned int n_mbufs;         /* per pool; pools are added as ports need them */
	unsigned int setup_timeout_s; /* a set-up still waiting after this is cancelled */
};

void port_init(const struct port_config *cfg);

/*
 * Port set-up: probing and starting a device can wait for a peer for as long as the peer
 * likes (a virtio-user server accept()s, a client waits for the vhost-user side's answers),
 * so it runs on a set-up thread of its own, one port at a time, while the control thread
 * goes on serving. The control thread starts it, learns it is done through an eventfd, and
 * then collects the port. A set-up still running after setup_timeout_s, or one the control
 * thread cancels, is interrupted: SIGUSR1 (handled without SA_RESTART) makes the blocked
 * accept()/recv() in the driver fail with EINTR.
 */

/* Starts creating a port on the set-up thread. 0, or -1 with *ERROR and a message in ERR. */
int port_setup_start(const char *name, const char *spec, enum port_error *error, char *err,
		     size_t err_len);

/* The name of the port being set up, or NULL when no set-up is under way. */
const char *port_setup_pending(void);

/* An eventfd, readable (count > 0) once the set-up thread is done. */
int port_setup_fd(void);

/* Asks the set-up to stop; REASON ends up in its error message. Returns at once. */
void port_setup_cancel(const char *reason);

/* Enforces the set-up's deadline and repeats a cancel's interruption; call every ~50 ms. */
void port_setup_poll(void);

/* Waits up to TIMEOUT_MS for the set-up thread (polling as above); true when it is done. */
bool port_setup_wait(unsigned int timeout_ms);

/*
 * Collects a finished set-up (port_setup_wait returned true or the eventfd fired): the port,
 * numbered and in the table, or NULL with *ERROR and a message in ERR.
 */
struct port *port_setup_finish(enum port_error *error, char *err, size_t err_len);

/* Stops and removes the device and frees P. No worker may use P any more. */
/*
 * Sets P's MTU: on the device where it has one (rte_eth_dev_set_mtu; the kernel interface
 * of an af_packet port), and as the longest frame the workers send on it. A device that
 * cannot change its MTU (ENOTSUP) still gets the workers' limit. -1 and ERR when the device
 * refuses the value.
 */
int port_set_mtu(struct port *p, unsigned int mtu, char *err, size_t err_len);

void port_destroy(struct port *p);
/* Forgets P without closing its device or freeing it, for when a stuck worker may still use
 * it: its name is free again, its slot (and device name) never reused. */
void port_abandon(struct port *p);

struct port *port_find(const char *name);

/* The port in slot ID (1..PORT_MAX), or NULL. */
struct port *port_by_id(unsigned int id);

/* Counters summed over workers, less the clear-stats baseline. */
void port_read_totals(const struct port *p, struct port_totals *t);
void port_clear_stats(struct port *p);

/* Frames the device could not take in (its own counter: they never entered the switch). */
uint64_t port_rx_missed(const struct port *p);

/* Of the frames P forwarded, those copied straight into another guest (vhost_fast.h) or
 * memif client (memif_fast.h). */
uint64_t port_one_copy(const struct port *p);

/* Re-reads the link state from the device. */
void port_refresh_link(struct port *p);

static inline bool port_link_is_up(const struct port *p)
{
	return __atomic_load_n(&p->link_up, __ATOMIC_RELAXED);
}

/* A worker's receive and transmit: the ethdev's, or the kind's own driver's. */
static inline uint16_t port_rx_burst(const struct port *p, struct rte_mbuf **pkts, uint16_t n)
{
	if (p->afp != NULL)
		return afp_rx_burst(p->afp, pkts, n);
	if (p->vhf != NULL) {
		struct cap *c = __atomic_load_n(&p->cap, __ATOMIC_ACQUIRE);
		uint16_t got = vhf_rx_burst(p->vhf, pkts, n);

		if (unlikely(c != NULL) && got > 0)
			cap_rx(c, pkts, got);
		return got;
	}
	if (p->mff != NULL)
		return mff_rx_burst(p->mff, pkts, n);
	return rte_eth_rx_burst(p->ethdev, 0, pkts, n);
}

/* The same from receive queue Q; queues beyond 0 exist only on ethdev ports (queues=). */
static inline uint16_t port_rx_burst_queue(const struct port *p, uint16_t q,
					   struct rte_mbuf **pkts, uint16_t n)
{
	if (q == 0)
		return port_rx_burst(p, pkts, n);
	return rte_eth_rx_burst(p->ethdev, q, pkts, n);
}

static inline uint16_t port_tx_burst(const struct port *p, uint16_t q, struct rte_mbuf **pkts,
				     uint16_t n)
{
	if (p->afp != NULL)
		return afp_tx_burst(p->afp, q, pkts, n);
	if (p->vhf != NULL) {
		struct cap *c = __atomic_load_n(&p->cap, __ATOMIC_ACQUIRE);

		if (likely(c == NULL))
			return vhf_tx_burst(p->vhf, q, pkts, n);
		return cap_vhf_tx(c, p->vhf, q, pkts, n);
	}
	if (p->mff != NULL)
		return mff_tx_burst(p->mff, q, pkts, n);
	if (unlikely(p->vxl != NULL))
		return vxl_tx_burst(p->vxl, q, pkts, n);
	return rte_eth_tx_burst(p->ethdev, q, pkts, n);
}

/* Frees the pools; call after every port is destroyed. */
/* A flow switch port's OpenFlow config as names ("no_fwd,no_flood"; "" for none), and
 * back: TEXT is such a list, or "none"; -1 for an unknown name. */
void port_of_config_format(uint32_t config, char *buf, size_t len);
int port_of_config_parse(const char *text, uint32_t *config);

void port_fini(void);

#endif
