/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * OpenFlow settings of flow switches, and packet-out (ctl_of.h). sluiced speaks no
 * OpenFlow itself: the agent (sluice-ofagent) holds the controller connections, reads the
 * settings kept here, reports its connection state back, and turns a controller's
 * packet-out into the packet-out method below. Keeping the settings in the daemon puts them
 * in the state file with everything else, so a restart of either process loses nothing.
 */
#include "ctl_of.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "ctl_flow.h"
#include "worker.h"

#define OF_DEFAULT_PORT 6653
#define OF_MAX_FRAME 9018         /* the largest frame a port carries (docs/ports.md) */

static struct sw *find_flow_switch(json_t *params, struct ctl_error *e)
{
	struct sw *s = ctl_find_switch(params, "switch", e);

	if (s != NULL && s->ops != &fwd_flow_ops) {
		ctl_fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; OpenFlow controls flow "
			 "switches (add-switch NAME --mode flow)", s->name, s->ops->mode);
		return NULL;
	}
	return s;
}

/* S's settings, made with their defaults on first use; NULL: no memory (E set). */
static struct of_config *of_of(struct sw *s, struct ctl_error *e)
{
	if (s->of == NULL) {
		s->of = calloc(1, sizeof(*s->of));
		if (s->of == NULL)
			ctl_fail(e, CTL_INTERNAL, "out of memory");
	}
	return s->of;
}

/* A datapath id from the switch's name (FNV-1a, 48 bits), stable across restarts. */
static uint64_t default_dpid(const struct sw *s)
{
	uint64_t h = UINT64_C(14695981039346656037);
	const char *c;

	for (c = s->name; *c != '\0'; c++)
		h = (h ^ (unsigned char)*c) * UINT64_C(1099511628211);
	return (h & UINT64_C(0xffffffffffff)) | 1;
}

static uint64_t dpid_of(const struct sw *s)
{
	return s->of != NULL && s->of->dpid_set ? s->of->dpid : default_dpid(s);
}

/* tcp:HOST[:PORT] or ssl:HOST[:PORT]; HOST an IPv4 address or [IPv6]. -1 with E. */
static int check_target(const char *t, struct ctl_error *e)
{
	char host[INET6_ADDRSTRLEN + 2], addr[16];
	const char *h, *colon, *end;
	unsigned long port = OF_DEFAULT_PORT;
	bool v6;

	if (strncmp(t, "tcp:", 4) != 0 && strncmp(t, "ssl:", 4) != 0)
		goto bad;
	h = t + 4;
	v6 = h[0] == '[';
	end = v6 ? strchr(h, ']') : NULL;
	if (v6 && end == NULL)
		goto bad;
	colon = strchr(v6 ? end : h, ':');
	if (colon != NULL) {
		char *pend;

		errno = 0;
		port = strtoul(colon + 1, &pend, 10);
		if (errno != 0 || *pend != '\0' || port == 0 || port > 65535 || colon[1] == '\0')
			goto bad;
	}
	if (v6)
		snprintf(host, sizeof(host), "%.*s", (int)(end - h - 1), h + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)(colon ? colon - h : (long)strlen(h)), h);
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host, addr) != 1)
		goto bad;
	return 0;
bad:
	ctl_fail(e, CTL_INVALID_PARAMS, "controller target '%.200s': expected tcp:IP[:PORT] or "
		 "ssl:IP[:PORT] (IPv6 in brackets; port default %d)", t, OF_DEFAULT_PORT);
	return -1;
}

static int check_file(const char *key, const char *path, struct ctl_error *e)
{
	if (strlen(path) >= OF_PATH_LEN) {
		ctl_fail(e, CTL_INVALID_PARAMS, "'%s' is longer than %d bytes", key, OF_PATH_LEN - 1);
		return -1;
	}
	if (access(path, R_OK) != 0) {
		ctl_fail(e, CTL_INVALID_PARAMS, "'%s': %.200s: %s", key, path, strerror(errno));
		return -1;
	}
	return 0;
}

json_t *ctl_set_controller(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "targets", P_ARRAY, true },
		{ "ssl_key", P_STRING, false }, { "ssl_cert", P_STRING, false },
		{ "ssl_ca", P_STRING, false }, { NULL, 0, false } };
	static const char *const ssl_keys[] = { "ssl_key", "ssl_cert", "ssl_ca" };
	json_t *targets = json_object_get(params, "targets"), *t;
	struct of_config *of;
	bool ssl = false;
	struct sw *s;
	size_t i;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	if (json_array_size(targets) > OF_MAX_CONTROLLERS)
		return ctl_fail(e, CTL_INVALID_PARAMS, "at most %d controllers",
				OF_MAX_CONTROLLERS);
	json_array_foreach(targets, i, t) {
		if (!json_is_string(t) || json_string_length(t) >= OF_TARGET_LEN)
			return ctl_fail(e, CTL_INVALID_PARAMS, "'targets' must hold strings of "
					"at most %d bytes", OF_TARGET_LEN - 1);
		if (check_target(json_string_value(t), e) != 0)
			return NULL;
		ssl |= strncmp(json_string_value(t), "ssl:", 4) == 0;
	}
	for (i = 0; i < RTE_DIM(ssl_keys); i++) {
		const char *v = json_string_value(json_object_get(params, ssl_keys[i]));

		if (v != NULL && check_file(ssl_keys[i], v, e) != 0)
			return NULL;
		if (v == NULL && ssl)
			return ctl_fail(e, CTL_INVALID_PARAMS, "an ssl: controller needs ssl_key, "
					"ssl_cert and ssl_ca (missing '%s')", ssl_keys[i]);
	}
	if ((of = of_of(s, e)) == NULL)
		return NULL;
	of->n_targets = 0;
	json_array_foreach(targets, i, t)
		snprintf(of->targets[of->n_targets++], OF_TARGET_LEN, "%s", json_string_value(t));
	snprintf(of->ssl_key, OF_PATH_LEN, "%s", json_string_value(json_object_get(params, "ssl_key")) ?: "");
	snprintf(of->ssl_cert, OF_PATH_LEN, "%s", json_string_value(json_object_get(params, "ssl_cert")) ?: "");
	snprintf(of->ssl_ca, OF_PATH_LEN, "%s", json_string_value(json_object_get(params, "ssl_ca")) ?: "");
	of->generation++;
	if (of->n_targets == 0)
		of->status[0] = '\0';
	return json_object();
}

json_t *ctl_del_controller(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, true }, { NULL, 0, false } };
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	if (s->of != NULL) {
		s->of->n_targets = 0;
		s->of->status[0] = '\0';
		s->of->generation++;
	}
	return json_object();
}

json_t *ctl_of_json(const struct sw *s)
{
	const struct of_config *of = s->of;
	json_t *targets = json_array(), *o, *status = NULL;
	char dpid[20];
	unsigned int i;

	if (of == NULL) {
		json_decref(targets);
		return NULL;
	}
	for (i = 0; i < of->n_targets; i++)
		json_array_append_new(targets, json_string(of->targets[i]));
	snprintf(dpid, sizeof(dpid), "%016" PRIx64, dpid_of(s));
	if (of->status[0] != '\0')
		status = json_loads(of->status, 0, NULL);
	o = json_pack("{so ss sb ss sI so}", "targets", targets, "datapath_id", dpid,
		      "datapath_id_set", of->dpid_set, "fail_mode",
		      of->standalone ? "standalone" : "secure", "generation",
		      (json_int_t)of->generation, "status", status != NULL ? status : json_object());
	if (of->ssl_key[0] != '\0')
		json_object_set_new(o, "ssl_key", json_string(of->ssl_key));
	if (of->ssl_cert[0] != '\0')
		json_object_set_new(o, "ssl_cert", json_string(of->ssl_cert));
	if (of->ssl_ca[0] != '\0')
		json_object_set_new(o, "ssl_ca", json_string(of->ssl_ca));
	return o;
}

uint32_t ctl_of_generation(const struct sw *s)
{
	return s->of != NULL ? s->of->generation : 0;
}

json_t *ctl_get_controller(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, true }, { NULL, 0, false } };
	struct sw *s;
	json_t *o;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	if (of_of(s, e) == NULL)
		return NULL;
	o = ctl_of_json(s);
	json_object_set_new(o, "switch", json_string(s->name));
	return o;
}

json_t *ctl_set_datapath_id(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "datapath_id", P_STRING, true },
		{ NULL, 0, false } };
	const char *v = json_string_value(json_object_get(params, "datapath_id")), *d;
	struct of_config *of;
	struct sw *s;
	uint64_t id = 0;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	d = strncasecmp(v, "0x", 2) == 0 ? v + 2 : v;
	if (*d == '\0' || strlen(d) > 16)
		goto bad;
	for (; *d != '\0'; d++) {
		if (!isxdigit((unsigned char)*d))
			goto bad;
		id = id << 4 | (uint64_t)(isdigit((unsigned char)*d) ? *d - '0' :
					  tolower((unsigned char)*d) - 'a' + 10);
	}
	if (id == 0)
		goto bad;
	if ((of = of_of(s, e)) == NULL)
		return NULL;
	of->dpid = id;
	of->dpid_set = true;
	of->generation++;
	return json_object();
bad:
	return ctl_fail(e, CTL_INVALID_PARAMS, "datapath_id '%.40s': expected 1 to 16 hex "
			"digits (0x optional), not zero", v);
}

json_t *ctl_set_fail_mode(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "mode", P_STRING, true }, { NULL, 0, false } };
	const char *mode = json_string_value(json_object_get(params, "mode"));
	struct of_config *of;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	if (strcmp(mode, "secure") != 0 && strcmp(mode, "standalone") != 0)
		return ctl_fail(e, CTL_INVALID_PARAMS, "fail mode '%.40s': expected secure or "
				"standalone", mode);
	if ((of = of_of(s, e)) == NULL)
		return NULL;
	of->standalone = strcmp(mode, "standalone") == 0;
	of->generation++;
	return json_object();
}

json_t *ctl_set_controller_status(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "status", P_STRING, false }, { NULL, 0, false } };
	json_t *status = json_object_get(params, "status");
	struct of_config *of;
	char *text;
	struct sw *s;

	/* "status" is an object; ctl_check_params knows no object type, so it is checked here. */
	if (!json_is_object(status))
		return ctl_fail(e, CTL_INVALID_PARAMS, "'status' must be an object");
	text = json_dumps(status, JSON_COMPACT);
	json_object_del(params, "status");
	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL) {
		free(text);
		return NULL;
	}
	if (text == NULL || strlen(text) >= OF_STATUS_LEN) {
		free(text);
		return ctl_fail(e, CTL_INVALID_PARAMS, "'status' is longer than %d bytes",
				OF_STATUS_LEN - 1);
	}
	if ((of = of_of(s, e)) == NULL) {
		free(text);
		return NULL;
	}
	snprintf(of->status, OF_STATUS_LEN, "%s", text);
	free(text);
	return json_object();
}

/* ---- packet-out ---- */

static int hex_value(char c)
{
	return isdigit((unsigned char)c) ? c - '0' :
	       isxdigit((unsigned char)c) ? tolower((unsigned char)c) - 'a' + 10 : -1;
}

/* DATA's hex into a new mbuf from PORT's pool; NULL with E. */
static struct rte_mbuf *frame_from_hex(const char *hex, const struct port *port,
				       struct ctl_error *e)
{
	size_t n = strlen(hex) / 2, i;
	struct rte_mbuf *m;
	uint8_t *d;

	m = rte_pktmbuf_alloc(port->pool);
	if (m == NULL) {
		ctl_fail(e, CTL_LIMIT, "no packet buffer free");
		return NULL;
	}
	d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)n);
	if (d == NULL) {
		rte_pktmbuf_free(m);
		ctl_fail(e, CTL_INVALID_PARAMS, "'data' (%zu bytes) does not fit one buffer", n);
		return NULL;
	}
	for (i = 0; i < n; i++)
		d[i] = (uint8_t)(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
	return m;
}

static int check_hex(const char *hex, struct ctl_error *e)
{
	size_t n = strlen(hex), i;

	if (n % 2 != 0 || n / 2 < RTE_ETHER_HDR_LEN || n / 2 > OF_MAX_FRAME) {
		ctl_fail(e, CTL_INVALID_PARAMS, "'data' must be a frame of %d to %d bytes in hex",
			 RTE_ETHER_HDR_LEN, OF_MAX_FRAME);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (hex_value(hex[i]) < 0) {
			ctl_fail(e, CTL_INVALID_PARAMS, "'data' is not hex (offset %zu)", i);
			return -1;
		}
	return 0;
}

/* The port with OpenFlow number OFPORT on S; NULL with E. */
static struct port *ofport_of(struct sw *s, json_int_t ofport, const char *what,
			      struct ctl_error *e)
{
	if (ofport >= 1 && ofport <= SW_MAX_PORTS && s->ports[ofport - 1] != NULL)
		return s->ports[ofport - 1];
	ctl_fail(e, CTL_NOT_FOUND, "%s %" JSON_INTEGER_FORMAT ": switch '%s' has no such port",
		 what, ofport, s->name);
	return NULL;
}

json_t *ctl_packet_out(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "data", P_STRING, true },
		{ "in_port", P_UINT, false }, { "output", P_ARRAY, false },
		{ "table", P_BOOL, false }, { NULL, 0, false } };
	json_t *output = json_object_get(params, "output"), *o;
	const char *hex = json_string_value(json_object_get(params, "data"));
	json_int_t in_no = json_integer_value(json_object_get(params, "in_port"));
	bool table = json_is_true(json_object_get(params, "table"));
	struct port *outs[SW_MAX_PORTS], *in = NULL;
	unsigned int n = 0, sent = 0, i;
	struct rte_mbuf *m;
	struct sw *s;
	size_t k;

	if (ctl_check_params(params, defs, e) != 0 || (s = find_flow_switch(params, e)) == NULL)
		return NULL;
	if (check_hex(hex, e) != 0)
		return NULL;
	if (table == (output != NULL))
		return ctl_fail(e, CTL_INVALID_PARAMS, "give 'output' (ports) or 'table': true");
	if (in_no != 0 && (in = ofport_of(s, in_no, "in_port", e)) == NULL)
		return NULL;
	if (table && in == NULL)
		return ctl_fail(e, CTL_INVALID_PARAMS, "'table' needs 'in_port' (the port the "
				"frame is taken as received on)");
	if (json_array_size(output) > SW_MAX_PORTS)
		return ctl_fail(e, CTL_INVALID_PARAMS, "at most %d outputs", SW_MAX_PORTS);
	json_array_foreach(output, k, o) {
		if (!json_is_integer(o))
			return ctl_fail(e, CTL_INVALID_PARAMS, "'output' holds port numbers");
		if ((outs[n++] = ofport_of(s, json_integer_value(o), "output", e)) == NULL)
			return NULL;
	}
	if (table) {
		if ((m = frame_from_hex(hex, in, e)) == NULL)
			return NULL;
		if (wk_inject(in, NULL, m) != 0) {
			rte_pktmbuf_free(m);
			return ctl_fail(e, CTL_LIMIT, "the worker's queue for sent frames is full");
		}
		return json_pack("{si}", "sent", 1);
	}
	for (i = 0; i < n; i++) {
		if ((m = frame_from_hex(hex, outs[i], e)) == NULL)
			break;
		if (wk_inject(NULL, outs[i], m) != 0) {
			rte_pktmbuf_free(m);
			ctl_fail(e, CTL_LIMIT, "the worker's queue for sent frames is full");
			break;
		}
		sent++;
	}
	if (sent < n && sent == 0)
		return NULL;
	return json_pack("{si}", "sent", sent);
}
