/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * virtio-raw's control side: the spec, the shared memory, and the vhost-user handshake as
 * the frontend (vring.h says what the data path does with it).
 *
 * The handshake (QEMU's docs/interop/vhost-user.rst): GET_FEATURES, SET_OWNER,
 * SET_FEATURES (VIRTIO_F_VERSION_1 only: no protocol features, so each ring starts enabled
 * at its SET_VRING_KICK and no message asks for a reply), SET_MEM_TABLE with the memfd,
 * then per queue SET_VRING_CALL, NUM, BASE, ADDR and KICK. DPDK's backend starts the
 * device once both queues have rings, a kick and a call descriptor, and closes the
 * connection on any message it refuses; a final GET_FEATURES is answered only after every
 * earlier message was handled, so its answer says the backend took them all.
 */
#include "vring.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "peer.h"

#define VHOST_USER_GET_FEATURES 1
#define VHOST_USER_SET_FEATURES 2
#define VHOST_USER_SET_OWNER 3
#define VHOST_USER_SET_MEM_TABLE 5
#define VHOST_USER_SET_VRING_NUM 8
#define VHOST_USER_SET_VRING_ADDR 9
#define VHOST_USER_SET_VRING_BASE 10
#define VHOST_USER_SET_VRING_KICK 12
#define VHOST_USER_SET_VRING_CALL 13
#define VHOST_USER_VERSION 0x1
#define VHOST_USER_REPLY 0x4
#define VIRTIO_F_VERSION_1 32
#define HANDSHAKE_TIMEOUT_S 5
#define HUGE_PAGE (2u << 20)

struct vu_region {
	uint64_t guest_phys_addr, memory_size, userspace_addr, mmap_offset;
};

struct vu_msg {
	uint32_t request, flags, size;
	union {
		uint64_t u64;
		struct { uint32_t index, num; } state;
		struct {
			uint32_t index, flags;
			uint64_t desc, used, avail, log;
		} addr;
		struct {
			uint32_t nregions, padding;
			struct vu_region regions[1];
		} mem;
	} p;
} __attribute__((packed));

#define VU_HDR_LEN offsetof(struct vu_msg, p)

/* ---- the spec ---- */

bool vring_is_spec(const char *spec)
{
	return strncmp(spec, VRING_KIND ":", strlen(VRING_KIND ":")) == 0 ||
	       strcmp(spec, VRING_KIND) == 0;
}

static int spec_fail(char *err, size_t len, const char *why)
{
	snprintf(err, len, "%s", why);
	return -1;
}

static int parse_item(const char *key, const char *val, struct vring_spec *out, char *err,
		      size_t len)
{
	char *end;
	unsigned long n;

	if (strcmp(key, "path") == 0) {
		if (val[0] != '/' || strlen(val) >= sizeof(out->path))
			return spec_fail(err, len, VRING_KIND ": path= must be an absolute path "
					 "shorter than 108 bytes");
		snprintf(out->path, sizeof(out->path), "%s", val);
		return 0;
	}
	if (strcmp(key, "queue_size") == 0) {
		n = strtoul(val, &end, 10);
		if (end == val || *end != '\0' || n < VRING_MIN_SIZE || n > VRING_MAX_SIZE ||
		    (n & (n - 1)) != 0)
			return spec_fail(err, len, VRING_KIND ": queue_size= must be a power of "
					 "two from 64 to 16384");
		out->queue_size = (unsigned int)n;
		return 0;
	}
	if (strcmp(key, "mac") == 0) {
		unsigned int b[6], i;
		char tail;

		if (sscanf(val, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
			   &b[5], &tail) != 6 || (b[0] & 1))
			return spec_fail(err, len, VRING_KIND ": mac= must be a unicast MAC like "
					 "02:00:00:00:00:01");
		for (i = 0; i < 6; i++)
			out->mac[i] = (uint8_t)b[i];
		out->mac_given = true;
		return 0;
	}
	if (strcmp(key, "server") == 0 || strcmp(key, "role") == 0) {
		bool is_server = strcmp(key, "server") == 0 ? strcmp(val, "1") == 0 :
				 strcmp(val, "server") == 0;

		if (strcmp(key, "server") == 0 ? !is_server && strcmp(val, "0") != 0 :
		    !is_server && strcmp(val, "client") != 0)
			return spec_fail(err, len, VRING_KIND ": server= takes 1 or 0, role= "
					 "server or client");
		out->server = is_server;
		return 0;
	}
	if (strcmp(key, "accept_timeout") == 0) {
		n = strtoul(val, &end, 10);
		if (end == val || *end != '\0' || n < 1 || n > VRING_ACCEPT_TIMEOUT_MAX)
			return spec_fail(err, len, VRING_KIND ": accept_timeout= must be a number of "
					 "seconds from 1 to 3600");
		out->accept_timeout = (unsigned int)n;
		return 0;
	}
	snprintf(err, len, VRING_KIND ": unknown key '%s' (it takes path=, server=, "
		 "accept_timeout=, queue_size= and mac=)", key);
	return -1;
}

int vring_parse(const char *spec, struct vring_spec *out, char *err, size_t len)
{
	char buf[512], *tok, *save, *eq;

	*out = (struct vring_spec){ 0 };
	if (!vring_is_spec(spec))
		return spec_fail(err, len, "not a " VRING_KIND " spec");
	if (strlen(spec) >= sizeof(buf))
		return spec_fail(err, len, VRING_KIND ": spec too long");
	snprintf(buf, sizeof(buf), "%s", spec + strlen(VRING_KIND));
	for (tok = strtok_r(buf[0] == ':' ? buf + 1 : buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		eq = strchr(tok, '=');
		/* A bare "server" or "client" is role='s shorthand, as in the other specs. */
		if (eq == NULL && (strcmp(tok, "server") == 0 || strcmp(tok, "client") == 0)) {
			out->server = tok[0] == 's';
			continue;
		}
		if (eq == NULL)
			return spec_fail(err, len, VRING_KIND ": give key=value items "
					 "(path=SOCKET[,server=1][,queue_size=N])");
		*eq = '\0';
		if (parse_item(tok, eq + 1, out, err, len) != 0)
			return -1;
	}
	if (out->path[0] == '\0')
		return spec_fail(err, len, VRING_KIND ": path= is required (the vhost-user "
				 "socket: the switch's server socket, or with server=1 ours)");
	if (out->accept_timeout != 0 && !out->server)
		return spec_fail(err, len, VRING_KIND ": accept_timeout= is for server=1 ports");
	if (out->server && out->accept_timeout == 0)
		out->accept_timeout = VRING_ACCEPT_TIMEOUT_S;
	return 0;
}

/* ---- shared memory ---- */

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* A queue's rings: descriptors, then the avail ring and the used ring on lines of their own. */
static size_t rings_len(unsigned int n)
{
	return align_up(16 * (size_t)n, 64) + align_up(6 + 2 * (size_t)n, 64) +
	       align_up(6 + 8 * (size_t)n, 64);
}

static size_t tx_stride(uint16_t frame_len)
{
	return align_up(VRING_BUF_SKEW + VRING_HDR_LEN + (size_t)frame_len, 64);
}

/*
 * One shared region for both queues and their buffers: a memfd, backed by huge pages when
 * some are free (fewer TLB misses; it is what DPDK's backend maps best), else normal pages.
 */
static int map_region(struct vring_port *p, size_t len, int *fd_out)
{
	int fd = memfd_create("sluice-gen-virtio-raw", MFD_CLOEXEC | MFD_HUGETLB);
	size_t huge_len = align_up(len, HUGE_PAGE);

	if (fd >= 0 && ftruncate(fd, (off_t)huge_len) == 0) {
		p->mem = mmap(NULL, huge_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			      fd, 0);
		if (p->mem != MAP_FAILED) {
			p->mem_len = huge_len;
			p->hugepages = true;
			*fd_out = fd;
			return 0;
		}
	}
	if (fd >= 0)
		close(fd);
	len = align_up(len, 4096);
	fd = memfd_create("sluice-gen-virtio-raw", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
		goto fail;
	p->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p->mem == MAP_FAILED)
		goto fail;
	p->mem_len = len;
	*fd_out = fd;
	return 0;
fail:
	fprintf(stderr, "sluice-gen: %s: no shared memory for its rings: %s\n", p->spec,
		strerror(errno));
	if (fd >= 0)
		close(fd);
	p->mem = NULL;
	return -1;
}

/* Lays out queue Q's rings at *AT (advanced past them) and its free list. */
static int place_rings(struct vr_queue *q, unsigned int n, uint8_t **at)
{
	q->size = (uint16_t)n;
	q->mask = (uint16_t)(n - 1);
	q->desc = (struct vr_desc *)*at;
	*at += align_up(16 * (size_t)n, 64);
	q->avail = (struct vr_avail *)*at;
	*at += align_up(6 + 2 * (size_t)n, 64);
	q->used = (struct vr_used *)*at;
	*at += align_up(6 + 8 * (size_t)n, 64);
	q->free = calloc(n, sizeof(*q->free));
	q->kickfd = q->callfd = -1;
	return q->free != NULL ? 0 : -1;
}

/* Receive descriptors, each posted once to its fixed buffer, the device may write. */
static void init_rx(struct vr_queue *q)
{
	uint16_t i;

	for (i = 0; i < q->size; i++) {
		q->desc[i] = (struct vr_desc){
			.addr = (uint64_t)(uintptr_t)(q->bufs + (size_t)i * q->stride + VRING_BUF_SKEW),
			.len = q->stride - VRING_BUF_SKEW, .flags = VRING_DESC_F_WRITE };
		q->avail->ring[i] = i;
	}
	q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	q->avail_idx = q->size;
	q->avail->idx = q->avail_idx;
}

/* Transmit descriptors, each on its buffer (header and frame), all free to post. */
static void init_tx(struct vr_queue *q, uint16_t frame_len)
{
	uint16_t i;

	for (i = 0; i < q->size; i++) {
		q->desc[i] = (struct vr_desc){
			.addr = (uint64_t)(uintptr_t)(q->bufs + (size_t)i * q->stride + VRING_BUF_SKEW),
			.len = (uint32_t)(VRING_HDR_LEN + frame_len) };
		q->avail->ring[i] = i;
		q->free[i] = i;
	}
	q->n_free = q->size;
	q->free_head = 0;
	q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
}

void vring_set_frame(struct vring_port *p, const uint8_t *frame)
{
	uint16_t i;

	for (i = 0; i < p->tx.size; i++) {
		uint8_t *b = p->tx.bufs + (size_t)i * p->tx.stride + VRING_BUF_SKEW;

		memset(b, 0, VRING_HDR_LEN);
		memcpy(b + VRING_HDR_LEN, frame, p->frame_len);
	}
}

static int layout(struct vring_port *p, unsigned int n, const uint8_t *frame, uint16_t frame_len,
		  int *fd)
{
	size_t rx_bufs = (size_t)n * VRING_RX_BUF, tx_bufs = (size_t)n * tx_stride(frame_len);
	uint8_t *at;

	if (map_region(p, 2 * rings_len(n) + rx_bufs + tx_bufs, fd) != 0)
		return -1;
	at = p->mem;
	if (place_rings(&p->rx, n, &at) != 0 || place_rings(&p->tx, n, &at) != 0)
		return -1;
	p->rx.bufs = at;
	p->rx.stride = VRING_RX_BUF;
	p->tx.bufs = at + rx_bufs;
	p->tx.stride = (uint32_t)tx_stride(frame_len);
	p->frame_len = frame_len;
	init_rx(&p->rx);
	init_tx(&p->tx, frame_len);
	vring_set_frame(p, frame);
	return 0;
}

/* ---- the socket ---- */

static int sock_fail(const struct vring_port *p, const char *opt, const char *step,
		     const char *why)
{
	fprintf(stderr, "sluice-gen: --%s %s: %s: %s\n", opt, p->spec, step, why);
	return -1;
}

static int send_msg(struct vring_port *p, struct vu_msg *m, uint32_t payload, int fd)
{
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { m, VU_HDR_LEN + payload };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	ssize_t n;

	m->flags = VHOST_USER_VERSION;
	m->size = payload;
	if (fd >= 0) {
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		n = sendmsg(p->sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)iov.iov_len ? 0 : -1;
}

static int recv_all(int sock, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = recv(sock, (char *)buf + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ECONNRESET;
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

/* GET_FEATURES: the backend's features, once it has handled every earlier message. */
static int get_features(struct vring_port *p, const char *opt, uint64_t *features)
{
	struct vu_msg m = { .request = VHOST_USER_GET_FEATURES };

	if (send_msg(p, &m, 0, -1) != 0)
		return sock_fail(p, opt, "vhost-user GET_FEATURES", strerror(errno));
	if (recv_all(p->sock, &m, VU_HDR_LEN) != 0)
		return sock_fail(p, opt, "vhost-user GET_FEATURES", errno == EAGAIN ?
				 "no answer in 5 s" : errno == ECONNRESET ?
				 "the backend closed the connection (it refused a message: its "
				 "log says which)" : strerror(errno));
	if (m.request != VHOST_USER_GET_FEATURES || !(m.flags & VHOST_USER_REPLY) ||
	    m.size != sizeof(uint64_t) || recv_all(p->sock, &m.p.u64, sizeof(uint64_t)) != 0)
		return sock_fail(p, opt, "vhost-user GET_FEATURES", "a malformed answer");
	*features = m.p.u64;
	return 0;
}

static int send_u64(struct vring_port *p, uint32_t req, uint64_t v, int fd)
{
	struct vu_msg m = { .request = req, .p.u64 = v };

	return send_msg(p, &m, req == VHOST_USER_SET_OWNER ? 0 : sizeof(uint64_t), fd);
}

static int send_mem_table(struct vring_port *p, int fd)
{
	struct vu_msg m = { .request = VHOST_USER_SET_MEM_TABLE };
	uint64_t va = (uint64_t)(uintptr_t)p->mem;

	/* Addresses in descriptors and rings are our virtual addresses: guest = user. */
	m.p.mem.nregions = 1;
	m.p.mem.regions[0] = (struct vu_region){ .guest_phys_addr = va,
		.memory_size = p->mem_len, .userspace_addr = va, .mmap_offset = 0 };
	return send_msg(p, &m, 8 + sizeof(struct vu_region), fd);
}

static int setup_queue(struct vring_port *p, uint32_t index, struct vr_queue *q)
{
	struct vu_msg m = { .request = VHOST_USER_SET_VRING_NUM,
			    .p.state = { index, q->size } };

	q->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	q->callfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->kickfd < 0 || q->callfd < 0)
		return -1;
	if (send_u64(p, VHOST_USER_SET_VRING_CALL, index, q->callfd) != 0 ||
	    send_msg(p, &m, sizeof(m.p.state), -1) != 0)
		return -1;
	m = (struct vu_msg){ .request = VHOST_USER_SET_VRING_BASE, .p.state = { index, 0 } };
	if (send_msg(p, &m, sizeof(m.p.state), -1) != 0)
		return -1;
	m = (struct vu_msg){ .request = VHOST_USER_SET_VRING_ADDR, .p.addr = { .index = index,
		.desc = (uint64_t)(uintptr_t)q->desc, .used = (uint64_t)(uintptr_t)q->used,
		.avail = (uint64_t)(uintptr_t)q->avail } };
	if (send_msg(p, &m, sizeof(m.p.addr), -1) != 0)
		return -1;
	return send_u64(p, VHOST_USER_SET_VRING_KICK, index, q->kickfd);
}

static int connect_backend(struct vring_port *p, const char *opt)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char why[PEER_WHY_LEN];

	memcpy(sun.sun_path, p->cfg.path, strlen(p->cfg.path) + 1);
	p->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->sock < 0)
		return sock_fail(p, opt, "socket", strerror(errno));
	if (connect(p->sock, (const struct sockaddr *)&sun, sizeof(sun)) != 0) {
		peer_diagnose(p->cfg.path, false, why, sizeof(why));
		fprintf(stderr, "sluice-gen: --%s %s: cannot connect to vhost-user socket %s: "
			"%s\n", opt, p->spec, p->cfg.path, why);
		return -1;
	}
	return 0;
}

/* The handshake never waits for ever on a backend that does not answer. */
static void set_handshake_timeouts(struct vring_port *p)
{
	struct timeval tv = { HANDSHAKE_TIMEOUT_S, 0 };

	setsockopt(p->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(p->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * Server ports. A socket file left behind by a process that died makes bind() fail: it is
 * removed when nothing answers on it (as sluiced's server ports do); a socket that answers
 * is another process's, and any other kind of file is not ours to remove.
 */
static int clear_stale_socket(const struct vring_port *p, const char *opt)
{
	struct stat st;
	char why[PEER_WHY_LEN];

	if (lstat(p->cfg.path, &st) != 0)
		return errno == ENOENT ? 0 : sock_fail(p, opt, p->cfg.path, strerror(errno));
	if (!S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "sluice-gen: --%s %s: %s exists and is not a socket: not "
			"removing it\n", opt, p->spec, p->cfg.path);
		return -1;
	}
	/* peer_diagnose() false: something accepted a connection on it, so it is in use. */
	if (!peer_diagnose(p->cfg.path, false, why, sizeof(why))) {
		fprintf(stderr, "sluice-gen: --%s %s: socket %s is in use by another process\n",
			opt, p->spec, p->cfg.path);
		return -1;
	}
	if (unlink(p->cfg.path) != 0 && errno != ENOENT)
		return sock_fail(p, opt, "removing the stale socket", strerror(errno));
	return 0;
}

int vring_listen(struct vring_port *p, const char *opt)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	p->listening = false;
	if (clear_stale_socket(p, opt) != 0)
		return -1;
	memcpy(sun.sun_path, p->cfg.path, strlen(p->cfg.path) + 1);
	p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->listen_fd < 0)
		return sock_fail(p, opt, "socket", strerror(errno));
	if (bind(p->listen_fd, (const struct sockaddr *)&sun, sizeof(sun)) != 0) {
		sock_fail(p, opt, "cannot create the socket", strerror(errno));
		close(p->listen_fd);
		return -1;
	}
	p->listening = true;
	if (listen(p->listen_fd, 1) != 0) {
		sock_fail(p, opt, "listen", strerror(errno));
		vring_unlisten(p);
		return -1;
	}
	return 0;
}

void vring_unlisten(struct vring_port *p)
{
	if (!p->listening)
		return;
	p->listening = false;
	close(p->listen_fd);
	if (unlink(p->cfg.path) != 0 && errno != ENOENT)
		fprintf(stderr, "sluice-gen: cannot remove %s: %s\n", p->cfg.path,
			strerror(errno));
}

/*
 * Waits (up to accept_timeout s) for the backend, a switch's vhost-user client port, to
 * connect. Then the socket is closed and its file removed: one backend a port, and a
 * backend that goes away ends the run (it is not waited for again).
 */
static int accept_backend(struct vring_port *p, const char *opt)
{
	struct pollfd pfd = { .fd = p->listen_fd, .events = POLLIN };
	int rc;

	if (!p->listening)
		return sock_fail(p, opt, "accept", "not listening (vring_listen() first)");
	fprintf(stderr, "sluice-gen: --%s %s: waiting up to %u s for a vhost-user backend to "
		"connect to %s\n", opt, p->spec, p->cfg.accept_timeout, p->cfg.path);
	/* EINTR: one of our signal handlers ran (SIGINT, SIGTERM, ...): give up, as asked. */
	rc = poll(&pfd, 1, (int)p->cfg.accept_timeout * 1000);
	if (rc <= 0) {
		if (rc == 0)
			fprintf(stderr, "sluice-gen: --%s %s: no vhost-user backend connected to %s "
				"in %u s (is the switch running, with a vhost-user client port on "
				"this socket?)\n", opt, p->spec, p->cfg.path, p->cfg.accept_timeout);
		else
			sock_fail(p, opt, "waiting for the backend", errno == EINTR ?
				  "interrupted" : strerror(errno));
		vring_unlisten(p);
		return -1;
	}
	p->sock = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	vring_unlisten(p);
	if (p->sock < 0)
		return sock_fail(p, opt, "accept", strerror(errno));
	return 0;
}

static int handshake(struct vring_port *p, const char *opt, int memfd)
{
	uint64_t offered, again;

	if (get_features(p, opt, &offered) != 0)
		return -1;
	if (!(offered & (1ULL << VIRTIO_F_VERSION_1)))
		return sock_fail(p, opt, "vhost-user features", "the backend does not offer "
				 "VIRTIO_F_VERSION_1");
	p->features = 1ULL << VIRTIO_F_VERSION_1;
	if (send_u64(p, VHOST_USER_SET_OWNER, 0, -1) != 0 ||
	    send_u64(p, VHOST_USER_SET_FEATURES, p->features, -1) != 0 ||
	    send_mem_table(p, memfd) != 0 || setup_queue(p, 0, &p->rx) != 0 ||
	    setup_queue(p, 1, &p->tx) != 0)
		return sock_fail(p, opt, "vhost-user set-up", errno == EPIPE || errno ==
				 ECONNRESET ? "the backend closed the connection" : strerror(errno));
	return get_features(p, opt, &again);
}

int vring_open(struct vring_port *p, const char *opt, unsigned int queue_size,
	       const uint8_t *frame, uint16_t frame_len)
{
	unsigned int n = p->cfg.queue_size ? p->cfg.queue_size : queue_size;
	int memfd = -1, rc;

	p->sock = -1;
	if (layout(p, n, frame, frame_len, &memfd) != 0)
		return -1;
	rc = p->cfg.server ? accept_backend(p, opt) : connect_backend(p, opt);
	if (rc == 0) {
		set_handshake_timeouts(p);
		rc = handshake(p, opt, memfd);
	}
	/* The backend holds its own mapping now; our descriptor is no longer needed. */
	close(memfd);
	return rc;
}

unsigned int vring_send_aside(struct vring_port *p, const uint8_t *frame, uint16_t len,
			      unsigned int n)
{
	uint8_t own[VRING_MAX_FRAME];
	struct vr_queue *q = &p->tx;
	uint16_t start = q->used_idx, ids[8], i;
	struct timespec t0, t;
	uint8_t *b;

	n = n < 8 ? n : 8;
	vring_tx_room(p);
	if (q->n_free < n || len > p->frame_len)
		return 0;
	/* Every transmit buffer holds the same frame until the run starts: one copy of it. */
	memcpy(own, vring_tx_frame(p, 0), p->frame_len);
	for (i = 0; i < n; i++) {
		ids[i] = q->free[(uint16_t)(q->free_head + i) & q->mask];
		b = vring_tx_frame(p, i);
		memset(b, 0, p->frame_len);
		memcpy(b, frame, len);
	}
	vring_tx_post(p, (uint16_t)n);
	p->tx_packets -= n;          /* not the run's frames */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((uint16_t)(vr_load_used_idx(q) - start) < n &&
	       (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100000000L);
	vring_tx_room(p);
	for (i = 0; i < n; i++)
		memcpy(q->bufs + (size_t)ids[i] * q->stride + VRING_BUF_SKEW + VRING_HDR_LEN, own,
		       p->frame_len);
	return n;
}

void vring_kick(struct vring_port *p, struct vr_queue *q)
{
	uint64_t one = 1;

	p->kicks++;
	/* EAGAIN (the counter full) still leaves the device notified. */
	if (write(q->kickfd, &one, sizeof(one)) < 0)
		return;
}

bool vring_alive(struct vring_port *p)
{
	struct pollfd pfd = { .fd = p->sock, .events = POLLIN | POLLRDHUP };
	char c;

	if (p->closed)
		return false;
	/* vr_publish() may have missed a kick a device asked for just then: one now. */
	if (!(__atomic_load_n(&p->rx.used->flags, __ATOMIC_RELAXED) & VRING_USED_F_NO_NOTIFY))
		vring_kick(p, &p->rx);
	if (!(__atomic_load_n(&p->tx.used->flags, __ATOMIC_RELAXED) & VRING_USED_F_NO_NOTIFY))
		vring_kick(p, &p->tx);
	if (poll(&pfd, 1, 0) <= 0)
		return true;
	/* The backend sends nothing unasked: readable means closed, or a stray message. */
	if ((pfd.revents & (POLLHUP | POLLRDHUP | POLLERR)) ||
	    recv(p->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
		p->closed = true;
	return !p->closed;
}
