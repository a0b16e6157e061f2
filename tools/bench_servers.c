/*
 * tools/bench_servers.c — `stagecache bench servers`: L2 gets from another process, side by side
 * with what users would pick otherwise: memcached (libmemcached, Unix socket and loopback TCP) and
 * Redis (hiredis, Unix socket). This file is the driver (options, keys and values, the L2 side,
 * measurements, report); the servers, their clients and the cleanup are in bench_servers_srv.c.
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
 * Cleanup (bench_servers_srv.c). Servers, temp dir and arena are removed on every path: normal end,
 * error, SIGINT/SIGTERM/SIGHUP, and the death of this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "bench_servers.h"

#define B "servers"
#define NTOK 8                  /* tokens per key: a short distinct prefix */
#define CLIENT_SLACK_S 60.0     /* connect + verify allowance on top of the timed loop */
#define L2_NS "bench-servers"

const struct bs_size bs_sizes[NSIZES] = { { "4k", 4096 }, { "64k", 65536 }, { "1m", 1u << 20 } };

enum sys { SYS_L2_ZC, SYS_L2_COPY, SYS_MC_UNIX, SYS_MC_TCP, SYS_REDIS, NSYS };
static const char *const sys_name[NSYS] = { "l2_zero_copy", "l2_copy", "memcached_unix", "memcached_tcp",
					     "redis_unix" };

struct cfg {
	double seconds;
	int reps;
	int keys;
	int json;
};

volatile unsigned bs_sink;

/* ---- keys and values ---- */
char bs_mkey[NSIZES][MAX_KEYS][32];
size_t bs_mkey_len[NSIZES][MAX_KEYS];
static int32_t tokens[NSIZES][MAX_KEYS][NTOK];
static struct sc_key l2key[NSIZES][MAX_KEYS];

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void bs_value_fill(int si, int i, uint8_t *buf)
{
	uint64_t s = ((uint64_t)si << 32) | (uint64_t)i;
	for (uint64_t o = 0; o < bs_sizes[si].bytes; o += 8) {
		uint64_t w = splitmix(&s);
		memcpy(buf + o, &w, 8);
	}
}

static void keys_init(int nkeys)
{
	for (int si = 0; si < NSIZES; si++)
		for (int i = 0; i < nkeys; i++) {
			bs_mkey_len[si][i] = (size_t)snprintf(bs_mkey[si][i], sizeof(bs_mkey[si][i]), "scbench:%s:%03d",
							      bs_sizes[si].tag, i);
			for (int t = 0; t < NTOK; t++)
				tokens[si][i][t] = (int32_t)(0x5c000000 | si << 16 | i << 4 | t);
		}
}

int bs_check_value(const char *who, int si, int i, const uint8_t *got, size_t len, uint8_t *scratch)
{
	if (len != bs_sizes[si].bytes) {
		fprintf(stderr, "stagecache bench servers: %s: %s has %zu bytes, expected %llu\n", who, bs_mkey[si][i],
			len, (unsigned long long)bs_sizes[si].bytes);
		return -1;
	}
	bs_value_fill(si, i, scratch);
	if (memcmp(got, scratch, len)) {
		fprintf(stderr, "stagecache bench servers: %s: %s has the wrong bytes\n", who, bs_mkey[si][i]);
		return -1;
	}
	return 0;
}

/* ---- the L2 side ---- */

#define L2_MODEL "bench-servers-model"
#define L2_STATE "bench-servers-state"

static char l2_name[SC_NAME_MAX + 1];
static int l2_backing;

/* Create the arena and admit every value (this is the setup process). 0 or -1 (said why). */
static int l2_setup(int nkeys, uint8_t *scratch)
{
	uint64_t payload = 0;
	for (int si = 0; si < NSIZES; si++)
		payload += bs_sizes[si].bytes * (uint64_t)nkeys;
	uint64_t size = 2 * payload + (64ull << 20); /* payload, allocator slack, index, rings */
	if (size < (256ull << 20))
		size = 256ull << 20;
	size = (size + (2ull << 20) - 1) & ~((2ull << 20) - 1);

	/* named after our pid: bs_sweep_dead_runs removes it if this run is killed with SIGKILL */
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
		snprintf(bs_arena_path, sizeof(bs_arena_path), "%s", info->path);
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
			bs_value_fill(si, i, scratch);
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { scratch, NULL },
						.sec_len = { bs_sizes[si].bytes, 0 } };
			rc = sc_l2_admit(stage, L2_NS, tokens[si][i], NTOK, sc_digest(scratch, bs_sizes[si].bytes), &p,
					 SC_ORIGIN_DIRECT);
			if (rc) {
				cli_fail(B, rc, "sc_l2_admit of %s (%llu bytes)", bs_mkey[si][i],
					 (unsigned long long)bs_sizes[si].bytes);
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
	bs_arena_path[0] = 0;
}

/* In the reader process: attach, check every entry, then get in a loop for @seconds. */
static double l2_client(int sys, int si, int nkeys, double seconds, int verify, uint8_t *scratch, uint8_t *buf)
{
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	double rate = -1;
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
	for (int i = 0; i < nkeys; i++)
		if ((rc = sc_l2_key(st, L2_NS, tokens[si][i], NTOK, &l2key[si][i]))) {
			cli_fail(B, rc, "reader: sc_l2_key");
			goto cleanup;
		}
	/* first pass: every entry is there, of the right size (and, first round, the right bytes) */
	for (int i = 0; i < nkeys; i++) {
		if (sys == SYS_L2_ZC) {
			struct sc_lease l;
			memset(&l, 0, sizeof(l));
			if ((rc = sc_l2_get_key(st, l2key[si][i], &l))) {
				cli_fail(B, rc, "reader: L2 get of %s", bs_mkey[si][i]);
				goto cleanup;
			}
			int bad = l.sec_len[1] != 0 ||
				  (verify ? bs_check_value("L2", si, i, l.sec[0], l.sec_len[0], scratch)
					  : l.sec_len[0] != bs_sizes[si].bytes);
			sc_lease_release(&l);
			if (bad)
				goto cleanup;
		} else {
			int64_t n = sc_l2_get_copy(st, L2_NS, tokens[si][i], NTOK, NULL, buf, bs_sizes[NSIZES - 1].bytes, NULL);
			if (n < 0) {
				cli_fail(B, (int)n, "reader: sc_l2_get_copy of %s", bs_mkey[si][i]);
				goto cleanup;
			}
			if (verify ? bs_check_value("L2", si, i, buf, (size_t)n, scratch) : (uint64_t)n != bs_sizes[si].bytes)
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
				if ((rc = sc_l2_get_key(st, l2key[si][i], &l))) {
					cli_fail(B, rc, "reader: L2 get of %s", bs_mkey[si][i]);
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
		uint64_t cap = bs_sizes[NSIZES - 1].bytes;
		do {
			for (int b = 0; b < 16 * CLOCK_EVERY; b++) {
				int64_t n = sc_l2_get_copy(st, L2_NS, tokens[si][i], NTOK, NULL, buf, cap, NULL);
				if (n != (int64_t)bs_sizes[si].bytes) {
					cli_fail(B, n < 0 ? (int)n : 0, "reader: sc_l2_get_copy of %s", bs_mkey[si][i]);
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
	bs_sink += sink;
	rate = (double)ops / (now - t0);
cleanup:
	sc_stage_close(st);
	sc_arena_close(a);
	return rate;
}

/* ---- one measurement = one forked client process ---- */

static double client_main(int sys, int si, const struct cfg *c, int verify)
{
	uint64_t big = bs_sizes[NSIZES - 1].bytes;
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
		return bs_server_client(sys - SYS_MC_UNIX, si, c->keys, c->seconds, verify, scratch);
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
		bs_child_detach(parent, SIGKILL);
		close(p[0]);
		double r = client_main(sys, si, c, verify);
		ssize_t w = write(p[1], &r, sizeof(r));
		_exit(r >= 0 && w == (ssize_t)sizeof(r) ? 0 : 1);
	}
	bs_client = pid;
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
	bs_client = -1;
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
	char theirs[160];
	bs_server_describe(theirs, sizeof(theirs), sys - SYS_MC_UNIX);
	const char *how = ours == SYS_L2_ZC
				  ? "sc_l2_get_key (precomputed key) zero-copy lease, first byte read, lease released"
				  : "sc_l2_get_copy (key hashed from 8 tokens each get) into a private buffer, touched";
	snprintf(out, len,
		 "%s, 1 client process; ours: %s, 1 reader process (arena %s); both: %d keys of %s, median of %d x %.2g s",
		 theirs, how, sc_backing_name(l2_backing), c->keys, bs_sizes[si].tag, c->reps, c->seconds);
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

	int ok = 1, progress = !c.json && isatty(2);
	uint64_t payload_mb = 0;
	for (int si = 0; si < NSIZES; si++)
		payload_mb += (bs_sizes[si].bytes * (uint64_t)c.keys) >> 20;
	uint8_t *scratch = malloc(bs_sizes[NSIZES - 1].bytes);
	static double rates[NSIZES][NSYS][16];
	int have[NSYS] = { 0 };
	if (!scratch)
		return cli_fail(B, -ENOMEM, "scratch buffer");
	keys_init(c.keys);
	bs_servers_reset();
	bs_sweep_dead_runs();
	if ((rc = bs_tmpdir_create())) {
		free(scratch);
		return cli_fail(B, 0, "cannot create a temp dir in /tmp: %s", strerror(-rc));
	}
	bs_signals_install();

	if (l2_setup(c.keys, scratch) == 0) {
		have[SYS_L2_ZC] = have[SYS_L2_COPY] = 1;
	} else {
		ok = 0;
	}
	for (int s = 0; s < NSRV; s++) {
		if (bs_server_start(s, 2 * payload_mb + 64) == 0 && bs_server_load(s, c.keys, scratch) == 0)
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
					fprintf(stderr, "\rround %d/%d: %-4s %-15s", r + 1, c.reps, bs_sizes[si].tag, sys_name[sys]);
				if (measure(sys, si, &c, r == 0, &rates[si][sys][r])) {
					fprintf(stderr, "stagecache bench servers: %s %s failed; dropping it\n", sys_name[sys],
						bs_sizes[si].tag);
					have[sys] = 0;
					ok = 0;
				}
			}
	if (progress)
		fprintf(stderr, "\r%50s\r", "");

	bs_servers_stop();
	bs_tmpdir_remove();
	l2_teardown();
	bs_signals_restore();
	free(scratch);

	double med[NSIZES][NSYS];
	char metric[64], note[512];
	for (int si = 0; si < NSIZES; si++)
		for (int sys = 0; sys < NSYS; sys++) {
			if (!have[sys])
				continue;
			med[si][sys] = cli_median(rates[si][sys], c.reps);
			snprintf(metric, sizeof(metric), "get_%s_%s_per_s", bs_sizes[si].tag, sys_name[sys]);
			cli_bench_line(B, metric, med[si][sys], "gets/s", NULL);
		}
	for (int si = 0; si < NSIZES; si++)
		for (int ours = SYS_L2_ZC; ours <= SYS_L2_COPY; ours++)
			for (int sys = SYS_MC_UNIX; sys < NSYS; sys++) {
				if (!have[ours] || !have[sys])
					continue;
				snprintf(metric, sizeof(metric), "get_%s%s_vs_%s", bs_sizes[si].tag,
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
			printf("%-5s", bs_sizes[si].tag);
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
					printf("%-4s %-10s", bs_sizes[si].tag, ours == SYS_L2_ZC ? "zero-copy" : "copy-out");
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
