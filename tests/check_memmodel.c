/*
 * tests/check_memmodel.c — the shared-memory protocols' own code under a weak memory model
 * (tests/memmodel.h), so that an ordering x86 gives for free is still checked: a seq_cst fence
 * weakened to acq_rel, a release weakened to relaxed, two reads swapped.
 *
 * shm/readers.c (epochs), shm/index.c (lookup, unlink and retirement), shm/mutex.c (writer locks),
 * shm/ring.c (commit rings), shm/l3ix.c (the location index's sequence locks), shm/evring.c (the
 * event ring), lib/l2/lease.c (lease records) and lib/holders.c (the holder listing)
 * are compiled into this file with their atomics redirected to the model
 * (tests/mm_atomics.h) and their external names prefixed mm_ ($(B)/tests/mm_renames.h, made by
 * the Makefile from those files), so that what runs here is the code the library runs.
 *
 * Data that a protocol publishes with plain stores (records, fields under a lock) is not modelled;
 * its happens-before is checked with shadows: the test stores a modelled relaxed "shadow" of the
 * data before handing it to the protocol (program order, so a release publishes it too) and the
 * other side loads the shadow after the protocol handed the data over: a stale shadow is data the
 * protocol would let it read before it was written.
 *
 * First the model itself: classic litmus tests (store buffering, message passing) must show their
 * weak outcome without fences and never with them — a checker that finds nothing proves nothing.
 */
#include "mm_renames.h"

#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>

#include "mm_atomics.h"
/* from here on every C11 atomic goes through the model (addresses in registered regions) */
/* the reader table's claims ask who they are: a scenario may make model thread 1 another user */
#include <unistd.h>
static uid_t mm_other_euid;
static uid_t mm_geteuid(void)
{
	return mm_other_euid && mm_self() == 1 ? mm_other_euid : geteuid();
}
#define geteuid() mm_geteuid()
#include "../shm/readers.c"
#undef geteuid
#include "../shm/index.c"
/* shm/mutex.c's futex calls: a wait sleeps in the model until the word changes (mm_futex_wait);
 * FUTEX_WAKE is a no-op, so lost wake-ups are not checked here, only what each CAS publishes */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
static long mm_futex_call(long nr, uint32_t *w, int op, uint32_t val, const void *ts, void *w2, int v3)
{
	(void)ts, (void)w2, (void)v3;
	if (nr != SYS_futex || (op != FUTEX_WAIT && op != FUTEX_WAKE)) {
		errno = ENOSYS;
		return -1;
	}
	if (op == FUTEX_WAKE)
		return 0;
	int rc = mm_futex_wait(w, sizeof(*w), val);
	if (rc == 0)
		return 0;
	errno = rc > 0 ? ETIMEDOUT : EAGAIN;
	return -1;
}
#define syscall(...) mm_futex_call(__VA_ARGS__)
#include "../shm/mutex.c"
#undef syscall
#include "../shm/ring.c"
/* shm/l3ix.c's readers load entry fields with __atomic_load_n (relaxed): modelled too */
#define __atomic_load_n(p, o) MM_VAL(p, mm_load((const void *)(p), sizeof(*(p)), (o)))
#define __atomic_store_n(p, v, o) mm_store((void *)(p), sizeof(*(p)), (uint64_t)(v), (o))
#include "../shm/l3ix.c"
#include "../shm/evring.c"
#include "../lib/l2/lease.c"
#include "../lib/holders.c"

#include "sc_check.h"

#define MAX_EXECUTIONS 2000000ul

static void explore_ok(const struct mm_scenario *s)
{
	struct mm_result r;
	int rc = mm_explore(s, MAX_EXECUTIONS, &r);
	ck_assert_msg(rc == 0, "%s", r.first_failure);
	ck_assert_msg(r.exhausted, "%s: the bound was hit before every execution ran", s->name);
}

/* ---- the model's own litmus tests ---- */

static struct litmus {
	_Atomic uint64_t x, y;
	uint64_t r[2];
	int fence;      /* memory order of the fences between store and load (-1: none) */
	int st, ld;     /* orders of the message-passing store of y and load of y */
	int weak_seen;  /* the weak outcome happened in some execution */
} L;

static void litmus_reset(void *ctx)
{
	(void)ctx;
	atomic_init(&L.x, 0);
	atomic_init(&L.y, 0);
	L.r[0] = L.r[1] = 7;
}

/* SB: T0: x = 1; fence; r0 = y.  T1: y = 1; fence; r1 = x.  Weak: r0 == r1 == 0. */
static void sb_thread(void *ctx, unsigned who)
{
	(void)ctx;
	_Atomic uint64_t *mine = who ? &L.y : &L.x, *other = who ? &L.x : &L.y;
	atomic_store_explicit(mine, 1, memory_order_relaxed);
	if (L.fence >= 0)
		atomic_thread_fence(L.fence);
	L.r[who] = atomic_load_explicit(other, memory_order_relaxed);
}

static int sb_check(void *ctx, char *why, size_t len)
{
	(void)ctx, (void)why, (void)len;
	L.weak_seen |= L.r[0] == 0 && L.r[1] == 0;
	return 0;
}

/* MP: T0: x = 1 (relaxed); y = 1 (st).  T1: r0 = y (ld); r1 = x.  Weak: r0 == 1 && r1 == 0. */
static void mp_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		atomic_store_explicit(&L.x, 1, memory_order_relaxed);
		atomic_store_explicit(&L.y, 1, L.st);
	} else {
		L.r[0] = atomic_load_explicit(&L.y, L.ld);
		L.r[1] = atomic_load_explicit(&L.x, memory_order_relaxed);
	}
}

static int mp_check(void *ctx, char *why, size_t len)
{
	(void)ctx, (void)why, (void)len;
	L.weak_seen |= L.r[0] == 1 && L.r[1] == 0;
	return 0;
}

static int litmus(void (*thread)(void *, unsigned), int (*check)(void *, char *, size_t), const char *name)
{
	mm_regions_clear();
	mm_region(&L, sizeof(L));
	L.weak_seen = 0;
	struct mm_scenario s = { .name = name, .threads = 2, .reset = litmus_reset, .thread = thread, .check = check };
	explore_ok(&s);
	return L.weak_seen;
}

START_TEST(test_model_litmus)
{
	L.fence = -1;
	ck_assert_msg(litmus(sb_thread, sb_check, "SB, no fences"), "store buffering not modelled");
	L.fence = memory_order_acq_rel;
	ck_assert_msg(litmus(sb_thread, sb_check, "SB, acq_rel fences"), "acq_rel fences must not forbid SB");
	L.fence = memory_order_seq_cst;
	ck_assert_msg(!litmus(sb_thread, sb_check, "SB, seq_cst fences"), "seq_cst fences must forbid SB");
	L.st = memory_order_relaxed, L.ld = memory_order_acquire;
	ck_assert_msg(litmus(mp_thread, mp_check, "MP, relaxed store"), "delayed stores not modelled");
	L.st = memory_order_release, L.ld = memory_order_relaxed;
	ck_assert_msg(litmus(mp_thread, mp_check, "MP, relaxed load"), "stale reads not modelled");
	L.st = memory_order_release, L.ld = memory_order_acquire;
	ck_assert_msg(!litmus(mp_thread, mp_check, "MP, release/acquire"), "release/acquire must forbid MP");
}
END_TEST

/* futex waits: T0 sleeps while x is 0; T1 stores x = 1 (L.st >= 0) or does nothing */
static void futex_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0)
		L.r[0] = (uint64_t)mm_futex_wait(&L.x, sizeof(L.x), 0) + 1; /* 0: did not sleep, 1 woken, 2 timed out */
	else if (L.st >= 0)
		atomic_store_explicit(&L.x, 1, L.st);
}

static int futex_check(void *ctx, char *why, size_t len)
{
	(void)ctx, (void)why, (void)len;
	L.weak_seen |= 1 << L.r[0];
	return 0;
}

/* MP through a futex word: T1 stores y = 1, then x = 1 (release); T0 sleeps while x is 1 (it saw
 * the release), times out, then loads y. The wait is no acquire: y == 0 must be possible. */
static void futex_mp_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 1) {
		atomic_store_explicit(&L.y, 1, memory_order_relaxed);
		atomic_store_explicit(&L.x, 1, memory_order_release);
	} else if (mm_futex_wait(&L.x, sizeof(L.x), 1) >= 0) {
		L.weak_seen |= atomic_load_explicit(&L.y, memory_order_relaxed) == 0;
	}
}

static int futex_mp_check(void *ctx, char *why, size_t len)
{
	(void)ctx, (void)why, (void)len;
	return 0;
}

START_TEST(test_model_futex)
{
	mm_regions_clear();
	mm_region(&L, sizeof(L));
	struct mm_result r;
	struct mm_scenario s = { .name = "futex wait, woken by a store", .threads = 2, .reset = litmus_reset,
				 .thread = futex_thread, .check = futex_check };
	L.st = memory_order_relaxed, L.weak_seen = 0;
	ck_assert_int_eq(mm_explore(&s, MAX_EXECUTIONS, &r), 0);
	ck_assert_msg(r.exhausted && L.weak_seen == (1 << 0 | 1 << 1), "woken %#x: sleeps until the store, or never",
		      L.weak_seen);
	s.name = "futex wait, nobody stores";
	L.st = -1, L.weak_seen = 0;
	ck_assert_int_eq(mm_explore(&s, MAX_EXECUTIONS, &r), -1);
	ck_assert_msg(r.failures == r.executions && strstr(r.first_failure, "deadlock"), "%s", r.first_failure);
	s.name = "futex wait, nobody stores, time-outs";
	s.timeouts = 1, L.weak_seen = 0;
	ck_assert_int_eq(mm_explore(&s, MAX_EXECUTIONS, &r), 0);
	ck_assert_msg(r.exhausted && L.weak_seen == 1 << 2, "woken %#x: every execution times out", L.weak_seen);
	s.name = "futex wait, MP through the word";
	s.thread = futex_mp_thread, s.check = futex_mp_check, L.weak_seen = 0;
	ck_assert_int_eq(mm_explore(&s, MAX_EXECUTIONS, &r), 0);
	ck_assert_msg(r.exhausted && L.weak_seen, "a futex wait must not order the loads after it (it is no acquire)");
}
END_TEST

/* ---- epochs and leases: reclamation never frees what a reader can still use ---- */

#define NS "mm"

static struct proto {
	struct sc_arena *a, *w, *r;   /* creator; the writer's and the reader's handles */
	const char *name;
	struct sc_stage *st;
	struct sc_key key;
	uint32_t idx;                 /* the entry */
	uint32_t idx2;                /* mode 2: the entry linked in front of it and unlinked again */
	uint64_t rec;
	int lease;                    /* the reader takes a lease and uses the payload after its epoch */
	int advance_again;            /* the writer advances the epoch once more before it reclaims */
	/* what happened, in the order the coroutines ran (plain memory: sequentially consistent) */
	int using;                    /* the reader holds a reference (inside its epoch, or leased) */
	int freed;                    /* the reclaimer decided the entry's memory may be reused */
	int violated;
	char why[160];
	/* the real memory the threads change, restored before every execution */
	struct { void *p; size_t n; void *copy; } snap[7];
	int nsnap;
	uint64_t l2_lease_used_r;
} P;

static struct {
	_Atomic uint64_t fields; /* the shadow of the entry's plain fields */
} PS;

static void proto_reset(void *ctx)
{
	(void)ctx;
	for (int i = 0; i < P.nsnap; i++)
		memcpy(P.snap[i].p, P.snap[i].copy, P.snap[i].n);
	P.r->l2_lease_used = P.l2_lease_used_r;
	P.using = P.freed = P.violated = 0;
	atomic_init(&PS.fields, 0);
	P.why[0] = 0;
}

static void violation(const char *what)
{
	if (!P.violated) {
		P.violated = 1;
		snprintf(P.why, sizeof(P.why), "%s", what);
	}
}

/* the reader: lookup inside an epoch (lib/l2_read.c's order: enter, find, lease, exit), then the
 * payload under the lease, then the release */
static void reader(struct sc_arena *a)
{
	struct shm_index *ix = l2_ix(a);
	int err;
	shm_epoch_enter(a->shm);
	struct shm_index_entry *e = shm_index_find(ix, P.key.lo, P.key.hi, &err);
	if (e) {
		P.using = 1;
		if (P.freed)
			violation("the reader found the entry after the reclaimer freed it");
		if (!P.lease) {
			mm_yield(); /* using it inside the epoch (the lease case uses it after) */
			if (P.freed)
				violation("the entry was freed while the reader was inside its epoch");
		}
	}
	int slot = -1;
	if (e && P.lease)
		slot = l2_lease_take(a, shm_index_rec(ix, e));
	shm_epoch_exit(a->shm);
	if (slot >= 0) {
		mm_yield();
		if (P.freed)
			violation("the entry was freed while the reader held a lease on it");
		l2_lease_drop(a, slot);
	}
	P.using = 0;
}

/* the writer: unlink and retire (shm/index.c), then reclamation's two reads in lib/l2_evict.c's
 * order (epochs, then leases) and its rule (shm_index_reclaim_locked): free when every epoch is past
 * the retirement and no lease names the entry */
static void writer(struct sc_arena *a)
{
	struct shm_index *ix = l2_ix(a);
	struct shm_index_entry *e = &ix->ent[P.idx];
	if (shm_index_unlink_retire_locked(ix, e))
		return;
	if (P.advance_again)
		(void)shm_epoch_advance(a->shm); /* the next unlink's, by this writer or another */
	uint64_t min = shm_epoch_min_active(a->shm);
	uint64_t *leases;
	size_t n = l2_leases_collect(a, &leases);
	if (n == SIZE_MAX)
		return;
	if (e->retire_epoch < min && !shm_index_leased(leases, n, shm_index_rec(ix, e))) {
		P.freed = 1;
		if (P.using)
			violation("the reclaimer freed the entry while a reader used it");
	}
	free(leases);
}

static void proto_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0)
		reader(P.r);
	else
		writer(P.w);
}

static int proto_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (!P.violated)
		return 0;
	snprintf(why, len, "%s", P.why);
	return -1;
}

static void proto_setup_mode(int unpublished);

static void proto_setup(void)
{
	proto_setup_mode(0);
}

/* @unpublished: the entry is taken out of its bucket and made BUSY again, as a writer holds it
 * just before shm_index_link_locked; 2: a second entry of the same bucket (keys weakened to one
 * bucket) is unpublished too; 3: three entries of one bucket, the chain e3 -> e2 stays published
 * and e2 is given the entry's key (the entry, BUSY and out of the chain, is to replace it: a
 * store into e3's `next`, not into the bucket) */
static void proto_setup_mode(int unpublished)
{
	if (unpublished >= 2)
		sc_test_set_key_mask(0, ~0ull); /* every key's low half 0: one bucket, one shard */
	struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF, .reader_slots = 2 };
	P.a = sc_test_arena_opts("mm", &o, &P.name);
	P.w = P.a;
	ck_assert_int_eq(sc_arena_open(P.name, &P.r), 0);
	ck_assert_int_eq(sc_stage_open(P.a, "m", "s", &P.st), 0);
	static uint8_t buf[4096];
	memset(buf, 0x3c, sizeof(buf));
	int32_t t[4] = { 1, 2, 3, 4 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	ck_assert_int_eq(sc_l2_admit(P.st, NS, t, 4, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	ck_assert_int_eq(sc_l2_key(P.st, NS, t, 4, &P.key), 0);
	ck_assert_int_eq(l2_ready(P.r), 0);
	struct shm_index *ix = l2_ix(P.a);
	int err;
	struct shm_index_entry *e = shm_index_find(ix, P.key.lo, P.key.hi, &err); /* main context: real */
	ck_assert_ptr_nonnull(e);
	P.idx = shm_index_idx(ix, e);
	struct shm_index_entry *e2 = NULL, *e3 = NULL;
	if (unpublished == 2 || unpublished == 3) {
		int32_t t2[4] = { 5, 6, 7, 8 };
		struct sc_key k2;
		ck_assert_int_eq(sc_l2_admit(P.st, NS, t2, 4, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
		ck_assert_int_eq(sc_l2_key(P.st, NS, t2, 4, &k2), 0);
		e2 = shm_index_find(ix, k2.lo, k2.hi, &err);
		ck_assert_ptr_nonnull(e2);
		ck_assert_uint_eq(atomic_load(&e2->next), P.idx + 1); /* linked in front of the first */
		P.idx2 = shm_index_idx(ix, e2);
		atomic_store(&e2->next, 0);
		if (unpublished == 2)
			atomic_store(&e2->state, SHM_ENT_BUSY); /* out of the bucket with the first, just below */
	}
	if (unpublished == 3) {
		int32_t t3[4] = { 9, 10, 11, 12 };
		struct sc_key k3;
		ck_assert_int_eq(sc_l2_admit(P.st, NS, t3, 4, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
		ck_assert_int_eq(sc_l2_key(P.st, NS, t3, 4, &k3), 0);
		e3 = shm_index_find(ix, k3.lo, k3.hi, &err);
		ck_assert_ptr_nonnull(e3);
		ck_assert_uint_eq(atomic_load(&e3->next), P.idx2 + 1); /* the head: e3 -> e2 */
		e2->key_lo = e->key_lo;
		e2->key_hi = e->key_hi;
		atomic_store(&e->state, SHM_ENT_BUSY);
	}
	if (unpublished == 1 || unpublished == 2) {
		ck_assert_uint_eq(atomic_load(&e->next), 0); /* alone in its bucket */
		atomic_store(&ix->buckets[shm_index_bucket(ix, e->key_lo)], 0);
		atomic_store(&e->state, SHM_ENT_BUSY);
	}
	/* the memory the protocol writes, modelled and put back before every execution: the header
	 * (global epoch), the reader table, the index header (shards), its buckets, the entry */
	uint64_t n;
	P.snap[0].p = P.a->shm->base, P.snap[0].n = 4096;
	P.snap[1].p = shm_region(P.a->shm, SHM_REGION_READERS, &n), P.snap[1].n = n;
	P.snap[2].p = ix->hdr, P.snap[2].n = sizeof(*ix->hdr);
	P.snap[3].p = (void *)ix->buckets, P.snap[3].n = (ix->mask + 1) * sizeof(ix->buckets[0]);
	P.snap[4].p = e, P.snap[4].n = sizeof(*e);
	P.nsnap = 5;
	if (e2)
		P.snap[5].p = e2, P.snap[5].n = sizeof(*e2), P.nsnap = 6;
	if (e3)
		P.snap[6].p = e3, P.snap[6].n = sizeof(*e3), P.nsnap = 7;
	mm_regions_clear();
	for (int i = 0; i < P.nsnap; i++) {
		P.snap[i].copy = malloc(P.snap[i].n);
		memcpy(P.snap[i].copy, P.snap[i].p, P.snap[i].n);
		mm_region(P.snap[i].p, P.snap[i].n);
		/* the reader's handle maps the same file elsewhere */
		uint8_t *alias = P.r->shm->base + ((uint8_t *)P.snap[i].p - P.a->shm->base);
		mm_region_alias(alias, P.snap[i].n, P.snap[i].p);
	}
	P.l2_lease_used_r = P.r->l2_lease_used;
	mm_region(&PS, sizeof(PS));
}

static void proto_teardown(void)
{
	proto_reset(NULL);
	for (int i = 0; i < P.nsnap; i++)
		free(P.snap[i].copy);
	sc_test_set_key_mask(~0ull, ~0ull);
	mm_regions_clear();
	sc_stage_close(P.st);
	sc_arena_close(P.r);
	sc_test_arena_destroy(P.a, P.name);
}

static void run_proto(int lease, const char *name)
{
	P.lease = lease;
	struct mm_scenario s = { .name = name, .threads = 2, .reset = proto_reset, .thread = proto_thread,
				 .check = proto_check };
	explore_ok(&s);
}

/* A reader that finds an entry inside its epoch is never freed under (the store of its epoch is
 * ordered before its lookup by shm_epoch_enter's seq_cst fence, and the reclaimer's epoch reads
 * after its unlink by shm_epoch_min_active's). */
START_TEST(test_epoch_vs_reclaim_under_weak_memory)
{
	proto_setup();
	run_proto(0, "epoch enter/find/exit vs unlink+reclaim");
	proto_teardown();
}
END_TEST

/* A lease taken inside the epoch is seen by a reclaimer that saw the epoch's exit (release in
 * shm_epoch_exit, acquire in shm_epoch_min_active, then the lease reads). */
START_TEST(test_lease_vs_reclaim_under_weak_memory)
{
	proto_setup();
	run_proto(1, "lease in epoch vs unlink+reclaim");
	proto_teardown();
}
END_TEST

/* A reader whose epoch comes from a later advance than the entry's retirement (another unlink's)
 * is not waited for, so it must not find the entry: the advance's release (after the unlink),
 * read by shm_epoch_enter's relaxed load of the global epoch and completed by its seq_cst fence
 * (an acquire fence too), orders the unlink before the lookup. */
START_TEST(test_epoch_after_a_later_advance_vs_reclaim_under_weak_memory)
{
	proto_setup();
	P.advance_again = 1;
	run_proto(0, "epoch enter at a later advance vs unlink+advance+reclaim");
	P.advance_again = 0;
	proto_teardown();
}
END_TEST

/* An index scenario: the arena set up in @mode (proto_setup_mode), @thread's two sides explored
 * under the model, the protocol's violations checked after each execution. */
static void run_index_scenario(int mode, const char *name, void (*thread)(void *ctx, unsigned who))
{
	proto_setup_mode(mode);
	struct mm_scenario s = { .name = name, .threads = 2, .reset = proto_reset, .thread = thread,
				 .check = proto_check };
	explore_ok(&s);
	proto_teardown();
}

/* the writer publishes the entry (its fields first: the shadow), the reader looks it up */
static void publish_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		struct shm_index *ix = l2_ix(P.r);
		int err;
		shm_epoch_enter(P.r->shm);
		struct shm_index_entry *e = shm_index_find(ix, P.key.lo, P.key.hi, &err);
		if (e && atomic_load_explicit(&PS.fields, memory_order_relaxed) != 1)
			violation("the reader found the entry before its fields were written");
		shm_epoch_exit(P.r->shm);
		return;
	}
	struct shm_index *ix = l2_ix(P.w);
	atomic_store_explicit(&PS.fields, 1, memory_order_relaxed);
	shm_index_link_locked(ix, &ix->ent[P.idx], NULL);
}

/* A reader that reaches an entry through its bucket sees everything written before it was linked
 * (release of the slot in shm_index_link_locked, acquire of every link in shm_index_find). */
START_TEST(test_publish_vs_lookup_under_weak_memory)
{
	run_index_scenario(1, "index publish vs lookup", publish_thread);
}
END_TEST

/* the writer publishes the entry, links a second one in front of it and unlinks that again: the
 * bucket names the first entry once more, through the unlink's store; the reader looks the first
 * one up */
static void unlink_publish_thread(void *ctx, unsigned who)
{
	if (who == 0) {
		publish_thread(ctx, 0);
		return;
	}
	struct shm_index *ix = l2_ix(P.w);
	atomic_store_explicit(&PS.fields, 1, memory_order_relaxed);
	shm_index_link_locked(ix, &ix->ent[P.idx], NULL);
	shm_index_link_locked(ix, &ix->ent[P.idx2], NULL);
	(void)shm_index_unlink_retire_locked(ix, &ix->ent[P.idx2]);
}

/* A reader that reaches an entry through a slot an unlink wrote sees everything written before the
 * entry was linked (release of the slot in shm_index_unlink_retire_locked: the successor was
 * published earlier, and the unlink's store carries that on). */
START_TEST(test_unlink_vs_lookup_of_the_successor_under_weak_memory)
{
	run_index_scenario(2, "index unlink vs lookup of the successor", unlink_publish_thread);
}
END_TEST

/* the writer replaces e2 (behind the chain's head) by the entry: a store into the head's `next`;
 * the reader looks the key up and, when it reaches the new entry, must see its fields */
static void replace_behind_head_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		struct shm_index *ix = l2_ix(P.r);
		int err;
		shm_epoch_enter(P.r->shm);
		struct shm_index_entry *e = shm_index_find(ix, P.key.lo, P.key.hi, &err);
		if (e == &ix->ent[P.idx] && atomic_load_explicit(&PS.fields, memory_order_relaxed) != 1)
			violation("the reader reached the replacement before its fields were written");
		shm_epoch_exit(P.r->shm);
		return;
	}
	struct shm_index *ix = l2_ix(P.w);
	atomic_store_explicit(&PS.fields, 1, memory_order_relaxed);
	shm_index_link_locked(ix, &ix->ent[P.idx], &ix->ent[P.idx2]);
}

/* A reader that reaches an entry through a `next` link sees everything written before that link
 * was stored (release of the slot in shm_index_link_locked, acquire of every `next` in
 * shm_index_find: the bucket's acquire alone does not order it, the head was published earlier). */
START_TEST(test_replace_behind_the_head_vs_lookup_under_weak_memory)
{
	run_index_scenario(3, "index replace behind the head vs lookup", replace_behind_head_thread);
}
END_TEST

/* ---- writer locks: what one holder wrote is what the next holder reads ---- */

static struct mutexcase {
	struct shm_mutex mu;
	_Atomic uint64_t counter;   /* the shadow of data written under the lock */
	int got[3];
	int rc[3];                  /* what shm_mutex_lock returned (1: not called) */
	int took_over;              /* some execution took a dead holder's lock over */
	int ok[3];                  /* what each thread's shm_mutex_lock must return (1: not called) */
} MX;

static struct sc_arena *mx_h[2];
static struct shm_arena mx_dead; /* a copy of mx_h[1]'s handle whose token names no reader slot */

static void mx_reset(void *ctx)
{
	(void)ctx;
	shm_mutex_init(&MX.mu);
	atomic_init(&MX.counter, 0);
	MX.got[0] = MX.got[1] = MX.got[2] = 0;
	MX.rc[0] = MX.rc[1] = MX.rc[2] = 1;
}

/* under the lock: increment the counter as a plain read-modify-write would (load, then store) */
static void mx_update(int *got)
{
	uint64_t c = atomic_load_explicit(&MX.counter, memory_order_relaxed);
	atomic_store_explicit(&MX.counter, c + 1, memory_order_relaxed);
	*got = 1;
}

/* each thread: trylock (a few tries), the update, unlock */
static void mx_thread(void *ctx, unsigned who)
{
	(void)ctx;
	for (int tries = 0; tries < 3; tries++) {
		if (shm_mutex_trylock(mx_h[who]->shm, &MX.mu) == 0) {
			mx_update(&MX.got[who]);
			shm_mutex_unlock(mx_h[who]->shm, &MX.mu);
			return;
		}
		mm_yield();
	}
}

/* shm_mutex_lock (sleeping on the futex while another thread holds it; a take-over of a dead
 * holder's lock counts), the update, unlock */
static void mx_lock_update(struct sc_arena *h, unsigned who)
{
	int rc = MX.rc[who] = shm_mutex_lock(h->shm, &MX.mu);
	if (rc != 0 && rc != -EOWNERDEAD)
		return;
	MX.took_over |= rc == -EOWNERDEAD;
	mx_update(&MX.got[who]);
	shm_mutex_unlock(h->shm, &MX.mu);
}

static void mx_lock_thread(void *ctx, unsigned who)
{
	(void)ctx;
	mx_lock_update(mx_h[who], who);
}

/* T0 takes the lock once (trylock) and updates; T1 takes it with a dead token and dies holding it,
 * having written nothing; T2 locks and updates: when T1 holds the lock, T2 sleeps, times out,
 * finds the holder dead and takes the lock over, and must still see T0's update when T0 held the
 * lock before T1 */
static void mx_dead_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 2)
		mx_lock_update(mx_h[1], 2);
	else if (shm_mutex_trylock(who ? &mx_dead : mx_h[0]->shm, &MX.mu) == 0 && !who) {
		mx_update(&MX.got[0]);
		shm_mutex_unlock(mx_h[0]->shm, &MX.mu);
	} /* T1 returns holding the lock: it died */
}

static int mx_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	/* every execution: each lock call returned what its scenario allows (T2's take-over: 0 or
	 * -EOWNERDEAD, written as -EOWNERDEAD) */
	for (int i = 0; i < 3; i++)
		if (MX.rc[i] != MX.ok[i] && !(MX.ok[i] == -EOWNERDEAD && MX.rc[i] == 0)) {
			snprintf(why, len, "T%d: shm_mutex_lock returned %d", i, MX.rc[i]);
			return -1;
		}
	uint64_t c = atomic_load_explicit(&MX.counter, memory_order_relaxed);
	int got = MX.got[0] + MX.got[1] + MX.got[2];
	if (c == (uint64_t)got)
		return 0;
	snprintf(why, len, "%d holders, counter %llu: an update made under the lock was lost", got, (unsigned long long)c);
	return -1;
}

START_TEST(test_mutex_under_weak_memory)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF, .reader_slots = 2 };
	mx_h[0] = sc_test_arena_opts("mmmx", &o, &name);
	ck_assert_int_eq(sc_arena_open(name, &mx_h[1]), 0);
	mm_regions_clear();
	mm_region(&MX, sizeof(MX));
	struct mm_scenario s = { .name = "mutex trylock/unlock, 2 holders", .threads = 2, .reset = mx_reset,
				 .thread = mx_thread, .check = mx_check };
	MX.ok[0] = MX.ok[1] = MX.ok[2] = 1;
	explore_ok(&s);
	/* the lock's own acquires: the uncontended CAS, and the CAS after a sleep on the word; both
	 * threads take the lock in every execution */
	s.name = "mutex lock (futex)/unlock, 2 holders";
	s.thread = mx_lock_thread;
	MX.ok[0] = MX.ok[1] = 0;
	explore_ok(&s);
	/* a holder that died: its waiter's time-out, the dead token (refused by its slot number) and
	 * the take-over's acquire */
	mx_dead = *mx_h[1]->shm;
	mx_dead.token = shm_token(8, 1); /* slot 8 of a 2-slot table: dead */
	s.name = "mutex lock, a holder dies, take-over";
	s.threads = 3;
	s.thread = mx_dead_thread;
	s.timeouts = 1;
	MX.ok[0] = MX.ok[1] = 1, MX.ok[2] = -EOWNERDEAD; /* T2 takes the lock in every execution */
	MX.took_over = 0;
	explore_ok(&s);
	ck_assert_msg(MX.took_over, "no execution took the dead holder's lock over");
	mm_regions_clear();
	sc_arena_close(mx_h[1]);
	sc_test_arena_destroy(mx_h[0], name);
}
END_TEST

/* ---- commit rings: the consumer reads a record only after its producer wrote it ---- */

#define RING_RECS 3

static struct ringcase {
	struct sc_arena *a, *c;
	const char *name;
	struct shm_ring_prod prod, prod0;
	struct shm_ring_cons cons, cons0;
	struct shm_ring_dir *dir;
	void *ctl, *ctl0, *data, *data0;
	size_t ctl_n, data_n;
	int violated;
	unsigned seen;
	unsigned sent;                /* records the producer committed before closing */
	int freed;                    /* the consumer found the ring FREE after its rounds */
	char why[160];
} RG;

static struct {
	_Atomic uint64_t written[RING_RECS]; /* shadows of the records' bytes */
} RS;

static uint64_t ring_cid0;                 /* the directory's consumer_id before the threads ran */
static void (*ring_reset_extra)(void);    /* a scenario's own state, put back */

static void ring_reset(void *ctx)
{
	(void)ctx;
	memcpy(RG.ctl, RG.ctl0, RG.ctl_n);
	memcpy(RG.data, RG.data0, RG.data_n);
	RG.prod = RG.prod0;
	RG.cons = RG.cons0;
	for (int i = 0; i < RING_RECS; i++)
		atomic_init(&RS.written[i], 0);
	RG.violated = 0;
	RG.seen = 0;
	RG.sent = 0;
	RG.freed = 0;
	if (RG.dir)
		memcpy((void *)&RG.dir->consumer_id, &ring_cid0, 8);
	if (ring_reset_extra)
		ring_reset_extra();
}

/* Commit record @k of @ntok tokens (k, 7, 7, ...; at most 500): shm_ring_submit's answer. */
static int ring_commit_n(uint64_t k, uint32_t ntok)
{
	static int32_t tok[500];
	ck_assert_uint_le(ntok, 500);
	for (uint32_t i = 0; i < ntok && i < 500; i++)
		tok[i] = i ? 7 : (int32_t)k;
	struct shm_ring_msg m = { .request_id = k, .ntokens = ntok, .tokens = tok };
	return shm_ring_submit(&RG.prod, &m);
}

static int ring_commit(uint64_t k)
{
	return ring_commit_n(k, 2);
}

/* One poll of the ring through @c: the records it delivered (their bytes unread). */
static unsigned ring_deliver(struct shm_ring_dir *d, struct shm_ring_cons *c)
{
	struct shm_ring_cursor cur;
	struct shm_ring_view v;
	unsigned n = 0;
	if (shm_ring_cursor_open(d, RG.prod0.index, c, &cur) <= 0)
		return 0;
	while (shm_ring_cursor_next(&cur, &v) > 0)
		n++;
	shm_ring_cursor_close(&cur);
	return n;
}

static void ring_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		for (uint64_t k = 0; k < RING_RECS; k++) {
			atomic_store_explicit(&RS.written[k], 1, memory_order_relaxed);
			if (ring_commit(k))
				return;
		}
		return;
	}
	for (int round = 0; round < 2; round++) {
		struct shm_ring_cursor cur;
		if (shm_ring_cursor_open(RG.dir, RG.prod0.index, &RG.cons, &cur) <= 0) {
			mm_yield();
			continue;
		}
		struct shm_ring_view v;
		while (shm_ring_cursor_next(&cur, &v) > 0) {
			if (v.request_id >= RING_RECS ||
			    atomic_load_explicit(&RS.written[v.request_id], memory_order_relaxed) != 1) {
				if (!RG.violated)
					snprintf(RG.why, sizeof(RG.why), "the consumer read record %llu before its producer wrote it",
						 (unsigned long long)v.request_id);
				RG.violated = 1;
			}
			RG.seen++;
		}
		shm_ring_cursor_close(&cur);
		mm_yield();
	}
}

static struct shm_ring_stat RST;
static int rst_rc;

/* thread 0 commits a record and then, as the consumer, delivers it (tail, then head, move on);
 * thread 1 takes a snapshot */
static void ring_stat_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 1) {
		rst_rc = shm_ring_stat(RG.c->shm, RG.prod0.index, &RST);
		return;
	}
	atomic_store_explicit(&RS.written[0], 1, memory_order_relaxed);
	if (ring_commit(0) == 0)
		RG.seen += ring_deliver(RG.dir, &RG.cons);
}

static int ring_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (!RG.violated)
		return 0;
	snprintf(why, len, "%s", RG.why);
	return -1;
}

/* the producer commits one record and closes its ring (R3, then R2); the consumer polls twice,
 * and a drained CLOSED ring is freed (ring_reap: A1, then A3) */
static void ring_close_thread(void *ctx, unsigned who)
{
	if (who == 0) {
		atomic_store_explicit(&RS.written[0], 1, memory_order_relaxed);
		if (ring_commit(0) == 0) {
			RG.sent = 1;
			(void)shm_ring_release(&RG.prod);
		}
		return;
	}
	ring_thread(ctx, who);
	uint64_t w = atomic_load_explicit(&RG.prod0.ctl->owner, memory_order_relaxed); /* our own CAS, if any */
	RG.freed = shm_ring_owner_state(w) == SHM_RING_FREE;
}

static int ring_close_check(void *ctx, char *why, size_t len)
{
	if (RG.freed && RG.seen < RG.sent) {
		snprintf(why, len, "the consumer freed a closed ring with %u of %u records delivered", RG.seen, RG.sent);
		return -1;
	}
	return ring_check(ctx, why, len);
}

/* thread 0 commits a record and closes its ring; thread 1 takes a snapshot */
static void ring_stat_close_thread(void *ctx, unsigned who)
{
	if (who == 1) {
		ring_stat_thread(ctx, who);
		return;
	}
	if (ring_commit(0) == 0)
		(void)shm_ring_release(&RG.prod);
}

static int ring_stat_check(void *ctx, char *why, size_t len)
{
	/* a snapshot that shows the ring CLOSED shows its final tail (A1 pairs with R2) */
	if (!rst_rc && RST.state == SHM_RING_CLOSED && RST.tail != RG.prod.tail) {
		snprintf(why, len, "a snapshot of the closed ring shows tail %llu, its producer's last is %llu",
			 (unsigned long long)RST.tail, (unsigned long long)RG.prod.tail);
		return -1;
	}
	if (rst_rc || RST.corrupt) {
		snprintf(why, len, "stat %d: head %llu tail %llu corrupt %d", rst_rc, (unsigned long long)RST.head,
			 (unsigned long long)RST.tail, RST.corrupt);
		return -1;
	}
	return ring_check(ctx, why, len);
}

/* thread 0 commits two records and, as the consumer, delivers them; thread 1 takes a snapshot */
static void ring_stat_two_thread(void *ctx, unsigned who)
{
	if (who == 1) {
		ring_stat_thread(ctx, who);
		return;
	}
	if (ring_commit(0) == 0 && ring_commit(1) == 0)
		RG.seen += ring_deliver(RG.dir, &RG.cons);
}

/* records of 64 bytes: a head the snapshot acquired is past head / 64 records, and the record
 * count, stored after the tail's release, lags the last commit by at most that one record */
static int ring_stat_two_check(void *ctx, char *why, size_t len)
{
	if (!rst_rc && RST.head / 64 > RST.records + 1) {
		snprintf(why, len, "a snapshot shows head %llu (%llu records delivered) and %llu committed",
			 (unsigned long long)RST.head, (unsigned long long)RST.head / 64, (unsigned long long)RST.records);
		return -1;
	}
	return ring_stat_check(ctx, why, len);
}

/* the ring full before the threads run: two records of 500 tokens (2 048 bytes each) */
static void ring_full_prep(void)
{
	ck_assert_int_eq(ring_commit_n(100, 500), 0);
	ck_assert_int_eq(ring_commit_n(101, 500), 0);
	ck_assert_uint_eq(RG.prod.tail, RG.prod.size);
}

/* thread 0, as the consumer, delivers the full ring, then commits a record past the wrap (its
 * producer reads the new head); thread 1 takes a snapshot */
static void ring_stat_wrap_thread(void *ctx, unsigned who)
{
	if (who == 1) {
		ring_stat_thread(ctx, who);
		return;
	}
	RG.seen += ring_deliver(RG.dir, &RG.cons);
	(void)ring_commit(0);
}


static struct shm_ring_prod RCL;
static int rcl_rc;

/* thread 0 commits a record and closes its ring; thread 1, the consumer, polls twice (delivers
 * what it finds, then frees a drained closed ring); thread 2 claims a ring */
static void ring_claim_thread(void *ctx, unsigned who)
{
	if (who == 2) {
		rcl_rc = shm_ring_claim(RG.a->shm, &RCL);
		return;
	}
	if (who == 0) {
		ring_close_thread(ctx, who);
		return;
	}
	/* one poll that delivers what it finds, one that frees a drained closed ring */
	RG.seen += ring_deliver(RG.dir, &RG.cons);
	struct shm_ring_cursor cur;
	if (shm_ring_cursor_open(RG.dir, RG.prod0.index, &RG.cons, &cur) > 0)
		shm_ring_cursor_close(&cur);
}

static int ring_claim_check(void *ctx, char *why, size_t len)
{
	if (rcl_rc == 0 && (RCL.tail != RG.prod.tail || RCL.head_cache != RCL.tail)) {
		snprintf(why, len, "a ring claimed at tail %llu with head %llu (its last tail %llu): not empty",
			 (unsigned long long)RCL.tail, (unsigned long long)RCL.head_cache,
			 (unsigned long long)RG.prod.tail);
		return -1;
	}
	if (rcl_rc != 0 && rcl_rc != -ENOSPC) {
		snprintf(why, len, "the claim returned %d", rcl_rc);
		return -1;
	}
	return ring_check(ctx, why, len);
}

static unsigned ring_nthreads = 2;
static void (*ring_prep)(void); /* main context, before the snapshot the executions start from */

static void run_ring(const char *name, void (*thread)(void *, unsigned), int (*check)(void *, char *, size_t))
{
	struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF, .reader_slots = 2, .ring_count = 1,
				   .ring_bytes = 4096 };
	RG.a = sc_test_arena_opts("mmring", &o, &RG.name);
	ck_assert_int_eq(sc_arena_open(RG.name, &RG.c), 0);
	/* main context: the producer's claim and the consumer's lock are not what this explores */
	ck_assert_int_eq(shm_ring_claim(RG.a->shm, &RG.prod), 0);
	ck_assert_int_eq(shm_ring_consumer_acquire(RG.c->shm, &RG.cons), 0);
	ck_assert_int_eq(shm_ring_poll_begin(RG.c->shm, &RG.cons, &RG.dir), 0);
	if (ring_prep)
		ring_prep();
	memcpy(&ring_cid0, (void *)&RG.dir->consumer_id, 8);
	RG.prod0 = RG.prod;
	RG.cons0 = RG.cons;
	RG.ctl = RG.prod.ctl, RG.ctl_n = sizeof(*RG.prod.ctl);
	RG.data = RG.prod.data, RG.data_n = RG.prod.size;
	RG.ctl0 = malloc(RG.ctl_n);
	RG.data0 = malloc(RG.data_n);
	memcpy(RG.ctl0, RG.ctl, RG.ctl_n);
	memcpy(RG.data0, RG.data, RG.data_n);
	mm_regions_clear();
	uint64_t n;
	uint8_t *reg = shm_region(RG.a->shm, SHM_REGION_RINGS, &n);
	mm_region(reg, n);
	mm_region_alias(shm_region(RG.c->shm, SHM_REGION_RINGS, NULL), n, reg);
	mm_region(&RS, sizeof(RS));
	struct mm_scenario s = { .name = name, .threads = ring_nthreads, .reset = ring_reset, .thread = thread,
				 .check = check };
	explore_ok(&s);
	mm_regions_clear();
	ring_reset(NULL);
	free(RG.ctl0);
	free(RG.data0);
	sc_arena_close(RG.c);
	sc_test_arena_destroy(RG.a, RG.name);
}

/* A snapshot (shm_ring_stat) taken while a record is committed and delivered is never "corrupt"
 * (it reads tail again when the consumer's head, acquired, is past it), nor while a full ring is
 * drained and a record committed past the wrap (the tail, acquired first, carries the head its
 * producer had seen: never more than a ring apart); its record count never lags the delivered
 * count by more than the last commit; one that shows a ring CLOSED shows the producer's final
 * tail (A1 pairs with R2). */
START_TEST(test_ring_stat_under_weak_memory)
{
	run_ring("ring stat vs submit and cursor", ring_stat_thread, ring_stat_check);
	run_ring("ring stat vs close", ring_stat_close_thread, ring_stat_check);
	run_ring("ring stat vs two submits and a cursor", ring_stat_two_thread, ring_stat_two_check);
	ring_prep = ring_full_prep;
	run_ring("ring stat vs a full ring drained, then wrapped", ring_stat_wrap_thread, ring_stat_check);
	ring_prep = NULL;
}
END_TEST

/* A ring is claimed only empty, from its final positions: a claimer that sees the ring CLOSED sees
 * its producer's last tail (A1 pairs with R2), and one that sees it FREE sees the consumer's last
 * head (A1 pairs with the reap's release). */
START_TEST(test_ring_claim_vs_reap_under_weak_memory)
{
	ring_nthreads = 3;
	run_ring("ring claim vs close, deliver and reap", ring_claim_thread, ring_claim_check);
	ring_nthreads = 2;
}
END_TEST

START_TEST(test_ring_under_weak_memory)
{
	run_ring("ring submit vs cursor", ring_thread, ring_check);
}
END_TEST

/* A consumer that sees a ring CLOSED sees its final tail (A1 pairs with R2): it never frees a ring
 * whose last record it has not delivered. */
START_TEST(test_ring_close_vs_reap_under_weak_memory)
{
	run_ring("ring close vs reap", ring_close_thread, ring_close_check);
}
END_TEST

/* fsck walks the records of a ring snapshot (check_rings: ring_bad_record reads [head, tail)), and
 * a record that looks malformed makes it reset the ring: every record a walk of a snapshot reads
 * was written, and none looks malformed. Thread 0 commits a record, delivers it, commits another;
 * thread 1 takes a snapshot and walks it (the tail it reads is acquired: R3; read again after the
 * acquired head). */
static struct shm_ring_stat WALK_ST;

static void ring_walk_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		for (uint64_t k = 0; k < 2; k++) {
			atomic_store_explicit(&RS.written[k], 1, memory_order_relaxed);
			if (ring_commit(k))
				return;
			if (k == 0)
				(void)ring_deliver(RG.dir, &RG.cons);
		}
		return;
	}
	if (shm_ring_stat(RG.c->shm, RG.prod0.index, &WALK_ST) || WALK_ST.corrupt)
		return;
	struct shm_ring_cursor cur = { .ctl = RG.prod0.ctl, .data = RG.prod0.data, .size = RG.prod0.size,
				       .mask = RG.prod0.mask, .start = WALK_ST.head, .head = WALK_ST.head, .tail = WALK_ST.tail,
				       .pf = WALK_ST.head };
	struct shm_ring_view v;
	int rc;
	while ((rc = shm_ring_cursor_next(&cur, &v)) > 0) {
		if (v.request_id >= 2 || atomic_load_explicit(&RS.written[v.request_id], memory_order_relaxed) != 1) {
			if (!RG.violated)
				snprintf(RG.why, sizeof(RG.why), "a walk of a snapshot (head %llu tail %llu) read record %llu "
					 "before it was written", (unsigned long long)WALK_ST.head, (unsigned long long)WALK_ST.tail,
					 (unsigned long long)v.request_id);
			RG.violated = 1;
		}
	}
	if (rc < 0 && !RG.violated) { /* a header read before it was written: fsck would reset a sound ring */
		snprintf(RG.why, sizeof(RG.why), "a walk of a snapshot (head %llu tail %llu) found a malformed record %d",
			 (unsigned long long)WALK_ST.head, (unsigned long long)WALK_ST.tail, rc);
		RG.violated = 1;
	}
}
START_TEST(test_ring_snapshot_walk_under_weak_memory)
{
	run_ring("ring snapshot walk vs commits and delivery", ring_walk_thread, ring_check);
}
END_TEST

/* A reader that sees a new claim in the owner word (as shm_ring_stat and fsck read it: the owner
 * word acquired, then tail and head) sees the ring as the claimer took it: the consumer's last head
 * and consumed count (R1, the claim's release, continues what the claimer acquired). Main commits a
 * record; thread 0 closes the ring and delivers the record; thread 1 claims; thread 2 reads. */
static struct shm_ring_stat SEEN_ST;
static int claim_seen_rc;

static void claim_seen_reset(void)
{
	claim_seen_rc = 1;
	memset(&SEEN_ST, 0, sizeof(SEEN_ST));
	rcl_rc = 1;
	memset(&RCL, 0, sizeof(RCL));
}

static void claim_seen_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 1) {
		rcl_rc = shm_ring_claim(RG.a->shm, &RCL);
		return;
	}
	if (who == 2) {
		/* shm_ring_stat's reads, cut down (the whole of it exceeds the model's bound here) */
		struct shm_ring_ctl *c = RG.prod0.ctl;
		uint64_t w = atomic_load_explicit(&c->owner, memory_order_acquire);
		SEEN_ST.state = shm_ring_owner_state(w);
		SEEN_ST.gen = shm_ring_owner_gen(w);
		SEEN_ST.tail = atomic_load_explicit(&c->tail, memory_order_acquire);
		SEEN_ST.head = atomic_load_explicit(&c->head, memory_order_acquire);
		SEEN_ST.records = 1; /* committed in main, before the threads */
		SEEN_ST.consumed = atomic_load_explicit(&c->consumed, memory_order_relaxed);
		claim_seen_rc = 0;
		return;
	}
	(void)shm_ring_release(&RG.prod);
	(void)ring_deliver(RG.dir, &RG.cons);
}
static int claim_seen_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (rcl_rc == 0 && claim_seen_rc == 0 && SEEN_ST.state == SHM_RING_LIVE && SEEN_ST.gen == RCL.gen &&
	    (SEEN_ST.head != RCL.tail || SEEN_ST.tail != RCL.tail || SEEN_ST.consumed != SEEN_ST.records)) {
		snprintf(why, len, "snapshot of the new claim: head %llu tail %llu records %llu consumed %llu (claimed at %llu)",
			 (unsigned long long)SEEN_ST.head, (unsigned long long)SEEN_ST.tail, (unsigned long long)SEEN_ST.records,
			 (unsigned long long)SEEN_ST.consumed, (unsigned long long)RCL.tail);
		return -1;
	}
	return 0;
}
static void claim_seen_prep(void)
{
	ck_assert_int_eq(ring_commit(0), 0);
}
START_TEST(test_ring_claim_seen_by_a_reader_under_weak_memory)
{
	ring_nthreads = 3;
	ring_prep = claim_seen_prep;
	ring_reset_extra = claim_seen_reset;
	run_ring("ring close and delivery vs claim vs reader", claim_seen_thread, claim_seen_check);
	ring_reset_extra = NULL;
	ring_prep = NULL;
	ring_nthreads = 2;
}
END_TEST

/* The consumer lock handed over cleanly (released, then taken) hands over the heads too: a record
 * is delivered once. Main commits a record and releases the lock; thread 0 (handle c) polls and
 * releases the lock; thread 1 (handle a) polls. */
static struct shm_ring_cons HANDOVER_CONS;
static unsigned handover_seen[2];

static void handover_prep(void)
{
	ck_assert_int_eq(ring_commit(0), 0);
	shm_ring_consumer_release(RG.c->shm, &RG.cons);
}
static void handover_reset(void)
{
	memset(&HANDOVER_CONS, 0, sizeof(HANDOVER_CONS));
	handover_seen[0] = handover_seen[1] = 0;
}

static void handover_poll(struct sc_arena *a, struct shm_ring_cons *c, unsigned who)
{
	struct shm_ring_dir *d;
	if (shm_ring_poll_begin(a->shm, c, &d))
		return;
	handover_seen[who] += ring_deliver(d, c);
	if (who == 0)
		shm_ring_consumer_release(a->shm, c);
}
static void handover_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0)
		handover_poll(RG.c, &RG.cons, 0);
	else
		handover_poll(RG.a, &HANDOVER_CONS, 1);
}
static int handover_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (handover_seen[0] + handover_seen[1] > 1) {
		snprintf(why, len, "record delivered %u + %u times across a clean handover", handover_seen[0], handover_seen[1]);
		return -1;
	}
	return 0;
}
START_TEST(test_ring_consumer_handover_under_weak_memory)
{
	ring_prep = handover_prep;
	ring_reset_extra = handover_reset;
	run_ring("ring consumer handover", handover_thread, handover_check);
	ring_prep = NULL;
	ring_reset_extra = NULL;
}
END_TEST

/* A ring seen FREE can be claimed: the reap's release carries the consumer's head, so the claimer
 * finds it empty. Thread 0 commits a record and closes the ring; thread 1 delivers it and frees the
 * ring; thread 2 claims the ring when it sees it FREE. */
static int free_seen;

static void free_claim_reset(void)
{
	free_seen = 0;
	rcl_rc = 1;
	memset(&RCL, 0, sizeof(RCL));
}

static void free_claim_thread(void *ctx, unsigned who)
{
	if (who == 2) {
		uint64_t w = atomic_load_explicit(&RG.prod0.ctl->owner, memory_order_acquire);
		if (shm_ring_owner_state(w) == SHM_RING_FREE) {
			free_seen = 1;
			rcl_rc = shm_ring_claim(RG.a->shm, &RCL);
		}
		return;
	}
	ring_claim_thread(ctx, who == 0 ? 0 : 1);
}
static int free_claim_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (free_seen && rcl_rc != 0) {
		snprintf(why, len, "the ring was seen FREE but the claim returned %d", rcl_rc);
		return -1;
	}
	return 0;
}
START_TEST(test_ring_free_ring_is_claimable_under_weak_memory)
{
	ring_nthreads = 3;
	ring_reset_extra = free_claim_reset;
	run_ring("ring reap vs claim of a FREE ring", free_claim_thread, free_claim_check);
	ring_reset_extra = NULL;
	ring_nthreads = 2;
}
END_TEST

/* ---- the location index: a reader never keeps a half-written entry, chain or length list ---- */

/* shm/l3ix.c's sequence locks: a writer (holding the region's mutex) opens an entry (seq_begin:
 * seq odd, then a release fence), writes it, closes it (seq_end: release store of the next even
 * seq); the lengths have a lock of their own (len_seq). A reader acquire-loads seq, copies, issues
 * an acquire fence and loads seq again, and keeps the copy only when both loads saw the same even
 * value. The readers here are shm_l3ix_find, shm_l3ix_tokens_equal and shm_l3ix_lengths as they
 * are, their relaxed field loads (__atomic_load_n) modelled too; the writers are
 * shm_l3ix_set_lengths_locked and shm_l3ix_add_length_locked as they are, and, for an entry,
 * seq_begin/seq_end around modelled stores of the fields (shm_l3ix_put_locked writes the fields
 * with memcpy, which the model cannot delay). The region is one set with three token pages and a
 * list of two lengths, {1, 2}, which a writer replaces by {4} or extends by 5, or a writer that
 * dies after storing {3, 4} leaves to shm_l3ix_repair_locked. */
enum { LX_FIELDS, LX_CHAIN, LX_SET_LENGTHS, LX_ADD_LENGTH, LX_REPAIR };
#define LX_KEY_LO 0x5eedu
#define LX_KEY_HI 0x77u
#define LX_TOKENS (SHM_L3IX_PAGE_TOKENS + 1) /* a chain of two pages */

static struct {
	struct shm_l3ix_hdr h;
	struct shm_l3ix_entry ent[SHM_L3IX_WAYS];
	uint32_t links[3];
	_Atomic uint32_t lengths[4];
	/* not modelled: plain memory, and the reader's results */
	int32_t pages[3][SHM_L3IX_PAGE_TOKENS];
	int32_t tokens[LX_TOKENS];
	struct shm_l3ix ix;
	struct shm_l3ix_snap snap;
	int kind, found, rc;
	uint32_t out[4];
	uint64_t checked;
} LX;

static void lx_reset(void *ctx)
{
	(void)ctx;
	memset(&LX.h, 0, offsetof(__typeof__(LX), pages));
	for (uint32_t i = 0; i < LX_TOKENS; i++)
		LX.tokens[i] = (int32_t)(i * 7 + 1);
	memcpy(LX.pages[0], LX.tokens, sizeof(LX.pages[0]));
	LX.pages[1][0] = LX.tokens[SHM_L3IX_PAGE_TOKENS];
	LX.pages[2][0] = LX.tokens[SHM_L3IX_PAGE_TOKENS] + 1; /* the rewritten chain's second page */
	struct shm_l3ix_entry *e = &LX.ent[0];
	e->flags = SHM_L3IX_POS | SHM_L3IX_TOKENS;
	e->key_lo = LX_KEY_LO;
	e->key_hi = LX_KEY_HI;
	e->token_count = LX_TOKENS;
	e->first_page = 1;
	e->checked_ns = e->dir_gen = 1;
	LX.links[0] = 2; /* page 1, then page 2 */
	LX.h.nlengths = 2;
	atomic_init(&LX.lengths[0], 1);
	atomic_init(&LX.lengths[1], 2);
	atomic_init(&LX.h.len_checked_ns, 1);
	LX.ix = (struct shm_l3ix){ .hdr = &LX.h, .lengths = LX.lengths, .ent = LX.ent, .links = LX.links,
				   .pages = &LX.pages[0][0], .nsets = 1, .npages = 3 };
	LX.found = LX.rc = 7;
	memset(LX.out, 0, sizeof(LX.out));
	LX.checked = 0;
}

static void lx_writer(void)
{
	struct shm_l3ix_entry *e = &LX.ent[0];
	switch (LX.kind) {
	case LX_FIELDS: /* two fields written together */
		seq_begin(e);
		__atomic_store_n(&e->checked_ns, 2, __ATOMIC_RELAXED);
		__atomic_store_n(&e->dir_gen, 2, __ATOMIC_RELAXED);
		seq_end(e);
		break;
	case LX_CHAIN: /* the entry's second token page replaced by one that differs */
		seq_begin(e);
		__atomic_store_n(&LX.links[0], 3, __ATOMIC_RELAXED);
		seq_end(e);
		break;
	case LX_SET_LENGTHS:
		shm_l3ix_set_lengths_locked(&LX.ix, (const uint32_t[]){ 4 }, 1, 2, 0);
		break;
	case LX_REPAIR: /* a length writer dies after storing {3, 4}; the next locker repairs */
		atomic_store_explicit(&LX.h.len_seq, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		atomic_store_explicit(&LX.lengths[0], 3, memory_order_relaxed);
		atomic_store_explicit(&LX.lengths[1], 4, memory_order_relaxed);
		shm_l3ix_repair_locked(&LX.ix);
		break;
	default:
		shm_l3ix_add_length_locked(&LX.ix, 5);
		break;
	}
}

static void lx_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		lx_writer();
		return;
	}
	if (LX.kind >= LX_SET_LENGTHS) {
		LX.rc = shm_l3ix_lengths(&LX.ix, 100, LX.out, 4, &LX.checked);
		return;
	}
	LX.found = shm_l3ix_find(&LX.ix, LX_KEY_LO, LX_KEY_HI, LX_TOKENS, NULL, 0, NULL, &LX.snap);
	if (LX.kind == LX_CHAIN && LX.found == 1)
		LX.rc = shm_l3ix_tokens_equal(&LX.ix, &LX.snap, LX.tokens);
}

static int lx_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	const uint32_t *o = LX.out;
	switch (LX.kind) {
	case LX_FIELDS:
		if (LX.found == -EAGAIN || (LX.found == 1 && LX.snap.e.checked_ns == LX.snap.e.dir_gen))
			return 0;
		snprintf(why, len, "find returned %d with fields %llu and %llu of two writes (seq %u)", LX.found,
			 (unsigned long long)LX.snap.e.checked_ns, (unsigned long long)LX.snap.e.dir_gen, LX.snap.seq);
		return -1;
	case LX_CHAIN:
		/* the snapshot of the first chain compares equal, of the second different, or a retry */
		if (LX.found == -EAGAIN || (LX.found == 1 && (LX.rc == -EAGAIN || LX.rc == (LX.snap.seq == 0))))
			return 0;
		snprintf(why, len, "find %d, then the tokens of the entry at seq %u compared %d", LX.found, LX.snap.seq,
			 LX.rc);
		return -1;
	default:
		/* after a repair the dead writer's list is readable, never checked (the caller goes to the
		 * directory): a copy with a stamp is the list from before the writer */
		if (LX.kind == LX_REPAIR && LX.rc >= 0 && LX.checked == 0)
			return 0;
		if (LX.rc == -EAGAIN || (LX.rc == 2 && o[0] == 1 && o[1] == 2 && LX.checked == 1) ||
		    (LX.kind == LX_SET_LENGTHS && LX.rc == 1 && o[0] == 4 && LX.checked == 2) ||
		    (LX.kind == LX_ADD_LENGTH && LX.rc == 3 && o[0] == 1 && o[1] == 2 && o[2] == 5 && LX.checked == 1))
			return 0;
		snprintf(why, len, "the lengths read returned %d: %u %u %u, checked %llu", LX.rc, o[0], o[1], o[2],
			 (unsigned long long)LX.checked);
		return -1;
	}
}

static void run_lx(const char *name, int kind)
{
	LX.kind = kind;
	mm_regions_clear();
	mm_region(&LX.h, offsetof(__typeof__(LX), pages));
	struct mm_scenario s = { .name = name, .threads = 2, .reset = lx_reset, .thread = lx_thread,
				 .check = lx_check };
	explore_ok(&s);
	mm_regions_clear();
}

/* Two fields a writer changes together are found both old or both new. */
START_TEST(test_l3ix_entry_sequence_under_weak_memory)
{
	run_lx("l3ix entry write vs find", LX_FIELDS);
}
END_TEST

/* A comparison that followed a link of a chain being rewritten is never returned. */
START_TEST(test_l3ix_token_chain_under_weak_memory)
{
	run_lx("l3ix chain rewrite vs tokens_equal", LX_CHAIN);
}
END_TEST

/* The length list is read whole, before or after a writer replaces it or inserts a length. */
START_TEST(test_l3ix_lengths_under_weak_memory)
{
	run_lx("l3ix set_lengths vs lengths", LX_SET_LENGTHS);
	run_lx("l3ix add_length vs lengths", LX_ADD_LENGTH);
}
END_TEST

/* A length writer that died half-way leaves its list to the repair, which marks it never checked:
 * a reader takes a copy with a stamp only of the list from before the writer. */
START_TEST(test_l3ix_lengths_repair_under_weak_memory)
{
	run_lx("l3ix dead length writer + repair vs lengths", LX_REPAIR);
}
END_TEST

/* ---- the per-user slot limit: two claims of one user at once never both stay ---- */

static struct userlimit {
	struct sc_arena *a, *c[2];    /* the creator (slot 0); two claimers, detached before the run */
	const char *name;
	void *readers, *readers0;
	size_t readers_n;
	int rc[2];                    /* each claim's answer */
	int other_user;               /* thread 1 is another user (its claim must not count for ours) */
} UL;

static void ul_reset(void *ctx)
{
	(void)ctx;
	memcpy(UL.readers, UL.readers0, UL.readers_n);
	for (int i = 0; i < 2; i++) {
		struct shm_arena *sa = UL.c[i]->shm;
		if (sa->lock_fd >= 0)
			close(sa->lock_fd); /* the last execution's claim */
		sa->lock_fd = -1, sa->reader_slot = -1, sa->token = 0;
		UL.rc[i] = -1;
	}
}

static void ul_thread(void *ctx, unsigned who)
{
	(void)ctx;
	UL.rc[who] = shm_readers_claim(UL.c[who]->shm);
}

static int ul_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (UL.other_user) {
		if (UL.rc[0] < 0 || UL.rc[1] < 0) {
			snprintf(why, len, "a claim was refused (%d, %d): each user holds at most 2 slots, the limit",
				 UL.rc[0], UL.rc[1]);
			return -1;
		}
		return 0;
	}
	if (UL.rc[0] >= 0 && UL.rc[1] >= 0) {
		snprintf(why, len, "both claims stayed (slots %d and %d): the user holds 3 slots, its limit is 2",
			 UL.rc[0], UL.rc[1]);
		return -1;
	}
	for (int i = 0; i < 2; i++)
		if (UL.rc[i] < 0 && UL.rc[i] != -EDQUOT) {
			snprintf(why, len, "claim %d: %d, not a slot nor -EDQUOT", i, UL.rc[i]);
			return -1;
		}
	return 0;
}

static void run_user_limit(int other_user, const char *what)
{
	struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF, .reader_slots = 3, .slots_per_user = 2 };
	UL.a = sc_test_arena_opts("mmlimit", &o, &UL.name);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(sc_arena_open(UL.name, &UL.c[i]), 0);
		ck_assert_int_eq(UL.c[i]->shm->reader_slot, 1);
		shm_readers_release(UL.c[i]->shm, 0); /* slot 1 FREE again (its uid ours), the handle stays mapped */
	}
	uint64_t n;
	UL.readers = shm_region(UL.a->shm, SHM_REGION_READERS, &n);
	UL.readers_n = n;
	mm_regions_clear();
	/* modelled: the states of slots 1 and 2, or (another user) slot 1's state and uid; with more
	 * fields the executions outgrow the bound */
	struct shm_reader_slot *s1 = shm_reader_slot(UL.a->shm, 1), *s2 = shm_reader_slot(UL.a->shm, 2);
	void *f[2] = { (void *)&s1->state, other_user ? (void *)&s1->uid : (void *)&s2->state };
	for (int k = 0; k < 2; k++) {
		mm_region(f[k], 4);
		for (int c = 0; c < 2; c++)
			mm_region_alias(UL.c[c]->shm->base + ((uint8_t *)f[k] - UL.a->shm->base), 4, f[k]);
	}
	ck_assert_uint_eq(atomic_load(&s1->uid), (uint32_t)geteuid()); /* a FREE slot keeps its last uid */
	UL.readers0 = malloc(n);
	memcpy(UL.readers0, UL.readers, n);
	UL.other_user = other_user;
	mm_other_euid = other_user ? geteuid() + 4242 : 0;
	struct mm_scenario sc = { .name = what, .threads = 2, .reset = ul_reset, .thread = ul_thread, .check = ul_check };
	explore_ok(&sc);
	mm_other_euid = 0;
	mm_regions_clear();
	ul_reset(NULL);
	free(UL.readers0);
	for (int i = 0; i < 2; i++)
		sc_arena_close(UL.c[i]);
	sc_test_arena_destroy(UL.a, UL.name);
}

/* One user holds slot 0 of three with a limit of two; two more processes of that user claim
 * slots 1 and 2 at once. Each counts the others' slots after its own is LIVE, so at most one
 * stays: the seq_cst fence between the claim's store of LIVE and its count (store buffering:
 * without it each may read the other's slot as still FREE, and both stay). */
START_TEST(test_two_claims_at_the_user_limit_under_weak_memory)
{
	run_user_limit(0, "two claims of one user at its slot limit");
}
END_TEST

/* The same user claims while another user takes slot 1, which a holder of the first user left
 * FREE (a cleaned slot keeps its uid): a count that reads the new LIVE must read it with the new
 * holder's uid (the count's acquire), or it counts another user's slot as ours and refuses. */
START_TEST(test_claims_of_two_users_at_the_limit_under_weak_memory)
{
	run_user_limit(1, "claims of two users, one at its slot limit");
}
END_TEST

/* ---- the holder listing: each row is one holder's, never a mix of two incarnations ---- */

static struct holderscase {
	struct sc_arena *a, *x;       /* the lister (slot 0); the claimer (slot 1, released) */
	const char *name;
	int dead;                     /* slot 1 was left LIVE, with a lease record, by a dead holder */
	int counter;                  /* 0: T1 lists holders; 1 (cleaned), 2 (dead): T1 reads that
				       * counter and, when it moved, tests the dead holder's token */
	uint32_t dead_token;          /* the dead holder's */
	uint64_t count0;              /* the counter before the claim */
	int swept;                    /* T1's answer: -1 the counter had not moved, else alive or not */
	int moved_seen;               /* some execution saw the counter move */
	int reaped;                   /* T0 reaps slot 1 (through the lister's handle), T1 then claims it
				       * (the go word: no synchronisation) and reads its lease record */
	_Atomic uint32_t *go;
	uint64_t row_lease;           /* T1's read of its own first lease record after the claim */
	void *readers, *readers0, *hdr0;
	size_t readers_n;
	struct sc_holder rows[4];
	int n;
} HC;

static void hc_reset(void *ctx)
{
	(void)ctx;
	memcpy(HC.readers, HC.readers0, HC.readers_n);
	memcpy(HC.a->shm->base, HC.hdr0, 4096);
	if (HC.x->shm->lock_fd >= 0)
		close(HC.x->shm->lock_fd); /* the last execution's claim */
	HC.x->shm->lock_fd = -1;
	HC.x->shm->reader_slot = -1;
	HC.x->shm->token = 0;
	HC.n = -1;
	HC.swept = -1;
	HC.row_lease = 0;
	if (HC.go)
		atomic_init(HC.go, 0);
}

static void hc_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (HC.reaped && who == 0) {
		(void)shm_readers_reap(HC.a->shm);
		atomic_store_explicit(HC.go, 1, memory_order_relaxed);
	} else if (HC.reaped && who == 1) {
		(void)mm_futex_wait(HC.go, sizeof(*HC.go), 0); /* until the reaper is done: no acquire */
		(void)shm_readers_claim(HC.x->shm);
		/* what the claimer has seen of its slot is what its release of the new incarnation
		 * publishes to a lister (a third thread, sc_arena_holders, makes the exploration too
		 * long): its lease record must read cleared */
		HC.row_lease = atomic_load_explicit(&l2_ext_of(shm_reader_slot(HC.x->shm, 1))->rec[0],
						    memory_order_relaxed);
	} else if (who == 0) {
		(void)shm_readers_claim(HC.x->shm); /* slot 1: free, or a dead holder's (cleaned first) */
	} else if (HC.counter) {
		/* a sweeper of per-owner state (lib/l2/lease.c's l2_reap, lib/events.c's listener) */
		struct shm_arena *sa = HC.a->shm;
		uint64_t c = HC.counter == 1 ? shm_readers_cleaned(sa) : shm_readers_dead(sa);
		if (c != HC.count0)
			HC.swept = shm_token_alive(sa, HC.dead_token);
	} else {
		HC.n = sc_arena_holders(HC.a, HC.rows, 4);
	}
}

static int hc_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (HC.x->shm->reader_slot != 1) {
		snprintf(why, len, "the claim took slot %d, not 1", HC.x->shm->reader_slot);
		return -1;
	}
	if (HC.reaped && HC.row_lease) {
		snprintf(why, len, "the new holder of slot 1 (token %#x) sees the dead holder's lease %#llx",
			 HC.x->shm->token, (unsigned long long)HC.row_lease);
		return -1;
	}
	HC.moved_seen |= HC.swept >= 0;
	if (HC.swept > 0) {
		snprintf(why, len, "the %s counter moved, but the dead holder's token %#x tested alive",
			 HC.counter == 1 ? "cleaned" : "dead", HC.dead_token);
		return -1;
	}
	for (int i = 0; i < HC.n && i < 4; i++) {
		const struct sc_holder *r = &HC.rows[i];
		if (r->slot != 1)
			continue;
		/* a row of a free slot's claim is the claimer's, whole: its token and who it is */
		if (!HC.dead && (r->token != HC.x->shm->token || r->pid != (uint32_t)getpid())) {
			snprintf(why, len, "a row of token %#x pid %u for a slot claimed as token %#x by pid %d", r->token,
				 r->pid, HC.x->shm->token, (int)getpid());
			return -1;
		}
		/* the new holder's row never shows the lease record the dead one left (cleared before the
		 * new incarnation was published) */
		if (HC.dead && r->token == HC.x->shm->token && r->leases) {
			snprintf(why, len, "the new holder (token %#x) listed with %u lease(s) of the dead one", r->token,
				 r->leases);
			return -1;
		}
	}
	return 0;
}

static void run_holders(int dead, int counter, int reaped, const char *what)
{
	struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF, .reader_slots = 2 };
	HC.a = sc_test_arena_opts("mmhold", &o, &HC.name);
	HC.dead = dead;
	ck_assert_int_eq(sc_arena_open(HC.name, &HC.x), 0);
	ck_assert_int_eq(HC.x->shm->reader_slot, 1);
	struct sc_stage *st = NULL, *xs = NULL;
	if (dead) {
		/* an entry, a lease on it by slot 1's holder, and that holder's death (lock gone, slot
		 * left LIVE with its record) */
		static uint8_t buf[4096];
		int32_t t[2] = { 5, 6 };
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
		struct sc_lease l;
		ck_assert_int_eq(sc_stage_open(HC.a, "m", "s", &st), 0);
		ck_assert_int_eq(sc_l2_admit(st, NS, t, 2, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
		ck_assert_int_eq(sc_stage_open(HC.x, "m", "s", &xs), 0);
		ck_assert_int_eq(sc_l2_get(xs, NS, t, 2, NULL, &l), 0);
		ck_assert_uint_ne(atomic_load(&l2_ext_of(shm_reader_slot(HC.a->shm, 1))->rec[0]), 0);
	}
	HC.dead_token = HC.x->shm->token;
	HC.counter = counter;
	HC.count0 = counter == 1 ? shm_readers_cleaned(HC.a->shm) : shm_readers_dead(HC.a->shm);
	HC.moved_seen = 0;
	shm_readers_release(HC.x->shm, dead); /* pinned (dead): the slot stays as it was */
	ck_assert_int_eq(l2_ready(HC.a), 0); /* the lister's views, made before the threads run */
	uint64_t n;
	HC.readers = shm_region(HC.a->shm, SHM_REGION_READERS, &n);
	HC.readers_n = n;
	HC.readers0 = malloc(n);
	HC.hdr0 = malloc(4096);
	memcpy(HC.readers0, HC.readers, n);
	memcpy(HC.hdr0, HC.a->shm->base, 4096);
	/* modelled: slot 1's fields (after a death only its incarnation, what the invariant is
	 * about: with every field modelled the executions number 571 000) and its first lease record;
	 * the other 47 records (all zero) and slot 0 are not written by one thread and read by the other */
	struct shm_reader_slot *s1 = shm_reader_slot(HC.a->shm, 1);
	void *rec0 = (void *)&l2_ext_of(s1)->rec[0];
	uint8_t *f0 = dead && !reaped ? (uint8_t *)&s1->inc : (uint8_t *)s1;
	size_t fields = reaped ? sizeof(s1->state) + sizeof(s1->inc)
			: dead ? sizeof(s1->inc) : offsetof(struct shm_reader_slot, pad);
	mm_regions_clear();
	mm_region(f0, fields);
	mm_region(rec0, 8);
	uint8_t *xbase = HC.x->shm->base, *abase = HC.a->shm->base;
	mm_region_alias(xbase + (f0 - abase), fields, f0);
	mm_region_alias(xbase + ((uint8_t *)rec0 - abase), 8, rec0);
	if (counter) {
		/* and the two counters of cleared slots */
		void *cnt[2] = { (void *)&HC.a->shm->hdr->slots_cleaned, (void *)&HC.a->shm->hdr->slots_dead };
		for (int i = 0; i < 2; i++) {
			mm_region(cnt[i], 8);
			mm_region_alias(xbase + ((uint8_t *)cnt[i] - abase), 8, cnt[i]);
		}
	}
	static _Atomic uint32_t go;
	HC.reaped = reaped;
	HC.go = reaped ? &go : NULL;
	if (reaped)
		mm_region((void *)&go, sizeof(go));
	struct mm_scenario s = { .name = what, .threads = 2, .reset = hc_reset, .thread = hc_thread,
				 .check = hc_check };
	explore_ok(&s);
	ck_assert_msg(!counter || HC.moved_seen, "%s: no execution saw the counter move", what);
	mm_regions_clear();
	hc_reset(NULL);
	free(HC.readers0);
	free(HC.hdr0);
	if (xs)
		sc_stage_close(xs);
	if (st)
		sc_stage_close(st);
	sc_arena_close(HC.x);
	sc_test_arena_destroy(HC.a, HC.name);
}

/* A row for a slot being claimed is read after the slot's LIVE (acquire, pairs with the claim's
 * release), so its token, pid and uid are the claimer's. */
START_TEST(test_holders_vs_claim_under_weak_memory)
{
	run_holders(0, 0, 0, "holders vs claim of a free slot");
}
END_TEST

/* A row whose token is the new incarnation was read after that incarnation (acquire, pairs with
 * the claim's release of the new inc, which follows the cleaning of the dead holder's records), so
 * it never shows the dead holder's leases. */
START_TEST(test_holders_vs_claim_of_a_dead_slot_under_weak_memory)
{
	run_holders(1, 0, 0, "holders vs clean+claim of a dead holder's slot");
}
END_TEST

/* A slot a reaper cleared and a claimer then took (the kernel lock between them, which the model
 * does not see, is no synchronisation here): the claimer's acquire of FREE, paired with the
 * cleaner's release, carries the cleared lease records into the new incarnation, so that what the
 * claim publishes (a listing acquires it) never shows the dead holder's lease. */
START_TEST(test_reap_then_claim_under_weak_memory)
{
	run_holders(1, 0, 1, "reap, then claim, of a dead holder's slot");
}
END_TEST

/* A sweeper that sees shm_readers_cleaned or shm_readers_dead move sees the cleanings it counts:
 * the dead holder's token tests dead, although the claimer that cleaned the slot holds its lock
 * (the counters' release increments after the cleaning, their acquire loads). */
START_TEST(test_cleared_slot_counters_vs_token_test_under_weak_memory)
{
	run_holders(1, 1, 0, "cleaned counter vs token test of the dead holder");
	run_holders(1, 2, 0, "dead counter vs token test of the dead holder");
}
END_TEST

/* ---- the event ring: records, drops and the listener's role ---- */

/* A two-slot ring of shm/evring.c outside any arena (its functions take the ring's pointers). The
 * records' plain fields are not modelled: shadow[k] stands for record k's bytes (stored before the
 * append that publishes them), truth for a change whose writer then looks for a listener. */
static struct evcase {
	struct shm_evring_hdr h;
	struct shm_evrec rec[2];
	_Atomic uint64_t shadow[3];
	_Atomic uint64_t truth;
} EV __attribute__((aligned(64))), EV0;

static struct {
	struct shm_evring r;
	uint64_t head0;               /* committed records at the start: positions [0, head0) */
	uint32_t listener0;           /* the listener word at the start */
	int violated;
	char why[160];
} EC;

static void ev_violation(const char *fmt, unsigned long long v)
{
	if (!EC.violated)
		snprintf(EC.why, sizeof(EC.why), fmt, v);
	EC.violated = 1;
}

static void ev_reset(void *ctx)
{
	(void)ctx;
	memcpy(&EV, &EV0, sizeof(EV));
	EC.violated = 0;
}

static int ev_check(void *ctx, char *why, size_t len)
{
	(void)ctx;
	if (!EC.violated)
		return 0;
	snprintf(why, len, "%s", EC.why);
	return -1;
}

static void run_ev(const char *name, uint64_t head0, uint32_t listener0, void (*thread)(void *, unsigned),
		   void (*reset)(void *))
{
	memset(&EV0, 0, sizeof(EV0));
	EV0.h.magic = SHM_EVRING_MAGIC;
	EV0.h.nrec = 2;
	EV0.h.rec_bytes = sizeof(struct shm_evrec);
	EV0.h.recs_off = SHM_EVRING_HDR_BYTES;
	atomic_init(&EV0.h.head, head0);
	atomic_init(&EV0.h.listener, listener0);
	for (uint64_t p = 0; p < 2; p++)
		atomic_init(&EV0.rec[p].stamp, p < head0 ? p + 1 : p); /* committed, or free for its first lap */
	for (uint64_t p = 0; p < head0; p++) {
		EV0.rec[p].type = 1;
		EV0.rec[p].aux = (uint32_t)p;
		EV0.rec[p].check = shm_evrec_check(&EV0.rec[p], p);
		atomic_init(&EV0.shadow[p], 1);
	}
	EC.r = (struct shm_evring){ &EV.h, EV.rec, 2, 1 };
	EC.head0 = head0;
	EC.listener0 = listener0;
	reset(NULL);
	mm_regions_clear();
	mm_region(&EV, sizeof(EV));
	struct mm_scenario s = { .name = name, .threads = 2, .reset = reset, .thread = thread, .check = ev_check };
	explore_ok(&s);
	mm_regions_clear();
}

/* the consumer's side: every record taken was written before it was committed */
static unsigned ev_take(struct shm_evring_cursor *c, uint64_t *lost)
{
	struct shm_evrec out[2];
	int n = shm_evring_take(&EC.r, c, out, 2, 1, lost);
	if (n < 0) {
		ev_violation("a take found the ring corrupted (%lld)", (unsigned long long)n);
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (out[i].aux > 2 || atomic_load_explicit(&EV.shadow[out[i].aux], memory_order_relaxed) != 1)
			ev_violation("the consumer took record %llu before its producer wrote it", out[i].aux);
	return (unsigned)n;
}

/* R1 (the commit, release) pairs with A2 (the consumer's acquire of the stamp). The record's
 * body is plain memory, which the model does not track: a shadow word stands for it, written
 * where the body is written (schedule point events.append.writing, after the position's claim,
 * whose release would otherwise order a shadow written before the append). */
static uint32_t ev_writing;

static void ev_write_shadow(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "events.append.writing") == 0)
		atomic_store_explicit(&EV.shadow[ev_writing], 1, memory_order_relaxed);
}

static void ev_append_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		for (ev_writing = 0; ev_writing < 2; ev_writing++)
			(void)shm_evring_append(&EC.r, 1, ev_writing, (const uint64_t[5]){ ev_writing });
		return;
	}
	struct shm_evring_cursor c = { 0, 0 };
	uint64_t lost = 0;
	for (int round = 0; round < 2; round++) {
		(void)ev_take(&c, &lost);
		mm_yield();
	}
}

START_TEST(test_event_append_vs_take_under_weak_memory)
{
	shm_sched_set(ev_write_shadow, NULL);
	run_ev("event append vs take", 0, 5, ev_append_thread, ev_reset);
	shm_sched_set(NULL, NULL);
}
END_TEST

/* A producer that finds the ring full counts a drop (release); whoever sees the count (acquire,
 * as lib/events.c's listener) sees the change made before the drop. */
static void ev_drop_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		atomic_store_explicit(&EV.truth, 1, memory_order_relaxed);
		if (shm_evring_append(&EC.r, 1, 2, (const uint64_t[5]){ 2 }) != -ENOSPC)
			ev_violation("an append to a full ring was not dropped (%llu)", 0);
		return;
	}
	if (atomic_load_explicit(&EV.h.dropped, memory_order_acquire) == 1 &&
	    atomic_load_explicit(&EV.truth, memory_order_relaxed) != 1)
		ev_violation("the listener saw drop %llu and not the change made before it", 1);
}

START_TEST(test_event_drop_under_weak_memory)
{
	run_ev("event drop vs the listener's count", 2, 5, ev_drop_thread, ev_reset);
}
END_TEST

/* Store-load: a listener that takes the role and then reads the truth, and a writer that changes
 * the truth, fences (as events_note) and then reads the listener word: one of them sees the other
 * (the seq_cst fence after the listener's CAS). */
static uint64_t ev_truth_seen, ev_word_seen;

static int ev_never_alive(void *ctx, uint32_t token)
{
	(void)ctx, (void)token;
	return 0;
}

static void ev_listen_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		if (shm_evring_listen(&EC.r, 6, ev_never_alive, NULL))
			ev_violation("the role was refused with nobody listening (%llu)", 0);
		ev_truth_seen = atomic_load_explicit(&EV.truth, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&EV.truth, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	ev_word_seen = atomic_load_explicit(&EV.h.listener, memory_order_relaxed);
}

static int ev_listen_check(void *ctx, char *why, size_t len)
{
	if (ev_truth_seen == 0 && ev_word_seen == 0) {
		snprintf(why, len, "a change was missed: the listener read the truth before it, its writer saw nobody listening");
		return -1;
	}
	return ev_check(ctx, why, len);
}

START_TEST(test_event_listen_vs_change_under_weak_memory)
{
	memset(&EV0, 0, sizeof(EV0));
	EV0.h.nrec = 2;
	EC.r = (struct shm_evring){ &EV.h, EV.rec, 2, 1 };
	ev_reset(NULL);
	mm_regions_clear();
	mm_region(&EV, sizeof(EV));
	struct mm_scenario s = { .name = "event listener vs a change", .threads = 2, .reset = ev_reset,
				 .thread = ev_listen_thread, .check = ev_listen_check };
	explore_ok(&s);
	mm_regions_clear();
}
END_TEST

/* fsck's repair resets the ring under a listener: a listener that sees the reset counted
 * (acquire, as lib/events.c) takes nothing from before it, and finds no slot it cannot explain. */
static void ev_reset_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		shm_evring_reset(&EC.r);
		return;
	}
	if (atomic_load_explicit(&EV.h.resets, memory_order_acquire) != 1)
		return;
	struct shm_evring_cursor c = { 0, 0 };
	struct shm_evrec out[2];
	uint64_t lost = 0;
	int n = shm_evring_take(&EC.r, &c, out, 2, 1, &lost);
	if (n != 0 || lost)
		ev_violation("after seeing the reset, a take returned %lld (records from before it, or an error)",
			     (unsigned long long)n);
}

START_TEST(test_event_reset_vs_listener_under_weak_memory)
{
	run_ev("event ring reset vs the listener", 2, 5, ev_reset_thread, ev_reset);
}
END_TEST

/* What a listener did before it took the role (here an fsck repair's reset) is seen by the one
 * that takes the role from it after its death: the role's CAS releases, the successor's acquires. */
static void ev_reset_then_listen_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		shm_evring_reset(&EC.r);
		(void)shm_evring_listen(&EC.r, 6, ev_never_alive, NULL);
		return; /* and dies holding the role */
	}
	if (atomic_load_explicit(&EV.h.listener, memory_order_relaxed) != 6 ||
	    shm_evring_listen(&EC.r, 7, ev_never_alive, NULL) != 0)
		return;
	struct shm_evring_cursor c = { 0, 0 };
	struct shm_evrec out[2];
	uint64_t lost = 0;
	int n = shm_evring_take(&EC.r, &c, out, 2, 1, &lost);
	if (n != 0)
		ev_violation("the successor took %lld records its predecessor's reset had discarded", (unsigned long long)n);
}

START_TEST(test_event_role_taken_from_the_dead_under_weak_memory)
{
	run_ev("event role taken from a dead listener", 2, 0, ev_reset_then_listen_thread, ev_reset);
}
END_TEST

/* A writer changes the truth, fences and appends (events_note), and stalls before its commit: a
 * listener that gives up on the hole (a LOST event) or resets the ring past it, and then reads the
 * truth, sees the change (its acquire of the head pairs with the writer's fence before its claim). */
static int ev_hole_by_reset;

static void ev_hole_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		atomic_store_explicit(&EV.truth, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&EV.h.listener, memory_order_relaxed))
			(void)shm_evring_append(&EC.r, 1, 0, (const uint64_t[5]){ 0 });
		return;
	}
	uint64_t lost = 0;
	if (ev_hole_by_reset) {
		shm_evring_reset(&EC.r);
		lost = atomic_load_explicit(&EV.h.tail, memory_order_relaxed); /* 1: the reset went past it */
	} else {
		struct shm_evring_cursor c = { 0, 0 };
		struct shm_evrec out[2];
		(void)shm_evring_take(&EC.r, &c, out, 2, 1, &lost);
		(void)shm_evring_take(&EC.r, &c, out, 2, 1 + SHM_EVRING_HOLE_NS, &lost);
	}
	if (lost && atomic_load_explicit(&EV.truth, memory_order_relaxed) != 1)
		ev_violation("a change's record was lost (%llu) and the truth read after it is stale", lost);
}

START_TEST(test_event_hole_vs_truth_under_weak_memory)
{
	ev_hole_by_reset = 0;
	run_ev("event hole skipped vs the truth", 0, 5, ev_hole_thread, ev_reset);
	ev_hole_by_reset = 1;
	run_ev("event hole reset vs the truth", 0, 5, ev_hole_thread, ev_reset);
	ev_hole_by_reset = 0;
}
END_TEST

/* A slot the listener gives up on (a skipped hole) or restamps (a reset) is released like a slot
 * it read: a producer that lands in it is ordered after the listener's work before that (a shadow
 * stored after its take of the first record, before it gives the other slot up); and a slot it
 * read, after its read (a shadow stored before the take stands for the read record's bytes). */
static void ev_skip_reset(void *ctx)
{
	ev_reset(ctx);
	atomic_store_explicit(&EV.h.head, 2, memory_order_relaxed);
	atomic_store_explicit(&EV.rec[1].stamp, 1, memory_order_relaxed); /* position 1 claimed, never committed */
}

enum { EV_GIVEN_UP_BY_SKIP, EV_GIVEN_UP_BY_RESET, EV_READ };
static int ev_release_how;

static void ev_release_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		struct shm_evring_cursor c = { 0, 0 };
		struct shm_evrec out[2];
		uint64_t lost = 0;
		if (ev_release_how == EV_READ) /* before its read of slot 0 */
			atomic_store_explicit(&EV.shadow[2], 1, memory_order_relaxed);
		(void)shm_evring_take(&EC.r, &c, out, 2, 1, &lost);
		if (ev_release_how == EV_READ)
			return;
		atomic_store_explicit(&EV.shadow[2], 1, memory_order_relaxed); /* after its read of slot 0 */
		if (ev_release_how == EV_GIVEN_UP_BY_RESET)
			shm_evring_reset(&EC.r);
		else
			(void)shm_evring_take(&EC.r, &c, out, 2, 1 + SHM_EVRING_HOLE_NS, &lost);
		return;
	}
	/* position 2 lands in slot 0 (read by the listener), 3 in slot 1 (given up) */
	for (uint32_t k = 2; k < (ev_release_how == EV_READ ? 3u : 4u); k++)
		if (shm_evring_append(&EC.r, 1, k, (const uint64_t[5]){ k }) != 0)
			return;
	if (atomic_load_explicit(&EV.shadow[2], memory_order_relaxed) != 1)
		ev_violation("a producer landed in a slot the listener read or gave up before its work there was visible (%llu)",
			     ev_release_how == EV_READ ? 2 : 3);
}

START_TEST(test_event_slots_given_up_under_weak_memory)
{
	ev_release_how = EV_GIVEN_UP_BY_SKIP;
	run_ev("event slot skipped, then reused", 1, 5, ev_release_thread, ev_skip_reset);
	ev_release_how = EV_GIVEN_UP_BY_RESET;
	run_ev("event slots restamped, then reused", 1, 5, ev_release_thread, ev_skip_reset);
	/* and the plain case: a slot read and freed (R2, release) is overwritten only after the read
	 * (the producer's A1, acquire) */
	ev_release_how = EV_READ;
	run_ev("event slot read, then reused", 1, 5, ev_release_thread, ev_skip_reset);
	ev_release_how = EV_GIVEN_UP_BY_SKIP;
}
END_TEST

/* The role is never taken from a live listener: the liveness test reads what the holder wrote
 * before its CAS (here a modelled word it sets first, loaded relaxed like shm_token_alive's
 * loads), because the load of the word, or a failed CAS's, acquires. */
static int ev_role_rc[2];

static int ev_all_alive(void *ctx, uint32_t token)
{
	(void)ctx;
	return token != 0;
}

static int ev_alive_by_word(void *ctx, uint32_t token)
{
	(void)ctx, (void)token;
	return atomic_load_explicit(&EV.shadow[0], memory_order_relaxed) == 1;
}

static void ev_live_holder_reset(void *ctx)
{
	ev_reset(ctx);
	ev_role_rc[0] = ev_role_rc[1] = 1;
}

static void ev_live_holder_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		atomic_store_explicit(&EV.shadow[0], 1, memory_order_relaxed); /* alive, before it listens */
		ev_role_rc[0] = shm_evring_listen(&EC.r, 6, ev_all_alive, NULL);
		return;
	}
	ev_role_rc[1] = shm_evring_listen(&EC.r, 7, ev_alive_by_word, NULL);
	if (ev_role_rc[0] == 0 && ev_role_rc[1] == 0)
		ev_violation("the role was taken from a live listener (%llu)", 6);
}

START_TEST(test_event_role_kept_by_a_live_listener_under_weak_memory)
{
	run_ev("event role kept by a live listener", 0, 0, ev_live_holder_thread, ev_live_holder_reset);
}
END_TEST

/* The role handed over: listener 5 takes the role from the empty word, takes the two records and
 * leaves (unlisten, release); listener 6 takes the role once the word is empty again (its CAS
 * acquires 5's leaving, whatever its first load of the word saw) and reads on from 5's tail:
 * never a record twice. Both are alive throughout: the role is never taken from a holder. */
static unsigned ev_taken[2];

static void ev_take_counted(void)
{
	struct shm_evring_cursor c = { 0, 0 };
	struct shm_evrec out[2];
	uint64_t lost = 0;
	int n = shm_evring_take(&EC.r, &c, out, 2, 1, &lost);
	if (n < 0 || lost)
		ev_violation("a listener's take failed (%lld)", (unsigned long long)(n < 0 ? n : -1));
	for (int i = 0; i < n; i++)
		if (out[i].aux < 2 && ev_taken[out[i].aux]++)
			ev_violation("record %llu taken twice", out[i].aux);
}

static void ev_handover_thread(void *ctx, unsigned who)
{
	(void)ctx;
	if (who == 0) {
		if (shm_evring_listen(&EC.r, 5, ev_all_alive, NULL) == 0) {
			ev_take_counted();
			shm_evring_unlisten(&EC.r, 5);
		}
		return;
	}
	for (int t = 0; t < 2; t++) {
		if (shm_evring_listen(&EC.r, 6, ev_all_alive, NULL) == 0) {
			ev_take_counted();
			return;
		}
		mm_yield();
	}
}

static void ev_handover_reset(void *ctx)
{
	ev_reset(ctx);
	ev_taken[0] = ev_taken[1] = 0;
}

START_TEST(test_event_listener_handover_under_weak_memory)
{
	run_ev("event listener handover", 2, 0, ev_handover_thread, ev_handover_reset);
}
END_TEST

Suite *memmodel_suite(void)
{
	Suite *s = suite_create("memmodel");
	TCase *tc = tcase_create("memmodel");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_model_litmus);
	tcase_add_test(tc, test_model_futex);
	tcase_add_test(tc, test_epoch_vs_reclaim_under_weak_memory);
	tcase_add_test(tc, test_lease_vs_reclaim_under_weak_memory);
	tcase_add_test(tc, test_epoch_after_a_later_advance_vs_reclaim_under_weak_memory);
	tcase_add_test(tc, test_publish_vs_lookup_under_weak_memory);
	tcase_add_test(tc, test_unlink_vs_lookup_of_the_successor_under_weak_memory);
	tcase_add_test(tc, test_replace_behind_the_head_vs_lookup_under_weak_memory);
	tcase_add_test(tc, test_mutex_under_weak_memory);
	tcase_add_test(tc, test_ring_under_weak_memory);
	tcase_add_test(tc, test_ring_claim_vs_reap_under_weak_memory);
	tcase_add_test(tc, test_ring_stat_under_weak_memory);
	tcase_add_test(tc, test_ring_close_vs_reap_under_weak_memory);
	tcase_add_test(tc, test_ring_snapshot_walk_under_weak_memory);
	tcase_add_test(tc, test_ring_claim_seen_by_a_reader_under_weak_memory);
	tcase_add_test(tc, test_ring_consumer_handover_under_weak_memory);
	tcase_add_test(tc, test_ring_free_ring_is_claimable_under_weak_memory);
	tcase_add_test(tc, test_l3ix_entry_sequence_under_weak_memory);
	tcase_add_test(tc, test_l3ix_token_chain_under_weak_memory);
	tcase_add_test(tc, test_l3ix_lengths_under_weak_memory);
	tcase_add_test(tc, test_l3ix_lengths_repair_under_weak_memory);
	tcase_add_test(tc, test_holders_vs_claim_under_weak_memory);
	tcase_add_test(tc, test_holders_vs_claim_of_a_dead_slot_under_weak_memory);
	tcase_add_test(tc, test_cleared_slot_counters_vs_token_test_under_weak_memory);
	tcase_add_test(tc, test_reap_then_claim_under_weak_memory);
	tcase_add_test(tc, test_two_claims_at_the_user_limit_under_weak_memory);
	tcase_add_test(tc, test_claims_of_two_users_at_the_limit_under_weak_memory);
	tcase_add_test(tc, test_event_append_vs_take_under_weak_memory);
	tcase_add_test(tc, test_event_drop_under_weak_memory);
	tcase_add_test(tc, test_event_listen_vs_change_under_weak_memory);
	tcase_add_test(tc, test_event_listener_handover_under_weak_memory);
	tcase_add_test(tc, test_event_reset_vs_listener_under_weak_memory);
	tcase_add_test(tc, test_event_role_taken_from_the_dead_under_weak_memory);
	tcase_add_test(tc, test_event_role_kept_by_a_live_listener_under_weak_memory);
	tcase_add_test(tc, test_event_hole_vs_truth_under_weak_memory);
	tcase_add_test(tc, test_event_slots_given_up_under_weak_memory);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(memmodel_suite)
