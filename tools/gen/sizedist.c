/* SPDX-License-Identifier: BSD-3-Clause */
#include "sizedist.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Trims blanks at both ends of S in place; the trimmed start. */
static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static bool is_header(const char *size, const char *weight)
{
	return strcmp(size, "size") == 0 && strcmp(weight, "weight") == 0;
}

/* One non-empty line "size,weight" into D; 0, or -1 with what is wrong in ERR. */
static int parse_entry(char *line, uint16_t min, uint16_t max, struct sizedist *d,
		       char *err, size_t len)
{
	char *comma = strchr(line, ','), *size_s, *weight_s, *end;
	long size;
	double weight;

	if (comma == NULL || strchr(comma + 1, ',') != NULL) {
		snprintf(err, len, "expected 'size,weight', got '%s'", line);
		return -1;
	}
	*comma = '\0';
	size_s = trim(line);
	weight_s = trim(comma + 1);
	if (is_header(size_s, weight_s) && d->n == 0)
		return 0;
	errno = 0;
	size = strtol(size_s, &end, 10);
	if (*size_s == '\0' || *end != '\0' || errno != 0 || size < min || size > max) {
		snprintf(err, len, "size '%s' is not a frame size of %u to %u bytes (FCS "
			 "included)", size_s, min, max);
		return -1;
	}
	weight = strtod(weight_s, &end);
	if (*weight_s == '\0' || *end != '\0' || !isfinite(weight) || weight < 0) {
		snprintf(err, len, "weight '%s' is not a number >= 0", weight_s);
		return -1;
	}
	if (d->n == SIZEDIST_MAX_ENTRIES) {
		snprintf(err, len, "more than %d sizes", SIZEDIST_MAX_ENTRIES);
		return -1;
	}
	d->size[d->n] = (uint16_t)size;
	d->weight[d->n++] = weight;
	return 0;
}

static double total_weight(const struct sizedist *d)
{
	double sum = 0;
	unsigned int i;

	for (i = 0; i < d->n; i++)
		sum += d->weight[i];
	return sum;
}

int sizedist_read(FILE *f, const char *name, uint16_t min, uint16_t max, struct sizedist *d,
		  char *err, size_t len)
{
	char line[256], why[200], *s, *hash;
	unsigned int lineno = 0;

	d->n = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(err, len, "%s:%u: line too long", name, lineno);
			return -1;
		}
		hash = strchr(line, '#');
		if (hash != NULL)
			*hash = '\0';
		s = trim(line);
		if (*s == '\0')
			continue;
		if (parse_entry(s, min, max, d, why, sizeof(why)) != 0) {
			snprintf(err, len, "%s:%u: %s", name, lineno, why);
			return -1;
		}
	}
	if (d->n == 0 || !(total_weight(d) > 0)) {
		snprintf(err, len, "%s: no size with a weight above 0", name);
		return -1;
	}
	return 0;
}

int sizedist_load(const char *path, uint16_t min, uint16_t max, struct sizedist *d,
		  char *err, size_t len)
{
	FILE *f = fopen(path, "r");
	int rc;

	if (f == NULL) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	rc = sizedist_read(f, path, min, max, d, err, len);
	fclose(f);
	return rc;
}

/* Whole weights that fit the cycle are slots as they are; 0 if they are not. */
static unsigned int exact_slots(const struct sizedist *d, unsigned int *slots)
{
	double sum = 0;
	unsigned int i;

	for (i = 0; i < d->n; i++) {
		if (d->weight[i] != floor(d->weight[i]))
			return 0;
		sum += d->weight[i];
		slots[i] = (unsigned int)d->weight[i];
	}
	return sum <= SIZEDIST_MAX_CYCLE ? (unsigned int)sum : 0;
}

/* Weights rounded to SIZEDIST_MAX_CYCLE slots by largest remainder. */
static void rounded_slots(const struct sizedist *d, unsigned int *slots)
{
	double sum = total_weight(d), rest[SIZEDIST_MAX_ENTRIES];
	unsigned int i, used = 0, best;

	for (i = 0; i < d->n; i++) {
		double exact = d->weight[i] / sum * SIZEDIST_MAX_CYCLE;

		slots[i] = (unsigned int)floor(exact);
		rest[i] = exact - slots[i];
		used += slots[i];
	}
	for (; used < SIZEDIST_MAX_CYCLE; used++) {
		best = 0;
		for (i = 1; i < d->n; i++)
			if (rest[i] > rest[best])
				best = i;
		slots[best]++;
		rest[best] = -1;
	}
}

/* Smooth weighted round robin: each step the entry furthest behind its share goes next. */
static void interleave(const struct sizedist *d, const unsigned int *slots, unsigned int n,
		       uint16_t *cycle)
{
	long current[SIZEDIST_MAX_ENTRIES] = { 0 };
	unsigned int k, i, best;

	for (k = 0; k < n; k++) {
		best = 0;
		for (i = 0; i < d->n; i++) {
			current[i] += slots[i];
			if (current[i] > current[best])
				best = i;
		}
		current[best] -= (long)n;
		cycle[k] = d->size[best];
	}
}

int sizedist_cycle(const struct sizedist *d, uint16_t *cycle, unsigned int *n, char *err,
		   size_t len)
{
	unsigned int slots[SIZEDIST_MAX_ENTRIES], i;

	*n = exact_slots(d, slots);
	if (*n == 0) {
		rounded_slots(d, slots);
		*n = SIZEDIST_MAX_CYCLE;
		for (i = 0; i < d->n; i++)
			if (d->weight[i] > 0 && slots[i] == 0) {
				snprintf(err, len, "the weight of size %u is below 1/%d of the "
					 "total: too small to send", d->size[i],
					 SIZEDIST_MAX_CYCLE);
				return -1;
			}
	}
	interleave(d, slots, *n, cycle);
	return 0;
}
