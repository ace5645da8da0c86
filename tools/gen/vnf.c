/* SPDX-License-Identifier: BSD-3-Clause */
/* Inline l2fwd and l3fwd VNFs for sluice-gen's loop; see vnf.h for what they do and why. */
#include <stdio.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include "vnf.h"

const char *const vnf_l3_reasons[VNF_L3_REASONS] = {
	[VNF_L3_NOT_IPV4] = "not_ipv4", [VNF_L3_TRUNCATED] = "truncated",
	[VNF_L3_BAD_VERSION] = "bad_version", [VNF_L3_BAD_IHL] = "bad_ihl",
	[VNF_L3_BAD_TOTAL_LENGTH] = "bad_total_length", [VNF_L3_BAD_CHECKSUM] = "bad_checksum",
	[VNF_L3_TTL_EXPIRED] = "ttl_expired",
};

int vnf_parse_kind(const char *s, enum vnf_kind *kind)
{
	if (strcmp(s, "l2") == 0)
		*kind = VNF_L2;
	else if (strcmp(s, "l3") == 0)
		*kind = VNF_L3;
	else
		return -1;
	return 0;
}

const char *vnf_kind_name(enum vnf_kind kind)
{
	return kind == VNF_L3 ? "l3" : "l2";
}

/*
 * RFC 1812 5.2.2, as l3fwd checks it (is_valid_ipv4_pkt, and rfc1812_process on its vector
 * path): the link length holds a minimal header, version 4, a header length of 5 words or
 * more, a total length that holds the header. The checksum, which l3fwd leaves to the NIC
 * ("checked in H/W"), is verified here, since a virtio port has no such hardware; and a frame
 * shorter than its header or its total length is refused as RFC 1812 asks.
 */
static enum vnf_l3_verdict check_ipv4(const struct rte_ipv4_hdr *ip, uint32_t ip_len)
{
	uint32_t ihl = (uint32_t)(ip->version_ihl & 0xf) * 4;
	uint32_t total = rte_be_to_cpu_16(ip->total_length);

	if (ip_len < sizeof(*ip))
		return VNF_L3_TRUNCATED;
	if (ip->version_ihl >> 4 != 4)
		return VNF_L3_BAD_VERSION;
	if (ihl < sizeof(*ip))
		return VNF_L3_BAD_IHL;
	if (total < ihl)
		return VNF_L3_BAD_TOTAL_LENGTH;
	if (ihl > ip_len || total > ip_len)
		return VNF_L3_TRUNCATED;
	/* A header with a right checksum sums to 0xffff in one's complement. */
	if (rte_raw_cksum(ip, ihl) != 0xffff)
		return VNF_L3_BAD_CHECKSUM;
	return ip->time_to_live <= 1 ? VNF_L3_TTL_EXPIRED : VNF_L3_OK;
}

/*
 * TTL minus one, checksum updated by RFC 1624's equation 3, HC' = ~(~HC + ~m + m'), where
 * the 16-bit word m holding the TTL drops by 0x0100: ~m + m' = 0xfeff. This equals a fresh
 * computation; l3fwd's ++hdr_checksum gives the same except where the result is 0x0000, for
 * which it writes 0xffff (RFC 1624, section 3).
 */
static void decrement_ttl(struct rte_ipv4_hdr *ip)
{
	uint32_t sum = (uint16_t)~rte_be_to_cpu_16(ip->hdr_checksum) + 0xfeffu;

	sum = (sum & 0xffff) + (sum >> 16);
	ip->time_to_live--;
	ip->hdr_checksum = rte_cpu_to_be_16((uint16_t)~sum);
}

enum vnf_l3_verdict vnf_l3_route(uint8_t *frame, uint32_t len)
{
	const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(frame + sizeof(*eth));
	enum vnf_l3_verdict v;

	if (len < sizeof(*eth) || eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return VNF_L3_NOT_IPV4;
	v = check_ipv4(ip, len - (uint32_t)sizeof(*eth));
	if (v == VNF_L3_OK)
		decrement_ttl(ip);
	return v;
}

int vnf_parse_mac(const char *s, size_t n, uint8_t mac[6])
{
	unsigned int b[6], i;
	char text[18], tail;

	if (n != 17)
		return -1;
	memcpy(text, s, n);
	text[n] = '\0';
	if (sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
		   &tail) != 6)
		return -1;
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

int vnf_parse_dst(const char *s, struct vnf_dst *d, char *err, size_t len)
{
	const char *comma = strchr(s, ',');
	size_t first = comma != NULL ? (size_t)(comma - s) : strlen(s);

	memset(d, 0, sizeof(*d));
	if (strcmp(s, "l2fwd") == 0)
		return 0;
	/* The chain's direction first: frames leaving the out port go to the next hop. */
	if (vnf_parse_mac(s, first, d->mac[VNF_OUT]) != 0 ||
	    (comma != NULL && vnf_parse_mac(comma + 1, strlen(comma + 1), d->mac[VNF_IN]) != 0)) {
		snprintf(err, len, "'%s': give l2fwd, a MAC like 02:00:00:00:01:00, or two "
			 "(after out, after in) separated by a comma", s);
		return -1;
	}
	d->set[VNF_OUT] = true;
	d->set[VNF_IN] = comma != NULL;
	return 0;
}

void vnf_l2fwd_dst(unsigned int port_id, uint8_t mac[6])
{
	/* l2fwd writes 0x000000000002 + (port << 40) as a little-endian word: 02:00:00:00:00:P */
	static const uint8_t base[6] = { 0x02, 0, 0, 0, 0, 0 };

	memcpy(mac, base, sizeof(base));
	mac[5] = (uint8_t)port_id;
}

static int setup_buffer(struct vnf *v, enum vnf_side side)
{
	struct rte_eth_dev_tx_buffer *b;

	b = rte_zmalloc_socket("vnf_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(VNF_BURST), 0,
			       rte_eth_dev_socket_id(v->port[side]));
	if (b == NULL || rte_eth_tx_buffer_init(b, VNF_BURST) != 0)
		return -1;
	/* What the port does not take is freed and counted, as l2fwd counts it. */
	if (rte_eth_tx_buffer_set_err_callback(b, rte_eth_tx_buffer_count_callback,
					       &v->dropped[side]) != 0)
		return -1;
	v->buf[side] = b;
	return 0;
}

int vnf_setup(struct vnf_set *s, unsigned int i, uint16_t in, uint16_t out,
	      const struct vnf_dst *dst, enum vnf_kind kind)
{
	struct vnf *v = &s->v[i];
	struct rte_ether_addr own;
	unsigned int side;

	v->kind = kind;
	v->port[VNF_IN] = in;
	v->port[VNF_OUT] = out;
	for (side = VNF_IN; side <= VNF_OUT; side++) {
		if (rte_eth_macaddr_get(v->port[side], &own) != 0 ||
		    setup_buffer(v, (enum vnf_side)side) != 0) {
			fprintf(stderr, "sluice-gen: VNF %u: cannot set up port %u\n", i,
				v->port[side]);
			return -1;
		}
		if (dst != NULL && dst->set[side])
			memcpy(v->addrs[side], dst->mac[side], 6);
		else
			vnf_l2fwd_dst(side, v->addrs[side]);
		memcpy(v->addrs[side] + 6, own.addr_bytes, 6);
	}
	if (i >= s->n)
		s->n = i + 1;
	/* l2fwd's drain period, rounded up to whole microseconds' worth of TSC ticks. */
	s->drain_tsc = (rte_get_tsc_hz() + US_PER_S - 1) / US_PER_S * VNF_DRAIN_US;
	return 0;
}

/* Frame M rewritten for side TO and put in its transmit buffer. */
static void vnf_send(struct vnf *v, enum vnf_side to, struct rte_mbuf *m)
{
	vnf_rewrite(rte_pktmbuf_mtod(m, uint8_t *), v->addrs[to]);
	/* Sends a full buffer at once; a partial one waits for the drain timer. */
	v->tx[to] += rte_eth_tx_buffer(v->port[to], 0, v->buf[to], m);
}

/*
 * The L3 work on a burst received on FROM: frames that pass leave by side TO, the others
 * are counted by reason and freed together. Single-segment frames, as the ports here give
 * (a frame whose first segment lacks its header is judged on that segment: truncated).
 */
static void vnf_route_burst(struct vnf *v, enum vnf_side from, struct rte_mbuf **m,
			    uint16_t n)
{
	const enum vnf_side to = from == VNF_IN ? VNF_OUT : VNF_IN;
	struct rte_mbuf *gone[VNF_BURST];
	unsigned int n_gone = 0;
	uint16_t i;

	for (i = 0; i < n; i++) {
		enum vnf_l3_verdict verdict = vnf_l3_route(rte_pktmbuf_mtod(m[i], uint8_t *),
							   rte_pktmbuf_data_len(m[i]));

		if (verdict == VNF_L3_OK) {
			vnf_send(v, to, m[i]);
		} else {
			v->discarded[from][verdict]++;
			gone[n_gone++] = m[i];
		}
	}
	if (n_gone > 0)
		rte_pktmbuf_free_bulk(gone, n_gone);
}

/* One burst from side FROM to the other side, as l2fwd_simple_forward does per frame. */
static uint16_t vnf_forward(struct vnf *v, enum vnf_side from)
{
	const enum vnf_side to = from == VNF_IN ? VNF_OUT : VNF_IN;
	struct rte_mbuf *m[VNF_BURST];
	uint16_t n = rte_eth_rx_burst(v->port[from], 0, m, VNF_BURST), i;

	if (n == 0)
		return 0;
	v->rx[from] += n;
	for (i = 0; i < n; i++)
		rte_prefetch0(rte_pktmbuf_mtod(m[i], void *));
	if (v->kind == VNF_L3) {
		vnf_route_burst(v, from, m, n);
		return n;
	}
	for (i = 0; i < n; i++)
		vnf_send(v, to, m[i]);
	return n;
}

void vnf_flush(struct vnf_set *s)
{
	unsigned int i, side;

	for (i = 0; i < s->n; i++)
		for (side = VNF_IN; side <= VNF_OUT; side++)
			s->v[i].tx[side] += rte_eth_tx_buffer_flush(s->v[i].port[side], 0,
								    s->v[i].buf[side]);
}

uint64_t vnf_pass(struct vnf_set *s, uint64_t tsc)
{
	uint64_t work = 0;
	unsigned int i;

	/* l2fwd's timer: drain when more than 100 us passed since the last drain. */
	if (tsc - s->last_drain > s->drain_tsc) {
		vnf_flush(s);
		s->last_drain = tsc;
	}
	for (i = 0; i < s->n; i++) {
		work += vnf_forward(&s->v[i], VNF_IN);
		work += vnf_forward(&s->v[i], VNF_OUT);
	}
	return work;
}

static json_t *mac_json(const uint8_t *mac)
{
	char s[18];

	snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
	return json_string(s);
}

/* Frames received on FROM and discarded (L3): their total. */
static uint64_t discarded_from(const struct vnf *v, enum vnf_side from)
{
	uint64_t n = 0;
	unsigned int r;

	for (r = 0; r < VNF_L3_REASONS; r++)
		n += v->discarded[from][r];
	return n;
}

/* Discards by reason, from FROM or (ALL) from both sides; every reason, zeros included. */
static json_t *reasons_json(const struct vnf *v, enum vnf_side from, bool all)
{
	json_t *o = json_object();
	unsigned int r;

	for (r = 0; r < VNF_L3_REASONS; r++)
		json_object_set_new(o, vnf_l3_reasons[r], json_integer((json_int_t)(
			v->discarded[from][r] + (all ? v->discarded[!from][r] : 0))));
	return o;
}

/* One direction: frames received on FROM, and what became of them on the other side. */
static json_t *direction_json(const struct vnf *v, enum vnf_side from)
{
	const enum vnf_side to = from == VNF_IN ? VNF_OUT : VNF_IN;

	return json_pack("{sI sI sI sI so so}", "rx", (json_int_t)v->rx[from],
			 "tx", (json_int_t)v->tx[to], "dropped", (json_int_t)v->dropped[to],
			 "discarded", (json_int_t)discarded_from(v, from),
			 "discards", reasons_json(v, from, false),
			 "dst_mac", mac_json(v->addrs[to]));
}

json_t *vnf_json(const struct vnf_set *s, const char *const *in_specs,
		 const char *const *out_specs)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < s->n; i++) {
		const struct vnf *v = &s->v[i];

		json_array_append_new(a, json_pack("{si ss ss ss so so sI sI sI sI so so so}",
			"index", i, "kind", vnf_kind_name(v->kind),
			"in", in_specs[i], "out", out_specs[i],
			"in_mac", mac_json(v->addrs[VNF_IN] + 6),
			"out_mac", mac_json(v->addrs[VNF_OUT] + 6),
			"rx", (json_int_t)(v->rx[VNF_IN] + v->rx[VNF_OUT]),
			"tx", (json_int_t)(v->tx[VNF_IN] + v->tx[VNF_OUT]),
			"dropped", (json_int_t)(v->dropped[VNF_IN] + v->dropped[VNF_OUT]),
			"discarded", (json_int_t)(discarded_from(v, VNF_IN) +
						  discarded_from(v, VNF_OUT)),
			"discards", reasons_json(v, VNF_IN, true),
			"in_to_out", direction_json(v, VNF_IN),
			"out_to_in", direction_json(v, VNF_OUT)));
	}
	return a;
}

json_t *vnf_counts_json(const struct vnf_set *s)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < s->n; i++) {
		const struct vnf *v = &s->v[i];

		json_array_append_new(a, json_pack("{sI sI sI sI}",
			"rx", (json_int_t)(v->rx[VNF_IN] + v->rx[VNF_OUT]),
			"tx", (json_int_t)(v->tx[VNF_IN] + v->tx[VNF_OUT]),
			"dropped", (json_int_t)(v->dropped[VNF_IN] + v->dropped[VNF_OUT]),
			"discarded", (json_int_t)(discarded_from(v, VNF_IN) +
						  discarded_from(v, VNF_OUT))));
	}
	return a;
}
