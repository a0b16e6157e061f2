/*
 * tests/check_benefit.c — the benefit policy (lib/l2/evict.c): compute costs recorded (clamped,
 * defaulted from the stage's per-token cost, shared by every handle of the stage), honoured (under
 * pressure the entries that save the most compute per byte stay), the admission rules (a cost
 * below what copying the bytes out takes; the doorkeeper under pressure), plain S3-FIFO when costs
 * are absent or uniform, the rules' lines (inclusive), S3-FIFO's warm-up, the policy nodes' benefit
 * fields checked and repaired by fsck and kept by a rebuild, and the reclamation lib/l2/evict.c
 * does after a removal (one batch per call; once more after reaping a dead lease holder).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/evq.h"

#define ARENA (32ull << 20)
#define N (64u << 10) /* every entry's payload */

struct fx {
	struct sc_arena *a;
	const char *name;
	struct sc_stage *st;
};

static void fx_open(struct fx *f)
{
	f->a = sc_test_arena("ben", ARENA, &f->name);
	ck_assert_int_eq(sc_stage_open(f->a, "model", "state", &f->st), 0);
}

static void fx_close(struct fx *f)
{
	sc_stage_close(f->st);
	sc_test_arena_destroy(f->a, f->name);
}

static void toks(int32_t t[4], uint32_t k)
{
	t[0] = 777;
	t[1] = (int32_t)k;
	t[2] = (int32_t)(k * 13 + 5);
	t[3] = 1;
}

static void fill(uint8_t *p, size_t n, uint32_t k)
{
	uint64_t x = k * 0x9e3779b97f4a7c15ull + 99;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

/* Admit key @k (@n bytes) with compute cost @cost (0: none given). */
static int put(struct sc_stage *st, uint32_t k, size_t n, uint64_t cost)
{
	uint8_t *b = malloc(n);
	fill(b, n, k);
	int32_t t[4];
	toks(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit_cost(st, "ben", t, 4, sc_digest(b, n), &p, SC_ORIGIN_DIRECT, cost);
	free(b);
	return rc;
}

static int peek(struct sc_stage *st, uint32_t k, struct sc_l2_entry_info *info)
{
	int32_t t[4];
	toks(t, k);
	return sc_l2_peek(st, "ben", t, 4, info);
}

static int has(struct sc_stage *st, uint32_t k)
{
	struct sc_l2_entry_info info;
	return peek(st, k, &info) == 0;
}

static uint64_t cost_of(struct sc_stage *st, uint32_t k)
{
	struct sc_l2_entry_info info;
	ck_assert_int_eq(peek(st, k, &info), 0);
	return info.cost_ns;
}

static void hit(struct sc_stage *st, uint32_t k)
{
	int32_t t[4];
	toks(t, k);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "ben", t, 4, NULL, &l), 0);
	sc_lease_release(&l);
}

static struct sc_key key_of(struct sc_stage *st, uint32_t k)
{
	int32_t t[4];
	toks(t, k);
	struct sc_key key;
	ck_assert_int_eq(sc_l2_key(st, "ben", t, 4, &key), 0);
	return key;
}

static int get(struct sc_stage *st, uint32_t k, struct sc_lease *l)
{
	int32_t t[4];
	toks(t, k);
	return sc_l2_get(st, "ben", t, 4, NULL, l);
}

/* The policy node of key @k's live entry. */
static struct shm_evq_node *node_of(struct fx *f, uint32_t k)
{
	struct shm_index_entry *e = sc_test_l2_entry(f->a, key_of(f->st, k));
	ck_assert_ptr_nonnull(e);
	return &l2_q(f->a)->node[shm_index_idx(l2_ix(f->a), e)];
}

/* Is key @k in the ghost (of the window admissions look in)? */
static int in_ghost(struct fx *f, uint32_t k)
{
	struct shm_evq *q = l2_q(f->a);
	struct sc_key key = key_of(f->st, k);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	int in = shm_evq_ghost_has_locked(q, l2_key_fp(key.lo, key.hi), l2_budget(f->a) / 100 * 90);
	shm_evq_unlock(q);
	return in;
}

static struct sc_l2_stats stats(struct fx *f)
{
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(f->a, NULL, &s), 0);
	return s;
}

static void assert_fsck_clean(struct sc_arena *a)
{
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &rep), 0);
}

/* A budget of exactly @count entries of N bytes and keys base..base+count-1 stored, key base+i
 * costing mult[i] ns per byte of its footprint (mult NULL, or 0: no cost given). Key base joins
 * the small FIFO; once it is full (before any eviction) the rest join the main one. Returns the
 * footprint. */
static uint64_t fx_fill(struct fx *f, uint32_t base, uint32_t count, const uint64_t *mult)
{
	uint64_t fp = sc_l2_footprint(f->a, N, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f->a, count * fp), 0);
	for (uint32_t i = 0; i < count; i++)
		ck_assert_int_eq(put(f->st, base + i, N, mult ? mult[i] * fp : 0), 0);
	ck_assert_uint_eq(node_of(f, base)->q, SHM_EVQ_SMALL);
	for (uint32_t i = 1; i < count; i++)
		ck_assert_uint_eq(node_of(f, base + i)->q, SHM_EVQ_MAIN);
	ck_assert_uint_eq(stats(f).evictions, 0);
	return fp;
}

/* fx_open, then fx_fill from key 0. */
static uint64_t fx_open_full(struct fx *f, uint32_t count, const uint64_t *mult)
{
	fx_open(f);
	return fx_fill(f, 0, count, mult);
}

/* Every key worth 1 ns per byte. */
static const uint64_t ones[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };

/* The index shard of key @k. */
static uint32_t shard_of(struct fx *f, uint32_t k)
{
	struct shm_index *ix = l2_ix(f->a);
	return shm_index_shard_of_bucket(shm_index_bucket(ix, key_of(f->st, k).lo));
}

/* ---- costs in ---- */

START_TEST(costs_are_recorded_clamped_and_defaulted)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 1, 4096, 12345), 0);
	ck_assert_uint_eq(cost_of(f.st, 1), 12345);
	ck_assert_int_eq(put(f.st, 2, 4096, UINT64_MAX), 0); /* clamped, not refused */
	ck_assert_uint_eq(cost_of(f.st, 2), SC_COST_MAX);
	ck_assert_int_eq(put(f.st, 3, 4096, 0), 0); /* none given, none declared: unknown */
	ck_assert_uint_eq(cost_of(f.st, 3), 0);
	/* the stage declares a per-token cost: 4 tokens x 1000 */
	uint64_t v = 7;
	ck_assert_int_eq(sc_stage_token_cost(f.st, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(sc_stage_set_token_cost(f.st, 1000), 0);
	ck_assert_int_eq(put(f.st, 4, 4096, 0), 0);
	ck_assert_uint_eq(cost_of(f.st, 4), 4000);
	ck_assert_int_eq(put(f.st, 5, 4096, 999), 0); /* a cost of its own wins */
	ck_assert_uint_eq(cost_of(f.st, 5), 999);
	/* tokens x an absurd per-token cost saturates, then clamps */
	ck_assert_int_eq(sc_stage_set_token_cost(f.st, UINT64_MAX), 0);
	ck_assert_int_eq(put(f.st, 6, 4096, 0), 0);
	ck_assert_uint_eq(cost_of(f.st, 6), SC_COST_MAX);
	/* the declaration lives in the arena's record of the stage: another handle sees it */
	ck_assert_int_eq(sc_stage_set_token_cost(f.st, 250), 0);
	struct sc_arena *a2;
	struct sc_stage *s2;
	ck_assert_int_eq(sc_arena_open(f.name, &a2), 0);
	ck_assert_int_eq(sc_stage_open(a2, "model", "state", &s2), 0);
	ck_assert_int_eq(sc_stage_token_cost(s2, &v), 0);
	ck_assert_uint_eq(v, 250);
	ck_assert_int_eq(put(s2, 7, 4096, 0), 0);
	ck_assert_uint_eq(cost_of(f.st, 7), 1000);
	sc_stage_close(s2);
	sc_arena_close(a2);
	/* bad input */
	ck_assert_int_eq(sc_stage_set_token_cost(NULL, 1), -EINVAL);
	ck_assert_int_eq(sc_stage_token_cost(f.st, NULL), -EINVAL);
	ck_assert_int_eq(sc_stage_token_cost(NULL, &v), -EINVAL);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/* A hit that would copy more than recomputing costs is no benefit: refused, counted, noted. */
START_TEST(a_cost_below_copying_the_bytes_is_refused)
{
	struct fx f;
	fx_open(&f);
	/* 1 MiB at 50 ps per byte: 52 us to copy out; a 1 us prefix is not worth keeping */
	ck_assert_int_eq(put(f.st, 1, 1 << 20, 1000), -ENOSPC);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_LOW_BENEFIT);
	ck_assert_str_eq(sc_l2_refusal_name(SC_L2_REFUSE_LOW_BENEFIT), "low_benefit");
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.refused_low_benefit, 1);
	ck_assert_uint_eq(s.admission_rejects, 1);
	ck_assert_uint_eq(s.entries, 0);
	/* just above the line it is admitted */
	ck_assert_int_eq(put(f.st, 2, 1 << 20, (1u << 20) / 20 + 1), 0);
	/* a lookup of the refused key says why it missed */
	int32_t t[4];
	toks(t, 1);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ben", t, 4, NULL, &l), -ENOENT);
	struct sc_miss_stats m;
	ck_assert_int_eq(sc_miss_stats(f.a, sc_stage_id(f.st), &m), 0);
	ck_assert_uint_eq(m.l2[SC_MISS_REFUSED], 1);
	ck_assert_uint_eq(m.l2_refused[SC_L2_REFUSE_LOW_BENEFIT], 1);
	/* stored again: its refusal no longer explains anything */
	ck_assert_int_eq(put(f.st, 1, 1 << 20, 1ull << 30), 0);
	ck_assert_int_eq(sc_l2_get(f.st, "ben", t, 4, NULL, &l), 0);
	sc_lease_release(&l);
	/* exactly on the line (copying out takes just what recomputing does) it is not below it:
	 * admitted; 1 ns less is refused */
	const size_t on = 20 * 4096;
	const uint64_t line = (uint64_t)on * SC_L2_RESTORE_PS_PER_BYTE / 1000;
	ck_assert_uint_eq(line * 1000, (uint64_t)on * SC_L2_RESTORE_PS_PER_BYTE); /* a whole number of ns */
	ck_assert_int_eq(put(f.st, 3, on, line - 1), -ENOSPC);
	ck_assert_int_eq(put(f.st, 3, on, line), 0);
	ck_assert_uint_eq(cost_of(f.st, 3), line);
	fx_close(&f);
}
END_TEST

/* ---- costs honoured ---- */

/*
 * The same sequence through two arenas, one told the costs, one not: 2 cheap keys, 10 valuable
 * keys (1000x the compute per byte), 6 cheap keys (the budget holds 20), then 120 cheap keys each
 * asked for twice, 4 admissions apart (the second time from the ghost, into the main FIFO:
 * pressure on main). Plain
 * S3-FIFO evicts main's oldest unhit entries, the valuable ones; the benefit policy keeps them.
 * Returns how many valuable keys each kept and the compute their live entries stand for.
 */
static uint32_t run_pressure(int with_costs, uint64_t *live_cost)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, N, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 20 * fp), 0);
	const uint64_t cheap = 100000, dear = 100000000;
	uint32_t k = 0;
	for (; k < 2; k++)
		ck_assert_int_eq(put(f.st, k, N, with_costs ? cheap : 0), 0);
	for (; k < 12; k++)
		ck_assert_int_eq(put(f.st, k, N, with_costs ? dear : 0), 0);
	for (; k < 18; k++)
		ck_assert_int_eq(put(f.st, k, N, with_costs ? cheap : 0), 0);
	for (uint32_t j = 1000; j < 1120; j++) {
		ck_assert_int_eq(put(f.st, j, N, with_costs ? cheap : 0), 0);
		if (j >= 1004) /* evicted from the small FIFO by now: back through the ghost, into main */
			ck_assert_int_eq(put(f.st, j - 4, N, with_costs ? cheap : 0), 0);
	}
	uint32_t kept = 0;
	for (uint32_t i = 2; i < 12; i++)
		kept += (uint32_t)has(f.st, i);
	*live_cost = 0;
	for (uint32_t i = 0; i < 1120; i++)
		if (has(f.st, i))
			*live_cost += i >= 2 && i < 12 ? dear : cheap;
	struct sc_l2_stats s = stats(&f);
	if (with_costs)
		ck_assert_uint_gt(s.credit_kept, 0);
	assert_fsck_clean(f.a);
	fx_close(&f);
	return kept;
}

START_TEST(under_pressure_what_saves_the_most_compute_per_byte_stays)
{
	uint64_t plain_cost, benefit_cost;
	uint32_t plain = run_pressure(0, &plain_cost), benefit = run_pressure(1, &benefit_cost);
	printf("valuable keys kept: plain S3-FIFO %u, benefit %u of 10 (compute held %llu vs %llu ns)\n", plain,
	       benefit, (unsigned long long)plain_cost, (unsigned long long)benefit_cost);
	ck_assert_uint_le(plain, 2);
	ck_assert_uint_ge(benefit, 8);
	ck_assert_uint_gt(benefit_cost, plain_cost);
}
END_TEST

/*
 * With uniform costs it behaves as today: a deterministic mix of admissions, hits, scans and
 * re-requests through an arena given no costs and through one given a cost proportional to every
 * entry's bytes (one density for all) ends with the same entries, the same evictions and the same
 * lists.
 */
static void run_mix(int uniform, uint8_t *live, struct sc_l2_stats *out)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, N, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 24 * fp), 0);
	uint64_t x = 42;
	for (int i = 0; i < 1500; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t k = (uint32_t)(x % 97) < 60 ? (uint32_t)(x % 31) : (uint32_t)(100 + x % 400);
		size_t n = N / 4 * (1 + k % 4);
		if (has(f.st, k))
			hit(f.st, k);
		else
			ck_assert_int_eq(put(f.st, k, n, uniform ? n * 3 : 0), 0);
	}
	for (uint32_t k = 0; k < 500; k++)
		live[k] = (uint8_t)has(f.st, k);
	*out = stats(&f);
	fx_close(&f);
}

START_TEST(with_uniform_costs_it_is_plain_s3fifo)
{
	uint8_t a[500], b[500];
	struct sc_l2_stats sa, sb;
	run_mix(0, a, &sa);
	run_mix(1, b, &sb);
	ck_assert_uint_gt(sa.evictions, 100);
	ck_assert_mem_eq(a, b, sizeof(a));
	ck_assert_uint_eq(sa.evictions, sb.evictions);
	ck_assert_uint_eq(sa.moved_to_main, sb.moved_to_main);
	ck_assert_uint_eq(sa.ghost_hits, sb.ghost_hits);
	ck_assert_uint_eq(sa.main_entries, sb.main_entries);
	ck_assert_uint_eq(sb.credit_kept, 0);
	ck_assert_uint_eq(sb.refused_low_benefit, 0);
}
END_TEST

/* Under pressure a newcomer worth less than 1/16 of what the cache evicts is refused once and
 * remembered in the ghost: asked for again soon, it is admitted. Without pressure it is not judged. */
START_TEST(the_doorkeeper_refuses_a_low_benefit_newcomer_once)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, N, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 10 * fp), 0);
	/* room to spare: even a cheap one is admitted */
	ck_assert_int_eq(put(f.st, 500, N, 10000), 0);
	/* fill and evict at 1 ms per entry: what the cache evicts is worth that much */
	for (uint32_t k = 0; k < 30; k++)
		ck_assert_int_eq(put(f.st, k, N, 1000000), 0);
	ck_assert_uint_gt(stats(&f).evictions, 10);
	/* 1000x less compute per byte, cache full: refused and remembered */
	ck_assert_int_eq(put(f.st, 600, N, 10000), -ENOSPC);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_LOW_BENEFIT);
	ck_assert(!has(f.st, 600));
	/* asked again: the ghost says it came back */
	ck_assert_int_eq(put(f.st, 600, N, 10000), 0);
	ck_assert(has(f.st, 600));
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.refused_low_benefit, 1);
	/* an entry of unknown cost is never judged */
	ck_assert_int_eq(put(f.st, 700, N, 0), 0);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/* Readmit key @k (evicted, in the ghost) at @cost: it must come back through the ghost, into main,
 * while what the cache evicts is worth exactly @d each; returns its credit. */
static uint32_t ghost_return_credit(struct fx *f, uint32_t k, uint64_t cost, uint64_t d)
{
	struct shm_evq *q = l2_q(f->a);
	ck_assert(!has(f->st, k) && in_ghost(f, k));
	ck_assert_uint_eq(q->hdr->evict_dens, d);
	uint64_t ghost_hits = stats(f).ghost_hits;
	ck_assert_int_eq(put(f->st, k, N, cost), 0);
	ck_assert_uint_eq(stats(f).ghost_hits, ghost_hits + 1);
	ck_assert_uint_eq(q->hdr->evict_dens, d); /* what its room cost was worth d too */
	struct shm_evq_node *nd = node_of(f, k);
	ck_assert_uint_eq(nd->q, SHM_EVQ_MAIN);
	return nd->credit;
}

/*
 * The benefit rules' lines are where the design draws them, inclusive: with everything evicted
 * worth exactly d per byte, a key back from the ghost worth exactly 2d is granted one extra pass
 * (r = 2 - 1/16: none), and under pressure a newcomer worth a ratio of exactly 1/16 (in
 * sixteenths) is admitted, one below it refused.
 */
START_TEST(the_benefit_lines_are_inclusive_at_twice_and_a_sixteenth)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, N, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 10 * fp), 0);
	const uint64_t c0 = 16 * fp, d = shm_evq_density(c0, fp); /* exactly 16 ns per byte */
	ck_assert_uint_eq(d, 16ull << SHM_EVQ_DENS_SHIFT);
	for (uint32_t k = 0; k < 30; k++)
		ck_assert_int_eq(put(f.st, k, N, c0), 0);
	ck_assert_uint_gt(stats(&f).evictions, 10);
	/* two keys evicted from the small FIFO, still remembered */
	uint32_t x = UINT32_MAX, y = UINT32_MAX;
	for (uint32_t k = 30; k-- > 0 && y == UINT32_MAX;)
		if (!has(f.st, k) && in_ghost(&f, k))
			*(x == UINT32_MAX ? &x : &y) = k;
	ck_assert_uint_ne(y, UINT32_MAX);
	/* ratio 2: one pass */
	ck_assert_uint_eq(shm_evq_density(2 * c0, fp) * 16 / d, 32);
	ck_assert_uint_eq(ghost_return_credit(&f, x, 2 * c0, d), SHM_EVQ_CREDIT_GRANTED | 1);
	/* a sixteenth less: weighed, nothing granted */
	ck_assert_uint_eq(shm_evq_density(2 * c0 - fp, fp) * 16 / d, 31);
	ck_assert_uint_eq(ghost_return_credit(&f, y, 2 * c0 - fp, d), SHM_EVQ_CREDIT_GRANTED);
	/* the doorkeeper: ratio 1/16 (1.5 sixteenths, rounded down) admitted, 1/32 refused */
	ck_assert_uint_eq(l2_q(f.a)->hdr->evict_dens, d);
	const uint64_t sixteenth = fp * 3 / 2, less = fp / 2;
	ck_assert_uint_eq(shm_evq_density(sixteenth, fp) * 16 / d, 1);
	ck_assert_uint_eq(shm_evq_density(less, fp) * 16 / d, 0);
	ck_assert_uint_ge(sc_test_heap_used(f.a) + fp, 10 * fp + 1); /* full: it is judged */
	ck_assert_int_eq(put(f.st, 600, N, sixteenth), 0);
	ck_assert_uint_eq(stats(&f).refused_low_benefit, 0);
	ck_assert_uint_eq(l2_q(f.a)->hdr->evict_dens, d);
	ck_assert_int_eq(put(f.st, 601, N, less), -ENOSPC);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_LOW_BENEFIT);
	ck_assert_uint_eq(stats(&f).refused_low_benefit, 1);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/*
 * S3-FIFO's warm-up: before anything was ever evicted, newcomers join the small FIFO while it holds
 * less than its share (10 % of the budget), and the main one once it holds exactly that.
 */
START_TEST(warm_up_sends_newcomers_to_main_once_small_holds_exactly_its_share)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, N, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 100 * fp), 0);
	ck_assert_uint_eq(stats(&f).budget_bytes, 100 * fp); /* its share: 10 fp */
	for (uint32_t k = 0; k < 10; k++)
		ck_assert_int_eq(put(f.st, k, N, 0), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.small_entries, 10);
	ck_assert_uint_eq(s.small_bytes, 100 * fp / 100 * 10);
	ck_assert_uint_eq(s.main_entries, 0);
	ck_assert_int_eq(put(f.st, 10, N, 0), 0);
	ck_assert_int_eq(put(f.st, 11, N, 0), 0);
	s = stats(&f);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.small_entries, 10);
	ck_assert_uint_eq(s.main_entries, 2);
	ck_assert_uint_eq(s.main_bytes, 2 * fp);
	fx_close(&f);
}
END_TEST

/* ---- the doorkeeper's judgement, the FIFOs' credit ---- */

/*
 * The doorkeeper judges a newcomer only when its cost is known, and only under the policy mutex:
 * an unknown cost is admitted without taking the mutex at all (a rebuild the lists owe is left to
 * the next locker), and when the mutex cannot be taken (here its word is scribbled to name us)
 * nothing is refused, not even a newcomer it would refuse with the mutex (the judgement fails
 * open and counts nothing), and the word is left as it was.
 */
START_TEST(the_doorkeeper_judges_only_known_costs_and_only_under_the_policy_mutex)
{
	struct fx f;
	uint64_t fp = fx_open_full(&f, 10, ones);
	ck_assert_int_eq(put(f.st, 10, N, fp), 0); /* evicts key 0: D is 1 ns per byte */
	struct shm_evq *q = l2_q(f.a);
	ck_assert(q->hdr->has_evicted);
	ck_assert_uint_eq(q->hdr->evict_dens, 1ull << SHM_EVQ_DENS_SHIFT);
	/* with the mutex: 1 ns for 64 KiB is refused (and noted) */
	const uint64_t kfp1 = 0x5eed00000011ull, kfp2 = 0x5eed00000012ull, kfp3 = 0x5eed00000013ull;
	ck_assert_int_eq(l2_benefit_admit(f.a, kfp1, fp, 1), -ENOSPC);
	ck_assert_uint_eq(q->hdr->low_benefit, 1);
	/* the mutex cannot be taken: the same newcomer is not refused, nothing is counted */
	uint32_t token = f.a->shm->token;
	ck_assert_uint_eq(atomic_load(&q->hdr->mu.word), 0);
	atomic_store(&q->hdr->mu.word, token);
	ck_assert_int_eq(shm_evq_lock(q), -EBADMSG);
	int rc = l2_benefit_admit(f.a, kfp2, fp, 1);
	uint32_t word = atomic_load(&q->hdr->mu.word);
	atomic_store(&q->hdr->mu.word, 0);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(word, token);
	ck_assert_uint_eq(q->hdr->low_benefit, 1);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	int ghosted = shm_evq_ghost_has_locked(q, kfp2, l2_budget(f.a) / 100 * 90);
	shm_evq_unlock(q);
	ck_assert(!ghosted); /* not remembered as refused either */
	/* an unknown cost: admitted, and the mutex is not taken (its locker would have rebuilt) */
	q->hdr->state = SHM_EVQ_REBUILD;
	rc = l2_benefit_admit(f.a, kfp3, fp, 0);
	uint32_t state = q->hdr->state;
	ck_assert_int_eq(shm_evq_lock(q), 0); /* the rebuild */
	ck_assert_uint_eq(q->hdr->state, SHM_EVQ_OK);
	shm_evq_unlock(q);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(state, SHM_EVQ_REBUILD);
	ck_assert_uint_eq(q->hdr->low_benefit, 1);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/*
 * The main FIFO's credit, pass by pass (D is 1 ns per byte throughout; key 1 is worth 4 times
 * that, key 3's cost is unknown):
 *  - a small-FIFO entry's credit (no rule grants one: here a scribble) is not honoured: unhit and
 *    worth what is evicted, it is evicted into the ghost;
 *  - a warm-up entry (in main before anything was weighed) reaching main's tail unhit is weighed
 *    there, once: r = 4 grants 3 passes, and this pass uses one (2 left);
 *  - a credit beyond the most an entry carries (a scribble) is not honoured: that entry goes;
 *  - an entry of unknown cost, evicted, leaves D as it was.
 */
START_TEST(main_fifo_credit_is_weighed_once_at_warm_up_and_only_in_range_in_main)
{
	struct fx f;
	const uint64_t mult[10] = { 1, 4, 1, 0, 1, 1, 1, 1, 1, 1 };
	uint64_t fp = fx_open_full(&f, 10, mult);
	struct shm_evq_hdr *h = l2_q(f.a)->hdr;
	const uint64_t d = 1ull << SHM_EVQ_DENS_SHIFT;
	ck_assert_uint_eq(node_of(&f, 1)->credit, 0); /* not weighed yet */
	ck_assert_int_eq(put(f.st, 10, N, fp), 0);
	ck_assert(!has(f.st, 0));
	ck_assert_uint_eq(h->evict_dens, d);
	ck_assert_uint_eq(node_of(&f, 10)->q, SHM_EVQ_SMALL);
	/* a scribbled credit on the small FIFO's only entry: it is evicted all the same */
	node_of(&f, 10)->credit = SHM_EVQ_CREDIT_GRANTED | 5;
	ck_assert_int_eq(put(f.st, 11, N, fp), 0);
	ck_assert(!has(f.st, 10) && in_ghost(&f, 10));
	for (uint32_t k = 1; k < 10; k++)
		ck_assert_msg(has(f.st, k), "key %u was evicted", k);
	ck_assert_uint_eq(h->credit_kept, 0);
	ck_assert_uint_eq(h->evict_dens, d);
	/* main gives now (small empty, one entry's room short); key 2's credit scribbled past the most */
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(f.st, 11)), 0);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 9 * fp), 0);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.evictions, 2);
	ck_assert_uint_eq(s0.small_entries, 0);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, 0);
	node_of(&f, 2)->credit = SHM_EVQ_CREDIT_GRANTED | (SHM_EVQ_CREDIT_MAX + 1);
	ck_assert_int_eq(put(f.st, 12, N, fp), 0);
	ck_assert(has(f.st, 1));
	ck_assert_uint_eq(node_of(&f, 1)->credit, SHM_EVQ_CREDIT_GRANTED | (4 - 1 - 1));
	ck_assert_uint_eq(h->credit_kept, 1);
	ck_assert(!has(f.st, 2));
	ck_assert(has(f.st, 3));
	ck_assert_uint_eq(stats(&f).evictions, 3);
	ck_assert_uint_eq(h->evict_dens, d);
	/* main's oldest now: key 3, of unknown cost */
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(f.st, 12)), 0);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 8 * fp), 0);
	ck_assert_uint_eq(stats(&f).evictions, 3);
	ck_assert_int_eq(put(f.st, 13, N, fp), 0);
	ck_assert(!has(f.st, 3));
	ck_assert_uint_eq(stats(&f).evictions, 4);
	ck_assert_uint_eq(h->evict_dens, d);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/* ---- room making: what it drops, skips and reclaims ---- */

/*
 * A node whose entry is no longer live (retired, freed, or being freed by whoever holds its shard)
 * is dropped from its list without taking the entry's shard: here the test holds that shard, and
 * the small FIFO's only node is such a stale one. The admission drops it (nothing skipped, the
 * held shard not counted busy), evicts main's oldest instead, and reclaims only what it evicted:
 * the held shard's retired entry stays pending.
 */
static const uint32_t stale_states[] = { SHM_ENT_RETIRED, SHM_ENT_FREE, SHM_ENT_FREEING };

START_TEST(a_stale_node_is_dropped_without_its_shard_and_its_shard_is_not_reclaimed)
{
	for (size_t i = 0; i < sizeof(stale_states) / sizeof(stale_states[0]); i++) {
		const uint32_t want = stale_states[i];
		struct fx f;
		fx_open(&f);
		/* keys b (the stale node) and b + 1 (main's oldest) of two shards, the newcomer of a third:
		 * the only shard held is the stale node's */
		uint32_t b = 0, knew = 100;
		while (shard_of(&f, b) == shard_of(&f, b + 1))
			b++;
		uint32_t s0 = shard_of(&f, b);
		while (shard_of(&f, knew) == s0)
			knew++;
		uint64_t fp = fx_fill(&f, b, 10, NULL);
		struct shm_index *ix = l2_ix(f.a);
		struct shm_index_entry *e = sc_test_l2_entry(f.a, key_of(f.st, b));
		ck_assert_ptr_nonnull(e);
		struct shm_evq_node *nd = node_of(&f, b);
		/* retire key b as a removal would, but leave its node queued (a removal whose policy
		 * step did not happen) */
		ck_assert_int_eq(shm_index_lock(ix, s0), 0);
		ck_assert_int_eq(shm_index_unlink_retire_locked(ix, e), 0);
		if (want != SHM_ENT_RETIRED) {
			shm_index_unlock(ix, s0);
			l2_reclaim_all(f.a, -1);
			ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_FREE);
			ck_assert_int_eq(shm_index_lock(ix, s0), 0);
			atomic_store(&e->state, want);
		}
		ck_assert_uint_eq(atomic_load(&e->state), want);
		ck_assert_uint_eq(nd->q, SHM_EVQ_SMALL);
		const struct shm_index_shard *sh = &ix->hdr->shards[s0];
		uint32_t pending = sh->pending_count;
		ck_assert_uint_eq(pending, want == SHM_ENT_RETIRED);
		struct shm_evq_hdr *h = l2_q(f.a)->hdr;
		uint64_t skipped0 = h->skipped;
		/* room for one entry more: key b's, unless freed (then the newcomer is twice as large) */
		size_t n = want == SHM_ENT_RETIRED ? N : 2 * N;
		ck_assert_uint_le(sc_l2_footprint(f.a, n, 0, 4), fp + (want == SHM_ENT_RETIRED ? 0 : fp));
		ck_assert_uint_gt(sc_test_heap_used(f.a) + sc_l2_footprint(f.a, n, 0, 4), 10 * fp);
		int rc = put(f.st, knew, n, 0);
		uint32_t q0 = nd->q, pending1 = sh->pending_count;
		uint64_t skipped1 = h->skipped;
		if (want == SHM_ENT_FREEING)
			atomic_store(&e->state, SHM_ENT_FREE);
		shm_index_unlock(ix, s0);
		ck_assert_int_eq(rc, 0);
		ck_assert_msg(q0 == SHM_EVQ_NONE, "state %u: the stale node is on list %u", want, q0);
		ck_assert_msg(skipped1 == skipped0, "state %u: %llu skipped", want,
			      (unsigned long long)(skipped1 - skipped0));
		ck_assert_msg(pending1 == pending, "state %u: %u pending in the held shard, was %u", want, pending1,
			      pending);
		ck_assert(!has(f.st, b + 1));
		ck_assert(has(f.st, knew));
		ck_assert_uint_eq(stats(&f).evictions, 1);
		assert_fsck_clean(f.a);
		fx_close(&f);
	}
}
END_TEST

/*
 * An admission that replaces a key never evicts the entry it replaces, even when that entry is
 * the policy's next victim and nothing leases it: key 0 (the small FIFO's only entry) replaced by
 * one twice its size makes its room from main's two oldest, keys 1 and 2.
 */
START_TEST(a_replacement_never_evicts_the_entry_it_replaces)
{
	struct fx f;
	uint64_t fp = fx_open_full(&f, 4, NULL), fp2 = sc_l2_footprint(f.a, 2 * N, 0, 4);
	ck_assert_uint_gt(fp2, fp);
	ck_assert_uint_le(fp2, 2 * fp);
	ck_assert_int_eq(put(f.st, 0, 2 * N, 0), 0);
	ck_assert_uint_eq(stats(&f).evictions, 2);
	ck_assert(has(f.st, 0));
	ck_assert(!has(f.st, 1));
	ck_assert(!has(f.st, 2));
	ck_assert(has(f.st, 3));
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/*
 * Before evicting anything, an admission checks that the unleased bytes on the lists can make its
 * room (else it is refused as leased). Each pinned entry counts once: an entry leased twice, and
 * the entry being replaced when it is leased too; an entry leased but no longer on a list (removed)
 * pins nothing there, and neither does the entry being replaced when it is on no list (its
 * admission could not take the policy mutex). Budget of 4 entries, each case exactly at its line: counted right the room is
 * there and the admission evicts; counted wrong it would be refused.
 */
enum { PIN_TWICE, PIN_REMOVED, PIN_REPLACED, PIN_UNQUEUED };

START_TEST(each_pinned_entry_counts_once_against_the_room_an_admission_needs)
{
	for (int c = PIN_TWICE; c <= PIN_UNQUEUED; c++) {
		struct fx f;
		uint64_t fp = fx_open_full(&f, 4, NULL), fp2 = sc_l2_footprint(f.a, 2 * N, 0, 4);
		ck_assert_uint_gt(fp2, fp);
		ck_assert_uint_le(fp2, 2 * fp);
		struct sc_lease l[3];
		uint32_t nl = 0, knew = 100;
		size_t n = 2 * N;
		if (c == PIN_TWICE) {
			/* key 1 twice, key 2: 2 entries pinned, keys 0 and 3 are the room for 2N */
			ck_assert_int_eq(get(f.st, 1, &l[nl++]), 0);
			ck_assert_int_eq(get(f.st, 1, &l[nl++]), 0);
			ck_assert_int_eq(get(f.st, 2, &l[nl++]), 0);
		} else if (c == PIN_REMOVED) {
			/* keys 1, 2, 3 leased, key 3 removed (its bytes wait for the lease): key 0 is the
			 * room for N */
			for (uint32_t k = 1; k <= 3; k++)
				ck_assert_int_eq(get(f.st, k, &l[nl++]), 0);
			ck_assert_int_eq(sc_l2_remove(f.st, key_of(f.st, 3)), 0);
			ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, fp);
			n = N;
		} else if (c == PIN_REPLACED) {
			/* keys 2 and 3 leased, key 3 replaced by 2N: keys 0 and 1 are its room */
			for (uint32_t k = 2; k <= 3; k++)
				ck_assert_int_eq(get(f.st, k, &l[nl++]), 0);
			knew = 3;
		} else {
			/* key 3 leased, key 0 on no list and replaced by 2N: keys 1 and 2 are its room */
			ck_assert_int_eq(get(f.st, 3, &l[nl++]), 0);
			struct shm_evq *q = l2_q(f.a);
			struct shm_evq_node *nd = node_of(&f, 0);
			ck_assert_int_eq(shm_evq_lock(q), 0);
			shm_evq_remove_locked(q, (uint32_t)(nd - q->node));
			shm_evq_unlock(q);
			ck_assert_uint_eq(nd->q, SHM_EVQ_NONE);
			knew = 0;
		}
		ck_assert_uint_eq(sc_test_heap_used(f.a), 4 * fp);
		int rc = put(f.st, knew, n, 0);
		int why = sc_l2_last_refusal(f.st);
		while (nl)
			sc_lease_release(&l[--nl]);
		ck_assert_msg(rc == 0, "case %d: refused (%d, why %d)", c, rc, why);
		ck_assert(has(f.st, knew));
		ck_assert(!has(f.st, c == PIN_UNQUEUED ? 1 : 0)); /* the oldest evictable entry went */
		ck_assert_uint_eq(stats(&f).evictions, c == PIN_REMOVED ? 1 : 2);
		assert_fsck_clean(f.a);
		fx_close(&f);
	}
}
END_TEST

/* ---- reclamation ---- */

/*
 * Reclaiming every shard (what an admission does before it measures its room) takes only the
 * shards that have something pending: a shard with nothing retired is not locked, so a repair
 * owed there (a holder died mid-repair) is left to that shard's next user.
 */
START_TEST(reclaiming_every_shard_takes_only_the_shards_with_something_pending)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 1, 4096, 0), 0);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t s = (shard_of(&f, 1) + 1) % SHM_INDEX_SHARDS;
	struct shm_index_shard *sh = &ix->hdr->shards[s];
	ck_assert_uint_eq(sh->pending_head, 0);
	ck_assert_uint_eq(sh->repair_pending, 0);
	sh->repair_pending = 1;
	l2_reclaim_all(f.a, -1);
	uint32_t owed = sh->repair_pending;
	ck_assert_int_eq(shm_index_lock(ix, s), 0); /* its next user repairs it */
	shm_index_unlock(ix, s);
	ck_assert_uint_eq(owed, 1);
	ck_assert_uint_eq(sh->repair_pending, 0);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST


/*
 * One reclamation frees at most 64 entries of a shard. When one it met was leased and no dead
 * process was behind that (nothing to reap), it does not go round again: of 70 entries retired
 * while a reader sat in its read-side section, and then a leased one, one call frees 64 and leaves
 * 6 and the leased one pending, which the next call frees once the lease is gone.
 */
START_TEST(a_reclamation_blocked_by_a_live_lease_frees_one_batch)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 4096;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	ck_assert_int_eq(put(f.st, 0, n, 0), 0);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t k0[71], m = 0;
	for (uint32_t k = 1; m < 71; k++)
		if (shm_index_shard_of_bucket(shm_index_bucket(ix, key_of(f.st, k).lo)) == 0)
			k0[m++] = k; /* 71 keys of shard 0 */
	ck_assert_uint_ge(ix->nentries / SHM_INDEX_SHARDS, 71);
	for (uint32_t i = 0; i < 71; i++)
		ck_assert_int_eq(put(f.st, k0[i], n, 0), 0);
	const struct shm_index_shard *sh = &ix->hdr->shards[0];
	ck_assert_uint_eq(sh->pending_count, 0);
	/* a reader of another handle inside its read-side section: retired entries wait for it */
	struct sc_arena *r;
	ck_assert_int_eq(sc_arena_open(f.name, &r), 0);
	shm_epoch_enter(r->shm);
	for (uint32_t i = 0; i < 70; i++)
		ck_assert_int_eq(sc_l2_remove(f.st, key_of(f.st, k0[i])), 0);
	ck_assert_uint_eq(sh->pending_count, 70);
	shm_epoch_exit(r->shm);
	/* the last one is leased when it goes */
	struct sc_lease l;
	ck_assert_int_eq(get(f.st, k0[70], &l), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(f.st, k0[70])), 0);
	ck_assert_uint_eq(sh->pending_count, 70 + 1 - 64);
	ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, (70 + 1 - 64) * fp);
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(f.st, k0[70])), -ENOENT); /* reclaims its shard */
	ck_assert_uint_eq(sh->pending_count, 0);
	ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, 0);
	sc_arena_close(r);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

struct lease_ctx {
	const char *name;
	uint32_t k;
};

/* In a child (sc_test_parked): lease key k through a handle of its own. */
static int lease_one(void *ctx)
{
	struct lease_ctx *c = ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_lease l;
	return sc_arena_open(c->name, &a) || sc_stage_open(a, "model", "state", &st) || get(st, c->k, &l);
}

/*
 * An entry removed while a killed process still held a lease on it: the removal's reclamation meets
 * the dead lease, reaps the dead process and frees the entry at once (nothing left pending).
 */
START_TEST(a_removal_blocked_by_a_dead_lease_reaps_it_and_frees_the_entry)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 4096;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	ck_assert_int_eq(put(f.st, 1, n, 0), 0);
	uint64_t used = sc_test_heap_used(f.a);
	struct lease_ctx c = { f.name, 1 };
	pid_t holder = sc_test_parked(lease_one, &c, "lease key 1");
	kill(holder, SIGKILL);
	sc_test_wait_killed(holder);
	atomic_store(&f.a->shm->hdr->reap_due_ns, UINT64_MAX); /* no periodic reap does it */
	f.a->l2_last_reap_ns = 0;                               /* this handle's last reap: long ago */
	struct shm_index *ix = l2_ix(f.a);
	struct sc_key key = key_of(f.st, 1);
	ck_assert_int_eq(sc_l2_remove(f.st, key), 0);
	ck_assert_uint_eq(ix->hdr->shards[shm_index_shard_of_bucket(shm_index_bucket(ix, key.lo))].pending_count, 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_eq(sc_test_heap_used(f.a), used - fp);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/*
 * The policy's accessors for other modules, at their edges: the cost read (lock-free, for
 * sc_l2_entry_info) of an index past the node table is 0, not the ghost word stored just past it;
 * a departure is noted for every miss reason, SC_MISS_NEVER_STORED (0) included, and for none
 * when the reason is negative (a replacement).
 */
START_TEST(policy_accessors_at_their_edges)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 1, 4096, 777), 0);
	struct shm_evq *q = l2_q(f.a);
	/* three fingerprints of ghost set 0: ways 0, 1, 2 */
	ck_assert_int_eq(shm_evq_lock(q), 0);
	for (uint64_t i = 1; i <= 3; i++)
		shm_evq_ghost_put_locked(q, i << 32, 4096);
	shm_evq_unlock(q);
	ck_assert_ptr_eq((char *)(q->node + q->nodes) + offsetof(struct shm_evq_node, cost), (char *)&q->ghost[2].fp);
	ck_assert_uint_eq(q->ghost[2].fp, 3ull << 32);
	ck_assert_uint_eq(l2_entry_cost(f.a, q->nodes), 0);
	ck_assert_uint_eq(l2_entry_cost(f.a, UINT32_MAX), 0);
	ck_assert_uint_eq(l2_entry_cost(f.a, shm_index_idx(l2_ix(f.a), sc_test_l2_entry(f.a, key_of(f.st, 1)))), 777);
	/* departures, noted against a node on no list */
	uint32_t idx = 0;
	while (q->node[idx].q != SHM_EVQ_NONE)
		idx++;
	const uint64_t kfp = 0x5eed00000001ull, kfp2 = 0x5eed00000002ull;
	l2_policy_forget(f.a, idx, kfp, SC_MISS_NEVER_STORED, 2);
	uint64_t w = shm_evq_depart_find(q, kfp);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(w), SC_MISS_NEVER_STORED + 1);
	ck_assert_uint_eq(SHM_EVQ_DEPART_DETAIL(w), 2);
	l2_policy_forget(f.a, idx, kfp, SC_MISS_REMOVED, 1);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, kfp)), SC_MISS_REMOVED + 1);
	l2_policy_forget(f.a, idx, kfp2, -1, 0);
	ck_assert_uint_eq(shm_evq_depart_find(q, kfp2), 0);
	assert_fsck_clean(f.a);
	fx_close(&f);
}
END_TEST

/* ---- the nodes' benefit fields: checked, repaired, kept ---- */

START_TEST(fsck_checks_and_repairs_the_benefit_fields)
{
	struct fx f;
	fx_open(&f);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(put(f.st, k, 4096, 1000000 * (k + 1)), 0);
	struct shm_evq *q = l2_q(f.a);
	uint32_t idx = UINT32_MAX;
	for (uint32_t i = 0; i < q->nodes && idx == UINT32_MAX; i++)
		if (q->node[i].q != SHM_EVQ_NONE && q->node[i].cost)
			idx = i;
	ck_assert_uint_ne(idx, UINT32_MAX);
	uint64_t cost = q->node[idx].cost;
	/* a density that does not follow from the cost, a credit out of range */
	q->node[idx].dens ^= 0x5555;
	q->node[idx].credit = 1000;
	struct sc_fsck_report rep;
	ck_assert_int_gt(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(q->node[idx].cost, cost); /* kept */
	ck_assert_uint_eq(q->node[idx].dens, shm_evq_density(cost, q->node[idx].bytes));
	ck_assert_uint_le(SHM_EVQ_CREDIT(q->node[idx].credit), SHM_EVQ_CREDIT_MAX);
	assert_fsck_clean(f.a);
	/* a cost beyond the clamp (a scribble) is clamped by the rebuild a locker does */
	q->node[idx].cost = UINT64_MAX;
	q->hdr->state = SHM_EVQ_REBUILD;
	ck_assert_int_eq(shm_evq_lock(q), 0);
	shm_evq_unlock(q);
	ck_assert_uint_eq(q->node[idx].cost, SHM_EVQ_COST_MAX);
	assert_fsck_clean(f.a);
	/* every entry is still there and readable */
	for (uint32_t k = 0; k < 8; k++)
		hit(f.st, k);
	fx_close(&f);
}
END_TEST

START_TEST(density_arithmetic_never_overflows)
{
	ck_assert_uint_eq(shm_evq_density(0, 100), 0);
	ck_assert_uint_eq(shm_evq_density(1, UINT64_MAX), 1);      /* known, however small */
	ck_assert_uint_eq(shm_evq_density(UINT64_MAX, 0), UINT64_MAX >> 1);
	ck_assert_uint_eq(shm_evq_density(UINT64_MAX, 1), UINT64_MAX >> 1);
	ck_assert_uint_eq(shm_evq_density(SHM_EVQ_COST_MAX, 1ull << 40), 1ull << 26);
	ck_assert_uint_eq(shm_evq_density(65536, 65536), 65536);   /* 1 ns per byte */
	ck_assert(l2_net_benefit(0, UINT64_MAX));                  /* unknown: kept */
	ck_assert(!l2_net_benefit(1, UINT64_MAX));
	ck_assert(l2_net_benefit(UINT64_MAX, UINT64_MAX));
	ck_assert_uint_eq(l2_cost_clamp(UINT64_MAX), SC_COST_MAX);
}
END_TEST

Suite *benefit_suite(void)
{
	Suite *s = suite_create("benefit");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, costs_are_recorded_clamped_and_defaulted);
	tcase_add_test(tc, a_cost_below_copying_the_bytes_is_refused);
	tcase_add_test(tc, under_pressure_what_saves_the_most_compute_per_byte_stays);
	tcase_add_test(tc, with_uniform_costs_it_is_plain_s3fifo);
	tcase_add_test(tc, the_doorkeeper_refuses_a_low_benefit_newcomer_once);
	tcase_add_test(tc, the_benefit_lines_are_inclusive_at_twice_and_a_sixteenth);
	tcase_add_test(tc, warm_up_sends_newcomers_to_main_once_small_holds_exactly_its_share);
	tcase_add_test(tc, the_doorkeeper_judges_only_known_costs_and_only_under_the_policy_mutex);
	tcase_add_test(tc, main_fifo_credit_is_weighed_once_at_warm_up_and_only_in_range_in_main);
	tcase_add_test(tc, a_stale_node_is_dropped_without_its_shard_and_its_shard_is_not_reclaimed);
	tcase_add_test(tc, a_replacement_never_evicts_the_entry_it_replaces);
	tcase_add_test(tc, each_pinned_entry_counts_once_against_the_room_an_admission_needs);
	tcase_add_test(tc, reclaiming_every_shard_takes_only_the_shards_with_something_pending);
	tcase_add_test(tc, a_reclamation_blocked_by_a_live_lease_frees_one_batch);
	tcase_add_test(tc, a_removal_blocked_by_a_dead_lease_reaps_it_and_frees_the_entry);
	tcase_add_test(tc, policy_accessors_at_their_edges);
	tcase_add_test(tc, fsck_checks_and_repairs_the_benefit_fields);
	tcase_add_test(tc, density_arithmetic_never_overflows);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(benefit_suite)
