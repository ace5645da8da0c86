/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the port-spec parser (src/portspec.c) and the path policy that
 * follows it in sluiced (src/path_policy.c). The input is the spec text itself, so the
 * seeds are specs as users write them (tests/fuzz/corpus/portspec/). Checked besides what
 * the sanitizers catch:
 *   - every output string is NUL-terminated within its array, and an error has a message;
 *   - a spec that parses has a kind, a device name without ',' and devargs of key=value
 *     items (a value cannot smuggle in another argument), and yields a probe string that
 *     starts with the device name; a probe buffer too small is refused, NUL-terminated;
 *   - every path it names is absolute, has no ".." component and fits a socket address;
 *     the server socket path, if any, is one of them;
 *   - parsing is deterministic, and a small error buffer is never overrun.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path_policy.h"
#include "portspec.h"

#define FILL 0xa5       /* what output buffers hold before a call, to see a missing NUL */

/* Whether S has a NUL within its LEN bytes. */
static bool terminated(const char *s, size_t len)
{
	return memchr(s, '\0', len) != NULL;
}

/* The same lexical rule as the parser's, written out the obvious way. */
static bool has_dotdot_component(const char *path)
{
	const char *c = path;

	while (*c != '\0') {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.')
			return true;
		c += n;
		c += *c == '/';
	}
	return false;
}

/* Every comma-separated item of DEVARGS is key=value with one '=' and a key. */
static void check_devargs(const char *devargs)
{
	const char *item = devargs;

	while (*item != '\0') {
		size_t n = strcspn(item, ","), eq = strcspn(item, "=");

		if (n == 0 || eq == 0 || eq >= n || memchr(item + eq + 1, '=', n - eq - 1) != NULL)
			abort();
		item += n;
		item += *item == ',';
	}
}

static void check_paths(const struct portspec *ps)
{
	bool server_listed = ps->path[0] == '\0';
	unsigned int i;

	if (!terminated(ps->path, sizeof(ps->path)) || ps->n_paths > PORTSPEC_MAX_PATHS)
		abort();
	for (i = 0; i < ps->n_paths; i++) {
		const char *p = ps->paths[i].path;

		if (!terminated(p, sizeof(ps->paths[i].path)) || p[0] != '/' ||
		    has_dotdot_component(p) || ps->paths[i].key == NULL)
			abort();
		server_listed |= strcmp(p, ps->path) == 0;
	}
	if (!server_listed)
		abort();
}

static void check_parsed(const struct portspec *ps)
{
	char probe[PORTSPEC_DEVNAME_LEN + PORTSPEC_ARGS_LEN + 2], small[16];
	size_t dn;

	if ((unsigned int)ps->kind >= PORTSPEC_KIND_COUNT ||
	    ps->is_vdev != (ps->kind != PORTSPEC_PCI) ||
	    !terminated(ps->devname, sizeof(ps->devname)) || ps->devname[0] == '\0' ||
	    strchr(ps->devname, ',') != NULL || !terminated(ps->devargs, sizeof(ps->devargs)))
		abort();
	check_devargs(ps->devargs);
	check_paths(ps);
	memset(probe, FILL, sizeof(probe));
	if (portspec_probe_string(ps, probe, sizeof(probe)) != 0)
		abort();    /* sluiced's buffer is this size: a spec that parses must fit it */
	dn = strlen(ps->devname);
	if (!terminated(probe, sizeof(probe)) || strncmp(probe, ps->devname, dn) != 0 ||
	    (probe[dn] != '\0' && probe[dn] != ','))
		abort();
	memset(small, FILL, sizeof(small));
	if (portspec_probe_string(ps, small, sizeof(small)) == 0 ? strlen(probe) >= sizeof(small)
	    : !terminated(small, sizeof(small)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct portspec ps, again;
	char spec[PORTSPEC_MAX_LEN + 64], err[PORTSPEC_ERR_LEN], small_err[8], unique[16];
	unsigned int queues = 1 + (unsigned int)(size % 4);   /* sluiced: one per worker */
	size_t n = size < sizeof(spec) - 1 ? size : sizeof(spec) - 1;
	int rc;

	memcpy(spec, data, n);
	spec[n] = '\0';
	snprintf(unique, sizeof(unique), "p%u", 1 + (unsigned int)(size % 256));
	memset(err, FILL, sizeof(err));
	memset(&ps, FILL, sizeof(ps));
	rc = portspec_parse(spec, unique, queues, &ps, err, sizeof(err));
	if (rc != 0) {
		if (rc != -1 || !terminated(err, sizeof(err)) || err[0] == '\0')
			abort();
	} else {
		check_parsed(&ps);
		/* What path_policy.c reads of the disk: it must not trip over any parsed spec. */
		memset(err, FILL, sizeof(err));
		if (path_policy_check(&ps, err, sizeof(err)) != 0 &&
		    (!terminated(err, sizeof(err)) || err[0] == '\0'))
			abort();
	}
	memset(small_err, FILL, sizeof(small_err));
	if (portspec_parse(spec, unique, queues, &again, small_err, sizeof(small_err)) != rc ||
	    (rc == 0 && memcmp(&ps, &again, sizeof(ps)) != 0) ||
	    (rc != 0 && !terminated(small_err, sizeof(small_err))))
		abort();
	return 0;
}
