/*
 * tools/bench/restore.c — `stagecache bench restore`: sc_restore of a prefix that L2 holds, the
 * path a worker takes for every request, against the L2 lookup alone, in the same run.
 *
 * The measured prefix: 4096 tokens, KV_RECURRENT with a descriptor (768 KiB KV + 256 KiB
 * recurrent), put to an L3 directory that holds 10 000 objects (1 000 with --quick; prefixes of
 * 256..4096 tokens, so 16 token lengths are registered), promoted into L2 by its first fill.
 * Three arenas of 128 MiB, on one backing (hugepages for all three, else 4 KiB pages for all), see
 * the same directory: V verifies tokens (the default), N does not
 * (SC_ARENA_NO_TOKEN_VERIFY), D has no location index (every restore probes the directory).
 * Every operation is timed on its own with the TSC (timer cost subtracted); repetitions of the
 * two sides of each ratio are interleaved and the figure is the median of their ratios.
 *
 *   restore_l2_4096_p50_ns, _p99_ns   V: sc_restore + sc_restore_release (from L2)
 *   restore_l2_vs_get                 N: restore p50 / p50 of sc_l2_get (which computes the key)
 *                                     + sc_lease_release of the same prefix (target <= 1.5)
 *   restore_l2_p99_with_writer_ns     V while another process admits into a full L2 budget
 *                                     (evicting) and puts to L3 through the arena, nonstop;
 *                                     restore_l2_p99_with_writer_vs_quiet_p50 (target <= 10)
 *   token_verify_cost                 restore p50 V / N, each restore after the bytes behind the
 *                                     entry's payload (its descriptor and stored token ids, 17 KiB)
 *                                     were flushed from every cache level with clflush; the caller's
 *                                     tokens stay hot, as in a worker (target <= 2.0)
 *   token_verify_cost_warm            the same with warm caches (context)
 *   restore_cold_index_ns             V: the first restore after attaching (arena open, stage
 *                                     open, L3 open without reconciliation, bind): the index is
 *                                     already in shared memory
 *   restore_dirprobe_4096_p50_ns      D: the same restore through the directory probe (context)
 *   restores_1proc_per_s, restores_2proc_per_s   V, processes with their own handles, a barrier
 *                                     start and one common window
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "tsc.h"

#define B "restore"
#define NTOK 4096u
#define KV_BYTES (768u << 10)
#define REC_BYTES (256u << 10)
#define SMALL 4096u

static void toks(int32_t *t, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n; i++)
		t[i] = (int32_t)((base * 2654435761u) ^ (uint32_t)(i * 40503u));
}

static void kv_desc_for(struct sc_kv_desc *d, uint32_t ntok, uint64_t bytes)
{
	memset(d, 0, sizeof(*d));
	d->version = 1;
	d->layer_end = 1;
	d->layer_count = 1;
	d->token_count = ntok;
	d->k_row_bytes = d->v_row_bytes = 128;
	d->v_element_bytes = 2;
	d->payload_bytes = bytes;
}

struct side {
	char name[64];
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_l3 *l3;
};

static char dir[96];
static int32_t prefix[NTOK];

static int side_open(struct side *s, const char *tag, uint32_t flags, uint32_t ix_entries, int huge)
{
	snprintf(s->name, sizeof(s->name), "bench-restore-%s-%d", tag, (int)getpid());
	struct sc_arena_opts o = { .size_bytes = 128u << 20, .huge = huge, .flags = flags,
				   .l3_index_entries = ix_entries };
	int rc = sc_arena_create(s->name, &o, &s->a);
	if (rc) {
		s->name[0] = 0;
		return rc;
	}
	if (!rc)
		rc = sc_stage_open(s->a, "bench-model", "bench-state", &s->st);
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE };
	if (!rc)
		rc = sc_l3_open(dir, &lo, &s->l3);
	if (!rc)
		rc = sc_l3_bind_arena(s->l3, s->a);
	if (rc)
		fprintf(stderr, "stagecache bench restore: arena %s: %s\n", s->name, sc_strerror(rc));
	return rc;
}

static void side_close(struct side *s)
{
	sc_l3_close(s->l3);
	sc_stage_close(s->st);
	sc_arena_close(s->a);
	if (s->name[0])
		sc_arena_destroy(NULL, s->name);
	memset(s, 0, sizeof(*s));
}

/* One restore, timed in ticks; restores not served from L2 (or failed) are counted in not_l2. */
static uint64_t not_l2;
static uint64_t restore_ticks(struct side *s)
{
	struct sc_restore r;
	uint64_t t0 = TSC_START();
	int rc = sc_restore(s->st, s->l3, "bench", prefix, NTOK, 0, &r);
	sc_restore_release(&r);
	uint64_t t = TSC_STOP(t0);
	if (rc != (int)NTOK || r.source != SC_RESTORE_FROM_L2)
		not_l2++;
	return t;
}

static uint64_t get_ticks(struct side *s)
{
	struct sc_lease l;
	uint64_t t0 = TSC_START();
	int rc = sc_l2_get(s->st, "bench", prefix, NTOK, NULL, &l);
	sc_lease_release(&l);
	uint64_t t = TSC_STOP(t0);
	return rc == 0 ? t : UINT64_MAX / 2;
}

static double p_of(uint64_t *d, int n, double q)
{
	qsort(d, (size_t)n, sizeof(*d), bench_cmp_u64);
	return bench_tick_q(d, (size_t)n, q);
}

/* Flush from every cache level what an L2 entry keeps behind its payload (the descriptor and the
 * stored token ids: the public API does not say where exactly, so the 17 KiB after the wire go). */
struct tail {
	const uint8_t *at;
};
static struct tail tail_of(struct side *s)
{
	struct sc_lease l;
	struct tail t = { NULL };
	if (sc_l2_get(s->st, "bench", prefix, NTOK, NULL, &l) == 0) {
		t.at = (const uint8_t *)l.sec[1] + l.sec_len[1];
		sc_lease_release(&l);
	}
	return t;
}
static void flush_tail(struct tail t)
{
	if (t.at)
		bench_evict(t.at, NTOK * 4 + 1024);
}

/* ---- populate the directory ---- */

static int populate(struct side *v, unsigned objects)
{
	/* the other prefixes: 256..4096 tokens, small payloads */
	struct sc_l3 *l3;
	struct sc_l3_opts lo = { 0 };
	int rc = sc_l3_open(dir, &lo, &l3);
	if (rc)
		return rc;
	uint8_t buf[SMALL];
	int32_t t[NTOK];
	for (unsigned i = 0; i < objects && !rc; i++) {
		uint32_t n = 256u * (1 + i % 16);
		toks(t, n, 1000 + i);
		memset(buf, (int)i, sizeof(buf));
		memcpy(buf, &i, sizeof(i));
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
		struct sc_l3_put_args a = { .ns = "bench", .tokens = t, .token_count = n, .payload = &p };
		rc = sc_l3_put(l3, &a, NULL);
		if (!(i % 1000))
			bench_progress("restore: %u/%u objects\r", i, objects);
	}
	sc_l3_close(l3);
	if (rc)
		return rc;
	/* the measured prefix, through the bound handle of V */
	uint8_t *kv = malloc(KV_BYTES + REC_BYTES);
	if (!kv)
		return -ENOMEM;
	for (uint32_t i = 0; i < KV_BYTES + REC_BYTES; i++)
		kv[i] = (uint8_t)(i * 31 + 7);
	struct sc_kv_desc desc;
	kv_desc_for(&desc, NTOK, KV_BYTES);
	struct sc_payload p = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { kv, kv + KV_BYTES },
				.sec_len = { KV_BYTES, REC_BYTES }, .kv_desc = &desc };
	struct sc_l3_put_args a = { .ns = "bench", .tokens = prefix, .token_count = NTOK, .payload = &p,
				    .model_identity = "bench-model", .state_identity = "bench-state" };
	rc = sc_l3_put(v->l3, &a, NULL);
	free(kv);
	return rc;
}

/* Restore until served from L2 (the first fill promotes a 4096-token prefix). */
static int warm(struct side *s)
{
	for (int i = 0; i < 4; i++) {
		struct sc_restore r;
		int rc = sc_restore(s->st, s->l3, "bench", prefix, NTOK, 0, &r);
		int l2 = rc == (int)NTOK && r.source == SC_RESTORE_FROM_L2;
		sc_restore_release(&r);
		if (rc < 0)
			return rc;
		if (l2)
			return 0;
	}
	return -ENOENT;
}

/* ---- the writer process ---- */

static void writer_main(const char *name, _Atomic int *stop, _Atomic uint64_t *ops)
{
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_l3 *l3;
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE };
	if (sc_arena_open(name, &a) || sc_stage_open(a, "writer-model", "writer-state", &st) || sc_l3_open(dir, &lo, &l3) ||
	    sc_l3_bind_arena(l3, a))
		_exit(2);
	static uint8_t buf[64 << 10];
	int32_t t[512];
	for (uint32_t i = 0; !atomic_load_explicit(stop, memory_order_relaxed); i++) {
		toks(t, 512, 500000 + i);
		memcpy(buf, &i, sizeof(i));
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
		sc_l2_admit(st, "writer", t, 512, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT);
		if (i % 8 == 0) {
			struct sc_payload q = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { SMALL } };
			struct sc_l3_put_args pa = { .ns = "writer", .tokens = t, .token_count = 256 + i % 256, .payload = &q };
			sc_l3_put(l3, &pa, NULL);
		}
		atomic_fetch_add_explicit(ops, 1, memory_order_relaxed);
	}
	sc_l3_close(l3);
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

/* ---- restores per second from k processes ---- */

static double rate_procs(struct side *v, int k, double window)
{
	_Atomic uint64_t *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return -1;
	_Atomic uint64_t *ready = sh, *go = sh + 8, *done = sh + 16;
	pid_t pid[2];
	for (int i = 0; i < k; i++) {
		if ((pid[i] = fork()) == 0) {
			struct side s = { 0 };
			struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE };
			if (sc_arena_open(v->name, &s.a) || sc_stage_open(s.a, "bench-model", "bench-state", &s.st) ||
			    sc_l3_open(dir, &lo, &s.l3) || sc_l3_bind_arena(s.l3, s.a) || warm(&s))
				_exit(2);
			atomic_fetch_add(ready, 1);
			while (!atomic_load(go))
				sched_yield();
			uint64_t n = 0;
			double end = cli_now() + window;
			while (cli_now() < end) {
				for (int j = 0; j < 64; j++) {
					struct sc_restore r;
					if (sc_restore(s.st, s.l3, "bench", prefix, NTOK, 0, &r) == (int)NTOK)
						n++;
					sc_restore_release(&r);
				}
			}
			atomic_fetch_add(done, n);
			_exit(0);
		}
	}
	while (atomic_load(ready) < (uint64_t)k)
		usleep(1000);
	atomic_store(go, 1);
	int ok = 1;
	for (int i = 0; i < k; i++) {
		int st;
		waitpid(pid[i], &st, 0);
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	double r = ok ? (double)atomic_load(done) / window : -1;
	munmap(sh, 4096);
	return r;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	return remove(p);
}

static const char *const metrics[] = { "restore_l2_4096_p50_ns", "restore_l2_4096_p99_ns", "restore_l2_vs_get",
				       "restore_l2_p99_with_writer_ns", "restore_l2_p99_with_writer_vs_quiet_p50",
				       "token_verify_cost", "restore_cold_index_ns", "restore_dirprobe_4096_p50_ns",
				       "restores_1proc_per_s", "restores_2proc_per_s" };

/* The three sides and the sample buffers every measurement shares. */
struct run {
	struct side v, nv, d; /* tokens verified; not verified; no location index (the directory probe) */
	int n, reps;          /* restores per repetition, repetitions */
	uint64_t *dv, *dn, *dg, *dd;
	double quiet_p50;     /* median of the quiet runs' p50 (for the writer's ratio) */
};

/* The three arenas on the same backing: hugepages for all, or (when they are short) for none. */
static int open_sides(struct run *r)
{
	int rc = 0;
	for (int huge = SC_HUGE_AUTO; !rc; huge = SC_HUGE_OFF) {
		rc = side_open(&r->v, "v", 0, 0, huge);
		if (!rc)
			rc = side_open(&r->nv, "n", SC_ARENA_NO_TOKEN_VERIFY, 0, huge);
		if (!rc)
			rc = side_open(&r->d, "d", 0, SC_L3_INDEX_NONE, huge);
		if (!rc && huge != SC_HUGE_OFF) {
			/* auto may have fallen back for some of them only */
			struct sc_arena_info i1, i2, i3;
			if (sc_arena_info(r->v.a, &i1) || sc_arena_info(r->nv.a, &i2) || sc_arena_info(r->d.a, &i3) ||
			    i1.backing != i2.backing || i1.backing != i3.backing)
				rc = -ENOMEM;
		}
		if (rc != -ENOMEM || huge == SC_HUGE_OFF)
			break;
		side_close(&r->v);
		side_close(&r->nv);
		side_close(&r->d);
		rc = 0;
	}
	return rc;
}

/* The sides opened, the L3 directory filled, and the prefix served from L2 on each side. */
static int setup(struct run *r, unsigned objects)
{
	int rc = mkdir(dir, 0700) ? -errno : 0;
	if (!rc)
		rc = open_sides(r);
	if (rc)
		fprintf(stderr, "stagecache bench restore: arenas: %s\n", sc_strerror(rc));
	if (!rc)
		rc = populate(&r->v, objects);
	if (!rc && ((rc = warm(&r->v)) || (rc = warm(&r->nv)) || (rc = warm(&r->d))))
		fprintf(stderr, "stagecache bench restore: the prefix is not served from L2: %s\n", sc_strerror(rc));
	return rc;
}

static void report_env(struct run *r, unsigned objects)
{
	struct sc_arena_info info, in2, in3;
	sc_arena_info(r->v.a, &info);
	sc_arena_info(r->nv.a, &in2);
	sc_arena_info(r->d.a, &in3);
	bench_env(B, "arena_backing", "%s (V), %s (N), %s (D)", sc_backing_name(info.backing), sc_backing_name(in2.backing),
		  sc_backing_name(in3.backing));
	bench_env(B, "l3_dir", "tmpfs (/dev/shm), %u objects, 16 token lengths", objects + 1);
	bench_env(B, "l3_index_entries", "%u", info.l3_index_entries);
}

/* Quiet: V, N, get on N, D interleaved, one operation of each in turn. */
static void measure_quiet(struct run *r)
{
	int n = r->n, reps = r->reps;
	uint64_t *dv = r->dv, *dn = r->dn, *dg = r->dg, *dd = r->dd;
	double p50[8], p99[8], vs_get[8], dir50[8];
	for (int rep = 0; rep < reps; rep++) {
		int nd = n / 10;
		for (int i = 0; i < n; i++) {
			dv[i] = restore_ticks(&r->v);
			dn[i] = restore_ticks(&r->nv);
			dg[i] = get_ticks(&r->nv);
			if (i < nd)
				dd[i] = restore_ticks(&r->d);
		}
		p50[rep] = p_of(dv, n, 0.5);
		p99[rep] = bench_tick_q(dv, (size_t)n, 0.99);
		double n50 = p_of(dn, n, 0.5), g50 = p_of(dg, n, 0.5);
		vs_get[rep] = g50 > 0 ? n50 / g50 : 0;
		dir50[rep] = p_of(dd, nd, 0.5);
	}
	bench_stat(B, "restore_l2_4096_p50_ns", "ns", p50, reps,
		   "4096 tokens, KV_RECURRENT + descriptor, from L2, tokens verified");
	bench_stat(B, "restore_l2_4096_p99_ns", "ns", p99, reps, NULL);
	bench_stat(B, "restore_l2_vs_get", "ratio", vs_get, reps,
		   "restore p50 / sc_l2_get (key computed from the 4096 tokens) + release p50, same prefix, "
		   "arena without token verification, interleaved");
	bench_stat(B, "restore_dirprobe_4096_p50_ns", "ns", dir50, reps,
		   "context: the same restore through the L3 directory probe (arena without an index)");
	double tmp[8];
	memcpy(tmp, p50, sizeof(double) * (size_t)reps);
	r->quiet_p50 = cli_median(tmp, reps);

	bench_value(B, "quiet_restores_not_from_l2", (double)not_l2, "count", NULL);
}

/* Token verification cost, stored token ids not cached, and warm. */
static void measure_verify_cost(struct run *r)
{
	int m = bench_quick ? 300 : 2000, reps = r->reps;
	uint64_t *dv = r->dv, *dn = r->dn;
	double cold[8], hot[8];
	struct tail tv = tail_of(&r->v), tn = tail_of(&r->nv);
	for (int rep = 0; rep < reps; rep++) {
		for (int i = 0; i < m; i++) {
			flush_tail(tv);
			dv[i] = restore_ticks(&r->v);
			flush_tail(tn);
			dn[i] = restore_ticks(&r->nv);
		}
		double a = p_of(dv, m, 0.5), b = p_of(dn, m, 0.5);
		cold[rep] = b > 0 ? a / b : 0;
		for (int i = 0; i < m; i++) {
			dv[i] = restore_ticks(&r->v);
			dn[i] = restore_ticks(&r->nv);
		}
		a = p_of(dv, m, 0.5), b = p_of(dn, m, 0.5);
		hot[rep] = b > 0 ? a / b : 0;
	}
	bench_stat(B, "token_verify_cost", "ratio", cold, reps,
		   "restore p50 verified / not, the entry's descriptor and stored token ids flushed (clflush) "
		   "before each restore on both sides, the caller's tokens hot");
	bench_stat(B, "token_verify_cost_warm", "ratio", hot, reps, "the same, caches warm");
}

/* The first restore after attaching. */
static void measure_first_restore(struct run *r)
{
	int m = bench_quick ? 5 : 21;
	double first[32];
	int got = 0;
	for (int i = 0; i < m; i++) {
		struct side s = { 0 };
		struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE };
		if (sc_arena_open(r->v.name, &s.a) || sc_stage_open(s.a, "bench-model", "bench-state", &s.st) ||
		    sc_l3_open(dir, &lo, &s.l3) || sc_l3_bind_arena(s.l3, s.a)) {
			sc_l3_close(s.l3);
			sc_stage_close(s.st);
			sc_arena_close(s.a);
			continue;
		}
		uint64_t before = not_l2, t = restore_ticks(&s);
		if (not_l2 == before)
			first[got++] = bench_ticks_ns(t);
		sc_l3_close(s.l3);
		sc_stage_close(s.st);
		sc_arena_close(s.a);
	}
	if (got)
		bench_stat(B, "restore_cold_index_ns", "ns", first, got,
			   "first restore after arena open + stage open + L3 open (no reconcile) + bind");
	else
		bench_missing(B, "restore_cold_index_ns", "no first restore was served from L2");
}

/* With a writer process admitting (and evicting) and putting to L3 nonstop. */
static void measure_with_writer(struct run *r)
{
	int n = r->n, reps = r->reps;
	uint64_t *dv = r->dv;
	_Atomic uint64_t *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	_Atomic int *stop = (_Atomic int *)(void *)sh;
	_Atomic uint64_t *ops = sh + 8;
	/* a small L2 budget: every admit of the writer evicts */
	sc_l2_shrink_to(r->v.a, 64u << 20);
	double wp99[8], ratio[8];
	uint64_t wops = 0, notl2 = not_l2;
	double wsecs = 0;
	for (int rep = 0; rep < reps; rep++) {
		atomic_store(stop, 0);
		atomic_store(ops, 0);
		pid_t w = fork();
		if (w == 0)
			writer_main(r->v.name, stop, ops);
		while (atomic_load(ops) < 200)
			usleep(1000);
		double t0 = cli_now();
		uint64_t o0 = atomic_load(ops);
		for (int i = 0; i < n; i++)
			dv[i] = restore_ticks(&r->v);
		wops += atomic_load(ops) - o0;
		wsecs += cli_now() - t0;
		atomic_store(stop, 1);
		waitpid(w, NULL, 0);
		wp99[rep] = p_of(dv, n, 0.99);
		ratio[rep] = r->quiet_p50 > 0 ? wp99[rep] / r->quiet_p50 : 0;
	}
	bench_stat(B, "restore_l2_p99_with_writer_ns", "ns", wp99, reps,
		   "a writer process admits 64 KiB entries into a 64 MiB L2 budget (evicting) and puts to L3 "
		   "through the arena (every 8th), nonstop");
	bench_stat(B, "restore_l2_p99_with_writer_vs_quiet_p50", "ratio", ratio, reps,
		   "p99 with the writer / p50 of the quiet run");
	bench_value(B, "writer_ops_per_s", wsecs > 0 ? (double)wops / wsecs : 0, "ops/s", NULL);
	bench_value(B, "restores_with_writer_not_from_l2", (double)(not_l2 - notl2), "count", NULL);
	munmap(sh, 4096);
}

/* Restores per second, 1 and 2 processes. */
static void measure_rates(struct run *r)
{
	double w = bench_quick ? 0.2 : 0.5, r1[8], r2[8];
	int rr = bench_quick ? 2 : 5, ok = 1;
	for (int rep = 0; rep < rr && ok; rep++) {
		r1[rep] = rate_procs(&r->v, 1, w);
		r2[rep] = rate_procs(&r->v, 2, w);
		ok = r1[rep] > 0 && r2[rep] > 0;
	}
	if (ok) {
		bench_stat(B, "restores_1proc_per_s", "ops/s", r1, rr, NULL);
		bench_stat(B, "restores_2proc_per_s", "ops/s", r2, rr, "two processes, one common window");
	} else {
		bench_missing(B, "restores_1proc_per_s", "a restore process failed");
		bench_missing(B, "restores_2proc_per_s", "a restore process failed");
	}
}

static void report_index(struct run *r)
{
	struct sc_l3_index_stats xs;
	if (sc_l3_index_stats(r->v.a, &xs) == 0) {
		bench_env(B, "index_hits", "%llu", (unsigned long long)xs.hits);
		bench_env(B, "index_fallbacks", "%llu", (unsigned long long)xs.fallbacks);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench restore [--quick] [--json]\n");
}

int bench_restore(int argc, char **argv)
{
	int rc = bench_no_options("restore", argc, argv, usage);
	if (rc >= 0)
		return rc;
	unsigned objects = bench_quick ? 1000 : 10000;
	static struct run r;
	r.n = bench_quick ? 2000 : 20000;
	r.reps = bench_quick ? 3 : 7;
	bench_tsc_calibrate();
	toks(prefix, NTOK, 7);
	/* tmpfs: fsync is free, so 10 000 puts take seconds; the L2-served path does no I/O at all */
	snprintf(dir, sizeof(dir), "/dev/shm/sc-bench-restore-%d", (int)getpid());
	rc = setup(&r, objects);
	if (rc) {
		for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
			bench_missing(B, metrics[i], "setup failed: %s", sc_strerror(rc));
		goto cleanup;
	}
	report_env(&r, objects);

	size_t bytes = (size_t)r.n * sizeof(uint64_t);
	r.dv = malloc(bytes), r.dn = malloc(bytes), r.dg = malloc(bytes), r.dd = malloc(bytes);
	measure_quiet(&r);
	measure_verify_cost(&r);
	measure_first_restore(&r);
	measure_with_writer(&r);
	measure_rates(&r);
	free(r.dv);
	free(r.dn);
	free(r.dg);
	free(r.dd);
	report_index(&r);
cleanup:
	side_close(&r.v);
	side_close(&r.nv);
	side_close(&r.d);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return rc ? EXIT_FAIL : EXIT_OK;
}
