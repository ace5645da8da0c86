/* SPDX-License-Identifier: BSD-3-Clause */
/* The receive-queue methods of the control protocol (ctl_rxq.c, docs/protocol.md). */
#ifndef SLUICE_CTL_RXQ_H
#define SLUICE_CTL_RXQ_H

#include <jansson.h>

#include "ctl.h"

json_t *ctl_show_rxqs(json_t *params, struct ctl_error *e);
json_t *ctl_set_rxq(json_t *params, struct ctl_error *e);
json_t *ctl_rebalance(json_t *params, struct ctl_error *e);
json_t *ctl_set_rebalance(json_t *params, struct ctl_error *e);

#endif
