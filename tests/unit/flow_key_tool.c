/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A test driver for tests/python/test_flow_key_scapy.py: reads one request a line on stdin
 * and answers one line on stdout, so scapy can check flow_key.c and flow_mod.c from outside.
 *   extract HEX              -> the key: name=value ..., values in host order
 *   set FIELD VALUEHEX HEX   -> "RC HEX" (FIELD: dl_src, nw_dst, tp_src, ... as in flow.h)
 *   push TPID HEX | pop HEX | dec_ttl HEX   -> "RC HEX"
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_key.h"
#include "flow_mod.h"
#include "flow_test_util.h"

static const char *const field_names[FLOW_FIELD_COUNT] = {
	"dl_src", "dl_dst", "vlan_vid", "vlan_pcp", "nw_src", "nw_dst", "ip_dscp", "ip_ecn",
	"nw_ttl", "tp_src", "tp_dst", "ipv6_src", "ipv6_dst", "ipv6_label", "tun_id",
};

static void print_hex(int rc, const uint8_t *d, uint32_t len)
{
	uint32_t i;

	printf("%d ", rc);
	for (i = 0; i < len; i++)
		printf("%02x", d[i]);
	printf("\n");
}

static void print_key(const struct flow_key *k)
{
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
	const uint8_t *m = k->dl_dst, *s = k->dl_src;

	printf("dl_dst=%02x:%02x:%02x:%02x:%02x:%02x dl_src=%02x:%02x:%02x:%02x:%02x:%02x ",
	       m[0], m[1], m[2], m[3], m[4], m[5], s[0], s[1], s[2], s[3], s[4], s[5]);
	printf("dl_type=%u vlan_tci=%u nw_proto=%u nw_tos=%u nw_ttl=%u nw_frag=%u ",
	       ntohs(k->dl_type), ntohs(k->vlan_tci), k->nw_proto, k->nw_tos, k->nw_ttl,
	       k->nw_frag);
	printf("tp_src=%u tp_dst=%u tcp_flags=%u ipv6_label=%u ", ntohs(k->tp_src),
	       ntohs(k->tp_dst), ntohs(k->tcp_flags), ntohl(k->ipv6_label));
	inet_ntop(AF_INET, &k->nw_src, a, sizeof(a));
	inet_ntop(AF_INET, &k->nw_dst, b, sizeof(b));
	printf("nw_src=%s nw_dst=%s ", a, b);
	inet_ntop(AF_INET6, k->ipv6_src, a, sizeof(a));
	inet_ntop(AF_INET6, k->ipv6_dst, b, sizeof(b));
	printf("ipv6_src=%s ipv6_dst=%s\n", a, b);
}

int main(void)
{
	static char line[1 << 16];
	static uint8_t buf[8 + 16384];
	uint8_t *d = buf + 8;

	while (fgets(line, sizeof(line), stdin) != NULL) {
		char *words[4] = { NULL };
		char *save = NULL, *w = strtok_r(line, " \n", &save);
		unsigned int n = 0;
		uint32_t len;
		int rc;

		while (w != NULL && n < 4) {
			words[n++] = w;
			w = strtok_r(NULL, " \n", &save);
		}
		if (n < 2) {
			printf("error\n");
		} else if (strcmp(words[0], "extract") == 0) {
			struct flow_key k;

			len = hex_to_bytes(words[1], d, 16384);
			flow_key_extract(d, len, 0, &k);
			print_key(&k);
		} else if (strcmp(words[0], "set") == 0 && n == 4) {
			uint8_t v[16] = { 0 };
			int f;

			for (f = 0; f < FLOW_FIELD_COUNT; f++)
				if (strcmp(words[1], field_names[f]) == 0)
					break;
			hex_to_bytes(words[2], v, sizeof(v));
			len = hex_to_bytes(words[3], d, 16384);
			rc = f < FLOW_FIELD_COUNT ?
			     flow_mod_set_field(d, len, (enum flow_field)f, v) : -2;
			print_hex(rc, d, len);
		} else if (strcmp(words[0], "push") == 0 && n == 3) {
			uint8_t *p = d;

			len = hex_to_bytes(words[2], d, 16384);
			rc = flow_mod_push_vlan(&p, &len, (uint16_t)strtoul(words[1], NULL, 0));
			print_hex(rc, p, len);
		} else if (strcmp(words[0], "pop") == 0) {
			uint8_t *p = d;

			len = hex_to_bytes(words[1], d, 16384);
			rc = flow_mod_pop_vlan(&p, &len);
			print_hex(rc, p, len);
		} else if (strcmp(words[0], "dec_ttl") == 0) {
			len = hex_to_bytes(words[1], d, 16384);
			rc = flow_mod_dec_ttl(d, len);
			print_hex(rc, d, len);
		} else {
			printf("error\n");
		}
		fflush(stdout);
	}
	return 0;
}
