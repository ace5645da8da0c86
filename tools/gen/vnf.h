/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inline VNFs: the behaviour of DPDK's l2fwd example, served by sluice-gen's own loop.
 *
 * A busy-polling VNF process that shares a CPU with another busy poller measures the kernel
 * scheduler, not the switch (PLATFORM.md: loopback-1 fell to 0.033 Mpps of ~20 offered). So a
 * VNF here is two ports in the generator's process, cross-connected as l2fwd does it: what
 * arrives on the "in" port leaves on the "out" port and the other way round. Each VNF acts as
 * one l2fwd process whose port 0 is "in" and port 1 is "out": a frame leaving port P gets the
 * destination MAC 02:00:00:00:00:0P and the source MAC of port P, unless a next-hop MAC was
 * given (chains steered by a learning switch). Frames wait in a transmit buffer that is sent
 * when it holds a burst, and drained at the latest VNF_DRAIN_US after the last drain (l2fwd's
 * BURST_TX_DRAIN_US); what the port does not take is freed and counted as dropped.
 *
 * A VNF of kind L3 (--vnf-kind l3) acts as DPDK's l3fwd in its LPM mode does on a two-port
 * VNF: the same cross-connect and MAC rewrite (l3fwd's default next-hop MACs are l2fwd's),
 * and before them the router's work on each frame: the IPv4 header checked (RFC 1812 5.2.2,
 * as l3fwd checks it, plus the checksum its NIC would verify), the TTL decremented and the
 * checksum updated incrementally (RFC 1624). What fails is freed and counted by reason
 * ("discarded"), never sent. The route is the cross-connect: l3fwd with the two routes
 * sluice-bench gives it sends the generator's flows from port 0 to port 1 the same way.
 */
#ifndef SLUICE_GEN_VNF_H
#define SLUICE_GEN_VNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define VNF_MAX 8
#define VNF_BURST 32           /* l2fwd's MAX_PKT_BURST: receive burst and buffer size */
#define VNF_DRAIN_US 100       /* l2fwd's BURST_TX_DRAIN_US */
#define VNF_ETH_ADDRS 12       /* destination and source MAC: what a VNF rewrites */

enum vnf_side { VNF_IN, VNF_OUT };

/* What a VNF does to a frame besides crossing it over: l2fwd's MAC rewrite, or l3fwd's. */
enum vnf_kind { VNF_L2, VNF_L3 };

/*
 * Why an L3 VNF discards a frame (vnf_l3_reasons[] has their names); VNF_L3_OK forwards it.
 * RFC 1812 5.2.2's checks in its order, then the TTL (5.3.1).
 */
enum vnf_l3_verdict {
	VNF_L3_OK = -1,
	VNF_L3_NOT_IPV4 = 0,     /* EtherType not IPv4 (IPv6, ARP, a VLAN tag, ...) */
	VNF_L3_TRUNCATED,        /* shorter than its IPv4 header or its total length says */
	VNF_L3_BAD_VERSION,      /* IP version not 4 */
	VNF_L3_BAD_IHL,          /* header length under 5 words */
	VNF_L3_BAD_TOTAL_LENGTH, /* total length under the header length */
	VNF_L3_BAD_CHECKSUM,     /* the header checksum does not verify */
	VNF_L3_TTL_EXPIRED,      /* TTL 0 or 1: it would reach 0 here */
	VNF_L3_REASONS
};

extern const char *const vnf_l3_reasons[VNF_L3_REASONS];

struct rte_eth_dev_tx_buffer;

struct vnf {
	uint16_t port[2];                      /* ethdev of the in and out port */
	/* What a frame leaving port P gets as its first 12 bytes: destination, then source. */
	uint8_t addrs[2][VNF_ETH_ADDRS];
	struct rte_eth_dev_tx_buffer *buf[2];  /* frames waiting to leave port P */
	uint64_t rx[2];                        /* received on port P */
	uint64_t tx[2];                        /* sent out of port P */
	uint64_t dropped[2];                   /* meant for port P, not taken by it */
	enum vnf_kind kind;
	uint64_t discarded[2][VNF_L3_REASONS]; /* received on port P, discarded (L3), by reason */
};

struct vnf_set {
	struct vnf v[VNF_MAX];
	unsigned int n;
	uint64_t drain_tsc, last_drain;        /* TSC */
};

/* Next-hop MACs given with --vnf-dst-mac, for the frames leaving each side. */
struct vnf_dst {
	uint8_t mac[2][6];
	bool set[2];
};

/*
 * Parses a --vnf-dst-mac value: "l2fwd" (keep l2fwd's rewrite), "MAC" (frames leaving the
 * out port) or "MAC,MAC" (leaving the out port, then leaving the in port). 0, or -1 with a
 * message in ERR.
 */
int vnf_parse_dst(const char *s, struct vnf_dst *d, char *err, size_t len);

/* A MAC like 02:00:00:00:01:ff in S[0..N) into MAC; 0, or -1 if it is not one. */
int vnf_parse_mac(const char *s, size_t n, uint8_t mac[6]);

/* Parses a --vnf-kind value, l2 or l3, into KIND; 0, or -1 if it is neither. */
int vnf_parse_kind(const char *s, enum vnf_kind *kind);

/* The name of KIND: "l2" or "l3". */
const char *vnf_kind_name(enum vnf_kind kind);

/*
 * An L3 VNF's work on one frame of LEN bytes (no FCS) at FRAME: checks its IPv4 header and,
 * when it passes, decrements the TTL and updates the checksum; returns VNF_L3_OK or why the
 * frame is to be discarded (then FRAME is unchanged). The MACs are not touched.
 */
enum vnf_l3_verdict vnf_l3_route(uint8_t *frame, uint32_t len);

/* l2fwd's destination MAC for frames leaving port PORT_ID: 02:00:00:00:00:<PORT_ID>. */
void vnf_l2fwd_dst(unsigned int port_id, uint8_t mac[6]);

/* Rewrites a frame's first 12 bytes as a VNF does: ADDRS holds destination then source. */
static inline void vnf_rewrite(uint8_t *frame, const uint8_t addrs[VNF_ETH_ADDRS])
{
	__builtin_memcpy(frame, addrs, VNF_ETH_ADDRS);
}

/*
 * Sets up VNF I of S on two started ethdevs: MAC rewrite (the ports' own MACs, the l2fwd
 * destinations or DST), the transmit buffers and KIND. 0, or -1 after a message.
 */
int vnf_setup(struct vnf_set *s, unsigned int i, uint16_t in, uint16_t out,
	      const struct vnf_dst *dst, enum vnf_kind kind);

/* Serves every VNF once: a burst each way, and the drain timer. Returns frames received. */
uint64_t vnf_pass(struct vnf_set *s, uint64_t tsc);

/* Sends (or drops and counts) whatever waits in the transmit buffers. */
void vnf_flush(struct vnf_set *s);

/* Per-VNF counters: received, sent, dropped and (L3) discarded, in total and per direction. */
json_t *vnf_json(const struct vnf_set *s, const char *const *in_specs,
		 const char *const *out_specs);

/* Cumulative rx, tx, dropped of each VNF: for the per-second records. */
json_t *vnf_counts_json(const struct vnf_set *s);

#endif
