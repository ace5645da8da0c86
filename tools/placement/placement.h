/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pure part of sluice-placement (docs/placement.md): how a sample's round trips become
 * one figure and a label. Kept apart so unit tests run it without threads or CPUs.
 */
#ifndef SLUICE_PLACEMENT_H
#define SLUICE_PLACEMENT_H

#include <stddef.h>

/*
 * Round trips at or above this many nanoseconds are "far": PLATFORM.md saw ~60 ns when the
 * two vCPUs share an L3 and ~330-400 ns when they sit on different chiplets. 200 ns lies
 * between the two with room on both sides.
 */
#define PLACEMENT_FAR_NS 200.0

/* The median of V[0..N) (N > 0); sorts V in place. */
double placement_median(double *v, size_t n);

/* "near" below THRESHOLD_NS, "far" at or above it, "unknown" for a sample not taken (< 0). */
const char *placement_label(double rtt_ns, double threshold_ns);

#endif
