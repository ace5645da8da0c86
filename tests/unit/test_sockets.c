/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-sockets' options, frames and frame test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sockets.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int parse(int argc, char **argv, struct sk_opts *o, char *err)
{
	return sk_opts_parse(argc, argv, o, err, 256);
}

static void defaults_and_a_full_command_line(void **state)
{
	char *none[] = { "sluice-sockets" };
	char *full[] = { "sluice-sockets", "--api", "raw", "--batch", "32", "--size", "1518",
			 "--role", "both", "--duration", "2.5", "--tx-netns", "a", "--rx-netns",
			 "b", "--tx-iface", "ct", "--rx-iface", "cr", "--dst", "10.1.2.3",
			 "--port", "4000", "--dst-mac", "02:00:00:00:00:0a", "--tx-cpu", "0",
			 "--rx-cpu", "1", "--json" };
	struct sk_opts o;
	char err[256];

	(void)state;
	assert_int_equal(parse(ARGC(none), none, &o, err), 0);
	assert_int_equal(o.api, SK_API_UDP);
	assert_int_equal(o.batch, 1);
	assert_int_equal(o.size, 64);
	assert_int_equal(o.role, SK_ROLE_BOTH);
	assert_int_equal(o.tx_cpu, -1);
	assert_int_equal(parse(ARGC(full), full, &o, err), 0);
	assert_int_equal(o.api, SK_API_RAW);
	assert_int_equal(o.batch, 32);
	assert_int_equal(o.size, 1518);
	assert_true(o.duration == 2.5);
	assert_string_equal(o.rx_netns, "b");
	assert_string_equal(o.tx_iface, "ct");
	assert_int_equal(o.dst_ip, 0x0a010203);
	assert_int_equal(o.port, 4000);
	assert_int_equal(o.dst_mac[5], 0x0a);
	assert_int_equal(o.rx_cpu, 1);
	assert_int_equal(o.json, 1);
	assert_string_equal(sk_calls_name(o.batch), "sendmmsg/recvmmsg");
	assert_string_equal(sk_calls_name(1), "send/recv");
}

static void bad_values_are_refused_with_the_option_named(void **state)
{
	char *cases[][3] = {
		{ "x", "--batch", "0" }, { "x", "--batch", "1025" }, { "x", "--size", "63" },
		{ "x", "--size", "1519" }, { "x", "--api", "tcp" }, { "x", "--role", "fwd" },
		{ "x", "--dst", "10.0.0" }, { "x", "--dst-mac", "02:00:00:00:00" },
		{ "x", "--port", "0" }, { "x", "--duration", "abc" }, { "x", "--bogus", "1" },
	};
	struct sk_opts o;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(parse(3, cases[i], &o, err), -1);
		assert_true(strlen(err) > 0);
	}
}

static void raw_needs_its_devices(void **state)
{
	char *tx[] = { "x", "--api", "raw", "--role", "tx" };
	char *rx[] = { "x", "--api", "raw", "--role", "rx", "--rx-iface", "cr" };
	struct sk_opts o;
	char err[256];

	(void)state;
	assert_int_equal(parse(ARGC(tx), tx, &o, err), -1);
	assert_non_null(strstr(err, "--tx-iface"));
	assert_int_equal(parse(ARGC(rx), rx, &o, err), 0);
}

/* A 64-byte frame: 60 bytes on the wire, 18 of them payload; a valid IPv4 checksum. */
static void frames_have_the_size_and_headers_asked(void **state)
{
	char *argv[] = { "x", "--api", "raw", "--tx-iface", "a", "--rx-iface", "b" };
	static const uint8_t src[6] = { 2, 0, 0, 0, 0, 1 };
	uint8_t buf[SK_MAX_SIZE];
	struct sk_opts o;
	uint32_t sum = 0;
	char err[256];
	size_t len;
	int i;

	(void)state;
	assert_int_equal(parse(ARGC(argv), argv, &o, err), 0);
	assert_int_equal(sk_payload_len(64), 18);
	assert_int_equal(sk_payload_len(1518), 1472);
	len = sk_build_frame(&o, src, buf);
	assert_int_equal(len, 60);
	assert_memory_equal(buf, o.dst_mac, 6);
	assert_memory_equal(buf + 6, src, 6);
	for (i = 14; i < 34; i += 2)
		sum += (uint32_t)(buf[i] << 8 | buf[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	assert_int_equal(sum, 0xffff);
	assert_int_equal(buf[16] << 8 | buf[17], 46);            /* IPv4 total length */
	assert_int_equal(buf[38] << 8 | buf[39], 26);            /* UDP length */
	assert_true(sk_frame_matches(&o, buf, len));
	assert_false(sk_frame_matches(&o, buf, len - 1));
	buf[37] ^= 1;
	assert_false(sk_frame_matches(&o, buf, len));
}

static void gbps_at_l1_and_l2(void **state)
{
	(void)state;
	assert_true(sk_gbps(1e6, 64, 0) > 0.5119 && sk_gbps(1e6, 64, 0) < 0.5121);
	assert_true(sk_gbps(1e6, 64, 1) > 0.6719 && sk_gbps(1e6, 64, 1) < 0.6721);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_and_a_full_command_line),
		cmocka_unit_test(bad_values_are_refused_with_the_option_named),
		cmocka_unit_test(raw_needs_its_devices),
		cmocka_unit_test(frames_have_the_size_and_headers_asked),
		cmocka_unit_test(gbps_at_l1_and_l2),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
