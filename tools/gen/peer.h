/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Why a client port could not reach its peer's socket. DPDK's memif and virtio-user
 * drivers log "Failed to connect socket" and hand back -1, which rte_strerror() reads as
 * EPERM ("Operation not permitted"): a stale errno, not the cause. This asks the file
 * system and the socket itself. No DPDK here, so unit tests link it alone.
 */
#ifndef SLUICE_GEN_PEER_H
#define SLUICE_GEN_PEER_H

#include <stdbool.h>
#include <stddef.h>

#define PEER_WHY_LEN 160

/*
 * Writes to WHY (PEER_WHY_LEN bytes) what stands between a client and the Unix socket at
 * PATH: "no such file", "not a socket", "connection refused: nothing listens on it", ...
 * SEQPACKET picks the socket type the driver uses (memif: true; vhost-user: false). Returns
 * false when a connection succeeds now: the peer came up after the port's own attempt, and
 * WHY says so.
 */
bool peer_diagnose(const char *path, bool seqpacket, char *why, size_t len);

#endif
