/*
 * tests/check_benefit.c — the benefit policy (lib/l2/evict.c): compute costs recorded (clamped,
 * defaulted from the stage's per-token cost, shared by every handle of the stage), honoured (under
 * pressure the entries that save the most compute per byte stay), the admission rules (a cost
 * below what copying the bytes out takes; the doorkeeper under pressure), plain S3-FIFO when costs
 * are absent or uniform, and the policy nodes' benefit fields checked and repaired by fsck and kept
 * by a rebuild.
 */
#include <errno.h>
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
	tcase_add_test(tc, fsck_checks_and_repairs_the_benefit_fields);
	tcase_add_test(tc, density_arithmetic_never_overflows);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(benefit_suite)
