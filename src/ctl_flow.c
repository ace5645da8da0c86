/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's control methods: rules, groups and meters in ovs-ofctl's syntax (flow_parse.c)
 * applied to a flow switch (fwd_flow.c), and trace for every mode. As every method, each
 * validates all it was given before it changes anything: a file of rules with one bad line
 * adds none of them.
 */
#include "ctl_flow.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "flow.h"
#include "fwd_flow.h"
#include "pool.h"

#define CTL_FLOW_MAX_PACKET_INS 4096

/* ---- ports by name or OpenFlow number (1 .. SW_MAX_PORTS) ---- */

static int port_lookup(void *ctx, const char *name)
{
	struct sw *s = ctx;
	unsigned long n;
	char *end;
	unsigned int i;

	for (i = 0; i < SW_MAX_PORTS; i++)
		if (s->ports[i] != NULL && strcmp(s->ports[i]->name, name) == 0)
			return (int)i;
	if (!isdigit((unsigned char)name[0]))
		return -1;
	/* A number needs no port there, as in OVS: rules keep the number of a port deleted
	 * after them, and the state file writes them back so (a restart then refused the
	 * whole rule set). */
	n = strtoul(name, &end, 10);
	if (*end != '\0' || n == 0 || n > SW_MAX_PORTS)
		return -1;
	return (int)(n - 1);
}

static const char *port_name(void *ctx, uint32_t index)
{
	struct sw *s = ctx;

	return index < SW_MAX_PORTS && s->ports[index] != NULL ? s->ports[index]->name : NULL;
}

/* ---- shared checks ---- */

static struct sw *find_flow_switch(json_t *params, struct ctl_error *e)
{
	struct sw *s = ctl_find_switch(params, "switch", e);

	if (s != NULL && s->ops != &fwd_flow_ops) {
		ctl_fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; rules, groups and meters "
			 "belong to flow switches (add-switch NAME --mode flow)", s->name,
			 s->ops->mode);
		return NULL;
	}
	return s;
}

/* The rule in PARAMS[KEY] parsed into SPEC for MODE; LINE > 0 names it in a list. */
static int parse_rule(struct sw *s, const char *text, enum flow_parse_mode mode,
		      unsigned int line, struct flow_rule_spec *spec, struct ctl_error *e)
{
	char err[512];

	if (text == NULL) {
		ctl_fail(e, CTL_INVALID_PARAMS, "rule %u is not a string", line);
		return -1;
	}
	if (flow_parse_rule(text, mode, port_lookup, s, spec, err, sizeof(err)) == 0)
		return 0;
	if (line > 0)
		ctl_fail(e, CTL_INVALID_PARAMS, "line %u: %s", line, err);
	else
		ctl_fail(e, CTL_INVALID_PARAMS, "%s", err);
	return -1;
}

/* Whether a line of a rule file holds a rule: not blank, not a comment. */
static bool is_rule_line(const char *text)
{
	while (text != NULL && isspace((unsigned char)*text))
		text++;
	return text != NULL && *text != '\0' && *text != '#';
}

static json_t *count_answer(const char *key, unsigned int n)
{
	return json_pack("{s:i}", key, n);
}

/* ---- rules ---- */

json_t *ctl_add_flow(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "flow", P_STRING, true }, { NULL, 0, false } };
	struct flow_rule_spec *spec;
	char err[512];
	json_t *result = NULL;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	spec = malloc(sizeof(*spec));
	if (spec == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	if (parse_rule(s, json_string_value(json_object_get(params, "flow")), FLOW_PARSE_ADD, 0,
		       spec, e) == 0) {
		if (fwd_flow_add(s->fwd, spec, err, sizeof(err)) == 0)
			result = count_answer("added", 1);
		else
			ctl_fail(e, CTL_INVALID_PARAMS, "%s", err);
	}
	free(spec);
	return result;
}

/* Parses every rule of FLOWS (an array of lines) and checks what it refers to; nothing is
 * changed. */
static int check_rule_list(struct sw *s, json_t *flows, struct flow_rule_spec *spec,
			   unsigned int *n_rules, struct ctl_error *e)
{
	char err[512];
	json_t *line;
	size_t i;

	*n_rules = 0;
	if (!json_is_array(flows)) {
		ctl_fail(e, CTL_INVALID_PARAMS, "parameter 'flows' must be an array of rules");
		return -1;
	}
	json_array_foreach(flows, i, line) {
		const char *text = json_string_value(line);

		if (!is_rule_line(text) && text != NULL)
			continue;
		if (parse_rule(s, text, FLOW_PARSE_ADD, (unsigned int)i + 1, spec, e) != 0)
			return -1;
		/* A group or meter that does not exist is a bad line too: found before any
		 * rule is added. */
		if (fwd_flow_check(s->fwd, spec, err, sizeof(err)) != 0) {
			ctl_fail(e, CTL_INVALID_PARAMS, "line %zu: %s", i + 1, err);
			return -1;
		}
		(*n_rules)++;
	}
	return 0;
}

json_t *ctl_add_flows(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "flows", P_ARRAY, true }, { NULL, 0, false } };
	json_t *flows = json_object_get(params, "flows"), *line;
	struct flow_rule_spec *spec;
	unsigned int n = 0, added = 0;
	json_t *result = NULL;
	char err[512];
	struct sw *s;
	size_t i;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	spec = malloc(sizeof(*spec));
	if (spec == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	if (check_rule_list(s, flows, spec, &n, e) != 0)
		goto out;
	json_array_foreach(flows, i, line) {
		if (!is_rule_line(json_string_value(line)))
			continue;
		parse_rule(s, json_string_value(line), FLOW_PARSE_ADD, (unsigned int)i + 1, spec, e);
		if (fwd_flow_add(s->fwd, spec, err, sizeof(err)) != 0) {
			ctl_fail(e, CTL_INVALID_PARAMS, "line %zu: %s (%u rules before it were added)",
				 i + 1, err, added);
			goto out;
		}
		added++;
	}
	result = count_answer("added", added);
out:
	free(spec);
	return result;
}

json_t *ctl_replace_flows(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "flows", P_ARRAY, true }, { NULL, 0, false } };
	json_t *flows = json_object_get(params, "flows"), *line;
	struct flow_rule_spec *spec;
	json_t *result = NULL;
	unsigned int n = 0;
	void *bundle;
	char err[512];
	struct sw *s;
	size_t i;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	spec = malloc(sizeof(*spec));
	if (spec == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	if (check_rule_list(s, flows, spec, &n, e) != 0)
		goto out;
	bundle = fwd_flow_bundle_open(s->fwd);
	if (bundle == NULL) {
		ctl_fail(e, CTL_INTERNAL, "out of memory for a new rule set");
		goto out;
	}
	json_array_foreach(flows, i, line) {
		if (!is_rule_line(json_string_value(line)))
			continue;
		parse_rule(s, json_string_value(line), FLOW_PARSE_ADD, (unsigned int)i + 1, spec, e);
		if (fwd_flow_bundle_add(s->fwd, bundle, spec, err, sizeof(err)) != 0) {
			ctl_fail(e, CTL_INVALID_PARAMS, "line %zu: %s; nothing changed", i + 1, err);
			fwd_flow_bundle_abort(s->fwd, bundle);
			goto out;
		}
	}
	fwd_flow_bundle_commit(s->fwd, bundle);
	result = count_answer("rules", n);
out:
	free(spec);
	return result;
}

/* The filter of mod-flows, del-flows and dump-flows; NULL text: everything. */
static int parse_filter(struct sw *s, json_t *params, enum flow_parse_mode mode,
			struct flow_rule_spec **filter, struct ctl_error *e)
{
	const char *text = json_string_value(json_object_get(params, "flow"));

	*filter = NULL;
	if (text == NULL && mode == FLOW_PARSE_MODIFY) {
		ctl_fail(e, CTL_INVALID_PARAMS, "missing parameter 'flow'");
		return -1;
	}
	if (text == NULL)
		return 0;
	*filter = malloc(sizeof(**filter));
	if (*filter == NULL) {
		ctl_fail(e, CTL_INTERNAL, "out of memory");
		return -1;
	}
	if (parse_rule(s, text, mode, 0, *filter, e) != 0) {
		free(*filter);
		*filter = NULL;
		return -1;
	}
	return 0;
}

json_t *ctl_mod_flows(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "flow", P_STRING, true },
		{ "strict", P_BOOL, false }, { NULL, 0, false } };
	struct flow_rule_spec *f;
	unsigned int n = 0;
	json_t *result = NULL;
	char err[512];
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL ||
	    parse_filter(s, params, FLOW_PARSE_MODIFY, &f, e) != 0)
		return NULL;
	if (fwd_flow_modify(s->fwd, f, json_is_true(json_object_get(params, "strict")), &n,
			    err, sizeof(err)) == 0)
		result = count_answer("modified", n);
	else
		ctl_fail(e, CTL_INVALID_PARAMS, "%s", err);
	free(f);
	return result;
}

json_t *ctl_del_flows(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "flow", P_STRING, false },
		{ "strict", P_BOOL, false }, { NULL, 0, false } };
	struct flow_rule_spec *f;
	unsigned int n;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL ||
	    parse_filter(s, params, FLOW_PARSE_DELETE, &f, e) != 0)
		return NULL;
	if (f == NULL && json_is_true(json_object_get(params, "strict")))
		return ctl_fail(e, CTL_INVALID_PARAMS, "--strict needs a rule to match exactly");
	n = fwd_flow_delete(s->fwd, f, json_is_true(json_object_get(params, "strict")));
	free(f);
	return count_answer("deleted", n);
}

json_t *ctl_dump_flows(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "flow", P_STRING, false },
		{ "strict", P_BOOL, false }, { NULL, 0, false } };
	struct flow_rule_spec *f;
	struct flow_namer nm = { port_name, NULL };
	json_t *flows, *o;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL ||
	    parse_filter(s, params, FLOW_PARSE_DELETE, &f, e) != 0)
		return NULL;
	nm.ctx = s;
	flows = fwd_flow_dump(s->fwd, f, json_is_true(json_object_get(params, "strict")), &nm);
	free(f);
	if (flows == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	o = json_pack("{s:s, s:o}", "switch", s->name, "flows", flows);
	return o;
}

/* ---- groups and meters ---- */

/* The code for a refused add or mod of a group or meter, from fwd_flow's message. */
static int set_error_code(const char *err, bool modify)
{
	if (!modify && strstr(err, "exists") != NULL)
		return CTL_EXISTS;
	return strstr(err, "does not exist") != NULL ? CTL_NOT_FOUND : CTL_INVALID_PARAMS;
}

static json_t *set_group(json_t *params, struct ctl_error *e, bool modify)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "group", P_STRING, true }, { NULL, 0, false } };
	struct flow_group_spec *g;
	json_t *result = NULL;
	char err[512];
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	g = malloc(sizeof(*g));
	if (g == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	if (flow_parse_group(json_string_value(json_object_get(params, "group")), port_lookup, s,
			     g, err, sizeof(err)) != 0)
		ctl_fail(e, CTL_INVALID_PARAMS, "%s", err);
	else if (fwd_flow_group_set(s->fwd, g, modify, err, sizeof(err)) != 0)
		ctl_fail(e, set_error_code(err, modify), "%s", err);
	else
		result = json_pack("{s:I}", "group_id", (json_int_t)g->id);
	free(g);
	return result;
}

json_t *ctl_add_group(json_t *params, struct ctl_error *e)
{
	return set_group(params, e, false);
}

json_t *ctl_mod_group(json_t *params, struct ctl_error *e)
{
	return set_group(params, e, true);
}

/* "group_id=N" / "meter=N" / "N" / "all" into ID; FLOW_PORT_ANY for all. */
static int parse_id(const char *text, const char *key, uint32_t *id, struct ctl_error *e)
{
	size_t klen = strlen(key);
	unsigned long long v;
	char *end;

	*id = FLOW_PORT_ANY;
	if (text == NULL || strcmp(text, "all") == 0 || strcmp(text, "") == 0)
		return 0;
	if (strncmp(text, key, klen) == 0 && text[klen] == '=')
		text += klen + 1;
	if (strcmp(text, "all") == 0)
		return 0;
	v = strtoull(text, &end, 0);
	if (!isdigit((unsigned char)text[0]) || *end != '\0' || v == 0 || v >= FLOW_PORT_ANY) {
		ctl_fail(e, CTL_INVALID_PARAMS, "'%s': expected %s=N or all", text, key);
		return -1;
	}
	*id = (uint32_t)v;
	return 0;
}

json_t *ctl_del_groups(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "group", P_STRING, false }, { NULL, 0, false } };
	uint32_t id;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL ||
	    parse_id(json_string_value(json_object_get(params, "group")), "group_id", &id, e) != 0)
		return NULL;
	if (!fwd_flow_group_del(s->fwd, id) && id != FLOW_PORT_ANY)
		return ctl_fail(e, CTL_NOT_FOUND, "no group %u on switch '%s'", id, s->name);
	return json_object();
}

json_t *ctl_dump_groups(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, true }, { NULL, 0, false } };
	struct flow_namer nm = { port_name, NULL };
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	nm.ctx = s;
	return json_pack("{s:s, s:o}", "switch", s->name, "groups",
			 fwd_flow_group_dump(s->fwd, &nm));
}

/* ---- meters ---- */

static json_t *set_meter(json_t *params, struct ctl_error *e, bool modify)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "meter", P_STRING, true }, { NULL, 0, false } };
	struct flow_meter_spec m;
	char err[512];
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	if (flow_parse_meter(json_string_value(json_object_get(params, "meter")), &m, err,
			     sizeof(err)) != 0)
		return ctl_fail(e, CTL_INVALID_PARAMS, "%s", err);
	if (fwd_flow_meter_set(s->fwd, &m, modify, err, sizeof(err)) != 0)
		return ctl_fail(e, set_error_code(err, modify), "%s", err);
	return json_pack("{s:I}", "meter_id", (json_int_t)m.id);
}

json_t *ctl_add_meter(json_t *params, struct ctl_error *e)
{
	return set_meter(params, e, false);
}

json_t *ctl_mod_meter(json_t *params, struct ctl_error *e)
{
	return set_meter(params, e, true);
}

json_t *ctl_del_meters(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "meter", P_STRING, false }, { NULL, 0, false } };
	uint32_t id;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL ||
	    parse_id(json_string_value(json_object_get(params, "meter")), "meter", &id, e) != 0)
		return NULL;
	if (!fwd_flow_meter_del(s->fwd, id) && id != FLOW_PORT_ANY)
		return ctl_fail(e, CTL_NOT_FOUND, "no meter %u on switch '%s'", id, s->name);
	return json_object();
}

json_t *ctl_dump_meters(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, true }, { NULL, 0, false } };
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	return json_pack("{s:s, s:o}", "switch", s->name, "meters", fwd_flow_meter_dump(s->fwd));
}

/* ---- trace and packet-ins ---- */

/* Patch and learn switches decide on a real frame: the described packet, built. */
static json_t *trace_frame(struct sw *s, const struct flow_key *key, struct ctl_error *e)
{
	struct rte_mempool *mp = pool_reserve((int)rte_socket_id(), 1);
	struct fwd_trace *t = calloc(1, sizeof(*t));
	struct rte_mbuf *m = mp != NULL ? rte_pktmbuf_alloc(mp) : NULL;
	json_t *result = NULL;
	uint32_t len;

	if (m == NULL || t == NULL) {
		ctl_fail(e, CTL_INTERNAL, "no buffer for the trace");
		goto out;
	}
	len = flow_key_compose(key, rte_pktmbuf_mtod(m, uint8_t *), rte_pktmbuf_tailroom(m));
	if (len == 0 || rte_pktmbuf_append(m, (uint16_t)len) == NULL) {
		ctl_fail(e, CTL_INTERNAL, "the described packet does not fit a buffer");
		goto out;
	}
	if (s->ops->trace == NULL) {
		ctl_fail(e, CTL_WRONG_STATE, "%s mode has no trace", s->ops->mode);
		goto out;
	}
	s->ops->trace(s->fwd, (uint16_t)key->in_port, m, t);
	result = json_pack("{s:s, s:s}", "switch", s->name, "text", t->text);
out:
	rte_pktmbuf_free(m);
	if (mp != NULL)
		pool_release(mp, 1);
	free(t);
	return result;
}

json_t *ctl_trace(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "packet", P_STRING, true }, { NULL, 0, false } };
	struct flow_namer nm = { port_name, NULL };
	struct flow_rule_spec *spec;
	json_t *result = NULL;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 ||
	    (s = ctl_find_switch(params, "switch", e)) == NULL)
		return NULL;
	spec = malloc(sizeof(*spec));
	if (spec == NULL)
		return ctl_fail(e, CTL_INTERNAL, "out of memory");
	if (parse_rule(s, json_string_value(json_object_get(params, "packet")), FLOW_PARSE_TRACE,
		       0, spec, e) != 0)
		goto out;
	if (spec->match.mask.in_port == 0) {
		ctl_fail(e, CTL_INVALID_PARAMS, "a traced packet needs in_port=PORT");
		goto out;
	}
	nm.ctx = s;
	if (s->ops == &fwd_flow_ops) {
		result = fwd_flow_trace(s->fwd, &spec->match.key, &nm);
		if (result == NULL)
			ctl_fail(e, CTL_INTERNAL, "out of memory");
		else
			json_object_set_new(result, "switch", json_string(s->name));
	} else {
		result = trace_frame(s, &spec->match.key, e);
	}
out:
	free(spec);
	return result;
}

json_t *ctl_flows_removed(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "max", P_UINT, false }, { NULL, 0, false } };
	json_t *max = json_object_get(params, "max");
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	return json_pack("{s:s, s:o}", "switch", s->name, "removed",
			 fwd_flow_removed(s->fwd, max != NULL ?
					  (unsigned int)RTE_MIN(json_integer_value(max),
								CTL_FLOW_MAX_PACKET_INS) :
					  CTL_FLOW_MAX_PACKET_INS));
}

json_t *ctl_packet_ins(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "max", P_UINT, false }, { NULL, 0, false } };
	json_t *max = json_object_get(params, "max");
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	return json_pack("{s:s, s:o}", "switch", s->name, "packet_ins",
			 fwd_flow_packet_ins(s->fwd, max != NULL ?
					     (unsigned int)RTE_MIN(json_integer_value(max),
								   CTL_FLOW_MAX_PACKET_INS) :
					     CTL_FLOW_MAX_PACKET_INS));
}
