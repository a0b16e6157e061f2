/*
 * tools/bench/tsc.h — per-operation latencies in time-stamp-counter ticks, for the benchmarks that
 * time single operations (bench l2, bench restore): calibrated once against CLOCK_MONOTONIC, the
 * cost of a fenced read pair subtracted. x86 only, as the benchmarks that use it.
 */
#ifndef SC_TOOLS_BENCH_TSC_H
#define SC_TOOLS_BENCH_TSC_H

#include <stddef.h>
#include <stdint.h>
#include <x86intrin.h>

extern double bench_ns_per_tick;    /* set by bench_tsc_calibrate() */
extern uint64_t bench_tsc_overhead; /* ticks of an empty TSC_START/TSC_STOP pair (median) */

/* Measure bench_ns_per_tick (over 50 ms) and bench_tsc_overhead. */
void bench_tsc_calibrate(void);
/* qsort comparison of two uint64_t. */
int bench_cmp_u64(const void *x, const void *y);
/* @t ticks in ns, the overhead subtracted. */
double bench_ticks_ns(uint64_t t);
/* ns at quantile @q of @n sorted tick counts, the overhead subtracted. */
double bench_tick_q(const uint64_t *d, size_t n, double q);

#define TSC_START() (_mm_lfence(), __rdtsc())
#define TSC_STOP(t0) (_mm_lfence(), __rdtsc() - (t0))

#endif
