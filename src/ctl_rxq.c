/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control methods of receive queues (docs/protocol.md): show-rxqs, set-rxq, rebalance
 * and set-rebalance, over rxq.h.
 */
#include "ctl_rxq.h"

#include <errno.h>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "ctl_flow.h"
#include "rxq.h"
#include "worker.h"

static double percent(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static json_t *settings_json(void)
{
	const struct rxq_settings *s = rxq_get_settings();
	struct rxq_auto_stats st;

	rxq_auto_stats(&st);
	return json_pack("{ss sb si si si si s{sI sI sI sI sf so}}",
			 "assign", rxq_assign_name(s->assign), "auto", s->auto_lb,
			 "interval", s->interval_s, "load_threshold", s->load_threshold,
			 "improvement", s->improvement, "move_gap_us", s->move_gap_us, "stats",
			 "checks", (json_int_t)st.checks, "dry_runs", (json_int_t)st.dry_runs,
			 "rebalances", (json_int_t)st.rebalances, "moves", (json_int_t)st.moves,
			 "last_improvement", st.last_improvement, "since_last_s",
			 st.since_last_s < 0 ? json_null() : json_real(st.since_last_s));
}

static struct rxq_info infos[RXQ_MAX];

json_t *ctl_show_rxqs(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "port", P_STRING, false }, { NULL, 0, false } };
	uint64_t worker_cycles[WK_MAX_WORKERS] = { 0 }, tsc;
	unsigned int queues[WK_MAX_WORKERS] = { 0 };
	const char *only = json_string_value(json_object_get(params, "port"));
	json_t *rxqs = json_array(), *workers = json_array();
	unsigned int n, i;
	double win_s;

	if (ctl_check_params(params, defs, e) != 0) {
		json_decref(rxqs);
		json_decref(workers);
		return NULL;
	}
	if (only != NULL && port_find(only) == NULL) {
		json_decref(rxqs);
		json_decref(workers);
		return ctl_fail(e, CTL_NOT_FOUND, "no port named '%s'", only);
	}
	n = rxq_list(infos, &win_s, &tsc);
	for (i = 0; i < n; i++)
		if (infos[i].worker >= 0) {
			worker_cycles[infos[i].worker] += infos[i].window_cycles;
			queues[infos[i].worker]++;
		}
	for (i = 0; i < n; i++) {
		const struct rxq_info *r = &infos[i];
		uint64_t of_worker = r->worker >= 0 ? worker_cycles[r->worker] : 0;

		if (only != NULL && strcmp(only, r->port->name) != 0)
			continue;
		json_array_append_new(rxqs, json_pack(
			"{ss ss si si sb sf sf sI sI sI so}",
			"port", r->port->name, "switch", r->port->sw->name, "queue", r->queue,
			"worker", r->worker, "pinned", r->pinned,
			"usage", percent(r->window_cycles, tsc),
			"share", percent(r->window_cycles, of_worker),
			"cycles", (json_int_t)__atomic_load_n(&r->port->rxq[r->queue].cycles,
							      __ATOMIC_RELAXED),
			"packets", (json_int_t)__atomic_load_n(&r->port->rxq[r->queue].packets,
							       __ATOMIC_RELAXED),
			"window_packets", (json_int_t)r->window_packets,
			"cycles_per_packet", r->window_packets ?
				json_real((double)r->window_cycles / (double)r->window_packets) :
				json_null()));
	}
	for (i = 0; i < wk_count(); i++) {
		struct wk_stats st;

		wk_read_stats(i, &st);
		json_array_append_new(workers, json_pack("{si si si si sf}", "id", i,
			"lcore", st.lcore, "cpu", wk_lcore_cpu(st.lcore),
			"queues", queues[i], "usage", percent(worker_cycles[i], tsc)));
	}
	return json_pack("{sf so so so}", "window_s", win_s, "rebalance", settings_json(),
			 "workers", workers, "rxqs", rxqs);
}

json_t *ctl_set_rxq(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "port", P_STRING, true }, { "queue", P_UINT, true }, { "worker", P_UINT, true },
		{ "pin", P_BOOL, false }, { NULL, 0, false } };
	json_int_t q, w;
	struct port *p;

	if (ctl_check_params(params, defs, e) != 0)
		return NULL;
	p = port_find(json_string_value(json_object_get(params, "port")));
	if (p == NULL || p->sw == NULL)
		return ctl_fail(e, CTL_NOT_FOUND, "no port named '%s'",
				json_string_value(json_object_get(params, "port")));
	q = json_integer_value(json_object_get(params, "queue"));
	w = json_integer_value(json_object_get(params, "worker"));
	if (q >= p->n_rxq)
		return ctl_fail(e, CTL_INVALID_PARAMS, "port %s has %u receive queue(s): no queue "
				"%lld", p->name, p->n_rxq, (long long)q);
	if (w >= wk_count())
		return ctl_fail(e, CTL_INVALID_PARAMS, "there are %u worker(s): no worker %lld",
				wk_count(), (long long)w);
	if (rxq_set(p, (unsigned int)q, (unsigned int)w,
		    json_is_true(json_object_get(params, "pin")), e->message,
		    sizeof(e->message)) != 0) {
		e->code = CTL_WRONG_STATE;
		return NULL;
	}
	return json_pack("{ss si si sb}", "port", p->name, "queue", (int)q, "worker", (int)w,
			 "pinned", p->rxq_pinned[q]);
}

static json_t *loads_json(const double *load, unsigned int n)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < n; i++)
		json_array_append_new(a, json_real(load[i]));
	return a;
}

static struct rxq_plan plan;

json_t *ctl_rebalance(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "dry_run", P_BOOL, false }, { NULL, 0, false } };
	bool dry = json_is_true(json_object_get(params, "dry_run"));
	json_t *moves;
	unsigned int i;

	if (ctl_check_params(params, defs, e) != 0)
		return NULL;
	if (wk_count() < 2)
		return ctl_fail(e, CTL_WRONG_STATE, "one worker: nothing to re-balance");
	rxq_dry_run(&plan);
	if (!dry && rxq_apply(&plan, e->message, sizeof(e->message)) != 0) {
		e->code = CTL_WRONG_STATE;
		return NULL;
	}
	moves = json_array();
	for (i = 0; i < plan.n_moves; i++)
		json_array_append_new(moves, json_pack("{ss si si si}", "port",
			plan.moves[i].port->name, "queue", plan.moves[i].queue,
			"from", plan.moves[i].from, "to", plan.moves[i].to));
	return json_pack("{sb so so so sf sf sf}", "applied", !dry, "moves", moves,
			 "load_before", loads_json(plan.load_before, plan.n_workers),
			 "load_after", loads_json(plan.load_after, plan.n_workers),
			 "variance_before", plan.variance_before,
			 "variance_after", plan.variance_after, "improvement", plan.improvement);
}

json_t *ctl_set_rebalance(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "auto", P_BOOL, false }, { "assign", P_STRING, false },
		{ "interval", P_UINT, false }, { "load_threshold", P_UINT, false },
		{ "improvement", P_UINT, false }, { "move_gap_us", P_UINT, false },
		{ NULL, 0, false } };
	struct rxq_settings s = *rxq_get_settings();
	const char *assign;
	json_t *v;

	if (ctl_check_params(params, defs, e) != 0)
		return NULL;
	if ((v = json_object_get(params, "auto")) != NULL)
		s.auto_lb = json_is_true(v);
	assign = json_string_value(json_object_get(params, "assign"));
	if (assign != NULL && rxq_assign_parse(assign, &s.assign) != 0)
		return ctl_fail(e, CTL_INVALID_PARAMS, "assign must be roundrobin or cycles, not "
				"'%s'", assign);
	if ((v = json_object_get(params, "interval")) != NULL)
		s.interval_s = (unsigned int)RTE_MIN(json_integer_value(v), (json_int_t)UINT32_MAX);
	if ((v = json_object_get(params, "load_threshold")) != NULL)
		s.load_threshold = (unsigned int)RTE_MIN(json_integer_value(v),
							 (json_int_t)UINT32_MAX);
	if ((v = json_object_get(params, "improvement")) != NULL)
		s.improvement = (unsigned int)RTE_MIN(json_integer_value(v), (json_int_t)UINT32_MAX);
	if ((v = json_object_get(params, "move_gap_us")) != NULL)
		s.move_gap_us = (unsigned int)RTE_MIN(json_integer_value(v), (json_int_t)UINT32_MAX);
	if (rxq_set_settings(&s, e->message, sizeof(e->message)) != 0) {
		e->code = CTL_INVALID_PARAMS;
		return NULL;
	}
	return settings_json();
}
