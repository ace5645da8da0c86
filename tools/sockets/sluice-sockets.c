/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-sockets: the kernel socket baseline of the container benchmark framework (seed 003,
 * its Table 2: UDP and raw sockets, send/recv and sendmmsg/recvmmsg, between two containers
 * on a Linux bridge). A sender thread and a receiver thread, each with its socket opened in
 * its own network namespace, exchange fixed-size frames as fast as the kernel takes them;
 * the main thread prints per-second rates and a JSON summary. Roles tx and rx run one side
 * alone (two processes in two namespaces).
 *
 * The sender never waits for the receiver: what the kernel drops on the way (a full veth
 * backlog, a full socket buffer) is loss, counted as sent minus received.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sockets.h"
#include "sluice_version.h"

#define RX_TIMEOUT_US 100000    /* the receiver looks at its stop flag this often */
#define RX_BUF 2048
#define READY_NS 200000000L     /* the receiver starts this long before the sender */

struct side {
	int fd;
	int ifindex;
	uint8_t mac[6];
	struct sockaddr_ll to;          /* raw: where sendto() sends */
	pthread_t thread;
	int started;
	double cpu_s;                   /* the thread's own CPU time */
};

struct run {
	struct sk_opts o;
	struct side tx, rx;
	int rcvbuf;                     /* what the kernel granted, bytes */
	_Atomic uint64_t tx_pkts, tx_errs, rx_pkts, rx_foreign;
	_Atomic int stop_tx, stop_rx;
	int last_errno;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const char *what, const char *detail)
{
	fprintf(stderr, "sluice-sockets: %s%s%s: %s\n", what, detail[0] ? " " : "", detail,
		strerror(errno));
	return -1;
}

/* Moves the calling thread into namespace NAME ("" leaves it where it is). */
static int enter_netns(const char *name)
{
	char path[128];
	int fd, rc;

	if (name[0] == '\0')
		return 0;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return die("cannot open namespace", path);
	rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc == 0 ? 0 : die("setns", path);
}

static int device_of(int fd, const char *iface, struct side *s)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	s->ifindex = (int)if_nametoindex(iface);
	if (s->ifindex == 0)
		return die("no such device", iface);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0)
		return die("SIOCGIFHWADDR", iface);
	memcpy(s->mac, ifr.ifr_hwaddr.sa_data, 6);
	return 0;
}

static struct sockaddr_in inet_addr_of(uint32_t ip, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(ip);
	a.sin_port = htons(port);
	return a;
}

static int open_udp_tx(struct run *r)
{
	struct sockaddr_in dst = inet_addr_of(r->o.dst_ip, r->o.port);

	r->tx.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->tx.fd < 0)
		return die("socket", "udp");
	if (connect(r->tx.fd, (struct sockaddr *)&dst, sizeof(dst)) != 0)
		return die("connect", "udp");
	return 0;
}

static int open_raw_tx(struct run *r)
{
	struct side *s = &r->tx;

	/* Protocol 0: the sending socket takes no copies of received frames. */
	s->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return die("socket", "AF_PACKET");
	if (device_of(s->fd, r->o.tx_iface, s) != 0)
		return -1;
	memset(&s->to, 0, sizeof(s->to));
	s->to.sll_family = AF_PACKET;
	s->to.sll_ifindex = s->ifindex;
	s->to.sll_protocol = htons(ETH_P_IP);
	s->to.sll_halen = 6;
	memcpy(s->to.sll_addr, r->o.dst_mac, 6);
	return 0;
}

/* A receive buffer of the size asked (FORCE needs CAP_NET_ADMIN; plain is capped by
 * net.core.rmem_max), a timeout, and what the kernel granted. */
static int tune_rx(struct run *r)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = RX_TIMEOUT_US };
	socklen_t len = sizeof(r->rcvbuf);
	int fd = r->rx.fd;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &r->o.rcvbuf, sizeof(int)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r->o.rcvbuf, sizeof(int));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
		return die("SO_RCVTIMEO", "");
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r->rcvbuf, &len);
	return 0;
}

static int open_udp_rx(struct run *r)
{
	struct sockaddr_in any = inet_addr_of(INADDR_ANY, r->o.port);

	r->rx.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->rx.fd < 0)
		return die("socket", "udp");
	if (bind(r->rx.fd, (struct sockaddr *)&any, sizeof(any)) != 0)
		return die("bind", "udp");
	return tune_rx(r);
}

static int open_raw_rx(struct run *r)
{
	struct side *s = &r->rx;
	struct sockaddr_ll at;
	int one = 1;

	s->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (s->fd < 0)
		return die("socket", "AF_PACKET");
	if (device_of(s->fd, r->o.rx_iface, s) != 0)
		return -1;
	memset(&at, 0, sizeof(at));
	at.sll_family = AF_PACKET;
	at.sll_ifindex = s->ifindex;
	at.sll_protocol = htons(ETH_P_ALL);
	if (bind(s->fd, (struct sockaddr *)&at, sizeof(at)) != 0)
		return die("bind", r->o.rx_iface);
	setsockopt(s->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	return tune_rx(r);
}

/* Opens each side's socket in its namespace; the main thread ends where it began. */
static int open_sockets(struct run *r)
{
	int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), rc = 0;

	if (home < 0)
		return die("open", "/proc/self/ns/net");
	r->tx.fd = r->rx.fd = -1;
	if ((r->o.role & SK_ROLE_RX) && (enter_netns(r->o.rx_netns) != 0 ||
	    (r->o.api == SK_API_UDP ? open_udp_rx(r) : open_raw_rx(r)) != 0))
		rc = -1;
	if (rc == 0 && setns(home, CLONE_NEWNET) != 0)
		rc = die("setns", "back home");
	if (rc == 0 && (r->o.role & SK_ROLE_TX) && (enter_netns(r->o.tx_netns) != 0 ||
	    (r->o.api == SK_API_UDP ? open_udp_tx(r) : open_raw_tx(r)) != 0))
		rc = -1;
	if (setns(home, CLONE_NEWNET) != 0 && rc == 0)
		rc = die("setns", "back home");
	close(home);
	return rc;
}

static void pin_self(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		fprintf(stderr, "sluice-sockets: cannot pin to CPU %d\n", cpu);
}

/* The message vector of a batch: every entry sends (or receives into) its own IOV. */
static void init_msgs(struct mmsghdr *m, struct iovec *iov, unsigned int n, void *name,
		      socklen_t namelen)
{
	unsigned int i;

	memset(m, 0, sizeof(*m) * n);
	for (i = 0; i < n; i++) {
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_hdr.msg_name = name;
		m[i].msg_hdr.msg_namelen = namelen;
	}
}

/* One send call: returns frames the kernel took, 0 on a refused call. */
static unsigned int send_once(struct run *r, struct mmsghdr *m, const uint8_t *buf,
			      size_t len)
{
	void *to = r->o.api == SK_API_RAW ? &r->tx.to : NULL;
	socklen_t tolen = to ? sizeof(r->tx.to) : 0;
	int n;

	if (r->o.batch == 1)
		n = sendto(r->tx.fd, buf, len, 0, to, tolen) < 0 ? -1 : 1;
	else
		n = sendmmsg(r->tx.fd, m, r->o.batch, 0);
	if (n > 0)
		return (unsigned int)n;
	r->last_errno = errno;
	atomic_fetch_add_explicit(&r->tx_errs, 1, memory_order_relaxed);
	return 0;
}

static void *tx_main(void *arg)
{
	struct run *r = arg;
	static uint8_t buf[SK_MAX_SIZE];
	struct mmsghdr m[SK_MAX_BATCH];
	struct iovec iov[SK_MAX_BATCH];
	size_t len;
	unsigned int i;

	pin_self(r->o.tx_cpu);
	len = r->o.api == SK_API_RAW ? sk_build_frame(&r->o, r->tx.mac, buf)
				      : sk_payload_len(r->o.size);
	for (i = 0; i < r->o.batch; i++)
		iov[i] = (struct iovec){ .iov_base = buf, .iov_len = len };
	init_msgs(m, iov, r->o.batch, r->o.api == SK_API_RAW ? &r->tx.to : NULL,
		  r->o.api == SK_API_RAW ? sizeof(r->tx.to) : 0);
	while (!atomic_load_explicit(&r->stop_tx, memory_order_relaxed))
		atomic_fetch_add_explicit(&r->tx_pkts, send_once(r, m, buf, len),
					  memory_order_relaxed);
	r->tx.cpu_s = thread_cpu_s();
	return NULL;
}

/* Whether a received datagram or frame of LEN bytes is one of ours. */
static int ours(const struct run *r, const uint8_t *buf, size_t len)
{
	if (r->o.api == SK_API_RAW)
		return sk_frame_matches(&r->o, buf, len);
	return len == sk_payload_len(r->o.size);
}

/* One receive call into the batch's buffers; counts what came. */
static void recv_once(struct run *r, struct mmsghdr *m, uint8_t (*bufs)[RX_BUF])
{
	unsigned int i, good = 0, n;
	ssize_t got;
	int k;

	if (r->o.batch == 1) {
		got = recv(r->rx.fd, bufs[0], RX_BUF, 0);
		if (got < 0)
			return;
		m[0].msg_len = (unsigned int)got;
		n = 1;
	} else {
		k = recvmmsg(r->rx.fd, m, r->o.batch, MSG_WAITFORONE, NULL);
		if (k <= 0)
			return;
		n = (unsigned int)k;
	}
	for (i = 0; i < n; i++)
		good += (unsigned int)ours(r, bufs[i], m[i].msg_len);
	atomic_fetch_add_explicit(&r->rx_pkts, good, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->rx_foreign, n - good, memory_order_relaxed);
}

static void *rx_main(void *arg)
{
	struct run *r = arg;
	static uint8_t bufs[SK_MAX_BATCH][RX_BUF];
	struct mmsghdr m[SK_MAX_BATCH];
	struct iovec iov[SK_MAX_BATCH];
	unsigned int i;

	pin_self(r->o.rx_cpu);
	for (i = 0; i < r->o.batch; i++)
		iov[i] = (struct iovec){ .iov_base = bufs[i], .iov_len = RX_BUF };
	init_msgs(m, iov, r->o.batch, NULL, 0);
	while (!atomic_load_explicit(&r->stop_rx, memory_order_relaxed))
		recv_once(r, m, bufs);
	r->rx.cpu_s = thread_cpu_s();
	return NULL;
}

static int start(struct side *s, void *(*fn)(void *), struct run *r)
{
	if (pthread_create(&s->thread, NULL, fn, r) != 0)
		return die("pthread_create", "");
	s->started = 1;
	return 0;
}

static void sleep_until(double t)
{
	struct timespec ts = { .tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
	       !interrupted)
		;
}

/* Per-second lines until the run's DURATION is over (or a signal came); returns the
 * seconds it lasted. */
static double report_seconds(struct run *r, double t0)
{
	uint64_t tx0 = 0, rx0 = 0, tx, rx;
	double prev = t0, t = t0, end = t0 + r->o.duration;
	int sec = 0;

	while (t < end && !interrupted) {
		sleep_until(t0 + sec + 1 < end ? t0 + sec + 1 : end);
		t = now_s();
		sec++;
		tx = atomic_load(&r->tx_pkts);
		rx = atomic_load(&r->rx_pkts);
		if (r->o.json)
			printf("{\"t\": %d, \"monotonic_s\": %.6f, \"tx_pps\": %.1f, "
			       "\"rx_pps\": %.1f}\n", sec, t, (double)(tx - tx0) / (t - prev),
			       (double)(rx - rx0) / (t - prev));
		fflush(stdout);
		tx0 = tx;
		rx0 = rx;
		prev = t;
	}
	return t - t0;
}

static void stop_side(struct side *s, _Atomic int *flag)
{
	atomic_store(flag, 1);
	if (s->started)
		pthread_join(s->thread, NULL);
	s->started = 0;
}

static const char *role_name(enum sk_role role)
{
	return role == SK_ROLE_TX ? "tx" : role == SK_ROLE_RX ? "rx" : "both";
}

static void write_summary(FILE *f, const struct run *r, double secs)
{
	const struct sk_opts *o = &r->o;
	uint64_t tx = atomic_load(&r->tx_pkts), rx = atomic_load(&r->rx_pkts);
	double tx_pps = (double)tx / secs, rx_pps = (double)rx / secs;
	double loss = o->role == SK_ROLE_BOTH && tx > 0 && tx > rx ? (double)(tx - rx) / tx : 0;

	fprintf(f, "{\"tool\": \"sluice-sockets\", \"version\": \"%s\", \"api\": \"%s\", "
		"\"calls\": \"%s\", \"batch\": %u, \"role\": \"%s\", \"size\": %u, "
		"\"duration_s\": %.3f, \"tx_packets\": %llu, \"rx_packets\": %llu, "
		"\"tx_pps\": %.1f, \"rx_pps\": %.1f, \"loss\": %.6f, ",
		SLUICE_VERSION, sk_api_name(o->api), sk_calls_name(o->batch), o->batch,
		role_name(o->role), o->size, secs, (unsigned long long)tx,
		(unsigned long long)rx, tx_pps, rx_pps, loss);
	fprintf(f, "\"rx_gbps_l1\": %.4f, \"rx_gbps_l2\": %.4f, \"tx_gbps_l1\": %.4f, "
		"\"tx_gbps_l2\": %.4f, \"tx_errors\": %llu, \"tx_last_error\": \"%s\", "
		"\"rx_foreign\": %llu, \"tx_cpu_s\": %.3f, \"rx_cpu_s\": %.3f, "
		"\"rcvbuf\": %d, \"tx_netns\": \"%s\", \"rx_netns\": \"%s\"}\n",
		sk_gbps(rx_pps, o->size, 1), sk_gbps(rx_pps, o->size, 0),
		sk_gbps(tx_pps, o->size, 1), sk_gbps(tx_pps, o->size, 0),
		(unsigned long long)atomic_load(&r->tx_errs),
		r->last_errno ? strerror(r->last_errno) : "",
		(unsigned long long)atomic_load(&r->rx_foreign), r->tx.cpu_s, r->rx.cpu_s,
		r->rcvbuf, o->tx_netns, o->rx_netns);
}

static int summarize(const struct run *r, double secs)
{
	FILE *f;

	write_summary(stdout, r, secs);
	if (r->o.out[0] == '\0')
		return 0;
	f = fopen(r->o.out, "w");
	if (f == NULL)
		return die("cannot write", r->o.out);
	write_summary(f, r, secs);
	return fclose(f) == 0 ? 0 : die("cannot write", r->o.out);
}

/* Receiver first, then the sender; the sender stops after the duration, the receiver
 * LINGER seconds later. */
static double run_threads(struct run *r)
{
	struct timespec ready = { .tv_sec = 0, .tv_nsec = READY_NS };
	double secs;

	if ((r->o.role & SK_ROLE_RX) && start(&r->rx, rx_main, r) != 0)
		return -1;
	if (r->o.role == SK_ROLE_BOTH)
		nanosleep(&ready, NULL);
	if ((r->o.role & SK_ROLE_TX) && start(&r->tx, tx_main, r) != 0) {
		stop_side(&r->rx, &r->stop_rx);
		return -1;
	}
	secs = report_seconds(r, now_s());
	stop_side(&r->tx, &r->stop_tx);
	if (r->o.role == SK_ROLE_BOTH && !interrupted)
		sleep_until(now_s() + r->o.linger);
	stop_side(&r->rx, &r->stop_rx);
	return secs;
}

int main(int argc, char **argv)
{
	static struct run r;
	char err[256];
	double secs;
	int rc = sk_opts_parse(argc, argv, &r.o, err, sizeof(err));

	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "sluice-sockets: %s (try --help)\n", err);
		return rc < 0 ? 2 : 0;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (open_sockets(&r) != 0)
		return 1;
	secs = run_threads(&r);
	if (r.tx.fd >= 0)
		close(r.tx.fd);
	if (r.rx.fd >= 0)
		close(r.rx.fd);
	if (secs <= 0)
		return 1;
	return summarize(&r, secs) == 0 ? 0 : 1;
}
