/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control methods: one function per verb of docs/protocol.md. Each validates its
 * parameters completely before it changes anything, so a refused request leaves no trace.
 */
#include <ctype.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_version.h>

#include "ctl.h"
#include "ctl_flow.h"
#include "ctl_capture.h"
#include "ctl_rxq.h"
#include "ctl_of.h"
#include "fwd_flow.h"
#include "fwd_learn.h"
#include "log.h"
#include "pool.h"
#include "state.h"
#include "sluice_version.h"
#include "switch.h"
#include "worker.h"

#define CTL_PROTOCOL_VERSION 1
#define CTL_CANCEL_WAIT_MS 5000   /* a cancelled set-up gets this long to end */

/* The add-port whose port is on the set-up thread, and its outcome once collected. */
static struct pending_add {
	bool active;                /* started, answer not yet given */
	bool finished;              /* the set-up was collected; the answer is below */
	struct sw *sw;              /* the switch it joins; NULL once that switch is gone */
	int slot;                   /* the slot asked for (ofport - 1), or -1 */
	json_t *result;
	struct ctl_error error;
} pending;

static int settle_setup(struct sw *s, const char *port_name, struct ctl_error *e);

static json_t *fail(struct ctl_error *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The length of a UTF-8 sequence that starts with LEAD (1 for a stray byte). */
static size_t utf8_seq_len(unsigned char lead)
{
	if (lead >= 0xf0)
		return 4;
	if (lead >= 0xe0)
		return 3;
	if (lead >= 0xc0)
		return 2;
	return 1;
}

/*
 * Drops a UTF-8 character that a length limit cut in two at the end of S. Messages quote
 * what clients sent, and jansson refuses to build an answer around a broken character.
 */
static void utf8_trim_cut(char *s)
{
	size_t len = strlen(s), i = len, back = 0;

	while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80) {
		i--;
		back++;
	}
	if (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0xc0 &&
	    utf8_seq_len((unsigned char)s[i - 1]) > back + 1)
		s[i - 1] = '\0';
}

static json_t *fail(struct ctl_error *e, int code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	utf8_trim_cut(e->message);
	return NULL;
}

/* ---- parameters ---- */

/* Checks PARAMS against DEFS (NULL-key terminated): no unknown key, types, names. */
static int check_params(json_t *params, const struct param *defs, struct ctl_error *e)
{
	const struct param *d;
	const char *key;
	json_t *v;

	json_object_foreach(params, key, v) {
		for (d = defs; d->key != NULL && strcmp(d->key, key) != 0; d++)
			;
		if (d->key == NULL) {
			fail(e, CTL_INVALID_PARAMS, "unknown parameter '%s'", key);
			return -1;
		}
	}
	for (d = defs; d->key != NULL; d++) {
		v = json_object_get(params, d->key);
		if (v == NULL) {
			if (d->required) {
				fail(e, CTL_INVALID_PARAMS, "missing parameter '%s'", d->key);
				return -1;
			}
			continue;
		}
		if (d->type == P_UINT ? !json_is_integer(v) || json_integer_value(v) < 0
		    : d->type == P_BOOL ? !json_is_boolean(v)
		    : d->type == P_ARRAY ? !json_is_array(v) : !json_is_string(v)) {
			fail(e, CTL_INVALID_PARAMS, "parameter '%s' must be %s", d->key,
			     d->type == P_UINT ? "a non-negative integer"
			     : d->type == P_BOOL ? "true or false"
			     : d->type == P_ARRAY ? "an array" : "a string");
			return -1;
		}
		if (d->type == P_NAME) {
			const char *s = json_string_value(v);
			size_t i, len = strlen(s);

			if (len == 0 || len >= PORT_NAME_LEN || !isalnum((unsigned char)s[0])) {
				fail(e, CTL_INVALID_PARAMS, "'%s': a name has 1 to %d characters and "
				     "starts with a letter or digit", d->key, PORT_NAME_LEN - 1);
				return -1;
			}
			for (i = 0; i < len; i++)
				if (!isalnum((unsigned char)s[i]) && strchr("_-.", s[i]) == NULL) {
					fail(e, CTL_INVALID_PARAMS, "'%s': a name may hold only letters, "
					     "digits, '_', '-' and '.'", d->key);
					return -1;
				}
		}
	}
	return 0;
}

static const char *str(json_t *params, const char *key)
{
	return json_string_value(json_object_get(params, key));
}

static struct sw *find_switch(json_t *params, const char *key, struct ctl_error *e)
{
	struct sw *s = sw_find(str(params, key));

	if (s == NULL)
		fail(e, CTL_NOT_FOUND, "no switch named '%s'", str(params, key));
	return s;
}

/* The port named by PARAMS[KEY], which must be on switch S. */
static struct port *find_port(struct sw *s, json_t *params, const char *key,
			      struct ctl_error *e)
{
	const char *name = str(params, key);
	struct port *p = port_find(name);

	if (p == NULL)
		fail(e, CTL_NOT_FOUND, "no port named '%s'", name);
	else if (p->sw != s)
		fail(e, CTL_NOT_FOUND, "port '%s' is on switch '%s', not '%s'", name, p->sw->name,
		     s->name);
	else
		return p;
	return NULL;
}

json_t *ctl_fail(struct ctl_error *e, int code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	utf8_trim_cut(e->message);
	return NULL;
}

int ctl_check_params(json_t *params, const struct param *defs, struct ctl_error *e)
{
	return check_params(params, defs, e);
}

struct sw *ctl_find_switch(json_t *params, const char *key, struct ctl_error *e)
{
	return find_switch(params, key, e);
}

/* ---- JSON views ---- */

static const char *port_peer_name(const struct port *p)
{
	const struct port *peer;
	uint16_t idx;

	if (p->sw->ops != &fwd_patch_ops)
		return NULL;
	idx = fwd_patch_peer(p->sw->fwd, p->sw_index);
	peer = idx == FWD_PATCH_NONE ? NULL : p->sw->ports[idx];
	return peer != NULL ? peer->name : NULL;
}

static json_t *port_json(struct port *p)
{
	char mac[RTE_ETHER_ADDR_FMT_SIZE], ofc[64];
	const char *peer = port_peer_name(p);

	json_t *o;

	port_refresh_link(p);
	rte_ether_format_addr(mac, sizeof(mac), &p->mac);
	port_of_config_format(__atomic_load_n(&p->of_config, __ATOMIC_RELAXED), ofc, sizeof(ofc));
	o = json_pack("{ss ss si si si ss ss ss si ss so ss si si sb ss}",
			 "name", p->name, "switch", p->sw->name, "id", p->id,
			 "ofport", (int)p->sw_index + 1,
			 "generation", (json_int_t)p->generation, "spec", p->spec,
			 "kind", portspec_kind_name(p->ps.kind), "device", p->ps.devname,
			 "ethdev", p->ethdev == PORT_NO_ETHDEV ? -1 : (int)p->ethdev, "link", port_link_is_up(p) ? "up" : "down",
			 "peer", peer ? json_string(peer) : json_null(), "mac", mac,
			 "worker", p->worker, "mtu", (int)p->mtu, "mtu_set", p->mtu_set,
			 "of_config", ofc);
	json_object_set_new(o, "rx_queues", json_integer(p->n_rxq));
	return o;
}

/* port_json, with a vxlan port's tunnel state. */
static json_t *port_view(struct port *p)
{
	json_t *o = port_json(p);

	if (p->vxl != NULL)
		json_object_set_new(o, "tunnel", vxl_describe(p));
	return o;
}

static json_t *drops_json(const struct port_totals *t)
{
	json_t *d = json_object();
	unsigned int i;

	for (i = 0; i < STATS_DROP_COUNT; i++)
		json_object_set_new(d, stats_drop_name(i), json_integer((json_int_t)t->drops[i]));
	return d;
}

static json_t *totals_json(const struct port_totals *t)
{
	return json_pack("{sI sI sI sI sI sI so sI sI}",
			 "rx_packets", (json_int_t)t->rx_packets,
			 "rx_bytes", (json_int_t)t->rx_bytes,
			 "tx_packets", (json_int_t)t->tx_packets,
			 "tx_bytes", (json_int_t)t->tx_bytes,
			 "forwarded", (json_int_t)t->forwarded,
			 "dropped", (json_int_t)t->dropped,
			 "drops", drops_json(t),
			 "flood_tx_dropped", (json_int_t)t->flood_tx_dropped,
			 "flood_to_removed", (json_int_t)t->flood_to_removed);
}

static json_t *port_stats_json(struct port *p, struct port_totals *sum)
{
	struct port_totals t;
	json_t *o;

	port_read_totals(p, &t);
	stats_merge(sum, &t);
	o = totals_json(&t);
	json_object_set_new(o, "name", json_string(p->name));
	json_object_set_new(o, "rx_missed", json_integer((json_int_t)port_rx_missed(p)));
	if (p->vhf != NULL || p->mff != NULL)   /* of forwarded: those copied once */
		json_object_set_new(o, "one_copy", json_integer((json_int_t)port_one_copy(p)));
	return o;
}

/* A learn switch's own counters (learned, moved, aged, limits...) and table size. */
static void add_learn_counters(json_t *o, struct sw *s)
{
	const char *names[SW_MAX_PORTS] = { 0 };
	json_t *d = s->ops->describe(s->fwd, names);

	json_object_set(o, "learn", json_object_get(d, "learn"));
	json_object_set(o, "entries", json_object_get(d, "entries"));
	json_decref(d);
}

static json_t *switch_stats_json(struct sw *s, const char *only_port)
{
	struct port_totals sum = { 0 };
	json_t *ports = json_array(), *o;
	unsigned int i;

	for (i = 0; i < SW_MAX_PORTS; i++)
		if (s->ports[i] != NULL &&
		    (only_port == NULL || strcmp(s->ports[i]->name, only_port) == 0))
			json_array_append_new(ports, port_stats_json(s->ports[i], &sum));
	o = totals_json(&sum);
	json_object_del(o, "rx_bytes");
	json_object_del(o, "tx_bytes");
	json_object_set_new(o, "name", json_string(s->name));
	json_object_set_new(o, "mode", json_string(s->ops->mode));
	json_object_set_new(o, "ports", ports);
	if (s->ops == &fwd_learn_ops)
		add_learn_counters(o, s);
	return o;
}

static json_t *workers_json(void)
{
	json_t *a = json_array();
	struct wk_stats st;
	unsigned int i;

	for (i = 0; i < wk_count(); i++) {
		wk_read_stats(i, &st);
		json_array_append_new(a, json_pack("{si si si sI sI sI sI sI si sI sb sI sI}",
			"id", st.id, "lcore", st.lcore,
			"cpu", wk_lcore_cpu(st.lcore),
			"loops", (json_int_t)st.loops, "busy_cycles", (json_int_t)st.busy_cycles,
			"idle_cycles", (json_int_t)st.idle_cycles,
			"packets", (json_int_t)st.packets, "sleeps", (json_int_t)st.sleeps,
			"rx_queues", st.rx_queues, "stalls", (json_int_t)st.stalls,
			"stuck", st.stuck, "injected", (json_int_t)st.injected,
			"inject_dropped", (json_int_t)st.inject_dropped));
	}
	return a;
}

static json_t *switch_json(struct sw *s, bool with_ports)
{
	const char *names[SW_MAX_PORTS] = { 0 };
	json_t *ports = json_array(), *o, *extra;
	unsigned int i;

	for (i = 0; i < SW_MAX_PORTS; i++) {
		struct port *p = s->ports[i];

		if (p == NULL)
			continue;
		names[i] = p->name;
		json_array_append_new(ports, with_ports ? port_view(p) : json_string(p->name));
	}
	o = json_pack("{ss ss so}", "name", s->name, "mode", s->ops->mode, "ports", ports);
	if (with_ports && s->ops->describe != NULL) {
		extra = s->ops->describe(s->fwd, names);
		json_object_update(o, extra);
		json_decref(extra);
	}
	if (with_ports && (extra = ctl_of_json(s)) != NULL)
		json_object_set_new(o, "openflow", extra);
	return o;
}

/* ---- methods ---- */

/*
 * The EAL's runtime directory is <run dir>/<file prefix>, whichever way the prefix was given
 * (--file-prefix of sluiced or after "--"). A DPDK secondary process (dpdk-dumpcap, telemetry
 * clients) attaches by that prefix, so clients read it here rather than guess it.
 */
static json_t *m_version(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { NULL, 0, false } };
	const char *runtime_dir = rte_eal_get_runtime_dir();
	char dir[PATH_MAX];

	if (check_params(params, defs, e) != 0)
		return NULL;
	snprintf(dir, sizeof(dir), "%s", runtime_dir);
	return json_pack("{ss ss si ss ss}", "version", SLUICE_VERSION, "dpdk", rte_version(),
			 "protocol", CTL_PROTOCOL_VERSION, "file_prefix", basename(dir),
			 "runtime_dir", runtime_dir);
}

/* Ranges of add-switch's and set-switch's learn parameters, when present. */
static int check_learn_params(json_t *params, struct ctl_error *e)
{
	json_t *aging = json_object_get(params, "aging");
	json_t *max = json_object_get(params, "max_entries");

	if (aging != NULL && json_integer_value(aging) > LEARN_MAX_AGING) {
		fail(e, CTL_INVALID_PARAMS, "'aging' must be 0 (never) to %d seconds",
		     LEARN_MAX_AGING);
		return -1;
	}
	if (max != NULL && (json_integer_value(max) < LEARN_MIN_ENTRIES ||
			    json_integer_value(max) > LEARN_MAX_ENTRIES)) {
		fail(e, CTL_INVALID_PARAMS, "'max_entries' must be %d to %d", LEARN_MIN_ENTRIES,
		     LEARN_MAX_ENTRIES);
		return -1;
	}
	return 0;
}

static json_t *m_add_switch(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "name", P_NAME, true }, { "mode", P_STRING, false }, { "aging", P_UINT, false },
		{ "max_entries", P_UINT, false }, { NULL, 0, false } };
	const char *mode;
	char err[256];
	struct sw *s;

	if (check_params(params, defs, e) != 0)
		return NULL;
	mode = str(params, "mode") ? str(params, "mode") : "patch";
	if (sw_find(str(params, "name")) != NULL)
		return fail(e, CTL_EXISTS, "a switch named '%s' exists", str(params, "name"));
	if (fwd_find(mode) == NULL)
		return fail(e, CTL_INVALID_PARAMS, "unknown mode '%s' (this release has: patch, "
			    "learn, flow)", mode);
	/* A flow switch's `normal` action is a learning bridge: it takes the same settings. */
	if (strcmp(mode, "patch") == 0 && (json_object_get(params, "aging") != NULL ||
					   json_object_get(params, "max_entries") != NULL))
		return fail(e, CTL_INVALID_PARAMS, "'aging' and 'max_entries' apply to learn "
			    "and flow modes only");
	if (check_learn_params(params, e) != 0)
		return NULL;
	s = sw_create(str(params, "name"), mode, params, err, sizeof(err));
	if (s == NULL)
		return fail(e, CTL_LIMIT, "%s", err);
	LOG(INFO, "switch %s: created, mode %s", s->name, mode);
	return json_pack("{ss ss}", "name", s->name, "mode", mode);
}

/*
 * Takes P out of service and destroys it, without disturbing any other port's traffic.
 * Returns -1, changing nothing, when no worker plan could be made (no memory), and 1 when a
 * stuck worker may still use P: it is then out of the switch but left open (port_abandon).
 */
static int delete_port(struct port *p)
{
	cap_port_removed(p);            /* what it captured stays readable */
	if (wk_remove_port(p) != 0)     /* no worker receives from it after this returns */
		return -1;
	/* A vxlan port receives through its underlay's worker: out of its list first. */
	if (p->vxl != NULL && vxl_detach(p) < 0)
		return -1;
	sw_detach_port(p->sw, p);
	if (!wk_synchronize()) {        /* no worker still sends to it */
		port_abandon(p);
		return 1;
	}
	port_destroy(p);
	return 0;
}

/* Deletes S and its ports; the return value is delete_port's, for the first that failed. */
static int delete_switch(struct sw *s)
{
	unsigned int i, pass;
	int rc = 0, one;

	/* vxlan ports first: an underlay goes only once nothing is carried over it. */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < SW_MAX_PORTS; i++)
			if (s->ports[i] != NULL && (s->ports[i]->vxl != NULL) == (pass == 0) &&
			    (one = delete_port(s->ports[i])) != 0 && rc == 0)
				rc = one;
	if (rc < 0)
		return rc;
	if (rc > 0 || !wk_synchronize()) {
		sw_abandon(s);
		return 1;
	}
	LOG(INFO, "switch %s: deleted", s->name);
	sw_destroy(s);
	return 0;
}

/* The answer to a deletion that delete_port() or delete_switch() returned RC for. */
static json_t *deletion_answer(int rc, const char *what, const char *name, struct ctl_error *e)
{
	if (rc < 0)
		return fail(e, CTL_INTERNAL, "%s '%s' not deleted: out of memory", what, name);
	if (rc > 0)
		return fail(e, CTL_INTERNAL, "%s '%s' is out of service, but a stuck worker may "
			    "still use it, so its memory and device are left (the log names the "
			    "worker)", what, name);
	return json_object();
}

void ctl_delete_all(void)
{
	unsigned int i;

	for (i = 1; i <= PORT_MAX; i++)         /* tunnels before their underlays */
		if (port_by_id(i) != NULL && port_by_id(i)->vxl != NULL)
			delete_port(port_by_id(i));
	for (i = 0; i < SW_MAX; i++)
		if (sw_by_index(i) != NULL)
			delete_switch(sw_by_index(i));
}

/* Whether a port of S carries a vxlan port of another switch (then S stays, with E set). */
static bool carries_other_tunnels(struct sw *s, struct ctl_error *e)
{
	unsigned int i, id;

	for (id = 1; id <= PORT_MAX; id++) {
		struct port *t = port_by_id(id);

		if (t == NULL || t->vxl == NULL || t->sw == s)
			continue;
		for (i = 0; i < SW_MAX_PORTS; i++)
			if (s->ports[i] != NULL &&
			    strcmp(s->ports[i]->name, t->ps.vxlan.underlay) == 0) {
				fail(e, CTL_WRONG_STATE, "port '%s' of switch '%s' carries vxlan port "
				     "'%s' of switch '%s': delete that first", s->ports[i]->name,
				     s->name, t->name, t->sw->name);
				return true;
			}
	}
	return false;
}

static json_t *m_del_switch(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "name", P_STRING, true }, { NULL, 0, false } };
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_switch(params, "name", e)) == NULL)
		return NULL;
	if (carries_other_tunnels(s, e))
		return NULL;
	if (s->n_ports > 0 || s == pending.sw) {
		if (settle_setup(s, NULL, e) != 0)
			return NULL;
	}
	return deletion_answer(delete_switch(s), "switch", str(params, "name"), e);
}

static json_t *m_list_switches(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { NULL, 0, false } };
	json_t *a;
	unsigned int i;

	if (check_params(params, defs, e) != 0)
		return NULL;
	a = json_array();
	for (i = 0; i < SW_MAX; i++)
		if (sw_by_index(i) != NULL)
			json_array_append_new(a, switch_json(sw_by_index(i), false));
	return a;
}

static const int port_error_codes[] = { [PORT_ERR_SPEC] = CTL_BAD_SPEC,
	[PORT_ERR_DEVICE] = CTL_DEVICE, [PORT_ERR_LIMIT] = CTL_LIMIT,
	[PORT_ERR_EXISTS] = CTL_EXISTS, [PORT_ERR_BUSY] = CTL_WRONG_STATE };

static json_t *m_add_port(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "name", P_NAME, true }, { "spec", P_STRING, true },
		{ "ofport", P_UINT, false }, { NULL, 0, false } };
	json_t *ofport;
	enum port_error perr;
	char err[512];
	struct sw *s;
	int slot = -1;

	if (check_params(params, defs, e) != 0 || (s = find_switch(params, "switch", e)) == NULL)
		return NULL;
	if (s->n_ports == SW_MAX_PORTS)
		return fail(e, CTL_LIMIT, "switch '%s' has %d ports, its maximum", s->name,
			    SW_MAX_PORTS);
	if ((ofport = json_object_get(params, "ofport")) != NULL) {
		json_int_t n = json_integer_value(ofport);

		if (n < 1 || n > SW_MAX_PORTS)
			return fail(e, CTL_INVALID_PARAMS, "ofport: %" JSON_INTEGER_FORMAT
				    " is not an OpenFlow port number of a switch (1..%d)", n,
				    SW_MAX_PORTS);
		slot = (int)n - 1;
		if (s->ports[slot] != NULL)
			return fail(e, CTL_EXISTS, "ofport %" JSON_INTEGER_FORMAT " of switch '%s' "
				    "is port '%s'", n, s->name, s->ports[slot]->name);
	}
	if (pending.active)
		return fail(e, CTL_WRONG_STATE, "busy: port '%s' is being set up; try again when "
			    "it is done", port_setup_pending() ? port_setup_pending() : "?");
	if (port_setup_start(str(params, "name"), str(params, "spec"), &perr, err,
			     sizeof(err)) != 0)
		return fail(e, port_error_codes[perr], "%s", err);
	pending = (struct pending_add){ .active = true, .sw = s, .slot = slot };
	e->code = CTL_DEFERRED;
	return NULL;
}

/* Puts a port the set-up thread made into its switch and a worker; its answer. */
static json_t *adopt_port(struct port *p, struct ctl_error *e)
{
	if (pending.sw == NULL) {
		port_destroy(p);
		return fail(e, CTL_DEVICE, "port '%s': set-up cancelled: its switch was deleted",
			    p->name);
	}
	if (sw_attach_port(pending.sw, p, pending.slot) != 0) {
		port_destroy(p);
		if (pending.slot >= 0)
			return fail(e, CTL_EXISTS, "ofport %d of switch '%s' was taken meanwhile",
				    pending.slot + 1, pending.sw->name);
		return fail(e, CTL_LIMIT, "switch '%s' is full", pending.sw->name);
	}
	/* Only now may the underlay's worker hand it frames: it serves them in P's switch. */
	if (p->vxl != NULL)
		vxl_attach(p);
	/* A vxlan port is received through its underlay's worker, never polled itself. */
	if (p->vxl == NULL && wk_add_port(p) != 0) {
		sw_detach_port(pending.sw, p);
		if (wk_synchronize())
			port_destroy(p);
		else
			port_abandon(p);
		return fail(e, CTL_INTERNAL, "out of memory while adding the port to a worker");
	}
	return port_view(p);
}

/* Collects the finished set-up into pending.result / pending.error. */
static void finish_setup(void)
{
	enum port_error perr;
	char err[512];
	struct port *p = port_setup_finish(&perr, err, sizeof(err));

	pending.error.code = 0;
	if (p == NULL)
		fail(&pending.error, port_error_codes[perr], "%s", err);
	else
		pending.result = adopt_port(p, &pending.error);
	if (pending.result != NULL)
		state_save();
	pending.finished = true;
}

int ctl_setup_collect(json_t **result, struct ctl_error *e)
{
	if (!pending.active)
		return 0;
	if (!pending.finished) {
		if (!port_setup_wait(0))
			return 0;        /* not done yet: a stale wake-up */
		finish_setup();
	}
	*result = pending.result;
	*e = pending.error;
	pending = (struct pending_add){ .active = false };
	return 1;
}

json_t *ctl_setup_wait(struct ctl_error *e)
{
	json_t *result = NULL;

	while (!port_setup_wait(1000))
		;                        /* bounded: port_setup_poll enforces the deadline */
	ctl_setup_collect(&result, e);
	return result;
}

bool ctl_setup_abort(const char *reason)
{
	if (!pending.active || pending.finished)
		return true;
	port_setup_cancel(reason);
	if (!port_setup_wait(CTL_CANCEL_WAIT_MS))
		return false;
	finish_setup();
	return true;
}

/*
 * Before del-port or del-switch removes devices: DPDK's hotplug lists (devargs) have no
 * lock, so no device may be removed while the set-up thread probes one. Removing the port
 * being set up, or its switch, cancels that set-up (its add-port is answered with an
 * error); removing anything else waits for it: the request is refused as busy.
 */
static int settle_setup(struct sw *s, const char *port_name, struct ctl_error *e)
{
	char name[PORT_NAME_LEN];

	if (!pending.active || pending.finished)
		return 0;
	snprintf(name, sizeof(name), "%s", port_setup_pending());   /* freed if it fails */
	if (s != pending.sw || (port_name != NULL && strcmp(port_name, name) != 0)) {
		fail(e, CTL_WRONG_STATE, "busy: port '%s' is being set up; try again when it is "
		     "done (or delete it to cancel its set-up)", name);
		return -1;
	}
	if (!ctl_setup_abort(port_name != NULL ? "del-port" : "del-switch")) {
		fail(e, CTL_INTERNAL, "port '%s': its set-up does not end", name);
		return -1;
	}
	if (pending.result != NULL) {   /* it came up just before the cancel: undo */
		json_decref(pending.result);
		pending.result = NULL;
		delete_port(port_find(name));
		fail(&pending.error, CTL_DEVICE, "port '%s': set-up cancelled: %s", name,
		     port_name != NULL ? "del-port" : "del-switch");
	}
	if (port_name == NULL)
		pending.sw = NULL;
	return 0;
}

static json_t *m_del_port(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "name", P_STRING, true }, { NULL, 0, false } };
	struct port *p;
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_switch(params, "switch", e)) == NULL)
		return NULL;
	if (pending.active && !pending.finished && s == pending.sw &&
	    strcmp(str(params, "name"), port_setup_pending()) == 0)
		return settle_setup(s, str(params, "name"), e) == 0 ? json_object() : NULL;
	if ((p = find_port(s, params, "name", e)) == NULL || settle_setup(s, p->name, e) != 0)
		return NULL;
	if (vxl_is_underlay(p))
		return fail(e, CTL_WRONG_STATE, "port '%s' carries vxlan ports: delete them first",
			    p->name);
	return deletion_answer(delete_port(p), "port", str(params, "name"), e);
}

static json_t *m_patch(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "port1", P_STRING, true },
		{ "port2", P_STRING, true }, { NULL, 0, false } };
	struct port *a, *b;
	char err[256];
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_switch(params, "switch", e)) == NULL ||
	    (a = find_port(s, params, "port1", e)) == NULL ||
	    (b = find_port(s, params, "port2", e)) == NULL)
		return NULL;
	if (s->ops != &fwd_patch_ops)
		return fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; only patch switches "
			    "have links", s->name, s->ops->mode);
	if (fwd_patch_link(s->fwd, a->sw_index, b->sw_index, err, sizeof(err)) != 0)
		return fail(e, CTL_WRONG_STATE, "%s", err);
	LOG(INFO, "switch %s: patched %s <-> %s", s->name, a->name, b->name);
	return json_object();
}

static json_t *m_unpatch(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "port", P_STRING, true }, { NULL, 0, false } };
	struct port *p;
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_switch(params, "switch", e)) == NULL ||
	    (p = find_port(s, params, "port", e)) == NULL)
		return NULL;
	if (s->ops != &fwd_patch_ops)
		return fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; only patch switches "
			    "have links", s->name, s->ops->mode);
	if (fwd_patch_peer(s->fwd, p->sw_index) == FWD_PATCH_NONE)
		return fail(e, CTL_WRONG_STATE, "port '%s' is not patched", p->name);
	fwd_patch_unlink(s->fwd, p->sw_index);
	return json_object();
}

static json_t *m_list_ports(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, false }, { NULL, 0, false } };
	struct sw *only = NULL;
	unsigned int id;
	json_t *a;

	if (check_params(params, defs, e) != 0)
		return NULL;
	if (str(params, "switch") != NULL && (only = find_switch(params, "switch", e)) == NULL)
		return NULL;
	a = json_array();
	for (id = 1; id <= PORT_MAX; id++) {
		struct port *p = port_by_id(id);

		if (p != NULL && (only == NULL || p->sw == only))
			json_array_append_new(a, port_view(p));
	}
	return a;
}

static json_t *pools_json(void)
{
	json_t *a = json_array();
	struct pool_stats st;
	unsigned int i;

	for (i = 0; i < pool_count(); i++) {
		pool_read(i, &st);
		json_array_append_new(a, json_pack("{ss si sI sI sI sI}", "name", st.name,
			"socket", st.socket, "size", (json_int_t)st.size,
			"in_use", (json_int_t)st.in_use, "reserved", (json_int_t)st.reserved,
			"alloc_failures", (json_int_t)st.alloc_failures));
	}
	return a;
}

static json_t *m_show(json_t *params, struct ctl_error *e)
{
	json_t *sws, *ver = m_version(params, e);
	unsigned int i;

	if (ver == NULL)
		return NULL;
	sws = json_array();
	for (i = 0; i < SW_MAX; i++)
		if (sw_by_index(i) != NULL)
			json_array_append_new(sws, switch_json(sw_by_index(i), true));
	return json_pack("{so so so so}", "version", ver, "workers", workers_json(),
			 "switches", sws, "pools", pools_json());
}

static json_t *drop_reason_names(void)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < STATS_DROP_COUNT; i++)
		json_array_append_new(a, json_string(stats_drop_name(i)));
	return a;
}

/* When the counters were read (CLOCK_MONOTONIC), so clients can turn them into rates. */
static json_int_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static json_t *m_stats(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, false }, { "port", P_STRING, false }, { NULL, 0, false } };
	const char *only_port = str(params, "port");
	struct sw *only = NULL;
	json_t *sws;
	unsigned int i;

	if (check_params(params, defs, e) != 0)
		return NULL;
	if (str(params, "switch") != NULL && (only = find_switch(params, "switch", e)) == NULL)
		return NULL;
	if (only_port != NULL) {
		struct port *p = port_find(only_port);

		if (p == NULL)
			return fail(e, CTL_NOT_FOUND, "no port named '%s'", only_port);
		if (only != NULL && p->sw != only)
			return fail(e, CTL_NOT_FOUND, "port '%s' is not on switch '%s'", only_port,
				    only->name);
		only = p->sw;
	}
	sws = json_array();
	for (i = 0; i < SW_MAX; i++) {
		struct sw *s = sw_by_index(i);

		if (s != NULL && (only == NULL || s == only))
			json_array_append_new(sws, switch_stats_json(s, only_port));
	}
	return json_pack("{so so so sI}", "switches", sws, "workers", workers_json(),
			 "drop_reasons", drop_reason_names(), "monotonic_ns", monotonic_ns());
}

static json_t *m_clear_stats(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, false }, { NULL, 0, false } };
	struct sw *only = NULL;
	unsigned int id;

	if (check_params(params, defs, e) != 0)
		return NULL;
	if (str(params, "switch") != NULL && (only = find_switch(params, "switch", e)) == NULL)
		return NULL;
	for (id = 1; id <= PORT_MAX; id++) {
		struct port *p = port_by_id(id);

		if (p != NULL && (only == NULL || p->sw == only))
			port_clear_stats(p);
	}
	return json_object();
}

/* ---- learn mode: set-switch, set-port, fdb-* ---- */

/* The learning bridge of S: itself in learn mode, the `normal` action's in flow mode. */
static void *learn_of(struct sw *s)
{
	return s->ops == &fwd_flow_ops ? fwd_flow_learn(s->fwd) : s->fwd;
}

static struct sw *find_learn_switch(json_t *params, struct ctl_error *e)
{
	struct sw *s = find_switch(params, "switch", e);

	if (s != NULL && s->ops != &fwd_learn_ops && s->ops != &fwd_flow_ops) {
		fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; this applies to learn "
		     "switches (and to flow switches' normal action)", s->name, s->ops->mode);
		return NULL;
	}
	return s;
}

static json_t *m_set_switch(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "aging", P_UINT, false },
		{ "forward_reserved", P_BOOL, false }, { NULL, 0, false } };
	json_t *aging = json_object_get(params, "aging");
	json_t *reserved = json_object_get(params, "forward_reserved");
	char err[256];
	struct sw *s;

	if (check_params(params, defs, e) != 0 || check_learn_params(params, e) != 0 ||
	    (s = find_learn_switch(params, e)) == NULL)
		return NULL;
	if (aging == NULL && reserved == NULL)
		return fail(e, CTL_INVALID_PARAMS, "nothing to set (parameters: aging, "
			    "forward_reserved)");
	/* check_learn_params() checked aging's range, so nothing below can fail half-way. */
	if (aging != NULL && fwd_learn_set_aging(learn_of(s), (uint32_t)json_integer_value(aging),
						 err, sizeof(err)) != 0)
		return fail(e, CTL_INVALID_PARAMS, "%s", err);
	if (reserved != NULL)
		fwd_learn_set_forward_reserved(learn_of(s), json_is_true(reserved));
	return json_object();
}

/* Parses a VLAN list, "all" or "10,20,100-200" (0: untagged frames), into ALLOWED. */
static int parse_trunks(const char *text, uint64_t *allowed, struct ctl_error *e)
{
	const char *p = text;
	char *end;
	long lo, hi;

	memset(allowed, 0, LEARN_VLANS / 8);
	if (strcmp(text, "all") == 0) {
		memset(allowed, 0xff, LEARN_VLANS / 8);
		return 0;
	}
	do {
		lo = hi = strtol(p, &end, 10);
		if (end != p && *end == '-')
			hi = strtol(p = end + 1, &end, 10);
		if (end == p || lo < 0 || hi > 4094 || lo > hi || (*end != ',' && *end != 0)) {
			fail(e, CTL_INVALID_PARAMS, "'trunks': '%s' is not 'all' or a list of VLANs "
			     "0-4094 and ranges such as 0,10,100-200", text);
			return -1;
		}
		for (; lo <= hi; lo++)
			allowed[lo / 64] |= UINT64_C(1) << (lo % 64);
		p = end + 1;
	} while (*end == ',');
	return 0;
}

/* The VLAN configuration set-port's PARAMS ask for; 1 when they ask for none. */
static int vlan_cfg(json_t *params, struct learn_vlan_cfg *cfg, struct ctl_error *e)
{
	const char *mode = str(params, "vlan_mode"), *trunks = str(params, "trunks");
	json_t *tag = json_object_get(params, "tag");

	memset(cfg, 0, sizeof(*cfg));
	if (mode == NULL) {
		if (tag != NULL || trunks != NULL) {
			fail(e, CTL_INVALID_PARAMS, "'tag' and 'trunks' need 'vlan_mode'");
			return -1;
		}
		return 1;
	}
	if (strcmp(mode, "access") == 0) {
		if (tag == NULL || json_integer_value(tag) < 1 || json_integer_value(tag) > 4094 ||
		    trunks != NULL) {
			fail(e, CTL_INVALID_PARAMS, "vlan_mode access takes 'tag' (1-4094) and no "
			     "'trunks'");
			return -1;
		}
		cfg->access_tag = (uint16_t)json_integer_value(tag);
		return 0;
	}
	if (strcmp(mode, "trunk") == 0) {
		if (tag != NULL) {
			fail(e, CTL_INVALID_PARAMS, "vlan_mode trunk takes 'trunks', not 'tag'");
			return -1;
		}
		return parse_trunks(trunks != NULL ? trunks : "all", cfg->allowed, e);
	}
	fail(e, CTL_INVALID_PARAMS, "'vlan_mode' must be access or trunk, not '%s'", mode);
	return -1;
}

/* set-port's mtu, which any switch's port takes (docs/ports.md, MTU). */
static json_t *set_port_mtu(json_t *params, struct ctl_error *e)
{
	char err[256];
	struct port *p;
	struct sw *s;

	if ((s = find_switch(params, "switch", e)) == NULL ||
	    (p = find_port(s, params, "name", e)) == NULL)
		return NULL;
	if (port_set_mtu(p, (unsigned int)json_integer_value(json_object_get(params, "mtu")),
			 err, sizeof(err)) != 0)
		return fail(e, CTL_DEVICE, "port %s: %s", p->name, err);
	p->mtu_set = true;
	return json_object();
}

/*
 * set-port's of_config, which only a flow switch's port takes: its OpenFlow config
 * (docs/openflow.md, port-mod), names such as "no_fwd,no_flood", or "none". With MTU too
 * when given; nothing else goes with it.
 */
static json_t *set_port_of_config(json_t *params, struct ctl_error *e)
{
	const char *text = json_string_value(json_object_get(params, "of_config"));
	json_t *mtu = json_object_get(params, "mtu");
	uint32_t config;
	struct port *p;
	struct sw *s;

	if ((s = find_switch(params, "switch", e)) == NULL ||
	    (p = find_port(s, params, "name", e)) == NULL)
		return NULL;
	if (s->ops != &fwd_flow_ops)
		return fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; of_config is a flow "
			    "switch port's OpenFlow config", s->name, s->ops->mode);
	if (json_object_size(params) != (mtu != NULL ? 4u : 3u))
		return fail(e, CTL_INVALID_PARAMS, "of_config goes with mtu only");
	if (port_of_config_parse(text, &config) != 0)
		return fail(e, CTL_INVALID_PARAMS, "'of_config' must be none or a list of down, "
			    "no_recv, no_flood, no_fwd, no_packet_in, not '%s'", text);
	if (mtu != NULL && set_port_mtu(params, e) == NULL)
		return NULL;
	__atomic_store_n(&p->of_config, config, __ATOMIC_RELAXED);
	fwd_flow_ports_changed(s->fwd);
	return json_object();
}

static json_t *m_set_port(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "name", P_STRING, true },
		{ "vlan_mode", P_STRING, false }, { "tag", P_UINT, false },
		{ "trunks", P_STRING, false }, { "learn_limit", P_UINT, false },
		{ "storm_pps", P_UINT, false }, { "mtu", P_UINT, false },
		{ "of_config", P_STRING, false }, { NULL, 0, false } };
	json_t *limit = json_object_get(params, "learn_limit");
	json_t *storm = json_object_get(params, "storm_pps");
	json_t *mtu = json_object_get(params, "mtu");
	struct learn_vlan_cfg cfg;
	struct port *p;
	struct sw *s;
	int rc;

	if (check_params(params, defs, e) != 0)
		return NULL;
	if (mtu != NULL && (json_integer_value(mtu) < PORTSPEC_MTU_MIN ||
			    json_integer_value(mtu) > PORTSPEC_MTU_MAX))
		return fail(e, CTL_INVALID_PARAMS, "'mtu' must be %d to %d", PORTSPEC_MTU_MIN,
			    PORTSPEC_MTU_MAX);
	if (mtu != NULL && json_object_size(params) == 3)     /* switch, name, mtu: any mode */
		return set_port_mtu(params, e);
	if (json_object_get(params, "of_config") != NULL)
		return set_port_of_config(params, e);
	if ((s = find_learn_switch(params, e)) == NULL ||
	    (p = find_port(s, params, "name", e)) == NULL || (rc = vlan_cfg(params, &cfg, e)) < 0)
		return NULL;
	if (limit != NULL && json_integer_value(limit) > LEARN_MAX_ENTRIES)
		return fail(e, CTL_INVALID_PARAMS, "'learn_limit' must be 0 (none) to %d",
			    LEARN_MAX_ENTRIES);
	if (storm != NULL && json_integer_value(storm) > LEARN_MAX_STORM_PPS)
		return fail(e, CTL_INVALID_PARAMS, "'storm_pps' must be 0 (no limit) to %d",
			    LEARN_MAX_STORM_PPS);
	if (rc == 1 && limit == NULL && storm == NULL)
		return fail(e, CTL_INVALID_PARAMS, "nothing to set (parameters: vlan_mode, tag, "
			    "trunks, learn_limit, storm_pps, mtu; of_config on flow switches)");
	if (mtu != NULL && set_port_mtu(params, e) == NULL)
		return NULL;
	if (rc == 0)
		fwd_learn_set_vlan(learn_of(s), p->sw_index, &cfg);
	if (limit != NULL)
		fwd_learn_set_limit(learn_of(s), p->sw_index, (uint32_t)json_integer_value(limit));
	if (storm != NULL)
		fwd_learn_set_storm(learn_of(s), p->sw_index, (uint32_t)json_integer_value(storm));
	return json_object();
}

static int parse_mac(json_t *params, struct rte_ether_addr *mac, struct ctl_error *e)
{
	const char *text = str(params, "mac");

	if (rte_ether_unformat_addr(text, mac) != 0) {
		fail(e, CTL_INVALID_PARAMS, "'mac': '%s' is not a MAC address like "
		     "02:00:00:00:00:01", text);
		return -1;
	}
	return 0;
}

static int parse_vlan(json_t *params, uint16_t *vlan, struct ctl_error *e)
{
	json_t *v = json_object_get(params, "vlan");

	*vlan = v != NULL ? (uint16_t)json_integer_value(v) : 0;
	if (v != NULL && json_integer_value(v) > 4094) {
		fail(e, CTL_INVALID_PARAMS, "'vlan' must be 0 (untagged) to 4094");
		return -1;
	}
	return 0;
}

static json_t *m_fdb_add(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "mac", P_STRING, true }, { "port", P_STRING, true },
		{ "vlan", P_UINT, false }, { NULL, 0, false } };
	struct rte_ether_addr mac;
	char err[256];
	struct port *p;
	uint16_t vlan;
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_learn_switch(params, e)) == NULL ||
	    (p = find_port(s, params, "port", e)) == NULL || parse_mac(params, &mac, e) != 0 ||
	    parse_vlan(params, &vlan, e) != 0)
		return NULL;
	if (!rte_is_unicast_ether_addr(&mac) || rte_is_zero_ether_addr(&mac))
		return fail(e, CTL_INVALID_PARAMS, "'mac': a table entry is for one station: a "
			    "unicast, non-zero address");
	if (fwd_learn_fdb_add(learn_of(s), mac.addr_bytes, vlan, p->sw_index, err, sizeof(err)) != 0)
		return fail(e, CTL_LIMIT, "%s", err);
	return json_object();
}

static json_t *m_fdb_del(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "mac", P_STRING, true }, { "vlan", P_UINT, false },
		{ NULL, 0, false } };
	struct rte_ether_addr mac;
	uint16_t vlan;
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_learn_switch(params, e)) == NULL ||
	    parse_mac(params, &mac, e) != 0 || parse_vlan(params, &vlan, e) != 0)
		return NULL;
	if (!fwd_learn_fdb_del(learn_of(s), mac.addr_bytes, vlan))
		return fail(e, CTL_NOT_FOUND, "no entry for %s in VLAN %u", str(params, "mac"),
			    vlan);
	return json_object();
}

static json_t *m_fdb_flush(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "port", P_STRING, false }, { NULL, 0, false } };
	struct port *p = NULL;
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_learn_switch(params, e)) == NULL)
		return NULL;
	if (str(params, "port") != NULL && (p = find_port(s, params, "port", e)) == NULL)
		return NULL;
	return json_pack("{si}", "flushed",
			 fwd_learn_fdb_flush(learn_of(s), p != NULL ? p->sw_index : -1));
}

static json_t *m_fdb_show(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, true }, { NULL, 0, false } };
	const char *names[SW_MAX_PORTS] = { 0 };
	unsigned int i;
	struct sw *s;

	if (check_params(params, defs, e) != 0 || (s = find_learn_switch(params, e)) == NULL)
		return NULL;
	for (i = 0; i < SW_MAX_PORTS; i++)
		if (s->ports[i] != NULL)
			names[i] = s->ports[i]->name;
	return json_pack("{ss so}", "switch", s->name, "entries",
			 fwd_learn_fdb_json(learn_of(s), names));
}

/* CONFIGURES: a success changes the configuration, so the state file is rewritten
 * (add-port's, when its set-up finishes: finish_setup); after the answer for requests that
 * carry many rules (state.h). */
static const struct {
	const char *name;
	json_t *(*fn)(json_t *params, struct ctl_error *e);
	enum { SAVE_NO, SAVE_NOW, SAVE_LATER } configures;
} methods[] = {
	{ "version", m_version, SAVE_NO },
	{ "add-switch", m_add_switch, SAVE_NOW },
	{ "del-switch", m_del_switch, SAVE_NOW },
	{ "list-switches", m_list_switches, SAVE_NO },
	{ "add-port", m_add_port, SAVE_NO },
	{ "del-port", m_del_port, SAVE_NOW },
	{ "patch", m_patch, SAVE_NOW },
	{ "unpatch", m_unpatch, SAVE_NOW },
	{ "list-ports", m_list_ports, SAVE_NO },
	{ "show", m_show, SAVE_NO },
	{ "stats", m_stats, SAVE_NO },
	{ "get-stats", m_stats, SAVE_NO },
	{ "clear-stats", m_clear_stats, SAVE_NO },
	{ "set-switch", m_set_switch, SAVE_NOW },
	{ "set-port", m_set_port, SAVE_NOW },
	{ "fdb-add", m_fdb_add, SAVE_NOW },
	{ "fdb-del", m_fdb_del, SAVE_NOW },
	{ "fdb-flush", m_fdb_flush, SAVE_NOW },
	{ "fdb-show", m_fdb_show, SAVE_NO },
	{ "add-flow", ctl_add_flow, SAVE_NOW },
	{ "add-flows", ctl_add_flows, SAVE_LATER },
	{ "mod-flows", ctl_mod_flows, SAVE_NOW },
	{ "del-flows", ctl_del_flows, SAVE_NOW },
	{ "replace-flows", ctl_replace_flows, SAVE_LATER },
	{ "dump-flows", ctl_dump_flows, SAVE_NO },
	{ "add-group", ctl_add_group, SAVE_NOW },
	{ "mod-group", ctl_mod_group, SAVE_NOW },
	{ "del-groups", ctl_del_groups, SAVE_NOW },
	{ "dump-groups", ctl_dump_groups, SAVE_NO },
	{ "add-meter", ctl_add_meter, SAVE_NOW },
	{ "mod-meter", ctl_mod_meter, SAVE_NOW },
	{ "del-meters", ctl_del_meters, SAVE_NOW },
	{ "dump-meters", ctl_dump_meters, SAVE_NO },
	{ "trace", ctl_trace, SAVE_NO },
	{ "packet-ins", ctl_packet_ins, SAVE_NO },
	{ "flows-removed", ctl_flows_removed, SAVE_NO },
	{ "show-rxqs", ctl_show_rxqs, SAVE_NO },
	{ "capture-start", ctl_capture_start, SAVE_NO },
	{ "capture-read", ctl_capture_read, SAVE_NO },
	{ "capture-stop", ctl_capture_stop, SAVE_NO },
	{ "set-rxq", ctl_set_rxq, SAVE_NO },
	{ "rebalance", ctl_rebalance, SAVE_NO },
	{ "set-rebalance", ctl_set_rebalance, SAVE_NO },
	{ "set-controller", ctl_set_controller, SAVE_NOW },
	{ "del-controller", ctl_del_controller, SAVE_NOW },
	{ "get-controller", ctl_get_controller, SAVE_NO },
	{ "set-datapath-id", ctl_set_datapath_id, SAVE_NOW },
	{ "set-fail-mode", ctl_set_fail_mode, SAVE_NOW },
	{ "set-controller-status", ctl_set_controller_status, SAVE_NO },
	{ "packet-out", ctl_packet_out, SAVE_NO },
};

json_t *ctl_call(const char *method, json_t *params, struct ctl_error *e)
{
	unsigned int i;

	for (i = 0; i < RTE_DIM(methods); i++)
		if (strcmp(methods[i].name, method) == 0) {
			json_t *result = methods[i].fn(params, e);

			if (result != NULL && methods[i].configures == SAVE_NOW)
				state_save();
			else if (result != NULL && methods[i].configures == SAVE_LATER)
				state_save_later();
			return result;
		}
	return fail(e, CTL_METHOD_NOT_FOUND, "unknown method '%s'", method);
}
