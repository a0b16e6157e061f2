/*
 * tests/check_oom.c — every allocation the library makes may fail: the call then fails with a
 * negative errno (or succeeds another way), never crashes, and leaves the arena consistent (fsck
 * clean, every entry still served) and nothing half-made behind (no arena file).
 *
 * This binary defines malloc, calloc, realloc and aligned_alloc (the library is linked statically,
 * so its calls come here); they forward to glibc's own unless a test armed a failure: then the N-th
 * allocation from the arming on returns NULL (or every one, for the few cases that need no memory
 * at all). Each operation is run with N = 1, 2, ... until it no longer reaches the N-th allocation.
 * Nothing but the library runs while a failure is armed (Check's assertions allocate).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/evq.h"
#include "../shm/heap.h"
#include "../shm/l3ix.h"
#include "../shm/seg.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static long countdown;  /* 0: nothing armed; n: the n-th allocation from now fails; -1: every one */
static int failed;      /* the armed allocation happened (and failed) */

/* Does this allocation fail? A failed one sets errno to ENOMEM, as glibc's do (callers such as
 * fdopendir report errno). */
static int fail_now(void)
{
	if (countdown == 0 || (countdown > 0 && --countdown))
		return 0;
	failed = 1;
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	return fail_now() ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	return fail_now() ? NULL : __libc_memalign(align, n);
}

static void arm(long n)
{
	failed = 0;
	countdown = n;
}

static int disarm(void)
{
	countdown = 0;
	return failed;
}

#define MAX_ALLOCS 400

static uint8_t payload[40000];

static int admit(struct sc_stage *st, int32_t k, size_t n)
{
	int32_t t[3] = { k, k + 1, k + 2 };
	memset(payload, (int)k, n);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { n } };
	return sc_l2_admit(st, "oom", t, 3, sc_digest(payload, n), &p, SC_ORIGIN_DIRECT);
}

static int served(struct sc_stage *st, int32_t k, size_t n)
{
	int32_t t[3] = { k, k + 1, k + 2 };
	struct sc_lease l;
	if (sc_l2_get(st, "oom", t, 3, NULL, &l))
		return 0;
	int ok = l.sec_len[0] == n;
	for (size_t i = 0; ok && i < n; i++)
		ok = ((const uint8_t *)l.sec[0])[i] == (uint8_t)k;
	sc_lease_release(&l);
	return ok;
}

static int arena_file_exists(const char *name)
{
	char p[256];
	snprintf(p, sizeof(p), "/dev/shm/stagecache.%s", name);
	return access(p, F_OK) == 0;
}

/* Creating and opening an arena, opening a stage: a failed allocation fails the call cleanly. */
START_TEST(test_create_open_stage_under_allocation_failures)
{
	int done = 0;
	for (long n = 1; n < MAX_ALLOCS && !done; n++) {
		const char *name = sc_test_name("oomc");
		struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF };
		struct sc_arena *a = NULL;
		arm(n);
		int rc = sc_arena_create(name, &o, &a);
		int hit = disarm();
		if (rc) {
			ck_assert_msg(hit, "create failed without a failed allocation: %s", sc_strerror(rc));
			ck_assert_int_lt(rc, 0);
			ck_assert_msg(!arena_file_exists(name), "a failed create left its file (allocation %ld)", n);
			continue;
		}
		struct sc_arena *b = NULL;
		struct sc_stage *st = NULL;
		arm(n);
		int rb = sc_arena_open(name, &b);
		int rs = rb ? 0 : sc_stage_open(b, "m", "s", &st);
		int hit2 = disarm();
		ck_assert_msg((rb == 0 && rs == 0) || hit2, "open/stage failed without a failed allocation");
		if (!hit && !hit2)
			done = 1;
		/* whatever failed, the arena is whole */
		struct sc_stage *s2;
		ck_assert_int_eq(sc_stage_open(a, "m", "s", &s2), 0);
		ck_assert_int_eq(admit(s2, 1, 5000), 0);
		ck_assert(served(s2, 1, 5000));
		struct sc_fsck_report r;
		ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
		sc_stage_close(s2);
		sc_stage_close(st);
		sc_arena_close(b);
		sc_test_arena_destroy(a, name);
	}
	ck_assert_msg(done, "create/open still allocating after %d allocations", MAX_ALLOCS);
}
END_TEST

/* Admissions, reads, removal, holders, fsck (check and repair), reap, clear: each call, with its
 * N-th allocation failing, fails or succeeds — and the arena stays consistent. */
START_TEST(test_l2_calls_under_allocation_failures)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("ooml2", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	for (int32_t k = 0; k < 8; k++)
		ck_assert_int_eq(admit(st, 100 + k, 3000 + (size_t)k * 1000), 0);
	for (int op = 0; op < 7; op++) {
		int done = 0;
		for (long n = 1; n < MAX_ALLOCS && !done; n++) {
			int32_t k = 1000 + op * 1000 + (int32_t)n;
			struct sc_holder h[8];
			struct sc_fsck_report r;
			int rc = 0;
			arm(n);
			switch (op) {
			case 0: rc = admit(st, k, 20000); break;
			case 1: rc = served(st, 100, 3000) ? 0 : -1; break;
			case 2: rc = sc_arena_holders(a, h, 8); break;
			case 3: rc = sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r); break;
			case 4: rc = sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r); break;
			case 5: rc = sc_l2_shrink_to(a, 0); break;
			case 6: rc = admit(st, 100 + (int32_t)(n % 8), 3000 + (size_t)(n % 8) * 1000); break; /* replace */
			}
			int hit = disarm();
			if (!hit) {
				done = 1;
				printf("oom: l2 op %d: each of its %ld allocations failed once\n", op, n - 1);
			}
			ck_assert_msg(rc >= 0 || hit, "op %d failed (%d) without a failed allocation", op, rc);
			/* the arena is consistent and serves what it holds */
			ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
			for (int32_t j = 0; j < 8; j++)
				ck_assert_msg(served(st, 100 + j, 3000 + (size_t)j * 1000), "op %d, allocation %ld: entry %d lost",
					      op, n, j);
			if (op == 0 && rc == 0)
				ck_assert(served(st, k, 20000));
		}
		ck_assert_msg(done, "op %d still allocating after %d allocations", op, MAX_ALLOCS);
	}
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A repair that frees a block whose tag no owner recognises (the block of a fresh entry tagged
 * anew, each round), with its N-th allocation failing: it finishes what it can, never crashes;
 * the next repair frees the block, and the other entries are served. */
START_TEST(test_fsck_repair_of_a_stray_block_under_allocation_failures)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("oomfree", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	for (int32_t k = 0; k < 4; k++)
		ck_assert_int_eq(admit(st, 100 + k, 3000), 0);
	struct shm_index *ix = l2_ix(a);
	int done = 0;
	for (long n = 1; n < MAX_ALLOCS && !done; n++) {
		int32_t k = 1000 + (int32_t)n;
		ck_assert_int_eq(admit(st, k, 2000), 0);
		uint32_t i = 0;
		while (i < ix->nentries && !(atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE &&
					     ix->ent[i].sec_len[0] == 2000 && ((uint8_t *)ix->a->base)[ix->ent[i].payload_off] == (uint8_t)k))
			i++;
		ck_assert_uint_lt(i, ix->nentries);
		ck_assert_int_eq(shm_heap_set_tag(a->shm, ix->ent[i].payload_off, 7ull << 60 | 12345), 0);
		struct sc_fsck_report r;
		arm(n);
		int rc = sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r);
		int hit = disarm();
		done = !hit;
		ck_assert_msg(rc == 0 || hit, "repair: %d without a failed allocation", rc);
		ck_assert_int_ge(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.leaked_bytes, 0);
		for (int32_t j = 0; j < 4; j++)
			ck_assert(served(st, 100 + j, 3000));
	}
	ck_assert(done);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A shard repair whose allocation fails (the next locker owes it: repair_pending stays set) does
 * not crash, changes nothing, and the next lock repairs; a writer's pop from a corrupted free list
 * tries twice (repairing before the second) and then gives up. */
START_TEST(test_index_repair_under_allocation_failure)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("oomrep", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	ck_assert_int_eq(admit(st, 7, 3000), 0);
	struct shm_index *ix = l2_ix(a);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		struct shm_index_shard *sh = &ix->hdr->shards[s];
		uint32_t repairs = sh->repairs;
		sh->repair_pending = 1;
		arm(1);
		int rc = shm_index_lock(ix, s);
		int hit = disarm();
		ck_assert_int_eq(rc, 0);
		shm_index_unlock(ix, s);
		ck_assert(hit);
		ck_assert_uint_eq(sh->repair_pending, 1);
		ck_assert_uint_eq(sh->repairs, repairs);
		ck_assert_int_eq(shm_index_lock(ix, s), 0);
		shm_index_unlock(ix, s);
		ck_assert_uint_eq(sh->repair_pending, 0);
		ck_assert_uint_eq(sh->repairs, repairs + 1);
	}
	/* a corrupted free list (its head names a LIVE entry) met by a writer whose first repair
	 * cannot allocate: the second attempt repairs, and the writer gives up after those two
	 * (it sees a full shard, once); the next writer takes a FREE entry, the LIVE one stays */
	int err;
	struct sc_key key;
	int32_t t[3] = { 7, 8, 9 };
	ck_assert_int_eq(sc_l2_key(st, "oom", t, 3, &key), 0);
	struct shm_index_entry *live = shm_index_find(ix, key.lo, key.hi, &err);
	ck_assert_ptr_nonnull(live);
	uint32_t s = shm_index_idx(ix, live) % SHM_INDEX_SHARDS;
	ck_assert_int_eq(shm_index_lock(ix, s), 0);
	ix->hdr->shards[s].free_head = shm_index_idx(ix, live) + 1;
	arm(1);
	struct shm_index_entry *e = shm_index_pop_free_locked(ix, s);
	ck_assert(disarm());
	ck_assert_ptr_null(e);
	e = shm_index_pop_free_locked(ix, s);
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_ne(e, live);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_FREE);
	shm_index_push_free_locked(ix, e);
	shm_index_unlock(ix, s);
	ck_assert_uint_eq(atomic_load(&live->state), SHM_ENT_LIVE);
	ck_assert(served(st, 7, 3000));
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The L3 store and restore: a put, a restore (fill, promotion) with a failed allocation fail or
 * succeed, never serve wrong bytes, and the next restore serves the right ones. */
START_TEST(test_l3_and_restore_under_allocation_failures)
{
	char dir[] = "/var/tmp/sc-oom-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *name;
	struct sc_arena *a = sc_test_arena("ooml3", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	int32_t t[300];
	for (int i = 0; i < 300; i++)
		t[i] = 7000 + i;
	memset(payload, 0x5c, 30000);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { 30000 } };
	for (int op = 0; op < 3; op++) {
		int done = 0;
		for (long n = 1; n < MAX_ALLOCS && !done; n++) {
			struct sc_l3 *l3 = NULL;
			int rc = 0;
			struct sc_restore r;
			if (op > 0)
				ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
			arm(n);
			if (op == 0) {
				rc = sc_l3_open(dir, NULL, &l3);
			} else if (op == 1) {
				struct sc_l3_put_args pa = { .ns = "oom", .tokens = t, .token_count = 256, .payload = &p };
				rc = sc_l3_put(l3, &pa, NULL);
			} else {
				(void)sc_l2_clear(a);
				rc = sc_restore(st, l3, "oom", t, 300, 0, &r);
			}
			int hit = disarm(); /* before any assertion: Check allocates */
			if (op == 2 && rc >= 0) {
				ck_assert_int_eq(rc, 256);
				ck_assert_uint_eq(r.sec_len[0], 30000);
				ck_assert(memcmp(r.sec[0], payload, 30000) == 0);
				sc_restore_release(&r);
			}
			if (!hit)
				done = 1;
			ck_assert_msg(rc >= 0 || hit, "op %d failed (%d) without a failed allocation", op, rc);
			if (op == 1 && rc == 0) {
				/* nothing armed now: a restore serves the bytes put */
				ck_assert_int_eq(sc_restore(st, l3, "oom", t, 300, 0, &r), 256);
				ck_assert(memcmp(r.sec[0], payload, 30000) == 0);
				sc_restore_release(&r);
			}
			sc_l3_close(l3);
		}
		ck_assert_msg(done, "op %d still allocating after %d allocations", op, MAX_ALLOCS);
	}
	struct sc_fsck_report fr;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &fr), 0);
	/* fsck, a check and a repair, with an allocation failing: no location-index entry is judged
	 * broken for want of memory (none is cleared), and the arena stays clean */
	struct sc_l3_index_stats is0, is1;
	ck_assert_int_eq(sc_l3_index_stats(a, &is0), 0);
	ck_assert_uint_gt(is0.positive, 0);
	for (int op = 0; op < 2; op++) {
		int done = 0;
		for (long n = 1; n < MAX_ALLOCS && !done; n++) {
			arm(n);
			int rc = sc_arena_fsck(a, op ? SC_FSCK_REPAIR : 0, NULL, NULL, &fr);
			int hit = disarm();
			done = !hit;
			ck_assert_msg(rc >= 0 && (rc == 0 || hit), "fsck op %d, allocation %ld: %d", op, n, rc);
			ck_assert_int_eq(sc_l3_index_stats(a, &is1), 0);
			ck_assert_msg(is1.positive == is0.positive, "fsck op %d, allocation %ld: %u of %u index entries left", op,
				      n, is1.positive, is0.positive);
			ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &fr), 0);
		}
		ck_assert(done);
	}
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
	sc_test_rm_tree(dir);
}
END_TEST

/* Verification of a segmented L3 store with an allocation failing (the manifest's, the segment
 * buffer's, the walk's): it fails with -ENOMEM (it needs every allocation it makes: none is
 * retried, none skipped); a verification that ran out of memory never judges a good object bad,
 * so nothing is quarantined and the object still fills. */
START_TEST(test_l3_segmented_verify_under_allocation_failures)
{
	char dir[] = "/var/tmp/sc-oom-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3 = NULL;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, 64 << 10), 0);
	static uint8_t big[200 << 10], out[200 << 10];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13 + (i >> 10));
	int32_t t[4] = { 1, 2, 3, 4 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { big }, .sec_len = { sizeof(big) } };
	struct sc_l3_put_args pa = { .ns = "oomseg", .tokens = t, .token_count = 4, .payload = &p };
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_put(l3, &pa, &loc), 0);
	ck_assert_uint_lt(loc.file_bytes, sizeof(big)); /* a manifest: segmented */
	int done = 0;
	for (long n = 1; n < MAX_ALLOCS && !done; n++) {
		arm(n);
		int rc = sc_l3_verify(l3, NULL, NULL);
		int hit = disarm();
		done = !hit;
		ck_assert_msg(rc == (hit ? -ENOMEM : 0), "allocation %ld (%s): verify returned %d", n,
			      hit ? "failed" : "not reached", rc);
		struct sc_l3_stats st;
		ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
		ck_assert_msg(st.quarantined == 0, "allocation %ld: %llu quarantined", n, (unsigned long long)st.quarantined);
	}
	ck_assert(done);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, out, sizeof(out), 0), 0);
	ck_assert(memcmp(out, big, sizeof(big)) == 0);
	sc_l3_close(l3);
	sc_test_rm_tree(dir);
}
END_TEST

/* A segmented arena's admissions (planning, hashing, the segment table) under allocation
 * failures: the admit fails or succeeds, and what is stored is served whole. */
START_TEST(test_segmented_admits_under_allocation_failures)
{
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .segment_bytes = 64 << 10 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("oomseg", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t big[300 << 10];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + (i >> 9));
	struct sc_digest d = sc_digest(big, sizeof(big));
	static uint8_t stored[MAX_ALLOCS]; /* [n]: the admit of tokens {42, n} succeeded */
	int done = 0;
	for (long n = 1; n < MAX_ALLOCS && !done; n++) {
		int32_t t[2] = { 42, (int32_t)n };
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { big }, .sec_len = { sizeof(big) } };
		arm(n);
		int rc = sc_l2_admit(st, "oom", t, 2, d, &p, SC_ORIGIN_DIRECT);
		int hit = disarm();
		if (!hit)
			done = 1;
		ck_assert_msg(rc == 0 || hit, "admit failed (%d) without a failed allocation", rc);
		struct sc_fsck_report r;
		ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
		if (rc == 0) {
			static uint8_t out[sizeof(big)];
			stored[n] = 1;
			ck_assert_int_eq(sc_l2_get_copy(st, "oom", t, 2, NULL, out, sizeof(out), NULL), (int64_t)sizeof(big));
			ck_assert(memcmp(out, big, sizeof(big)) == 0);
		}
	}
	ck_assert(done);
	/* a deep check and a repair (which verifies every payload) with an allocation failing: a
	 * segmented entry's digest not computed for want of memory is not a digest that differs, so
	 * nothing is dropped; every entry stored above is still served whole */
	for (int op = 0; op < 2; op++) {
		done = 0;
		for (long n = 1; n < MAX_ALLOCS && !done; n++) {
			struct sc_fsck_report r;
			arm(n);
			int rc = sc_arena_fsck(a, op ? SC_FSCK_REPAIR : SC_FSCK_DEEP, NULL, NULL, &r);
			int hit = disarm();
			done = !hit;
			ck_assert_msg(rc == 0 || hit, "fsck op %d: %d without a failed allocation", op, rc);
			ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
			ck_assert_uint_eq(r.dropped, 0);
			int served_n = 0;
			for (long k = 1; k < MAX_ALLOCS; k++) {
				if (!stored[k])
					continue;
				served_n++;
				int32_t t[2] = { 42, (int32_t)k };
				static uint8_t out[sizeof(big)];
				ck_assert_msg(sc_l2_get_copy(st, "oom", t, 2, NULL, out, sizeof(out), NULL) == (int64_t)sizeof(big),
					      "fsck op %d, allocation %ld: entry %ld lost", op, n, k);
				ck_assert(memcmp(out, big, sizeof(big)) == 0);
			}
			ck_assert_int_gt(served_n, 0);
		}
		ck_assert(done);
	}
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The segment table's recount and shard sweep collect blocks into arrays: without memory they
 * answer -ENOMEM (never a count of wrong references or of blocks freed) and change nothing. */
START_TEST(test_seg_recount_and_sweep_under_allocation_failure)
{
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .segment_bytes = 64 << 10 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("oomsegc", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t big[200 << 10];
	for (int k = 0; k < 3; k++) {
		memset(big, k + 1, sizeof(big));
		int32_t t[2] = { 7, k };
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { big }, .sec_len = { sizeof(big) } };
		ck_assert_int_eq(sc_l2_admit(st, "oom", t, 2, sc_digest(big, sizeof(big)), &p, SC_ORIGIN_DIRECT), 0);
	}
	struct shm_index ix;
	struct shm_segtab t;
	ck_assert_int_eq(shm_index_view(a->shm, &ix), 0);
	ck_assert_int_eq(shm_seg_view(a->shm, &ix, &t), 0);
	uint64_t live = t.hdr->live, stored = t.hdr->stored;
	ck_assert_uint_gt(live, 0);
	for (int op = 0; op < 2; op++) {
		int done = 0;
		for (long n = 1; n < 20 && !done; n++) {
			ck_assert_int_eq(shm_seg_lock(&t), 0);
			arm(n);
			int64_t rc = op ? shm_seg_sweep_shard(&t, (uint32_t)n % SHM_INDEX_SHARDS)
					: shm_seg_recount_locked(&t, 1);
			int hit = disarm();
			shm_seg_unlock(&t);
			done = !hit;
			ck_assert_msg(rc == 0 || (hit && rc == -ENOMEM), "op %d, allocation %ld failing: %lld", op, n,
				      (long long)rc);
			ck_assert_uint_eq(t.hdr->live, live);
			ck_assert_uint_eq(t.hdr->stored, stored);
			ck_assert_int_eq(shm_seg_lock(&t), 0);
			int64_t w = shm_seg_recount_locked(&t, 0);
			shm_seg_unlock(&t);
			ck_assert_int_eq(w, 0);
		}
		ck_assert(done);
	}
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The location index's repair marks the pages in use in an array: without one it cannot tell a
 * shared page from a page of one entry, so it clears every entry with token ids (the index is a
 * cache of the directory) and frees every page; entries without token ids stay. */
START_TEST(test_l3ix_repair_without_memory)
{
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .l3_index_entries = 64 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("ooml3ix", &o, &name);
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(a->shm, &ix), 0);
	ck_assert_int_eq(shm_l3ix_lock(&ix), 0);
	static int32_t tok[600];
	for (int i = 0; i < 600; i++)
		tok[i] = i * 3 + 1;
	struct shm_l3ix_entry e = { .flags = SHM_L3IX_POS, .token_count = 600, .key_lo = 1, .key_hi = 2 };
	uint32_t ev;
	ck_assert_int_eq(shm_l3ix_put_locked(&ix, &e, tok, &ev), 0);
	e.key_hi = 3;
	ck_assert_int_eq(shm_l3ix_put_locked(&ix, &e, NULL, &ev), 0);
	ck_assert_uint_eq(ix.hdr->free_pages, ix.npages - 3);
	arm(1);
	shm_l3ix_repair_locked(&ix);
	ck_assert(disarm());
	ck_assert_uint_eq(ix.ent[8].flags, 0);
	ck_assert_uint_eq(ix.ent[9].flags, SHM_L3IX_POS);
	ck_assert_uint_eq(ix.hdr->free_pages, ix.npages);
	uint32_t n = 0;
	for (uint32_t pg = ix.hdr->free_head; pg && n <= ix.npages; pg = ix.links[pg - 1])
		n++;
	ck_assert_uint_eq(n, ix.npages);
	shm_l3ix_unlock(&ix);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* With no lease held anywhere, reclamation needs no memory: an entry removed while every
 * allocation fails is freed at once. */
START_TEST(test_reclamation_without_leases_needs_no_memory)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("oomr", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	ck_assert_int_eq(admit(st, 7, 5000), 0);
	int32_t t[3] = { 7, 8, 9 };
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(st, "oom", t, 3, &k), 0);
	arm(-1);
	int rc = sc_l2_remove(st, k);
	disarm();
	ck_assert_int_eq(rc, 0);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	ck_assert_uint_eq(sc_test_heap_used(a), 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A reap whose sweep failed for want of memory has still counted the dead filler's slot as
 * handled; the next forced reap (a clear here; fsck and an admission that needs room force too)
 * sweeps again although no slot was cleaned since (an unforced one does not), and the reservation
 * does not outlive it. The clear comes within the handle's 1 ms gap between reaps: a forced reap
 * ignores the gap. */
START_TEST(test_a_sweep_that_failed_is_done_by_the_next_forced_reap)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("oomw", 32 << 20, &name);
	pid_t pid = sc_test_filler(name, 1 << 20);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	sc_test_wait_killed(pid);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);     /* the index's view, before memory runs out */
	atomic_store(&a->shm->hdr->reap_due_ns, UINT64_MAX); /* no periodic reap does the work */
	a->l2_last_reap_ns = 0;
	arm(-1);
	int rc = l2_reap(a, 0);
	ck_assert_int_eq(disarm(), 1); /* the sweep wanted memory */
	ck_assert_int_eq(rc, 1);       /* the slot was freed ... */
	ck_assert_uint_ge(sc_test_heap_used(a), 1 << 20); /* ... the reservation was not */
	a->l2_last_reap_ns = 0; /* past the gap: an unforced reap passes over the slots, and since no
				 * slot was cleaned since the last one's pass (its own), it does not sweep */
	ck_assert_int_eq(l2_reap(a, 0), 0);
	ck_assert_uint_ge(sc_test_heap_used(a), 1 << 20);
	a->l2_last_reap_ns = shm_now_ns(); /* a reap just now: the clear's is forced, and not held back */
	ck_assert_int_eq(sc_l2_clear(a), 0);
	ck_assert_uint_eq(sc_test_heap_used(a), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Prefix lookups keep up to 512 candidate lengths on the stack: with every allocation failing, a
 * prompt of exactly 512 blocks is looked up (a miss here), one of 513 is -ENOMEM; bad arguments are
 * -EINVAL, checked before anything is allocated. */
START_TEST(test_prefix_lookups_of_512_blocks_need_no_memory)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("oomp", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static int32_t t[513 * 256];
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		t[i] = (int32_t)i;
	for (uint32_t blocks = 512; blocks <= 513; blocks++) {
		int want = blocks == 512 ? -ENOENT : -ENOMEM;
		uint32_t len = 1;
		struct sc_lease l;
		arm(-1);
		int rc = sc_l2_longest_prefix(st, "oom", t, blocks * 256, 256, &len, &l);
		disarm();
		ck_assert_int_eq(rc, want);
		ck_assert_uint_eq(len, 0);
		/* with memory: a miss */
		ck_assert_int_eq(sc_l2_longest_prefix(st, "oom", t, blocks * 256, 256, &len, &l), -ENOENT);
		struct sc_lookup r;
		arm(-1);
		rc = sc_lookup(st, NULL, "oom", t, blocks * 256, 256, &r);
		disarm();
		ck_assert_int_eq(rc, blocks == 512 ? 0 : -ENOMEM);
		ck_assert_uint_eq(r.tokens, 0);
		ck_assert_int_eq(sc_lookup(st, NULL, "oom", t, blocks * 256, 256, &r), 0); /* with it */
		ck_assert_uint_eq(r.tokens, 0);
		/* its arguments are checked before anything is allocated: no stage, no tokens */
		arm(-1);
		int r1 = sc_l2_longest_prefix(NULL, "oom", t, blocks * 256, 256, &len, &l);
		int r2 = sc_l2_longest_prefix(st, "oom", NULL, blocks * 256, 256, &len, &l);
		disarm();
		ck_assert_int_eq(r1, -EINVAL);
		ck_assert_int_eq(r2, -EINVAL);
	}
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Reclamation collects every lease record and sorts them. Past 128 records glibc's qsort takes
 * memory for a merge sort and, without it, sorts in place (quicksort), which a comparator that is
 * wrong about equal records sends past the array. Whichever allocation fails, every lease is
 * found: 49 removed entries, one leased 96 times from two handles and 48 once each from a third,
 * keep their memory, and it is freed once the leases go. */
START_TEST(test_lease_records_sorted_without_memory)
{
	const char *name;
	struct sc_arena *h[3];
	struct sc_stage *st[3];
	static struct sc_lease l[3][SC_LEASES_MAX];
	h[0] = sc_test_arena("ooml", 32 << 20, &name);
	for (int i = 0; i < 3; i++) {
		if (i)
			ck_assert_int_eq(sc_arena_open(name, &h[i]), 0);
		ck_assert_int_eq(sc_stage_open(h[i], "m", "s", &st[i]), 0);
	}
	for (int32_t k = 1; k <= SC_LEASES_MAX + 1; k++)
		ck_assert_int_eq(admit(st[0], k * 10, 5000), 0);
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < SC_LEASES_MAX; j++) {
			int32_t k = i ? 10 : (j + 2) * 10, t[3] = { k, k + 1, k + 2 };
			ck_assert_int_eq(sc_l2_get(st[i], "oom", t, 3, NULL, &l[i][j]), 0);
		}
	}
	ck_assert_int_eq(sc_l2_clear(h[0]), SC_LEASES_MAX + 1);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(h[0], NULL, &s), 0);
	uint64_t pending = s.pending_reclaim_bytes;
	ck_assert_uint_gt(pending, (SC_LEASES_MAX + 1) * 5000ull);
	int done = 0;
	for (long n = 1; n < MAX_ALLOCS && !done; n++) {
		arm(n);
		int rc = sc_l2_shrink_to(h[0], 0); /* one reclamation pass over every shard */
		done = !disarm();
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(sc_l2_stats(h[0], NULL, &s), 0);
		ck_assert_msg(s.pending_reclaim_bytes == pending, "a leased entry was reclaimed (allocation %ld)", n);
	}
	ck_assert(done);
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < SC_LEASES_MAX; j++) {
			uint8_t want = (uint8_t)(i ? 10 : (j + 2) * 10);
			ck_assert_uint_eq(((const uint8_t *)l[i][j].sec[0])[4999], want);
			sc_lease_release(&l[i][j]);
		}
	}
	ck_assert_int_eq(sc_l2_shrink_to(h[0], 0), 0);
	ck_assert_int_eq(sc_l2_stats(h[0], NULL, &s), 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	for (int i = 2; i >= 0; i--) {
		sc_stage_close(st[i]);
		if (i)
			sc_arena_close(h[i]);
	}
	sc_test_arena_destroy(h[0], name);
}
END_TEST

/* The eviction lists' rebuild needs memory for its sort. Without it a lock that found a rebuild
 * to finish fails with -ENOMEM, releases the mutex and leaves the rebuild to the next locker; a
 * walk whose tail lies rebuilds once more and answers the true tail. */
START_TEST(test_evq_rebuild_under_allocation_failure)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("oomq", 32 << 20, &name);
	struct shm_evq q;
	ck_assert_int_eq(shm_evq_view(a->shm, &q), 0);
	ck_assert_int_eq(shm_evq_lock(&q), 0);
	shm_evq_push_locked(&q, 3, SHM_EVQ_SMALL, 10);
	shm_evq_push_locked(&q, 4, SHM_EVQ_SMALL, 10);
	q.hdr->tail[0] = q.nodes + 1;
	q.hdr->state = SHM_EVQ_REBUILD;
	shm_evq_unlock(&q);
	arm(1);
	int rc = shm_evq_lock(&q);
	ck_assert(disarm());
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_uint_eq(q.hdr->state, SHM_EVQ_REBUILD);
	ck_assert_uint_eq(q.hdr->repairs, 0);
	ck_assert_uint_eq(shm_mutex_owner(&q.hdr->mu), 0);
	ck_assert_int_eq(shm_evq_lock(&q), 0);
	ck_assert_uint_eq(q.hdr->state, SHM_EVQ_OK);
	ck_assert_uint_eq(q.hdr->repairs, 1);
	q.hdr->tail[0] = q.nodes + 1;
	arm(1);
	uint32_t t = shm_evq_tail_locked(&q, SHM_EVQ_SMALL);
	ck_assert(disarm());
	ck_assert_uint_eq(t, 3 + 1);
	ck_assert_uint_eq(q.hdr->repairs, 2);
	/* no memory at all: the walk gives up after two rebuilds, answering 0 */
	q.hdr->tail[0] = q.nodes + 1;
	arm(-1);
	t = shm_evq_tail_locked(&q, SHM_EVQ_SMALL);
	ck_assert(disarm());
	ck_assert_uint_eq(t, 0);
	ck_assert_uint_eq(q.hdr->state, SHM_EVQ_REBUILD);
	ck_assert_int_eq(shm_evq_rebuild_locked(&q), 0);
	const char *why = NULL;
	ck_assert_int_eq(shm_evq_check_locked(&q, &why), 0);
	/* a push onto a head that lies, with no memory to rebuild: the record only, nothing written
	 * through the lying head; the next lock links the node */
	q.hdr->head[0] = q.nodes + 5;
	struct shm_evq_node past = q.node[q.nodes + 4];
	arm(1);
	shm_evq_push_locked(&q, 7, SHM_EVQ_SMALL, 10);
	ck_assert(disarm());
	ck_assert_int_eq(memcmp(&past, &q.node[q.nodes + 4], sizeof(past)), 0);
	ck_assert_uint_eq(q.node[7].q, SHM_EVQ_SMALL);
	ck_assert_uint_eq(q.hdr->state, SHM_EVQ_REBUILD);
	shm_evq_unlock(&q);
	ck_assert_int_eq(shm_evq_lock(&q), 0);
	ck_assert_uint_eq(q.hdr->head[0], 7 + 1);
	ck_assert_uint_eq(q.hdr->count[0], 3);
	ck_assert_int_eq(shm_evq_check_locked(&q, &why), 0);
	shm_evq_unlock(&q);
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *oom_suite(void)
{
	Suite *s = suite_create("oom");
	TCase *tc = tcase_create("oom");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_create_open_stage_under_allocation_failures);
	tcase_add_test(tc, test_l2_calls_under_allocation_failures);
	tcase_add_test(tc, test_segmented_admits_under_allocation_failures);
	tcase_add_test(tc, test_fsck_repair_of_a_stray_block_under_allocation_failures);
	tcase_add_test(tc, test_index_repair_under_allocation_failure);
	tcase_add_test(tc, test_evq_rebuild_under_allocation_failure);
	tcase_add_test(tc, test_lease_records_sorted_without_memory);
	tcase_add_test(tc, test_prefix_lookups_of_512_blocks_need_no_memory);
	tcase_add_test(tc, test_reclamation_without_leases_needs_no_memory);
	tcase_add_test(tc, test_a_sweep_that_failed_is_done_by_the_next_forced_reap);
	tcase_add_test(tc, test_seg_recount_and_sweep_under_allocation_failure);
	tcase_add_test(tc, test_l3ix_repair_without_memory);
	tcase_add_test(tc, test_l3_and_restore_under_allocation_failures);
	tcase_add_test(tc, test_l3_segmented_verify_under_allocation_failures);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(oom_suite)
