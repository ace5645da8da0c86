/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control methods of captures made by sluiced itself (capture.h, docs/protocol.md):
 * capture-start, capture-read and capture-stop. A capture belongs to the connection that
 * started it: only that connection reads or stops it, and it ends when that connection
 * closes (ctl.c tells capture.c).
 */
#include "ctl_capture.h"

#include <string.h>

#include "capture.h"
#include "ctl_flow.h"
#include "port.h"

#define CAP_READ_DEFAULT 256     /* frames a read hands out unless it asks for another number */
#define CAP_READ_FRAMES_MAX 4096
#define CAP_READ_BYTES (1024 * 1024)   /* about this much frame data a read, at most */

static int parse_direction(const char *text, unsigned int *dirs)
{
	if (text == NULL || strcmp(text, "both") == 0)
		*dirs = CAP_RX | CAP_TX;
	else if (strcmp(text, "rx") == 0)
		*dirs = CAP_RX;
	else if (strcmp(text, "tx") == 0)
		*dirs = CAP_TX;
	else
		return -1;
	return 0;
}

json_t *ctl_capture_start(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "switch", P_STRING, true }, { "port", P_STRING, true },
		{ "direction", P_STRING, false }, { "snaplen", P_UINT, false },
		{ NULL, 0, false } };
	const char *name, *dir;
	json_int_t snaplen = CAP_SNAPLEN_MAX;
	unsigned int dirs;
	uint64_t owner = ctl_conn_id();
	char err[400];
	struct sw *s;
	struct port *p;
	uint32_t id;

	if (ctl_check_params(params, defs, e) != 0)
		return NULL;
	if (owner == 0)
		return ctl_fail(e, CTL_WRONG_STATE, "capture-start needs a connection of its own");
	dir = json_string_value(json_object_get(params, "direction"));
	if (parse_direction(dir, &dirs) != 0)
		return ctl_fail(e, CTL_INVALID_PARAMS, "direction must be rx, tx or both, not '%s'",
				dir);
	if (json_object_get(params, "snaplen") != NULL)
		snaplen = json_integer_value(json_object_get(params, "snaplen"));
	if (snaplen < 1 || snaplen > CAP_SNAPLEN_MAX)
		return ctl_fail(e, CTL_INVALID_PARAMS, "snaplen must be 1..%u", CAP_SNAPLEN_MAX);
	s = sw_find(json_string_value(json_object_get(params, "switch")));
	if (s == NULL)
		return ctl_fail(e, CTL_NOT_FOUND, "no switch named '%s'",
				json_string_value(json_object_get(params, "switch")));
	name = json_string_value(json_object_get(params, "port"));
	p = port_find(name);
	if (p == NULL || p->sw != s)
		return ctl_fail(e, CTL_NOT_FOUND, "no port named '%s' on switch '%s'", name,
				s->name);
	id = cap_start(p, dirs, (uint32_t)snaplen, owner, err, sizeof(err));
	if (id == 0)
		return ctl_fail(e, p->vhf == NULL ? CTL_WRONG_STATE : p->cap != NULL ?
				CTL_EXISTS : CTL_LIMIT, "%s", err);
	return json_pack("{si ss ss ss si}", "id", (int)id, "switch", s->name, "port", p->name,
			 "direction", dir != NULL ? dir : "both", "snaplen", (int)snaplen);
}

/* The capture PARAMS["id"] names, if it is this connection's. */
static struct cap *find_capture(json_t *params, struct ctl_error *e)
{
	json_int_t id = json_integer_value(json_object_get(params, "id"));
	struct cap *c = id > 0 && id <= UINT32_MAX ? cap_find((uint32_t)id, ctl_conn_id())
						  : NULL;

	if (c == NULL)
		ctl_fail(e, CTL_NOT_FOUND, "no capture %lld on this connection (it ended, or "
			 "another connection started it)", (long long)id);
	return c;
}

json_t *ctl_capture_read(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = {
		{ "id", P_UINT, true }, { "max", P_UINT, false }, { NULL, 0, false } };
	json_int_t max = CAP_READ_DEFAULT;
	json_t *frames, *o;
	struct cap *c;

	if (ctl_check_params(params, defs, e) != 0 || (c = find_capture(params, e)) == NULL)
		return NULL;
	if (json_object_get(params, "max") != NULL)
		max = json_integer_value(json_object_get(params, "max"));
	if (max < 1 || max > CAP_READ_FRAMES_MAX)
		return ctl_fail(e, CTL_INVALID_PARAMS, "max must be 1..%d", CAP_READ_FRAMES_MAX);
	frames = json_array();
	o = json_object();
	if (frames == NULL || o == NULL ||
	    cap_read(c, (unsigned int)max, CAP_READ_BYTES, frames, o) != 0) {
		json_decref(frames);
		json_decref(o);
		return ctl_fail(e, CTL_INTERNAL, "no memory for the frames (they are lost)");
	}
	json_object_set_new(o, "frames", frames);
	return o;
}

json_t *ctl_capture_stop(json_t *params, struct ctl_error *e)
{
	static const struct param defs[] = { { "id", P_UINT, true }, { NULL, 0, false } };
	json_t *o;
	struct cap *c;

	if (ctl_check_params(params, defs, e) != 0 || (c = find_capture(params, e)) == NULL)
		return NULL;
	cap_stop(c, CAP_STOPPED);
	o = json_object();
	if (o != NULL)
		cap_describe(c, o);
	return o;
}
