/* SPDX-License-Identifier: BSD-3-Clause */
/* The capture methods of the control protocol (ctl_capture.c, docs/protocol.md). */
#ifndef SLUICE_CTL_CAPTURE_H
#define SLUICE_CTL_CAPTURE_H

#include <jansson.h>

#include "ctl.h"

json_t *ctl_capture_start(json_t *params, struct ctl_error *e);
json_t *ctl_capture_read(json_t *params, struct ctl_error *e);
json_t *ctl_capture_stop(json_t *params, struct ctl_error *e);

#endif
