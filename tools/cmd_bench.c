/*
 * tools/cmd_bench.c — `stagecache bench ...`: runs the benchmark binary `stagecache-bench` found
 * next to this one (installed beside it), with the same arguments.
 *
 * The benchmarks compare with other systems (LMDB, DPDK, memcached and Redis over their wire
 * protocols, fio); they live in their own binary so that the product binary depends only on what
 * it uses (`ldd stagecache`: liburing, libbpf, libelf, zlib, libxxhash, libc).
 *
 * This file also holds the small timing helpers other subcommands share (cli_now, cli_median).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

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

int cmd_bench(int argc, char **argv)
{
	char self[PATH_MAX], bin[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return cli_fail("bench", -errno, "cannot find this program (/proc/self/exe)");
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(bin, sizeof(bin), "%s/stagecache-bench", self);
	if (access(bin, X_OK)) {
		int e = errno;
		fprintf(stderr, "stagecache bench: the benchmark program %s is not there (%s): build it with 'make' "
				"(or install it next to stagecache)\n", bin, strerror(e));
		return EXIT_FAIL;
	}
	char **args = calloc((size_t)argc + 1, sizeof(char *));
	if (!args)
		return cli_fail("bench", -ENOMEM, "arguments");
	args[0] = "stagecache-bench";
	for (int i = 1; i < argc; i++)
		args[i] = argv[i];
	fflush(stdout);
	fflush(stderr);
	execv(bin, args);
	int e = errno;
	free(args);
	return cli_fail("bench", -e, "cannot run %s", bin);
}
