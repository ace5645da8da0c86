/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receive queues and workers (docs/cores.md): which worker polls which (port, queue), by
 * what rule a new queue is placed, the load each queue puts on its worker, and the
 * re-balance that moves queues when one worker is overloaded and another is not (OVS's
 * pmd-rxq-assign=cycles and pmd-auto-lb are the models). Control thread only; the moves
 * themselves are wk_move_rxq()'s.
 */
#ifndef SLUICE_RXQ_H
#define SLUICE_RXQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port.h"

/* Loads are measured over the last RXQ_WINDOW samples, one every RXQ_SAMPLE_MS. */
#define RXQ_SAMPLE_MS 1000
#define RXQ_WINDOW 5
#define RXQ_MAX (PORT_MAX * PORT_MAX_RXQ)

enum rxq_assign { RXQ_ASSIGN_ROUNDROBIN, RXQ_ASSIGN_CYCLES };

struct rxq_settings {
	enum rxq_assign assign;       /* where a new queue goes */
	bool auto_lb;                 /* the automatic re-balance (off by default) */
	unsigned int interval_s;      /* at least this long between two re-balances */
	unsigned int load_threshold;  /* % of a core: a worker at or above is overloaded */
	unsigned int improvement;     /* % the load variance must fall by to move queues */
	unsigned int move_gap_us;     /* a moved queue's pause for the receivers (wk_move_rxq) */
};

#define RXQ_MOVE_GAP_US_DEFAULT 1000
#define RXQ_MOVE_GAP_US_MAX 100000

/* One receive queue and its load over the window. */
struct rxq_info {
	struct port *port;
	uint16_t queue;
	int worker;
	bool pinned;
	uint64_t window_cycles, window_packets;
};

struct rxq_move {
	struct port *port;
	uint16_t queue;
	int from, to;
};

/* A re-balance worked out (a dry run) or done. */
struct rxq_plan {
	unsigned int n_moves;
	struct rxq_move moves[RXQ_MAX];
	unsigned int n_workers;
	double load_before[WK_MAX_WORKERS], load_after[WK_MAX_WORKERS];   /* % of a core */
	double variance_before, variance_after;
	double improvement;           /* % by which the variance falls */
};

/* What the automatic re-balance has done. */
struct rxq_auto_stats {
	uint64_t checks;              /* windows looked at */
	uint64_t dry_runs;            /* of those, with a worker overloaded and one not */
	uint64_t rebalances;          /* of those, with enough improvement: queues moved */
	uint64_t moves;               /* queues moved by it */
	double last_improvement;      /* of the last dry run, % */
	double since_last_s;          /* since the last re-balance; -1: none yet */
};

void rxq_init(const struct rxq_settings *s);
const struct rxq_settings *rxq_get_settings(void);
/* Replaces the settings; -1 and ERR when a value is out of range. */
int rxq_set_settings(const struct rxq_settings *s, char *err, size_t err_len);
const char *rxq_assign_name(enum rxq_assign a);
int rxq_assign_parse(const char *name, enum rxq_assign *a);

/* Samples the queues' counters and runs the automatic re-balance when due; call every few
 * hundred milliseconds. */
void rxq_tick(void);

/* Every receive queue of every port, in port and queue order, into OUT (RXQ_MAX); the
 * count. *WINDOW_S is the time the loads cover, *WINDOW_TSC the same in TSC cycles. */
unsigned int rxq_list(struct rxq_info *out, double *window_s, uint64_t *window_tsc);

/* Works out the assignment by measured load (a dry run): pinned queues stay, the others
 * go, busiest first, to the least loaded worker. */
void rxq_dry_run(struct rxq_plan *plan);

/* Moves the queues PLAN says; 0, or -1 with ERR at the first that failed (those before it
 * stay moved). */
int rxq_apply(const struct rxq_plan *plan, char *err, size_t err_len);

/* Moves P's queue Q to worker W (PIN: the re-balance leaves it there); 0 or -1 and ERR. */
int rxq_set(struct port *p, unsigned int q, unsigned int w, bool pin, char *err,
	    size_t err_len);

void rxq_auto_stats(struct rxq_auto_stats *st);

#endif
