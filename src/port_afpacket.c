/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * af_packet ports with the kernel's virtio-net header (port_afpacket.h says why).
 *
 * One packet socket receives (a TPACKET_V2 receive ring, promiscuous, our own transmissions
 * ignored) and one per worker transmits (a TPACKET_V2 transmit ring, bound to no protocol so
 * it receives nothing, qdisc bypassed). Both carry PACKET_VNET_HDR. Ring frames are large
 * enough for a 64 KB super-frame, which is copied into a chain of mbufs; a burst costs one
 * system call on the transmit side (the kick) and none on the receive side.
 */
#include "port_afpacket.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_net.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#define AFP_MAX_TXQ 16
/*
 * Ring geometry. A frame holds the TPACKET2 header, the virtio-net header and a 64 KB
 * super-frame (veth's gso_max_size); one frame per block. Receive: 128 frames (16 MiB),
 * transmit: 64 per worker (8 MiB). Pinned kernel memory, the price of taking super-frames
 * whole rather than making the kernel cut them.
 */
#define AFP_FRAME_SIZE (1u << 17)
#define AFP_RX_FRAMES 128u
#define AFP_TX_FRAMES 64u
#define AFP_VNET_LEN ((uint16_t)sizeof(struct virtio_net_hdr))
/* Where a transmit frame's data starts (the kernel's tpacket_snd reads it there). */
#define AFP_TX_DATA (TPACKET2_HDRLEN - sizeof(struct sockaddr_ll))

struct afp_ring {
	uint8_t *base;
	unsigned int frames, next;
};

struct afp_txq {
	int fd;
	struct afp_ring ring;
} __rte_cache_aligned;

struct afp {
	/* receive side, the polling worker's */
	int rx_fd;
	struct afp_ring rx;
	struct rte_mempool *pool;
	uint64_t rx_refused;          /* truncated or not expressible: dropped at the door */
	struct afp_txq txq[AFP_MAX_TXQ];

	/* control thread */
	unsigned int n_txq;
	int ifindex;
	char iface[IF_NAMESIZE];
	struct rte_ether_addr mac;
	uint64_t kernel_drops;        /* PACKET_STATISTICS resets on reading: kept here */
};

static int fail(char *err, size_t len, const char *what, const char *iface)
{
	snprintf(err, len, "af_packet: %s on '%s': %s", what, iface, strerror(errno));
	return -1;
}

static int map_ring(int fd, int opt, unsigned int frames, struct afp_ring *r)
{
	struct tpacket_req req = {
		.tp_block_size = AFP_FRAME_SIZE, .tp_block_nr = frames,
		.tp_frame_size = AFP_FRAME_SIZE, .tp_frame_nr = frames,
	};
	void *base;

	if (setsockopt(fd, SOL_PACKET, opt, &req, sizeof(req)) != 0)
		return -1;
	base = mmap(NULL, (size_t)frames * AFP_FRAME_SIZE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_LOCKED | MAP_POPULATE, fd, 0);
	if (base == MAP_FAILED)
		base = mmap(NULL, (size_t)frames * AFP_FRAME_SIZE, PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -1;
	r->base = base;
	r->frames = frames;
	r->next = 0;
	return 0;
}

/* A packet socket on A's interface with a ring of kind OPT; PROTO 0 receives nothing. */
static int open_socket(struct afp *a, uint16_t proto, int opt, unsigned int frames,
		       struct afp_ring *r, char *err, size_t len)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(proto),
				   .sll_ifindex = a->ifindex };
	int fd, one = 1, v2 = TPACKET_V2;

	fd = socket(AF_PACKET, SOCK_RAW, htons(proto));
	if (fd < 0)
		return fail(err, len, "socket", a->iface);
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof(v2)) != 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0) {
		fail(err, len, "PACKET_VERSION/PACKET_VNET_HDR", a->iface);
		goto out;
	}
	if (opt == PACKET_RX_RING &&
	    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0) {
		fail(err, len, "PACKET_IGNORE_OUTGOING", a->iface);
		goto out;
	}
	/* Not fatal: without it frames go through the interface's qdisc. */
	if (opt == PACKET_TX_RING)
		(void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	if (map_ring(fd, opt, frames, r) != 0) {
		fail(err, len, "packet ring", a->iface);
		goto out;
	}
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) != 0) {
		fail(err, len, "bind", a->iface);
		munmap(r->base, (size_t)r->frames * AFP_FRAME_SIZE);
		r->base = NULL;
		goto out;
	}
	return fd;
out:
	close(fd);
	return -1;
}

static int read_mac(struct afp *a)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", a->iface);
	if (ioctl(a->rx_fd, SIOCGIFHWADDR, &ifr) != 0)
		return -1;
	memcpy(a->mac.addr_bytes, ifr.ifr_hwaddr.sa_data, RTE_ETHER_ADDR_LEN);
	return 0;
}

struct afp *afp_open(const char *iface, unsigned int n_txq, struct rte_mempool *pool,
		     char *err, size_t err_len)
{
	struct packet_mreq mr = { .mr_type = PACKET_MR_PROMISC };
	struct afp *a;
	unsigned int q;

	if (n_txq == 0 || n_txq > AFP_MAX_TXQ) {
		snprintf(err, err_len, "af_packet: %u transmit queues (at most %d)", n_txq,
			 AFP_MAX_TXQ);
		return NULL;
	}
	a = rte_zmalloc("afp", sizeof(*a), RTE_CACHE_LINE_SIZE);
	if (a == NULL) {
		snprintf(err, err_len, "af_packet: out of memory");
		return NULL;
	}
	a->rx_fd = -1;
	for (q = 0; q < AFP_MAX_TXQ; q++)
		a->txq[q].fd = -1;
	a->pool = pool;
	snprintf(a->iface, sizeof(a->iface), "%s", iface);
	a->ifindex = (int)if_nametoindex(iface);
	if (a->ifindex == 0) {
		fail(err, err_len, "no such interface", iface);
		goto out;
	}
	a->rx_fd = open_socket(a, ETH_P_ALL, PACKET_RX_RING, AFP_RX_FRAMES, &a->rx, err,
			       err_len);
	if (a->rx_fd < 0)
		goto out;
	mr.mr_ifindex = a->ifindex;
	if (setsockopt(a->rx_fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0 ||
	    read_mac(a) != 0) {
		fail(err, err_len, "promiscuous mode or MAC address", iface);
		goto out;
	}
	for (q = 0; q < n_txq; q++) {
		a->txq[q].fd = open_socket(a, 0, PACKET_TX_RING, AFP_TX_FRAMES, &a->txq[q].ring,
					   err, err_len);
		if (a->txq[q].fd < 0)
			goto out;
	}
	a->n_txq = n_txq;
	return a;
out:
	a->n_txq = AFP_MAX_TXQ;
	afp_close(a);
	return NULL;
}

void afp_close(struct afp *a)
{
	unsigned int q;

	if (a == NULL)
		return;
	if (a->rx.base != NULL)
		munmap(a->rx.base, (size_t)a->rx.frames * AFP_FRAME_SIZE);
	if (a->rx_fd >= 0)
		close(a->rx_fd);
	for (q = 0; q < a->n_txq; q++) {
		if (a->txq[q].ring.base != NULL)
			munmap(a->txq[q].ring.base, (size_t)a->txq[q].ring.frames * AFP_FRAME_SIZE);
		if (a->txq[q].fd >= 0)
			close(a->txq[q].fd);
	}
	rte_free(a);
}

bool afp_link_up(const struct afp *a)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", a->iface);
	if (ioctl(a->rx_fd, SIOCGIFFLAGS, &ifr) != 0)
		return false;
	return (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
}

void afp_mac(const struct afp *a, struct rte_ether_addr *mac)
{
	*mac = a->mac;
}

uint64_t afp_rx_missed(struct afp *a)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (getsockopt(a->rx_fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		a->kernel_drops += st.tp_drops;
	return a->kernel_drops + __atomic_load_n(&a->rx_refused, __ATOMIC_RELAXED);
}

/* Copies LEN bytes from SRC into a new chain from POOL; NULL when the pool is empty. */
static struct rte_mbuf *copy_in(struct rte_mempool *pool, const uint8_t *src, uint32_t len)
{
	struct rte_mbuf *head = NULL, *tail = NULL, *m;
	uint32_t done = 0;

	do {
		uint16_t room, chunk;

		m = rte_pktmbuf_alloc(pool);
		if (unlikely(m == NULL)) {
			rte_pktmbuf_free(head);
			return NULL;
		}
		room = rte_pktmbuf_tailroom(m);
		chunk = (uint16_t)RTE_MIN(room, len - done);
		rte_memcpy(rte_pktmbuf_mtod(m, void *), src + done, chunk);
		m->data_len = chunk;
		done += chunk;
		if (head == NULL) {
			head = m;
		} else {
			tail->next = m;
			head->nb_segs++;
		}
		tail = m;
	} while (done < len);
	head->pkt_len = len;
	return head;
}

/*
 * Writes the complete checksum of M's L4 part at M's l2_len + l3_len (the kernel's
 * csum_start) + OFFSET, from the partial sum the field holds (what skb_checksum_help does).
 */
static void fill_checksum(struct rte_mbuf *m, uint32_t start, uint32_t offset, bool udp)
{
	uint16_t sum = 0, *field;

	if (rte_raw_cksum_mbuf(m, start, m->pkt_len - start, &sum) != 0)
		return;
	sum = (uint16_t)~sum;
	if (udp && sum == 0)
		sum = 0xffff;
	field = rte_pktmbuf_mtod_offset(m, uint16_t *, start + offset);
	*field = sum;
}

/*
 * Sets M's offload fields from the kernel's header, or completes the checksum now when the
 * fields cannot say it (a header other than IPv4/IPv6 + TCP/UDP right after Ethernet).
 * Returns false for a super-frame it cannot express (UDP fragmentation, tunnels).
 */
static bool take_vnet(struct rte_mbuf *m, const struct virtio_net_hdr *vh, uint16_t shift)
{
	uint32_t ptype, l4, start = vh->csum_start + shift;
	struct rte_net_hdr_lens hl;
	uint8_t gso = vh->gso_type & (uint8_t)~VIRTIO_NET_HDR_GSO_ECN;

	if (!(vh->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
		return gso == VIRTIO_NET_HDR_GSO_NONE;
	ptype = rte_net_get_ptype(m, &hl, RTE_PTYPE_L2_MASK | RTE_PTYPE_L3_MASK |
				  RTE_PTYPE_L4_MASK);
	l4 = ptype & RTE_PTYPE_L4_MASK;
	if (hl.l2_len + hl.l3_len != start || m->data_len < start + 20u ||
	    !(RTE_ETH_IS_IPV4_HDR(ptype) || RTE_ETH_IS_IPV6_HDR(ptype)) ||
	    !((l4 == RTE_PTYPE_L4_TCP && vh->csum_offset == 16) ||
	      (l4 == RTE_PTYPE_L4_UDP && vh->csum_offset == 6))) {
		if (gso != VIRTIO_NET_HDR_GSO_NONE || start + vh->csum_offset + 2u > m->data_len)
			return false;
		fill_checksum(m, start, vh->csum_offset, false);
		return true;
	}
	m->l2_len = hl.l2_len;
	m->l3_len = hl.l3_len;
	m->l4_len = hl.l4_len;
	m->ol_flags |= RTE_ETH_IS_IPV4_HDR(ptype) ? RTE_MBUF_F_TX_IPV4 : RTE_MBUF_F_TX_IPV6;
	m->ol_flags |= l4 == RTE_PTYPE_L4_TCP ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM;
	if (gso == VIRTIO_NET_HDR_GSO_NONE)
		return true;
	if (!((gso == VIRTIO_NET_HDR_GSO_TCPV4 && RTE_ETH_IS_IPV4_HDR(ptype)) ||
	      (gso == VIRTIO_NET_HDR_GSO_TCPV6 && RTE_ETH_IS_IPV6_HDR(ptype))) ||
	    l4 != RTE_PTYPE_L4_TCP || vh->gso_size == 0)
		return false;
	m->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
	m->tso_segsz = vh->gso_size;
	return true;
}

/* Puts the tag the kernel took out of the frame back in: the switch reads VLANs there. */
static int insert_vlan(struct rte_mbuf **m, uint16_t tci)
{
	(*m)->vlan_tci = tci;
	return rte_vlan_insert(m);
}

uint16_t afp_rx_burst(struct afp *a, struct rte_mbuf **pkts, uint16_t n)
{
	struct afp_ring *r = &a->rx;
	uint16_t got = 0;

	while (got < n) {
		struct tpacket2_hdr *h = (void *)(r->base + (size_t)r->next * AFP_FRAME_SIZE);
		const struct virtio_net_hdr *vh;
		const uint8_t *data;
		struct rte_mbuf *m;
		uint16_t shift = 0;
		uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);

		if (!(status & TP_STATUS_USER))
			break;
		data = (const uint8_t *)h + h->tp_mac;
		vh = (const void *)(data - AFP_VNET_LEN);
		m = NULL;
		if (likely(h->tp_snaplen == h->tp_len))
			m = copy_in(a->pool, data, h->tp_snaplen);
		if (m != NULL && (status & TP_STATUS_VLAN_VALID) &&
		    insert_vlan(&m, h->tp_vlan_tci) == 0)
			shift = RTE_VLAN_HLEN;
		if (m != NULL && (vh->flags != 0 || vh->gso_type != 0) &&
		    !take_vnet(m, vh, shift)) {
			rte_pktmbuf_free(m);
			m = NULL;
		}
		__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		r->next = r->next + 1 == r->frames ? 0 : r->next + 1;
		if (unlikely(m == NULL)) {
			__atomic_store_n(&a->rx_refused, a->rx_refused + 1, __ATOMIC_RELAXED);
			continue;
		}
		pkts[got++] = m;
	}
	return got;
}

/* The kernel's header for M's offload fields (port_afpacket.h). */
static void make_vnet(const struct rte_mbuf *m, struct virtio_net_hdr *vh)
{
	uint64_t l4 = m->ol_flags & RTE_MBUF_F_TX_L4_MASK;

	memset(vh, 0, sizeof(*vh));
	if (l4 == RTE_MBUF_F_TX_TCP_CKSUM || (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG)) {
		vh->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
		vh->csum_start = (uint16_t)(m->l2_len + m->l3_len);
		vh->csum_offset = 16;
	} else if (l4 == RTE_MBUF_F_TX_UDP_CKSUM) {
		vh->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
		vh->csum_start = (uint16_t)(m->l2_len + m->l3_len);
		vh->csum_offset = 6;
	}
	if (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG) {
		vh->gso_type = (m->ol_flags & RTE_MBUF_F_TX_IPV6) ? VIRTIO_NET_HDR_GSO_TCPV6
								   : VIRTIO_NET_HDR_GSO_TCPV4;
		vh->gso_size = m->tso_segsz;
		vh->hdr_len = (uint16_t)(m->l2_len + m->l3_len + m->l4_len);
	}
}

/*
 * The status of the ring's next frame, after giving the kernel a chance to take what is
 * queued when that frame is still waiting for it. The kernel sends a transmit ring's frames
 * only when kicked, and afp_tx_burst kicks only after it has queued something: frames queued
 * while the interface was down (sendto fails with ENETDOWN and leaves them queued) would
 * fill the ring and never be kicked again, and the port would send nothing for good once
 * its link came up. A frame the kernel refused (TP_STATUS_WRONG_FORMAT: it stops there and
 * would stop there forever) is handed back so that the frames behind it go.
 */
static uint32_t next_status(struct afp_txq *t, struct tpacket2_hdr *h)
{
	uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);

	if (likely(status == TP_STATUS_AVAILABLE))
		return status;
	if (status == TP_STATUS_WRONG_FORMAT)
		__atomic_store_n(&h->tp_status, TP_STATUS_AVAILABLE, __ATOMIC_RELEASE);
	if (status == TP_STATUS_WRONG_FORMAT || status == TP_STATUS_SEND_REQUEST)
		(void)sendto(t->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
	return __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
}

uint16_t afp_tx_burst(struct afp *a, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	struct afp_txq *t = &a->txq[q];
	struct afp_ring *r = &t->ring;
	uint16_t i;

	for (i = 0; i < n; i++) {
		struct tpacket2_hdr *h = (void *)(r->base + (size_t)r->next * AFP_FRAME_SIZE);
		uint8_t *at = (uint8_t *)h + AFP_TX_DATA;
		struct rte_mbuf *m = pkts[i], *s;

		/* Only the burst's first frame may kick: once one is queued, the kick below
		 * comes anyway. */
		if (i == 0 ? next_status(t, h) != TP_STATUS_AVAILABLE :
			     __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE)
			break;
		/* Larger than a ring frame (no veth frame is): not taken, so the caller counts
		 * it as a drop. Freeing it here would free it twice (free_bulk below). */
		if (unlikely(AFP_TX_DATA + AFP_VNET_LEN + m->pkt_len > AFP_FRAME_SIZE))
			break;
		make_vnet(m, (struct virtio_net_hdr *)at);
		at += AFP_VNET_LEN;
		for (s = m; s != NULL; s = s->next) {
			rte_memcpy(at, rte_pktmbuf_mtod(s, void *), s->data_len);
			at += s->data_len;
		}
		h->tp_len = AFP_VNET_LEN + m->pkt_len;
		__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
		r->next = r->next + 1 == r->frames ? 0 : r->next + 1;
	}
	if (i > 0) {
		/* One kick per burst. ENOBUFS/EAGAIN: the frames stay queued for the next. */
		(void)sendto(t->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		rte_pktmbuf_free_bulk(pkts, i);
	}
	return i;
}

/* Copies LEN bytes of M from OFF to DST. */
static int copy_out(const struct rte_mbuf *m, uint32_t off, uint32_t len, uint8_t *dst)
{
	const void *at;

	if (len == 0)
		return 0;
	/* rte_pktmbuf_read copies only when the bytes span segments; else it points at them. */
	at = rte_pktmbuf_read(m, off, len, dst);
	if (at == NULL)
		return -1;
	if (at != dst)
		rte_memcpy(dst, at, len);
	return 0;
}

/*
 * One segment of super-frame M: its headers, then LEN payload bytes from OFF (past the
 * headers), with lengths, IPv4 id and checksum, TCP sequence and flags and checksum set.
 */
static struct rte_mbuf *make_segment(const struct rte_mbuf *m, struct rte_mempool *pool,
				     uint32_t off, uint32_t len, uint16_t index, bool last)
{
	uint32_t hlen = m->l2_len + m->l3_len + m->l4_len;
	struct rte_tcp_hdr *tcp;
	struct rte_mbuf *s;
	uint8_t *p;

	if (hlen + len > RTE_MBUF_DEFAULT_DATAROOM)
		return NULL;
	s = rte_pktmbuf_alloc(pool);
	if (s == NULL)
		return NULL;
	p = (uint8_t *)rte_pktmbuf_append(s, (uint16_t)(hlen + len));
	if (p == NULL || copy_out(m, 0, hlen, p) != 0 ||
	    copy_out(m, hlen + off, len, p + hlen) != 0) {
		rte_pktmbuf_free(s);
		return NULL;
	}
	tcp = (struct rte_tcp_hdr *)(p + m->l2_len + m->l3_len);
	tcp->sent_seq = rte_cpu_to_be_32(rte_be_to_cpu_32(tcp->sent_seq) + off);
	if (!last)
		tcp->tcp_flags &= (uint8_t)~(RTE_TCP_FIN_FLAG | RTE_TCP_PSH_FLAG);
	if (index > 0)
		tcp->tcp_flags &= (uint8_t)~RTE_TCP_CWR_FLAG;
	tcp->cksum = 0;
	if (m->ol_flags & RTE_MBUF_F_TX_IPV4) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(p + m->l2_len);

		ip->total_length = rte_cpu_to_be_16((uint16_t)(m->l3_len + m->l4_len + len));
		ip->packet_id = rte_cpu_to_be_16((uint16_t)(rte_be_to_cpu_16(ip->packet_id) +
							    index));
		ip->hdr_checksum = 0;
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
	} else {
		struct rte_ipv6_hdr *ip = (struct rte_ipv6_hdr *)(p + m->l2_len);

		ip->payload_len = rte_cpu_to_be_16((uint16_t)(m->l3_len - sizeof(*ip) +
							     m->l4_len + len));
		tcp->cksum = rte_ipv6_udptcp_cksum(ip, tcp);
	}
	return s;
}

uint16_t afp_complete_offloads(struct rte_mbuf **pkts, uint16_t n, struct rte_mbuf **out,
			       uint16_t out_max, struct rte_mempool *pool, uint16_t *failed)
{
	uint16_t i, k = 0;

	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint64_t l4 = m->ol_flags & RTE_MBUF_F_TX_L4_MASK;
		uint32_t hlen, payload, off, idx;

		if (!(m->ol_flags & RTE_MBUF_F_TX_TCP_SEG)) {
			/* In place: the same bytes are right for every output, so a flood copy
			 * shared with an output that took the offload has already been sent. */
			if (l4 == RTE_MBUF_F_TX_TCP_CKSUM || l4 == RTE_MBUF_F_TX_UDP_CKSUM)
				fill_checksum(m, m->l2_len + m->l3_len,
					      l4 == RTE_MBUF_F_TX_TCP_CKSUM ? 16 : 6,
					      l4 == RTE_MBUF_F_TX_UDP_CKSUM);
			m->ol_flags &= ~AFP_OFFLOAD_FLAGS;
			if (k < out_max)
				out[k++] = m;
			else {
				rte_pktmbuf_free(m);
				(*failed)++;
			}
			continue;
		}
		hlen = m->l2_len + m->l3_len + m->l4_len;
		payload = m->pkt_len > hlen ? m->pkt_len - hlen : 0;
		for (off = 0, idx = 0; off < payload || (payload == 0 && idx == 0);
		     off += m->tso_segsz, idx++) {
			uint32_t len = RTE_MIN((uint32_t)m->tso_segsz, payload - off);
			struct rte_mbuf *s = k < out_max ?
				make_segment(m, pool, off, len, (uint16_t)idx,
					     off + len >= payload) : NULL;

			if (s == NULL) {
				(*failed)++;
				break;
			}
			out[k++] = s;
		}
		rte_pktmbuf_free(m);
	}
	return k;
}
