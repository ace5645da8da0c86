/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A/B alternation: comparing two userspace switches when the machine's speed drifts
 * (PLATFORM.md, last section). Two tx->rx pairs, pair 0 through switch A and pair 1 through
 * switch B; in each window one pair sends while the other switch is SIGSTOPped. A window is
 * counted only after its settle time, and only frames sent inside it count as its own: frames
 * sent before it started (released by a resumed switch, or drained from the idle pair) are
 * "late" and counted apart, so no window is credited with another's traffic.
 *
 * The comparison is made here too: each window's rate against the mean of its two neighbours
 * (the other switch, seconds before and after, most likely in the same host state), and the
 * median and quartiles of those A/B ratios.
 */
#ifndef SLUICE_GEN_ALT_H
#define SLUICE_GEN_ALT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#define ALT_MAX_WINDOWS 4096

struct alt_window {
	unsigned int index, pair;            /* pair 0 is switch A, pair 1 switch B */
	double start_s, counted_s;           /* CLOCK_MONOTONIC start; seconds counted */
	uint64_t tx_packets, rx_packets;     /* over the counted part */
	uint64_t late_packets;               /* received in the window, sent before it */
};

struct alt {
	pid_t pids[2];
	double window_s, settle_s;
	bool json;
	/* The open window; the sink reads these for every frame (alt_count). */
	uint64_t start_tsc;
	unsigned int pair;
	bool counting;
	uint64_t rx, late;
	/* Bookkeeping of the open window. */
	double start_s, count_start_s;
	uint64_t tx_mark;
	struct alt_window windows[ALT_MAX_WINDOWS];
	unsigned int n_windows;              /* closed windows */
};

/*
 * Makes sure neither switch is left stopped, however this process ends: SIGCONTs both from
 * atexit, from fatal-signal handlers, and from a watchdog child that waits for this process
 * to die (so even SIGKILL or the OOM killer leave the switches running). Call before DPDK
 * starts (the watchdog is forked). 0, or -1 with errno.
 */
int alt_guard(struct alt *a);
/* SIGCONTs both switches; async-signal-safe. */
void alt_resume_all(void);
/* What a normal exit does (atexit): resume both, end and reap the watchdog. Idempotent. */
void alt_release(void);

/* Opens window 0 at monotonic time NOW_S (TSC NOW_TSC). */
void alt_start(struct alt *a, double now_s, uint64_t now_tsc);
/* Advances the clock of the windows; TX_OF(pair) is what that pair has sent so far. */
void alt_step(struct alt *a, double now_s, uint64_t now_tsc, const uint64_t tx_of[2]);

/* Per received frame of STREAM sent at SENT_TSC. */
static inline void alt_count(struct alt *a, unsigned int stream, uint64_t sent_tsc)
{
	if (sent_tsc < a->start_tsc)
		a->late++;
	else if (a->counting && stream == a->pair)
		a->rx++;
}

/* The windows, and the ratio summary, for the final JSON. */
json_t *alt_windows_json(const struct alt *a);
json_t *alt_summary_json(const struct alt *a);

/* Inclusive quantile (linear interpolation, as numpy and Python's method="inclusive") of
 * the N sorted values V at P in 0..1. */
double alt_quantile(const double *v, unsigned int n, double p);

#endif
