/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-gen's inline VNF: l2fwd's destination MACs, the rewrite, --vnf-dst-mac values. */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(l2fwd_destination_as_l2fwd_writes_it),
		cmocka_unit_test(rewrite_touches_the_two_addresses_only),
		cmocka_unit_test(dst_mac_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
