/* SPDX-License-Identifier: BSD-3-Clause */
/* The event stream of a flow switch (ctl_events.h). */
#include "ctl_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ether.h>

#include "ctl_flow.h"
#include "ctl_of.h"
#include "fwd_flow.h"
#include "switch.h"

#define EV_MAX_PER_TICK 256    /* packet-ins (and removed rules) sent per tick at most */

struct sub_port {
	bool present, up;
	uint16_t id;
	uint32_t generation;
	uint32_t of_config;
};

struct ctl_sub {
	char sw[SW_NAME_LEN];
	uint32_t of_gen;
	struct sub_port ports[SW_MAX_PORTS];
};

static json_t *port_event_json(const struct port *p)
{
	char mac[RTE_ETHER_ADDR_FMT_SIZE], ofc[64];

	rte_ether_format_addr(mac, sizeof(mac), &p->mac);
	port_of_config_format(__atomic_load_n(&p->of_config, __ATOMIC_RELAXED), ofc, sizeof(ofc));
	return json_pack("{ss si ss ss si ss}", "name", p->name, "ofport", (int)p->sw_index + 1,
			 "mac", mac, "link", port_link_is_up(p) ? "up" : "down", "mtu",
			 (int)p->mtu, "of_config", ofc);
}

static json_t *notification(const char *method, json_t *params)
{
	return json_pack("{ss ss so}", "jsonrpc", "2.0", "method", method, "params", params);
}

/* Records S's ports in SUB and returns them as a JSON array. */
static json_t *snapshot_ports(struct ctl_sub *sub, struct sw *s)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < SW_MAX_PORTS; i++) {
		struct port *p = s->ports[i];

		sub->ports[i].present = p != NULL;
		if (p == NULL)
			continue;
		port_refresh_link(p);
		sub->ports[i].up = port_link_is_up(p);
		sub->ports[i].of_config = p->of_config;
		sub->ports[i].id = p->id;
		sub->ports[i].generation = p->generation;
		json_array_append_new(a, port_event_json(p));
	}
	return a;
}

struct ctl_sub *ctl_sub_new(json_t *params, json_t **result, struct ctl_error *e)
{
	static const struct param defs[] = { { "switch", P_STRING, true }, { NULL, 0, false } };
	struct ctl_sub *sub;
	struct sw *s;

	if (ctl_check_params(params, defs, e) != 0 ||
	    (s = ctl_find_switch(params, "switch", e)) == NULL)
		return NULL;
	if (s->ops != &fwd_flow_ops) {
		ctl_fail(e, CTL_WRONG_STATE, "switch '%s' is in %s mode; events come from flow "
			 "switches", s->name, s->ops->mode);
		return NULL;
	}
	sub = calloc(1, sizeof(*sub));
	if (sub == NULL) {
		ctl_fail(e, CTL_INTERNAL, "out of memory");
		return NULL;
	}
	snprintf(sub->sw, sizeof(sub->sw), "%s", s->name);
	sub->of_gen = ctl_of_generation(s);
	*result = json_pack("{ss so}", "switch", s->name, "ports", snapshot_ports(sub, s));
	return sub;
}

void ctl_sub_free(struct ctl_sub *sub)
{
	free(sub);
}

static void port_changes(struct ctl_sub *sub, struct sw *s, json_t *out)
{
	unsigned int i;

	for (i = 0; i < SW_MAX_PORTS; i++) {
		struct sub_port *sp = &sub->ports[i];
		struct port *p = s->ports[i];
		bool same = p != NULL && sp->present && sp->id == p->id &&
			    sp->generation == p->generation;

		if (sp->present && !same) {
			json_array_append_new(out, notification("port-status", json_pack(
				"{ss ss s{si}}", "switch", s->name, "reason", "delete", "port",
				"ofport", (int)i + 1)));
			sp->present = false;
		}
		if (p == NULL)
			continue;
		if (!sp->present) {
			sp->present = true;
			sp->id = p->id;
			sp->generation = p->generation;
			sp->up = port_link_is_up(p);
			sp->of_config = p->of_config;
			json_array_append_new(out, notification("port-status", json_pack(
				"{ss ss so}", "switch", s->name, "reason", "add", "port",
				port_event_json(p))));
		} else if (sp->up != port_link_is_up(p) || sp->of_config != p->of_config) {
			sp->up = port_link_is_up(p);
			sp->of_config = p->of_config;
			json_array_append_new(out, notification("port-status", json_pack(
				"{ss ss so}", "switch", s->name, "reason", "modify", "port",
				port_event_json(p))));
		}
	}
}

static void wrap_each(json_t *items, const char *method, const char *sw, json_t *out)
{
	json_t *v;
	size_t i;

	json_array_foreach(items, i, v) {
		json_object_set_new(v, "switch", json_string(sw));
		json_array_append_new(out, notification(method, json_incref(v)));
	}
	json_decref(items);
}

bool ctl_sub_collect(struct ctl_sub *sub, bool take_packets, json_t *out)
{
	struct sw *s = sw_find(sub->sw);

	if (s == NULL || s->ops != &fwd_flow_ops) {
		json_array_append_new(out, notification("switch-deleted",
							json_pack("{ss}", "switch", sub->sw)));
		return false;
	}
	port_changes(sub, s, out);
	if (ctl_of_generation(s) != sub->of_gen) {
		sub->of_gen = ctl_of_generation(s);
		json_array_append_new(out, notification("controller-config", json_pack(
			"{ss si}", "switch", s->name, "generation", (int)sub->of_gen)));
	}
	if (!take_packets)
		return true;
	wrap_each(fwd_flow_packet_ins(s->fwd, EV_MAX_PER_TICK), "packet-in", s->name, out);
	wrap_each(fwd_flow_removed(s->fwd, EV_MAX_PER_TICK), "flow-removed", s->name, out);
	return true;
}
