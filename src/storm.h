/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Storm control's token bucket: how many flooded frames a port may send into its switch per
 * second (set-port storm_pps). One bucket per (port, worker), written by that worker alone,
 * so it needs no lock and no atomic read-modify-write; workers never share a port's receive
 * queue, so the per-worker buckets of a port add up to the one limit.
 *
 * The bucket holds time, in TSC cycles, rather than frames: a frame costs the cycles of one
 * frame at the limit (hz / pps, worked out on the control thread), and time passing fills the
 * bucket up to a depth of a tenth of a second, or one frame's cost if that is more. So a
 * burst of pps / 10 frames passes at once after a quiet spell, and then the limit holds.
 * No division on the hot path, and only flooded frames get here. Pure: unit tested alone.
 */
#ifndef SLUICE_STORM_H
#define SLUICE_STORM_H

#include <stdbool.h>
#include <stdint.h>

struct storm_bucket {
	uint64_t credit;       /* cycles of sending the bucket holds */
	uint64_t last;         /* TSC of the last refill */
};

/* The cost of a frame at PPS frames per second with a HZ clock; 0 (no limit) for PPS 0. */
static inline uint64_t storm_cost(uint64_t hz, uint32_t pps)
{
	return pps == 0 ? 0 : (hz / pps > 0 ? hz / pps : 1);
}

/*
 * Whether one more frame may pass at time NOW, for a frame COST and a depth WINDOW (cycles,
 * normally hz / 10). A fresh (zeroed) bucket is full, as if the port had been quiet since
 * TSC 0 (the TSC has counted far longer than a depth by the time a port exists).
 */
static inline bool storm_allow(struct storm_bucket *b, uint64_t cost, uint64_t window,
			       uint64_t now)
{
	uint64_t depth = cost > window ? cost : window;
	uint64_t credit = now - b->last >= depth ? depth : b->credit + (now - b->last);

	b->last = now;
	if (credit > depth)
		credit = depth;
	if (credit < cost) {
		b->credit = credit;
		return false;
	}
	b->credit = credit - cost;
	return true;
}

#endif
