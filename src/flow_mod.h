/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's packet modifications: the byte-level half of set_field, push_vlan, pop_vlan
 * and dec_ttl. Pure (no mbuf, no EAL): DATA/LEN are a frame's first segment, and every
 * function finds its headers the way flow_key_extract() does (an 802.1Q or 802.1ad tag, and
 * a second one the switch pushed outside it,
 * 802.3 SNAP, IPv4 options, IPv6 extension headers, only first fragments carry L4), so a
 * rule that matched a field finds the same field here.
 *
 * Checksums follow each change incrementally (RFC 1624) where a checksum covers the field:
 * the IPv4 header checksum, the TCP and UDP checksums (through the pseudo-header for
 * addresses) and ICMPv6's. A UDP checksum of 0 (none, IPv4) stays 0; a UDP checksum that
 * would become 0 is written as 0xffff. SCTP's CRC32c is not incremental: it is recomputed
 * over the SCTP packet when all of it (up to the IP length) is in DATA/LEN, else left alone.
 *
 * Checksum offload: a frame whose mbuf asks the NIC (or the vhost peer) to fill in the L4
 * checksum (RTE_MBUF_F_TX_TCP_CKSUM / _UDP_CKSUM, or a received virtio frame with
 * NEEDS_CSUM) holds in its L4 checksum field the pseudo-header sum, not a checksum. The
 * incremental updates here treat the field as a checksum, which is wrong for such a frame
 * after an address change; the caller (flow_actions.c), which sees the mbuf flags, must
 * recompute the pseudo-header sum for those frames after an address change (and may skip
 * nothing else: port changes are outside the pseudo-header). Likewise a frame with
 * RTE_MBUF_F_TX_IP_CKSUM gets its IPv4 header checksum from the NIC: updating it here is
 * harmless.
 */
#ifndef SLUICE_FLOW_MOD_H
#define SLUICE_FLOW_MOD_H

#include <stdint.h>

#include "flow.h"

/*
 * Writes field F (VALUE in network order, left-aligned, flow_field_width(F) bytes, as in
 * struct flow_action) into the frame. Returns 0, or -1 when the frame does not carry the
 * field (the frame is then unchanged): VLAN_VID/VLAN_PCP on an untagged frame, an IPv4
 * field on a non-IPv4 frame, TP_SRC/TP_DST on a frame without a whole TCP, UDP or SCTP
 * header (a later fragment), TUN_ID (not in the frame's bytes).
 */
int flow_mod_set_field(uint8_t *data, uint32_t len, enum flow_field f, const uint8_t *value);

/*
 * Pushes an 802.1Q tag with TPID (host order) after the source address: its VID and PCP are
 * copied from the existing outer tag, else 0 (OpenFlow 1.3, 7.2.4). The frame grows by 4
 * bytes at the front: *DATA - 4 must be writable (headroom); *DATA and *LEN are updated.
 * Returns -1 (nothing changed) for a frame shorter than an Ethernet header.
 */
int flow_mod_push_vlan(uint8_t **data, uint32_t *len, uint16_t tpid);

/* Pops the outer tag (0x8100 or 0x88a8): the frame shrinks by 4 bytes at the front. -1 if
 * untagged. */
int flow_mod_pop_vlan(uint8_t **data, uint32_t *len);

/* 0 decremented, 1 expired (TTL/hop limit was 0 or 1: left unchanged), -1 not IP. */
int flow_mod_dec_ttl(uint8_t *data, uint32_t len);

/*
 * Checksum helpers, shared with flow_key_compose() and the tests. flow_csum_partial() adds
 * LEN bytes at P (network order, an odd tail padded with zero) to the 32-bit one's
 * complement accumulator SUM; flow_csum_fold() folds it and complements it into a
 * checksum, as it goes into a header (network order when stored with memcpy).
 */
uint32_t flow_csum_partial(const uint8_t *p, uint32_t len, uint32_t sum);
uint16_t flow_csum_fold(uint32_t sum);
/* SCTP's CRC32c (RFC 4960, appendix B) of LEN bytes at P (the checksum field must hold 0
 * while it is computed); the header holds it least significant byte first. */
uint32_t flow_sctp_crc32c(const uint8_t *p, uint32_t len);

#endif
