/*
 * tools/common/measure.c — clocks and order statistics that the command, the demo, the stress
 * harness and the benchmarks share (one copy: the figures they print are computed the same way).
 */
#include <stdlib.h>
#include <time.h>

#include "cli.h"

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t cli_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double cli_quantile(const double *v, int n, double q)
{
	if (n <= 0)
		return 0;
	double pos = q * (n - 1);
	int i = (int)pos;
	if (i >= n - 1)
		return v[n - 1];
	return v[i] + (v[i + 1] - v[i]) * (pos - i);
}

double cli_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return cli_quantile(v, n, 0.5);
}
