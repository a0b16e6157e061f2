/*
 * tools/bench/policy.c — `stagecache bench policy`: the L2 hit ratio under memory pressure,
 * measured on the real arena and compared with simulators over the same request sequence.
 *
 * Traces (fixed seeds): objects of 256 KiB to 16 MiB (log-uniform), popularity Zipf s over a
 * random permutation of them (size and popularity independent); the working set is the objects
 * whose footprints (sc_l2_footprint) add up to at most W x the L2 budget, W = 1, 3, 10, for
 * s = 0.6, 0.9, 1.1: traces zipf06_1x ... zipf11_10x. zipf09_3x_scan is zipf09_3x with a one-pass
 * scan interleaved: from its third of the requests on, one never-repeated object before every
 * second request, until the scan objects add up to 2 x the budget.
 *
 * Real: a fresh arena (budget set with sc_l2_shrink_to, the heap a quarter larger for alignment
 * gaps) and 2 worker processes that take the requests in order from a shared ticket: each does
 * what a restore does on L2: sc_l2_get (lease) and release on a hit; on a miss, single flight
 * (sc_fill_claim: a worker that finds the object being admitted waits and looks again, as a
 * restore's waiter does) and sc_l2_admit of the object's payload. The policy is whatever the
 * library does (S3-FIFO). Each trace is replayed --runs times (default 3), traces interleaved,
 * the median reported with its samples.
 * Simulated: exact LRU, S3-FIFO (libCacheSim's defaults) and OPT (Belady; for variable sizes the
 * furthest-next-use heuristic), tools/demo/policy_sim.c, with the budget as capacity and the same
 * footprints as costs, over the same sequence in ticket order.
 *
 * Metrics: policy_<trace>_{byte,object}_hit_{real,lru,s3fifo,opt}; policy_real_vs_lru_min and
 * policy_real_vs_s3fifo_min (the smallest byte-hit ratio real / simulated over all traces);
 * policy_scan_hot_drop_pts: how much the object hit ratio of the requests that are not the scan
 * drops, in points, over the scan and as many requests after it, against the same requests of
 * zipf09_3x (real cache; the simulators' drops are reported too); policy_<trace>_refusals:
 * admissions the real cache refused while replaying (0 unless something froze).
 *
 * The mixed-cost trace (mixed09_3x): what a hit saves differs by orders of magnitude between
 * objects of one size. A documented model of three kinds of prefix state (40 % of the objects KV
 * states, 30 % recurrent, 30 % full; sizes and token counts log-uniform in the ranges):
 *  - KV states of an 8B-class attention model (Llama-3-8B shapes: 32 layers x 8 KV heads x 128
 *    dims x K and V x fp16 = 128 KiB per token): prefixes of 2..128 tokens, 256 KiB..16 MiB,
 *    prefill 200 us per token (~5000 tokens/s): about 1.5 ns of compute per byte;
 *  - recurrent states of a small state-space / RWKV model: a fixed state of 1..8 MiB standing for
 *    256..8192 tokens of prefill at 100 us per token: 3..800 ns per byte;
 *  - full states of a hybrid model (attention in 1 layer of 8: 16 KiB of KV per token, plus a
 *    4 MiB recurrent state): prefixes of 64..768 tokens, 5..16 MiB, 150 us per token: 2..7 ns per
 *    byte.
 * Popularity is Zipf 0.9 over a random permutation (independent of kind and size), the working
 * set 3x the budget; the same 20 000 requests go through the real arena (sc_l2_admit_cost with
 * each object's cost) and through LRU, S3-FIFO, OPT, GDSF, the benefit policy's simulator and
 * OPT-by-benefit. Metrics: policy_mixed09_3x_saved_per_byte_<policy> (ns of compute saved per
 * byte of the budget), policy_mixed09_3x_{byte,object}_hit_<policy>, policy_benefit_vs_s3fifo
 * (real arena / simulated S3-FIFO, compute saved; target >= 1.3), policy_benefit_sim_vs_s3fifo,
 * policy_gdsf_vs_s3fifo, policy_opt_benefit_vs_s3fifo (a heuristic bound), and
 * policy_benefit_uniform_max_dev: over the ten uniform traces with every object at one density
 * (value = its bytes), the largest difference in byte hit ratio between the benefit simulator and
 * S3-FIFO (0: with uniform costs the policy is S3-FIFO).
 *
 * Deadlines: tools/bench/policy_deadline.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "../demo/policy_sim.h"

#define B "policy"
#define MIN_OBJ (256ull << 10)
#define MAX_OBJ (16ull << 20)
#define SRC_SLACK (1ull << 20)  /* payloads start at one of 256 page offsets into the source */
#define NS "policy"
#define MODEL "bench-policy"
#define STATE "state"
#define WORKERS 2
#define NUNIFORM 10
#define NTRACE 11
#define MIXED 10                /* the index of the mixed-cost trace */

struct trace {
	char name[24];
	double zipf, ws;
	int scan, mixed;
	uint32_t nobj, nreq;
	uint64_t *cost, *bytes, *src_off;
	uint64_t *value;    /* mixed: compute a hit saves, ns, per object (NULL otherwise) */
	struct sc_digest *dig;
	uint32_t *req;
	uint8_t *window;    /* per request: in the hot window of the scan comparison */
	/* results */
	struct psim_result sim[PSIM_COUNT], sim_win[PSIM_COUNT];
	double byte_real[16], obj_real[16], win_real[16], saved_real[16];
	uint64_t refusals[16];
	uint64_t refused_by[SC_L2_REFUSE_REASONS]; /* summed over the runs */
	int runs;
};

static uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	uint64_t x = *s;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double rng_u01(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / (double)(1ull << 53);
}

static uint64_t obj_size(uint64_t *s)
{
	double lo = log((double)MIN_OBJ), hi = log((double)MAX_OBJ);
	uint64_t b = (uint64_t)exp(lo + (hi - lo) * rng_u01(s));
	return b < MIN_OBJ ? MIN_OBJ : b > MAX_OBJ ? MAX_OBJ : b;
}

static void trace_free(struct trace *t)
{
	free(t->value);
	t->value = NULL;
	free(t->cost);
	free(t->bytes);
	free(t->src_off);
	free(t->dig);
	free(t->req);
	free(t->window);
	t->cost = t->bytes = t->src_off = NULL;
	t->dig = NULL;
	t->req = NULL;
	t->window = NULL;
}

/* Append object @n (@b bytes, footprint @fp) to @t, doubling the arrays (capacity *@cap) when full. */
static int trace_add_obj(struct trace *t, uint32_t *cap, uint32_t n, uint64_t b, uint64_t fp)
{
	if (n == *cap) {
		uint32_t c = *cap * 2;
		uint64_t *c2 = realloc(t->cost, c * sizeof(uint64_t)), *b2 = c2 ? realloc(t->bytes, c * sizeof(uint64_t)) : NULL;
		if (!c2 || !b2) {
			if (c2)
				t->cost = c2;
			return -ENOMEM;
		}
		t->cost = c2;
		t->bytes = b2;
		*cap = c;
	}
	t->bytes[n] = b;
	t->cost[n] = fp;
	return 0;
}

/* A log-uniform draw in [lo, hi]. */
static double log_uniform(uint64_t *s, double lo, double hi)
{
	return exp(log(lo) + (log(hi) - log(lo)) * rng_u01(s));
}

/* One object of the mixed-cost model (see the top of this file): its bytes and its cost (ns). */
static void mixed_object(uint64_t *s, uint64_t *bytes, uint64_t *cost)
{
	double u = rng_u01(s), tok, b, per_tok;
	if (u < 0.4) { /* KV of an 8B attention model: 128 KiB per token */
		tok = log_uniform(s, 2, 128);
		b = tok * (128 << 10);
		per_tok = 200e3;
	} else if (u < 0.7) { /* a recurrent state: fixed size, thousands of tokens */
		tok = log_uniform(s, 256, 8192);
		b = log_uniform(s, 1 << 20, 8 << 20);
		per_tok = 100e3;
	} else { /* a hybrid's full state: 16 KiB of KV per token + a 4 MiB recurrent state */
		tok = log_uniform(s, 64, 768);
		b = tok * (16 << 10) + (4 << 20);
		per_tok = 150e3;
	}
	*bytes = b < MIN_OBJ ? MIN_OBJ : b > MAX_OBJ ? MAX_OBJ : (uint64_t)b;
	*cost = (uint64_t)(tok * per_tok);
}

/* The working set: objects while their footprints fit in ws x budget. Returns their number. */
static int trace_working_set(struct trace *t, uint64_t budget, uint64_t *rs, uint32_t *cap)
{
	uint32_t n = 0;
	uint64_t total = 0;
	for (;;) {
		uint64_t b, c = 0, fp;
		if (t->mixed)
			mixed_object(rs, &b, &c);
		else
			b = obj_size(rs);
		fp = sc_l2_footprint(NULL, b, 0, 4);
		if ((double)(total + fp) > t->ws * (double)budget)
			break;
		if (trace_add_obj(t, cap, n, b, fp))
			return -ENOMEM;
		if (t->mixed) {
			uint64_t *v = realloc(t->value, (size_t)*cap * sizeof(uint64_t));
			if (!v)
				return -ENOMEM;
			t->value = v;
			t->value[n] = c;
		}
		total += fp;
		n++;
	}
	return (int)n;
}

/* Popularity: a random permutation of the @hot objects and the Zipf(@zipf) CDF over its ranks. */
static void zipf_ranks(uint32_t hot, double zipf, uint64_t *rs, uint32_t *perm, double *cdf)
{
	for (uint32_t i = 0; i < hot; i++)
		perm[i] = i;
	for (uint32_t i = hot - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rng_next(rs) % (i + 1)), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	double sum = 0, acc = 0;
	for (uint32_t i = 0; i < hot; i++)
		sum += pow((double)(i + 1), -zipf);
	for (uint32_t i = 0; i < hot; i++) {
		acc += pow((double)(i + 1), -zipf) / sum;
		cdf[i] = acc;
	}
	cdf[hot - 1] = 1.0;
}

/* The first rank whose CDF reaches @u. */
static uint32_t cdf_pick(const double *cdf, uint32_t hot, double u)
{
	uint32_t lo = 0, hi = hot - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Build trace @t (name, zipf, ws, scan set) of @nreq Zipf requests over a budget of @budget. */
static int trace_make(struct trace *t, uint64_t budget, uint32_t nreq, uint64_t seed)
{
	uint64_t rs = seed, scan_rs = seed ^ 0x5ca75ca75ca7ull;
	uint32_t cap = 1024;
	t->cost = malloc(cap * sizeof(uint64_t));
	t->bytes = malloc(cap * sizeof(uint64_t));
	if (!t->cost || !t->bytes)
		return -ENOMEM;
	int ws = trace_working_set(t, budget, &rs, &cap);
	if (ws < 0)
		return ws;
	uint32_t hot = (uint32_t)ws, n = hot;
	uint32_t *perm = malloc(hot * sizeof(uint32_t));
	double *cdf = malloc(hot * sizeof(double));
	uint32_t maxreq = nreq * 2 + 16;
	t->req = malloc(maxreq * sizeof(uint32_t));
	t->window = calloc(maxreq, 1);
	if (!perm || !cdf || !t->req || !t->window) {
		free(perm);
		free(cdf);
		return -ENOMEM;
	}
	zipf_ranks(hot, t->zipf, &rs, perm, cdf);
	/* the Zipf requests, and (scan) one new object before every second one from nreq/3 on until
	 * the scan is 2 x budget; the window covers the scan and as many requests after it — the same
	 * Zipf requests in the trace without the scan */
	uint32_t nr = 0, scan_start = nreq / 3, scan_end = nreq;
	uint64_t scanned = 0;
	for (uint32_t i = 0; i < nreq; i++) {
		if (i >= scan_start && scanned < 2 * budget && ((i - scan_start) % 2) == 0) {
			uint64_t b = obj_size(&scan_rs), fp = sc_l2_footprint(NULL, b, 0, 4);
			scanned += fp;
			if (scanned >= 2 * budget)
				scan_end = i + 1;
			if (t->scan) {
				if (trace_add_obj(t, &cap, n, b, fp)) {
					free(perm);
					free(cdf);
					return -ENOMEM;
				}
				t->req[nr++] = n++;
			}
		}
		uint32_t rank = cdf_pick(cdf, hot, rng_u01(&rs));
		t->window[nr] = i >= scan_start && i < scan_end + (scan_end - scan_start);
		t->req[nr++] = perm[rank];
	}
	free(perm);
	free(cdf);
	t->nobj = n;
	t->nreq = nr;
	t->src_off = malloc(n * sizeof(uint64_t));
	t->dig = malloc(n * sizeof(struct sc_digest));
	if (!t->src_off || !t->dig)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		t->src_off[i] = (rng_next(&rs) % (SRC_SLACK / 4096)) * 4096;
	return 0;
}

/* ---- the real replay ---- */

struct shared {
	_Atomic uint32_t next;        /* the ticket: the next request to serve */
	_Atomic uint32_t ready, go;
	_Atomic int error;
	uint8_t hit[];
};

static void tokens_of(const struct trace *t, int ti, uint32_t obj, int32_t tok[4])
{
	tok[0] = 7100 + ti;
	tok[1] = (int32_t)(obj & 0xffff);
	tok[2] = (int32_t)(obj >> 16);
	tok[3] = (int32_t)t->nobj;
}

static int worker(const char *arena, const struct trace *t, int ti, const uint8_t *src, struct shared *sh)
{
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	int rc = sc_arena_open(arena, &a);
	if (!rc)
		rc = sc_stage_open(a, MODEL, STATE, &st);
	atomic_fetch_add(&sh->ready, 1);
	if (rc) {
		atomic_store(&sh->error, rc);
		goto out;
	}
	while (!atomic_load(&sh->go))
		;
	uint64_t sid = sc_stage_id(st);
	for (;;) {
		uint32_t i = atomic_fetch_add(&sh->next, 1);
		if (i >= t->nreq)
			break;
		uint32_t o = t->req[i];
		int32_t tok[4];
		tokens_of(t, ti, o, tok);
		struct sc_lease l;
		int hit = 0;
		for (int attempt = 0; attempt < 2 && !hit; attempt++) {
			if (sc_l2_get(st, NS, tok, 4, NULL, &l) == 0) {
				sc_lease_release(&l);
				hit = 1;
				break;
			}
			int c = sc_fill_claim(a, sid, t->dig[o]);
			if (c == -EBUSY && attempt == 0) {
				/* another worker is admitting it: wait, then it is an L2 hit (as a restore's waiter) */
				(void)sc_fill_wait(a, sid, t->dig[o], 10ll * 1000000000);
				continue;
			}
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { src + t->src_off[o] },
						.sec_len = { t->bytes[o] } };
			/* refusals are counted; uniform traces carry no cost (0: plain S3-FIFO's choices) */
			(void)sc_l2_admit_cost(st, NS, tok, 4, t->dig[o], &p, SC_ORIGIN_FROM_L3, t->value ? t->value[o] : 0);
			if (c == 0)
				sc_fill_release(a, sid, t->dig[o]);
			break;
		}
		sh->hit[i] = (uint8_t)hit;
	}
out:
	sc_stage_close(st);
	sc_arena_close(a);
	return rc ? 1 : 0;
}

/* A fresh arena @name whose L2 budget is @budget, and a stage of it; its backing's name into
 * @backing. 0 or a negative errno (nothing left behind). */
static int policy_arena(const char *name, uint64_t budget, struct sc_arena **a, struct sc_stage **st, char *backing,
			size_t blen)
{
	struct sc_arena_opts ao = { .size_bytes = ((budget + budget / 4) + (32ull << 20)) & ~((2ull << 20) - 1),
				    .huge = SC_HUGE_AUTO };
	int rc = sc_arena_create(name, &ao, a);
	if (rc) {
		bench_missing(B, "policy_arena", "cannot create the arena: %s", sc_strerror(rc));
		return rc;
	}
	struct sc_arena_info info;
	if (sc_arena_info(*a, &info) == 0 && backing)
		snprintf(backing, blen, "%s", sc_backing_name(info.backing));
	if ((rc = sc_l2_shrink_to(*a, budget)) || (rc = sc_stage_open(*a, MODEL, STATE, st))) {
		sc_arena_close(*a);
		sc_arena_destroy(NULL, name);
	}
	return rc;
}

/* WORKERS processes replay trace @t on arena @name, started together; 0 when every one of them
 * finished cleanly, else a negative errno. */
static int run_workers(const char *name, struct trace *t, int ti, const uint8_t *src, int run, struct shared *sh)
{
	pid_t pids[WORKERS];
	int nw = 0;
	for (int w = 0; w < WORKERS; w++) {
		pid_t p = fork();
		if (p == 0)
			_exit(worker(name, t, ti, src, sh));
		if (p > 0)
			pids[nw++] = p;
	}
	while ((int)atomic_load(&sh->ready) < nw)
		usleep(100);
	double t0 = cli_now();
	atomic_store(&sh->go, 1);
	int failed = nw < WORKERS;
	for (int w = 0; w < nw; w++) {
		int status;
		waitpid(pids[w], &status, 0);
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	}
	double secs = cli_now() - t0;
	bench_progress("policy: %s run %d: %.1f s (%u requests)\n", t->name, run + 1, secs, t->nreq);
	if (atomic_load(&sh->error))
		return atomic_load(&sh->error);
	return failed ? -ECHILD : 0;
}

static int run_real(struct trace *t, int ti, uint64_t budget, const uint8_t *src, int run, uint8_t *hit_out,
		    uint64_t *refusals, uint64_t *by_reason, char *backing, size_t blen)
{
	char name[64];
	snprintf(name, sizeof(name), "bench-policy-%d-%d", (int)getpid(), ti);
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	int rc = policy_arena(name, budget, &a, &st, backing, blen);
	if (rc)
		return rc;
	size_t shb = sizeof(struct shared) + t->nreq;
	struct shared *sh = mmap(NULL, shb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		rc = -errno;
	} else {
		memset(sh, 0, shb);
		rc = run_workers(name, t, ti, src, run, sh);
		struct sc_l2_stats s;
		if (rc == 0) {
			memcpy(hit_out, sh->hit, t->nreq);
			if (sc_l2_stats(a, NULL, &s) == 0) {
				*refusals = s.admission_rejects;
				for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
					by_reason[i] += s.refused[i];
				by_reason[SC_L2_REFUSE_LOW_BENEFIT] += s.refused_low_benefit;
			}
		}
		munmap(sh, shb);
	}
	sc_stage_close(st);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	return rc;
}

/* Compute saved (ns) per byte of @budget by the hits @hit of @t. */
static double saved_per_byte(const struct trace *t, const uint8_t *hit, uint64_t budget)
{
	uint64_t saved = 0;
	for (uint32_t i = 0; t->value && i < t->nreq; i++)
		if (hit[i])
			saved += t->value[t->req[i]];
	return budget ? (double)saved / (double)budget : 0;
}

/* Hit ratios of @hit over the requests of @t selected by @sel (all when NULL). */
static void ratios(const struct trace *t, const uint8_t *hit, const uint8_t *sel, double *byte, double *obj)
{
	uint64_t n = 0, h = 0, nb = 0, hb = 0;
	for (uint32_t i = 0; i < t->nreq; i++) {
		if (sel && !sel[i])
			continue;
		uint64_t b = t->bytes[t->req[i]];
		n++;
		nb += b;
		if (hit[i])
			h++, hb += b;
	}
	*byte = nb ? (double)hb / (double)nb : 0;
	*obj = n ? (double)h / (double)n : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench policy [--runs N] [--requests N] [--budget SIZE]\n\n"
		   "The L2 hit ratio under pressure: Zipf 0.6/0.9/1.1 traces over objects of 256 KiB-16 MiB with\n"
		   "the working set at 1x, 3x and 10x the budget, and zipf09_3x with a one-pass scan of 2x the\n"
		   "budget, replayed through a real arena by %d worker processes (get + lease + release, admit\n"
		   "on a miss) and through exact LRU, S3-FIFO and OPT (furthest next use) simulators with the\n"
		   "same capacity and footprints.\n\n"
		   "  --runs N      real replays of each trace (default 3; --quick: 1)\n"
		   "  --requests N  Zipf requests per trace (default 20000; --quick: 5000)\n"
		   "  --budget SIZE the L2 budget (default 192M; objects up to 16 MiB stay below 1/8 of it)\n\n"
		   "Metrics: policy_<trace>_{byte,object}_hit_{real,lru,s3fifo,opt}, policy_<trace>_refusals,\n"
		   "policy_real_vs_lru_min (target >= 1), policy_real_vs_s3fifo_min (target >= 0.98),\n"
		   "policy_scan_hot_drop_pts (target <= 5), and the simulators' scan drops.\n\n"
		   "The mixed-cost trace mixed09_3x (KV, recurrent and full states whose compute per byte\n"
		   "differs by orders of magnitude; see tools/bench/policy.c) is replayed the same way with\n"
		   "each object's compute cost, and through GDSF, the benefit policy's simulator and\n"
		   "OPT-by-benefit too: policy_mixed09_3x_saved_per_byte_<policy>, policy_benefit_vs_s3fifo\n"
		   "(target >= 1.3). Deadlines: restore_deadline_misses_started (target 0).\n",
		WORKERS);
}

struct policy_opts {
	uint64_t budget;
	int runs;
	uint32_t nreq;
};

static int parse(int argc, char **argv, struct policy_opts *o)
{
	static const struct option opts[] = {
		{ "runs", required_argument, 0, 'r' },
		{ "requests", required_argument, 0, 'n' },
		{ "budget", required_argument, 0, 'b' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	uint64_t v;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (cli_parse_u64(optarg, 15, &v) || v < 1)
				return cli_usage_error("bench policy", "bad option '--runs %s'", optarg);
			o->runs = (int)v;
			break;
		case 'n':
			if (cli_parse_u64(optarg, 1u << 24, &v) || v < 100)
				return cli_usage_error("bench policy", "bad option '--requests %s'", optarg);
			o->nreq = (uint32_t)v;
			break;
		case 'b':
			if (cli_parse_size(optarg, &v) || v < (64ull << 20) || v > (16ull << 30))
				return cli_usage_error("bench policy", "bad option '--budget %s'", optarg);
			o->budget = v;
			break;
		case 'h': usage(stdout); return -1;
		default:
			return cli_usage_error("bench policy", "unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_error("bench policy", "unexpected argument '%s'", argv[optind]);
	return 0;
}

static const struct {
	const char *name;
	double zipf, ws;
	int scan, mixed;
} defs[NTRACE] = {
	{ "zipf06_1x", 0.6, 1, 0, 0 }, { "zipf06_3x", 0.6, 3, 0, 0 }, { "zipf06_10x", 0.6, 10, 0, 0 },
	{ "zipf09_1x", 0.9, 1, 0, 0 }, { "zipf09_3x", 0.9, 3, 0, 0 }, { "zipf09_10x", 0.9, 10, 0, 0 },
	{ "zipf11_1x", 1.1, 1, 0, 0 }, { "zipf11_3x", 1.1, 3, 0, 0 }, { "zipf11_10x", 1.1, 10, 0, 0 },
	{ "zipf09_3x_scan", 0.9, 3, 1, 0 }, { "mixed09_3x", 0.9, 3, 0, 1 },
};

/* The payload source (random bytes), then the ten traces with their objects' digests. */
static int make_traces(struct trace *tr, const struct policy_opts *o, uint8_t *src)
{
	uint64_t s = 0x5eedf00d;
	for (uint64_t i = 0; i < (MAX_OBJ + SRC_SLACK) / 8; i++)
		((uint64_t *)src)[i] = rng_next(&s);
	for (int ti = 0; ti < NTRACE; ti++) {
		struct trace *t = &tr[ti];
		memset(t, 0, sizeof(*t));
		snprintf(t->name, sizeof(t->name), "%s", defs[ti].name);
		t->zipf = defs[ti].zipf;
		t->ws = defs[ti].ws;
		t->scan = defs[ti].scan;
		t->mixed = defs[ti].mixed;
		/* the scan trace shares its Zipf stream (and objects) with zipf09_3x: same seed */
		uint64_t seed = 0x9000 + (uint64_t)(t->zipf * 10) * 16 + (uint64_t)t->ws + (t->mixed ? 0x77000 : 0);
		if (trace_make(t, o->budget, o->nreq, seed))
			return -1;
		for (uint32_t i = 0; i < t->nobj; i++)
			t->dig[i] = sc_digest(src + t->src_off[i], t->bytes[i]);
		bench_env(B, t->name, "%u objects (%u in the working set), %u requests", t->nobj,
			  t->scan ? tr[4].nobj : t->nobj, t->nreq);
	}
	char hb[32];
	bench_env(B, "budget", "%s (%llu bytes); object sizes 256 KiB-16 MiB log-uniform; %d workers, %d runs",
		  cli_human(o->budget, hb, sizeof(hb)), (unsigned long long)o->budget, WORKERS, o->runs);
	return 0;
}

/* Simulators: deterministic, once (the cost-aware ones on the mixed trace only). */
static int simulate(struct trace *tr, uint64_t budget)
{
	for (int ti = 0; ti < NTRACE; ti++) {
		struct trace *t = &tr[ti];
		struct psim_trace pt = { t->nobj, t->cost, t->bytes, t->nreq, t->req, t->value };
		int np = t->mixed ? PSIM_COUNT : 3;
		for (int p = 0; p < np; p++)
			if (psim_run((enum psim_policy)p, &pt, budget, NULL, NULL, &t->sim[p]) ||
			    psim_run((enum psim_policy)p, &pt, budget, NULL, t->window, &t->sim_win[p]))
				return -1;
	}
	return 0;
}

/* With uniform costs the benefit policy is S3-FIFO: the simulators over the uniform traces with
 * every object at one density (value = its footprint), the largest byte-hit difference. */
static void report_uniform(struct trace *tr, uint64_t budget)
{
	double dev = 0;
	for (int ti = 0; ti < NUNIFORM; ti++) {
		struct trace *t = &tr[ti];
		struct psim_trace pt = { t->nobj, t->cost, t->bytes, t->nreq, t->req, t->cost };
		struct psim_result b, s3;
		if (psim_run(PSIM_BENEFIT, &pt, budget, NULL, NULL, &b) || psim_run(PSIM_S3FIFO, &pt, budget, NULL, NULL, &s3)) {
			bench_missing(B, "policy_benefit_uniform_max_dev", "a simulator failed");
			return;
		}
		double d = fabs(psim_byte_ratio(&b) - psim_byte_ratio(&s3));
		if (d > dev)
			dev = d;
	}
	bench_value(B, "policy_benefit_uniform_max_dev", dev, "hit ratio",
		    "largest |byte hit ratio, benefit simulator - S3-FIFO| over the 10 uniform traces, every object at "
		    "one compute cost per byte (0: with uniform costs the policy is S3-FIFO)");
}

/* The real replays, traces interleaved within each round. */
static int replay(struct trace *tr, const struct policy_opts *o, const uint8_t *src)
{
	char backing[32] = "?";
	uint8_t *hit = malloc(o->nreq * 2 + 16);
	if (!hit)
		return -1;
	for (int r = 0; r < o->runs; r++) {
		for (int ti = 0; ti < NTRACE; ti++) {
			struct trace *t = &tr[ti];
			uint64_t refused = 0;
			int rc = run_real(t, ti, o->budget, src, r, hit, &refused, t->refused_by, backing, sizeof(backing));
			if (rc) {
				fprintf(stderr, "stagecache bench policy: %s: %s\n", t->name, sc_strerror(rc));
				continue;
			}
			double wb, wo;
			ratios(t, hit, NULL, &t->byte_real[t->runs], &t->obj_real[t->runs]);
			t->saved_real[t->runs] = saved_per_byte(t, hit, o->budget);
			ratios(t, hit, t->window, &wb, &wo);
			t->win_real[t->runs] = wo;
			t->refusals[t->runs] = refused;
			t->runs++;
		}
	}
	free(hit);
	bench_env(B, "arena_backing", "%s", backing);
	return 0;
}

/* A trace's rows: the simulators', then the real arena's (missing when every replay failed). */
static void report_trace(const struct trace *t, uint64_t budget)
{
	char m[96], base[256];
	static const char *const what[PSIM_COUNT] = {
		[PSIM_LRU] = "exact LRU", [PSIM_S3FIFO] = "S3-FIFO (libCacheSim defaults)",
		[PSIM_OPT] = "OPT (Belady, furthest next use)", [PSIM_GDSF] = "GreedyDual-Size-Frequency",
		[PSIM_BENEFIT] = "the benefit policy (lib/l2/evict.c's rules)",
		[PSIM_OPT_BENEFIT] = "OPT-by-benefit (least saved compute per byte per request distance)",
	};
	for (int p = 0; p < (t->mixed ? PSIM_COUNT : 3); p++) {
		snprintf(base, sizeof(base), "%s simulator%s over the same %u requests, capacity %llu bytes, "
			 "costs = the footprints the arena charges",
			 what[p], p == PSIM_OPT || p == PSIM_OPT_BENEFIT ? " (a heuristic bound for variable sizes)" : "",
			 t->nreq, (unsigned long long)budget);
		snprintf(m, sizeof(m), "policy_%.24s_byte_hit_%s", t->name, psim_name((enum psim_policy)p));
		bench_value(B, m, psim_byte_ratio(&t->sim[p]), "hit ratio", base);
		snprintf(m, sizeof(m), "policy_%.24s_object_hit_%s", t->name, psim_name((enum psim_policy)p));
		bench_value(B, m, psim_object_ratio(&t->sim[p]), "hit ratio", base);
	}
	if (!t->runs) {
		snprintf(m, sizeof(m), "policy_%.24s_byte_hit_real", t->name);
		bench_missing(B, m, "every real replay failed");
		snprintf(m, sizeof(m), "policy_%.24s_object_hit_real", t->name);
		bench_missing(B, m, "every real replay failed");
		return;
	}
	snprintf(base, sizeof(base), "the real arena: %d worker processes, get + lease + release, admit on a miss "
		 "(single flight), budget %llu bytes", WORKERS, (unsigned long long)budget);
	snprintf(m, sizeof(m), "policy_%.24s_byte_hit_real", t->name);
	bench_stat(B, m, "hit ratio", t->byte_real, t->runs, base);
	snprintf(m, sizeof(m), "policy_%.24s_object_hit_real", t->name);
	bench_stat(B, m, "hit ratio", t->obj_real, t->runs, base);
	double rf[16];
	for (int i = 0; i < t->runs; i++)
		rf[i] = (double)t->refusals[i];
	snprintf(m, sizeof(m), "policy_%.24s_refusals", t->name);
	char why[160];
	int wl = 0;
	for (int i = 0; i < SC_L2_REFUSE_REASONS && wl < (int)sizeof(why); i++)
		if (t->refused_by[i])
			wl += snprintf(why + wl, sizeof(why) - (size_t)wl, "%s%s %llu", wl ? ", " : "",
				       sc_l2_refusal_name(i), (unsigned long long)t->refused_by[i]);
	snprintf(base, sizeof(base), "admissions refused while replaying (sc_l2_stats), over all runs: %s",
		 wl ? why : "none");
	bench_stat(B, m, "admissions", rf, t->runs, base);
}

/* The smallest real / simulated byte hit ratio over the traces (median real run). */
static void report_vs_simulators(const struct trace *tr)
{
	double min_lru = 1e9, min_s3 = 1e9;
	int have_all = 1;
	for (int ti = 0; ti < NUNIFORM; ti++) {
		const struct trace *t = &tr[ti];
		if (!t->runs) {
			have_all = 0;
			continue;
		}
		double med[16];
		memcpy(med, t->byte_real, sizeof(double) * (size_t)t->runs);
		double real = cli_median(med, t->runs), lru = psim_byte_ratio(&t->sim[PSIM_LRU]),
		       s3 = psim_byte_ratio(&t->sim[PSIM_S3FIFO]);
		if (lru > 0 && real / lru < min_lru)
			min_lru = real / lru;
		if (s3 > 0 && real / s3 < min_s3)
			min_s3 = real / s3;
	}
	if (have_all) {
		bench_value(B, "policy_real_vs_lru_min", min_lru, "x",
			    "smallest byte hit ratio real / simulated LRU over the 10 traces (median real run)");
		bench_value(B, "policy_real_vs_s3fifo_min", min_s3, "x",
			    "smallest byte hit ratio real / simulated S3-FIFO over the 10 uniform traces (median real run; "
			    "no costs given: the benefit policy's choices are S3-FIFO's)");
	} else {
		bench_missing(B, "policy_real_vs_lru_min", "a trace has no real replay");
		bench_missing(B, "policy_real_vs_s3fifo_min", "a trace has no real replay");
	}
}

/* The scan: the same Zipf requests with and without it (index 4: zipf09_3x, 9: its scan). */
static void report_scan(const struct trace *tr)
{
	const struct trace *base = &tr[4], *scan = &tr[9];
	if (base->runs && scan->runs) {
		double d[16];
		int n = base->runs < scan->runs ? base->runs : scan->runs;
		for (int i = 0; i < n; i++)
			d[i] = 100.0 * (base->win_real[i] - scan->win_real[i]);
		bench_stat(B, "policy_scan_hot_drop_pts", "points", d, n,
			   "object hit ratio of the non-scan requests during the scan and as many after it, zipf09_3x "
			   "minus zipf09_3x_scan (real arena, run by run)");
	} else {
		bench_missing(B, "policy_scan_hot_drop_pts", "no real replay of zipf09_3x or its scan");
	}
	for (int p = 0; p < 3; p++) {
		char m[64];
		snprintf(m, sizeof(m), "policy_scan_hot_drop_pts_%s", psim_name((enum psim_policy)p));
		bench_value(B, m, 100.0 * (psim_object_ratio(&base->sim_win[p]) - psim_object_ratio(&scan->sim_win[p])),
			    "points", "the same drop for the simulator");
	}
}

/* The mixed-cost trace: compute saved per byte of L2, every policy, and the ratios. */
static void report_mixed(const struct trace *t, uint64_t budget)
{
	char m[96], base[256];
	double s3 = psim_saved_per_byte(&t->sim[PSIM_S3FIFO], budget);
	for (int p = 0; p < PSIM_COUNT; p++) {
		snprintf(m, sizeof(m), "policy_%.24s_saved_per_byte_%s", t->name, psim_name((enum psim_policy)p));
		snprintf(base, sizeof(base), "simulated %s: ns of compute saved by hits per byte of the %llu-byte budget%s",
			 psim_name((enum psim_policy)p), (unsigned long long)budget,
			 p == PSIM_OPT || p == PSIM_OPT_BENEFIT ? " (heuristic)" : "");
		bench_value(B, m, psim_saved_per_byte(&t->sim[p], budget), "ns/B", base);
	}
	bench_value(B, "policy_gdsf_vs_s3fifo", s3 > 0 ? psim_saved_per_byte(&t->sim[PSIM_GDSF], budget) / s3 : 0, "x",
		    "compute saved, simulated GDSF / simulated S3-FIFO, mixed09_3x");
	bench_value(B, "policy_benefit_sim_vs_s3fifo", s3 > 0 ? psim_saved_per_byte(&t->sim[PSIM_BENEFIT], budget) / s3 : 0,
		    "x", "compute saved, simulated benefit policy / simulated S3-FIFO, mixed09_3x");
	bench_value(B, "policy_opt_benefit_vs_s3fifo",
		    s3 > 0 ? psim_saved_per_byte(&t->sim[PSIM_OPT_BENEFIT], budget) / s3 : 0, "x",
		    "compute saved, OPT-by-benefit (a greedy heuristic, not a bound) / simulated S3-FIFO, mixed09_3x");
	if (!t->runs) {
		bench_missing(B, "policy_mixed09_3x_saved_per_byte_real", "every real replay failed");
		bench_missing(B, "policy_benefit_vs_s3fifo", "every real replay failed");
		return;
	}
	snprintf(base, sizeof(base), "the real arena (sc_l2_admit_cost): ns of compute saved per byte of the budget");
	bench_stat(B, "policy_mixed09_3x_saved_per_byte_real", "ns/B", t->saved_real, t->runs, base);
	double med[16];
	memcpy(med, t->saved_real, sizeof(double) * (size_t)t->runs);
	double real = cli_median(med, t->runs);
	bench_value(B, "policy_benefit_vs_s3fifo", s3 > 0 ? real / s3 : 0, "x",
		    "compute saved per byte of L2, real arena (median run) / simulated S3-FIFO, mixed09_3x");
}

int bench_policy(int argc, char **argv)
{
	struct policy_opts o = { .budget = 192ull << 20, .runs = bench_quick ? 1 : 3,
				 .nreq = bench_quick ? 5000 : 20000 };
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	static struct trace tr[NTRACE];
	uint8_t *src = malloc(MAX_OBJ + SRC_SLACK);
	if (!src)
		return EXIT_FAIL;
	int fail = make_traces(tr, &o, src) || simulate(tr, o.budget) || replay(tr, &o, src);
	if (!fail) {
		for (int ti = 0; ti < NTRACE; ti++)
			report_trace(&tr[ti], o.budget);
		report_vs_simulators(tr);
		report_scan(tr);
		report_mixed(&tr[MIXED], o.budget);
		report_uniform(tr, o.budget);
		bench_policy_deadlines(src);
	}
	for (int ti = 0; ti < NTRACE; ti++)
		trace_free(&tr[ti]);
	free(src);
	return fail ? EXIT_FAIL : EXIT_OK;
}
