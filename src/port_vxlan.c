/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vxlan ports (port_vxlan.h): encapsulation into the headroom every mbuf has, decapsulation
 * by moving the data offset, the remote's MAC from ARP or from the frames it sends.
 */
#include "port_vxlan.h"

#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_memcpy.h>
#include <rte_udp.h>
#include <rte_vxlan.h>

#include "log.h"
#include "pool.h"
#include "port.h"
#include "worker.h"

#define VXL_MAX_TUNNELS 64           /* tunnels over one underlay (a linear scan) */
#define VXL_MAC_VALID (UINT64_C(1) << 63)
#define VXL_TTL 64
/* Source ports from the inner flow's hash, in the dynamic range RFC 7348 suggests. */
#define VXL_SPORT_BASE 49152
#define VXL_SPORT_MASK 0x3fff
#define VXL_FLAG_I 0x08000000        /* "the VNI is valid", the one flag VXLAN defines */
#define VXL_ARP_FRAME 60             /* an ARP request padded to the shortest frame */

struct vxl_hdr {
	struct rte_ether_hdr eth;
	struct rte_ipv4_hdr ip;
	struct rte_udp_hdr udp;
	struct rte_vxlan_hdr vx;
} __rte_packed __rte_aligned(2);

struct vxl_tunnel {
	/* read by workers */
	struct port *port;                /* the vxlan port */
	struct port *underlay;
	uint32_t local_ip, remote_ip;     /* network byte order */
	uint32_t vni_word;                /* the VXLAN header's second word, network order */
	uint16_t dst_port;                /* network byte order */
	bool vni_flow;
	bool static_mac;
	/* The next hop's MAC and VXL_MAC_VALID, one atomic word: ARP and received frames
	 * write it (any worker), every encapsulation reads it. */
	uint64_t remote_mac;
	struct vxl_hdr tmpl;              /* the outer headers but the per-frame fields */
	uint32_t ip_sum;                  /* tmpl.ip's words summed, length and checksum 0 */
	struct rte_mempool *pool;         /* copies of shared frames, ARP requests */
	uint64_t next_solicit[WK_MAX_WORKERS];   /* TSC; each worker writes its own */

	/* control thread */
	unsigned int pool_need;
	struct vxl_demux *next;           /* the underlay's next list, made by vxl_prepare */
};

/* The tunnels over one underlay, published whole (port.h: tunnels). */
struct vxl_demux {
	unsigned int n;
	struct vxl_tunnel *t[];
};

int vxl_tun_id_offset;
uint64_t vxl_tun_id_flag;

int vxl_init(void)
{
	static const struct rte_mbuf_dynfield field = {
		.name = "sluice_tun_id", .size = sizeof(uint32_t), .align = sizeof(uint32_t) };
	static const struct rte_mbuf_dynflag flag = { .name = "sluice_tun_id_set" };
	int off = rte_mbuf_dynfield_register(&field), bit = rte_mbuf_dynflag_register(&flag);

	if (off < 0 || bit < 0) {
		LOG(ERR, "no mbuf field for tunnel ids: vni=flow ports are refused");
		return -1;
	}
	vxl_tun_id_offset = off;
	vxl_tun_id_flag = UINT64_C(1) << bit;
	return 0;
}

static uint64_t mac_word(const struct rte_ether_addr *a)
{
	uint64_t w = 0;

	memcpy(&w, a->addr_bytes, RTE_ETHER_ADDR_LEN);
	return w | VXL_MAC_VALID;
}

static void learn_mac(struct vxl_tunnel *t, const struct rte_ether_addr *a)
{
	uint64_t w = mac_word(a);

	/* Read first: the common case (already known) writes nothing to a shared line. */
	if (!t->static_mac && __atomic_load_n(&t->remote_mac, __ATOMIC_RELAXED) != w)
		__atomic_store_n(&t->remote_mac, w, __ATOMIC_RELAXED);
}

static struct vxl_demux *demux_of(const struct port *ul)
{
	return __atomic_load_n(&ul->tunnels, __ATOMIC_ACQUIRE);
}

/* ---- control side ---- */

static void build_template(struct vxl_tunnel *t, const struct rte_ether_addr *ul_mac)
{
	struct vxl_hdr *h = &t->tmpl;

	memset(h, 0, sizeof(*h));
	h->eth.src_addr = *ul_mac;
	h->eth.ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	h->ip.version_ihl = RTE_IPV4_VHL_DEF;
	/* Don't fragment: the port's MTU keeps frames within the underlay's (RFC 7348 4.3). */
	h->ip.fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	h->ip.time_to_live = VXL_TTL;
	h->ip.next_proto_id = IPPROTO_UDP;
	h->ip.src_addr = t->local_ip;
	h->ip.dst_addr = t->remote_ip;
	h->udp.dst_port = t->dst_port;
	/* UDP checksum 0: allowed over IPv4 (RFC 7348 5), what Linux sends by default. */
	h->vx.vx_flags = rte_cpu_to_be_32(VXL_FLAG_I);
	h->vx.vx_vni = t->vni_word;
	t->ip_sum = __rte_raw_cksum(&h->ip, sizeof(h->ip), 0);
}

/* Whether A and B would claim the same frames. */
static bool same_tunnel(const struct vxl_tunnel *a, const struct vxl_tunnel *b)
{
	return a->local_ip == b->local_ip && a->remote_ip == b->remote_ip &&
	       a->dst_port == b->dst_port &&
	       (a->vni_flow || b->vni_flow || a->vni_word == b->vni_word);
}

static int check_underlay(const struct port *p, const struct port *ul,
			  const struct vxl_tunnel *t, char *err, size_t err_len)
{
	const struct vxl_demux *d = demux_of(ul);
	unsigned int i;

	if (ul->vxl != NULL) {
		snprintf(err, err_len, "vxlan: 'underlay': '%s' is a vxlan port itself", ul->name);
		return -1;
	}
	if (d != NULL && d->n >= VXL_MAX_TUNNELS) {
		snprintf(err, err_len, "vxlan: '%s' carries %d tunnels, the most one underlay "
			 "takes", ul->name, VXL_MAX_TUNNELS);
		return -1;
	}
	for (i = 0; d != NULL && i < d->n; i++)
		if (same_tunnel(d->t[i], t)) {
			snprintf(err, err_len, "vxlan: port '%s' over '%s' already has these addresses "
				 "and VNI", d->t[i]->port->name, ul->name);
			return -1;
		}
	if (p->ps.mtu + VXL_HDR_LEN > ul->mtu) {
		snprintf(err, err_len, "vxlan: 'mtu' %u: the underlay's MTU %u leaves %u for the "
			 "inner frames", p->ps.mtu, ul->mtu, ul->mtu - VXL_HDR_LEN);
		return -1;
	}
	return 0;
}

static void fill_tunnel(struct vxl_tunnel *t, struct port *p, struct port *ul)
{
	const struct portspec_vxlan *vx = &p->ps.vxlan;
	struct rte_ether_addr mac;

	t->port = p;
	t->underlay = ul;
	t->local_ip = vx->local_ip;
	t->remote_ip = vx->remote_ip;
	t->vni_word = rte_cpu_to_be_32(vx->vni << 8);
	t->vni_flow = vx->vni_flow;
	t->dst_port = rte_cpu_to_be_16(vx->dst_port);
	t->static_mac = vx->has_remote_mac;
	if (vx->has_remote_mac) {
		memcpy(mac.addr_bytes, vx->remote_mac, RTE_ETHER_ADDR_LEN);
		t->remote_mac = mac_word(&mac);
	}
	build_template(t, &ul->mac);
}

int vxl_prepare(struct port *p, char *err, size_t err_len)
{
	struct port *ul = port_find(p->ps.vxlan.underlay);
	const struct vxl_demux *d;
	struct vxl_tunnel *t;
	unsigned int mtu;

	if (ul == NULL) {
		snprintf(err, err_len, "vxlan: 'underlay': no port named '%s' (add the underlay "
			 "port first)", p->ps.vxlan.underlay);
		return -1;
	}
	if (p->ps.vxlan.vni_flow && vxl_tun_id_flag == 0) {
		snprintf(err, err_len, "vxlan: 'vni=flow': no mbuf field for tunnel ids (the "
			 "daemon's log says why)");
		return -1;
	}
	t = rte_zmalloc("vxlan", sizeof(*t), RTE_CACHE_LINE_SIZE);
	if (t == NULL) {
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	fill_tunnel(t, p, ul);
	if (check_underlay(p, ul, t, err, err_len) != 0)
		goto fail;
	d = demux_of(ul);
	t->next = rte_zmalloc("vxlan_demux", sizeof(*t->next) + sizeof(t->next->t[0]) *
			      ((d != NULL ? d->n : 0) + 1), 0);
	/* Room for a burst of copies of flooded frames and an ARP request. */
	t->pool_need = FWD_MAX_BURST + 1;
	t->pool = pool_reserve(SOCKET_ID_ANY, t->pool_need);
	if (t->next == NULL || t->pool == NULL) {
		snprintf(err, err_len, "no memory for the tunnel (hugepages exhausted?)");
		goto fail;
	}
	mtu = p->ps.mtu != 0 ? p->ps.mtu : ul->mtu - VXL_HDR_LEN;
	p->vxl = t;
	p->ethdev = PORT_NO_ETHDEV;
	p->tx_offloads = false;     /* the worker completes checksums and cuts super-frames */
	p->mac = ul->mac;
	p->mtu = mtu;
	/* Always enforced: the underlay cannot carry a longer frame with 50 bytes on top. */
	__atomic_store_n(&p->max_frame, mtu + RTE_ETHER_HDR_LEN, __ATOMIC_RELAXED);
	return 0;
fail:
	if (t->pool != NULL)
		pool_release(t->pool, t->pool_need);
	rte_free(t->next);
	rte_free(t);
	return -1;
}

int vxl_attach(struct port *p)
{
	struct vxl_tunnel *t = p->vxl;
	struct vxl_demux *old = demux_of(t->underlay), *d = t->next;
	unsigned int i;

	t->next = NULL;
	d->n = 0;
	for (i = 0; old != NULL && i < old->n; i++)
		d->t[d->n++] = old->t[i];
	d->t[d->n++] = t;
	__atomic_store_n(&t->underlay->tunnels, d, __ATOMIC_RELEASE);
	if (old != NULL)
		wk_defer(rte_free, old);
	LOG(INFO, "port %s: tunnel over %s, VNI %u", p->name, t->underlay->name,
	    p->ps.vxlan.vni);
	return 0;
}

int vxl_detach(struct port *p)
{
	struct vxl_tunnel *t = p->vxl;
	struct vxl_demux *old = demux_of(t->underlay), *d = NULL;
	unsigned int i;

	if (old == NULL)
		return 0;
	if (old->n > 1) {
		d = rte_zmalloc("vxlan_demux", sizeof(*d) + sizeof(d->t[0]) * (old->n - 1), 0);
		if (d == NULL)
			return -1;
		for (i = 0; i < old->n; i++)
			if (old->t[i] != t)
				d->t[d->n++] = old->t[i];
	}
	__atomic_store_n(&t->underlay->tunnels, d, __ATOMIC_RELEASE);
	/* After a grace period no worker decapsulates into P or reads the old list. */
	if (!wk_synchronize())
		return 1;
	rte_free(old);
	return 0;
}

void vxl_close(struct port *p)
{
	struct vxl_tunnel *t = p->vxl;

	if (t == NULL)
		return;
	pool_release(t->pool, t->pool_need);
	rte_free(t->next);
	rte_free(t);
	p->vxl = NULL;
}

bool vxl_is_underlay(const struct port *p)
{
	return demux_of(p) != NULL;
}

bool vxl_link_up(const struct port *p)
{
	const struct vxl_tunnel *t = p->vxl;

	return port_link_is_up(t->underlay) &&
	       (__atomic_load_n(&t->remote_mac, __ATOMIC_RELAXED) & VXL_MAC_VALID) != 0;
}

json_t *vxl_describe(const struct port *p)
{
	const struct vxl_tunnel *t = p->vxl;
	uint64_t w = __atomic_load_n(&t->remote_mac, __ATOMIC_RELAXED);
	char mac[RTE_ETHER_ADDR_FMT_SIZE] = "";
	struct rte_ether_addr a;

	if (w & VXL_MAC_VALID) {
		memcpy(a.addr_bytes, &w, RTE_ETHER_ADDR_LEN);
		rte_ether_format_addr(mac, sizeof(mac), &a);
	}
	return json_pack("{ss so ss* ss}", "underlay", t->underlay->name,
			 "vni", t->vni_flow ? json_string("flow") : json_integer(p->ps.vxlan.vni),
			 "remote_mac", mac[0] ? mac : NULL,
			 "remote_mac_from", t->static_mac ? "spec" : "learned");
}

/* ---- transmit ---- */

/*
 * The outer UDP source port: a hash of the inner flow (addresses, and ports for TCP and
 * UDP over IPv4), so that the underlay's receivers spread flows as RSS would and one flow
 * keeps one path. A device's RSS hash is used where one came with the frame.
 */
static inline uint16_t flow_sport(const struct rte_mbuf *m)
{
	const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ether_hdr *eh = (const struct rte_ether_hdr *)d;
	uint32_t h;

	if (m->ol_flags & RTE_MBUF_F_RX_RSS_HASH) {
		h = m->hash.rss;
	} else if (eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) &&
		   m->data_len >= RTE_ETHER_HDR_LEN + sizeof(struct rte_ipv4_hdr) + 4) {
		const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eh + 1);
		unsigned int ihl = (ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4u;

		h = rte_hash_crc_8byte(((uint64_t)ip->src_addr << 32) | ip->dst_addr,
				       ip->next_proto_id);
		if ((ip->next_proto_id == IPPROTO_TCP || ip->next_proto_id == IPPROTO_UDP) &&
		    (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_OFFSET_MASK)) == 0 &&
		    m->data_len >= RTE_ETHER_HDR_LEN + ihl + 4) {
			uint32_t ports;

			memcpy(&ports, (const uint8_t *)ip + ihl, sizeof(ports));
			h = rte_hash_crc_4byte(ports, h);
		}
	} else {
		h = rte_hash_crc(d, 2 * RTE_ETHER_ADDR_LEN, 0);
	}
	return (uint16_t)(VXL_SPORT_BASE | ((h ^ (h >> 16)) & VXL_SPORT_MASK));
}

/* The IPv4 checksum from the template's sum and the one field that varies (the length). */
static inline uint16_t ip_checksum(uint32_t sum, uint16_t total_length_be)
{
	sum += total_length_be;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * Asks for the remote's MAC (ARP) on the underlay, at most once a second per worker. The
 * frames that wait for it are not queued: the tunnel's link is down until it is known, and
 * the worker counts them as link_down.
 */
static void solicit(struct vxl_tunnel *t, uint16_t q)
{
	uint64_t now = rte_rdtsc();
	struct rte_ether_hdr *eh;
	struct rte_arp_hdr *arp;
	struct rte_mbuf *m;
	char *d;

	if (now < t->next_solicit[q])
		return;
	t->next_solicit[q] = now + rte_get_tsc_hz();
	m = rte_pktmbuf_alloc(t->pool);
	if (m == NULL || (d = rte_pktmbuf_append(m, VXL_ARP_FRAME)) == NULL) {
		rte_pktmbuf_free(m);
		return;
	}
	memset(d, 0, VXL_ARP_FRAME);
	eh = (struct rte_ether_hdr *)d;
	memset(&eh->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
	eh->src_addr = t->tmpl.eth.src_addr;
	eh->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp = (struct rte_arp_hdr *)(eh + 1);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	arp->arp_data.arp_sha = t->tmpl.eth.src_addr;
	arp->arp_data.arp_sip = t->local_ip;
	arp->arp_data.arp_tip = t->remote_ip;
	if (port_tx_burst(t->underlay, q, &m, 1) == 1) {
		stats_add(&t->underlay->counters[q].tx_packets, 1);
		stats_add(&t->underlay->counters[q].tx_bytes, VXL_ARP_FRAME);
	} else {
		rte_pktmbuf_free(m);
	}
}

/* A frame another output also holds (a flood), or without room in front, is copied. */
static inline bool needs_copy(const struct rte_mbuf *m)
{
	return rte_mbuf_refcnt_read(m) > 1 || !RTE_MBUF_DIRECT(m) ||
	       rte_pktmbuf_headroom(m) < VXL_HDR_LEN;
}

uint16_t vxl_tx_burst(struct vxl_tunnel *t, uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	uint64_t mac = __atomic_load_n(&t->remote_mac, __ATOMIC_RELAXED);
	struct port_counters *uc = &t->underlay->counters[q];
	uint64_t bytes = 0;
	struct vxl_hdr h;
	uint16_t i, j, sent;

	if (unlikely(!(mac & VXL_MAC_VALID))) {
		solicit(t, q);
		return 0;
	}
	h = t->tmpl;    /* once per burst: the next hop's MAC */
	memcpy(&h.eth.dst_addr, &mac, RTE_ETHER_ADDR_LEN);
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct vxl_hdr *o;
		uint16_t ip_len;

		if (unlikely(needs_copy(m))) {
			struct rte_mbuf *c = rte_pktmbuf_copy(m, t->pool, 0, UINT32_MAX);

			if (c == NULL)
				break;          /* the rest goes back unsent */
			rte_pktmbuf_free(m);
			pkts[i] = m = c;
		}
		ip_len = (uint16_t)(m->pkt_len + sizeof(h) - sizeof(h.eth));
		h.udp.src_port = rte_cpu_to_be_16(flow_sport(m));
		o = (struct vxl_hdr *)rte_pktmbuf_prepend(m, sizeof(h));
		rte_memcpy(o, &h, sizeof(h));
		o->ip.total_length = rte_cpu_to_be_16(ip_len);
		o->ip.hdr_checksum = ip_checksum(t->ip_sum, o->ip.total_length);
		o->udp.dgram_len = rte_cpu_to_be_16((uint16_t)(ip_len - sizeof(h.ip)));
		if (t->vni_flow)        /* set_field:ID->tun_id, or the VNI it came with */
			o->vx.vx_vni = rte_cpu_to_be_32((uint32_t)(vxl_tun_id(m) << 8));
		/* The outer frame carries no tunnel id of its own (a ring underlay would hand
		 * the mbuf back with it). */
		m->ol_flags &= ~(AFP_OFFLOAD_FLAGS | vxl_tun_id_flag);
	}
	sent = port_tx_burst(t->underlay, q, pkts, i);
	for (j = 0; j < sent; j++)
		bytes += pkts[j]->pkt_len;
	/* The underlay's own counters show the outer frames it sent. */
	stats_add(&uc->tx_packets, sent);
	stats_add(&uc->tx_bytes, bytes);
	for (j = sent; j < i; j++)      /* given back as they came, for the worker's counts */
		rte_pktmbuf_adj(pkts[j], sizeof(h));
	return sent;
}

/* ---- receive ---- */

enum vxl_verdict { VXL_PASS, VXL_TUNNEL, VXL_ANSWER, VXL_CONSUMED, VXL_NO_TUNNEL,
		   VXL_MALFORMED };

/* ARP on the underlay: a request for a local_ip is answered in place, and the remote's MAC
 * is learned from anything it says to one of our addresses. Other ARP passes. */
static enum vxl_verdict split_arp(const struct vxl_demux *d, struct rte_mbuf *m)
{
	struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eh + 1);
	struct rte_arp_ipv4 *a = &arp->arp_data;
	const struct vxl_tunnel *mine = NULL;
	unsigned int i;

	if (m->data_len < sizeof(*eh) + sizeof(*arp) ||
	    arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4)
		return VXL_PASS;
	for (i = 0; i < d->n; i++) {
		if (d->t[i]->local_ip != a->arp_tip)
			continue;
		mine = d->t[i];
		if (d->t[i]->remote_ip == a->arp_sip)
			learn_mac(d->t[i], &a->arp_sha);
	}
	if (mine == NULL)
		return VXL_PASS;
	if (arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST))
		return arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY) ? VXL_CONSUMED
									    : VXL_PASS;
	eh->dst_addr = a->arp_sha;
	eh->src_addr = mine->tmpl.eth.src_addr;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	a->arp_tha = a->arp_sha;
	a->arp_tip = a->arp_sip;
	a->arp_sha = mine->tmpl.eth.src_addr;
	a->arp_sip = mine->local_ip;
	return VXL_ANSWER;
}

/* Whether M is VXLAN for one of D's tunnels (*T), for our address but no tunnel, or not
 * ours at all. Decapsulates a tunnel's frame. */
static enum vxl_verdict split_one(const struct vxl_demux *d, struct rte_mbuf *m,
				  struct vxl_tunnel **tp)
{
	struct rte_ether_hdr *eh = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eh + 1);
	const struct rte_udp_hdr *udp;
	const struct rte_vxlan_hdr *vx;
	unsigned int ihl, i, hlen;
	bool ours = false;

	if (m->data_len < sizeof(*eh))
		return VXL_PASS;
	if (eh->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
		return split_arp(d, m);
	if (eh->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    m->data_len < sizeof(struct vxl_hdr) || (ip->version_ihl >> 4) != 4 ||
	    ip->next_proto_id != IPPROTO_UDP ||
	    (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG |
						    RTE_IPV4_HDR_OFFSET_MASK)) != 0)
		return VXL_PASS;
	ihl = (ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4u;
	hlen = sizeof(*eh) + ihl + sizeof(*udp) + sizeof(*vx);
	if (ihl < sizeof(*ip) || m->data_len < hlen)
		return VXL_PASS;
	udp = (const struct rte_udp_hdr *)((const uint8_t *)ip + ihl);
	vx = (const struct rte_vxlan_hdr *)(udp + 1);
	for (i = 0; i < d->n; i++) {
		struct vxl_tunnel *t = d->t[i];

		if (t->local_ip != ip->dst_addr || t->dst_port != udp->dst_port)
			continue;
		ours = true;
		if (t->remote_ip != ip->src_addr ||
		    (!t->vni_flow && t->vni_word != (vx->vx_vni & rte_cpu_to_be_32(0xffffff00))))
			continue;
		if (!(vx->vx_flags & rte_cpu_to_be_32(VXL_FLAG_I)) ||
		    m->pkt_len < hlen + RTE_ETHER_HDR_LEN)
			return VXL_MALFORMED;
		/* The next hop's MAC is the one its frames come from (a router's, or the
		 * remote's own): kept current without ARP. */
		learn_mac(t, &eh->src_addr);
		rte_pktmbuf_adj(m, (uint16_t)hlen);
		/* Offload state (an af_packet underlay's) was about the outer headers. */
		m->ol_flags &= ~(AFP_OFFLOAD_FLAGS | vxl_tun_id_flag);
		if (t->vni_flow)
			vxl_set_tun_id(m, rte_be_to_cpu_32(vx->vx_vni) >> 8);
		*tp = t;
		return VXL_TUNNEL;
	}
	return ours ? VXL_NO_TUNNEL : VXL_PASS;
}

/* Counts on underlay UL what the split took; sends the ARP answers. */
static void count_split(struct port *ul, uint16_t w, struct vxl_split *out, uint16_t taken,
			uint64_t bytes, uint16_t forwarded, uint16_t no_tunnel, uint16_t malformed,
			uint16_t n_answers, uint16_t n_free)
{
	struct port_counters *c = &ul->counters[w];
	uint16_t sent = 0, j;
	uint64_t tx_bytes = 0;

	if (n_answers > 0) {
		sent = port_tx_burst(ul, w, out->answers, n_answers);
		for (j = 0; j < sent; j++)
			tx_bytes += out->answers[j]->pkt_len;
		stats_add(&c->tx_packets, sent);
		stats_add(&c->tx_bytes, tx_bytes);
		if (sent < n_answers) {
			rte_pktmbuf_free_bulk(&out->answers[sent], n_answers - sent);
			stats_add(&c->drops[port_link_is_up(ul) ? STATS_DROP_TX_FULL
							       : STATS_DROP_LINK_DOWN],
				  (uint64_t)(n_answers - sent));
		}
	}
	stats_add(&c->rx_packets, taken);
	stats_add(&c->rx_bytes, bytes);
	stats_add(&c->forwarded, (uint64_t)forwarded + sent);
	if (no_tunnel > 0)
		stats_add(&c->drops[STATS_DROP_VXLAN_NO_TUNNEL], no_tunnel);
	if (malformed > 0)
		stats_add(&c->drops[STATS_DROP_MALFORMED], malformed);
	if (n_free > 0)
		rte_pktmbuf_free_bulk(out->scratch, n_free);
}

uint16_t vxl_rx_split(struct port *ul, uint16_t w, struct rte_mbuf **pkts, uint16_t n,
		      struct vxl_split *out)
{
	const struct vxl_demux *d = demux_of(ul);
	uint16_t i, keep = 0, n_free = 0, n_answers = 0, forwarded = 0, no_tunnel = 0;
	uint16_t malformed = 0;
	uint64_t bytes = 0;

	out->n = 0;
	if (d == NULL)
		return n;
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t len = m->pkt_len;
		struct vxl_tunnel *t = NULL;

		switch (split_one(d, m, &t)) {
		case VXL_PASS:
			pkts[keep++] = m;
			continue;
		case VXL_TUNNEL:
			out->pkts[out->n] = m;
			out->port[out->n++] = t->port;
			forwarded++;
			break;
		case VXL_ANSWER:
			out->answers[n_answers++] = m;
			break;
		case VXL_CONSUMED:
			out->scratch[n_free++] = m;
			forwarded++;
			break;
		case VXL_NO_TUNNEL:
			out->scratch[n_free++] = m;
			no_tunnel++;
			break;
		case VXL_MALFORMED:
			out->scratch[n_free++] = m;
			malformed++;
			break;
		}
		bytes += len;
	}
	if (keep < n)
		count_split(ul, w, out, (uint16_t)(n - keep), bytes, forwarded, no_tunnel,
			    malformed, n_answers, n_free);
	return keep;
}
