/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vxlan ports: an L2 tunnel (RFC 7348) carried over another sluiced port, the underlay (an
 * af_packet or af_xdp port on a kernel interface, a memif, ...). A vxlan port sits in a
 * switch like any port; what the switch sends on it is encapsulated (outer Ethernet, IPv4,
 * UDP, VXLAN) and sent on the underlay's transmit queue of the same worker. What arrives on
 * the underlay for one of its tunnels (UDP to dst_port at local_ip, from remote_ip, with the
 * tunnel's VNI) is decapsulated by the worker polling the underlay and served as a burst
 * received on the vxlan port. The rest of the underlay's traffic goes to the underlay's own
 * switch, except ARP for a tunnel's local_ip, which the tunnel answers (and learns the
 * remote's MAC from). A VXLAN frame to local_ip that no tunnel takes is dropped and counted
 * as vxlan_no_tunnel on the underlay. docs/ports.md, "VXLAN", has the user's view.
 *
 * Threads: vxl_prepare, vxl_attach, vxl_detach, vxl_close and vxl_describe are the control
 * thread's; vxl_tx_burst (queue = worker id) and vxl_rx_split run on workers, allocate
 * nothing on the common path (the inner frame's headroom takes the outer headers) and take
 * no lock. The underlay's list of tunnels is an array published by pointer and freed after a
 * grace period (wk_defer).
 */
#ifndef SLUICE_PORT_VXLAN_H
#define SLUICE_PORT_VXLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include "fwd.h"

struct port;
struct vxl_tunnel;

/* Outer headers: Ethernet 14, IPv4 20, UDP 8, VXLAN 8. */
#define VXL_HDR_LEN 50

/* What vxl_rx_split leaves the worker to serve: decapsulated frames and their tunnels. */
struct vxl_split {
	uint16_t n;
	struct rte_mbuf *pkts[FWD_MAX_BURST];
	struct port *port[FWD_MAX_BURST];
	struct rte_mbuf *scratch[FWD_MAX_BURST];    /* frames to free */
	struct rte_mbuf *answers[FWD_MAX_BURST];    /* ARP replies to send */
};

/*
 * Flow-based tunnels (vni=flow, OVS's key=flow): a frame's tunnel id rides in its mbuf, in a
 * dynamic field that a dynamic ol_flags bit says is set. A vni=flow port's decapsulation sets
 * it to the frame's VNI, flow mode matches it as tun_id and set_field:ID->tun_id writes it,
 * and a vni=flow port's encapsulation takes the VNI from it (0 when unset). Every other
 * outer frame has it cleared. Both are 0 until vxl_init() registers them: no frame is then
 * ever flagged.
 */
extern int vxl_tun_id_offset;
extern uint64_t vxl_tun_id_flag;

/* Registers the field and the flag (after the EAL is up); -1 when the EAL refuses. */
int vxl_init(void);

static inline uint64_t vxl_tun_id(const struct rte_mbuf *m)
{
	if (likely(!(m->ol_flags & vxl_tun_id_flag)))
		return 0;
	return *RTE_MBUF_DYNFIELD(m, vxl_tun_id_offset, const uint32_t *);
}

static inline void vxl_set_tun_id(struct rte_mbuf *m, uint64_t id)
{
	if (vxl_tun_id_flag == 0)
		return;
	*RTE_MBUF_DYNFIELD(m, vxl_tun_id_offset, uint32_t *) = (uint32_t)id;
	m->ol_flags |= vxl_tun_id_flag;
}

/* Checks P's spec against the ports that exist (the underlay) and makes its tunnel. */
int vxl_prepare(struct port *p, char *err, size_t err_len);
/* Puts P's tunnel in its underlay's list; P is in the table and in its switch. */
int vxl_attach(struct port *p);
/* Takes P's tunnel out of its underlay's list and waits for a grace period: after it no
 * worker decapsulates into P. -1 when a worker is stuck (P must then be abandoned). */
int vxl_detach(struct port *p);
/* Frees P's tunnel (after vxl_detach and a grace period). */
void vxl_close(struct port *p);
/* Whether any tunnel is carried over P. */
bool vxl_is_underlay(const struct port *p);
/* The tunnel's state for show: remote MAC and whether it is known. */
json_t *vxl_describe(const struct port *p);
/* Link: the underlay's, and down while the remote's MAC is unknown. */
bool vxl_link_up(const struct port *p);

/*
 * Encapsulates PKTS[0..N-1] and sends them on the underlay's queue Q. Returns how many were
 * sent; the others are given back as they came (headers taken off again), for the worker to
 * free and count. A frame shared with other outputs (a flood) is copied first.
 */
uint16_t vxl_tx_burst(struct vxl_tunnel *t, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

/*
 * Worker W's burst PKTS[0..N-1] from underlay UL: takes out the frames for its tunnels
 * (decapsulated into OUT), the ARP it answers or learns from, and the VXLAN frames no tunnel
 * takes (dropped), counting all of these on UL; compacts the rest in PKTS and returns their
 * count, for UL's own switch.
 */
uint16_t vxl_rx_split(struct port *ul, uint16_t w, struct rte_mbuf **pkts, uint16_t n,
		      struct vxl_split *out);

#endif
