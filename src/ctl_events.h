/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The event stream of a flow switch (the `subscribe` method): a connection that subscribes
 * is sent JSON-RPC notifications (requests without an id) as things happen, so an agent
 * never polls: `packet-in` (the controller action's queue), `flow-removed` (rules removed
 * by a timeout or deleted with send_flow_rem), `port-status` (a port added, deleted, or its
 * link going up or down) and `controller-config` (set-controller and friends changed the
 * switch's OpenFlow settings). The control loop collects them on its housekeeping tick
 * (every 10 ms while a flow switch exists) and whenever it wakes, which a worker that
 * queues a packet-in makes it do at once (fwd_flow_wake_fd). A subscriber that does not
 * read is not sent more: packet-ins then wait in the switch's bounded queue, which counts
 * what it loses (`controller_queue` in show); port changes are a difference of states, so
 * none is lost.
 */
#ifndef SLUICE_CTL_EVENTS_H
#define SLUICE_CTL_EVENTS_H

#include <stdbool.h>

#include <jansson.h>

#include "ctl.h"

struct ctl_sub;

/* A subscription to PARAMS' switch, with the answer (the switch's ports now) in *RESULT;
 * NULL with E. */
struct ctl_sub *ctl_sub_new(json_t *params, json_t **result, struct ctl_error *e);
void ctl_sub_free(struct ctl_sub *sub);

/*
 * Appends to OUT the notifications (JSON-RPC objects) of what happened since the last call;
 * TAKE_PACKETS false leaves packet-ins and removed rules queued (the client reads slowly).
 * Returns false when the switch is gone (a last notification says so).
 */
bool ctl_sub_collect(struct ctl_sub *sub, bool take_packets, json_t *out);

#endif
