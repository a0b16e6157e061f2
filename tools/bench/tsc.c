/* tools/bench/tsc.c — the time-stamp counter, calibrated (see bench_tsc.h). */
#include <stdlib.h>

#include "bench.h"
#include "tsc.h"

double bench_ns_per_tick;
uint64_t bench_tsc_overhead;

int bench_cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

void bench_tsc_calibrate(void)
{
	double t0 = cli_now();
	uint64_t c0 = __rdtsc();
	while (cli_now() - t0 < 0.05)
		;
	bench_ns_per_tick = (cli_now() - t0) * 1e9 / (double)(__rdtsc() - c0);
	enum { N = 20000 };
	static uint64_t d[N];
	for (int i = 0; i < N; i++) {
		_mm_lfence();
		uint64_t t1 = __rdtsc();
		_mm_lfence();
		d[i] = __rdtsc() - t1;
	}
	qsort(d, N, sizeof(d[0]), bench_cmp_u64);
	bench_tsc_overhead = d[N / 2];
}

double bench_ticks_ns(uint64_t t)
{
	return (double)(t > bench_tsc_overhead ? t - bench_tsc_overhead : 0) * bench_ns_per_tick;
}

double bench_tick_q(const uint64_t *d, size_t n, double q)
{
	return bench_ticks_ns(d[(size_t)(q * (double)(n - 1))]);
}
