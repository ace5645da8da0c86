/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-sockets' options, frames and frame test (sockets.h). No sockets here. */
#include "sockets.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SRC_IP 0x0a4d0001u      /* 10.77.0.1 */
#define DEFAULT_DST_IP 0x0a4d0002u      /* 10.77.0.2 */
#define DEFAULT_PORT 9999
#define DEFAULT_RCVBUF (4 << 20)
#define MAX_CPU 1023

static const char USAGE[] =
"usage: sluice-sockets --api udp|raw [--role tx|rx|both] [options]\n"
"\n"
"The kernel socket baseline of the container benchmark framework (docs/bench.md): a sender\n"
"and a receiver exchange fixed-size frames through the kernel, with UDP sockets or raw\n"
"AF_PACKET sockets, one frame a system call or a batch a call. JSON summary at the end.\n"
"  --api A            udp: a connected UDP socket sends to --dst, a bound one receives;\n"
"                     raw: AF_PACKET sockets on --tx-iface/--rx-iface, Ethernet, IPv4 and\n"
"                     UDP headers built here (to --dst-mac, which no interface owns: the\n"
"                     receiver's IP stack ignores the frames and only its packet socket\n"
"                     takes them)\n"
"  --batch N          1 (default): send()/recv(); 2..1024: sendmmsg()/recvmmsg() of N\n"
"  --role R           tx, rx, or both (default): a sender and a receiver thread in one\n"
"                     process, each with its socket in its own namespace\n"
"  --size S           frame bytes including the 4-byte FCS, 64..1518 (default 64)\n"
"  --duration S       seconds of sending; alone, rx receives this long (default 10)\n"
"  --linger S         seconds rx keeps counting after the sender stopped (default 0.5)\n"
"  --tx-netns NAME    namespace of the sender's socket (/run/netns/NAME; default: own)\n"
"  --rx-netns NAME    namespace of the receiver's socket\n"
"  --tx-iface IF      raw: the sender's device\n"
"  --rx-iface IF      raw: the receiver's device\n"
"  --src IP, --dst IP addresses (default 10.77.0.1 -> 10.77.0.2; udp sends to --dst)\n"
"  --port N           UDP destination port (default 9999)\n"
"  --dst-mac MAC      raw frames' destination (default 02:5c:00:00:00:02)\n"
"  --tx-cpu N, --rx-cpu N   pin the sender or receiver thread (default: not pinned)\n"
"  --rcvbuf BYTES     receive socket buffer asked for (default 4194304)\n"
"  --json             per-second JSON lines on stdout before the summary\n"
"  --out FILE         also write the summary to FILE\n"
"  -h, --help\n";

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

static void set_defaults(struct sk_opts *o)
{
	static const uint8_t mac[6] = { 0x02, 0x5c, 0, 0, 0, 0x02 };

	memset(o, 0, sizeof(*o));
	o->api = SK_API_UDP;
	o->role = SK_ROLE_BOTH;
	o->batch = 1;
	o->size = SK_MIN_SIZE;
	o->duration = 10;
	o->linger = 0.5;
	o->src_ip = DEFAULT_SRC_IP;
	o->dst_ip = DEFAULT_DST_IP;
	o->port = DEFAULT_PORT;
	memcpy(o->dst_mac, mac, 6);
	o->tx_cpu = o->rx_cpu = -1;
	o->rcvbuf = DEFAULT_RCVBUF;
}

static int parse_num(const char *v, double lo, double hi, double *out)
{
	char *end;

	*out = strtod(v, &end);
	return (end == v || *end != '\0' || !(*out >= lo && *out <= hi)) ? -1 : 0;
}

static int parse_uint(const char *v, double lo, double hi, unsigned int *out)
{
	double x;

	if (parse_num(v, lo, hi, &x) != 0 || x != (double)(unsigned int)x)
		return -1;
	*out = (unsigned int)x;
	return 0;
}

static int parse_cpu(const char *v, int *cpu)
{
	unsigned int c;

	if (parse_uint(v, 0, MAX_CPU, &c) != 0)
		return -1;
	*cpu = (int)c;
	return 0;
}

static int parse_name(const char *v, char *dst, size_t len)
{
	if (strlen(v) == 0 || strlen(v) >= len)
		return -1;
	snprintf(dst, len, "%s", v);
	return 0;
}

static int parse_ip(const char *v, uint32_t *ip)
{
	struct in_addr a;

	if (inet_pton(AF_INET, v, &a) != 1)
		return -1;
	*ip = ntohl(a.s_addr);
	return 0;
}

int sk_parse_mac(const char *s, uint8_t mac[6])
{
	unsigned int b[6];
	char tail;
	int i;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
		   &tail) != 6)
		return -1;
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

static int parse_enum(const char *v, const char *const *names, int n, int *out)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0) {
			*out = i;
			return 0;
		}
	return -1;
}

static int parse_api(const char *v, struct sk_opts *o)
{
	static const char *const names[] = { "udp", "raw" };
	int i;

	if (parse_enum(v, names, 2, &i) != 0)
		return -1;
	o->api = (enum sk_api)i;
	return 0;
}

static int parse_role(const char *v, struct sk_opts *o)
{
	static const char *const names[] = { "tx", "rx", "both" };
	int i;

	if (parse_enum(v, names, 3, &i) != 0)
		return -1;
	o->role = (enum sk_role)(i + 1);
	return 0;
}

static int parse_port_rcvbuf(int c, const char *v, struct sk_opts *o)
{
	unsigned int x;

	if (c == 'p') {
		if (parse_uint(v, 1, 65535, &x) != 0)
			return -1;
		o->port = (uint16_t)x;
		return 0;
	}
	if (parse_uint(v, 4096, 1 << 30, &x) != 0)
		return -1;
	o->rcvbuf = (int)x;
	return 0;
}

/* One option C with value V into O; -1 when V is not acceptable. */
static int parse_one(int c, const char *v, struct sk_opts *o)
{
	switch (c) {
	case 'a': return parse_api(v, o);
	case 'r': return parse_role(v, o);
	case 'b': return parse_uint(v, 1, SK_MAX_BATCH, &o->batch);
	case 's': return parse_uint(v, SK_MIN_SIZE, SK_MAX_SIZE, &o->size);
	case 'd': return parse_num(v, 0.1, 1e6, &o->duration);
	case 'l': return parse_num(v, 0, 60, &o->linger);
	case 'T': return parse_name(v, o->tx_netns, sizeof(o->tx_netns));
	case 'R': return parse_name(v, o->rx_netns, sizeof(o->rx_netns));
	case 'I': return parse_name(v, o->tx_iface, sizeof(o->tx_iface));
	case 'J': return parse_name(v, o->rx_iface, sizeof(o->rx_iface));
	case 'S': return parse_ip(v, &o->src_ip);
	case 'D': return parse_ip(v, &o->dst_ip);
	case 'p': case 'B': return parse_port_rcvbuf(c, v, o);
	case 'm': return sk_parse_mac(v, o->dst_mac);
	case 'x': return parse_cpu(v, &o->tx_cpu);
	case 'y': return parse_cpu(v, &o->rx_cpu);
	case 'o': return parse_name(v, o->out, sizeof(o->out));
	default: return -1;
	}
}

/* What the options together must satisfy. */
static int check(const struct sk_opts *o, char *err, size_t len)
{
	if (o->api == SK_API_RAW && (o->role & SK_ROLE_TX) && o->tx_iface[0] == '\0')
		return fail(err, len, "--api raw needs --tx-iface to send");
	if (o->api == SK_API_RAW && (o->role & SK_ROLE_RX) && o->rx_iface[0] == '\0')
		return fail(err, len, "--api raw needs --rx-iface to receive");
	return 0;
}

static const struct option LONG_OPTS[] = {
	{ "api", 1, NULL, 'a' }, { "role", 1, NULL, 'r' }, { "batch", 1, NULL, 'b' },
	{ "size", 1, NULL, 's' }, { "duration", 1, NULL, 'd' }, { "linger", 1, NULL, 'l' },
	{ "tx-netns", 1, NULL, 'T' }, { "rx-netns", 1, NULL, 'R' },
	{ "tx-iface", 1, NULL, 'I' }, { "rx-iface", 1, NULL, 'J' },
	{ "src", 1, NULL, 'S' }, { "dst", 1, NULL, 'D' }, { "port", 1, NULL, 'p' },
	{ "dst-mac", 1, NULL, 'm' }, { "tx-cpu", 1, NULL, 'x' }, { "rx-cpu", 1, NULL, 'y' },
	{ "rcvbuf", 1, NULL, 'B' }, { "json", 0, NULL, 'j' }, { "out", 1, NULL, 'o' },
	{ "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 } };

int sk_opts_parse(int argc, char **argv, struct sk_opts *o, char *err, size_t errlen)
{
	int c, idx = 0;

	set_defaults(o);
	optind = 0;             /* glibc: start afresh (the unit tests parse many times) */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", LONG_OPTS, &idx)) != -1) {
		if (c == 'h') {
			fputs(USAGE, stdout);
			return 1;
		}
		if (c == 'j') {
			o->json = 1;
			continue;
		}
		if (c == '?' || c == ':')
			return fail(err, errlen, "unknown option or missing value: %s",
				    argv[optind - 1]);
		if (parse_one(c, optarg, o) != 0)
			return fail(err, errlen, "--%s: bad value '%s'", LONG_OPTS[idx].name,
				    optarg);
	}
	if (optind < argc)
		return fail(err, errlen, "unexpected argument '%s'", argv[optind]);
	return check(o, err, errlen);
}

const char *sk_api_name(enum sk_api api)
{
	return api == SK_API_RAW ? "raw" : "udp";
}

const char *sk_calls_name(unsigned int batch)
{
	return batch > 1 ? "sendmmsg/recvmmsg" : "send/recv";
}

unsigned int sk_payload_len(unsigned int size)
{
	return size - SK_FCS - SK_HDRS;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* The ones'-complement sum of an IPv4 header of 20 bytes, folded and inverted. */
static uint16_t ip_checksum(const uint8_t *h)
{
	uint32_t sum = 0;
	int i;

	for (i = 0; i < 20; i += 2)
		sum += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void build_ipv4(const struct sk_opts *o, uint8_t *ip)
{
	put16(ip, 0x4500);                              /* version 4, 20 bytes, no TOS */
	put16(ip + 2, (uint16_t)(o->size - SK_FCS - 14));
	put32(ip + 4, 0x40000000u);                     /* id 0, don't fragment */
	ip[8] = 64;
	ip[9] = 17;                                     /* UDP */
	put32(ip + 12, o->src_ip);
	put32(ip + 16, o->dst_ip);
	put16(ip + 10, ip_checksum(ip));
}

size_t sk_build_frame(const struct sk_opts *o, const uint8_t src_mac[6], uint8_t *buf)
{
	size_t len = o->size - SK_FCS;
	uint8_t *udp = buf + 34;

	memset(buf, 0, len);
	memcpy(buf, o->dst_mac, 6);
	memcpy(buf + 6, src_mac, 6);
	put16(buf + 12, 0x0800);
	build_ipv4(o, buf + 14);
	put16(udp, o->port);                            /* source port = destination port */
	put16(udp + 2, o->port);
	put16(udp + 4, (uint16_t)(sk_payload_len(o->size) + 8));
	return len;
}

int sk_frame_matches(const struct sk_opts *o, const uint8_t *buf, size_t len)
{
	if (len != o->size - SK_FCS)
		return 0;
	return buf[12] == 0x08 && buf[13] == 0x00 && buf[23] == 17 &&
	       (buf[36] << 8 | buf[37]) == o->port;
}

double sk_gbps(double pps, unsigned int size, int l1)
{
	return pps * (size + (l1 ? 20 : 0)) * 8 / 1e9;
}
