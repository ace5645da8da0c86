/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state file: the daemon's configuration, rewritten after every change and replayed at
 * start, so that a restart (a crash, kill -9, an upgrade) brings back every switch, port,
 * link and setting with no step by the user. With vhost-user ports in client mode (the VM
 * or container is the server, as OVS's dpdkvhostuserclient), the VNFs reconnect by
 * themselves once the ports exist again.
 *
 * The file holds the requests that rebuild the configuration, one JSON object a line, in the
 * --config format; it is made from what the daemon reports (`show`, `fdb-show`), not from a
 * log of requests, so it never grows and never replays a change that was undone. It is
 * written to a temporary file, synced and renamed over the old one: a crash leaves either
 * the old state or the new one, never half of one.
 */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ctl.h"
#include "log.h"

/*
 * The file is rewritten before each change is answered while that is cheap (a rewrite took
 * under STATE_SYNC_MS). A large configuration (tens of thousands of rules) makes a rewrite
 * cost tens of milliseconds or more; then changes are answered first and written together,
 * at most one rewrite per STATE_COST_FACTOR times its cost, so that a burst of changes (a
 * controller's rules one by one) spends at most a tenth of the control thread on the file:
 * a change is then on disk within ten rewrite-times of its answer.
 */
#define STATE_SYNC_MS 5
#define STATE_COST_FACTOR 10

static char state_path[PATH_MAX];
static bool restoring;
static bool dirty;               /* a change waits for its save */
static uint64_t last_save_ms;
static uint64_t last_cost_ms;    /* how long the last rewrite took */

static uint64_t state_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void state_init(const char *path)
{
	snprintf(state_path, sizeof(state_path), "%s", path != NULL ? path : "");
}

const char *state_file(void)
{
	return state_path[0] != '\0' ? state_path : NULL;
}

/* ---- the snapshot ---- */

static void add_request(json_t *out, const char *method, json_t *params)
{
	json_array_append_new(out, json_pack("{ss so}", "method", method, "params", params));
}

/* Asks the daemon METHOD as a client would; NULL on an error (logged). */
static json_t *ask(const char *method, json_t *params)
{
	struct ctl_error e = { 0 };
	json_t *r = ctl_call(method, params, &e);

	if (r == NULL)
		LOG(ERR, "state: %s failed: %s", method, e.message);
	json_decref(params);
	return r;
}

/* The VLAN words of set-port for one port's settings in `show`. */
static void add_vlan_params(json_t *params, json_t *ps)
{
	const char *mode = json_string_value(json_object_get(ps, "vlan_mode"));
	json_t *trunks = json_object_get(ps, "trunks"), *v;
	char list[4096] = "";
	size_t len = 0, i;

	if (mode == NULL)
		return;
	json_object_set_new(params, "vlan_mode", json_string(mode));
	if (strcmp(mode, "access") == 0) {
		json_object_set(params, "tag", json_object_get(ps, "tag"));
		return;
	}
	if (json_is_string(trunks) || !json_is_array(trunks) || json_array_size(trunks) == 0)
		return;         /* "all", the default */
	json_array_foreach(trunks, i, v)
		if (len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%lld",
						i ? "," : "", (long long)json_integer_value(v));
	json_object_set_new(params, "trunks", json_string(list));
}

static void copy_if_present(json_t *to, json_t *from, const char *key)
{
	json_t *v = json_object_get(from, key);

	if (v != NULL && !json_is_null(v))
		json_object_set(to, key, v);
}

static void add_learn_requests(json_t *out, const char *name, json_t *sw)
{
	json_t *settings = json_object_get(sw, "port_settings"), *ps, *fdb, *entry;
	const char *port;
	size_t i;

	json_t *sw_params = json_pack("{ss}", "switch", name);

	copy_if_present(sw_params, sw, "aging");
	copy_if_present(sw_params, sw, "forward_reserved");
	add_request(out, "set-switch", sw_params);
	json_object_foreach(settings, port, ps) {
		json_t *params = json_pack("{ss ss}", "switch", name, "name", port);

		copy_if_present(params, ps, "learn_limit");
		copy_if_present(params, ps, "storm_pps");
		add_vlan_params(params, ps);
		add_request(out, "set-port", params);
	}
	fdb = ask("fdb-show", json_pack("{ss}", "switch", name));
	json_array_foreach(json_object_get(fdb, "entries"), i, entry) {
		const char *type = json_string_value(json_object_get(entry, "type"));

		if (type != NULL && strcmp(type, "static") == 0)
			add_request(out, "fdb-add", json_pack("{ss sO sO sO}", "switch", name,
				    "mac", json_object_get(entry, "mac"),
				    "port", json_object_get(entry, "port"),
				    "vlan", json_object_get(entry, "vlan")));
	}
	json_decref(fdb);
}

/* A rule of dump-flows written back as the line that adds it. */
static json_t *rule_line(json_t *f)
{
	char line[4096];
	const char *match = json_string_value(json_object_get(f, "match"));
	json_int_t idle = json_integer_value(json_object_get(f, "idle_timeout"));
	json_int_t hard = json_integer_value(json_object_get(f, "hard_timeout"));
	int n;

	n = snprintf(line, sizeof(line), "table=%lld,priority=%lld,cookie=%s",
		     (long long)json_integer_value(json_object_get(f, "table")),
		     (long long)json_integer_value(json_object_get(f, "priority")),
		     json_string_value(json_object_get(f, "cookie")));
	if (idle > 0)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",idle_timeout=%lld",
			      (long long)idle);
	if (hard > 0)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",hard_timeout=%lld",
			      (long long)hard);
	if (json_is_true(json_object_get(f, "send_flow_rem")))
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",send_flow_rem");
	snprintf(line + n, sizeof(line) - (size_t)n, "%s%s,actions=%s", match[0] ? "," : "",
		 match, json_string_value(json_object_get(f, "actions")));
	return json_string(line);
}

/* Whether every group TEXT's buckets send to ("group:N") is in ADDED (N_ADDED ids) or is
 * not among the switch's GROUPS at all. */
static bool group_refs_added(const char *text, json_t *groups, const json_int_t *added,
			     size_t n_added)
{
	const char *p = text;

	while ((p = strstr(p, "group:")) != NULL) {
		json_int_t id = strtoll(p + 6, NULL, 10);
		bool found = false, exists = false;
		size_t i;
		json_t *g;

		p += 6;
		if (p - 6 > text && p[-7] == '_')      /* watch_group: not a reference */
			continue;
		for (i = 0; i < n_added && !found; i++)
			found = added[i] == id;
		json_array_foreach(groups, i, g)
			exists |= json_integer_value(json_object_get(g, "group_id")) == id;
		if (!found && exists)
			return false;
	}
	return true;
}

/* The add-group requests of GROUPS, each after the groups it sends to (a group may send to
 * one of a higher id, and add-group wants the groups it names to exist). */
static void add_group_requests(json_t *out, const char *name, json_t *groups)
{
	size_t n = json_array_size(groups), n_added = 0, i;
	json_int_t *added = calloc(n + 1, sizeof(*added));
	bool *done = calloc(n + 1, sizeof(*done));
	bool progress = true;
	json_t *g;

	while (added != NULL && done != NULL && progress) {
		progress = false;
		json_array_foreach(groups, i, g) {
			const char *text = json_string_value(json_object_get(g, "text"));

			if (done[i] || !group_refs_added(text != NULL ? text : "", groups, added,
							 n_added))
				continue;
			add_request(out, "add-group", json_pack("{ss sO}", "switch", name, "group",
								json_object_get(g, "text")));
			added[n_added++] = json_integer_value(json_object_get(g, "group_id"));
			done[i] = progress = true;
		}
	}
	/* A loop of groups (mod-group can make one) is written as it is, in id order. */
	json_array_foreach(groups, i, g)
		if (done == NULL || !done[i])
			add_request(out, "add-group", json_pack("{ss sO}", "switch", name, "group",
								json_object_get(g, "text")));
	free(added);
	free(done);
}

/* A flow switch's meters, groups (each after those it sends to) and rules, the rules as one
 * replace-flows. */
static void add_flow_requests(json_t *out, const char *name)
{
	json_t *meters = ask("dump-meters", json_pack("{ss}", "switch", name));
	json_t *groups = ask("dump-groups", json_pack("{ss}", "switch", name));
	json_t *flows = ask("dump-flows", json_pack("{ss}", "switch", name));
	json_t *lines = json_array(), *v;
	size_t i;

	json_array_foreach(json_object_get(meters, "meters"), i, v)
		add_request(out, "add-meter", json_pack("{ss sO}", "switch", name, "meter",
							json_object_get(v, "text")));
	add_group_requests(out, name, json_object_get(groups, "groups"));
	json_array_foreach(json_object_get(flows, "flows"), i, v)
		json_array_append_new(lines, rule_line(v));
	if (json_array_size(lines) > 0)
		add_request(out, "replace-flows", json_pack("{ss so}", "switch", name, "flows",
							    lines));
	else
		json_decref(lines);
	json_decref(meters);
	json_decref(groups);
	json_decref(flows);
}

/* A flow switch's OpenFlow settings (show's "openflow"; the agent's status is not kept). */
static void add_openflow_requests(json_t *out, const char *name, json_t *of)
{
	static const char *const ssl_keys[] = { "ssl_key", "ssl_cert", "ssl_ca" };
	json_t *params;
	size_t i;

	if (of == NULL)
		return;
	if (json_is_true(json_object_get(of, "datapath_id_set")))
		add_request(out, "set-datapath-id", json_pack("{ss sO}", "switch", name,
			    "datapath_id", json_object_get(of, "datapath_id")));
	add_request(out, "set-fail-mode", json_pack("{ss sO}", "switch", name, "mode",
						    json_object_get(of, "fail_mode")));
	params = json_pack("{ss sO}", "switch", name, "targets", json_object_get(of, "targets"));
	for (i = 0; i < 3; i++)
		if (json_object_get(of, ssl_keys[i]) != NULL)
			json_object_set(params, ssl_keys[i], json_object_get(of, ssl_keys[i]));
	add_request(out, "set-controller", params);
}

static void add_switch_requests(json_t *out, json_t *sw)
{
	const char *name = json_string_value(json_object_get(sw, "name"));
	const char *mode = json_string_value(json_object_get(sw, "mode"));
	json_t *params = json_pack("{ss ss}", "name", name, "mode", mode), *p, *link;
	bool learn = strcmp(mode, "learn") == 0;
	size_t i;

	if (learn)
		json_object_set(params, "max_entries", json_object_get(sw, "max_entries"));
	add_request(out, "add-switch", params);
	json_array_foreach(json_object_get(sw, "ports"), i, p) {
		/* Its OpenFlow number too: rules and controllers name ports by it. */
		add_request(out, "add-port", json_pack("{ss sO sO sO*}", "switch", name,
			    "name", json_object_get(p, "name"), "spec", json_object_get(p, "spec"),
			    "ofport", json_object_get(p, "ofport")));
		if (json_is_true(json_object_get(p, "mtu_set")))      /* set-port mtu=N */
			add_request(out, "set-port", json_pack("{ss sO sO}", "switch", name,
				    "name", json_object_get(p, "name"),
				    "mtu", json_object_get(p, "mtu")));
		/* A flow switch port's OpenFlow config (port-mod, set-port of_config). */
		if (json_string_length(json_object_get(p, "of_config")) > 0)
			add_request(out, "set-port", json_pack("{ss sO sO}", "switch", name,
				    "name", json_object_get(p, "name"),
				    "of_config", json_object_get(p, "of_config")));
	}
	json_array_foreach(json_object_get(sw, "links"), i, link)
		add_request(out, "patch", json_pack("{ss sO sO}", "switch", name,
			    "port1", json_array_get(link, 0), "port2", json_array_get(link, 1)));
	if (learn)
		add_learn_requests(out, name, sw);
	if (strcmp(mode, "flow") == 0) {
		add_flow_requests(out, name);
		add_openflow_requests(out, name, json_object_get(sw, "openflow"));
	}
}

/* The requests that rebuild the daemon's configuration, or NULL. */
static json_t *snapshot(void)
{
	json_t *show = ask("show", json_object()), *out, *sw;
	size_t i;

	if (show == NULL)
		return NULL;
	out = json_array();
	json_array_foreach(json_object_get(show, "switches"), i, sw)
		add_switch_requests(out, sw);
	json_decref(show);
	return out;
}

/* ---- writing and reading ---- */

static int write_lines(FILE *f, json_t *requests)
{
	json_t *r;
	size_t i;

	fprintf(f, "# sluiced state: the requests that rebuild its configuration, replayed at "
		"start; rewritten on every change (docs/operations.md)\n");
	json_array_foreach(requests, i, r)
		if (json_dumpf(r, f, JSON_COMPACT) != 0 || fputc('\n', f) == EOF)
			return -1;
	return fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -1;
}

/* Makes the state file's directory (a first start under /var/lib/sluice). */
static void make_dir(void)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", state_path);
	if (mkdir(dirname(dir), 0750) != 0 && errno != EEXIST)
		LOG(WARNING, "state: cannot make the directory of %s: %s", state_path,
		    strerror(errno));
}

/* Syncs the directory of the state file, so that the rename itself survives a crash. */
static void sync_dir(void)
{
	char dir[PATH_MAX];
	int fd;

	snprintf(dir, sizeof(dir), "%s", state_path);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static void write_state(void)
{
	char tmp[PATH_MAX + 8];
	json_t *requests;
	FILE *f;
	int rc;

	dirty = false;
	last_save_ms = state_now_ms();
	requests = snapshot();
	last_cost_ms = state_now_ms() - last_save_ms;
	if (requests == NULL)
		return;
	make_dir();
	snprintf(tmp, sizeof(tmp), "%s.tmp", state_path);
	f = fopen(tmp, "we");
	rc = f != NULL ? write_lines(f, requests) : -1;
	if (f != NULL && fclose(f) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, state_path) == 0)
		sync_dir();
	else
		LOG(ERR, "state: cannot write %s: %s (the previous state stays)", state_path,
		    strerror(errno));
	json_decref(requests);
}

void state_save(void)
{
	if (state_path[0] == '\0' || restoring)
		return;
	if (last_cost_ms < STATE_SYNC_MS && !dirty)
		write_state();
	else
		dirty = true;
}

void state_save_later(void)
{
	if (state_path[0] != '\0' && !restoring)
		dirty = true;
}

int state_pending_ms(void)
{
	uint64_t since, interval = last_cost_ms * STATE_COST_FACTOR;

	if (!dirty)
		return -1;
	since = state_now_ms() - last_save_ms;
	if (last_cost_ms >= STATE_SYNC_MS && since < interval)
		return (int)(interval - since);
	write_state();
	return -1;
}

void state_flush(void)
{
	if (dirty && state_path[0] != '\0')
		write_state();
}

bool state_exists(void)
{
	return state_path[0] != '\0' && access(state_path, F_OK) == 0;
}

int state_restore(void)
{
	struct timespec t0, t1;
	int failed;

	if (!state_exists())
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	restoring = true;
	failed = ctl_apply_file(state_path, true);
	restoring = false;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (failed < 0)
		return -1;
	LOG(NOTICE, "state: restored %s in %.1f ms%s", state_path,
	    (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
	    failed ? "; some requests failed (logged above) and are left out of the state" : "");
	state_save();     /* what could not be restored is no longer configured */
	return 0;
}
