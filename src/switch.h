/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Switches: a named set of up to SW_MAX_PORTS ports and one forwarding function. Made and
 * changed by the control thread; a worker reads ports[] (atomically) to find an output.
 */
#ifndef SLUICE_SWITCH_H
#define SLUICE_SWITCH_H

#include "fwd.h"
#include "port.h"

#define SW_MAX 64
#define SW_NAME_LEN 32

struct of_config;

struct sw {
	const struct fwd_ops *ops;        /* read by workers */
	void *fwd;                        /* read by workers */
	struct port *ports[SW_MAX_PORTS]; /* read by workers, atomically; NULL: free slot */
	/* Ports with a one-copy path (vhost-user fast, the default, while not captured; memif
	 * fast=1); read by workers. */
	uint64_t fast_ports;

	char name[SW_NAME_LEN];
	unsigned int n_ports;
	struct of_config *of;             /* OpenFlow settings (ctl_of.c); NULL: none set */
	/*
	 * Which port held each slot last, and when it left: a slot's index is the port's
	 * OpenFlow number (minus one), and rules name ports by it, so a port added again gets
	 * its old slot back and another port takes a recently freed slot only when no other
	 * is left (OVS, too, keeps a port's number and avoids reusing freed ones).
	 */
	char slot_name[SW_MAX_PORTS][PORT_NAME_LEN];
	uint64_t slot_freed[SW_MAX_PORTS];    /* 0: never held a port */
	uint64_t slot_clock;
};

struct sw *sw_create(const char *name, const char *mode, const json_t *params,
		     char *err, size_t err_len);
/* Frees S, which must have no ports; no worker may use it any more. */
void sw_destroy(struct sw *s);
/* Forgets S without freeing it, for when a stuck worker may still read it (ctl_methods.c). */
void sw_abandon(struct sw *s);
struct sw *sw_find(const char *name);
struct sw *sw_by_index(unsigned int i);  /* 0..SW_MAX-1, NULL for empty slots */

/*
 * Puts P in slot WANT of S (its OpenFlow number minus one), or, WANT negative, in the slot
 * sw_free_slot() picks, and tells the forwarding function; -1 when that slot is taken or S
 * is full.
 */
int sw_attach_port(struct sw *s, struct port *p, int want);
/* The slot a port named NAME would get: the one it held before if free, else the lowest
 * never used, else the one freed longest ago; -1 when S is full. */
int sw_free_slot(const struct sw *s, const char *name);
/* Takes P out of S (workers may still hold it until the next grace period). */
void sw_detach_port(struct sw *s, struct port *p);

/*
 * Runs every switch's housekeeping (fwd_ops.tick), then one RCU grace period and the
 * reclaims if any asked for it. Control thread. Returns true when some switch has a tick.
 */
bool sw_tick_all(void);

/* Lets P's frames take the one-copy path of S (vhost_fast.h) or not (while captured). */
static inline void sw_set_fast(struct sw *s, const struct port *p, bool on)
{
	uint64_t bit = UINT64_C(1) << p->sw_index;

	__atomic_store_n(&s->fast_ports, on ? s->fast_ports | bit : s->fast_ports & ~bit,
			 __ATOMIC_RELAXED);
}

static inline struct port *sw_port(struct sw *s, uint16_t index)
{
	return __atomic_load_n(&s->ports[index], __ATOMIC_ACQUIRE);
}

#endif
