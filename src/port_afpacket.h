/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * af_packet ports of sluice's own: a kernel interface through packet sockets that carry the
 * kernel's virtio-net header (PACKET_VNET_HDR), so that frames whose checksum the kernel left
 * to be completed (CHECKSUM_PARTIAL) and TCP super-frames (GSO/TSO) cross the switch intact.
 * DPDK 22.11's net_af_packet ignores both: TCP between two namespaces through it moved
 * nothing (docs/design.md, "Kernel ports and offloads").
 *
 * A frame the kernel marks NEEDS_CSUM arrives with the mbuf's transmit offload fields set
 * (l2_len, l3_len, RTE_MBUF_F_TX_IPV4/IPV6, RTE_MBUF_F_TX_TCP_CKSUM/UDP_CKSUM, and for a
 * super-frame RTE_MBUF_F_TX_TCP_SEG and tso_segsz), as DPDK's vhost library hands such
 * frames over; the checksum field keeps the kernel's partial sum. An output that takes the
 * offloads (another of these ports) passes them back to the kernel in the header; any other
 * output has them completed by afp_complete_offloads() first.
 *
 * Workers call afp_rx_burst (the one worker polling the port) and afp_tx_burst (queue =
 * worker id); everything else is the control thread's.
 */
#ifndef SLUICE_PORT_AFPACKET_H
#define SLUICE_PORT_AFPACKET_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

struct afp;

/* Opens IFACE with N_TXQ transmit queues, receiving into POOL; NULL and ERR on failure. */
struct afp *afp_open(const char *iface, unsigned int n_txq, struct rte_mempool *pool,
		     char *err, size_t err_len);
void afp_close(struct afp *a);

uint16_t afp_rx_burst(struct afp *a, struct rte_mbuf **pkts, uint16_t n);
/* Sends what fits in queue Q's ring and frees it; returns how many were taken. */
uint16_t afp_tx_burst(struct afp *a, uint16_t q, struct rte_mbuf **pkts, uint16_t n);

bool afp_link_up(const struct afp *a);
void afp_mac(const struct afp *a, struct rte_ether_addr *mac);
/* Frames the kernel could not put in the receive ring, plus frames refused as too large. */
uint64_t afp_rx_missed(struct afp *a);

/* Offload flags a frame from an af_packet port may carry. */
#define AFP_OFFLOAD_FLAGS (RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_TCP_SEG)

/*
 * Completes the offloads of the N frames in PKTS for an output that cannot take them:
 * checksums are computed; a TCP super-frame is cut into segments of tso_segsz payload bytes
 * with their own headers and checksums, from POOL. Writes the frames to send to OUT (room
 * for OUT_MAX) and returns their count; frames that could not be completed (no mbufs) are
 * freed and counted in *FAILED. Not for flood copies: they share their data.
 */
uint16_t afp_complete_offloads(struct rte_mbuf **pkts, uint16_t n, struct rte_mbuf **out,
			       uint16_t out_max, struct rte_mempool *pool, uint16_t *failed);

#endif
