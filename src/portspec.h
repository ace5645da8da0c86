/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port specifications: the user-facing "KIND:key=value,..." strings that name a port, turned
 * into the DPDK device string that hot-plugs it. One parser for sluiced and sluice-gen, so a
 * spec means the same thing wherever it is written (see docs/ports.md).
 *
 * The parser is pure: it touches no DPDK state and allocates nothing, so it can be unit
 * tested and fuzzed on its own.
 */
#ifndef SLUICE_PORTSPEC_H
#define SLUICE_PORTSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PORTSPEC_MAX_LEN 512     /* longest spec accepted, in bytes */
#define PORTSPEC_DEVNAME_LEN 64  /* RTE_DEV_NAME_MAX_LEN */
#define PORTSPEC_ARGS_LEN 640
#define PORTSPEC_ERR_LEN 200
#define PORTSPEC_PATH_LEN 108    /* a path value, with its NUL: sizeof(sun_path) */
#define PORTSPEC_MAX_PATHS 2     /* pcap has two: rx and tx */
/* mtu=N, a key of every kind but pci (docs/ports.md, "MTU and jumbo frames"): the largest
 * IP packet the port sends and receives, the Ethernet header not counted. */
#define PORTSPEC_MTU_MIN 68
#define PORTSPEC_MTU_MAX 9600
/* memif's rx_queues=N: server-to-client rings a client opens (docs/ports.md). */
#define PORTSPEC_MEMIF_MAX_RX_QUEUES 16
/* queues=N: receive queues a port is polled on (vhost-user, virtio-user, memif, af_xdp;
 * docs/cores.md). memif's rx_queues= is the same key under its older name. */
#define PORTSPEC_MAX_QUEUES 16

enum portspec_kind {
	PORTSPEC_VHOST_USER,
	PORTSPEC_VIRTIO_USER,
	PORTSPEC_AF_XDP,
	PORTSPEC_AF_PACKET,
	PORTSPEC_TAP,
	PORTSPEC_MEMIF,
	PORTSPEC_PCAP,
	PORTSPEC_RING,
	PORTSPEC_NULL,
	PORTSPEC_PCI,
	PORTSPEC_VXLAN,
	PORTSPEC_KIND_COUNT
};

/* What the device does with a file a spec names: the path policy (path_policy.h) differs. */
enum portspec_path_use {
	PORTSPEC_PATH_READ,           /* opened for reading (pcap rx) */
	PORTSPEC_PATH_WRITE,          /* created or truncated (pcap tx) */
	PORTSPEC_PATH_SOCKET_SERVER,  /* a Unix socket this side binds */
	PORTSPEC_PATH_SOCKET_CLIENT,  /* a Unix socket this side connects to */
};

struct portspec_path {
	const char *key;              /* the spec's key, "tx", "path", ... (static storage) */
	enum portspec_path_use use;
	char path[PORTSPEC_PATH_LEN];
};

#define PORTSPEC_VXLAN_PORT 4789     /* IANA's VXLAN port, the default dst_port */
#define PORTSPEC_VXLAN_VNI_MAX 16777215

/* A vxlan port's tunnel (docs/ports.md, "VXLAN"): sluiced's own, not a DPDK device. */
struct portspec_vxlan {
	char underlay[32];                   /* the sluiced port it is carried over */
	uint32_t local_ip, remote_ip;        /* IPv4, network byte order */
	uint32_t vni;                        /* 0..PORTSPEC_VXLAN_VNI_MAX */
	bool vni_flow;                       /* vni=flow: set by flow rules (tun_id) */
	bool has_remote_mac;                 /* remote_mac= given: no ARP */
	uint8_t remote_mac[6];
	uint16_t dst_port;                   /* UDP destination port, host byte order */
};

/* What a spec becomes: the kind, and the device name and arguments for rte_dev_probe(). */
struct portspec {
	enum portspec_kind kind;
	bool is_vdev;                        /* false for PCI: devname is the BDF */
	char devname[PORTSPEC_DEVNAME_LEN];  /* e.g. "net_vhost_sl7" */
	char devargs[PORTSPEC_ARGS_LEN];     /* e.g. "iface=/tmp/vm1.sock,client=0,queues=1" */
	char path[PORTSPEC_MAX_LEN];         /* socket path the port serves, "" if none */
	bool path_is_server;                 /* true when this side creates the socket */
	unsigned int mtu;                    /* mtu=, or 0: the device's own */
	/* Receive queues: queues= (or a memif client's rx_queues=), or 0: not given (one). */
	unsigned int rx_queues;
	bool vhost_fast;                     /* vhost-user, not fast=0: sluiced's own path */
	bool memif_zero_copy;                /* memif zero_copy=yes (client only) */
	bool memif_fast;                     /* memif fast=1: sluiced's own (server only) */
	unsigned int n_paths;                /* every file path the spec names */
	struct portspec_path paths[PORTSPEC_MAX_PATHS];
	struct portspec_vxlan vxlan;         /* kind vxlan only */
};

/*
 * Parses SPEC. UNIQUE is a token unique among this process's devices (sluiced uses the port
 * number) and becomes part of the DPDK device name; QUEUES is the number of queue pairs to
 * ask for where the kind takes it. Paths must be absolute and free of ".." components
 * (lexical rules only: what is on the disk is path_policy.c's business). On error returns -1 and writes a message naming the field
 * to ERR (PORTSPEC_ERR_LEN bytes); on success returns 0.
 */
int portspec_parse(const char *spec, const char *unique, unsigned int queues,
		   struct portspec *out, char *err, size_t err_len);

/* "vhost-user", "tap", ... */
const char *portspec_kind_name(enum portspec_kind kind);

/* Full rte_dev_probe() string: "devname,devargs" (or just devname), into BUF. */
int portspec_probe_string(const struct portspec *ps, char *buf, size_t len);

#endif
