/*
 * tests/check_shm_obs.c — the promotion observation table (shm/obs.c) on its own, through
 * shm/obs.h on a real arena: the header checks against hostile values, the open-addressing
 * table (insert, find, backward-shift removal without tombstones, a full table), and the repair
 * that the next locker runs after a holder died mid-update (holes, duplicates, garbage flags).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/obs.h"

#define OBS_CAP 16u /* the arena's obs_entries: 32 hash slots */

static struct sc_arena *obs_arena(const char **name)
{
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .obs_entries = OBS_CAP };
	return sc_test_arena_opts("obs", &o, name);
}

static struct shm_obs_hdr *table(struct sc_arena *a)
{
	struct shm_obs_hdr *h = shm_obs_table(a->shm);
	ck_assert_ptr_nonnull(h);
	return h;
}

/* The home slot of (stage, lo, hi), found by inserting it into an empty table. */
static uint32_t home_of(struct shm_obs_hdr *h, uint64_t stage, uint64_t lo, uint64_t hi)
{
	struct shm_obs_entry *e = shm_obs_insert_locked(h, stage, lo, hi);
	ck_assert_ptr_nonnull(e);
	uint32_t i = (uint32_t)(e - shm_obs_entries(h));
	shm_obs_remove_locked(h, e);
	return i;
}

/* Digests (stage 1, lo, 0) whose home slot is @home: @n of them into @lo_out. */
static void colliding(struct shm_obs_hdr *h, uint32_t home, uint64_t *lo_out, int n)
{
	int got = 0;
	for (uint64_t lo = 1; got < n && lo < 100000; lo++)
		if (home_of(h, 1, lo, 0) == home)
			lo_out[got++] = lo;
	ck_assert_int_eq(got, n);
}

START_TEST(test_header_is_checked)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	ck_assert_uint_eq(h->capacity, OBS_CAP);
	ck_assert_uint_eq(h->slots, 2 * OBS_CAP);
	ck_assert_uint_eq(h->claims, SHM_OBS_CLAIMS);
	ck_assert_uint_eq(h->count, 0);
	struct shm_obs_hdr saved = *h;
	/* each hostile value on its own makes the table unusable, never a wild pointer */
	h->magic ^= 1;
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	h->claims = SHM_OBS_CLAIMS + 1;
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	h->slots = 0;
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	h->slots = 2 * OBS_CAP + 2; /* not a power of two */
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	h->capacity = 0;
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	h->capacity = h->slots; /* chains would grow without bound */
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	h->slots = 1u << 30; /* beyond the region */
	h->capacity = 1;
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*h = saved;
	ck_assert_ptr_eq(shm_obs_table(a->shm), h);
	/* a region of exactly the table's bytes holds it; one byte less does not */
	uint64_t *rsize = &a->shm->hv.regions[SHM_REGION_OBS].size, keep = *rsize;
	*rsize = shm_obs_bytes(OBS_CAP);
	ck_assert_uint_eq(*rsize, SHM_OBS_HDR_BYTES + 2 * OBS_CAP * 64ull + SHM_OBS_CLAIMS * 64ull);
	ck_assert_ptr_eq(shm_obs_table(a->shm), h);
	*rsize = shm_obs_bytes(OBS_CAP) - 1;
	ck_assert_ptr_null(shm_obs_table(a->shm));
	*rsize = keep;
	ck_assert_ptr_eq(shm_obs_table(a->shm), h);
	/* formatting for more entries than the region holds is refused, and the table is left as it
	 * was (never a header that promises slots past the region) */
	uint32_t entries = a->shm->hv.obs_entries;
	struct shm_obs_entry *e = shm_obs_insert_locked(h, 1, 2, 3);
	ck_assert_ptr_nonnull(e);
	a->shm->hv.obs_entries = 1u << 24;
	ck_assert_int_eq(shm_obs_format(a->shm), -EINVAL);
	a->shm->hv.obs_entries = entries;
	ck_assert_ptr_eq(shm_obs_table(a->shm), h);
	ck_assert_uint_eq(h->count, 1);
	ck_assert_uint_eq(h->slots, 2 * OBS_CAP);
	ck_assert_ptr_eq(shm_obs_find_locked(h, 1, 2, 3), e);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_insert_find_remove)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, 2, 3));
	struct shm_obs_entry *e = shm_obs_insert_locked(h, 1, 2, 3);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->flags, SHM_OBS_USED);
	ck_assert_uint_eq(e->hits, 0);
	ck_assert_uint_eq(h->count, 1);
	e->hits = 7;
	ck_assert_ptr_eq(shm_obs_find_locked(h, 1, 2, 3), e);
	/* every part of the identity counts */
	ck_assert_ptr_null(shm_obs_find_locked(h, 2, 2, 3));
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, 3, 3));
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, 2, 4));
	shm_obs_remove_locked(h, e);
	ck_assert_uint_eq(h->count, 0);
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, 2, 3));
	/* removal leaves an empty slot, not a tombstone */
	for (uint32_t i = 0; i < h->slots; i++)
		ck_assert_uint_eq(shm_obs_entries(h)[i].flags, 0);
	shm_obs_unlock(a->shm, h);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Removing from the middle of a probe chain shifts the rest back: all stay reachable. */
START_TEST(test_backward_shift_keeps_chains)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	uint32_t home = h->slots - 2; /* the chain wraps around the end of the table */
	uint64_t lo[5];
	colliding(h, home, lo, 5);
	struct shm_obs_entry *t = shm_obs_entries(h);
	for (int i = 0; i < 5; i++) {
		struct shm_obs_entry *e = shm_obs_insert_locked(h, 1, lo[i], 0);
		ck_assert_ptr_eq(e, &t[(home + (uint32_t)i) & (h->slots - 1)]);
		e->hits = (uint32_t)i + 100;
	}
	shm_obs_remove_locked(h, shm_obs_find_locked(h, 1, lo[1], 0));
	ck_assert_uint_eq(h->count, 4);
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, lo[1], 0));
	for (int i = 0; i < 5; i++) {
		if (i == 1)
			continue;
		struct shm_obs_entry *e = shm_obs_find_locked(h, 1, lo[i], 0);
		ck_assert_msg(e != NULL, "member %d of the chain lost after a removal", i);
		ck_assert_uint_eq(e->hits, (uint32_t)i + 100);
	}
	/* the chain is contiguous again: its last slot is empty now */
	ck_assert_uint_eq(t[(home + 4) & (h->slots - 1)].flags, 0);
	/* the chain's head removed: the next member, whose home is the hole itself, moves into it */
	shm_obs_remove_locked(h, shm_obs_find_locked(h, 1, lo[0], 0));
	ck_assert_uint_eq(h->count, 3);
	for (int i = 2; i < 5; i++) {
		struct shm_obs_entry *e = shm_obs_find_locked(h, 1, lo[i], 0);
		ck_assert_msg(e != NULL, "member %d of the chain lost after its head's removal", i);
		ck_assert_ptr_eq(e, &t[(home + (uint32_t)i - 2) & (h->slots - 1)]);
	}
	ck_assert_uint_eq(t[(home + 3) & (h->slots - 1)].flags, 0);
	shm_obs_unlock(a->shm, h);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_full_table)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	for (uint32_t i = 0; i < h->slots; i++)
		ck_assert_ptr_nonnull(shm_obs_insert_locked(h, 9, i, i));
	ck_assert_uint_eq(h->count, h->slots);
	/* every slot used: insert fails and find of an absent key ends (bounded probe) */
	ck_assert_ptr_null(shm_obs_insert_locked(h, 9, 1u << 20, 0));
	ck_assert_ptr_null(shm_obs_find_locked(h, 9, 1u << 20, 0));
	for (uint32_t i = 0; i < h->slots; i++)
		ck_assert_ptr_nonnull(shm_obs_find_locked(h, 9, i, i));
	shm_obs_unlock(a->shm, h);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A child that takes the table's lock and dies holding it (after @scribble ran). */
static void die_holding(const char *name, void (*scribble)(struct shm_obs_hdr *h))
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *b;
		if (sc_arena_open(name, &b))
			_exit(2);
		struct shm_obs_hdr *h = shm_obs_table(b->shm);
		if (!h || shm_obs_lock(b->shm, h))
			_exit(3);
		scribble(h);
		raise(SIGKILL);
		_exit(4);
	}
	sc_test_wait_killed(pid);
}

static uint64_t hole_lo[3];

/* Died in the middle of a removal: the first member of a chain cleared, the rest not shifted. */
static void make_hole(struct shm_obs_hdr *h)
{
	struct shm_obs_entry *e = shm_obs_find_locked(h, 1, hole_lo[0], 0);
	memset(e, 0, sizeof(*e));
}

static void make_garbage(struct shm_obs_hdr *h)
{
	struct shm_obs_entry *t = shm_obs_entries(h);
	/* a duplicate of a live observation, and a slot with flags no writer sets */
	struct shm_obs_entry *e = shm_obs_find_locked(h, 1, hole_lo[1], 0);
	uint32_t i = (uint32_t)(e - t);
	for (uint32_t j = 0; j < h->slots; j++)
		if (!t[j].flags && j != i) {
			t[j] = *e;
			break;
		}
	for (uint32_t j = h->slots; j-- > 0;)
		if (!t[j].flags) {
			t[j].stage_id = 77;
			t[j].flags = 0x80u | SHM_OBS_USED;
			break;
		}
	h->count = 12345;
}

/* Died having inserted four observations past the capacity (shm_obs_insert_locked leaves the
 * capacity to its callers). */
static void overfill(struct shm_obs_hdr *h)
{
	for (uint64_t lo = 1000; h->count < h->capacity + 4; lo++)
		if (!shm_obs_find_locked(h, 2, lo, 0))
			shm_obs_insert_locked(h, 2, lo, 0);
}

START_TEST(test_dead_holder_repair)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	/* the first claim, right after the last slot, made 5 s after boot (CLOCK_MONOTONIC): the
	 * high word of its time sits where an observation's flags do, and says USED; a repair never
	 * reads it */
	struct shm_obs_claim *c = shm_obs_claims(h);
	ck_assert_ptr_eq((void *)c, (void *)(shm_obs_entries(h) + h->slots));
	*c = (struct shm_obs_claim){ .stage_id = 1, .digest_lo = 4242, .owner = a->shm->token, .pid = getpid(),
				     .claimed_ns = 5000000000ull };
	uint32_t as_flags;
	memcpy(&as_flags, (const uint8_t *)c + offsetof(struct shm_obs_entry, flags), sizeof(as_flags));
	ck_assert_uint_eq(as_flags, SHM_OBS_USED);
	colliding(h, 3, hole_lo, 3);
	for (int i = 0; i < 3; i++)
		shm_obs_insert_locked(h, 1, hole_lo[i], 0)->hits = (uint32_t)i + 1;
	shm_obs_unlock(a->shm, h);
	uint64_t repairs = h->repairs;

	die_holding(name, make_hole);
	/* the hole cut the chain: before repair the later members are unreachable */
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, hole_lo[1], 0));
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0); /* takes the dead holder's lock, repairs */
	ck_assert_uint_eq(h->repairs, repairs + 1);
	ck_assert_uint_eq(h->count, 2);
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, hole_lo[0], 0));
	ck_assert_ptr_null(shm_obs_find_locked(h, 1, 4242, 0)); /* the claim is not an observation */
	ck_assert_uint_eq(c->claimed_ns, 5000000000ull);
	ck_assert_uint_eq(c->digest_lo, 4242);
	ck_assert_uint_eq(shm_obs_find_locked(h, 1, hole_lo[1], 0)->hits, 2);
	ck_assert_uint_eq(shm_obs_find_locked(h, 1, hole_lo[2], 0)->hits, 3);
	shm_obs_unlock(a->shm, h);

	die_holding(name, make_garbage);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	ck_assert_uint_eq(h->repairs, repairs + 2);
	ck_assert_uint_eq(h->count, 2); /* the duplicate dropped, the garbage dropped, recounted */
	uint32_t used = 0;
	for (uint32_t j = 0; j < h->slots; j++) {
		ck_assert_uint_eq(shm_obs_entries(h)[j].flags & ~SHM_OBS_FLAGS, 0);
		used += (shm_obs_entries(h)[j].flags & SHM_OBS_USED) != 0;
	}
	ck_assert_uint_eq(used, 2);
	ck_assert_uint_eq(shm_obs_find_locked(h, 1, hole_lo[1], 0)->hits, 2);
	ck_assert_uint_eq(shm_obs_find_locked(h, 1, hole_lo[2], 0)->hits, 3);
	shm_obs_unlock(a->shm, h);
	/* a live holder's unlock is no death: no further repair */
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	ck_assert_uint_eq(h->repairs, repairs + 2);
	shm_obs_unlock(a->shm, h);

	/* more sane observations than the capacity: the repair keeps exactly the capacity */
	die_holding(name, overfill);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	ck_assert_uint_eq(h->repairs, repairs + 3);
	ck_assert_uint_eq(h->count, OBS_CAP);
	used = 0;
	for (uint32_t j = 0; j < h->slots; j++)
		used += (shm_obs_entries(h)[j].flags & SHM_OBS_USED) != 0;
	ck_assert_uint_eq(used, OBS_CAP);
	shm_obs_unlock(a->shm, h);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_scribbled_lock_is_an_error)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	h->mu.magic ^= 0xff;
	ck_assert_int_eq(shm_obs_lock(a->shm, h), -EBADMSG);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Every part of an observation's identity is compared, also for identities that share a probe
 * chain: (stage, lo, hi) differing in one part only and hashing to the same home slot are
 * different observations. */
START_TEST(test_identities_on_one_chain_differ_in_every_part)
{
	const char *name;
	struct sc_arena *a = obs_arena(&name);
	struct shm_obs_hdr *h = table(a);
	ck_assert_int_eq(shm_obs_lock(a->shm, h), 0);
	const uint64_t s = 11, lo = 22, hi = 33;
	uint32_t home = home_of(h, s, lo, hi);
	for (int part = 0; part < 3; part++) {
		uint64_t v[3] = { s, lo, hi };
		int found = 0;
		for (uint64_t x = 1; x < 1000000 && !found; x++) {
			v[part] = (part == 0 ? s : part == 1 ? lo : hi) + x;
			found = home_of(h, v[0], v[1], v[2]) == home;
		}
		ck_assert_msg(found, "no identity differing in part %d shares the home slot", part);
		struct shm_obs_entry *e = shm_obs_insert_locked(h, s, lo, hi);
		ck_assert_ptr_nonnull(e);
		ck_assert_ptr_null(shm_obs_find_locked(h, v[0], v[1], v[2]));
		struct shm_obs_entry *e2 = shm_obs_insert_locked(h, v[0], v[1], v[2]);
		ck_assert_ptr_nonnull(e2);
		ck_assert_ptr_ne(e2, e);
		ck_assert_ptr_eq(shm_obs_find_locked(h, s, lo, hi), e);
		ck_assert_ptr_eq(shm_obs_find_locked(h, v[0], v[1], v[2]), e2);
		shm_obs_remove_locked(h, e2);
		shm_obs_remove_locked(h, e);
		ck_assert_uint_eq(h->count, 0);
	}
	shm_obs_unlock(a->shm, h);
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *shm_obs_suite(void)
{
	Suite *s = suite_create("shm_obs");
	TCase *tc = tcase_create("obs");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_header_is_checked);
	tcase_add_test(tc, test_insert_find_remove);
	tcase_add_test(tc, test_identities_on_one_chain_differ_in_every_part);
	tcase_add_test(tc, test_backward_shift_keeps_chains);
	tcase_add_test(tc, test_full_table);
	tcase_add_test(tc, test_dead_holder_repair);
	tcase_add_test(tc, test_scribbled_lock_is_an_error);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(shm_obs_suite)
