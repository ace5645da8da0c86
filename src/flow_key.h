/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow keys: every header field flow mode matches on, pulled out of a frame once. A key is a
 * fixed 96-byte structure of twelve 64-bit words, so a mask is applied and compared word by
 * word and a key hashes as one block; fields absent from a frame are zero, as OpenFlow
 * matches them (an IPv4 field of an ARP frame is never set, a prerequisite keeps rules from
 * asking for it).
 *
 * Byte order: the packet's fields stay in network order, as they are on the wire, so extraction
 * copies and never swaps; IN_PORT and METADATA are ours and in host order.
 *
 * Shared slots, as in OVS's struct flow: ICMP and ICMPv6 type and code sit in the low bytes of
 * TP_SRC and TP_DST; an ARP frame's opcode is NW_PROTO (its low byte; opcodes above 255 are
 * not matched), its sender and target protocol addresses NW_SRC and NW_DST.
 *
 * VLAN_TCI is the 802.1Q tag's TCI with the CFI/DEI bit (0x1000) forced on when a tag is
 * present, as OVS does, so "no tag" (tci == 0) and "any tag" (tci & 0x1000) are both
 * matchable; DL_TYPE is the type after the tag.
 *
 * Pure code (no mbuf, no EAL state): the data path, trace and the fuzz target run the same.
 */
#ifndef SLUICE_FLOW_KEY_H
#define SLUICE_FLOW_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLOW_KEY_WORDS 12
#define FLOW_VLAN_CFI 0x1000       /* host order; in the key as rte_cpu_to_be_16(...) */

/* nw_frag bits (OVS's ip_frag) */
#define FLOW_FRAG_ANY 0x01         /* a fragment: MF set or a non-zero offset */
#define FLOW_FRAG_LATER 0x02       /* not the first fragment: no L4 header */

struct flow_key {
	uint64_t metadata;         /* OpenFlow metadata: written by write_metadata, host order */
	uint64_t tun_id;           /* tunnel id (VXLAN VNI), for flow-based tunnels; host order */
	uint32_t in_port;          /* switch port index, host order */
	uint16_t dl_type;          /* be: EtherType after any 802.1Q tag */
	uint16_t vlan_tci;         /* be: 0 untagged; else the TCI with FLOW_VLAN_CFI set */
	uint8_t dl_dst[6];
	uint8_t dl_src[6];
	uint8_t nw_proto;          /* IP protocol / next header; ARP: opcode */
	uint8_t nw_tos;            /* the whole TOS / traffic class byte: DSCP << 2 | ECN */
	uint8_t nw_ttl;            /* IPv4 TTL / IPv6 hop limit */
	uint8_t nw_frag;           /* FLOW_FRAG_* */
	uint16_t tp_src;           /* be: TCP/UDP/SCTP port; ICMP(v6): type in the low byte */
	uint16_t tp_dst;           /* be: TCP/UDP/SCTP port; ICMP(v6): code in the low byte */
	uint16_t tcp_flags;        /* be: the 12 flag bits of the TCP header */
	uint16_t pad0;
	uint32_t ipv6_label;       /* be: the 20-bit flow label */
	uint32_t nw_src;           /* be: IPv4 source; ARP: sender protocol address */
	uint32_t nw_dst;           /* be: IPv4 destination; ARP: target protocol address */
	uint32_t pad1;
	uint8_t ipv6_src[16];
	uint8_t ipv6_dst[16];
} __attribute__((aligned(8)));

_Static_assert(sizeof(struct flow_key) == FLOW_KEY_WORDS * 8, "flow key is 12 words");

/*
 * A key seen as words. may_alias: a key written field by field and read as words (or the
 * other way round) is otherwise undefined under C's aliasing rules, and GCC -O3 does
 * reorder such loads before the field stores.
 */
typedef uint64_t __attribute__((may_alias)) flow_key_word;

/*
 * Fills KEY (wholly: every byte, padding included, is written) from the LEN bytes of a frame
 * at DATA received on switch port IN_PORT, with METADATA 0. Never reads past DATA + LEN.
 * Returns false for a frame too short for an Ethernet header (the key is then zero but for
 * in_port); a frame cut short further in yields the fields found up to the cut.
 */
bool flow_key_extract(const uint8_t *data, uint32_t len, uint32_t in_port,
		      struct flow_key *key);

/*
 * Builds a frame that extracts to KEY (trace: a described packet made real), with valid
 * IPv4 and L4 checksums and at least 60 bytes. Returns its length, or 0 when BUF_LEN is
 * too small (128 bytes always suffice).
 */
uint32_t flow_key_compose(const struct flow_key *key, uint8_t *buf, uint32_t buf_len);

static inline void flow_key_and(struct flow_key *dst, const struct flow_key *key,
				const struct flow_key *mask)
{
	const flow_key_word *k = (const flow_key_word *)key, *m = (const flow_key_word *)mask;
	flow_key_word *d = (flow_key_word *)dst;
	unsigned int i;

	for (i = 0; i < FLOW_KEY_WORDS; i++)
		d[i] = k[i] & m[i];
}

static inline void flow_key_or(struct flow_key *dst, const struct flow_key *src)
{
	const flow_key_word *s = (const flow_key_word *)src;
	flow_key_word *d = (flow_key_word *)dst;
	unsigned int i;

	for (i = 0; i < FLOW_KEY_WORDS; i++)
		d[i] |= s[i];
}

static inline bool flow_key_equal(const struct flow_key *a, const struct flow_key *b)
{
	const flow_key_word *x = (const flow_key_word *)a, *y = (const flow_key_word *)b;
	uint64_t diff = 0;
	unsigned int i;

	for (i = 0; i < FLOW_KEY_WORDS; i++)
		diff |= x[i] ^ y[i];
	return diff == 0;
}

/* Whether KEY & MASK == VALUE (VALUE already masked). */
static inline bool flow_key_matches(const struct flow_key *key, const struct flow_key *mask,
				    const struct flow_key *value)
{
	const flow_key_word *k = (const flow_key_word *)key, *m = (const flow_key_word *)mask;
	const flow_key_word *v = (const flow_key_word *)value;
	uint64_t diff = 0;
	unsigned int i;

	for (i = 0; i < FLOW_KEY_WORDS; i++)
		diff |= (k[i] & m[i]) ^ v[i];
	return diff == 0;
}

#endif
