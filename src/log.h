/* SPDX-License-Identifier: BSD-3-Clause */
/* The daemon's log: DPDK's logger under the "sluice" type, so --log-level covers it too. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <rte_log.h>

extern int sluice_logtype;

#define LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sluice_logtype, "sluice: " fmt "\n", ##__VA_ARGS__)

#endif
