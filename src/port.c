/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port table and ethdev glue: spec -> hot-plugged device -> configured and started ethdev,
 * and back. Only the control thread calls these functions.
 */
#include "port.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <net/if.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "log.h"
#include "path_policy.h"
#include "port_afxdp.h"
#include "fwd.h"
#include "pool.h"
#include "worker.h"

#define SETUP_KICK_MS 50        /* a cancelled set-up is interrupted again this often */
#define SETUP_SIGNAL SIGUSR1

static struct port *port_table[PORT_MAX];   /* slot i holds port number i + 1 */
/* Slots of abandoned ports: their devices, named after the slot, still exist. */
static bool slot_abandoned[PORT_MAX];
static uint32_t port_generation[PORT_MAX];
static struct port_config config = { .n_workers = 1, .rx_desc = 1024, .tx_desc = 1024,
				     .n_mbufs = 32767, .setup_timeout_s = 30 };

void port_init(const struct port_config *cfg)
{
	config = *cfg;
	pool_init(cfg->n_mbufs);
	vxl_init();
}

void port_fini(void)
{
	pool_fini();
}

struct port *port_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < PORT_MAX; i++)
		if (port_table[i] != NULL && strcmp(port_table[i]->name, name) == 0)
			return port_table[i];
	return NULL;
}

struct port *port_by_id(unsigned int id)
{
	return (id >= 1 && id <= PORT_MAX) ? port_table[id - 1] : NULL;
}

static int free_slot(void)
{
	int i;

	for (i = 0; i < PORT_MAX; i++)
		if (port_table[i] == NULL && !slot_abandoned[i])
			return i;
	return -1;
}

/*
 * A server-side socket path left behind by a process that died makes bind() fail. Remove it
 * when nobody answers on it; refuse when somebody does, since then it is in use.
 */
static int clear_stale_socket(const char *path, char *err, size_t err_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (stat(path, &st) != 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, err_len, "'%s' exists and is not a socket", path);
		return -1;
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		return 0;   /* the spec parser refuses such paths */
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return 0;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (rc == 0) {
		snprintf(err, err_len, "socket '%s' is in use by another process", path);
		return -1;
	}
	LOG(INFO, "removing stale socket %s", path);
	unlink(path);
	return 0;
}

static int port_lsc_event(uint16_t ethdev, enum rte_eth_event_type type, void *arg,
			  void *ret)
{
	struct port *p = arg;

	(void)ret;
	if (type == RTE_ETH_EVENT_INTR_LSC && p->ethdev == ethdev)
		port_refresh_link(p);
	return 0;
}

void port_refresh_link(struct port *p)
{
	struct rte_eth_link link;

	if (p->afp != NULL) {
		__atomic_store_n(&p->link_up, afp_link_up(p->afp), __ATOMIC_RELAXED);
		return;
	}
	if (p->vhf != NULL) {
		__atomic_store_n(&p->link_up, vhf_link_up(p->vhf), __ATOMIC_RELAXED);
		return;
	}
	if (p->mff != NULL) {
		__atomic_store_n(&p->link_up, mff_link_up(p->mff), __ATOMIC_RELAXED);
		return;
	}
	if (p->vxl != NULL) {
		__atomic_store_n(&p->link_up, vxl_link_up(p), __ATOMIC_RELAXED);
		return;
	}
	if (rte_eth_link_get_nowait(p->ethdev, &link) != 0)
		return;
	__atomic_store_n(&p->link_up, link.link_status == RTE_ETH_LINK_UP, __ATOMIC_RELAXED);
}

static int setup_queues(struct port *p, const struct rte_eth_dev_info *info, char *err,
			size_t err_len)
{
	uint16_t rxd = config.rx_desc, txd = config.tx_desc;
	int socket = rte_eth_dev_socket_id(p->ethdev);
	unsigned int q;
	int rc;

	if (info->max_tx_queues < config.n_workers) {
		snprintf(err, err_len, "device has %u transmit queues, %u workers need one each",
			 info->max_tx_queues, config.n_workers);
		return -1;
	}
	rte_eth_dev_adjust_nb_rx_tx_desc(p->ethdev, &rxd, &txd);
	/* What the port can hold: every receive ring, every transmit queue's ring, a burst. */
	p->pool_need = (unsigned int)rxd * p->n_rxq + (unsigned int)txd * config.n_workers +
		       FWD_MAX_BURST;
	p->pool = pool_reserve(socket, p->pool_need);
	if (p->pool == NULL) {
		snprintf(err, err_len, "no memory for %u more packet buffers (hugepages exhausted?)",
			 p->pool_need);
		return -1;
	}
	for (q = 0, rc = 0; rc == 0 && q < p->n_rxq; q++)
		rc = rte_eth_rx_queue_setup(p->ethdev, (uint16_t)q, rxd, socket, NULL, p->pool);
	for (q = 0; rc == 0 && q < config.n_workers; q++)
		rc = rte_eth_tx_queue_setup(p->ethdev, q, txd, socket, NULL);
	if (rc != 0)
		snprintf(err, err_len, "queue set-up failed: %s", rte_strerror(-rc));
	return rc;
}

/*
 * Records P's MTU. The switch enforces an MTU that was given (mtu= in the spec, set-port);
 * a port left at its device's default has no limit of the switch's: vhost-user and memif
 * carry chained frames of any size between VMs, as they did before ports had MTUs.
 */
static void publish_mtu(struct port *p, unsigned int mtu, bool enforce)
{
	p->mtu = mtu;
	__atomic_store_n(&p->max_frame, enforce ? mtu + RTE_ETHER_HDR_LEN : UINT32_MAX,
			 __ATOMIC_RELAXED);
}

/* A kernel interface's MTU: read (MTU 0) or set. -1 with errno on failure. */
static int kernel_mtu(const char *iface, unsigned int *mtu)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc, saved;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	ifr.ifr_mtu = (int)*mtu;
	rc = ioctl(fd, *mtu == 0 ? SIOCGIFMTU : SIOCSIFMTU, &ifr);
	saved = errno;
	close(fd);
	errno = saved;
	if (rc == 0 && *mtu == 0)
		*mtu = (unsigned int)ifr.ifr_mtu;
	return rc;
}

/* The kernel interface an af_packet port is on (its spec's iface=). */
static void afp_iface(const struct port *p, char *name, size_t len)
{
	const char *iface = strstr(p->ps.devargs, "iface=");

	iface = iface != NULL ? iface + strlen("iface=") : "";
	snprintf(name, len, "%.*s", (int)strcspn(iface, ","), iface);
}

int port_set_mtu(struct port *p, unsigned int mtu, char *err, size_t err_len)
{
	char name[IF_NAMESIZE];
	int rc;

	if (mtu < PORTSPEC_MTU_MIN || mtu > PORTSPEC_MTU_MAX) {
		snprintf(err, err_len, "mtu must be %d to %d, not %u", PORTSPEC_MTU_MIN,
			 PORTSPEC_MTU_MAX, mtu);
		return -1;
	}
	if (p->afp != NULL) {
		afp_iface(p, name, sizeof(name));
		if (kernel_mtu(name, &mtu) != 0) {
			snprintf(err, err_len, "cannot set the MTU of %s to %u: %s", name, mtu,
				 strerror(errno));
			return -1;
		}
	} else if (p->ethdev != PORT_NO_ETHDEV) {
		rc = rte_eth_dev_set_mtu(p->ethdev, (uint16_t)mtu);
		if (rc != 0 && rc != -ENOTSUP) {
			snprintf(err, err_len, "the device refuses MTU %u: %s", mtu,
				 rte_strerror(-rc));
			return -1;
		}
	}
	publish_mtu(p, mtu, true);
	return 0;
}

/*
 * The MTU a new ethdev port starts with: its spec's mtu= (within what the device allows),
 * else the device's own. Frames longer than a buffer need the device's scatter offload to
 * be received as chains, and multi-segment transmit to be sent: asked for where it has them.
 */
static int prepare_mtu(struct port *p, const struct rte_eth_dev_info *info,
		       struct rte_eth_conf *conf, char *err, size_t err_len)
{
	uint16_t mtu = RTE_ETHER_MTU;

	if (p->ps.mtu == 0) {
		if (rte_eth_dev_get_mtu(p->ethdev, &mtu) != 0 || mtu == 0)
			mtu = RTE_ETHER_MTU;
		p->mtu = mtu;
		return 0;
	}
	p->mtu = p->ps.mtu;
	if (p->ps.kind == PORTSPEC_MEMIF &&
	    p->ps.mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN > info->max_rx_pktlen)
		/* DPDK's memif says 1518 B but chains buffers (MEMIF_DESC_FLAG_NEXT) both ways:
		 * the MTU is sluice's limit alone. */
		return 0;
	if (p->ps.mtu < info->min_mtu || p->ps.mtu > info->max_mtu ||
	    p->ps.mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN > info->max_rx_pktlen) {
		snprintf(err, err_len, "mtu %u: the device takes %u to %u", p->ps.mtu,
			 info->min_mtu, RTE_MIN((uint32_t)info->max_mtu, info->max_rx_pktlen -
						RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN));
		return -1;
	}
	conf->rxmode.mtu = p->ps.mtu;
	if (p->ps.mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN > RTE_MBUF_DEFAULT_DATAROOM) {
		if (info->rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER)
			conf->rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
		if (info->tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
			conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	}
	return 0;
}

static int configure_device(struct port *p, char *err, size_t err_len)
{
	struct rte_eth_conf conf = { 0 };
	struct rte_eth_dev_info info;
	int rc;

	rc = rte_eth_dev_info_get(p->ethdev, &info);
	if (rc != 0) {
		snprintf(err, err_len, "cannot read device info: %s", rte_strerror(-rc));
		return -1;
	}
	if (prepare_mtu(p, &info, &conf, err, err_len) != 0)
		return -1;
	/* Ask for link-change interrupts only where the device has them (vhost-user does). */
	if (*info.dev_flags & RTE_ETH_DEV_INTR_LSC) {
		conf.intr_conf.lsc = 1;
		if (rte_eth_dev_callback_register(p->ethdev, RTE_ETH_EVENT_INTR_LSC,
						  port_lsc_event, p) == 0)
			p->lsc_callback = true;
	}
	if (p->n_rxq > info.max_rx_queues) {
		snprintf(err, err_len, "queues=%u: the device has %u receive queues", p->n_rxq,
			 info.max_rx_queues);
		return -1;
	}
	rc = rte_eth_dev_configure(p->ethdev, p->n_rxq, config.n_workers, &conf);
	if (rc != 0) {
		snprintf(err, err_len, "device configure failed: %s", rte_strerror(-rc));
		return -1;
	}
	/* Where the device has an MTU of its own (tap, virtio-user, af_xdp, PCI), set it. */
	rc = conf.rxmode.mtu != 0 ? rte_eth_dev_set_mtu(p->ethdev, (uint16_t)p->mtu) : 0;
	if (rc != 0 && rc != -ENOTSUP) {
		snprintf(err, err_len, "the device refuses MTU %u: %s", p->mtu, rte_strerror(-rc));
		return -1;
	}
	publish_mtu(p, p->mtu, p->ps.mtu != 0);
	if (setup_queues(p, &info, err, err_len) != 0)
		return -1;
	rc = rte_eth_dev_start(p->ethdev);
	if (rc != 0) {
		snprintf(err, err_len, "device start failed: %s", rte_strerror(-rc));
		return -1;
	}
	if (p->ps.kind == PORTSPEC_AF_XDP)
		port_afxdp_attach(p->ethdev);
	/* A switch port takes every frame; devices without the notion say ENOTSUP. */
	rte_eth_promiscuous_enable(p->ethdev);
	rte_eth_macaddr_get(p->ethdev, &p->mac);
	port_refresh_link(p);
	return 0;
}

static void unregister_lsc(struct port *p)
{
	if (!p->lsc_callback)
		return;
	/* -EAGAIN: the callback is running on the interrupt thread right now. */
	while (rte_eth_dev_callback_unregister(p->ethdev, RTE_ETH_EVENT_INTR_LSC, port_lsc_event,
					       p) == -EAGAIN)
		rte_delay_us_sleep(100);
	p->lsc_callback = false;
}

/*
 * The ethdev a probed device made. Found through the device rather than by name, since some
 * drivers (ring) name the ethdev after an argument instead of the device.
 */
static int find_ethdev(const char *devname, uint16_t *ethdev)
{
	struct rte_eth_dev_info info;
	uint16_t id;

	RTE_ETH_FOREACH_DEV(id) {
		if (rte_eth_dev_info_get(id, &info) == 0 && info.device != NULL &&
		    strcmp(rte_dev_name(info.device), devname) == 0) {
			*ethdev = id;
			return 0;
		}
	}
	return -1;
}

/* Checks what the spec names on this host, so the error names the field, not a driver. */
static int check_host_resources(const struct portspec *ps, const char *spec, char *err,
				size_t err_len)
{
	char field[16], value[PORTSPEC_MAX_LEN];
	const char *want[] = { "iface=", "rx=" };
	unsigned int i;

	for (i = 0; i < RTE_DIM(want); i++) {
		const char *at = strstr(spec, want[i]);
		size_t n;

		if (at == NULL || (at != spec && at[-1] != ':' && at[-1] != ','))
			continue;
		at += strlen(want[i]);
		n = strcspn(at, ",");
		if (n >= sizeof(value))
			continue;
		memcpy(value, at, n);
		value[n] = '\0';
		snprintf(field, sizeof(field), "%.*s", (int)strlen(want[i]) - 1, want[i]);
		if (strcmp(field, "iface") == 0 && if_nametoindex(value) == 0) {
			snprintf(err, err_len, "%s: 'iface': no network interface named '%s'",
				 portspec_kind_name(ps->kind), value);
			return -1;
		}
		if (strcmp(field, "rx") == 0 && ps->kind == PORTSPEC_PCAP && access(value, R_OK) != 0) {
			snprintf(err, err_len, "pcap: 'rx': cannot read '%s': %s", value,
				 strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int probe_device(struct port *p, char *err, size_t err_len)
{
	char probe[PORTSPEC_DEVNAME_LEN + PORTSPEC_ARGS_LEN + 2];
	int rc;

	if (check_host_resources(&p->ps, p->spec, err, err_len) != 0)
		return -1;
	if (p->ps.path[0] != '\0' && p->ps.path_is_server &&
	    clear_stale_socket(p->ps.path, err, err_len) != 0)
		return -1;
	if (portspec_probe_string(&p->ps, probe, sizeof(probe)) != 0) {
		snprintf(err, err_len, "device string too long");
		return -1;
	}
	LOG(INFO, "port %s: probing %s", p->name, probe);
	rc = rte_dev_probe(probe);
	if (rc != 0 && p->ps.kind == PORTSPEC_RING) {
		/* The rings outlive a deleted ring port; a new port on them attaches. */
		char *action = strstr(probe, ":CREATE");

		if (action != NULL) {
			memcpy(action, ":ATTACH", strlen(":ATTACH"));
			rc = rte_dev_probe(probe);
		}
	}
	if (rc != 0) {
		snprintf(err, err_len, "DPDK could not create device '%s'%s%s (the daemon's log has "
			 "the driver's reason)", probe, rc == -1 ? "" : ": ",
			 rc == -1 ? "" : rte_strerror(-rc));
		return -1;
	}
	if (find_ethdev(p->ps.devname, &p->ethdev) != 0) {
		snprintf(err, err_len, "device '%s' made no ethdev", p->ps.devname);
		rte_eal_hotplug_remove(p->ps.is_vdev ? "vdev" : "pci", p->ps.devname);
		return -1;
	}
	return 0;
}

/*
 * af_packet ports are sluice's own (port_afpacket.h): DPDK 22.11's net_af_packet drops the
 * kernel's checksum and segmentation state, so TCP from a namespace never arrived whole.
 */
/*
 * A port without an ethdev (af_packet, vhost-user fast) copies frames into mbufs a burst
 * at a time: it reserves a burst's worth of the shared pool.
 */
static int reserve_burst_pool(struct port *p, char *err, size_t err_len)
{
	p->pool_need = FWD_MAX_BURST;
	p->pool = pool_reserve(SOCKET_ID_ANY, p->pool_need);
	if (p->pool == NULL) {
		snprintf(err, err_len, "no memory for %u more packet buffers (hugepages "
			 "exhausted?)", p->pool_need);
		return -1;
	}
	return 0;
}

static int open_afpacket(struct port *p, char *err, size_t err_len)
{
	const char *iface = strstr(p->ps.devargs, "iface=");
	char name[IF_NAMESIZE];

	if (check_host_resources(&p->ps, p->spec, err, err_len) != 0)
		return -1;
	if (iface == NULL) {
		snprintf(err, err_len, "af_packet: 'iface' is missing");
		return -1;
	}
	/* Frames are copied out of the kernel's ring into mbufs a burst at a time, and out of
	 * mbufs into it on send: the port holds a burst at most. */
	if (reserve_burst_pool(p, err, err_len) != 0)
		return -1;
	iface += strlen("iface=");
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(iface, ","), iface);
	p->afp = afp_open(name, config.n_workers, p->pool, err, err_len);
	if (p->afp == NULL) {
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return -1;
	}
	p->ethdev = PORT_NO_ETHDEV;
	p->tx_offloads = true;
	/* The kernel interface's MTU: the spec's, set on it, or the one it has. */
	if (p->ps.mtu != 0 ? port_set_mtu(p, p->ps.mtu, err, err_len) != 0 : 0) {
		afp_close(p->afp);
		p->afp = NULL;
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return -1;
	}
	if (p->ps.mtu == 0) {
		unsigned int mtu = 0;

		publish_mtu(p, kernel_mtu(name, &mtu) == 0 ? mtu : RTE_ETHER_MTU, false);
	}
	afp_mac(p->afp, &p->mac);
	port_refresh_link(p);
	return 0;
}

/*
 * vhost-user, fast (the default; vhost_fast.h): sluice drives the vhost library itself, so that
 * frames between two such ports are copied once. Frames go through mbufs for everything
 * else, and a burst holds at most FWD_MAX_BURST of them.
 */
static int open_vhost_fast(struct port *p, char *err, size_t err_len)
{
	if (p->ps.path_is_server && clear_stale_socket(p->ps.path, err, err_len) != 0)
		return -1;
	if (reserve_burst_pool(p, err, err_len) != 0)
		return -1;
	p->ethdev = PORT_NO_ETHDEV;
	/* No MTU of its own, as with the PMD: the switch enforces one that was given. */
	publish_mtu(p, p->ps.mtu != 0 ? p->ps.mtu : RTE_ETHER_MTU, p->ps.mtu != 0);
	p->vhf = vhf_open(p, p->ps.path, !p->ps.path_is_server, p->pool, err, err_len);
	if (p->vhf == NULL) {
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return -1;
	}
	vhf_mac(p->vhf, &p->mac);
	p->vhf_direct = p->vhf;
	port_refresh_link(p);
	return 0;
}

/*
 * memif with fast=1 (memif_fast.h): sluiced speaks the memif server side itself, so that
 * frames between two such ports are copied once, client memory to client memory. Frames go
 * through mbufs for everything else, a burst at most.
 */
static int open_memif_fast(struct port *p, char *err, size_t err_len)
{
	struct rte_ether_addr mac;
	const char *v;
	uint32_t id = 0;
	bool has_mac = false;

	if (clear_stale_socket(p->ps.path, err, err_len) != 0)
		return -1;
	if ((v = strstr(p->ps.devargs, ",id=")) != NULL)
		id = (uint32_t)strtoul(v + strlen(",id="), NULL, 10);
	if ((v = strstr(p->ps.devargs, ",mac=")) != NULL) {
		char text[RTE_ETHER_ADDR_FMT_SIZE];

		snprintf(text, sizeof(text), "%.*s", (int)strcspn(v + 5, ","), v + 5);
		has_mac = rte_ether_unformat_addr(text, &mac) == 0;
	}
	if (reserve_burst_pool(p, err, err_len) != 0)
		return -1;
	p->ethdev = PORT_NO_ETHDEV;
	/* No MTU of its own, as with the PMD: the switch enforces one that was given. */
	publish_mtu(p, p->ps.mtu != 0 ? p->ps.mtu : RTE_ETHER_MTU, p->ps.mtu != 0);
	p->mff = mff_open(p, p->ps.path, id, has_mac ? &mac : NULL, p->pool, err, err_len);
	if (p->mff == NULL) {
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return -1;
	}
	mff_mac(p->mff, &p->mac);
	port_refresh_link(p);
	return 0;
}

static void remove_device(struct port *p)
{
	int rc;

	if (p->mff != NULL) {
		mff_close(p->mff);
		p->mff = NULL;
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return;
	}

	if (p->vhf != NULL) {
		vhf_close(p->vhf);
		p->vhf = p->vhf_direct = NULL;
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return;
	}
	if (p->afp != NULL) {
		afp_close(p->afp);
		p->afp = NULL;
		pool_release(p->pool, p->pool_need);
		p->pool = NULL;
		return;
	}
	if (p->vxl != NULL) {
		vxl_close(p);
		return;
	}

	unregister_lsc(p);
	rc = rte_eth_dev_stop(p->ethdev);
	if (rc != 0 && rc != -ENODEV)
		LOG(WARNING, "port %s: stop: %s", p->name, rte_strerror(-rc));
	rte_eth_dev_close(p->ethdev);
	rc = rte_eal_hotplug_remove(p->ps.is_vdev ? "vdev" : "pci", p->ps.devname);
	if (rc != 0)
		LOG(WARNING, "port %s: device remove: %s", p->name, rte_strerror(-rc));
	if (p->pool != NULL)
		pool_release(p->pool, p->pool_need);
	p->pool = NULL;
}

/* Checks NAME and SPEC and makes the port object, numbered but not yet in the table. */
static struct port *port_prepare(const char *name, const char *spec, enum port_error *error,
				 char *err, size_t err_len)
{
	char unique[16];
	struct port *p;
	unsigned int q;
	int slot;

	if (port_find(name) != NULL) {
		*error = PORT_ERR_EXISTS;
		snprintf(err, err_len, "a port named '%s' exists", name);
		return NULL;
	}
	slot = free_slot();
	if (slot < 0) {
		*error = PORT_ERR_LIMIT;
		snprintf(err, err_len, "the daemon has %d ports, its maximum", PORT_MAX);
		return NULL;
	}
	p = rte_zmalloc("port", sizeof(*p), RTE_CACHE_LINE_SIZE);
	if (p == NULL) {
		*error = PORT_ERR_DEVICE;
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	snprintf(unique, sizeof(unique), "p%d", slot + 1);
	*error = PORT_ERR_SPEC;
	if (portspec_parse(spec, unique, config.n_workers, &p->ps, err, err_len) != 0 ||
	    path_policy_check(&p->ps, err, err_len) != 0 ||
	    (p->ps.kind == PORTSPEC_VXLAN && vxl_prepare(p, err, err_len) != 0)) {
		rte_free(p);
		return NULL;
	}
	if (p->ps.memif_zero_copy) {
		/*
		 * DPDK 22.11's memif client in zero-copy mode hands the EAL's own descriptor of
		 * the hugepage file to the server and then closes it once connected: the next
		 * zero-copy connection (a second port, or this one reconnecting) sends a closed
		 * descriptor, or whatever file has since taken its number (docs/ports.md).
		 */
		snprintf(err, err_len, "memif zero_copy=yes: not yet (DPDK 22.11's memif closes "
			 "the EAL's hugepage descriptor after the first zero-copy connection, so a "
			 "second port or a reconnection would share a closed or reused descriptor)");
		rte_free(p);
		return NULL;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->spec, sizeof(p->spec), "%s", spec);
	p->id = (uint16_t)(slot + 1);
	p->generation = port_generation[slot] + 1;
	p->worker = -1;
	p->n_rxq = (uint16_t)(p->ps.rx_queues > 1 ? p->ps.rx_queues : 1);
	for (q = 0; q < PORT_MAX_RXQ; q++)
		p->rxq_worker[q] = -1;
	return p;
}

/*
 * Probes and starts P's device: the part that may wait. Runs on the set-up thread. Kept
 * opaque to GCC (noipa), which would otherwise see the fixed size of the error buffer and
 * call each message that quotes a long spec a truncation, which it deliberately is.
 */
__attribute__((noipa))
static int port_bring_up(struct port *p, char *err, size_t err_len)
{
	if (p->ps.kind == PORTSPEC_AF_PACKET)
		return open_afpacket(p, err, err_len);
	if (p->ps.kind == PORTSPEC_VHOST_USER && p->ps.vhost_fast)
		return open_vhost_fast(p, err, err_len);
	if (p->ps.kind == PORTSPEC_MEMIF && p->ps.memif_fast)
		return open_memif_fast(p, err, err_len);
	if (p->ps.kind == PORTSPEC_VXLAN)
		return 0;       /* made by vxl_prepare: nothing here waits */
	if (probe_device(p, err, err_len) != 0)
		return -1;
	if (configure_device(p, err, err_len) != 0) {
		remove_device(p);
		return -1;
	}
	return 0;
}

/* Frees a port that port_prepare made and that never entered the table. */
static void port_discard(struct port *p)
{
	vxl_close(p);
	rte_free(p);
}

static void port_commit(struct port *p)
{
	port_table[p->id - 1] = p;
	port_generation[p->id - 1] = p->generation;
	LOG(INFO, "port %s: number %u, ethdev %d, %s, link %s", p->name, p->id,
	    p->ethdev == PORT_NO_ETHDEV ? -1 : p->ethdev, p->ps.devname,
	    port_link_is_up(p) ? "up" : "down");
}

/* ---- the set-up thread ---- */

static struct {
	bool active;                  /* started and not yet collected */
	pthread_t thread;
	struct port *p;
	int efd;
	uint64_t deadline_ms;         /* 0: none */
	uint64_t last_kick_ms;
	const char *cancel_reason;    /* non-NULL once cancelled */
	bool cancel_requested;        /* atomic: read by the set-up thread */
	bool done;                    /* atomic: written by the set-up thread */
	int rc;
	char err[512];
} setup = { .efd = -1 };

static uint64_t setup_now_ms(void)
{
	return rte_get_timer_cycles() / (rte_get_timer_hz() / 1000);
}

/* Does nothing: its only purpose is to make a blocked system call return EINTR. */
static void setup_signal_handler(int sig)
{
	(void)sig;
}

static int setup_init(void)
{
	struct sigaction sa = { .sa_handler = setup_signal_handler };   /* no SA_RESTART */

	if (setup.efd >= 0)
		return 0;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SETUP_SIGNAL, &sa, NULL) != 0)
		return -1;
	setup.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return setup.efd >= 0 ? 0 : -1;
}

int port_setup_fd(void)
{
	if (setup_init() != 0)
		LOG(ERR, "port set-up: no eventfd or signal handler: %s", strerror(errno));
	return setup.efd;
}

static void *setup_main(void *arg)
{
	struct port *p = arg;
	uint64_t one = 1;
	sigset_t set;
	int rc = -1;

	/* Every other thread blocks SETUP_SIGNAL, so only this one is ever interrupted. */
	sigemptyset(&set);
	sigaddset(&set, SETUP_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (!__atomic_load_n(&setup.cancel_requested, __ATOMIC_ACQUIRE))
		rc = port_bring_up(p, setup.err, sizeof(setup.err));
	setup.rc = rc;
	__atomic_store_n(&setup.done, true, __ATOMIC_RELEASE);
	if (write(setup.efd, &one, sizeof(one)) != sizeof(one))
		LOG(ERR, "port set-up: cannot signal the control thread");
	return NULL;
}

int port_setup_start(const char *name, const char *spec, enum port_error *error, char *err,
		     size_t err_len)
{
	struct port *p;
	int rc;

	if (setup.active) {
		*error = PORT_ERR_BUSY;
		snprintf(err, err_len, "busy: port '%s' is being set up", setup.p->name);
		return -1;
	}
	p = port_prepare(name, spec, error, err, err_len);
	if (p == NULL)
		return -1;
	*error = PORT_ERR_DEVICE;
	if (setup_init() != 0) {
		snprintf(err, err_len, "cannot start a port set-up: %s", strerror(errno));
		port_discard(p);
		return -1;
	}
	setup.p = p;
	setup.rc = -1;
	setup.err[0] = '\0';
	setup.cancel_reason = NULL;
	setup.cancel_requested = false;
	setup.done = false;
	setup.deadline_ms = config.setup_timeout_s ?
		setup_now_ms() + (uint64_t)config.setup_timeout_s * 1000 : 0;
	rc = rte_ctrl_thread_create(&setup.thread, "sluice-setup", NULL, setup_main, p);
	if (rc != 0) {
		snprintf(err, err_len, "cannot start a port set-up thread: %s", strerror(rc));
		port_discard(p);
		return -1;
	}
	setup.active = true;
	return 0;
}

const char *port_setup_pending(void)
{
	return setup.active ? setup.p->name : NULL;
}

static void setup_kick(void)
{
	setup.last_kick_ms = setup_now_ms();
	pthread_kill(setup.thread, SETUP_SIGNAL);
}

void port_setup_cancel(const char *reason)
{
	if (!setup.active || setup.cancel_reason != NULL)
		return;
	LOG(NOTICE, "port %s: cancelling its set-up: %s", setup.p->name, reason);
	setup.cancel_reason = reason;
	__atomic_store_n(&setup.cancel_requested, true, __ATOMIC_RELEASE);
	setup_kick();
}

void port_setup_poll(void)
{
	static char reason[64];
	uint64_t now = setup_now_ms();

	if (!setup.active || __atomic_load_n(&setup.done, __ATOMIC_ACQUIRE))
		return;
	if (setup.cancel_reason == NULL && setup.deadline_ms != 0 && now >= setup.deadline_ms) {
		snprintf(reason, sizeof(reason), "it did not finish within %u s",
			 config.setup_timeout_s);
		port_setup_cancel(reason);
	}
	/*
	 * A signal that lands just before the driver blocks interrupts nothing, so a cancelled
	 * set-up is interrupted again until it ends.
	 */
	if (setup.cancel_reason != NULL && now - setup.last_kick_ms >= SETUP_KICK_MS)
		setup_kick();
}

bool port_setup_wait(unsigned int timeout_ms)
{
	uint64_t end = setup_now_ms() + timeout_ms;

	while (setup.active && !__atomic_load_n(&setup.done, __ATOMIC_ACQUIRE)) {
		if (setup_now_ms() >= end)
			return false;
		port_setup_poll();
		rte_delay_us_sleep(5000);
	}
	return setup.active;
}

struct port *port_setup_finish(enum port_error *error, char *err, size_t err_len)
{
	struct port *p = setup.p;

	pthread_join(setup.thread, NULL);
	setup.active = false;
	setup.p = NULL;
	*error = PORT_ERR_DEVICE;
	if (setup.rc == 0) {
		port_commit(p);
		return p;
	}
	if (setup.cancel_reason != NULL)
		snprintf(err, err_len, "port '%s': set-up cancelled: %s%s%s", p->name,
			 setup.cancel_reason, setup.err[0] ? "; " : "", setup.err);
	else
		snprintf(err, err_len, "%s", setup.err);
	port_discard(p);
	return NULL;
}

void port_destroy(struct port *p)
{
	LOG(INFO, "port %s: removing %s", p->name, p->ps.devname);
	remove_device(p);
	port_table[p->id - 1] = NULL;
	rte_free(p);
}

/*
 * Longest the control thread spends reading one worker's counters of one port. A burst
 * lasts microseconds, but a worker that shares its CPU can be preempted in one for
 * milliseconds, and a saturated worker (bursts back to back: its sequence is odd nearly all
 * the time) leaves the reader few chances to catch it between two.
 */
#define PORT_COUNTERS_WAIT_MS 100

/*
 * Worker W's counters of P, read between two of its bursts (worker.h), so that they satisfy
 * rx = forwarded + dropped. The wait for a quiet moment is bounded in total, not per try:
 * each try used to wait up to 100 ms and a hundred tries were allowed, so a saturated or
 * stuck worker held the control thread 10 s per port and per worker; a stats call on a
 * few ports then went unanswered for a minute and SIGTERM (read by the same thread) with
 * it. After the deadline the counters are read as they are.
 */
static void read_worker_counters(const struct port *p, unsigned int w, struct port_totals *t)
{
	const uint64_t give_up = rte_get_timer_cycles() +
				 rte_get_timer_hz() / 1000 * PORT_COUNTERS_WAIT_MS;
	uint32_t seq;

	do {
		seq = wk_counters_begin(w, give_up);
		memset(t, 0, sizeof(*t));
		stats_accumulate(t, &p->counters[w]);
	} while (wk_counters_changed(w, seq) && rte_get_timer_cycles() < give_up);
}

static void read_counters(const struct port *p, struct port_totals *t)
{
	struct port_totals one;
	unsigned int w;

	memset(t, 0, sizeof(*t));
	for (w = 0; w < config.n_workers; w++) {
		read_worker_counters(p, w, &one);
		stats_merge(t, &one);
	}
}

void port_abandon(struct port *p)
{
	LOG(ERR, "port %s: a stuck worker may still use it: %s is left open and its slot %u "
	    "unused", p->name, p->ps.devname, p->id);
	port_table[p->id - 1] = NULL;
	slot_abandoned[p->id - 1] = true;
}

void port_read_totals(const struct port *p, struct port_totals *t)
{
	read_counters(p, t);
	stats_subtract(t, &p->baseline);
}

void port_clear_stats(struct port *p)
{
	read_counters(p, &p->baseline);
	p->baseline_missed = 0;
	p->baseline_missed = port_rx_missed(p);
	p->baseline_one_copy = p->vhf != NULL ? vhf_one_copy(p->vhf) :
			       p->mff != NULL ? mff_one_copy(p->mff) : 0;
}

uint64_t port_one_copy(const struct port *p)
{
	if (p->mff != NULL)
		return mff_one_copy(p->mff) - p->baseline_one_copy;
	return p->vhf != NULL ? vhf_one_copy(p->vhf) - p->baseline_one_copy : 0;
}

uint64_t port_rx_missed(const struct port *p)
{
	struct rte_eth_stats st;

	if (p->afp != NULL)
		return afp_rx_missed(p->afp) - p->baseline_missed;
	if (p->vhf != NULL)
		return vhf_rx_missed(p->vhf) - p->baseline_missed;
	if (p->mff != NULL)
		return mff_rx_missed(p->mff) - p->baseline_missed;
	if (p->ethdev == PORT_NO_ETHDEV)
		return 0;
	if (rte_eth_stats_get(p->ethdev, &st) != 0)
		return 0;
	return st.imissed + st.rx_nombuf - p->baseline_missed;
}

static const struct {
	uint32_t bit;
	const char *name;
} of_config_names[] = {
	{ PORT_OF_DOWN, "down" }, { PORT_OF_NO_RECV, "no_recv" },
	{ PORT_OF_NO_FLOOD, "no_flood" }, { PORT_OF_NO_FWD, "no_fwd" },
	{ PORT_OF_NO_PACKET_IN, "no_packet_in" },
};

void port_of_config_format(uint32_t config, char *buf, size_t len)
{
	size_t used = 0, i;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (i = 0; i < RTE_DIM(of_config_names); i++)
		if ((config & of_config_names[i].bit) && used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "",
						 of_config_names[i].name);
}

int port_of_config_parse(const char *text, uint32_t *config)
{
	const char *p = text;

	*config = 0;
	if (strcmp(text, "none") == 0 || text[0] == '\0')
		return 0;
	while (*p != '\0') {
		size_t n = strcspn(p, ","), i;

		for (i = 0; i < RTE_DIM(of_config_names); i++)
			if (strlen(of_config_names[i].name) == n &&
			    strncmp(p, of_config_names[i].name, n) == 0)
				break;
		if (i == RTE_DIM(of_config_names))
			return -1;
		*config |= of_config_names[i].bit;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}
