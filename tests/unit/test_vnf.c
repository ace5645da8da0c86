/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-gen's inline VNF: l2fwd's destination MACs, the rewrite, --vnf-dst-mac values, and
 * the L3 kind's header checks, TTL and checksum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vnf.h"

/* What l2fwd itself computes (examples/l2fwd/main.c, l2fwd_mac_updating) on a little-endian
 * host: the 64-bit word 0x000000000002 + (port << 40) stored over the destination. */
static void l2fwd_destination_as_l2fwd_writes_it(void **state)
{
	unsigned int port;

	(void)state;
	for (port = 0; port < 4; port++) {
		uint8_t ours[6], theirs[8] = { 0 };
		uint64_t word = 0x000000000002ULL + ((uint64_t)port << 40);

		memcpy(theirs, &word, sizeof(word));
		vnf_l2fwd_dst(port, ours);
		assert_memory_equal(ours, theirs, 6);
	}
}

static void rewrite_touches_the_two_addresses_only(void **state)
{
	uint8_t frame[60], before[60], addrs[VNF_ETH_ADDRS];
	unsigned int i;

	(void)state;
	for (i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)(0xa0 + i);
	memcpy(before, frame, sizeof(frame));
	for (i = 0; i < VNF_ETH_ADDRS; i++)
		addrs[i] = (uint8_t)i;
	vnf_rewrite(frame, addrs);
	assert_memory_equal(frame, addrs, VNF_ETH_ADDRS);
	assert_memory_equal(frame + VNF_ETH_ADDRS, before + VNF_ETH_ADDRS,
			    sizeof(frame) - VNF_ETH_ADDRS);
}

static void dst_mac_values(void **state)
{
	static const uint8_t hop[6] = { 0x02, 0, 0, 0, 0x01, 0xff }, back[6] = { 0xaa, 0xbb, 0xcc,
										   0xdd, 0xee, 0x0f };
	struct vnf_dst d;
	char err[200];

	(void)state;
	assert_int_equal(vnf_parse_dst("l2fwd", &d, err, sizeof(err)), 0);
	assert_false(d.set[VNF_IN] || d.set[VNF_OUT]);
	assert_int_equal(vnf_parse_dst("02:00:00:00:01:ff", &d, err, sizeof(err)), 0);
	assert_true(d.set[VNF_OUT] && !d.set[VNF_IN]);
	assert_memory_equal(d.mac[VNF_OUT], hop, 6);
	assert_int_equal(vnf_parse_dst("02:00:00:00:01:FF,aa:bb:cc:dd:ee:0f", &d, err,
				       sizeof(err)), 0);
	assert_true(d.set[VNF_OUT] && d.set[VNF_IN]);
	assert_memory_equal(d.mac[VNF_OUT], hop, 6);
	assert_memory_equal(d.mac[VNF_IN], back, 6);
	assert_int_equal(vnf_parse_dst("02:00:00:00:01", &d, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "02:00:00:00:01"));
	assert_int_equal(vnf_parse_dst("02:00:00:00:01:ff,", &d, err, sizeof(err)), -1);
	assert_int_equal(vnf_parse_dst("02:00:00:00:01:fg", &d, err, sizeof(err)), -1);
	assert_int_equal(vnf_parse_dst("02:00:00:00:01:ff,l2fwd", &d, err, sizeof(err)), -1);
	assert_int_equal(vnf_parse_dst("", &d, err, sizeof(err)), -1);
}

/* A 60-byte Ethernet/IPv4/UDP frame with TTL TTL and a right header checksum. */
static void ipv4_frame(uint8_t f[60], uint8_t ttl)
{
	static const uint8_t head[34] = {
		2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00,
		0x45, 0, 0, 46, 0x12, 0x34, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 128, 0, 1,
	};
	uint32_t sum = 0;
	unsigned int i;

	memset(f, 0xab, 60);
	memcpy(f, head, sizeof(head));
	f[22] = ttl;
	for (i = 14; i < 34; i += 2)
		sum += (uint32_t)(f[i] << 8 | f[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	f[24] = (uint8_t)(~sum >> 8);
	f[25] = (uint8_t)~sum;
}

/* The checksum computed afresh over the 20-byte header at IP (its field included: 0 when
 * right). */
static uint16_t header_sum(const uint8_t *ip)
{
	uint32_t sum = 0;
	unsigned int i;

	for (i = 0; i < 20; i += 2)
		sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void l3_decrements_ttl_and_keeps_the_checksum_right(void **state)
{
	unsigned int ttl;

	(void)state;
	for (ttl = 2; ttl <= 255; ttl++) {
		uint8_t f[60], before[60];

		ipv4_frame(f, (uint8_t)ttl);
		memcpy(before, f, sizeof(f));
		assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_OK);
		assert_int_equal(f[22], ttl - 1);
		assert_int_equal(header_sum(f + 14), 0);
		/* Nothing else changed: the TTL and the checksum are the only bytes. */
		assert_memory_equal(f, before, 22);
		assert_memory_equal(f + 23, before + 23, 1);
		assert_memory_equal(f + 26, before + 26, sizeof(f) - 26);
	}
}

/* A checksum whose update ends at 0x0000 (where l3fwd's ++ writes 0xffff): still right. */
static void l3_checksum_update_reaching_zero(void **state)
{
	uint8_t f[60];
	uint16_t id;

	(void)state;
	for (id = 0; id < 0xffff; id++) {
		ipv4_frame(f, 64);
		f[18] = (uint8_t)(id >> 8);
		f[19] = (uint8_t)id;
		f[24] = f[25] = 0;
		f[24] = (uint8_t)(header_sum(f + 14) >> 8);
		f[25] = (uint8_t)header_sum(f + 14);
		if (f[24] == 0xfe && f[25] == 0xff)
			break;
	}
	assert_true(f[24] == 0xfe && f[25] == 0xff);
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_OK);
	assert_true(f[24] == 0 && f[25] == 0);
	assert_int_equal(header_sum(f + 14), 0);
}

static void l3_discards_with_a_reason(void **state)
{
	uint8_t f[60], before[60];

	(void)state;
	ipv4_frame(f, 1);
	memcpy(before, f, sizeof(f));
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_TTL_EXPIRED);
	assert_memory_equal(f, before, sizeof(f));          /* a discarded frame is untouched */
	ipv4_frame(f, 0);
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_TTL_EXPIRED);
	ipv4_frame(f, 64);
	f[12] = 0x86, f[13] = 0xdd;                         /* IPv6 */
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_NOT_IPV4);
	ipv4_frame(f, 64);
	f[12] = 0x81, f[13] = 0x00;                         /* a VLAN tag */
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_NOT_IPV4);
	ipv4_frame(f, 64);
	assert_int_equal(vnf_l3_route(f, 13), VNF_L3_NOT_IPV4);
	assert_int_equal(vnf_l3_route(f, 33), VNF_L3_TRUNCATED);
	assert_int_equal(vnf_l3_route(f, 14 + 45), VNF_L3_TRUNCATED);   /* total length 46 */
	ipv4_frame(f, 64);
	f[14] = 0x65;
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_BAD_VERSION);
	ipv4_frame(f, 64);
	f[14] = 0x44;
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_BAD_IHL);
	ipv4_frame(f, 64);
	f[14] = 0x4f;                                       /* 60-byte header: longer than 46 */
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_BAD_TOTAL_LENGTH);
	ipv4_frame(f, 64);
	f[16] = 0, f[17] = 19;
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_BAD_TOTAL_LENGTH);
	ipv4_frame(f, 64);
	f[25] ^= 1;
	assert_int_equal(vnf_l3_route(f, sizeof(f)), VNF_L3_BAD_CHECKSUM);
}

static void kind_values(void **state)
{
	enum vnf_kind k = VNF_L2;

	(void)state;
	assert_int_equal(vnf_parse_kind("l3", &k), 0);
	assert_int_equal(k, VNF_L3);
	assert_string_equal(vnf_kind_name(k), "l3");
	assert_int_equal(vnf_parse_kind("l2", &k), 0);
	assert_int_equal(k, VNF_L2);
	assert_int_equal(vnf_parse_kind("l4", &k), -1);
	assert_int_equal(vnf_parse_kind("", &k), -1);
	assert_string_equal(vnf_l3_reasons[VNF_L3_TTL_EXPIRED], "ttl_expired");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(l2fwd_destination_as_l2fwd_writes_it),
		cmocka_unit_test(rewrite_touches_the_two_addresses_only),
		cmocka_unit_test(dst_mac_values),
		cmocka_unit_test(l3_decrements_ttl_and_keeps_the_checksum_right),
		cmocka_unit_test(l3_checksum_update_reaching_zero),
		cmocka_unit_test(l3_discards_with_a_reason),
		cmocka_unit_test(kind_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
