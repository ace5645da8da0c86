/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A log-linear latency histogram in the manner of HdrHistogram: exact below 256 ns, then 128
 * buckets per power of two, so a bucket is at most 1/128 (< 1 %) of its value wide, up to
 * 2^31 ns (~2.1 s). Recording is a few instructions and touches one counter; nothing is
 * allocated after hist_init().
 */
#ifndef SLUICE_GEN_HIST_H
#define SLUICE_GEN_HIST_H

#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BITS 7
#define HIST_BUCKETS (256 + 24 * 128)

struct hist {
	uint64_t count, overflow;     /* overflow: values past the last bucket */
	uint64_t min, max;
	double sum, sum_sq;
	uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t value);
/* VALUE N times, as N hist_record() calls would (the sums in one step). */
void hist_record_n(struct hist *h, uint64_t value, uint64_t n);
/* The value below which FRACTION (0..1) of the recorded values lie (bucket midpoint). */
uint64_t hist_percentile(const struct hist *h, double fraction);
double hist_mean(const struct hist *h);
double hist_stdev(const struct hist *h);
/* Index of VALUE's bucket, and the lowest value of bucket INDEX. */
unsigned int hist_index(uint64_t value);
uint64_t hist_bucket_low(unsigned int index);
/* "low_ns,high_ns,count" lines for every non-empty bucket. */
void hist_write_csv(const struct hist *h, FILE *f);
/* The same as one JSON object: summary figures and "buckets": [[low_ns, high_ns, count]...]. */
void hist_write_json(const struct hist *h, FILE *f);

#endif
