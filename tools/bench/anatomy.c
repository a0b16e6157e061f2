/*
 * tools/bench/anatomy.c — `stagecache bench anatomy`: where the time of a 4 KiB L2 hit goes, phase
 * by phase, against the memory floor (docs/DESIGN.md, "Performance").
 *
 * One process, one arena holding --ws bytes of 4 KiB values (32 tokens of key each, like bench
 * get's 4k class), and a plain buffer of the same size and page size holding the same values (the
 * floor). Each phase is one function run over a random sequence of items (a new one for every run,
 * so that no run finds the lines the run before it brought in), the destination rotating over 16
 * buffers:
 *   floor      memcpy of the item's 4 KiB from the plain buffer
 *   chase      one load after another through a random cycle of 64-byte lines of a buffer of the
 *              same size: the latency of one cache miss nothing overlaps, the unit of the others
 *   key        sc_l2_key of the item's 32 tokens (keyed XXH3-128), nothing else
 *   lookup     sc_l2_get_key from the precomputed key (epoch, chain walk, entry checks, lease) and
 *              sc_lease_release: no hashing, no copy
 *   get        sc_l2_get from the tokens (key, lookup, exact-token compare, lease) and release
 *   get_copy   the same and the 4 KiB memcpy out of the arena: what `bench get` times for "ours"
 * Rounds interleave the phases; each row is the median of the rounds' ns per operation.
 *
 * The phase functions are not inlined and are named anatomy_run_*, so that
 *   valgrind --tool=callgrind --cache-sim=yes --toggle-collect='anatomy_run_*' \
 *       build/stagecache-bench anatomy --quick
 * counts instructions and simulated cache misses of each phase only (callgrind_annotate).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

#define B "anatomy"
#define NS "bench-anatomy"
#define NTOK 32u
#define VBYTES 4096u
#define NDST 16

struct anat {
	uint32_t nitems;
	int32_t *tokens;   /* nitems * NTOK */
	struct sc_key *keys;
	uint32_t *order;   /* the random sequence of items */
	uint32_t norder;
	uint8_t *floor;    /* nitems * VBYTES */
	size_t floor_len;
	uint8_t *dst[NDST];
	uint8_t *chase;    /* chase_lines lines of 64 bytes, each holding the next line's number */
	uint64_t chase_lines;
	struct sc_arena *a;
	struct sc_stage *st;
};

static void value_of(uint32_t i, uint8_t *v)
{
	uint64_t s = 0xa7a7000000000000ull ^ i;
	for (uint32_t o = 0; o < VBYTES; o += 8) {
		uint64_t w = bench_splitmix(&s);
		memcpy(v + o, &w, 8);
	}
}

static const int32_t *tokens_of(const struct anat *an, uint32_t i)
{
	return an->tokens + (size_t)i * NTOK;
}

/* ---- the phases (callgrind: --toggle-collect='anatomy_run_*') ---- */

__attribute__((noinline)) uint64_t anatomy_run_floor(struct anat *an)
{
	uint64_t sum = 0;
	for (uint32_t k = 0; k < an->norder; k++) {
		uint8_t *d = an->dst[k % NDST];
		memcpy(d, an->floor + (size_t)an->order[k] * VBYTES, VBYTES);
		sum += d[k % VBYTES];
	}
	return sum;
}

__attribute__((noinline)) uint64_t anatomy_run_key(struct anat *an)
{
	uint64_t sum = 0;
	for (uint32_t k = 0; k < an->norder; k++) {
		struct sc_key key;
		if (sc_l2_key(an->st, NS, tokens_of(an, an->order[k]), NTOK, &key))
			return 0;
		sum += key.lo;
	}
	return sum;
}

enum get_mode { FROM_KEY, FROM_TOKENS, FROM_TOKENS_COPY };

/* The lookups of one phase: from the precomputed key or from the tokens, with or without the copy
 * (inlined into each phase's own function, so that callgrind tells them apart). */
static inline __attribute__((always_inline)) uint64_t gets(struct anat *an, enum get_mode mode)
{
	uint64_t sum = 0;
	for (uint32_t k = 0; k < an->norder; k++) {
		struct sc_lease l;
		uint32_t i = an->order[k];
		int rc = mode == FROM_KEY ? sc_l2_get_key(an->st, an->keys[i], &l)
					  : sc_l2_get(an->st, NS, tokens_of(an, i), NTOK, NULL, &l);
		if (rc || l.sec_len[0] != VBYTES)
			return 0;
		sum += l.sec_len[0];
		if (mode == FROM_TOKENS_COPY) {
			uint8_t *d = an->dst[k % NDST];
			memcpy(d, l.sec[0], VBYTES);
			sum += d[k % VBYTES];
		}
		sc_lease_release(&l);
	}
	return sum;
}

__attribute__((noinline)) uint64_t anatomy_run_lookup(struct anat *an)
{
	return gets(an, FROM_KEY);
}

__attribute__((noinline)) uint64_t anatomy_run_get(struct anat *an)
{
	return gets(an, FROM_TOKENS);
}

__attribute__((noinline)) uint64_t anatomy_run_get_copy(struct anat *an)
{
	return gets(an, FROM_TOKENS_COPY);
}

/* one dependent load after another through a random cycle of the chase buffer's lines: the
 * latency of a cache miss that nothing overlaps (the unit the lookup's misses are counted in) */
__attribute__((noinline)) uint64_t anatomy_run_chase(struct anat *an)
{
	uint64_t at = an->order[0] % an->chase_lines;
	for (uint32_t k = 0; k < an->norder; k++)
		at = *(const volatile uint64_t *)(an->chase + at * 64);
	return at + 1;
}

static const struct phase {
	const char *name, *what;
	uint64_t (*run)(struct anat *);
} phases[] = {
	{ "floor", "memcpy of 4 KiB from a plain buffer of the same size and page size at random items",
	  anatomy_run_floor },
	{ "chase", "one dependent load after another at random 64-byte lines of a buffer of the same size (THP)",
	  anatomy_run_chase },
	{ "key", "sc_l2_key of 32 tokens (keyed XXH3-128)", anatomy_run_key },
	{ "lookup", "sc_l2_get_key from a precomputed key + sc_lease_release (no hashing, no copy)", anatomy_run_lookup },
	{ "get", "sc_l2_get from 32 tokens + sc_lease_release (no copy)", anatomy_run_get },
	{ "get_copy", "sc_l2_get + memcpy of the 4 KiB value + sc_lease_release", anatomy_run_get_copy },
};
#define NPHASE (sizeof(phases) / sizeof(phases[0]))

/* ---- set-up ---- */

static int fill(struct anat *an, const char *arena)
{
	uint64_t seed = 0x5eed4a7ull;
	an->tokens = malloc((size_t)an->nitems * NTOK * sizeof(int32_t));
	an->keys = malloc((size_t)an->nitems * sizeof(*an->keys));
	an->order = malloc((size_t)an->norder * sizeof(*an->order));
	uint8_t *v = malloc(VBYTES);
	if (!an->tokens || !an->keys || !an->order || !v) {
		free(v);
		return -ENOMEM;
	}
	for (size_t k = 0; k < (size_t)an->nitems * NTOK; k++)
		an->tokens[k] = (int32_t)(bench_splitmix(&seed) % 200000);
	int rc = 0;
	for (uint32_t i = 0; i < an->nitems && !rc; i++) {
		if (!(i & 4095))
			bench_progress("bench anatomy: admitting %u of %u values into %s", i, an->nitems, arena);
		value_of(i, v);
		memcpy(an->floor + (size_t)i * VBYTES, v, VBYTES);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { v }, .sec_len = { VBYTES } };
		rc = sc_l2_admit(an->st, NS, tokens_of(an, i), NTOK, sc_digest(v, VBYTES), &p, SC_ORIGIN_DIRECT);
		if (!rc)
			rc = sc_l2_key(an->st, NS, tokens_of(an, i), NTOK, &an->keys[i]);
	}
	free(v);
	struct sc_l2_stats s;
	if (!rc && (rc = sc_l2_stats(an->a, NULL, &s)) == 0 && s.entries != an->nitems)
		rc = -ENOSPC;
	return rc;
}

/* A new random sequence of items for the next run: each run meets the caches as the previous
 * run, of another phase, left them (the same items in the same order would find the lines the
 * previous phase just brought in). */
static void reorder(struct anat *an, uint64_t seed)
{
	for (uint32_t k = 0; k < an->norder; k++)
		an->order[k] = (uint32_t)(bench_splitmix(&seed) % an->nitems);
}

/* The chase buffer: its lines in one random cycle (Sattolo's shuffle). 0 or -ENOMEM. */
static int chase_setup(struct anat *an, uint64_t bytes)
{
	an->chase_lines = bytes / 64;
	if (an->chase_lines > (1u << 24))
		an->chase_lines = 1u << 24;
	void *m = mmap(NULL, an->chase_lines * 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t *perm = malloc(an->chase_lines * sizeof(uint32_t));
	if (m == MAP_FAILED || !perm) {
		if (m != MAP_FAILED)
			munmap(m, an->chase_lines * 64);
		free(perm);
		return -ENOMEM;
	}
	madvise(m, an->chase_lines * 64, MADV_HUGEPAGE);
	an->chase = m;
	uint64_t seed = 0xc4a5e;
	for (uint32_t i = 0; i < an->chase_lines; i++)
		perm[i] = i;
	for (uint32_t i = (uint32_t)an->chase_lines - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(bench_splitmix(&seed) % i), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint32_t i = 0; i < an->chase_lines; i++) {
		uint64_t next = perm[i];
		memcpy(an->chase + (uint64_t)i * 64, &next, 8);
	}
	free(perm);
	return 0;
}

static int phase_index(const char *name)
{
	for (size_t p = 0; p < NPHASE; p++)
		if (!strcmp(phases[p].name, name))
			return (int)p;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench anatomy [--ws BYTES] [--rounds N] [--gets N]\n\n"
		   "Where the time of a 4 KiB L2 hit goes: random gets timed phase by phase in one\n"
		   "process (the key alone, the lookup and lease from a precomputed key, the get from tokens,\n"
		   "the get with its copy) against the memory floor (memcpy of the same bytes from a plain\n"
		   "buffer of the same size and page size). Rounds interleave the phases; medians reported.\n"
		   "Under callgrind, --toggle-collect='anatomy_run_*' counts each phase alone (docs/DESIGN.md,\n"
		   "\"Performance\").\n\n"
		   "  --ws BYTES   values held (default 256M; --quick 32M)\n"
		   "  --rounds N   rounds (default 7; --quick 2)\n"
		   "  --gets N     gets per phase and round (default 200000; --quick 20000)\n\n"
		   "Metrics: anatomy_<phase>_ns (ns per operation), phase floor, chase (one dependent cache miss),\n"
		   "key, lookup, get, get_copy;\n"
		   "anatomy_get_copy_vs_floor (time, get_copy / floor); anatomy_copy_after_get_ns (get_copy - get).\n");
}

int bench_anatomy(int argc, char **argv)
{
	uint64_t ws = bench_quick ? 32ull << 20 : 256ull << 20;
	uint32_t rounds = bench_quick ? 2 : 7, gets = bench_quick ? 20000 : 200000;
	const struct cli_opt opts[] = {
		{ "ws", CLI_SIZE, &ws, 1ull << 20, 8ull << 30, .want = "1M to 8G" },
		{ "rounds", CLI_U32, &rounds, 1, 64, .want = "1 to 64" },
		{ "gets", CLI_U32, &gets, 1000, 100000000, .want = "1000 to 100000000" },
		{ 0 },
	};
	int rc = cli_parse_opts("bench anatomy", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (optind < argc)
		return cli_usage_error("bench anatomy", "unexpected argument '%s'", argv[optind]);
	struct anat an = { .nitems = (uint32_t)(ws / VBYTES), .norder = gets };
	char arena[64];
	snprintf(arena, sizeof(arena), "bench-anatomy-%d", (int)getpid());
	uint64_t foot = sc_l2_footprint(NULL, VBYTES, 0, NTOK);
	uint64_t bytes = (uint64_t)an.nitems * (foot + 64) + (64ull << 20);
	if ((rc = bench_l2_arena(arena, bytes + bytes / 8, an.nitems * 2 + 1024, &an.a, &an.st)))
		return EXIT_FAIL;
	struct sc_arena_info *info = calloc(1, sizeof(*info));
	if (info && sc_arena_info(an.a, info) == 0)
		bench_env(B, "arena_backing", "%s", sc_backing_name(info->backing));
	free(info);
	an.floor_len = ((size_t)an.nitems * VBYTES + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	const char *fb;
	an.floor = bench_huge_alloc(an.floor_len, 0, &fb);
	int ok = an.floor != MAP_FAILED && chase_setup(&an, ws) == 0;
	for (int d = 0; d < NDST && ok; d++)
		if ((an.dst[d] = aligned_alloc(64, VBYTES)))
			memset(an.dst[d], 0, VBYTES);
		else
			ok = 0;
	if (!ok) {
		fprintf(stderr, "stagecache bench anatomy: no memory for the floor buffer or the destinations\n");
		rc = -ENOMEM;
	} else {
		bench_env(B, "floor_backing", "%s", fb);
		bench_env(B, "values", "%u of %u bytes, %u tokens each", an.nitems, VBYTES, NTOK);
		rc = fill(&an, arena);
	}
	if (rc) {
		if (ok)
			fprintf(stderr, "stagecache bench anatomy: filling the arena: %s\n", sc_strerror(rc));
	} else {
		double *ns = calloc((size_t)rounds * NPHASE, sizeof(double));
		for (uint32_t r = 0; r < rounds && ns; r++)
			for (size_t k = 0; k < NPHASE; k++) {
				size_t p = (r + k) % NPHASE; /* a different phase first in each round */
				bench_progress("bench anatomy: round %u of %u, %s", r + 1, rounds, phases[p].name);
				reorder(&an, ((uint64_t)r << 8 | p) + 1);
				double t0 = cli_now();
				uint64_t sum = phases[p].run(&an);
				double t = cli_now() - t0;
				if (!sum) {
					fprintf(stderr, "stagecache bench anatomy: phase %s failed\n", phases[p].name);
					rc = -EIO;
				}
				ns[r * NPHASE + p] = t * 1e9 / an.norder;
			}
		double med[NPHASE];
		for (size_t p = 0; p < NPHASE && ns && !rc; p++) {
			double v[64];
			for (uint32_t r = 0; r < rounds; r++)
				v[r] = ns[r * NPHASE + p];
			char metric[64];
			snprintf(metric, sizeof(metric), "anatomy_%s_ns", phases[p].name);
			bench_stat(B, metric, "ns", v, (int)rounds, phases[p].what);
			med[p] = cli_median(v, (int)rounds);
		}
		if (ns && !rc) {
			int fl = phase_index("floor"), gc = phase_index("get_copy"), g = phase_index("get");
			bench_value(B, "anatomy_get_copy_vs_floor", med[gc] / med[fl], "ratio", phases[fl].what);
			bench_value(B, "anatomy_copy_after_get_ns", med[gc] - med[g], "ns",
				    "anatomy_get_ns (the same gets without the copy)");
		}
		if (!ns)
			rc = -ENOMEM;
		free(ns);
	}
	for (int d = 0; d < NDST; d++)
		free(an.dst[d]);
	if (an.floor != MAP_FAILED)
		munmap(an.floor, an.floor_len);
	if (an.chase)
		munmap(an.chase, an.chase_lines * 64);
	free(an.tokens);
	free(an.keys);
	free(an.order);
	bench_l2_arena_drop(arena, an.a, an.st);
	return rc ? EXIT_FAIL : EXIT_OK;
}
