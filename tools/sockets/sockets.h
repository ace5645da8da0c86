/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pure part of sluice-sockets (docs/bench.md, "Kernel socket baseline"): its options,
 * the frames it sends and the test a received frame must pass. Kept apart from the sockets
 * and threads so unit tests run it without namespaces.
 */
#ifndef SLUICE_SOCKETS_H
#define SLUICE_SOCKETS_H

#include <stddef.h>
#include <stdint.h>

#define SK_MIN_SIZE 64          /* frame bytes including the 4-byte FCS */
#define SK_MAX_SIZE 1518
#define SK_MAX_BATCH 1024
#define SK_FCS 4
#define SK_HDRS 42              /* Ethernet 14 + IPv4 20 + UDP 8 */
#define SK_NAME 64

enum sk_api { SK_API_UDP, SK_API_RAW };
enum sk_role { SK_ROLE_TX = 1, SK_ROLE_RX = 2, SK_ROLE_BOTH = 3 };

struct sk_opts {
	enum sk_api api;
	enum sk_role role;
	unsigned int batch;             /* 1: send()/recv(); more: sendmmsg()/recvmmsg() */
	unsigned int size;              /* frame bytes including FCS */
	double duration;                /* seconds of sending (rx alone: of receiving) */
	double linger;                  /* seconds rx keeps counting after tx stopped */
	char tx_netns[SK_NAME], rx_netns[SK_NAME];   /* "" = the current namespace */
	char tx_iface[SK_NAME], rx_iface[SK_NAME];   /* raw: the devices to bind */
	uint32_t src_ip, dst_ip;        /* host order; udp sends to dst_ip */
	uint16_t port;                  /* UDP destination port */
	uint8_t dst_mac[6];             /* raw frames' destination */
	int tx_cpu, rx_cpu;             /* -1: not pinned */
	int rcvbuf;                     /* bytes asked for the receive socket's buffer */
	int json;                       /* per-second JSON lines on stdout */
	char out[256];                  /* summary file, "" = stdout only */
};

/* Fills O from ARGV; 0 on success, 1 for --help (usage printed), -1 with ERR set. */
int sk_opts_parse(int argc, char **argv, struct sk_opts *o, char *err, size_t errlen);

/* "udp"/"raw" and "send/recv"/"sendmmsg/recvmmsg": the JSON summary's words. */
const char *sk_api_name(enum sk_api api);
const char *sk_calls_name(unsigned int batch);

/* Parses "02:00:00:00:00:02"; 0 on success. */
int sk_parse_mac(const char *s, uint8_t mac[6]);

/* UDP payload bytes of a SIZE-byte frame (FCS included). */
unsigned int sk_payload_len(unsigned int size);

/*
 * Writes the SIZE - 4 bytes of a raw frame into BUF: Ethernet (SRC_MAC -> O's dst_mac),
 * IPv4 (O's addresses, checksum set), UDP (O's port, checksum 0) and a zero payload.
 * Returns the number of bytes written.
 */
size_t sk_build_frame(const struct sk_opts *o, const uint8_t src_mac[6], uint8_t *buf);

/* Whether a raw frame of LEN bytes is one of ours: IPv4, UDP, O's port, O's size. */
int sk_frame_matches(const struct sk_opts *o, const uint8_t *buf, size_t len);

/* Gbit/s of PPS frames of SIZE bytes: L2 counts the frame, L1 adds 20 B of preamble and
 * inter-frame gap. */
double sk_gbps(double pps, unsigned int size, int l1);

#endif
