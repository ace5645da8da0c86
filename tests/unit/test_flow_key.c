/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow key extraction (src/flow_key.c) on real frames (written by scapy, as hex), field by
 * field; the same frames cut at every length, each copy in a buffer of exactly that many
 * bytes (so ASan catches a read past the end); and compose -> extract round trips for
 * random keys of every kind, with each composed frame's checksums checked.
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

struct want {
	const char *name, *hex;
	uint16_t dl_type, vlan_tci;
	uint8_t nw_proto, nw_tos, nw_ttl, nw_frag;
	uint16_t tp_src, tp_dst, tcp_flags;
	uint32_t ipv6_label;
	const char *src, *dst;     /* IPv4 or IPv6 addresses as text, NULL: none */
	uint32_t nw_at;            /* the length from which the L3 fields are there */
	uint32_t l4_at;            /* the length from which the L4 fields are there; 0 none */
};

static const struct want frames[] = {
	{ "tcp4", "00112233445566778899aabb080045b90028000700003f06670e0a0000010a00000204d2005000000001000000025012200076ab0000",
	  0x0800, 0, 6, 0xb9, 63, 0, 1234, 80, 0x012, 0, "10.0.0.1", "10.0.0.2", 34, 54 },
	{ "udp4_vlan", "00112233445566778899aabb8100a064080045000021000100004011f75cc0a8010ac0a8011414e90035000d237568656c6c6f",
	  0x0800, 0xb064, 17, 0, 64, 0, 5353, 53, 0, 0, "192.168.1.10", "192.168.1.20", 38, 46 },
	{ "udp4_qinq", "00112233445566778899aabb88a8000708004500001c0001000040116abd0102030405060708000100020008efc7",
	  0x0800, 0x1007, 17, 0, 64, 0, 1, 2, 0, 0, "1.2.3.4", "5.6.7.8", 38, 46 },
	{ "icmp4", "00112233445566778899aabb08004500002000010000400164d80a0101010a0101020800192d0001000170696e67",
	  0x0800, 0, 1, 0, 64, 0, 8, 0, 0, 0, "10.1.1.1", "10.1.1.2", 34, 42 },
	{ "tcp4_opts", "00112233445566778899aabb08004700003000010000400659be0a0000010a000002070704000000000000169c40000000000000000050182000df730000",
	  0x0800, 0, 6, 0, 64, 0, 22, 40000, 0x018, 0, "10.0.0.1", "10.0.0.2", 42, 62 },
	{ "frag4_first", "00112233445566778899aabb08004500002c00012000401146bd0a0000010a00000303e807d00064123478787878787878787878787878787878",
	  0x0800, 0, 17, 0, 64, FLOW_FRAG_ANY, 1000, 2000, 0, 0, "10.0.0.1", "10.0.0.3", 34, 42 },
	{ "frag4_later", "00112233445566778899aabb08004500002c00010003401166ba0a0000010a000003797979797979797979797979797979797979797979797979",
	  0x0800, 0, 17, 0, 64, FLOW_FRAG_ANY | FLOW_FRAG_LATER, 0, 0, 0, 0, "10.0.0.1", "10.0.0.3", 34, 0 },
	{ "sctp4", "00112233445566778899aabb080045000020000100004084664f0a0000050a0000060f1c0f1d000000005bb5ce4e",
	  0x0800, 0, 132, 0, 64, 0, 3868, 3869, 0, 0, "10.0.0.5", "10.0.0.6", 34, 46 },
	{ "tcp6", "00112233445566778899aabb86dd62dabcde0014061120010db800000000000000000000000120010db800000000000000000000000201bbc7380000000000000000502920006b530000",
	  0x86dd, 0, 6, 0x2d, 17, 0, 443, 51000, 0x029, 0xabcde, "2001:db8::1", "2001:db8::2", 54, 74 },
	{ "udp6_ext", "00112233445566778899aabb86dd6000000000200001fe800000000000000000000000000001ff0200000000000000000000000000012b000104000000003c000000000000001100010400000000022202230008fe13",
	  0x86dd, 0, 17, 0, 1, 0, 546, 547, 0, 0, "fe80::1", "ff02::1", 54, 86 },
	{ "frag6_first", "00112233445566778899aabb86dd6000000000182c4020010db800000000000000000000000120010db800000000000000000000000211000001000000050007000900c843217a7a7a7a7a7a7a7a",
	  0x86dd, 0, 17, 0, 64, FLOW_FRAG_ANY, 7, 9, 0, 0, "2001:db8::1", "2001:db8::2", 54, 70 },
	{ "frag6_later", "00112233445566778899aabb86dd6000000000182c4020010db800000000000000000000000120010db800000000000000000000000211000320000000057a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a",
	  0x86dd, 0, 17, 0, 64, FLOW_FRAG_ANY | FLOW_FRAG_LATER, 0, 0, 0, 0, "2001:db8::1", "2001:db8::2", 54, 0 },
	{ "icmp6", "00112233445566778899aabb86dd6000000000083a4020010db800000000000000000000000120010db80000000000000000000000028000244500010002",
	  0x86dd, 0, 58, 0, 64, 0, 128, 0, 0, 0, "2001:db8::1", "2001:db8::2", 54, 62 },
	{ "arp_req", "ffffffffffff66778899aabb0806000108000604000166778899aabb0a0000010000000000000a000009",
	  0x0806, 0, 1, 0, 0, 0, 0, 0, 0, 0, "10.0.0.1", "10.0.0.9", 42, 0 },
	{ "arp_reply_vlan", "00112233445566778899aabb8100effe0806000108000604000266778899aabb0a0000090011223344550a000001",
	  0x0806, 0xfffe, 2, 0, 0, 0, 0, 0, 0, 0, "10.0.0.9", "10.0.0.1", 46, 0 },
	{ "llc", "0180c200000066778899aabb00264242030000000000000000000000000000000000000000000000000000000000000000000000",
	  0x05ff, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0 },
	{ "snap_ip", "00112233445566778899aabb0024aaaa0300000008004500001c00010000051190af0a0909090a080808006300620008d9f7",
	  0x0800, 0, 17, 0, 5, 0, 99, 98, 0, 0, "10.9.9.9", "10.8.8.8", 42, 50 },
};

static uint32_t load(const struct want *w, uint8_t *buf)
{
	return hex_to_bytes(w->hex, buf, 256);
}

/* Every field of KEY against W, for the frame F. */
static void check_fields(const struct want *w, const uint8_t *f, const struct flow_key *key)
{
	uint8_t a4[4], a6[16];

	print_message("frame %s\n", w->name);
	assert_int_equal(key->in_port, 3);
	assert_int_equal(key->metadata, 0);
	assert_int_equal(key->tun_id, 0);
	assert_memory_equal(key->dl_dst, f, 6);
	assert_memory_equal(key->dl_src, f + 6, 6);
	assert_int_equal(ntohs(key->dl_type), w->dl_type);
	assert_int_equal(ntohs(key->vlan_tci), w->vlan_tci);
	assert_int_equal(key->nw_proto, w->nw_proto);
	assert_int_equal(key->nw_tos, w->nw_tos);
	assert_int_equal(key->nw_ttl, w->nw_ttl);
	assert_int_equal(key->nw_frag, w->nw_frag);
	assert_int_equal(ntohs(key->tp_src), w->tp_src);
	assert_int_equal(ntohs(key->tp_dst), w->tp_dst);
	assert_int_equal(ntohs(key->tcp_flags), w->tcp_flags);
	assert_int_equal(ntohl(key->ipv6_label), w->ipv6_label);
	assert_int_equal(key->pad0, 0);
	assert_int_equal(key->pad1, 0);
	if (w->src != NULL && inet_pton(AF_INET, w->src, a4) == 1) {
		assert_memory_equal(&key->nw_src, a4, 4);
		assert_int_equal(inet_pton(AF_INET, w->dst, a4), 1);
		assert_memory_equal(&key->nw_dst, a4, 4);
		memset(a6, 0, 16);
		assert_memory_equal(key->ipv6_src, a6, 16);
		assert_memory_equal(key->ipv6_dst, a6, 16);
	} else if (w->src != NULL) {
		assert_int_equal(inet_pton(AF_INET6, w->src, a6), 1);
		assert_memory_equal(key->ipv6_src, a6, 16);
		assert_int_equal(inet_pton(AF_INET6, w->dst, a6), 1);
		assert_memory_equal(key->ipv6_dst, a6, 16);
		assert_int_equal(key->nw_src, 0);
		assert_int_equal(key->nw_dst, 0);
	} else {
		assert_int_equal(key->nw_src, 0);
		assert_int_equal(key->nw_dst, 0);
	}
}

static void every_protocol_every_field(void **state)
{
	uint8_t f[256];
	struct flow_key key;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		uint32_t n = load(&frames[i], f);

		memset(&key, 0xa5, sizeof(key));
		assert_true(flow_key_extract(f, n, 3, &key));
		check_fields(&frames[i], f, &key);
	}
}

/* A key's fields, for the cut-frame checks: offset and size. */
#define FIELD(name) { #name, offsetof(struct flow_key, name), sizeof(((struct flow_key *)0)->name) }
static const struct { const char *name; size_t off, size; } fields[] = {
	FIELD(dl_type), FIELD(vlan_tci), FIELD(dl_dst), FIELD(dl_src), FIELD(nw_proto),
	FIELD(nw_tos), FIELD(nw_ttl), FIELD(nw_frag), FIELD(tp_src), FIELD(tp_dst),
	FIELD(tcp_flags), FIELD(ipv6_label), FIELD(nw_src), FIELD(nw_dst), FIELD(ipv6_src),
	FIELD(ipv6_dst), FIELD(pad0), FIELD(pad1), FIELD(metadata), FIELD(tun_id),
};

static bool is_zero(const uint8_t *p, size_t n)
{
	while (n-- > 0)
		if (*p++ != 0)
			return false;
	return true;
}

/*
 * Every frame cut at every length, in a heap buffer of exactly that size: a field is either
 * the full frame's or zero (but for what a cut changes by design: dl_type at a cut tag or
 * SNAP header, an IPv6 nw_proto naming the extension header cut), the L3 fields are there
 * exactly from nw_at and the L4 fields from l4_at.
 */
static void cut_frames_give_the_fields_before_the_cut(void **state)
{
	uint8_t full[256];
	struct flow_key fk, key;
	size_t i, j;
	uint32_t n, len;

	(void)state;
	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		const struct want *w = &frames[i];

		n = load(w, full);
		assert_true(flow_key_extract(full, n, 3, &fk));
		for (len = 0; len <= n; len++) {
			uint8_t *cut = malloc(len ? len : 1);

			memcpy(cut, full, len);
			assert_int_equal(flow_key_extract(cut, len, 3, &key), len >= 14);
			free(cut);
			assert_int_equal(key.in_port, 3);
			for (j = 0; j < sizeof(fields) / sizeof(fields[0]); j++) {
				const uint8_t *a = (const uint8_t *)&key + fields[j].off;
				const uint8_t *b = (const uint8_t *)&fk + fields[j].off;
				uint16_t t = ntohs(key.dl_type);

				if (memcmp(a, b, fields[j].size) == 0 || is_zero(a, fields[j].size))
					continue;
				if (fields[j].off == offsetof(struct flow_key, dl_type) &&
				    (t == 0x8100 || t == 0x88a8 || t == 0x05ff))
					continue;
				if (fields[j].off == offsetof(struct flow_key, nw_proto) &&
				    t == 0x86dd && (*a == 43 || *a == 44 || *a == 60))
					continue;
				fail_msg("%s cut at %u: field %s", w->name, len, fields[j].name);
			}
			if (w->nw_at != 0) {
				bool l3 = key.nw_src != 0 || key.ipv6_src[15] != 0;

				if (l3 != (len >= w->nw_at))
					fail_msg("%s cut at %u: L3 fields %d", w->name, len, l3);
			}
			if (w->l4_at != 0) {
				bool l4 = key.tp_src != 0;

				if (l4 != (len >= w->l4_at))
					fail_msg("%s cut at %u: L4 fields %d", w->name, len, l4);
			}
		}
		assert_true(flow_key_equal(&key, &fk));
	}
}

/* Frames built by hand from a scapy frame, for the cases scapy would not write. */
static void odd_headers(void **state)
{
	uint8_t f[256];
	struct flow_key key;
	uint32_t n;

	(void)state;
	/* IHL 4: not an IPv4 header; only the L2 fields. */
	n = load(&frames[0], f);
	f[14] = 0x44;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(ntohs(key.dl_type), 0x0800);
	assert_int_equal(key.nw_src, 0);
	assert_int_equal(key.nw_ttl, 0);
	assert_int_equal(key.nw_proto, 0);
	/* Version 6 inside an IPv4 EtherType: the same. */
	f[14] = 0x65;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_src, 0);
	/* IHL 15 longer than the frame. */
	f[14] = 0x4f;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_src, 0);
	/* Total length below IHL * 4: the IPv4 fields, no L4. */
	n = load(&frames[0], f);
	f[16] = 0;
	f[17] = 16;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 6);
	assert_int_equal(key.nw_ttl, 63);
	assert_int_equal(key.tp_src, 0);
	assert_int_equal(key.tcp_flags, 0);
	/* Total length 20: the TCP header that follows is padding, not read. */
	f[17] = 20;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 6);
	assert_int_equal(key.tp_dst, 0);
	/* Total length above the frame: L4 up to the frame's end. */
	f[16] = 0x05;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(ntohs(key.tp_dst), 80);
	/* ARP with a hardware type other than Ethernet: no ARP fields. */
	n = load(&frames[13], f);
	f[15] = 6;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(ntohs(key.dl_type), 0x0806);
	assert_int_equal(key.nw_proto, 0);
	assert_int_equal(key.nw_src, 0);
	/* ARP opcode above 255: not matched, the addresses are. */
	n = load(&frames[13], f);
	f[20] = 1;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 0);
	assert_int_equal(ntohl(key.nw_dst), 0x0a000009);
	/* 802.1ad outer, 802.1Q inner: the outer tag, dl_type 0x8100, no L3. */
	n = load(&frames[1], f);
	memmove(f + 16, f + 12, n - 12);
	f[12] = 0x88;
	f[13] = 0xa8;
	f[14] = 0x20;
	f[15] = 0x05;
	assert_true(flow_key_extract(f, n + 4, 0, &key));
	assert_int_equal(ntohs(key.vlan_tci), 0x3005);
	assert_int_equal(ntohs(key.dl_type), 0x8100);
	assert_int_equal(key.nw_src, 0);
	/* A tag with TCI 0 (priority tagged): still a tag, CFI set. */
	n = load(&frames[1], f);
	f[14] = 0;
	f[15] = 0;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(ntohs(key.vlan_tci), FLOW_VLAN_CFI);
	assert_int_equal(ntohs(key.tp_dst), 53);
}

/* IPv6 with N destination-options headers (8 bytes each) before UDP 1 -> 2. */
static uint32_t ipv6_chain(uint8_t *f, unsigned int n)
{
	static const uint8_t head[] = { 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
		0xaa, 0xbb, 0x86, 0xdd, 0x60, 0, 0, 0 };
	uint32_t len = 14 + 40 + n * 8 + 8;
	uint8_t *ip = f + 14, *p;
	unsigned int i;

	memset(f, 0, len);
	memcpy(f, head, sizeof(head));
	ip[4] = (uint8_t)((len - 54) >> 8);
	ip[5] = (uint8_t)(len - 54);
	ip[6] = n ? 60 : 17;
	ip[7] = 9;
	ip[23] = 1;
	ip[39] = 2;
	p = ip + 40;
	for (i = 0; i < n; i++, p += 8)
		p[0] = i + 1 < n ? 60 : 17;
	p[1] = 1;
	p[3] = 2;
	p[5] = 8;
	return len;
}

static void ipv6_extension_headers_are_bounded(void **state)
{
	uint8_t f[256];
	struct flow_key key;
	uint32_t n;

	(void)state;
	n = ipv6_chain(f, 8);
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 17);
	assert_int_equal(ntohs(key.tp_dst), 2);
	n = ipv6_chain(f, 9);
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 60);
	assert_int_equal(key.tp_dst, 0);
	assert_int_equal(key.ipv6_dst[15], 2);
	/* A header longer than the payload: stopped there. */
	n = ipv6_chain(f, 2);
	f[54 + 1] = 200;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 60);
	assert_int_equal(key.tp_src, 0);
	/* The payload length ends the packet: UDP in the padding is not read. */
	n = ipv6_chain(f, 0);
	f[14 + 5] = 0;
	assert_true(flow_key_extract(f, n, 0, &key));
	assert_int_equal(key.nw_proto, 17);
	assert_int_equal(key.tp_dst, 0);
}

static void too_short_for_ethernet(void **state)
{
	uint8_t f[14] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 8, 0 };
	struct flow_key key;

	(void)state;
	memset(&key, 0xff, sizeof(key));
	assert_false(flow_key_extract(f, 13, 42, &key));
	assert_int_equal(key.in_port, 42);
	key.in_port = 0;
	assert_true(is_zero((const uint8_t *)&key, sizeof(key)));
	assert_true(flow_key_extract(f, 14, 42, &key));
	assert_int_equal(ntohs(key.dl_type), 0x0800);
}

/* A small deterministic generator (xorshift64*). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

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

/* A random key that extraction can give (see flow_key_compose()). */
static void random_key(struct flow_key *k)
{
	static const uint8_t v4_protos[] = { 6, 17, 132, 1, 47, 58, 0, 255 };
	static const uint8_t v6_protos[] = { 6, 17, 132, 58, 1, 0, 43, 60, 44, 50, 255 };
	static const uint8_t frags[] = { 0, 0, FLOW_FRAG_ANY, FLOW_FRAG_ANY | FLOW_FRAG_LATER };
	static const uint16_t others[] = { 0x88cc, 0x8847, 0x0842, 0x05ff, 0x8100 };
	unsigned int kind = (unsigned int)(rnd() % 5);

	memset(k, 0, sizeof(*k));
	k->in_port = 7;
	rnd_bytes((uint8_t *)k + offsetof(struct flow_key, dl_dst), 12);
	if (rnd() & 1)
		k->vlan_tci = htons((uint16_t)((rnd() & 0xefff) | FLOW_VLAN_CFI));
	if (kind == 0 || kind == 1) {
		bool v6 = kind == 1;

		k->dl_type = htons(v6 ? 0x86dd : 0x0800);
		k->nw_tos = (uint8_t)rnd();
		k->nw_ttl = (uint8_t)rnd();
		k->nw_frag = frags[rnd() % 4];
		k->nw_proto = v6 ? v6_protos[rnd() % sizeof(v6_protos)] :
				   v4_protos[rnd() % sizeof(v4_protos)];
		if (v6) {
			rnd_bytes((uint8_t *)k + offsetof(struct flow_key, ipv6_src), 32);
			k->ipv6_label = htonl((uint32_t)rnd() & 0xfffff);
		} else {
			rnd_bytes((uint8_t *)k + offsetof(struct flow_key, nw_src), 8);
		}
		if (k->nw_frag & FLOW_FRAG_LATER)
			return;
		switch (k->nw_proto) {
		case 6:
			k->tcp_flags = htons((uint16_t)(rnd() & 0x0fff));
			/* fall through */
		case 17:
		case 132:
			rnd_bytes((uint8_t *)k + offsetof(struct flow_key, tp_src), 4);
			break;
		case 1:
		case 58:
			if (k->nw_proto == (v6 ? 58 : 1)) {
				k->tp_src = htons((uint16_t)(rnd() & 0xff));
				k->tp_dst = htons((uint16_t)(rnd() & 0xff));
			}
			break;
		}
	} else if (kind == 2) {
		k->dl_type = htons(0x0806);
		k->nw_proto = (uint8_t)rnd();
		rnd_bytes((uint8_t *)k + offsetof(struct flow_key, nw_src), 8);
	} else {
		k->dl_type = htons(others[rnd() % sizeof(others) / sizeof(others[0])]);
		if (k->dl_type == htons(0x8100) && k->vlan_tci == 0)
			k->dl_type = htons(0x88cc);
	}
}

static void compose_then_extract_round_trips(void **state)
{
	uint8_t f[128];
	struct flow_key k, back;
	struct ref_checked what;
	unsigned int i, ip4 = 0, l4 = 0;

	(void)state;
	for (i = 0; i < 20000; i++) {
		uint32_t n;

		random_key(&k);
		n = flow_key_compose(&k, f, sizeof(f));
		assert_true(n >= 60 && n <= sizeof(f));
		assert_true(flow_key_extract(f, n, 7, &back));
		if (!flow_key_equal(&k, &back)) {
			uint32_t j;

			for (j = 0; j < n; j++)
				print_message("%02x", f[j]);
			print_message("\n");
			fail_msg("key %u does not round-trip", i);
		}
		assert_true(ref_check_frame(f, n, &what));
		ip4 += what.ip4;
		l4 += what.l4;
	}
	print_message("checked %u IPv4 headers, %u L4 checksums\n", ip4, l4);
	/* The checks above did check checksums. */
	assert_true(ip4 > 2000);
	assert_true(l4 > 1000);
	/* Too small a buffer. */
	assert_int_equal(flow_key_compose(&k, f, 59), 0);
}

/* The CRC32c check value (RFC 3720, B.4: 32 bytes of zero) and scapy's SCTP frame. */
static void sctp_crc32c(void **state)
{
	uint8_t z[32] = { 0 }, f[128];
	uint32_t n;
	struct ref_checked what;

	(void)state;
	assert_int_equal(flow_sctp_crc32c(z, 32), 0x8a9136aa);
	assert_int_equal(ref_crc32c(z, 32), 0x8a9136aa);
	n = load(&frames[7], f);
	assert_true(ref_check_frame(f, n, &what));
	assert_true(what.l4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_protocol_every_field),
		cmocka_unit_test(cut_frames_give_the_fields_before_the_cut),
		cmocka_unit_test(odd_headers),
		cmocka_unit_test(ipv6_extension_headers_are_bounded),
		cmocka_unit_test(too_short_for_ethernet),
		cmocka_unit_test(compose_then_extract_round_trips),
		cmocka_unit_test(sctp_crc32c),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
