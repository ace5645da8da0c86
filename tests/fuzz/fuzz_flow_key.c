/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for flow mode's key extraction, composition and packet modifications
 * (src/flow_key.c, src/flow_mod.c). The input is a frame. Its key, composed into a frame and
 * extracted again, must come back equal whenever it is a key composition can express (all
 * but a frame shorter than Ethernet, and a tag cut short, whose dl_type is a TPID with
 * no TCI); every modification runs on a
 * copy in a buffer of exactly the frame's size plus 4 bytes of headroom, so ASan sees any
 * access out of bounds; dec_ttl and every set_field must keep a valid IPv4 header checksum
 * valid, and valid TCP, UDP, ICMP, ICMPv6 and SCTP checksums valid (checked by the plain
 * recomputation of tests/unit/flow_test_util.h); push_vlan then pop_vlan gives the frame
 * back. `make fuzz` runs it for long, `make test` for 20 seconds.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_key.h"
#include "flow_mod.h"
#include "flow_test_util.h"

static bool expressible(const struct flow_key *k)
{
	/* A frame shorter than Ethernet has dl_type 0, which composes as 802.3 (0x05ff). */
	if (k->dl_type == 0)
		return false;
	return !(k->vlan_tci == 0 &&
		 (k->dl_type == htons(0x8100) || k->dl_type == htons(0x88a8)));
}

static void die(const char *what, const uint8_t *f, uint32_t len)
{
	uint32_t i;

	fprintf(stderr, "fuzz_flow_key: %s; frame:\n", what);
	for (i = 0; i < len; i++)
		fprintf(stderr, "%02x", f[i]);
	fprintf(stderr, "\n");
	abort();
}

/* Whether frame F's IPv4 header checksum is valid (false when it has none). */
static bool ip4_ok(const uint8_t *f, uint32_t len)
{
	uint32_t off = 14, ihl;
	uint16_t t;

	if (len < 14)
		return false;
	t = ref_get16(f + 12);
	if ((t == 0x8100 || t == 0x88a8) && len >= 18) {
		t = ref_get16(f + 16);
		off = 18;
	}
	if (t != 0x0800 || len < off + 20 || (f[off] >> 4) != 4)
		return false;
	ihl = (f[off] & 15u) * 4;
	return ihl >= 20 && off + ihl <= len && ref_sum(f + off, ihl, 0) == 0xffff;
}

static bool key_is_ip(const struct flow_key *k)
{
	return k->dl_type == htons(0x0800) || k->dl_type == htons(0x86dd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct flow_key k, k2;
	struct ref_checked what;
	uint8_t f[128], value[16];
	uint32_t len = size > 4096 ? 4096 : (uint32_t)size, n, i, l;
	bool ip4, sums;
	uint8_t *base, *d;
	int fld, rc;

	flow_key_extract(data, len, 5, &k);
	n = flow_key_compose(&k, f, sizeof(f));
	if (n < 60)
		die("compose failed", data, len);
	flow_key_extract(f, n, 5, &k2);
	if (expressible(&k) && !flow_key_equal(&k, &k2))
		die("compose/extract does not round-trip", data, len);
	if (!ref_check_frame(f, n, &what))
		die("a composed frame has a bad checksum", f, n);

	base = malloc(len + 4);
	ip4 = ip4_ok(data, len);
	sums = ref_check_frame(data, len, &what);
	for (i = 0; i < sizeof(value); i++)
		value[i] = (uint8_t)(len > i ? data[len - 1 - i] ^ 0x5a : i);
	for (fld = 0; fld < FLOW_FIELD_COUNT; fld++) {
		d = base + 4;
		memcpy(d, data, len);
		rc = flow_mod_set_field(d, len, (enum flow_field)fld, value);
		if (rc == -1 && memcmp(d, data, len) != 0)
			die("set_field -1 changed the frame", data, len);
		if (ip4 && !ip4_ok(d, len))
			die("set_field broke the IPv4 header checksum", data, len);
		if (sums && fld != FLOW_FIELD_IPV6_DST && !ref_check_frame(d, len, &what))
			die("set_field broke a checksum", data, len);
		/* The field reads back (through extraction) as written, where extraction sees
		 * the IP header (modifications also reach it behind two tags, a switch's own
		 * push onto a tagged frame; extraction looks behind one). */
		if (rc == 0 && fld == FLOW_FIELD_NW_TTL && key_is_ip(&k)) {
			flow_key_extract(d, len, 5, &k2);
			if (k2.nw_ttl != value[0])
				die("set_field ttl does not read back", data, len);
		}
	}
	d = base + 4;
	memcpy(d, data, len);
	rc = flow_mod_dec_ttl(d, len);
	if ((rc != 0 && memcmp(d, data, len) != 0) || (ip4 && !ip4_ok(d, len)) ||
	    (sums && !ref_check_frame(d, len, &what)))
		die("dec_ttl", data, len);
	if (rc == 0 && key_is_ip(&k)) {
		flow_key_extract(d, len, 5, &k2);
		if (k2.nw_ttl != k.nw_ttl - 1)
			die("dec_ttl does not read back", data, len);
	}
	/* Non-IP for extraction; a second tag is the one case where the modification looks
	 * further (a switch's push onto a tagged frame). */
	if (rc != -1 && !key_is_ip(&k) &&
	    !(k.vlan_tci != 0 && (k.dl_type == htons(0x8100) || k.dl_type == htons(0x88a8))))
		die("dec_ttl on a non-IP frame", data, len);

	d = base + 4;
	memcpy(d, data, len);
	l = len;
	if (flow_mod_push_vlan(&d, &l, 0x88a8) == 0) {
		if (d != base || l != len + 4)
			die("push_vlan", data, len);
		flow_key_extract(d, l, 5, &k2);
		if (k2.vlan_tci != (k.vlan_tci | htons(FLOW_VLAN_CFI)))
			die("push_vlan tci", data, len);
		if (flow_mod_pop_vlan(&d, &l) != 0 || l != len || memcmp(d, data, len) != 0)
			die("push then pop", data, len);
	} else if (len >= 14) {
		die("push_vlan refused an Ethernet frame", data, len);
	}
	rc = flow_mod_pop_vlan(&d, &l);
	if ((rc == 0) != (k.vlan_tci != 0))
		die("pop_vlan on a frame whose key says otherwise", data, len);
	free(base);
	return 0;
}
