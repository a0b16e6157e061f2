/*
 * tools/cmd_bench.c — `stagecache bench WHICH [--json] [--out FILE] [--quick]`.
 *
 * Each component benchmark lives in tools/bench_<which>.c as `int bench_<which>(int argc, char **argv)`
 * and prints JSON lines through cli_bench_line. They are bound weakly: a benchmark whose file is
 * not in this build is reported as unavailable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define BENCHES(X)                                                                 \
	X(l2, "L2 hit latency, key hashing, copy-out and admit vs memcpy, 2-process scaling") \
	X(ring, "commit rings vs DPDK rte_ring and a pipe; batcher cost per token")   \
	X(l3, "L3 fills (cold and warm) vs fio and a pread loop")                     \
	X(probes, "USDT probe overhead, unattached and attached")                     \
	X(servers, "L2 gets vs memcached and Redis")

#define DECLARE(name, help) int bench_##name(int argc, char **argv) __attribute__((weak));
BENCHES(DECLARE)

static FILE *out_file;

/* Every figure printed in this run, for the --table summary. */
#define MAX_ROWS 512
static struct row {
	char bench[16], metric[64], unit[16];
	double value;
} rows[MAX_ROWS];
static int nrows;

void cli_bench_line(const char *bench, const char *metric, double value, const char *unit, const char *baseline)
{
	FILE *fs[2] = { stdout, out_file };
	for (int i = 0; i < 2; i++) {
		FILE *f = fs[i];
		if (!f)
			continue;
		fprintf(f, "{\"bench\":\"%s\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"", bench, metric, value, unit);
		if (baseline) {
			fprintf(f, ",\"baseline\":");
			cli_json_str(f, baseline);
		}
		fprintf(f, "}\n");
		fflush(f);
	}
	if (nrows < MAX_ROWS) {
		struct row *r = &rows[nrows++];
		snprintf(r->bench, sizeof(r->bench), "%s", bench);
		snprintf(r->metric, sizeof(r->metric), "%s", metric);
		snprintf(r->unit, sizeof(r->unit), "%s", unit);
		r->value = value;
	}
}

/* The targets of the issues: a metric matching @pattern (a '*' matches any run of characters)
 * must be >= min (throughput ratios) or <= max (latencies, overheads). */
static const struct target {
	const char *pattern;
	double min, max;
	const char *what;
} targets[] = {
	{ "hit_lease_p50_ns", 0, 150, "lookup + lease + release, ns (lower is better)" },
	{ "key_4096_tokens_ns", 0, 1500, "key of 4096 tokens, ns (lower is better)" },
	{ "copyout_1m_vs_memcpy", 0.8, 0, "copy-out get / memcpy, 1 MiB (higher is better)" },
	{ "admit_1m_vs_memcpy", 0.4, 0, "admit with digest / memcpy, 1 MiB (higher is better)" },
	{ "hit_2proc_vs_1proc", 1.7, 0, "lookups/s, 2 readers / 1 (higher is better)" },
	{ "batcher_ns_per_token", 0, 10, "batcher cost per token, ns (lower is better)" },
	{ "records_8_vs_rte_ring", 1.0, 0, "records/s vs DPDK rte_ring, 8 tokens (higher is better)" },
	{ "records_256_vs_rte_ring", 1.0, 0, "records/s vs DPDK rte_ring, 256 tokens (higher is better)" },
	{ "records_8_vs_pipe", 20, 0, "records/s vs a pipe, 8 tokens (higher is better)" },
	{ "records_256_vs_pipe", 3, 0, "records/s vs a pipe, 256 tokens (higher is better)" },
	{ "fill_cold_4m_vs_fio", 0.9, 0, "cold 4 MiB fills vs fio io_uring O_DIRECT (higher is better)" },
	{ "fill_cold_64k_vs_pread", 1.5, 0, "cold 64 KiB fills vs O_DIRECT pread (higher is better)" },
	{ "fill_warm_4m_vs_pread", 0.9, 0, "warm 4 MiB fills vs buffered pread (higher is better)" },
	{ "probes_unattached_overhead", 0, 0.02, "L2 hit with probes unattached vs none (lower is better)" },
	{ "get_1m_copy_vs_*", 2, 0, "copy-out get vs server, 1 MiB (higher is better)" },
	{ "get_*_copy_vs_*", 20, 0, "copy-out get vs server (higher is better)" },
	{ "get_*_vs_*", 100, 0, "zero-copy get vs server (higher is better)" },
};

static int match(const char *pat, const char *s)
{
	if (!*pat)
		return !*s;
	if (*pat == '*')
		return match(pat + 1, s) || (*s && match(pat, s + 1));
	return *pat == *s && match(pat + 1, s + 1);
}

static int print_table(void)
{
	int misses = 0;
	printf("\n%-32s %12s %10s  %-4s %s\n", "metric", "value", "target", "", "what (ours / theirs)");
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
			const struct target *tg = &targets[t];
			if (!match(tg->pattern, r->metric))
				continue;
			int ok = tg->max ? r->value <= tg->max : r->value >= tg->min;
			char tb[32];
			snprintf(tb, sizeof(tb), "%s %g", tg->max ? "<=" : ">=", tg->max ? tg->max : tg->min);
			printf("%-32s %12.4g %10s  %-4s %s\n", r->metric, r->value, tb, ok ? "ok" : "MISS", tg->what);
			misses += !ok;
			break;
		}
	}
	printf("%d of the targets above missed\n", misses);
	return misses;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double cli_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench WHICH [--json] [--out FILE] [--table] [options of WHICH]\n\n"
		   "Prints one JSON object per line: {\"bench\",\"metric\",\"value\",\"unit\"[,\"baseline\"]}.\n"
		   "Ratios compare with a baseline measured in the same run on the same sizes.\n"
		   "  --out FILE  also write the JSON lines to FILE\n"
		   "  --table     finish with a table of every figure that has a target, and whether it is met\n\nWHICH:\n"
		   "  all         every benchmark below\n");
#define HELP(name, help) fprintf(f, "  %-11s %s%s\n", #name, help, bench_##name ? "" : " (not in this build)");
	BENCHES(HELP)
#undef HELP
	fprintf(f, "\n'stagecache bench WHICH --help' lists a benchmark's own options.\n");
}

int cmd_bench(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	/* --out FILE is ours; everything else goes to the benchmark */
	char **rest = calloc((size_t)argc + 1, sizeof(char *));
	int n = 0, table = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--table")) {
			table = 1;
			continue;
		}
		if (!strcmp(argv[i], "--out")) {
			if (i + 1 >= argc) {
				free(rest);
				return cli_usage_error("bench", "--out needs a file name");
			}
			out_file = fopen(argv[++i], "w");
			if (!out_file) {
				free(rest);
				return cli_fail("bench", 0, "cannot write %s", argv[i]);
			}
			continue;
		}
		rest[n++] = argv[i];
	}
	int rc = EXIT_OK;
	const char *which = rest[0];
	if (!strcmp(which, "all") && n > 1 && (!strcmp(rest[1], "--help") || !strcmp(rest[1], "-h"))) {
		free(rest);
		usage(stdout);
		printf("\n'bench all' runs each benchmark above in turn with the options given (e.g. --json, --quick).\n");
		return EXIT_OK;
	}
	int found = 0;
#define RUN(name, help)                                                                  \
	if (!strcmp(which, #name) || !strcmp(which, "all")) {                           \
		found = 1;                                                              \
		if (bench_##name) {                                                     \
			int r = bench_##name(n, rest);                                  \
			if (r && rc == EXIT_OK)                                         \
				rc = r;                                                 \
		} else if (strcmp(which, "all")) {                                      \
			rc = cli_fail("bench", 0, "benchmark '%s' is not in this build", which); \
		}                                                                       \
	}
	BENCHES(RUN)
#undef RUN
	free(rest);
	if (out_file)
		fclose(out_file);
	if (!found)
		return cli_usage_error("bench", "unknown benchmark '%s'", which);
	if (table)
		print_table();
	return rc;
}
