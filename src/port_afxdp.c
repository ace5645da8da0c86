/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * af_xdp ports: TCP and UDP from a kernel peer with its default offloads.
 *
 * A veth whose peer has an XDP program sends it no TSO super-frames (the kernel turns GSO
 * off for it), but it still leaves the transport checksum to "the device": the frame
 * arrives with the checksum field holding only the pseudo-header sum (CHECKSUM_PARTIAL),
 * and XDP has no way to say so. DPDK 22.11's af_xdp driver passes such frames on as they
 * are, and the receiver drops them as corrupt: TCP through the switch did not even connect.
 *
 * A receive callback on the port's queue (it runs inside rte_eth_rx_burst on that port
 * only, so other ports pay nothing) completes exactly those checksums: a TCP or UDP
 * checksum equal to the frame's own pseudo-header sum is the kernel's partial one, and the
 * full checksum replaces it. Any other checksum, right or wrong, is left as it came, so
 * real corruption still shows at the receiver. (A corrupt frame whose checksum happens to
 * equal its pseudo-header sum, one in 65,536 of them, would be "repaired".)
 */
#include "port_afxdp.h"

#include <stddef.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "log.h"

/*
 * Where the transport header of M starts (its IP header at *L3) and which it is, or 0 when
 * it has none we know or the frame is shorter than its headers say.
 */
static uint16_t l4_offset(const struct rte_mbuf *m, uint16_t *l3, uint8_t *proto, bool *v6)
{
	const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
	uint32_t off = RTE_ETHER_HDR_LEN, len = m->data_len;
	uint16_t type;

	if (len < RTE_ETHER_HDR_LEN)
		return 0;
	type = ((const struct rte_ether_hdr *)d)->ether_type;
	while (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) ||
	       type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ)) {
		if (len < off + RTE_VLAN_HLEN)
			return 0;
		type = ((const struct rte_vlan_hdr *)(d + off))->eth_proto;
		off += RTE_VLAN_HLEN;
	}
	*v6 = type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	*l3 = (uint16_t)off;
	if (type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
		const struct rte_ipv4_hdr *ip = (const void *)(d + off);
		uint16_t ihl;

		if (len < off + sizeof(*ip) || (ip->fragment_offset &
						rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG |
								 RTE_IPV4_HDR_OFFSET_MASK)))
			return 0;
		ihl = rte_ipv4_hdr_len(ip);
		if (ihl < sizeof(*ip) || len < off + rte_be_to_cpu_16(ip->total_length) ||
		    rte_be_to_cpu_16(ip->total_length) < ihl)
			return 0;
		*proto = ip->next_proto_id;
		return (uint16_t)(off + ihl);
	}
	if (*v6) {
		const struct rte_ipv6_hdr *ip6 = (const void *)(d + off);

		if (len < off + sizeof(*ip6) + rte_be_to_cpu_16(ip6->payload_len))
			return 0;
		*proto = ip6->proto;      /* extension headers: left alone */
		return (uint16_t)(off + sizeof(*ip6));
	}
	return 0;
}

/* The offset of the checksum field of the TCP or UDP header at L4, or 0 when the frame is
 * too short for it. */
static uint32_t l4_checksum_at(const struct rte_mbuf *m, uint32_t l4, uint8_t proto)
{
	if (proto == IPPROTO_TCP && m->data_len >= l4 + sizeof(struct rte_tcp_hdr))
		return l4 + offsetof(struct rte_tcp_hdr, cksum);
	if (proto == IPPROTO_UDP && m->data_len >= l4 + sizeof(struct rte_udp_hdr))
		return l4 + offsetof(struct rte_udp_hdr, dgram_cksum);
	return 0;
}

/* Completes M's transport checksum if the kernel left it partial. */
static void complete_partial(struct rte_mbuf *m)
{
	uint16_t l3 = 0, l4, field, partial;
	uint32_t at;
	uint8_t proto = 0, *sum;
	bool v6 = false;
	void *ip;

	if (m->nb_segs != 1 || (l4 = l4_offset(m, &l3, &proto, &v6)) == 0 ||
	    (at = l4_checksum_at(m, l4, proto)) == 0)
		return;
	ip = rte_pktmbuf_mtod_offset(m, void *, l3);
	sum = rte_pktmbuf_mtod_offset(m, uint8_t *, at);
	memcpy(&field, sum, sizeof(field));    /* the field may be unaligned */
	partial = v6 ? rte_ipv6_phdr_cksum(ip, 0) : rte_ipv4_phdr_cksum(ip, 0);
	if (field != partial)
		return;
	memset(sum, 0, sizeof(field));
	field = v6 ? rte_ipv6_udptcp_cksum(ip, (uint8_t *)ip + (l4 - l3))
		   : rte_ipv4_udptcp_cksum(ip, (uint8_t *)ip + (l4 - l3));
	memcpy(sum, &field, sizeof(field));
}

static uint16_t afxdp_rx_callback(uint16_t port_id, uint16_t queue, struct rte_mbuf *pkts[],
				  uint16_t n, uint16_t max, void *arg)
{
	uint16_t i;

	(void)port_id;
	(void)queue;
	(void)max;
	(void)arg;
	for (i = 0; i < n; i++)
		complete_partial(pkts[i]);
	return n;
}

int port_afxdp_attach(uint16_t ethdev)
{
	/* Never removed: DPDK frees a callback only with its device. */
	if (rte_eth_add_rx_callback(ethdev, 0, afxdp_rx_callback, NULL) == NULL) {
		LOG(WARNING, "ethdev %u: no receive callback (%s): TCP from kernel peers with "
		    "checksum offload will not pass", ethdev, rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}
