/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's packet modifications (src/flow_mod.c): every set_field on frames of every
 * kind (composed from random keys), checked three ways: the frame's new key is the old one
 * with just that field changed, a field the frame lacks leaves it byte for byte unchanged,
 * and every checksum, updated incrementally by flow_mod.c, is valid by full recomputation
 * (tests/unit/flow_test_util.h). Then VLAN push and pop, dec_ttl and its expiry, and every
 * modification on frames cut at every length (for ASan).
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow_key.h"
#include "flow_mod.h"
#include "flow_test_util.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void rnd_bytes(void *p, size_t n)
{
	uint8_t *b = p;

	while (n-- > 0)
		*b++ = (uint8_t)rnd();
}

/* A random key of an IP, ARP or other frame, tagged or not. */
static void random_key(struct flow_key *k)
{
	static const uint8_t protos[] = { 6, 17, 132, 1, 58, 47 };
	unsigned int kind = (unsigned int)(rnd() % 4);

	memset(k, 0, sizeof(*k));
	rnd_bytes((uint8_t *)k + offsetof(struct flow_key, dl_dst), 12);
	if (rnd() & 1)
		k->vlan_tci = htons((uint16_t)((rnd() & 0xefff) | FLOW_VLAN_CFI));
	if (kind <= 1) {
		bool v6 = kind == 1;

		k->dl_type = htons(v6 ? 0x86dd : 0x0800);
		k->nw_tos = (uint8_t)rnd();
		k->nw_ttl = (uint8_t)rnd();
		k->nw_proto = protos[rnd() % sizeof(protos)];
		if (v6) {
			rnd_bytes((uint8_t *)k + offsetof(struct flow_key, ipv6_src), 32);
			k->ipv6_label = htonl((uint32_t)rnd() & 0xfffff);
		} else {
			rnd_bytes((uint8_t *)k + offsetof(struct flow_key, nw_src), 8);
		}
		if (rnd() % 8 == 0)
			k->nw_frag = FLOW_FRAG_ANY | FLOW_FRAG_LATER;
		else if (k->nw_proto == (v6 ? 58 : 1))
			k->tp_src = htons((uint16_t)(rnd() & 0xff));
		else if (k->nw_proto == 6 || k->nw_proto == 17 || k->nw_proto == 132)
			rnd_bytes((uint8_t *)k + offsetof(struct flow_key, tp_src), 4);
		if (k->nw_proto == 6 && !k->nw_frag)
			k->tcp_flags = htons((uint16_t)(rnd() & 0xfff));
	} else if (kind == 2) {
		k->dl_type = htons(0x0806);
		k->nw_proto = 1;
		rnd_bytes((uint8_t *)k + offsetof(struct flow_key, nw_src), 8);
	} else {
		k->dl_type = htons(0x88cc);
	}
}

/* What set_field F with VALUE does to key K; false when the frame lacks the field. */
static bool expect(struct flow_key *k, enum flow_field f, const uint8_t *v)
{
	bool ip4 = k->dl_type == htons(0x0800), ip6 = k->dl_type == htons(0x86dd);
	bool ports = (k->nw_proto == 6 || k->nw_proto == 17 || k->nw_proto == 132) &&
		     (ip4 || ip6) && !(k->nw_frag & FLOW_FRAG_LATER);
	uint16_t tci = ntohs(k->vlan_tci), v16;

	memcpy(&v16, v, 2);
	switch (f) {
	case FLOW_FIELD_DL_SRC:
		memcpy(k->dl_src, v, 6);
		return true;
	case FLOW_FIELD_DL_DST:
		memcpy(k->dl_dst, v, 6);
		return true;
	case FLOW_FIELD_VLAN_VID:
		if (tci == 0)
			return false;
		k->vlan_tci = htons((uint16_t)((tci & 0xf000) | (ntohs(v16) & 0xfff)));
		return true;
	case FLOW_FIELD_VLAN_PCP:
		if (tci == 0)
			return false;
		k->vlan_tci = htons((uint16_t)((tci & 0x1fff) | (v[0] & 7) << 13));
		return true;
	case FLOW_FIELD_NW_SRC:
	case FLOW_FIELD_NW_DST:
		if (!ip4)
			return false;
		memcpy(f == FLOW_FIELD_NW_SRC ? &k->nw_src : &k->nw_dst, v, 4);
		return true;
	case FLOW_FIELD_IP_DSCP:
		if (!ip4 && !ip6)
			return false;
		k->nw_tos = (uint8_t)((k->nw_tos & 3) | (v[0] & 0x3f) << 2);
		return true;
	case FLOW_FIELD_IP_ECN:
		if (!ip4 && !ip6)
			return false;
		k->nw_tos = (uint8_t)((k->nw_tos & 0xfc) | (v[0] & 3));
		return true;
	case FLOW_FIELD_NW_TTL:
		if (!ip4 && !ip6)
			return false;
		k->nw_ttl = v[0];
		return true;
	case FLOW_FIELD_TP_SRC:
	case FLOW_FIELD_TP_DST:
		if (!ports)
			return false;
		memcpy(f == FLOW_FIELD_TP_SRC ? &k->tp_src : &k->tp_dst, v, 2);
		return true;
	case FLOW_FIELD_IPV6_SRC:
	case FLOW_FIELD_IPV6_DST:
		if (!ip6)
			return false;
		memcpy(f == FLOW_FIELD_IPV6_SRC ? k->ipv6_src : k->ipv6_dst, v, 16);
		return true;
	case FLOW_FIELD_IPV6_LABEL:
		if (!ip6)
			return false;
		memcpy(&k->ipv6_label, v, 4);
		k->ipv6_label &= htonl(0xfffff);
		return true;
	default:
		return false;
	}
}

static void every_set_field_on_every_kind(void **state)
{
	uint8_t f[128], g[128];
	struct flow_key k, want, got;
	struct ref_checked what;
	unsigned int i, changed = 0, l4 = 0;

	(void)state;
	for (i = 0; i < 40000; i++) {
		enum flow_field fld = (enum flow_field)(rnd() % FLOW_FIELD_COUNT);
		uint8_t v[16];
		uint32_t n;
		bool ok;
		int rc;

		random_key(&k);
		n = flow_key_compose(&k, f, sizeof(f));
		assert_true(ref_check_frame(f, n, &what));
		rnd_bytes(v, sizeof(v));
		memcpy(g, f, n);
		want = k;
		ok = expect(&want, fld, v);
		rc = flow_mod_set_field(g, n, fld, v);
		if (!ok) {
			if (rc != -1)
				fail_msg("field %d on a frame without it: %d", fld, rc);
			assert_memory_equal(f, g, n);
			continue;
		}
		if (rc != 0)
			fail_msg("field %d: %d", fld, rc);
		assert_true(flow_key_extract(g, n, 0, &got));
		if (!flow_key_equal(&got, &want))
			fail_msg("field %d: key after set_field (case %u)", fld, i);
		if (!ref_check_frame(g, n, &what))
			fail_msg("field %d: checksum (case %u, ip4 %d l4 %d)", fld, i, what.ip4,
				 what.l4);
		changed++;
		l4 += what.l4;
	}
	assert_true(changed > 10000);
	assert_true(l4 > 2000);
}

/* 802.1Q-tagged UDP over IPv4 with checksum 0 (none): it stays 0. */
static void udp_checksum_zero_stays_zero(void **state)
{
	struct flow_key k;
	uint8_t f[128], v[4] = { 192, 0, 2, 1 };
	uint32_t n;
	struct ref_checked what;

	(void)state;
	memset(&k, 0, sizeof(k));
	k.dl_type = htons(0x0800);
	k.nw_proto = 17;
	k.nw_ttl = 9;
	k.tp_src = htons(1);
	k.tp_dst = htons(2);
	n = flow_key_compose(&k, f, sizeof(f));
	f[14 + 20 + 6] = 0;
	f[14 + 20 + 7] = 0;
	assert_int_equal(flow_mod_set_field(f, n, FLOW_FIELD_NW_SRC, v), 0);
	assert_int_equal(flow_mod_set_field(f, n, FLOW_FIELD_TP_DST, v), 0);
	assert_int_equal(f[14 + 20 + 6] | f[14 + 20 + 7], 0);
	assert_true(ref_check_frame(f, n, &what));
	assert_true(what.ip4);
}

/* Over every port value, a UDP checksum that comes out as 0 is written 0xffff. */
static void udp_checksum_never_becomes_zero(void **state)
{
	struct flow_key k;
	uint8_t f[128];
	uint32_t n, p;
	struct ref_checked what;
	bool saw_ffff = false;

	(void)state;
	memset(&k, 0, sizeof(k));
	k.dl_type = htons(0x0800);
	k.nw_proto = 17;
	k.nw_src = htonl(0x0a000001);
	n = flow_key_compose(&k, f, sizeof(f));
	for (p = 0; p <= 0xffff; p++) {
		uint8_t v[2] = { (uint8_t)(p >> 8), (uint8_t)p };

		assert_int_equal(flow_mod_set_field(f, n, FLOW_FIELD_TP_SRC, v), 0);
		assert_false(f[40] == 0 && f[41] == 0);
		saw_ffff |= f[40] == 0xff && f[41] == 0xff;
		if ((p & 0xff) == 0)
			assert_true(ref_check_frame(f, n, &what));
	}
	assert_true(saw_ffff);
}

/* Frame F (LEN) at offset 8 of a buffer of exactly LEN + 8 bytes on the heap. */
static uint8_t *with_headroom(const uint8_t *f, uint32_t len, uint8_t **base)
{
	*base = malloc(len + 8);
	memcpy(*base + 8, f, len);
	return *base + 8;
}

static void push_and_pop_vlan(void **state)
{
	struct flow_key k, k2, got;
	uint8_t f[128], *base, *d;
	uint32_t n, len;

	(void)state;
	/* Untagged: a new tag with TCI 0; pop gives back the frame. */
	memset(&k, 0, sizeof(k));
	rnd_bytes((uint8_t *)&k + offsetof(struct flow_key, dl_dst), 12);
	k.dl_type = htons(0x0800);
	k.nw_proto = 6;
	k.nw_ttl = 3;
	k.tp_dst = htons(80);
	n = flow_key_compose(&k, f, sizeof(f));
	d = with_headroom(f, n, &base);
	len = n;
	assert_int_equal(flow_mod_pop_vlan(&d, &len), -1);
	assert_ptr_equal(d, base + 8);
	assert_int_equal(flow_mod_push_vlan(&d, &len, 0x8100), 0);
	assert_ptr_equal(d, base + 4);
	assert_int_equal(len, n + 4);
	assert_int_equal(d[12], 0x81);
	assert_true(flow_key_extract(d, len, 0, &got));
	k2 = k;
	k2.vlan_tci = htons(FLOW_VLAN_CFI);
	assert_true(flow_key_equal(&got, &k2));
	assert_int_equal(flow_mod_pop_vlan(&d, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(d, f, n);
	free(base);

	/* Tagged (VID 100, PCP 5, DEI set): an 802.1ad tag outside with VID and PCP copied,
	 * DEI not; the old tag stays inside. */
	k.vlan_tci = htons(0xb064);
	n = flow_key_compose(&k, f, sizeof(f));
	f[14] |= 0x10;
	d = with_headroom(f, n, &base);
	len = n;
	assert_int_equal(flow_mod_push_vlan(&d, &len, 0x88a8), 0);
	assert_int_equal(d[12], 0x88);
	assert_int_equal(d[13], 0xa8);
	assert_int_equal(d[14], 0xa0);
	assert_int_equal(d[15], 0x64);
	assert_int_equal(d[16], 0x81);
	assert_int_equal(d[18], 0xb0);
	assert_true(flow_key_extract(d, len, 0, &got));
	assert_int_equal(ntohs(got.vlan_tci), 0xb064);
	assert_int_equal(ntohs(got.dl_type), 0x8100);
	assert_int_equal(flow_mod_pop_vlan(&d, &len), 0);
	assert_memory_equal(d, f, n);
	assert_int_equal(flow_mod_pop_vlan(&d, &len), 0);
	assert_int_equal(len, n - 4);
	assert_true(flow_key_extract(d, len, 0, &got));
	k2 = k;
	k2.vlan_tci = 0;
	assert_true(flow_key_equal(&got, &k2));
	free(base);

	/* Too short for Ethernet. */
	d = with_headroom(f, 13, &base);
	len = 13;
	assert_int_equal(flow_mod_push_vlan(&d, &len, 0x8100), -1);
	assert_int_equal(flow_mod_pop_vlan(&d, &len), -1);
	free(base);
}

static void dec_ttl_and_expiry(void **state)
{
	struct flow_key k, got;
	uint8_t f[128];
	struct ref_checked what;
	uint32_t n, ttl;

	(void)state;
	memset(&k, 0, sizeof(k));
	k.dl_type = htons(0x0800);
	k.nw_proto = 17;
	k.nw_src = htonl(0xc0a80001);
	for (ttl = 0; ttl <= 255; ttl++) {
		k.nw_ttl = (uint8_t)ttl;
		k.nw_tos = (uint8_t)(ttl * 7);
		k.vlan_tci = (ttl & 1) ? htons(0x1005) : 0;
		n = flow_key_compose(&k, f, sizeof(f));
		if (ttl <= 1) {
			uint8_t g[128];

			memcpy(g, f, n);
			assert_int_equal(flow_mod_dec_ttl(f, n), 1);
			assert_memory_equal(f, g, n);
			continue;
		}
		assert_int_equal(flow_mod_dec_ttl(f, n), 0);
		assert_true(flow_key_extract(f, n, 0, &got));
		assert_int_equal(got.nw_ttl, ttl - 1);
		assert_true(ref_check_frame(f, n, &what));
		assert_true(what.ip4 && what.l4);
	}
	/* A tag pushed onto a tagged frame: the IP header behind both tags is still found
	 * (the action set pushes before dec_ttl and set_field). */
	{
		uint8_t *base, *d;
		uint32_t len;

		k.nw_ttl = 9;
		k.vlan_tci = htons(0x1005);
		n = flow_key_compose(&k, f, sizeof(f));
		d = with_headroom(f, n, &base);
		len = n;
		assert_int_equal(flow_mod_push_vlan(&d, &len, 0x8100), 0);
		assert_int_equal(flow_mod_dec_ttl(d, len), 0);
		assert_int_equal(d[22 + 8], 8);
		assert_int_equal(flow_mod_set_field(d, len, FLOW_FIELD_NW_SRC,
						    (const uint8_t *)"\x0a\x00\x00\x01"), 0);
		assert_int_equal(flow_mod_pop_vlan(&d, &len), 0);
		assert_true(flow_key_extract(d, len, 0, &got));
		assert_int_equal(got.nw_ttl, 8);
		assert_int_equal(got.nw_src, htonl(0x0a000001));
		assert_true(ref_check_frame(d, len, &what));
		assert_true(what.ip4 && what.l4);
		free(base);
	}
	/* IPv6: the hop limit. */
	memset(&k, 0, sizeof(k));
	k.dl_type = htons(0x86dd);
	k.nw_proto = 58;
	k.nw_ttl = 2;
	n = flow_key_compose(&k, f, sizeof(f));
	assert_int_equal(flow_mod_dec_ttl(f, n), 0);
	assert_int_equal(f[14 + 7], 1);
	assert_int_equal(flow_mod_dec_ttl(f, n), 1);
	assert_int_equal(f[14 + 7], 1);
	assert_true(ref_check_frame(f, n, &what));
	/* Not IP, or an IPv4 header cut short. */
	k.dl_type = htons(0x0806);
	n = flow_key_compose(&k, f, sizeof(f));
	assert_int_equal(flow_mod_dec_ttl(f, n), -1);
	k.dl_type = htons(0x0800);
	k.nw_ttl = 5;
	n = flow_key_compose(&k, f, sizeof(f));
	assert_int_equal(flow_mod_dec_ttl(f, 14 + 19), -1);
	assert_int_equal(flow_mod_dec_ttl(f, 14 + 20), 0);
}

/* IPv6 UDP behind a routing header with SEGLEFT segments left (one address). */
static uint32_t ipv6_routed(uint8_t *f, uint8_t segleft)
{
	uint8_t *ip = f + 14, *rh = ip + 40, *udp = rh + 24;
	uint32_t sum;
	uint16_t cs;

	memset(f, 0, 128);
	f[12] = 0x86;
	f[13] = 0xdd;
	ip[0] = 0x60;
	ip[5] = 24 + 12;
	ip[6] = 43;
	ip[7] = 64;
	ip[8] = 0x20;
	ip[23] = 1;
	ip[24] = 0x20;
	ip[39] = 2;
	rh[0] = 17;
	rh[1] = 2;
	rh[3] = segleft;
	rh[8] = 0x20;
	rh[23] = 3;                /* the final destination */
	udp[1] = 7;
	udp[3] = 9;
	udp[5] = 12;
	memcpy(udp + 8, "abcd", 4);
	/* The checksum with the final destination in the pseudo-header (RFC 8200, 8.1). */
	sum = ref_sum(ip + 8, 16, 0);
	sum = ref_sum(segleft ? rh + 8 : ip + 24, 16, sum);
	sum = ref_sum(udp, 12, sum + 17 + 12);
	cs = (uint16_t)~sum;
	udp[6] = (uint8_t)(cs >> 8);
	udp[7] = (uint8_t)cs;
	return 14 + 40 + 24 + 12;
}

static void ipv6_dst_behind_a_routing_header(void **state)
{
	uint8_t f[128], v[16], cs[2];
	uint32_t n;
	struct flow_key k;

	(void)state;
	memset(v, 0x42, sizeof(v));
	n = ipv6_routed(f, 1);
	memcpy(cs, f + 14 + 40 + 24 + 6, 2);
	assert_int_equal(flow_mod_set_field(f, n, FLOW_FIELD_IPV6_DST, v), 0);
	assert_memory_equal(f + 14 + 40 + 24 + 6, cs, 2);
	assert_true(flow_key_extract(f, n, 0, &k));
	assert_int_equal(k.nw_proto, 17);
	assert_int_equal(ntohs(k.tp_dst), 9);
	/* A changed source does change it. */
	assert_int_equal(flow_mod_set_field(f, n, FLOW_FIELD_IPV6_SRC, v), 0);
	assert_memory_not_equal(f + 14 + 40 + 24 + 6, cs, 2);
	/* No segments left: the header's destination is the final one. */
	n = ipv6_routed(f, 0);
	memcpy(cs, f + 14 + 40 + 24 + 6, 2);
	assert_int_equal(flow_mod_set_field(f, n, FLOW_FIELD_IPV6_DST, v), 0);
	assert_memory_not_equal(f + 14 + 40 + 24 + 6, cs, 2);
}

/* Every modification on composed frames cut at every length, each in a buffer of exactly
 * that size (with headroom): nothing read or written out of bounds (under ASan), a frame
 * the modification does not apply to is left unchanged, and set_field applies exactly when
 * extraction found the field. */
static void cut_frames(void **state)
{
	struct flow_key k, ck;
	uint8_t f[128], v[16];
	unsigned int i;
	uint32_t n, len;
	int fld;
	bool l3;

	(void)state;
	memset(v, 0x5a, sizeof(v));
	for (i = 0; i < 300; i++) {
		random_key(&k);
		n = flow_key_compose(&k, f, sizeof(f));
		for (len = 0; len <= n; len++) {
			uint8_t *base, *d = with_headroom(f, len, &base);
			uint32_t l = len;

			flow_key_extract(d, len, 0, &ck);
			/* Whether the cut left a whole IP header. */
			l3 = (k.dl_type == htons(0x0800) || k.dl_type == htons(0x86dd)) &&
			     len >= 14u + (k.vlan_tci ? 4 : 0) +
				    (k.dl_type == htons(0x86dd) ? 40 : 20);
			for (fld = 0; fld < FLOW_FIELD_COUNT; fld++) {
				struct flow_key want = ck;
				bool ok = len >= 14 && expect(&want, (enum flow_field)fld, v);
				int rc = flow_mod_set_field(d, len, (enum flow_field)fld, v);

				if (fld >= FLOW_FIELD_NW_SRC && fld <= FLOW_FIELD_IPV6_LABEL && !l3)
					ok = false;
				/* Ports of a cut L4 header: extraction has none, nor has set. */
				if ((fld == FLOW_FIELD_TP_SRC || fld == FLOW_FIELD_TP_DST) &&
				    ck.tp_src == 0 && ck.tp_dst == 0 && k.tp_src != 0)
					ok = false;
				if (rc != (ok ? 0 : -1))
					fail_msg("case %u cut at %u: field %d gives %d", i, len, fld,
						 rc);
				if (rc == -1)
					assert_memory_equal(d, f, len);
				else
					memcpy(d, f, len);
			}
			assert_int_equal(flow_mod_dec_ttl(d, len) == -1, !l3);
			memcpy(d, f, len);
			if (flow_mod_push_vlan(&d, &l, 0x8100) == 0) {
				assert_int_equal(flow_mod_pop_vlan(&d, &l), 0);
				assert_int_equal(l, len);
				assert_memory_equal(d, f, len);
			}
			assert_int_equal(flow_mod_pop_vlan(&d, &l),
					 len >= 18 && ck.vlan_tci != 0 ? 0 : -1);
			free(base);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_set_field_on_every_kind),
		cmocka_unit_test(udp_checksum_zero_stays_zero),
		cmocka_unit_test(udp_checksum_never_becomes_zero),
		cmocka_unit_test(push_and_pop_vlan),
		cmocka_unit_test(dec_ttl_and_expiry),
		cmocka_unit_test(ipv6_dst_behind_a_routing_header),
		cmocka_unit_test(cut_frames),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
