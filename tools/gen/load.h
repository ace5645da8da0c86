/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Open and closed loop, and the figures that tell them apart.
 *
 * Closed loop (the default with --rate max): what a port's transmit burst refuses (its ring
 * is full) is kept and offered again on the next pass, so the generator never sends faster
 * than the path takes frames: offered == accepted, and a slow path shows as a lower rate.
 * Open loop (the default with a numeric --rate): bursts leave at the paced rate whatever
 * happens to them; what the port refuses is freed and counted as not accepted, never sent
 * again, so an overloaded path shows as loss ("disregarding drops", as MoonGen is run in the
 * seven-switch comparison).
 *
 * Loss is then split where it happened: `not_accepted` (refused by the port: the generator
 * offered more than the path took) and `lost_in_flight` (taken by the port, never received).
 * Pure arithmetic, no DPDK: unit-tested (tests/unit/test_load.c).
 */
#ifndef SLUICE_GEN_LOAD_H
#define SLUICE_GEN_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#define LOAD_L1_OVERHEAD 20   /* preamble, start delimiter, inter-frame gap: 64 B = 672 bit */

enum load_mode { LOAD_CLOSED, LOAD_OPEN };

/* What one sender did with its frames. */
struct load_tally {
	uint64_t offered;        /* frames the generator tried to send (retries not again) */
	uint64_t accepted;       /* frames the port took */
	uint64_t not_accepted;   /* open loop: frames refused, freed, never sent */
	uint64_t retried;        /* closed loop: refusals of frames that were offered again */
	uint64_t bytes;          /* accepted bytes, frames with FCS */
};

/*
 * One transmit burst: TRIED frames given to the port (a closed loop's retries among them),
 * SENT taken, SENT_BYTES their bytes.
 */
static inline void load_tally_burst(struct load_tally *t, enum load_mode mode, uint16_t tried,
				    uint16_t sent, uint64_t sent_bytes)
{
	t->accepted += sent;
	t->bytes += sent_bytes;
	if (mode == LOAD_OPEN) {
		t->offered += tried;
		t->not_accepted += (uint64_t)(tried - sent);
	} else {
		/* A closed loop offers each frame until the port takes it; it counts then. */
		t->offered += sent;
		t->retried += (uint64_t)(tried - sent);
	}
}

/* Counts over the measured interval. */
struct load_counts {
	uint64_t offered, accepted, received;
	uint64_t lost_in_flight;         /* accepted, not received (duplicates aside) */
	uint64_t tx_bytes, rx_bytes;     /* frames with FCS */
	double seconds;
};

struct load_figures {
	double offered_pps, accepted_pps, rx_pps;
	uint64_t not_accepted, lost_in_flight;
	/* Of the frames offered, so the two parts add up to loss_fraction. */
	double not_accepted_fraction, lost_in_flight_fraction, loss_fraction;
	double tx_gbps_l1, tx_gbps_l2, rx_gbps_l1, rx_gbps_l2;
};

void load_figures(const struct load_counts *c, struct load_figures *f);
/* Bit/s at L2 (frame bytes, FCS included) or L1 (+20 B a frame) for PACKETS and BYTES. */
double load_bps(uint64_t packets, uint64_t bytes, double seconds, bool l1);

const char *load_name(enum load_mode mode);

/*
 * --touch: reads every byte of LEN at P and folds them into a checksum (a sum of 64-bit
 * little-endian words, the tail zero-padded), which the caller accumulates and reports so
 * the compiler cannot leave the reads out.
 */
static inline uint64_t load_touch(const uint8_t *p, uint32_t len)
{
	uint64_t sum = 0, w;
	uint32_t i, k;

	for (i = 0; i + 8 <= len; i += 8) {
		__builtin_memcpy(&w, p + i, 8);
		sum += w;
	}
	for (w = 0, k = 0; i < len; i++, k++)
		w |= (uint64_t)p[i] << (8 * k);
	return sum + w;
}

#endif
