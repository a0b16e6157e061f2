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

void cli_bench_line(const char *bench, const char *metric, double value, const char *unit, const char *baseline)
{
	FILE *fs[2] = { stdout, out_file };
	for (int i = 0; i < 2; i++) {
		FILE *f = fs[i];
		if (!f)
			continue;
		fprintf(f, "{\"bench\":\"%s\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"", bench, metric, value, unit);
		if (baseline)
			fprintf(f, ",\"baseline\":\"%s\"", baseline);
		fprintf(f, "}\n");
		fflush(f);
	}
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
	fprintf(f, "usage: stagecache bench WHICH [--json] [--out FILE] [options of WHICH]\n\n"
		   "Prints one JSON object per line: {\"bench\",\"metric\",\"value\",\"unit\"[,\"baseline\"]}.\n"
		   "Ratios compare with a baseline measured in the same run on the same sizes.\n\nWHICH:\n"
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
	int n = 0;
	for (int i = 1; i < argc; i++) {
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
	return rc;
}
