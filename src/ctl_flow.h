/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's control methods (ctl_flow.c) and what they share with the others
 * (ctl_methods.c): parameter checking, errors, switch lookup.
 */
#ifndef SLUICE_CTL_FLOW_H
#define SLUICE_CTL_FLOW_H

#include <stdbool.h>

#include <jansson.h>

#include "ctl.h"
#include "switch.h"

enum param_type { P_STRING, P_NAME, P_UINT, P_BOOL, P_ARRAY };

struct param {
	const char *key;
	enum param_type type;
	bool required;
};

/* Sets E and returns NULL, for `return ctl_fail(...)`. */
json_t *ctl_fail(struct ctl_error *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Checks PARAMS against DEFS (NULL-key terminated): no unknown key, types, names. */
int ctl_check_params(json_t *params, const struct param *defs, struct ctl_error *e);
struct sw *ctl_find_switch(json_t *params, const char *key, struct ctl_error *e);

json_t *ctl_add_flow(json_t *params, struct ctl_error *e);
json_t *ctl_add_flows(json_t *params, struct ctl_error *e);
json_t *ctl_mod_flows(json_t *params, struct ctl_error *e);
json_t *ctl_del_flows(json_t *params, struct ctl_error *e);
json_t *ctl_replace_flows(json_t *params, struct ctl_error *e);
json_t *ctl_dump_flows(json_t *params, struct ctl_error *e);
json_t *ctl_add_group(json_t *params, struct ctl_error *e);
json_t *ctl_mod_group(json_t *params, struct ctl_error *e);
json_t *ctl_del_groups(json_t *params, struct ctl_error *e);
json_t *ctl_dump_groups(json_t *params, struct ctl_error *e);
json_t *ctl_add_meter(json_t *params, struct ctl_error *e);
json_t *ctl_mod_meter(json_t *params, struct ctl_error *e);
json_t *ctl_del_meters(json_t *params, struct ctl_error *e);
json_t *ctl_dump_meters(json_t *params, struct ctl_error *e);
json_t *ctl_trace(json_t *params, struct ctl_error *e);
json_t *ctl_packet_ins(json_t *params, struct ctl_error *e);
json_t *ctl_flows_removed(json_t *params, struct ctl_error *e);

#endif
