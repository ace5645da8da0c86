/* SPDX-License-Identifier: BSD-3-Clause */
/* Learn mode's own control operations (fdb-*, set-switch, set-port); control thread only. */
#ifndef SLUICE_FWD_LEARN_H
#define SLUICE_FWD_LEARN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "fdb.h"

#define LEARN_DEFAULT_AGING 300        /* seconds, as OVS and Linux bridge */
#define LEARN_DEFAULT_MAX_ENTRIES 131072
#define LEARN_MAX_AGING 1000000
#define LEARN_VLANS 4096
#define LEARN_MIN_ENTRIES FDB_MIN_ENTRIES
#define LEARN_MAX_ENTRIES FDB_MAX_ENTRIES
#define LEARN_MAX_STORM_PPS 100000000  /* storm_pps above this means no limit anyway */

/* A port's VLAN mode: trunk (tagged frames of the allowed VLANs; 0 means untagged) or
 * access (untagged frames, one VLAN). */
struct learn_vlan_cfg {
	uint16_t access_tag;           /* 1..4094 for access; 0 for trunk */
	uint64_t allowed[LEARN_VLANS / 64];  /* trunk: the allowed VLANs */
};

int fwd_learn_set_aging(void *state, uint32_t seconds, char *err, size_t err_len);
int fwd_learn_set_vlan(void *state, uint16_t port, const struct learn_vlan_cfg *cfg);
void fwd_learn_set_limit(void *state, uint16_t port, uint32_t limit);
/* Storm control: flooded frames PORT may send in a second; 0: no limit. */
void fwd_learn_set_storm(void *state, uint16_t port, uint32_t pps);
/* Whether frames to 01:80:C2:00:00:00..0F are relayed (default: dropped, 802.1Q 8.6.3). */
void fwd_learn_set_forward_reserved(void *state, bool forward);

int fwd_learn_fdb_add(void *state, const uint8_t mac[6], uint16_t vlan, uint16_t port,
		      char *err, size_t err_len);
/* Returns false when there is no such entry. */
bool fwd_learn_fdb_del(void *state, const uint8_t mac[6], uint16_t vlan);
/* Deletes the dynamic entries of PORT, or of every port when PORT is negative. */
unsigned int fwd_learn_fdb_flush(void *state, int port);
/* The entries, as an array of {mac, vlan, port, age, type}. */
json_t *fwd_learn_fdb_json(void *state, const char *const *port_names);

#endif
