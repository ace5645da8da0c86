/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the flow key and flow modification tests: hex frames, and a reference checksum
 * checker written the plain way (full recomputation, no shared code with src/), so an
 * incremental update in src/flow_mod.c is checked against the definition.
 */
#ifndef SLUICE_FLOW_TEST_UTIL_H
#define SLUICE_FLOW_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Hex text to bytes; returns the count. */
static inline uint32_t hex_to_bytes(const char *hex, uint8_t *out, uint32_t max)
{
	uint32_t n = 0;

	while (hex[0] != '\0' && hex[1] != '\0' && n < max) {
		unsigned int v;
		char b[3] = { hex[0], hex[1], 0 };

		v = (unsigned int)strtoul(b, NULL, 16);
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static inline uint16_t ref_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The one's complement sum of LEN bytes, folded: 0xffff when a checksummed block is valid. */
static inline uint16_t ref_sum(const uint8_t *p, uint32_t len, uint32_t sum)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		sum += (i & 1) ? p[i] : (uint32_t)p[i] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* Bitwise CRC32c, the definition (reflected 0x82f63b78). */
static inline uint32_t ref_crc32c(const uint8_t *p, uint32_t len)
{
	uint32_t crc = 0xffffffffu, i;
	int k;

	for (i = 0; i < len; i++) {
		crc ^= p[i];
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* Result of ref_check_frame(): what was checked. */
struct ref_checked {
	bool ip4;                  /* an IPv4 header checksum */
	bool l4;                   /* an L4 checksum (TCP, UDP, ICMP, ICMPv6, SCTP) */
};

/*
 * Whether every checksum of frame F (LEN bytes; Ethernet, one tag, IPv4 or IPv6 with
 * extension headers, L4 of unfragmented packets all in the frame) is valid. A UDP checksum
 * of 0 counts as valid over IPv4 (none) and invalid over IPv6.
 */
static inline bool ref_check_frame(const uint8_t *f, uint32_t len, struct ref_checked *what)
{
	uint32_t off = 14, l4, end, plen;
	uint16_t type;
	uint8_t proto;
	uint32_t psum;
	bool v6;

	memset(what, 0, sizeof(*what));
	if (len < 14)
		return true;
	type = ref_get16(f + 12);
	if ((type == 0x8100 || type == 0x88a8) && len >= 18) {
		type = ref_get16(f + 16);
		off = 18;
	}
	if (type == 0x0800) {
		uint32_t ihl;

		if (len < off + 20)
			return true;
		ihl = (f[off] & 15u) * 4;
		if (ihl < 20 || len < off + ihl)
			return true;
		what->ip4 = true;
		if (ref_sum(f + off, ihl, 0) != 0xffff)
			return false;
		plen = ref_get16(f + off + 2);
		if (plen < ihl || off + plen > len || (ref_get16(f + off + 6) & 0x3fff))
			return true;
		l4 = off + ihl;
		end = off + plen;
		proto = f[off + 9];
		psum = ref_sum(f + off + 12, 8, 0);
		v6 = false;
	} else if (type == 0x86dd) {
		uint8_t nh;

		if (len < off + 40)
			return true;
		plen = ref_get16(f + off + 4);
		if (off + 40 + plen > len)
			return true;
		end = off + 40 + plen;
		l4 = off + 40;
		nh = f[off + 6];
		while (nh == 0 || nh == 43 || nh == 60 || nh == 44) {
			if (nh == 44 || end - l4 < 8)
				return true;   /* fragments: the checksum spans them all */
			nh = f[l4];
			l4 += (f[l4 + 1] + 1u) * 8;
			if (l4 > end)
				return true;
		}
		proto = nh;
		psum = ref_sum(f + off + 8, 32, 0);
		v6 = true;
	} else {
		return true;
	}
	if (proto == 132) {
		uint8_t tmp[2048];
		uint32_t crc;

		if (end - l4 < 12 || end - l4 > sizeof(tmp))
			return true;
		what->l4 = true;
		memcpy(tmp, f + l4, end - l4);
		memset(tmp + 8, 0, 4);
		crc = ref_crc32c(tmp, end - l4);
		return f[l4 + 8] == (uint8_t)crc && f[l4 + 9] == (uint8_t)(crc >> 8) &&
		       f[l4 + 10] == (uint8_t)(crc >> 16) && f[l4 + 11] == (uint8_t)(crc >> 24);
	}
	if ((proto == 6 && end - l4 >= 20) || (proto == 17 && end - l4 >= 8) ||
	    (proto == 58 && v6 && end - l4 >= 4)) {
		what->l4 = true;
		/* UDP checksum 0: none over IPv4, invalid over IPv6 (RFC 8200, 8.1). */
		if (proto == 17 && ref_get16(f + l4 + 6) == 0)
			return !v6;
		return ref_sum(f + l4, end - l4, (uint32_t)psum + proto + (end - l4)) == 0xffff;
	}
	if (proto == 1 && !v6 && end - l4 >= 4) {
		what->l4 = true;
		return ref_sum(f + l4, end - l4, 0) == 0xffff;
	}
	return true;
}

#endif
