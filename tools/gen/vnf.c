/* SPDX-License-Identifier: BSD-3-Clause */
/* Inline l2fwd VNFs for sluice-gen's loop; see vnf.h for what they do and why. */
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include "vnf.h"

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
	      const struct vnf_dst *dst)
{
	struct vnf *v = &s->v[i];
	struct rte_ether_addr own;
	unsigned int side;

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
	for (i = 0; i < n; i++) {
		vnf_rewrite(rte_pktmbuf_mtod(m[i], uint8_t *), v->addrs[to]);
		/* Sends a full buffer at once; a partial one waits for the drain timer. */
		v->tx[to] += rte_eth_tx_buffer(v->port[to], 0, v->buf[to], m[i]);
	}
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

/* One direction: frames received on FROM, and what became of them on the other side. */
static json_t *direction_json(const struct vnf *v, enum vnf_side from)
{
	const enum vnf_side to = from == VNF_IN ? VNF_OUT : VNF_IN;

	return json_pack("{sI sI sI so}", "rx", (json_int_t)v->rx[from],
			 "tx", (json_int_t)v->tx[to], "dropped", (json_int_t)v->dropped[to],
			 "dst_mac", mac_json(v->addrs[to]));
}

json_t *vnf_json(const struct vnf_set *s, const char *const *in_specs,
		 const char *const *out_specs)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < s->n; i++) {
		const struct vnf *v = &s->v[i];

		json_array_append_new(a, json_pack("{si ss ss so so sI sI sI so so}", "index", i,
			"in", in_specs[i], "out", out_specs[i],
			"in_mac", mac_json(v->addrs[VNF_IN] + 6),
			"out_mac", mac_json(v->addrs[VNF_OUT] + 6),
			"rx", (json_int_t)(v->rx[VNF_IN] + v->rx[VNF_OUT]),
			"tx", (json_int_t)(v->tx[VNF_IN] + v->tx[VNF_OUT]),
			"dropped", (json_int_t)(v->dropped[VNF_IN] + v->dropped[VNF_OUT]),
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

		json_array_append_new(a, json_pack("{sI sI sI}",
			"rx", (json_int_t)(v->rx[VNF_IN] + v->rx[VNF_OUT]),
			"tx", (json_int_t)(v->tx[VNF_IN] + v->tx[VNF_OUT]),
			"dropped", (json_int_t)(v->dropped[VNF_IN] + v->dropped[VNF_OUT])));
	}
	return a;
}
