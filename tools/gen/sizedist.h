/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A frame-size distribution read from a CSV file (`--size csv:FILE`): one `size,weight` a
 * line, `#` starts a comment, blank lines and a `size,weight` header are allowed. The
 * distribution becomes a cycle of sizes, interleaved so that any stretch of the cycle
 * already has the mix (smooth weighted round robin), which sluice-gen then sends in turn.
 * Integer weights summing to at most SIZEDIST_MAX_CYCLE are kept exactly; other weights are
 * rounded to SIZEDIST_MAX_CYCLE slots (largest remainder). Pure C: no DPDK, unit-tested.
 */
#ifndef SLUICE_GEN_SIZEDIST_H
#define SLUICE_GEN_SIZEDIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIZEDIST_MAX_ENTRIES 256
#define SIZEDIST_MAX_CYCLE 4096

struct sizedist {
	uint16_t size[SIZEDIST_MAX_ENTRIES];   /* frame bytes, FCS included */
	double weight[SIZEDIST_MAX_ENTRIES];
	unsigned int n;
};

/*
 * Reads F (NAME for messages) into D; sizes must lie in MIN..MAX. 0, or -1 with a message
 * naming the file and line in ERR.
 */
int sizedist_read(FILE *f, const char *name, uint16_t min, uint16_t max, struct sizedist *d,
		  char *err, size_t len);
/* The same from the file PATH. */
int sizedist_load(const char *path, uint16_t min, uint16_t max, struct sizedist *d,
		  char *err, size_t len);
/*
 * The cycle of sizes for D in CYCLE (room for SIZEDIST_MAX_CYCLE); its length in *N. -1 with a
 * message when a weight is too small to get a slot of its own.
 */
int sizedist_cycle(const struct sizedist *d, uint16_t *cycle, unsigned int *n, char *err,
		   size_t len);

#endif
