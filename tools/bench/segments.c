/*
 * tools/bench/segments.c — `stagecache bench segments`: content-addressed L2 segments,
 * each figure against the same work in the same run.
 *
 *   segments_physical_vs_logical_l2      a multi-turn trace: 200 conversations x 8 turns, token-major
 *                                        KV + recurrent payloads, each turn's KV section extending
 *                                        the previous turn's (KV 2..64 MiB at scale 1; the default
 *                                        scale is 1/16 with 64 KiB segments, so every payload has the
 *                                        same number of segments as at scale 1 with 1 MiB ones),
 *                                        admitted and restored (lease + copy-out + digest check) by 2
 *                                        processes; physical / logical bytes of L2 at the end (the
 *                                        trace's ideal is printed beside it)
 *   segments_physical_vs_logical_l3      the same trace put into an L3 store with segments on (same
 *                                        segment size; put, then the previous turn located, filled and
 *                                        compared, by 2 processes): physical / logical bytes of the
 *                                        store (sc_l3_stats after a reconciling open: a scan of the
 *                                        files), logical counting each object's 4 KiB header block
 *   segments_hit_contiguous_vs_plain     sc_l2_get + read of every cache line + release of an
 *                                        unfragmented 16 MiB segmented entry / the same in an arena
 *                                        without segments (time ratio plain / ours)
 *   segments_copyout_scattered_vs_memcpy sc_l2_get + sc_lease_copy of a 16 MiB entry scattered over
 *                                        two blocks / memcpy of 16 MiB out of one arena block
 *   segments_admit_vs_plain              sc_l2_admit of fresh 16 MiB payloads (segment digests and
 *                                        lookups, segments indexed) / the same admits, segments off
 *   segments_policy_bhr_vs_off           byte hit ratio of the multi-turn trace replayed (restore the
 *                                        previous turn, admit the next; 20 conversations live at once)
 *                                        through an L2 budget of 5/4 of the distinct bytes of those 20,
 *                                        segments on / off (the policy bench's own Zipf traces have
 *                                        no shared prefixes: this is the multi-turn trace segments are for)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define B "segments"
#define MIB (1ull << 20)
#define CONVS 200
#define TURNS 8
#define NTOK 16

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill(uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t s = seed, i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = rng_next(&s);
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)rng_next(&s);
}

static void toks(int32_t *t, uint32_t conv, uint32_t turn)
{
	for (int i = 0; i < NTOK; i++)
		t[i] = (int32_t)(conv * 1000003u + turn * 7919u + (uint32_t)i);
}

struct trace {
	uint64_t scale_div;      /* sizes at scale 1 divided by this */
	uint64_t kv[CONVS][TURNS];
	uint64_t rec;            /* recurrent section bytes per turn */
	uint64_t logical, ideal; /* bytes of every payload; of every distinct byte */
	uint32_t seg;
};

/* KV of turn k grows linearly from 2 to 64 MiB (scale 1), each conversation with its own jitter
 * (up to 1/8 of a step), rounded to 4 KiB: a prefix and its extension. */
static void trace_plan(struct trace *tr, uint64_t div)
{
	uint64_t s = 42;
	tr->scale_div = div;
	tr->seg = (uint32_t)(MIB / div < (64u << 10) ? (64u << 10) : MIB / div);
	tr->rec = (256u << 10) / div;
	tr->logical = tr->ideal = 0;
	for (int c = 0; c < CONVS; c++) {
		for (int k = 0; k < TURNS; k++) {
			uint64_t step = (62 * MIB) / (TURNS - 1), base = 2 * MIB + step * (uint64_t)k;
			uint64_t j = k ? rng_next(&s) % (step / 8) : 0;
			uint64_t v = (base - j) / div;
			v &= ~4095ull;
			if (k && v <= tr->kv[c][k - 1])
				v = tr->kv[c][k - 1] + 4096;
			tr->kv[c][k] = v;
			tr->logical += v + tr->rec;
			tr->ideal += tr->rec;
		}
		tr->ideal += tr->kv[c][TURNS - 1];
	}
}

static int make(const char *name, uint64_t bytes, uint32_t seg, struct sc_arena **a, struct sc_stage **st)
{
	struct sc_arena_opts o = { .size_bytes = (bytes + 2 * MIB - 1) & ~(2 * MIB - 1), .huge = SC_HUGE_OFF,
				   .segment_bytes = seg, .index_entries = 8192 };
	sc_arena_destroy(NULL, name);
	int rc = sc_arena_create(name, &o, a);
	if (!rc && (rc = sc_stage_open(*a, "bench-model", "bench-state", st))) {
		sc_arena_close(*a);
		sc_arena_destroy(NULL, name);
	}
	if (rc)
		fprintf(stderr, "stagecache bench segments: arena %s of %llu MiB: %s\n", name,
			(unsigned long long)(bytes >> 20), sc_strerror(rc));
	return rc;
}

/*
 * Replay the trace in @procs processes (conversation c by process c % procs): for each turn,
 * restore the previous turn (lease, copy out, digest check) and admit this one. Counts bytes
 * asked for and found (the byte hit ratio of the restores). With @l3dir, into that L3 store
 * instead of the arena @name: the previous turn located and filled, this one put. Returns 0 or -1.
 */
struct replay_out {
	uint64_t asked, hit, bad, admits_failed;
};

static int replay(const struct trace *tr, const char *name, const char *l3dir, int procs, uint32_t window,
		  struct replay_out *out)
{
	struct replay_out *sh = mmap(NULL, sizeof(*sh) * (size_t)procs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return -1;
	memset(sh, 0, sizeof(*sh) * (size_t)procs);
	for (int w = 0; w < procs; w++) {
		pid_t pid = fork();
		if (pid < 0)
			return -1;
		if (pid)
			continue;
		struct sc_arena *a;
		struct sc_stage *st = NULL;
		struct sc_l3 *l3 = NULL;
		if (l3dir ? sc_l3_open(l3dir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3)
			  : sc_arena_open(name, &a) || sc_stage_open(a, "bench-model", "bench-state", &st))
			_exit(2);
		uint64_t maxkv = tr->kv[0][TURNS - 1] * 2 + tr->rec;
		uint8_t *stream = malloc(maxkv), *buf = malloc(maxkv + tr->rec);
		uint8_t *got = aligned_alloc(4096, (maxkv + tr->rec + 4095) & ~4095ull);
		if (!stream || !buf || !got)
			_exit(3);
		/* turns in rounds across the conversations of a window (all of them when 0): turn k of
		 * each, then k + 1; then the next window */
		uint32_t win = window ? window : CONVS;
		for (uint32_t g = 0; g < CONVS; g += win)
		for (uint32_t k = 0; k < TURNS; k++) {
			for (uint32_t c = g + (uint32_t)w; c < g + win && c < CONVS; c += (uint32_t)procs) {
				uint64_t kvk = tr->kv[c][k];
				fill(stream, kvk, 0x5ea5eedull + c); /* the conversation's KV stream (its prefix) */
				if (k) {
					uint64_t prev = tr->kv[c][k - 1] + tr->rec;
					int32_t t[NTOK];
					toks(t, c, k - 1);
					struct sc_lease l;
					struct sc_location loc;
					sh[w].asked += prev;
					int64_t n = -1;
					if (l3 && sc_l3_locate_longest(l3, "bench", t, NTOK, &loc) == NTOK &&
					    sc_l3_fill(l3, &loc, got, (maxkv + tr->rec + 4095) & ~4095ull, 0) == 0)
						n = (int64_t)loc.payload_bytes;
					else if (!l3 && sc_l2_get(st, "bench", t, NTOK, NULL, &l) == 0) {
						n = sc_lease_copy(&l, got, prev);
						sc_lease_release(&l);
					}
					if (n >= 0) {
						memcpy(buf, stream, tr->kv[c][k - 1]);
						fill(buf + tr->kv[c][k - 1], tr->rec, (uint64_t)c << 32 | (k - 1));
						if (n != (int64_t)prev || memcmp(buf, got, prev))
							sh[w].bad++;
						else
							sh[w].hit += prev;
					}
				}
				memcpy(buf, stream, kvk);
				fill(buf + kvk, tr->rec, (uint64_t)c << 32 | k);
				int32_t t[NTOK];
				toks(t, c, k);
				struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { kvk + tr->rec } };
				struct sc_l3_put_args pa = { .ns = "bench", .tokens = t, .token_count = NTOK, .payload = &p };
				if (l3 ? sc_l3_put(l3, &pa, NULL) != 0
				       : sc_l2_admit(st, "bench", t, NTOK, sc_digest(buf, kvk + tr->rec), &p, SC_ORIGIN_DIRECT) != 0)
					sh[w].admits_failed++;
			}
		}
		_exit(0);
	}
	int ok = 1;
	for (int w = 0; w < procs; w++) {
		int ws;
		if (wait(&ws) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws))
			ok = 0;
	}
	memset(out, 0, sizeof(*out));
	for (int w = 0; w < procs; w++) {
		out->asked += sh[w].asked;
		out->hit += sh[w].hit;
		out->bad += sh[w].bad;
		out->admits_failed += sh[w].admits_failed;
	}
	munmap(sh, sizeof(*sh) * (size_t)procs);
	return ok && !out->bad ? 0 : -1;
}

/* The physical / logical row of @tier after the trace: @n of @what stored, @logical bytes, @extra. */
static void trace_row(const struct trace *tr, const char *row, const char *tier, const char *what, uint64_t n,
		      uint64_t physical, uint64_t logical, const char *extra)
{
	char note[400];
	snprintf(note, sizeof(note),
		 "%s physical / logical bytes after %d conversations x %d turns (%llu %s, %llu MiB logical, %s); ideal for "
		 "this trace %.3f (every distinct byte once); baseline: the same %s stored whole (ratio 1.0)",
		 tier, CONVS, TURNS, (unsigned long long)n, what, (unsigned long long)(logical >> 20), extra,
		 (double)tr->ideal / (double)tr->logical, what);
	bench_value(B, row, logical ? (double)physical / (double)logical : 0, "ratio", note);
}

static void bench_trace(const struct trace *tr)
{
	char name[64];
	snprintf(name, sizeof(name), "bench-seg-trace-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	uint64_t arena = tr->ideal + tr->ideal / 2 + 64 * MIB;
	if (make(name, arena, tr->seg, &a, &st)) {
		bench_missing(B, "segments_physical_vs_logical_l2", "cannot create a %llu MiB arena",
			      (unsigned long long)(arena >> 20));
		return;
	}
	struct replay_out ro;
	double t0 = cli_now();
	int rc = replay(tr, name, NULL, 2, 0, &ro);
	double secs = cli_now() - t0;
	struct sc_l2_stats s;
	if (rc || sc_l2_stats(a, NULL, &s)) {
		bench_missing(B, "segments_physical_vs_logical_l2", "the replay failed (%llu bad restores, %llu admits refused)",
			      (unsigned long long)ro.bad, (unsigned long long)ro.admits_failed);
	} else {
		char extra[64];
		snprintf(extra, sizeof(extra), "%llu refused", (unsigned long long)ro.admits_failed);
		trace_row(tr, "segments_physical_vs_logical_l2", "L2", "entries", s.entries, s.physical_bytes,
			  s.logical_bytes, extra);
		bench_value(B, "segments_ideal_physical_vs_logical", (double)tr->ideal / (double)tr->logical, "ratio", NULL);
		bench_value(B, "segments_trace_restore_hit_ratio", ro.asked ? (double)ro.hit / (double)ro.asked : 0, "fraction",
			    NULL);
		bench_value(B, "segments_trace_seconds", secs, "s", NULL);
	}
	sc_stage_close(st);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
}

/* The trace put into an L3 store with segments on (under /var/tmp: a real disk), by 2 processes. */
static void bench_trace_l3(const struct trace *tr)
{
	const char *row = "segments_physical_vs_logical_l3";
	char dir[64];
	snprintf(dir, sizeof(dir), "/var/tmp/sc-bench-l3seg-XXXXXX");
	if (!mkdtemp(dir)) {
		bench_missing(B, row, "cannot make a directory under /var/tmp: %s", strerror(errno));
		return;
	}
	struct sc_l3 *l3;
	int rc = sc_l3_open(dir, NULL, &l3);
	if (!rc && (rc = sc_l3_set_segment_bytes(l3, tr->seg)))
		sc_l3_close(l3);
	if (rc) {
		bench_missing(B, row, "cannot make an L3 store with %u KiB segments: %s", tr->seg >> 10, sc_strerror(rc));
		cli_rm_rf(dir);
		return;
	}
	sc_l3_close(l3);
	struct replay_out ro;
	double t0 = cli_now();
	rc = replay(tr, NULL, dir, 2, 0, &ro);
	double secs = cli_now() - t0;
	struct sc_l3_stats s;
	/* a reconciling open: the counts come from a scan of the files */
	if (rc || ro.admits_failed || sc_l3_open(dir, NULL, &l3)) {
		bench_missing(B, row, "the replay failed (%llu bad fills, %llu puts failed)", (unsigned long long)ro.bad,
			      (unsigned long long)ro.admits_failed);
	} else {
		sc_l3_stats(l3, &s);
		char extra[80];
		snprintf(extra, sizeof(extra), "%llu segment files, a 4 KiB header block per object",
			 (unsigned long long)s.segments);
		trace_row(tr, row, "L3", "objects", s.objects, s.physical_bytes, s.logical_bytes, extra);
		bench_value(B, "segments_l3_trace_restore_hit_ratio", ro.asked ? (double)ro.hit / (double)ro.asked : 0,
			    "fraction", NULL);
		bench_value(B, "segments_l3_trace_seconds", secs, "s", NULL);
		sc_l3_close(l3);
	}
	cli_rm_rf(dir);
}

/* Byte hit ratio of the trace through a budget of 5/4 of the distinct bytes of the conversations
 * live at once (windows of POL_WINDOW), segments on and off. */
#define POL_WINDOW 20u
static void bench_policy_rerun(const struct trace *tr)
{
	char name[64];
	snprintf(name, sizeof(name), "bench-seg-pol-%d", (int)getpid());
	double bhr[2] = { 0, 0 };
	uint32_t window = POL_WINDOW;
	if (getenv("SC_BENCH_SEG_WINDOW")) /* exploration only: the row's target is for POL_WINDOW */
		window = (uint32_t)atoi(getenv("SC_BENCH_SEG_WINDOW"));
	if (!window || window > CONVS)
		window = POL_WINDOW;
	uint64_t budget = tr->ideal / (CONVS / window) * 5 / 4;
	for (int on = 0; on < 2; on++) {
		struct sc_arena *a;
		struct sc_stage *st;
		if (make(name, budget + 64 * MIB, on ? tr->seg : 0, &a, &st)) {
			bench_missing(B, "segments_policy_bhr_vs_off", "cannot create the arena");
			return;
		}
		(void)sc_l2_shrink_to(a, budget);
		struct replay_out ro;
		int rc = replay(tr, name, NULL, 2, window, &ro);
		if (getenv("SEG_DEBUG")) {
			struct sc_l2_stats x;
			sc_l2_stats(a, NULL, &x);
			fprintf(stderr, "on=%d entries %llu bytes %llu phys %llu logical %llu holders %llu evictions %llu refused %llu budget %llu segs %llu\n", on,
				(unsigned long long)x.entries, (unsigned long long)x.bytes, (unsigned long long)x.physical_bytes,
				(unsigned long long)x.logical_bytes, (unsigned long long)x.segment_holder_bytes,
				(unsigned long long)x.evictions, (unsigned long long)x.admission_rejects, (unsigned long long)x.budget_bytes,
				(unsigned long long)x.segments);
			for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
				fprintf(stderr, " %s=%llu", sc_l2_refusal_name(i), (unsigned long long)x.refused[i]);
			fprintf(stderr, "\n");
		}
		sc_stage_close(st);
		sc_arena_close(a);
		sc_arena_destroy(NULL, name);
		if (rc) {
			bench_missing(B, "segments_policy_bhr_vs_off", "replay failed (%llu bad restores)", (unsigned long long)ro.bad);
			return;
		}
		bhr[on] = ro.asked ? (double)ro.hit / (double)ro.asked : 0;
	}
	char note[300];
	snprintf(note, sizeof(note), "byte hit ratio of the restores of the multi-turn trace (2 processes, %u conversations "
		 "live at once, their turns interleaved) through an L2 budget of %llu MiB (5/4 of the distinct bytes of "
		 "one window); baseline: the same arena and trace with segments off (BHR %.3f; ours %.3f)", window,
		 (unsigned long long)(budget >> 20), bhr[0], bhr[1]);
	bench_value(B, "segments_policy_bhr_on", bhr[1], "fraction", NULL);
	bench_value(B, "segments_policy_bhr_off", bhr[0], "fraction", NULL);
	if (bhr[0] > 0)
		bench_value(B, "segments_policy_bhr_vs_off", bhr[1] / bhr[0], "ratio", note);
	else
		bench_missing(B, "segments_policy_bhr_vs_off", "segments off hit nothing (BHR 0): no ratio (on: %.3f)", bhr[1]);
}

static double hit_read(struct sc_stage *st, const int32_t *t, uint64_t bytes, int copy, uint8_t *dst, int *err)
{
	struct sc_lease l;
	double t0 = cli_now();
	int rc = sc_l2_get(st, "bench", t, NTOK, NULL, &l);
	if (rc) {
		*err = rc;
		return 0;
	}
	volatile uint64_t sink = 0;
	if (copy) {
		if (sc_lease_copy(&l, dst, bytes) != (int64_t)bytes)
			*err = -EIO;
	} else {
		struct sc_segment sg[64];
		int n = sc_lease_segments(&l, sg, 64);
		uint64_t s = 0;
		for (int i = 0; i < n && i < 64; i++)
			for (uint64_t o = 0; o < sg[i].len; o += 64)
				s += *(const uint64_t *)(const void *)((const uint8_t *)sg[i].ptr + o);
		sink += s;
	}
	sc_lease_release(&l);
	(void)sink;
	return cli_now() - t0;
}

/* hit + read contiguous vs plain, copy-out scattered vs memcpy, admit vs plain */
static void bench_paths(void)
{
	const uint64_t SZ = 16 * MIB;
	int reps = bench_quick ? 5 : 41, inner = bench_quick ? 4 : 4;
	char n_on[64], n_off[64];
	snprintf(n_on, sizeof(n_on), "bench-seg-on-%d", (int)getpid());
	snprintf(n_off, sizeof(n_off), "bench-seg-off-%d", (int)getpid());
	struct sc_arena *aon, *aoff;
	struct sc_stage *son, *soff;
	if (make(n_on, 512 * MIB, (uint32_t)MIB, &aon, &son) || make(n_off, 512 * MIB, 0, &aoff, &soff)) {
		bench_missing(B, "segments_hit_contiguous_vs_plain", "cannot create the arenas");
		bench_missing(B, "segments_copyout_scattered_vs_memcpy", "cannot create the arenas");
		bench_missing(B, "segments_admit_vs_plain", "cannot create the arenas");
		return;
	}
	uint8_t *src = malloc(SZ + 8 * MIB), *dst = malloc(SZ + 8 * MIB);
	fill(src, SZ + 8 * MIB, 99);
	memset(dst, 0, SZ + 8 * MIB);
	int32_t tc[NTOK], ts[NTOK];
	toks(tc, 1, 0);
	toks(ts, 1, 1);
	/* the contiguous entry (both arenas), and a scattered one sharing its first 8 MiB */
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { src }, .sec_len = { SZ } };
	struct sc_digest d = sc_digest(src, SZ);
	int err = sc_l2_admit(son, "bench", tc, NTOK, d, &p, 0) || sc_l2_admit(soff, "bench", tc, NTOK, d, &p, 0);
	uint8_t *sc = malloc(SZ);
	memcpy(sc, src, 8 * MIB);
	memcpy(sc + 8 * MIB, src + SZ, 8 * MIB); /* different second half */
	struct sc_payload ps = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { sc }, .sec_len = { SZ } };
	err = err || sc_l2_admit(son, "bench", ts, NTOK, sc_digest(sc, SZ), &ps, 0);
	struct sc_lease l;
	if (!err && (sc_l2_get(son, "bench", ts, NTOK, NULL, &l) || !l.segments))
		err = 1;
	else if (!err)
		sc_lease_release(&l);
	double *hr = calloc((size_t)reps, sizeof(double)), *cr = calloc((size_t)reps, sizeof(double)),
	       *ar = calloc((size_t)reps, sizeof(double));
	const uint8_t *plain_sec = NULL;
	if (!err && sc_l2_get(soff, "bench", tc, NTOK, NULL, &l) == 0) {
		plain_sec = l.sec[0];
		sc_lease_release(&l); /* only its address is used, for the memcpy baseline (entry stays) */
	}
	/* each pair measured on its own (a 16 MiB copy between two reads leaves the caches unlike for
	 * the next read), interleaved, and who goes first alternates: plain, ours, ours, plain, ... */
	for (int r = 0; r < reps && !err; r++) {
		double ton = 0, toff = 0;
		for (int i = 0; i < 2 * inner && !err; i++) {
			if (i % 2 == 0)
				toff += hit_read(soff, tc, SZ, 0, dst, &err);
			ton += hit_read(son, tc, SZ, 0, dst, &err);
			if (i % 2 == 1)
				toff += hit_read(soff, tc, SZ, 0, dst, &err);
		}
		hr[r] = toff / ton;
	}
	for (int r = 0; r < reps && !err; r++) {
		double tcp = 0, tmc = 0;
		for (int i = 0; i < 2 * inner && !err; i++) {
			if (i % 2 == 0)
				tcp += hit_read(son, ts, SZ, 1, dst, &err);
			double t0 = cli_now();
			memcpy(dst, plain_sec, SZ);
			tmc += cli_now() - t0;
			if (i % 2 == 1)
				tcp += hit_read(son, ts, SZ, 1, dst, &err);
		}
		cr[r] = tmc / tcp;
	}
	/* admit: fresh payloads (a counter in each segment's first bytes), removed after each */
	for (int r = 0; r < reps && !err; r++) {
		double tw[2] = { 0, 0 };
		for (int i = 0; i < inner && !err; i++) {
			for (int w = 0; w < 2 && !err; w++) {
				int on = (i + w) % 2; /* who goes first alternates */
				uint64_t ctr = ((uint64_t)r << 32) | ((uint64_t)i << 1) | (uint64_t)on;
				for (uint64_t o = 0; o < SZ; o += MIB)
					memcpy(src + o, &ctr, 8);
				struct sc_payload pa = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { src }, .sec_len = { SZ } };
				struct sc_digest da = sc_digest(src, SZ);
				int32_t t[NTOK];
				toks(t, 2, (uint32_t)(r * inner + i));
				struct sc_stage *st = on ? son : soff;
				double t0 = cli_now();
				if (sc_l2_admit(st, "bench", t, NTOK, da, &pa, 0))
					err = 1;
				tw[on] += cli_now() - t0;
				struct sc_key k;
				if (!err && (sc_l2_key(st, "bench", t, NTOK, &k) || sc_l2_remove(st, k)))
					err = 1;
			}
		}
		ar[r] = tw[0] / tw[1];
	}
	if (err) {
		bench_missing(B, "segments_hit_contiguous_vs_plain", "an operation failed");
		bench_missing(B, "segments_copyout_scattered_vs_memcpy", "an operation failed");
		bench_missing(B, "segments_admit_vs_plain", "an operation failed");
	} else {
		bench_stat(B, "segments_hit_contiguous_vs_plain", "ratio", hr, reps,
			   "sc_l2_get + read of every cache line via sc_lease_segments + release of one unfragmented 16 MiB "
			   "entry in an arena with 1 MiB segments / the same in an arena without segments (same bytes, "
			   "interleaved); ratio of times plain / ours");
		bench_stat(B, "segments_copyout_scattered_vs_memcpy", "ratio", cr, reps,
			   "sc_l2_get + sc_lease_copy + release of a 16 MiB entry scattered over two blocks (8 MiB shared "
			   "with another entry) / memcpy of 16 MiB out of one arena block into the same destination");
		bench_stat(B, "segments_admit_vs_plain", "ratio", ar, reps,
			   "sc_l2_admit of fresh 16 MiB payloads (digest, 16 segment digests and lookups, 16 segments "
			   "indexed, copy, publish) / the same admits into an arena without segments; each removed after");
	}
	free(hr);
	free(cr);
	free(ar);
	free(src);
	free(dst);
	free(sc);
	sc_stage_close(son);
	sc_stage_close(soff);
	sc_arena_close(aon);
	sc_arena_close(aoff);
	sc_arena_destroy(NULL, n_on);
	sc_arena_destroy(NULL, n_off);
}

int bench_segments(int argc, char **argv)
{
	(void)argc, (void)argv;
	static struct trace tr;
	uint64_t div = bench_quick ? 64 : 16;
	trace_plan(&tr, div);
	bench_env(B, "trace_scale", "1/%llu of the issue's sizes (KV %llu KiB..%llu KiB, recurrent %llu KiB), %u KiB segments",
		  (unsigned long long)div, (unsigned long long)(tr.kv[0][0] >> 10),
		  (unsigned long long)(tr.kv[0][TURNS - 1] >> 10), (unsigned long long)(tr.rec >> 10), tr.seg >> 10);
	bench_env(B, "arena_backing", "tmpfs (4 KiB pages): the machine's hugepages are shared by other engineers");
	bench_progress("segments: hit/copy/admit paths\n");
	bench_paths();
	bench_progress("segments: multi-turn trace\n");
	bench_trace(&tr);
	bench_progress("segments: multi-turn trace into L3\n");
	bench_trace_l3(&tr);
	bench_progress("segments: policy rerun\n");
	bench_policy_rerun(&tr);
	return EXIT_OK;
}
