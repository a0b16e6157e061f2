/*
 * tools/bench/get_server.c — the socket baselines of `stagecache bench get` (see get.c).
 *
 * memcached (1.6, meta protocol) on a unix socket and, as a second instance, on loopback TCP;
 * Redis (RESP) on a unix socket and loopback TCP (one instance); and a minimal unix-socket server
 * of our own that answers from an in-memory hash table with one writev per request — the floor any
 * socket design can reach. Every server runs in its own process, started here by fork + exec (or
 * fork) and stopped by SIGTERM; each dies with the benchmark (PR_SET_PDEATHSIG).
 *
 * Clients are what their authors intend a latency-minded client to be: one connection, TCP_NODELAY,
 * the request written in one write, the reply header read into a 256-byte buffer and the value
 * received straight into the caller's destination with MSG_WAITALL (no staging, no allocation).
 * A pipelined get writes the 16 requests in one write (memcached: 16 `mg <key> v`; Redis: 16 GET;
 * ours: one request naming 16 keys) and receives the 16 values in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "get.h"

#define B "get"
#define START_TIMEOUT_S 10.0

static struct srv {
	pid_t pid;
	int port;               /* TCP port (memcached TCP, Redis) */
	char sock[100];         /* unix socket path (fits sun_path) */
	char version[48];
} srv[BG_NSRV];

static const char *const srv_name[BG_NSRV] = { "memcached-unix", "memcached-tcp", "redis", "socket-floor" };

const char *bg_server_version(int s)
{
	return srv[s].version;
}

/* ---- connections ---- */

struct bg_conn {
	int s, fd;
	size_t off, len;        /* unread reply bytes in buf[off..len) */
	char buf[256];
	char req[16 * 80];
};

static int connect_unix(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

static int connect_tcp(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		return fd;
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

struct bg_conn *bg_conn_open(int s, int redis_tcp)
{
	struct bg_conn *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->s = s;
	k->fd = (s == BG_MC_TCP || (s == BG_REDIS && redis_tcp)) ? connect_tcp(srv[s].port) : connect_unix(srv[s].sock);
	if (k->fd < 0) {
		fprintf(stderr, "stagecache bench get: cannot connect to %s: %s\n", srv_name[s], strerror(errno));
		free(k);
		return NULL;
	}
	return k;
}

void bg_conn_close(struct bg_conn *k)
{
	if (!k)
		return;
	close(k->fd);
	free(k);
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int writev_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt > 0) {
		ssize_t w = writev(fd, iov, cnt > 1024 ? 1024 : cnt);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		while (cnt > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* One reply line (without "\r\n") into @line; the bytes after it stay buffered. 0 or -1. */
static int read_line(struct bg_conn *k, char *line, size_t cap)
{
	for (;;) {
		char *nl = memchr(k->buf + k->off, '\n', k->len - k->off);
		if (nl) {
			size_t n = (size_t)(nl - (k->buf + k->off));
			if (n && nl[-1] == '\r')
				n--;
			if (n >= cap)
				return -1;
			memcpy(line, k->buf + k->off, n);
			line[n] = 0;
			k->off = (size_t)(nl - k->buf) + 1;
			return 0;
		}
		if (k->off) {
			memmove(k->buf, k->buf + k->off, k->len - k->off);
			k->len -= k->off;
			k->off = 0;
		}
		if (k->len == sizeof(k->buf))
			return -1;
		ssize_t r = recv(k->fd, k->buf + k->len, sizeof(k->buf) - k->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		k->len += (size_t)r;
	}
}

/* @n bytes into @dst: what is buffered first, the rest received straight into @dst. 0 or -1. */
static int read_exact(struct bg_conn *k, void *dst, size_t n)
{
	uint8_t *d = dst;
	size_t have = k->len - k->off;
	if (have) {
		size_t m = have < n ? have : n;
		memcpy(d, k->buf + k->off, m);
		k->off += m;
		d += m;
		n -= m;
	}
	while (n) {
		ssize_t r = recv(k->fd, d, n, MSG_WAITALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		d += r;
		n -= (size_t)r;
	}
	return 0;
}

static int expect_crlf(struct bg_conn *k)
{
	char crlf[2];
	return read_exact(k, crlf, 2) == 0 && crlf[0] == '\r' && crlf[1] == '\n' ? 0 : -1;
}

int bg_conn_get(struct bg_conn *k, const struct gclass *c, uint32_t item, uint8_t (*keys)[16], uint8_t **dst)
{
	char line[128], kt[40];
	size_t rl = 0;
	if (k->s == BG_SOCK) {
		/* ours: u32 count, count x 16-byte keys; reply: per key u64 length + the value */
		uint32_t n = (uint32_t)c->nb;
		memcpy(k->req, &n, 4);
		memcpy(k->req + 4, keys, (size_t)c->nb * 16);
		if (write_all(k->fd, k->req, 4 + (size_t)c->nb * 16))
			return -1;
		for (int b = 0; b < c->nb; b++) {
			uint64_t len;
			if (read_exact(k, &len, 8) || len != c->bytes || read_exact(k, dst[b], len))
				return -1;
		}
		return 0;
	}
	for (int b = 0; b < c->nb; b++) {
		size_t kl = bg_key_text(keys[b], kt);
		if (k->s == BG_REDIS)
			rl += (size_t)snprintf(k->req + rl, sizeof(k->req) - rl, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", kl, kt);
		else
			rl += (size_t)snprintf(k->req + rl, sizeof(k->req) - rl, "mg %s v\r\n", kt);
	}
	if (write_all(k->fd, k->req, rl))
		return -1;
	for (int b = 0; b < c->nb; b++) {
		if (read_line(k, line, sizeof(line)))
			return -1;
		unsigned long long len = 0;
		if (k->s == BG_REDIS ? sscanf(line, "$%llu", &len) != 1 : sscanf(line, "VA %llu", &len) != 1) {
			fprintf(stderr, "stagecache bench get: %s: unexpected reply '%.60s' for item %u\n", srv_name[k->s],
				line, item);
			return -1;
		}
		if (len != c->bytes || read_exact(k, dst[b], len) || expect_crlf(k))
			return -1;
	}
	(void)item;
	return 0;
}

/* ---- loading: classic `set` (memcached) and SET (Redis), 16 per write, then the replies ---- */

static int load(int s, const struct gclass *c)
{
	struct bg_conn *k = bg_conn_open(s, 0);
	if (!k)
		return -1;
	uint8_t *val = malloc(c->bytes * 16);
	char (*hdr)[96] = calloc(16, 96);
	struct iovec iov[48];
	char line[128];
	int rc = -1;
	uint32_t total = c->nitems * (uint32_t)c->nb;
	if (!val || !hdr)
		goto out;
	for (uint32_t at = 0; at < total; at += 16) {
		uint32_t m = total - at < 16 ? total - at : 16;
		int ni = 0;
		for (uint32_t j = 0; j < m; j++) {
			uint32_t blk = at + j, i = blk / (uint32_t)c->nb;
			int b = (int)(blk % (uint32_t)c->nb);
			char kt[40];
			size_t kl = bg_key_text(c->key[blk], kt);
			bg_value_fill(c, i, b, val + (size_t)j * c->bytes);
			int hl = s == BG_REDIS ? snprintf(hdr[j], 96, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%llu\r\n", kl, kt,
							  (unsigned long long)c->bytes)
					       : snprintf(hdr[j], 96, "set %s 0 0 %llu\r\n", kt, (unsigned long long)c->bytes);
			iov[ni++] = (struct iovec){ hdr[j], (size_t)hl };
			iov[ni++] = (struct iovec){ val + (size_t)j * c->bytes, c->bytes };
			iov[ni++] = (struct iovec){ "\r\n", 2 };
		}
		if (writev_all(k->fd, iov, ni))
			goto out;
		for (uint32_t j = 0; j < m; j++)
			if (read_line(k, line, sizeof(line)) || strcmp(line, s == BG_REDIS ? "+OK" : "STORED")) {
				fprintf(stderr, "stagecache bench get: %s refused a value: '%.60s'\n", srv_name[s], line);
				goto out;
			}
	}
	rc = 0;
out:
	free(val);
	free(hdr);
	bg_conn_close(k);
	return rc;
}

/* ---- the minimal socket server of our own ---- */

struct table {
	uint64_t mask;
	struct slot {
		uint8_t key[16];
		uint8_t *val;
	} *slot;
};

static uint8_t *table_find(const struct table *t, const uint8_t key[16])
{
	uint64_t h;
	memcpy(&h, key, 8);
	for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
		if (!t->slot[i].val)
			return NULL;
		if (!memcmp(t->slot[i].key, key, 16))
			return t->slot[i].val;
	}
}

static void sock_serve(int lfd, const struct gclass *c, const struct table *t)
{
	uint8_t keys[64][16];
	uint64_t lens[64];
	struct iovec iov[128];
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (;;) {
			uint32_t n;
			if (recv(fd, &n, 4, MSG_WAITALL) != 4 || n == 0 || n > 64 ||
			    recv(fd, keys, (size_t)n * 16, MSG_WAITALL) != (ssize_t)n * 16)
				break;
			int ni = 0;
			for (uint32_t j = 0; j < n; j++) {
				uint8_t *v = table_find(t, keys[j]);
				lens[j] = v ? c->bytes : 0;
				iov[ni++] = (struct iovec){ &lens[j], 8 };
				if (v)
					iov[ni++] = (struct iovec){ v, c->bytes };
			}
			if (writev_all(fd, iov, ni))
				break;
		}
		close(fd);
	}
}

static int sock_start(const struct gclass *c)
{
	uint64_t total = (uint64_t)c->nitems * (uint64_t)c->nb, cap = 1;
	while (cap < 2 * total)
		cap <<= 1;
	struct table t = { cap - 1, calloc(cap, sizeof(struct slot)) };
	uint8_t *vals = malloc(total * c->bytes);
	if (!t.slot || !vals) {
		free(t.slot);
		free(vals);
		fprintf(stderr, "stagecache bench get: socket floor: out of memory\n");
		return -1;
	}
	for (uint64_t blk = 0; blk < total; blk++) {
		uint8_t *v = vals + blk * c->bytes;
		bg_value_fill(c, (uint32_t)(blk / (uint64_t)c->nb), (int)(blk % (uint64_t)c->nb), v);
		uint64_t h;
		memcpy(&h, c->key[blk], 8);
		uint64_t i = h & t.mask;
		while (t.slot[i].val)
			i = (i + 1) & t.mask;
		memcpy(t.slot[i].key, c->key[blk], 16);
		t.slot[i].val = v;
	}
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", srv[BG_SOCK].sock);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 8)) {
		fprintf(stderr, "stagecache bench get: socket floor: cannot listen on %s: %s\n", a.sun_path, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		free(t.slot);
		free(vals);
		return -1;
	}
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		signal(SIGTERM, SIG_DFL);
		sock_serve(lfd, c, &t);
		_exit(0);
	}
	close(lfd);
	free(t.slot); /* the server has its own copy */
	free(vals);
	if (pid < 0)
		return -1;
	srv[BG_SOCK].pid = pid;
	snprintf(srv[BG_SOCK].version, sizeof(srv[BG_SOCK].version), "stagecache-bench");
	return 0;
}

/* ---- memcached and Redis processes ---- */

static int free_tcp_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int port = -1;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int accepts(int s)
{
	int fd = s == BG_MC_TCP ? connect_tcp(srv[s].port) : connect_unix(srv[s].sock);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static void stop_pid(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

void bg_servers_stop(void)
{
	for (int s = 0; s < BG_NSRV; s++) {
		stop_pid(srv[s].pid);
		if (srv[s].sock[0])
			unlink(srv[s].sock);
		memset(&srv[s], 0, sizeof(srv[s]));
	}
}

/* The command line of server @s (memcached or redis-server) into @argv (at most 40 entries). */
static void server_argv(int s, const char *dir, const char *mem, const char *port, const char **argv)
{
	struct srv *v = &srv[s];
	int n = 0;
	if (s == BG_REDIS) {
		const char *a[] = { "redis-server", "--port", port, "--bind", "127.0.0.1", "--unixsocket", v->sock,
				    "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir,
				    "--daemonize", "no", "--protected-mode", "no", "--maxmemory", "0", NULL };
		for (; a[n]; n++)
			argv[n] = a[n];
	} else {
		/* -I 2m: 1 MiB values fit one item; -t 2: a worker thread per core */
		const char *a[] = { "memcached", "-m", mem, "-I", "2m", "-t", "2", "-c", "64", NULL };
		for (; a[n]; n++)
			argv[n] = a[n];
		if (geteuid() == 0) {
			argv[n++] = "-u";
			argv[n++] = "root";
		}
		if (s == BG_MC_UNIX) {
			argv[n++] = "-s";
			argv[n++] = v->sock;
		} else {
			argv[n++] = "-l";
			argv[n++] = "127.0.0.1";
			argv[n++] = "-p";
			argv[n++] = port;
			argv[n++] = "-U";
			argv[n++] = "0";
		}
	}
	argv[n] = NULL;
}

/* Run @argv with its output in @logp, dying with us. The pid, or -1. */
static pid_t spawn_server(const char **argv, const char *logp)
{
	pid_t parent = getpid(), pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(0);
		int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), nul = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 1), dup2(fd, 2);
		if (nul >= 0)
			dup2(nul, 0);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Wait until server @s accepts connections (Redis: on TCP too), for START_TIMEOUT_S. */
static int wait_accepting(int s, pid_t pid, const char *prog, const char *logp)
{
	struct srv *v = &srv[s];
	double deadline = cli_now() + START_TIMEOUT_S;
	while (!accepts(s)) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid || cli_now() > deadline) {
			fprintf(stderr, "stagecache bench get: %s did not start (see its log %s)\n", prog, logp);
			v->pid = 0;
			return -1;
		}
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (s == BG_REDIS) { /* the TCP side too */
		int fd;
		while ((fd = connect_tcp(v->port)) < 0) {
			if (cli_now() > deadline)
				return -1;
			usleep(5000);
		}
		close(fd);
	}
	return 0;
}

int bg_server_start(int s, const char *dir, const struct gclass *c)
{
	struct srv *v = &srv[s];
	memset(v, 0, sizeof(*v));
	if (snprintf(v->sock, sizeof(v->sock), "%s/%s.sock", dir, srv_name[s]) >= (int)sizeof(v->sock))
		return -1;
	if (s == BG_SOCK)
		return sock_start(c);
	const char *prog = s == BG_REDIS ? "redis-server" : "memcached";
	if (!bench_in_path(prog)) {
		fprintf(stderr, "stagecache bench get: %s is not installed (not in PATH)\n", prog);
		return -1;
	}
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s --version 2>/dev/null", prog);
	bench_first_line(cmd, v->version, sizeof(v->version));
	if (s != BG_MC_UNIX && (v->port = free_tcp_port()) < 0) {
		fprintf(stderr, "stagecache bench get: no free loopback port\n");
		return -1;
	}
	uint64_t mb = ((uint64_t)c->nitems * (uint64_t)c->nb * (c->bytes + 256)) / (1u << 20) * 3 / 2 + 64;
	char mem[32], port[16], logp[256];
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)mb);
	snprintf(port, sizeof(port), "%d", v->port);
	snprintf(logp, sizeof(logp), "%s/%s.log", dir, srv_name[s]);
	const char *argv[40];
	server_argv(s, dir, mem, port, argv);
	pid_t pid = spawn_server(argv, logp);
	if (pid < 0)
		return -1;
	v->pid = pid;
	if (wait_accepting(s, pid, prog, logp))
		return -1;
	return load(s, c);
}
