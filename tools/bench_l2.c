/*
 * tools/bench_l2.c — `stagecache bench l2 [--json] [--quick]`.
 *
 * Metrics (one JSON line each, medians of repeated runs):
 *   hit_lease_p50_ns / hit_lease_p99_ns  precomputed key: lookup + lease + release, per operation
 *                                        (TSC-timed, timer overhead subtracted), 1024 small entries
 *   key_4096_tokens_ns                   sc_l2_key over 4096 tokens
 *   copyout_1m_vs_memcpy                 GB/s of sc_l2_get_copy of 1 MiB entries over 256 distinct
 *                                        entries (256 MiB, > LLC) / GB/s of memcpy from 256 distinct
 *                                        1 MiB buffers into the same destination, same run
 *   admit_1m_vs_memcpy                   GB/s of sc_l2_admit of 1 MiB payloads (digest check + copy +
 *                                        publish, replacing 256 keys) / the same memcpy baseline
 *   copyout_1m_gbps / admit_1m_gbps /    the GB/s behind those ratios (memcpy_1m_gbps: the copy-out
 *   memcpy_1m_gbps                       round's baseline)
 *   hit_1proc_ops / hit_2proc_ops        aggregate lease lookups/s of one / two reader processes
 *   hit_2proc_vs_1proc                   aggregate lease lookups/s of two processes / one process
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#include "bench.h"

#define SMALL_KEYS 1024
#define BIG_KEYS 256
#define MIB (1u << 20)

struct bench {
	struct sc_arena *a;
	struct sc_stage *st;
	char name[64];
	int quick;
};

static void toks(int32_t *t, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n; i++)
		t[i] = (int32_t)(base * 7919u + (uint32_t)i);
}

static double tsc_ns_per_tick(void)
{
	double t0 = bench_now();
	uint64_t c0 = __rdtsc();
	while (bench_now() - t0 < 0.05)
		;
	return (bench_now() - t0) * 1e9 / (double)(__rdtsc() - c0);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

static int admit_small(struct bench *b, struct sc_key *keys)
{
	uint8_t buf[512];
	memset(buf, 0x5a, sizeof(buf));
	for (uint32_t k = 0; k < SMALL_KEYS; k++) {
		int32_t t[32];
		toks(t, 32, k);
		buf[0] = (uint8_t)k;
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
		int rc = sc_l2_admit(b->st, "bench", t, 32, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT);
		if (rc)
			return rc;
		sc_l2_key(b->st, "bench", t, 32, &keys[k]);
	}
	return 0;
}

static void bench_hit_latency(struct bench *b, const struct sc_key *keys)
{
	double ns_tick = tsc_ns_per_tick();
	int n = b->quick ? 20000 : 200000;
	uint64_t *d = malloc((size_t)n * sizeof(*d));
	/* timer overhead: an empty timed region */
	for (int i = 0; i < n; i++) {
		_mm_lfence();
		uint64_t t0 = __rdtsc();
		_mm_lfence();
		uint64_t t1 = __rdtsc();
		d[i] = t1 - t0;
	}
	qsort(d, (size_t)n, sizeof(*d), cmp_u64);
	uint64_t over = d[n / 2];
	double p50[5], p99[5];
	uint32_t x = 1;
	for (int r = 0; r < 5; r++) {
		for (int i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			struct sc_key k = keys[(x >> 8) % SMALL_KEYS];
			struct sc_lease l;
			_mm_lfence();
			uint64_t t0 = __rdtsc();
			_mm_lfence();
			int rc = sc_l2_get_key(b->st, k, &l);
			sc_lease_release(&l);
			_mm_lfence();
			uint64_t t1 = __rdtsc();
			d[i] = (t1 - t0) > over ? (t1 - t0) - over : 0;
			if (rc)
				d[i] = UINT64_MAX / 2;
		}
		qsort(d, (size_t)n, sizeof(*d), cmp_u64);
		p50[r] = (double)d[n / 2] * ns_tick;
		p99[r] = (double)d[(size_t)n * 99 / 100] * ns_tick;
	}
	free(d);
	bench_value("l2", "hit_lease_p50_ns", bench_median(p50, 5), "ns", NULL);
	bench_value("l2", "hit_lease_p99_ns", bench_median(p99, 5), "ns", NULL);
}

static void bench_key(struct bench *b)
{
	int32_t t[4096];
	toks(t, 4096, 3);
	int n = b->quick ? 2000 : 20000;
	double v[7];
	struct sc_key k;
	for (int r = 0; r < 7; r++) {
		double t0 = bench_now();
		for (int i = 0; i < n; i++) {
			t[0] = i;
			sc_l2_key(b->st, "bench", t, 4096, &k);
		}
		v[r] = (bench_now() - t0) * 1e9 / n;
	}
	bench_value("l2", "key_4096_tokens_ns", bench_median(v, 7), "ns", NULL);
}

/* memcpy of 1 MiB from each of BIG_KEYS distinct buffers into @dst: GB/s */
static double memcpy_rate(uint8_t **src, uint8_t *dst, int rounds)
{
	double t0 = bench_now();
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < BIG_KEYS; i++) {
			memcpy(dst, src[i], MIB);
			__asm__ volatile("" ::"r"(dst) : "memory");
		}
	return (double)rounds * BIG_KEYS * MIB / (bench_now() - t0) / 1e9;
}

static int bench_big(struct bench *b)
{
	uint8_t **src = calloc(BIG_KEYS, sizeof(*src));
	struct sc_digest *dig = calloc(BIG_KEYS, sizeof(*dig));
	uint8_t *dst = aligned_alloc(4096, MIB);
	int rc = 0;
	if (!src || !dig || !dst)
		return -ENOMEM;
	/* the baseline's sources: one 256 MiB mapping with transparent hugepages advised, so that
	 * memcpy is not handicapped by 4 KiB TLB misses against a hugepage-backed arena */
	size_t span = (size_t)BIG_KEYS * MIB + (2u << 20);
	uint8_t *region = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return -ENOMEM;
	uint8_t *base = (uint8_t *)(((uintptr_t)region + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
	(void)madvise(base, (size_t)BIG_KEYS * MIB, MADV_HUGEPAGE);
	for (int i = 0; i < BIG_KEYS; i++) {
		src[i] = base + (size_t)i * MIB;
		for (size_t j = 0; j < MIB; j += 8) {
			uint64_t v = (uint64_t)i * 0x9e3779b97f4a7c15ull + j;
			memcpy(src[i] + j, &v, 8);
		}
		dig[i] = sc_digest(src[i], MIB);
	}
	memset(dst, 1, MIB);
	int rounds = b->quick ? 1 : 2, reps = b->quick ? 3 : 5;
	double admit_r[5], copy_r[5], base_a[5], base_c[5];
	for (int r = 0; r < reps; r++) {
		/* admit: digest verification + copy into the arena + publish (replacing after round 0) */
		base_a[r] = memcpy_rate(src, dst, rounds);
		double t0 = bench_now();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < BIG_KEYS; i++) {
				int32_t t[16];
				toks(t, 16, 100000u + (uint32_t)i);
				struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { src[i] }, .sec_len = { MIB } };
				if ((rc = sc_l2_admit(b->st, "big", t, 16, dig[i], &p, SC_ORIGIN_DIRECT)))
					goto out;
			}
		admit_r[r] = (double)rounds * BIG_KEYS * MIB / (bench_now() - t0) / 1e9;
		/* copy-out of every entry into one destination, vs memcpy of the same sizes */
		base_c[r] = memcpy_rate(src, dst, rounds);
		t0 = bench_now();
		for (int k = 0; k < rounds; k++)
			for (int i = 0; i < BIG_KEYS; i++) {
				int32_t t[16];
				toks(t, 16, 100000u + (uint32_t)i);
				int64_t got = sc_l2_get_copy(b->st, "big", t, 16, NULL, dst, MIB, NULL);
				if (got != MIB) {
					rc = got < 0 ? (int)got : -EIO;
					goto out;
				}
			}
		copy_r[r] = (double)rounds * BIG_KEYS * MIB / (bench_now() - t0) / 1e9;
	}
	double ra[5], rcpy[5];
	for (int r = 0; r < reps; r++) {
		ra[r] = admit_r[r] / base_a[r];
		rcpy[r] = copy_r[r] / base_c[r];
	}
	bench_value("l2", "copyout_1m_gbps", bench_median(copy_r, reps), "GB/s", NULL);
	bench_value("l2", "admit_1m_gbps", bench_median(admit_r, reps), "GB/s", NULL);
	bench_value("l2", "memcpy_1m_gbps", bench_median(base_c, reps), "GB/s", NULL);
	bench_value("l2", "copyout_1m_vs_memcpy", bench_median(rcpy, reps), "ratio",
		       "memcpy of 1 MiB from 256 distinct 1 MiB buffers (256 MiB > LLC) into one buffer, same run");
	bench_value("l2", "admit_1m_vs_memcpy", bench_median(ra, reps), "ratio",
		       "memcpy of 1 MiB from 256 distinct 1 MiB buffers (256 MiB > LLC) into one buffer, same run");
out:
	munmap(region, span);
	free(src);
	free(dig);
	free(dst);
	return rc;
}

/* One reader process: lookups over the small keys until told to stop; writes its count. */
static void reader_child(const char *name, int go_fd, int out_fd, double secs)
{
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(name, &a) || sc_stage_open(a, "bench-model", "bench-state", &st))
		_exit(2);
	struct sc_key keys[SMALL_KEYS];
	for (uint32_t k = 0; k < SMALL_KEYS; k++) {
		int32_t t[32];
		toks(t, 32, k);
		sc_l2_key(st, "bench", t, 32, &keys[k]);
	}
	char c;
	if (read(go_fd, &c, 1) != 1)
		_exit(3);
	uint64_t ops = 0;
	uint32_t x = (uint32_t)getpid();
	double end = bench_now() + secs;
	while (bench_now() < end) {
		for (int i = 0; i < 256; i++) {
			x = x * 1103515245u + 12345u;
			struct sc_lease l;
			if (sc_l2_get_key(st, keys[(x >> 8) % SMALL_KEYS], &l) == 0)
				sc_lease_release(&l);
			ops++;
		}
	}
	double rate = (double)ops / secs;
	if (write(out_fd, &rate, sizeof(rate)) != sizeof(rate))
		_exit(4);
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

static double run_readers(const char *name, int nproc, double secs)
{
	int go[2], out[2];
	if (pipe(go) || pipe(out))
		return -1;
	pid_t pids[2];
	for (int i = 0; i < nproc; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			reader_child(name, go[0], out[1], secs);
	}
	usleep(50000); /* let both attach and hash their keys */
	char c[2] = { 'g', 'g' };
	if (write(go[1], c, (size_t)nproc) != nproc)
		return -1;
	double total = 0;
	for (int i = 0; i < nproc; i++) {
		double r;
		if (read(out[0], &r, sizeof(r)) == sizeof(r))
			total += r;
	}
	for (int i = 0; i < nproc; i++)
		waitpid(pids[i], NULL, 0);
	close(go[0]);
	close(go[1]);
	close(out[0]);
	close(out[1]);
	return total;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench l2 [--json] [--quick]\n\n"
		   "Creates a temporary 640 MiB arena and prints one JSON line per metric (medians of repeated\n"
		   "runs); output is JSON lines either way. --quick: fewer repetitions.\n\n"
		   "  hit_lease_p50_ns      median ns of one hit by precomputed key: lookup + lease + release\n"
		   "  hit_lease_p99_ns      99th percentile of the same (1024 small entries, TSC-timed)\n"
		   "  key_4096_tokens_ns    ns of one sc_l2_key over 4096 tokens\n"
		   "  copyout_1m_gbps       GB/s of sc_l2_get_copy of 1 MiB entries, 256 distinct (256 MiB)\n"
		   "  admit_1m_gbps         GB/s of sc_l2_admit of 1 MiB payloads (digest check, copy, publish)\n"
		   "  memcpy_1m_gbps        GB/s of plain memcpy of the same sizes over a 256 MiB working set\n"
		   "  copyout_1m_vs_memcpy  copyout_1m_gbps / memcpy GB/s of the same round\n"
		   "  admit_1m_vs_memcpy    admit_1m_gbps / memcpy GB/s of the same round\n"
		   "  hit_1proc_ops         lease lookups/s of one reader process\n"
		   "  hit_2proc_ops         aggregate lease lookups/s of two reader processes\n"
		   "  hit_2proc_vs_1proc    hit_2proc_ops / hit_1proc_ops, same keys, same run\n");
}

int bench_l2(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, 0, 'j' }, { "quick", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct bench b = { 0 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': break;
		case 'q': b.quick = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("bench l2", "unknown option");
		}
	}
	snprintf(b.name, sizeof(b.name), "bench-l2-%d", (int)getpid());
	struct sc_arena_opts o = { .size_bytes = 640ull << 20, .huge = SC_HUGE_AUTO };
	int rc = sc_arena_create(b.name, &o, &b.a);
	if (rc) {
		o.huge = SC_HUGE_OFF;
		rc = sc_arena_create(b.name, &o, &b.a);
	}
	if (rc)
		return cli_fail("bench l2", rc, "cannot create a 640 MiB arena");
	int ret = EXIT_FAIL;
	struct sc_key *keys = calloc(SMALL_KEYS, sizeof(*keys));
	if (!keys || (rc = sc_stage_open(b.a, "bench-model", "bench-state", &b.st))) {
		cli_fail("bench l2", rc, "stage");
		goto cleanup;
	}
	if ((rc = admit_small(&b, keys))) {
		cli_fail("bench l2", rc, "admit");
		goto cleanup;
	}
	bench_hit_latency(&b, keys);
	bench_key(&b);
	if ((rc = bench_big(&b))) {
		cli_fail("bench l2", rc, "1 MiB copy-out / admit");
		goto cleanup;
	}
	{
		double secs = b.quick ? 0.3 : 1.0, r1[3], r2[3], ratio[3];
		for (int r = 0; r < 3; r++) {
			r1[r] = run_readers(b.name, 1, secs);
			r2[r] = run_readers(b.name, 2, secs);
			ratio[r] = r1[r] > 0 ? r2[r] / r1[r] : 0;
		}
		bench_value("l2", "hit_1proc_ops", bench_median(r1, 3), "ops/s", NULL);
		bench_value("l2", "hit_2proc_ops", bench_median(r2, 3), "ops/s", NULL);
		bench_value("l2", "hit_2proc_vs_1proc", bench_median(ratio, 3), "ratio",
			       "aggregate lease lookups/s of 1 reader process, same keys, same run");
	}
	ret = EXIT_OK;
cleanup:
	free(keys);
	sc_stage_close(b.st);
	sc_arena_close(b.a);
	sc_arena_destroy(NULL, b.name);
	return ret;
}
