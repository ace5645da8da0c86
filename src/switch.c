/* SPDX-License-Identifier: BSD-3-Clause */
/* Switch objects: a name, a forwarding function and the ports attached to it. */
#include "switch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_malloc.h>

#include "log.h"
#include "worker.h"

static struct sw *sw_table[SW_MAX];

struct sw *sw_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < SW_MAX; i++)
		if (sw_table[i] != NULL && strcmp(sw_table[i]->name, name) == 0)
			return sw_table[i];
	return NULL;
}

struct sw *sw_by_index(unsigned int i)
{
	return i < SW_MAX ? sw_table[i] : NULL;
}

struct sw *sw_create(const char *name, const char *mode, const json_t *params,
		     char *err, size_t err_len)
{
	const struct fwd_ops *ops = fwd_find(mode);
	unsigned int slot;
	struct sw *s;

	if (ops == NULL) {
		snprintf(err, err_len, "unknown mode '%s' (this release has: patch, learn, flow)", mode);
		return NULL;
	}
	for (slot = 0; slot < SW_MAX && sw_table[slot] != NULL; slot++)
		;
	if (slot == SW_MAX) {
		snprintf(err, err_len, "the daemon has %d switches, its maximum", SW_MAX);
		return NULL;
	}
	s = rte_zmalloc("sw", sizeof(*s), RTE_CACHE_LINE_SIZE);
	if (s == NULL) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	s->fwd = ops->create(params, err, err_len);
	if (s->fwd == NULL) {
		rte_free(s);
		return NULL;
	}
	s->ops = ops;
	if (ops->bind != NULL)
		ops->bind(s->fwd, s->ports);
	snprintf(s->name, sizeof(s->name), "%s", name);
	sw_table[slot] = s;
	return s;
}

void sw_destroy(struct sw *s)
{
	unsigned int i;

	for (i = 0; i < SW_MAX; i++)
		if (sw_table[i] == s)
			sw_table[i] = NULL;
	s->ops->destroy(s->fwd);
	free(s->of);
	rte_free(s);
}

void sw_abandon(struct sw *s)
{
	unsigned int i;

	LOG(ERR, "switch %s: a stuck worker may still use it: its state is left allocated",
	    s->name);
	for (i = 0; i < SW_MAX; i++)
		if (sw_table[i] == s)
			sw_table[i] = NULL;
}

int sw_free_slot(const struct sw *s, const char *name)
{
	int i, best = -1;

	for (i = 0; i < SW_MAX_PORTS; i++) {
		if (s->ports[i] != NULL)
			continue;
		if (s->slot_freed[i] != 0 && strcmp(s->slot_name[i], name) == 0)
			return i;
		if (best < 0 || s->slot_freed[i] < s->slot_freed[best])
			best = i;
	}
	return best;
}

int sw_attach_port(struct sw *s, struct port *p, int want)
{
	int i = want >= 0 ? want : sw_free_slot(s, p->name);

	if (i < 0 || i >= SW_MAX_PORTS || s->ports[i] != NULL)
		return -1;
	p->sw = s;
	p->sw_index = (uint16_t)i;
	s->ops->port_added(s->fwd, (uint16_t)i);
	/* Release: a worker that sees the pointer sees the port's fields and the fwd state. */
	__atomic_store_n(&s->ports[i], p, __ATOMIC_RELEASE);
	/* A fast memif port can be captured by nobody (capture.h): always on the path. */
	if (p->vhf_direct != NULL || p->mff != NULL)
		sw_set_fast(s, p, true);
	s->n_ports++;
	return 0;
}

void sw_detach_port(struct sw *s, struct port *p)
{
	snprintf(s->slot_name[p->sw_index], sizeof(s->slot_name[0]), "%s", p->name);
	s->slot_freed[p->sw_index] = ++s->slot_clock;
	__atomic_store_n(&s->fast_ports, s->fast_ports & ~(UINT64_C(1) << p->sw_index),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&s->ports[p->sw_index], NULL, __ATOMIC_RELEASE);
	s->ops->port_removed(s->fwd, p->sw_index);
	s->n_ports--;
}

bool sw_tick_all(void)
{
	bool any = wk_defer_pending() > 0, reclaim = false;
	unsigned int i;

	wk_defer_reclaim();

	for (i = 0; i < SW_MAX; i++)
		if (sw_table[i] != NULL && sw_table[i]->ops->tick != NULL) {
			any = true;
			reclaim |= sw_table[i]->ops->tick(sw_table[i]->fwd);
		}
	if (!reclaim)
		return any;
	if (!wk_synchronize())
		return any;     /* reclaimed after a later grace period */
	for (i = 0; i < SW_MAX; i++)
		if (sw_table[i] != NULL && sw_table[i]->ops->reclaim != NULL)
			sw_table[i]->ops->reclaim(sw_table[i]->fwd);
	return any;
}
