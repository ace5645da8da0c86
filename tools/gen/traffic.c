/* SPDX-License-Identifier: BSD-3-Clause */
#include "traffic.h"
#include "sizedist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

/* IMIX 64:570:1518 at 7:4:1, interleaved so that a short run already has the mix. */
static const uint16_t imix[] = { 64, 570, 64, 570, 64, 570, 64, 570, 64, 64, 64, 1518 };

_Static_assert(TRAFFIC_MAX_CYCLE == SIZEDIST_MAX_CYCLE, "one cycle length");

/* csv:FILE, lines "size,weight" (sizedist.h). */
static int parse_csv_sizes(const char *path, struct traffic *t, char *err, size_t len)
{
	static struct sizedist d;
	char why[300];

	if (sizedist_load(path, TRAFFIC_MIN_FRAME, TRAFFIC_MAX_FRAME, &d, why, sizeof(why)) != 0 ||
	    sizedist_cycle(&d, t->sizes, &t->n_sizes, why, sizeof(why)) != 0) {
		snprintf(err, len, "--size csv:%s", why);
		return -1;
	}
	return 0;
}

static int size_ok(long v)
{
	return v >= TRAFFIC_MIN_FRAME && v <= TRAFFIC_MAX_FRAME;
}

int traffic_parse_sizes(const char *s, struct traffic *t, char *err, size_t len)
{
	char buf[512], *tok, *save, *end;
	long lo, hi;

	t->n_sizes = 0;
	t->lo = t->hi = 0;
	if (strcmp(s, "imix") == 0) {
		memcpy(t->sizes, imix, sizeof(imix));
		t->n_sizes = RTE_DIM(imix);
		return 0;
	}
	if (strncmp(s, "csv:", 4) == 0)
		return parse_csv_sizes(s + 4, t, err, len);
	if (sscanf(s, "%ld-%ld", &lo, &hi) == 2 && strchr(s, ',') == NULL) {
		if (!size_ok(lo) || !size_ok(hi) || lo >= hi)
			goto bad;
		t->lo = (uint16_t)lo;
		t->hi = (uint16_t)hi;
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		lo = strtol(tok, &end, 10);
		if (*end != '\0' || !size_ok(lo) || t->n_sizes == TRAFFIC_MAX_SIZES)
			goto bad;
		t->sizes[t->n_sizes++] = (uint16_t)lo;
	}
	if (t->n_sizes > 0)
		return 0;
bad:
	snprintf(err, len, "--size: '%s' is not a size, list, range, imix or csv:FILE (frames of %d to "
		 "%d bytes, FCS included)", s, TRAFFIC_MIN_FRAME, TRAFFIC_MAX_FRAME);
	return -1;
}

int traffic_parse_vary(const char *s, struct traffic *t, char *err, size_t len)
{
	char buf[64], *tok, *save;

	t->vary_mac = t->vary_ip = t->vary_port = false;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "mac") == 0)
			t->vary_mac = true;
		else if (strcmp(tok, "ip") == 0)
			t->vary_ip = true;
		else if (strcmp(tok, "port") == 0)
			t->vary_port = true;
		else {
			snprintf(err, len, "--vary: '%s' is not mac, ip or port", tok);
			return -1;
		}
	}
	return 0;
}

double traffic_mean_size(const struct traffic *t)
{
	double sum = 0;
	unsigned int i;

	if (t->hi > 0)
		return (t->lo + t->hi) / 2.0;
	for (i = 0; i < t->n_sizes; i++)
		sum += t->sizes[i];
	return sum / t->n_sizes;
}

uint16_t traffic_max_size(const struct traffic *t)
{
	uint16_t max = t->hi;
	unsigned int i;

	for (i = 0; t->hi == 0 && i < t->n_sizes; i++)
		max = RTE_MAX(max, t->sizes[i]);
	return max;
}

uint16_t traffic_size(const struct traffic *t, uint64_t n)
{
	uint64_t x;

	if (t->hi == 0)
		return t->sizes[n % t->n_sizes];
	/* A cheap bijective hash of N spreads the range evenly without a random state. */
	x = (n + 1) * UINT64_C(0x9e3779b97f4a7c15);
	x ^= x >> 29;
	return (uint16_t)(t->lo + x % (uint64_t)(t->hi - t->lo + 1));
}

void traffic_write_headers(const struct traffic *t, uint8_t *frame, uint16_t len,
			   uint32_t flow)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint32_t mf = t->vary_mac ? flow : 0, ipf = t->vary_ip ? flow : 0;
	uint16_t pf = t->vary_port ? (uint16_t)(flow % TRAFFIC_PORT_FLOWS) : 0;

	eth->src_addr = (struct rte_ether_addr){{ 0x02, 0x00, 0x01, (uint8_t)(mf >> 16),
						  (uint8_t)(mf >> 8), (uint8_t)mf }};
	eth->dst_addr = (struct rte_ether_addr){{ 0x02, 0x00, 0x02, (uint8_t)(mf >> 16),
						  (uint8_t)(mf >> 8), (uint8_t)mf }};
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(len - sizeof(*eth)));
	ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 0) + 1 + ipf);
	ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(10, 128, 0, 0) + 1 + ipf);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16((uint16_t)(1024 + pf));
	udp->dst_port = rte_cpu_to_be_16(1024);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(len - sizeof(*eth) - sizeof(*ip)));
	udp->dgram_cksum = 0;
}

void traffic_set_flow(const struct traffic *t, uint8_t *frame, uint32_t flow,
		      uint32_t port_flow)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	if (t->vary_mac) {
		eth->src_addr.addr_bytes[3] = eth->dst_addr.addr_bytes[3] = (uint8_t)(flow >> 16);
		eth->src_addr.addr_bytes[4] = eth->dst_addr.addr_bytes[4] = (uint8_t)(flow >> 8);
		eth->src_addr.addr_bytes[5] = eth->dst_addr.addr_bytes[5] = (uint8_t)flow;
	}
	if (t->vary_ip) {
		ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 0) + 1 + flow);
		ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(10, 128, 0, 0) + 1 + flow);
		ip->hdr_checksum = 0;
		ip->hdr_checksum = rte_ipv4_cksum(ip);
	}
	if (t->vary_port)
		udp->src_port = rte_cpu_to_be_16((uint16_t)(1024 + port_flow));
}
