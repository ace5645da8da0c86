/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port spec parser. A spec is "KIND:item,item,..." where an item is "key=value" or, for the
 * kinds that have a role, the bare word "server" or "client". Each kind has a table of the
 * keys it knows; an unknown key, a missing required key or a bad value is an error that names
 * the key, and nothing is created. The output is the DPDK vdev name and argument string.
 */
#include "portspec.h"

#define PORTSPEC_MEMIF_BUFFER 2048      /* DPDK memif's default buffer size (bsize) */
#define PORTSPEC_FRAME_OVERHEAD 22      /* Ethernet header, a VLAN tag, FCS */

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIX_PATH_MAX (PORTSPEC_PATH_LEN - 1)
#define MAX_ITEMS 16

enum value_type { V_STRING, V_PATH, V_IFNAME, V_UINT, V_ROLE, V_BOOL, V_MAC, V_IPV4, V_PORTNAME,
		  V_VNI };

struct key_def {
	const char *key;
	enum value_type type;
	bool required;
	unsigned long min, max;  /* V_UINT only */
};

struct kind_def {
	const char *name;
	const char *driver;       /* vdev driver name; NULL for PCI */
	bool has_role;            /* accepts bare "server"/"client" */
	struct key_def keys[10];  /* terminated by key == NULL */
};

static const struct kind_def kinds[PORTSPEC_KIND_COUNT] = {
	[PORTSPEC_VHOST_USER] = { "vhost-user", "net_vhost", true, {
		{ "path", V_PATH, true, 0, 0 },
		{ "role", V_ROLE, false, 0, 0 },
		{ "queues", V_UINT, false, 1, PORTSPEC_MAX_QUEUES },
		{ "fast", V_BOOL, false, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_VIRTIO_USER] = { "virtio-user", "net_virtio_user", true, {
		{ "path", V_PATH, true, 0, 0 },
		{ "role", V_ROLE, false, 0, 0 },
		{ "server", V_BOOL, false, 0, 0 },
		{ "queue_size", V_UINT, false, 64, 4096 },
		{ "mac", V_MAC, false, 0, 0 },
		{ "queues", V_UINT, false, 1, PORTSPEC_MAX_QUEUES },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_AF_XDP] = { "af_xdp", "net_af_xdp", false, {
		{ "iface", V_IFNAME, true, 0, 0 },
		{ "queue", V_UINT, false, 0, 1023 },
		{ "queues", V_UINT, false, 1, PORTSPEC_MAX_QUEUES },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_AF_PACKET] = { "af_packet", "net_af_packet", false, {
		{ "iface", V_IFNAME, true, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_TAP] = { "tap", "net_tap", false, {
		{ "name", V_IFNAME, true, 0, 0 },
		{ "mac", V_MAC, false, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_MEMIF] = { "memif", "net_memif", true, {
		{ "socket", V_PATH, true, 0, 0 },
		{ "role", V_ROLE, false, 0, 0 },
		{ "id", V_UINT, false, 0, 65535 },
		{ "mac", V_MAC, false, 0, 0 },
		{ "ring_size", V_UINT, false, 2, 16384 },
		{ "rx_queues", V_UINT, false, 1, PORTSPEC_MEMIF_MAX_RX_QUEUES },
		{ "queues", V_UINT, false, 1, PORTSPEC_MAX_QUEUES },
		{ "zero_copy", V_BOOL, false, 0, 0 },
		{ "fast", V_BOOL, false, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_PCAP] = { "pcap", "net_pcap", false, {
		{ "rx", V_PATH, false, 0, 0 },
		{ "tx", V_PATH, false, 0, 0 },
		{ "loop", V_BOOL, false, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_RING] = { "ring", "net_ring", false, {
		{ "name", V_IFNAME, true, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_NULL] = { "null", "net_null", false, {
		{ "rx", V_BOOL, false, 0, 0 },
		{ NULL, 0, false, 0, 0 } } },
	[PORTSPEC_PCI] = { "pci", NULL, false, { { NULL, 0, false, 0, 0 } } },
	/* Not a DPDK device: sluiced encapsulates over another of its ports (port_vxlan.c). */
	[PORTSPEC_VXLAN] = { "vxlan", "vxlan", false, {
		{ "underlay", V_PORTNAME, true, 0, 0 },
		{ "local_ip", V_IPV4, true, 0, 0 },
		{ "remote_ip", V_IPV4, true, 0, 0 },
		{ "vni", V_VNI, true, 0, PORTSPEC_VXLAN_VNI_MAX },
		{ "remote_mac", V_MAC, false, 0, 0 },
		{ "dst_port", V_UINT, false, 1, 65535 },
		{ NULL, 0, false, 0, 0 } } },
};

struct item {
	char key[32];
	char value[PORTSPEC_MAX_LEN];
};

static int fail(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

const char *portspec_kind_name(enum portspec_kind kind)
{
	return (unsigned int)kind < PORTSPEC_KIND_COUNT ? kinds[kind].name : "?";
}

static bool is_pci_bdf(const char *s)
{
	unsigned int dom, bus, dev, fn;
	char tail;

	/* 0000:01:00.0 or the short 01:00.0 */
	if (sscanf(s, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4)
		return dom <= 0xffff && bus <= 0xff && dev <= 0x1f && fn <= 7;
	if (sscanf(s, "%x:%x.%x%c", &bus, &dev, &fn, &tail) == 3)
		return bus <= 0xff && dev <= 0x1f && fn <= 7;
	return false;
}

static int parse_uint(const char *v, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;

	if (*v == '\0' || !isdigit((unsigned char)*v))
		return -1;
	*out = strtoul(v, &end, 10);
	return (*end != '\0' || *out < min || *out > max) ? -1 : 0;
}

static bool is_mac(const char *v)
{
	unsigned int b[6];
	char tail;

	return sscanf(v, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
		      &tail) == 6 && strlen(v) == 17;
}

/* Whether PATH has a ".." component. */
static bool has_dotdot(const char *path)
{
	const char *p = path;

	while ((p = strstr(p, "..")) != NULL) {
		if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return true;
		p += 2;
	}
	return false;
}

static int check_value(const char *kind, const struct key_def *def, const char *v,
		       char *err, size_t len)
{
	unsigned long n;
	size_t i;

	if (*v == '\0')
		return fail(err, len, "%s: '%s' needs a value", kind, def->key);
	/* Values end up inside a DPDK devargs string, where these characters are syntax. */
	if (strpbrk(v, ",=;\"' \t\n") != NULL)
		return fail(err, len, "%s: '%s' must not contain commas, '=', quotes or spaces",
			    kind, def->key);
	switch (def->type) {
	case V_PATH:
		if (strlen(v) > UNIX_PATH_MAX)
			return fail(err, len, "%s: '%s' is longer than %d bytes", kind, def->key,
				    UNIX_PATH_MAX);
		/* A relative path would depend on the daemon's working directory, and ".."
		 * defeats any check of where a path leads (docs/operations.md, Path policy). */
		if (v[0] != '/')
			return fail(err, len, "%s: '%s' must be an absolute path, not '%s'", kind,
				    def->key, v);
		if (has_dotdot(v))
			return fail(err, len, "%s: '%s' must not contain '..' components", kind,
				    def->key);
		break;
	case V_IFNAME:
		if (strlen(v) > 15)
			return fail(err, len, "%s: '%s' is longer than 15 bytes (IFNAMSIZ)", kind,
				    def->key);
		for (i = 0; v[i] != '\0'; i++)
			if (!isalnum((unsigned char)v[i]) && strchr("-_.", v[i]) == NULL)
				return fail(err, len, "%s: '%s' may hold only letters, digits, '-', "
					    "'_' and '.'", kind, def->key);
		break;
	case V_UINT:
		if (parse_uint(v, def->min, def->max, &n) != 0)
			return fail(err, len, "%s: '%s' must be an integer from %lu to %lu", kind,
				    def->key, def->min, def->max);
		break;
	case V_ROLE:
		if (strcmp(v, "server") != 0 && strcmp(v, "client") != 0)
			return fail(err, len, "%s: 'role' must be server or client, not '%s'", kind, v);
		break;
	case V_BOOL:
		if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0 && strcmp(v, "yes") != 0 &&
		    strcmp(v, "no") != 0)
			return fail(err, len, "%s: '%s' must be 0, 1, yes or no", kind, def->key);
		break;
	case V_MAC:
		if (!is_mac(v))
			return fail(err, len, "%s: '%s' must be a MAC address like 02:00:00:00:00:01",
				    kind, def->key);
		break;
	case V_IPV4: {
		struct in_addr a;

		if (inet_pton(AF_INET, v, &a) != 1)
			return fail(err, len, "%s: '%s' must be an IPv4 address like 192.0.2.1, not "
				    "'%s'", kind, def->key, v);
		break;
	}
	case V_PORTNAME:
		/* The control protocol's rules for a port's name (docs/protocol.md). */
		if (strlen(v) > 31 || !isalnum((unsigned char)v[0]))
			return fail(err, len, "%s: '%s' must be a port name (1 to 31 characters, "
				    "starting with a letter or digit)", kind, def->key);
		for (i = 0; v[i] != '\0'; i++)
			if (!isalnum((unsigned char)v[i]) && strchr("-_.", v[i]) == NULL)
				return fail(err, len, "%s: '%s' must be a port name", kind, def->key);
		break;
	case V_VNI:
		if (strcmp(v, "flow") != 0 && parse_uint(v, def->min, def->max, &n) != 0)
			return fail(err, len, "%s: '%s' must be 'flow' or an integer from %lu to %lu",
				    kind, def->key, def->min, def->max);
		break;
	case V_STRING:
		break;
	}
	return 0;
}

/* Keys every kind takes besides its own; sluice's, not the driver's (no devargs). */
static const struct key_def common_keys[] = {
	{ "mtu", V_UINT, false, PORTSPEC_MTU_MIN, PORTSPEC_MTU_MAX },
	{ NULL, 0, false, 0, 0 },
};

static const struct key_def *find_key(const struct kind_def *k, const char *key)
{
	const struct key_def *d;

	for (d = common_keys; d->key != NULL; d++)
		if (strcmp(d->key, key) == 0)
			return d;

	for (d = k->keys; d->key != NULL; d++)
		if (strcmp(d->key, key) == 0)
			return d;
	return NULL;
}

/* Splits "a=1,server,b=2" into items; a bare word becomes role=word for kinds with a role. */
static int split_items(const struct kind_def *k, const char *body, struct item *items,
		       unsigned int *count, char *err, size_t len)
{
	const char *p = body;
	unsigned int n = 0;

	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t toklen = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', toklen);
		struct item *it = &items[n];

		if (toklen == 0)
			return fail(err, len, "%s: empty item (two commas in a row?)", k->name);
		if (n == MAX_ITEMS)
			return fail(err, len, "%s: too many items", k->name);
		if (eq == NULL) {
			if (!k->has_role || toklen >= sizeof(it->value))
				return fail(err, len, "%s: '%.*s' is not key=value", k->name,
					    (int)toklen, p);
			strcpy(it->key, "role");
			memcpy(it->value, p, toklen);
			it->value[toklen] = '\0';
		} else {
			size_t klen = (size_t)(eq - p), vlen = toklen - klen - 1;

			if (klen == 0 || klen >= sizeof(it->key) || vlen >= sizeof(it->value))
				return fail(err, len, "%s: bad item '%.*s'", k->name, (int)toklen, p);
			memcpy(it->key, p, klen);
			it->key[klen] = '\0';
			memcpy(it->value, eq + 1, vlen);
			it->value[vlen] = '\0';
		}
		n++;
		p += toklen;
		if (*p == ',') {
			p++;
			if (*p == '\0')
				return fail(err, len, "%s: trailing comma", k->name);
		}
	}
	*count = n;
	return 0;
}

static const char *lookup(const struct item *items, unsigned int n, const char *key)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (strcmp(items[i].key, key) == 0)
			return items[i].value;
	return NULL;
}

/* A required key's value: validate_items() made sure it is there. */
static const char *required(const struct item *items, unsigned int n, const char *key)
{
	const char *v = lookup(items, n, key);

	return v != NULL ? v : "";
}

static bool is_true(const char *v)
{
	return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "yes") == 0);
}

static int validate_items(const struct kind_def *k, const struct item *items, unsigned int n,
			  char *err, size_t len)
{
	const struct key_def *d;
	unsigned int i, j;

	for (i = 0; i < n; i++) {
		d = find_key(k, items[i].key);
		if (d == NULL && strcmp(items[i].key, "queues") == 0)
			return fail(err, len, "%s: 'queues' is not supported: this kind receives on "
				    "one queue (queues= works on vhost-user, virtio-user, memif and "
				    "af_xdp)", k->name);
		if (d == NULL)
			return fail(err, len, "%s: unknown key '%s'", k->name, items[i].key);
		for (j = 0; j < i; j++)
			if (strcmp(items[j].key, items[i].key) == 0)
				return fail(err, len, "%s: '%s' given twice", k->name, items[i].key);
		if (check_value(k->name, d, items[i].value, err, len) != 0)
			return -1;
	}
	for (d = k->keys; d->key != NULL; d++)
		if (d->required && lookup(items, n, d->key) == NULL)
			return fail(err, len, "%s: missing '%s'", k->name, d->key);
	return 0;
}

/* Appends ",fmt" (or "fmt" at the start) to OUT->devargs. */
static int add_arg(struct portspec *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int add_arg(struct portspec *out, const char *fmt, ...)
{
	size_t used = strlen(out->devargs);
	va_list ap;
	int w;

	if (used > 0) {
		if (used + 1 >= sizeof(out->devargs))
			return -1;
		out->devargs[used++] = ',';
		out->devargs[used] = '\0';
	}
	va_start(ap, fmt);
	w = vsnprintf(out->devargs + used, sizeof(out->devargs) - used, fmt, ap);
	va_end(ap);
	return (w < 0 || (size_t)w >= sizeof(out->devargs) - used) ? -1 : 0;
}

/* Records a path the spec names, for the path policy; USE is what the device does with it. */
static void add_path(struct portspec *out, const char *key, enum portspec_path_use use,
		     const char *path)
{
	struct portspec_path *p = &out->paths[out->n_paths++];

	p->key = key;
	p->use = use;
	/* check_value() kept PATH within UNIX_PATH_MAX; the precision tells the compiler. */
	snprintf(p->path, sizeof(p->path), "%.*s", UNIX_PATH_MAX, path);
}

/* The socket path of a kind with a role, recorded both ways gen and the policy read it. */
static void add_socket_path(struct portspec *out, const char *key, const char *path)
{
	snprintf(out->path, sizeof(out->path), "%s", path);
	add_path(out, key, out->path_is_server ? PORTSPEC_PATH_SOCKET_SERVER
					       : PORTSPEC_PATH_SOCKET_CLIENT, path);
}

/* Role of the spec: the "role" item, or virtio-user's server=1; DEFAULT_SERVER otherwise. */
static bool role_is_server(const struct item *items, unsigned int n, bool default_server)
{
	const char *role = lookup(items, n, "role");

	if (role != NULL)
		return strcmp(role, "server") == 0;
	if (lookup(items, n, "server") != NULL)
		return is_true(lookup(items, n, "server"));
	return default_server;
}

/*
 * The queue pairs a device is made with: a transmit queue for each of QUEUES (the workers:
 * every worker sends on a queue of its own) and the receive queues the spec asks for.
 */
static unsigned int queue_pairs(const struct portspec *out, unsigned int queues)
{
	return out->rx_queues > queues ? out->rx_queues : queues;
}

static void parse_mac_bytes(const char *v, uint8_t mac[6])
{
	unsigned int b[6], i;

	sscanf(v, "%2x:%2x:%2x:%2x:%2x:%2x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]);
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
}

/*
 * A vxlan port is sluiced's own (port_vxlan.c): the spec's values go to OUT->vxlan, and
 * devargs holds them in one canonical order, for show and the shared table of cases.
 */
static int build_vxlan(const struct item *items, unsigned int n, struct portspec *out,
		       char *err, size_t len)
{
	struct portspec_vxlan *vx = &out->vxlan;
	const char *vni = required(items, n, "vni"), *v;
	struct in_addr a;
	int rc = 0;

	out->is_vdev = false;
	snprintf(vx->underlay, sizeof(vx->underlay), "%.*s", (int)sizeof(vx->underlay) - 1,
		 required(items, n, "underlay"));
	inet_pton(AF_INET, required(items, n, "local_ip"), &a);
	vx->local_ip = a.s_addr;
	inet_pton(AF_INET, required(items, n, "remote_ip"), &a);
	vx->remote_ip = a.s_addr;
	if (vx->local_ip == vx->remote_ip)
		return fail(err, len, "vxlan: 'local_ip' and 'remote_ip' must differ");
	vx->vni_flow = strcmp(vni, "flow") == 0;
	vx->vni = vx->vni_flow ? 0 : (uint32_t)strtoul(vni, NULL, 10);
	v = lookup(items, n, "dst_port");
	vx->dst_port = (uint16_t)(v != NULL ? strtoul(v, NULL, 10) : PORTSPEC_VXLAN_PORT);
	if ((v = lookup(items, n, "remote_mac")) != NULL) {
		vx->has_remote_mac = true;
		parse_mac_bytes(v, vx->remote_mac);
	}
	rc |= add_arg(out, "underlay=%s", vx->underlay);
	rc |= add_arg(out, "local_ip=%s", required(items, n, "local_ip"));
	rc |= add_arg(out, "remote_ip=%s", required(items, n, "remote_ip"));
	rc |= add_arg(out, "vni=%s", vni);
	rc |= add_arg(out, "dst_port=%u", vx->dst_port);
	if (v != NULL)
		rc |= add_arg(out, "remote_mac=%s", v);
	return rc == 0 ? 0 : fail(err, len, "vxlan: spec too long");
}

static int build_devargs(enum portspec_kind kind, const struct item *items, unsigned int n,
			 unsigned int queues, struct portspec *out, char *err, size_t len)
{
	const char *v;
	int rc = 0;

	switch (kind) {
	case PORTSPEC_VHOST_USER:
		out->path_is_server = role_is_server(items, n, true);
		/* sluiced's own data path (vhost_fast.h), the default: one copy between
		 * guests. It reads and fills virtqueue pair 0 only, so a port with more
		 * queues keeps DPDK's net_vhost PMD unless fast=1 asks otherwise (refused
		 * below), as does fast=0. The PMD's arguments stay, for sluice-gen, which
		 * has no other. */
		v = lookup(items, n, "fast");
		out->vhost_fast = v != NULL ? is_true(v) : out->rx_queues <= 1;
		if (out->vhost_fast && out->rx_queues > 1)
			return fail(err, len, "vhost-user: fast=1 receives on one queue: "
				    "'queues' must be 1 (or give fast=0 for queues=%u)",
				    out->rx_queues);
		rc |= add_arg(out, "iface=%s", required(items, n, "path"));
		rc |= add_arg(out, "client=%d", out->path_is_server ? 0 : 1);
		rc |= add_arg(out, "queues=%u", queue_pairs(out, queues));
		add_socket_path(out, "path", required(items, n, "path"));
		break;
	case PORTSPEC_VIRTIO_USER:
		if (lookup(items, n, "role") && lookup(items, n, "server"))
			return fail(err, len, "virtio-user: give 'role' or 'server', not both");
		out->path_is_server = role_is_server(items, n, false);
		rc |= add_arg(out, "path=%s", required(items, n, "path"));
		rc |= add_arg(out, "server=%d", out->path_is_server ? 1 : 0);
		rc |= add_arg(out, "queues=%u", queue_pairs(out, queues));
		if ((v = lookup(items, n, "queue_size")) != NULL)
			rc |= add_arg(out, "queue_size=%s", v);
		if ((v = lookup(items, n, "mac")) != NULL)
			rc |= add_arg(out, "mac=%s", v);
		add_socket_path(out, "path", required(items, n, "path"));
		break;
	case PORTSPEC_AF_XDP:
		v = lookup(items, n, "queue");
		rc |= add_arg(out, "iface=%s", required(items, n, "iface"));
		rc |= add_arg(out, "start_queue=%s", v ? v : "0");
		rc |= add_arg(out, "queue_count=%u", queue_pairs(out, queues));
		break;
	case PORTSPEC_AF_PACKET:
		rc |= add_arg(out, "iface=%s", required(items, n, "iface"));
		rc |= add_arg(out, "qpairs=%u", queues);
		break;
	case PORTSPEC_TAP:
		rc |= add_arg(out, "iface=%s", required(items, n, "name"));
		if ((v = lookup(items, n, "mac")) != NULL)
			rc |= add_arg(out, "mac=%s", v);
		break;
	case PORTSPEC_MEMIF:
		if (lookup(items, n, "role") == NULL)
			return fail(err, len, "memif: missing 'role' (server or client)");
		out->path_is_server = role_is_server(items, n, false);
		rc |= add_arg(out, "role=%s", out->path_is_server ? "server" : "client");
		rc |= add_arg(out, "socket=%s", required(items, n, "socket"));
		/* DPDK 22.11 defaults to an abstract socket; users give file paths. */
		rc |= add_arg(out, "socket-abstract=no");
		v = lookup(items, n, "id");
		rc |= add_arg(out, "id=%s", v ? v : "0");
		if ((v = lookup(items, n, "mac")) != NULL)
			rc |= add_arg(out, "mac=%s", v);
		if (lookup(items, n, "rx_queues") != NULL && lookup(items, n, "queues") != NULL)
			return fail(err, len, "memif: give 'queues' or 'rx_queues' (its older name), "
				    "not both");
		if ((v = lookup(items, n, "rx_queues")) != NULL) {
			/*
			 * The client decides how many server-to-client rings exist (one per
			 * receive queue it opens); a server's transmit queue beyond them has no
			 * ring and sends nothing. OVS-DPDK sends from its PMD on queue 1, so its
			 * clients need two (docs/ports.md). A server cannot ask: it takes what
			 * its client opens.
			 */
			if (out->path_is_server)
				return fail(err, len, "memif: 'rx_queues' is the client's to choose "
					    "(a server receives on the rings its client opens)");
			out->rx_queues = (unsigned int)strtoul(v, NULL, 10);
		}
		/* sluiced's own data path (memif_fast.h): the server side only, on one
		 * receive ring; the PMD's arguments stay, for sluice-gen, which has no other. */
		out->memif_fast = is_true(lookup(items, n, "fast"));
		if (out->memif_fast && !out->path_is_server)
			return fail(err, len, "memif: fast=1 is for role=server only (sluiced's own "
				    "memif speaks the server side; give fast=0 for a client)");
		if (out->memif_fast && out->rx_queues > 1)
			return fail(err, len, "memif: fast=1 receives on one ring: 'queues' must "
				    "be 1 (or give fast=0 for queues=%u)", out->rx_queues);
		if ((v = lookup(items, n, "ring_size")) != NULL) {
			/* Slots, as VPP's "ring-size"; DPDK takes the log2 (rsize), and the
			 * client's ring size is the one both ends use. */
			unsigned long slots = strtoul(v, NULL, 10);

			if ((slots & (slots - 1)) != 0)
				return fail(err, len, "memif: 'ring_size' must be a power of two");
			rc |= add_arg(out, "rsize=%d", __builtin_ctzl(slots));
		}
		if (is_true(lookup(items, n, "zero_copy"))) {
			/*
			 * The client's own packet buffers become the shared memory (DPDK's
			 * zero-copy=yes): a server has none to offer, and a frame must fit
			 * one buffer (no bsize applies), since chained frames were mixed up.
			 */
			if (out->path_is_server)
				return fail(err, len, "memif: 'zero_copy' is for the client only (the "
					    "client's packet buffers are the shared memory)");
			if (out->mtu + PORTSPEC_FRAME_OVERHEAD > PORTSPEC_MEMIF_BUFFER)
				return fail(err, len, "memif: 'zero_copy' takes an mtu up to %d (a "
					    "frame must fit one packet buffer)",
					    PORTSPEC_MEMIF_BUFFER - PORTSPEC_FRAME_OVERHEAD);
			out->memif_zero_copy = true;
			rc |= add_arg(out, "zero-copy=yes");
		}
		/*
		 * A jumbo MTU gets buffers that hold a whole frame (bsize, used by the client,
		 * which makes the shared memory): DPDK 22.11's memif mixed up frames chained
		 * over several 2 KB buffers at full rate (docs/ports.md).
		 */
		if (out->mtu + PORTSPEC_FRAME_OVERHEAD > PORTSPEC_MEMIF_BUFFER)
			rc |= add_arg(out, "bsize=%u",
				      (out->mtu + PORTSPEC_FRAME_OVERHEAD + 127) / 128 * 128);
		add_socket_path(out, "socket", required(items, n, "socket"));
		break;
	case PORTSPEC_PCAP:
		if (lookup(items, n, "rx") == NULL && lookup(items, n, "tx") == NULL)
			return fail(err, len, "pcap: give 'rx', 'tx' or both");
		if ((v = lookup(items, n, "rx")) != NULL) {
			rc |= add_arg(out, "rx_pcap=%s", v);
			add_path(out, "rx", PORTSPEC_PATH_READ, v);
		}
		if ((v = lookup(items, n, "tx")) != NULL) {
			rc |= add_arg(out, "tx_pcap=%s", v);
			add_path(out, "tx", PORTSPEC_PATH_WRITE, v);
		}
		/* Replayed forever: a source that measures the switch with no generator. */
		if (is_true(lookup(items, n, "loop"))) {
			if (lookup(items, n, "rx") == NULL)
				return fail(err, len, "pcap: 'loop' replays 'rx': give it");
			rc |= add_arg(out, "infinite_rx=1");
		}
		break;
	case PORTSPEC_RING:
		/* A ring port is a loopback: what is sent on it comes back on its receive side. */
		rc |= add_arg(out, "nodeaction=%s:0:CREATE", required(items, n, "name"));
		break;
	case PORTSPEC_NULL:
		if (!is_true(lookup(items, n, "rx")))
			rc |= add_arg(out, "no-rx=1");
		break;
	case PORTSPEC_VXLAN:
		return build_vxlan(items, n, out, err, len);
	case PORTSPEC_PCI:
	case PORTSPEC_KIND_COUNT:
		break;
	}
	return rc == 0 ? 0 : fail(err, len, "%s: spec too long", kinds[kind].name);
}

static int find_kind(const char *spec, size_t kind_len, enum portspec_kind *kind)
{
	unsigned int i;

	for (i = 0; i < PORTSPEC_KIND_COUNT; i++)
		if (strlen(kinds[i].name) == kind_len && strncmp(kinds[i].name, spec, kind_len) == 0) {
			*kind = (enum portspec_kind)i;
			return 0;
		}
	return -1;
}

static int parse_pci(const char *bdf, struct portspec *out, char *err, size_t len)
{
	if (!is_pci_bdf(bdf) || strlen(bdf) >= sizeof(out->devname))
		return fail(err, len, "pci: '%s' is not a PCI address like 0000:01:00.0", bdf);
	out->kind = PORTSPEC_PCI;
	out->is_vdev = false;
	snprintf(out->devname, sizeof(out->devname), "%s", bdf);
	return 0;
}

int portspec_parse(const char *spec, const char *unique, unsigned int queues,
		   struct portspec *out, char *err, size_t err_len)
{
	struct item items[MAX_ITEMS];
	const struct kind_def *k;
	enum portspec_kind kind;
	const char *colon;
	unsigned int n = 0;
	int w;

	memset(out, 0, sizeof(*out));
	if (spec == NULL || *spec == '\0')
		return fail(err, err_len, "empty port spec");
	if (strlen(spec) > PORTSPEC_MAX_LEN)
		return fail(err, err_len, "port spec longer than %d bytes", PORTSPEC_MAX_LEN);
	if (queues < 1 || queues > 64)
		return fail(err, err_len, "queue count %u out of range 1..64", queues);
	if (is_pci_bdf(spec))
		return parse_pci(spec, out, err, err_len);
	colon = strchr(spec, ':');
	if (find_kind(spec, colon ? (size_t)(colon - spec) : strlen(spec), &kind) != 0)
		return fail(err, err_len, "unknown port kind '%.*s' (known: vhost-user, "
			    "virtio-user, af_xdp, af_packet, tap, memif, pcap, ring, null, pci, vxlan)",
			    colon ? (int)(colon - spec) : (int)strlen(spec), spec);
	if (kind == PORTSPEC_PCI)
		return parse_pci(colon ? colon + 1 : "", out, err, err_len);
	k = &kinds[kind];
	if (colon != NULL && split_items(k, colon + 1, items, &n, err, err_len) != 0)
		return -1;
	if (validate_items(k, items, n, err, err_len) != 0)
		return -1;
	out->kind = kind;
	out->is_vdev = true;
	if (lookup(items, n, "mtu") != NULL)
		out->mtu = (unsigned int)strtoul(lookup(items, n, "mtu"), NULL, 10);
	if (lookup(items, n, "queues") != NULL)
		out->rx_queues = (unsigned int)strtoul(lookup(items, n, "queues"), NULL, 10);
	w = snprintf(out->devname, sizeof(out->devname), "%s_%s", k->driver, unique);
	if (w < 0 || (size_t)w >= sizeof(out->devname))
		return fail(err, err_len, "device name too long");
	return build_devargs(kind, items, n, queues, out, err, err_len);
}

int portspec_probe_string(const struct portspec *ps, char *buf, size_t len)
{
	int w = ps->devargs[0] ? snprintf(buf, len, "%s,%s", ps->devname, ps->devargs)
			       : snprintf(buf, len, "%s", ps->devname);

	return (w < 0 || (size_t)w >= len) ? -1 : 0;
}
