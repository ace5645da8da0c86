/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What an OpenFlow agent (python/sluice/ofagent, docs/openflow.md) needs of sluiced: a flow
 * switch's controller settings (kept here and in the state file; the agent reads them),
 * the connection state the agent reports back (shown by `show`), and packet-out. The
 * event stream (packet-ins, port changes, removed rules) is ctl_events.c's.
 */
#ifndef SLUICE_CTL_OF_H
#define SLUICE_CTL_OF_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "ctl.h"
#include "switch.h"

#define OF_MAX_CONTROLLERS 8
#define OF_TARGET_LEN 128
#define OF_PATH_LEN 256
#define OF_STATUS_LEN 2048

struct of_config {
	unsigned int n_targets;
	char targets[OF_MAX_CONTROLLERS][OF_TARGET_LEN];   /* tcp:HOST:PORT, ssl:HOST:PORT */
	char ssl_key[OF_PATH_LEN], ssl_cert[OF_PATH_LEN], ssl_ca[OF_PATH_LEN];
	uint64_t dpid;
	bool dpid_set;             /* else derived from the switch's name */
	bool standalone;           /* fail mode; else secure */
	uint32_t generation;       /* bumped by every change, so the agent re-reads them */
	char status[OF_STATUS_LEN];/* the agent's report: a JSON object's text, or empty */
};

json_t *ctl_set_controller(json_t *params, struct ctl_error *e);
json_t *ctl_del_controller(json_t *params, struct ctl_error *e);
json_t *ctl_get_controller(json_t *params, struct ctl_error *e);
json_t *ctl_set_datapath_id(json_t *params, struct ctl_error *e);
json_t *ctl_set_fail_mode(json_t *params, struct ctl_error *e);
json_t *ctl_set_controller_status(json_t *params, struct ctl_error *e);
json_t *ctl_packet_out(json_t *params, struct ctl_error *e);

/* The switch's OpenFlow settings as get-controller answers them (show's "openflow"), or
 * NULL when none was ever set. */
json_t *ctl_of_json(const struct sw *s);

/* Its settings' generation (0: none). */
uint32_t ctl_of_generation(const struct sw *s);

#endif
