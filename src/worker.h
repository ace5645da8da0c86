/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Workers: pinned poll loops (one DPDK lcore each). A worker owns a list of receive queues,
 * its "plan", which the control thread replaces as a whole: it builds a new plan, publishes
 * the pointer, and frees the old one after an RCU grace period (rte_rcu_qsbr), so the loop
 * takes no lock. Each port has one transmit queue per worker, so workers never share a
 * queue.
 */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "port.h"

struct wk_config {
	unsigned int burst;           /* packets per receive burst, 1..FWD_MAX_BURST */
	unsigned int idle_sleep_us;   /* longest sleep when idle; 0: never sleep */
};

struct wk_stats {
	unsigned int id, lcore;
	uint64_t loops, busy_cycles, idle_cycles, packets, sleeps;
	uint64_t injected;            /* frames the control thread handed it (packet-out) */
	uint64_t inject_dropped;      /* of those, sent to a port that did not take them */
	uint64_t stalls;              /* grace periods it held up past the bound */
	bool stuck;                   /* held up the last one and has not moved since */
	unsigned int rx_queues;
};

/* Sets up N workers on the EAL's worker lcores (there must be at least N). */
int wk_init(unsigned int n, const struct wk_config *cfg);
int wk_start(void);
void wk_stop(void);
void wk_fini(void);
unsigned int wk_count(void);
/*
 * The CPU lcore LCORE runs on (the first of its set). rte_lcore_to_cpu_id() gives the
 * lcore's own number when --lcores maps it (2@1 said cpu 0 for a worker pinned to CPU 1).
 */
int wk_lcore_cpu(unsigned int lcore);

/* Receive queues one worker may poll. */
#define WK_MAX_RXQS 1024

/* Chooses the worker for P's receive queue Q (rxq.c); the fewest queues when unset. */
typedef unsigned int (*wk_place_fn)(const struct port *p, unsigned int q);
void wk_set_placement(wk_place_fn fn);

/* Starts polling each of P's receive queues on the worker the placement chooses. */
int wk_add_port(struct port *p);

/*
 * Moves P's receive queue Q to worker TO without losing or reordering frames (the why is
 * at its definition); GAP_US: the pause between the old worker's last frame and the new
 * worker's first, for receivers that read several queues of one port. 0; -EINVAL for a
 * bad queue or worker; -EBUSY when the old worker is stuck (the queue stays with it);
 * -ENOMEM or -ENOSPC (full plan). Control thread only.
 */
int wk_move_rxq(struct port *p, unsigned int q, unsigned int to, unsigned int gap_us);

/* Receive queues worker ID polls. */
unsigned int wk_rxq_count(unsigned int id);
/* Stops polling P's queues; after wk_synchronize() no worker touches P. -1: no memory
 * (see replace_plan in worker.c). */
int wk_remove_port(struct port *p);

/*
 * Waits until every worker has passed a quiescent state, for two seconds at most: false when
 * a worker is stuck (logged and counted in its `stalls`; a worker already known stuck is not
 * waited for again). The caller must then not free what a worker may still read.
 */
bool wk_synchronize(void);
/* The same if workers poll and the caller is not one of them (unmap_guard.c); true when
 * there is nothing to wait for. */
bool wk_quiesce(void);

/*
 * Frees ARG with FN once every worker has passed a quiescent state, without waiting for it:
 * the control thread hands over what workers may still read (an old rule, a replaced table)
 * and goes on answering. wk_defer_reclaim() runs the frees whose grace period has passed;
 * the control loop calls it on every housekeeping tick. Control thread only. Returns -1
 * when no memory is left for the record (ARG is then leaked, never freed early).
 */
int wk_defer(void (*fn)(void *arg), void *arg);
void wk_defer_reclaim(void);
/* How many deferred frees wait for their grace period. */
unsigned int wk_defer_pending(void);

/*
 * Hands frame M to a worker (packet-out): sent out of OUT, or, with OUT NULL, served as if
 * received on IN (through the switch's forwarding function, counted as IN's). -1 when the
 * worker's queue is full (M is still the caller's). Control thread only; wk_synchronize()
 * returns only once every handed frame is served, so a deleted port is never named.
 */
struct rte_mbuf;
int wk_inject(struct port *in, struct port *out, struct rte_mbuf *m);

void wk_read_stats(unsigned int id, struct wk_stats *st);

/*
 * Reading worker ID's counters between its bursts, a seqlock:
 *	do { seq = wk_counters_begin(id, give_up); read; } while (wk_counters_changed(id, seq));
 * begin() waits for a burst in progress to end until GIVE_UP (rte_get_timer_cycles()),
 * then returns as it is (a worker stuck in a burst is read as it is). Counters read so
 * satisfy rx = forwarded + dropped per port.
 */
uint32_t wk_counters_begin(unsigned int id, uint64_t give_up);
bool wk_counters_changed(unsigned int id, uint32_t seq);

#endif
