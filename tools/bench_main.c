/*
 * tools/bench_main.c — `stagecache-bench`, the benchmark binary (also reached as `stagecache bench`,
 * which execs it): the registry of benchmarks, their targets, the JSON lines, the table, and the
 * rule that a figure that was not measured is a miss.
 *
 *   stagecache-bench WHICH [--json] [--out FILE] [--table] [--quick] [options of WHICH]
 *   stagecache-bench report JSON DIR
 *
 * Output. Every figure is one JSON object per line:
 *   {"bench","metric","value","unit"[,"q1","q3","n","samples"][,"baseline"]}      measured
 *   {"bench","metric","missing":"why"}                                            not measured
 *   {"bench","env":KEY,"value":V}                                                 a condition of the run
 * The first line describes the machine ({"bench":"env",...}). Without --json the same facts are
 * printed as aligned text; --out FILE always gets the JSON lines.
 *
 * Exit status: 0 every target met and nothing missing; 1 a benchmark failed, a figure is missing,
 * or a target was missed; 2 usage error (nothing is written then: --out is opened only after the
 * arguments were checked).
 *
 * Adding a benchmark: write tools/bench_<name>.c with `int bench_<name>(int argc, char **argv)`,
 * add it to BENCHES below and its metrics with targets to `targets`.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define BENCHES(X)                                                                                      \
	X(l2, "L2 hit path at 1 M entries (quiet and with a writer), admit and copy-out vs XXH3 + memcpy, "     \
	      "2 readers vs 1, memory per entry")                                                        \
	X(get, "gets from another process vs the memory floor, LMDB, a minimal socket server, memcached, Redis") \
	X(ring, "commit rings vs DPDK rte_ring (zero-copy API) and a pipe; commit-to-visible latency")  \
	X(l3, "L3 fills (cold and warm) vs fio, bare liburing and pread + XXH3-128")                    \
	X(probes, "USDT probe overhead, unattached and attached")                                      \
	X(restore, "sc_restore from L2 through the L3 location index vs the L2 lookup alone, with a writer, "  \
		   "token verification cost, first restore after attach, the directory probe, 1 and 2 processes") \
	X(policy, "L2 hit ratio under pressure: Zipf traces replayed by 2 processes vs LRU, S3-FIFO, OPT simulators") \
	X(segments, "content-addressed L2 segments: physical vs logical bytes of a multi-turn trace, hit, copy-out " \
		    "and admit vs segments off, byte hit ratio under pressure vs segments off")

struct bench_entry {
	const char *name, *help;
	int (*fn)(int, char **);
};
#define ENTRY(n, h) { #n, h, bench_##n },
static const struct bench_entry benches[] = { BENCHES(ENTRY) };
#undef ENTRY
#define NBENCH (sizeof(benches) / sizeof(benches[0]))

/* The targets of the issues, one row per metric. op '>' : value >= bound; '<' : value <= bound. */
static const struct target {
	const char *bench, *metric;
	char op;
	double bound;
	const char *what;
} targets[] = {
	/* l2 */
	{ "l2", "hit_lease_p50_ns", '<', 150, "hit by precomputed key: lookup + lease + release, ns" },
	{ "l2", "hit_p999_with_writer_vs_quiet_p50", '<', 20, "hit p99.9 with a writer admitting/evicting / quiet p50" },
	{ "l2", "hit_2proc_vs_1proc", '>', 1.8, "hits/s, 2 readers / 1 (barrier start, common window)" },
	{ "l2", "admit_4k_vs_xxh3_memcpy", '>', 0.9, "admit / XXH3-128 + memcpy, 4 KiB" },
	{ "l2", "admit_64k_vs_xxh3_memcpy", '>', 0.9, "admit / XXH3-128 + memcpy, 64 KiB" },
	{ "l2", "admit_1m_vs_xxh3_memcpy", '>', 0.9, "admit / XXH3-128 + memcpy, 1 MiB" },
	{ "l2", "admit_full_vs_not_full", '>', 0.7, "admit into a full arena (evicting) / not full, 64 KiB" },
	{ "l2", "copyout_4k_vs_memcpy", '>', 0.9, "copy-out get / memcpy, 4 KiB" },
	{ "l2", "copyout_64k_vs_memcpy", '>', 0.9, "copy-out get / memcpy, 64 KiB" },
	{ "l2", "copyout_1m_vs_memcpy", '>', 0.9, "copy-out get / memcpy, 1 MiB" },
	/* get */
	{ "get", "get_4k_vs_memcached_unix", '>', 20, "get + read every byte, speed vs memcached (unix), 4 KiB" },
	{ "get", "get_64k_vs_memcached_unix", '>', 5, "vs memcached (unix), 64 KiB" },
	{ "get", "get_1m_vs_memcached_unix", '>', 3, "vs memcached (unix), 1 MiB" },
	{ "get", "get_4k_vs_memcached_tcp", '>', 20, "vs memcached (TCP loopback), 4 KiB" },
	{ "get", "get_64k_vs_memcached_tcp", '>', 5, "vs memcached (TCP loopback), 64 KiB" },
	{ "get", "get_1m_vs_memcached_tcp", '>', 3, "vs memcached (TCP loopback), 1 MiB" },
	{ "get", "get_4k_vs_redis_unix", '>', 20, "vs Redis (unix), 4 KiB" },
	{ "get", "get_64k_vs_redis_unix", '>', 5, "vs Redis (unix), 64 KiB" },
	{ "get", "get_1m_vs_redis_unix", '>', 3, "vs Redis (unix), 1 MiB" },
	{ "get", "get_4k_vs_redis_tcp", '>', 20, "vs Redis (TCP loopback), 4 KiB" },
	{ "get", "get_64k_vs_redis_tcp", '>', 5, "vs Redis (TCP loopback), 64 KiB" },
	{ "get", "get_1m_vs_redis_tcp", '>', 3, "vs Redis (TCP loopback), 1 MiB" },
	{ "get", "get_4k_vs_socket_floor", '>', 5, "vs a minimal unix-socket server, 4 KiB" },
	{ "get", "get_1m_vs_socket_floor", '>', 1.5, "vs a minimal unix-socket server, 1 MiB" },
	{ "get", "get_4k_vs_lmdb", '>', 1.2, "vs LMDB mdb_get (value read in place), 4 KiB" },
	{ "get", "get_64k_vs_lmdb", '>', 1.0, "vs LMDB, 64 KiB" },
	{ "get", "get_1m_vs_lmdb", '>', 1.0, "vs LMDB, 1 MiB" },
	{ "get", "get_4k_vs_floor", '<', 1.4, "our time / the memory floor's (no lookup), 4 KiB" },
	{ "get", "get_64k_vs_floor", '<', 1.05, "our time / the memory floor's, 64 KiB" },
	{ "get", "get_1m_vs_floor", '<', 1.05, "our time / the memory floor's, 1 MiB" },
	/* ring */
	{ "ring", "records_8_vs_rte_ring", '>', 1.0, "records/s vs rte_ring (zero-copy), 8 tokens, every token read" },
	{ "ring", "records_256_vs_rte_ring", '>', 1.0, "records/s vs rte_ring (zero-copy), 256 tokens, every token read" },
	{ "ring", "records_8_vs_pipe", '>', 3, "records/s vs a pipe (same batching), 8 tokens" },
	{ "ring", "records_256_vs_pipe", '>', 1.5, "records/s vs a pipe (same batching), 256 tokens" },
	{ "ring", "batcher_ns_per_token", '<', 10, "batcher cost per token, ns" },
	/* l3 */
	{ "l3", "fill_cold_4m_vs_fio", '>', 0.9, "cold 4 MiB fills / fio (mmaphuge, fixedbufs), same depth" },
	{ "l3", "fill_cold_4m_vs_liburing", '>', 0.9, "cold 4 MiB fills / bare liburing read_fixed, same depth" },
	{ "l3", "fill_cold_64k_vs_fio", '>', 0.9, "cold 64 KiB fills / fio, same depth" },
	{ "l3", "fill_warm_4m_vs_pread_xxh3", '>', 1.0, "warm 4 MiB fills / buffered pread + XXH3-128, same CPUs" },
	{ "l3", "fill_cold_4m_direct_fraction", '>', 1.0, "cold 4 MiB fills that used O_DIRECT" },
	{ "l3", "fill_cold_64k_direct_fraction", '>', 1.0, "cold 64 KiB fills that used O_DIRECT" },
	/* probes */
	{ "probes", "probes_unattached_overhead", '<', 0.02, "L2 hit with probes unattached vs none" },
	/* restore */
	{ "restore", "restore_l2_vs_get", '<', 1.5, "restore from L2 p50 / key + sc_l2_get + release p50, 4096 tokens" },
	{ "restore", "restore_l2_p99_with_writer_vs_quiet_p50", '<', 10, "restore p99 with a writer / quiet p50" },
	{ "restore", "token_verify_cost", '<', 2.0, "restore p50 with token verification / without, tokens not cached" },
	/* policy */
	{ "policy", "policy_real_vs_lru_min", '>', 1.0, "byte hit ratio, real arena / simulated LRU, worst of 10 traces" },
	{ "policy", "policy_real_vs_s3fifo_min", '>', 0.98, "byte hit ratio, real arena / simulated S3-FIFO, worst of 10 traces" },
	{ "policy", "policy_benefit_vs_s3fifo", '>', 1.3, "compute saved per byte of L2, real arena / simulated S3-FIFO, mixed-cost trace" },
	{ "policy", "policy_benefit_uniform_max_dev", '<', 0.0, "benefit simulator vs S3-FIFO with uniform costs, byte hit ratio difference" },
	{ "policy", "restore_deadline_misses_started", '<', 0.0, "fills started by restores past their deadline" },
	{ "policy", "policy_scan_hot_drop_pts", '<', 5, "hot requests' hit ratio lost to a 2x-budget scan, points" },
	/* segments (issue 19) */
	{ "segments", "segments_physical_vs_logical_l2", '<', 0.35, "L2 physical / logical bytes, multi-turn trace" },
	{ "segments", "segments_physical_vs_logical_l3", '<', 0.35, "L3 physical / logical bytes, multi-turn trace" },
	{ "segments", "segments_hit_contiguous_vs_plain", '>', 0.95, "hit + read of an unfragmented segmented entry / segments off" },
	{ "segments", "segments_copyout_scattered_vs_memcpy", '>', 0.9, "copy-out of a scattered entry / memcpy" },
	{ "segments", "segments_admit_vs_plain", '>', 0.8, "admit with segment hashing and lookups / segments off" },
	{ "segments", "segments_policy_bhr_vs_off", '>', 1.5, "byte hit ratio of the multi-turn trace under pressure, on / off" },
};
#define NTARGET (sizeof(targets) / sizeof(targets[0]))

int bench_quick;
static int json_out;
static const char *out_path;
static FILE *out_file;
static int started; /* the first figure was printed (the machine's description went first) */
static void machine_env(void);

/* Every figure of this run, for the table and the missing-row rule. */
#define MAX_ROWS 1024
static struct row {
	char bench[16], metric[64], unit[16], why[160];
	double value;
	int missing;
} rows[MAX_ROWS];
static int nrows;

static struct row *row_add(const char *bench, const char *metric)
{
	if (nrows >= MAX_ROWS)
		return NULL;
	struct row *r = &rows[nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->bench, sizeof(r->bench), "%s", bench);
	snprintf(r->metric, sizeof(r->metric), "%s", metric);
	return r;
}

static void json_str(FILE *f, const char *s)
{
	cli_json_str(f, s);
}

/* The output file is created, and the machine described, when the first figure comes: a run that
 * stops at a usage error (the harness's or a benchmark's) writes nothing. */
static void start_output(void)
{
	if (started)
		return;
	started = 1;
	if (out_path && !(out_file = fopen(out_path, "w")))
		fprintf(stderr, "stagecache bench: cannot write %s: %s\n", out_path, strerror(errno));
	machine_env();
}

/* One JSON line to stdout (with --json) and to the --out file. */
static void emit_json(void (*body)(FILE *, const void *), const void *ctx)
{
	start_output();
	FILE *fs[2] = { json_out ? stdout : NULL, out_file };
	for (int i = 0; i < 2; i++)
		if (fs[i]) {
			body(fs[i], ctx);
			fputc('\n', fs[i]);
			fflush(fs[i]);
		}
}

struct fig {
	const char *bench, *metric, *unit, *baseline;
	double value, q1, q3;
	const double *samples;
	int n;
};

static void fig_body(FILE *f, const void *v)
{
	const struct fig *g = v;
	fprintf(f, "{\"bench\":");
	json_str(f, g->bench);
	fprintf(f, ",\"metric\":");
	json_str(f, g->metric);
	fprintf(f, ",\"value\":%.6g,\"unit\":", g->value);
	json_str(f, g->unit);
	if (g->samples) {
		fprintf(f, ",\"q1\":%.6g,\"q3\":%.6g,\"iqr\":%.6g,\"n\":%d,\"samples\":[", g->q1, g->q3, g->q3 - g->q1, g->n);
		for (int i = 0; i < g->n; i++)
			fprintf(f, "%s%.6g", i ? "," : "", g->samples[i]);
		fputc(']', f);
	}
	if (g->baseline) {
		fprintf(f, ",\"baseline\":");
		json_str(f, g->baseline);
	}
	fputc('}', f);
}

static void fig_report(const struct fig *g)
{
	struct row *r = row_add(g->bench, g->metric);
	if (r) {
		r->value = g->value;
		snprintf(r->unit, sizeof(r->unit), "%s", g->unit);
	}
	emit_json(fig_body, g);
	if (!json_out) {
		if (g->samples && g->n > 1)
			printf("%-7s %-40s %12.4g %-9s (IQR %.4g..%.4g, n=%d)\n", g->bench, g->metric, g->value, g->unit, g->q1,
			       g->q3, g->n);
		else
			printf("%-7s %-40s %12.4g %s\n", g->bench, g->metric, g->value, g->unit);
		fflush(stdout);
	}
}

void bench_stat(const char *bench, const char *metric, const char *unit, const double *samples, int n,
		const char *baseline)
{
	if (n < 1) {
		bench_missing(bench, metric, "no samples");
		return;
	}
	double *s = malloc((size_t)n * sizeof(double));
	if (!s) {
		bench_missing(bench, metric, "out of memory");
		return;
	}
	memcpy(s, samples, (size_t)n * sizeof(double));
	double med = bench_median(s, n); /* sorts s */
	struct fig g = { bench, metric, unit, baseline, med, bench_quantile(s, n, 0.25), bench_quantile(s, n, 0.75),
			 samples, n };
	fig_report(&g);
	free(s);
}

void bench_value(const char *bench, const char *metric, double value, const char *unit, const char *baseline)
{
	struct fig g = { bench, metric, unit, baseline, value, 0, 0, NULL, 0 };
	fig_report(&g);
}

struct miss {
	const char *bench, *metric, *why;
};

static void miss_body(FILE *f, const void *v)
{
	const struct miss *m = v;
	fprintf(f, "{\"bench\":");
	json_str(f, m->bench);
	fprintf(f, ",\"metric\":");
	json_str(f, m->metric);
	fprintf(f, ",\"missing\":");
	json_str(f, m->why);
	fputc('}', f);
}

void bench_missing(const char *bench, const char *metric, const char *fmt, ...)
{
	char why[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	for (int i = 0; i < nrows; i++) /* measured after all, or already said */
		if (!strcmp(rows[i].bench, bench) && !strcmp(rows[i].metric, metric))
			return;
	struct row *r = row_add(bench, metric);
	if (r) {
		r->missing = 1;
		snprintf(r->why, sizeof(r->why), "%s", why);
	}
	struct miss m = { bench, metric, why };
	emit_json(miss_body, &m);
	if (!json_out)
		printf("%-7s %-40s missing: %s\n", bench, metric, why);
	fprintf(stderr, "stagecache bench %s: %s not measured: %s\n", bench, metric, why);
}

struct envl {
	const char *bench, *key, *value;
};

static void env_body(FILE *f, const void *v)
{
	const struct envl *e = v;
	fprintf(f, "{\"bench\":");
	json_str(f, e->bench);
	fprintf(f, ",\"env\":");
	json_str(f, e->key);
	fprintf(f, ",\"value\":");
	json_str(f, e->value);
	fputc('}', f);
}

void bench_env(const char *bench, const char *key, const char *fmt, ...)
{
	char v[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	struct envl e = { bench, key, v };
	emit_json(env_body, &e);
	if (!json_out)
		printf("%-7s env %-36s %s\n", bench, key, v);
}

/* ---- helpers ---- */

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_quantile(const double *v, int n, double q)
{
	if (n <= 0)
		return 0;
	double pos = q * (n - 1);
	int i = (int)pos;
	if (i >= n - 1)
		return v[n - 1];
	return v[i] + (v[i + 1] - v[i]) * (pos - i);
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return bench_quantile(v, n, 0.5);
}

static uint64_t read_size_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	unsigned long long v = 0;
	char unit = 0;
	int k = fscanf(f, "%llu%c", &v, &unit);
	fclose(f);
	if (k < 1)
		return 0;
	return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
}

uint64_t bench_llc_bytes(void)
{
	uint64_t best = 0;
	char p[128];
	for (int i = 0; i < 8; i++) {
		snprintf(p, sizeof(p), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		uint64_t s = read_size_file(p);
		if (s > best)
			best = s;
	}
	if (best)
		return best;
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	return l3 > 0 ? (uint64_t)l3 : l2 > 0 ? (uint64_t)l2 : 0;
}

int bench_in_path(const char *prog)
{
	const char *path = getenv("PATH");
	if (!path)
		return 0;
	char dir[4096];
	while (*path) {
		size_t n = strcspn(path, ":");
		if (n && n < sizeof(dir) - strlen(prog) - 2) {
			memcpy(dir, path, n);
			snprintf(dir + n, sizeof(dir) - n, "/%s", prog);
			if (access(dir, X_OK) == 0)
				return 1;
		}
		path += n + (path[n] == ':');
	}
	return 0;
}

void bench_first_line(const char *cmd, char *out, size_t len)
{
	out[0] = 0;
	FILE *f = popen(cmd, "r");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = 0;
	char sink[256];
	while (fgets(sink, sizeof(sink), f))
		;
	pclose(f);
}

int bench_no_options(const char *which, int argc, char **argv, void (*usage)(FILE *))
{
	static const struct option opts[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "bench %s", which);
	optind = 0;
	opterr = 0;
	if (getopt_long(argc, argv, "h", opts, NULL) == 'h') {
		usage(stdout);
		return EXIT_OK;
	}
	if (optind > 1)
		return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
	if (optind < argc)
		return cli_usage_error(cmd, "unknown option '%s'", argv[optind]);
	return -1;
}

void bench_progress(const char *fmt, ...)
{
	if (!isatty(2))
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "\r\033[K");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static void file_line(const char *path, char *out, size_t len)
{
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = 0;
	fclose(f);
}

/* The machine, once per run: what a reader of the figures needs to judge them. */
static void machine_env(void)
{
	char v[512], model[512] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "model name", 10)) {
				char *c = strchr(line, ':');
				snprintf(model, sizeof(model), "%s", c ? c + 2 : line);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		fclose(f);
	}
	struct utsname u;
	uname(&u);
	bench_env("env", "cpu_model", "%s", model);
	bench_env("env", "cpus_online", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
	bench_env("env", "llc_bytes", "%llu", (unsigned long long)bench_llc_bytes());
	bench_env("env", "kernel", "%s %s", u.sysname, u.release);
	file_line("/sys/kernel/mm/transparent_hugepage/enabled", v, sizeof(v));
	bench_env("env", "thp_enabled", "%s", v);
	file_line("/proc/sys/vm/nr_hugepages", v, sizeof(v));
	bench_env("env", "nr_hugepages", "%s", v);
	file_line("/proc/loadavg", v, sizeof(v));
	bench_env("env", "loadavg_at_start", "%s", v);
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(v, sizeof(v), "%Y-%m-%dT%H:%M:%SZ", &tm);
	bench_env("env", "date", "%s", v);
	bench_env("env", "stagecache", "%d.%d (arena layout %u)", SC_VERSION_MAJOR, SC_VERSION_MINOR,
		  sc_arena_layout_version());
#ifdef __VERSION__
	bench_env("env", "compiler", "%s", __VERSION__);
#endif
}

/* ---- the table ---- */

static const struct row *find_row(const char *bench, const char *metric)
{
	for (int i = 0; i < nrows; i++)
		if (!strcmp(rows[i].bench, bench) && !strcmp(rows[i].metric, metric))
			return &rows[i];
	return NULL;
}

/* Misses among the targets of the benchmarks that ran (@ran[i] for benches[i]), plus every figure
 * reported missing. Prints the table to @f when it is not NULL. */
static int evaluate(const int *ran, FILE *f)
{
	int misses = 0, met = 0;
	if (f)
		fprintf(f, "\n%-7s %-36s %12s %9s  %-6s %s\n", "bench", "metric", "value", "target", "", "what (ours / theirs)");
	for (size_t t = 0; t < NTARGET; t++) {
		const struct target *tg = &targets[t];
		size_t b;
		for (b = 0; b < NBENCH && strcmp(benches[b].name, tg->bench); b++)
			;
		if (b == NBENCH || !ran[b])
			continue;
		const struct row *r = find_row(tg->bench, tg->metric);
		char tb[32];
		snprintf(tb, sizeof(tb), "%s %g", tg->op == '<' ? "<=" : ">=", tg->bound);
		if (!r || r->missing) {
			misses++;
			if (f)
				fprintf(f, "%-7s %-36s %12s %9s  %-6s missing: %s\n", tg->bench, tg->metric, "-", tb, "MISS",
					r ? r->why : "not reported (the benchmark failed before it)");
			continue;
		}
		int ok = tg->op == '<' ? r->value <= tg->bound : r->value >= tg->bound;
		misses += !ok;
		met += ok;
		if (f)
			fprintf(f, "%-7s %-36s %12.4g %9s  %-6s %s\n", tg->bench, tg->metric, r->value, tb, ok ? "ok" : "MISS",
				tg->what);
	}
	/* figures without a target that were reported missing are misses too */
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (!r->missing)
			continue;
		size_t t;
		for (t = 0; t < NTARGET && (strcmp(targets[t].bench, r->bench) || strcmp(targets[t].metric, r->metric)); t++)
			;
		if (t < NTARGET)
			continue;
		misses++;
		if (f)
			fprintf(f, "%-7s %-36s %12s %9s  %-6s missing: %s\n", r->bench, r->metric, "-", "", "MISS", r->why);
	}
	if (f)
		fprintf(f, "%d targets met, %d missed or missing\n", met, misses);
	return misses;
}

/* ---- for the report: rows loaded from a JSON file, the targets as a table ---- */

void bench_row_load(const char *bench, const char *metric, double value, const char *unit, const char *why_missing)
{
	struct row *r = row_add(bench, metric);
	if (!r)
		return;
	r->value = value;
	snprintf(r->unit, sizeof(r->unit), "%s", unit ? unit : "");
	if (why_missing) {
		r->missing = 1;
		snprintf(r->why, sizeof(r->why), "%s", why_missing);
	}
}

int bench_targets_write(FILE *f, int html)
{
	int misses = 0, met = 0;
	if (html)
		fprintf(f, "<table>\n<tr><th>bench</th><th>metric</th><th>value</th><th>target</th><th>result</th><th>what (ours / theirs)</th></tr>\n");
	else
		fprintf(f, "| bench | metric | value | target | result | what (ours / theirs) |\n|---|---|---|---|---|---|\n");
	for (size_t t = 0; t < NTARGET; t++) {
		const struct target *tg = &targets[t];
		int any = 0;
		for (int i = 0; i < nrows && !any; i++)
			any = !strcmp(rows[i].bench, tg->bench);
		if (!any)
			continue;
		const struct row *r = find_row(tg->bench, tg->metric);
		char val[64], tb[32], res[200];
		snprintf(tb, sizeof(tb), "%s %g", tg->op == '<' ? "&le;" : "&ge;", tg->bound);
		if (!r || r->missing) {
			misses++;
			snprintf(val, sizeof(val), "—");
			snprintf(res, sizeof(res), "**missing**: %s", r ? r->why : "not reported");
		} else {
			int ok = tg->op == '<' ? r->value <= tg->bound : r->value >= tg->bound;
			misses += !ok;
			met += ok;
			snprintf(val, sizeof(val), "%.3g", r->value);
			snprintf(res, sizeof(res), "%s", ok ? "met" : "**missed**");
		}
		if (html)
			fprintf(f, "<tr><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				tg->bench, tg->metric, val, tb, res, tg->what);
		else
			fprintf(f, "| %s | `%s` | %s | %s | %s | %s |\n", tg->bench, tg->metric, val, tb, res, tg->what);
	}
	if (html)
		fprintf(f, "</table>\n");
	fprintf(f, "%s%d targets met, %d missed or missing.%s\n", html ? "<p>" : "\n", met, misses, html ? "</p>" : "");
	return misses;
}

/* ---- arguments ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench WHICH [--json] [--out FILE] [--table] [--quick] [options of WHICH]\n"
		   "       stagecache bench report JSON DIR\n\n"
		   "Runs benchmarks and prints each figure: the median of repeated runs with its interquartile\n"
		   "range, and for each comparison what the other side did (\"baseline\"). Every comparison is\n"
		   "measured in the same run doing the same work, the runs interleaved.\n\n"
		   "  --json      print JSON lines (one object per figure) instead of text\n"
		   "  --out FILE  also write the JSON lines to FILE (created or truncated once the arguments are valid)\n"
		   "  --table     finish with the table of targets: met, missed, or missing and why\n"
		   "  --quick     fewer repetitions and smaller working sets (a smoke run; figures are rough)\n\n"
		   "WHICH:\n"
		   "  all         every benchmark below, in turn\n");
	for (size_t i = 0; i < NBENCH; i++)
		fprintf(f, "  %-11s %s\n", benches[i].name, benches[i].help);
	fprintf(f, "  report      turn a JSON file of a run into plots (gnuplot) and DIR/report.md, DIR/report.html\n\n"
		   "'stagecache bench WHICH --help' lists a benchmark's own options and metrics.\n"
		   "Exit status: 0 every target met, 1 a target missed, a figure missing or a benchmark failed,\n"
		   "2 usage error.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "stagecache bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\ntry 'stagecache bench --help'\n");
	return EXIT_USAGE;
}

/* The harness's command line: its own options, the benchmark's name, and the rest (rest[0] is
 * the name) for the benchmark. */
struct harness {
	const char *which;
	int table, help;
	char **rest;
	int nrest;
};

/* Pass 1: the harness's own options; everything else belongs to the benchmark. 0 or an exit status. */
static int parse_harness(int argc, char **argv, struct harness *h)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--table")) {
			h->table = 1;
		} else if (!strcmp(a, "--json")) {
			json_out = 1;
		} else if (!strcmp(a, "--quick")) {
			bench_quick = 1;
		} else if (!strcmp(a, "--out") || !strncmp(a, "--out=", 6)) {
			if (a[5] == '=')
				out_path = a + 6;
			else if (i + 1 >= argc)
				return usage_error("%s needs a file name", a);
			else
				out_path = argv[++i];
			if (!*out_path)
				return usage_error("%s", "--out needs a non-empty file name");
		} else if ((!strcmp(a, "--help") || !strcmp(a, "-h")) && !h->which) {
			h->help = 1;
		} else if (!h->which && a[0] != '-') {
			h->which = a;
			h->rest[0] = argv[i];
		} else {
			h->rest[h->nrest++] = argv[i];
		}
	}
	return 0;
}

/* Refuse an unwritable --out file now, without truncating it. */
static int check_out_path(void)
{
	int e = 0, fd = open(out_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
	} else if (errno == ENOENT) {
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", out_path);
		char *slash = strrchr(dir, '/');
		if (slash)
			slash[slash == dir] = 0;
		if (access(slash ? dir : ".", W_OK | X_OK))
			e = errno;
	} else {
		e = errno;
	}
	if (e)
		fprintf(stderr, "stagecache bench: cannot write %s: %s\n", out_path, strerror(e));
	return e;
}

/* Benchmark @sel (or every one with @all), in turn; which ran in @ran, *failed when one failed.
 * EXIT_USAGE when a benchmark refused its options, else 0. */
static int run_benches(int all, size_t sel, struct harness *h, int *ran, int *failed)
{
	for (size_t i = 0; i < NBENCH; i++) {
		if (!all && i != sel)
			continue;
		h->rest[0] = (char *)benches[i].name;
		ran[i] = 1;
		bench_progress("bench %s ...\n", benches[i].name);
		int rc = benches[i].fn(h->nrest, h->rest);
		if (rc == EXIT_USAGE) {
			ran[i] = 0;
			return EXIT_USAGE;
		}
		if (rc) {
			*failed = 1;
			fprintf(stderr, "stagecache bench: %s failed (exit %d)\n", benches[i].name, rc);
		}
	}
	return 0;
}

/* Everything before the run: help, the benchmark chosen, its own --help, the --out file.
 * Returns -1 to go on with *all / *sel set, else the exit status. */
static int choose(struct harness *h, int *all, size_t *sel)
{
	if (h->help && !h->which) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!h->which) {
		if (h->nrest > 1)
			return usage_error("unexpected option '%s' before the benchmark's name", h->rest[1]);
		char names[256] = "all";
		for (size_t i = 0; i < NBENCH; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), ", %s", benches[i].name);
		return usage_error("missing WHICH, the benchmark to run: %s or report", names);
	}
	if (!strcmp(h->which, "report"))
		return bench_report(h->nrest, h->rest);
	*all = !strcmp(h->which, "all");
	*sel = NBENCH;
	for (size_t i = 0; i < NBENCH; i++)
		if (!strcmp(h->which, benches[i].name))
			*sel = i;
	if (!*all && *sel == NBENCH)
		return usage_error("unknown benchmark '%s' (see 'stagecache bench --help')", h->which);
	if (*all && h->nrest > 1) {
		if (!strcmp(h->rest[1], "--help") || !strcmp(h->rest[1], "-h")) {
			usage(stdout);
			printf("\n'bench all' runs each benchmark above in turn with --json/--out/--table/--quick.\n");
			return EXIT_OK;
		}
		return usage_error("'bench all' takes only --json, --out, --table and --quick, not '%s'", h->rest[1]);
	}
	/* a benchmark's --help needs no output file */
	for (int i = 1; i < h->nrest; i++)
		if (!strcmp(h->rest[i], "--help") || !strcmp(h->rest[i], "-h"))
			return benches[*sel].fn(h->nrest, h->rest);
	if (out_path && check_out_path())
		return EXIT_FAIL;
	return -1;
}

int main(int argc, char **argv)
{
	struct harness h = { .nrest = 1 };
	h.rest = calloc((size_t)argc + 1, sizeof(char *));
	if (!h.rest)
		return EXIT_FAIL;
	int all = 0, rc = parse_harness(argc, argv, &h);
	size_t sel = NBENCH;
	if (rc || (rc = choose(&h, &all, &sel)) >= 0) {
		free(h.rest);
		return rc;
	}
	int ran[NBENCH] = { 0 }, failed = 0;
	int usage_rc = run_benches(all, sel, &h, ran, &failed);
	free(h.rest);
	if (!usage_rc)
		start_output();
	int misses = evaluate(ran, NULL);
	if (h.table)
		evaluate(ran, json_out ? stderr : stdout);
	if (out_file)
		fclose(out_file);
	if (usage_rc)
		return EXIT_USAGE;
	return failed || misses ? EXIT_FAIL : EXIT_OK;
}
