/*
 * tests/check_miss.c — every miss classified (lib/l2/miss.c): each reason produced on purpose and
 * counted under it, per stage and globally (sc_miss_stats), at both levels — an L2 lookup (never
 * stored, evicted under pressure, evicted for the budget, refused and why, not promoted, removed
 * and how, quarantined, its L3 object gone, a key collision, a corrupted entry) and a restore that
 * returned no state (never stored, its object evicted from L3, another identity's, quarantined;
 * deadlines and busy fills: tests/check_deadline.c). A key stored again forgets why it left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../lib/l3/l3.h"
#include "../shm/evq.h"
#include "../shm/mutex.h"
#include "../shm/seg.h"

static char tmpdir[64];
static struct sc_arena *arena;
static const char *arena_name;
static struct sc_stage *stage, *other;
static struct sc_l3 *l3;

static void rm_tmp(void)
{
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-miss-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp);
	arena = sc_test_arena("miss", 32ull << 20, &arena_name);
	ck_assert_int_eq(sc_stage_open(arena, "model", "state", &stage), 0);
	ck_assert_int_eq(sc_stage_open(arena, "model", "other-state", &other), 0);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
}

static void teardown(void)
{
	sc_l3_close(l3);
	sc_stage_close(other);
	sc_stage_close(stage);
	sc_test_arena_destroy(arena, arena_name);
	rm_tmp();
	sc_test_set_key_mask(~0ull, ~0ull);
}

static void toks(int32_t t[16], uint32_t k)
{
	for (int i = 0; i < 16; i++)
		t[i] = (int32_t)(k * 7919u + (uint32_t)i);
}

static void bytes(uint8_t *p, size_t n, uint32_t k)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(k * 31 + i * 7);
}

static int admit(struct sc_stage *st, uint32_t k, size_t n)
{
	uint8_t *b = malloc(n);
	bytes(b, n, k);
	int32_t t[16];
	toks(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit(st, "miss", t, 16, sc_digest(b, n), &p, SC_ORIGIN_DIRECT);
	free(b);
	return rc;
}

static int get(struct sc_stage *st, uint32_t k)
{
	int32_t t[16];
	toks(t, k);
	struct sc_lease l;
	int rc = sc_l2_get(st, "miss", t, 16, NULL, &l);
	if (rc == 0)
		sc_lease_release(&l);
	return rc;
}

static struct sc_key key_of(struct sc_stage *st, uint32_t k)
{
	int32_t t[16];
	toks(t, k);
	struct sc_key key;
	ck_assert_int_eq(sc_l2_key(st, "miss", t, 16, &key), 0);
	return key;
}

static struct sc_miss_stats ms(uint64_t stage_id)
{
	struct sc_miss_stats m;
	ck_assert_int_eq(sc_miss_stats(arena, stage_id, &m), 0);
	return m;
}

/* The L2 miss counters of @st grow by exactly one, under @reason (and @detail for REFUSED), when
 * key @k is looked up now. */
static void expect_l2_miss(struct sc_stage *st, uint32_t k, int reason, int detail)
{
	struct sc_miss_stats a = ms(sc_stage_id(st)), g = ms(0);
	ck_assert_int_lt(get(st, k), 0);
	struct sc_miss_stats b = ms(sc_stage_id(st)), h = ms(0);
	for (int r = 0; r < SC_MISS_MAX; r++) {
		uint64_t want = r == reason;
		ck_assert_msg(b.l2[r] - a.l2[r] == want, "key %u: reason %s counted %llu (want %s)", k,
			      sc_miss_reason_name(r), (unsigned long long)(b.l2[r] - a.l2[r]), sc_miss_reason_name(reason));
		ck_assert_uint_eq(h.l2[r] - g.l2[r], want);
	}
	if (reason == SC_MISS_REFUSED)
		ck_assert_uint_eq(b.l2_refused[detail] - a.l2_refused[detail], 1);
}

static void put_l3(uint32_t k, size_t n, const char *model, const char *state, struct sc_location *loc)
{
	uint8_t *b = malloc(n);
	bytes(b, n, k);
	int32_t t[16];
	toks(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .model_identity = model, .state_identity = state, .ns = "miss", .tokens = t,
				    .token_count = 16, .payload = &p };
	ck_assert_int_eq(sc_l3_put(l3, &a, loc), 0);
	free(b);
}

static int restore(struct sc_stage *st, uint32_t k, struct sc_restore *r)
{
	int32_t t[16];
	toks(t, k);
	return sc_restore(st, l3, "miss", t, 16, 0, r);
}

/* A restore of key @k returns @rc with no state, counted once under @reason. */
static void expect_restore_miss(uint32_t k, int rc, int reason)
{
	struct sc_miss_stats a = ms(sc_stage_id(stage));
	struct sc_restore r;
	ck_assert_int_eq(restore(stage, k, &r), rc);
	ck_assert_int_eq(r.miss_reason, reason);
	struct sc_miss_stats b = ms(sc_stage_id(stage));
	for (int i = 0; i < SC_MISS_MAX; i++)
		ck_assert_msg(b.restore[i] - a.restore[i] == (uint64_t)(i == reason), "restore of %u: %s counted %llu",
			      k, sc_miss_reason_name(i), (unsigned long long)(b.restore[i] - a.restore[i]));
}

/* ---- L2 lookups ---- */

START_TEST(every_l2_miss_says_why)
{
	/* never stored */
	expect_l2_miss(stage, 1, SC_MISS_NEVER_STORED, 0);
	/* removed: explicitly, invalidated, cleared */
	ck_assert_int_eq(admit(stage, 2, 4096), 0);
	ck_assert_int_eq(sc_l2_remove(stage, key_of(stage, 2)), 0);
	expect_l2_miss(stage, 2, SC_MISS_REMOVED, 0);
	ck_assert_int_eq(admit(stage, 3, 4096), 0);
	uint8_t b[4096];
	bytes(b, sizeof(b), 3);
	ck_assert_int_eq(sc_l2_invalidate_digest(arena, sc_digest(b, sizeof(b))), 1);
	expect_l2_miss(stage, 3, SC_MISS_REMOVED, 0);
	/* refused: larger than the budget */
	ck_assert_int_eq(sc_l2_shrink_to(arena, 1 << 20), 0);
	ck_assert_int_eq(admit(stage, 4, 2 << 20), -E2BIG);
	expect_l2_miss(stage, 4, SC_MISS_REFUSED, SC_L2_REFUSE_OVER_BUDGET);
	/* evicted for the budget */
	ck_assert_int_eq(sc_l2_shrink_to(arena, 0), 0);
	for (uint32_t k = 10; k < 20; k++)
		ck_assert_int_eq(admit(stage, k, 64 << 10), 0);
	ck_assert_int_eq(sc_l2_shrink_to(arena, 256 << 10), 0);
	uint32_t gone = 0;
	for (uint32_t k = 10; k < 20 && !gone; k++)
		if (get(stage, k) < 0)
			gone = k;
	ck_assert_uint_ne(gone, 0); /* (that lookup counted it already: look again) */
	expect_l2_miss(stage, gone, SC_MISS_EVICTED_BUDGET, 0);
	/* evicted under pressure: a small budget, then more admissions */
	for (uint32_t k = 100; k < 140; k++)
		ck_assert_int_eq(admit(stage, k, 64 << 10), 0);
	ck_assert_uint_gt(sc_l2_footprint(arena, 64 << 10, 0, 16) * 40, 256 << 10);
	expect_l2_miss(stage, 100, SC_MISS_EVICTED_PRESSURE, 0);
	/* stored again: the departure is forgotten */
	ck_assert_int_eq(sc_l2_shrink_to(arena, 0), 0);
	ck_assert_int_eq(admit(stage, 2, 4096), 0);
	ck_assert_int_eq(get(stage, 2), 0);
	/* a corrupted entry */
	ck_assert_int_eq(admit(stage, 5, 4096), 0);
	struct sc_key key = key_of(stage, 5);
	struct shm_index_entry *e = sc_test_l2_entry(arena, key);
	ck_assert_ptr_nonnull(e);
	e->meta = (e->meta & ~0xffu) | 77; /* no such payload kind */
	expect_l2_miss(stage, 5, SC_MISS_CORRUPT, 0);
	/* the other stage's misses are its own */
	struct sc_miss_stats o = ms(sc_stage_id(other));
	for (int r = 0; r < SC_MISS_MAX; r++)
		ck_assert_uint_eq(o.l2[r], 0);
	expect_l2_miss(other, 2, SC_MISS_NEVER_STORED, 0);
	/* names */
	for (int r = 0; r < SC_MISS_COUNT; r++)
		ck_assert_str_ne(sc_miss_reason_name(r), "?");
	ck_assert_str_eq(sc_miss_reason_name(SC_MISS_COUNT), "?");
	ck_assert_str_eq(sc_miss_reason_name(-1), "?");
	for (int d = 0; d < SC_DEADLINE_COUNT; d++)
		ck_assert_str_ne(sc_deadline_detail_name(d), "?");
	ck_assert_str_eq(sc_deadline_detail_name(SC_DEADLINE_COUNT), "?");
	ck_assert_str_eq(sc_deadline_detail_name(-1), "?");
	ck_assert_int_eq(sc_miss_stats(arena, 12345, &o), -ENOENT);
	ck_assert_int_eq(sc_miss_stats(NULL, 0, &o), -EINVAL);
	ck_assert_int_eq(sc_miss_stats(arena, 0, NULL), -EINVAL);
}
END_TEST

START_TEST(a_longest_prefix_miss_says_why_too)
{
	int32_t t[512];
	for (int i = 0; i < 512; i++)
		t[i] = i * 3 + 1;
	uint8_t b[4096];
	bytes(b, sizeof(b), 9);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	ck_assert_int_eq(sc_l2_admit(stage, "lp", t, 512, sc_digest(b, sizeof(b)), &p, 0), 0);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(stage, "lp", t, 512, &k), 0);
	ck_assert_int_eq(sc_l2_remove(stage, k), 0);
	struct sc_miss_stats a = ms(0);
	uint32_t len;
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_longest_prefix(stage, "lp", t, 512, 256, &len, &l), -ENOENT);
	struct sc_miss_stats m = ms(0);
	ck_assert_uint_eq(m.l2[SC_MISS_REMOVED] - a.l2[SC_MISS_REMOVED], 1); /* its longest prefix was removed */
}
END_TEST

/* Through restore: a first fill is not promoted (L2 says so), a promoted mirror quarantined or its
 * object gone from L3 says so, a stale mirror is removed as such. */
START_TEST(restore_side_l2_misses_say_why)
{
	struct sc_location loc;
	struct sc_restore r;
	put_l3(20, 8192, "model", "state", &loc);
	ck_assert_int_eq(restore(stage, 20, &r), 16); /* first fill: not promoted */
	sc_restore_release(&r);
	int32_t t[16];
	toks(t, 20);
	expect_l2_miss(stage, 20, SC_MISS_NOT_PROMOTED, 0);
	struct sc_miss_stats m = ms(sc_stage_id(stage));
	(void)m;
	ck_assert_int_eq(restore(stage, 20, &r), 16); /* second: promoted */
	ck_assert_int_eq(r.promoted, 1);
	sc_restore_release(&r);
	ck_assert_int_eq(get(stage, 20), 0);
	/* its object vanished from L3 (found gone under a fill, another host's janitor): mirrors go */
	l3ix_vanished(arena, loc.digest);
	expect_l2_miss(stage, 20, SC_MISS_EVICTED_JANITOR, 0);
	/* quarantined: a verification of the store finds the object bad */
	put_l3(21, 8192, "model", "state", &loc);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(restore(stage, 21, &r), 16);
		sc_restore_release(&r);
	}
	ck_assert_int_eq(get(stage, 21), 0);
	char rel[48], path[256];
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t x = 0x5a;
	ck_assert_int_eq(pwrite(fd, &x, 1, L3_HDR_BLOCK + 100), 1);
	close(fd);
	ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 1);
	expect_l2_miss(stage, 21, SC_MISS_QUARANTINED, 0);
	/* a stale mirror (the durable copy says another digest): removed by the lookup, as such */
	ck_assert_int_eq(admit(stage, 22, 4096), 0);
	toks(t, 22);
	struct sc_location wrong = { .token_count = 16, .digest = { 1, 2 } };
	struct sc_lease l;
	struct sc_miss_stats a = ms(sc_stage_id(stage));
	ck_assert_int_eq(sc_l2_get(stage, "miss", t, 16, &wrong, &l), -ENOENT);
	struct sc_miss_stats b = ms(sc_stage_id(stage));
	ck_assert_uint_eq(b.l2[SC_MISS_REMOVED] - a.l2[SC_MISS_REMOVED], 1);
	expect_l2_miss(stage, 22, SC_MISS_REMOVED, 0);
	/* refused: a fill that would be promoted finds no room (every entry leased) and is served
	 * from process memory; a lookup of its key then says why */
	put_l3(23, 8192, "model", "state", &loc);
	ck_assert_int_eq(restore(stage, 23, &r), 16); /* first fill: not promoted */
	sc_restore_release(&r);
	ck_assert_int_eq(sc_l2_shrink_to(arena, 128 << 10), 0);
	struct sc_lease held[SC_LEASES_MAX];
	int nheld = 0;
	for (uint32_t k = 200; nheld < SC_LEASES_MAX && admit(stage, k, 4096) == 0; k++) {
		toks(t, k);
		ck_assert_int_eq(sc_l2_get(stage, "miss", t, 16, NULL, &held[nheld++]), 0);
	}
	ck_assert_int_eq(sc_l2_last_refusal(stage), SC_L2_REFUSE_LEASED);
	ck_assert_int_eq(restore(stage, 23, &r), 16); /* the second would be promoted: no room */
	ck_assert_int_eq(r.promoted, 0);
	ck_assert_int_eq(r.in_arena, 0);
	sc_restore_release(&r);
	expect_l2_miss(stage, 23, SC_MISS_REFUSED, SC_L2_REFUSE_LEASED);
	while (nheld)
		sc_lease_release(&held[--nheld]);
	ck_assert_int_eq(sc_l2_shrink_to(arena, 0), 0);
}
END_TEST

/* ---- restores with no state ---- */

START_TEST(every_restore_miss_says_why)
{
	struct sc_location loc;
	struct sc_restore r;
	/* nothing stored for any prefix */
	expect_restore_miss(30, -ENOENT, SC_MISS_NEVER_STORED);
	/* another model's or state's object under the same tokens */
	put_l3(31, 8192, "model", "other-state", &loc);
	expect_restore_miss(31, -ENOENT, SC_MISS_IDENTITY);
	/* quarantined: the fill finds the object bad */
	put_l3(32, 8192, "model", "state", &loc);
	char rel[48], path[256];
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t x = 0xa5;
	ck_assert_int_eq(pwrite(fd, &x, 1, L3_HDR_BLOCK + 7), 1);
	close(fd);
	expect_restore_miss(32, -EBADMSG, SC_MISS_QUARANTINED);
	/* evicted from L3 (the store's budget, a janitor): the index remembers the prefix went */
	put_l3(33, 8192, "model", "state", &loc);
	ck_assert_int_eq(restore(stage, 33, &r), 16);
	sc_restore_release(&r);
	ck_assert_int_ge(sc_l3_evict_to(l3, 0), 1);
	expect_restore_miss(33, -ENOENT, SC_MISS_EVICTED_JANITOR);
	/* a restore that returns state counts no miss */
	put_l3(34, 8192, "model", "state", &loc);
	struct sc_miss_stats a = ms(0);
	ck_assert_int_eq(restore(stage, 34, &r), 16);
	ck_assert_int_eq(r.miss_reason, -1);
	sc_restore_release(&r);
	struct sc_miss_stats b = ms(0);
	for (int i = 0; i < SC_MISS_MAX; i++)
		ck_assert_uint_eq(b.restore[i], a.restore[i]);
}
END_TEST

/* A key collision (keys weakened so that two prefixes share one) is a miss that says so. */
START_TEST(a_key_collision_is_a_miss_that_says_so)
{
	teardown();
	sc_test_set_key_mask(0, 0);
	setup();
	ck_assert_int_eq(admit(stage, 40, 4096), 0);
	expect_l2_miss(stage, 41, SC_MISS_COLLISION, 0);
}
END_TEST

/* A deadline detail outside the known ones (a caller's bug, or a newer caller's reason) counts the
 * restore miss and no detail: no other counter of the record moves (the one after the detail
 * array is the low-benefit refusals'). A detail given with another reason is not a deadline's. */
START_TEST(a_deadline_detail_out_of_range_moves_no_other_counter)
{
	struct l2_misses *g = &l2_stats_region(arena)->misses_global;
	uint64_t before[sizeof(*g) / 8], after[sizeof(*g) / 8];
	for (int reason = 0; reason < SC_MISS_COUNT; reason++) {
		uint32_t detail = reason == SC_MISS_DEADLINE ? L2_DEADLINE_SLOTS : SC_DEADLINE_PAST;
		memcpy(before, (const void *)g, sizeof(before));
		l2_count_restore_miss(arena, 0, reason, detail);
		l2_count_restore_miss(arena, 0, reason, detail + (reason == SC_MISS_DEADLINE));
		memcpy(after, (const void *)g, sizeof(after));
		size_t moved = offsetof(struct l2_misses, restore[reason]) / 8;
		for (size_t w = 0; w < sizeof(before) / 8; w++)
			ck_assert_msg(after[w] - before[w] == 2 * (w == moved), "reason %d detail %u: word %zu moved by %llu",
				      reason, detail, w, (unsigned long long)(after[w] - before[w]));
	}
	struct sc_miss_stats m = ms(0);
	ck_assert_uint_eq(m.restore[SC_MISS_DEADLINE], 2);
	for (int d = 0; d < 8; d++)
		ck_assert_uint_eq(m.deadline[d], 0);
	/* a known detail is counted under it, and the copy-out of each array ends where it does */
	l2_count_restore_miss(arena, 0, SC_MISS_DEADLINE, 0);
	m = ms(0);
	ck_assert_uint_eq(m.deadline[0], 1);
	for (int i = SC_L2_REFUSE_REASONS; i < SC_MISS_MAX; i++)
		ck_assert_uint_eq(m.l2_refused[i], 0);
	for (int i = SC_DEADLINE_COUNT; i < 8; i++)
		ck_assert_uint_eq(m.deadline[i], 0);
}
END_TEST

/* Reasons and details outside the known ones, counted by the internal counting calls: an L2 miss
 * of an unknown reason is counted as corrupt, a refusal miss of an unknown refusal as "other"
 * (its l2_refused[] still sum to l2[REFUSED]), a refusal of an unknown reason as "other"; a
 * restore miss of an unknown reason is not counted. No other counter moves, and the arrays of
 * sc_miss_stats past the known reasons stay zero while the counters after each array are not. */
START_TEST(unknown_reasons_are_counted_as_the_nearest_known_one)
{
	struct l2_misses *g = &l2_stats_region(arena)->misses_global;
	struct sc_miss_stats before = ms(0), own0 = ms(sc_stage_id(stage)), m;
	uint64_t words[sizeof(*g) / 8], now[sizeof(*g) / 8];
	memcpy(words, (const void *)g, sizeof(words));
	l2_count_restore_miss(arena, sc_stage_id(stage), SC_MISS_COUNT, 0);
	l2_count_restore_miss(arena, sc_stage_id(stage), -1, 0);
	memcpy(now, (const void *)g, sizeof(now));
	ck_assert_int_eq(memcmp(words, now, sizeof(now)), 0);
	static const int reasons[] = { SC_MISS_COUNT, -1, SC_MISS_MAX };
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		l2_count_l2_miss(stage, reasons[i], 0);
	static const uint32_t details[] = { SC_L2_REFUSE_REASONS, SC_L2_REFUSE_REASONS + 1, UINT32_MAX,
					    SC_L2_REFUSE_LOW_BENEFIT };
	for (size_t i = 0; i < sizeof(details) / sizeof(details[0]); i++)
		l2_count_l2_miss(stage, SC_MISS_REFUSED, details[i]);
	stage->local_misses += 7; /* the lookup that classifies a miss counts it too (lib/l2/read.c) */
	m = ms(0);
	ck_assert_uint_eq(m.l2[SC_MISS_CORRUPT], before.l2[SC_MISS_CORRUPT] + 3);
	ck_assert_uint_eq(m.l2[SC_MISS_REFUSED], before.l2[SC_MISS_REFUSED] + 4);
	ck_assert_uint_eq(m.l2_refused[SC_L2_REFUSE_OTHER], before.l2_refused[SC_L2_REFUSE_OTHER] + 3);
	ck_assert_uint_eq(m.l2_refused[SC_L2_REFUSE_LOW_BENEFIT], before.l2_refused[SC_L2_REFUSE_LOW_BENEFIT] + 1);
	struct sc_miss_stats own = ms(sc_stage_id(stage));
	ck_assert_uint_eq(own.l2_refused[SC_L2_REFUSE_OTHER], own0.l2_refused[SC_L2_REFUSE_OTHER] + 3);
	for (int r = 0; r < SC_MISS_COUNT; r++) {
		ck_assert_uint_eq(m.restore[r], before.restore[r]);
		if (r != SC_MISS_CORRUPT && r != SC_MISS_REFUSED)
			ck_assert_uint_eq(m.l2[r], before.l2[r]);
	}
	/* the words after each array are not zero now: a copy-out one past an array would show them */
	l2_count_restore_miss(arena, 0, SC_MISS_NEVER_STORED, 0); /* restore[0], just after l2[] */
	l2_count_restore_miss(arena, 0, SC_MISS_DEADLINE, 0);     /* deadline[0], just after refused[] */
	m = ms(0);
	ck_assert_uint_gt(m.l2_refused[0] + m.l2_refused[SC_L2_REFUSE_OTHER], 0); /* refused[], after restore[] */
	for (int r = SC_MISS_COUNT; r < SC_MISS_MAX; r++) {
		ck_assert_uint_eq(m.l2[r], 0);
		ck_assert_uint_eq(m.restore[r], 0);
	}
	for (int r = SC_L2_REFUSE_REASONS; r < SC_MISS_MAX; r++)
		ck_assert_uint_eq(m.l2_refused[r], 0);
	/* a refusal of an unknown reason is counted as "other", globally and for its stage */
	struct sc_l2_stats s0, s1, t0, t1;
	ck_assert_int_eq(sc_l2_stats(arena, NULL, &s0), 0);
	ck_assert_int_eq(sc_l2_stats(arena, stage, &t0), 0);
	ck_assert_int_eq(l2_refuse(arena, sc_stage_id(stage), 10, -EINVAL, SC_L2_REFUSE_REASONS), -EINVAL);
	ck_assert_int_eq(l2_refuse(arena, sc_stage_id(stage), 10, -EINVAL, -1), -EINVAL);
	ck_assert_int_eq(sc_l2_stats(arena, NULL, &s1), 0);
	ck_assert_int_eq(sc_l2_stats(arena, stage, &t1), 0);
	ck_assert_uint_eq(s1.refused[SC_L2_REFUSE_OTHER], s0.refused[SC_L2_REFUSE_OTHER] + 2);
	ck_assert_uint_eq(t1.refused[SC_L2_REFUSE_OTHER], t0.refused[SC_L2_REFUSE_OTHER] + 2);
	ck_assert_uint_eq(s1.admission_rejects, s0.admission_rejects + 2);
	ck_assert_uint_eq(s1.refused_low_benefit, s0.refused_low_benefit);
	for (int r = 0; r < SC_L2_REFUSE_COUNT; r++)
		if (r != SC_L2_REFUSE_OTHER)
			ck_assert_uint_eq(s1.refused[r], s0.refused[r]);
	/* the low-benefit count follows the deadline array: the copy-out of that array stops before it */
	ck_assert_int_eq(l2_refuse(arena, sc_stage_id(stage), 10, -ENOSPC, SC_L2_REFUSE_LOW_BENEFIT), -ENOSPC);
	ck_assert_int_eq(sc_l2_stats(arena, NULL, &s1), 0);
	ck_assert_uint_eq(s1.refused_low_benefit, s0.refused_low_benefit + 1);
	m = ms(0);
	for (int r = SC_DEADLINE_COUNT; r < 8; r++)
		ck_assert_uint_eq(m.deadline[r], 0);
}
END_TEST

/* A departure note with a reason that does not exist (SC_MISS_COUNT and beyond, or negative) is
 * dropped: the note already kept for that key still explains its miss. */
START_TEST(a_departure_with_an_unknown_reason_keeps_the_note_before_it)
{
	struct sc_key k = key_of(stage, 77);
	uint64_t fp = l2_key_fp(k.lo, k.hi);
	uint32_t detail = 99;
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_NEVER_STORED);
	l2_depart_note(arena, fp, SC_MISS_REMOVED, 3);
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_REMOVED);
	ck_assert_uint_eq(detail, 3);
	static const int bad[] = { SC_MISS_COUNT, SC_MISS_COUNT + 1, SC_MISS_MAX, -1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		l2_depart_note(arena, fp, bad[i], 1);
		ck_assert_msg(l2_depart_reason(arena, fp, &detail) == SC_MISS_REMOVED && detail == 3,
			      "a note with reason %d replaced the one kept", bad[i]);
	}
	expect_l2_miss(stage, 77, SC_MISS_REMOVED, 0);
	/* the first known reason is a note like any other: it replaces the one kept */
	l2_depart_note(arena, fp, SC_MISS_NEVER_STORED, 0);
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_NEVER_STORED);
	ck_assert_uint_eq(detail, 0);
	l2_depart_note(arena, fp, SC_MISS_COUNT - 1, 2); /* and so does the last */
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_COUNT - 1);
	ck_assert_uint_eq(detail, 2);
	/* a note refused for its reason touches nothing shared, not even the table's lock: a lock
	 * a dead process left is still its when that note returns (the next real note takes it over) */
	struct shm_evq *q = l2_q(arena);
	sc_test_wait_killed(sc_test_locker(arena_name, &q->hdr->mu, 'k', 0));
	uint32_t held = atomic_load(&q->hdr->mu.word);
	ck_assert_uint_ne(held, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		l2_depart_note(arena, fp, bad[i], 1);
	ck_assert_uint_eq(atomic_load(&q->hdr->mu.word), held);
	l2_depart_note(arena, fp, SC_MISS_REMOVED, 4);
	ck_assert_uint_eq(atomic_load(&q->hdr->mu.word), 0);
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_REMOVED);
	ck_assert_uint_eq(detail, 4);
	/* a table whose lock cannot be taken (scribbled) gets no note, and its lock word stays */
	uint32_t magic = q->hdr->mu.magic;
	q->hdr->mu.magic = magic ^ 1;
	atomic_store(&q->hdr->mu.word, 5);
	l2_depart_note(arena, fp, SC_MISS_QUARANTINED, 6);
	ck_assert_uint_eq(atomic_load(&q->hdr->mu.word), 5);
	atomic_store(&q->hdr->mu.word, 0);
	q->hdr->mu.magic = magic;
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_REMOVED);
	ck_assert_uint_eq(detail, 4);
}
END_TEST

/* A handle that has opened no stage yet (its L2 views not taken: an L3 janitor's) notes departures
 * (it takes the views first) and reads none until it has them. */
START_TEST(a_handle_without_a_stage_notes_departures)
{
	struct sc_key k = key_of(stage, 78);
	uint64_t fp = l2_key_fp(k.lo, k.hi);
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(arena_name, &b), 0);
	ck_assert_int_eq(b->l2_ready, 0);
	l2_depart_note(arena, fp, SC_MISS_REMOVED, 2);
	uint32_t detail = 99;
	ck_assert_int_eq(l2_depart_reason(b, fp, &detail), SC_MISS_NEVER_STORED); /* no views: nothing read */
	ck_assert_uint_eq(detail, 0);
	l2_depart_note(b, fp, SC_MISS_EVICTED_JANITOR, 5);
	ck_assert_int_eq(b->l2_ready, 1);
	ck_assert_int_eq(l2_depart_reason(b, fp, &detail), SC_MISS_EVICTED_JANITOR);
	ck_assert_uint_eq(detail, 5);
	ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_EVICTED_JANITOR);
	sc_arena_close(b);
	/* a note of a reason this library does not know (a newer one's, or damage) reads as none */
	struct shm_evq *q = l2_q(arena);
	for (uint32_t stored = SC_MISS_COUNT + 1; stored <= SC_MISS_COUNT + 2; stored++) {
		ck_assert_int_eq(shm_evq_lock(q), 0);
		shm_evq_depart_note_locked(q, fp, stored, 3);
		shm_evq_unlock(q);
		ck_assert_int_eq(l2_depart_reason(arena, fp, &detail), SC_MISS_NEVER_STORED);
		ck_assert_uint_eq(detail, 0);
	}
}
END_TEST

/* A handle whose first L2 call stopped half-way (its queue view taken, then the segment table
 * refused: scribbled) reads no departure note and no statistics: its views are not ready, whatever
 * they hold. */
START_TEST(a_handle_not_ready_reads_no_departure)
{
	struct sc_arena_opts o = { .size_bytes = 32ull << 20, .huge = SC_HUGE_OFF, .segment_bytes = 64 << 10 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("missseg", &o, &name), *b;
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "model", "state", &st), 0);
	struct sc_key k;
	int32_t t[2] = { 1, 2 };
	ck_assert_int_eq(sc_l2_key(st, "", t, 2, &k), 0);
	uint64_t fp = l2_key_fp(k.lo, k.hi);
	l2_depart_note(a, fp, SC_MISS_REMOVED, 3);
	uint64_t *magic = (uint64_t *)(void *)(a->shm->base + shm_seg_table_off(a->shm));
	ck_assert_uint_eq(*magic, SHM_SEG_MAGIC);
	*magic ^= 1;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_eq(sc_l2_clear(b), -EBADMSG); /* the views stop at the segment table */
	ck_assert_int_eq(b->l2_ready, 0);
	struct sc_miss_stats m;
	ck_assert_int_eq(sc_miss_stats(b, 0, &m), -EBADMSG); /* and so do its statistics */
	uint32_t detail = 99;
	ck_assert_int_eq(l2_depart_reason(b, fp, &detail), SC_MISS_NEVER_STORED);
	ck_assert_uint_eq(detail, 0);
	*magic ^= 1;
	ck_assert_int_eq(sc_l2_clear(b), 0);
	ck_assert_int_eq(l2_depart_reason(b, fp, &detail), SC_MISS_REMOVED);
	ck_assert_uint_eq(detail, 3);
	sc_arena_close(b);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Where a listener learns of a departure ("events.append.writing"), the note of its key as it is. */
static uint64_t heard_fp, heard_word;
static int heard;

static void at_event_write(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "events.append.writing")) {
		heard_word = shm_evq_depart_find(l2_q(arena), heard_fp);
		heard++;
	}
}

/* A key's departure is noted before the listener hears of it: a listener that looks a removed,
 * invalidated or evicted key up as soon as it reads the event is told why it left, never "never
 * stored". */
START_TEST(a_departure_is_noted_before_the_listener_hears_of_it)
{
	struct sc_events *ev;
	ck_assert_int_eq(sc_events_open(arena, &ev), 0);
	static const int how[] = { SC_MISS_REMOVED, SC_MISS_REMOVED, SC_MISS_EVICTED_BUDGET };
	for (uint32_t w = 0; w < 3; w++) {
		uint32_t k = 90 + w;
		ck_assert_int_eq(admit(stage, k, 4096), 0);
		struct sc_key key = key_of(stage, k);
		heard_fp = l2_key_fp(key.lo, key.hi);
		heard = 0;
		uint8_t b[4096];
		bytes(b, sizeof(b), k);
		sc_sched_set(at_event_write, NULL);
		if (w == 0)
			ck_assert_int_eq(sc_l2_remove(stage, key), 0);
		else if (w == 1)
			ck_assert_int_eq(sc_l2_invalidate_digest(arena, sc_digest(b, sizeof(b))), 1);
		else
			ck_assert_int_eq(sc_l2_shrink_to(arena, 1), 0);
		sc_sched_set(NULL, NULL);
		ck_assert_msg(heard == 1, "way %u: %d events written", w, heard);
		ck_assert_msg(SHM_EVQ_DEPART_REASON(heard_word) == (uint32_t)how[w] + 1,
			      "way %u: the listener heard of the departure before its note (%llx)", w,
			      (unsigned long long)heard_word);
		expect_l2_miss(stage, k, how[w], 0);
	}
	sc_events_close(ev);
}
END_TEST

/* Departure notes written ("evq.depart.noting"), and those written without the queue's lock. */
static int notes, notes_unlocked;

static void at_depart_note(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "evq.depart.noting")) {
		notes++;
		notes_unlocked += atomic_load(&l2_q(arena)->hdr->mu.word) == 0;
	}
}

/* Every departure note is written under the queue's lock (two writers never write one slot at
 * once): a refusal's, a removal's, an eviction's. */
START_TEST(departure_notes_are_written_under_the_queue_lock)
{
	ck_assert_int_eq(admit(stage, 95, 4096), 0);
	ck_assert_int_eq(admit(stage, 96, 4096), 0);
	struct sc_key k = key_of(stage, 97);
	notes = notes_unlocked = 0;
	sc_sched_set(at_depart_note, NULL);
	l2_depart_note(arena, l2_key_fp(k.lo, k.hi), SC_MISS_REFUSED, SC_L2_REFUSE_OTHER);
	ck_assert_int_eq(sc_l2_remove(stage, key_of(stage, 95)), 0);
	ck_assert_int_eq(sc_l2_shrink_to(arena, 1), 0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_ge(notes, 3);
	ck_assert_int_eq(notes_unlocked, 0);
	expect_l2_miss(stage, 95, SC_MISS_REMOVED, 0);
	expect_l2_miss(stage, 96, SC_MISS_EVICTED_BUDGET, 0);
	expect_l2_miss(stage, 97, SC_MISS_REFUSED, SC_L2_REFUSE_OTHER);
}
END_TEST

Suite *miss_suite(void)
{
	Suite *s = suite_create("miss");
	TCase *tc = tcase_create("miss");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_l2_miss_says_why);
	tcase_add_test(tc, a_longest_prefix_miss_says_why_too);
	tcase_add_test(tc, restore_side_l2_misses_say_why);
	tcase_add_test(tc, every_restore_miss_says_why);
	tcase_add_test(tc, a_key_collision_is_a_miss_that_says_so);
	tcase_add_test(tc, a_deadline_detail_out_of_range_moves_no_other_counter);
	tcase_add_test(tc, a_departure_with_an_unknown_reason_keeps_the_note_before_it);
	tcase_add_test(tc, unknown_reasons_are_counted_as_the_nearest_known_one);
	tcase_add_test(tc, a_departure_is_noted_before_the_listener_hears_of_it);
	tcase_add_test(tc, departure_notes_are_written_under_the_queue_lock);
	tcase_add_test(tc, a_handle_without_a_stage_notes_departures);
	tcase_add_test(tc, a_handle_not_ready_reads_no_departure);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(miss_suite)
