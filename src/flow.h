/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's rule model: what a rule, a group and a meter are, independent of how they are
 * written (flow_parse.c reads and writes ovs-ofctl's syntax; the OpenFlow agent will map
 * OpenFlow 1.3 messages onto the same structures) and of how they are looked up
 * (classifier.c) or run (fwd_flow.c). One model, so that `dump-flows` shows exactly what a
 * controller installed.
 *
 * Ports are switch port indexes (0 .. SW_MAX_PORTS-1); a port's OpenFlow number is its
 * index + 1 (FLOW_OFPORT). The reserved OpenFlow ports have values of their own.
 */
#ifndef SLUICE_FLOW_H
#define SLUICE_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow_key.h"

#define FLOW_TABLES 64             /* tables 0 .. 63 */
#define FLOW_TABLE_ALL 0xff        /* a filter's table: every table */
#define FLOW_MAX_ACTIONS 32        /* per action list (apply or write) */
#define FLOW_MAX_BUCKETS 32        /* per group */
#define FLOW_MAX_GROUP_ID 0xffffff00u  /* OFPG_MAX */
#define FLOW_MAX_METER_ID 0xffff0000u  /* OFPM_MAX */
#define FLOW_TEXT_MAX 16384        /* longest rule, group or meter text the parsers take */

#define FLOW_OFPORT(index) ((uint32_t)(index) + 1)

/* Reserved port values in FLOW_ACT_OUTPUT and out_port filters (OpenFlow's OFPP_*). */
#define FLOW_PORT_IN_PORT 0xfffffff8u
#define FLOW_PORT_NORMAL 0xfffffffau
#define FLOW_PORT_FLOOD 0xfffffffbu
#define FLOW_PORT_ALL 0xfffffffcu
#define FLOW_PORT_CONTROLLER 0xfffffffdu
#define FLOW_PORT_LOCAL 0xfffffffeu
#define FLOW_PORT_ANY 0xffffffffu  /* out_port filter: none */

enum flow_act_type {
	FLOW_ACT_OUTPUT,           /* port: an index, or FLOW_PORT_IN_PORT/NORMAL/FLOOD/ALL/
				    * CONTROLLER; arg: max_len for the controller */
	FLOW_ACT_GROUP,            /* arg: group id */
	FLOW_ACT_SET_FIELD,        /* field, value (network order, as in the key) */
	FLOW_ACT_PUSH_VLAN,        /* arg: TPID (0x8100 or 0x88a8), host order */
	FLOW_ACT_POP_VLAN,
	FLOW_ACT_DEC_TTL,
	FLOW_ACT_SET_QUEUE,        /* arg: queue id (accepted, no effect: one queue per port) */
};

/* Fields a set_field (or mod_*) action writes. */
enum flow_field {
	FLOW_FIELD_DL_SRC,         /* 6 bytes */
	FLOW_FIELD_DL_DST,         /* 6 bytes */
	FLOW_FIELD_VLAN_VID,       /* 2 bytes, be, 12 bits (no CFI bit) */
	FLOW_FIELD_VLAN_PCP,       /* 1 byte, 0..7 */
	FLOW_FIELD_NW_SRC,         /* 4 bytes, IPv4 */
	FLOW_FIELD_NW_DST,         /* 4 bytes, IPv4 */
	FLOW_FIELD_IP_DSCP,        /* 1 byte, 0..63 (mod_nw_tos:T sets DSCP = T >> 2) */
	FLOW_FIELD_IP_ECN,         /* 1 byte, 0..3 */
	FLOW_FIELD_NW_TTL,         /* 1 byte */
	FLOW_FIELD_TP_SRC,         /* 2 bytes, be: TCP, UDP or SCTP by nw_proto */
	FLOW_FIELD_TP_DST,         /* 2 bytes, be */
	FLOW_FIELD_IPV6_SRC,       /* 16 bytes */
	FLOW_FIELD_IPV6_DST,       /* 16 bytes */
	FLOW_FIELD_IPV6_LABEL,     /* 4 bytes, be, 20 bits */
	FLOW_FIELD_TUN_ID,         /* 8 bytes, host order (VXLAN, later) */
	FLOW_FIELD_COUNT
};

struct flow_action {
	uint8_t type;              /* enum flow_act_type */
	uint8_t field;             /* enum flow_field, for SET_FIELD */
	uint16_t pad;
	uint32_t port;             /* OUTPUT */
	uint32_t arg;              /* GROUP id, PUSH_VLAN TPID, OUTPUT controller max_len */
	uint32_t pad2;
	uint8_t value[16];         /* SET_FIELD, network order, left-aligned */
};

/* The parts of a match with the prerequisites they need (flow_parse.c checks them). */
struct flow_match {
	struct flow_key key;       /* already masked: key & mask == key */
	struct flow_key mask;
};

#define FLOW_NO_GOTO 0xff
#define FLOW_NO_METER 0

/* Flag bits of a flow-mod (OpenFlow's OFPFF_*). */
#define FLOW_FLAG_SEND_FLOW_REM 0x1
#define FLOW_FLAG_CHECK_OVERLAP 0x2
#define FLOW_FLAG_RESET_COUNTS 0x4
#define FLOW_FLAG_NO_PKT_COUNTS 0x8
#define FLOW_FLAG_NO_BYT_COUNTS 0x10

/*
 * A rule as written: match, priority, instructions. Parsed into this fixed-size form (on
 * the stack or heap of the control thread); the switch stores a compact copy.
 */
struct flow_rule_spec {
	uint8_t table;             /* mod/del filters: FLOW_TABLE_ALL unless given */
	uint8_t goto_table;        /* FLOW_NO_GOTO, or a table above TABLE */
	uint16_t priority;         /* default 32768, as ovs-ofctl */
	uint16_t idle_timeout, hard_timeout;   /* seconds; 0: none */
	uint32_t flags;            /* FLOW_FLAG_* */
	uint64_t cookie;
	uint64_t cookie_mask;      /* for mod/del filters only (cookie=V/M) */
	uint32_t out_port;         /* for del/mod filters: FLOW_PORT_ANY or a port */
	uint32_t out_group;        /* for del/mod filters: FLOW_PORT_ANY or a group */
	struct flow_match match;
	uint32_t meter;            /* FLOW_NO_METER or a meter id */
	bool clear_actions;
	bool has_write_metadata;
	uint64_t write_metadata, write_metadata_mask;
	uint16_t n_apply, n_write;
	struct flow_action apply[FLOW_MAX_ACTIONS];   /* apply_actions, in order */
	struct flow_action write[FLOW_MAX_ACTIONS];   /* write_actions: the action set */
};

enum flow_group_type { FLOW_GROUP_ALL, FLOW_GROUP_SELECT, FLOW_GROUP_INDIRECT,
		       FLOW_GROUP_FF };

struct flow_bucket {
	uint16_t weight;           /* select: relative share; 0 is never chosen */
	uint32_t watch_port;       /* fast_failover: FLOW_PORT_ANY or a port index */
	uint32_t watch_group;      /* fast_failover: FLOW_PORT_ANY or a group id */
	uint16_t n_actions;
	struct flow_action actions[FLOW_MAX_ACTIONS];
};

struct flow_group_spec {
	uint32_t id;
	uint8_t type;              /* enum flow_group_type */
	uint16_t n_buckets;
	struct flow_bucket buckets[FLOW_MAX_BUCKETS];
};

/* A meter: one drop band, as OpenFlow 1.3's OFPMBT_DROP (the only band kind enforced). */
#define FLOW_METER_KBPS 0x1
#define FLOW_METER_PKTPS 0x2
#define FLOW_METER_BURST 0x4
#define FLOW_METER_STATS 0x8

struct flow_meter_spec {
	uint32_t id;
	uint32_t flags;            /* FLOW_METER_*: exactly one of KBPS and PKTPS */
	uint32_t rate;             /* kbit/s or packets/s */
	uint32_t burst;            /* kbit or packets; 0: the default (rate/10, at least 1) */
};

/*
 * Resolves a port written in a rule (a sluice port name, or an OpenFlow port number as
 * digits) to its switch index; returns -1 when there is no such port. The parser handles
 * the reserved names (IN_PORT, NORMAL, FLOOD, ALL, CONTROLLER, LOCAL, ANY) itself.
 */
typedef int (*flow_port_lookup)(void *ctx, const char *name);
/* The name of port INDEX for output, or NULL when it has none (then its number is used). */
typedef const char *(*flow_port_name)(void *ctx, uint32_t index);

/* What a rule text is for: the verbs differ in what they require and allow (ovs-ofctl). */
enum flow_parse_mode {
	FLOW_PARSE_ADD,            /* add-flow: actions required (empty means drop) */
	FLOW_PARSE_MODIFY,         /* mod-flows: actions required, cookie=V/M allowed */
	FLOW_PARSE_DELETE,         /* del-flows: no actions, out_port/out_group, cookie=V/M */
	FLOW_PARSE_TRACE,          /* trace: a match only (a described packet), no priority */
};

/*
 * Parses one rule in ovs-ofctl syntax ("table=0,priority=100,in_port=vm1,tcp,
 * nw_dst=10.0.0.0/24,tp_dst=80,actions=output:fw1") into SPEC. Returns 0, or -1 with a
 * message for a person in ERR ("tp_dst requires tcp, udp or sctp (nw_proto)").
 */
int flow_parse_rule(const char *text, enum flow_parse_mode mode, flow_port_lookup lookup,
		    void *ctx, struct flow_rule_spec *spec, char *err, size_t err_len);

/* "group_id=1,type=select,bucket=weight:2,output:vm1,bucket=output:vm2" (ovs-ofctl). */
int flow_parse_group(const char *text, flow_port_lookup lookup, void *ctx,
		     struct flow_group_spec *spec, char *err, size_t err_len);

/* "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100" or "pktps" (ovs-ofctl). */
int flow_parse_meter(const char *text, struct flow_meter_spec *spec, char *err,
		     size_t err_len);

/*
 * Writes a rule's match (without table/priority/cookie) in ovs-ofctl's syntax, as
 * `ovs-ofctl dump-flows` would show it ("tcp,in_port=vm1,nw_dst=10.0.0.0/24,tp_dst=80"),
 * or "" for a rule that matches everything. Returns the length snprintf would.
 */
int flow_format_match(const struct flow_match *m, flow_port_name name, void *ctx, char *buf,
		      size_t len);
/* Writes the instructions ("meter:1,mod_vlan_vid:5,output:vm2,goto_table:1"); "drop" when
 * there are none. */
int flow_format_actions(const struct flow_rule_spec *spec, flow_port_name name, void *ctx,
			char *buf, size_t len);
/* Writes one action list ("output:vm1,output:vm2"), for group buckets. */
int flow_format_action_list(const struct flow_action *acts, uint16_t n, flow_port_name name,
			    void *ctx, char *buf, size_t len);
int flow_format_group(const struct flow_group_spec *g, flow_port_name name, void *ctx,
		      char *buf, size_t len);
int flow_format_meter(const struct flow_meter_spec *m, char *buf, size_t len);
/*
 * Writes a whole rule as MODE's verb reads it back: its settings that differ from the
 * defaults (table, priority, cookie, timeouts, flags, out_port/out_group), the match and, for
 * add-flow and mod-flows, "actions=...". What `dump-flows` prints after its counters.
 */
int flow_format_rule(const struct flow_rule_spec *spec, enum flow_parse_mode mode,
		     flow_port_name name, void *ctx, char *buf, size_t len);

/* A field's name in set_field syntax ("eth_dst") and its width in bytes. */
const char *flow_field_name(enum flow_field f);
unsigned int flow_field_width(enum flow_field f);

#endif
