/*
 * tools/bench_servers.c — `stagecache bench servers`: L2 gets from another process, side by side
 * with what users would pick otherwise: memcached (libmemcached, Unix socket and loopback TCP) and
 * Redis (hiredis, Unix socket).
 *
 * Processes. This process (the "setup" process) creates a private arena, admits the values, starts
 * the servers (fork + exec, each in a private temp dir, local sockets only) and stores the same
 * values in them. Every measurement then runs in a freshly forked client process, so no get is
 * served from the memory of the process that stored the value: the L2 reader attaches with
 * sc_arena_open + sc_stage_open, the server clients open their own connection. The client sends its
 * rate back over a pipe; the parent waits for it with a timeout and kills a client that hangs.
 *
 * Rounds. Every (size, system) measurement is repeated --reps times; the rounds are interleaved
 * (round 1 of everything, then round 2, ...) so that a noisy neighbour hurts every system alike, and
 * the medians are reported. The first round also verifies every value byte for byte.
 *
 * Cleanup. Servers are stopped with SIGTERM (SIGKILL after 5 s) and reaped, and the temp dir and
 * the arena are removed on every path: normal end, error, SIGINT/SIGTERM/SIGHUP (an async-signal-
 * safe handler), and the death of this process (the servers get PR_SET_PDEATHSIG).
 *
 * The L2 functions are referenced weakly, so this file links while the L2 tier is being written;
 * without them only the server half runs and the command says so and fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <libmemcached/memcached.h>

#include "cli.h"

#pragma weak sc_digest
#pragma weak sc_stage_open
#pragma weak sc_stage_close
#pragma weak sc_l2_key
#pragma weak sc_l2_admit
#pragma weak sc_l2_get
#pragma weak sc_l2_get_key
#pragma weak sc_lease_release
#pragma weak sc_l2_get_copy

#define B "servers"
#define MAX_KEYS 256
#define NTOK 8                  /* tokens per key: a short distinct prefix */
#define START_TIMEOUT_S 10.0    /* a server must accept connections within this */
#define CLIENT_SLACK_S 60.0     /* connect + verify allowance on top of the timed loop */
#define L2_NS "bench-servers"

static const struct {
	const char *tag;
	uint64_t bytes;
} sizes[] = { { "4k", 4096 }, { "64k", 65536 }, { "1m", 1u << 20 } };
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

enum sys { SYS_L2_ZC, SYS_L2_COPY, SYS_MC_UNIX, SYS_MC_TCP, SYS_REDIS, NSYS };
static const char *const sys_name[NSYS] = { "l2_zero_copy", "l2_copy", "memcached_unix", "memcached_tcp",
					     "redis_unix" };

enum srv { SRV_MC_UNIX, SRV_MC_TCP, SRV_REDIS, NSRV };
static const char *const srv_tag[NSRV] = { "memcached-unix", "memcached-tcp", "redis" };

struct server {
	pid_t pid;
	int port;               /* TCP only */
	char sock[96];          /* Unix socket path */
	char log[96];
	char version[32];
	int up;
};

struct cfg {
	double seconds;
	int reps;
	int keys;
	int json;
};

/* ---- state the signal handler also reads (written before it can matter) ---- */
static char g_tmpdir[64];
static struct server g_srv[NSRV];
static volatile pid_t g_client = -1;
static char g_arena_path[4096];

/* where the timed loops put the bytes they touch, so no compiler drops the touch */
static volatile unsigned g_sink;

/* ---- keys and values ---- */
static char mkey[NSIZES][MAX_KEYS][32];
static size_t mkey_len[NSIZES][MAX_KEYS];
static int32_t tokens[NSIZES][MAX_KEYS][NTOK];
static struct sc_key l2key[NSIZES][MAX_KEYS];

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The value of key @i of size class @si: incompressible, distinct per key. */
static void value_fill(int si, int i, uint8_t *buf)
{
	uint64_t s = ((uint64_t)si << 32) | (uint64_t)i;
	for (uint64_t o = 0; o < sizes[si].bytes; o += 8) {
		uint64_t w = splitmix(&s);
		memcpy(buf + o, &w, 8);
	}
}

static void keys_init(int nkeys)
{
	for (int si = 0; si < NSIZES; si++)
		for (int i = 0; i < nkeys; i++) {
			mkey_len[si][i] = (size_t)snprintf(mkey[si][i], sizeof(mkey[si][i]), "scbench:%s:%03d",
							   sizes[si].tag, i);
			for (int t = 0; t < NTOK; t++)
				tokens[si][i][t] = (int32_t)(0x5c000000 | si << 16 | i << 4 | t);
		}
}

/* ---- servers ---- */

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* SIGTERM, wait up to @grace_s, then SIGKILL; always reaps. Async-signal-safe. */
static void stop_pid(pid_t pid, double grace_s)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < (int)(grace_s * 100); i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void stop_servers(void)
{
	for (int s = 0; s < NSRV; s++) {
		stop_pid(g_srv[s].pid, 5.0);
		g_srv[s].pid = 0;
		g_srv[s].up = 0;
	}
}

/* Remove a temp dir of ours and the files in it (the servers' sockets, logs, anything they wrote). */
static void remove_dir_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char p[PATH_MAX];
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

static void remove_tmpdir(void)
{
	if (!g_tmpdir[0])
		return;
	remove_dir_files(g_tmpdir);
	g_tmpdir[0] = 0;
}

/* Is @s "<prefix><pid><sep>..." (or "<prefix><pid>" when sep is 0) with a pid that no longer runs? */
static int names_dead_run(const char *s, const char *prefix, char sep)
{
	size_t pl = strlen(prefix);
	if (strncmp(s, prefix, pl))
		return 0;
	char *end;
	errno = 0;
	long pid = strtol(s + pl, &end, 10);
	if (errno || end == s + pl || pid <= 0 || pid > INT_MAX || *end != sep)
		return 0;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void sweep_arena(const char *dir, const char *name, void *ctx)
{
	(void)ctx;
	if (names_dead_run(name, "sc-bench-servers-", 0))
		sc_arena_destroy(dir, name);
}

/* What a run killed with SIGKILL leaves behind (its servers die with it: PR_SET_PDEATHSIG): the temp
 * dir and the arena, both named after its pid. Remove those of runs that are gone. */
static void sweep_dead_runs(void)
{
	DIR *d = opendir("/tmp");
	if (d) {
		struct dirent *e;
		char p[PATH_MAX];
		while ((e = readdir(d)))
			if (names_dead_run(e->d_name, "sc-bench-servers.", '.')) {
				snprintf(p, sizeof(p), "/tmp/%s", e->d_name);
				remove_dir_files(p);
			}
		closedir(d);
	}
	sc_arena_list(NULL, sweep_arena, NULL);
}

static void on_signal(int sig)
{
	if (g_client > 0)
		kill(g_client, SIGKILL);
	for (int s = 0; s < NSRV; s++)
		stop_pid(g_srv[s].pid, 2.0);
	if (g_tmpdir[0]) {
		for (int s = 0; s < NSRV; s++) {
			if (g_srv[s].sock[0])
				unlink(g_srv[s].sock);
			if (g_srv[s].log[0])
				unlink(g_srv[s].log);
		}
		rmdir(g_tmpdir);
	}
	if (g_arena_path[0])
		unlink(g_arena_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static const int handled_signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction saved_actions[3];

static void signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		sigaction(handled_signals[i], &sa, &saved_actions[i]);
}

static void signals_restore(void)
{
	for (int i = 0; i < 3; i++)
		sigaction(handled_signals[i], &saved_actions[i], NULL);
}

/* In a freshly forked child: no inherited cleanup duty, and die with the parent. */
static void child_detach(pid_t parent, int deathsig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int i = 0; i < 3; i++)
		sigaction(handled_signals[i], &sa, NULL);
	prctl(PR_SET_PDEATHSIG, deathsig);
	if (getppid() != parent)
		_exit(127);
}

static int free_tcp_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int port = -EADDRNOTAVAIL;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Can we connect to the server yet? 1 yes, 0 not yet. */
static int server_accepts(const struct server *sv)
{
	int fd;
	int ok;
	if (sv->port) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)sv->port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	} else {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", sv->sock);
		ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

static void print_log_tail(const struct server *sv)
{
	char buf[2048];
	int fd = open(sv->log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	lseek(fd, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0, SEEK_SET);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		fprintf(stderr, "--- %s log ---\n%s%s", srv_tag[sv - g_srv], buf, buf[n - 1] == '\n' ? "" : "\n");
	}
}

static int add_args(const char **argv, int n, const char *const *more)
{
	while (*more)
		argv[n++] = *more++;
	return n;
}

/* Start server @s on its local socket and wait until it accepts connections. 0 or -1 (said why). */
static int server_start(int s, uint64_t mem_mb)
{
	struct server *sv = &g_srv[s];
	char mem[32], port[16];
	const char *argv[40];
	int n = 0;

	snprintf(sv->log, sizeof(sv->log), "%s/%s.log", g_tmpdir, srv_tag[s]);
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)mem_mb);
	if (s == SRV_REDIS) {
		snprintf(sv->sock, sizeof(sv->sock), "%s/redis.sock", g_tmpdir);
		n = add_args(argv, n, (const char *const[]){ "redis-server", "--port", "0", "--unixsocket", sv->sock,
							      "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
							      "--dir", g_tmpdir, "--daemonize", "no", "--databases", "1",
							      NULL });
	} else {
		/* -I: the largest item, 1 MiB values plus their header; -t 2: one thread per core */
		n = add_args(argv, n, (const char *const[]){ "memcached", "-m", mem, "-I", "2m", "-t", "2", "-c", "64", NULL });
		if (geteuid() == 0) /* memcached refuses to run as root without -u */
			n = add_args(argv, n, (const char *const[]){ "-u", "root", NULL });
		if (s == SRV_MC_UNIX) {
			snprintf(sv->sock, sizeof(sv->sock), "%s/memcached.sock", g_tmpdir);
			n = add_args(argv, n, (const char *const[]){ "-s", sv->sock, "-a", "0700", NULL });
		} else {
			int p = free_tcp_port();
			if (p < 0) {
				fprintf(stderr, "stagecache bench servers: no free loopback port: %s\n", strerror(-p));
				return -1;
			}
			sv->port = p;
			snprintf(port, sizeof(port), "%d", p);
			n = add_args(argv, n, (const char *const[]){ "-l", "127.0.0.1", "-p", port, "-U", "0", NULL });
		}
	}
	argv[n] = NULL;

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "stagecache bench servers: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		child_detach(parent, SIGTERM);
		int fd = open(sv->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nul >= 0)
			dup2(nul, 0);
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	sv->pid = pid;
	double deadline = cli_now() + START_TIMEOUT_S;
	while (cli_now() < deadline) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			sv->pid = 0;
			fprintf(stderr, "stagecache bench servers: %s exited at start (%s %d)\n", argv[0],
				WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			print_log_tail(sv);
			return -1;
		}
		if (server_accepts(sv)) {
			sv->up = 1;
			return 0;
		}
		sleep_s(0.01);
	}
	fprintf(stderr, "stagecache bench servers: %s did not accept connections within %.0f s\n", argv[0],
		START_TIMEOUT_S);
	print_log_tail(sv);
	stop_pid(pid, 2.0);
	sv->pid = 0;
	return -1;
}

/* ---- server clients: one connection, one value at a time, as a worker would ---- */

struct conn {
	int s;                  /* enum srv */
	memcached_st *m;
	redisContext *r;
};

static int conn_open(struct conn *k, int s)
{
	memset(k, 0, sizeof(*k));
	k->s = s;
	if (s == SRV_REDIS) {
		struct timeval tv = { 5, 0 };
		k->r = redisConnectUnixWithTimeout(g_srv[s].sock, tv);
		if (k->r && !k->r->err)
			return 0;
		fprintf(stderr, "stagecache bench servers: hiredis connect: %s\n", k->r ? k->r->errstr : "out of memory");
		if (k->r)
			redisFree(k->r);
		return -1;
	}
	if (!(k->m = memcached_create(NULL)))
		return -1;
	memcached_return_t rc = s == SRV_MC_UNIX ? memcached_server_add_unix_socket(k->m, g_srv[s].sock)
						 : memcached_server_add(k->m, "127.0.0.1", (in_port_t)g_srv[s].port);
	if (rc == MEMCACHED_SUCCESS && s == SRV_MC_TCP)
		rc = memcached_behavior_set(k->m, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
	if (rc == MEMCACHED_SUCCESS)
		return 0;
	fprintf(stderr, "stagecache bench servers: libmemcached: %s\n", memcached_strerror(k->m, rc));
	memcached_free(k->m);
	return -1;
}

static void conn_close(struct conn *k)
{
	if (k->m)
		memcached_free(k->m);
	if (k->r)
		redisFree(k->r);
}

static int conn_set(struct conn *k, int si, int i, const uint8_t *v)
{
	int ok;
	if (k->m) {
		memcached_return_t r = memcached_set(k->m, mkey[si][i], mkey_len[si][i], (const char *)v, sizes[si].bytes, 0, 0);
		if (!(ok = r == MEMCACHED_SUCCESS))
			fprintf(stderr, "stagecache bench servers: %s set %s: %s\n", srv_tag[k->s], mkey[si][i],
				memcached_strerror(k->m, r));
	} else {
		redisReply *r = redisCommand(k->r, "SET %b %b", mkey[si][i], mkey_len[si][i], v, (size_t)sizes[si].bytes);
		if (!(ok = r && r->type == REDIS_REPLY_STATUS))
			fprintf(stderr, "stagecache bench servers: redis SET %s: %s\n", mkey[si][i],
				r ? (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply") : k->r->errstr);
		if (r)
			freeReplyObject(r);
	}
	return ok ? 0 : -1;
}

/* GET key @i of size class @si: *v, *len describe the value held by *hold until conn_put(*hold).
 * 0, or -1 (said why). Both clients hand out a private copy of the value. */
static int conn_get(struct conn *k, int si, int i, const uint8_t **v, size_t *len, void **hold)
{
	if (k->m) {
		uint32_t fl;
		memcached_return_t r;
		char *x = memcached_get(k->m, mkey[si][i], mkey_len[si][i], len, &fl, &r);
		if (!x) {
			fprintf(stderr, "stagecache bench servers: %s get %s: %s\n", srv_tag[k->s], mkey[si][i],
				memcached_strerror(k->m, r));
			return -1;
		}
		*v = (const uint8_t *)x;
		*hold = x;
		return 0;
	}
	redisReply *r = redisCommand(k->r, "GET %b", mkey[si][i], mkey_len[si][i]);
	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "stagecache bench servers: redis GET %s: %s\n", mkey[si][i], r ? "unexpected reply" : k->r->errstr);
		if (r)
			freeReplyObject(r);
		return -1;
	}
	*v = (const uint8_t *)r->str;
	*len = r->len;
	*hold = r;
	return 0;
}

static void conn_put(struct conn *k, void *hold)
{
	if (k->m)
		free(hold);
	else
		freeReplyObject(hold);
}

/* Store every value in server @s (from this, the setup process) and note its version. 0 or -1. */
static int server_load(int s, int nkeys, uint8_t *scratch)
{
	struct conn k;
	if (conn_open(&k, s))
		return -1;
	for (int si = 0; si < NSIZES; si++)
		for (int i = 0; i < nkeys; i++) {
			value_fill(si, i, scratch);
			if (conn_set(&k, si, i, scratch)) {
				conn_close(&k);
				return -1;
			}
		}
	if (k.m) {
		const memcached_instance_st *in;
		if (memcached_version(k.m) == MEMCACHED_SUCCESS && (in = memcached_server_instance_by_position(k.m, 0)))
			snprintf(g_srv[s].version, sizeof(g_srv[s].version), "%u.%u.%u", memcached_server_major_version(in),
				 memcached_server_minor_version(in), memcached_server_micro_version(in));
	} else {
		redisReply *r = redisCommand(k.r, "INFO server");
		const char *v = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "redis_version:") : NULL;
		if (v)
			sscanf(v + 14, "%31[0-9.]", g_srv[s].version);
		if (r)
			freeReplyObject(r);
	}
	conn_close(&k);
	return 0;
}

static int check_value(const char *who, int si, int i, const uint8_t *got, size_t len, uint8_t *scratch)
{
	if (len != sizes[si].bytes) {
		fprintf(stderr, "stagecache bench servers: %s: %s has %zu bytes, expected %llu\n", who, mkey[si][i], len,
			(unsigned long long)sizes[si].bytes);
		return -1;
	}
	value_fill(si, i, scratch);
	if (memcmp(got, scratch, len)) {
		fprintf(stderr, "stagecache bench servers: %s: %s has the wrong bytes\n", who, mkey[si][i]);
		return -1;
	}
	return 0;
}

/* How often the timed loops look at the clock: rare enough to cost nothing, often enough to stop
 * within a few ms of the deadline even at 1 MiB per get. */
#define CLOCK_EVERY 16

/* In the client process: connect, check every value, then GET in a loop for @seconds. */
static double server_client(int s, int si, int nkeys, double seconds, int verify, uint8_t *scratch)
{
	struct conn k;
	const uint8_t *v;
	size_t len;
	void *hold;
	double rate = -1;
	if (conn_open(&k, s))
		return -1;
	/* first pass: connects, warms, and (first round) verifies every value */
	for (int i = 0; i < nkeys; i++) {
		if (conn_get(&k, si, i, &v, &len, &hold))
			goto cleanup;
		int bad = (verify || len != sizes[si].bytes) && check_value(srv_tag[s], si, i, v, len, scratch);
		conn_put(&k, hold);
		if (bad)
			goto cleanup;
	}
	uint64_t ops = 0;
	unsigned sink = 0;
	double t0 = cli_now(), end = t0 + seconds, now;
	int i = 0;
	do {
		for (int b = 0; b < CLOCK_EVERY; b++) {
			if (conn_get(&k, si, i, &v, &len, &hold))
				goto cleanup;
			if (len != sizes[si].bytes) {
				check_value(srv_tag[s], si, i, v, len, scratch); /* says what is wrong */
				conn_put(&k, hold);
				goto cleanup;
			}
			sink += v[0] + v[len - 1]; /* touch the copy */
			conn_put(&k, hold);
			if (++i == nkeys)
				i = 0;
		}
		ops += CLOCK_EVERY;
		now = cli_now();
	} while (now < end);
	g_sink += sink;
	rate = (double)ops / (now - t0);
cleanup:
	conn_close(&k);
	return rate;
}

/* ---- the L2 side ---- */

#define L2_MODEL "bench-servers-model"
#define L2_STATE "bench-servers-state"

static char l2_name[SC_NAME_MAX + 1];
static int l2_backing;

static int l2_available(void)
{
	return sc_digest && sc_stage_open && sc_stage_close && sc_l2_admit && sc_l2_get_copy && sc_lease_release &&
	       ((sc_l2_get_key && sc_l2_key) || sc_l2_get);
}

/* Zero-copy gets by precomputed key when the API has them; else by tokens (hashes each time). */
static int l2_keyed(void)
{
	return sc_l2_get_key && sc_l2_key;
}

/* Create the arena and admit every value (this is the setup process). 0 or -1 (said why). */
static int l2_setup(int nkeys, uint8_t *scratch)
{
	uint64_t payload = 0;
	for (int si = 0; si < NSIZES; si++)
		payload += sizes[si].bytes * (uint64_t)nkeys;
	uint64_t size = 2 * payload + (64ull << 20); /* payload, allocator slack, index, rings */
	if (size < (256ull << 20))
		size = 256ull << 20;
	size = (size + (2ull << 20) - 1) & ~((2ull << 20) - 1);

	snprintf(l2_name, sizeof(l2_name), "sc-bench-servers-%d", (int)getpid());
	struct sc_arena_opts o = { .size_bytes = size, .huge = SC_HUGE_AUTO };
	struct sc_arena *arena = NULL;
	struct sc_stage *stage = NULL;
	int rc = sc_arena_create(l2_name, &o, &arena);
	if (rc == -ENOMEM) { /* hugepages reserved but too few free: 4 KiB pages will do */
		o.huge = SC_HUGE_OFF;
		rc = sc_arena_create(l2_name, &o, &arena);
	}
	if (rc) {
		cli_fail(B, rc, "cannot create arena '%s' of %llu MiB", l2_name, (unsigned long long)(size >> 20));
		l2_name[0] = 0;
		return -1;
	}
	struct sc_arena_info *info = calloc(1, sizeof(*info));
	if (info && sc_arena_info(arena, info) == 0) {
		snprintf(g_arena_path, sizeof(g_arena_path), "%s", info->path);
		l2_backing = info->backing;
	}
	free(info);

	rc = sc_stage_open(arena, L2_MODEL, L2_STATE, &stage);
	if (rc && !(rc == -EUSERS && stage)) {
		cli_fail(B, rc, "sc_stage_open");
		goto fail;
	}
	for (int si = 0; si < NSIZES; si++)
		for (int i = 0; i < nkeys; i++) {
			value_fill(si, i, scratch);
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { scratch, NULL },
						.sec_len = { sizes[si].bytes, 0 } };
			rc = sc_l2_admit(stage, L2_NS, tokens[si][i], NTOK, sc_digest(scratch, sizes[si].bytes), &p,
					 SC_ORIGIN_DIRECT);
			if (rc) {
				cli_fail(B, rc, "sc_l2_admit of %s (%llu bytes)", mkey[si][i],
					 (unsigned long long)sizes[si].bytes);
				goto fail;
			}
		}
	/* the entries live in the arena file; the readers attach on their own */
	sc_stage_close(stage);
	sc_arena_close(arena);
	return 0;
fail:
	sc_stage_close(stage);
	sc_arena_close(arena);
	return -1;
}

static void l2_teardown(void)
{
	if (!l2_name[0])
		return;
	int rc = sc_arena_destroy(NULL, l2_name);
	if (rc && rc != -ENOENT)
		cli_fail(B, rc, "cannot remove arena '%s'", l2_name);
	l2_name[0] = 0;
	g_arena_path[0] = 0;
}

/* One get of key @i into a lease (zero-copy) by precomputed key or by tokens. */
static inline int l2_get_lease(struct sc_stage *st, int keyed, int si, int i, struct sc_lease *l)
{
	return keyed ? sc_l2_get_key(st, l2key[si][i], l) : sc_l2_get(st, L2_NS, tokens[si][i], NTOK, NULL, l);
}

/* In the reader process: attach, check every entry, then get in a loop for @seconds. */
static double l2_client(int sys, int si, int nkeys, double seconds, int verify, uint8_t *scratch, uint8_t *buf)
{
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	double rate = -1;
	int keyed = l2_keyed();
	int rc = sc_arena_open(l2_name, &a);
	if (rc) {
		cli_fail(B, rc, "reader: sc_arena_open '%s'", l2_name);
		return -1;
	}
	rc = sc_stage_open(a, L2_MODEL, L2_STATE, &st);
	if (rc && !(rc == -EUSERS && st)) {
		cli_fail(B, rc, "reader: sc_stage_open");
		goto cleanup;
	}
	for (int i = 0; keyed && i < nkeys; i++)
		if ((rc = sc_l2_key(st, L2_NS, tokens[si][i], NTOK, &l2key[si][i]))) {
			cli_fail(B, rc, "reader: sc_l2_key");
			goto cleanup;
		}
	/* first pass: every entry is there, of the right size (and, first round, the right bytes) */
	for (int i = 0; i < nkeys; i++) {
		if (sys == SYS_L2_ZC) {
			struct sc_lease l;
			memset(&l, 0, sizeof(l));
			if ((rc = l2_get_lease(st, keyed, si, i, &l))) {
				cli_fail(B, rc, "reader: L2 get of %s", mkey[si][i]);
				goto cleanup;
			}
			int bad = l.sec_len[1] != 0 ||
				  (verify ? check_value("L2", si, i, l.sec[0], l.sec_len[0], scratch)
					  : l.sec_len[0] != sizes[si].bytes);
			sc_lease_release(&l);
			if (bad)
				goto cleanup;
		} else {
			int64_t n = sc_l2_get_copy(st, L2_NS, tokens[si][i], NTOK, NULL, buf, sizes[NSIZES - 1].bytes, NULL);
			if (n < 0) {
				cli_fail(B, (int)n, "reader: sc_l2_get_copy of %s", mkey[si][i]);
				goto cleanup;
			}
			if (verify ? check_value("L2", si, i, buf, (size_t)n, scratch) : (uint64_t)n != sizes[si].bytes)
				goto cleanup;
		}
	}

	uint64_t ops = 0;
	unsigned sink = 0;
	double t0 = cli_now(), end = t0 + seconds, now;
	int i = 0;
	if (sys == SYS_L2_ZC) {
		do {
			for (int b = 0; b < 16 * CLOCK_EVERY; b++) {
				struct sc_lease l;
				if ((rc = l2_get_lease(st, keyed, si, i, &l))) {
					cli_fail(B, rc, "reader: L2 get of %s", mkey[si][i]);
					goto cleanup;
				}
				sink += *(const volatile uint8_t *)l.sec[0]; /* the first byte, from the arena */
				sc_lease_release(&l);
				if (++i == nkeys)
					i = 0;
			}
			ops += 16 * CLOCK_EVERY;
			now = cli_now();
		} while (now < end);
	} else {
		uint64_t cap = sizes[NSIZES - 1].bytes;
		do {
			for (int b = 0; b < 16 * CLOCK_EVERY; b++) {
				int64_t n = sc_l2_get_copy(st, L2_NS, tokens[si][i], NTOK, NULL, buf, cap, NULL);
				if (n != (int64_t)sizes[si].bytes) {
					cli_fail(B, n < 0 ? (int)n : 0, "reader: sc_l2_get_copy of %s", mkey[si][i]);
					goto cleanup;
				}
				sink += buf[0] + buf[n - 1]; /* touch the copy, as the server clients do */
				if (++i == nkeys)
					i = 0;
			}
			ops += 16 * CLOCK_EVERY;
			now = cli_now();
		} while (now < end);
	}
	g_sink += sink;
	rate = (double)ops / (now - t0);
cleanup:
	sc_stage_close(st);
	sc_arena_close(a);
	return rate;
}

/* ---- one measurement = one forked client process ---- */

static double client_main(int sys, int si, const struct cfg *c, int verify)
{
	uint64_t big = sizes[NSIZES - 1].bytes;
	uint8_t *scratch = malloc(big), *buf = malloc(big);
	if (!scratch || !buf) {
		fprintf(stderr, "stagecache bench servers: out of memory\n");
		return -1;
	}
	memset(buf, 0, big); /* fault the private buffer in before the clock starts */
	switch (sys) {
	case SYS_L2_ZC:
	case SYS_L2_COPY:
		return l2_client(sys, si, c->keys, c->seconds, verify, scratch, buf);
	default:
		return server_client(sys - SYS_MC_UNIX, si, c->keys, c->seconds, verify, scratch);
	}
}

/* Run one measurement in a forked client; *rate gets gets/s. 0 or -1. */
static int measure(int sys, int si, const struct cfg *c, int verify, double *rate)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "stagecache bench servers: pipe: %s\n", strerror(errno));
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "stagecache bench servers: fork: %s\n", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		child_detach(parent, SIGKILL);
		close(p[0]);
		double r = client_main(sys, si, c, verify);
		ssize_t w = write(p[1], &r, sizeof(r));
		_exit(r >= 0 && w == (ssize_t)sizeof(r) ? 0 : 1);
	}
	g_client = pid;
	close(p[1]);
	double r = -1;
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	double deadline = cli_now() + c->seconds + CLIENT_SLACK_S;
	int got = 0;
	for (;;) {
		double left = deadline - cli_now();
		if (left <= 0)
			break;
		int n = poll(&pf, 1, (int)(left * 1000) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0)
			got = read(p[0], &r, sizeof(r)) == (ssize_t)sizeof(r);
		break;
	}
	close(p[0]);
	if (!got && cli_now() >= deadline) {
		fprintf(stderr, "stagecache bench servers: %s client did not finish in %.0f s; killed\n", sys_name[sys],
			c->seconds + CLIENT_SLACK_S);
		kill(pid, SIGKILL);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	g_client = -1;
	if (!got || r < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
			fprintf(stderr, "stagecache bench servers: %s client died of signal %d\n", sys_name[sys],
				WTERMSIG(st));
		return -1;
	}
	*rate = r;
	return 0;
}

/* ---- report ---- */

static void baseline_note(char *out, size_t len, int sys, int ours, int si, const struct cfg *c)
{
	const char *srv;
	char theirs[160];
	switch (sys) {
	case SYS_MC_UNIX:
	case SYS_MC_TCP:
		srv = sys == SYS_MC_UNIX ? "unix socket" : "loopback TCP";
		snprintf(theirs, sizeof(theirs),
			 "memcached %s %s (-t 2), libmemcached %s memcached_get (value copied into a malloc'd buffer, "
			 "touched, freed)",
			 g_srv[sys - SYS_MC_UNIX].version[0] ? g_srv[sys - SYS_MC_UNIX].version : "1.6", srv,
			 LIBMEMCACHED_VERSION_STRING);
		break;
	default:
		snprintf(theirs, sizeof(theirs), "redis %s unix socket, hiredis %d.%d.%d GET (reply touched, freed)",
			 g_srv[SRV_REDIS].version[0] ? g_srv[SRV_REDIS].version : "7", HIREDIS_MAJOR, HIREDIS_MINOR,
			 HIREDIS_PATCH);
	}
	const char *how = ours == SYS_L2_ZC
				  ? (l2_keyed() ? "sc_l2_get_key (precomputed key) zero-copy lease, first byte read, lease released"
						: "sc_l2_get (key hashed from 8 tokens each get) zero-copy lease, first byte read, lease released")
				  : "sc_l2_get_copy (key hashed from 8 tokens each get) into a private buffer, touched";
	snprintf(out, len,
		 "%s, 1 client process; ours: %s, 1 reader process (arena %s); both: %d keys of %s, median of %d x %.2g s",
		 theirs, how, sc_backing_name(l2_backing), c->keys, sizes[si].tag, c->reps, c->seconds);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache bench servers [--json] [--quick] [--seconds S] [--reps N] [--keys N]\n\n"
		"L2 gets of 4 KiB, 64 KiB and 1 MiB values from another process than the one that stored them,\n"
		"side by side with memcached (libmemcached over a Unix socket and over loopback TCP) and Redis\n"
		"(hiredis over a Unix socket). The servers are started by the bench on local sockets in a temp\n"
		"dir and stopped after; the arena is private to the run and removed after.\n\n"
		"Each L2 row is measured twice: zero-copy (get a lease, read the first byte, release it) and\n"
		"copy-out (sc_l2_get_copy into a private buffer), since a server always hands out a copy.\n"
		"Every measurement runs in a fresh client process; each is repeated and the median reported.\n\n"
		"Prints JSON lines: get_<size>_<system>_per_s (gets/s), get_<size>_vs_<server> (zero-copy\n"
		"ratio) and get_<size>_copy_vs_<server> (copy-out ratio), ours / theirs, higher is better.\n"
		"Targets: zero-copy >= 100x at every size; copy-out >= 20x at 4k and 64k, >= 2x at 1m.\n\n"
		"  --json        print only the JSON lines (default: also a table)\n"
		"  --quick       short run: 0.25 s per measurement (about 15 s)\n"
		"  --seconds S   length of one measurement (default 1.2; the whole run takes ~50x that)\n"
		"  --reps N      rounds, median reported (default 3)\n"
		"  --keys N      distinct keys per size, 1..%d (default 64)\n"
		"  -h, --help    this text\n",
		MAX_KEYS);
}

static int parse_args(int argc, char **argv, struct cfg *c, int *help)
{
	int all = argc > 0 && !strcmp(argv[0], "all"); /* `bench all` passes every bench's options */
	int quick = 0;
	double seconds = -1;
	long reps = -1, keys = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			*help = 1;
			return 0;
		} else if (!strcmp(a, "--json")) {
			c->json = 1;
		} else if (!strcmp(a, "--quick")) {
			quick = 1;
		} else if (!strcmp(a, "--seconds") || !strcmp(a, "--reps") || !strcmp(a, "--keys")) {
			if (i + 1 >= argc)
				return cli_usage_error("bench servers", "%s needs a value", a);
			char *end;
			const char *v = argv[++i];
			errno = 0;
			if (!strcmp(a, "--seconds")) {
				seconds = strtod(v, &end);
				if (errno || *end || !(seconds >= 0.01 && seconds <= 60))
					return cli_usage_error("bench servers", "--seconds takes 0.01..60, not '%s'", v);
			} else {
				long x = strtol(v, &end, 10);
				long max = !strcmp(a, "--reps") ? 15 : MAX_KEYS;
				if (errno || *end || x < 1 || x > max)
					return cli_usage_error("bench servers", "%s takes 1..%ld, not '%s'", a, max, v);
				*(!strcmp(a, "--reps") ? &reps : &keys) = x;
			}
		} else if (!all) {
			return cli_usage_error("bench servers", "unknown option '%s'", a);
		}
	}
	c->seconds = seconds > 0 ? seconds : quick ? 0.25 : 1.2;
	c->reps = reps > 0 ? (int)reps : 3;
	c->keys = keys > 0 ? (int)keys : 64;
	return 0;
}

int bench_servers(int argc, char **argv)
{
	struct cfg c = { 0 };
	int help = 0;
	int rc = parse_args(argc, argv, &c, &help);
	if (rc)
		return rc;
	if (help) {
		usage(stdout);
		return EXIT_OK;
	}

	int ok = 1, l2 = l2_available(), progress = !c.json && isatty(2);
	uint64_t payload_mb = 0;
	for (int si = 0; si < NSIZES; si++)
		payload_mb += (sizes[si].bytes * (uint64_t)c.keys) >> 20;
	uint8_t *scratch = malloc(sizes[NSIZES - 1].bytes);
	static double rates[NSIZES][NSYS][16];
	int have[NSYS] = { 0 };
	if (!scratch)
		return cli_fail(B, -ENOMEM, "scratch buffer");
	keys_init(c.keys);
	memset(g_srv, 0, sizeof(g_srv));
	sweep_dead_runs();
	snprintf(g_tmpdir, sizeof(g_tmpdir), "/tmp/sc-bench-servers.%d.XXXXXX", (int)getpid());
	if (!mkdtemp(g_tmpdir)) {
		g_tmpdir[0] = 0;
		free(scratch);
		return cli_fail(B, 0, "cannot create a temp dir in /tmp: %s", strerror(errno));
	}
	signals_install();

	if (!l2) {
		fprintf(stderr, "stagecache bench servers: the L2 API (sc_l2_admit, sc_l2_get[_key], sc_lease_release, "
				"sc_l2_get_copy) is not in this build: measuring the servers only\n");
		ok = 0;
	} else if (l2_setup(c.keys, scratch) == 0) {
		have[SYS_L2_ZC] = have[SYS_L2_COPY] = 1;
	} else {
		ok = 0;
	}
	for (int s = 0; s < NSRV; s++) {
		if (server_start(s, 2 * payload_mb + 64) == 0 && server_load(s, c.keys, scratch) == 0)
			have[SYS_MC_UNIX + s] = 1;
		else
			ok = 0;
	}

	/* rounds interleaved: round r of every (size, system), then round r + 1 */
	for (int r = 0; r < c.reps; r++)
		for (int si = 0; si < NSIZES; si++)
			for (int sys = 0; sys < NSYS; sys++) {
				if (!have[sys])
					continue;
				if (progress)
					fprintf(stderr, "\rround %d/%d: %-4s %-15s", r + 1, c.reps, sizes[si].tag, sys_name[sys]);
				if (measure(sys, si, &c, r == 0, &rates[si][sys][r])) {
					fprintf(stderr, "stagecache bench servers: %s %s failed; dropping it\n", sys_name[sys],
						sizes[si].tag);
					have[sys] = 0;
					ok = 0;
				}
			}
	if (progress)
		fprintf(stderr, "\r%50s\r", "");

	stop_servers();
	remove_tmpdir();
	l2_teardown();
	signals_restore();
	free(scratch);

	double med[NSIZES][NSYS];
	char metric[64], note[512];
	for (int si = 0; si < NSIZES; si++)
		for (int sys = 0; sys < NSYS; sys++) {
			if (!have[sys])
				continue;
			med[si][sys] = cli_median(rates[si][sys], c.reps);
			snprintf(metric, sizeof(metric), "get_%s_%s_per_s", sizes[si].tag, sys_name[sys]);
			cli_bench_line(B, metric, med[si][sys], "gets/s", NULL);
		}
	for (int si = 0; si < NSIZES; si++)
		for (int ours = SYS_L2_ZC; ours <= SYS_L2_COPY; ours++)
			for (int sys = SYS_MC_UNIX; sys < NSYS; sys++) {
				if (!have[ours] || !have[sys])
					continue;
				snprintf(metric, sizeof(metric), "get_%s%s_vs_%s", sizes[si].tag,
					 ours == SYS_L2_COPY ? "_copy" : "", sys_name[sys]);
				baseline_note(note, sizeof(note), sys, ours, si, &c);
				cli_bench_line(B, metric, med[si][ours] / med[si][sys], "x", note);
			}

	if (!c.json) {
		printf("\nL2 gets/s from another process vs servers (median of %d x %.2g s, %d keys per size)\n", c.reps,
		       c.seconds, c.keys);
		printf("%-5s", "size");
		for (int sys = 0; sys < NSYS; sys++)
			printf(" %15s", sys_name[sys]);
		printf("\n");
		for (int si = 0; si < NSIZES; si++) {
			printf("%-5s", sizes[si].tag);
			for (int sys = 0; sys < NSYS; sys++)
				if (have[sys])
					printf(" %15.0f", med[si][sys]);
				else
					printf(" %15s", "-");
			printf("\n");
		}
		if (have[SYS_L2_ZC] || have[SYS_L2_COPY]) {
			printf("\nratios, ours / theirs (target: zero-copy >= 100x; copy >= 20x at 4k/64k, >= 2x at 1m)\n");
			for (int si = 0; si < NSIZES; si++)
				for (int ours = SYS_L2_ZC; ours <= SYS_L2_COPY; ours++) {
					if (!have[ours])
						continue;
					double target = ours == SYS_L2_ZC ? 100 : si == NSIZES - 1 ? 2 : 20;
					printf("%-4s %-10s", sizes[si].tag, ours == SYS_L2_ZC ? "zero-copy" : "copy-out");
					for (int sys = SYS_MC_UNIX; sys < NSYS; sys++)
						if (have[sys]) {
							double x = med[si][ours] / med[si][sys];
							printf("  vs %s %8.1fx%s", sys_name[sys], x, x >= target ? "" : " (below target)");
						}
					printf("\n");
				}
		}
	}
	return ok ? EXIT_OK : EXIT_FAIL;
}
