/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "placement.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double placement_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *placement_label(double rtt_ns, double threshold_ns)
{
	if (rtt_ns < 0)
		return "unknown";
	return rtt_ns < threshold_ns ? "near" : "far";
}
