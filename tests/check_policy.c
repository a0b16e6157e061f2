/*
 * tests/check_policy.c — the L2 eviction policy under memory pressure: S3-FIFO's order (small
 * FIFO, main FIFO, ghost), scan resistance, room for an entry of 1/8 of the budget in a
 * deliberately fragmented heap, leased entries surviving any pressure (other processes admitting,
 * some killed -9), every refusal reason produced and counted, promotions accounted for (published
 * or refused, retried, returning), writers killed inside the policy's critical sections, and a
 * scribbled policy region (rebuilt, reported and repaired by fsck).
 */
#include <errno.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/evq.h"
#include "../shm/fault.h"
#include "../shm/heap.h"

#define ARENA (32ull << 20)

struct fx {
	struct sc_arena *a;
	const char *name;
	struct sc_stage *st;
};

static void fx_open_size(struct fx *f, uint64_t size)
{
	f->a = sc_test_arena("pol", size, &f->name);
	ck_assert_int_eq(sc_stage_open(f->a, "model", "state", &f->st), 0);
}

static void fx_open(struct fx *f)
{
	fx_open_size(f, ARENA);
}

static void fx_close(struct fx *f)
{
	sc_stage_close(f->st);
	sc_test_arena_destroy(f->a, f->name);
}

static void toks(int32_t t[4], uint32_t k)
{
	t[0] = 4242;
	t[1] = (int32_t)k;
	t[2] = (int32_t)(k * 7 + 1);
	t[3] = 99;
}

static void fill(uint8_t *p, size_t n, uint32_t k)
{
	uint64_t x = k * 0x9e3779b97f4a7c15ull + 12345;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(k + i);
}

static struct sc_digest digest_of(uint32_t k, size_t n)
{
	uint8_t *b = malloc(n);
	fill(b, n, k);
	struct sc_digest d = sc_digest(b, n);
	free(b);
	return d;
}

/* Admit key @k with @n bytes derived from it, and compute cost @cost ns (0: none given). */
static int put_cost(struct sc_stage *st, uint32_t k, size_t n, uint64_t cost)
{
	uint8_t *b = malloc(n);
	fill(b, n, k);
	int32_t t[4];
	toks(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit_cost(st, "pol", t, 4, sc_digest(b, n), &p, SC_ORIGIN_DIRECT, cost);
	free(b);
	return rc;
}

/* Admit key @k with @n bytes derived from it (no cost: sc_l2_admit). */
static int put(struct sc_stage *st, uint32_t k, size_t n)
{
	return put_cost(st, k, n, 0);
}

/* fx_open, a budget of exactly @count entries of @n bytes, and keys 0..count-1 stored, each
 * costing @ns_per_byte ns per byte of its footprint (0: no cost); their footprint. Key 0 joins
 * the small FIFO; once it is full (before any eviction) the rest join the main one. */
static uint64_t fx_open_full_cost(struct fx *f, size_t n, uint32_t count, uint64_t ns_per_byte)
{
	fx_open(f);
	uint64_t fp = sc_l2_footprint(f->a, n, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f->a, count * fp), 0);
	for (uint32_t k = 0; k < count; k++)
		ck_assert_int_eq(put_cost(f->st, k, n, ns_per_byte * fp), 0);
	return fp;
}

static uint64_t fx_open_full(struct fx *f, size_t n, uint32_t count)
{
	return fx_open_full_cost(f, n, count, 0);
}

static int has(struct sc_stage *st, uint32_t k)
{
	int32_t t[4];
	toks(t, k);
	struct sc_l2_entry_info info;
	return sc_l2_peek(st, "pol", t, 4, &info) == 0;
}

static int get(struct sc_stage *st, uint32_t k, struct sc_lease *l)
{
	int32_t t[4];
	toks(t, k);
	return sc_l2_get(st, "pol", t, 4, NULL, l);
}

static void hit(struct sc_stage *st, uint32_t k, int times)
{
	for (int i = 0; i < times; i++) {
		struct sc_lease l;
		ck_assert_int_eq(get(st, k, &l), 0);
		sc_lease_release(&l);
	}
}

/* The index entry of key @k (NULL: not in the index). */
static struct shm_index_entry *entry_of(struct fx *f, uint32_t k)
{
	int32_t t[4];
	toks(t, k);
	struct sc_key key;
	ck_assert_int_eq(sc_l2_key(f->st, "pol", t, 4, &key), 0);
	return sc_test_l2_entry(f->a, key);
}

/* The policy node of key @k (which must be in the index). */
static struct shm_evq_node *node_of(struct fx *f, uint32_t k)
{
	struct shm_index_entry *e = entry_of(f, k);
	ck_assert_ptr_nonnull(e);
	return &l2_q(f->a)->node[shm_index_idx(l2_ix(f->a), e)];
}

/* The FIFO holding key @k (SHM_EVQ_*), or -1 when it is not in the index. */
static int queue_of(struct fx *f, uint32_t k)
{
	return entry_of(f, k) ? (int)node_of(f, k)->q : -1;
}

static struct sc_l2_stats stats(struct fx *f)
{
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(f->a, NULL, &s), 0);
	return s;
}

/* The eviction lists pass their own check, every live entry is on one, and (unless
 * @after_crash: a writer killed between queueing and linking leaves a queued entry that is not
 * live, which the evictor drops) nothing else is. */
static void lists_consistent(struct sc_arena *a, int after_crash)
{
	struct shm_evq *q = l2_q(a);
	struct shm_index *ix = l2_ix(a);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	const char *why = NULL;
	int rc = shm_evq_check_locked(q, &why);
	uint32_t orphans = 0, stale = 0;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		int live = atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE;
		orphans += live && q->node[i].q == SHM_EVQ_NONE;
		stale += !live && q->node[i].q != SHM_EVQ_NONE; /* replaced, removed or evicted: gone */
	}
	shm_evq_unlock(q);
	ck_assert_msg(rc == 0, "eviction lists inconsistent: %s", why ? why : "?");
	ck_assert_msg(orphans == 0, "%u live entries on no eviction list", orphans);
	ck_assert_msg(after_crash || stale == 0, "%u entries that are not live still on an eviction list", stale);
}

static void assert_lists_consistent(struct sc_arena *a)
{
	lists_consistent(a, 0);
}

/* ---- S3-FIFO's order ---- */

/* A key stored again: the entry it replaced leaves its eviction list at once (it is no longer
 * in the index, and an evictor must never weigh or count it), the new one is on a list. */
START_TEST(a_replaced_entry_leaves_the_eviction_lists)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 16 << 10;
	ck_assert_int_eq(put(f.st, 5, n), 0);
	int32_t t[4];
	toks(t, 5);
	struct sc_key key;
	ck_assert_int_eq(sc_l2_key(f.st, "pol", t, 4, &key), 0);
	uint32_t old = shm_index_idx(l2_ix(f.a), sc_test_l2_entry(f.a, key));
	ck_assert_int_eq(put(f.st, 5, 2 * n), 0); /* other bytes: a replacement */
	uint32_t now = shm_index_idx(l2_ix(f.a), sc_test_l2_entry(f.a, key));
	ck_assert_uint_ne(now, old);
	ck_assert_int_eq(l2_q(f.a)->node[old].q, SHM_EVQ_NONE);
	int q = queue_of(&f, 5);
	ck_assert(q == SHM_EVQ_SMALL || q == SHM_EVQ_MAIN);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

START_TEST(ghost_admits_a_rerequested_key_to_main)
{
	struct fx f;
	const size_t n = 64 << 10;
	fx_open_full(&f, n, 8);
	/* key 0 went to the small FIFO; once it was full (before any eviction) the rest to main */
	ck_assert_int_eq(queue_of(&f, 0), SHM_EVQ_SMALL);
	ck_assert_int_eq(queue_of(&f, 7), SHM_EVQ_MAIN);
	/* a ninth: the small FIFO's oldest (key 0, never hit) is evicted into the ghost */
	ck_assert_int_eq(put(f.st, 8, n), 0);
	ck_assert(!has(f.st, 0));
	ck_assert_int_eq(queue_of(&f, 8), SHM_EVQ_SMALL);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.ghost_hits, 0);
	/* asked for again: the ghost remembers it, it goes straight to the main FIFO */
	ck_assert_int_eq(put(f.st, 0, n), 0);
	ck_assert_int_eq(queue_of(&f, 0), SHM_EVQ_MAIN);
	struct sc_l2_stats s1 = stats(&f);
	ck_assert_uint_eq(s1.ghost_hits, 1);
	/* a key the ghost never saw joins the small FIFO */
	ck_assert_int_eq(put(f.st, 500, n), 0);
	ck_assert_int_eq(queue_of(&f, 500), SHM_EVQ_SMALL);
	ck_assert_uint_eq(stats(&f).ghost_hits, 1);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

START_TEST(small_needs_two_hits_and_main_gives_hit_entries_another_round)
{
	struct fx f;
	const size_t n = 64 << 10;
	/* 20 entries: the small FIFO holds 2 of them, the main FIFO 18 */
	uint64_t fp = fx_open_full(&f, n, 20);
	ck_assert_int_eq(queue_of(&f, 0), SHM_EVQ_SMALL);
	ck_assert_int_eq(queue_of(&f, 1), SHM_EVQ_SMALL);
	ck_assert_int_eq(queue_of(&f, 2), SHM_EVQ_MAIN);
	struct sc_l2_stats q = stats(&f); /* the stats say the same, list by list */
	ck_assert_uint_eq(q.small_entries, 2);
	ck_assert_uint_eq(q.main_entries, 18);
	ck_assert_uint_gt(q.small_bytes, 0);
	ck_assert_uint_eq(q.main_bytes, 9 * q.small_bytes);
	ck_assert_int_eq(put(f.st, 20, n), 0); /* the first eviction: key 0, small and never hit */
	ck_assert(!has(f.st, 0));
	/* small is now {1, 20}: key 1 is hit once, key 20 twice */
	hit(f.st, 1, 1);
	hit(f.st, 20, 2);
	ck_assert_int_eq(put(f.st, 21, n), 0); /* one hit is not enough: key 1 goes */
	ck_assert(!has(f.st, 1));
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_int_eq(put(f.st, 22, n), 0); /* key 20 moves to main, key 21 goes */
	ck_assert(has(f.st, 20));
	ck_assert_int_eq(queue_of(&f, 20), SHM_EVQ_MAIN);
	ck_assert(!has(f.st, 21));
	ck_assert_uint_eq(stats(&f).moved_to_main, s0.moved_to_main + 1);
	/* main: its oldest (key 2) is hit, so when main must give, key 2 gets another round and key 3
	 * (never hit) goes */
	hit(f.st, 2, 1);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 19 * fp), 0);
	ck_assert(has(f.st, 2));
	ck_assert(!has(f.st, 3));
	ck_assert(has(f.st, 4));
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

START_TEST(a_scan_does_not_flush_the_hot_set)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 64 << 10;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 20 * fp), 0);
	for (uint32_t k = 0; k < 12; k++) {
		ck_assert_int_eq(put(f.st, k, n), 0);
		hit(f.st, k, 3);
	}
	/* a one-pass scan of 5x the budget: each key once, never again */
	for (uint32_t k = 1000; k < 1100; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	for (uint32_t k = 0; k < 12; k++)
		ck_assert_msg(has(f.st, k), "hot key %u was flushed by the scan", k);
	ck_assert_uint_ge(stats(&f).evictions, 80);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* ---- fragmentation ---- */

/* Fill the heap with @n-byte entries until admitting starts to evict; returns the keys admitted
 * (0 .. *count-1; the first evicted ones are gone). */
static uint32_t fill_heap(struct fx *f, size_t n)
{
	uint32_t k = 0;
	for (;; k++) {
		ck_assert_int_eq(put(f->st, k, n), 0);
		if (stats(f).evictions)
			break;
		ck_assert_uint_lt(k, 100000);
	}
	return k + 1;
}

/* Remove key @k; what sc_l2_remove returned. */
static int del(struct fx *f, uint32_t k)
{
	int32_t t[4];
	struct sc_key key;
	toks(t, k);
	ck_assert_int_eq(sc_l2_key(f->st, "pol", t, 4, &key), 0);
	return sc_l2_remove(f->st, key);
}

/* Remove every other of the @count keys fill_heap admitted: many free bytes, none of them long. */
static void punch_holes(struct fx *f, uint32_t count)
{
	for (uint32_t k = 0; k < count; k += 2)
		(void)del(f, k);
}

/* The search for room by address runs one at a time under a lock that guards no state: a process
 * killed while holding it leaves it to the next search, which takes it over and finds room. */
START_TEST(a_search_lock_left_by_a_killed_process_is_taken_over)
{
	struct fx f;
	fx_open(&f);
	const size_t small = 64 << 10;
	uint32_t count = fill_heap(&f, small);
	punch_holes(&f, count);
	struct sc_l2_stats s0 = stats(&f);
	uint64_t big = s0.budget_bytes / 8 - (64 << 10);
	ck_assert_uint_lt(s0.largest_free_block, big); /* only a search by address finds room */
	sc_test_wait_killed(sc_test_locker(f.name, &l2_q(f.a)->hdr->search_mu, 'k', 0)); /* killed holding it */
	ck_assert_int_eq(put(f.st, 900, big), 0);
	ck_assert(has(f.st, 900));
	ck_assert_uint_gt(stats(&f).evictions, s0.evictions);
	lists_consistent(f.a, 1); /* writers were killed */
	fx_close(&f);
}
END_TEST

START_TEST(fragmented_heap_publishes_an_eighth_of_the_budget)
{
	struct fx f;
	fx_open(&f);
	const size_t small = 64 << 10;
	uint32_t count = fill_heap(&f, small);
	punch_holes(&f, count);
	/* and lease some of what is left, scattered over the heap */
	struct sc_lease l[16];
	uint32_t leased[16];
	int nl = 0;
	for (uint32_t k = 1; k < count && nl < 16; k += 14)
		if (get(f.st, k, &l[nl]) == 0)
			leased[nl++] = k;
	ck_assert_int_ge(nl, 8);
	struct sc_l2_stats s0 = stats(&f);
	uint64_t big = s0.budget_bytes / 8 - (64 << 10);
	ck_assert_msg(s0.free_bytes > 2 * big, "free %llu", (unsigned long long)s0.free_bytes);
	ck_assert_msg(s0.largest_free_block < big, "not fragmented: largest free block %llu, entry %llu",
		      (unsigned long long)s0.largest_free_block, (unsigned long long)big);
	/* the promotion's path: reserve (room by address), fill, publish */
	struct sc_l2_resv r;
	ck_assert_int_eq(sc_l2_reserve(f.st, big, &r), 0);
	fill(r.ptr, big, 777);
	int32_t t[4];
	toks(t, 777);
	ck_assert_int_eq(sc_l2_publish(f.st, "pol", t, 4, digest_of(777, big), &r, SC_PAYLOAD_FULL_STATE, big, 0, NULL,
				       SC_ORIGIN_FROM_L3, NULL),
			 0);
	ck_assert(has(f.st, 777));
	struct sc_l2_stats s1 = stats(&f);
	ck_assert_uint_gt(s1.evictions, s0.evictions); /* it had to evict by address */
	ck_assert_uint_eq(s1.admission_rejects, s0.admission_rejects);
	/* the leased entries are all still there, their bytes intact */
	for (int i = 0; i < nl; i++) {
		ck_assert_msg(has(f.st, leased[i]), "leased key %u was evicted", leased[i]);
		ck_assert(sc_digest_equal(sc_digest(l[i].sec[0], l[i].sec_len[0]), digest_of(leased[i], small)));
		sc_lease_release(&l[i]);
	}
	/* and a direct admission of the same size, into the heap as it is now */
	ck_assert_int_eq(put(f.st, 778, big), 0);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* Any admission up to the budget publishes when unleased entries can make the room, wherever the
 * policy's next victim sits (the search by address follows a run across its starting block). An
 * 18 MiB heap of eight 2 MB unleased entries takes a 12 MB entry, then one of the whole budget. */
START_TEST(regression_admission_up_to_the_budget_publishes)
{
	struct fx f;
	fx_open_size(&f, 24ull << 20);
	struct sc_arena_info info;
	ck_assert_int_eq(sc_arena_info(f.a, &info), 0);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(put(f.st, k, 2000000), 0);
	ck_assert_int_eq(put(f.st, 100, 12000000), 0);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), -1);
	ck_assert(has(f.st, 100));
	uint64_t most = info.heap_bytes - (info.heap_bytes >> 6); /* the budget less the headers */
	ck_assert_int_eq(put(f.st, 101, most), 0);
	ck_assert(has(f.st, 101));
	/* a lease in the middle of the heap: the room is not there, and the refusal says why */
	for (uint32_t k = 200; k < 208; k++)
		ck_assert_int_eq(put(f.st, k, 2000000), 0);
	struct sc_lease l;
	ck_assert_int_eq(get(f.st, 204, &l), 0);
	ck_assert_int_eq(put(f.st, 300, 12000000), -ENOSPC);
	int why = sc_l2_last_refusal(f.st);
	ck_assert_msg(why == SC_L2_REFUSE_NO_ROOM || why == SC_L2_REFUSE_LEASED, "refused: %s", sc_l2_refusal_name(why));
	sc_lease_release(&l);
	ck_assert_int_eq(put(f.st, 300, 12000000), 0);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), -1);
	fx_close(&f);
}
END_TEST

START_TEST(leases_that_split_the_heap_refuse_with_no_room)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 128 << 10;
	uint32_t count = fill_heap(&f, n);
	/* a lease on every fifth entry: no run of unleased blocks is 1 MiB long */
	struct sc_lease l[48];
	uint32_t leased[48];
	int nl = 0;
	uint32_t first = 0;
	while (first < count && !has(f.st, first))
		first++;
	for (uint32_t k = first; k < count && nl < 48; k += 5) {
		ck_assert_int_eq(get(f.st, k, &l[nl]), 0);
		leased[nl++] = k;
	}
	ck_assert_msg((count - first) / 5 <= 48, "too many entries to pin with one handle (%u)", count - first);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_int_eq(put(f.st, 9000, 1 << 20), -ENOSPC);
	struct sc_l2_stats s1 = stats(&f);
	ck_assert_uint_eq(s1.refused[SC_L2_REFUSE_NO_ROOM], s0.refused[SC_L2_REFUSE_NO_ROOM] + 1);
	ck_assert_uint_eq(s1.admission_rejects, s0.admission_rejects + 1);
	for (int i = 0; i < nl; i++)
		ck_assert_msg(has(f.st, leased[i]), "leased key %u was evicted", leased[i]);
	for (int i = 0; i < nl; i++)
		sc_lease_release(&l[i]);
	/* released: the same admission finds its room */
	ck_assert_int_eq(put(f.st, 9000, 1 << 20), 0);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST


/* ---- the search by address, called directly on a full heap ---- */

/* The LIVE entry whose payload block starts at @off (NULL: none). */
static struct shm_index_entry *entry_at(struct fx *f, uint64_t off)
{
	struct shm_index *ix = l2_ix(f->a);
	for (uint32_t i = 0; i < ix->nentries; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE && ix->ent[i].payload_off == off)
			return &ix->ent[i];
	return NULL;
}

/* The LIVE entry in the block right after @e's (NULL: none). */
static struct shm_index_entry *entry_after(struct fx *f, const struct shm_index_entry *e)
{
	uint64_t bytes;
	ck_assert_int_eq(shm_heap_size(f->a->shm, e->payload_off, &bytes), 0);
	return entry_at(f, e->payload_off + bytes + SHM_HEAP_BLOCK_HDR);
}

/* The policy's next victim: the small FIFO's oldest entry. */
static struct shm_index_entry *next_victim(struct fx *f)
{
	struct shm_evq *q = l2_q(f->a);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	uint32_t t = shm_evq_tail_locked(q, SHM_EVQ_SMALL);
	shm_evq_unlock(q);
	ck_assert_uint_gt(t, 0);
	return &l2_ix(f->a)->ent[t - 1];
}

static int alive(const struct shm_index_entry *e, uint32_t gen)
{
	return atomic_load(&e->state) == SHM_ENT_LIVE && e->gen == gen;
}

/* A heap full of @n-byte entries (fill_heap); its next victim E0 and the three blocks after it, each
 * a LIVE unhit small-FIFO entry, and a request @len that only three such blocks hold. */
struct full_heap {
	struct fx f;
	struct shm_index_entry *e[4];
	uint32_t gen[4];
	uint64_t off0, len;
};

static void full_heap_open(struct full_heap *h)
{
	const size_t n = 64 << 10;
	fx_open(&h->f);
	fill_heap(&h->f, n);
	h->e[0] = next_victim(&h->f);
	for (int i = 0; i < 4; i++) {
		if (i)
			h->e[i] = entry_after(&h->f, h->e[i - 1]);
		ck_assert_ptr_nonnull(h->e[i]);
		struct shm_evq_node *nd = &l2_q(h->f.a)->node[shm_index_idx(l2_ix(h->f.a), h->e[i])];
		ck_assert_int_eq(nd->q, SHM_EVQ_SMALL);
		ck_assert_uint_eq(atomic_load(&h->e[i]->freq), 0);
		h->gen[i] = h->e[i]->gen;
	}
	uint64_t bytes;
	ck_assert_int_eq(shm_heap_size(h->f.a->shm, h->e[0]->payload_off, &bytes), 0);
	h->off0 = h->e[0]->payload_off;
	h->len = 2 * bytes + SHM_HEAP_BLOCK_HDR + 1000;
	ck_assert_uint_lt(stats(&h->f).largest_free_block, h->len);
}

static int contig(struct full_heap *h, const struct shm_index_entry *exclude, uint64_t *off, int *why)
{
	return l2_make_contig(h->f.a, h->len, shm_tag_priv(h->f.a->shm->token), exclude, off, why);
}

/* What a test does to the window's first entry E0 when the search has chosen it ("l2.frag.window"),
 * before it evicts: 0 nothing, 1 a new generation, 2 another block, 3 BUSY. */
static struct {
	struct shm_index_entry *e;
	int what;
	uint32_t gen, state;
	uint64_t off;
	struct shm_arena *shm;
	uint64_t free_at_alloc; /* a block to free when the search first tries to allocate (0: none) */
} meddle;

static void meddle_with_the_window(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "l2.frag.alloc") && meddle.free_at_alloc) {
		ck_assert_int_eq(shm_heap_free(meddle.shm, meddle.free_at_alloc), 0);
		meddle.free_at_alloc = 0;
	}
	if (strcmp(point, "l2.frag.window") || !meddle.e)
		return;
	meddle.gen = meddle.e->gen, meddle.off = meddle.e->payload_off, meddle.state = atomic_load(&meddle.e->state);
	if (meddle.what == 1)
		meddle.e->gen++;
	else if (meddle.what == 2)
		meddle.e->payload_off += SHM_HEAP_BLOCK_HDR;
	else if (meddle.what == 3)
		atomic_store(&meddle.e->state, SHM_ENT_BUSY);
}

static void meddle_undo(void)
{
	if (meddle.e && meddle.what) {
		meddle.e->gen = meddle.gen, meddle.e->payload_off = meddle.off;
		atomic_store(&meddle.e->state, meddle.state);
	}
	meddle.e = NULL;
}

/* The search by address starts at the policy's next victim and evicts the cheapest window of
 * blocks that holds the request: there, E0 .. E2. An entry that changed under it after it chose
 * (a new generation, another block, BUSY) is not evicted: the room is not made (-EAGAIN). */
START_TEST(a_search_by_address_evicts_the_window_at_the_next_victim_unless_it_changed)
{
	struct full_heap h;
	full_heap_open(&h);
	uint64_t off;
	int why;
	struct sc_l2_stats s0 = stats(&h.f);
	int what = _i;
	meddle.e = h.e[0], meddle.what = what;
	sc_sched_set(meddle_with_the_window, NULL);
	int rc = contig(&h, NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	meddle_undo();
	if (!what) {
		ck_assert_int_eq(rc, 0);
		ck_assert(off >= h.off0 && off - h.off0 < 4096); /* at E0 (page aligned) */
		ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
		for (int i = 0; i < 3; i++)
			ck_assert(!alive(h.e[i], h.gen[i]));
		ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	} else {
		ck_assert_int_eq(rc, -EAGAIN);
		ck_assert_msg(alive(h.e[0], h.gen[0]), "changed entry evicted (%d)", what);
		ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 2);
	}
	assert_lists_consistent(h.f.a);
	fx_close(&h.f);
}
END_TEST

/* The search passes over a block it may not evict: the excluded entry (the one an admission
 * replaces), a BUSY one (a fill in flight), one whose index entry is of another generation or
 * names another block, one whose shard a dead process holds. The room is made elsewhere, and that
 * entry stays. Case @_i: 0 excluded, 1 BUSY, 2 another generation, 3 another block, 4 shard held. */
START_TEST(a_search_by_address_passes_over_what_it_may_not_evict)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index_entry *e = h.e[1];
	uint32_t st = atomic_load(&e->state), gen = e->gen, shard = shm_index_idx(l2_ix(h.f.a), e) % SHM_INDEX_SHARDS;
	uint64_t poff = e->payload_off, off;
	const struct shm_index_entry *exclude = NULL;
	int why, rc;
	if (_i == 0)
		exclude = e;
	else if (_i == 1)
		atomic_store(&e->state, SHM_ENT_BUSY);
	else if (_i == 2)
		e->gen++;
	else if (_i == 3)
		e->payload_off += SHM_HEAP_BLOCK_HDR;
	else /* held by a process killed holding it: trylock cannot take it */
		sc_test_wait_killed(sc_test_locker(h.f.name, &l2_ix(h.f.a)->hdr->shards[shard].mu, 'k', 0));
	rc = contig(&h, exclude, &off, &why);
	atomic_store(&e->state, st);
	e->gen = gen, e->payload_off = poff;
	ck_assert_msg(rc == 0, "case %d: %d (%s)", _i, rc, sc_l2_refusal_name(why));
	ck_assert_msg(alive(e, gen) && e->payload_off == poff, "case %d: the entry was evicted", _i);
	ck_assert(off + h.len <= poff || off > poff);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	assert_lists_consistent(h.f.a);
	fx_close(&h.f);
}
END_TEST

/* The heap's blocks in address order (at most @max): their offsets and whether allocated. */
struct blocks {
	uint64_t off[4096];
	int allocated[4096];
	uint32_t n;
};

static int blocks_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	(void)bytes, (void)tag;
	struct blocks *b = ctx;
	ck_assert_uint_lt(b->n, 4096);
	b->off[b->n] = off, b->allocated[b->n++] = allocated;
	return 0;
}

static void heap_blocks(struct fx *f, struct blocks *b)
{
	b->n = 0;
	ck_assert_int_eq(shm_heap_walk(f->a->shm, blocks_cb, b), 0);
}

/* The free blocks that alone hold @ctx->len bytes: how many, and the last one. */
struct roomy {
	uint64_t len, off;
	int n;
};

static int roomy_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	(void)tag;
	struct roomy *r = ctx;
	if (!allocated && bytes >= r->len)
		r->off = off, r->n++;
	return 0;
}

/* At "l2.frag.window": index entry 0 (LIVE, its first generation) is made to name the free block
 * the search chose (`at`), as another writer's publication in it would; undone after the search. */
static struct {
	struct shm_index_entry *e;
	uint64_t at, was;
	int done;
} forge0;

static void entry_0_names_the_window(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "l2.frag.window") && forge0.e) {
		forge0.was = forge0.e->payload_off;
		forge0.e->payload_off = forge0.at;
		forge0.done = 1;
	}
}

/* A window of free blocks only evicts nothing: a free block carries no index entry, and entry 0
 * (the index slot a free block's record would read as) is not looked at, even LIVE in its first
 * generation and naming the window's block. */
START_TEST(a_search_by_address_evicts_nothing_for_the_free_blocks_of_its_window)
{
	struct fx f;
	fx_open(&f);
	struct shm_index_entry *e0 = &l2_ix(f.a)->ent[0];
	/* slot 0 heads shard 0's free list (it is built top-down): admit until a key of shard 0 takes it */
	uint32_t k = 0;
	while (atomic_load(&e0->state) != SHM_ENT_LIVE) {
		ck_assert_uint_lt(k, 100000);
		ck_assert_int_eq(put(f.st, k++, 64), 0);
	}
	ck_assert_uint_eq(e0->gen, 0);
	struct roomy r = { .len = 4 << 20 };
	ck_assert_int_eq(shm_heap_walk(f.a->shm, roomy_cb, &r), 0);
	ck_assert_int_eq(r.n, 1); /* the heap's free tail: the window that costs nothing */
	struct sc_l2_stats s0 = stats(&f);
	forge0.e = e0, forge0.at = r.off, forge0.was = e0->payload_off, forge0.done = 0;
	sc_sched_set(entry_0_names_the_window, NULL);
	uint64_t off;
	int why;
	int rc = l2_make_contig(f.a, r.len, shm_tag_priv(f.a->shm->token), NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	e0->payload_off = forge0.was;
	forge0.e = NULL;
	ck_assert(forge0.done);
	ck_assert_int_eq(rc, 0);
	ck_assert(off >= r.off && off - r.off < 4096); /* in that block (page aligned) */
	ck_assert_msg(alive(e0, 0), "entry 0 was evicted");
	ck_assert_uint_eq(stats(&f).evictions, s0.evictions);
	ck_assert_int_eq(shm_heap_free(f.a->shm, off), 0);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* A full heap of 768 KiB entries, all leased but the policy's next victim E0 and the entry in the
 * block right before it, Eb (fill_heap's last key, in the hole of the one eviction): the only run
 * of unpinned blocks starts before the search's starting block. */
struct split_heap {
	struct fx f;
	struct sc_lease l[SC_LEASES_MAX];
	int nl;
	struct shm_index_entry *e0, *eb;
	uint32_t gen0, genb;
	uint64_t bytes;          /* each entry block's usable bytes */
	uint32_t nblocks, at0;   /* blocks in the heap; E0's place among them */
};

static void split_heap_open(struct split_heap *h)
{
	const size_t n = 768 << 10;
	fx_open(&h->f);
	uint32_t count = fill_heap(&h->f, n);
	h->e0 = next_victim(&h->f);
	struct blocks *b = malloc(sizeof(*b));
	heap_blocks(&h->f, b);
	h->nblocks = b->n;
	h->at0 = b->n;
	for (uint32_t i = 0; i < b->n; i++)
		if (b->off[i] == h->e0->payload_off)
			h->at0 = i;
	ck_assert_uint_gt(h->at0, 0);
	ck_assert_uint_lt(h->at0, b->n);
	h->eb = entry_at(&h->f, b->off[h->at0 - 1]);
	ck_assert_ptr_nonnull(h->eb);
	ck_assert_ptr_eq(entry_after(&h->f, h->eb), h->e0);
	ck_assert(!b->allocated[b->n - 1]); /* the free tail, */
	free(b);
	ck_assert_int_eq(shm_heap_size(h->f.a->shm, h->e0->payload_off, &h->bytes), 0);
	ck_assert_uint_lt(stats(&h->f).largest_free_block, h->bytes); /* smaller than one entry */
	h->gen0 = h->e0->gen, h->genb = h->eb->gen;
	h->nl = 0;
	for (uint32_t k = 0; k < count; k++) {
		struct shm_index_entry *e = entry_of(&h->f, k);
		if (!e || e == h->e0 || e == h->eb)
			continue;
		ck_assert_int_lt(h->nl, SC_LEASES_MAX);
		ck_assert_int_eq(get(h->f.st, k, &h->l[h->nl]), 0);
		h->nl++;
	}
	struct sc_l2_stats s = stats(&h->f);
	ck_assert_uint_eq(s.small_entries + s.main_entries, (uint64_t)h->nl + 2);
}

static void split_heap_close(struct split_heap *h)
{
	for (int i = 0; i < h->nl; i++)
		sc_lease_release(&h->l[i]);
	assert_lists_consistent(h->f.a);
	fx_close(&h->f);
}

/* The search by address goes on past the end of the heap for a second lap, as far as needed to
 * follow a run that began before its starting block: Eb and E0 are the only room, and taken. */
START_TEST(a_search_by_address_follows_a_run_across_its_starting_block)
{
	struct split_heap h;
	split_heap_open(&h);
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off, at = h.eb->payload_off;
	int why;
	int rc = l2_make_contig(h.f.a, 2 * h.bytes - 8192, shm_tag_priv(h.f.a->shm->token), NULL, &off, &why);
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert(off >= at && off - at < 4096);
	ck_assert(!alive(h.e0, h.gen0) && !alive(h.eb, h.genb));
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 2);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	split_heap_close(&h);
}
END_TEST

/* A search that finds no room visits the heap once from its starting block, then the second lap
 * only up to the end of the run that crosses it (Eb, E0, then a leased block, and the block after
 * it ends the search): the heap's blocks plus 3. It refuses as scan_limit when that reached its
 * bound (at exactly the bound), as no_room when it did not (bound one more). With Eb leased too,
 * the second lap ends at E0 (the heap's blocks plus 1), and the same holds. Nothing is evicted. */
START_TEST(a_search_by_address_that_finds_nothing_refuses_as_scan_limit_only_at_its_bound)
{
	struct split_heap h;
	split_heap_open(&h);
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off, len = 3 * h.bytes;
	uint32_t visits = h.nblocks + 3;
	int why;
	sc_l2_set_policy_limits(0, visits);
	ck_assert_int_eq(l2_make_contig(h.f.a, len, shm_tag_priv(h.f.a->shm->token), NULL, &off, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_SCAN_LIMIT));
	sc_l2_set_policy_limits(0, visits + 1);
	ck_assert_int_eq(l2_make_contig(h.f.a, len, shm_tag_priv(h.f.a->shm->token), NULL, &off, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_NO_ROOM));
	/* Eb leased too: the second lap ends at E0 itself (no run crosses it): the heap's blocks
	 * plus 1 */
	uint32_t kb = UINT32_MAX;
	for (uint32_t k = 0; k < 100000 && kb == UINT32_MAX; k++)
		if (entry_of(&h.f, k) == h.eb)
			kb = k;
	ck_assert_uint_ne(kb, UINT32_MAX);
	ck_assert_int_lt(h.nl, SC_LEASES_MAX);
	ck_assert_int_eq(get(h.f.st, kb, &h.l[h.nl]), 0);
	h.nl++;
	visits = h.nblocks + 1;
	sc_l2_set_policy_limits(0, visits);
	ck_assert_int_eq(l2_make_contig(h.f.a, len, shm_tag_priv(h.f.a->shm->token), NULL, &off, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_SCAN_LIMIT));
	sc_l2_set_policy_limits(0, visits + 1);
	ck_assert_int_eq(l2_make_contig(h.f.a, len, shm_tag_priv(h.f.a->shm->token), NULL, &off, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_NO_ROOM));
	sc_l2_set_policy_limits(0, 0);
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions);
	ck_assert(alive(h.e0, h.gen0) && alive(h.eb, h.genb));
	split_heap_close(&h);
}
END_TEST

/* Private 1 MiB blocks until the heap has no room for one more (at most 64, in @priv); the
 * heap's blocks then. The free tail is shorter than 2 MiB. */
static uint32_t fill_private(struct fx *f, uint64_t priv[64], uint32_t *np)
{
	*np = 0;
	while (*np < 64 && shm_heap_alloc(f->a->shm, 1 << 20, shm_tag_priv(f->a->shm->token), &priv[*np]) == 0)
		(*np)++;
	ck_assert_uint_lt(*np, 64);
	ck_assert_uint_lt(stats(f).largest_free_block, 2u << 20);
	struct blocks *b = malloc(sizeof(*b));
	ck_assert_ptr_nonnull(b);
	heap_blocks(f, b);
	uint32_t n = b->n;
	free(b);
	return n;
}

/* A 2 MiB search over a heap of @nblocks blocks that hold no room: no_room with its bound at
 * @nblocks + 2, scan_limit at @nblocks + 1; nothing evicted. */
static void search_ends_after_one_lap(struct fx *f, uint32_t nblocks)
{
	uint64_t ev = stats(f).evictions, off;
	int why;
	sc_l2_set_policy_limits(0, nblocks + 2);
	ck_assert_int_eq(l2_make_contig(f->a, 2u << 20, shm_tag_priv(f->a->shm->token), NULL, &off, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_NO_ROOM));
	sc_l2_set_policy_limits(0, nblocks + 1);
	ck_assert_int_eq(l2_make_contig(f->a, 2u << 20, shm_tag_priv(f->a->shm->token), NULL, &off, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_SCAN_LIMIT));
	sc_l2_set_policy_limits(0, 0);
	ck_assert_uint_eq(stats(f).evictions, ev);
}

/* A search that starts at the heap's first block and finds no room ends when it comes back to it:
 * the heap's blocks plus 1 visits, so with its bound one more it refuses as no_room, not as
 * scan_limit after a second lap. Twice: with no victim at all (the search starts at the heap's
 * start), and started at the first block through the policy's next victim (a leased entry
 * there). Everything else is private blocks, and the free tail is shorter than the request. */
START_TEST(a_search_by_address_from_the_heaps_first_block_ends_after_one_lap)
{
	struct fx f;
	uint64_t priv[64];
	uint32_t np;
	fx_open(&f);
	struct shm_evq *q = l2_q(f.a);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_SMALL), 0);
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_MAIN), 0);
	shm_evq_unlock(q);
	search_ends_after_one_lap(&f, fill_private(&f, priv, &np));
	for (uint32_t i = 0; i < np; i++)
		ck_assert_int_eq(shm_heap_free(f.a->shm, priv[i]), 0);
	fx_close(&f);

	fx_open(&f);
	struct sc_lease l;
	ck_assert_int_eq(put(f.st, 0, 4096), 0);
	ck_assert_int_eq(get(f.st, 0, &l), 0);
	ck_assert_ptr_eq(next_victim(&f), entry_of(&f, 0));
	uint32_t nblocks = fill_private(&f, priv, &np);
	struct blocks *b = malloc(sizeof(*b));
	ck_assert_ptr_nonnull(b);
	heap_blocks(&f, b);
	ck_assert_uint_eq(b->off[0], entry_of(&f, 0)->payload_off); /* the victim is the first block */
	free(b);
	search_ends_after_one_lap(&f, nblocks);
	sc_lease_release(&l);
	for (uint32_t i = 0; i < np; i++)
		ck_assert_int_eq(shm_heap_free(f.a->shm, priv[i]), 0);
	fx_close(&f);
}
END_TEST

/* A search over a heap whose header is damaged refuses as other (not as scan_limit), evicting
 * nothing; the header put back, the same search makes the room. */
START_TEST(a_search_by_address_over_a_damaged_heap_refuses_as_other)
{
	struct full_heap h;
	full_heap_open(&h);
	struct sc_l2_stats s0 = stats(&h.f);
	uint8_t *hh = h.f.a->shm->base + h.f.a->shm->hv.regions[SHM_REGION_HEAP].off, saved[64];
	uint64_t off;
	int why;
	memcpy(saved, hh, sizeof(saved));
	memset(hh, 0xff, sizeof(saved));
	int rc = contig(&h, NULL, &off, &why);
	memcpy(hh, saved, sizeof(saved));
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_OTHER));
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions);
	ck_assert_int_eq(contig(&h, NULL, &off, &why), 0);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	fx_close(&h.f);
}
END_TEST

/* The search keeps the first of the cheapest windows, shortened from the front while the rest
 * still holds the request, and evicts exactly its entries. In a full heap where E0 .. E2 (the
 * first window, three unhit small entries) come first and, further on, X, a hole of two entries'
 * blocks and Y follow (X, Y unhit small entries too): the window is X and the hole (one eviction,
 * cheaper than three; before Y and the hole, as cheap; not the longer one ending at the hole). */
START_TEST(a_search_by_address_evicts_exactly_the_first_cheapest_shortest_window)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index_entry *run[7], *e = h.e[2];
	for (int i = 0; i < 7; i++) {
		run[i] = e = entry_after(&h.f, e);
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(l2_q(h.f.a)->node[shm_index_idx(l2_ix(h.f.a), e)].q, SHM_EVQ_SMALL);
		ck_assert_uint_eq(atomic_load(&e->freq), 0);
	}
	/* run: V W X P Q Y ...; P and Q removed: X, the hole, Y */
	struct shm_index_entry *v = run[1], *w = run[2], *x = run[3], *y = run[6];
	uint32_t gv = v->gen, gw = w->gen, gx = x->gen, gy = y->gen;
	uint64_t at = x->payload_off;
	for (int i = 4; i < 6; i++)
		ck_assert_int_eq(sc_l2_remove(h.f.st, (struct sc_key){ run[i]->key_lo, run[i]->key_hi }), 0);
	l2_reclaim_all(h.f.a, -1);
	struct sc_l2_stats s0 = stats(&h.f);
	struct blocks *b = malloc(sizeof(*b));
	heap_blocks(&h.f, b);
	uint32_t j = 0;
	while (j + 1 < b->n && b->off[j] != at)
		j++;
	ck_assert(j + 2 < b->n && !b->allocated[j + 1] && b->off[j + 2] == y->payload_off); /* the hole: one block */
	ck_assert_uint_lt(y->payload_off - b->off[j + 1] - SHM_HEAP_BLOCK_HDR, h.len); /* that does not hold it */
	free(b);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert(off >= at && off - at < 4096);
	ck_assert(!alive(x, gx));
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 1);
	ck_assert(alive(y, gy) && alive(v, gv) && alive(w, gw));
	for (int i = 0; i < 3; i++)
		ck_assert(alive(h.e[i], h.gen[i]));
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	assert_lists_consistent(h.f.a);
	fx_close(&h.f);
}
END_TEST

/* What losing an entry costs the search: an unhit small-FIFO entry the least; one hit twice (what
 * earns the main FIFO) more, as one with the most credit; once hit, or with more than the most
 * credit (not a credit: scribbled), as little. E0 costlier: the window is E1 .. E3 instead.
 * Case @_i: 0 E0 hit once, 1 twice, 2 at the most credit, 3 past it; 4 E0 with two credits and
 * every entry but E0 .. E2 hit twice: each credit counts as a pass of the policy, as a hit does
 * (E0 three, E3 two: E1 .. E3 is the cheapest window), not as a few bytes (E0 .. E2 would be). */
START_TEST(a_search_by_address_spares_an_entry_hit_twice_or_with_the_most_credit)
{
	static const struct { uint32_t freq, credit, others; int spared; } c[] = {
		{ 1, 0, 0, 0 },
		{ 2, 0, 0, 1 }, /* L2_TO_MAIN (lib/l2/evict.c) */
		{ 0, SHM_EVQ_CREDIT_GRANTED | SHM_EVQ_CREDIT_MAX, 0, 1 },
		{ 0, SHM_EVQ_CREDIT_GRANTED | (SHM_EVQ_CREDIT_MAX + 1), 0, 0 },
		{ 0, SHM_EVQ_CREDIT_GRANTED | 2, 2, 1 },
	};
	struct full_heap h;
	full_heap_open(&h);
	struct shm_evq_node *nd = &l2_q(h.f.a)->node[shm_index_idx(l2_ix(h.f.a), h.e[0])];
	atomic_store(&h.e[0]->freq, c[_i].freq);
	struct shm_index *ix = l2_ix(h.f.a);
	for (uint32_t i = 0; i < ix->nentries && c[_i].others; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE && &ix->ent[i] != h.e[0] &&
		    &ix->ent[i] != h.e[1] && &ix->ent[i] != h.e[2])
			atomic_store(&ix->ent[i].freq, c[_i].others);
	nd->credit = c[_i].credit;
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off, e1 = h.e[1]->payload_off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
	ck_assert(!alive(h.e[1], h.gen[1]) && !alive(h.e[2], h.gen[2]));
	ck_assert_msg(alive(h.e[0], h.gen[0]) == c[_i].spared, "case %d: E0 %s", _i, c[_i].spared ? "evicted" : "spared");
	ck_assert(alive(h.e[3], h.gen[3]) == !c[_i].spared);
	if (c[_i].spared)
		ck_assert(off >= e1 && off - e1 < 4096);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	fx_close(&h.f);
}
END_TEST

/* A window that costs nothing (a free block that holds the request, right after the search's
 * starting block) cannot be beaten: the search takes it at once and looks no further. Here a
 * block further on has a damaged header, which a search that went on would meet and refuse as
 * other; the search returns the free block, evicting nothing. */
START_TEST(a_search_by_address_stops_at_a_window_that_costs_nothing)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index_entry *e4 = entry_after(&h.f, h.e[3]);
	ck_assert_ptr_nonnull(e4);
	struct shm_index_entry *e5 = entry_after(&h.f, e4);
	ck_assert_ptr_nonnull(e5);
	uint64_t hole = h.e[1]->payload_off;
	for (int i = 1; i < 4; i++)
		ck_assert_int_eq(sc_l2_remove(h.f.st, (struct sc_key){ h.e[i]->key_lo, h.e[i]->key_hi }), 0);
	l2_reclaim_all(h.f.a, -1);
	uint64_t bytes;
	ck_assert_int_eq(shm_heap_size(h.f.a->shm, hole, &bytes), -EBADMSG); /* free: no allocation */
	ck_assert_ptr_eq(next_victim(&h.f), h.e[0]);
	struct sc_l2_stats s0 = stats(&h.f);
	ck_assert_uint_ge(s0.largest_free_block, h.len); /* the hole holds it */
	_Atomic uint64_t *word = (_Atomic uint64_t *)(h.f.a->shm->base + e5->payload_off - SHM_HEAP_BLOCK_HDR);
	uint64_t saved = atomic_load(word);
	atomic_store(word, saved ^ (1ull << 40));
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	atomic_store(word, saved);
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert(off >= hole && off - hole < 4096);
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions);
	ck_assert(alive(h.e[0], h.gen[0]));
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	assert_lists_consistent(h.f.a);
	fx_close(&h.f);
}
END_TEST

/* A window never starts past a free block it begins with (the freed entries would merge into that
 * block and move the allocation's start): E1's hole is taken by a private block P but for a small
 * free block F (512 bytes) at its end, so the search, from E0, finds F E2 E3 E4 (F E2 E3 does not
 * hold the request; E2 E3 E4 would) and allocates at F's start. Entries E8 .. E10 removed and
 * part of their room taken by another private block leave a free block G that holds the request,
 * beyond the search's bound (6 blocks): an allocation made at E2 would fail there (E2 is no
 * longer a block's start) and land in G, the better fit. */
START_TEST(a_search_by_address_keeps_the_free_block_its_window_begins_with)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index_entry *e[11];
	for (int i = 0; i < 11; i++) {
		e[i] = i < 4 ? h.e[i] : entry_after(&h.f, e[i - 1]);
		ck_assert_ptr_nonnull(e[i]);
	}
	uint64_t bytes, p, g, hole = e[1]->payload_off, ghole = e[8]->payload_off;
	ck_assert_int_eq(shm_heap_size(h.f.a->shm, hole, &bytes), 0);
	uint32_t gen[5];
	for (int i = 0; i < 5; i++)
		gen[i] = e[i]->gen;
	for (int i = 1; i < 11; i += (i == 1 ? 7 : 1))
		ck_assert_int_eq(sc_l2_remove(h.f.st, (struct sc_key){ e[i]->key_lo, e[i]->key_hi }), 0);
	l2_reclaim_all(h.f.a, -1);
	uint64_t tag = shm_tag_priv(h.f.a->shm->token);
	ck_assert_int_eq(shm_heap_alloc_at(h.f.a->shm, hole, (bytes - 512) | SHM_HEAP_PACKED, tag, &p), 0);
	ck_assert_uint_eq(p, hole);
	uint64_t f_off = hole + bytes - 512 + SHM_HEAP_BLOCK_HDR, gbytes = 3 * bytes + 2 * SHM_HEAP_BLOCK_HDR;
	/* G: the request, a page of alignment slack and an eighth more: a size class above the one
	 * that guarantees the request a fit, and well below the merged F .. E4 (about 1.5 times it) */
	uint64_t take = (gbytes - SHM_HEAP_BLOCK_HDR - (h.len + 4096 + h.len / 8)) & ~63ull;
	ck_assert_int_eq(shm_heap_alloc_at(h.f.a->shm, ghole, take | SHM_HEAP_PACKED, tag, &g), 0);
	ck_assert_uint_eq(g, ghole);
	uint64_t g_off = ghole + take + SHM_HEAP_BLOCK_HDR;
	/* the free blocks: F (too small to matter alone) and G (holds the request) */
	struct blocks *b = malloc(sizeof(*b));
	ck_assert_ptr_nonnull(b);
	heap_blocks(&h.f, b);
	uint32_t fi = b->n, gi = b->n;
	for (uint32_t i = 0; i + 1 < b->n; i++) {
		if (b->off[i] == f_off)
			fi = i;
		if (b->off[i] == g_off)
			gi = i;
	}
	ck_assert(fi < b->n && !b->allocated[fi] && b->off[fi + 1] == e[2]->payload_off);
	ck_assert(gi < b->n && !b->allocated[gi] && b->off[gi + 1] - b->off[gi] - SHM_HEAP_BLOCK_HDR >= h.len);
	free(b);
	ck_assert_ptr_eq(next_victim(&h.f), e[0]);
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off;
	int why;
	sc_l2_set_policy_limits(0, 6); /* E0 P F E2 E3 E4 */
	int rc = contig(&h, NULL, &off, &why);
	sc_l2_set_policy_limits(0, 0);
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert_msg(off >= f_off && off - f_off < 4096, "allocated at %llu, F at %llu, G at %llu",
		      (unsigned long long)off, (unsigned long long)f_off, (unsigned long long)g_off);
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
	ck_assert(alive(e[0], gen[0]));
	for (int i = 2; i < 5; i++)
		ck_assert(!alive(e[i], gen[i]));
	/* what it relies on: an allocation anywhere (what one at E2 would fall back to) lands in G */
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	ck_assert_int_eq(shm_heap_alloc(h.f.a->shm, h.len, tag, &off), 0);
	ck_assert_msg(off >= g_off && off - g_off < 4096, "an allocation anywhere landed at %llu, G at %llu",
		      (unsigned long long)off, (unsigned long long)g_off);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, p), 0);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, g), 0);
	assert_lists_consistent(h.f.a);
	fx_close(&h.f);
}
END_TEST

/* Three entries after E3 and five more removed, and their room (a hole of three blocks) taken by a
 * private block that fills it: its offset (also *@hole). */
static uint64_t private_block_in_a_hole(struct full_heap *h, uint64_t *hole)
{
	struct shm_index_entry *e = h->e[3], *run[9];
	for (int i = 0; i < 9; i++) {
		run[i] = e = entry_after(&h->f, e);
		ck_assert_ptr_nonnull(e);
	}
	uint64_t end = run[8]->payload_off, b;
	*hole = run[5]->payload_off;
	for (int i = 5; i < 8; i++)
		ck_assert_int_eq(sc_l2_remove(h->f.st, (struct sc_key){ run[i]->key_lo, run[i]->key_hi }), 0);
	l2_reclaim_all(h->f.a, -1);
	ck_assert_int_eq(shm_heap_alloc(h->f.a->shm, (end - *hole - SHM_HEAP_BLOCK_HDR) | SHM_HEAP_PACKED,
					shm_tag_priv(h->f.a->shm->token), &b), 0);
	ck_assert_uint_eq(b, *hole);
	ck_assert_uint_lt(stats(&h->f).largest_free_block, h->len);
	return b;
}

/* A block whose tag names the entry one past the last (scribbled) is pinned, whatever the bytes
 * there (the next region's: made to look like a LIVE unhit small entry of that block, cheaper to
 * lose than E0 .. E2): the search evicts E0 .. E2, and the block is left alone. */
START_TEST(a_block_tagged_one_past_the_last_entry_is_pinned)
{
	struct full_heap h;
	full_heap_open(&h);
	uint64_t hole, b = private_block_in_a_hole(&h, &hole);
	struct shm_index *ix = l2_ix(h.f.a);
	struct shm_evq *q = l2_q(h.f.a);
	struct shm_index_entry *past = ix->ent + ix->nentries, saved = *past;
	struct shm_evq_ghost ghost = q->ghost[0];
	ck_assert_ptr_eq((void *)q->ghost, (void *)&q->node[q->nodes]);
	ck_assert_uint_le((uint64_t)((uint8_t *)(past + 1) - h.f.a->shm->base), h.f.a->shm->size);
	atomic_store(&past->state, SHM_ENT_LIVE);
	atomic_store(&past->freq, 0);
	past->payload_off = b;
	q->ghost[0].clock = SHM_EVQ_SMALL; /* node[nodes].q, and .credit 0 */
	ck_assert_int_eq(shm_heap_set_tag(h.f.a->shm, b, shm_tag_entry(ix->nentries, past->gen)), 0);
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	*past = saved;
	q->ghost[0] = ghost;
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert(off >= h.off0 && off - h.off0 < 4096);
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
	ck_assert_int_eq(shm_heap_set_tag(h.f.a->shm, b, shm_tag_priv(h.f.a->shm->token)), 0);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, b), 0);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	fx_close(&h.f);
}
END_TEST

/* When the window's room is not there to allocate in (E0 changed after the search chose it), the
 * search takes room that came free elsewhere meanwhile (a block of three entries' room, freed as
 * the search first tries to allocate); when the window's room is there, it takes the window's
 * and leaves the other. Case @_i: 0 the window's room, 1 lost. */
START_TEST(a_search_by_address_allocates_in_its_window_else_wherever_room_came_free)
{
	struct full_heap h;
	full_heap_open(&h);
	uint64_t hole, b = private_block_in_a_hole(&h, &hole);
	struct sc_l2_stats s0 = stats(&h.f);
	meddle = (__typeof__(meddle)){ .e = h.e[0], .what = _i, .shm = h.f.a->shm, .free_at_alloc = b };
	sc_sched_set(meddle_with_the_window, NULL);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	meddle_undo();
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert_uint_eq(meddle.free_at_alloc, 0); /* it was freed */
	if (_i == 0) {
		ck_assert(off >= h.off0 && off - h.off0 < 4096);
		ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
		ck_assert_int_eq(shm_heap_alloc(h.f.a->shm, h.len, shm_tag_priv(h.f.a->shm->token), &b), 0);
		ck_assert(b >= hole && b - hole < 4096); /* the other room is still free */
		ck_assert_int_eq(shm_heap_free(h.f.a->shm, b), 0);
	} else {
		ck_assert(off >= hole && off - hole < 4096);
		ck_assert(alive(h.e[0], h.gen[0]));
		ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 2);
	}
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	fx_close(&h.f);
}
END_TEST

/* Taken by a live holder when the search first tries to allocate (after it let its shards go):
 * shard @late_shard, by @late (0: not yet). */
static struct {
	const char *name;
	struct shm_mutex *mu;
	pid_t pid;
} late;

static void hold_a_shard_late(const char *point, void *ctx)
{
	meddle_with_the_window(point, ctx);
	if (!strcmp(point, "l2.frag.alloc") && !late.pid)
		late.pid = sc_test_locker(late.name, late.mu, 'h', 0);
}

/* A search that lost its room (E0 changed after it chose) and had a shard in its way (held by a
 * live process that lets go when a waiter shows up) waits for that shard once, leaves it unlocked
 * and lets the caller try again (-EAGAIN); a shard taken by another after the search let its
 * shards go is not waited for: its holder still has it. */
START_TEST(a_search_by_address_that_lost_its_room_waits_only_for_the_shards_in_its_way)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index *ix = l2_ix(h.f.a);
	uint32_t used = 0, s, t;
	for (int i = 0; i < 4; i++)
		used |= 1u << (shm_index_idx(ix, h.e[i]) % SHM_INDEX_SHARDS);
	for (s = 0; used & (1u << s); s++)
		;
	for (t = s + 1; used & (1u << t); t++)
		;
	ck_assert_uint_lt(t, SHM_INDEX_SHARDS);
	pid_t holder = sc_test_locker(h.f.name, &ix->hdr->shards[s].mu, 'h', 0);
	late.name = h.f.name, late.mu = &ix->hdr->shards[t].mu, late.pid = 0;
	meddle = (__typeof__(meddle)){ .e = h.e[0], .what = 1 };
	sc_sched_set(hold_a_shard_late, NULL);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	meddle_undo();
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_int_gt(late.pid, 0);
	ck_assert_uint_ne(shm_mutex_owner(late.mu), 0); /* not waited for: still held */
	kill(late.pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(late.pid, &status, 0), late.pid);
	ck_assert_int_eq(waitpid(holder, &status, 0), holder);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* it saw a waiter and let go */
	ck_assert_uint_eq(shm_mutex_owner(&ix->hdr->shards[s].mu), 0);
	ck_assert(alive(h.e[0], h.gen[0]));
	fx_close(&h.f);
}
END_TEST

/* The same for the search by address that lost its room: it lets the caller try again (-EAGAIN),
 * and the caller still holds its shard. */
START_TEST(a_search_by_address_leaves_a_shard_the_caller_holds_held)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index *ix = l2_ix(h.f.a);
	uint32_t used = 0, s;
	for (int i = 0; i < 4; i++)
		used |= 1u << (shm_index_idx(ix, h.e[i]) % SHM_INDEX_SHARDS);
	for (s = 0; used & (1u << s); s++)
		;
	ck_assert_uint_lt(s, SHM_INDEX_SHARDS);
	ck_assert_int_eq(shm_index_lock(ix, s), 0);
	meddle = (__typeof__(meddle)){ .e = h.e[0], .what = 1 };
	sc_sched_set(meddle_with_the_window, NULL);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	meddle_undo();
	uint32_t owner = shm_mutex_owner(&ix->hdr->shards[s].mu);
	if (owner)
		shm_index_unlock(ix, s);
	ck_assert_uint_ne(owner, 0);
	ck_assert_int_eq(rc, -EAGAIN);
	fx_close(&h.f);
}
END_TEST

/* One entry that alone holds the request, right after a leased one: the window is that entry
 * alone (one eviction, cheaper than three), and the room is made in its block. */
START_TEST(a_search_by_address_takes_one_entry_that_alone_holds_the_request)
{
	struct full_heap h;
	full_heap_open(&h);
	struct shm_index_entry *e = h.e[3], *run[9];
	for (int i = 0; i < 9; i++) {
		run[i] = e = entry_after(&h.f, e);
		ck_assert_ptr_nonnull(e);
	}
	/* run[5 .. 7] removed, and one entry of their room put there, run[4] before it leased */
	uint64_t hole = run[5]->payload_off, end = run[8]->payload_off;
	for (int i = 5; i < 8; i++)
		ck_assert_int_eq(sc_l2_remove(h.f.st, (struct sc_key){ run[i]->key_lo, run[i]->key_hi }), 0);
	l2_reclaim_all(h.f.a, -1);
	ck_assert_int_eq(put(h.f.st, 500000, h.len + 8192), 0); /* alone it holds the request, page aligned */
	struct shm_index_entry *big = entry_of(&h.f, 500000);
	ck_assert_ptr_nonnull(big);
	ck_assert(big->payload_off >= hole && big->payload_off < end);
	ck_assert_ptr_eq(entry_after(&h.f, run[4]), big);
	uint32_t gbig = big->gen, k4 = UINT32_MAX;
	for (uint32_t k = 0; k < 100000 && k4 == UINT32_MAX; k++)
		if (entry_of(&h.f, k) == run[4])
			k4 = k;
	struct sc_lease l;
	ck_assert_int_eq(get(h.f.st, k4, &l), 0);
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert(!alive(big, gbig));
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 1);
	ck_assert(off >= hole && off < end);
	ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	sc_lease_release(&l);
	fx_close(&h.f);
}
END_TEST

/* ---- the search by address out of memory ---- */

/* This binary's realloc (the library is linked statically, as in tests/check_oom.c): when armed,
 * the @fail_at-th call from arming fails; every call is counted. */
extern void *__libc_realloc(void *, size_t);
static struct {
	int armed;
	unsigned calls, fail_at;
} re;

void *realloc(void *p, size_t n)
{
	if (re.armed && ++re.calls == re.fail_at)
		return NULL;
	return __libc_realloc(p, n);
}

/* The search grows two arrays: its window (first at its first block) and the cheapest window kept
 * (first when one holds the request, again only when a longer one is kept). A full heap, E0 hit
 * twice: the window E0 .. E2 is kept, then E1 .. E3 (as long, cheaper): two reallocations. When
 * either fails, the search refuses as other and evicts nothing; a third would have failed, but
 * none is made. Case @_i: the reallocation that fails (1, 2, 3). */
START_TEST(a_search_by_address_out_of_memory_refuses_as_other)
{
	struct full_heap h;
	full_heap_open(&h);
	atomic_store(&h.e[0]->freq, 2);
	struct sc_l2_stats s0 = stats(&h.f);
	uint64_t off;
	int why;
	re.calls = 0, re.fail_at = (unsigned)_i + 1, re.armed = 1;
	int rc = contig(&h, NULL, &off, &why);
	re.armed = 0;
	if (_i < 2) {
		ck_assert_uint_eq(re.calls, (unsigned)_i + 1); /* it stopped at the failure */
		ck_assert_int_eq(rc, -ENOSPC);
		ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_OTHER));
		ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions);
		for (int i = 0; i < 4; i++)
			ck_assert(alive(h.e[i], h.gen[i]));
	} else {
		ck_assert_uint_eq(re.calls, 2);
		ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
		ck_assert(alive(h.e[0], h.gen[0]) && !alive(h.e[3], h.gen[3]));
		ck_assert_int_eq(shm_heap_free(h.f.a->shm, off), 0);
	}
	fx_close(&h.f);
}
END_TEST

/* ---- every refusal reason ---- */

/* put() while the heap's header is scribbled (every heap call refuses), the header put back
 * before returning what put() returned. */
static int put_into_scribbled_heap(struct fx *f, uint32_t k, size_t n)
{
	uint8_t *hh = f->a->shm->base + f->a->shm->hv.regions[SHM_REGION_HEAP].off, saved[64];
	memcpy(saved, hh, sizeof(saved));
	memset(hh, 0xff, sizeof(saved));
	int rc = put(f->st, k, n);
	memcpy(hh, saved, sizeof(saved));
	return rc;
}

/* Run @fn; exactly one refusal must be counted, under @reason, with return code @want. */
#define EXPECT_REFUSAL(f, reason, want, call)                                                              \
	do {                                                                                                 \
		struct sc_l2_stats b_ = stats(f);                                                            \
		int rc_ = (call);                                                                            \
		struct sc_l2_stats a_ = stats(f);                                                            \
		ck_assert_msg(rc_ == (want), "%s: %s", #reason, sc_strerror(rc_));                          \
		ck_assert_uint_eq(a_.admission_rejects, b_.admission_rejects + 1);                           \
		for (int r_ = 0; r_ < SC_L2_REFUSE_COUNT; r_++)                                              \
			ck_assert_msg(a_.refused[r_] == b_.refused[r_] + (r_ == (reason)), "%s: reason %s counted %llu", \
				      #reason, sc_l2_refusal_name(r_),                                       \
				      (unsigned long long)(a_.refused[r_] - b_.refused[r_]));                \
	} while (0)

/* The blocks a hook took from the heap each time an eviction was chosen (the room an admission
 * makes, taken by "another writer" before it can use it), and how many. It takes the heap's lock
 * under the evicting writer's shard and policy locks, the order a writer's reclaim takes them in. */
static struct {
	struct sc_arena *a, *reader;
	uint64_t len, off[32];
	int n, tries;
} thief;

static void take_the_room(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "l2.evict.chosen") && thief.n < 32 &&
	    shm_heap_alloc(thief.a->shm, thief.len, shm_tag_priv(thief.a->shm->token), &thief.off[thief.n]) == 0)
		thief.n++;
}

/* An admission whose room is taken as soon as it is made gives up after 12 rounds (docs/DESIGN.md),
 * refused as scan_limit: 12 entries evicted for it, not one more. */
START_TEST(an_admission_whose_room_is_always_taken_gives_up_after_12_rounds)
{
	struct fx f;
	const size_t n = 16 << 10;
	uint64_t fp = fx_open_full(&f, n, 40);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, 0); /* no round spent waiting for readers */
	thief.a = f.a, thief.n = 0;
	thief.len = l2_alloc_len_tok(n, 0, 4) | SHM_HEAP_PACKED; /* an entry's block: fp bytes */
	ck_assert_uint_eq(shm_heap_footprint(thief.len), fp);
	sc_sched_set(take_the_room, NULL);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_SCAN_LIMIT, -ENOSPC, put(f.st, 100, n));
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(thief.n, 12);
	ck_assert_uint_eq(stats(&f).evictions, s0.evictions + 12);
	for (int i = 0; i < thief.n; i++)
		ck_assert_int_eq(shm_heap_free(f.a->shm, thief.off[i]), 0);
	ck_assert_int_eq(put(f.st, 100, n), 0); /* the room back: admitted */
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* The window's room, evicted and left by every reader, is free after a reclaim; then @reader's
 * handle and the heap are closed. */
static void room_is_free_then_close(struct full_heap *h, struct sc_arena *reader)
{
	l2_reclaim_all(h->f.a, -1);
	ck_assert_uint_ge(stats(&h->f).largest_free_block, h->len);
	sc_arena_close(reader);
	assert_lists_consistent(h->f.a);
	fx_close(&h->f);
}

/* At "l2.frag.alloc": the reader thief.reader leaves its read section (the first time), and
 * "another writer" takes an entry's block from the heap when it can (once). */
static void take_the_window_once(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l2.frag.alloc"))
		return;
	thief.tries++;
	if (thief.reader) {
		shm_epoch_exit(thief.reader->shm);
		thief.reader = NULL;
	}
	if (thief.n == 0 &&
	    shm_heap_alloc(thief.a->shm, thief.len, shm_tag_priv(thief.a->shm->token), &thief.off[0]) == 0)
		thief.n++;
}

/* The search by address reclaims its window before each try to allocate in it. Here a reader
 * inside a read section since before the evictions defers their reclaim until it leaves, at the
 * first try: that try's reclaim came before it and frees nothing, so the try fails; the next
 * reclaim frees the window, and another writer that allocates right then takes it. The search
 * returns -EAGAIN for its caller to try again (the full heap has no other room), and evicts
 * nothing more. (On a machine slow enough to pass the search's 2 ms deadline before the second
 * try, it returns -EAGAIN at the first, and the room stays free.) */
START_TEST(a_search_by_address_whose_window_is_taken_after_its_reclaim_returns_eagain)
{
	struct full_heap h;
	full_heap_open(&h);
	struct sc_l2_stats s0 = stats(&h.f);
	ck_assert_uint_lt(s0.largest_free_block, h.len);
	struct sc_arena *r;
	ck_assert_int_eq(sc_arena_open(h.f.name, &r), 0);
	shm_epoch_enter(r->shm);
	thief.a = h.f.a, thief.n = 0, thief.tries = 0, thief.len = h.len, thief.reader = r;
	sc_sched_set(take_the_window_once, NULL);
	uint64_t off, t0 = shm_now_ns();
	int why;
	int rc = contig(&h, NULL, &off, &why);
	uint64_t took = shm_now_ns() - t0;
	sc_sched_set(NULL, NULL);
	ck_assert_ptr_null(thief.reader); /* it left at the first try */
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
	/* a second try reclaimed the window and lost it; one try only when its deadline (2 ms,
	 * L2_RECLAIM_WAIT_NS) had passed by then */
	if (thief.tries >= 2)
		ck_assert_int_eq(thief.n, 1);
	else
		ck_assert_uint_ge(took, 2000000);
	if (thief.n) {
		ck_assert(thief.off[0] >= h.off0 && thief.off[0] - h.off0 < 4096); /* E0 .. E2's room */
		ck_assert_int_eq(shm_heap_free(h.f.a->shm, thief.off[0]), 0);
	}
	room_is_free_then_close(&h, r);
}
END_TEST

/* A search whose closing reclaim ("l2.reclaim.epochs_read" after "l2.frag.window") is held back
 * past the search's 2 ms deadline (L2_RECLAIM_WAIT_NS), and how often it then tried to allocate. */
static struct {
	int window, held_back, tries;
} slow_close;

static void hold_back_the_closing_reclaim(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "l2.frag.window"))
		slow_close.window = 1;
	else if (!strcmp(point, "l2.frag.alloc"))
		slow_close.tries++;
	else if (slow_close.window && !slow_close.held_back && !slow_close.tries &&
		 !strcmp(point, "l2.reclaim.epochs_read")) {
		slow_close.held_back = 1;
		/* wait for the search's deadline to pass, and a millisecond more */
		for (uint64_t until = shm_now_ns() + 3000000; shm_now_ns() < until;)
			sched_yield();
	}
}

/* The search's deadline for its room counts from the evictions, before the reclaim that releases
 * its shards: when that reclaim alone outlasts it, the search tries to allocate once and returns
 * -EAGAIN (a reader inside its read section since before the evictions keeps the room from coming
 * free). Counted from after that reclaim, it would try again for 2 ms more. */
START_TEST(a_search_by_address_whose_closing_reclaim_outlasts_its_deadline_tries_once)
{
	struct full_heap h;
	full_heap_open(&h);
	struct sc_l2_stats s0 = stats(&h.f);
	struct sc_arena *r;
	ck_assert_int_eq(sc_arena_open(h.f.name, &r), 0);
	shm_epoch_enter(r->shm);
	slow_close.window = slow_close.held_back = slow_close.tries = 0;
	sc_sched_set(hold_back_the_closing_reclaim, NULL);
	uint64_t off;
	int why;
	int rc = contig(&h, NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	ck_assert(slow_close.held_back);
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_int_eq(slow_close.tries, 1);
	ck_assert_uint_eq(stats(&h.f).evictions, s0.evictions + 3);
	shm_epoch_exit(r->shm); /* the room comes free at the next reclaim */
	room_is_free_then_close(&h, r);
}
END_TEST

/* At "l2.frag.done" (a search ending): who holds the search lock and how many shards it holds. */
static struct {
	struct sc_arena *a;
	int seen;
	uint32_t lock_owner, shards_held;
} ending;

static void look_at_the_locks_as_the_search_ends(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l2.frag.done"))
		return;
	struct shm_index *ix = l2_ix(ending.a);
	ending.seen++;
	ending.lock_owner = shm_mutex_owner(&l2_q(ending.a)->hdr->search_mu);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		ending.shards_held += shm_mutex_owner(&ix->hdr->shards[s].mu) != 0;
}

/* A search that finds no room (a request larger than the heap) has taken every shard; it lets them
 * all go while it still holds its search lock, so that the next search, which takes that lock,
 * finds them free (it would count them busy and wait for them). */
START_TEST(a_search_by_address_lets_its_shards_go_before_its_lock)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 1, 4096), 0);
	ending = (__typeof__(ending)){ .a = f.a };
	sc_sched_set(look_at_the_locks_as_the_search_ends, NULL);
	uint64_t len = f.a->shm->hv.regions[SHM_REGION_HEAP].size + 4096, off;
	int why;
	int rc = l2_make_contig(f.a, len, shm_tag_priv(f.a->shm->token), NULL, &off, &why);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_eq(why, SC_L2_REFUSE_NO_ROOM);
	ck_assert_int_eq(ending.seen, 1);
	ck_assert_uint_eq(ending.lock_owner, f.a->shm->token);
	ck_assert_uint_eq(ending.shards_held, 0);
	ck_assert_uint_eq(shm_mutex_owner(&l2_q(f.a)->hdr->search_mu), 0);
	fx_close(&f);
}
END_TEST

START_TEST(every_refusal_reason_is_produced_and_counted)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 64 << 10;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	uint8_t *b = malloc(2 << 20);
	fill(b, 2 << 20, 1);
	int32_t t[4];
	toks(t, 1);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	/* digest */
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_DIGEST, -EBADMSG,
		       sc_l2_admit(f.st, "pol", t, 4, (struct sc_digest){ 1, 2 }, &p, SC_ORIGIN_DIRECT));
	/* invalid: an unknown kind */
	struct sc_payload bad = p;
	bad.kind = 77;
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_INVALID, -EINVAL,
		       sc_l2_admit(f.st, "pol", t, 4, sc_digest(b, n), &bad, SC_ORIGIN_DIRECT));
	/* too large for the arena's heap (a reservation is an admission's first half) */
	struct sc_l2_resv r;
	uint64_t heap = f.a->shm->hv.regions[SHM_REGION_HEAP].size;
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_TOO_LARGE, -E2BIG, sc_l2_reserve(f.st, heap + 1, &r));
	/* over the budget */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 1 << 20), 0);
	struct sc_payload two = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { 2 << 20 } };
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_OVER_BUDGET, -E2BIG,
		       sc_l2_admit(f.st, "pol", t, 4, sc_digest(b, 2 << 20), &two, SC_ORIGIN_DIRECT));
	/* leased: everything that could make room is leased */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 4 * fp), 0);
	struct sc_lease l[48];
	for (uint32_t k = 10; k < 14; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	for (uint32_t k = 10; k < 14; k++)
		ck_assert_int_eq(get(f.st, k, &l[k - 10]), 0);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_LEASED, -ENOSPC, put(f.st, 20, n));
	/* the one entry not leased cannot make room for twice its size: refused before anything is
	 * evicted (the leased bytes are counted from the right entries) */
	sc_lease_release(&l[3]);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_LEASED, -ENOSPC, put(f.st, 20, 2 * n));
	ck_assert(has(f.st, 13));
	ck_assert_int_eq(get(f.st, 13, &l[3]), 0);
	for (int i = 0; i < 4; i++)
		sc_lease_release(&l[i]);
	/* scan limit: every entry was hit, so the first step only moves one; one step allowed */
	for (uint32_t k = 10; k < 14; k++)
		hit(f.st, k, 3);
	sc_l2_set_policy_limits(1, 0);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_SCAN_LIMIT, -ENOSPC, put(f.st, 21, n));
	sc_l2_set_policy_limits(0, 0);
	ck_assert_int_eq(put(f.st, 21, n), 0); /* the bound lifted (and the steps made kept) */
	/* other: a publish that wants a lease while the handle already holds SC_LEASES_MAX */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 0), 0);
	for (uint32_t k = 100; k < 100 + SC_LEASES_MAX; k++) {
		ck_assert_int_eq(put(f.st, k, 4096), 0);
		ck_assert_int_eq(get(f.st, k, &l[k - 100]), 0);
	}
	ck_assert_int_eq(sc_l2_reserve(f.st, n, &r), 0);
	fill(r.ptr, n, 5);
	struct sc_lease want;
	toks(t, 5);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_OTHER, -EMFILE,
		       sc_l2_publish(f.st, "pol", t, 4, digest_of(5, n), &r, SC_PAYLOAD_FULL_STATE, n, 0, NULL,
				     SC_ORIGIN_FROM_L3, &want));
	sc_l2_reserve_release(&r);
	for (int i = 0; i < SC_LEASES_MAX; i++)
		sc_lease_release(&l[i]);
	/* other: the heap refuses the allocation as damaged (not as too large for it) */
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_OTHER, -EBADMSG, put_into_scribbled_heap(&f, 30, 4096));
	ck_assert_int_eq(put(f.st, 30, 4096), 0); /* the header back: the same admission is made */
	/* (no_room: leases_that_split_the_heap_refuse_with_no_room) */
	struct sc_l2_stats s = stats(&f);
	uint64_t sum = 0;
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		sum += s.refused[i];
	ck_assert_uint_eq(sum + s.refused_low_benefit, s.admission_rejects);
	for (int i = 0; i < SC_L2_REFUSE_REASONS; i++)
		ck_assert_str_ne(sc_l2_refusal_name(i), "?");
	ck_assert_str_eq(sc_l2_refusal_name(SC_L2_REFUSE_REASONS), "?");
	ck_assert_str_eq(sc_l2_refusal_name(-1), "?");
	/* per stage too */
	struct sc_l2_stats ss;
	ck_assert_int_eq(sc_l2_stats(f.a, f.st, &ss), 0);
	ck_assert_uint_eq(ss.refused[SC_L2_REFUSE_LEASED], 2);
	ck_assert_uint_eq(ss.refused[SC_L2_REFUSE_DIGEST], 1);
	free(b);
	fx_close(&f);
}
END_TEST

/* S3-FIFO's evict() takes from the main FIFO only when it holds more than its share of the budget
 * (all but the small FIFO's 10 %): with main at exactly its share, the small FIFO's oldest entry
 * goes, and main's oldest (unhit) stays. */
START_TEST(main_at_exactly_its_share_leaves_the_eviction_to_the_small_fifo)
{
	struct fx f;
	const size_t n = 64 << 10, tiny = 4096;
	uint64_t fp = fx_open_full(&f, n, 10);
	ck_assert_int_eq(queue_of(&f, 0), SHM_EVQ_SMALL);
	for (uint32_t k = 1; k < 10; k++)
		ck_assert_int_eq(queue_of(&f, k), SHM_EVQ_MAIN);
	/* the small FIFO: one tiny entry instead of key 0 */
	ck_assert_int_eq(del(&f, 0), 0);
	ck_assert_int_eq(put(f.st, 100, tiny), 0);
	ck_assert_int_eq(queue_of(&f, 100), SHM_EVQ_SMALL);
	/* a budget whose main share (budget - budget / 100 * 10) is exactly what main holds */
	uint64_t main = stats(&f).main_bytes, budget = main / 90 * 100 + main % 90;
	uint64_t small_cap = budget / 100 * 10, fptiny = sc_l2_footprint(f.a, tiny, 0, 4);
	ck_assert_uint_eq(main, 9 * fp);
	ck_assert_uint_eq(budget - small_cap, main);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, budget), 0);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.budget_bytes, budget);
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_uint_eq(sc_test_heap_used(f.a), main + fptiny);
	/* an entry that fits the small share, but not beside the tiny one: one eviction's room */
	size_t x = small_cap;
	while (sc_l2_footprint(f.a, x, 0, 4) > small_cap)
		x -= 64;
	uint64_t fpx = sc_l2_footprint(f.a, x, 0, 4);
	ck_assert_uint_gt(main + fptiny + fpx, budget);
	ck_assert_uint_le(main + fpx, budget);
	ck_assert_int_eq(put(f.st, 101, x), 0);
	ck_assert_uint_eq(stats(&f).evictions, 1);
	ck_assert(!has(f.st, 100));
	for (uint32_t k = 1; k < 10; k++)
		ck_assert_msg(has(f.st, k), "key %u was evicted from main at exactly its share", k);
	ck_assert(has(f.st, 101));
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* fx_open_full with ten 64 KiB entries, each costing one ns per byte of its footprint (key 0 in
 * the small FIFO, 1..9 in main), then key 10, costing @mult ns per byte: it evicts key 0, so that
 * the density of what the cache evicts (D) is exactly one ns per byte, and key 10 is the small
 * FIFO's only entry. Returns the footprint. */
static uint64_t fx_open_weighed(struct fx *f, uint64_t mult)
{
	const size_t n = 64 << 10;
	uint64_t fp = fx_open_full_cost(f, n, 10, 1);
	ck_assert_int_eq(put_cost(f->st, 10, n, mult * fp), 0);
	ck_assert(!has(f->st, 0));
	ck_assert_uint_eq(l2_q(f->a)->hdr->evict_dens, 1ull << SHM_EVQ_DENS_SHIFT);
	ck_assert_int_eq(queue_of(f, 10), SHM_EVQ_SMALL);
	ck_assert_uint_eq(stats(f).small_entries, 1);
	return fp;
}

/* Probation (docs/DESIGN.md, "The benefit policy"): the small FIFO's oldest entry moves to main
 * after two hits, after one when it is worth twice what the cache evicts (r >= 2), and unhit when
 * it is worth four times as much (r >= 4); else it is evicted. Exactly at each bound, with moves
 * earned by benefit (not by two hits) counted as such. When key 10 moves, main's oldest goes. */
static const struct probation_case {
	uint32_t mult;
	int hits, moves, by_benefit;
} probation[] = {
	{ 1, 1, 0, 0 }, /* one hit, worth what is evicted: evicted (plain S3-FIFO) */
	{ 1, 2, 1, 0 }, /* two hits: moves (plain S3-FIFO, not a benefit move) */
	{ 2, 0, 0, 0 }, /* twice the worth, unhit: evicted */
	{ 2, 1, 1, 1 }, /* twice the worth and one hit: moves */
	{ 4, 0, 1, 1 }, /* four times the worth: moves unhit */
};

START_TEST(probation_moves_at_exactly_two_hits_one_hit_at_twice_the_worth_none_at_four_times)
{
	for (size_t i = 0; i < sizeof(probation) / sizeof(probation[0]); i++) {
		const struct probation_case *c = &probation[i];
		struct fx f;
		uint64_t fp = fx_open_weighed(&f, c->mult);
		hit(f.st, 10, c->hits);
		struct shm_evq_hdr *h = l2_q(f.a)->hdr;
		uint64_t benefit0 = h->benefit_moves, moved0 = stats(&f).moved_to_main;
		ck_assert_int_eq(put_cost(f.st, 11, 64 << 10, fp), 0);
		ck_assert_msg(queue_of(&f, 10) == (c->moves ? SHM_EVQ_MAIN : -1), "r = %u, %d hits: key 10 on %d", c->mult,
			      c->hits, queue_of(&f, 10));
		ck_assert_msg(has(f.st, 1) == !c->moves, "r = %u, %d hits: main's oldest", c->mult, c->hits);
		ck_assert_uint_eq(stats(&f).moved_to_main, moved0 + (uint64_t)c->moves);
		ck_assert_msg(h->benefit_moves == benefit0 + (uint64_t)c->by_benefit, "r = %u, %d hits: %llu benefit moves",
			      c->mult, c->hits, (unsigned long long)(h->benefit_moves - benefit0));
		assert_lists_consistent(f.a);
		fx_close(&f);
	}
}
END_TEST

/* fx_open_weighed with key 10 worth 64 times what is evicted, then a full main FIFO of two
 * entries and an empty small one: key 10 (main's oldest, moved unhit with the most credit), then
 * key 0 back from the ghost (no credit: worth what is evicted); the budget is those two. The
 * footprint of one entry. */
static uint64_t main_of_two(struct fx *f)
{
	const size_t n = 64 << 10;
	uint64_t fp = fx_open_weighed(f, SHM_EVQ_CREDIT_MAX + 1);
	ck_assert_int_eq(put_cost(f->st, 11, n, fp), 0); /* key 10 moves to main, key 1 goes */
	ck_assert_int_eq(queue_of(f, 10), SHM_EVQ_MAIN);
	ck_assert(!has(f->st, 1));
	ck_assert_uint_eq(node_of(f, 10)->credit, SHM_EVQ_CREDIT_GRANTED | SHM_EVQ_CREDIT_MAX);
	for (uint32_t k = 2; k < 12; k++)
		if (k != 10)
			ck_assert_int_eq(del(f, k), 0);
	ck_assert_int_eq(put_cost(f->st, 0, n, fp), 0);
	ck_assert_int_eq(queue_of(f, 0), SHM_EVQ_MAIN);
	ck_assert_uint_eq(SHM_EVQ_CREDIT(node_of(f, 0)->credit), 0);
	ck_assert_int_eq(sc_l2_shrink_to(f->a, 2 * fp), 0);
	struct sc_l2_stats s = stats(f);
	ck_assert_uint_eq(s.main_entries, 2);
	ck_assert_uint_eq(s.small_entries, 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	return fp;
}

/* An unhit entry at the main FIFO's tail goes back with one credit less while it has any, up to
 * the most an entry carries (SHM_EVQ_CREDIT_MAX, 63: r >= 64): key 10, worth 64 times what is
 * evicted, moves to main unhit with 63 credits; when it is main's oldest it stays (62 left) and
 * the entry behind it goes. */
START_TEST(an_unhit_entry_with_the_most_credit_stays_a_pass)
{
	struct fx f;
	const size_t n = 64 << 10;
	uint64_t fp = main_of_two(&f);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_int_eq(put_cost(f.st, 12, n, fp), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert(has(f.st, 10));
	ck_assert(!has(f.st, 0));
	ck_assert_uint_eq(s.evictions, s0.evictions + 1);
	ck_assert_uint_eq(s.credit_kept, s0.credit_kept + 1);
	ck_assert_uint_eq(node_of(&f, 10)->credit, SHM_EVQ_CREDIT_GRANTED | (SHM_EVQ_CREDIT_MAX - 1));
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* A child process puts key @k (@n bytes, cost @cost) with fault point @fault armed, or schedule
 * hook @hook set, and must die of SIGKILL inside the admission. */
static void put_dies_in_a_child(struct fx *f, const char *fault, sc_sched_fn hook, uint32_t k, size_t n,
				uint64_t cost)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *ca;
		struct sc_stage *cs;
		if (sc_arena_open(f->name, &ca) || sc_stage_open(ca, "model", "state", &cs) || (fault && sc_fault_arm(fault)))
			_exit(90);
		sc_sched_set(hook, NULL);
		(void)put_cost(cs, k, n, cost);
		_exit(92);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
}

/* A writer killed while it puts key 10 back on main (at evq.push.linking: the node's record names
 * main, its links are not made yet) has given it its new credit already, at each of the three
 * moves that set one: case 0 moves it from the small FIFO (worth 64 times what is evicted: the
 * most credit, from none); case 1 puts main's oldest back after a hit (its credit renewed: the
 * most again, from 1); case 2 weighs main's oldest for the first time (never granted a credit:
 * the most less the pass it now takes). */
START_TEST(a_writer_killed_putting_an_entry_on_main_has_given_it_its_credit)
{
	struct fx f;
	const size_t n = 64 << 10;
	uint64_t fp;
	uint32_t k = 12, want = SHM_EVQ_CREDIT_GRANTED | SHM_EVQ_CREDIT_MAX;
	if (_i == 0) {
		fp = fx_open_weighed(&f, SHM_EVQ_CREDIT_MAX + 1);
		ck_assert_uint_eq(SHM_EVQ_CREDIT(node_of(&f, 10)->credit), 0);
		k = 11;
	} else {
		fp = main_of_two(&f);
		struct shm_evq *q = l2_q(f.a);
		ck_assert_int_eq(shm_evq_lock(q), 0);
		node_of(&f, 10)->credit = _i == 1 ? SHM_EVQ_CREDIT_GRANTED | 1 : 0;
		shm_evq_unlock(q);
		if (_i == 1) {
			struct sc_lease l;
			ck_assert_int_eq(get(f.st, 10, &l), 0);
			sc_lease_release(&l);
			ck_assert_uint_eq(atomic_load(&entry_of(&f, 10)->freq), 1);
		} else {
			want = SHM_EVQ_CREDIT_GRANTED | (SHM_EVQ_CREDIT_MAX - 1);
		}
	}
	put_dies_in_a_child(&f, "evq.push.linking", NULL, k, n, fp); /* key 10 back on main: the first push */
	ck_assert_uint_eq(node_of(&f, 10)->q, SHM_EVQ_MAIN);
	ck_assert_uint_eq(node_of(&f, 10)->credit, want);
	ck_assert_int_eq(put_cost(f.st, k, n, fp), 0); /* the lists repaired under the next lock */
	ck_assert_int_eq(queue_of(&f, 10), SHM_EVQ_MAIN);
	lists_consistent(f.a, 1); /* a writer was killed */
	fx_close(&f);
}
END_TEST

static void die_at_the_departure_note(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "evq.depart.noting"))
		kill(getpid(), SIGKILL);
}

/* An eviction notes the key's departure before it moves the evicted density D toward the
 * evicted entry's: a writer killed while it notes the departure (at evq.depart.noting) leaves D
 * as it was. Key 10, worth twice D and unhit, is evicted for key 11. */
START_TEST(a_writer_killed_noting_a_departure_has_not_moved_the_evicted_density)
{
	struct fx f;
	const size_t n = 64 << 10;
	uint64_t fp = fx_open_weighed(&f, 2), d0 = l2_q(f.a)->hdr->evict_dens;
	put_dies_in_a_child(&f, NULL, die_at_the_departure_note, 11, n, fp);
	ck_assert(!has(f.st, 10)); /* it died inside key 10's eviction */
	ck_assert_uint_eq(l2_q(f.a)->hdr->evict_dens, d0);
	ck_assert_int_eq(put_cost(f.st, 11, n, fp), 0); /* the lists repaired under the next lock */
	lists_consistent(f.a, 1); /* a writer was killed */
	fx_close(&f);
}
END_TEST

static struct {
	struct sc_arena *a;
	uint64_t budget;
	int n;
} lower;

static void lower_the_budget(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "events.append.try") && !lower.n++)
		atomic_store(&l2_ix(lower.a)->hdr->budget_bytes, lower.budget);
}

/* An admission that replaces an entry judges whether its shard's retired entries are due for a
 * reclaim (a batch: 32 entries, or 1/256 of the budget, lib/l2/evict.c) after it has posted its
 * event, by the budget as it is then: lowered meanwhile (here by a hook while the event is
 * appended, as an administrator's sc_l2_shrink_to could from another process) so that key 1's
 * old entry is 1/256 of it, the old entry is reclaimed at once; judged by the budget before, it
 * would wait for the batch. */
START_TEST(an_admission_judges_its_reclaim_batch_by_the_budget_after_its_event)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 4096;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	ck_assert_int_eq(put(f.st, 1, n), 0);
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(f.a, &ev), 0);
	uint64_t raw = atomic_load(&l2_ix(f.a)->hdr->budget_bytes);
	ck_assert_uint_lt(fp, l2_budget(f.a) / 256); /* not due with the budget as it is */
	lower.a = f.a, lower.budget = 256 * fp, lower.n = 0;
	sc_sched_set(lower_the_budget, NULL);
	ck_assert_int_eq(put(f.st, 1, n), 0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_ge(lower.n, 1); /* the store's event (a weak CAS may try twice) */
	ck_assert_uint_eq(l2_budget(f.a), 256 * fp);
	ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, 0);
	atomic_store(&l2_ix(f.a)->hdr->budget_bytes, raw);
	sc_events_close(ev);
	fx_close(&f);
}
END_TEST

/* An entry found BUSY under its shard's lock (in flux: a writer's, which holds the lock while it
 * is; with the lock free, only a scribbled state or a repair still owed leaves one so) is passed
 * over, not dropped from its list: the small FIFO (this one entry) is walked round once and once
 * more, then main's oldest goes, and once the entry is LIVE again it is still queued (a drop would
 * leave a live entry that no eviction finds). */
START_TEST(an_entry_busy_under_its_shard_lock_is_passed_over_and_stays_on_its_list)
{
	struct fx f;
	const size_t n = 64 << 10;
	fx_open_full(&f, n, 10);
	ck_assert_int_eq(queue_of(&f, 0), SHM_EVQ_SMALL);
	ck_assert_uint_eq(stats(&f).small_entries, 1);
	struct shm_index_entry *e = entry_of(&f, 0);
	struct shm_evq_hdr *h = l2_q(f.a)->hdr;
	uint64_t skipped0 = h->skipped;
	atomic_store(&e->state, SHM_ENT_BUSY);
	int rc = put(f.st, 10, n);
	atomic_store(&e->state, SHM_ENT_LIVE);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(h->skipped, skipped0 + 2);
	ck_assert_int_eq(queue_of(&f, 0), SHM_EVQ_SMALL);
	ck_assert(!has(f.st, 1)); /* main's oldest went instead */
	ck_assert(has(f.st, 10));
	ck_assert_uint_eq(stats(&f).evictions, 1);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* An admission that replaces a key never evicts the entry it replaces, so those bytes cannot
 * make its room: when the other unleased entries cannot, it is refused as leased before anything
 * is evicted. Keys 0 and 1 leased, key 3 replaced by one twice its size: key 2 alone is not room. */
START_TEST(a_replacement_counts_the_entry_it_replaces_as_pinned)
{
	struct fx f;
	const size_t n = 64 << 10;
	uint64_t fp = fx_open_full(&f, n, 4), fp2 = sc_l2_footprint(f.a, 2 * n, 0, 4);
	struct sc_lease l[2];
	for (uint32_t k = 0; k < 2; k++)
		ck_assert_int_eq(get(f.st, k, &l[k]), 0);
	/* what it relies on: key 2 is less than the room, keys 2 and 3 would be enough */
	ck_assert_uint_gt(fp2, fp);
	ck_assert_uint_le(fp2, 2 * fp);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_LEASED, -ENOSPC, put(f.st, 3, 2 * n));
	ck_assert_uint_eq(stats(&f).evictions, 0);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_msg(has(f.st, k), "key %u was evicted", k);
	for (uint32_t k = 0; k < 2; k++)
		sc_lease_release(&l[k]);
	ck_assert_int_eq(put(f.st, 3, 2 * n), 0); /* the leases gone: admitted */
	ck_assert(has(f.st, 3));
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* A lease record naming the entry one past the last (a scribbled lease table) names no entry:
 * nothing past the index and the policy nodes is read as one, and it pins no bytes. Here what
 * lies past them (the ghost's first slots, the next region's first bytes) is made to look like a
 * queued node of a terabyte with the record's generation: the admission still evicts and is
 * admitted. */
START_TEST(a_lease_record_one_past_the_last_entry_pins_nothing)
{
	struct fx f;
	const size_t n = 64 << 10;
	fx_open_full(&f, n, 4);
	struct shm_index *ix = l2_ix(f.a);
	struct shm_evq *q = l2_q(f.a);
	ck_assert_uint_eq(q->nodes, ix->nentries);
	/* past the nodes: the ghost (node[nodes].q is ghost[0]'s clock, .bytes ghost[1]'s fingerprint) */
	ck_assert_ptr_eq((void *)q->ghost, (void *)&q->node[q->nodes]);
	struct shm_evq_ghost saved[2] = { q->ghost[0], q->ghost[1] };
	q->ghost[0].clock = SHM_EVQ_MAIN;
	q->ghost[1].fp = 1ull << 40;
	/* past the entries: the next region, whose bytes at the place of a generation we copy */
	const struct shm_region *ri = &f.a->shm->hv.regions[SHM_REGION_INDEX];
	uint64_t past = ri->off + shm_index_bytes(ix->nentries);
	ck_assert_ptr_eq((void *)(f.a->shm->base + past), (void *)(ix->ent + ix->nentries));
	ck_assert_uint_le(past + sizeof(struct shm_index_entry), f.a->shm->size);
	uint32_t gen;
	memcpy(&gen, f.a->shm->base + past + offsetof(struct shm_index_entry, gen), sizeof(gen));
	_Atomic uint64_t *rec = &l2_ext_of(shm_reader_slot(f.a->shm, (uint32_t)f.a->shm->reader_slot))->rec[SC_LEASES_MAX - 1];
	ck_assert_uint_eq(atomic_load(rec), 0);
	atomic_store(rec, (uint64_t)gen << 32 | (ix->nentries + 1u));
	int rc = put(f.st, 100, n);
	atomic_store(rec, 0);
	q->ghost[0] = saved[0];
	q->ghost[1] = saved[1];
	ck_assert_int_eq(rc, 0);
	ck_assert(has(f.st, 100));
	ck_assert_uint_eq(stats(&f).evictions, 1);
	fx_close(&f);
}
END_TEST

/* ---- leased entries under pressure from other processes, some killed -9 ---- */

/* @ops admissions of random sizes up to 1/8 of the budget (and some hits); with @die, a kill -9
 * of itself at a random one of them, holding whatever it holds there. */
static void pressure_proc(const char *name, uint32_t seed, int ops, int die)
{
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(name, &a) || sc_stage_open(a, "model", "state", &st))
		_exit(90);
	uint32_t x = seed * 2654435761u + 1;
	struct sc_l2_stats s;
	if (sc_l2_stats(a, NULL, &s))
		_exit(92);
	uint64_t budget = s.budget_bytes;
	int die_at = die ? (int)(seed * 7919u % (uint32_t)ops) : -1;
	for (int i = 0; i < ops; i++) {
		x = x * 1103515245u + 12345u;
		uint32_t k = 10000 + seed * 100000 + (x >> 8) % 5000;
		size_t n = 4096 + (size_t)((x >> 4) % (budget / 8 - 8192));
		if (i == die_at)
			sc_fault_arm("l2.admit.linked"); /* dies inside this admission, shard lock held */
		int rc = put(st, k, n);
		if (rc && rc != -ENOSPC)
			_exit(91);
		if ((x & 7) == 0) {
			struct sc_lease l;
			if (get(st, k, &l) == 0)
				sc_lease_release(&l);
		}
	}
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

/* A fixture whose index has 64 entries (4 per shard): returns the shard of key 0, *@per the
 * entries of each shard. */
static uint32_t fx_open_64_entries(struct fx *f, uint32_t *per)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .index_entries = 64 };
	f->a = sc_test_arena_opts("pol", &o, &f->name);
	ck_assert_int_eq(sc_stage_open(f->a, "model", "state", &f->st), 0);
	struct shm_index *ix = l2_ix(f->a);
	int32_t t[4];
	struct sc_key k;
	toks(t, 0);
	ck_assert_int_eq(sc_l2_key(f->st, "pol", t, 4, &k), 0);
	*per = ix->nentries / SHM_INDEX_SHARDS;
	return shm_index_shard_of_bucket(shm_index_bucket(ix, k.lo));
}

/* The index shard of key @k. */
static uint32_t shard_of(struct fx *f, uint32_t k)
{
	struct shm_index *ix = l2_ix(f->a);
	int32_t t[4];
	struct sc_key key;
	toks(t, k);
	ck_assert_int_eq(sc_l2_key(f->st, "pol", t, 4, &key), 0);
	return shm_index_shard_of_bucket(shm_index_bucket(ix, key.lo));
}

/* The first @want keys from @from up whose index shard is (@in) or is not (!@in) @shard. */
static void shard_keys(struct fx *f, uint32_t shard, int in, uint32_t from, uint32_t *keys, uint32_t want)
{
	uint32_t got = 0;
	for (uint32_t k = from; got < want && k < from + 100000; k++)
		if ((shard_of(f, k) == shard) == !!in)
			keys[got++] = k;
	ck_assert_uint_eq(got, want);
}

/* The index refuses a key whose shard has no entry left, all of them leased (64 entries: 4 per
 * shard): an admission and a publish (with or without a lease) both say why, leased; only a lease
 * slot that a publish wants and cannot have is "other". */
START_TEST(a_full_index_shard_refuses_as_leased)
{
	struct fx f;
	uint32_t per, shard = fx_open_64_entries(&f, &per);
	int32_t t[4];
	ck_assert_uint_ge(per, 1);
	ck_assert_uint_le(per, SC_LEASES_MAX);
	struct sc_lease l[SC_LEASES_MAX];
	uint32_t keys[SC_LEASES_MAX], held = 0;
	shard_keys(&f, shard, 1, 1, keys, per);
	for (; held < per; held++) {
		ck_assert_int_eq(put(f.st, keys[held], 4096), 0);
		ck_assert_int_eq(get(f.st, keys[held], &l[held]), 0);
	}
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_LEASED, -ENOSPC, put(f.st, 0, 4096));
	struct sc_l2_resv r;
	struct sc_lease want;
	toks(t, 0);
	for (int with_lease = 0; with_lease < 2; with_lease++) {
		ck_assert_int_eq(sc_l2_reserve(f.st, 4096, &r), 0);
		fill(r.ptr, 4096, 0);
		EXPECT_REFUSAL(&f, SC_L2_REFUSE_LEASED, -ENOSPC,
			       sc_l2_publish(f.st, "pol", t, 4, digest_of(0, 4096), &r, SC_PAYLOAD_FULL_STATE, 4096, 0, NULL,
					     SC_ORIGIN_FROM_L3, with_lease ? &want : NULL));
		sc_l2_reserve_release(&r);
	}
	/* one lease released: its entry makes room, and the key is admitted */
	sc_lease_release(&l[--held]);
	ck_assert_int_eq(put(f.st, 0, 4096), 0);
	ck_assert(has(f.st, 0));
	while (held)
		sc_lease_release(&l[--held]);
	fx_close(&f);
}
END_TEST

/* An admission over the budget only by bytes retired that no reader holds (a replaced entry whose
 * reclaim batch is not due) reclaims them and takes their room: it evicts nothing. */
START_TEST(an_admission_over_the_budget_by_unread_retired_bytes_reclaims_them_and_evicts_nothing)
{
	struct fx f;
	fx_open(&f);
	const size_t big = 256 << 10, small = 4096, smaller = 2048;
	uint64_t fpb = sc_l2_footprint(f.a, big, 0, 4), fps = sc_l2_footprint(f.a, small, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 8 * fpb + fps + sc_l2_footprint(f.a, smaller, 0, 4)), 0);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(put(f.st, k, big), 0);
	ck_assert_int_eq(put(f.st, 100, small), 0);
	ck_assert_int_eq(put(f.st, 100, smaller), 0); /* the first one retired */
	struct sc_l2_stats s0 = stats(&f);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	/* what it relies on: the budget is full, the replaced entry's bytes are among them, retired,
	 * and its batch is not due (lib/l2/evict.c: 1/256 of the budget) */
	ck_assert_uint_eq(hs.used_bytes, s0.budget_bytes);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, fps);
	ck_assert_uint_lt(fps, s0.budget_bytes >> 8);
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_int_eq(put(f.st, 101, small), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_msg(has(f.st, k), "key %u was evicted", k);
	ck_assert(has(f.st, 100) && has(f.st, 101));
	fx_close(&f);
}
END_TEST

/* The admission's wait for readers (lib/l2/place.c): a hook at each round of it ("l2.admit.waiting")
 * counts the rounds, and on the first one ends the read section @leave is in. */
static struct {
	struct sc_arena *leave;
	int rounds;
} waiting;

static void count_the_wait(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l2.admit.waiting"))
		return;
	if (!waiting.rounds++ && waiting.leave)
		shm_epoch_exit(waiting.leave->shm);
}

/* A budget of eight 256 KiB entries and 1 + @more 2 KiB ones, full but for the @more: keys 0..7
 * and then key 100 of 2 KiB, removed (retired) while a second handle @r1 is inside a read section,
 * so that only its leaving frees the bytes. Returns the footprint of a 2 KiB entry. */
static uint64_t fx_budget_with_a_read_retired_entry(struct fx *f, uint32_t more, struct sc_arena **r1)
{
	const size_t big = 256 << 10, two = 2048;
	fx_open(f);
	uint64_t fp2 = sc_l2_footprint(f->a, two, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f->a, 8 * sc_l2_footprint(f->a, big, 0, 4) + (1 + more) * fp2), 0);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(put(f->st, k, big), 0);
	ck_assert_int_eq(put(f->st, 100, two), 0);
	ck_assert_int_eq(sc_arena_open(f->name, r1), 0);
	shm_epoch_enter((*r1)->shm);
	ck_assert_int_eq(del(f, 100), 0);
	waiting.leave = *r1;
	waiting.rounds = 0;
	return fp2;
}

/* An admission over the budget only by bytes readers still hold waits for them. One reader leaves
 * during the first round of the wait, and what it held is exactly the room: the admission stops
 * waiting there, although another retired entry, held by a second reader, is still pending. It
 * evicts nothing. */
START_TEST(an_admission_stops_waiting_for_readers_as_soon_as_its_room_is_free)
{
	struct fx f;
	struct sc_arena *r1, *r2;
	uint64_t fp2 = fx_budget_with_a_read_retired_entry(&f, 1, &r1);
	ck_assert_int_eq(put(f.st, 101, 2048), 0); /* the budget is full */
	/* key 101 retired after the second reader entered, an epoch after key 100 was: that reader
	 * holds key 101 only */
	(void)shm_epoch_advance(f.a->shm);
	ck_assert_int_eq(sc_arena_open(f.name, &r2), 0);
	shm_epoch_enter(r2->shm);
	ck_assert_int_eq(del(&f, 101), 0);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, 2 * fp2);
	ck_assert_uint_eq(s0.evictions, 0);
	sc_sched_set(count_the_wait, NULL);
	ck_assert_int_eq(put(f.st, 103, 2048), 0);
	sc_sched_set(NULL, NULL);
	struct sc_l2_stats s = stats(&f);
	ck_assert_int_eq(waiting.rounds, 1);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, fp2); /* key 101's: the second reader is still in */
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_msg(has(f.st, k), "key %u was evicted", k);
	ck_assert(has(f.st, 103));
	shm_epoch_exit(r2->shm);
	sc_arena_close(r2);
	sc_arena_close(r1);
	fx_close(&f);
}
END_TEST

/* The same wait, when what the leaving reader held is not enough room: the admission stops
 * waiting as soon as nothing retired is left to wait for, and evicts. */
START_TEST(an_admission_stops_waiting_for_readers_when_nothing_retired_is_left)
{
	struct fx f;
	struct sc_arena *r1;
	uint64_t fp2 = fx_budget_with_a_read_retired_entry(&f, 0, &r1);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, fp2);
	ck_assert_uint_eq(s0.evictions, 0);
	sc_sched_set(count_the_wait, NULL);
	ck_assert_int_eq(put(f.st, 103, 4096), 0); /* more than key 100's room */
	sc_sched_set(NULL, NULL);
	struct sc_l2_stats s = stats(&f);
	ck_assert_int_eq(waiting.rounds, 1);
	ck_assert_uint_eq(s.evictions, 1);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	ck_assert(has(f.st, 103));
	sc_arena_close(r1);
	fx_close(&f);
}
END_TEST

/* An admission under the budget into a heap whose free bytes are only holes, with an unread
 * retired entry between two of them: reclaiming it makes one run of the three, and the admission
 * takes it. It evicts nothing, even when the search by address (which evicts) could not see that
 * run: here it is bounded to two blocks, the policy's next victim and its neighbour. */
START_TEST(an_admission_takes_the_room_a_reclaim_joins_without_a_search_by_address)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 64 << 10;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4), fp2 = sc_l2_footprint(f.a, 2 * n, 0, 4);
	uint32_t m = (uint32_t)(stats(&f).budget_bytes / fp);
	for (uint32_t k = 0; k < m; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	ck_assert_int_eq(del(&f, 2), 0);
	ck_assert_int_eq(del(&f, 4), 0);
	l2_reclaim_all(f.a, -1);
	struct sc_arena *r;
	ck_assert_int_eq(sc_arena_open(f.name, &r), 0);
	shm_epoch_enter(r->shm); /* a reader inside when it is removed: its reclaim is deferred */
	ck_assert_int_eq(del(&f, 3), 0);
	shm_epoch_exit(r->shm);
	sc_arena_close(r);
	struct sc_l2_stats s0 = stats(&f);
	/* what it relies on: nothing evicted, the budget has the room, the heap has it only once the
	 * retired entry (whose batch is not due) is reclaimed */
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, fp);
	ck_assert_uint_lt(fp, s0.budget_bytes >> 8);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_le(hs.used_bytes + fp2, s0.budget_bytes);
	ck_assert_uint_lt(s0.largest_free_block, fp2);
	sc_l2_set_policy_limits(0, 2);
	ck_assert_int_eq(put(f.st, 1000, 2 * n), 0);
	sc_l2_set_policy_limits(0, 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	for (uint32_t k = 0; k < m; k++)
		ck_assert_msg(has(f.st, k) == (k < 2 || k > 4), "key %u", k);
	ck_assert(has(f.st, 1000));
	fx_close(&f);
}
END_TEST

/* Replaced entries are reclaimed in batches (lib/l2/evict.c): a shard's batch is due once it has
 * 32 entries retired, or once they hold 1/256 of the budget, whichever comes first; the admission
 * that makes it due reclaims it. Exactly at each bound, and one short of it. */
START_TEST(a_shards_reclaim_is_due_at_exactly_32_entries_or_a_256th_of_the_budget)
{
	struct fx f;
	fx_open(&f);
	struct shm_index *ix = l2_ix(f.a);
	int32_t t[4];
	struct sc_key k;
	toks(t, 7);
	ck_assert_int_eq(sc_l2_key(f.st, "pol", t, 4, &k), 0);
	const struct shm_index_shard *sh = &ix->hdr->shards[shm_index_shard_of_bucket(shm_index_bucket(ix, k.lo))];
	/* by count: 64-byte entries are far from the bytes' bound */
	ck_assert_int_eq(put(f.st, 7, 64), 0);
	for (uint32_t i = 1; i < 32; i++) {
		ck_assert_int_eq(put(f.st, 7, 64 + i), 0);
		ck_assert_uint_eq(sh->pending_count, i);
	}
	ck_assert_uint_lt(sh->pending_bytes, stats(&f).budget_bytes >> 8);
	ck_assert_int_eq(put(f.st, 7, 64 + 32), 0); /* the 32nd */
	ck_assert_uint_eq(sh->pending_count, 0);
	ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, 0);
	/* by bytes: a budget whose 256th is two 4 KiB entries' footprint */
	ck_assert_int_eq(del(&f, 7), 0);
	l2_reclaim_all(f.a, -1);
	ck_assert_uint_eq(sh->pending_count, 0);
	uint64_t fp = sc_l2_footprint(f.a, 4096, 0, 4);
	ck_assert_uint_eq(sc_l2_footprint(f.a, 4088, 0, 4), fp);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 2 * fp << 8), 0);
	ck_assert_uint_eq(stats(&f).budget_bytes >> 8, 2 * fp);
	ck_assert_int_eq(put(f.st, 7, 4096), 0);
	ck_assert_int_eq(put(f.st, 7, 4092), 0);
	ck_assert_uint_eq(sh->pending_count, 1);
	ck_assert_uint_eq(sh->pending_bytes, fp);
	ck_assert_int_eq(put(f.st, 7, 4088), 0); /* retired: 2 * fp, exactly the bound */
	ck_assert_uint_eq(sh->pending_count, 0);
	ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, 0);
	ck_assert(has(f.st, 7));
	fx_close(&f);
}
END_TEST

/* The index header's bytes after its last shard are padding: scribbled to look like a 17th shard
 * (a valid free lock, lists naming entry 0, a terabyte pending), they are never read as one. The
 * pending bytes reported stay 0, an admission over the budget evicts without waiting for
 * readers, a lowered budget evicts, and the padding is as it was written. */
START_TEST(the_index_header_past_its_last_shard_is_never_read_as_a_shard)
{
	struct fx f;
	fx_open(&f);
	struct shm_index *ix = l2_ix(f.a);
	const size_t n = 64 << 10;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 4 * fp), 0);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	struct shm_index_shard *fake = &ix->hdr->shards[SHM_INDEX_SHARDS - 1] + 1;
	ck_assert_uint_le((uint64_t)((uint8_t *)(fake + 1) - (uint8_t *)ix->hdr), SHM_INDEX_HDR_BYTES);
	shm_mutex_init(&fake->mu);
	fake->free_head = 1;
	fake->pending_head = 1;
	fake->pending_bytes = 1ull << 40;
	fake->pending_count = 1000;
	struct shm_index_shard saved = *fake;
	ck_assert_uint_eq(stats(&f).pending_reclaim_bytes, 0);
	waiting.leave = NULL;
	waiting.rounds = 0;
	sc_sched_set(count_the_wait, NULL);
	ck_assert_int_eq(put(f.st, 4, n), 0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(waiting.rounds, 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.evictions, 1);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 2 * fp), 0);
	ck_assert_uint_eq(stats(&f).entries, 2);
	ck_assert(has(f.st, 4));
	ck_assert(memcmp(fake, &saved, sizeof(saved)) == 0);
	fx_close(&f);
}
END_TEST

/* An admission into an index shard whose entries are all used, one of them retired and unread
 * (replaced, its batch not due), reclaims that one and reuses it: it evicts nothing. 64 entries:
 * 4 per shard. */
START_TEST(an_admission_into_a_full_index_shard_reuses_a_retired_entry_and_evicts_nothing)
{
	struct fx f;
	uint32_t per, shard = fx_open_64_entries(&f, &per);
	struct shm_index *ix = l2_ix(f.a);
	ck_assert_uint_ge(per, 2);
	ck_assert_uint_le(per, SHM_INDEX_MAX_CHAIN);
	uint32_t keys[SHM_INDEX_MAX_CHAIN], held = per - 1;
	shard_keys(&f, shard, 1, 1, keys, held);
	for (uint32_t i = 0; i < held; i++)
		ck_assert_int_eq(put(f.st, keys[i], 4096), 0);
	ck_assert_int_eq(put(f.st, keys[0], 2048), 0); /* the shard's last entry; the first one retired */
	struct sc_l2_stats s0 = stats(&f);
	/* what it relies on: the shard has no free entry, one retired, and its batch is not due */
	ck_assert_uint_eq(ix->hdr->shards[shard].free_head, 0);
	ck_assert_uint_eq(ix->hdr->shards[shard].pending_count, 1);
	ck_assert_uint_lt(s0.pending_reclaim_bytes, s0.budget_bytes >> 8);
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_int_eq(put(f.st, 0, 4096), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(ix->hdr->shards[shard].pending_count, 0);
	ck_assert(has(f.st, 0));
	for (uint32_t i = 0; i < held; i++)
		ck_assert_msg(has(f.st, keys[i]), "key %u was evicted", keys[i]);
	fx_close(&f);
}
END_TEST

/* An admission into an index shard whose entries are all in use evicts the shard's oldest entry
 * of the small FIFO, else of the main one, and only one from the small FIFO goes to the ghost (as
 * in S3-FIFO's own evictions): asked for again, the one evicted from small comes back to main, the
 * one evicted from main to small. 64 entries: 4 per shard. */
START_TEST(a_full_shard_evicts_its_oldest_small_entry_into_the_ghost_else_its_oldest_main_one)
{
	struct fx f;
	uint32_t per, shard = fx_open_64_entries(&f, &per);
	ck_assert_uint_eq(per, 4);
	const size_t n = 4096;
	uint32_t k[6], other;
	shard_keys(&f, shard, 1, 0, k, 6);
	shard_keys(&f, shard, 0, 0, &other, 1);
	/* a budget whose small FIFO is full with two entries: then (no eviction yet) the rest join main */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 20 * sc_l2_footprint(f.a, n, 0, 4)), 0);
	ck_assert_int_eq(put(f.st, k[0], n), 0);
	ck_assert_int_eq(put(f.st, other, n), 0);
	for (int i = 1; i < 4; i++)
		ck_assert_int_eq(put(f.st, k[i], n), 0);
	ck_assert_int_eq(queue_of(&f, k[0]), SHM_EVQ_SMALL);
	ck_assert_int_eq(queue_of(&f, other), SHM_EVQ_SMALL);
	for (int i = 1; i < 4; i++)
		ck_assert_int_eq(queue_of(&f, k[i]), SHM_EVQ_MAIN);
	/* k4: the shard's oldest small entry (k0) goes */
	ck_assert_int_eq(put(f.st, k[4], n), 0);
	ck_assert(!has(f.st, k[0]));
	ck_assert_int_eq(queue_of(&f, k[4]), SHM_EVQ_SMALL);
	/* k0 again: k4 goes (the older small entry is another shard's), and k0 is in the ghost */
	ck_assert_int_eq(put(f.st, k[0], n), 0);
	ck_assert(!has(f.st, k[4]));
	ck_assert_int_eq(queue_of(&f, k[0]), SHM_EVQ_MAIN);
	ck_assert_uint_eq(stats(&f).ghost_hits, 1);
	/* k5: the shard has nothing in small now: main's oldest (k1) goes */
	ck_assert_int_eq(put(f.st, k[5], n), 0);
	ck_assert(!has(f.st, k[1]));
	ck_assert_int_eq(queue_of(&f, k[5]), SHM_EVQ_SMALL);
	/* k1 again: k5 goes; k1 was not put in the ghost */
	ck_assert_int_eq(put(f.st, k[1], n), 0);
	ck_assert(!has(f.st, k[5]));
	ck_assert_int_eq(queue_of(&f, k[1]), SHM_EVQ_SMALL);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.ghost_hits, 1);
	ck_assert_uint_eq(s.evictions, 4);
	ck_assert(has(f.st, other) && has(f.st, k[2]) && has(f.st, k[3]));
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* That search walks the FIFOs oldest first, one step per entry of any shard, within the step
 * bound: an evictable entry at exactly the bound is reached, one past it is not (refused:
 * scan_limit); a walk that saw every entry within the bound and found the shard's all leased is
 * refused as leased. 64 entries: 4 per shard, only this shard's entries stored. */
START_TEST(a_full_shards_walk_reaches_exactly_its_step_bound)
{
	struct fx f;
	uint32_t per, shard = fx_open_64_entries(&f, &per);
	ck_assert_uint_eq(per, 4);
	const size_t n = 4096;
	uint32_t k[6];
	shard_keys(&f, shard, 1, 0, k, 6);
	struct sc_lease l[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(put(f.st, k[i], n), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(get(f.st, k[i], &l[i]), 0);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.small_entries, 4); /* k0 .. k3, oldest first: k3, unleased, is step 4 */
	ck_assert_uint_eq(s0.main_entries, 0);
	sc_l2_set_policy_limits(3, 0);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_SCAN_LIMIT, -ENOSPC, put(f.st, k[4], n));
	ck_assert(has(f.st, k[3]));
	sc_l2_set_policy_limits(4, 0);
	ck_assert_int_eq(put(f.st, k[4], n), 0);
	ck_assert(!has(f.st, k[3]));
	/* now four entries, all leased, seen in four steps */
	ck_assert_int_eq(get(f.st, k[4], &l[3]), 0);
	ck_assert_uint_eq(stats(&f).small_entries + stats(&f).main_entries, 4);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_LEASED, -ENOSPC, put(f.st, k[5], n));
	sc_l2_set_policy_limits(0, 0);
	for (int i = 0; i < 4; i++)
		sc_lease_release(&l[i]);
	ck_assert_uint_eq(stats(&f).evictions, 1);
	fx_close(&f);
}
END_TEST

/* An admission whose room eviction makes leaves a dead process unreaped (a filler killed -9
 * holding a reservation): the reap is for when room cannot be made, so exactly one entry is
 * evicted, and the dead filler's reservation is still held afterwards. */
START_TEST(an_admission_that_makes_room_evicts_once_and_leaves_the_dead_for_later)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 16 << 10;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	atomic_store(&f.a->shm->hdr->reap_due_ns, UINT64_MAX); /* no periodic reap does the work */
	pid_t pid = sc_test_filler(f.name, 4096);
	uint64_t held = sc_test_heap_used(f.a); /* the filler's reservation, and anything before it */
	kill(pid, SIGKILL);
	sc_test_wait_killed(pid);
	ck_assert_uint_gt(held, 0);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, held + 40 * fp), 0);
	for (uint32_t k = 0; k < 40; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	struct sc_l2_stats s0 = stats(&f);
	/* what it relies on: the budget is full, nothing has been evicted or is waiting for readers */
	ck_assert_uint_eq(sc_test_heap_used(f.a), s0.budget_bytes);
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, 0);
	ck_assert_int_eq(put(f.st, 100, n), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.evictions, s0.evictions + 1);
	ck_assert_uint_eq(s.entries, 40);
	ck_assert(has(f.st, 100));
	ck_assert_uint_eq(sc_test_heap_used(f.a), s0.budget_bytes); /* the dead filler's bytes still held */
	fx_close(&f);
}
END_TEST

struct holder_ctx {
	const char *name;
	uint32_t n;
};

/* Lease keys [0, n) through a handle of its own (in a child of sc_test_parked). */
static int hold_leases(void *ctx)
{
	struct holder_ctx *h = ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_lease l[SC_LEASES_MAX];
	if (h->n > SC_LEASES_MAX || sc_arena_open(h->name, &a) || sc_stage_open(a, "model", "state", &st))
		return -1;
	for (uint32_t k = 0; k < h->n; k++)
		if (get(st, k, &l[k]))
			return -1;
	return 0;
}

/* An admission whose room a dead process holds (a filler killed -9 holding a reservation), while
 * every stored entry is leased by another dead process: nothing can be evicted, so it reaps them,
 * and the reservation it releases is the room. Nothing is evicted for room measured before. */
START_TEST(an_admission_whose_room_a_dead_process_held_evicts_nothing)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 16 << 10;
	uint64_t fp = sc_l2_footprint(f.a, n, 0, 4);
	atomic_store(&f.a->shm->hdr->reap_due_ns, UINT64_MAX); /* only the admission reaps */
	uint64_t before = sc_test_heap_used(f.a);
	pid_t filler = sc_test_filler(f.name, n);
	kill(filler, SIGKILL);
	sc_test_wait_killed(filler);
	uint64_t held = sc_test_heap_used(f.a); /* the dead filler's reservation, and what was before it */
	ck_assert_uint_ge(held - before, fp);  /* the reservation is room for one entry */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, held + 9 * fp), 0);
	for (uint32_t k = 0; k < 9; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	struct holder_ctx hc = { f.name, 9 };
	pid_t holder = sc_test_parked(hold_leases, &hc, "lease its 9 keys");
	kill(holder, SIGKILL);
	sc_test_wait_killed(holder);
	struct sc_l2_stats s0 = stats(&f);
	/* what it relies on: the budget is full, nothing evicted or waiting for readers */
	ck_assert_uint_eq(sc_test_heap_used(f.a), s0.budget_bytes);
	ck_assert_uint_eq(s0.pending_reclaim_bytes, 0);
	ck_assert_uint_eq(s0.evictions, 0);
	ck_assert_int_eq(put(f.st, 100, n), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.entries, 10);
	for (uint32_t k = 0; k < 9; k++)
		ck_assert_msg(has(f.st, k), "key %u was evicted", k);
	ck_assert(has(f.st, 100));
	ck_assert_uint_lt(sc_test_heap_used(f.a), s0.budget_bytes); /* the reservation went back */
	fx_close(&f);
}
END_TEST

/* Room making that meets shards held by others (here: by processes killed -9 holding them, whose
 * slots were reaped already, so reaping again frees nothing) waits for each such shard once,
 * taking a dead holder's over, and tries again: two tries in all, then the admission is refused
 * (scan_limit). One FIFO step per try: the first meets the small FIFO's oldest entry (shard X),
 * the second the next one (shard Y), so both tries fail; the next admission finds X free. */
/* A budget of 20 entries of 16 KiB: a key *@u first (unleased; the first from 7 up whose shard is
 * not @avoid, -1: 7), then 19 more from 3000 up, leased in @l (their keys in @keys). Returns the
 * footprint. */
static uint64_t fx_open_all_leased_but(struct fx *f, int avoid, uint32_t *u, struct sc_lease l[19], uint32_t keys[19])
{
	const size_t n = 16 << 10;
	fx_open(f);
	*u = 7;
	if (avoid >= 0)
		shard_keys(f, (uint32_t)avoid, 0, 7, u, 1);
	atomic_store(&f->a->shm->hdr->reap_due_ns, UINT64_MAX); /* only the test reaps */
	uint64_t fp = sc_l2_footprint(f->a, n, 0, 4);
	ck_assert_int_eq(sc_l2_shrink_to(f->a, 20 * fp), 0);
	ck_assert_int_eq(put(f->st, *u, n), 0);
	for (uint32_t i = 0; i < 19; i++) {
		keys[i] = 3000 + i;
		ck_assert_int_eq(put(f->st, keys[i], n), 0);
		ck_assert_int_eq(get(f->st, keys[i], &l[i]), 0);
	}
	ck_assert_uint_eq(stats(f).evictions, 0);
	return fp;
}

static void release_all(struct sc_lease *l, int n)
{
	for (int i = 0; i < n; i++)
		sc_lease_release(&l[i]);
}

/* Room making for bytes and a shard at once: when the bytes cannot be made (all but one entry
 * leased, more asked than it holds: refused as leased before anything is evicted), nothing is
 * evicted for the shard either. */
START_TEST(room_for_a_shard_is_not_made_when_the_room_in_bytes_was_refused)
{
	struct fx f;
	struct sc_lease l[19];
	uint32_t keys[19], u;
	uint64_t fp = fx_open_all_leased_but(&f, -1, &u, l, keys);
	int why;
	ck_assert_int_eq(l2_make_room(f.a, 2 * fp, (int)shard_of(&f, u), -1, NULL, SC_MISS_EVICTED_PRESSURE, &why), -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_LEASED));
	ck_assert_uint_eq(stats(&f).evictions, 0);
	ck_assert(has(f.st, u));
	release_all(l, 19);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* A caller that holds a shard itself (@held) is not made to wait for the shards that stood in the
 * way: room making refuses at once as scan_limit (the only unleased entry's shard is held by a
 * process killed holding it), and the entry stays; without a shard held, it waits for that shard
 * once (taking it over) and evicts the entry. */
START_TEST(room_making_for_a_caller_holding_a_shard_does_not_wait_for_busy_shards)
{
	struct fx f;
	struct sc_lease l[19];
	uint32_t keys[19], u;
	uint64_t fp = fx_open_all_leased_but(&f, 0, &u, l, keys);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t s = shard_of(&f, u);
	ck_assert_uint_ne(s, 0);
	sc_test_wait_killed(sc_test_locker(f.name, &ix->hdr->shards[s].mu, 'k', 0));
	int why;
	ck_assert_int_eq(shm_index_lock(ix, 0), 0);
	int rc = l2_make_room(f.a, fp, -1, 0, NULL, SC_MISS_EVICTED_PRESSURE, &why);
	shm_index_unlock(ix, 0);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_SCAN_LIMIT));
	ck_assert_uint_eq(stats(&f).evictions, 0);
	ck_assert(has(f.st, u));
	ck_assert_uint_ne(shm_mutex_owner(&ix->hdr->shards[s].mu), 0); /* still the dead one's */
	ck_assert_int_eq(l2_make_room(f.a, fp, -1, -1, NULL, SC_MISS_EVICTED_PRESSURE, &why), 0);
	ck_assert(!has(f.st, u));
	ck_assert_uint_eq(stats(&f).evictions, 1);
	ck_assert_uint_eq(shm_mutex_owner(&ix->hdr->shards[s].mu), 0);
	release_all(l, 19);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* Room making that waits for a shard a live process holds (it lets go when a waiter shows up)
 * waits for that shard alone, leaves it unlocked, and makes the room on its second try; a shard
 * whose entries are all leased (never tried) is not waited for: its live holder still has it. */
START_TEST(room_making_waits_only_for_the_busy_shard_and_leaves_it_unlocked)
{
	struct fx f;
	struct sc_lease l[19];
	uint32_t keys[19], u;
	uint64_t fp = fx_open_all_leased_but(&f, -1, &u, l, keys);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t s = shard_of(&f, u), t = (s + 1) % SHM_INDEX_SHARDS;
	pid_t holder = sc_test_locker(f.name, &ix->hdr->shards[s].mu, 'h', 0);
	pid_t other = sc_test_locker(f.name, &ix->hdr->shards[t].mu, 'h', 0);
	struct shm_index_entry *eu = entry_of(&f, u);
	uint32_t gu = eu->gen;
	int why;
	int rc = l2_make_room(f.a, fp, -1, -1, NULL, SC_MISS_EVICTED_PRESSURE, &why);
	ck_assert_uint_ne(shm_mutex_owner(&ix->hdr->shards[t].mu), 0); /* not waited for: still held */
	kill(other, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(other, &status, 0), other);
	ck_assert_int_eq(waitpid(holder, &status, 0), holder);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* it saw a waiter and let go */
	ck_assert_msg(rc == 0, "%d (%s)", rc, sc_l2_refusal_name(why));
	ck_assert(!alive(eu, gu));
	ck_assert_uint_eq(stats(&f).evictions, 1);
	ck_assert_uint_eq(shm_mutex_owner(&ix->hdr->shards[s].mu), 0);
	release_all(l, 19);
	fx_close(&f);
}
END_TEST

/* Room making for bytes and a shard that waited for a busy shard returns once what it made is
 * made: bytes (the oldest entry's shard was busy, the next one went) and the shard's oldest entry,
 * two evictions, not a third on a second try. */
START_TEST(room_making_that_made_its_room_past_a_busy_shard_does_not_try_again)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 16 << 10;
	atomic_store(&f.a->shm->hdr->reap_due_ns, UINT64_MAX); /* only the test reaps */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 20 * sc_l2_footprint(f.a, n, 0, 4)), 0);
	uint32_t a = 0, b, x = (shard_of(&f, a) + 1) % SHM_INDEX_SHARDS, xs[3];
	shard_keys(&f, shard_of(&f, a), 0, 1, &b, 1);
	shard_keys(&f, x, 1, 1000, xs, 3); /* three entries in shard x, not a's */
	ck_assert_int_eq(put(f.st, a, n), 0);
	ck_assert_int_eq(put(f.st, b, n), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(put(f.st, xs[i], n), 0);
	for (uint32_t k = 200000; k < 200015; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	struct sc_l2_stats sa = stats(&f);
	ck_assert_uint_eq(sa.small_entries, 2); /* a (the oldest), b */
	ck_assert_uint_eq(sa.main_entries, 18);
	ck_assert_uint_eq(sa.evictions, 0);
	struct shm_index *ix = l2_ix(f.a);
	sc_test_wait_killed(sc_test_locker(f.name, &ix->hdr->shards[shard_of(&f, a)].mu, 'k', 0));
	struct sc_l2_stats s0 = stats(&f);
	int why;
	ck_assert_int_eq(l2_make_room(f.a, 1, (int)x, -1, NULL, SC_MISS_EVICTED_PRESSURE, &why), 0);
	ck_assert_uint_eq(stats(&f).evictions, s0.evictions + 2);
	ck_assert(has(f.st, a));
	ck_assert_uint_ne(shm_mutex_owner(&ix->hdr->shards[shard_of(&f, a)].mu), 0); /* not waited for */
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

/* A shard the caller itself holds is in room making's way like any other (its lock names the
 * caller: waiting for it fails, and nothing is unlocked): refused as scan_limit, and the caller
 * still holds it. */
START_TEST(room_making_leaves_a_shard_the_caller_holds_held)
{
	struct fx f;
	struct sc_lease l[19];
	uint32_t keys[19], u;
	uint64_t fp = fx_open_all_leased_but(&f, -1, &u, l, keys);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t s = shard_of(&f, u);
	ck_assert_int_eq(shm_index_lock(ix, s), 0);
	int why;
	int rc = l2_make_room(f.a, fp, -1, -1, NULL, SC_MISS_EVICTED_PRESSURE, &why);
	uint32_t owner = shm_mutex_owner(&ix->hdr->shards[s].mu);
	if (owner)
		shm_index_unlock(ix, s);
	ck_assert_uint_ne(owner, 0);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_str_eq(sc_l2_refusal_name(why), sc_l2_refusal_name(SC_L2_REFUSE_SCAN_LIMIT));
	ck_assert(has(f.st, u));
	release_all(l, 19);
	fx_close(&f);
}
END_TEST

START_TEST(room_making_tries_twice_past_shards_held_by_the_dead)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 16 << 10;
	atomic_store(&f.a->shm->hdr->reap_due_ns, UINT64_MAX); /* only the test reaps */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 20 * sc_l2_footprint(f.a, n, 0, 4)), 0);
	uint32_t a = 0, b;
	shard_keys(&f, shard_of(&f, a), 0, 1, &b, 1);
	ck_assert_int_eq(put(f.st, a, n), 0);
	ck_assert_int_eq(put(f.st, b, n), 0);
	for (uint32_t k = 1000; k < 1018; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	struct sc_l2_stats s0 = stats(&f);
	ck_assert_uint_eq(s0.small_entries, 2); /* a (the oldest), b */
	ck_assert_uint_eq(s0.main_entries, 18);
	ck_assert_int_eq(queue_of(&f, a), SHM_EVQ_SMALL);
	ck_assert_int_eq(queue_of(&f, b), SHM_EVQ_SMALL);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t held[2] = { shard_of(&f, a), shard_of(&f, b) };
	for (int i = 0; i < 2; i++)
		sc_test_wait_killed(sc_test_locker(f.name, &ix->hdr->shards[held[i]].mu, 'k', 0));
	ck_assert_int_gt(l2_reap(f.a, 1), 0);
	ck_assert_int_eq(l2_reap(f.a, 1), 0);
	sc_l2_set_policy_limits(1, 0);
	EXPECT_REFUSAL(&f, SC_L2_REFUSE_SCAN_LIMIT, -ENOSPC, put(f.st, 2000, n));
	ck_assert_uint_eq(stats(&f).evictions, 0);
	for (int i = 0; i < 2; i++)
		ck_assert_uint_eq(shm_mutex_owner(&ix->hdr->shards[held[i]].mu), 0); /* taken over, released */
	ck_assert_int_eq(put(f.st, 2000, n), 0);
	sc_l2_set_policy_limits(0, 0);
	ck_assert(!has(f.st, a));
	ck_assert(has(f.st, b));
	ck_assert(has(f.st, 2000));
	ck_assert_uint_eq(stats(&f).evictions, 1);
	assert_lists_consistent(f.a);
	fx_close(&f);
}
END_TEST

START_TEST(leased_entries_survive_any_pressure)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 256 << 10;
	struct sc_lease l[12];
	for (uint32_t k = 0; k < 12; k++) {
		ck_assert_int_eq(put(f.st, k, n), 0);
		ck_assert_int_eq(get(f.st, k, &l[k]), 0);
	}
	pid_t steady = fork();
	if (steady == 0)
		pressure_proc(f.name, 1, 600, 0);
	int killed = 0;
	for (int round = 0; round < 6; round++) {
		pid_t p = fork();
		if (p == 0)
			pressure_proc(f.name, 2 + (uint32_t)round, 100, 1);
		int status;
		ck_assert_int_eq(waitpid(p, &status, 0), p);
		ck_assert_msg(WIFEXITED(status) ? WEXITSTATUS(status) == 0 : WTERMSIG(status) == SIGKILL, "status %#x", status);
		killed += WIFSIGNALED(status);
	}
	int status;
	ck_assert_int_eq(waitpid(steady, &status, 0), steady);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "steady writer: status %#x", status);
	/* every leased entry is still in the index, its bytes intact */
	for (uint32_t k = 0; k < 12; k++) {
		ck_assert_msg(has(f.st, k), "leased key %u was evicted", k);
		ck_assert(sc_digest_equal(sc_digest(l[k].sec[0], l[k].sec_len[0]), digest_of(k, n)));
		sc_lease_release(&l[k]);
	}
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_gt(s.evictions, 100);
	ck_assert_int_eq(killed, 6);
	printf("pressure: %d writers killed -9, %llu inserts, %llu evictions, refusals leased %llu no_room %llu scan_limit %llu other %llu\n",
	       killed, (unsigned long long)s.inserts, (unsigned long long)s.evictions,
	       (unsigned long long)s.refused[SC_L2_REFUSE_LEASED], (unsigned long long)s.refused[SC_L2_REFUSE_NO_ROOM],
	       (unsigned long long)s.refused[SC_L2_REFUSE_SCAN_LIMIT], (unsigned long long)s.refused[SC_L2_REFUSE_OTHER]);
	fflush(stdout);
	/* it never froze: the only refusals under this pressure are for room the twelve scattered
	 * leases (and dead holders, until reaped) kept; no scan ran out, nothing else failed */
	ck_assert_uint_eq(s.refused[SC_L2_REFUSE_OTHER], 0);
	ck_assert_uint_eq(s.refused[SC_L2_REFUSE_SCAN_LIMIT], 0);
	ck_assert_uint_le(s.refused[SC_L2_REFUSE_NO_ROOM] + s.refused[SC_L2_REFUSE_LEASED], s.inserts / 10);
	/* the killed writers left nothing that fsck would not take back (reaped above: the kernel
	 * dropped their liveness locks before waitpid returned; admissions leave no read in flight) */
	struct sc_fsck_report rep;
	ck_assert_int_ge(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	lists_consistent(f.a, 1); /* writers were killed */
	fx_close(&f);
}
END_TEST

/* ---- writers killed inside the policy's critical sections ---- */

struct kill_case {
	const char *point;
	int op; /* 0 admit new (evicting), 1 replace, 2 remove */
};
static const struct kill_case kills[] = {
	{ "l2.admit.queued", 0 },      { "evq.push.linking", 0 },    { "evq.push.linking", 1 },
	{ "evq.remove.unlinking", 1 }, { "evq.remove.unlinking", 2 }, { "l2.evict.unlinked", 0 },
};

static void kill_op(struct sc_stage *st, int op)
{
	if (op == 0)
		(void)put(st, 900, 64 << 10);
	else if (op == 1)
		(void)put(st, 3, 20000);
	else {
		int32_t t[4];
		struct sc_key key;
		toks(t, 5);
		sc_l2_key(st, "pol", t, 4, &key);
		(void)sc_l2_remove(st, key);
	}
}

START_TEST(writer_killed_in_the_policy_sections)
{
	const struct kill_case *kc = &kills[_i];
	struct fx f;
	fx_open(&f);
	const size_t n = 64 << 10;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 12 * sc_l2_footprint(f.a, n, 0, 4)), 0);
	for (uint32_t k = 0; k < 12; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *ca;
		struct sc_stage *cs;
		if (sc_arena_open(f.name, &ca) || sc_stage_open(ca, "model", "state", &cs))
			_exit(90);
		if (sc_fault_arm(kc->point))
			_exit(91);
		kill_op(cs, kc->op);
		_exit(92); /* not reached */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: status %#x", kc->point, status);
	uint64_t repairs0 = l2_q(f.a)->hdr->repairs;
	/* the next writers: every shard locked once (repairs), then evictions through the lists */
	ck_assert_int_ge(sc_l2_invalidate_digest(f.a, (struct sc_digest){ 1, 2 }), 0);
	for (uint32_t k = 100; k < 130; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	if (strncmp(kc->point, "evq.", 4) == 0 || !strcmp(kc->point, "l2.evict.unlinked"))
		ck_assert_uint_gt(l2_q(f.a)->hdr->repairs, repairs0); /* died holding the lists' lock */
	lists_consistent(f.a, 1); /* writers were killed */
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_le(s.small_bytes + s.main_bytes, s.budget_bytes + sc_l2_footprint(f.a, n, 0, 4));
	/* nothing leaked: clear twice (reaps the dead, sweeps orphans) empties the heap */
	ck_assert_int_ge(sc_l2_clear(f.a), 0);
	ck_assert_int_ge(sc_l2_clear(f.a), 0);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_msg(hs.used_bytes == 0, "%s: %llu bytes leaked", kc->point, (unsigned long long)hs.used_bytes);
	s = stats(&f);
	ck_assert_uint_eq(s.small_entries + s.main_entries, 0);
	fx_close(&f);
}
END_TEST

/* ---- the states an admission passes through ---- */

/* Whether entry @e is reachable from its bucket's chain (shm_index_find reports only LIVE and
 * RETIRED entries: this walks the links themselves). */
static int reachable(struct shm_index *ix, const struct shm_index_entry *e)
{
	uint32_t me = shm_index_idx(ix, e) + 1;
	uint32_t cur = atomic_load(&ix->buckets[shm_index_bucket(ix, e->key_lo)]);
	for (uint32_t hops = 0; cur && cur <= ix->nentries && hops < SHM_INDEX_MAX_CHAIN; hops++) {
		if (cur == me)
			return 1;
		cur = atomic_load(&ix->ent[cur - 1].next);
	}
	return 0;
}

/* The list node @idx is on (SHM_EVQ_NONE: none), once the lists' own check (shm_evq_check_locked:
 * every node's record agrees with the walk of its list, and no record names a list that does not
 * reach it) has passed. */
static uint32_t queued_on(struct sc_arena *a, uint32_t idx)
{
	struct shm_evq *q = l2_q(a);
	const char *why = NULL;
	ck_assert_int_eq(shm_evq_lock(q), 0);
	int rc = shm_evq_check_locked(q, &why);
	uint32_t on = q->node[idx].q;
	shm_evq_unlock(q);
	ck_assert_msg(rc == 0, "eviction lists inconsistent: %s", why ? why : "?");
	return on;
}

/* What a writer killed inside an admission leaves, at each step of its commit: BUSY and on no
 * list (at l2.admit.busy), then queued but unreachable (l2.admit.queued: the policy knows an entry
 * before readers can find it), then LIVE and in its chain (l2.admit.linked). Seen from the parent
 * before any lock, repair or reap; the arena's recovery then takes the rest back. */
static const char *const admit_steps[] = { "l2.admit.busy", "l2.admit.queued", "l2.admit.linked" };

START_TEST(a_writer_killed_inside_an_admission_leaves_each_step_done_and_the_next_not)
{
	const char *point = admit_steps[_i];
	struct fx f;
	fx_open(&f);
	for (uint32_t k = 0; k < 12; k++)
		ck_assert_int_eq(put(f.st, k, 16 << 10), 0);
	int32_t t[4];
	struct sc_key key;
	toks(t, 900);
	ck_assert_int_eq(sc_l2_key(f.st, "pol", t, 4, &key), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *ca;
		struct sc_stage *cs;
		if (sc_arena_open(f.name, &ca) || sc_stage_open(ca, "model", "state", &cs) || sc_fault_arm(point))
			_exit(90);
		(void)put(cs, 900, 16 << 10);
		_exit(92); /* not reached */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: status %#x", point, status);
	/* the dead writer's entry: the one with the new key (its key is set before l2.admit.tagged) */
	struct shm_index *ix = l2_ix(f.a);
	struct shm_index_entry *e = NULL;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		if (ix->ent[i].key_lo == key.lo && ix->ent[i].key_hi == key.hi) {
			ck_assert_msg(!e, "%s: two entries of the new key", point);
			e = &ix->ent[i];
		}
	}
	ck_assert_msg(e, "%s: no entry of the new key", point);
	uint32_t state = atomic_load(&e->state), list = queued_on(f.a, shm_index_idx(ix, e));
	int linked = reachable(ix, e);
	if (_i == 0) {
		ck_assert_msg(state == SHM_ENT_BUSY, "%s: state %u", point, state);
		ck_assert_msg(list == SHM_EVQ_NONE, "%s: already queued (list %u)", point, list);
		ck_assert_msg(!linked, "%s: already reachable", point);
	} else if (_i == 1) {
		ck_assert_msg(state == SHM_ENT_BUSY, "%s: state %u", point, state);
		ck_assert_msg(list == SHM_EVQ_SMALL, "%s: on list %u, not the small FIFO", point, list);
		ck_assert_msg(!linked, "%s: already reachable", point);
	} else {
		ck_assert_msg(state == SHM_ENT_LIVE, "%s: state %u", point, state);
		ck_assert_msg(list == SHM_EVQ_SMALL, "%s: on list %u, not the small FIFO", point, list);
		ck_assert_msg(linked, "%s: not reachable", point);
	}
	/* the recovery: fsck takes the dead writer's shard over and leaves a clean arena */
	struct sc_fsck_report rep;
	ck_assert_int_ge(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	lists_consistent(f.a, 1); /* a writer was killed */
	ck_assert_int_eq(put(f.st, 900, 16 << 10), 0);
	ck_assert(has(f.st, 900));
	for (uint32_t k = 0; k < 12; k++)
		ck_assert(has(f.st, k));
	fx_close(&f);
}
END_TEST

START_TEST(rebuilder_killed_during_the_rebuild)
{
	struct fx f;
	fx_open(&f);
	for (uint32_t k = 0; k < 12; k++)
		ck_assert_int_eq(put(f.st, k, 16 << 10), 0);
	const char *points[2] = { "evq.push.linking", "evq.rebuild.cleared" };
	for (int i = 0; i < 2; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			struct sc_arena *ca;
			struct sc_stage *cs;
			if (sc_arena_open(f.name, &ca) || sc_stage_open(ca, "model", "state", &cs) || sc_fault_arm(points[i]))
				_exit(90);
			(void)put(cs, 300 + (uint32_t)i, 16 << 10);
			_exit(92);
		}
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status), "%s: status %#x", points[i], status);
	}
	ck_assert_int_ge(sc_l2_invalidate_digest(f.a, (struct sc_digest){ 1, 2 }), 0);
	ck_assert_int_eq(put(f.st, 400, 16 << 10), 0);
	lists_consistent(f.a, 1);
	for (uint32_t k = 0; k < 12; k++)
		ck_assert(has(f.st, k));
	fx_close(&f);
}
END_TEST

/* ---- hostile contents ---- */

START_TEST(scribbled_lists_are_rebuilt_and_fsck_repairs_them)
{
	struct fx f;
	fx_open(&f);
	const size_t n = 64 << 10;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 16 * sc_l2_footprint(f.a, n, 0, 4)), 0);
	for (uint32_t k = 0; k < 16; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	struct shm_evq *q = l2_q(f.a);
	/* garbage in the links and list heads (the records stay: they are what repair trusts) */
	uint32_t x = 77;
	for (uint32_t i = 0; i < q->nodes; i++) {
		x = x * 1103515245u + 12345u;
		q->node[i].prev = x % (q->nodes + 100);
		q->node[i].next = (x >> 7) % (q->nodes + 100);
	}
	q->hdr->head[0] = q->nodes + 5;
	q->hdr->tail[1] = 0xffffffffu;
	q->hdr->count[0] = 12345;
	struct sc_fsck_report rep;
	int problems = sc_arena_fsck(f.a, 0, NULL, NULL, &rep);
	ck_assert_int_gt(problems, 0);
	ck_assert_int_ge(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), 0);
	/* scribble again, without fsck: the writers meet bad links, rebuild, and go on */
	for (uint32_t i = 0; i < q->nodes; i++) {
		x = x * 1103515245u + 12345u;
		q->node[i].next = x % (q->nodes + 3);
	}
	q->hdr->tail[0] = 3;
	uint64_t r0 = q->hdr->repairs;
	for (uint32_t k = 100; k < 140; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	ck_assert_uint_gt(q->hdr->repairs, r0);
	assert_lists_consistent(f.a);
	/* garbage membership records: taken off every list, never an out-of-bounds access */
	for (uint32_t i = 0; i < q->nodes; i += 3)
		q->node[i].q = 0xdeadbeefu;
	q->hdr->state = SHM_EVQ_REBUILD;
	for (uint32_t k = 200; k < 240; k++)
		ck_assert_int_eq(put(f.st, k, n), 0);
	/* live entries whose records were lost are found by fsck and put back */
	ck_assert_int_ge(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	assert_lists_consistent(f.a);
	ck_assert_int_eq(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), 0);
	fx_close(&f);
}
END_TEST

/* ---- promotions: every decision accounted for ---- */

static char tmpdir[64];

static void rm_tmp(void)
{
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

/* A fresh L3 directory under /var/tmp (removed at exit or by rm_tmp) bound to @f's arena. */
static struct sc_l3 *l3_bound(struct fx *f)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-pol-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp);
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, f->a), 0);
	return l3;
}

static int32_t doc_tokens[64];

static void doc_toks(uint32_t d)
{
	for (int i = 0; i < 64; i++)
		doc_tokens[i] = (int32_t)(d * 1000 + (uint32_t)i);
}

static void l3_put_doc(struct sc_l3 *l3, uint32_t d, size_t n)
{
	uint8_t *b = malloc(n);
	fill(b, n, 50000 + d);
	doc_toks(d);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .ns = "docs", .tokens = doc_tokens, .token_count = 64, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), 0);
	free(b);
}

static int restore(struct sc_stage *st, struct sc_l3 *l3, uint32_t d, struct sc_restore *r)
{
	doc_toks(d);
	int rc = sc_restore(st, l3, "docs", doc_tokens, 64, 0, r);
	return rc;
}

static struct sc_promote_stats pstats(struct sc_arena *a)
{
	struct sc_promote_stats ps;
	ck_assert_int_eq(sc_promote_stats(a, &ps), 0);
	return ps;
}

static void assert_accounted(struct sc_arena *a)
{
	struct sc_promote_stats ps = pstats(a);
	uint64_t refused = 0;
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		refused += ps.refused[i];
	ck_assert_msg(ps.promoted == ps.published + refused, "decided %llu, published %llu, refused %llu",
		      (unsigned long long)ps.promoted, (unsigned long long)ps.published, (unsigned long long)refused);
}

START_TEST(promotions_are_published_refused_retried_and_return)
{
	struct fx f;
	fx_open(&f);
	struct sc_l3 *l3 = l3_bound(&f);
	const size_t n = 256 << 10;
	for (uint32_t d = 0; d < 4; d++)
		l3_put_doc(l3, d, n);
	struct sc_restore r;
	/* doc 0: first fill no, second fill published */
	ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_FIRST_HIT);
	sc_restore_release(&r);
	ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_SECOND_HIT);
	ck_assert_int_eq(r.promoted, 1);
	sc_restore_release(&r);
	ck_assert_uint_eq(pstats(f.a).published, 1);
	/* it leaves L2 (evicted, or removed as here): its next fill brings it back at once */
	doc_toks(0);
	struct sc_key key;
	ck_assert_int_eq(sc_l2_key(f.st, "docs", doc_tokens, 64, &key), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key), 0);
	ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_RETURNING);
	ck_assert_int_eq(r.promoted, 1);
	sc_restore_release(&r);
	ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
	sc_restore_release(&r);
	assert_accounted(f.a);
	/* doc 1: its promotion finds everything leased: refused (leased), the observation stays
	 * open, and the next fill retries and publishes */
	uint64_t fp = sc_l2_footprint(f.a, (n + 4095) & ~4095ull, 1, 64);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 3 * fp), 0);
	struct sc_lease l[8];
	int nl = 0;
	for (uint32_t k = 0; k < 8; k++) {
		if (put(f.st, 600 + k, n / 2) == 0 && get(f.st, 600 + k, &l[nl]) == 0)
			nl++;
	}
	struct sc_lease l0;
	if (restore(f.st, l3, 0, &r) == 64)
		sc_restore_release(&r);
	doc_toks(0);
	if (sc_l2_get(f.st, "docs", doc_tokens, 64, NULL, &l0) == 0)
		l[nl++] = l0;
	ck_assert_int_eq(restore(f.st, l3, 1, &r), 64);
	sc_restore_release(&r);
	struct sc_promote_stats before = pstats(f.a);
	ck_assert_int_eq(restore(f.st, l3, 1, &r), 64);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_SECOND_HIT);
	ck_assert_int_eq(r.promoted, 0);
	sc_restore_release(&r);
	struct sc_promote_stats after = pstats(f.a);
	ck_assert_uint_eq(after.promoted, before.promoted + 1);
	ck_assert_uint_eq(after.refused[SC_L2_REFUSE_LEASED], before.refused[SC_L2_REFUSE_LEASED] + 1);
	assert_accounted(f.a);
	for (int i = 0; i < nl; i++)
		sc_lease_release(&l[i]);
	ck_assert_int_eq(restore(f.st, l3, 1, &r), 64);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_SECOND_HIT); /* still open: retried */
	ck_assert_int_eq(r.promoted, 1);
	sc_restore_release(&r);
	assert_accounted(f.a);
	/* doc 2 is larger than the budget: refused for good (over_budget), then terminal */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, fp / 2), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(restore(f.st, l3, 2, &r), 64);
		sc_restore_release(&r);
	}
	ck_assert_uint_eq(pstats(f.a).refused[SC_L2_REFUSE_OVER_BUDGET], 1);
	ck_assert_int_eq(restore(f.st, l3, 2, &r), 64);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_TERMINAL);
	sc_restore_release(&r);
	assert_accounted(f.a);
	sc_l3_close(l3);
	rm_tmp();
	fx_close(&f);
}
END_TEST

/* A promoted entry that L2 evicts (here for a lowered budget) is marked as having left, as one
 * removed is: its next fill from L3 is promoted again at once (returning). */
START_TEST(an_evicted_promotion_returns_at_its_next_fill)
{
	struct fx f;
	fx_open(&f);
	struct sc_l3 *l3 = l3_bound(&f);
	const size_t n = 256 << 10;
	l3_put_doc(l3, 0, n);
	struct sc_restore r;
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
		sc_restore_release(&r);
	}
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_uint_eq(pstats(f.a).published, 1);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 1), 0); /* evicted */
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_eq(s.evictions, 1);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 0), 0); /* the whole heap again */
	ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_RETURNING);
	ck_assert_int_eq(r.promoted, 1);
	sc_restore_release(&r);
	ck_assert_int_eq(restore(f.st, l3, 0, &r), 64);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
	sc_restore_release(&r);
	assert_accounted(f.a);
	sc_l3_close(l3);
	rm_tmp();
	fx_close(&f);
}
END_TEST

START_TEST(fills_nobody_keeps_do_not_evict)
{
	struct fx f;
	fx_open(&f);
	struct sc_l3 *l3 = l3_bound(&f);
	const size_t n = 1 << 20;
	for (uint32_t d = 0; d < 3; d++)
		l3_put_doc(l3, d, n);
	/* L2 full of entries */
	uint32_t count = fill_heap(&f, 256 << 10);
	(void)count;
	struct sc_l2_stats s0 = stats(&f);
	/* first fills: not promoted, and they take arena memory only if it is free */
	struct sc_restore r;
	for (uint32_t d = 0; d < 3; d++) {
		ck_assert_int_eq(restore(f.st, l3, d, &r), 64);
		ck_assert_int_eq(r.promoted, 0);
		sc_restore_release(&r);
	}
	struct sc_l2_stats s1 = stats(&f);
	ck_assert_uint_eq(s1.evictions, s0.evictions);
	ck_assert_uint_eq(s1.admission_rejects, s0.admission_rejects);
	/* second fills: promoted, evicting for them */
	for (uint32_t d = 0; d < 3; d++) {
		ck_assert_int_eq(restore(f.st, l3, d, &r), 64);
		ck_assert_int_eq(r.promoted, 1);
		sc_restore_release(&r);
	}
	ck_assert_uint_gt(stats(&f).evictions, s1.evictions);
	assert_accounted(f.a);
	sc_l3_close(l3);
	rm_tmp();
	fx_close(&f);
}
END_TEST

/* The eviction lists' entry points refuse what names no list or no node (hostile or stale
 * arguments from a scribbled arena): nothing read or written out of range, nothing changed. */
START_TEST(evq_calls_with_out_of_range_arguments_change_nothing)
{
	struct fx f;
	fx_open(&f);
	for (uint32_t k = 0; k < 6; k++)
		ck_assert_int_eq(put(f.st, k, 3000), 0);
	struct shm_evq *q = l2_q(f.a);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	struct shm_evq_hdr before = *q->hdr;
	struct shm_evq_node last = q->node[q->nodes - 1];
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_NONE), 0);
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_MAIN + 1), 0);
	ck_assert_uint_ne(shm_evq_tail_locked(q, SHM_EVQ_SMALL), 0);
	shm_evq_remove_locked(q, q->nodes);
	shm_evq_remove_locked(q, UINT32_MAX);
	ck_assert_int_eq(memcmp(&before, q->hdr, sizeof(before)), 0);
	ck_assert_int_eq(memcmp(&last, &q->node[q->nodes - 1], sizeof(last)), 0);
	const char *why = NULL;
	ck_assert_int_eq(shm_evq_check_locked(q, &why), 0);
	shm_evq_unlock(q);
	fx_close(&f);
}
END_TEST

/* A list link whose target names another list (a scribbled node) is not followed: the walk to
 * the newer node stops, and the lists are rebuilt. The same for a target whose back link does not
 * point back. */
START_TEST(evq_walk_refuses_a_link_into_another_list)
{
	struct fx f;
	fx_open(&f);
	for (uint32_t k = 0; k < 6; k++)
		ck_assert_int_eq(put(f.st, k, 3000), 0);
	struct shm_evq *q = l2_q(f.a);
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(shm_evq_lock(q), 0);
		uint32_t t = shm_evq_tail_locked(q, SHM_EVQ_SMALL);
		ck_assert_uint_ne(t, 0);
		uint32_t nx = shm_evq_newer_locked(q, t - 1);
		ck_assert_uint_ne(nx, 0);
		uint64_t repairs = q->hdr->repairs;
		if (round == 0)
			q->node[nx - 1].q = SHM_EVQ_MAIN; /* the link leads into the other list */
		else
			q->node[nx - 1].prev = nx;        /* its back link names itself */
		ck_assert_uint_eq(shm_evq_newer_locked(q, t - 1), 0);
		ck_assert_uint_eq(q->hdr->repairs, repairs + 1);
		const char *why = NULL;
		ck_assert_msg(shm_evq_check_locked(q, &why) == 0, "round %d: %s", round, why ? why : "");
		shm_evq_unlock(q);
	}
	for (uint32_t k = 0; k < 6; k++)
		ck_assert(has(f.st, k));
	fx_close(&f);
}
END_TEST

/* The ghost table is set-associative over aligned buckets of SHM_EVQ_GHOST_WAYS slots: as many
 * fingerprints as a bucket has slots, for each of two neighbouring buckets, are all remembered
 * (buckets that overlapped would forget some of them). */
START_TEST(ghost_buckets_hold_their_ways)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = l2_q(f.a);
	ck_assert_int_eq(shm_evq_lock(q), 0);
	const uint32_t n = 2 * SHM_EVQ_GHOST_WAYS;
	for (uint32_t low = 0; low < n; low++)
		shm_evq_ghost_put_locked(q, (0x9e3779b9ull + low) << 32 | (0x1000u + low), 1);
	for (uint32_t low = 0; low < n; low++)
		ck_assert_msg(shm_evq_ghost_take_locked(q, (0x9e3779b9ull + low) << 32 | (0x1000u + low), UINT64_MAX) == 1,
			      "fingerprint %u of %u forgotten", low, n);
	shm_evq_unlock(q);
	fx_close(&f);
}
END_TEST

/* Shrinking takes at most 16 rounds of reclaim and eviction, then says -EAGAIN: with one FIFO
 * step allowed per eviction call, each round evicts two entries (one for the bytes, one more
 * after that refusal), so 40 entries shrunk to one byte lose 32 and 8 stay; with the bound lifted,
 * the next shrink finishes. An entry evicted is gone, the ones kept are whole. */
START_TEST(a_shrink_stops_after_sixteen_rounds)
{
	struct fx f;
	fx_open(&f);
	for (uint32_t k = 0; k < 40; k++)
		ck_assert_int_eq(put(f.st, 1000 + k, 4096), 0);
	ck_assert_uint_eq(stats(&f).entries, 40);
	uint64_t ev0 = stats(&f).evictions;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, stats(&f).bytes), 0); /* exactly what is held: no eviction */
	ck_assert_uint_eq(stats(&f).entries, 40);
	ck_assert_uint_eq(stats(&f).evictions, ev0);
	sc_l2_set_policy_limits(1, 0);
	int rc = sc_l2_shrink_to(f.a, 1); /* one byte (0 is no budget: the capacity) */
	sc_l2_set_policy_limits(0, 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_uint_eq(s.entries, 8);
	ck_assert_uint_eq(s.evictions, ev0 + 32);
	uint32_t kept = 0;
	static uint8_t b[4096];
	for (uint32_t k = 0; k < 40; k++) {
		if (!has(f.st, 1000 + k))
			continue;
		struct sc_lease l;
		ck_assert_int_eq(get(f.st, 1000 + k, &l), 0);
		fill(b, sizeof(b), 1000 + k);
		ck_assert_int_eq(memcmp(l.sec[0], b, sizeof(b)), 0);
		sc_lease_release(&l);
		kept++;
	}
	ck_assert_uint_eq(kept, 8);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 1), 0);
	ck_assert_uint_eq(stats(&f).entries, 0);
	fx_close(&f);
}
END_TEST

Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, a_search_by_address_evicts_the_window_at_the_next_victim_unless_it_changed, 0, 4);
	tcase_add_loop_test(tc, a_search_by_address_passes_over_what_it_may_not_evict, 0, 5);
	tcase_add_test(tc, a_search_by_address_follows_a_run_across_its_starting_block);
	tcase_add_test(tc, a_search_by_address_that_finds_nothing_refuses_as_scan_limit_only_at_its_bound);
	tcase_add_test(tc, a_search_by_address_from_the_heaps_first_block_ends_after_one_lap);
	tcase_add_test(tc, a_search_by_address_over_a_damaged_heap_refuses_as_other);
	tcase_add_test(tc, a_search_by_address_evicts_exactly_the_first_cheapest_shortest_window);
	tcase_add_test(tc, room_for_a_shard_is_not_made_when_the_room_in_bytes_was_refused);
	tcase_add_test(tc, room_making_for_a_caller_holding_a_shard_does_not_wait_for_busy_shards);
	tcase_add_test(tc, room_making_waits_only_for_the_busy_shard_and_leaves_it_unlocked);
	tcase_add_test(tc, room_making_that_made_its_room_past_a_busy_shard_does_not_try_again);
	tcase_add_loop_test(tc, a_search_by_address_spares_an_entry_hit_twice_or_with_the_most_credit, 0, 5);
	tcase_add_test(tc, a_search_by_address_stops_at_a_window_that_costs_nothing);
	tcase_add_test(tc, a_search_by_address_keeps_the_free_block_its_window_begins_with);
	tcase_add_loop_test(tc, a_search_by_address_allocates_in_its_window_else_wherever_room_came_free, 0, 2);
	tcase_add_loop_test(tc, a_search_by_address_out_of_memory_refuses_as_other, 0, 3);
	tcase_add_test(tc, a_search_by_address_that_lost_its_room_waits_only_for_the_shards_in_its_way);
	tcase_add_test(tc, room_making_leaves_a_shard_the_caller_holds_held);
	tcase_add_test(tc, a_search_by_address_leaves_a_shard_the_caller_holds_held);
	tcase_add_test(tc, a_search_by_address_takes_one_entry_that_alone_holds_the_request);
	tcase_add_test(tc, a_search_by_address_evicts_nothing_for_the_free_blocks_of_its_window);
	tcase_add_test(tc, a_block_tagged_one_past_the_last_entry_is_pinned);
	tcase_add_test(tc, a_replaced_entry_leaves_the_eviction_lists);
	tcase_add_test(tc, ghost_admits_a_rerequested_key_to_main);
	tcase_add_test(tc, ghost_buckets_hold_their_ways);
	tcase_add_test(tc, evq_calls_with_out_of_range_arguments_change_nothing);
	tcase_add_test(tc, evq_walk_refuses_a_link_into_another_list);
	tcase_add_test(tc, small_needs_two_hits_and_main_gives_hit_entries_another_round);
	tcase_add_test(tc, a_scan_does_not_flush_the_hot_set);
	tcase_add_test(tc, main_at_exactly_its_share_leaves_the_eviction_to_the_small_fifo);
	tcase_add_test(tc, probation_moves_at_exactly_two_hits_one_hit_at_twice_the_worth_none_at_four_times);
	tcase_add_test(tc, an_unhit_entry_with_the_most_credit_stays_a_pass);
	tcase_add_loop_test(tc, a_writer_killed_putting_an_entry_on_main_has_given_it_its_credit, 0, 3);
	tcase_add_test(tc, a_writer_killed_noting_a_departure_has_not_moved_the_evicted_density);
	tcase_add_test(tc, an_admission_judges_its_reclaim_batch_by_the_budget_after_its_event);
	tcase_add_test(tc, an_entry_busy_under_its_shard_lock_is_passed_over_and_stays_on_its_list);
	tcase_add_test(tc, a_replacement_counts_the_entry_it_replaces_as_pinned);
	tcase_add_test(tc, a_lease_record_one_past_the_last_entry_pins_nothing);
	tcase_add_test(tc, fragmented_heap_publishes_an_eighth_of_the_budget);
	tcase_add_test(tc, a_search_lock_left_by_a_killed_process_is_taken_over);
	tcase_add_test(tc, leases_that_split_the_heap_refuse_with_no_room);
	tcase_add_test(tc, regression_admission_up_to_the_budget_publishes);
	tcase_add_test(tc, every_refusal_reason_is_produced_and_counted);
	tcase_add_test(tc, an_admission_whose_room_is_always_taken_gives_up_after_12_rounds);
	tcase_add_test(tc, a_search_by_address_whose_window_is_taken_after_its_reclaim_returns_eagain);
	tcase_add_test(tc, a_search_by_address_whose_closing_reclaim_outlasts_its_deadline_tries_once);
	tcase_add_test(tc, a_search_by_address_lets_its_shards_go_before_its_lock);
	tcase_add_test(tc, a_full_index_shard_refuses_as_leased);
	tcase_add_test(tc, an_admission_over_the_budget_by_unread_retired_bytes_reclaims_them_and_evicts_nothing);
	tcase_add_test(tc, an_admission_into_a_full_index_shard_reuses_a_retired_entry_and_evicts_nothing);
	tcase_add_test(tc, a_full_shard_evicts_its_oldest_small_entry_into_the_ghost_else_its_oldest_main_one);
	tcase_add_test(tc, a_full_shards_walk_reaches_exactly_its_step_bound);
	tcase_add_test(tc, an_admission_stops_waiting_for_readers_as_soon_as_its_room_is_free);
	tcase_add_test(tc, an_admission_stops_waiting_for_readers_when_nothing_retired_is_left);
	tcase_add_test(tc, an_admission_takes_the_room_a_reclaim_joins_without_a_search_by_address);
	tcase_add_test(tc, a_shards_reclaim_is_due_at_exactly_32_entries_or_a_256th_of_the_budget);
	tcase_add_test(tc, the_index_header_past_its_last_shard_is_never_read_as_a_shard);
	tcase_add_test(tc, an_admission_that_makes_room_evicts_once_and_leaves_the_dead_for_later);
	tcase_add_test(tc, an_admission_whose_room_a_dead_process_held_evicts_nothing);
	tcase_add_test(tc, room_making_tries_twice_past_shards_held_by_the_dead);
	tcase_add_test(tc, leased_entries_survive_any_pressure);
	tcase_add_loop_test(tc, writer_killed_in_the_policy_sections, 0, (int)(sizeof(kills) / sizeof(kills[0])));
	tcase_add_loop_test(tc, a_writer_killed_inside_an_admission_leaves_each_step_done_and_the_next_not, 0,
			    (int)(sizeof(admit_steps) / sizeof(admit_steps[0])));
	tcase_add_test(tc, rebuilder_killed_during_the_rebuild);
	tcase_add_test(tc, scribbled_lists_are_rebuilt_and_fsck_repairs_them);
	tcase_add_test(tc, promotions_are_published_refused_retried_and_return);
	tcase_add_test(tc, an_evicted_promotion_returns_at_its_next_fill);
	tcase_add_test(tc, fills_nobody_keeps_do_not_evict);
	tcase_add_test(tc, a_shrink_stops_after_sixteen_rounds);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(policy_suite)
