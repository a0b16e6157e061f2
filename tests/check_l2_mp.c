/* tests/check_l2_mp.c — the L2 tier across processes: concurrent readers verifying every hit,
 * readers killed holding leases, writers killed at each fault-injection point. Real fork/kill -9. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/fault.h"
#include "../shm/heap.h"

#define ARENA (64ull << 20)
#define NKEYS 64

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Payload of key @k, version @v: a header (k, v) then bytes derived from both. */
static void payload(uint8_t *p, size_t n, uint32_t k, uint32_t v)
{
	uint32_t x = k * 2654435761u ^ (v * 40503u + 7);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
	if (n >= 8) {
		memcpy(p, &k, 4);
		memcpy(p + 4, &v, 4);
	}
}

static void key_tokens(int32_t *t, uint32_t k)
{
	for (int i = 0; i < 8; i++)
		t[i] = (int32_t)(k * 1000 + (uint32_t)i);
}

static int admit_kv(struct sc_stage *st, uint32_t k, uint32_t v, size_t n)
{
	uint8_t *b = malloc(n);
	payload(b, n, k, v);
	int32_t t[8];
	key_tokens(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit(st, "mp", t, 8, sc_digest(b, n), &p, SC_ORIGIN_DIRECT);
	free(b);
	return rc;
}

/* A fresh arena with keys 0..@n-1 admitted (value 1, @bytes each) through a "model"/"state" stage. */
static struct sc_arena *arena_with_keys(const char *tag, uint32_t n, size_t bytes, const char **name,
					struct sc_stage **st)
{
	struct sc_arena *a = sc_test_arena(tag, ARENA, name);
	ck_assert_int_eq(sc_stage_open(a, "model", "state", st), 0);
	for (uint32_t k = 0; k < n; k++)
		ck_assert_int_eq(admit_kv(*st, k, 1, bytes), 0);
	return a;
}

static void open_child(const char *name, struct sc_arena **a, struct sc_stage **st)
{
	if (sc_arena_open(name, a) || sc_stage_open(*a, "model", "state", st))
		_exit(90);
}

/* ---- concurrent readers verify every hit ---- */

static void writer_proc(const char *name, double secs)
{
	struct sc_arena *a;
	struct sc_stage *st;
	open_child(name, &a, &st);
	uint32_t seed = 12345, v = 1;
	double end = now_s() + secs;
	while (now_s() < end) {
		seed = seed * 1103515245u + 12345u;
		uint32_t k = (seed >> 8) % NKEYS;
		size_t n = 1024 + (seed >> 4) % (192 << 10);
		if ((seed & 0xf) == 0) {
			struct sc_key key;
			int32_t t[8];
			key_tokens(t, k);
			sc_l2_key(st, "mp", t, 8, &key);
			(void)sc_l2_remove(st, key);
		} else {
			int rc = admit_kv(st, k, v++, n);
			if (rc && rc != -ENOSPC)
				_exit(10);
		}
	}
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

static void reader_proc(const char *name, double secs, int fd)
{
	struct sc_arena *a;
	struct sc_stage *st;
	open_child(name, &a, &st);
	uint64_t hits = 0, bad = 0, seed = (uint64_t)getpid();
	/* leases are also held across later lookups, and verified again before release: the writer
	 * must not reuse their memory meanwhile */
	struct sc_lease held[8];
	unsigned nheld = 0;
	double end = now_s() + secs;
	while (now_s() < end) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t k = (uint32_t)(seed >> 33) % NKEYS;
		int32_t t[8];
		key_tokens(t, k);
		struct sc_lease l;
		int rc = sc_l2_get(st, "mp", t, 8, NULL, &l);
		if (rc == -ENOENT)
			continue;
		if (rc) {
			bad++;
			continue;
		}
		hits++;
		uint32_t hk;
		memcpy(&hk, l.sec[0], 4);
		if (!sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), l.digest) || hk != k || l.token_count != 8)
			bad++;
		struct sc_lease *h = &held[nheld++ % 8];
		if (nheld > 8) {
			if (!sc_digest_equal(sc_digest(h->sec[0], h->sec_len[0]), h->digest))
				bad++;
			sc_lease_release(h);
		}
		*h = l;
	}
	for (unsigned i = 0; i < (nheld < 8 ? nheld : 8); i++) {
		if (!sc_digest_equal(sc_digest(held[i].sec[0], held[i].sec_len[0]), held[i].digest))
			bad++;
		sc_lease_release(&held[i]);
	}
	uint64_t out[2] = { hits, bad };
	if (write(fd, out, sizeof(out)) != sizeof(out))
		_exit(11);
	sc_stage_close(st);
	sc_arena_close(a);
	_exit(0);
}

START_TEST(readers_verify_every_hit_while_a_writer_churns)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("l2mp", ARENA, &name);
	/* a small budget so the writer evicts all the time */
	ck_assert_int_eq(sc_l2_shrink_to(a, 3 << 20), 0);
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pids[3];
	const double secs = 3.0;
	if ((pids[0] = fork()) == 0)
		writer_proc(name, secs);
	for (int i = 1; i < 3; i++)
		if ((pids[i] = fork()) == 0)
			reader_proc(name, secs, fds[1]);
	for (int i = 0; i < 3; i++) {
		int status;
		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d status %#x", i, status);
	}
	uint64_t hits = 0;
	for (int i = 0; i < 2; i++) {
		uint64_t r[2];
		ck_assert_int_eq(read(fds[0], r, sizeof(r)), (ssize_t)sizeof(r));
		ck_assert_msg(r[1] == 0, "reader saw %llu mismatches", (unsigned long long)r[1]);
		hits += r[0];
	}
	close(fds[0]);
	close(fds[1]);
	ck_assert_uint_gt(hits, 100);
	printf("readers: %llu verified hits\n", (unsigned long long)hits);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_gt(s.evictions, 0);
	ck_assert_uint_eq(s.leases, 0);
	ck_assert_uint_le(s.bytes, s.budget_bytes);
	/* nothing leaked */
	ck_assert_int_ge(sc_l2_clear(a), 0);
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- threads: one handle each ---- */

struct thr {
	const char *name;
	int writer;
	uint64_t hits, bad;
};

static void *thr_main(void *vp)
{
	struct thr *t = vp;
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(t->name, &a) || sc_stage_open(a, "model", "state", &st)) {
		t->bad = 1;
		return NULL;
	}
	uint32_t seed = (uint32_t)(uintptr_t)t, v = 1;
	double end = now_s() + 1.0;
	while (now_s() < end) {
		seed = seed * 1103515245u + 12345u;
		uint32_t k = (seed >> 8) % NKEYS;
		if (t->writer) {
			int rc = admit_kv(st, k, v++, 1000 + (seed >> 4) % 60000);
			if (rc && rc != -ENOSPC)
				t->bad++;
			continue;
		}
		int32_t tk[8];
		key_tokens(tk, k);
		struct sc_lease l;
		int rc = sc_l2_get(st, "mp", tk, 8, NULL, &l);
		if (rc == -ENOENT)
			continue;
		if (rc || !sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), l.digest))
			t->bad++;
		else
			t->hits++;
		if (!rc)
			sc_lease_release(&l);
	}
	sc_stage_close(st);
	sc_arena_close(a);
	return NULL;
}

START_TEST(threads_with_their_own_handles)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("l2thr", ARENA, &name);
	ck_assert_int_eq(sc_l2_shrink_to(a, 2 << 20), 0);
	struct thr t[3] = { { name, 1, 0, 0 }, { name, 0, 0, 0 }, { name, 0, 0, 0 } };
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(t[i].bad, 0);
	ck_assert_uint_gt(t[1].hits + t[2].hits, 0);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.leases, 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Nothing is held any more: no leases, nothing waiting for reclamation, the heap empty. */
static void assert_all_released(struct sc_arena *a)
{
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.leases, 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, 0);
}

/* ---- a reader killed while holding leases ---- */

/* Fork a child that opens arena @name and its stage (*@cs, in the child, where it returns 0);
 * @fds becomes a pipe on which the child says it holds what it took. */
static pid_t fork_holder(const char *name, int fds[2], struct sc_stage **cs)
{
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *ca;
		open_child(name, &ca, cs);
	}
	return pid;
}

/* In a child: tell the parent (pipe @fd) that it holds what it took, then wait to be killed. */
static _Noreturn void hold_until_killed(int fd)
{
	char c = 'x';
	if (write(fd, &c, 1) != 1)
		_exit(21);
	pause();
	_exit(22);
}

START_TEST(killed_readers_leases_are_reclaimed)
{
	const char *name;
	struct sc_stage *st;
	struct sc_arena *a = arena_with_keys("l2mp", 8, 256 << 10, &name, &st);
	struct shm_heap_stats full;
	ck_assert_int_eq(shm_heap_stats(a->shm, &full), 0);
	int fds[2];
	struct sc_stage *cs;
	pid_t pid = fork_holder(name, fds, &cs);
	if (pid == 0) {
		struct sc_lease l[8];
		for (uint32_t k = 0; k < 8; k++) {
			int32_t t[8];
			key_tokens(t, k);
			if (sc_l2_get(cs, "mp", t, 8, NULL, &l[k]))
				_exit(20);
		}
		hold_until_killed(fds[1]); /* killed holding 8 leases */
	}
	char c;
	ck_assert_int_eq(read(fds[0], &c, 1), 1);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.leases, 8);
	/* removal while leased: entries gone, memory pending */
	ck_assert_int_eq(sc_l2_clear(a), 8);
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_ge(s.pending_reclaim_bytes, 8ull * (256 << 10));
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(sc_l2_clear(a), 0); /* a forced reap: the handle's 1 ms gap does not hold it back */
	ck_assert_int_eq(sc_l2_clear(a), 0);
	assert_all_released(a);
	/* and the memory is reused */
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(admit_kv(st, k, 2, 256 << 10), 0);
	close(fds[0]);
	close(fds[1]);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- writers killed at each fault point ---- */

enum op { OP_ADMIT_NEW, OP_REPLACE, OP_REPLACE_MANY, OP_EVICT, OP_REMOVE };
struct fault_case {
	const char *point;
	enum op op;
	int holds_shard; /* dies holding a shard lock: the next locker must repair */
};
static const struct fault_case cases[] = {
	{ "l2.admit.copied", OP_ADMIT_NEW, 0 },  { "l2.admit.popped", OP_ADMIT_NEW, 1 },
	{ "l2.admit.tagged", OP_ADMIT_NEW, 1 },  { "l2.admit.busy", OP_ADMIT_NEW, 1 },
	{ "l2.admit.linked", OP_ADMIT_NEW, 1 },  { "l2.admit.busy", OP_REPLACE, 1 },
	{ "l2.admit.linked", OP_REPLACE, 1 },    { "l2.evict.unlinked", OP_EVICT, 1 },
	{ "l2.remove.unlinked", OP_REMOVE, 1 },  { "heap.alloc.split", OP_ADMIT_NEW, 0 },
	{ "l2.index.replaced", OP_REPLACE, 1 },  { "l2.index.unlinked", OP_REMOVE, 1 },
	{ "l2.index.unlinked", OP_EVICT, 1 },    { "l2.reclaim.freeing", OP_REMOVE, 1 },
	{ "l2.reclaim.freed", OP_REMOVE, 1 },    { "l2.reclaim.freed", OP_REPLACE_MANY, 1 },
};

static uint32_t repairs(struct sc_arena *a)
{
	uint32_t r = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		r += l2_ix(a)->hdr->shards[s].repairs;
	return r;
}

#define BASE_KEYS 12
#define BASE_BYTES (16u << 10)

static void do_op(struct sc_stage *st, enum op op)
{
	switch (op) {
	case OP_ADMIT_NEW: (void)admit_kv(st, 100, 1, 20000); break;
	case OP_REPLACE: (void)admit_kv(st, 3, 2, 30000); break;
	case OP_REPLACE_MANY: /* replaced entries are reclaimed in batches (lib/l2/evict.h) */
		for (uint32_t v = 2; v < 2 + 40; v++)
			(void)admit_kv(st, 3, v, 30000);
		break;
	case OP_EVICT: (void)admit_kv(st, 101, 1, 64 << 10); break;
	case OP_REMOVE: {
		int32_t t[8];
		struct sc_key key;
		key_tokens(t, 5);
		sc_l2_key(st, "mp", t, 8, &key);
		(void)sc_l2_remove(st, key);
		break;
	}
	}
}

static pid_t run_killed(const char *name, const char *point, enum op op)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *ca;
		struct sc_stage *cs;
		open_child(name, &ca, &cs);
		if (shm_fault_arm(point))
			_exit(30);
		do_op(cs, op);
		_exit(31); /* the point was not reached */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: child status %#x (not killed there)",
		      point, status);
	return pid;
}

/* Every live entry of keys 0 to @nkeys - 1: its payload matches its digest and its key; returns
 * the count. */
static int verify_keys(struct sc_stage *st, uint32_t nkeys)
{
	int live = 0;
	for (uint32_t k = 0; k < nkeys; k++) {
		int32_t t[8];
		key_tokens(t, k);
		struct sc_lease l;
		int rc = sc_l2_get(st, "mp", t, 8, NULL, &l);
		if (rc == -ENOENT)
			continue;
		ck_assert_int_eq(rc, 0);
		uint32_t hk;
		memcpy(&hk, l.sec[0], 4);
		ck_assert(sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), l.digest));
		ck_assert_uint_eq(hk, k);
		sc_lease_release(&l);
		live++;
	}
	return live;
}

static void fault_case_run(const struct fault_case *fc)
{
	const char *name;
	struct sc_stage *st;
	struct sc_arena *a = arena_with_keys("l2f", BASE_KEYS, BASE_BYTES, &name, &st);
	if (fc->op == OP_EVICT)
		ck_assert_int_eq(sc_l2_shrink_to(a, BASE_KEYS * shm_heap_footprint(BASE_BYTES) + (32 << 10)), 0);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	uint64_t used_before = hs.used_bytes;
	run_killed(name, fc->point, fc->op);
	/* killed before the op freed anything (every point but the one right after a free): the heap
	 * holds at least what it held; what the op unlinked is still there, for the next writer */
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	if (strcmp(fc->point, "l2.reclaim.freed"))
		ck_assert_msg(hs.used_bytes >= used_before, "%s: %llu of %llu bytes held after the kill", fc->point,
			      (unsigned long long)hs.used_bytes, (unsigned long long)used_before);
	/* the next writer: lock every shard (repairing the dead holder's), then check */
	ck_assert_int_ge(sc_l2_invalidate_digest(a, (struct sc_digest){ 1, 2 }), 0);
	if (fc->holds_shard)
		ck_assert_uint_ge(repairs(a), 1); /* the evictor may hold two shards */
	else
		ck_assert_uint_eq(repairs(a), 0);
	int live = verify_keys(st, 128);
	int expect_min = BASE_KEYS - (fc->op == OP_EVICT || fc->op == OP_REMOVE ? 2 : 0);
	ck_assert_msg(live >= expect_min, "%s: %d live entries", fc->point, live);
	if (fc->op == OP_ADMIT_NEW && strcmp(fc->point, "l2.admit.linked")) {
		/* killed before its entry was linked: nothing of it is served */
		int32_t t[8];
		struct sc_lease l;
		key_tokens(t, 100);
		ck_assert_msg(sc_l2_get(st, "mp", t, 8, NULL, &l) == -ENOENT, "%s: the new key is served", fc->point);
	}
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_int_eq((int)s.entries, live);
	/* still usable */
	ck_assert_int_eq(admit_kv(st, 120, 1, 5000), 0);
	ck_assert_int_eq(verify_keys(st, 128), live + 1);
	/* no space leaked: clear (reaps the dead and sweeps orphans) empties the heap */
	ck_assert_int_ge(sc_l2_clear(a), 0);
	ck_assert_int_ge(sc_l2_clear(a), 0);
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	ck_assert_msg(hs.used_bytes == 0, "%s: %llu bytes leaked", fc->point, (unsigned long long)hs.used_bytes);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}

START_TEST(writer_killed_at_each_fault_point)
{
	fault_case_run(&cases[_i]);
}
END_TEST

START_TEST(repairer_killed_during_repair)
{
	const char *name;
	struct sc_stage *st;
	struct sc_arena *a = arena_with_keys("l2f", BASE_KEYS, BASE_BYTES, &name, &st);
	run_killed(name, "l2.admit.busy", OP_ADMIT_NEW);
	run_killed(name, "l2.repair.rebuilt", OP_ADMIT_NEW); /* same key, same shard: repairs, dies */
	ck_assert_uint_eq(repairs(a), 0);                     /* its repair never completed */
	ck_assert_int_ge(sc_l2_invalidate_digest(a, (struct sc_digest){ 1, 2 }), 0);
	ck_assert_uint_eq(repairs(a), 1);
	ck_assert_int_ge(verify_keys(st, 128), BASE_KEYS);
	ck_assert_int_eq(admit_kv(st, 100, 2, 20000), 0);
	ck_assert_int_ge(sc_l2_clear(a), 0);
	ck_assert_int_ge(sc_l2_clear(a), 0);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A killed filler's reservation is freed by the next sweep: after a clear (_i 0), or after its slot
 * was cleaned by someone else, by the periodic reap that then finds nothing to reap (_i 1), and by
 * the reap of an admission that needs its room, which then has it (_i 2), by the periodic
 * reap once it is due and the handle's gap has passed (_i 3), and by a reap that frees its slot
 * while the shared count of cleaned slots says nothing was cleaned since this handle swept (_i 4). */
START_TEST(killed_filler_reservation_is_freed)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("l2f", ARENA, &name);
	int fds[2];
	struct sc_stage *cs;
	uint64_t cap = shm_heap_capacity(a->shm->hv.regions[SHM_REGION_HEAP].size);
	uint64_t held = _i == 2 ? cap / 4 * 3 : 1 << 20;
	pid_t pid = fork_holder(name, fds, &cs);
	if (pid == 0) {
		struct sc_l2_resv r;
		if (sc_l2_reserve(cs, held, &r))
			_exit(40);
		hold_until_killed(fds[1]);
	}
	char c;
	ck_assert_int_eq(read(fds[0], &c, 1), 1);
	ck_assert_uint_ge(sc_test_heap_used(a), held);
	/* alive: a sweep leaves it alone */
	ck_assert_int_eq(sc_l2_clear(a), 0);
	ck_assert_uint_ge(sc_test_heap_used(a), held);
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (_i == 2) {
		/* its slot cleaned by someone who does not sweep, and no periodic reap due: an admission
		 * that needs the room finds nothing to evict, reaps (no slot to free, the reservation
		 * swept) and then has the room */
		ck_assert_int_eq(shm_readers_reap(a->shm), 1);
		atomic_store(&a->shm->hdr->reap_due_ns, UINT64_MAX);
		struct sc_stage *st;
		ck_assert_int_eq(sc_stage_open(a, "model-A", "state-1", &st), 0);
		ck_assert_int_eq(admit_kv(st, 7, 0, cap / 2), 0);
		atomic_store(&a->shm->hdr->reap_due_ns, 0);
		ck_assert_int_eq(sc_l2_clear(a), 1);
		sc_stage_close(st);
	} else if (_i == 3) {
		/* the periodic reap's limits: not before the arena's due time, not within the handle's
		 * 1 ms gap (the due time still moves on), then it reaps */
		struct sc_l2_stats ls;
		atomic_store(&a->shm->hdr->reap_due_ns, UINT64_MAX);
		a->l2_last_reap_ns = 0;
		ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
		ck_assert_uint_eq(atomic_load(&a->shm->hdr->reap_due_ns), UINT64_MAX);
		ck_assert_uint_ge(sc_test_heap_used(a), held);
		atomic_store(&a->shm->hdr->reap_due_ns, 0);
		uint64_t t0 = shm_now_ns();
		a->l2_last_reap_ns = t0;
		ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
		ck_assert_uint_gt(atomic_load(&a->shm->hdr->reap_due_ns), t0);
		/* a reap stamps its own clock: one that ran did so past the gap; inside it, nothing ran */
		uint64_t at = a->l2_last_reap_ns;
		ck_assert_msg(at == t0 || at - t0 >= 1000000, "a reap %llu ns into the gap", (unsigned long long)(at - t0));
		if (at == t0)
			ck_assert_uint_ge(sc_test_heap_used(a), held);
		atomic_store(&a->shm->hdr->reap_due_ns, 0);
		a->l2_last_reap_ns = 0;
		ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	} else if (_i == 4) {
		/* the reap frees its slot, and the shared count of cleaned slots was scribbled so that,
		 * counting that, it reads what this handle last swept at: a reap that freed a slot
		 * sweeps all the same */
		atomic_store(&a->shm->hdr->reap_due_ns, UINT64_MAX);
		a->l2_swept_cleaned = 1000;
		atomic_store(&a->shm->hdr->slots_cleaned, 999);
		a->l2_last_reap_ns = 0;
		ck_assert_int_eq(l2_reap(a, 0), 1);
		ck_assert_uint_eq(atomic_load(&a->shm->hdr->slots_cleaned), 1000);
	} else if (_i == 1) {
		/* its slot cleaned by someone who does not sweep (the shm layer, as a new attach's claim
		 * of a dead slot does): the next periodic reap, which frees no slot, still sweeps */
		ck_assert_int_eq(shm_readers_reap(a->shm), 1);
		ck_assert_uint_ge(sc_test_heap_used(a), 1 << 20);
		atomic_store(&a->shm->hdr->reap_due_ns, 0); /* the period and our own gap have passed */
		a->l2_last_reap_ns = 0;
		struct sc_l2_stats ls;
		ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	} else {
		ck_assert_int_eq(sc_l2_clear(a), 0);
	}
	ck_assert_uint_eq(sc_test_heap_used(a), 0);
	close(fds[0]);
	close(fds[1]);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A holder that dies after a forced reap's pass over the slots and before its sweep judges the
 * reservations: a filler holding a reservation (_i 0), a reader holding a lease (_i 1). The sweep
 * frees the filler's reservation, and the same reap passes over the slots again and frees the
 * holder's slot (its lease records with it). The sweep lock was left by a killed sweeper, so the
 * reap's sweep takes it over; the hook at the takeover ("mutex.lock.acquired", between the pass
 * and the sweep) kills the holder. */
static pid_t dying_holder;
static void kill_holder_hook(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "mutex.lock.acquired") || !dying_holder)
		return;
	ck_assert_int_eq(kill(dying_holder, SIGKILL), 0);
	sc_test_wait_killed(dying_holder);
	dying_holder = 0;
}

static uint32_t slots_in_use(struct sc_arena *a)
{
	uint32_t n = shm_readers_count(a->shm), used = 0;
	for (uint32_t i = 0; i < n; i++)
		used += atomic_load(&shm_reader_slot(a->shm, i)->state) != SHM_SLOT_FREE;
	return used;
}

START_TEST(a_holder_dying_before_the_sweep_is_gone_after_the_same_reap)
{
	const char *name;
	struct sc_stage *st;
	struct sc_arena *a = arena_with_keys("l2f", _i, 256 << 10, &name, &st);
	int fds[2];
	struct sc_stage *cs;
	pid_t pid = fork_holder(name, fds, &cs);
	if (pid == 0) {
		struct sc_l2_resv r;
		struct sc_lease l;
		int32_t t[8];
		key_tokens(t, 0);
		if (_i ? sc_l2_get(cs, "mp", t, 8, NULL, &l) : sc_l2_reserve(cs, 1 << 20, &r))
			_exit(40);
		hold_until_killed(fds[1]);
	}
	char c;
	ck_assert_int_eq(read(fds[0], &c, 1), 1); /* it holds its reservation or its lease */
	struct sc_l2_stats ls;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	ck_assert_uint_eq(ls.leases, (uint64_t)_i);
	struct shm_index *ix = l2_ix(a);
	sc_test_wait_killed(sc_test_locker(name, &ix->hdr->sweep_mu, 'k', 0));
	ck_assert_int_eq(shm_readers_reap(a->shm), 1); /* the sweeper's slot; the lock still names it */
	atomic_store(&a->shm->hdr->reap_due_ns, UINT64_MAX);
	uint32_t used = slots_in_use(a);
	dying_holder = pid;
	sc_sched_set(kill_holder_hook, NULL);
	int rc = l2_reap(a, 1);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(dying_holder, 0); /* the hook ran */
	ck_assert_int_eq(rc, 1);
	ck_assert_uint_eq(slots_in_use(a), used - 1);
	ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	ck_assert_uint_eq(ls.leases, 0);
	ck_assert_int_eq(sc_l2_clear(a), _i);
	assert_all_released(a);
	close(fds[0]);
	close(fds[1]);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- kill -9 at random instructions: writers (admit, publish, remove) and readers holding leases ---- */

static void random_worker(const char *name, int reader)
{
	struct sc_arena *a;
	struct sc_stage *st;
	open_child(name, &a, &st);
	uint64_t seed = (uint64_t)getpid() * 7919u;
	uint32_t v = (uint32_t)getpid() * 1000u;
	struct sc_lease keep[40];
	int nk = 0;
	for (;;) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t k = (uint32_t)(seed >> 33) % NKEYS;
		int32_t t[8];
		key_tokens(t, k);
		if (!reader) {
			uint32_t r = (uint32_t)(seed >> 20) & 7;
			size_t n = 64 + (seed >> 40) % 90000;
			if (r == 0) {
				struct sc_key key;
				sc_l2_key(st, "mp", t, 8, &key);
				(void)sc_l2_remove(st, key);
			} else if (r == 1) {
				struct sc_l2_resv rv;
				if (sc_l2_reserve(st, n, &rv) == 0) {
					payload(rv.ptr, n, k, v++);
					if (sc_l2_publish(st, "mp", t, 8, sc_digest(rv.ptr, n), &rv, SC_PAYLOAD_FULL_STATE, n, 0,
							  NULL, SC_ORIGIN_FROM_L3, NULL))
						sc_l2_reserve_release(&rv);
				}
			} else {
				int rc = admit_kv(st, k, v++, n);
				if (rc && rc != -ENOSPC)
					_exit(20);
			}
			continue;
		}
		struct sc_lease l;
		int rc = sc_l2_get(st, "mp", t, 8, NULL, &l);
		if (rc == -ENOENT)
			continue;
		if (rc)
			_exit(21);
		uint32_t hk;
		memcpy(&hk, l.sec[0], 4);
		if (hk != k || !sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), l.digest))
			_exit(22);
		if (nk == 40) {
			for (int i = 0; i < 40; i++)
				sc_lease_release(&keep[i]);
			nk = 0;
		}
		keep[nk++] = l; /* held when the kill comes: must be reclaimed */
	}
}

START_TEST(random_kills_leave_the_arena_consistent)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .index_entries = 1024 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("l2kill", &o, &name);
	ck_assert_int_eq(sc_l2_shrink_to(a, 3 << 20), 0);
	pid_t p[4];
	for (int i = 0; i < 4; i++)
		if ((p[i] = fork()) == 0)
			random_worker(name, i >= 2);
	double end = now_s() + 3.0;
	uint32_t x = (uint32_t)getpid();
	int kills = 0;
	while (now_s() < end) {
		x = x * 1103515245u + 12345u;
		usleep(1000 + (x >> 8) % 15000);
		int i = (int)((x >> 4) % 4), status;
		kill(p[i], SIGKILL);
		ck_assert_int_eq(waitpid(p[i], &status, 0), p[i]);
		ck_assert_msg(WIFSIGNALED(status), "worker %d exited with %d", i, WEXITSTATUS(status));
		kills++;
		if ((p[i] = fork()) == 0)
			random_worker(name, i >= 2);
	}
	for (int i = 0; i < 4; i++) {
		int status;
		kill(p[i], SIGKILL);
		ck_assert_int_eq(waitpid(p[i], &status, 0), p[i]);
		ck_assert_msg(WIFSIGNALED(status), "worker %d exited with %d", i, WEXITSTATUS(status));
	}
	ck_assert_int_gt(kills, 20);
	/* the next writer repairs every shard a victim held; every live entry verifies */
	ck_assert_int_ge(sc_l2_invalidate_digest(a, (struct sc_digest){ 1, 2 }), 0);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "model", "state", &st), 0);
	int live = verify_keys(st, NKEYS);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_int_eq((int)s.entries, live);
	/* the dead held leases and reservations: all released, nothing leaked */
	ck_assert_int_ge(sc_l2_clear(a), 0);
	ck_assert_int_ge(sc_l2_clear(a), 0);
	assert_all_released(a);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *l2_mp_suite(void)
{
	Suite *s = suite_create("l2_mp");
	TCase *tc = tcase_create("mp");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, readers_verify_every_hit_while_a_writer_churns);
	tcase_add_test(tc, killed_readers_leases_are_reclaimed);
	tcase_add_test(tc, threads_with_their_own_handles);
	tcase_add_loop_test(tc, writer_killed_at_each_fault_point, 0, (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, repairer_killed_during_repair);
	tcase_add_loop_test(tc, killed_filler_reservation_is_freed, 0, 5);
	tcase_add_loop_test(tc, a_holder_dying_before_the_sweep_is_gone_after_the_same_reap, 0, 2);
	tcase_add_test(tc, random_kills_leave_the_arena_consistent);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(l2_mp_suite)
