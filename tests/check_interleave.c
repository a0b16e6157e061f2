/*
 * tests/check_interleave.c — every protocol with a check-then-act window, run by two or three
 * processes under every ordering of its schedule points (tests/interleave.c), with freed heap
 * memory poisoned (test build), asserting the protocol's invariant after each run. Each test
 * prints the number of orderings it explored.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "interleave.h"
#include "l3_hosts.h"
#include "sc_check.h"
#include "../lib/l3/l3.h"
#include "../lib/l2/l2.h"
#include "../shm/fault.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"
#include "../shm/obs.h"
#include "../shm/readers.h"

#define MODEL "m"
#define STATE "s"
#define NS "il"
#define MAX_RUNS 2000

/* Shared between the parent and the actors of one run (MAP_SHARED, reset by setup). */
struct shared {
	char name[80];
	_Atomic uint32_t got[3];      /* per actor: what it saw (scenario-specific) */
	_Atomic int32_t holders;      /* claims held at once */
	_Atomic int32_t max_holders;
	_Atomic uint32_t records;     /* ring records delivered */
	_Atomic uint32_t gap;         /* a record was lost or reordered */
	_Atomic uint32_t finished;    /* consumers that got every record */
	_Atomic uint64_t seq_seen[8];
	char l3dir[96];               /* the run's L3 directory (location index scenarios) */
	_Atomic uint64_t put_done_ns; /* when the other host's put returned (CLOCK_MONOTONIC) */
	_Atomic int32_t located[3];   /* per actor: what its locate returned */
	_Atomic uint64_t deadline_ns; /* the abandoned-fill scenario's restore deadline (0: not set yet) */
};

static struct shared *sh;
static unsigned run_no;

static struct shared *shared_area(void)
{
	if (!sh) {
		sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		ck_assert_ptr_ne(sh, MAP_FAILED);
	}
	return sh;
}

static void key_tokens(int32_t t[4], uint32_t k)
{
	for (int i = 0; i < 4; i++)
		t[i] = (int32_t)(k * 100 + (uint32_t)i);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static int admit_v(struct sc_stage *st, uint32_t k, uint32_t version, size_t n)
{
	uint8_t *b = malloc(n);
	fill(b, n, k * 7919 + version);
	int32_t t[4];
	key_tokens(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit(st, NS, t, 4, sc_digest(b, n), &p, SC_ORIGIN_DIRECT);
	free(b);
	return rc;
}

static struct sc_digest digest_v(uint32_t k, uint32_t version, size_t n)
{
	uint8_t *b = malloc(n);
	fill(b, n, k * 7919 + version);
	struct sc_digest d = sc_digest(b, n);
	free(b);
	return d;
}

/* Each run gets a fresh arena; the parent keeps a handle for setup and checks. */
static struct sc_arena *parent_arena;
static struct sc_stage *parent_stage;

static int fresh_arena(uint32_t reader_slots, uint32_t rings)
{
	struct shared *s = shared_area();
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "t-il-%d-%u", (int)getpid(), run_no++);
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .reader_slots = reader_slots,
				   .ring_count = rings };
	if (sc_arena_create(s->name, &o, &parent_arena))
		return -1;
	return sc_stage_open(parent_arena, MODEL, STATE, &parent_stage);
}

static void drop_arena(void *ctx)
{
	(void)ctx;
	sc_stage_close(parent_stage);
	sc_arena_close(parent_arena);
	sc_arena_destroy(NULL, sh->name);
	parent_arena = NULL;
	parent_stage = NULL;
}

static int attach(struct sc_arena **a, struct sc_stage **st)
{
	int rc = sc_arena_open(sh->name, a);
	if (rc) {
		fprintf(stderr, "actor: cannot attach to %s: %s\n", sh->name, sc_strerror(rc));
		return -1;
	}
	return st ? sc_stage_open(*a, MODEL, STATE, st) : 0;
}

static int report(const struct il_scenario *s, unsigned min_runs)
{
	const char *only = getenv("IL_ONLY"); /* debugging: run only scenarios whose name has this */
	if (only && !strstr(s->name, only))
		return 0;
	struct il_result r;
	int rc = il_explore(s, MAX_RUNS, &r);
	ck_assert_msg(rc == 0, "%s", r.first_failure);
	ck_assert_msg(r.runs >= min_runs, "%s: only %u orderings explored", s->name, r.runs);
	ck_assert_msg(r.exhausted, "%s: the bound was hit before every ordering ran", s->name);
	return (int)r.runs;
}

/* Polling loops in actors are bounded by time, not by a count: on a loaded machine the process
 * they wait for (to die, to release) can take a while, and each poll yields to the others. */
#define POLL_NS 10000000000ull

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int polling(uint64_t t0)
{
	return mono_ns() - t0 < POLL_NS;
}

static int always_ok(void *ctx, char *why, unsigned len)
{
	(void)ctx, (void)why, (void)len;
	return 0;
}

/* Remove the entry of tokens @t (absent is fine): 0, or -1. */
static int remove_tokens(struct sc_stage *st, const int32_t *t)
{
	struct sc_key k;
	if (sc_l2_key(st, NS, t, 4, &k))
		return -1;
	int rc = sc_l2_remove(st, k);
	return rc && rc != -ENOENT ? -1 : 0;
}

/* The setup of the scenarios on key 1: a fresh arena holding it (version 0, of the size_t bytes
 * at @ctx). */
static int key1_setup(void *ctx)
{
	return fresh_arena(8, 0) || admit_v(parent_stage, 1, 0, *(size_t *)ctx);
}

/* An actor's handles, and key 1's tokens into @t: 0, or -1 (said). */
static int attach_key1(struct sc_arena **a, struct sc_stage **st, int32_t t[4])
{
	if (attach(a, st))
		return -1;
	key_tokens(t, 1);
	return 0;
}

/* ---- 1. lease take vs removal and reclamation ---- */

#define LEASE_BYTES (256u << 10)

static size_t lease_bytes = LEASE_BYTES;

/* actor 0 leases key 1 and checks its bytes while holding the lease; actor 1 removes key 1 and
 * reclaims. The invariant: a reader with a lease never sees freed (poisoned) or reused bytes. */
static int lease_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	int32_t t[4];
	if (attach_key1(&a, &st, t))
		return 1;
	if (who == 0) {
		struct sc_lease l;
		int rc = sc_l2_get(st, NS, t, 4, NULL, &l);
		if (rc == -ENOENT)
			return 0; /* removed first: a miss is fine */
		if (rc)
			return 2;
		shm_sched_point("actor.leased"); /* a reclaimer that wrongly frees it may run here */
		int bad = !sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), digest_v(1, 0, LEASE_BYTES)) ||
			  !sc_digest_equal(l.digest, digest_v(1, 0, LEASE_BYTES));
		sc_lease_release(&l);
		return bad ? 3 : 0;
	}
	if (remove_tokens(st, t))
		return 4;
	l2_reclaim_all(a, -1);
	/* reuse the memory at once: an admit of the same size lands where the freed block was */
	if (admit_v(st, 2, 0, LEASE_BYTES))
		return 6;
	return 0;
}

START_TEST(test_lease_vs_reclamation)
{
	static const char *const pts[] = { "l2.get.found", "actor.leased", "l2.index.unlinked", "l2.reclaim.epochs_read",
					   "l2.reclaim.leases_read", NULL };
	struct il_scenario s = { .name = "lease take vs reclamation", .actors = 2, .points = pts, .ctx = &lease_bytes,
				 .setup = key1_setup, .actor = lease_actor, .check = always_ok, .teardown = drop_arena };
	report(&s, 3);
}
END_TEST

/* ---- 2. reader claim / reap / epoch (the reap race) ---- */

static int reap_setup(void *ctx)
{
	(void)ctx;
	if (fresh_arena(3, 0) || admit_v(parent_stage, 1, 0, LEASE_BYTES))
		return -1;
	/* a holder that died inside a read-side section: its slot says LIVE, its epoch is set */
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *a;
		if (sc_arena_open(sh->name, &a))
			_exit(2);
		shm_epoch_enter(a->shm);
		raise(SIGKILL);
	}
	int st;
	waitpid(pid, &st, 0);
	return 0;
}

/* actor 0 attaches (taking the dead slot over, or a free one) and reads key 1 through a lease;
 * actor 1 reaps dead slots, then removes key 1 and reclaims its memory. A reaper must never
 * clear the epoch (or leases) of a slot a live reader owns. */
static int reap_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	/* three slots: ours, the dead one and one free; while the other actor reaps the dead one,
	 * the table can be full for a moment: attach says -EUSERS, and we try again */
	int rc;
	for (uint64_t t0 = mono_ns(); (rc = sc_arena_open(sh->name, &a)) == -EUSERS && polling(t0);)
		il_yield();
	if (rc || sc_stage_open(a, MODEL, STATE, &st))
		return 1;
	int32_t t[4];
	key_tokens(t, 1);
	if (who == 0) {
		struct sc_lease l;
		rc = sc_l2_get(st, NS, t, 4, NULL, &l);
		if (rc == -ENOENT)
			return 0;
		if (rc)
			return 2;
		shm_sched_point("actor.leased");
		int bad = !sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), digest_v(1, 0, LEASE_BYTES));
		sc_lease_release(&l);
		return bad ? 3 : 0;
	}
	(void)shm_readers_reap(a->shm);
	if (remove_tokens(st, t))
		return 4;
	l2_reclaim_all(a, -1);
	return admit_v(st, 2, 0, LEASE_BYTES) ? 6 : 0;
}

static int reap_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	/* afterwards no slot is left that holds anything, dead or alive, except ours */
	struct sc_holder h[8];
	int n = sc_arena_holders(parent_arena, h, 8);
	for (int i = 0; i < n; i++)
		if (h[i].alive && h[i].token != sc_arena_token(parent_arena)) {
			snprintf(why, len, "holder %#x still alive after every actor ended", h[i].token);
			return -1;
		}
	return 0;
}

START_TEST(test_reader_claim_vs_reap)
{
	static const char *const pts[] = { "readers.claim.locked", "readers.reap.locked", "readers.clean.inc",
					   "l2.get.found", "actor.leased", "l2.reclaim.leases_read", NULL };
	struct il_scenario s = { .name = "reader claim / reap / epoch", .actors = 2, .points = pts, .setup = reap_setup,
				 .actor = reap_actor, .check = reap_check, .teardown = drop_arena };
	report(&s, 4);
}
END_TEST

/* ---- 2b. a reaper killed half-way through clearing a dead slot ---- */

/* actor 0 reaps and dies half-way through clearing the dead slot (fault point); actor 1 reaps
 * too; actor 2 attaches and reads key 1. Whoever comes next finishes the half-cleared slot;
 * the reader's bytes verify; afterwards nothing dead holds anything. */
static int halfreap_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	int rc;
	for (uint64_t t0 = mono_ns(); (rc = sc_arena_open(sh->name, &a)) == -EUSERS && polling(t0);)
		il_yield();
	if (rc || sc_stage_open(a, MODEL, STATE, &st))
		return 1;
	if (who == 0) {
		sc_fault_arm("readers.clean.half");
		(void)shm_readers_reap(a->shm);
		sc_fault_arm(NULL);
		return 0; /* found nothing to clear (someone else was first) */
	}
	if (who == 1) {
		(void)shm_readers_reap(a->shm);
		return 0;
	}
	int32_t t[4];
	key_tokens(t, 1);
	struct sc_lease l;
	if (sc_l2_get(st, NS, t, 4, NULL, &l))
		return 2;
	shm_sched_point("actor.leased");
	int bad = !sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), digest_v(1, 0, LEASE_BYTES));
	sc_lease_release(&l);
	return bad ? 3 : 0;
}

static int halfreap_setup(void *ctx)
{
	(void)ctx;
	if (fresh_arena(5, 0) || admit_v(parent_stage, 1, 0, LEASE_BYTES))
		return -1;
	pid_t pid = fork(); /* a holder that dies with a lease and inside an epoch */
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_stage *st;
		struct sc_lease l;
		int32_t t[4];
		key_tokens(t, 1);
		if (sc_arena_open(sh->name, &a) || sc_stage_open(a, MODEL, STATE, &st) || sc_l2_get(st, NS, t, 4, NULL, &l))
			_exit(2);
		shm_epoch_enter(a->shm);
		raise(SIGKILL);
	}
	int st;
	waitpid(pid, &st, 0);
	return 0;
}

static int halfreap_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	(void)shm_readers_reap(parent_arena->shm); /* normal operation: the next reaper finishes */
	struct sc_holder h[8];
	int n = sc_arena_holders(parent_arena, h, 8);
	for (int i = 0; i < n; i++)
		if (!h[i].alive && (h[i].leases || h[i].reserved_bytes)) {
			snprintf(why, len, "dead holder %#x still holds %u leases", h[i].token, h[i].leases);
			return -1;
		}
	if (shm_epoch_min_active(parent_arena->shm) != UINT64_MAX) {
		snprintf(why, len, "a dead reader's epoch still holds reclamation back");
		return -1;
	}
	return 0;
}

START_TEST(test_reaper_killed_half_way)
{
	static const char *const pts[] = { "readers.reap.locked", "readers.clean.inc", "actor.leased", NULL };
	struct il_scenario s = { .name = "reaper killed half-way", .actors = 3, .points = pts, .setup = halfreap_setup,
				 .actor = halfreap_actor, .may_die = 1, .check = halfreap_check, .teardown = drop_arena };
	report(&s, 20);
}
END_TEST

/* ---- 3. index publish and unlink vs lookup ---- */

#define IDX_BYTES (64u << 10)

static size_t index_bytes = IDX_BYTES;

/* actor 0 replaces key 1 (version 1); actor 1 reads key 1 by copy and by lease; actor 2
 * removes it and reclaims. A reader sees version 0, version 1 or a miss, always whole. */
static int index_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	int32_t t[4];
	if (attach_key1(&a, &st, t))
		return 1;
	if (who == 0)
		return admit_v(st, 1, 1, IDX_BYTES) ? 2 : 0;
	if (who == 2) {
		if (remove_tokens(st, t))
			return 3;
		l2_reclaim_all(a, -1);
		return 0;
	}
	struct sc_digest v0 = digest_v(1, 0, IDX_BYTES), v1 = digest_v(1, 1, IDX_BYTES);
	struct sc_lease l;
	int rc = sc_l2_get(st, NS, t, 4, NULL, &l);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return 5;
	shm_sched_point("actor.leased");
	struct sc_digest d = sc_digest(l.sec[0], l.sec_len[0]);
	int ok = sc_digest_equal(d, l.digest) && (sc_digest_equal(d, v0) || sc_digest_equal(d, v1));
	atomic_store(&sh->got[1], sc_digest_equal(d, v1) ? 2 : 1);
	sc_lease_release(&l);
	return ok ? 0 : 6;
}

START_TEST(test_index_publish_unlink_vs_lookup)
{
	static const char *const pts[] = { "l2.index.published", "l2.index.unlinked", "l2.get.found", "actor.leased",
					   "l2.reclaim.leases_read", NULL };
	struct il_scenario s = { .name = "index publish/unlink vs lookup", .actors = 3, .points = pts,
				 .ctx = &index_bytes, .setup = key1_setup, .actor = index_actor, .check = always_ok,
				 .teardown = drop_arena };
	report(&s, 10);
}
END_TEST

/* ---- 4. heap free and coalesce vs reclamation ---- */

static int heap_setup(void *ctx)
{
	(void)ctx;
	if (fresh_arena(8, 0))
		return -1;
	for (uint32_t k = 1; k <= 3; k++)
		if (admit_v(parent_stage, k, 0, 96u << 10))
			return -1;
	return 0;
}

/* actor 0 removes keys 1 and 3 and reclaims (frees that coalesce around key 2); actor 1 removes
 * key 2 and admits a larger payload into the coalesced room. The heap stays consistent and
 * every surviving entry verifies. */
static int heap_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	if (attach(&a, &st))
		return 1;
	int32_t t[4];
	struct sc_key k;
	for (uint32_t key = who == 0 ? 1 : 2; key <= 3; key += 2) {
		key_tokens(t, key);
		if (sc_l2_key(st, NS, t, 4, &k))
			return 2;
		int rc = sc_l2_remove(st, k);
		if (rc && rc != -ENOENT)
			return 3;
		if (who == 1)
			break;
	}
	l2_reclaim_all(a, -1);
	if (who == 1 && admit_v(st, 4, 0, 250u << 10))
		return 4;
	return 0;
}

static int heap_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	struct sc_fsck_report r;
	(void)shm_readers_reap(parent_arena->shm); /* the actors exited without detaching */
	int rc = sc_arena_fsck(parent_arena, SC_FSCK_DEEP, NULL, NULL, &r);
	if (rc) {
		snprintf(why, len, "fsck found %d problems (leaked %llu, digest failures %llu)", rc,
			 (unsigned long long)r.leaked_bytes, (unsigned long long)r.digest_failures);
		return -1;
	}
	return 0;
}

START_TEST(test_heap_free_vs_reclamation)
{
	static const char *const pts[] = { "heap.free.locked", "l2.index.unlinked", "l2.reclaim.leases_read",
					   "mutex.lock.wait", NULL };
	struct il_scenario s = { .name = "heap free/coalesce vs reclaim", .actors = 2, .points = pts,
				 .setup = heap_setup, .actor = heap_actor, .check = heap_check, .teardown = drop_arena };
	report(&s, 4);
}
END_TEST

/* ---- 5. ring producer claim and reclaim ---- */

static int ring_setup(void *ctx)
{
	(void)ctx;
	return fresh_arena(8, 1);
}

static int count_commit(const struct sc_commit *c, void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&sh->records, 1);
	uint64_t prev = atomic_load(&sh->seq_seen[c->gen % 8]);
	if (c->seq != prev + 1)
		atomic_store(&sh->gap, 1); /* out of order or lost */
	atomic_store(&sh->seq_seen[c->gen % 8], c->seq);
	return 0;
}

/* actor 0 produces 3 records and dies; actor 1 claims the (only) ring once it is free, produces
 * 2 and closes; actor 2 consumes until all 5 arrived. Nothing lost or reordered; the dead
 * producer's ring is reclaimed only once drained; one owner at a time. */
static int ring_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	if (attach(&a, NULL))
		return 1;
	int32_t tok[2] = { 5, 6 };
	struct sc_commit c = { .request_id = who, .token_count = 2, .tokens = tok };
	if (who <= 1) {
		/* the one ring may be the other producer's: wait until it is handed back */
		struct sc_ring *r;
		int rc;
		for (uint64_t t0 = mono_ns(); (rc = sc_ring_open(a, &r)) == -ENOSPC && polling(t0);)
			il_yield();
		if (rc)
			return 2;
		for (int i = 0; i < (who == 0 ? 3 : 2); i++)
			if (sc_ring_try_submit(r, &c))
				return 3;
		if (who == 0)
			raise(SIGKILL); /* dies owning it: the consumer delivers, then reclaims */
		return sc_ring_close(r) ? 4 : 0;
	}
	for (uint64_t t0 = mono_ns(); polling(t0) && atomic_load(&sh->records) < 5;) {
		if (sc_ring_poll(a, count_commit, NULL, 16) < 0)
			return 7;
		il_yield();
	}
	sc_ring_consumer_close(a);
	return atomic_load(&sh->records) == 5 && !atomic_load(&sh->gap) ? 0 : 8;
}

START_TEST(test_ring_producer_claim_and_reclaim)
{
	static const char *const pts[] = { "ring.claim.owner_dead", "ring.reap.owner_dead", NULL };
	struct il_scenario s = { .name = "ring producer claim/reclaim", .actors = 3, .points = pts,
				 .setup = ring_setup, .actor = ring_actor, .may_die = 1, .check = always_ok,
				 .teardown = drop_arena };
	report(&s, 2);
}
END_TEST

/* ---- 6. consumer takeover ---- */

static struct sc_ring *setup_ring;

static int cons_setup(void *ctx)
{
	(void)ctx;
	if (fresh_arena(8, 1) || sc_ring_open(parent_arena, &setup_ring))
		return -1;
	int32_t tok[1] = { 9 };
	struct sc_commit c = { .request_id = 1, .token_count = 1, .tokens = tok };
	for (int i = 0; i < 4; i++)
		if (sc_ring_try_submit(setup_ring, &c))
			return -1;
	return 0;
}

static void cons_teardown(void *ctx)
{
	sc_ring_close(setup_ring);
	drop_arena(ctx);
}

static int die_in_callback(const struct sc_commit *c, void *ctx)
{
	(void)c, (void)ctx;
	raise(SIGKILL);
	return 0;
}

static int seq_commit(const struct sc_commit *c, void *ctx)
{
	uint64_t *last = ctx;
	if (c->seq > *last + 1)
		atomic_store(&sh->gap, 1); /* a gap: a record lost */
	if (c->seq > *last)
		*last = c->seq;
	return 0;
}

/* actor 0 takes the consumer role and dies in its callback; actors 1 and 2 try to consume:
 * one of them takes the role over once the holder is dead, and gets every record (at least
 * once, in order, no gap); never two consumers at once. */
static int cons_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	if (attach(&a, NULL))
		return 1;
	if (who == 0) {
		/* takes the role and dies in the callback, or finds it taken (-EBUSY), or comes last
		 * and finds nothing left to deliver (0) */
		int rc = sc_ring_poll(a, die_in_callback, NULL, 1);
		return rc == -EBUSY || rc == 0 ? 0 : 2;
	}
	uint64_t last = 0;
	for (uint64_t t0 = mono_ns(); polling(t0);) {
		int rc = sc_ring_poll(a, seq_commit, &last, 16);
		if (rc == -EBUSY) {
			il_yield();
			continue;
		}
		if (rc < 0)
			return 3;
		if (last >= 4) {
			atomic_fetch_add(&sh->finished, 1);
			sc_ring_consumer_close(a);
			return 0;
		}
		il_yield();
	}
	return 0; /* the other one had the role */
}

static int cons_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	if (atomic_load(&sh->gap)) {
		snprintf(why, len, "a consumer saw a gap in the sequence");
		return -1;
	}
	if (atomic_load(&sh->finished) < 1) {
		snprintf(why, len, "nobody took the dead consumer's role over and got every record");
		return -1;
	}
	return 0;
}

START_TEST(test_consumer_takeover)
{
	static const char *const pts[] = { "ring.consumer.holder_dead", NULL };
	struct il_scenario s = { .name = "consumer takeover", .actors = 3, .points = pts, .setup = cons_setup,
				 .actor = cons_actor, .may_die = 1, .check = cons_check, .teardown = cons_teardown };
	report(&s, 2);
}
END_TEST

/* ---- 7. fill claims ---- */

/* A fresh arena and nothing in it (the fill-claim and observation-table scenarios). */
static int empty_setup(void *ctx)
{
	(void)ctx;
	return fresh_arena(8, 0);
}

/* actor 0 claims digest D and dies holding it; actors 1 and 2 wait and claim it. At most one
 * live claimer at a time; both eventually get it; a dead claimer never blocks them. */
static int claim_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	if (attach(&a, NULL))
		return 1;
	struct sc_digest d = { 77, 88 };
	if (who == 0) {
		if (sc_fill_claim(a, 5, d))
			return 0; /* somebody else was first: nothing to die with */
		raise(SIGKILL);
	}
	for (uint64_t t0 = mono_ns(); polling(t0);) {
		int rc = sc_fill_claim(a, 5, d);
		if (rc == -EBUSY) {
			il_yield();
			continue;
		}
		if (rc)
			return 3;
		int32_t h = atomic_fetch_add(&sh->holders, 1) + 1;
		if (h > atomic_load(&sh->max_holders))
			atomic_store(&sh->max_holders, h);
		shm_sched_point("actor.holding"); /* the others try while we hold it */
		atomic_fetch_sub(&sh->holders, 1);
		return sc_fill_release(a, 5, d) ? 4 : 0;
	}
	return 5;
}

static int claim_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	if (atomic_load(&sh->max_holders) > 1) {
		snprintf(why, len, "%d claimers held one claim at once", (int)atomic_load(&sh->max_holders));
		return -1;
	}
	return 0;
}

START_TEST(test_fill_claims)
{
	static const char *const pts[] = { "fill.claim.found", "obs.locked", "actor.holding", NULL };
	struct il_scenario s = { .name = "fill claims", .actors = 3, .points = pts, .setup = empty_setup,
				 .actor = claim_actor, .may_die = 1, .check = claim_check, .teardown = drop_arena };
	report(&s, 10);
}
END_TEST

/* ---- 8. the observation table ---- */

/* actors 0 and 1 each report a fill of the same digest; exactly one of them is told to promote
 * (the second hit), whatever the order; actor 2 dies holding the table's lock half-way. */
static int obs_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	if (attach(&a, NULL))
		return 1;
	struct sc_digest d = { 1234, 5678 };
	if (who == 2) {
		struct shm_obs_hdr *h = shm_obs_table(a->shm);
		if (!h || shm_obs_lock(a->shm, h))
			return 2;
		raise(SIGKILL); /* dies holding the lock: the next locker repairs */
	}
	int why = -1, rc = sc_promote_consider(a, 3, d, 100, 4096, &why);
	if (rc < 0)
		return 3;
	atomic_store(&sh->got[who], rc ? 2 : 1);
	return 0;
}

static int obs_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	uint32_t g0 = atomic_load(&sh->got[0]), g1 = atomic_load(&sh->got[1]);
	if ((g0 == 2) + (g1 == 2) != 1 || !g0 || !g1) {
		snprintf(why, len, "promote decisions %u and %u (want exactly one yes)", g0, g1);
		return -1;
	}
	return 0;
}

START_TEST(test_observation_table)
{
	static const char *const pts[] = { "obs.locked", "mutex.lock.wait", NULL };
	struct il_scenario s = { .name = "observation table", .actors = 3, .points = pts, .setup = empty_setup,
				 .actor = obs_actor, .may_die = 4, .check = obs_check, .teardown = drop_arena };
	report(&s, 6);
}
END_TEST

/* ---- 10. segments: an admit's lookup vs the release of the segments it found ---- */

#define SEGB (64u << 10)
/* Payload @which (0: A, 4 segments + tail; 1: B, A's 4 segments + 2 more + another tail). */
static uint8_t *seg_payload(unsigned which, size_t *n)
{
	size_t base = which ? 6 * SEGB : 4 * SEGB, tail = which ? 300 : 100;
	uint8_t *b = malloc(6 * SEGB + 300);
	fill(b, 6 * SEGB, 4242);
	fill(b + base, tail, 17 + which);
	*n = base + tail;
	return b;
}

static int seg_admit(struct sc_stage *st, unsigned which)
{
	size_t n;
	uint8_t *b = seg_payload(which, &n);
	int32_t t[4];
	key_tokens(t, 1 + which);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit(st, NS, t, 4, sc_digest(b, n), &p, SC_ORIGIN_DIRECT);
	free(b);
	return rc;
}

static int seg_setup(void *ctx)
{
	(void)ctx;
	struct shared *s = shared_area();
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "t-il-%d-%u", (int)getpid(), run_no++);
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .reader_slots = 4,
				   .segment_bytes = SEGB };
	if (sc_arena_create(s->name, &o, &parent_arena) || sc_stage_open(parent_arena, MODEL, STATE, &parent_stage))
		return -1;
	return seg_admit(parent_stage, 0);
}

/* actor 0 admits B, whose first 4 segments A stores; actor 1 removes A and reclaims it. B must
 * read back exactly whatever the order: either its admit held A's segments (A's block then stays
 * as a holder) or it found them gone at commit and stored B whole. */
static int seg_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	if (attach(&a, &st))
		return 1;
	if (who == 0)
		return seg_admit(st, 1) ? 2 : 0;
	int32_t t[4];
	key_tokens(t, 1);
	if (remove_tokens(st, t))
		return 3;
	l2_reclaim_all(a, -1);
	return 0;
}

/* fsck findings other than the actors' exited reader slots */
static void seg_finding(const char *component, const char *message, int repaired, void *ctx)
{
	(void)repaired;
	if (strcmp(component, "readers"))
		snprintf(ctx, 256, "%s: %s", component, message);
}

static int seg_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	size_t n;
	uint8_t *want = seg_payload(1, &n), *got = malloc(n);
	int32_t t[4];
	key_tokens(t, 2);
	int64_t r = sc_l2_get_copy(parent_stage, NS, t, 4, NULL, got, n, NULL);
	int bad = r != (int64_t)n || memcmp(want, got, n);
	free(want);
	free(got);
	if (bad) {
		snprintf(why, len, "B reads back wrong (%lld)", (long long)r);
		return -1;
	}
	char found[256] = "";
	(void)sc_arena_fsck(parent_arena, SC_FSCK_DEEP, seg_finding, found, NULL);
	if (found[0]) {
		snprintf(why, len, "fsck: %s", found);
		return -1;
	}
	/* the last reference going frees everything */
	struct sc_key k;
	if (sc_l2_key(parent_stage, NS, t, 4, &k) || sc_l2_remove(parent_stage, k))
		return -1;
	l2_reclaim_all(parent_arena, -1);
	struct sc_l2_stats s;
	if (sc_l2_stats(parent_arena, NULL, &s) || s.segments || s.physical_bytes || s.segment_holder_bytes) {
		snprintf(why, len, "after the last entry: %llu segments, %llu physical bytes", (unsigned long long)s.segments,
			 (unsigned long long)s.physical_bytes);
		return -1;
	}
	return 0;
}

START_TEST(test_segment_admit_vs_release)
{
	static const char *const pts[] = { "seg.admit.planned", "l2.index.unlinked", "l2.reclaim.leases_read", NULL };
	struct il_scenario s = { .name = "segment admit vs release", .actors = 2, .points = pts, .setup = seg_setup,
				 .actor = seg_actor, .check = seg_check, .teardown = drop_arena };
	report(&s, 3);
}
END_TEST

/* actor 0 leases B (scattered over A's block and its own) and copies it out; actor 1 removes A
 * and B and reclaims. The reader's bytes verify in every order (poisoned frees would show), and
 * once both are gone nothing of them stays. */
static int segread_setup(void *ctx)
{
	return seg_setup(ctx) || seg_admit(parent_stage, 1) ? -1 : 0;
}

static int segread_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	if (attach(&a, &st))
		return 1;
	int32_t t[4];
	if (who == 0) {
		key_tokens(t, 2);
		struct sc_lease l;
		int rc = sc_l2_get(st, NS, t, 4, NULL, &l);
		if (rc == -ENOENT)
			return 0;
		if (rc)
			return 2;
		shm_sched_point("actor.leased");
		size_t n;
		uint8_t *want = seg_payload(1, &n), *got = malloc(n);
		int bad = !l.segments || sc_lease_copy(&l, got, n) != (int64_t)n || memcmp(want, got, n);
		sc_lease_release(&l);
		free(want);
		free(got);
		return bad ? 3 : 0;
	}
	for (uint32_t k = 1; k <= 2; k++) {
		struct sc_key key;
		key_tokens(t, k);
		if (sc_l2_key(st, NS, t, 4, &key))
			return 3;
		int rc = sc_l2_remove(st, key);
		if (rc && rc != -ENOENT)
			return 4;
	}
	l2_reclaim_all(a, -1);
	return 0;
}

static int segread_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	l2_reap(parent_arena, 1);
	l2_reclaim_all(parent_arena, -1);
	struct sc_l2_stats s;
	if (sc_l2_stats(parent_arena, NULL, &s) || s.entries || s.segments || s.physical_bytes) {
		snprintf(why, len, "after both left: %llu entries, %llu segments, %llu physical bytes",
			 (unsigned long long)s.entries, (unsigned long long)s.segments, (unsigned long long)s.physical_bytes);
		return -1;
	}
	return 0;
}

START_TEST(test_segment_lease_vs_release)
{
	static const char *const pts[] = { "l2.get.found", "actor.leased", "l2.index.unlinked", "l2.reclaim.epochs_read",
					   "l2.reclaim.leases_read", NULL };
	struct il_scenario s = { .name = "scattered lease vs release", .actors = 2, .points = pts,
				 .setup = segread_setup, .actor = segread_actor, .check = segread_check,
				 .teardown = drop_arena };
	report(&s, 3);
}
END_TEST

/* ---- 12, 13. the L3 location index: a refresh's view and a scan vs writers ---- */

#define IX_BYTES 8192u

/* A fresh arena (index refresh 60 s: no scan but the ones a scenario makes) and L3 directory. */
static int ix_setup_common(void)
{
	struct shared *s = shared_area();
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "t-il-%d-%u", (int)getpid(), run_no++);
	snprintf(s->l3dir, sizeof(s->l3dir), "/var/tmp/sc-il-%d-%u", (int)getpid(), run_no);
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .reader_slots = 8,
				   .l3_index_refresh_ms = 60000 };
	if (sc_arena_create(s->name, &o, &parent_arena))
		return -1;
	return sc_stage_open(parent_arena, MODEL, STATE, &parent_stage);
}

static void ix_teardown(void *ctx)
{
	sc_test_rm_tree(sh->l3dir);
	drop_arena(ctx);
}

/* Open the run's directory; bound to @a (attached to the arena) unless NULL. */
static struct sc_l3 *ix_open(struct sc_arena *a)
{
	struct sc_l3 *l3 = NULL;
	if (sc_l3_open(sh->l3dir, NULL, &l3))
		return NULL;
	if (a && sc_l3_bind_arena(l3, a)) {
		sc_l3_close(l3);
		return NULL;
	}
	return l3;
}

/* Put the first @n tokens of key @k (payload version @v); its digest in *@d. */
static int ix_put(struct sc_l3 *l3, uint32_t k, uint32_t n, uint32_t v, struct sc_digest *d)
{
	int32_t t[4];
	key_tokens(t, k);
	uint8_t *b = malloc(IX_BYTES);
	if (!b)
		return -ENOMEM;
	fill(b, IX_BYTES, k * 31 + v);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { IX_BYTES } };
	struct sc_l3_put_args a = { .model_identity = MODEL, .state_identity = STATE, .ns = NS, .tokens = t,
				    .token_count = n, .payload = &p };
	struct sc_location loc;
	int rc = sc_l3_put(l3, &a, &loc);
	free(b);
	if (!rc && d)
		*d = loc.digest;
	return rc;
}

/* The parent's view of the index entry for the first @n tokens of key @k: 1 positive (digest in
 * *@d), 2 negative, 0 none, or a negative errno. */
static int ix_entry(uint32_t k, uint32_t n, struct sc_digest *d)
{
	struct shm_l3ix ix;
	if (shm_l3ix_view(parent_arena->shm, &ix))
		return -EBADMSG;
	int32_t t[4];
	key_tokens(t, k);
	struct sc_key key;
	uint32_t len = n;
	if (key_pfx_hashes(parent_arena->shm->hv.key_secret, NS, t, n, &len, 1, &key))
		return -EINVAL;
	struct shm_l3ix_snap snap;
	int eq;
	int f = shm_l3ix_find(&ix, key.lo, key.hi, n, NULL, 0, &eq, &snap);
	if (f != 1)
		return f;
	if (snap.e.flags & SHM_L3IX_NEG)
		return 2;
	*d = (struct sc_digest){ snap.e.digest_lo, snap.e.digest_hi };
	return 1;
}

/* 9. Setup: the directory holds key 2 (4 tokens: the length is registered) and the parent's scan
 * made the index complete without key 1. Actor 0 (attached) locates key 1: an index miss, so the
 * directory probe, which reads the directory and then (l3ix.refresh.read) writes what it saw;
 * actor 1 (attached) puts key 1 at any point. The invariant (design rule 6): the later
 * confirmation wins: the index ends with key 1 positive, naming the object actor 1 stored, never
 * the older "absent" the probe may have read before the put. */
static int refresh_setup(void *ctx)
{
	(void)ctx;
	if (ix_setup_common())
		return -1;
	struct sc_l3 *l3 = ix_open(NULL);
	if (!l3 || ix_put(l3, 2, 4, 0, NULL))
		return -1;
	sc_l3_close(l3);
	l3 = ix_open(parent_arena);
	int32_t t[4];
	key_tokens(t, 3);
	struct sc_location loc;
	int rc = l3 ? sc_l3_locate_longest(l3, NS, t, 4, &loc) : -1; /* the scan: complete, no key 1 */
	if (l3)
		sc_l3_close(l3);
	return rc == 0 ? 0 : -1;
}

static int refresh_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	if (attach(&a, NULL))
		return 1;
	struct sc_l3 *l3 = ix_open(a);
	if (!l3)
		return 2;
	int rc;
	if (who == 0) {
		int32_t t[4];
		key_tokens(t, 1);
		struct sc_location loc;
		rc = sc_l3_locate_longest(l3, NS, t, 4, &loc);
		atomic_store(&sh->located[0], rc);
		rc = rc < 0 ? 3 : 0;
	} else {
		rc = ix_put(l3, 1, 4, 0, NULL) ? 4 : 0;
	}
	sc_l3_close(l3);
	return rc;
}

static int refresh_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	struct sc_digest d, want;
	int e = ix_entry(1, 4, &d);
	struct sc_l3 *l3 = ix_open(NULL);
	int32_t t[4];
	key_tokens(t, 1);
	struct sc_location loc;
	int rc = l3 ? sc_l3_locate_longest(l3, NS, t, 4, &loc) : -1;
	if (l3)
		sc_l3_close(l3);
	want = loc.digest;
	if (rc != 4) {
		snprintf(why, len, "the directory does not hold the put: %d", rc);
		return -1;
	}
	if (e != 1 || !sc_digest_equal(d, want)) {
		snprintf(why, len, "the index entry of the put key is %s (the probe's older view won)",
			 e == 2 ? "negative" : e == 0 ? "missing" : e == 1 ? "another object" : "unreadable");
		return -1;
	}
	return 0;
}

START_TEST(test_l3ix_refresh_vs_put)
{
	static const char *const pts[] = { "l3ix.refresh.read", "l3ix.sync.start", NULL };
	struct il_scenario s = { .name = "l3ix refresh vs put", .actors = 2, .points = pts, .setup = refresh_setup,
				 .actor = refresh_actor, .check = refresh_check, .teardown = ix_teardown };
	report(&s, 3);
}
END_TEST

/* 10. Setup: the directory holds key 1's 2-token prefix; the index was never scanned. Actor 0
 * (attached) locates key 1 (4 tokens): its scan takes its start time (l3ix.sync.start), lists the
 * directory (l3ix.sync.listed), drops what it did not see and declares the index complete as of
 * its start. Actor 1 (attached) puts key 2; actor 2 (not attached: another host) puts key 1's
 * 4-token prefix and notes when its put returned. The invariants: rule 1 — an attached writer's
 * entry is in the index once its put returned, and no scan that listed the directory before it
 * removes it; rule 2 — completeness is claimed only as of the scan's start: when the index is
 * complete as of a time after actor 2's put returned, it holds that prefix (else a restore of it
 * would be answered with the shorter one). */
static int scan_setup(void *ctx)
{
	(void)ctx;
	if (ix_setup_common())
		return -1;
	struct sc_l3 *l3 = ix_open(NULL);
	if (!l3 || ix_put(l3, 1, 2, 0, NULL))
		return -1;
	sc_l3_close(l3);
	/* every prefix subdirectory exists, so the scan lists (and judges) the one key 2 lands in */
	char sub[160];
	for (int i = 0; i < 256; i++) {
		snprintf(sub, sizeof(sub), "%s/prefix/%02x", sh->l3dir, i);
		if (mkdir(sub, 0755) && errno != EEXIST)
			return -1;
	}
	return 0;
}

static int scan_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a = NULL;
	if (who < 2 && attach(&a, NULL))
		return 1;
	struct sc_l3 *l3 = ix_open(a);
	if (!l3)
		return 2;
	int rc = 0;
	if (who == 0) {
		int32_t t[4];
		key_tokens(t, 1);
		struct sc_location loc;
		int n = sc_l3_locate_longest(l3, NS, t, 4, &loc);
		atomic_store(&sh->located[0], n);
		rc = n < 2 ? 3 : 0; /* the 2-token prefix was always there */
	} else if (who == 1) {
		rc = ix_put(l3, 2, 4, 0, NULL) ? 4 : 0;
	} else {
		rc = ix_put(l3, 1, 4, 0, NULL) ? 5 : 0;
		atomic_store(&sh->put_done_ns, shm_now_ns());
	}
	sc_l3_close(l3);
	return rc;
}

static int scan_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	struct sc_digest d;
	int e = ix_entry(2, 4, &d);
	if (e != 1) {
		snprintf(why, len, "the attached writer's entry is %s after its put returned",
			 e == 0 ? "missing" : e == 2 ? "negative" : "unreadable");
		return -1;
	}
	struct shm_l3ix ix;
	if (shm_l3ix_view(parent_arena->shm, &ix))
		return -1;
	uint64_t complete = atomic_load(&ix.hdr->complete_ns), done = atomic_load(&sh->put_done_ns);
	if (complete && complete > done && ix_entry(1, 4, &d) != 1) {
		snprintf(why, len, "the index claims completeness as of %llu ns, after the other host's put (%llu ns), "
			 "without its entry", (unsigned long long)complete, (unsigned long long)done);
		return -1;
	}
	return 0;
}

START_TEST(test_l3ix_scan_vs_puts)
{
	static const char *const pts[] = { "l3ix.sync.start", "l3ix.sync.listed", "l3ix.refresh.read", NULL };
	struct il_scenario s = { .name = "l3ix scan vs puts", .actors = 3, .points = pts, .setup = scan_setup,
				 .actor = scan_actor, .check = scan_check, .teardown = ix_teardown };
	report(&s, 6);
}
END_TEST

/* ---- 14. L3 segments: a put reusing segments vs a sweep (lib/l3/segstore.c) ---- */

#define SW_SEG (64u << 10)

/* Payload @k: 4 segments, the first 2 the same in every payload. */
static uint8_t *sw_payload(uint32_t k)
{
	uint8_t *b = malloc(4 * SW_SEG);
	if (b)
		for (uint32_t i = 0; i < 4; i++)
			fill(b + i * SW_SEG, SW_SEG, i < 2 ? 500 + i : k * 10 + i);
	return b;
}

static int sw_put(struct sc_l3 *l3, uint32_t k, struct sc_location *loc)
{
	int32_t t[4];
	key_tokens(t, k);
	uint8_t *b = sw_payload(k);
	if (!b)
		return -ENOMEM;
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { 4 * SW_SEG } };
	struct sc_l3_put_args a = { .ns = NS, .tokens = t, .token_count = 4, .payload = &p };
	int rc = sc_l3_put(l3, &a, loc);
	free(b);
	return rc;
}

/* Every segment file's mtime an hour back: each may be swept unless something names or touches it. */
static int sw_age(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "find %s/seg -name '*.seg' -exec touch -d '-1 hour' {} +", sh->l3dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Setup: A (key 1) was put and its object removed: its 4 segments are unreferenced and old, 2 of
 * them the ones B (key 2) is made of too. Actor 0 puts B (it reuses those 2: checked and touched,
 * l3seg.put.reused, then its manifest); actor 1 sweeps (sc_l3_evict_to: the listing, then each
 * segment chosen for removal, l3seg.sweep.chosen). The invariant (docs/DESIGN.md, "Segments in
 * L3"): B reads byte for byte whatever the order; A's own 2 segments are gone. */
static int sweep_setup(void *ctx)
{
	(void)ctx;
	if (ix_setup_common())
		return -1;
	struct sc_l3 *l3 = ix_open(NULL);
	struct sc_location loc;
	int rc = !l3 || sc_l3_set_segment_bytes(l3, SW_SEG) || sw_put(l3, 1, &loc) ? -1 : 0;
	if (l3)
		sc_l3_close(l3);
	char path[256], rel[48];
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", sh->l3dir, rel);
	return rc || unlink(path) || sw_age() ? -1 : 0;
}

static int sweep_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_l3 *l3 = NULL;
	if (sc_l3_open(sh->l3dir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3))
		return 1;
	int rc = who == 0 ? (sw_put(l3, 2, NULL) ? 2 : 0) : (sc_l3_evict_to(l3, UINT64_MAX) < 0 ? 3 : 0);
	sc_l3_close(l3);
	return rc;
}

static int sweep_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	struct sc_l3 *l3 = NULL;
	if (sc_l3_open(sh->l3dir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3))
		return -1;
	int32_t t[4];
	key_tokens(t, 2);
	struct sc_location loc;
	uint8_t *dst = aligned_alloc(4096, 4 * SW_SEG), *want = sw_payload(2);
	int n = sc_l3_locate_longest(l3, NS, t, 4, &loc);
	int rc = n == 4 && dst ? sc_l3_fill(l3, &loc, dst, 4 * SW_SEG, 0) : -EIO;
	int ok = rc == 0 && want && !memcmp(dst, want, 4 * SW_SEG);
	free(dst);
	sc_l3_close(l3);
	if (!ok) {
		snprintf(why, len, "the put's object does not read: locate %d, fill %d%s", n, rc,
			 rc == 0 ? " (wrong bytes)" : "");
		free(want);
		return -1;
	}
	/* A's own segments (3 and 4) were unreferenced, old and untouched: swept */
	for (int i = 2; i < 4; i++) {
		uint8_t *a = sw_payload(1);
		struct sc_digest d = sc_digest(a + i * SW_SEG, SW_SEG);
		free(a);
		char hex[33], path[256];
		l3_digest_hex(d.lo, d.hi, hex);
		snprintf(path, sizeof(path), "%s/seg/%.2s/%s.seg", sh->l3dir, hex, hex);
		if (access(path, F_OK) == 0) {
			snprintf(why, len, "an unreferenced, old segment survived the sweep");
			free(want);
			return -1;
		}
	}
	free(want);
	return 0;
}

START_TEST(test_l3seg_put_vs_sweep)
{
	static const char *const pts[] = { "l3seg.put.reused", "l3seg.sweep.chosen", NULL };
	struct il_scenario s = { .name = "l3 segment put vs sweep", .actors = 2, .points = pts, .setup = sweep_setup,
				 .actor = sweep_actor, .check = sweep_check, .teardown = ix_teardown };
	report(&s, 3);
}
END_TEST


/* ---- 15. evictions from the last listing's order vs puts (lib/l3/victims.c) ----
 *
 * Setup (every store "large": l3_recon_full_max 0): keys 1..6 put, key k last used 1000 - k
 * seconds ago; an eviction of one object lists the store (key 1 goes) and leaves the head of its
 * order, keys 2, 3 and 4 (half the store), in DIR/victims. Actor 0 evicts down to three objects
 * from that order without listing (each candidate judged unused, l3.victims.checked, then
 * removed); actor 1 puts key 2 again (a use: found and touched, l3.put.there) and then a new key 7.
 * The invariants (docs/DESIGN.md, "Evictions without a listing"): every object there reads byte
 * for byte; key 7 and key 6, newer than every candidate, are never evicted; key 5 only when key 2's
 * use was seen (key 2 kept); key 2 is kept when its use ended before the eviction began; actor 0
 * returns with the store at most its goal, and lists the store only when key 2 was kept (the three
 * candidates are enough otherwise); DIR/state's counters are the files the store holds. */
#define EV_BYTES 4096u
#define EV_KEYS 7u

static uint64_t ev_file_bytes;

static int ev_put(struct sc_l3 *l3, uint32_t k, struct sc_location *loc)
{
	uint8_t *b = malloc(EV_BYTES);
	if (!b)
		return -ENOMEM;
	fill(b, EV_BYTES, k);
	int32_t t[4];
	key_tokens(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { EV_BYTES } };
	struct sc_l3_put_args a = { .ns = NS, .tokens = t, .token_count = 4, .payload = &p };
	int rc = sc_l3_put(l3, &a, loc);
	free(b);
	return rc;
}

static int ev_setup(void *ctx)
{
	(void)ctx;
	if (ix_setup_common())
		return -1;
	struct sc_l3 *l3 = ix_open(NULL);
	if (!l3)
		return -1;
	time_t now = time(NULL);
	int rc = 0;
	for (uint32_t k = 1; k < EV_KEYS && !rc; k++) {
		struct sc_location loc;
		char rel[48], path[256];
		if ((rc = ev_put(l3, k, &loc)))
			break;
		l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
		snprintf(path, sizeof(path), "%s/objects/%s", sh->l3dir, rel);
		struct timespec ts[2] = { { now - 1000 + (time_t)k, 0 }, { now - 1000 + (time_t)k, 0 } };
		rc = utimensat(AT_FDCWD, path, ts, 0);
		ev_file_bytes = loc.file_bytes;
	}
	/* the listing: key 1 goes, keys 2-4 are the order left */
	if (!rc && sc_l3_evict_to(l3, 5 * ev_file_bytes) != 1)
		rc = -1;
	sc_l3_close(l3);
	return rc;
}

static int ev_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_l3 *l3 = NULL;
	if (sc_l3_open(sh->l3dir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3))
		return 1;
	int rc = 0;
	if (who == 0) {
		uint64_t goal = 3 * ev_file_bytes;
		/* key 2's use over before this eviction began: it must be seen */
		atomic_store(&sh->located[0], atomic_load(&sh->located[1]));
		unsigned long l0 = atomic_load(&l3_test_evict_listings);
		if (sc_l3_evict_to(l3, goal) < 0)
			rc = 2;
		atomic_store(&sh->got[1], (uint32_t)(atomic_load(&l3_test_evict_listings) - l0));
		atomic_store(&sh->got[0], atomic_load(&l3->st->bytes) <= goal ? 1 : 2);
	} else if (ev_put(l3, 2, NULL)) {
		rc = 3;
	} else {
		atomic_store(&sh->located[1], 1);
		rc = ev_put(l3, EV_KEYS, NULL) ? 4 : 0;
	}
	sc_l3_close(l3);
	return rc;
}

/* Key @k: 1 served byte for byte, 0 missed, -1 wrong bytes or an error. */
static int ev_served(struct sc_l3 *l3, uint32_t k)
{
	int32_t t[4];
	key_tokens(t, k);
	struct sc_location loc;
	int n = sc_l3_locate_longest(l3, NS, t, 4, &loc);
	if (n != 4)
		return n == 0 ? 0 : -1;
	uint8_t *dst = aligned_alloc(4096, 2 * EV_BYTES), *want = malloc(EV_BYTES);
	int rc = dst && want ? sc_l3_fill(l3, &loc, dst, 2 * EV_BYTES, 0) : -ENOMEM;
	if (!rc)
		fill(want, EV_BYTES, k);
	int r = rc == -ENOENT ? 0 : rc ? -1 : memcmp(dst, want, EV_BYTES) ? -1 : 1;
	free(dst);
	free(want);
	return r;
}

static int ev_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	struct sc_l3 *l3 = NULL;
	if (sc_l3_open(sh->l3dir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3))
		return -1;
	/* the counters first (a locate drops the entries of evicted objects, which are not counted) */
	uint64_t bytes = atomic_load(&l3->st->bytes), objects = atomic_load(&l3->st->objects);
	int s[EV_KEYS + 1], rc = 0;
	unsigned there = 0;
	for (uint32_t k = 1; k <= EV_KEYS; k++) {
		s[k] = ev_served(l3, k);
		there += s[k] == 1;
	}
	sc_l3_close(l3);
	for (uint32_t k = 1; k <= EV_KEYS && !rc; k++)
		if (s[k] < 0)
			rc = snprintf(why, len, "key %u read wrong", k);
	if (!rc && (s[EV_KEYS] != 1 || s[6] != 1))
		rc = snprintf(why, len, "a newer object was evicted (key 6: %d, key 7: %d)", s[6], s[EV_KEYS]);
	if (!rc && s[1])
		rc = snprintf(why, len, "key 1 came back");
	if (!rc && !s[5] && !s[2])
		rc = snprintf(why, len, "key 5 evicted though key 2, older, was evicted too");
	/* the order has 3 victims: only a use of key 2 seen, and key 7 there, make 3 too few */
	if (!rc && atomic_load(&sh->got[1]) && !s[2])
		rc = snprintf(why, len, "the eviction listed the store though its order had victims enough");
	if (!rc && atomic_load(&sh->located[0]) && !s[2])
		rc = snprintf(why, len, "key 2 evicted though its use ended before the eviction began");
	if (!rc && atomic_load(&sh->got[0]) != 1)
		rc = snprintf(why, len, "the eviction returned over its goal");
	if (!rc && (objects != there || bytes != there * ev_file_bytes))
		rc = snprintf(why, len, "DIR/state counts %llu objects, %llu bytes; the store holds %u of %llu",
			      (unsigned long long)objects, (unsigned long long)bytes, there,
			      (unsigned long long)ev_file_bytes);
	return rc ? -1 : 0;
}

START_TEST(test_l3_evictions_from_the_order_vs_puts)
{
	static const char *const pts[] = { "l3.victims.checked", "l3.put.there", NULL };
	l3_recon_full_max = 0; /* every store large: evictions use the order (actors inherit it) */
	struct il_scenario s = { .name = "l3 evictions from the order vs puts", .actors = 2, .points = pts,
				 .setup = ev_setup, .actor = ev_actor, .check = ev_check, .teardown = ix_teardown };
	report(&s, 3);
}
END_TEST

/* ---- the schedule points list ---- */

/* ---- 14. an abandoned fill vs room making and repair ----
 *
 * Actor 0 restores an 8 MiB object with a deadline its fill is predicted to meet (the model is
 * fixed at 1 ns) but that passes while the explorer holds it at its points: depending on the
 * ordering the fill completes in time or is abandoned past the deadline (restore.abandoned) with
 * its reads possibly still landing. Actor 1 meanwhile admits 24 MiB of 1 MiB entries into the
 * 16 MiB arena (room made by evicting, reaping what dead processes hold) and runs fsck --repair.
 * The invariant (docs/DESIGN.md: an owner token stays alive until every asynchronous operation it
 * started has finished): the abandoned fill's reservation is never freed or reused while its reads
 * may land, so every entry actor 1 published still has its own bytes (a deep fsck digests every
 * entry) and, once actor 0 reaped its fill and left, nothing is reserved or leaked. */
#define AB_OBJ (8u << 20)

static int abandon_setup(void *ctx)
{
	(void)ctx;
	if (ix_setup_common())
		return -1;
	atomic_store(&sh->deadline_ns, 0);
	struct sc_l3 *l3 = ix_open(NULL);
	if (!l3)
		return -1;
	uint8_t *b = aligned_alloc(4096, AB_OBJ);
	fill(b, AB_OBJ, 77);
	int32_t t[4];
	key_tokens(t, 77);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { AB_OBJ } };
	struct sc_l3_put_args a = { .model_identity = MODEL, .state_identity = STATE, .ns = NS, .tokens = t,
				    .token_count = 4, .payload = &p };
	int rc = sc_l3_put(l3, &a, NULL);
	free(b);
	sc_l3_close(l3);
	return rc;
}

static int abandon_actor(void *ctx, unsigned who)
{
	(void)ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	if (attach(&a, &st))
		return 1;
	int rc = 0;
	if (who == 0) {
		struct sc_l3_opts o = { .o_direct = SC_L3_ODIRECT_ON };
		struct sc_l3 *l3 = NULL;
		if (sc_l3_open(sh->l3dir, &o, &l3))
			return 2;
		sc_test_set_fill_model(l3, 1, 1);
		int32_t t[4];
		key_tokens(t, 77);
		struct sc_restore r;
		/* long enough to fill in time when nothing holds this actor on a loaded machine, short
		 * enough that actor 1 waiting for it is not taken to be blocked (IL_BLOCKED_MS): an
		 * ordering that holds this actor while actor 1 runs resumes it past the deadline (no fill
		 * started, or one abandoned if its reads are still in flight) */
		_Static_assert(IL_BLOCKED_MS > 250, "actor 1's wait for the deadline must not look blocked");
		struct sc_restore_opts ro = { .deadline_ns = mono_ns() + 250000000 };
		atomic_store(&sh->deadline_ns, ro.deadline_ns);
		int n = sc_restore_with(st, l3, NS, t, 4, &ro, &r);
		atomic_store(&sh->got[0], n == 4 ? 1 : n == -ETIME ? 2 : 3);
		if (n == 4)
			sc_restore_release(&r);
		else if (n != -ETIME)
			rc = 3;
		/* reap what the ring still owes (bounded: the poll budget) */
		uint64_t until = mono_ns() + POLL_NS;
		struct sc_l3_fill_req *done[4];
		while (sc_l3_fill_inflight(l3) && mono_ns() < until)
			(void)sc_l3_fill_reap(l3, done, 4, 1000000);
		if (sc_l3_fill_inflight(l3))
			rc = 4;
		sc_l3_close(l3);
	} else {
		for (uint32_t k = 0; k < 24 && !rc; k++)
			if (admit_v(st, 1000 + k, 1, 1 << 20) && sc_l2_last_refusal(st) != SC_L2_REFUSE_LEASED &&
			    sc_l2_last_refusal(st) != SC_L2_REFUSE_NO_ROOM && sc_l2_last_refusal(st) != SC_L2_REFUSE_SCAN_LIMIT)
				rc = 5; /* refusals for want of room are fine while the fill holds its memory */
		if (!rc && sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, NULL) < 0)
			rc = 6;
		/* wait for actor 0's deadline to pass (set before its first point; at most 250 ms) */
		for (uint64_t dl = atomic_load(&sh->deadline_ns); dl && mono_ns() <= dl;)
			(void)poll(NULL, 0, 1);
	}
	sc_stage_close(st);
	sc_arena_close(a);
	return rc;
}

static unsigned abandon_runs[3];

static int abandon_check(void *ctx, char *why, unsigned len)
{
	(void)ctx;
	uint32_t g = atomic_load(&sh->got[0]);
	if (g == 1 || g == 2)
		abandon_runs[g]++;
	struct sc_fsck_report rep;
	int rc = sc_arena_fsck(parent_arena, SC_FSCK_DEEP, NULL, NULL, &rep);
	if (rc != 0 || rep.digest_failures || rep.leaked_bytes || rep.reserved_bytes || rep.orphan_bytes) {
		snprintf(why, len, "after %s: fsck %d problems, %llu digest failures, %llu leaked, %llu reserved, %llu orphaned",
			 g == 2 ? "an abandoned fill" : "a fill in time", rc, (unsigned long long)rep.digest_failures,
			 (unsigned long long)rep.leaked_bytes, (unsigned long long)rep.reserved_bytes,
			 (unsigned long long)rep.orphan_bytes);
		return -1;
	}
	int32_t t[4];
	key_tokens(t, 77);
	struct sc_l2_entry_info info;
	if (g == 2 && sc_l2_peek(parent_stage, NS, t, 4, &info) == 0) {
		snprintf(why, len, "an abandoned fill was published");
		return -1;
	}
	return 0;
}

START_TEST(test_abandoned_fill_vs_room_making)
{
	static const char *const pts[] = { "restore.fill", "l3.fill.submitted", "restore.abandoned", NULL };
	struct il_scenario s = { .name = "abandoned fill vs room making", .actors = 2, .points = pts,
				 .setup = abandon_setup, .actor = abandon_actor, .check = abandon_check,
				 .teardown = ix_teardown };
	report(&s, 3);
	printf("abandoned fill vs room making: %u orderings filled in time, %u abandoned the fill\n", abandon_runs[1],
	       abandon_runs[2]);
}
END_TEST

START_TEST(test_sched_points_list_is_complete)
{
	/* every shm_sched_point("...") in the sources is listed, and nothing else */
	sc_test_points_match_sources("shm_sched_point", sc_sched_points(), "schedule point");
}
END_TEST

Suite *interleave_suite(void)
{
	Suite *s = suite_create("interleave");
	TCase *tc = tcase_create("interleave");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_sched_points_list_is_complete);
	tcase_add_test(tc, test_lease_vs_reclamation);
	tcase_add_test(tc, test_reader_claim_vs_reap);
	tcase_add_test(tc, test_reaper_killed_half_way);
	tcase_add_test(tc, test_index_publish_unlink_vs_lookup);
	tcase_add_test(tc, test_heap_free_vs_reclamation);
	tcase_add_test(tc, test_ring_producer_claim_and_reclaim);
	tcase_add_test(tc, test_consumer_takeover);
	tcase_add_test(tc, test_fill_claims);
	tcase_add_test(tc, test_observation_table);
	tcase_add_test(tc, test_l3ix_refresh_vs_put);
	tcase_add_test(tc, test_l3ix_scan_vs_puts);
	tcase_add_test(tc, test_segment_admit_vs_release);
	tcase_add_test(tc, test_segment_lease_vs_release);
	tcase_add_test(tc, test_l3seg_put_vs_sweep);
	tcase_add_test(tc, test_abandoned_fill_vs_room_making);
	tcase_add_test(tc, test_l3_evictions_from_the_order_vs_puts);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(interleave_suite)
