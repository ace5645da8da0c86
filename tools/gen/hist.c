/* SPDX-License-Identifier: BSD-3-Clause */
#include "hist.h"

#include <math.h>
#include <string.h>

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned int hist_index(uint64_t v)
{
	unsigned int msb, shift;

	if (v < 256)
		return (unsigned int)v;
	msb = 63u - (unsigned int)__builtin_clzll(v);
	shift = msb - HIST_SUB_BITS;                      /* >= 1 */
	return 256u + (shift - 1u) * 128u + (unsigned int)((v >> shift) - 128u);
}

uint64_t hist_bucket_low(unsigned int index)
{
	unsigned int shift;

	if (index < 256)
		return index;
	shift = (index - 256u) / 128u + 1u;
	return (uint64_t)((index - 256u) % 128u + 128u) << shift;
}

static uint64_t bucket_width(unsigned int index)
{
	return index < 256 ? 1 : UINT64_C(1) << ((index - 256u) / 128u + 1u);
}

void hist_record_n(struct hist *h, uint64_t v, uint64_t n)
{
	unsigned int i = hist_index(v);

	if (n == 0)
		return;
	if (i >= HIST_BUCKETS) {
		h->overflow += n;
		i = HIST_BUCKETS - 1;
	}
	h->buckets[i] += n;
	h->count += n;
	h->sum += (double)v * (double)n;
	h->sum_sq += (double)v * (double)v * (double)n;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void hist_record(struct hist *h, uint64_t v)
{
	hist_record_n(h, v, 1);
}

uint64_t hist_percentile(const struct hist *h, double fraction)
{
	uint64_t want, seen = 0, mid;
	unsigned int i;

	if (h->count == 0)
		return 0;
	want = (uint64_t)ceil(fraction * (double)h->count);
	if (want == 0)
		want = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= want) {
			mid = hist_bucket_low(i) + bucket_width(i) / 2;
			/* A midpoint may lie outside what was seen; the extremes are exact. */
			return mid < h->min ? h->min : mid > h->max ? h->max : mid;
		}
	}
	return h->max;
}

double hist_mean(const struct hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}

double hist_stdev(const struct hist *h)
{
	double m = hist_mean(h), var;

	if (h->count < 2)
		return 0.0;
	var = h->sum_sq / (double)h->count - m * m;
	return var > 0 ? sqrt(var) : 0.0;
}

void hist_write_csv(const struct hist *h, FILE *f)
{
	unsigned int i;

	fprintf(f, "low_ns,high_ns,count\n");
	for (i = 0; i < HIST_BUCKETS; i++)
		if (h->buckets[i] != 0)
			fprintf(f, "%llu,%llu,%llu\n", (unsigned long long)hist_bucket_low(i),
				(unsigned long long)(hist_bucket_low(i) + bucket_width(i) - 1),
				(unsigned long long)h->buckets[i]);
}

void hist_write_json(const struct hist *h, FILE *f)
{
	const char *sep = "";
	unsigned int i;

	fprintf(f, "{\"unit\": \"ns\", \"count\": %llu, \"overflow\": %llu, \"min\": %llu, "
		"\"max\": %llu, \"mean\": %.3f, \"stdev\": %.3f, \"buckets\": [",
		(unsigned long long)h->count, (unsigned long long)h->overflow,
		(unsigned long long)(h->count ? h->min : 0), (unsigned long long)h->max,
		hist_mean(h), hist_stdev(h));
	for (i = 0; i < HIST_BUCKETS; i++) {
		if (h->buckets[i] == 0)
			continue;
		fprintf(f, "%s\n  [%llu, %llu, %llu]", sep, (unsigned long long)hist_bucket_low(i),
			(unsigned long long)(hist_bucket_low(i) + bucket_width(i) - 1),
			(unsigned long long)h->buckets[i]);
		sep = ",";
	}
	fprintf(f, "\n]}\n");
}
