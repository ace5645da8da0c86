/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's own control operations (add-flow, del-flows, dump-flows, groups, meters,
 * trace); control thread only. Rules, groups and meters are flow.h's model; the text forms
 * are flow_parse.c's.
 */
#ifndef SLUICE_FWD_FLOW_H
#define SLUICE_FWD_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "flow.h"

/* Names ports in dumps and traces: NAME(CTX, index). */
struct flow_namer {
	flow_port_name name;
	void *ctx;
};

/* Adds a rule, or replaces the instructions of the rule with the same table, match and
 * priority (its counters kept unless reset_counts). -1 with ERR. */
int fwd_flow_add(void *state, const struct flow_rule_spec *spec, char *err, size_t err_len);
/* Whether fwd_flow_add() would take SPEC as the rules are now (its groups and meters exist,
 * its table is in range, no overlap when it asks check_overlap); nothing is changed. -1
 * with ERR. */
int fwd_flow_check(void *state, const struct flow_rule_spec *spec, char *err, size_t err_len);
/* Changes the instructions of the rules FILTER selects (strict: same match and priority). */
int fwd_flow_modify(void *state, const struct flow_rule_spec *filter, bool strict,
		    unsigned int *n_changed, char *err, size_t err_len);
/* Deletes the rules FILTER selects; NULL deletes every rule. Returns how many. */
unsigned int fwd_flow_delete(void *state, const struct flow_rule_spec *filter, bool strict);
/*
 * replace-flows: a new rule set is built aside (open, add each rule) and then replaces every
 * rule at once (commit): a packet is classified by the old set or the new one, never a mix.
 * abort() drops it. Groups and meters the rules use must exist when they are added.
 */
void *fwd_flow_bundle_open(void *state);
int fwd_flow_bundle_add(void *state, void *bundle, const struct flow_rule_spec *spec,
			char *err, size_t err_len);
void fwd_flow_bundle_commit(void *state, void *bundle);
void fwd_flow_bundle_abort(void *state, void *bundle);
/* The rules FILTER selects (NULL: all), as dump-flows shows them. */
json_t *fwd_flow_dump(void *state, const struct flow_rule_spec *filter, bool strict,
		      const struct flow_namer *namer);

/* ADD: a new group (an existing id is an error unless MODIFY). */
int fwd_flow_group_set(void *state, const struct flow_group_spec *g, bool modify, char *err,
		       size_t err_len);
/* Deletes group ID (FLOW_PORT_ANY: all) and the rules that use it. False: no such group. */
bool fwd_flow_group_del(void *state, uint32_t id);
json_t *fwd_flow_group_dump(void *state, const struct flow_namer *namer);

int fwd_flow_meter_set(void *state, const struct flow_meter_spec *m, bool modify, char *err,
		       size_t err_len);
/* Deletes meter ID (FLOW_PORT_ANY: all) and the rules that use it. */
bool fwd_flow_meter_del(void *state, uint32_t id);
json_t *fwd_flow_meter_dump(void *state);

/* Walks a packet with KEY through the tables, as ofproto/trace: text in OUT, and the
 * decision as JSON. Touches no counter, cache or meter. */
json_t *fwd_flow_trace(void *state, const struct flow_key *key, const struct flow_namer *namer);

/* Takes up to MAX queued packet-ins (the `controller` action and table misses). */
json_t *fwd_flow_packet_ins(void *state, unsigned int max);

/*
 * An eventfd (made on the first call, by the control thread) that a worker writes when it
 * queues a packet-in and the control thread has not been told of one since it last took
 * packet-ins: the control thread watches it and reads it empty, so a packet-in waits for
 * no housekeeping tick. At most one write per worker between two takes; -1 if it could
 * not be made (packet-ins then wait for the tick, as before).
 */
int fwd_flow_wake_fd(void);

/* Takes up to MAX records of rules removed by a timeout, or deleted with send_flow_rem:
 * their match, the reason and their final counters (flow-removed for the agent). */
json_t *fwd_flow_removed(void *state, unsigned int max);

/* A port's OpenFlow config (port->of_config) changed: the switch follows it at once. */
void fwd_flow_ports_changed(void *state);

/* The learning bridge the `normal` action uses (its address table: fdb-* verbs). */
void *fwd_flow_learn(void *state);

#endif
