/*
 * tools/bench_servers_srv.c — the server side of `stagecache bench servers` (see bench_servers.c for
 * the driver): memcached and Redis started by fork + exec in a private temp dir on local sockets
 * only, their clients (libmemcached, hiredis: one connection, one value at a time), and cleanup.
 *
 * Cleanup. Servers are stopped with SIGTERM (SIGKILL after 5 s) and reaped, and the temp dir and
 * the arena are removed on every path: normal end, error, SIGINT/SIGTERM/SIGHUP (an async-signal-
 * safe handler), and the death of the setup process (the servers get PR_SET_PDEATHSIG). What a run
 * killed with SIGKILL leaves behind is swept by the next run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
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
#include "bench_servers.h"

#define START_TIMEOUT_S 10.0    /* a server must accept connections within this */

static const char *const srv_tag[NSRV] = { "memcached-unix", "memcached-tcp", "redis" };

struct server {
	pid_t pid;
	int port;               /* TCP only */
	char sock[96];          /* Unix socket path */
	char log[96];
	char version[32];
	int up;
};

/* ---- state the signal handler also reads (written before it can matter) ---- */
static char g_tmpdir[64];
static struct server g_srv[NSRV];
volatile pid_t bs_client = -1;
char bs_arena_path[4096];

void bs_servers_reset(void)
{
	memset(g_srv, 0, sizeof(g_srv));
}

int bs_tmpdir_create(void)
{
	snprintf(g_tmpdir, sizeof(g_tmpdir), "/tmp/sc-bench-servers.%d.XXXXXX", (int)getpid());
	if (!mkdtemp(g_tmpdir)) {
		int e = errno;
		g_tmpdir[0] = 0;
		return -e;
	}
	return 0;
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

void bs_servers_stop(void)
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

void bs_tmpdir_remove(void)
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
void bs_sweep_dead_runs(void)
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
	if (bs_client > 0)
		kill(bs_client, SIGKILL);
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
	if (bs_arena_path[0])
		unlink(bs_arena_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static const int handled_signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction saved_actions[3];

void bs_signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		sigaction(handled_signals[i], &sa, &saved_actions[i]);
}

void bs_signals_restore(void)
{
	for (int i = 0; i < 3; i++)
		sigaction(handled_signals[i], &saved_actions[i], NULL);
}

/* In a freshly forked child: no inherited cleanup duty, and die with the parent. */
void bs_child_detach(pid_t parent, int deathsig)
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
int bs_server_start(int s, uint64_t mem_mb)
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
		bs_child_detach(parent, SIGTERM);
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
		memcached_return_t r = memcached_set(k->m, bs_mkey[si][i], bs_mkey_len[si][i], (const char *)v, bs_sizes[si].bytes, 0, 0);
		if (!(ok = r == MEMCACHED_SUCCESS))
			fprintf(stderr, "stagecache bench servers: %s set %s: %s\n", srv_tag[k->s], bs_mkey[si][i],
				memcached_strerror(k->m, r));
	} else {
		redisReply *r = redisCommand(k->r, "SET %b %b", bs_mkey[si][i], bs_mkey_len[si][i], v, (size_t)bs_sizes[si].bytes);
		if (!(ok = r && r->type == REDIS_REPLY_STATUS))
			fprintf(stderr, "stagecache bench servers: redis SET %s: %s\n", bs_mkey[si][i],
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
		char *x = memcached_get(k->m, bs_mkey[si][i], bs_mkey_len[si][i], len, &fl, &r);
		if (!x) {
			fprintf(stderr, "stagecache bench servers: %s get %s: %s\n", srv_tag[k->s], bs_mkey[si][i],
				memcached_strerror(k->m, r));
			return -1;
		}
		*v = (const uint8_t *)x;
		*hold = x;
		return 0;
	}
	redisReply *r = redisCommand(k->r, "GET %b", bs_mkey[si][i], bs_mkey_len[si][i]);
	if (!r || r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "stagecache bench servers: redis GET %s: %s\n", bs_mkey[si][i], r ? "unexpected reply" : k->r->errstr);
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
int bs_server_load(int s, int nkeys, uint8_t *scratch)
{
	struct conn k;
	if (conn_open(&k, s))
		return -1;
	for (int si = 0; si < NSIZES; si++)
		for (int i = 0; i < nkeys; i++) {
			bs_value_fill(si, i, scratch);
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

/* In the client process: connect, check every value, then GET in a loop for @seconds. */
double bs_server_client(int s, int si, int nkeys, double seconds, int verify, uint8_t *scratch)
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
		int bad = (verify || len != bs_sizes[si].bytes) && bs_check_value(srv_tag[s], si, i, v, len, scratch);
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
			if (len != bs_sizes[si].bytes) {
				bs_check_value(srv_tag[s], si, i, v, len, scratch); /* says what is wrong */
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
	bs_sink += sink;
	rate = (double)ops / (now - t0);
cleanup:
	conn_close(&k);
	return rate;
}

void bs_server_describe(char *out, size_t len, int s)
{
	if (s == SRV_MC_UNIX || s == SRV_MC_TCP)
		snprintf(out, len,
			 "memcached %s %s (-t 2), libmemcached %s memcached_get (value copied into a malloc'd buffer, "
			 "touched, freed)",
			 g_srv[s].version[0] ? g_srv[s].version : "1.6", s == SRV_MC_UNIX ? "unix socket" : "loopback TCP",
			 LIBMEMCACHED_VERSION_STRING);
	else
		snprintf(out, len, "redis %s unix socket, hiredis %d.%d.%d GET (reply touched, freed)",
			 g_srv[SRV_REDIS].version[0] ? g_srv[SRV_REDIS].version : "7", HIREDIS_MAJOR, HIREDIS_MINOR,
			 HIREDIS_PATCH);
}
