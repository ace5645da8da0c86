/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receive-queue placement and re-balancing (rxq.h, docs/cores.md).
 *
 * Each worker adds the TSC cycles it spends on a queue's bursts to the queue's counter
 * (port_rxq, worker.c's poll_rxq). Once a second the control thread copies every counter
 * into a ring of RXQ_WINDOW + 1 samples; a queue's load is what its counter grew by across
 * the ring, divided by the time the ring spans, so one burst of work does not decide
 * anything and a queue keeps its history when it moves.
 *
 * The automatic re-balance follows OVS's pmd-auto-lb: once the window holds only samples
 * taken since the last change, and at most once per interval, it looks for a worker at or
 * above the load threshold while another is below it; then it works out where the queues
 * would go by measured load (a dry run) and moves them only when the variance of the
 * workers' loads falls by at least the improvement threshold. Noise alone never moves a
 * queue: two workers evenly loaded are both on the same side of the threshold.
 */
#include "rxq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>

#include "log.h"
#include "worker.h"

static struct rxq_settings settings = {
	.assign = RXQ_ASSIGN_ROUNDROBIN, .auto_lb = false, .interval_s = 60,
	.load_threshold = 95, .improvement = 25, .move_gap_us = RXQ_MOVE_GAP_US_DEFAULT,
};

#define RING (RXQ_WINDOW + 1)

/* The sample ring: times, and each queue's counters at those times. */
static struct {
	uint64_t tsc[RING];
	unsigned int head;            /* where the next sample goes */
	unsigned int count;           /* samples held, up to RING */
	unsigned int since_change;    /* samples taken since queues last moved */
	uint64_t last_ms;
	uint64_t last_rebalance_ms;   /* 0: never */
} ring;
static uint64_t hist_cycles[PORT_MAX][PORT_MAX_RXQ][RING];
static uint64_t hist_packets[PORT_MAX][PORT_MAX_RXQ][RING];
static uint32_t hist_generation[PORT_MAX];   /* the port the history is of */
static struct rxq_auto_stats auto_stats = { .since_last_s = -1 };

static uint64_t now_ms(void)
{
	return rte_get_timer_cycles() / (rte_get_timer_hz() / 1000);
}

const char *rxq_assign_name(enum rxq_assign a)
{
	return a == RXQ_ASSIGN_CYCLES ? "cycles" : "roundrobin";
}

int rxq_assign_parse(const char *name, enum rxq_assign *a)
{
	if (strcmp(name, "roundrobin") == 0)
		*a = RXQ_ASSIGN_ROUNDROBIN;
	else if (strcmp(name, "cycles") == 0)
		*a = RXQ_ASSIGN_CYCLES;
	else
		return -1;
	return 0;
}

static unsigned int oldest(void)
{
	return (ring.head + RING - ring.count) % RING;
}

static unsigned int newest(void)
{
	return (ring.head + RING - 1) % RING;
}

/* A port new in its slot starts with an empty history, not its predecessor's. */
static void adopt(const struct port *p)
{
	unsigned int slot = p->id - 1, q, i;

	if (hist_generation[slot] == p->generation)
		return;
	hist_generation[slot] = p->generation;
	for (q = 0; q < PORT_MAX_RXQ; q++)
		for (i = 0; i < RING; i++) {
			hist_cycles[slot][q][i] = __atomic_load_n(&p->rxq[q].cycles,
								  __ATOMIC_RELAXED);
			hist_packets[slot][q][i] = __atomic_load_n(&p->rxq[q].packets,
								   __ATOMIC_RELAXED);
		}
}

static void take_sample(void)
{
	unsigned int id, q;

	ring.tsc[ring.head] = rte_rdtsc();
	for (id = 1; id <= PORT_MAX; id++) {
		struct port *p = port_by_id(id);

		if (p == NULL)
			continue;
		adopt(p);
		for (q = 0; q < p->n_rxq; q++) {
			hist_cycles[id - 1][q][ring.head] =
				__atomic_load_n(&p->rxq[q].cycles, __ATOMIC_RELAXED);
			hist_packets[id - 1][q][ring.head] =
				__atomic_load_n(&p->rxq[q].packets, __ATOMIC_RELAXED);
		}
	}
	ring.head = (ring.head + 1) % RING;
	if (ring.count < RING)
		ring.count++;
	ring.since_change++;
}

unsigned int rxq_list(struct rxq_info *out, double *window_s, uint64_t *window_tsc)
{
	unsigned int id, q, n = 0, a = oldest(), b = newest();
	uint64_t span = ring.count >= 2 ? ring.tsc[b] - ring.tsc[a] : 0;

	*window_tsc = span;
	*window_s = (double)span / (double)rte_get_tsc_hz();
	for (id = 1; id <= PORT_MAX; id++) {
		struct port *p = port_by_id(id);

		if (p == NULL || p->sw == NULL)
			continue;
		adopt(p);
		for (q = 0; q < p->n_rxq; q++) {
			struct rxq_info *r = &out[n++];

			r->port = p;
			r->queue = (uint16_t)q;
			r->worker = p->rxq_worker[q];
			r->pinned = p->rxq_pinned[q];
			r->window_cycles = span ? hist_cycles[id - 1][q][b] -
						  hist_cycles[id - 1][q][a] : 0;
			r->window_packets = span ? hist_packets[id - 1][q][b] -
						   hist_packets[id - 1][q][a] : 0;
		}
	}
	return n;
}

static double variance(const double *load, unsigned int n)
{
	double mean = 0, v = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		mean += load[i];
	mean /= n;
	for (i = 0; i < n; i++)
		v += (load[i] - mean) * (load[i] - mean);
	return v / n;
}

static struct rxq_info items[RXQ_MAX];

static int busiest_first(const void *a, const void *b)
{
	const struct rxq_info *x = a, *y = b;

	return x->window_cycles < y->window_cycles ? 1 : x->window_cycles > y->window_cycles ?
	       -1 : 0;
}

/* The worker with the least load in LOAD; a tie goes to PREFER (no move), else the lower
 * id. */
static unsigned int least_loaded(const double *load, unsigned int n, int prefer)
{
	unsigned int i, best = 0;

	for (i = 1; i < n; i++)
		if (load[i] < load[best])
			best = i;
	if (prefer >= 0 && (unsigned int)prefer < n && load[prefer] <= load[best])
		return (unsigned int)prefer;
	return best;
}

void rxq_dry_run(struct rxq_plan *plan)
{
	unsigned int n, i, nw = wk_count();
	uint64_t tsc;
	double win_s, scale;

	plan->n_moves = 0;
	plan->n_workers = nw;
	memset(plan->load_before, 0, sizeof(plan->load_before));
	memset(plan->load_after, 0, sizeof(plan->load_after));
	n = rxq_list(items, &win_s, &tsc);
	scale = tsc ? 100.0 / (double)tsc : 0;   /* cycles to % of a core */
	for (i = 0; i < n; i++)
		if (items[i].worker >= 0)
			plan->load_before[items[i].worker] += (double)items[i].window_cycles * scale;
	for (i = 0; i < n; i++)
		if ((items[i].pinned || items[i].window_cycles == 0) && items[i].worker >= 0)
			plan->load_after[items[i].worker] += (double)items[i].window_cycles * scale;
	qsort(items, n, sizeof(items[0]), busiest_first);
	for (i = 0; i < n; i++) {
		struct rxq_info *r = &items[i];
		unsigned int to;

		/* A queue without load stays: moving it would change nothing but its worker. */
		if (r->pinned || r->worker < 0 || r->window_cycles == 0)
			continue;
		to = least_loaded(plan->load_after, nw, r->worker);
		plan->load_after[to] += (double)r->window_cycles * scale;
		if ((int)to != r->worker)
			plan->moves[plan->n_moves++] = (struct rxq_move){
				.port = r->port, .queue = r->queue, .from = r->worker,
				.to = (int)to };
	}
	plan->variance_before = nw ? variance(plan->load_before, nw) : 0;
	plan->variance_after = nw ? variance(plan->load_after, nw) : 0;
	plan->improvement = plan->variance_before > 0 ?
		100.0 * (plan->variance_before - plan->variance_after) / plan->variance_before : 0;
}

static void queues_moved(void)
{
	ring.since_change = 0;
}

int rxq_apply(const struct rxq_plan *plan, char *err, size_t err_len)
{
	unsigned int i;
	int rc;

	for (i = 0; i < plan->n_moves; i++) {
		const struct rxq_move *m = &plan->moves[i];

		rc = wk_move_rxq(m->port, m->queue, (unsigned int)m->to, settings.move_gap_us);
		if (rc != 0) {
			snprintf(err, err_len, "port %s queue %u to worker %d: %s", m->port->name,
				 m->queue, m->to, rc == -EBUSY ? "worker stuck" : strerror(-rc));
			queues_moved();
			return -1;
		}
		LOG(INFO, "port %s queue %u: worker %d -> %d", m->port->name, m->queue, m->from,
		    m->to);
	}
	if (plan->n_moves > 0)
		queues_moved();
	return 0;
}

int rxq_set(struct port *p, unsigned int q, unsigned int w, bool pin, char *err,
	    size_t err_len)
{
	int rc;

	if (q >= p->n_rxq) {
		snprintf(err, err_len, "port %s has %u receive queue(s): no queue %u", p->name,
			 p->n_rxq, q);
		return -1;
	}
	if (w >= wk_count()) {
		snprintf(err, err_len, "there are %u worker(s): no worker %u", wk_count(), w);
		return -1;
	}
	rc = wk_move_rxq(p, q, w, settings.move_gap_us);
	if (rc != 0) {
		snprintf(err, err_len, "port %s queue %u: %s", p->name, q,
			 rc == -EBUSY ? "its worker is stuck; the queue stays with it" :
			 strerror(-rc));
		return -1;
	}
	p->rxq_pinned[q] = pin;
	queues_moved();
	return 0;
}

/* Whether a worker is at or above the threshold while another is below it. */
static bool skewed(const struct rxq_plan *plan)
{
	bool over = false, under = false;
	unsigned int i;

	for (i = 0; i < plan->n_workers; i++) {
		if (plan->load_before[i] >= settings.load_threshold)
			over = true;
		else
			under = true;
	}
	return over && under;
}

static struct rxq_plan auto_plan;

static void auto_rebalance(void)
{
	uint64_t now = now_ms();
	char err[256];

	if (!settings.auto_lb || wk_count() < 2 || ring.since_change < RING ||
	    (ring.last_rebalance_ms != 0 &&
	     now - ring.last_rebalance_ms < (uint64_t)settings.interval_s * 1000))
		return;
	auto_stats.checks++;
	rxq_dry_run(&auto_plan);
	if (!skewed(&auto_plan))
		return;
	auto_stats.dry_runs++;
	auto_stats.last_improvement = auto_plan.improvement;
	LOG(INFO, "re-balance dry run: variance %.1f -> %.1f (%.0f%% better), %u move(s)",
	    auto_plan.variance_before, auto_plan.variance_after, auto_plan.improvement,
	    auto_plan.n_moves);
	if (auto_plan.n_moves == 0 || auto_plan.improvement < settings.improvement)
		return;
	ring.last_rebalance_ms = now;
	auto_stats.rebalances++;
	if (rxq_apply(&auto_plan, err, sizeof(err)) != 0)
		LOG(WARNING, "re-balance stopped: %s", err);
	auto_stats.moves += auto_plan.n_moves;
}

void rxq_tick(void)
{
	uint64_t now = now_ms();

	if (now - ring.last_ms < RXQ_SAMPLE_MS)
		return;
	ring.last_ms = now;
	take_sample();
	auto_rebalance();
}

/* The worker for a new queue under the cycles rule: the least measured load, and among
 * those within a tenth of a per cent of it (new queues have none yet), the fewest queues. */
static unsigned int place_by_cycles(void)
{
	double load[WK_MAX_WORKERS] = { 0 };
	unsigned int n, i, nw = wk_count(), best = 0;
	uint64_t tsc;
	double win_s, least;

	n = rxq_list(items, &win_s, &tsc);
	for (i = 0; i < n; i++)
		if (items[i].worker >= 0 && tsc > 0)
			load[items[i].worker] += 100.0 * (double)items[i].window_cycles /
						 (double)tsc;
	least = load[least_loaded(load, nw, -1)];
	for (i = 0; i < nw; i++)
		if (load[i] <= least + 0.1 &&
		    (load[best] > least + 0.1 || wk_rxq_count(i) < wk_rxq_count(best)))
			best = i;
	return best;
}

static unsigned int place(const struct port *p, unsigned int q)
{
	unsigned int i, best = 0;

	(void)p;
	(void)q;
	if (settings.assign == RXQ_ASSIGN_CYCLES)
		return place_by_cycles();
	for (i = 1; i < wk_count(); i++)
		if (wk_rxq_count(i) < wk_rxq_count(best))
			best = i;
	return best;
}

void rxq_init(const struct rxq_settings *s)
{
	if (s != NULL)
		settings = *s;
	wk_set_placement(place);
}

const struct rxq_settings *rxq_get_settings(void)
{
	return &settings;
}

int rxq_set_settings(const struct rxq_settings *s, char *err, size_t err_len)
{
	if (s->interval_s < 1 || s->interval_s > 86400) {
		snprintf(err, err_len, "interval must be 1 to 86400 seconds");
		return -1;
	}
	if (s->load_threshold < 1 || s->load_threshold > 100 || s->improvement < 1 ||
	    s->improvement > 100) {
		snprintf(err, err_len, "load_threshold and improvement are per cent: 1 to 100");
		return -1;
	}
	if (s->move_gap_us > RXQ_MOVE_GAP_US_MAX) {
		snprintf(err, err_len, "move_gap_us must be 0 to %u", RXQ_MOVE_GAP_US_MAX);
		return -1;
	}
	if (s->auto_lb && !settings.auto_lb)
		ring.last_rebalance_ms = 0;
	settings = *s;
	return 0;
}

void rxq_auto_stats(struct rxq_auto_stats *st)
{
	*st = auto_stats;
	st->since_last_s = ring.last_rebalance_ms ?
		(double)(now_ms() - ring.last_rebalance_ms) / 1000.0 : -1;
}
