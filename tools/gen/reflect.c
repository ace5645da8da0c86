/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen's reflectors: what a port receives goes back out of it, addresses swapped
 * (a loopback VNF and latency server for --role ping).
 */
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "gen.h"

static void swap_addresses(struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ether_addr a = eth->src_addr;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint32_t addr;
	uint16_t port;

	eth->src_addr = eth->dst_addr;
	eth->dst_addr = a;
	if (m->data_len < TRAFFIC_HDR_LEN || eth->ether_type !=
	    rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return;
	addr = ip->src_addr;
	ip->src_addr = ip->dst_addr;
	ip->dst_addr = addr;
	if (ip->next_proto_id == IPPROTO_UDP && (ip->version_ihl & 0xf) == 5) {
		port = udp->src_port;
		udp->src_port = udp->dst_port;
		udp->dst_port = port;
	}
}

/* The reflect role: what comes in goes back out of the same port, addresses swapped. */
uint16_t reflect_burst(struct gen *g, uint16_t port)
{
	struct rte_mbuf *m[GEN_MAX_BURST];
	uint16_t n = rx_burst_all(g, port, m, g->o.rx_burst), i, sent;

	if (n == 0)
		return 0;
	if (g->o.touch)
		sink_touch_frames(g, m, n);
	for (i = 0; i < n; i++)
		swap_addresses(m[i]);
	sent = rte_eth_tx_burst(port, 0, m, n);
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
	g->reflected += sent;
	g->reflect_dropped += n - sent;
	return n;
}
