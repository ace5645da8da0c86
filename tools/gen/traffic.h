/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What sluice-gen sends: frame sizes (fixed, a list, a range, IMIX), flows (varying MACs,
 * IPs and UDP ports) and the payload each frame carries. Sizes include the 4-byte FCS, as in
 * RFC 2544: a 64 B frame is 60 B in the buffer.
 */
#ifndef SLUICE_GEN_TRAFFIC_H
#define SLUICE_GEN_TRAFFIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRAFFIC_MAX_SIZES 64          /* in a list; a CSV distribution has a longer cycle */
#define TRAFFIC_MAX_CYCLE 4096        /* SIZEDIST_MAX_CYCLE */
#define TRAFFIC_MIN_FRAME 64
#define TRAFFIC_MAX_FRAME 9018       /* a 9000 B MTU: 9000 + Ethernet header + FCS */
#define TRAFFIC_STD_FRAME 1518       /* the largest frame of a 1500 B MTU */
#define TRAFFIC_HDR_LEN 42        /* Ethernet + IPv4 + UDP */
#define TRAFFIC_MAGIC 0x51ce

/* After the UDP header; 16 bytes, so it fits the 18 bytes a 64 B frame has left. */
struct traffic_payload {
	uint16_t magic;
	uint8_t stream;
	uint8_t flags;               /* TRAFFIC_MEASURED: sent inside the measured interval */
	uint32_t seq;                /* low 32 bits of the stream's sequence number */
	uint64_t tsc;
} __attribute__((packed));

#define TRAFFIC_MEASURED 0x01

struct traffic {
	uint16_t sizes[TRAFFIC_MAX_CYCLE];   /* a cycle of frame sizes (with FCS) */
	unsigned int n_sizes;
	uint16_t lo, hi;                     /* a range, when hi > 0 */
	uint32_t flows;
	bool vary_mac, vary_ip, vary_port;
};

/* "64", "64,512,1518", "64-1518", "imix" or "csv:FILE"; 0, or -1 with a message in ERR. */
int traffic_parse_sizes(const char *s, struct traffic *t, char *err, size_t len);
/* "mac,ip,port": the fields that differ between flows. */
int traffic_parse_vary(const char *s, struct traffic *t, char *err, size_t len);
double traffic_mean_size(const struct traffic *t);
/* The largest frame T sends, FCS included. */
uint16_t traffic_max_size(const struct traffic *t);
/* The size with FCS of the N-th frame. */
uint16_t traffic_size(const struct traffic *t, uint64_t n);
/* Writes Ethernet/IPv4/UDP headers of flow FLOW for a frame of LEN bytes (without FCS). */
void traffic_write_headers(const struct traffic *t, uint8_t *frame, uint16_t len,
			   uint32_t flow);
/* The port number's share of a flow: the UDP source port is 1024 + FLOW mod this. */
#define TRAFFIC_PORT_FLOWS 64000
/*
 * Turns FRAME, which holds the headers of flow 0 (traffic_write_headers), into those of
 * flow FLOW of the same length, rewriting only the fields --vary names (and the IPv4
 * checksum); PORT_FLOW is FLOW % TRAFFIC_PORT_FLOWS, which the caller keeps as a counter
 * so that no frame costs a division. The result is what traffic_write_headers writes.
 */
void traffic_set_flow(const struct traffic *t, uint8_t *frame, uint32_t flow,
		      uint32_t port_flow);

#endif
