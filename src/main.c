/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluiced: start-up and shutdown. Parses sluice's own options (before "--"), builds EAL
 * arguments with defaults that suit a small machine, starts the workers and serves the
 * control socket until SIGINT or SIGTERM, then closes every port and frees the hugepages.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_pdump.h>
#include <rte_version.h>

#include "capture.h"
#include "ctl.h"
#include "log.h"
#include "notify.h"
#include "ofagent_proc.h"
#include "state.h"
#include "path_policy.h"
#include "port.h"
#include "sluice_version.h"
#include "rxq.h"
#include "worker.h"

#define DEFAULT_SOCKET "/run/sluice/sluiced.sock"
#define DEFAULT_STATE "/var/lib/sluice/sluiced.state"
#define MAX_EAL_ARGS 128

int sluice_logtype;

struct options {
	const char *socket;
	const char *config;
	const char *state;            /* NULL: the default; "": none */
	const char *log_level;
	const char *file_prefix;
	const char *worker_cpus;
	const char *ofagent;          /* the OpenFlow agent sluiced runs; NULL: none */
	int main_cpu;
	bool pci;
	struct port_config ports;
	struct wk_config workers;
	struct ctl_config ctl;
	struct rxq_settings rxq;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: sluiced [options] [-- EAL options]\n"
"\n"
"The sluice dataplane daemon. Switches and ports are made at run time with sluicectl\n"
"(or --config); see docs/user-guide.md.\n"
"\n"
"options:\n"
"  --socket PATH        control socket (default %s, mode 0660)\n"
"  --socket-group NAME  give the control socket to group NAME, so its members may use\n"
"                       sluicectl without root (no such group: a warning, and the\n"
"                       socket keeps the daemon's group); the service passes sluice\n"
"  --config FILE        JSON-RPC requests to run at start, one per line; ignored when\n"
"                       a state file exists (the state holds what it made)\n"
"  --state FILE         keep the configuration in FILE, rewritten on every change and\n"
"                       restored at start (default " DEFAULT_STATE " with the\n"
"                       default socket, none with another --socket)\n"
"  --no-state           keep no state file\n"
"  --log-level LEVEL    emerg|alert|crit|error|warning|notice|info|debug (default info)\n"
"  --file-prefix NAME   DPDK file prefix, unique per process (default sluiced)\n"
"  --main-cpu N         CPU of the control thread (default: first CPU we may use)\n"
"  --worker-cpus LIST   CPUs of the poll-loop workers, e.g. 1 or 2,3 (default: the\n"
"                       last CPU we may use; with one CPU, the same as --main-cpu)\n"
"  --burst N            receive burst, 1..256 packets (default 32)\n"
"  --idle-sleep-us N    longest sleep of a worker between bursts in microseconds (after\n"
"                       100 ms without a packet, naps grow to 1 ms); 0 busy-polls\n"
"                       (default 50)\n"
"  --mbufs N            packet buffers per pool; pools are added as ports need them\n"
"                       (default 32767)\n"
"  --rx-desc N          receive descriptors per port (default 1024)\n"
"  --tx-desc N          transmit descriptors per port and worker (default 1024)\n"
"  --rxq-assign MODE    where a new receive queue goes: roundrobin (the worker with the\n"
"                       fewest queues, default) or cycles (the least measured load)\n"
"  --auto-rebalance     move receive queues when one worker is overloaded and another\n"
"                       is not (docs/cores.md; sluicectl set-rebalance changes it)\n"
"  --rxq-move-gap-us N  pause between a moved receive queue's old worker and its new\n"
"                       one, for receivers that read several queues of a port\n"
"                       (docs/cores.md; 0..100000, default 1000)\n"
"  --pci                let PCI ports be added (default: no PCI bus scan)\n"
"  --port-dir DIR       files and sockets in port specs must lie under DIR (symlinks\n"
"                       resolved); repeat for more directories (default: anywhere,\n"
"                       within the path policy of docs/operations.md)\n"
"  --port-setup-timeout S  cancel a port set-up (add-port) still waiting for its peer\n"
"                       after S seconds; 0 never (default 30)\n"
"  --client-idle-timeout S  close a control connection that sent and read nothing\n"
"                       for S seconds; 0 never (default 60)\n"
"  --ofagent PROG       the OpenFlow agent to run for each flow switch with controllers\n"
"                       (default sluice-ofagent, found on $PATH; docs/openflow.md)\n"
"  --no-ofagent         run no agent (sluice-ofagent is started by hand)\n"
"  -h, --help           this text\n"
"  -V, --version        print versions and exit\n"
"\n"
"EAL options after \"--\" are passed to DPDK and override the defaults sluiced picks\n"
"(-l/--lcores, --file-prefix, ...). Defaults: --single-file-segments, --no-pci,\n"
"--lcores 0@MAIN,1@WORKER.\n", DEFAULT_SOCKET);
}

static int parse_uint_opt(const char *name, const char *v, unsigned long min,
			  unsigned long max, unsigned int *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno != 0 || *v == '\0' || *end != '\0' || n < min || n > max) {
		fprintf(stderr, "sluiced: --%s must be an integer from %lu to %lu, not '%s'\n",
			name, min, max, v);
		return -1;
	}
	*out = (unsigned int)n;
	return 0;
}

enum { O_SOCKET = 256, O_CONFIG, O_LOG, O_PREFIX, O_MAIN_CPU, O_WORKER_CPUS, O_BURST,
       O_IDLE, O_MBUFS, O_RXD, O_TXD, O_PCI, O_PORT_DIR, O_CLIENT_IDLE, O_STATE, O_NO_STATE,
       O_SETUP_TIMEOUT, O_SOCKET_GROUP, O_RXQ_ASSIGN, O_AUTO_REBALANCE, O_OFAGENT,
       O_NO_OFAGENT, O_MOVE_GAP };

static int parse_one(struct options *o, int c, const char *arg)
{
	char err[PATH_MAX + 64];
	unsigned int v;

	switch (c) {
	case O_SOCKET: o->socket = arg; return 0;
	case O_SOCKET_GROUP: o->ctl.socket_group = arg; return 0;
	case O_CONFIG: o->config = arg; return 0;
	case O_STATE: o->state = arg; return 0;
	case O_NO_STATE: o->state = ""; return 0;
	case O_OFAGENT: o->ofagent = arg; return 0;
	case O_NO_OFAGENT: o->ofagent = NULL; return 0;
	case O_LOG: o->log_level = arg; return 0;
	case O_PREFIX: o->file_prefix = arg; return 0;
	case O_WORKER_CPUS: o->worker_cpus = arg; return 0;
	case O_PCI: o->pci = true; return 0;
	case O_AUTO_REBALANCE: o->rxq.auto_lb = true; return 0;
	case O_RXQ_ASSIGN:
		if (rxq_assign_parse(arg, &o->rxq.assign) == 0)
			return 0;
		fprintf(stderr, "sluiced: --rxq-assign must be roundrobin or cycles, not '%s'\n",
			arg);
		return -1;
	case O_PORT_DIR:
		if (path_policy_allow_dir(arg, err, sizeof(err)) == 0)
			return 0;
		fprintf(stderr, "sluiced: %s\n", err);
		return -1;
	case O_MAIN_CPU:
		if (parse_uint_opt("main-cpu", arg, 0, CPU_SETSIZE - 1, &v) != 0)
			return -1;
		o->main_cpu = (int)v;
		return 0;
	case O_BURST: return parse_uint_opt("burst", arg, 1, 256, &o->workers.burst);
	case O_IDLE: return parse_uint_opt("idle-sleep-us", arg, 0, 100000,
					   &o->workers.idle_sleep_us);
	case O_MBUFS: return parse_uint_opt("mbufs", arg, 1024, 1U << 24, &o->ports.n_mbufs);
	case O_RXD: return parse_uint_opt("rx-desc", arg, 32, 32768, &o->ports.rx_desc);
	case O_TXD: return parse_uint_opt("tx-desc", arg, 32, 32768, &o->ports.tx_desc);
	case O_SETUP_TIMEOUT: return parse_uint_opt("port-setup-timeout", arg, 0, 86400,
						    &o->ports.setup_timeout_s);
	case O_MOVE_GAP: return parse_uint_opt("rxq-move-gap-us", arg, 0, RXQ_MOVE_GAP_US_MAX,
					       &o->rxq.move_gap_us);
	case O_CLIENT_IDLE: return parse_uint_opt("client-idle-timeout", arg, 0, 86400,
						  &o->ctl.idle_timeout_s);
	case 'h': usage(stdout); exit(0);
	case 'V':
		printf("sluiced %s (%s)\n", SLUICE_VERSION, rte_version());
		exit(0);
	default:
		usage(stderr);
		return -1;
	}
}

/* Parses sluice's options; returns the index of the first EAL argument, or -1. */
static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "socket-group", required_argument, NULL, O_SOCKET_GROUP },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "state", required_argument, NULL, O_STATE },
		{ "no-state", no_argument, NULL, O_NO_STATE },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "file-prefix", required_argument, NULL, O_PREFIX },
		{ "main-cpu", required_argument, NULL, O_MAIN_CPU },
		{ "worker-cpus", required_argument, NULL, O_WORKER_CPUS },
		{ "burst", required_argument, NULL, O_BURST },
		{ "idle-sleep-us", required_argument, NULL, O_IDLE },
		{ "mbufs", required_argument, NULL, O_MBUFS },
		{ "rx-desc", required_argument, NULL, O_RXD },
		{ "tx-desc", required_argument, NULL, O_TXD },
		{ "pci", no_argument, NULL, O_PCI },
		{ "rxq-assign", required_argument, NULL, O_RXQ_ASSIGN },
		{ "auto-rebalance", no_argument, NULL, O_AUTO_REBALANCE },
		{ "rxq-move-gap-us", required_argument, NULL, O_MOVE_GAP },
		{ "port-dir", required_argument, NULL, O_PORT_DIR },
		{ "client-idle-timeout", required_argument, NULL, O_CLIENT_IDLE },
		{ "port-setup-timeout", required_argument, NULL, O_SETUP_TIMEOUT },
		{ "ofagent", required_argument, NULL, O_OFAGENT },
		{ "no-ofagent", no_argument, NULL, O_NO_OFAGENT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1)
		if (parse_one(o, c, optarg) != 0)
			return -1;
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		fprintf(stderr, "sluiced: unexpected argument '%s' (EAL options go after --)\n",
			argv[optind]);
		return -1;
	}
	return optind;
}

/* The DPDK file prefix in use: --file-prefix after "--" wins over sluice's own option. */
static const char *file_prefix(const struct options *o, int argc, char **argv, int first)
{
	const char *prefix = o->file_prefix ? o->file_prefix : "sluiced";
	int i;

	for (i = first; i < argc; i++) {
		if (strcmp(argv[i], "--file-prefix") == 0 && i + 1 < argc)
			prefix = argv[i + 1];
		else if (strncmp(argv[i], "--file-prefix=", 14) == 0)
			prefix = argv[i] + 14;
	}
	return prefix;
}

static bool eal_has(int argc, char **argv, const char *const *names)
{
	int i, j;

	for (i = 0; i < argc; i++)
		for (j = 0; names[j] != NULL; j++)
			if (strncmp(argv[i], names[j], strlen(names[j])) == 0)
				return true;
	return false;
}

/* "0@MAIN,1@W1,2@W2": lcore 0 is the main thread, the others the workers. */
static int default_lcores(const struct options *o, char *buf, size_t len)
{
	int cpus[CPU_SETSIZE], n = 0, i, main_cpu, lcore = 1;
	cpu_set_t set;
	size_t used;
	char list[256], *tok, *save;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	if (n == 0)
		return -1;
	main_cpu = o->main_cpu >= 0 ? o->main_cpu : cpus[0];
	used = (size_t)snprintf(buf, len, "0@%d", main_cpu);
	if (o->worker_cpus == NULL) {
		snprintf(buf + used, len - used, ",1@%d", cpus[n - 1]);
		return 0;
	}
	snprintf(list, sizeof(list), "%s", o->worker_cpus);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long cpu = strtol(tok, &end, 10);

		if (*end != '\0' || cpu < 0 || cpu >= CPU_SETSIZE || used >= len) {
			fprintf(stderr, "sluiced: --worker-cpus: bad CPU '%s'\n", tok);
			return -1;
		}
		used += (size_t)snprintf(buf + used, len - used, ",%d@%ld", lcore++, cpu);
	}
	return 0;
}

static int build_eal_args(const struct options *o, int argc, char **argv, int first,
			  char **eal, char *lcores, size_t lcores_len)
{
	static const char *const lcore_opts[] = { "-l", "-c", "--lcores", NULL };
	static const char *const prefix_opts[] = { "--file-prefix", NULL };
	static const char *const pci_opts[] = { "--no-pci", "-a", "--allow", "-b", "--block",
						 NULL };
	int user = argc - first, n = 0, i;

	if (user > MAX_EAL_ARGS - 12)
		return -1;
	eal[n++] = argv[0];
	if (!eal_has(user, argv + first, prefix_opts)) {
		eal[n++] = "--file-prefix";
		eal[n++] = (char *)(o->file_prefix ? o->file_prefix : "sluiced");
	}
	/* virtio-user clients move nothing unless the vhost side's memory is one file. */
	eal[n++] = "--single-file-segments";
	if (!o->pci && !eal_has(user, argv + first, pci_opts))
		eal[n++] = "--no-pci";
	if (!eal_has(user, argv + first, lcore_opts)) {
		if (default_lcores(o, lcores, lcores_len) != 0)
			return -1;
		eal[n++] = "--lcores";
		eal[n++] = lcores;
	}
	/* DPDK's own chatter stays at warnings; sluice's log follows --log-level (main()). */
	eal[n++] = "--log-level=*:warning";
	for (i = first; i < argc; i++)
		eal[n++] = argv[i];
	eal[n] = NULL;
	return n;
}

static const char *const level_names[] = { "emerg", "alert", "crit", "error", "warning",
					    "notice", "info", "debug", NULL };

/* RTE_LOG_EMERG (1) .. RTE_LOG_DEBUG (8) for a --log-level name; 0 if unknown. */
static uint32_t log_level_value(const char *name)
{
	uint32_t i;

	for (i = 0; level_names[i] != NULL; i++)
		if (strcmp(level_names[i], name) == 0)
			return i + 1;
	return 0;
}

static void block_signals(void)
{
	sigset_t set;

	/*
	 * Blocked before the EAL makes its threads, so only ctl_serve's signalfd sees SIGINT
	 * and SIGTERM, and only the port set-up thread (which unblocks it) SIGUSR1 (port.h).
	 */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/*
 * DPDK keeps a hugepage file while any allocation lives in it, and some of its own outlive
 * rte_eal_cleanup(), so a clean exit could leave <prefix>map_* files behind. The prefix is
 * ours alone (the EAL holds a lock on it while we run), so remove them from every hugetlbfs
 * mount once DPDK is done.
 */
static void remove_own_hugepage_files(const char *prefix)
{
	char line[512], dir[256], type[64], path[PATH_MAX];
	FILE *mounts = fopen("/proc/mounts", "r");
	size_t len = strlen(prefix);
	struct dirent *e;
	DIR *d;

	if (mounts == NULL)
		return;
	while (fgets(line, sizeof(line), mounts) != NULL) {
		if (sscanf(line, "%*s %255s %63s", dir, type) != 2 || strcmp(type, "hugetlbfs") != 0)
			continue;
		d = opendir(dir);
		while (d != NULL && (e = readdir(d)) != NULL)
			if (strncmp(e->d_name, prefix, len) == 0 &&
			    strncmp(e->d_name + len, "map_", 4) == 0 &&
			    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
				unlink(path);
		if (d != NULL)
			closedir(d);
	}
	fclose(mounts);
}

/* The state file's path: --state, or the default for the default socket only, so that a
 * second daemon (tests, benchmarks) does not take over the first one's configuration. */
static const char *state_path(const struct options *o)
{
	if (o->state != NULL)
		return o->state;
	return strcmp(o->socket, DEFAULT_SOCKET) == 0 ? DEFAULT_STATE : "";
}

/*
 * The configuration at start: the state file when there is one (a restart), else --config
 * (a first start), whose result then becomes the state.
 */
static int configure(const struct options *o)
{
	state_init(state_path(o));
	if (state_exists()) {
		if (o->config != NULL)
			LOG(NOTICE, "state file %s exists: restoring it, not --config %s",
			    state_file(), o->config);
		return state_restore();
	}
	state_init(NULL);       /* one save at the end, not one per line */
	if (o->config != NULL && ctl_apply_config(o->config) != 0)
		return -1;
	state_init(state_path(o));
	state_save();
	return 0;
}

static int run(const struct options *o)
{
	int rc = 1;

	port_init(&o->ports);
	ctl_init(&o->ctl);
	if (wk_init(rte_lcore_count() - 1, &o->workers) != 0 || wk_start() != 0)
		return 1;
	rxq_init(&o->rxq);
	if (ctl_listen(o->socket) != 0)
		goto stop;
	ofa_init(o->ofagent, o->socket);
	if (configure(o) != 0)
		goto stop;
	LOG(NOTICE, "sluiced %s ready, %u worker(s)", SLUICE_VERSION, wk_count());
	/* The socket listens and the configuration is applied: a client connecting now is
	 * served as soon as ctl_serve starts, a moment later. */
	if (notify_send("READY=1\nSTATUS=serving the control socket") != 0)
		LOG(WARNING, "cannot notify the service manager on $NOTIFY_SOCKET: %s",
		    strerror(errno));
	rc = ctl_serve() == 0 ? 0 : 1;
	ofa_stop_all();
stop:
	wk_stop();
	ctl_delete_all();
	ctl_close();
	return rc;
}

int main(int argc, char **argv)
{
	struct options o = {
		.socket = DEFAULT_SOCKET, .main_cpu = -1, .log_level = "info",
		.ofagent = "sluice-ofagent",
		.ports = { .n_workers = 1, .rx_desc = 1024, .tx_desc = 1024, .n_mbufs = 32767,
			   .setup_timeout_s = 30 },
		.workers = { .burst = 32, .idle_sleep_us = 50 },
		.ctl = { .idle_timeout_s = 60 },
		.rxq = { .assign = RXQ_ASSIGN_ROUNDROBIN, .interval_s = 60, .load_threshold = 95,
			 .improvement = 25, .move_gap_us = RXQ_MOVE_GAP_US_DEFAULT },
	};
	char *eal[MAX_EAL_ARGS], lcores[512];
	int first, n, rc;

	first = parse_options(argc, argv, &o);
	if (first < 0)
		return 2;
	if (log_level_value(o.log_level) == 0) {
		fprintf(stderr, "sluiced: --log-level: unknown level '%s'\n", o.log_level);
		return 2;
	}
	n = build_eal_args(&o, argc, argv, first, eal, lcores, sizeof(lcores));
	if (n < 0) {
		fprintf(stderr, "sluiced: cannot build the EAL arguments\n");
		return 2;
	}
	block_signals();
	if (rte_eal_init(n, eal) < 0) {
		fprintf(stderr, "sluiced: DPDK initialisation failed: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	/* The EAL logs to buffered stdout; a daemon's log must not sit in a buffer. */
	rte_openlog_stream(stderr);
	sluice_logtype = rte_log_register_type_and_pick_level("sluice", RTE_LOG_INFO);
	rte_log_set_level(sluice_logtype, log_level_value(o.log_level));
	if (rte_lcore_count() < 2) {
		LOG(ERR, "need at least two lcores (control and one worker); see --worker-cpus");
		rte_eal_cleanup();
		return 1;
	}
	/*
	 * Lets a DPDK secondary process such as dpdk-dumpcap capture any port. This only
	 * registers the request handler: pdump installs its rx/tx callbacks while a capture
	 * runs and removes them when it ends, so a port nobody captures pays nothing.
	 */
	if (rte_pdump_init() != 0)
		LOG(WARNING, "packet capture unavailable: rte_pdump_init: %s",
		    rte_strerror(rte_errno));
	o.ports.n_workers = rte_lcore_count() - 1;
	if (o.ports.n_workers > WK_MAX_WORKERS) {
		LOG(ERR, "at most %d workers", WK_MAX_WORKERS);
		rte_eal_cleanup();
		return 1;
	}
	rc = run(&o);
	cap_fini();       /* what ctl_close() left: nothing, unless a client outlived it */
	rte_pdump_uninit();
	wk_fini();
	port_fini();
	rte_eal_cleanup();
	remove_own_hugepage_files(file_prefix(&o, argc, argv, first));
	return rc;
}
