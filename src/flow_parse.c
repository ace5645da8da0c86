/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reads and writes flow mode's rules, groups and meters in ovs-ofctl's syntax (man
 * ovs-fields, ovs-actions, ovs-ofctl). The parsers work on a stack copy of the text, cut in
 * place into items separated by commas or white space (parentheses nest: write_actions(a,b)
 * is one item); each item is "key", "key=value", "key:value" or "key(value)".
 *
 * A match is built slot by slot in the flow key: each field names a slot (offset, width) and
 * its bits; writing a field that overlaps bits already written with a different value is a
 * conflict ("tcp,udp"), where ovs-ofctl would silently keep the last. Prerequisites are
 * checked once the whole match is read, as OpenFlow does (order does not matter:
 * "tp_dst=80,tcp" is fine). Actions that write fields are checked against the match the same
 * way (OpenFlow 1.3's rule, which ovs-ofctl -O OpenFlow13 applies too).
 *
 * The formatters write the forms the parsers read back to the same spec, byte for byte; the
 * fuzz target (tests/fuzz/fuzz_flow_parse.c) holds them to that.
 *
 * Pure code: no allocation, no global state; safe on any thread.
 */
#include "flow.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define SEPARATORS ", \t\r\n"
#define FLOW_VLAN_VID_MASK 0x0fff
#define DEFAULT_PRIORITY 32768
#define CONTROLLER_MAX_LEN 65535   /* OVS's default: the whole packet */

/* ------------------------------------------------------------------------------------- */
/* Errors and small text helpers                                                          */

struct parser {
	char *err;
	size_t err_len;
	flow_port_lookup lookup;
	void *ctx;
};

static int fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;

	if (p->err != NULL && p->err_len > 0) {
		va_start(ap, fmt);
		vsnprintf(p->err, p->err_len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Copies TEXT into BUF, refusing what does not fit, and checks its parentheses balance so
 * that cutting items later never has to. */
static int copy_text(struct parser *p, const char *text, char *buf, size_t len)
{
	size_t n = text == NULL ? 0 : strnlen(text, len);
	int depth = 0;
	size_t i;

	if (text == NULL)
		return fail(p, "no text");
	if (n >= len)
		return fail(p, "text longer than %zu bytes", len - 1);
	memcpy(buf, text, n + 1);
	for (i = 0; i < n; i++) {
		depth += buf[i] == '(';
		depth -= buf[i] == ')';
		if (depth < 0)
			return fail(p, "unbalanced parentheses: ')' without '('");
	}
	if (depth != 0)
		return fail(p, "unbalanced parentheses: '(' without ')'");
	return 0;
}

static char *skip_separators(char *s)
{
	return s + strspn(s, SEPARATORS);
}

/* Cuts the item at *S (NUL-terminating it in place) and moves *S past it; NULL at the end.
 * A separator inside parentheses belongs to the item. */
static char *next_item(char **s)
{
	char *start = skip_separators(*s), *c = start;
	int depth = 0;

	if (*start == '\0') {
		*s = start;
		return NULL;
	}
	for (; *c != '\0'; c++) {
		if (*c == '(')
			depth++;
		else if (*c == ')')
			depth--;
		else if (depth == 0 && strchr(SEPARATORS, *c) != NULL)
			break;
	}
	if (*c != '\0')
		*c++ = '\0';
	*s = c;
	return start;
}

/* Splits ITEM at its first '=', ':' or '(' into key and value (NULL when there is none).
 * "key(value)" must close at the item's end. */
static int split_item(struct parser *p, char *item, char **key, char **value)
{
	size_t k = strcspn(item, "=:(");
	char sep = item[k];

	*key = item;
	*value = NULL;
	if (sep == '\0')
		return 0;
	item[k] = '\0';
	*value = item + k + 1;
	if (sep == '(') {
		size_t n = strlen(*value);

		if (n == 0 || (*value)[n - 1] != ')')
			return fail(p, "%.40s: text after ')'", *key);
		(*value)[n - 1] = '\0';
	}
	if (k == 0)
		return fail(p, "an item without a name: '%.40s'", *value);
	return 0;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* An unsigned number, decimal or 0x-hexadecimal, wholly consumed, at most MAX. */
static bool parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	unsigned int base = 10;
	uint64_t v = 0;

	if (s == NULL || *s == '\0')
		return false;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		if (*s == '\0')
			return false;
	}
	for (; *s != '\0'; s++) {
		unsigned int d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned int)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned int)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned int)(*s - 'A' + 10);
		else
			return false;
		if (v > (UINT64_MAX - d) / base)
			return false;
		v = v * base + d;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

static int parse_number(struct parser *p, const char *what, const char *s, uint64_t max,
			uint64_t *out)
{
	if (parse_uint(s, max, out))
		return 0;
	if (s == NULL || *s == '\0')
		return fail(p, "%s needs a value", what);
	return fail(p, "%s: '%.40s' is not a number from 0 to %" PRIu64, what, s, max);
}

/* Splits "V/M" at the slash; *MASK is NULL without one. */
static char *split_mask(char *value)
{
	char *slash = value == NULL ? NULL : strchr(value, '/');

	if (slash == NULL)
		return NULL;
	*slash = '\0';
	return slash + 1;
}

static void put_be(uint8_t *p, uint64_t v, unsigned int width)
{
	unsigned int i;

	for (i = 0; i < width; i++)
		p[i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

static uint64_t get_be(const uint8_t *p, unsigned int width)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* xx:xx:xx:xx:xx:xx, one or two hex digits a byte. */
static bool parse_mac(const char *s, uint8_t mac[6])
{
	unsigned int i;

	for (i = 0; i < 6; i++) {
		int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);

		if (hi < 0)
			return false;
		mac[i] = (uint8_t)(lo < 0 ? hi : hi << 4 | lo);
		s += lo < 0 ? 1 : 2;
		if (i < 5 && *s++ != ':')
			return false;
	}
	return *s == '\0';
}

static bool parse_ipv4(const char *s, uint8_t addr[4])
{
	return s != NULL && inet_pton(AF_INET, s, addr) == 1;
}

static bool parse_ipv6(const char *s, uint8_t addr[16])
{
	return s != NULL && inet_pton(AF_INET6, s, addr) == 1;
}

/* A prefix length as a mask of WIDTH bytes. */
static void prefix_mask(unsigned int len, uint8_t *mask, unsigned int width)
{
	unsigned int i;

	for (i = 0; i < width; i++) {
		unsigned int bits = len > 8 * i ? len - 8 * i : 0;

		mask[i] = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
	}
}

/* The prefix length MASK is, or -1 when its ones are not contiguous from the top. */
static int mask_prefix_len(const uint8_t *mask, unsigned int width)
{
	uint8_t want[16];
	unsigned int len = 0, i;

	for (i = 0; i < width; i++)
		len += (unsigned int)__builtin_popcount(mask[i]);
	prefix_mask(len, want, width);
	return memcmp(want, mask, width) == 0 ? (int)len : -1;
}

/* ------------------------------------------------------------------------------------- */
/* Ports                                                                                  */

static const struct {
	const char *name;
	uint32_t port;
} reserved_ports[] = {
	{ "IN_PORT", FLOW_PORT_IN_PORT }, { "NORMAL", FLOW_PORT_NORMAL },
	{ "FLOOD", FLOW_PORT_FLOOD }, { "ALL", FLOW_PORT_ALL },
	{ "CONTROLLER", FLOW_PORT_CONTROLLER }, { "LOCAL", FLOW_PORT_LOCAL },
	{ "ANY", FLOW_PORT_ANY }, { "NONE", FLOW_PORT_ANY },
};

static bool reserved_port(const char *name, uint32_t *port)
{
	size_t i;

	for (i = 0; i < sizeof(reserved_ports) / sizeof(reserved_ports[0]); i++)
		if (strcasecmp(name, reserved_ports[i].name) == 0) {
			*port = reserved_ports[i].port;
			return true;
		}
	return false;
}

static const char *reserved_port_name(uint32_t port)
{
	size_t i;

	for (i = 0; i < sizeof(reserved_ports) / sizeof(reserved_ports[0]); i++)
		if (reserved_ports[i].port == port)
			return reserved_ports[i].name;
	return NULL;
}

/* A switch port by name or OpenFlow number (through the callback), or a reserved port when
 * ALLOW_RESERVED. */
static int parse_port(struct parser *p, const char *what, const char *name, bool allow_reserved,
		      uint32_t *port)
{
	int idx;

	if (name == NULL || *name == '\0')
		return fail(p, "%s needs a port", what);
	if (reserved_port(name, port)) {
		if (!allow_reserved)
			return fail(p, "%s: %.40s is not a switch port", what, name);
		return 0;
	}
	idx = p->lookup == NULL ? -1 : p->lookup(p->ctx, name);
	if (idx < 0 || (uint32_t)idx >= FLOW_PORT_IN_PORT)
		return fail(p, "%s: unknown port '%.40s'", what, name);
	*port = (uint32_t)idx;
	return 0;
}

/* ------------------------------------------------------------------------------------- */
/* Match fields                                                                            */

/* What a field needs the match (or, for actions, the match and the actions before it) to
 * say first. */
enum prereq {
	P_NONE,
	P_IP4,          /* ip */
	P_IP4_ARP,      /* ip or arp: nw_src, nw_dst (ARP's spa/tpa share the slot) */
	P_IP_ANY,       /* ip or ipv6 */
	P_IP_ANY_ARP,   /* ip, ipv6 or arp: nw_proto (ARP's opcode shares the slot) */
	P_IPV6,
	P_TP,           /* tcp, udp or sctp */
	P_TP_ICMP,      /* those or icmp/icmp6 (tp_src as the ICMP type, as ovs-ofctl allows) */
	P_TCP, P_UDP, P_SCTP, P_ICMP, P_ICMP6, P_ARP,
	P_TAG,          /* a VLAN tag in the match, or a push_vlan before (actions only) */
};

static const char *const prereq_text[] = {
	[P_NONE] = "",
	[P_IP4] = "ip (dl_type=0x0800)",
	[P_IP4_ARP] = "ip or arp (dl_type=0x0800 or 0x0806)",
	[P_IP_ANY] = "ip or ipv6 (dl_type=0x0800 or 0x86dd)",
	[P_IP_ANY_ARP] = "ip, ipv6 or arp (dl_type=0x0800, 0x86dd or 0x0806)",
	[P_IPV6] = "ipv6 (dl_type=0x86dd)",
	[P_TP] = "tcp, udp or sctp (nw_proto=6, 17 or 132)",
	[P_TP_ICMP] = "tcp, udp or sctp (nw_proto=6, 17 or 132)",
	[P_TCP] = "tcp (nw_proto=6)",
	[P_UDP] = "udp (nw_proto=17)",
	[P_SCTP] = "sctp (nw_proto=132)",
	[P_ICMP] = "icmp (dl_type=0x0800,nw_proto=1)",
	[P_ICMP6] = "icmp6 (dl_type=0x86dd,nw_proto=58)",
	[P_ARP] = "arp (dl_type=0x0806)",
	[P_TAG] = "a VLAN tag (dl_vlan, vlan_tci=0x1000/0x1000 or a push_vlan before it)",
};

enum syntax { S_NUM, S_MAC, S_IPV4, S_IPV6, S_PORT, S_TCP_FLAGS };

#define KEY_SLOT(f) (uint8_t)offsetof(struct flow_key, f), (uint8_t)sizeof(((struct flow_key *)0)->f)

/*
 * A match field: its slot in the key and how a number maps onto the slot's bits
 * (slot = value << shift | set, covering MASK when exact). Fields that share a slot (icmp_type
 * and tp_src) differ in their prerequisites only.
 */
struct mfield {
	const char *name;
	uint8_t syntax;            /* enum syntax */
	uint8_t prereq;            /* enum prereq */
	uint8_t offset, width;     /* the slot */
	bool be;                   /* the slot holds network order */
	bool maskable;
	uint8_t shift;
	uint64_t max;              /* largest value written */
	uint64_t set;              /* bits an exact value sets besides the value (the CFI) */
	uint64_t mask;             /* the slot bits an exact value covers */
};

enum mf_id {
	MF_IN_PORT, MF_DL_SRC, MF_DL_DST, MF_DL_TYPE, MF_DL_VLAN, MF_DL_VLAN_PCP, MF_VLAN_TCI,
	MF_NW_SRC, MF_NW_DST, MF_NW_PROTO, MF_NW_TOS, MF_IP_DSCP, MF_NW_ECN, MF_NW_TTL,
	MF_TP_SRC, MF_TP_DST, MF_TCP_SRC, MF_TCP_DST, MF_UDP_SRC, MF_UDP_DST, MF_SCTP_SRC,
	MF_SCTP_DST, MF_TCP_FLAGS, MF_ICMP_TYPE, MF_ICMP_CODE, MF_ICMPV6_TYPE, MF_ICMPV6_CODE,
	MF_ARP_OP, MF_ARP_SPA, MF_ARP_TPA, MF_IPV6_SRC, MF_IPV6_DST, MF_IPV6_LABEL,
	MF_METADATA, MF_TUN_ID, MF_COUNT
};

static const struct mfield mfields[MF_COUNT] = {
	[MF_IN_PORT] = { "in_port", S_PORT, P_NONE, KEY_SLOT(in_port), false, false, 0,
			 UINT32_MAX, 0, UINT32_MAX },
	[MF_DL_SRC] = { "dl_src", S_MAC, P_NONE, KEY_SLOT(dl_src), true, true, 0, 0, 0, 0 },
	[MF_DL_DST] = { "dl_dst", S_MAC, P_NONE, KEY_SLOT(dl_dst), true, true, 0, 0, 0, 0 },
	[MF_DL_TYPE] = { "dl_type", S_NUM, P_NONE, KEY_SLOT(dl_type), true, false, 0, 0xffff, 0,
			 0xffff },
	[MF_DL_VLAN] = { "dl_vlan", S_NUM, P_NONE, KEY_SLOT(vlan_tci), true, false, 0,
			 FLOW_VLAN_VID_MASK, FLOW_VLAN_CFI, 0x1fff },
	[MF_DL_VLAN_PCP] = { "dl_vlan_pcp", S_NUM, P_NONE, KEY_SLOT(vlan_tci), true, false, 13,
			     7, FLOW_VLAN_CFI, 0xf000 },
	[MF_VLAN_TCI] = { "vlan_tci", S_NUM, P_NONE, KEY_SLOT(vlan_tci), true, true, 0, 0xffff, 0,
			  0xffff },
	[MF_NW_SRC] = { "nw_src", S_IPV4, P_IP4_ARP, KEY_SLOT(nw_src), true, true, 0, 0, 0, 0 },
	[MF_NW_DST] = { "nw_dst", S_IPV4, P_IP4_ARP, KEY_SLOT(nw_dst), true, true, 0, 0, 0, 0 },
	[MF_NW_PROTO] = { "nw_proto", S_NUM, P_IP_ANY_ARP, KEY_SLOT(nw_proto), true, false, 0,
			  0xff, 0, 0xff },
	/* nw_tos is the whole TOS byte but matches its DSCP bits only (as ovs-ofctl: the ECN
	 * bits of the value are dropped). */
	[MF_NW_TOS] = { "nw_tos", S_NUM, P_IP_ANY, KEY_SLOT(nw_tos), true, false, 0, 0xff, 0,
			0xfc },
	[MF_IP_DSCP] = { "ip_dscp", S_NUM, P_IP_ANY, KEY_SLOT(nw_tos), true, false, 2, 63, 0,
			 0xfc },
	[MF_NW_ECN] = { "nw_ecn", S_NUM, P_IP_ANY, KEY_SLOT(nw_tos), true, false, 0, 3, 0, 3 },
	[MF_NW_TTL] = { "nw_ttl", S_NUM, P_IP_ANY, KEY_SLOT(nw_ttl), true, false, 0, 0xff, 0,
			0xff },
	[MF_TP_SRC] = { "tp_src", S_NUM, P_TP_ICMP, KEY_SLOT(tp_src), true, true, 0, 0xffff, 0,
			0xffff },
	[MF_TP_DST] = { "tp_dst", S_NUM, P_TP_ICMP, KEY_SLOT(tp_dst), true, true, 0, 0xffff, 0,
			0xffff },
	[MF_TCP_SRC] = { "tcp_src", S_NUM, P_TCP, KEY_SLOT(tp_src), true, true, 0, 0xffff, 0,
			 0xffff },
	[MF_TCP_DST] = { "tcp_dst", S_NUM, P_TCP, KEY_SLOT(tp_dst), true, true, 0, 0xffff, 0,
			 0xffff },
	[MF_UDP_SRC] = { "udp_src", S_NUM, P_UDP, KEY_SLOT(tp_src), true, true, 0, 0xffff, 0,
			 0xffff },
	[MF_UDP_DST] = { "udp_dst", S_NUM, P_UDP, KEY_SLOT(tp_dst), true, true, 0, 0xffff, 0,
			 0xffff },
	[MF_SCTP_SRC] = { "sctp_src", S_NUM, P_SCTP, KEY_SLOT(tp_src), true, true, 0, 0xffff, 0,
			  0xffff },
	[MF_SCTP_DST] = { "sctp_dst", S_NUM, P_SCTP, KEY_SLOT(tp_dst), true, true, 0, 0xffff, 0,
			  0xffff },
	[MF_TCP_FLAGS] = { "tcp_flags", S_TCP_FLAGS, P_TCP, KEY_SLOT(tcp_flags), true, true, 0,
			   0x0fff, 0, 0x0fff },
	/* ICMP type and code: the low byte of tp_src/tp_dst; the whole slot is matched, its
	 * high byte being zero in every ICMP key (flow_key.h). */
	[MF_ICMP_TYPE] = { "icmp_type", S_NUM, P_ICMP, KEY_SLOT(tp_src), true, false, 0, 0xff, 0,
			   0xffff },
	[MF_ICMP_CODE] = { "icmp_code", S_NUM, P_ICMP, KEY_SLOT(tp_dst), true, false, 0, 0xff, 0,
			   0xffff },
	[MF_ICMPV6_TYPE] = { "icmpv6_type", S_NUM, P_ICMP6, KEY_SLOT(tp_src), true, false, 0,
			     0xff, 0, 0xffff },
	[MF_ICMPV6_CODE] = { "icmpv6_code", S_NUM, P_ICMP6, KEY_SLOT(tp_dst), true, false, 0,
			     0xff, 0, 0xffff },
	/* ARP's opcode is nw_proto's slot: one byte, so opcodes above 255 cannot be matched. */
	[MF_ARP_OP] = { "arp_op", S_NUM, P_ARP, KEY_SLOT(nw_proto), true, false, 0, 0xff, 0,
			0xff },
	[MF_ARP_SPA] = { "arp_spa", S_IPV4, P_ARP, KEY_SLOT(nw_src), true, true, 0, 0, 0, 0 },
	[MF_ARP_TPA] = { "arp_tpa", S_IPV4, P_ARP, KEY_SLOT(nw_dst), true, true, 0, 0, 0, 0 },
	[MF_IPV6_SRC] = { "ipv6_src", S_IPV6, P_IPV6, KEY_SLOT(ipv6_src), true, true, 0, 0, 0, 0 },
	[MF_IPV6_DST] = { "ipv6_dst", S_IPV6, P_IPV6, KEY_SLOT(ipv6_dst), true, true, 0, 0, 0, 0 },
	[MF_IPV6_LABEL] = { "ipv6_label", S_NUM, P_IPV6, KEY_SLOT(ipv6_label), true, true, 0,
			    0xfffff, 0, 0xfffff },
	[MF_METADATA] = { "metadata", S_NUM, P_NONE, KEY_SLOT(metadata), false, true, 0,
			  UINT64_MAX, 0, UINT64_MAX },
	[MF_TUN_ID] = { "tun_id", S_NUM, P_NONE, KEY_SLOT(tun_id), false, true, 0, UINT64_MAX, 0,
			UINT64_MAX },
};

/* Other names for the same fields (ovs-fields lists both). */
static const struct {
	const char *name;
	uint8_t id;
} mfield_aliases[] = {
	{ "eth_src", MF_DL_SRC }, { "eth_dst", MF_DL_DST }, { "eth_type", MF_DL_TYPE },
	{ "ip_src", MF_NW_SRC }, { "ip_dst", MF_NW_DST }, { "ip_proto", MF_NW_PROTO },
	{ "ip_ecn", MF_NW_ECN }, { "tunnel_id", MF_TUN_ID },
};

static const struct {
	const char *name;
	uint16_t dl_type;
	uint16_t nw_proto;         /* 0x100: none */
} shorthands[] = {
	{ "ip", 0x0800, 0x100 }, { "ipv6", 0x86dd, 0x100 }, { "arp", 0x0806, 0x100 },
	{ "icmp", 0x0800, 1 }, { "tcp", 0x0800, 6 }, { "udp", 0x0800, 17 },
	{ "sctp", 0x0800, 132 }, { "icmp6", 0x86dd, 58 }, { "tcp6", 0x86dd, 6 },
	{ "udp6", 0x86dd, 17 }, { "sctp6", 0x86dd, 132 },
};

#define NO_PROTO 0x100

static int find_mfield(const char *name)
{
	size_t i;

	for (i = 0; i < MF_COUNT; i++)
		if (strcmp(name, mfields[i].name) == 0)
			return (int)i;
	for (i = 0; i < sizeof(mfield_aliases) / sizeof(mfield_aliases[0]); i++)
		if (strcmp(name, mfield_aliases[i].name) == 0)
			return mfield_aliases[i].id;
	return -1;
}

struct match_state {
	struct flow_match *m;
	uint64_t used;             /* bit per enum mf_id */
	const char *names[MF_COUNT];   /* the name each field was written with */
	bool trace;                /* a described packet: no masks */
};

/* Writes VALUE under MASK into the slot at OFFSET, refusing bits already written otherwise. */
static int write_slot(struct parser *p, struct flow_match *m, const char *what, size_t offset,
		      const uint8_t *value, const uint8_t *mask, unsigned int width)
{
	uint8_t *k = (uint8_t *)&m->key + offset, *km = (uint8_t *)&m->mask + offset;
	unsigned int i;

	for (i = 0; i < width; i++)
		if ((km[i] & mask[i] & (k[i] ^ value[i])) != 0)
			return fail(p, "%s conflicts with a value given before it", what);
	for (i = 0; i < width; i++) {
		k[i] = (uint8_t)((k[i] & ~mask[i]) | (value[i] & mask[i]));
		km[i] |= mask[i];
	}
	return 0;
}

/* Stores a number field's value (and mask, NULL when exact) as slot bytes. */
static int num_slot(struct parser *p, const struct mfield *f, const char *name, char *value,
		    char *mask, uint8_t *v, uint8_t *mk)
{
	uint64_t x, mx = 0;

	if (f->offset == offsetof(struct flow_key, vlan_tci) && f->shift == 0 && !f->maskable &&
	    value != NULL && mask == NULL && parse_uint(value, 0xffff, &x) && x == 0xffff) {
		/* dl_vlan=0xffff: ovs-ofctl's "no tag", an all-zero TCI. */
		memset(v, 0, 2);
		memset(mk, 0xff, 2);
		return 0;
	}
	if (parse_number(p, name, value, f->max, &x) != 0)
		return -1;
	if (mask != NULL && parse_number(p, name, mask, f->max, &mx) != 0)
		return -1;
	mx = mask == NULL ? f->mask : mx << f->shift;
	x = ((x << f->shift) | f->set) & mx;
	if (f->be) {
		put_be(v, x, f->width);
		put_be(mk, mx, f->width);
	} else if (f->width == 8) {
		memcpy(v, &x, 8);
		memcpy(mk, &mx, 8);
	} else {
		uint32_t x32 = (uint32_t)x, m32 = (uint32_t)mx;

		memcpy(v, &x32, 4);
		memcpy(mk, &m32, 4);
	}
	return 0;
}

static const char *const tcp_flag_names[] = {
	"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns",
};
#define TCP_FLAGS_NAMED 0x01ff

/* "+syn-ack": each named flag must be set (+) or clear (-); the others are not matched. */
static int parse_tcp_flag_words(struct parser *p, const char *s, uint64_t *x, uint64_t *mx)
{
	*x = *mx = 0;
	while (*s != '\0') {
		char sign = *s++;
		size_t n = strcspn(s, "+-"), i;

		if (sign != '+' && sign != '-')
			return fail(p, "tcp_flags: '%.40s': expected +flag or -flag", s - 1);
		for (i = 0; i < 9; i++)
			if (strlen(tcp_flag_names[i]) == n && strncmp(s, tcp_flag_names[i], n) == 0)
				break;
		if (i == 9)
			return fail(p, "tcp_flags: unknown flag '%.*s'", (int)(n > 20 ? 20 : n), s);
		if (*mx & (1u << i))
			return fail(p, "tcp_flags: flag %s given twice", tcp_flag_names[i]);
		*mx |= 1u << i;
		*x |= sign == '+' ? 1u << i : 0;
		s += n;
	}
	return 0;
}

static int tcp_flags_slot(struct parser *p, char *value, char *mask, uint8_t *v, uint8_t *mk)
{
	uint64_t x, mx = 0x0fff;

	if (value != NULL && (value[0] == '+' || value[0] == '-')) {
		if (mask != NULL)
			return fail(p, "tcp_flags: +flag-flag takes no mask");
		if (parse_tcp_flag_words(p, value, &x, &mx) != 0)
			return -1;
	} else if (parse_number(p, "tcp_flags", value, 0x0fff, &x) != 0 ||
		   (mask != NULL && parse_number(p, "tcp_flags", mask, 0x0fff, &mx) != 0)) {
		return -1;
	}
	put_be(v, x & mx, 2);
	put_be(mk, mx, 2);
	return 0;
}

static int addr_slot(struct parser *p, const struct mfield *f, const char *name, char *value,
		     char *mask, uint8_t *v, uint8_t *mk)
{
	bool (*parse)(const char *, uint8_t *) =
		f->syntax == S_MAC ? parse_mac : f->syntax == S_IPV4 ? parse_ipv4 : parse_ipv6;
	const char *kind = f->syntax == S_MAC ? "an Ethernet address" :
			   f->syntax == S_IPV4 ? "an IPv4 address" : "an IPv6 address";
	uint64_t len;
	unsigned int i;

	if (value == NULL || !parse(value, v))
		return fail(p, "%s: '%.40s' is not %s", name, value == NULL ? "" : value, kind);
	if (mask == NULL)
		memset(mk, 0xff, f->width);
	else if (f->syntax != S_MAC && parse_uint(mask, 8u * f->width, &len))
		prefix_mask((unsigned int)len, mk, f->width);
	else if (!parse(mask, mk))
		return fail(p, "%s: '%.40s' is not a mask (%s or a prefix length)", name, mask,
			    kind);
	/* (i < 16 spells out the buffers' size for gcc -O3's overflow check) */
	for (i = 0; i < f->width && i < 16; i++)
		v[i] &= mk[i];
	return 0;
}

static bool mask_is_full(const uint8_t *mk, unsigned int width)
{
	unsigned int i;

	for (i = 0; i < width; i++)
		if (mk[i] != 0xff)
			return false;
	return true;
}

static int parse_mfield(struct parser *p, struct match_state *ms, int id, const char *name,
			char *value)
{
	const struct mfield *f = &mfields[id];
	char *mask = split_mask(value);
	uint8_t v[16] = { 0 }, mk[16] = { 0 };
	uint32_t port;
	int rc;

	if (mask != NULL && !f->maskable)
		return fail(p, "%s takes no mask", name);
	if (mask != NULL && ms->trace)
		return fail(p, "%s: a traced packet's fields take no masks", name);
	if (f->syntax == S_PORT) {
		rc = parse_port(p, name, value, false, &port);
		memcpy(v, &port, 4);
		memset(mk, 0xff, 4);
	} else if (f->syntax == S_NUM) {
		rc = num_slot(p, f, name, value, mask, v, mk);
	} else if (f->syntax == S_TCP_FLAGS) {
		rc = tcp_flags_slot(p, value, mask, v, mk);
	} else {
		rc = addr_slot(p, f, name, value, mask, v, mk);
	}
	if (rc != 0)
		return -1;
	/* "+syn" leaves flags unmatched, a mask in other words: a packet has all its bits. */
	if (ms->trace && f->syntax == S_TCP_FLAGS && !(mk[0] == 0x0f && mk[1] == 0xff))
		return fail(p, "%s: a traced packet's fields take no masks", name);
	if (write_slot(p, ms->m, name, f->offset, v, mk, f->width) != 0)
		return -1;
	if (!(ms->used & (1ull << id)))
		ms->names[id] = name;
	ms->used |= 1ull << id;
	return 0;
}

static int parse_shorthand(struct parser *p, struct match_state *ms, size_t i)
{
	uint8_t v[2], mk[2] = { 0xff, 0xff };

	put_be(v, shorthands[i].dl_type, 2);
	if (write_slot(p, ms->m, shorthands[i].name, offsetof(struct flow_key, dl_type), v, mk,
		       2) != 0)
		return -1;
	if (shorthands[i].nw_proto == NO_PROTO)
		return 0;
	v[0] = (uint8_t)shorthands[i].nw_proto;
	return write_slot(p, ms->m, shorthands[i].name, offsetof(struct flow_key, nw_proto), v,
			  mk, 1);
}

/* Returns 1 when KEY is no match field or shorthand (for the caller to try others). */
static int parse_match_item(struct parser *p, struct match_state *ms, const char *key,
			    char *value)
{
	size_t i;
	int id;

	for (i = 0; i < sizeof(shorthands) / sizeof(shorthands[0]); i++)
		if (strcmp(key, shorthands[i].name) == 0) {
			if (value != NULL)
				return fail(p, "%s takes no value", key);
			return parse_shorthand(p, ms, i);
		}
	id = find_mfield(key);
	if (id < 0)
		return 1;
	if (value == NULL)
		return fail(p, "%s needs a value", key);
	return parse_mfield(p, ms, id, key, value) == 0 ? 0 : -1;
}

/* What the match says of the packet's protocols, for prerequisites. */
struct proto_view {
	uint16_t dl_type;          /* 0 unless matched exactly */
	int nw_proto;              /* -1 unless matched exactly under ip or ipv6 */
	bool tagged;               /* the match requires a VLAN tag */
};

static struct proto_view proto_view(const struct flow_match *m)
{
	struct proto_view v = { 0, -1, false };
	uint16_t tci = (uint16_t)get_be((const uint8_t *)&m->key.vlan_tci, 2);
	uint16_t tci_mask = (uint16_t)get_be((const uint8_t *)&m->mask.vlan_tci, 2);

	if (m->mask.dl_type == 0xffff)
		v.dl_type = (uint16_t)get_be((const uint8_t *)&m->key.dl_type, 2);
	if ((v.dl_type == 0x0800 || v.dl_type == 0x86dd) && m->mask.nw_proto == 0xff)
		v.nw_proto = m->key.nw_proto;
	v.tagged = (tci_mask & FLOW_VLAN_CFI) && (tci & FLOW_VLAN_CFI);
	return v;
}

static bool prereq_met(enum prereq pq, const struct proto_view *v)
{
	bool ip4 = v->dl_type == 0x0800, ip6 = v->dl_type == 0x86dd, arp = v->dl_type == 0x0806;
	int np = v->nw_proto;
	bool tp = np == 6 || np == 17 || np == 132;

	switch (pq) {
	case P_NONE: return true;
	case P_IP4: return ip4;
	case P_IP4_ARP: return ip4 || arp;
	case P_IP_ANY: return ip4 || ip6;
	case P_IP_ANY_ARP: return ip4 || ip6 || arp;
	case P_IPV6: return ip6;
	case P_TP: return tp;
	case P_TP_ICMP: return tp || (ip4 && np == 1) || (ip6 && np == 58);
	case P_TCP: return np == 6;
	case P_UDP: return np == 17;
	case P_SCTP: return np == 132;
	case P_ICMP: return ip4 && np == 1;
	case P_ICMP6: return ip6 && np == 58;
	case P_ARP: return arp;
	case P_TAG: return v->tagged;
	}
	return false;
}

static int check_match_prereqs(struct parser *p, const struct match_state *ms)
{
	struct proto_view v = proto_view(ms->m);
	unsigned int id;

	for (id = 0; id < MF_COUNT; id++) {
		if (!(ms->used & (1ull << id)) || prereq_met(mfields[id].prereq, &v))
			continue;
		return fail(p, "%s requires %s", ms->names[id], prereq_text[mfields[id].prereq]);
	}
	return 0;
}

/* ------------------------------------------------------------------------------------- */
/* Actions                                                                                 */

/* Where actions go and what they may be. */
struct act_ctx {
	const struct flow_match *match;    /* NULL: no prerequisites (group buckets) */
	struct flow_action *list;
	uint16_t *n;
	bool pushed;               /* a push_vlan came before: a tag is there */
	const char *where;         /* for errors: "write_actions", "a bucket", "actions" */
};

static const struct {
	const char *name;
	uint8_t field;
	uint8_t prereq;
} sf_names[] = {
	{ "eth_src", FLOW_FIELD_DL_SRC, P_NONE }, { "dl_src", FLOW_FIELD_DL_SRC, P_NONE },
	{ "eth_dst", FLOW_FIELD_DL_DST, P_NONE }, { "dl_dst", FLOW_FIELD_DL_DST, P_NONE },
	{ "vlan_vid", FLOW_FIELD_VLAN_VID, P_TAG }, { "vlan_pcp", FLOW_FIELD_VLAN_PCP, P_TAG },
	{ "ipv4_src", FLOW_FIELD_NW_SRC, P_IP4 }, { "nw_src", FLOW_FIELD_NW_SRC, P_IP4 },
	{ "ip_src", FLOW_FIELD_NW_SRC, P_IP4 }, { "ipv4_dst", FLOW_FIELD_NW_DST, P_IP4 },
	{ "nw_dst", FLOW_FIELD_NW_DST, P_IP4 }, { "ip_dst", FLOW_FIELD_NW_DST, P_IP4 },
	{ "ip_dscp", FLOW_FIELD_IP_DSCP, P_IP_ANY }, { "ip_ecn", FLOW_FIELD_IP_ECN, P_IP_ANY },
	{ "nw_ecn", FLOW_FIELD_IP_ECN, P_IP_ANY }, { "nw_ttl", FLOW_FIELD_NW_TTL, P_IP_ANY },
	{ "tcp_src", FLOW_FIELD_TP_SRC, P_TCP }, { "tcp_dst", FLOW_FIELD_TP_DST, P_TCP },
	{ "udp_src", FLOW_FIELD_TP_SRC, P_UDP }, { "udp_dst", FLOW_FIELD_TP_DST, P_UDP },
	{ "sctp_src", FLOW_FIELD_TP_SRC, P_SCTP }, { "sctp_dst", FLOW_FIELD_TP_DST, P_SCTP },
	{ "tp_src", FLOW_FIELD_TP_SRC, P_TP }, { "tp_dst", FLOW_FIELD_TP_DST, P_TP },
	{ "ipv6_src", FLOW_FIELD_IPV6_SRC, P_IPV6 }, { "ipv6_dst", FLOW_FIELD_IPV6_DST, P_IPV6 },
	{ "ipv6_label", FLOW_FIELD_IPV6_LABEL, P_IPV6 }, { "tun_id", FLOW_FIELD_TUN_ID, P_NONE },
};

static const char *const field_names[FLOW_FIELD_COUNT] = {
	[FLOW_FIELD_DL_SRC] = "eth_src", [FLOW_FIELD_DL_DST] = "eth_dst",
	[FLOW_FIELD_VLAN_VID] = "vlan_vid", [FLOW_FIELD_VLAN_PCP] = "vlan_pcp",
	[FLOW_FIELD_NW_SRC] = "ipv4_src", [FLOW_FIELD_NW_DST] = "ipv4_dst",
	[FLOW_FIELD_IP_DSCP] = "ip_dscp", [FLOW_FIELD_IP_ECN] = "ip_ecn",
	[FLOW_FIELD_NW_TTL] = "nw_ttl", [FLOW_FIELD_TP_SRC] = "tp_src",
	[FLOW_FIELD_TP_DST] = "tp_dst", [FLOW_FIELD_IPV6_SRC] = "ipv6_src",
	[FLOW_FIELD_IPV6_DST] = "ipv6_dst", [FLOW_FIELD_IPV6_LABEL] = "ipv6_label",
	[FLOW_FIELD_TUN_ID] = "tun_id",
};

static const uint8_t field_widths[FLOW_FIELD_COUNT] = {
	[FLOW_FIELD_DL_SRC] = 6, [FLOW_FIELD_DL_DST] = 6, [FLOW_FIELD_VLAN_VID] = 2,
	[FLOW_FIELD_VLAN_PCP] = 1, [FLOW_FIELD_NW_SRC] = 4, [FLOW_FIELD_NW_DST] = 4,
	[FLOW_FIELD_IP_DSCP] = 1, [FLOW_FIELD_IP_ECN] = 1, [FLOW_FIELD_NW_TTL] = 1,
	[FLOW_FIELD_TP_SRC] = 2, [FLOW_FIELD_TP_DST] = 2, [FLOW_FIELD_IPV6_SRC] = 16,
	[FLOW_FIELD_IPV6_DST] = 16, [FLOW_FIELD_IPV6_LABEL] = 4, [FLOW_FIELD_TUN_ID] = 8,
};

const char *flow_field_name(enum flow_field f)
{
	return (unsigned int)f < FLOW_FIELD_COUNT ? field_names[f] : NULL;
}

unsigned int flow_field_width(enum flow_field f)
{
	return (unsigned int)f < FLOW_FIELD_COUNT ? field_widths[f] : 0;
}

/* Largest value of the fields written as numbers. */
static uint64_t field_max(enum flow_field f)
{
	switch (f) {
	case FLOW_FIELD_VLAN_VID: return FLOW_VLAN_VID_MASK;
	case FLOW_FIELD_VLAN_PCP: return 7;
	case FLOW_FIELD_IP_DSCP: return 63;
	case FLOW_FIELD_IP_ECN: return 3;
	case FLOW_FIELD_NW_TTL: return 0xff;
	case FLOW_FIELD_TP_SRC: case FLOW_FIELD_TP_DST: return 0xffff;
	case FLOW_FIELD_IPV6_LABEL: return 0xfffff;
	default: return UINT64_MAX;
	}
}

static struct flow_action *new_action(struct parser *p, struct act_ctx *a, uint8_t type)
{
	struct flow_action *act;

	if (*a->n >= FLOW_MAX_ACTIONS)
		return fail(p, "more than %d actions in %s", FLOW_MAX_ACTIONS, a->where), NULL;
	act = &a->list[(*a->n)++];
	memset(act, 0, sizeof(*act));
	act->type = type;
	return act;
}

static int check_action_prereq(struct parser *p, struct act_ctx *a, const char *what,
			       enum prereq pq)
{
	struct proto_view v;

	if (a->match == NULL || pq == P_NONE)
		return 0;
	v = proto_view(a->match);
	v.tagged |= a->pushed;
	if (!prereq_met(pq, &v))
		return fail(p, "%s requires %s", what, prereq_text[pq]);
	return 0;
}

/* Fills a SET_FIELD action's value from TEXT. */
static int set_field_value(struct parser *p, const char *what, enum flow_field f, char *text,
			   uint8_t *value)
{
	uint64_t x;

	if (text == NULL || *text == '\0')
		return fail(p, "%s needs a value", what);
	if (strchr(text, '/') != NULL)
		return fail(p, "%s: masked set_field is not supported", what);
	switch (f) {
	case FLOW_FIELD_DL_SRC: case FLOW_FIELD_DL_DST:
		return parse_mac(text, value) ? 0 :
		       fail(p, "%s: '%.40s' is not an Ethernet address", what, text);
	case FLOW_FIELD_NW_SRC: case FLOW_FIELD_NW_DST:
		return parse_ipv4(text, value) ? 0 :
		       fail(p, "%s: '%.40s' is not an IPv4 address", what, text);
	case FLOW_FIELD_IPV6_SRC: case FLOW_FIELD_IPV6_DST:
		return parse_ipv6(text, value) ? 0 :
		       fail(p, "%s: '%.40s' is not an IPv6 address", what, text);
	case FLOW_FIELD_TUN_ID:
		if (parse_number(p, what, text, UINT64_MAX, &x) != 0)
			return -1;
		memcpy(value, &x, 8);  /* host order, as the key's tun_id */
		return 0;
	default:
		break;
	}
	if (parse_number(p, what, text, field_max(f), &x) != 0)
		return -1;
	put_be(value, x, flow_field_width(f));
	return 0;
}

static int add_set_field(struct parser *p, struct act_ctx *a, const char *what,
			 enum flow_field f, enum prereq pq, char *text)
{
	struct flow_action act = { .type = FLOW_ACT_SET_FIELD, .field = (uint8_t)f };
	struct flow_action *slot;

	if (set_field_value(p, what, f, text, act.value) != 0 ||
	    check_action_prereq(p, a, what, pq) != 0)
		return -1;
	slot = new_action(p, a, FLOW_ACT_SET_FIELD);
	if (slot == NULL)
		return -1;
	*slot = act;
	return 0;
}

/* set_field:VALUE->FIELD */
static int parse_set_field(struct parser *p, struct act_ctx *a, char *value)
{
	char *arrow = value == NULL ? NULL : strstr(value, "->");
	char what[48];
	size_t i;

	if (arrow == NULL)
		return fail(p, "set_field needs VALUE->FIELD");
	*arrow = '\0';
	for (i = 0; i < sizeof(sf_names) / sizeof(sf_names[0]); i++) {
		if (strcmp(arrow + 2, sf_names[i].name) != 0)
			continue;
		if (sf_names[i].field == FLOW_FIELD_VLAN_VID) {
			uint64_t vid;

			/* OpenFlow 1.3 writes the VID with OFPVID_PRESENT (0x1000), as
			 * ovs-ofctl wants; the bare VID is taken too. */
			if (parse_uint(value, 0x1fff, &vid) && vid > FLOW_VLAN_VID_MASK)
				snprintf(value, strlen(value) + 1, "%u",
					 (unsigned int)(vid & FLOW_VLAN_VID_MASK));
		}
		snprintf(what, sizeof(what), "set_field %s", sf_names[i].name);
		return add_set_field(p, a, what, sf_names[i].field, sf_names[i].prereq, value);
	}
	return fail(p, "set_field: unknown or unsupported field '%.40s'", arrow + 2);
}

static int add_output(struct parser *p, struct act_ctx *a, uint32_t port, uint32_t max_len)
{
	struct flow_action *act;

	if (port == FLOW_PORT_ANY)
		return fail(p, "output: ANY is no port to send to");
	act = new_action(p, a, FLOW_ACT_OUTPUT);
	if (act == NULL)
		return -1;
	act->port = port;
	act->arg = port == FLOW_PORT_CONTROLLER ? max_len : 0;
	return 0;
}

/* controller, controller:MAXLEN, controller(max_len=N) */
static int parse_controller(struct parser *p, struct act_ctx *a, char *value)
{
	uint64_t max_len = CONTROLLER_MAX_LEN;
	char *item, *key, *val;

	if (value != NULL && strchr(value, '=') == NULL) {
		if (parse_number(p, "controller", value, 0xffff, &max_len) != 0)
			return -1;
		return add_output(p, a, FLOW_PORT_CONTROLLER, (uint32_t)max_len);
	}
	while (value != NULL && (item = next_item(&value)) != NULL) {
		if (split_item(p, item, &key, &val) != 0)
			return -1;
		if (strcmp(key, "max_len") != 0)
			return fail(p, "controller(%.40s) is not supported (only max_len)", key);
		if (parse_number(p, "controller max_len", val, 0xffff, &max_len) != 0)
			return -1;
	}
	return add_output(p, a, FLOW_PORT_CONTROLLER, (uint32_t)max_len);
}

static int parse_output(struct parser *p, struct act_ctx *a, const char *value)
{
	uint32_t port;

	if (parse_port(p, "output", value, true, &port) != 0)
		return -1;
	return add_output(p, a, port, CONTROLLER_MAX_LEN);
}

static int parse_push_vlan(struct parser *p, struct act_ctx *a, const char *value)
{
	struct flow_action *act;
	uint64_t tpid;

	if (parse_number(p, "push_vlan", value, 0xffff, &tpid) != 0)
		return -1;
	if (tpid != 0x8100 && tpid != 0x88a8)
		return fail(p, "push_vlan: 0x%04x is not a VLAN EtherType (0x8100 or 0x88a8)",
			    (unsigned int)tpid);
	act = new_action(p, a, FLOW_ACT_PUSH_VLAN);
	if (act == NULL)
		return -1;
	act->arg = (uint32_t)tpid;
	a->pushed = true;
	return 0;
}

static int add_simple(struct parser *p, struct act_ctx *a, const char *what, uint8_t type,
		      enum prereq pq)
{
	if (check_action_prereq(p, a, what, pq) != 0)
		return -1;
	return new_action(p, a, type) == NULL ? -1 : 0;
}

static int add_with_arg(struct parser *p, struct act_ctx *a, const char *what, uint8_t type,
			const char *value, uint64_t max)
{
	struct flow_action *act;
	uint64_t x;

	if (parse_number(p, what, value, max, &x) != 0)
		return -1;
	act = new_action(p, a, type);
	if (act == NULL)
		return -1;
	act->arg = (uint32_t)x;
	return 0;
}

/* mod_nw_tos:TOS sets the DSCP bits: TOS must leave the ECN bits clear (as ovs-ofctl). */
static int parse_mod_nw_tos(struct parser *p, struct act_ctx *a, char *value)
{
	char dscp[8];
	uint64_t tos;

	if (parse_number(p, "mod_nw_tos", value, 0xff, &tos) != 0)
		return -1;
	if (tos & 3)
		return fail(p, "mod_nw_tos: %u is not a TOS with clear ECN bits (a multiple of 4)",
			    (unsigned int)tos);
	snprintf(dscp, sizeof(dscp), "%u", (unsigned int)(tos >> 2));
	return add_set_field(p, a, "mod_nw_tos", FLOW_FIELD_IP_DSCP, P_IP_ANY, dscp);
}

/* The mod_* actions of OpenFlow 1.0, each a set_field. */
static const struct {
	const char *name;
	uint8_t field;
	uint8_t prereq;
} mod_actions[] = {
	{ "mod_dl_src", FLOW_FIELD_DL_SRC, P_NONE }, { "mod_dl_dst", FLOW_FIELD_DL_DST, P_NONE },
	/* ovs-ofctl's mod_vlan_vid and mod_vlan_pcp push a tag when the packet has none; here
	 * they are plain set_fields (what the data path does to an untagged packet is its
	 * business), so they need no tag in the match. */
	{ "mod_vlan_vid", FLOW_FIELD_VLAN_VID, P_NONE },
	{ "mod_vlan_pcp", FLOW_FIELD_VLAN_PCP, P_NONE },
	{ "mod_nw_src", FLOW_FIELD_NW_SRC, P_IP4 }, { "mod_nw_dst", FLOW_FIELD_NW_DST, P_IP4 },
	{ "mod_nw_ecn", FLOW_FIELD_IP_ECN, P_IP_ANY }, { "mod_nw_ttl", FLOW_FIELD_NW_TTL, P_IP_ANY },
	{ "mod_tp_src", FLOW_FIELD_TP_SRC, P_TP }, { "mod_tp_dst", FLOW_FIELD_TP_DST, P_TP },
};

/* The actions that send to a reserved port, written bare. */
static const struct {
	const char *name;
	uint32_t port;
} port_actions[] = {
	{ "in_port", FLOW_PORT_IN_PORT }, { "normal", FLOW_PORT_NORMAL },
	{ "flood", FLOW_PORT_FLOOD }, { "all", FLOW_PORT_ALL }, { "local", FLOW_PORT_LOCAL },
};

static int parse_named_action(struct parser *p, struct act_ctx *a, const char *key, char *value)
{
	if (strcasecmp(key, "output") == 0)
		return parse_output(p, a, value);
	if (strcasecmp(key, "controller") == 0)
		return parse_controller(p, a, value);
	if (strcasecmp(key, "group") == 0)
		return add_with_arg(p, a, "group", FLOW_ACT_GROUP, value, FLOW_MAX_GROUP_ID);
	if (strcasecmp(key, "set_field") == 0)
		return parse_set_field(p, a, value);
	if (strcasecmp(key, "push_vlan") == 0)
		return parse_push_vlan(p, a, value);
	if (strcasecmp(key, "pop_vlan") == 0 || strcasecmp(key, "strip_vlan") == 0)
		return add_simple(p, a, key, FLOW_ACT_POP_VLAN, P_TAG);
	if (strcasecmp(key, "dec_ttl") == 0)
		return add_simple(p, a, key, FLOW_ACT_DEC_TTL, P_IP_ANY);
	if (strcasecmp(key, "set_queue") == 0)
		return add_with_arg(p, a, "set_queue", FLOW_ACT_SET_QUEUE, value, UINT32_MAX);
	if (strcasecmp(key, "mod_nw_tos") == 0)
		return parse_mod_nw_tos(p, a, value);
	return 1;
}

/* One action item of an action list; "drop", instructions and meters are the caller's. */
static int parse_action(struct parser *p, struct act_ctx *a, char *item)
{
	char *key, *value;
	uint32_t port;
	size_t i;
	int rc;

	if (split_item(p, item, &key, &value) != 0)
		return -1;
	rc = parse_named_action(p, a, key, value);
	if (rc <= 0)
		return rc;
	for (i = 0; i < sizeof(mod_actions) / sizeof(mod_actions[0]); i++)
		if (strcasecmp(key, mod_actions[i].name) == 0)
			return add_set_field(p, a, mod_actions[i].name, mod_actions[i].field,
					     mod_actions[i].prereq, value);
	for (i = 0; i < sizeof(port_actions) / sizeof(port_actions[0]); i++)
		if (strcasecmp(key, port_actions[i].name) == 0 && value == NULL)
			return add_output(p, a, port_actions[i].port, 0);
	if (value != NULL)
		return fail(p, "unknown action '%.40s'", key);
	/* A bare port name or number is output to it, as ovs-ofctl reads it. */
	if (parse_port(p, "output", key, true, &port) != 0)
		return fail(p, "unknown action or port '%.40s'", key);
	return add_output(p, a, port, CONTROLLER_MAX_LEN);
}

/* ------------------------------------------------------------------------------------- */
/* Rules                                                                                   */

static const char *const mode_verbs[] = {
	[FLOW_PARSE_ADD] = "add-flow", [FLOW_PARSE_MODIFY] = "mod-flows",
	[FLOW_PARSE_DELETE] = "del-flows", [FLOW_PARSE_TRACE] = "trace",
};

/* Instructions in the order OpenFlow 1.1+ wants them (ovs-ofctl enforces it too). */
enum instr { I_NONE, I_METER, I_APPLY, I_CLEAR, I_WRITE, I_METADATA, I_GOTO };

static const char *const instr_names[] = {
	[I_NONE] = "", [I_METER] = "meter", [I_APPLY] = "apply_actions",
	[I_CLEAR] = "clear_actions", [I_WRITE] = "write_actions",
	[I_METADATA] = "write_metadata", [I_GOTO] = "goto_table",
};

struct rule_state {
	struct parser *p;
	struct flow_rule_spec *spec;
	enum flow_parse_mode mode;
	enum instr last;           /* the last instruction seen */
	bool drop;                 /* "drop" seen */
	bool pushed;               /* a push_vlan in apply_actions */
};

static int next_instr(struct rule_state *r, enum instr in)
{
	if (r->drop)
		return fail(r->p, "\"drop\" must not be accompanied by any other action or "
			    "instruction");
	if (in < r->last)
		return fail(r->p, "%s must come before %s", instr_names[in], instr_names[r->last]);
	if (in == r->last && in != I_APPLY)
		return fail(r->p, "%s given twice", instr_names[in]);
	r->last = in;
	return 0;
}

static int parse_write_actions(struct rule_state *r, char *value)
{
	struct act_ctx a = { &r->spec->match, r->spec->write, &r->spec->n_write, false,
			     "write_actions" };
	char *item;

	while (value != NULL && (item = next_item(&value)) != NULL) {
		const char *bad[] = { "drop", "meter", "goto_table", "clear_actions",
				      "write_actions", "write_metadata" };
		size_t i, n = strcspn(item, ":=(");

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strlen(bad[i]) == n && strncasecmp(item, bad[i], n) == 0)
				return fail(r->p, "write_actions cannot hold %s", bad[i]);
		if (parse_action(r->p, &a, item) != 0)
			return -1;
	}
	return 0;
}

static int parse_write_metadata(struct rule_state *r, char *value)
{
	char *mask = split_mask(value);
	uint64_t v, m = UINT64_MAX;

	if (parse_number(r->p, "write_metadata", value, UINT64_MAX, &v) != 0 ||
	    (mask != NULL && parse_number(r->p, "write_metadata mask", mask, UINT64_MAX, &m) != 0))
		return -1;
	r->spec->has_write_metadata = true;
	r->spec->write_metadata = v & m;
	r->spec->write_metadata_mask = m;
	return 0;
}

static int parse_goto(struct rule_state *r, const char *value)
{
	uint64_t t;

	if (parse_number(r->p, "goto_table", value, FLOW_TABLES - 1, &t) != 0)
		return -1;
	if (r->spec->table != FLOW_TABLE_ALL && t <= r->spec->table)
		return fail(r->p, "goto_table:%u must name a table after this rule's (%u)",
			    (unsigned int)t, r->spec->table);
	r->spec->goto_table = (uint8_t)t;
	return 0;
}

static int parse_meter_instr(struct rule_state *r, const char *value)
{
	uint64_t id;

	if (parse_number(r->p, "meter", value, FLOW_MAX_METER_ID, &id) != 0)
		return -1;
	if (id == FLOW_NO_METER)
		return fail(r->p, "meter: 0 is no meter id (1 to %u)", FLOW_MAX_METER_ID);
	r->spec->meter = (uint32_t)id;
	return 0;
}

/* An instruction item; 1 when ITEM is an apply action instead. */
static int parse_instruction(struct rule_state *r, char *key, char *value)
{
	static const struct { const char *name; enum instr in; bool takes_value; } instrs[] = {
		{ "meter", I_METER, true }, { "clear_actions", I_CLEAR, false },
		{ "write_actions", I_WRITE, true }, { "write_metadata", I_METADATA, true },
		{ "goto_table", I_GOTO, true },
	};
	size_t i;

	for (i = 0; i < sizeof(instrs) / sizeof(instrs[0]); i++) {
		if (strcasecmp(key, instrs[i].name) != 0)
			continue;
		if (next_instr(r, instrs[i].in) != 0)
			return -1;
		if (!instrs[i].takes_value && value != NULL)
			return fail(r->p, "%s takes no value", key);
		switch (instrs[i].in) {
		case I_METER: return parse_meter_instr(r, value);
		case I_CLEAR: r->spec->clear_actions = true; return 0;
		case I_WRITE: return parse_write_actions(r, value);
		case I_METADATA: return parse_write_metadata(r, value);
		default: return parse_goto(r, value);
		}
	}
	return 1;
}

static int parse_rule_action_item(struct rule_state *r, struct act_ctx *a, char *item)
{
	char copy[16];
	char *key, *value;
	int rc;

	if (strcasecmp(item, "drop") == 0) {
		if (r->last != I_NONE || r->drop)
			return fail(r->p, "\"drop\" must not be accompanied by any other action "
				    "or instruction");
		r->drop = true;
		return 0;
	}
	/* Peek at the key without cutting: an apply action re-splits the whole item. */
	snprintf(copy, sizeof(copy), "%.*s", (int)strcspn(item, ":=("), item);
	if (strcasecmp(copy, "meter") == 0 || strcasecmp(copy, "clear_actions") == 0 ||
	    strcasecmp(copy, "write_actions") == 0 || strcasecmp(copy, "write_metadata") == 0 ||
	    strcasecmp(copy, "goto_table") == 0) {
		if (split_item(r->p, item, &key, &value) != 0)
			return -1;
		rc = parse_instruction(r, key, value);
		return rc;
	}
	if (next_instr(r, I_APPLY) != 0)
		return -1;
	return parse_action(r->p, a, item);
}

static int parse_rule_actions(struct rule_state *r, char *text)
{
	struct act_ctx a = { &r->spec->match, r->spec->apply, &r->spec->n_apply, false,
			     "actions" };
	char *item;

	while ((item = next_item(&text)) != NULL)
		if (parse_rule_action_item(r, &a, item) != 0)
			return -1;
	return 0;
}

/* Whether KEY is allowed in the rule's mode; fails with the reason if not. */
static int mode_allows(struct rule_state *r, const char *key, bool add, bool mod, bool del)
{
	bool ok = r->mode == FLOW_PARSE_ADD ? add : r->mode == FLOW_PARSE_MODIFY ? mod :
		  r->mode == FLOW_PARSE_DELETE ? del : false;

	return ok ? 0 : fail(r->p, "%s is not allowed in %s", key, mode_verbs[r->mode]);
}

static int parse_cookie(struct rule_state *r, char *value)
{
	char *mask = split_mask(value);
	uint64_t v, m;

	if (parse_number(r->p, "cookie", value, UINT64_MAX, &v) != 0)
		return -1;
	if (mask != NULL) {
		if (r->mode == FLOW_PARSE_ADD)
			return fail(r->p, "flow additions cannot use a cookie mask");
		if (parse_number(r->p, "cookie mask", mask, UINT64_MAX, &m) != 0)
			return -1;
	} else {
		/* A del-flows filter without a mask matches the cookie exactly; add-flow and
		 * mod-flows set it. */
		m = r->mode == FLOW_PARSE_DELETE ? UINT64_MAX : 0;
	}
	r->spec->cookie = v;
	r->spec->cookie_mask = m;
	return 0;
}

static const struct {
	const char *name;
	uint32_t flag;
} flag_words[] = {
	{ "send_flow_rem", FLOW_FLAG_SEND_FLOW_REM }, { "check_overlap", FLOW_FLAG_CHECK_OVERLAP },
	{ "reset_counts", FLOW_FLAG_RESET_COUNTS }, { "no_packet_counts", FLOW_FLAG_NO_PKT_COUNTS },
	{ "no_byte_counts", FLOW_FLAG_NO_BYT_COUNTS },
};

static int parse_flag_word(struct rule_state *r, const char *key, const char *value)
{
	size_t i;

	for (i = 0; i < sizeof(flag_words) / sizeof(flag_words[0]); i++) {
		if (strcmp(key, flag_words[i].name) != 0)
			continue;
		if (value != NULL)
			return fail(r->p, "%s takes no value", key);
		if (mode_allows(r, key, true, true, false) != 0)
			return -1;
		r->spec->flags |= flag_words[i].flag;
		return 0;
	}
	return 1;
}

static int parse_u16_setting(struct rule_state *r, const char *key, const char *value,
			     uint16_t *out)
{
	uint64_t v;

	if (parse_number(r->p, key, value, 0xffff, &v) != 0)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

static int parse_out_group(struct rule_state *r, const char *value)
{
	uint64_t g;

	if (value != NULL && (strcasecmp(value, "any") == 0 || strcasecmp(value, "all") == 0)) {
		r->spec->out_group = FLOW_PORT_ANY;
		return 0;
	}
	if (parse_number(r->p, "out_group", value, FLOW_MAX_GROUP_ID, &g) != 0)
		return -1;
	r->spec->out_group = (uint32_t)g;
	return 0;
}

/* table, priority, timeouts, cookie, out_port, out_group; 1 when KEY is none of them. */
static int parse_valued_setting(struct rule_state *r, const char *key, char *value)
{
	struct flow_rule_spec *s = r->spec;
	uint64_t v;

	if (strcmp(key, "table") == 0) {
		if (parse_number(r->p, key, value, FLOW_TABLES - 1, &v) != 0)
			return -1;
		s->table = (uint8_t)v;
		return 0;
	}
	if (strcmp(key, "priority") == 0)
		return parse_u16_setting(r, key, value, &s->priority);
	if (strcmp(key, "idle_timeout") == 0)
		return parse_u16_setting(r, key, value, &s->idle_timeout);
	if (strcmp(key, "hard_timeout") == 0)
		return parse_u16_setting(r, key, value, &s->hard_timeout);
	if (strcmp(key, "cookie") == 0)
		return parse_cookie(r, value);
	if (strcmp(key, "out_port") == 0)
		return parse_port(r->p, key, value, true, &s->out_port);
	if (strcmp(key, "out_group") == 0)
		return parse_out_group(r, value);
	return 1;
}

/* Which verbs take which settings: add, mod, del (trace takes none). */
static const struct {
	const char *name;
	bool add, mod, del;
} setting_modes[] = {
	{ "table", true, true, true }, { "priority", true, true, true },
	{ "idle_timeout", true, true, false }, { "hard_timeout", true, true, false },
	{ "cookie", true, true, true }, { "out_port", false, true, true },
	{ "out_group", false, true, true },
};

/* A rule setting (not a match field); 1 when KEY is none. */
static int parse_setting(struct rule_state *r, const char *key, char *value)
{
	size_t i;
	int rc = parse_flag_word(r, key, value);

	if (rc <= 0)
		return rc;
	for (i = 0; i < sizeof(setting_modes) / sizeof(setting_modes[0]); i++)
		if (strcmp(key, setting_modes[i].name) == 0 &&
		    mode_allows(r, key, setting_modes[i].add, setting_modes[i].mod,
				setting_modes[i].del) != 0)
			return -1;
	return parse_valued_setting(r, key, value);
}

static void rule_defaults(struct flow_rule_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->priority = DEFAULT_PRIORITY;
	spec->goto_table = FLOW_NO_GOTO;
	spec->out_port = FLOW_PORT_ANY;
	spec->out_group = FLOW_PORT_ANY;
	spec->meter = FLOW_NO_METER;
}

static int parse_rule_item(struct rule_state *r, struct match_state *ms, char *item)
{
	char *key, *value;
	int rc;

	if (split_item(r->p, item, &key, &value) != 0)
		return -1;
	rc = parse_match_item(r->p, ms, key, value);
	if (rc <= 0)
		return rc;
	rc = parse_setting(r, key, value);
	if (rc <= 0)
		return rc < 0 ? -1 : 0;
	return fail(r->p, "unknown field '%.40s'", key);
}

/* Cuts TEXT's items up to "actions=", which takes the rest; returns the actions or NULL. */
static int parse_rule_items(struct rule_state *r, struct match_state *ms, char *text,
			    char **actions)
{
	char *item;

	*actions = NULL;
	for (;;) {
		text = skip_separators(text);
		if (starts_with(text, "actions=")) {
			*actions = text + strlen("actions=");
			return 0;
		}
		item = next_item(&text);
		if (item == NULL)
			return 0;
		if (parse_rule_item(r, ms, item) != 0)
			return -1;
	}
}

static int finish_rule_actions(struct rule_state *r, char *actions)
{
	if (actions == NULL) {
		if (r->mode == FLOW_PARSE_ADD || r->mode == FLOW_PARSE_MODIFY)
			return fail(r->p, "must specify an action (actions=drop to drop)");
		return 0;
	}
	if (r->mode == FLOW_PARSE_DELETE || r->mode == FLOW_PARSE_TRACE)
		return fail(r->p, "actions are not allowed in %s", mode_verbs[r->mode]);
	return parse_rule_actions(r, actions);
}

int flow_parse_rule(const char *text, enum flow_parse_mode mode, flow_port_lookup lookup,
		    void *ctx, struct flow_rule_spec *spec, char *err, size_t err_len)
{
	struct parser p = { err, err_len, lookup, ctx };
	struct rule_state r = { &p, spec, mode, I_NONE, false, false };
	struct match_state ms = { &spec->match, 0, { NULL }, mode == FLOW_PARSE_TRACE };
	char buf[FLOW_TEXT_MAX], *actions;

	if (err != NULL && err_len > 0)
		err[0] = '\0';
	rule_defaults(spec);
	if ((unsigned int)mode > FLOW_PARSE_TRACE)
		return fail(&p, "unknown parse mode %d", (int)mode);
	/* As ovs-ofctl: mod-flows and del-flows (and dump-flows' filter) without table=N
	 * select rules in every table. */
	if (mode == FLOW_PARSE_MODIFY || mode == FLOW_PARSE_DELETE)
		spec->table = FLOW_TABLE_ALL;
	if (copy_text(&p, text, buf, sizeof(buf)) != 0 ||
	    parse_rule_items(&r, &ms, buf, &actions) != 0 ||
	    check_match_prereqs(&p, &ms) != 0 || finish_rule_actions(&r, actions) != 0) {
		rule_defaults(spec);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------------------------- */
/* Groups                                                                                  */

static const struct {
	const char *name;
	uint8_t type;
} group_types[] = {
	{ "all", FLOW_GROUP_ALL }, { "select", FLOW_GROUP_SELECT },
	{ "indirect", FLOW_GROUP_INDIRECT }, { "ff", FLOW_GROUP_FF },
	{ "fast_failover", FLOW_GROUP_FF },
};

struct group_state {
	struct parser *p;
	struct flow_group_spec *g;
	bool have_id, have_type;
	bool in_actions;           /* the current bucket's "actions=" was seen */
	bool drop;                 /* the current bucket said "drop" */
	bool weight_set[FLOW_MAX_BUCKETS];
	struct act_ctx a;
};

static int parse_group_type(struct group_state *s, const char *value)
{
	size_t i;

	for (i = 0; value != NULL && i < sizeof(group_types) / sizeof(group_types[0]); i++)
		if (strcmp(value, group_types[i].name) == 0) {
			s->g->type = group_types[i].type;
			s->have_type = true;
			return 0;
		}
	return fail(s->p, "type: '%.40s' is not all, select, indirect or fast_failover",
		    value == NULL ? "" : value);
}

static int parse_group_header(struct group_state *s, char *item)
{
	char *key, *value;
	uint64_t id;

	if (split_item(s->p, item, &key, &value) != 0)
		return -1;
	if (strcmp(key, "group_id") == 0) {
		if (parse_number(s->p, "group_id", value, FLOW_MAX_GROUP_ID, &id) != 0)
			return -1;
		s->g->id = (uint32_t)id;
		s->have_id = true;
		return 0;
	}
	if (strcmp(key, "type") == 0)
		return parse_group_type(s, value);
	return fail(s->p, "unknown group field '%.40s' (before the first bucket=)", key);
}

static int start_bucket(struct group_state *s)
{
	struct flow_bucket *b;

	if (s->g->n_buckets >= FLOW_MAX_BUCKETS)
		return fail(s->p, "more than %d buckets", FLOW_MAX_BUCKETS);
	b = &s->g->buckets[s->g->n_buckets++];
	memset(b, 0, sizeof(*b));
	b->watch_port = FLOW_PORT_ANY;
	b->watch_group = FLOW_PORT_ANY;
	s->in_actions = false;
	s->drop = false;
	s->a = (struct act_ctx){ NULL, b->actions, &b->n_actions, false, "a bucket" };
	return 0;
}

/* weight:W, watch_port:P, watch_group:G; 1 when ITEM is none of them. */
static int parse_bucket_param(struct group_state *s, struct flow_bucket *b, char *item)
{
	static const char *const params[] = { "weight", "watch_port", "watch_group",
					      "bucket_id" };
	size_t n = strcspn(item, ":=("), i;
	char *key, *value;
	uint64_t v;

	for (i = 0; i < sizeof(params) / sizeof(params[0]); i++)
		if (strlen(params[i]) == n && strncmp(item, params[i], n) == 0)
			break;
	if (i == sizeof(params) / sizeof(params[0]))
		return 1;
	if (split_item(s->p, item, &key, &value) != 0)
		return -1;
	if (strcmp(key, "weight") == 0) {
		if (parse_number(s->p, "weight", value, 0xffff, &v) != 0)
			return -1;
		b->weight = (uint16_t)v;
		s->weight_set[s->g->n_buckets - 1] = true;
		return 0;
	}
	if (strcmp(key, "watch_port") == 0)
		return parse_port(s->p, "watch_port", value, true, &b->watch_port);
	if (strcmp(key, "watch_group") == 0) {
		if (value != NULL && strcasecmp(value, "any") == 0) {
			b->watch_group = FLOW_PORT_ANY;
			return 0;
		}
		if (parse_number(s->p, "watch_group", value, FLOW_MAX_GROUP_ID, &v) != 0)
			return -1;
		b->watch_group = (uint32_t)v;
		return 0;
	}
	return fail(s->p, "bucket_id is not supported (OpenFlow 1.5)");
}

static int parse_bucket_action(struct group_state *s, char *item)
{
	const char *bad[] = { "meter", "goto_table", "clear_actions", "write_actions",
			      "write_metadata" };
	size_t i, n = strcspn(item, ":=(");

	if (strcasecmp(item, "drop") == 0) {
		if (*s->a.n > 0 || s->drop)
			return fail(s->p, "\"drop\" must not be accompanied by any other action");
		s->drop = true;
		return 0;
	}
	if (s->drop)
		return fail(s->p, "\"drop\" must not be accompanied by any other action");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (strlen(bad[i]) == n && strncasecmp(item, bad[i], n) == 0)
			return fail(s->p, "a bucket cannot hold %s", bad[i]);
	return parse_action(s->p, &s->a, item);
}

static int parse_bucket_item(struct group_state *s, char *item)
{
	struct flow_bucket *b = &s->g->buckets[s->g->n_buckets - 1];
	int rc;

	if (starts_with(item, "actions=")) {
		if (s->in_actions)
			return fail(s->p, "a bucket with two actions=");
		s->in_actions = true;
		item += strlen("actions=");
		return *item == '\0' ? 0 : parse_bucket_action(s, item);
	}
	if (!s->in_actions) {
		rc = parse_bucket_param(s, b, item);
		if (rc <= 0)
			return rc;
	}
	return parse_bucket_action(s, item);
}

static int parse_group_item(struct group_state *s, char *item)
{
	if (starts_with(item, "bucket=")) {
		if (start_bucket(s) != 0)
			return -1;
		item += strlen("bucket=");
		return *item == '\0' ? 0 : parse_bucket_item(s, item);
	}
	if (s->g->n_buckets == 0)
		return parse_group_header(s, item);
	return parse_bucket_item(s, item);
}

static int check_bucket(struct group_state *s, unsigned int i)
{
	struct flow_bucket *b = &s->g->buckets[i];
	uint8_t t = s->g->type;

	if (t == FLOW_GROUP_SELECT && !s->weight_set[i])
		b->weight = 1;   /* ovs-ofctl's default weight */
	if (t != FLOW_GROUP_SELECT && s->weight_set[i])
		return fail(s->p, "bucket %u: weight is only for select groups", i + 1);
	if (t == FLOW_GROUP_FF && b->watch_port == FLOW_PORT_ANY &&
	    b->watch_group == FLOW_PORT_ANY)
		return fail(s->p, "bucket %u: a fast_failover bucket needs watch_port or "
			    "watch_group", i + 1);
	if (t != FLOW_GROUP_FF && (b->watch_port != FLOW_PORT_ANY ||
				   b->watch_group != FLOW_PORT_ANY))
		return fail(s->p, "bucket %u: watch_port and watch_group are only for "
			    "fast_failover groups", i + 1);
	return 0;
}

static int check_group(struct group_state *s)
{
	unsigned int i;

	if (!s->have_id)
		return fail(s->p, "must specify group_id");
	if (!s->have_type)
		return fail(s->p, "must specify a type (all, select, indirect or fast_failover)");
	if (s->g->type == FLOW_GROUP_INDIRECT && s->g->n_buckets != 1)
		return fail(s->p, "an indirect group needs exactly one bucket, not %u",
			    s->g->n_buckets);
	for (i = 0; i < s->g->n_buckets; i++)
		if (check_bucket(s, i) != 0)
			return -1;
	return 0;
}

int flow_parse_group(const char *text, flow_port_lookup lookup, void *ctx,
		     struct flow_group_spec *spec, char *err, size_t err_len)
{
	struct parser p = { err, err_len, lookup, ctx };
	struct group_state s;
	char buf[FLOW_TEXT_MAX], *cur = buf, *item;

	if (err != NULL && err_len > 0)
		err[0] = '\0';
	memset(spec, 0, sizeof(*spec));
	memset(&s, 0, sizeof(s));
	s.p = &p;
	s.g = spec;
	if (copy_text(&p, text, buf, sizeof(buf)) != 0)
		goto bad;
	while ((item = next_item(&cur)) != NULL)
		if (parse_group_item(&s, item) != 0)
			goto bad;
	if (check_group(&s) != 0)
		goto bad;
	return 0;
bad:
	memset(spec, 0, sizeof(*spec));
	return -1;
}

/* ------------------------------------------------------------------------------------- */
/* Meters                                                                                  */

struct meter_state {
	struct parser *p;
	struct flow_meter_spec *m;
	bool have_id, in_band, have_band, have_rate, have_burst_size;
};

static int parse_band_item(struct meter_state *s, const char *key, const char *value)
{
	uint64_t v;

	if (strcmp(key, "type") == 0) {
		if (s->have_band)
			return fail(s->p, "only one band is supported");
		if (value == NULL || strcmp(value, "drop") != 0)
			return fail(s->p, "band type '%.40s' is not supported (only type=drop)",
				    value == NULL ? "" : value);
		s->have_band = true;
		return 0;
	}
	if (strcmp(key, "rate") == 0) {
		if (parse_number(s->p, "rate", value, UINT32_MAX, &v) != 0)
			return -1;
		if (v == 0)
			return fail(s->p, "rate must be above 0");
		s->m->rate = (uint32_t)v;
		s->have_rate = true;
		return 0;
	}
	if (strcmp(key, "burst_size") == 0) {
		if (parse_number(s->p, "burst_size", value, UINT32_MAX, &v) != 0)
			return -1;
		s->m->burst = (uint32_t)v;
		s->have_burst_size = true;
		return 0;
	}
	return fail(s->p, "unknown band field '%.40s'", key);
}

static int parse_meter_word(struct meter_state *s, const char *key, const char *value)
{
	static const struct { const char *name; uint32_t flag; } words[] = {
		{ "kbps", FLOW_METER_KBPS }, { "pktps", FLOW_METER_PKTPS },
		{ "burst", FLOW_METER_BURST }, { "stats", FLOW_METER_STATS },
	};
	uint64_t id;
	size_t i;

	if (strcmp(key, "meter") == 0) {
		if (parse_number(s->p, "meter", value, FLOW_MAX_METER_ID, &id) != 0)
			return -1;
		if (id == 0)
			return fail(s->p, "meter: 0 is no meter id (1 to %u)", FLOW_MAX_METER_ID);
		s->m->id = (uint32_t)id;
		s->have_id = true;
		return 0;
	}
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcmp(key, words[i].name) == 0) {
			if (value != NULL)
				return fail(s->p, "%s takes no value", key);
			s->m->flags |= words[i].flag;
			return 0;
		}
	return fail(s->p, "unknown meter field '%.40s'", key);
}

static int parse_meter_item(struct meter_state *s, char *item)
{
	char *key, *value;

	if (starts_with(item, "bands=") || starts_with(item, "band=")) {
		if (s->in_band)
			return fail(s->p, "only one band is supported");
		s->in_band = true;
		item += strcspn(item, "=") + 1;
		if (*item == '\0')
			return 0;
	}
	if (split_item(s->p, item, &key, &value) != 0)
		return -1;
	return s->in_band ? parse_band_item(s, key, value) : parse_meter_word(s, key, value);
}

static int check_meter(struct meter_state *s)
{
	uint32_t units = s->m->flags & (FLOW_METER_KBPS | FLOW_METER_PKTPS);

	if (!s->have_id)
		return fail(s->p, "must specify meter=ID");
	if (units == (FLOW_METER_KBPS | FLOW_METER_PKTPS))
		return fail(s->p, "kbps and pktps exclude each other");
	if (units == 0)
		s->m->flags |= FLOW_METER_KBPS;   /* ovs-ofctl's default */
	if (!s->have_band)
		return fail(s->p, "must specify a band (bands=type=drop,rate=R)");
	if (!s->have_rate)
		return fail(s->p, "the band needs a rate");
	if (s->have_burst_size && !(s->m->flags & FLOW_METER_BURST))
		return fail(s->p, "burst_size needs the burst flag");
	return 0;
}

int flow_parse_meter(const char *text, struct flow_meter_spec *spec, char *err,
		     size_t err_len)
{
	struct parser p = { err, err_len, NULL, NULL };
	struct meter_state s = { &p, spec, false, false, false, false, false };
	char buf[FLOW_TEXT_MAX], *cur = buf, *item;

	if (err != NULL && err_len > 0)
		err[0] = '\0';
	memset(spec, 0, sizeof(*spec));
	if (copy_text(&p, text, buf, sizeof(buf)) != 0)
		goto bad;
	while ((item = next_item(&cur)) != NULL)
		if (parse_meter_item(&s, item) != 0)
			goto bad;
	if (check_meter(&s) != 0)
		goto bad;
	return 0;
bad:
	memset(spec, 0, sizeof(*spec));
	return -1;
}

/* ------------------------------------------------------------------------------------- */
/* Formatting                                                                              */

/* An output buffer with snprintf's contract: what would be written is counted, what fits is
 * written, always NUL-terminated when there is room at all. */
struct out {
	char *buf;
	size_t len;
	size_t n;
};

static void vput(struct out *o, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void vput(struct out *o, const char *fmt, va_list ap)
{
	size_t room = o->n < o->len ? o->len - o->n : 0;
	int w = vsnprintf(room > 0 ? o->buf + o->n : NULL, room, fmt, ap);

	if (w > 0)
		o->n += (size_t)w;
}

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vput(o, fmt, ap);
	va_end(ap);
}

/* Writes an item, after a comma unless it is the first since START. */
static void item(struct out *o, size_t start, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void item(struct out *o, size_t start, const char *fmt, ...)
{
	va_list ap;

	if (o->n > start)
		put(o, ",");
	va_start(ap, fmt);
	vput(o, fmt, ap);
	va_end(ap);
}

static int out_done(struct out *o)
{
	if (o->len > 0 && o->n >= o->len)
		o->buf[o->len - 1] = '\0';
	return o->n > INT32_MAX ? INT32_MAX : (int)o->n;
}

static void format_mac(char *s, size_t len, const uint8_t *m)
{
	snprintf(s, len, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

static bool all_zero(const uint8_t *p, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void format_mac_field(struct out *o, size_t start, const char *name, const uint8_t *k,
			     const uint8_t *m)
{
	char v[20], mk[20];

	if (all_zero(m, 6))
		return;
	format_mac(v, sizeof(v), k);
	format_mac(mk, sizeof(mk), m);
	if (mask_is_full(m, 6))
		item(o, start, "%s=%s", name, v);
	else
		item(o, start, "%s=%s/%s", name, v, mk);
}

/* IPv4 or IPv6 (WIDTH 4 or 16) with a prefix length or, when not contiguous, a mask. */
static void format_ip_field(struct out *o, size_t start, const char *name, const uint8_t *k,
			    const uint8_t *m, unsigned int width)
{
	int af = width == 4 ? AF_INET : AF_INET6, plen;
	char v[INET6_ADDRSTRLEN], mk[INET6_ADDRSTRLEN];

	if (all_zero(m, width))
		return;
	inet_ntop(af, k, v, sizeof(v));
	plen = mask_prefix_len(m, width);
	if (plen == (int)(8 * width))
		item(o, start, "%s=%s", name, v);
	else if (plen >= 0)
		item(o, start, "%s=%s/%d", name, v, plen);
	else {
		inet_ntop(af, m, mk, sizeof(mk));
		item(o, start, "%s=%s/%s", name, v, mk);
	}
}

/* A 16-bit be slot: decimal when exact, hex value/mask otherwise. */
static void format_u16_field(struct out *o, size_t start, const char *name, uint16_t k_be,
			     uint16_t m_be)
{
	unsigned int k = (unsigned int)get_be((const uint8_t *)&k_be, 2);
	unsigned int m = (unsigned int)get_be((const uint8_t *)&m_be, 2);

	if (m == 0xffff)
		item(o, start, "%s=%u", name, k);
	else if (m != 0)
		item(o, start, "%s=0x%x/0x%x", name, k, m);
}

static void format_u64_field(struct out *o, size_t start, const char *name, uint64_t k,
			     uint64_t m)
{
	if (m == UINT64_MAX)
		item(o, start, "%s=0x%" PRIx64, name, k);
	else if (m != 0)
		item(o, start, "%s=0x%" PRIx64 "/0x%" PRIx64, name, k, m);
}

/* dl_vlan and dl_vlan_pcp where they say it, vlan_tci otherwise (as ovs-ofctl). */
static void format_vlan(struct out *o, size_t start, const struct flow_match *mt)
{
	unsigned int k = (unsigned int)get_be((const uint8_t *)&mt->key.vlan_tci, 2);
	unsigned int m = (unsigned int)get_be((const uint8_t *)&mt->mask.vlan_tci, 2);
	bool cfi = k & FLOW_VLAN_CFI;

	if (m == 0)
		return;
	if (cfi && (m == 0x1fff || m == 0xffff))
		item(o, start, "dl_vlan=%u", k & FLOW_VLAN_VID_MASK);
	if (cfi && (m == 0xf000 || m == 0xffff))
		item(o, start, "dl_vlan_pcp=%u", k >> 13);
	if (cfi && (m == 0x1fff || m == 0xf000 || m == 0xffff))
		return;
	if (m == 0xffff)
		item(o, start, "vlan_tci=0x%04x", k);
	else
		item(o, start, "vlan_tci=0x%04x/0x%04x", k, m);
}

/* The shorthand for dl_type (and nw_proto), or dl_type=; returns whether it covered nw_proto. */
static bool format_protocol(struct out *o, size_t start, const struct flow_match *mt)
{
	struct proto_view v = proto_view(mt);
	size_t i;

	if (mt->mask.dl_type != 0xffff)
		return false;
	for (i = 0; i < sizeof(shorthands) / sizeof(shorthands[0]); i++)
		if (shorthands[i].dl_type == v.dl_type && shorthands[i].nw_proto == v.nw_proto) {
			item(o, start, "%s", shorthands[i].name);
			return true;
		}
	for (i = 0; i < sizeof(shorthands) / sizeof(shorthands[0]); i++)
		if (shorthands[i].dl_type == v.dl_type && shorthands[i].nw_proto == NO_PROTO) {
			item(o, start, "%s", shorthands[i].name);
			return false;
		}
	item(o, start, "dl_type=0x%04x", v.dl_type);
	return false;
}

static void format_in_port(struct out *o, size_t start, const struct flow_match *mt,
			   flow_port_name name, void *ctx)
{
	const char *n;

	if (mt->mask.in_port == 0)
		return;
	n = name == NULL ? NULL : name(ctx, mt->key.in_port);
	if (n != NULL)
		item(o, start, "in_port=%s", n);
	else
		item(o, start, "in_port=%" PRIu32, FLOW_OFPORT(mt->key.in_port));
}

static void format_nw_fields(struct out *o, size_t start, const struct flow_match *mt,
			     bool proto_done)
{
	const struct flow_key *k = &mt->key, *m = &mt->mask;
	bool arp = proto_view(mt).dl_type == 0x0806;

	format_ip_field(o, start, arp ? "arp_spa" : "nw_src", (const uint8_t *)&k->nw_src,
			(const uint8_t *)&m->nw_src, 4);
	format_ip_field(o, start, arp ? "arp_tpa" : "nw_dst", (const uint8_t *)&k->nw_dst,
			(const uint8_t *)&m->nw_dst, 4);
	format_ip_field(o, start, "ipv6_src", k->ipv6_src, m->ipv6_src, 16);
	format_ip_field(o, start, "ipv6_dst", k->ipv6_dst, m->ipv6_dst, 16);
	if (m->ipv6_label != 0) {
		unsigned int kl = (unsigned int)get_be((const uint8_t *)&k->ipv6_label, 4);
		unsigned int ml = (unsigned int)get_be((const uint8_t *)&m->ipv6_label, 4);

		if (ml == 0xfffff)
			item(o, start, "ipv6_label=0x%05x", kl);
		else
			item(o, start, "ipv6_label=0x%05x/0x%05x", kl, ml);
	}
	if (m->nw_proto != 0 && !proto_done)
		item(o, start, "%s=%u", arp ? "arp_op" : "nw_proto", k->nw_proto);
	if ((m->nw_tos & 0xfc) != 0)
		item(o, start, "nw_tos=%u", k->nw_tos & 0xfc);
	if ((m->nw_tos & 0x03) != 0)
		item(o, start, "nw_ecn=%u", k->nw_tos & 0x03);
	if (m->nw_ttl != 0)
		item(o, start, "nw_ttl=%u", k->nw_ttl);
}

static void format_tcp_flags(struct out *o, size_t start, const struct flow_match *mt)
{
	unsigned int k = (unsigned int)get_be((const uint8_t *)&mt->key.tcp_flags, 2);
	unsigned int m = (unsigned int)get_be((const uint8_t *)&mt->mask.tcp_flags, 2);
	char words[64] = "";
	size_t n = 0;
	unsigned int i;

	if (m == 0)
		return;
	if ((m & ~TCP_FLAGS_NAMED) != 0) {
		if (m == 0x0fff)
			item(o, start, "tcp_flags=0x%03x", k);
		else
			item(o, start, "tcp_flags=0x%03x/0x%03x", k, m);
		return;
	}
	for (i = 0; i < 9; i++)
		if (m & (1u << i))
			n += (size_t)snprintf(words + n, sizeof(words) - n, "%c%s",
					      k & (1u << i) ? '+' : '-', tcp_flag_names[i]);
	item(o, start, "tcp_flags=%s", words);
}

/* tp_src/tp_dst, or icmp_type/icmp_code when the match is ICMP and they fit a byte. */
static void format_tp_fields(struct out *o, size_t start, const struct flow_match *mt)
{
	struct proto_view v = proto_view(mt);
	bool icmp4 = v.dl_type == 0x0800 && v.nw_proto == 1;
	bool icmp6 = v.dl_type == 0x86dd && v.nw_proto == 58;
	uint16_t ks = mt->key.tp_src, kd = mt->key.tp_dst;
	unsigned int s = (unsigned int)get_be((const uint8_t *)&ks, 2);
	unsigned int d = (unsigned int)get_be((const uint8_t *)&kd, 2);
	bool src_icmp = (icmp4 || icmp6) && mt->mask.tp_src == 0xffff && s <= 0xff;
	bool dst_icmp = (icmp4 || icmp6) && mt->mask.tp_dst == 0xffff && d <= 0xff;

	if (src_icmp)
		item(o, start, "%s=%u", icmp4 ? "icmp_type" : "icmpv6_type", s);
	else
		format_u16_field(o, start, "tp_src", ks, mt->mask.tp_src);
	if (dst_icmp)
		item(o, start, "%s=%u", icmp4 ? "icmp_code" : "icmpv6_code", d);
	else
		format_u16_field(o, start, "tp_dst", kd, mt->mask.tp_dst);
	format_tcp_flags(o, start, mt);
}

/* Items after START get a comma before them (START 0: after anything already written). */
static void format_match(struct out *o, size_t start, const struct flow_match *mt,
			 flow_port_name name, void *ctx)
{
	bool proto_done = format_protocol(o, start, mt);

	format_u64_field(o, start, "tun_id", mt->key.tun_id, mt->mask.tun_id);
	format_u64_field(o, start, "metadata", mt->key.metadata, mt->mask.metadata);
	format_in_port(o, start, mt, name, ctx);
	format_vlan(o, start, mt);
	format_mac_field(o, start, "dl_src", mt->key.dl_src, mt->mask.dl_src);
	format_mac_field(o, start, "dl_dst", mt->key.dl_dst, mt->mask.dl_dst);
	format_nw_fields(o, start, mt, proto_done);
	format_tp_fields(o, start, mt);
}

int flow_format_match(const struct flow_match *m, flow_port_name name, void *ctx, char *buf,
		      size_t len)
{
	struct out o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	format_match(&o, 0, m, name, ctx);
	return out_done(&o);
}

/* A port as the parser reads it back: its name, its OpenFlow number or a reserved name. */
static void format_port_name(struct out *o, uint32_t port, flow_port_name name, void *ctx)
{
	const char *n = reserved_port_name(port);

	if (n == NULL && name != NULL)
		n = name(ctx, port);
	if (n != NULL)
		put(o, "%s", n);
	else
		put(o, "%" PRIu32, FLOW_OFPORT(port));
}

static void format_port(struct out *o, size_t start, uint32_t port, uint32_t arg,
			flow_port_name name, void *ctx)
{
	const char *n;

	if (port == FLOW_PORT_CONTROLLER) {
		item(o, start, "CONTROLLER:%" PRIu32, arg);
		return;
	}
	n = reserved_port_name(port);
	if (n != NULL) {
		item(o, start, "%s", n);
		return;
	}
	item(o, start, "output:");
	format_port_name(o, port, name, ctx);
}

/* A set_field in the form that reads back with the weakest prerequisites: the mod_* action
 * where there is one (mod_tp_dst for tcp_dst, udp_dst and sctp_dst alike). */
static void format_set_field(struct out *o, size_t start, const struct flow_action *a)
{
	const uint8_t *v = a->value;
	char s[INET6_ADDRSTRLEN];
	uint64_t x;

	switch (a->field) {
	case FLOW_FIELD_DL_SRC: case FLOW_FIELD_DL_DST:
		format_mac(s, sizeof(s), v);
		item(o, start, "mod_dl_%s:%s", a->field == FLOW_FIELD_DL_SRC ? "src" : "dst", s);
		return;
	case FLOW_FIELD_NW_SRC: case FLOW_FIELD_NW_DST:
		inet_ntop(AF_INET, v, s, sizeof(s));
		item(o, start, "mod_nw_%s:%s", a->field == FLOW_FIELD_NW_SRC ? "src" : "dst", s);
		return;
	case FLOW_FIELD_IPV6_SRC: case FLOW_FIELD_IPV6_DST:
		inet_ntop(AF_INET6, v, s, sizeof(s));
		item(o, start, "set_field:%s->%s", s, field_names[a->field]);
		return;
	case FLOW_FIELD_TUN_ID:
		memcpy(&x, v, 8);
		item(o, start, "set_field:0x%" PRIx64 "->tun_id", x);
		return;
	default:
		break;
	}
	x = get_be(v, flow_field_width((enum flow_field)a->field));
	switch (a->field) {
	case FLOW_FIELD_VLAN_VID: item(o, start, "mod_vlan_vid:%" PRIu64, x); break;
	case FLOW_FIELD_VLAN_PCP: item(o, start, "mod_vlan_pcp:%" PRIu64, x); break;
	case FLOW_FIELD_IP_DSCP: item(o, start, "mod_nw_tos:%" PRIu64, x << 2); break;
	case FLOW_FIELD_IP_ECN: item(o, start, "mod_nw_ecn:%" PRIu64, x); break;
	case FLOW_FIELD_NW_TTL: item(o, start, "mod_nw_ttl:%" PRIu64, x); break;
	case FLOW_FIELD_TP_SRC: item(o, start, "mod_tp_src:%" PRIu64, x); break;
	case FLOW_FIELD_TP_DST: item(o, start, "mod_tp_dst:%" PRIu64, x); break;
	case FLOW_FIELD_IPV6_LABEL: item(o, start, "set_field:0x%" PRIx64 "->ipv6_label", x);
		break;
	default: item(o, start, "set_field:?->field%u", a->field); break;
	}
}

static void format_action(struct out *o, size_t start, const struct flow_action *a,
			  flow_port_name name, void *ctx)
{
	switch (a->type) {
	case FLOW_ACT_OUTPUT: format_port(o, start, a->port, a->arg, name, ctx); break;
	case FLOW_ACT_GROUP: item(o, start, "group:%" PRIu32, a->arg); break;
	case FLOW_ACT_SET_FIELD: format_set_field(o, start, a); break;
	case FLOW_ACT_PUSH_VLAN: item(o, start, "push_vlan:0x%04" PRIx32, a->arg); break;
	case FLOW_ACT_POP_VLAN: item(o, start, "pop_vlan"); break;
	case FLOW_ACT_DEC_TTL: item(o, start, "dec_ttl"); break;
	case FLOW_ACT_SET_QUEUE: item(o, start, "set_queue:%" PRIu32, a->arg); break;
	default: item(o, start, "unknown_action_%u", a->type); break;
	}
}

static void format_list(struct out *o, size_t start, const struct flow_action *acts,
			uint16_t n, flow_port_name name, void *ctx)
{
	uint16_t i;

	for (i = 0; i < n; i++)
		format_action(o, start, &acts[i], name, ctx);
}

int flow_format_action_list(const struct flow_action *acts, uint16_t n, flow_port_name name,
			    void *ctx, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	format_list(&o, 0, acts, n, name, ctx);
	if (o.n == 0)
		put(&o, "drop");
	return out_done(&o);
}

static void format_instructions(struct out *o, const struct flow_rule_spec *s,
				flow_port_name name, void *ctx)
{
	size_t start = o->n;

	if (s->meter != FLOW_NO_METER)
		item(o, start, "meter:%" PRIu32, s->meter);
	format_list(o, start, s->apply, s->n_apply, name, ctx);
	if (s->clear_actions)
		item(o, start, "clear_actions");
	if (s->n_write > 0) {
		item(o, start, "write_actions(");
		format_list(o, o->n, s->write, s->n_write, name, ctx);
		put(o, ")");
	}
	if (s->has_write_metadata && s->write_metadata_mask == UINT64_MAX)
		item(o, start, "write_metadata:0x%" PRIx64, s->write_metadata);
	else if (s->has_write_metadata)
		item(o, start, "write_metadata:0x%" PRIx64 "/0x%" PRIx64, s->write_metadata,
		     s->write_metadata_mask);
	if (s->goto_table != FLOW_NO_GOTO)
		item(o, start, "goto_table:%u", s->goto_table);
	if (o->n == start)
		put(o, "drop");
}

int flow_format_actions(const struct flow_rule_spec *spec, flow_port_name name, void *ctx,
			char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	format_instructions(&o, spec, name, ctx);
	return out_done(&o);
}

static void format_settings(struct out *o, const struct flow_rule_spec *s,
			    enum flow_parse_mode mode, flow_port_name name, void *ctx)
{
	size_t i;

	if (mode == FLOW_PARSE_MODIFY || mode == FLOW_PARSE_DELETE ?
	    s->table != FLOW_TABLE_ALL : s->table != 0)
		item(o, 0, "table=%u", s->table);
	if (s->priority != DEFAULT_PRIORITY && mode != FLOW_PARSE_TRACE)
		item(o, 0, "priority=%u", s->priority);
	/* A bare cookie means "exactly" in del-flows and "set it" (mask 0) elsewhere. */
	if (mode == FLOW_PARSE_DELETE && s->cookie_mask == UINT64_MAX)
		item(o, 0, "cookie=0x%" PRIx64, s->cookie);
	else if (s->cookie_mask != 0 || (mode == FLOW_PARSE_DELETE && s->cookie != 0))
		item(o, 0, "cookie=0x%" PRIx64 "/0x%" PRIx64, s->cookie, s->cookie_mask);
	else if (s->cookie != 0)
		item(o, 0, "cookie=0x%" PRIx64, s->cookie);
	if (s->idle_timeout != 0)
		item(o, 0, "idle_timeout=%u", s->idle_timeout);
	if (s->hard_timeout != 0)
		item(o, 0, "hard_timeout=%u", s->hard_timeout);
	for (i = 0; i < sizeof(flag_words) / sizeof(flag_words[0]); i++)
		if (s->flags & flag_words[i].flag)
			item(o, 0, "%s", flag_words[i].name);
	if (s->out_port != FLOW_PORT_ANY) {
		item(o, 0, "out_port=");
		format_port_name(o, s->out_port, name, ctx);
	}
	if (s->out_group != FLOW_PORT_ANY)
		item(o, 0, "out_group=%" PRIu32, s->out_group);
}

int flow_format_rule(const struct flow_rule_spec *spec, enum flow_parse_mode mode,
		     flow_port_name name, void *ctx, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	format_settings(&o, spec, mode, name, ctx);
	format_match(&o, 0, &spec->match, name, ctx);
	if (mode == FLOW_PARSE_ADD || mode == FLOW_PARSE_MODIFY) {
		put(&o, "%sactions=", o.n > 0 ? "," : "");
		format_instructions(&o, spec, name, ctx);
	}
	return out_done(&o);
}

static const char *const group_type_names[] = {
	[FLOW_GROUP_ALL] = "all", [FLOW_GROUP_SELECT] = "select",
	[FLOW_GROUP_INDIRECT] = "indirect", [FLOW_GROUP_FF] = "ff",
};

static void format_bucket(struct out *o, const struct flow_group_spec *g,
			  const struct flow_bucket *b, flow_port_name name, void *ctx)
{
	size_t start;

	put(o, ",bucket=");
	start = o->n;
	if (g->type == FLOW_GROUP_SELECT)
		item(o, start, "weight:%u", b->weight);
	if (b->watch_port != FLOW_PORT_ANY) {
		item(o, start, "watch_port:");
		format_port_name(o, b->watch_port, name, ctx);
	}
	if (b->watch_group != FLOW_PORT_ANY)
		item(o, start, "watch_group:%" PRIu32, b->watch_group);
	item(o, start, "actions=");
	if (b->n_actions == 0)
		put(o, "drop");
	format_list(o, o->n, b->actions, b->n_actions, name, ctx);
}

int flow_format_group(const struct flow_group_spec *g, flow_port_name name, void *ctx,
		      char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	uint16_t i;

	if (len > 0)
		buf[0] = '\0';
	put(&o, "group_id=%" PRIu32 ",type=%s", g->id,
	    g->type < 4 ? group_type_names[g->type] : "unknown");
	for (i = 0; i < g->n_buckets && i < FLOW_MAX_BUCKETS; i++)
		format_bucket(&o, g, &g->buckets[i], name, ctx);
	return out_done(&o);
}

int flow_format_meter(const struct flow_meter_spec *m, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	put(&o, "meter=%" PRIu32 ",%s", m->id, m->flags & FLOW_METER_PKTPS ? "pktps" : "kbps");
	if (m->flags & FLOW_METER_BURST)
		put(&o, ",burst");
	if (m->flags & FLOW_METER_STATS)
		put(&o, ",stats");
	put(&o, ",bands=type=drop,rate=%" PRIu32, m->rate);
	if (m->flags & FLOW_METER_BURST && m->burst != 0)
		put(&o, ",burst_size=%" PRIu32, m->burst);
	return out_done(&o);
}
