/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Microbenchmark of flow_key_extract(): ns per extraction for a 64-byte UDP frame (60 in
 * the buffer) and an IPv6 TCP frame, hot in cache, median of 5 runs of ITERS extractions.
 * Not part of `meson test`; run it with `meson test -C build --benchmark flow_key_extract`
 * or directly (build/tests/unit/bench_flow_key [iterations]).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flow_key.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double run(const uint8_t *f, uint32_t len, unsigned long iters)
{
	struct flow_key key;
	double t[5];
	unsigned long i;
	int r;

	for (r = 0; r < 5; r++) {
		double t0 = now_ns();

		for (i = 0; i < iters; i++) {
			flow_key_extract(f, len, (uint32_t)i, &key);
			/* The key is used: the compiler may not drop the extraction. */
			__asm__ volatile("" : : "r"(&key) : "memory");
		}
		t[r] = (now_ns() - t0) / (double)iters;
	}
	qsort(t, 5, sizeof(t[0]), cmp);
	return t[2];
}

int main(int argc, char **argv)
{
	unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 0) : 5000000;
	struct flow_key k;
	uint8_t udp[128] __attribute__((aligned(64))), tcp6[128] __attribute__((aligned(64)));
	uint32_t n1, n2;

	memset(&k, 0, sizeof(k));
	k.dl_dst[0] = 2;
	k.dl_src[0] = 4;
	k.dl_type = __builtin_bswap16(0x0800);
	k.nw_proto = 17;
	k.nw_ttl = 64;
	k.nw_src = 0x0100000a;
	k.nw_dst = 0x0200000a;
	k.tp_src = __builtin_bswap16(1024);
	k.tp_dst = __builtin_bswap16(53);
	n1 = flow_key_compose(&k, udp, sizeof(udp));
	k.dl_type = __builtin_bswap16(0x86dd);
	k.nw_proto = 6;
	k.nw_src = k.nw_dst = 0;
	k.ipv6_src[0] = 0x20;
	k.ipv6_dst[0] = 0x20;
	k.ipv6_label = __builtin_bswap32(0x12345);
	k.tcp_flags = __builtin_bswap16(0x010);
	n2 = flow_key_compose(&k, tcp6, sizeof(tcp6));
	printf("flow_key_extract, median of 5 x %lu: 64 B IPv4/UDP %.2f ns, IPv6/TCP (%u B) %.2f ns\n",
	       iters, run(udp, n1, iters), n2, run(tcp6, n2, iters));
	return 0;
}
