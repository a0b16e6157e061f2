/*
 * tools/bench/l2.c — `stagecache bench l2`: the L2 tier's own costs, each against the same work
 * done without it, in the same run.
 *
 *   hit_lease_p50_ns, hit_lease_p99_ns   precomputed key: lookup + lease + release (1024 small
 *                                        entries, TSC-timed per operation, timer cost subtracted)
 *   key_4096_tokens_ns                   sc_l2_key over 4096 tokens
 *   hit_scale_p50/p99/p999_ns            1 M entries (index >> LLC) with KV-descriptor payloads,
 *                                        random keys, the key hashed from 32 tokens each time:
 *                                        sc_l2_get + read of the descriptor and first payload line
 *                                        + release
 *   hit_with_writer_p50/p99/p999_ns      the same while another process admits new entries into
 *                                        the full budget at full speed (an eviction per admit);
 *                                        hit_p999_with_writer_vs_quiet_p50 (target <= 20)
 *   lmdb_scale_p50/p99/p999_ns           context: LMDB, same keys (XXH3-128 of the tokens), same
 *                                        payload bytes, txn renew + mdb_get + the same reads + reset
 *   admit_<s>_vs_xxh3_memcpy             admit (digest verified, copied, published) / XXH3-128 +
 *                                        memcpy into a destination per source (as many bytes as
 *                                        the sources: written as cold as the heap blocks an admit
 *                                        writes), 4k 64k 1m; _hot_dst (context): the baseline into
 *                                        16 rotating destinations that stay in the cache
 *   admit_full_vs_not_full               64 KiB admits when each must evict / when there is room
 *   copyout_<s>_vs_memcpy                sc_l2_get_copy into rotating destinations / memcpy of the
 *                                        same bytes from the same number of buffers
 *   hit_1proc_ops, hit_2proc_ops, hit_2proc_vs_1proc
 *                                        hits/s, barrier start, one common window, hits only
 *   mem_<s>_overhead_bytes               bytes of arena per entry beyond the payload: heap rounding
 *                                        and block header (measured) + index slot and bucket
 *   density_4k, density_64k              payload held at the first eviction / heap bytes, 256 MiB
 *                                        arena with an index slot per 4 KiB (density_4k_default_index:
 *                                        the default slot per 16 KiB, context)
 *   events_*                             the KV-event stream's costs: tools/bench/events.c
 */
#include <errno.h>
#include <getopt.h>
#include <lmdb.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "bench.h"
#include "tsc.h"

#define B "l2"
#define SMALL_KEYS 1024
#define MIB (1u << 20)
#define NTOK 32
#define KV_BYTES 256u  /* scale entries: a KV section with its descriptor ... */
#define REC_BYTES 64u  /* ... and a recurrent section */

static void toks(int32_t *t, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n; i++)
		t[i] = (int32_t)((base * 2654435761u) ^ (uint32_t)(i * 40503u));
}

/* ---- small entries: hit by precomputed key, key hashing ---- */

static int bench_small(struct sc_stage *st)
{
	uint8_t buf[512];
	struct sc_key *keys = calloc(SMALL_KEYS, sizeof(*keys));
	memset(buf, 0x5a, sizeof(buf));
	for (uint32_t k = 0; k < SMALL_KEYS; k++) {
		int32_t t[NTOK];
		toks(t, NTOK, k);
		buf[0] = (uint8_t)k;
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
		int rc = sc_l2_admit(st, "bench", t, NTOK, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT);
		if (rc) {
			free(keys);
			return rc;
		}
		sc_l2_key(st, "bench", t, NTOK, &keys[k]);
	}
	int n = bench_quick ? 20000 : 200000, reps = bench_quick ? 3 : 7;
	uint64_t *d = malloc((size_t)n * sizeof(*d));
	double p50[8], p99[8];
	uint32_t x = 1;
	for (int r = 0; r < reps; r++) {
		for (int i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			struct sc_key k = keys[(x >> 8) % SMALL_KEYS];
			struct sc_lease l;
			uint64_t t0 = TSC_START();
			int rc = sc_l2_get_key(st, k, &l);
			sc_lease_release(&l);
			d[i] = rc ? UINT64_MAX / 2 : TSC_STOP(t0);
		}
		qsort(d, (size_t)n, sizeof(*d), bench_cmp_u64);
		p50[r] = bench_tick_q(d, (size_t)n, 0.5);
		p99[r] = bench_tick_q(d, (size_t)n, 0.99);
	}
	free(d);
	free(keys);
	bench_stat(B, "hit_lease_p50_ns", "ns", p50, reps, NULL);
	bench_stat(B, "hit_lease_p99_ns", "ns", p99, reps, NULL);

	int32_t t[4096];
	toks(t, 4096, 3);
	int m = bench_quick ? 2000 : 20000;
	double v[8];
	struct sc_key k;
	for (int r = 0; r < reps; r++) {
		double t0 = cli_now();
		for (int i = 0; i < m; i++) {
			t[0] = i;
			sc_l2_key(st, "bench", t, 4096, &k);
		}
		v[r] = (cli_now() - t0) * 1e9 / m;
	}
	bench_stat(B, "key_4096_tokens_ns", "ns", v, reps, NULL);
	return 0;
}

/* ---- the hit path at scale ---- */

static void kv_desc_for(struct sc_kv_desc *d, uint32_t ntok)
{
	memset(d, 0, sizeof(*d));
	d->version = 1;
	d->layer_end = 1;
	d->layer_count = 1;
	d->token_count = ntok;
	d->k_row_bytes = d->v_row_bytes = KV_BYTES / 2;
	d->v_element_bytes = 2;
	d->payload_bytes = KV_BYTES;
}

struct scale {
	uint32_t n;             /* entries */
	int32_t *tok;           /* n * NTOK */
	uint8_t (*lkey)[16];    /* LMDB keys: XXH3-128 of the tokens */
	_Atomic int *stop;      /* shared with the writer process */
	_Atomic uint64_t *writer_admits;
};

static int scale_fill(struct sc_stage *st, struct scale *s)
{
	uint8_t pay[KV_BYTES + REC_BYTES];
	struct sc_kv_desc desc;
	kv_desc_for(&desc, NTOK);
	for (uint32_t i = 0; i < s->n; i++) {
		int32_t *t = s->tok + (size_t)i * NTOK;
		toks(t, NTOK, 0x100000u + i);
		memset(pay, (int)(i & 0xff), sizeof(pay));
		memcpy(pay, &i, 4);
		struct sc_payload p = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { pay, pay + KV_BYTES },
					.sec_len = { KV_BYTES, REC_BYTES }, .kv_desc = &desc };
		int rc = sc_l2_admit(st, "scale", t, NTOK, sc_digest(pay, sizeof(pay)), &p, SC_ORIGIN_DIRECT);
		if (rc)
			return rc;
		XXH128_hash_t h = XXH3_128bits(t, NTOK * sizeof(int32_t));
		memcpy(s->lkey[i], &h, 16);
	}
	return 0;
}

/* Random hits at scale; p50/p99/p999 into out[0..2] (ns); misses counted in *misses. */
static void scale_hits(struct sc_stage *st, const struct scale *s, int n, uint64_t seed, double *out, uint64_t *misses)
{
	uint64_t *d = malloc((size_t)n * sizeof(*d));
	uint64_t x = seed | 1, sink = 0;
	int got = 0;
	for (int i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		const int32_t *t = s->tok + (size_t)(x % s->n) * NTOK;
		struct sc_lease l;
		uint64_t t0 = TSC_START();
		int rc = sc_l2_get(st, "scale", t, NTOK, NULL, &l);
		if (rc == 0) {
			sink += l.kv_desc.token_count + *(const volatile uint8_t *)l.sec[0];
			sc_lease_release(&l);
			d[got++] = TSC_STOP(t0);
		} else {
			(*misses)++;
		}
	}
	qsort(d, (size_t)got, sizeof(*d), bench_cmp_u64);
	out[0] = got ? bench_tick_q(d, (size_t)got, 0.5) : 0;
	out[1] = got ? bench_tick_q(d, (size_t)got, 0.99) : 0;
	out[2] = got ? bench_tick_q(d, (size_t)got, 0.999) : 0;
	free(d);
	__asm__ volatile("" ::"r"(sink));
}

/* The writer process: new keys, admitted at full speed into the full budget, until told to stop. */
static void writer_main(const char *name, struct scale *s)
{
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(name, &a) || sc_stage_open(a, "bench-model", "bench-state", &st))
		_exit(2);
	uint8_t pay[KV_BYTES + REC_BYTES];
	struct sc_kv_desc desc;
	kv_desc_for(&desc, NTOK);
	memset(pay, 0x77, sizeof(pay));
	struct sc_digest dg = sc_digest(pay, sizeof(pay));
	struct sc_payload p = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { pay, pay + KV_BYTES },
				.sec_len = { KV_BYTES, REC_BYTES }, .kv_desc = &desc };
	int32_t t[NTOK];
	for (uint32_t i = 0; !atomic_load(s->stop); i++) {
		toks(t, NTOK, 0x40000000u + i);
		if (sc_l2_admit(st, "writer", t, NTOK, dg, &p, SC_ORIGIN_DIRECT) == 0)
			atomic_fetch_add(s->writer_admits, 1);
	}
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

static int lmdb_scale(const struct scale *s, int n, int reps, double (*q)[3])
{
	char dir[96];
	snprintf(dir, sizeof(dir), "/dev/shm/sc-bench-l2-lmdb.%d", (int)getpid());
	if (mkdir(dir, 0700))
		return -1;
	MDB_env *env = NULL;
	MDB_txn *txn = NULL;
	MDB_dbi dbi;
	int rc = mdb_env_create(&env);
	if (!rc)
		rc = mdb_env_set_mapsize(env, (size_t)s->n * 1024 + (64ull << 20));
	if (!rc)
		rc = mdb_env_open(env, dir, MDB_NOSYNC | MDB_WRITEMAP, 0600);
	if (!rc)
		rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &dbi);
	uint8_t pay[KV_BYTES + REC_BYTES];
	for (uint32_t i = 0; !rc && i < s->n; i++) {
		memset(pay, (int)(i & 0xff), sizeof(pay));
		memcpy(pay, &i, 4);
		MDB_val k = { 16, s->lkey[i] }, v = { sizeof(pay), pay };
		rc = mdb_put(txn, dbi, &k, &v, 0);
	}
	if (!rc)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (!rc)
		rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	uint64_t *d = malloc((size_t)n * sizeof(*d)), sink = 0;
	for (int r = 0; !rc && r < reps; r++) {
		mdb_txn_reset(txn);
		uint64_t x = (0x1234567ull + (uint64_t)r) | 1;
		int got = 0;
		for (int i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			const int32_t *t = s->tok + (size_t)(x % s->n) * NTOK;
			uint64_t t0 = TSC_START();
			XXH128_hash_t h = XXH3_128bits(t, NTOK * sizeof(int32_t));
			MDB_val k = { 16, &h }, v;
			mdb_txn_renew(txn);
			int hit = mdb_get(txn, dbi, &k, &v) == 0;
			if (hit)
				sink += *(const volatile uint8_t *)v.mv_data + v.mv_size;
			mdb_txn_reset(txn);
			uint64_t dt = TSC_STOP(t0);
			if (hit)
				d[got++] = dt;
		}
		qsort(d, (size_t)got, sizeof(*d), bench_cmp_u64);
		q[r][0] = bench_tick_q(d, (size_t)got, 0.5);
		q[r][1] = bench_tick_q(d, (size_t)got, 0.99);
		q[r][2] = bench_tick_q(d, (size_t)got, 0.999);
	}
	__asm__ volatile("" ::"r"(sink));
	free(d);
	if (txn && !rc)
		mdb_txn_abort(txn);
	if (env)
		mdb_env_close(env);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
	}
	return rc ? -1 : 0;
}

/* Rounds of @n hits while a writer process admits at full speed (each admit evicting): each
 * round's quantiles in busy[r], misses in *bmiss, the writer's admits over *wr_us microseconds. */
static void scale_with_writer(struct sc_stage *st, struct scale *s, const char *name, int n, int reps,
			      double busy[][3], uint64_t *bmiss, uint64_t *admits, uint64_t *wr_us)
{
	for (int r = 0; r < reps; r++) {
		atomic_store(s->stop, 0);
		atomic_store(s->writer_admits, 0);
		pid_t w = fork();
		if (w == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			writer_main(name, s);
		}
		while (atomic_load(s->writer_admits) < 1000) /* the writer is running and evicting */
			sched_yield();
		double t0 = cli_now();
		uint64_t a0 = atomic_load(s->writer_admits);
		scale_hits(st, s, n, 2000 + (uint64_t)r, busy[r], bmiss);
		*admits += atomic_load(s->writer_admits) - a0;
		*wr_us += (uint64_t)((cli_now() - t0) * 1e6);
		atomic_store(s->stop, 1);
		waitpid(w, NULL, 0);
	}
}

static const char *const qn[3] = { "p50", "p99", "p999" };

/* One row per quantile: @prefix_<q>_ns over the rounds of @per_round. */
static void stat_quantiles(const char *prefix, double per_round[][3], int reps, const char *baseline)
{
	double v[8];
	char m[64];
	for (int k = 0; k < 3; k++) {
		for (int r = 0; r < reps; r++)
			v[r] = per_round[r][k];
		snprintf(m, sizeof(m), "%s_%s_ns", prefix, qn[k]);
		bench_stat(B, m, "ns", v, reps, baseline);
	}
}

static int bench_scale(void)
{
	struct scale s = { .n = bench_quick ? 100000 : 1000000 };
	char name[64];
	snprintf(name, sizeof(name), "bench-l2s-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	/* each entry's heap footprint (payload, descriptor, token ids, block header) plus its index
	 * slot, bucket and slack */
	uint64_t bytes = (uint64_t)s.n * (sc_l2_footprint(NULL, KV_BYTES + REC_BYTES, 1, NTOK) + 256) + (128ull << 20);
	if (bench_l2_arena(name, bytes, s.n + s.n / 8, &a, &st))
		return -1;
	s.tok = malloc((size_t)s.n * NTOK * sizeof(int32_t));
	s.lkey = malloc((size_t)s.n * 16);
	s.stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	s.writer_admits = (_Atomic uint64_t *)(void *)((char *)s.stop + 64);
	int rc = s.tok && s.lkey && s.stop != MAP_FAILED ? scale_fill(st, &s) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "stagecache bench l2: filling %u entries: %s\n", s.n, sc_strerror(rc));
		goto out;
	}
	/* the budget is now exactly what the entries use: every admission of the writer evicts */
	struct sc_l2_stats ls;
	sc_l2_stats(a, NULL, &ls);
	sc_l2_shrink_to(a, ls.bytes);
	int n = bench_quick ? 50000 : 400000, reps = bench_quick ? 3 : 5;
	double quiet[8][3], busy[8][3], lm[8][3];
	uint64_t qmiss = 0, bmiss = 0, admits = 0, wr_s = 0;
	scale_hits(st, &s, n / 4, 99, quiet[0], &qmiss); /* warm-up: code, TLB */
	qmiss = 0;
	/* every quiet round first: a writer round evicts entries the readers would then miss */
	for (int r = 0; r < reps; r++)
		scale_hits(st, &s, n, 1000 + (uint64_t)r, quiet[r], &qmiss);
	scale_with_writer(st, &s, name, n, reps, busy, &bmiss, &admits, &wr_s);

	stat_quantiles("hit_scale", quiet, reps, NULL);
	double qp50[8], ratio[8];
	for (int r = 0; r < reps; r++)
		qp50[r] = quiet[r][0];
	double quiet_p50 = cli_median(qp50, reps);
	stat_quantiles("hit_with_writer", busy, reps, NULL);
	for (int r = 0; r < reps; r++)
		ratio[r] = busy[r][2] / quiet_p50;
	char note[300];
	snprintf(note, sizeof(note), "p99.9 of hits while a writer process admits at full speed into the full budget "
		 "(%.0f admits/s, each evicting) / the quiet p50; %u entries, key hashed from %d tokens", wr_s ? (double)admits * 1e6 / (double)wr_s : 0,
		 s.n, NTOK);
	bench_stat(B, "hit_p999_with_writer_vs_quiet_p50", "ratio", ratio, reps, note);
	bench_value(B, "hit_with_writer_miss_fraction", (double)bmiss / ((double)n * reps), "fraction", NULL);
	bench_value(B, "writer_admits_per_s", wr_s ? (double)admits * 1e6 / (double)wr_s : 0, "admits/s", NULL);
	if (qmiss)
		bench_value(B, "hit_scale_quiet_misses", (double)qmiss, "misses", NULL);
	if (lmdb_scale(&s, n, reps, lm) == 0)
		stat_quantiles("lmdb_scale", lm, reps,
			       "LMDB (tmpfs, 4 KiB pages), same keys: XXH3-128 of the 32 tokens, txn renew, mdb_get, first byte read, reset");
	else
		bench_missing(B, "lmdb_scale_p50_ns", "the LMDB environment could not be built");
out:
	free(s.tok);
	free(s.lkey);
	if (s.stop != MAP_FAILED && s.stop)
		munmap((void *)s.stop, 4096);
	bench_l2_arena_drop(name, a, st);
	return rc;
}

/* ---- admit and copy-out vs the same bytes moved without L2 ---- */

static const struct { const char *tag; uint64_t bytes; } sizes[3] = { { "4k", 4096 }, { "64k", 65536 }, { "1m", MIB } };

#define NDST 16

/* What the admit and copy-out measurements share: the source bytes (> LLC), their digests, 16
 * rotating destinations of 1 MiB (copy-outs), and as many destination bytes as sources (the admit
 * baseline's: each memcpy writes memory untouched for a whole round, as an admit writes heap blocks
 * last used a round or more ago). */
struct move {
	uint64_t ws;
	int reps;
	uint8_t *src, *dst, *far;
	struct sc_digest *dg;
};

/* Seconds to copy @n sources of @sz bytes from @src, source i into @dst + (i % @wrap) * @stride, each
 * hashed first (XXH3-128, into @sink) when @hash. */
static double copy_run(const uint8_t *src, uint32_t n, uint64_t sz, uint8_t *dst, uint64_t stride, uint32_t wrap,
		       int hash, volatile uint64_t *sink)
{
	double t0 = cli_now();
	for (uint32_t i = 0; i < n; i++) {
		if (hash)
			*sink += sc_digest(src + (uint64_t)i * sz, sz).lo;
		memcpy(dst + (uint64_t)(i % wrap) * stride, src + (uint64_t)i * sz, sz);
	}
	return cli_now() - t0;
}

/* Size @si: admit vs XXH3-128 + memcpy, copy-out vs memcpy, @reps rounds; 0 or negative errno. */
static int move_size(const struct move *mv, struct sc_arena *a, struct sc_stage *st, int si)
{
	const uint8_t *src = mv->src;
	uint8_t *dst = mv->dst;
	struct sc_digest *dg = mv->dg;
	int reps = mv->reps, rc = 0;
	uint64_t sz = sizes[si].bytes;
	uint32_t n = (uint32_t)(mv->ws / sz);
	for (uint32_t i = 0; i < n; i++)
		dg[i] = sc_digest(src + (uint64_t)i * sz, sz);
	double ra[16], rh[16], rc_[16], ba[16], bc[16];
	volatile uint64_t sink = 0;
	for (int r = 0; r < reps && !rc; r++) {
		/* baseline: XXH3-128 of each source + memcpy into its own destination, untouched since
		 * the last round; context: the same into 16 rotating destinations, which stay in the cache */
		double tb = copy_run(src, n, sz, mv->far, sz, n, 1, &sink);
		double th = copy_run(src, n, sz, dst, MIB, NDST, 1, &sink);
		/* ours: admit each (the digest verified against the expected one, copied, published) */
		double t0 = cli_now();
		for (uint32_t i = 0; i < n && !rc; i++) {
			int32_t t[NTOK];
			toks(t, NTOK, 0x200000u + (uint32_t)si * 0x100000u + i);
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { src + (uint64_t)i * sz }, .sec_len = { sz } };
			rc = sc_l2_admit(st, "move", t, NTOK, dg[i], &p, SC_ORIGIN_DIRECT);
		}
		double ta = cli_now() - t0;
		/* copy-out of every entry into a rotating destination vs memcpy of the same bytes */
		double tm = copy_run(src, n, sz, dst, MIB, NDST, 0, &sink);
		t0 = cli_now();
		for (uint32_t i = 0; i < n && !rc; i++) {
			int32_t t[NTOK];
			toks(t, NTOK, 0x200000u + (uint32_t)si * 0x100000u + i);
			int64_t got = sc_l2_get_copy(st, "move", t, NTOK, NULL, dst + (uint64_t)(i % NDST) * MIB, MIB, NULL);
			if (got != (int64_t)sz)
				rc = got < 0 ? (int)got : -EIO;
		}
		double tc = cli_now() - t0;
		ra[r] = tb / ta;
		rh[r] = th / ta;
		rc_[r] = tm / tc;
		ba[r] = (double)n * (double)sz / ta / 1e9;
		bc[r] = (double)n * (double)sz / tc / 1e9;
	}
	if (rc)
		return rc;
	char m[64], note[300];
	snprintf(note, sizeof(note), "XXH3-128 of each %s source + memcpy into its own destination (%llu MiB of them, "
		 "untouched for a round, as the heap blocks an admit writes); %u sources (%llu MiB, > LLC), same order; "
		 "ours: sc_l2_admit with the expected digest (verified, copied, published)",
		 sizes[si].tag, (unsigned long long)(mv->ws >> 20), n, (unsigned long long)(mv->ws >> 20));
	snprintf(m, sizeof(m), "admit_%s_vs_xxh3_memcpy", sizes[si].tag);
	bench_stat(B, m, "ratio", ra, reps, note);
	snprintf(note, sizeof(note), "context: the same baseline with its memcpy into one of 16 rotating 1 MiB destinations "
		 "(%s of each written: they stay in the cache, which no admit's heap block does)", sizes[si].tag);
	snprintf(m, sizeof(m), "admit_%s_vs_xxh3_memcpy_hot_dst", sizes[si].tag);
	bench_stat(B, m, "ratio", rh, reps, note);
	snprintf(m, sizeof(m), "admit_%s_gbps", sizes[si].tag);
	bench_stat(B, m, "GB/s", ba, reps, NULL);
	snprintf(note, sizeof(note), "memcpy of the same %u x %s bytes from plain memory into 16 rotating destinations; ours: "
		 "sc_l2_get_copy from 32 tokens (key hashed each time)", n, sizes[si].tag);
	snprintf(m, sizeof(m), "copyout_%s_vs_memcpy", sizes[si].tag);
	bench_stat(B, m, "ratio", rc_, reps, note);
	snprintf(m, sizeof(m), "copyout_%s_gbps", sizes[si].tag);
	bench_stat(B, m, "GB/s", bc, reps, NULL);
	sc_l2_clear(a);
	return 0;
}

/* @k admits of new keys from source object @first on into stage @st; admits per second. */
static double admit_run(const struct move *mv, struct sc_stage *st, uint32_t first, uint32_t k, int *rc)
{
	uint64_t sz = 65536;
	double t0 = cli_now();
	for (uint32_t i = first; i < first + k && !*rc; i++) {
		int32_t t[NTOK];
		toks(t, NTOK, 0x900000u + i);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { mv->src + (uint64_t)i * sz }, .sec_len = { sz } };
		*rc = sc_l2_admit(st, "full", t, NTOK, mv->dg[i], &p, SC_ORIGIN_DIRECT);
	}
	return (double)k / (cli_now() - t0);
}

/* Admit into a full arena (each admit evicts one) vs with room, 64 KiB: a fresh arena per
 * round, k admits of new keys with room, the budget set to what they use, k more new keys. */
static int admit_full(const struct move *mv)
{
	uint64_t sz = 65536;
	uint32_t k = (uint32_t)(mv->ws / sz) / 4;
	double full[16], room[16], ratio[16];
	int reps = mv->reps, rc = 0;
	for (uint32_t i = 0; i < 2 * k; i++)
		mv->dg[i] = sc_digest(mv->src + (uint64_t)i * sz, sz);
	char fname[64];
	snprintf(fname, sizeof(fname), "bench-l2f-%d", (int)getpid());
	for (int r = 0; r < reps && !rc; r++) {
		struct sc_arena *fa;
		struct sc_stage *fst;
		if ((rc = bench_l2_arena(fname, (uint64_t)k * (sz + 4096) * 3 + (32ull << 20), 4 * k, &fa, &fst)))
			break;
		room[r] = admit_run(mv, fst, 0, k, &rc);
		struct sc_l2_stats ls;
		sc_l2_stats(fa, NULL, &ls);
		sc_l2_shrink_to(fa, ls.bytes);
		full[r] = admit_run(mv, fst, k, k, &rc);
		ratio[r] = full[r] / room[r];
		sc_l2_stats(fa, NULL, &ls);
		if (!rc && ls.evictions < k) {
			fprintf(stderr, "stagecache bench l2: only %llu evictions for %u admits into a full budget\n",
				(unsigned long long)ls.evictions, k);
			rc = -EIO;
		}
		bench_l2_arena_drop(fname, fa, fst);
	}
	if (!rc) {
		char note[200];
		snprintf(note, sizeof(note), "the same number (%u) of admits of new 64 KiB entries into a fresh arena with room "
			 "(no eviction); full: the budget holds exactly the first %u, each admit evicts one", k, k);
		bench_stat(B, "admit_full_vs_not_full", "ratio", ratio, reps, note);
		bench_stat(B, "admit_full_64k_per_s", "admits/s", full, reps, NULL);
		bench_stat(B, "admit_room_64k_per_s", "admits/s", room, reps, NULL);
	} else {
		bench_missing(B, "admit_full_vs_not_full", "an admission failed: %s", sc_strerror(rc));
	}
	return rc;
}

static int bench_move(void)
{
	struct move mv = { .ws = bench_quick ? (32ull << 20) : (256ull << 20), .reps = bench_quick ? 3 : 7 };
	uint64_t ws = mv.ws;
	char name[64];
	snprintf(name, sizeof(name), "bench-l2m-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	uint32_t maxn = (uint32_t)(ws / 4096);
	/* room for two generations of the largest set of entries (a round replaces the previous
	 * round's entries, which are reclaimed behind it): each entry's footprint, plus the 4 KiB
	 * alignment gap a page-aligned block may leave before the next */
	uint64_t need = 0;
	for (int si = 0; si < 3; si++) {
		uint64_t per = sc_l2_footprint(NULL, sizes[si].bytes, 0, NTOK) + 4096, all = ws / sizes[si].bytes * per;
		need = all > need ? all : need;
	}
	if (bench_l2_arena(name, need * 2 + (64ull << 20), maxn * 3, &a, &st))
		return -1;
	mv.src = bench_huge_alloc(ws, 0, NULL);
	mv.far = bench_huge_alloc(ws, 0, NULL);
	mv.dst = aligned_alloc(4096, NDST * MIB);
	mv.dg = calloc(maxn, sizeof(*mv.dg));
	int rc = mv.src == MAP_FAILED || mv.far == MAP_FAILED || !mv.dst || !mv.dg ? -ENOMEM : 0;
	if (rc)
		goto out;
	memset(mv.dst, 0, NDST * MIB);
	memset(mv.far, 0, ws); /* faulted in before any clock, as the arena's heap is */
	uint64_t x = 88172645463325252ull;
	for (uint64_t o = 0; o < ws; o += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(mv.src + o, &x, 8);
	}
	for (int si = 0; si < 3 && !rc; si++)
		rc = move_size(&mv, a, st, si);
	if (rc) {
		fprintf(stderr, "stagecache bench l2: admit/copy-out: %s\n", sc_strerror(rc));
		goto out;
	}
	rc = admit_full(&mv);
out:
	if (rc)
		fprintf(stderr, "stagecache bench l2: admit/copy-out: %s\n", sc_strerror(rc));
	if (mv.src != MAP_FAILED)
		munmap(mv.src, ws);
	if (mv.far != MAP_FAILED)
		munmap(mv.far, ws);
	free(mv.dst);
	free(mv.dg);
	bench_l2_arena_drop(name, a, st);
	return rc;
}

/* ---- 2 readers vs 1: barrier start, one common window, hits only ---- */

struct race {
	_Atomic int ready, go, stop;
	_Atomic uint64_t ops[2], misses;
};

static void reader_main(const char *name, struct race *rc, int me)
{
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(name, &a) || sc_stage_open(a, "bench-model", "bench-state", &st))
		_exit(2);
	struct sc_key keys[SMALL_KEYS];
	for (uint32_t k = 0; k < SMALL_KEYS; k++) {
		int32_t t[NTOK];
		toks(t, NTOK, k);
		sc_l2_key(st, "bench", t, NTOK, &keys[k]);
	}
	atomic_fetch_add(&rc->ready, 1);
	while (!atomic_load_explicit(&rc->go, memory_order_acquire))
		_mm_pause();
	uint64_t ops = 0, miss = 0;
	uint32_t x = (uint32_t)getpid();
	while (!atomic_load_explicit(&rc->stop, memory_order_relaxed)) {
		for (int i = 0; i < 64; i++) {
			x = x * 1103515245u + 12345u;
			struct sc_lease l;
			if (sc_l2_get_key(st, keys[(x >> 8) % SMALL_KEYS], &l) == 0) {
				sc_lease_release(&l);
				ops++;
			} else {
				miss++;
			}
		}
	}
	atomic_store(&rc->ops[me], ops);
	atomic_fetch_add(&rc->misses, miss);
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

/* hits/s of @nproc readers over one window of @secs, or -1 */
static double race(const char *name, struct race *r, int nproc, double secs)
{
	memset(r, 0, sizeof(*r));
	pid_t pid[2];
	for (int i = 0; i < nproc; i++)
		if ((pid[i] = fork()) == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			reader_main(name, r, i);
		}
	while (atomic_load(&r->ready) < nproc)
		usleep(1000);
	double t0 = cli_now();
	atomic_store_explicit(&r->go, 1, memory_order_release);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&r->stop, 1);
	double t = cli_now() - t0;
	int ok = 1;
	for (int i = 0; i < nproc; i++) {
		int st;
		waitpid(pid[i], &st, 0);
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	if (!ok || atomic_load(&r->misses))
		return -1;
	return (double)(atomic_load(&r->ops[0]) + (nproc > 1 ? atomic_load(&r->ops[1]) : 0)) / t;
}

static int bench_scaling(const char *name)
{
	struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return -1;
	int reps = bench_quick ? 3 : 7;
	double secs = bench_quick ? 0.2 : 0.5, r1[16], r2[16], ratio[16];
	for (int i = 0; i < reps; i++) {
		r1[i] = race(name, r, 1, secs);
		r2[i] = race(name, r, 2, secs);
		if (r1[i] <= 0 || r2[i] <= 0) {
			munmap(r, sizeof(*r));
			bench_missing(B, "hit_2proc_vs_1proc", "a reader failed or missed");
			return -1;
		}
		ratio[i] = r2[i] / r1[i];
	}
	munmap(r, sizeof(*r));
	bench_stat(B, "hit_1proc_ops", "hits/s", r1, reps, NULL);
	bench_stat(B, "hit_2proc_ops", "hits/s", r2, reps, NULL);
	bench_stat(B, "hit_2proc_vs_1proc", "ratio", ratio, reps,
		   "hits/s of 1 reader process; both: 1024 keys, precomputed, lease + release, every lookup a hit, readers "
		   "released together at a barrier, one common window timed by the parent");
	return 0;
}

/* ---- memory per entry ---- */

static int bench_memory(void)
{
	for (int si = 0; si < 3; si++) {
		uint64_t sz = sizes[si].bytes;
		uint32_t n = sz >= MIB ? 64 : 1024;
		char name[64];
		snprintf(name, sizeof(name), "bench-l2mem-%d", (int)getpid());
		struct sc_arena *a;
		struct sc_stage *st;
		if (bench_l2_arena(name, (uint64_t)n * (sz + 8192) + (32ull << 20), n * 2, &a, &st))
			return -1;
		uint8_t *v = calloc(1, sz);
		struct sc_digest d = sc_digest(v, sz);
		int rc = 0;
		for (uint32_t i = 0; i < n && !rc; i++) {
			int32_t t[NTOK];
			toks(t, NTOK, 0x700000u + i);
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { v }, .sec_len = { sz } };
			rc = sc_l2_admit(st, "mem", t, NTOK, d, &p, SC_ORIGIN_DIRECT);
		}
		struct sc_l2_stats ls;
		struct sc_arena_info *info = calloc(1, sizeof(*info));
		if (!rc)
			rc = sc_l2_stats(a, NULL, &ls);
		if (!rc)
			rc = sc_arena_info(a, info);
		if (!rc) {
			/* heap: footprint (usable size rounded + block header) beyond the payload, measured;
			 * index: one 128-byte slot and a 4-byte bucket (buckets: a power of two >= slots) */
			uint64_t nb = 1;
			while (nb < info->index_entries)
				nb <<= 1;
			double heap = (double)(ls.bytes - ls.logical_bytes) / (double)ls.entries;
			double index = 128.0 + 4.0 * (double)nb / (double)info->index_entries;
			char m[64], note[200];
			snprintf(m, sizeof(m), "mem_%s_overhead_bytes", sizes[si].tag);
			snprintf(note, sizeof(note), "per entry beyond the %llu payload bytes: heap rounding and block header %.0f B "
				 "(measured) + index slot and bucket %.0f B", (unsigned long long)sz, heap, index);
			bench_value(B, m, heap + index, "bytes", note);
			snprintf(m, sizeof(m), "mem_%s_overhead_fraction", sizes[si].tag);
			bench_value(B, m, (heap + index) / (double)sz, "fraction", NULL);
		}
		free(info);
		free(v);
		bench_l2_arena_drop(name, a, st);
		if (rc) {
			fprintf(stderr, "stagecache bench l2: memory per entry: %s\n", sc_strerror(rc));
			return -1;
		}
	}
	return 0;
}

/* ---- density: payload held / heap bytes ---- */

/* Admit @sz-byte entries (NTOK token ids each) into a fresh arena of @bytes with @entries index
 * slots until the first eviction or refusal; the most payload held / the heap's bytes into *@out. */
static int density_of(uint64_t bytes, uint32_t entries, uint64_t sz, double *out)
{
	char name[64];
	snprintf(name, sizeof(name), "bench-l2dense-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	if (bench_l2_arena(name, bytes, entries, &a, &st))
		return -1;
	uint8_t *v = malloc(sz);
	struct sc_arena_info *info = calloc(1, sizeof(*info));
	int rc = v && info ? sc_arena_info(a, info) : -ENOMEM;
	struct sc_l2_stats ls = { 0 };
	uint64_t held = 0;
	for (uint32_t i = 0; !rc && !ls.evictions && !ls.admission_rejects; i++) {
		int32_t t[NTOK];
		toks(t, NTOK, 0x900000u + i);
		memset(v, (int)i, sz);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { v }, .sec_len = { sz } };
		rc = sc_l2_admit(st, "dense", t, NTOK, sc_digest(v, sz), &p, SC_ORIGIN_DIRECT);
		if (rc == -ENOSPC)
			rc = 0; /* refused for room: full (counted in admission_rejects) */
		if (!rc)
			rc = sc_l2_stats(a, NULL, &ls);
		if (ls.logical_bytes > held)
			held = ls.logical_bytes;
	}
	*out = info ? (double)held / (double)info->heap_bytes : 0;
	free(info);
	free(v);
	bench_l2_arena_drop(name, a, st);
	if (rc)
		fprintf(stderr, "stagecache bench l2: density of %llu-byte entries: %s\n", (unsigned long long)sz,
			sc_strerror(rc));
	return rc ? -1 : 0;
}

/* density_<s>: a 256 MiB arena whose index has a slot per 4 KiB of arena (--index-entries
 * SIZE/4K: sized for its smallest entries), filled with 4 KiB or 64 KiB entries; and, for context,
 * 4 KiB entries with the default index (a slot per 16 KiB: the index is full first). */
static int bench_density(void)
{
	const uint64_t bytes = 256ull << 20;
	static const struct { const char *metric; uint64_t sz; uint32_t per; } rows[] = {
		{ "density_4k", 4096, 4096 },
		{ "density_64k", 64u << 10, 4096 },
		{ "density_4k_default_index", 4096, 16384 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		double d;
		if (density_of(bytes, (uint32_t)(bytes / rows[i].per), rows[i].sz, &d))
			return -1;
		char note[200];
		snprintf(note, sizeof(note), "payload bytes held at the first eviction / heap bytes: %llu-byte entries, %d token "
			 "ids each, 256 MiB arena, one index slot per %u bytes of arena", (unsigned long long)rows[i].sz, NTOK,
			 rows[i].per);
		bench_value(B, rows[i].metric, d, "fraction", note);
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench l2\n\n"
		   "The L2 tier's own costs, each against the same work without it, in the same run (temporary\n"
		   "arenas, hugepages when available). Metrics (see tools/bench/l2.c):\n"
		   "  hit_lease_p50_ns hit_lease_p99_ns key_4096_tokens_ns\n"
		   "  hit_scale_{p50,p99,p999}_ns hit_with_writer_{p50,p99,p999}_ns hit_p999_with_writer_vs_quiet_p50\n"
		   "  lmdb_scale_{p50,p99,p999}_ns (context)\n"
		   "  admit_{4k,64k,1m}_vs_xxh3_memcpy[_hot_dst] admit_full_vs_not_full copyout_{4k,64k,1m}_vs_memcpy\n"
		   "  hit_1proc_ops hit_2proc_ops hit_2proc_vs_1proc mem_{4k,64k,1m}_overhead_bytes\n"
		   "  density_4k density_64k density_4k_default_index\n"
		   "  events_hit_overhead events_admit_overhead events_rate events_publisher_cpu_ns (tools/bench/events.c)\n");
}

int bench_l2(int argc, char **argv)
{
	int rc = bench_no_options("l2", argc, argv, usage);
	if (rc >= 0)
		return rc;
	bench_tsc_calibrate();
	char name[64];
	snprintf(name, sizeof(name), "bench-l2-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	if (bench_l2_arena(name, 64ull << 20, 4096, &a, &st))
		return EXIT_FAIL;
	struct sc_arena_info *info = calloc(1, sizeof(*info));
	if (info && sc_arena_info(a, info) == 0)
		bench_env(B, "arena_backing", "%s", sc_backing_name(info->backing));
	free(info);
	int fail = 0;
	if (bench_small(st)) {
		fail = 1;
	} else if (bench_scaling(name)) {
		fail = 1;
	}
	bench_l2_arena_drop(name, a, st);
	bench_progress("l2: 1 M entries\n");
	if (bench_scale())
		fail = 1;
	bench_progress("l2: admit and copy-out\n");
	if (bench_move())
		fail = 1;
	if (bench_memory())
		fail = 1;
	if (bench_density())
		fail = 1;
	bench_l2_events();
	return fail ? EXIT_FAIL : EXIT_OK;
}
