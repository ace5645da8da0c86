/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The EAL for the fuzz targets that need DPDK objects (mbufs, rings, ethdevs): started once,
 * in-process, from LLVMFuzzerInitialize. No hugepages (a fuzz run must not need the
 * machine's, nor leave files in hugetlbfs), no PCI scan, no shared config and no telemetry
 * socket (several runs may go at once, and nothing else may attach). Two lcores, because
 * sluiced's worker module wants one besides the main lcore (wk_init), though no worker is
 * ever started: the targets call what a worker would call, on their own thread.
 */
#ifndef SLUICE_FUZZ_EAL_H
#define SLUICE_FUZZ_EAL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

int sluice_logtype;    /* sluiced's log type (main.c, which the targets do not link) */

static inline void fuzz_eal_init(void)
{
	char prefix[32];
	char *argv[] = { "fuzz", "--no-huge", "-m", "128", "--no-pci", "--no-shconf",
			 "--no-telemetry", "-l", "0-1", "--file-prefix", prefix,
			 "--log-level=*:error", NULL };

	/* --no-shconf still makes a runtime directory named after the prefix. */
	snprintf(prefix, sizeof(prefix), "sluice-fuzz-%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		fprintf(stderr, "fuzz: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
		exit(1);
	}
	sluice_logtype = rte_log_register_type_and_pick_level("sluice", RTE_LOG_ERR);
}

#endif
