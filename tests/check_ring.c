/* tests/check_ring.c — commit rings (shm/ring.c, lib/ring.c): records round-trip and wrap,
 * claim/close/reclaim, the exclusive consumer, several producer processes verified by a
 * consumer, SIGKILLed producers, backpressure, and corrupted or hostile ring memory. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/fault.h"
#include "../shm/ring.h"

static struct sc_arena *arena;
static const char *arena_name;

static void mk_arena(uint32_t count, uint32_t bytes)
{
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .ring_count = count, .ring_bytes = bytes };
	arena = sc_test_arena_opts("ring", &o, &arena_name);
}

static void rm_arena(void)
{
	sc_ring_consumer_close(arena);
	sc_test_arena_destroy(arena, arena_name);
}

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int32_t tok(uint64_t req, uint64_t i)
{
	return (int32_t)(req * 2654435761u + i * 40503u);
}

/* ---- a verifying consumer: per ring, seq contiguous within a generation; per request, the
 * running total and every token ---- */
#define MAX_REQ 4096
struct verify {
	uint64_t last_seq[64];
	uint32_t last_gen[64];
	uint64_t req_total[MAX_REQ];
	uint8_t req_done[MAX_REQ];
	uint64_t records, tokens, terminals;
	int stop_after_one;
};

static int verify_cb(const struct sc_commit *c, void *ctx)
{
	struct verify *v = ctx;
	ck_assert_uint_lt(c->ring, 64);
	if (v->last_gen[c->ring] != c->gen) {
		ck_assert_uint_eq(c->seq, 1); /* a new claim starts at 1 */
		v->last_gen[c->ring] = c->gen;
	} else {
		ck_assert_uint_eq(c->seq, v->last_seq[c->ring] + 1);
	}
	v->last_seq[c->ring] = c->seq;
	ck_assert_uint_lt(c->request_id, MAX_REQ);
	ck_assert_uint_eq(c->session_id, c->request_id ^ 0x5555);
	ck_assert(!v->req_done[c->request_id]);
	uint64_t base = v->req_total[c->request_id];
	ck_assert_uint_eq(c->generated_token_count, base + c->token_count);
	for (uint32_t j = 0; j < c->token_count; j++)
		ck_assert_int_eq(c->tokens[j], tok(c->request_id, base + j));
	v->req_total[c->request_id] = c->generated_token_count;
	if (c->flags & SC_COMMIT_MASK) {
		v->req_done[c->request_id] = 1;
		v->terminals++;
	}
	v->records++;
	v->tokens += c->token_count;
	return v->stop_after_one;
}

static int drain_all(struct verify *v)
{
	int rc, total = 0;
	while ((rc = sc_ring_poll(arena, verify_cb, v, 256)) > 0)
		total += rc;
	ck_assert_msg(rc == 0, "poll: %s", sc_strerror(rc));
	return total;
}

static int submit(struct sc_ring *r, uint64_t req, uint64_t base, uint32_t n, uint32_t flags)
{
	int32_t t[600];
	for (uint32_t j = 0; j < n; j++)
		t[j] = tok(req, base + j);
	struct sc_commit c = { .request_id = req, .session_id = req ^ 0x5555, .generated_token_count = base + n,
			       .flags = flags, .token_count = n, .tokens = t };
	return sc_ring_try_submit(r, &c);
}

START_TEST(records_round_trip_in_order)
{
	mk_arena(4, 0);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	ck_assert_int_eq(submit(r, 3, 0, 1, 0), 0);
	ck_assert_int_eq(submit(r, 3, 1, 8, 0), 0);
	ck_assert_int_eq(submit(r, 3, 9, 0, SC_COMMIT_FINISHED), 0);
	struct verify v = { 0 };
	ck_assert_int_eq(drain_all(&v), 3);
	ck_assert_uint_eq(v.req_total[3], 9);
	ck_assert_uint_eq(v.terminals, 1);
	ck_assert_uint_eq(v.last_seq[sc_ring_index(r)], 3);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), 0);
	ck_assert_int_eq(sc_ring_close(r), 0);
	ck_assert_int_eq(sc_ring_close(NULL), 0);
	rm_arena();
}
END_TEST

START_TEST(variable_records_wrap_around_the_ring)
{
	mk_arena(2, 4096);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	uint32_t max = sc_ring_max_tokens(r);
	ck_assert_uint_eq(max, (2048 - 48) / 4);
	struct verify v = { 0 };
	uint64_t base = 0;
	unsigned seed = 1;
	for (int i = 0; i < 3000; i++) {
		seed = seed * 1103515245u + 12345u;
		uint32_t n = (seed >> 8) % (max + 1);
		int rc;
		while ((rc = submit(r, 5, base, n, 0)) == -EAGAIN)
			drain_all(&v);
		ck_assert_int_eq(rc, 0);
		base += n;
		if (i % 7 == 0)
			drain_all(&v);
	}
	drain_all(&v);
	ck_assert_uint_eq(v.req_total[5], base);
	ck_assert_uint_eq(v.records, 3000);
	ck_assert_int_eq(submit(r, 5, base, max + 1, 0), -E2BIG);
	ck_assert_int_eq(submit(r, 5, base, 1, 0x10), -EINVAL);
	struct sc_commit bad = { .token_count = 2, .tokens = NULL };
	ck_assert_int_eq(sc_ring_try_submit(r, &bad), -EINVAL);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

START_TEST(bulk_submits_are_all_or_nothing)
{
	mk_arena(2, 4096);
	struct sc_ring *r;
	sc_ring_open(arena, &r);
	static int32_t t[64][8];
	struct sc_commit c[SC_RING_BULK_MAX];
	struct verify v = { 0 };
	uint64_t base = 0;
	for (int round = 0; round < 300; round++) {
		unsigned n = 1 + (unsigned)round % 13; /* 128-byte records: pads land inside bulks */
		for (unsigned i = 0; i < n; i++) {
			for (int j = 0; j < 8; j++)
				t[i][j] = tok(6, base + i * 8 + (unsigned)j);
			c[i] = (struct sc_commit){ .request_id = 6, .session_id = 6 ^ 0x5555,
						   .generated_token_count = base + (i + 1) * 8, .token_count = 8,
						   .tokens = t[i] };
		}
		int rc = sc_ring_try_submit_bulk(r, c, n);
		if (rc == -EAGAIN) {
			drain_all(&v);
			rc = sc_ring_try_submit_bulk(r, c, n);
		}
		ck_assert_int_eq(rc, 0);
		base += n * 8;
	}
	drain_all(&v);
	ck_assert_uint_eq(v.req_total[6], base);
	/* the ring holds 32 such records: 33 can never fit; a full ring takes nothing */
	for (unsigned i = 0; i < SC_RING_BULK_MAX; i++)
		c[i] = (struct sc_commit){ .request_id = 6, .token_count = 8, .tokens = t[0] };
	ck_assert_int_eq(sc_ring_try_submit_bulk(r, c, 33), -E2BIG);
	ck_assert_int_eq(sc_ring_try_submit_bulk(r, c, 0), -EINVAL);
	ck_assert_int_eq(sc_ring_try_submit_bulk(r, c, SC_RING_BULK_MAX + 1), -EINVAL);
	ck_assert_int_eq(sc_ring_try_submit_bulk(r, c, 20), 0);
	struct sc_ring_stat st[2];
	sc_ring_stats(arena, st, 2);
	uint64_t before = st[sc_ring_index(r)].records, full = st[sc_ring_index(r)].ring_full;
	ck_assert_int_eq(sc_ring_try_submit_bulk(r, c, 20), -EAGAIN);
	sc_ring_stats(arena, st, 2);
	ck_assert_uint_eq(st[sc_ring_index(r)].records, before);
	ck_assert_uint_eq(st[sc_ring_index(r)].ring_full, full + 1);
	c[3].flags = 0x8;
	ck_assert_int_eq(sc_ring_try_submit_bulk(r, c, 5), -EINVAL);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

START_TEST(callback_can_stop_the_poll)
{
	mk_arena(2, 0);
	struct sc_ring *r;
	sc_ring_open(arena, &r);
	for (int i = 0; i < 5; i++)
		submit(r, 1, (uint64_t)i, 1, 0);
	struct verify v = { .stop_after_one = 1 };
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 100), 1);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 100), 1);
	v.stop_after_one = 0;
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 2), 2);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 100), 1);
	ck_assert_uint_eq(v.req_total[1], 5);
	ck_assert_int_eq(sc_ring_poll(NULL, verify_cb, &v, 1), -EINVAL);
	ck_assert_int_eq(sc_ring_poll(arena, NULL, &v, 1), -EINVAL);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

START_TEST(rings_run_out_and_are_reclaimed_after_delivery)
{
	mk_arena(3, 4096);
	struct sc_ring *r[4];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sc_ring_open(arena, &r[i]), 0);
	ck_assert_int_eq(sc_ring_open(arena, &r[3]), -ENOSPC);
	/* closed and empty: reusable at once */
	sc_ring_close(r[0]);
	ck_assert_int_eq(sc_ring_open(arena, &r[0]), 0);
	/* closed with undelivered records: not until the consumer has them */
	ck_assert_int_eq(submit(r[1], 9, 0, 4, SC_COMMIT_FINISHED), 0);
	uint32_t idx = sc_ring_index(r[1]);
	sc_ring_close(r[1]);
	ck_assert_int_eq(sc_ring_open(arena, &r[3]), -ENOSPC);
	struct sc_ring_stat st[3];
	ck_assert_int_eq(sc_ring_stats(arena, st, 3), 3);
	ck_assert_uint_eq(st[idx].state, SC_RING_CLOSED);
	ck_assert_uint_eq(st[idx].depth_records, 1);
	ck_assert_uint_eq(st[idx].depth_bytes, 64);
	struct verify v = { 0 };
	ck_assert_int_eq(drain_all(&v), 1);
	ck_assert_int_eq(sc_ring_stats(arena, st, 3), 3);
	ck_assert_uint_eq(st[idx].state, SC_RING_FREE);
	ck_assert_uint_eq(st[idx].depth_bytes, 0);
	ck_assert_uint_eq(st[idx].records, 1);
	ck_assert_int_eq(sc_ring_open(arena, &r[1]), 0);
	ck_assert_uint_eq(sc_ring_index(r[1]), idx);
	/* the new owner's records start again at seq 1 under a new generation */
	ck_assert_int_eq(submit(r[1], 10, 0, 2, 0), 0);
	ck_assert_int_eq(drain_all(&v), 1);
	ck_assert_uint_eq(v.last_seq[idx], 1);
	for (int i = 0; i < 3; i++)
		sc_ring_close(r[i]);
	rm_arena();
}
END_TEST

START_TEST(stats_describe_each_ring)
{
	mk_arena(4, 4096);
	struct sc_ring *r;
	sc_ring_open(arena, &r);
	uint32_t i = sc_ring_index(r);
	while (submit(r, 2, 0, 8, 0) == 0)
		;
	ck_assert_int_eq(submit(r, 2, 0, 8, 0), -EAGAIN);
	struct sc_ring_stat st[4];
	ck_assert_int_eq(sc_ring_stats(arena, st, 4), 4);
	ck_assert_uint_eq(st[i].state, SC_RING_LIVE);
	ck_assert_uint_eq(st[i].producer_pid, (uint32_t)getpid());
	ck_assert_int_eq(st[i].producer_alive, 1);
	ck_assert_uint_eq(st[i].records, 4096 / 128);
	ck_assert_uint_eq(st[i].depth_records, 4096 / 128);
	ck_assert_uint_eq(st[i].depth_bytes, 4096);
	ck_assert_uint_eq(st[i].ring_full, 2);
	ck_assert_uint_eq(st[i].ring_bytes, 4096);
	ck_assert_int_eq(st[i].corrupt, 0);
	ck_assert_uint_eq(st[(i + 1) % 4].state, SC_RING_FREE);
	ck_assert_int_eq(sc_ring_stats(arena, st, 1), 4); /* a short array is fine */
	ck_assert_int_eq(sc_ring_stats(arena, NULL, 4), -EINVAL);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

START_TEST(a_second_consumer_gets_ebusy_until_the_first_leaves_or_dies)
{
	mk_arena(2, 0);
	struct verify v = { 0 };
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), 0); /* takes the role */
	struct sc_arena *other;
	ck_assert_int_eq(sc_arena_open(arena_name, &other), 0);
	ck_assert_int_eq(sc_ring_poll(other, verify_cb, &v, 10), -EBUSY);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *c;
		if (sc_arena_open(arena_name, &c))
			_exit(10);
		_exit(sc_ring_poll(c, verify_cb, &v, 10) == -EBUSY ? 0 : 11);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	sc_ring_consumer_close(arena);
	ck_assert_int_eq(sc_ring_poll(other, verify_cb, &v, 10), 0);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), -EBUSY);
	sc_ring_consumer_close(other);
	/* a consumer that dies holding the role: the next one takes over, and resumes */
	struct sc_ring *r;
	sc_ring_open(arena, &r);
	submit(r, 4, 0, 1, 0);
	submit(r, 4, 1, 1, 0);
	pid = fork();
	if (pid == 0) {
		struct sc_arena *c;
		if (sc_arena_open(arena_name, &c))
			_exit(10);
		struct verify cv = { .stop_after_one = 1 };
		_exit(sc_ring_poll(c, verify_cb, &cv, 10) == 1 ? 0 : 11); /* exits still holding it */
	}
	waitpid(pid, &status, 0);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	struct verify v2 = { 0 };
	struct sc_ring_stat st[2];
	sc_ring_stats(arena, st, 2);
	v2.req_total[4] = 1; /* the dead consumer took the first record */
	v2.last_gen[sc_ring_index(r)] = st[sc_ring_index(r)].gen;
	v2.last_seq[sc_ring_index(r)] = 1;
	ck_assert_int_eq(sc_ring_poll(other, verify_cb, &v2, 10), 1);
	ck_assert_uint_eq(v2.req_total[4], 2);
	sc_ring_close(r);
	sc_ring_consumer_close(other);
	sc_arena_close(other);
	rm_arena();
}
END_TEST

/* ---- multi-process ---- */

/* A producer process: @nreq requests, 3 in flight at once, through batchers on its own ring. */
static void producer(const char *name, int k, int nreq, int tokens_per_req)
{
	struct sc_arena *a;
	struct sc_ring *r;
	if (sc_arena_open(name, &a) || sc_ring_open(a, &r))
		_exit(20);
	struct sc_batcher b[3];
	memset(b, 0, sizeof(b));
	int produced[3] = { 0 }, live = 0, started = 0;
	uint64_t t = 0;
	struct sc_batcher_opts o = { .interval_ns = 5000, .capacity = 16 };
	while (started < nreq || live) {
		for (int s = 0; s < 3; s++) {
			if (!b[s].ring && started < nreq) {
				uint64_t req = (uint64_t)k * 1000 + (uint64_t)started++;
				sc_batcher_init_opts(&b[s], r, req, req ^ 0x5555, &o);
				produced[s] = 0;
				live++;
			}
			if (!b[s].ring)
				continue;
			uint64_t req = b[s].request_id;
			if (produced[s] < tokens_per_req) {
				int rc = sc_batcher_commit(&b[s], tok(req, (uint64_t)produced[s]), t += 1000);
				if (rc == 0 || (uint64_t)produced[s] < sc_batcher_count(&b[s]))
					produced[s]++; /* accepted (maybe still pending on a full ring) */
				else if (rc != -EAGAIN)
					_exit(21);
			} else if (sc_batcher_finish(&b[s], (req & 1) ? SC_COMMIT_ABORTED : SC_COMMIT_FINISHED) == 0) {
				b[s].ring = NULL;
				live--;
			}
		}
	}
	sc_ring_close(r);
	sc_arena_close(a);
	_exit(0);
}

START_TEST(many_producer_processes_one_verifying_consumer)
{
	enum { P = 4, NREQ = 40, TOK = 300 };
	mk_arena(8, 8192); /* small rings: wrap-around and backpressure all the time */
	pid_t pids[P];
	for (int k = 0; k < P; k++) {
		pids[k] = fork();
		ck_assert_int_ge(pids[k], 0);
		if (pids[k] == 0)
			producer(arena_name, k + 1, NREQ, TOK);
	}
	static struct verify v;
	memset(&v, 0, sizeof(v));
	int running = P;
	while (running) {
		int got = sc_ring_poll(arena, verify_cb, &v, 512);
		ck_assert_int_ge(got, 0);
		int status;
		pid_t w;
		while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
			ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "producer failed: %d", status);
			running--;
		}
		if (!got)
			sched_yield();
	}
	drain_all(&v);
	ck_assert_uint_eq(v.terminals, P * NREQ);
	ck_assert_uint_eq(v.tokens, (uint64_t)P * NREQ * TOK);
	for (int k = 1; k <= P; k++)
		for (int q = 0; q < NREQ; q++) {
			ck_assert_uint_eq(v.req_total[k * 1000 + q - 0], TOK);
			ck_assert(v.req_done[k * 1000 + q]);
		}
	ck_assert_uint_lt(v.records, (uint64_t)P * NREQ * TOK); /* batching happened */
	/* every producer closed its ring: all reclaimed once drained */
	struct sc_ring_stat st[8];
	ck_assert_int_eq(sc_ring_stats(arena, st, 8), 8);
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(st[i].state, SC_RING_FREE);
	rm_arena();
}
END_TEST

/* Producer that commits single-token records for request @req as fast as it can and publishes
 * how many were committed (sc_ring_try_submit returned 0) in *committed. */
static void raw_producer(const char *name, uint64_t req, _Atomic uint64_t *committed, _Atomic int *ring_idx)
{
	struct sc_arena *a;
	struct sc_ring *r;
	if (sc_arena_open(name, &a) || sc_ring_open(a, &r))
		_exit(20);
	atomic_store(ring_idx, (int)sc_ring_index(r));
	for (uint64_t i = 0;; ) {
		int rc = submit(r, req, i, 1, 0);
		if (rc == 0)
			atomic_store(committed, ++i);
		else if (rc != -EAGAIN)
			_exit(21);
	}
}

START_TEST(a_killed_producer_loses_nothing_it_committed)
{
	mk_arena(4, 4096);
	_Atomic uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(shared, MAP_FAILED);
	_Atomic int *idx = (_Atomic int *)(shared + 8);
	atomic_store(idx, -1);
	pid_t pid = fork();
	if (pid == 0)
		raw_producer(arena_name, 77, shared, idx);
	static struct verify v;
	memset(&v, 0, sizeof(v));
	/* consume concurrently until a good amount went through, then kill -9 mid-stream */
	while (v.records < 20000)
		ck_assert_int_ge(sc_ring_poll(arena, verify_cb, &v, 64), 0);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	uint64_t committed = atomic_load(shared);
	drain_all(&v);
	/* all it committed, in order; at most the one whose counter it had no time to bump */
	ck_assert_uint_ge(v.records, committed);
	ck_assert_uint_le(v.records, committed + 1);
	ck_assert_uint_eq(v.req_total[77], v.records);
	/* and the ring is reclaimed: wait for its state to be FREE (the dead owner is noticed within
	 * the reap interval; up to 30 s on a loaded machine) */
	int ri = atomic_load(idx);
	struct sc_ring_stat st[4];
	for (double t0 = sc_test_now_s(); sc_test_now_s() - t0 < 30.0; nap_ms(10)) {
		drain_all(&v);
		ck_assert_int_ge(sc_ring_stats(arena, st, 4), 0);
		if (st[ri].state == SC_RING_FREE)
			break;
	}
	ck_assert_uint_eq(st[ri].state, SC_RING_FREE);
	munmap(shared, 4096);
	rm_arena();
}
END_TEST

START_TEST(a_producer_killed_on_a_full_ring_with_no_consumer_loses_nothing)
{
	mk_arena(2, 4096);
	_Atomic uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	_Atomic int *idx = (_Atomic int *)(shared + 8);
	atomic_store(idx, -1);
	pid_t pid = fork();
	if (pid == 0)
		raw_producer(arena_name, 78, shared, idx);
	/* 64 records of 64 bytes fill the 4 KiB ring: wait until it has committed them and been
	 * refused the 65th (its ring's ring_full count; up to 30 s), so it dies retrying on a full ring */
	struct sc_ring_stat st[2];
	double t0 = sc_test_now_s();
	for (;;) {
		int ri = atomic_load(idx);
		ck_assert_int_eq(sc_ring_stats(arena, st, 2), 2);
		if (atomic_load(shared) >= 64 && ri >= 0 && st[ri].ring_full > 0)
			break;
		ck_assert_msg(sc_test_now_s() - t0 < 30.0,
			      "the producer committed %llu records and was refused %llu times in 30 s (want 64, > 0)",
			      (unsigned long long)atomic_load(shared), ri >= 0 ? (unsigned long long)st[ri].ring_full : 0ull);
		nap_ms(1);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_uint_eq(atomic_load(shared), 64);
	/* the dead producer's ring is not handed out while it holds records */
	struct sc_ring *r1, *r2;
	ck_assert_int_eq(sc_ring_open(arena, &r1), 0);
	ck_assert_int_eq(sc_ring_open(arena, &r2), -ENOSPC);
	static struct verify v;
	memset(&v, 0, sizeof(v));
	ck_assert_int_eq(drain_all(&v), 64);
	ck_assert_uint_eq(v.req_total[78], 64);
	/* drained: the claimer may now take the dead producer's ring directly */
	ck_assert_int_eq(sc_ring_open(arena, &r2), 0);
	ck_assert_int_eq(sc_ring_index(r2), atomic_load(idx));
	sc_ring_close(r1);
	sc_ring_close(r2);
	munmap(shared, 4096);
	rm_arena();
}
END_TEST

START_TEST(a_producer_dying_between_write_and_publish_loses_only_the_unpublished_record)
{
	mk_arena(2, 4096);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_ring *r;
		if (sc_arena_open(arena_name, &a) || sc_ring_open(a, &r))
			_exit(20);
		/* the 40th record is written, then the process dies before its tail is published */
		if (shm_fault_arm("ring.publish@40"))
			_exit(22);
		for (uint64_t i = 0; i < 100; i++)
			while (submit(r, 9, i * 2, 2, 0) == -EAGAIN)
				;
		_exit(23); /* not reached */
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	static struct verify v;
	memset(&v, 0, sizeof(v));
	ck_assert_int_eq(drain_all(&v), 39); /* the 40th was never committed: nothing torn */
	ck_assert_uint_eq(v.req_total[9], 78);
	/* drained and dead: reclaimed within the reap interval */
	struct sc_ring_stat st[2];
	for (int i = 0; i < 200; i++) {
		drain_all(&v);
		sc_ring_stats(arena, st, 2);
		if (st[0].state == SC_RING_FREE && st[1].state == SC_RING_FREE)
			break;
		nap_ms(10);
	}
	ck_assert_uint_eq(st[0].state, SC_RING_FREE);
	ck_assert_uint_eq(st[1].state, SC_RING_FREE);
	rm_arena();
}
END_TEST

START_TEST(a_full_ring_applies_backpressure_without_loss)
{
	enum { N = 30000 };
	mk_arena(2, 4096);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_ring *r;
		if (sc_arena_open(arena_name, &a) || sc_ring_open(a, &r))
			_exit(20);
		for (uint64_t i = 0; i < N;) {
			int rc = submit(r, 12, i * 3, 3, i + 1 == N ? SC_COMMIT_FINISHED : 0);
			if (rc == 0)
				i++;
			else if (rc != -EAGAIN)
				_exit(21);
		}
		sc_ring_close(r);
		_exit(0);
	}
	static struct verify v;
	memset(&v, 0, sizeof(v));
	int polls = 0;
	while (!v.req_done[12]) {
		int got = sc_ring_poll(arena, verify_cb, &v, 16);
		ck_assert_int_ge(got, 0);
		if (++polls % 64 == 0)
			nap_ms(1); /* a slow consumer */
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_uint_eq(v.records, N);
	ck_assert_uint_eq(v.req_total[12], 3 * N);
	struct sc_ring_stat st[2];
	sc_ring_stats(arena, st, 2);
	ck_assert_uint_gt(st[0].ring_full + st[1].ring_full, 0);
	rm_arena();
}
END_TEST

/* ---- hostile memory ---- */

/* Garbage that happens to validate is delivered: accept anything. */
static int any_cb(const struct sc_commit *c, void *ctx)
{
	(void)ctx;
	volatile int32_t sink = 0;
	for (uint32_t j = 0; j < c->token_count; j++)
		sink += c->tokens[j]; /* touch every token: must stay inside the ring */
	return 0;
}

static struct shm_ring_ctl *ctl_of(uint32_t i)
{
	uint64_t size;
	uint8_t *base = shm_region(arena->shm, SHM_REGION_RINGS, &size);
	return (struct shm_ring_ctl *)(base + SHM_RING_DIR_BYTES + i * SHM_RING_CTL_BYTES);
}

static uint8_t *data_of(uint32_t i)
{
	uint64_t size;
	uint8_t *base = shm_region(arena->shm, SHM_REGION_RINGS, &size);
	return base + shm_ring_data_off(arena->shm->hdr->ring_count) + (uint64_t)i * arena->shm->hdr->ring_bytes;
}

START_TEST(corrupted_indices_are_ebadmsg_and_other_rings_still_flow)
{
	mk_arena(2, 4096);
	struct sc_ring *r0, *r1;
	sc_ring_open(arena, &r0);
	sc_ring_open(arena, &r1);
	submit(r1, 1, 0, 2, 0);
	struct shm_ring_ctl *c = ctl_of(sc_ring_index(r0));
	/* tail far beyond head */
	atomic_store(&c->tail, 1ull << 40);
	struct verify v = { 0 };
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), -EBADMSG);
	ck_assert_uint_eq(v.records, 1); /* the healthy ring was served */
	struct sc_ring_stat st[2];
	sc_ring_stats(arena, st, 2);
	ck_assert_int_eq(st[sc_ring_index(r0)].corrupt, 1);
	ck_assert_int_eq(st[sc_ring_index(r1)].corrupt, 0);
	/* head ahead of tail: the producer refuses to trust it once it needs it */
	atomic_store(&c->tail, 0);
	atomic_store(&c->head, 1ull << 40);
	int rc = 0;
	for (int i = 0; i < 200 && rc == 0; i++)
		rc = submit(r0, 2, 0, 8, 0);
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), -EBADMSG);
	/* a misaligned tail would put a record header across the end of the ring */
	atomic_store(&c->head, 0);
	atomic_store(&c->tail, 4096 - 8);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), -EBADMSG);
	sc_ring_stats(arena, st, 2);
	ck_assert_int_eq(st[sc_ring_index(r0)].corrupt, 1);
	atomic_store(&c->tail, 0);
	/* a garbage owner word is never handed out */
	atomic_store(&c->head, atomic_load(&c->tail));
	sc_ring_close(r0);
	atomic_store(&c->owner, ~0ull);
	ck_assert_int_eq(sc_ring_open(arena, &r0), -ENOSPC);
	sc_ring_close(r1);
	rm_arena();
}
END_TEST

START_TEST(hostile_records_are_ebadmsg_never_out_of_bounds)
{
	mk_arena(1, 4096);
	struct sc_ring *r;
	sc_ring_open(arena, &r);
	uint32_t i = sc_ring_index(r);
	struct shm_ring_ctl *c = ctl_of(i);
	struct shm_ring_rec *rec = (struct shm_ring_rec *)data_of(i);
	struct verify v = { 0 };
	struct { uint32_t len, flags, ntokens; } cases[] = {
		{ 0, 0, 0 },                 /* zero length: would loop forever */
		{ 65, 0, 0 },                /* not a multiple of 64 */
		{ 8192, 0, 0 },              /* longer than the ring */
		{ 128, 0, 0 },               /* longer than what was published (64) */
		{ 64, 0, 1000000 },          /* more tokens than the record holds */
		{ 64, 0x40, 0 },             /* unknown flag */
		{ 64, SHM_REC_PAD, 0 },      /* a pad that does not reach the end */
	};
	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		ck_assert_int_eq(submit(r, 1, 0, 1, 0), 0);
		uint64_t head = atomic_load(&c->head);
		rec = (struct shm_ring_rec *)(data_of(i) + (head & 4095));
		atomic_store(&rec->len, cases[k].len);
		atomic_store(&rec->flags, cases[k].flags);
		atomic_store(&rec->ntokens, cases[k].ntokens);
		ck_assert_msg(sc_ring_poll(arena, verify_cb, &v, 10) == -EBADMSG, "case %u", k);
		ck_assert_uint_eq(atomic_load(&c->head), head); /* nothing consumed past it */
		/* repair: skip the record as the consumer would have */
		atomic_store(&rec->len, 64);
		atomic_store(&rec->flags, 0);
		atomic_store(&rec->ntokens, 1);
		atomic_store(&c->head, atomic_load(&c->tail));
	}
	/* a record longer than its tokens need, reaching over the next one: -EBADMSG, the next record
	 * is not skipped unseen */
	ck_assert_int_eq(submit(r, 1, 0, 1, 0), 0);
	ck_assert_int_eq(submit(r, 2, 0, 1, 0), 0);
	uint64_t at = atomic_load(&c->head);
	ck_assert_uint_eq(atomic_load(&c->tail) - at, 128);
	rec = (struct shm_ring_rec *)(data_of(i) + (at & 4095));
	atomic_store(&rec->len, 128);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 10), -EBADMSG);
	ck_assert_uint_eq(atomic_load(&c->head), at);
	atomic_store(&c->head, atomic_load(&c->tail));
	/* random garbage below a random tail: never a crash */
	unsigned seed = 7;
	for (int k = 0; k < 2000; k++) {
		uint8_t *d = data_of(i);
		for (int j = 0; j < 4096; j += 4) {
			seed = seed * 1103515245u + 12345u;
			memcpy(d + j, &seed, 4);
		}
		seed = seed * 1103515245u + 12345u;
		uint64_t head = atomic_load(&c->head);
		atomic_store(&c->tail, head + ((seed >> 4) % 5000));
		(void)sc_ring_poll(arena, any_cb, NULL, 4);
		atomic_store(&c->head, atomic_load(&c->tail)); /* reset for the next round */
	}
	sc_ring_close(r);
	rm_arena();
}
END_TEST


/* An arena of geometry @o is refused at creation (-EINVAL), and nothing is handed back. */
static void refused_at_creation(const struct sc_arena_opts *o, const char *tag)
{
	struct sc_arena *a = NULL;
	ck_assert_int_eq(sc_arena_create(sc_test_name(tag), o, &a), -EINVAL);
	ck_assert_ptr_null(a);
}

struct one_commit {
	int n;
	uint32_t ring, ntok;
	uint64_t req;
	int32_t tok[4];
};

static int one_cb(const struct sc_commit *c, void *ctx)
{
	struct one_commit *o = ctx;
	o->n++;
	o->ring = c->ring;
	o->req = c->request_id;
	o->ntok = c->token_count;
	memcpy(o->tok, c->tokens, (c->token_count < 4 ? c->token_count : 4) * sizeof(int32_t));
	return 0;
}

/* One record of request @req (three tokens) submitted on @r and delivered by one poll, exact. */
static void round_trip(struct sc_ring *r, uint64_t req)
{
	int32_t t[3] = { (int32_t)req, (int32_t)req + 1, (int32_t)req + 2 };
	struct sc_commit c = { .request_id = req, .generated_token_count = 3, .token_count = 3, .tokens = t };
	ck_assert_int_eq(sc_ring_try_submit(r, &c), 0);
	struct one_commit got = { 0 };
	ck_assert_int_eq(sc_ring_poll(arena, one_cb, &got, 16), 1);
	ck_assert_int_eq(got.n, 1);
	ck_assert_uint_eq(got.ring, sc_ring_index(r));
	ck_assert_uint_eq(got.req, req);
	ck_assert_uint_eq(got.ntok, 3);
	ck_assert_int_eq(memcmp(got.tok, t, sizeof(t)), 0);
}

/* The largest directory an arena may have (SHM_RING_COUNT_MAX rings of the smallest size) is
 * valid: a ring opens in it, and its last ring delivers; one ring more is refused at creation. */
START_TEST(the_most_rings_an_arena_may_have_work)
{
	struct sc_arena_opts o = { .size_bytes = 48u << 20, .huge = SC_HUGE_OFF, .ring_count = SHM_RING_COUNT_MAX,
				   .ring_bytes = SHM_RING_BYTES_MIN };
	arena = sc_test_arena_opts("ringmax", &o, &arena_name);
	uint64_t size;
	struct shm_ring_dir *d = shm_region(arena->shm, SHM_REGION_RINGS, &size);
	ck_assert_uint_eq(d->ring_count, SHM_RING_COUNT_MAX);
	/* every ring but the last owned by a live producer (this handle): the claim takes the last */
	for (uint32_t i = 0; i + 1 < SHM_RING_COUNT_MAX; i++) {
		struct shm_ring_ctl *c = (struct shm_ring_ctl *)((uint8_t *)d + SHM_RING_DIR_BYTES + (uint64_t)i * SHM_RING_CTL_BYTES);
		atomic_store(&c->owner, shm_ring_owner(1, SHM_RING_LIVE, arena->shm->token));
	}
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	ck_assert_uint_eq(sc_ring_index(r), SHM_RING_COUNT_MAX - 1);
	round_trip(r, 5);
	sc_ring_close(r);
	rm_arena();
	o.ring_count = SHM_RING_COUNT_MAX + 1;
	refused_at_creation(&o, "ringmax1");
}
END_TEST

/* A FREE ring with bytes between its head and its tail (nothing frees one that way: a scribble)
 * is never handed to a producer, whether those bytes are one record or the whole ring; once its
 * indices agree again it is. */
START_TEST(a_free_ring_with_bytes_in_it_is_not_handed_out)
{
	mk_arena(2, 4096);
	const uint64_t ahead[] = { 64, 4096 };
	for (int i = 0; i < 2; i++) {
		atomic_store(&ctl_of(0)->tail, ahead[i]);
		struct sc_ring *r, *r2;
		ck_assert_int_eq(sc_ring_open(arena, &r), 0);
		ck_assert_uint_eq(sc_ring_index(r), 1);
		ck_assert_int_eq(sc_ring_open(arena, &r2), -ENOSPC);
		ck_assert_int_eq(sc_ring_close(r), 0);
		struct sc_ring_stat st[2];
		ck_assert_int_eq(sc_ring_stats(arena, st, 2), 2);
		ck_assert_int_eq(st[0].state, SC_RING_FREE);
		atomic_store(&ctl_of(0)->tail, 0);
		ck_assert_int_eq(sc_ring_open(arena, &r), 0);
		ck_assert_uint_eq(sc_ring_index(r), 0);
		ck_assert_int_eq(sc_ring_close(r), 0);
		atomic_store(&ctl_of(0)->owner, 0); /* FREE again for the next round */
	}
	/* empty but misaligned (head == tail, not on a record boundary): a corrupted index, never
	 * handed out either */
	atomic_store(&ctl_of(0)->tail, 24);
	atomic_store(&ctl_of(0)->head, 24);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	ck_assert_uint_eq(sc_ring_index(r), 1);
	struct sc_ring_stat st0;
	ck_assert_int_eq(sc_ring_stats(arena, &st0, 1), 2); /* the ring count */
	ck_assert_int_eq(st0.corrupt, 1); /* and reported so */
	ck_assert_int_eq(sc_ring_close(r), 0);
	rm_arena();
}
END_TEST

/* Liveness of the producers of empty LIVE rings is tested at most once per reap interval
 * (SHM_RING_REAP_INTERVAL_NS, ring.h): a drained ring whose producer is found dead in the poll
 * after one that tested is freed only at the first poll of the next interval. Each round needs
 * its two polls within one interval; a round the machine slowed past it does not count. */
START_TEST(dead_producers_are_looked_for_once_per_reap_interval)
{
	mk_arena(2, 4096);
	struct sc_ring *mine;
	ck_assert_int_eq(sc_ring_open(arena, &mine), 0); /* ring 0: LIVE, empty, ours */
	struct verify v = { 0 };
	struct sc_ring_stat st[2];
	int rounds = 0;
	for (int attempt = 0; attempt < 20 && rounds < 2; attempt++) {
		/* the poll that tests sets the next test to between ta and tb plus the interval */
		uint64_t ta = shm_now_ns();
		ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 16), 0); /* due: an interval since the last test */
		uint64_t tb = shm_now_ns();
		/* ring 1: LIVE and empty, its producer's token names no reader slot (dead) */
		atomic_store(&ctl_of(1)->owner, shm_ring_owner(7, SHM_RING_LIVE, shm_token(60000, 1)));
		ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 16), 0);
		ck_assert_int_eq(sc_ring_stats(arena, st, 2), 2);
		if (shm_now_ns() - ta < SHM_RING_REAP_INTERVAL_NS) {
			ck_assert_int_eq(st[1].state, SC_RING_LIVE); /* not looked at again yet */
			rounds++;
		}
		/* the next interval: waits for SHM_RING_REAP_INTERVAL_NS to pass since the testing poll */
		while (shm_now_ns() - tb < SHM_RING_REAP_INTERVAL_NS)
			nap_ms(5);
		ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 16), 0);
		ck_assert_int_eq(sc_ring_stats(arena, st, 2), 2);
		ck_assert_int_eq(st[1].state, SC_RING_FREE);
		ck_assert_int_eq(st[0].state, SC_RING_LIVE);
	}
	ck_assert_msg(rounds == 2, "only %d of 20 rounds had their two polls within one reap interval", rounds);
	ck_assert_int_eq(sc_ring_close(mine), 0);
	rm_arena();
}
END_TEST

/* A CLAIMING owner word (no claim of this version writes one: an older claimer's, or a scribble)
 * keeps its ring while the token it names is alive, like LIVE, and a consumer's poll frees neither
 * it nor a ring whose state is garbage; once the CLAIMING holder is gone the ring is reclaimed like
 * a dead LIVE one. */
START_TEST(a_claiming_ring_of_a_live_holder_is_not_handed_out)
{
	mk_arena(2, 4096);
	struct sc_arena *other;
	ck_assert_int_eq(sc_arena_open(arena_name, &other), 0);
	uint64_t claiming = shm_ring_owner(5, SHM_RING_CLAIMING, other->shm->token);
	atomic_store(&ctl_of(0)->owner, claiming);
	struct sc_ring *r, *r2;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	ck_assert_uint_eq(sc_ring_index(r), 1);
	ck_assert_int_eq(sc_ring_open(arena, &r2), -ENOSPC);
	/* nor does a consumer free it (it frees only CLOSED rings and LIVE ones of dead producers), nor
	 * a ring whose state is garbage */
	struct verify v = { 0 };
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 16), 0);
	uint64_t w0 = atomic_load(&ctl_of(0)->owner);
	ck_assert_uint_eq(w0, claiming);
	ck_assert_int_eq(sc_ring_close(r), 0);
	uint64_t garbage = shm_ring_owner(5, SHM_RING_CLOSED + 1, 0);
	atomic_store(&ctl_of(1)->owner, garbage);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 16), 0);
	uint64_t w1 = atomic_load(&ctl_of(1)->owner);
	ck_assert_uint_eq(w1, garbage);
	atomic_store(&ctl_of(1)->owner, 0);
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	ck_assert_uint_eq(sc_ring_index(r), 1);
	sc_arena_close(other); /* its slot is released: the token is dead */
	ck_assert_int_eq(sc_ring_open(arena, &r2), 0);
	ck_assert_uint_eq(sc_ring_index(r2), 0);
	ck_assert_uint_eq(shm_ring_owner_gen(atomic_load(&ctl_of(0)->owner)), 6);
	ck_assert_int_eq(sc_ring_close(r2), 0);
	ck_assert_int_eq(sc_ring_close(r), 0);
	rm_arena();
}
END_TEST

struct seqs {
	uint64_t seq[256];
	int32_t first_tok[256];
	unsigned n;
};

static int seqs_cb(const struct sc_commit *c, void *ctx)
{
	struct seqs *q = ctx;
	if (q->n < 256) {
		q->seq[q->n] = c->seq;
		q->first_tok[q->n] = c->token_count ? c->tokens[0] : -1;
	}
	q->n++;
	return 0;
}

static int submit4(struct sc_ring *r, int32_t k)
{
	int32_t t[4] = { k, k + 1, k + 2, k + 3 }; /* 48 + 16 bytes: one 64-byte record */
	struct sc_commit c = { .request_id = 1, .generated_token_count = 4, .token_count = 4, .tokens = t };
	return sc_ring_try_submit(r, &c);
}

/* A producer that needs the consumer's head refuses one off a record boundary, even within the
 * ring's reach (a record written from there would overwrite undelivered bytes). */
START_TEST(a_producer_refuses_a_head_off_a_record_boundary)
{
	mk_arena(1, 4096);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	int n = 0, rc;
	while ((rc = submit4(r, n)) == 0)
		n++;
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_int_eq(n, 64); /* full: tail 4096, head 0 */
	atomic_store(&ctl_of(0)->head, 4096 - 64 + 8);
	ck_assert_int_eq(submit4(r, 1000), -EBADMSG);
	atomic_store(&ctl_of(0)->head, 4096 - 64);
	ck_assert_int_eq(submit4(r, 1000), 0);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

/* A ring holds exactly its size: 64 records of 64 bytes fill 4 KiB, the 65th waits for room; once
 * one is consumed, one more fits exactly (the producer's cached head refreshed: the ring full to
 * its last byte again), and the next waits. Everything is delivered once, in order. */
START_TEST(a_ring_fills_to_its_last_byte)
{
	mk_arena(1, 4096);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	for (int32_t k = 0; k < 64; k++)
		ck_assert_int_eq(submit4(r, k), 0);
	ck_assert_int_eq(submit4(r, 64), -EAGAIN);
	struct seqs q = { .n = 0 };
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 1), 1);
	ck_assert_int_eq(submit4(r, 64), 0);
	ck_assert_int_eq(submit4(r, 65), -EAGAIN);
	while (sc_ring_poll(arena, seqs_cb, &q, 256) > 0)
		;
	ck_assert_uint_eq(q.n, 65);
	for (unsigned i = 0; i < 65; i++) {
		ck_assert_uint_eq(q.seq[i], i + 1);
		ck_assert_int_eq(q.first_tok[i], (int32_t)i);
	}
	sc_ring_close(r);
	rm_arena();
}
END_TEST

/* An arena of one 4 KiB ring, that ring opened into @r with one record (tokens @k..@k+3) in it;
 * returns the ring directory. */
static struct shm_ring_dir *one_ring_one_record(struct sc_ring **r, int32_t k)
{
	mk_arena(1, 4096);
	uint64_t size;
	struct shm_ring_dir *d = shm_region(arena->shm, SHM_REGION_RINGS, &size);
	ck_assert_int_eq(sc_ring_open(arena, r), 0);
	ck_assert_int_eq(submit4(*r, k), 0);
	return d;
}

/* In a forked child: start a poll at the shm level (with @d, the real directory, already in the
 * out-parameter), poll through the parent's handle, close the parent's ring @r through the child's
 * copy, then close the child's copy of the arena handle; the child's exit status (0 when each of
 * them said -ECHILD and nothing was delivered). */
static int child_is_refused(struct shm_ring_dir *d, struct sc_ring *r)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct shm_ring_cons none = { 0 }, *c = arena->ring_cons ? arena->ring_cons : &none;
		struct shm_ring_dir *out = d;
		int rc0 = shm_ring_poll_begin(arena->shm, c, &out);
		struct seqs q = { .n = 0 };
		int rc = sc_ring_poll(arena, seqs_cb, &q, 16);
		int rc2 = sc_ring_close(r);
		sc_arena_close(arena); /* gives back nothing of the parent's */
		_exit(rc0 == -ECHILD && rc == -ECHILD && rc2 == -ECHILD && q.n == 0 ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

/* A forked child's copy of the handle is unusable: its poll says -ECHILD and delivers nothing,
 * before the parent held the consumer role and while it holds it; its close of the parent's ring
 * says -ECHILD, and closing its copy of the arena leaves the parent's role to the parent; the
 * parent goes on submitting and delivering. */
START_TEST(a_forked_child_cannot_poll_with_the_parents_handle)
{
	struct sc_ring *r;
	struct shm_ring_dir *d = one_ring_one_record(&r, 1);
	ck_assert_int_eq(child_is_refused(d, r), 0);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), 0);
	struct seqs q = { .n = 0 };
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), 1);
	ck_assert_int_eq(submit4(r, 2), 0);
	ck_assert_int_eq(child_is_refused(d, r), 0);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), arena->shm->token);
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), 1);
	ck_assert_int_eq(q.first_tok[0], 1);
	ck_assert_int_eq(q.first_tok[1], 2);
	struct sc_ring_stat st;
	ck_assert_int_eq(sc_ring_stats(arena, &st, 1), 1);
	ck_assert_int_eq(st.state, SC_RING_LIVE); /* still the parent's */
	ck_assert_int_eq(submit4(r, 3), 0);
	ck_assert_int_eq(sc_ring_close(r), 0);
	rm_arena();
}
END_TEST

/* A consumer id no live handle can hold (the largest 32-bit token) is taken over; one wider than
 * a token is a damaged directory. */
START_TEST(a_garbage_consumer_id_is_taken_over)
{
	struct sc_ring *r;
	struct shm_ring_dir *d = one_ring_one_record(&r, 9);
	atomic_store(&d->consumer_id, (uint64_t)UINT32_MAX + 1);
	struct seqs q = { .n = 0 };
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), -EBADMSG);
	ck_assert_uint_eq(q.n, 0);
	atomic_store(&d->consumer_id, UINT32_MAX);
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), 1);
	ck_assert_int_eq(q.first_tok[0], 9);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), arena->shm->token);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

/* A consumer whose role another live handle now holds (the directory names that handle) delivers
 * nothing and says -EBUSY; named again, it goes on where it stopped. */
START_TEST(a_consumer_whose_role_was_taken_stops)
{
	struct sc_ring *r;
	struct shm_ring_dir *d = one_ring_one_record(&r, 1);
	struct seqs q = { .n = 0 };
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), 1); /* we hold the role */
	ck_assert_int_eq(submit4(r, 2), 0);
	struct sc_arena *other;
	ck_assert_int_eq(sc_arena_open(arena_name, &other), 0); /* alive: its slot is held */
	atomic_store(&d->consumer_id, other->shm->token);
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), -EBUSY);
	ck_assert_uint_eq(q.n, 1);
	atomic_store(&d->consumer_id, arena->shm->token);
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), 1);
	ck_assert_uint_eq(q.n, 2);
	ck_assert_int_eq(q.first_tok[1], 2);
	/* lost again, then named again without a poll: a handle gives back only a role it knows it
	 * holds, so its close leaves the directory as it is */
	atomic_store(&d->consumer_id, other->shm->token);
	ck_assert_int_eq(sc_ring_poll(arena, seqs_cb, &q, 16), -EBUSY);
	atomic_store(&d->consumer_id, arena->shm->token);
	sc_ring_consumer_close(arena);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), arena->shm->token);
	sc_arena_close(other);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

/* The largest ring (SHM_RING_BYTES_MAX, 1 GiB: creation allocates the arena's whole file, so for a
 * moment ~1 GiB of /dev/shm) opens and delivers; twice that is refused at creation. */
START_TEST(the_largest_ring_an_arena_may_have_works)
{
	struct sc_arena_opts o = { .size_bytes = (uint64_t)SHM_RING_BYTES_MAX + (64u << 20), .huge = SC_HUGE_OFF,
				   .ring_count = 1, .ring_bytes = SHM_RING_BYTES_MAX };
	arena_name = sc_test_name("ringbig");
	int rc = sc_arena_create(arena_name, &o, &arena);
	if (rc == -ENOMEM || rc == -ENOSPC) {
		printf("SKIP: the_largest_ring_an_arena_may_have_works: no room for a 1 GiB arena in /dev/shm (%s)\n",
		       sc_strerror(rc));
		return;
	}
	ck_assert_int_eq(rc, 0);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	round_trip(r, 6);
	sc_ring_close(r);
	rm_arena();
	o.ring_bytes = SHM_RING_BYTES_MAX * 2u;
	o.size_bytes += SHM_RING_BYTES_MAX;
	refused_at_creation(&o, "ringbig1");
}
END_TEST

/* The shm layer's per-ring calls take an index from their caller: the last ring is a ring, one past
 * it is -EINVAL (never a read of the bytes after the control table). */
START_TEST(ring_indices_past_the_table_are_refused)
{
	mk_arena(2, 4096);
	struct shm_ring_cons cons = { 0 };
	struct shm_ring_dir *d;
	ck_assert_int_eq(shm_ring_poll_begin(arena->shm, &cons, &d), 0);
	struct shm_ring_cursor cur;
	ck_assert_int_eq(shm_ring_cursor_open(d, 1, &cons, &cur), 0); /* empty */
	ck_assert_int_eq(shm_ring_cursor_open(d, 2, &cons, &cur), -EINVAL);
	ck_assert_int_eq(shm_ring_cursor_open(d, UINT32_MAX, &cons, &cur), -EINVAL);
	struct shm_ring_stat st;
	ck_assert_int_eq(shm_ring_stat(arena->shm, 1, &st), 0);
	ck_assert_int_eq(st.corrupt, 0);
	ck_assert_int_eq(shm_ring_stat(arena->shm, 2, &st), -EINVAL);
	shm_ring_consumer_release(arena->shm, &cons);
	rm_arena();
}
END_TEST

/* A head past the tail is corruption however little past (a consumer's head never passes the tail
 * it acquired; the snapshot reads tail again after head, so the race of a drain between its two
 * reads is not mistaken for it): reported corrupt, not empty, so fsck resets the ring. */
START_TEST(a_snapshot_reports_a_head_past_the_tail)
{
	mk_arena(1, 4096);
	struct sc_ring_stat st;
	const uint64_t past[] = { 64, 4096, 4096 + 64 };
	atomic_store(&ctl_of(0)->tail, 8192);
	for (int i = 0; i < 3; i++) {
		atomic_store(&ctl_of(0)->head, 8192 + past[i]);
		ck_assert_int_eq(sc_ring_stats(arena, &st, 1), 1);
		ck_assert_int_eq(st.corrupt, 1);
	}
	atomic_store(&ctl_of(0)->head, 8192);
	ck_assert_int_eq(sc_ring_stats(arena, &st, 1), 1);
	ck_assert_int_eq(st.corrupt, 0);
	ck_assert_uint_eq(st.depth_bytes, 0);
	rm_arena();
}
END_TEST

START_TEST(a_corrupted_directory_is_ebadmsg)
{
	mk_arena(2, 4096);
	uint64_t size;
	struct shm_ring_dir *d = shm_region(arena->shm, SHM_REGION_RINGS, &size);
	struct sc_ring *r;
	struct sc_ring_stat st[2];
	struct verify v = { 0 };
	uint32_t saved = d->ring_count;
	d->ring_count = 100000;
	ck_assert_int_eq(sc_ring_open(arena, &r), -EBADMSG);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 1), -EBADMSG);
	ck_assert_int_eq(sc_ring_stats(arena, st, 2), -EBADMSG);
	/* the shm-level entry points check it themselves (fsck calls them directly) */
	struct shm_ring_stat one;
	ck_assert_int_eq(shm_ring_stat(arena->shm, 0, &one), -EBADMSG);
	struct shm_ring_cons cons = { 0 };
	ck_assert_int_eq(shm_ring_consumer_acquire(arena->shm, &cons), -EBADMSG);
	ck_assert_int_eq(cons.held, 0);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), 0);
	d->ring_count = saved;
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 1), 0); /* takes the consumer role */
	d->ring_bytes = 4095;
	ck_assert_int_eq(sc_ring_open(arena, &r), -EBADMSG);
	ck_assert_int_eq(sc_ring_poll(arena, verify_cb, &v, 1), -EBADMSG); /* held: still checked */
	d->ring_bytes = 4096;
	d->magic ^= 1;
	ck_assert_int_eq(sc_ring_open(arena, &r), -EBADMSG);
	d->magic ^= 1;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	sc_ring_close(r);
	rm_arena();
}
END_TEST

Suite *ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("ring");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, records_round_trip_in_order);
	tcase_add_test(tc, variable_records_wrap_around_the_ring);
	tcase_add_test(tc, bulk_submits_are_all_or_nothing);
	tcase_add_test(tc, callback_can_stop_the_poll);
	tcase_add_test(tc, rings_run_out_and_are_reclaimed_after_delivery);
	tcase_add_test(tc, stats_describe_each_ring);
	tcase_add_test(tc, a_second_consumer_gets_ebusy_until_the_first_leaves_or_dies);
	tcase_add_test(tc, many_producer_processes_one_verifying_consumer);
	tcase_add_test(tc, a_killed_producer_loses_nothing_it_committed);
	tcase_add_test(tc, a_producer_killed_on_a_full_ring_with_no_consumer_loses_nothing);
	tcase_add_test(tc, a_producer_dying_between_write_and_publish_loses_only_the_unpublished_record);
	tcase_add_test(tc, a_full_ring_applies_backpressure_without_loss);
	tcase_add_test(tc, corrupted_indices_are_ebadmsg_and_other_rings_still_flow);
	tcase_add_test(tc, hostile_records_are_ebadmsg_never_out_of_bounds);
	tcase_add_test(tc, a_corrupted_directory_is_ebadmsg);
	tcase_add_test(tc, the_most_rings_an_arena_may_have_work);
	tcase_add_test(tc, the_largest_ring_an_arena_may_have_works);
	tcase_add_test(tc, a_ring_fills_to_its_last_byte);
	tcase_add_test(tc, a_producer_refuses_a_head_off_a_record_boundary);
	tcase_add_test(tc, a_free_ring_with_bytes_in_it_is_not_handed_out);
	tcase_add_test(tc, a_claiming_ring_of_a_live_holder_is_not_handed_out);
	tcase_add_test(tc, dead_producers_are_looked_for_once_per_reap_interval);
	tcase_add_test(tc, a_forked_child_cannot_poll_with_the_parents_handle);
	tcase_add_test(tc, a_garbage_consumer_id_is_taken_over);
	tcase_add_test(tc, a_consumer_whose_role_was_taken_stops);
	tcase_add_test(tc, ring_indices_past_the_table_are_refused);
	tcase_add_test(tc, a_snapshot_reports_a_head_past_the_tail);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(ring_suite)
